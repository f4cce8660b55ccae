"""The MuJoCo scene: the robot as MuJoCo's own URDF import reads it, plus what the stack needs.

The robot comes from ``mujoco.MjSpec.from_string`` on the URDF (made ready by
:mod:`~ct_controllers.hardware.mujoco_urdf`: meshes found the ROS way), or from an MJCF file the
user already has (``mujoco.scene``), matched to the URDF by joint name
(:mod:`~ct_controllers.hardware.mujoco_mjcf`). MuJoCo's import fuses fixed and massless links
into their parents (``fusestatic``), reads continuous joints as hinges without range,
``<mimic>`` as a joint equality constraint and ``<dynamics damping friction>`` as joint damping
and frictionloss. Added to its spec here:

- inertia from ``<inertial>`` only (``inertiafromgeom = false``): the collision geoms are
  massless, so the simulated arm has Pinocchio's masses; the root link stays a body of its own
  name (MuJoCo would fuse a static root into the world), found by the base frame's name;
- armature [kg·m² | kg] from ``<dynamics armature>`` (ct_controllers' extension; MuJoCo's import
  ignores it);
- the TCP: a site named after the configured TCP frame, at that frame. A frame on a fixed joint
  that fusing removes still gets its site, at its pose, on the body it was fused into;
- actuators, one per actuated joint (the ``<ros2_control>`` joints; a mimic follower gets none:
  it follows its master through the equality constraint), each named after its joint: a
  ``motor`` (effort interface; ctrl and force range = ± the URDF effort limit) or a ``position``
  servo (position interface; ctrl range = the joint range, none for a continuous joint; force
  range = ± the URDF effort limit);
- contact exclusions for the pairs of robot bodies in contact at rest (every joint at 0 or its
  nearest limit; MoveIt's "in collision by default"): overlapping meshes of one build;
- options: the physics timestep, the ``implicitfast`` integrator (the servos' kv is integrated
  implicitly), and, for grasping, an elliptic friction cone with impratio 100 (URDF scenes only;
  an MJCF keeps its own contact options);
- around the robot: a floor, a table whose top is the base plane z = 0 (higher where the arm
  cannot reach down to it: a mobile base's root link on the floor), and a cube on it, sized
  and placed from the robot's reach and its gripper's opening (``hardware/grasp_scene.py``),
  whose contacts with the robot are soft-finger contacts 4 timesteps stiff (see
  ``CUBE_CONDIM``).

Deliberate differences from the Pinocchio model: none in kinematics or rigid-body dynamics;
MuJoCo adds joint damping and friction (the URDF's, zero on the bundled arm), joint-range
constraints, the mimic constraints and contacts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from ct_controllers.hardware.grasp_scene import GraspScene
from ct_controllers.hardware.interface import EFFORT, POSITION
from ct_controllers.hardware.mujoco_mjcf import load_matching_mjcf
from ct_controllers.hardware.mujoco_urdf import PreparedUrdf, prepare_urdf
from ct_controllers.model.description import DescriptionError, joint_armature
from ct_controllers.model.payload import Payload
from ct_controllers.types import FloatArray

CUBE_BODY = "cube"
# Friction's impedance over the normal's (MuJoCo's impratio, elliptic cones): 100, as MuJoCo
# Menagerie's quadrupeds. At 10 a light cube pressed by a jaw crept on the table and in the grip
# at 2-3 mm/s (the SO-101's 34 g, the Z1's 12.5 g cube): the stall a grasp judged by the joints
# alone needs (< 2 mm/s) never came, 0/20 on both.
IMPEDANCE_RATIO = 100.0
FLOOR_GEOM = "floor"
TABLE_GEOM = "table"
# The scene without a robot-derived one (objects=None): the bundled arm's, as it was before the
# scene was derived from the robot (hardware/grasp_scene.py derives the same for that arm).
CUBE_HALF_SIZE = 0.025  # [m]
CUBE_MASS = 0.1  # [kg]
TABLE_HALF_SIZE = (0.35, 0.5, 0.02)  # [m]
TABLE_CENTER = (0.6, 0.0, -0.02)  # [m], top surface at z = 0
FLOOR_HEIGHT = -0.75  # [m]
TCP_SITE_SIZE = 0.005  # [m] (drawn only)


@dataclass(frozen=True)
class ServoGains:
    """Position-servo gains for joints on the position interface: kp [N·m/rad], kv
    [N·m·s/rad] for revolute joints; prismatic_kp [N/m], prismatic_kv [N·s/m] for prismatic
    ones (the fingers). A finger's servo is stiff, as a gripper drive's position loop is: closed
    on an object with its target inside the object's width, it pushes with its force limit
    (the grip force, set at run time through the actuator's force range) rather than with
    kp × the few centimetres it can press in (400 N/m × 2.5 cm = 10 N, short of a 20 N grip)."""

    kp: float = 400.0
    kv: float = 40.0
    prismatic_kp: float = 4000.0
    prismatic_kv: float = 40.0


def build_scene(
    urdf: str,
    timestep: float = 0.001,
    command_interfaces: Mapping[str, str] | None = None,
    servo_gains: ServoGains = ServoGains(),
    tcp_frame: str | None = None,
    with_objects: bool = True,
    mass_scale: float = 1.0,
    actuated_joints: Sequence[str] | None = None,
    urdf_directory: str | Path | None = None,
    scene: str | Path | None = None,
    kept_links: Sequence[str] = (),
    objects: GraspScene | None = None,
    locked_joints: Mapping[str, float] | None = None,
) -> mujoco.MjSpec:
    """Build the scene spec (compile it with :func:`compile_scene`).

    ``command_interfaces`` maps an actuated joint to "effort" (default) or "position";
    ``actuated_joints`` are the joints that get an actuator (default: every movable joint that
    mimics none); ``tcp_frame`` a URDF link that gets a site of its name (None: no TCP site);
    ``mass_scale`` multiplies every link mass, rotational inertia about the link COM unchanged
    (plant model error for experiments; 1 = the URDF; URDF scenes only); ``urdf_directory`` the
    URDF file's folder (where its meshes are also looked for); ``scene`` an MJCF file to take
    the robot from instead of the URDF (see the module docstring); ``kept_links`` URDF links
    hung on fixed joints that stay bodies of their own name rather than being fused into their
    parent (a fixed jaw: the object sensor counts its contacts; URDF scenes only). A link not
    hung on a fixed joint is a body anyway. ``objects``: the table and cube derived from the
    robot (:func:`~ct_controllers.hardware.grasp_scene.grasp_scene`; None: the constants
    above). ``locked_joints``: the description's locked joints (name → [rad | m]), fixed in
    ``urdf`` already, welded in an MJCF ``scene`` there. DescriptionError names what is wrong
    and nothing is built."""
    if not (np.isfinite(mass_scale) and mass_scale > 0):
        raise ValueError(f"mass_scale must be finite and positive, got {mass_scale}")
    prepared = prepare_urdf(urdf, urdf_directory, meshes=scene is None)
    actuated = _actuated(prepared, actuated_joints, command_interfaces or {})
    if scene is None:
        spec = _robot_from_urdf(prepared, urdf, mass_scale)
        _keep_unfused(spec, prepared, kept_links)
        _exclude_contacts_at_rest(spec, (prepared.xml, tuple(kept_links)))
    else:
        if mass_scale != 1.0:
            raise ValueError("mass_scale applies to scenes built from the URDF, not to an MJCF")
        spec = load_matching_mjcf(Path(scene), prepared, locked_joints)
    spec.option.timestep = timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    if scene is None:
        _stiffen_mimic_couplings(spec, timestep)
        _free_followers_of_their_ranges(spec, prepared)
    if tcp_frame is not None:
        _add_tcp_site(spec, prepared, tcp_frame)
    _add_actuators(spec, prepared, actuated, command_interfaces or {}, servo_gains)
    if with_objects:
        _add_objects(spec, objects, timestep)
    return spec


def compile_scene(spec: mujoco.MjSpec) -> mujoco.MjModel:
    """``spec.compile()``, MuJoCo's compiler errors (a massless moving link, a degenerate
    mesh, ...) as DescriptionError."""
    try:
        return spec.compile()
    except ValueError as exc:
        message = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        if "mass and inertia of moving bodies" in message:
            message += " (give that link an <inertial> with positive mass and inertia)"
        raise DescriptionError(f"MuJoCo cannot compile the scene: {message}") from exc


def _robot_from_urdf(prepared: PreparedUrdf, urdf: str, mass_scale: float) -> mujoco.MjSpec:
    try:
        spec = mujoco.MjSpec.from_string(prepared.xml)
    except ValueError as exc:
        raise DescriptionError(f"MuJoCo's URDF import failed: {exc}".strip()) from exc
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    if prepared.root_link != "world":  # a root link named "world" is the world body
        # A body referenced by an exclude is never fused: the root keeps its name. Both are
        # static, so MuJoCo filters their contacts anyway.
        spec.add_exclude(bodyname1="world", bodyname2=prepared.root_link)
    # MuJoCo filters a body's contacts with its parent's, except where the parent is welded to
    # the world (filterparent's exception): the root and the links moving on it, whose meshes
    # often touch at the joint (the Kinova's base and shoulder do; the UR3's, under a root link
    # named "world" that its base is fused into, too), would grip each other and hold the first
    # joint still. Their pairs are excluded.
    for joint in prepared.joints.values():
        if _static_link(prepared, joint.parent) == prepared.root_link:
            spec.add_exclude(bodyname1=prepared.root_link, bodyname2=joint.child)
    for name, value in joint_armature(urdf).items():
        joint = spec.joint(name)
        if joint is not None:
            joint.armature = value
    if mass_scale != 1.0:
        for body in spec.bodies:
            if body.name != "world":
                body.mass *= mass_scale
    # Grasping: MuJoCo's soft friction lets a held object creep (measured here: a 0.1 kg cube
    # slid 2 mm/s out of a 2 × 20 N grasp with the default pyramidal cone). An elliptic cone
    # with a high impedance ratio makes static friction hold (see IMPEDANCE_RATIO).
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = IMPEDANCE_RATIO
    return spec


def at_rest(model: mujoco.MjModel) -> mujoco.MjData:
    """Data of ``model`` at rest — every joint at 0, or at its limit nearest 0 — forwarded."""
    data = mujoco.MjData(model)
    for joint in range(model.njnt):
        if model.jnt_limited[joint]:
            lower, upper = model.jnt_range[joint]
            data.qpos[model.jnt_qposadr[joint]] = min(max(0.0, lower), upper)
    mujoco.mj_forward(model, data)
    return data


# (URDF text as MuJoCo reads it, links kept unfused) → the body pairs in contact at rest: the
# same robot's scene is built for every stack, rig and trial; its pairs are found once.
_CONTACTS_AT_REST: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, str], ...]] = {}


def _exclude_contacts_at_rest(spec: mujoco.MjSpec, robot: tuple[str, tuple[str, ...]]) -> None:
    """Exclude the pairs of robot bodies whose shapes are in contact at rest — every joint at 0,
    or at the limit nearest 0 — as MoveIt's setup assistant disables the pairs "in collision by
    default": the robot's own build, not a pose (Baxter's shoulder and elbow meshes overlap by
    5 cm in every configuration; simulated, their contact flung the arm at 3.9 rad/s). The
    stack's clearance checks allow the same pairs (``mujoco_collision.SceneClearance``: contacts
    at its reference). The world body's pairs are kept: its shapes are the floor and table too.
    ``robot``: what the pairs depend on (the URDF MuJoCo reads, the links kept unfused)."""
    if robot not in _CONTACTS_AT_REST:
        model = compile_scene(spec)
        data = at_rest(model)
        pairs = {
            tuple(sorted((int(model.geom_bodyid[c.geom1]), int(model.geom_bodyid[c.geom2]))))
            for c in data.contact[: data.ncon]
        }
        _CONTACTS_AT_REST[robot] = tuple(
            (model.body(first).name, model.body(second).name)
            for first, second in sorted(pairs)
            if first != 0
        )
    for first_name, second_name in _CONTACTS_AT_REST[robot]:
        spec.add_exclude(bodyname1=first_name, bodyname2=second_name)


def _static_link(prepared: PreparedUrdf, link: str) -> str:
    """The link ``link`` is fused into: itself, or up its chain of fixed joints."""
    while link in prepared.fixed_parents:
        link = prepared.fixed_parents[link][0]
    return link


# A ``<mimic>`` coupling's softness: time constant [s] in control timesteps, and impedance
# (d0, d_width, width [m], midpoint, power). MuJoCo's defaults (0.02 s; 0.9, 0.95) are mass-
# normalised: on light fingers they make a spring of a few hundred N/m, and under a 20 N grip the
# Panda's follower finger was pushed 26 mm open while its master closed 8 mm (the cube shoved
# 13 mm off the TCP). A mimic is a rigid linkage (the Panda's one motor drives both fingers):
# the stiffest stable setting, MuJoCo Menagerie's for its Panda (2 timesteps, 0.95 → 0.99).
MIMIC_TIME_CONSTANT_STEPS = 2.0
MIMIC_IMPEDANCE = (0.95, 0.99, 0.001, 0.5, 2.0)


def _keep_unfused(spec: mujoco.MjSpec, prepared: PreparedUrdf, links: Sequence[str]) -> None:
    """Each of ``links`` hung on a fixed joint stays a body of its own (MuJoCo never fuses a
    body an exclude names: the pair is the link and its parent, rigidly joined, whose contacts
    MuJoCo filters anyway; the parent stays a body too)."""
    for link in links:
        if link in prepared.fixed_parents and spec.body(link) is not None:
            parent = prepared.fixed_parents[link][0]
            spec.add_exclude(bodyname1=parent, bodyname2=link)


def _free_followers_of_their_ranges(spec: mujoco.MjSpec, prepared: PreparedUrdf) -> None:
    """A mimic follower's range is its master's, mapped: its own ``<limit>`` is not simulated.
    Where a URDF's disagrees (the PR2's fingertips: multiplier −1 on a range [0, 0.548] rad),
    the limit and the equality fought, and the gripper flew off at 2.8 rad/s from its first
    step; Pinocchio's mimic model has no range for a follower either."""
    for follower in prepared.mimic:
        spec.joint(follower).limited = mujoco.mjtLimited.mjLIMITED_FALSE


def _stiffen_mimic_couplings(spec: mujoco.MjSpec, timestep: float) -> None:
    """The joint equalities MuJoCo's URDF import made of ``<mimic>`` elements, made as stiff
    as a rigid linkage (:data:`MIMIC_IMPEDANCE`): the follower stays within a fraction of a
    millimetre of multiplier · master + offset under the grip force."""
    for equality in spec.equalities:
        if equality.type == mujoco.mjtEq.mjEQ_JOINT:
            equality.solref = [MIMIC_TIME_CONSTANT_STEPS * timestep, 1.0]
            equality.solimp = list(MIMIC_IMPEDANCE)


def _actuated(
    prepared: PreparedUrdf, requested: Sequence[str] | None, interfaces: Mapping[str, str]
) -> tuple[str, ...]:
    """The joints that get an actuator, checked: movable, not a mimic follower, an effort
    limit, a known interface."""
    names = (
        tuple(n for n in prepared.joints if n not in prepared.mimic)
        if requested is None
        else tuple(requested)
    )
    unknown = sorted(set(names) - set(prepared.joints))
    if unknown:
        raise DescriptionError(
            f"actuated joint(s) not movable joints of the URDF: {', '.join(unknown)}"
        )
    followers = [n for n in names if n in prepared.mimic]
    if followers:
        raise DescriptionError(
            "; ".join(
                f"joint '{n}' mimics '{prepared.mimic[n].master}': it follows its master and "
                f"gets no actuator (command '{prepared.mimic[n].master}')"
                for n in followers
            )
        )
    stray = sorted(set(interfaces) - set(names))
    if stray:
        raise DescriptionError(f"command interface given for unknown joint(s): {', '.join(stray)}")
    for name in names:
        interface = interfaces.get(name, EFFORT)
        if interface not in (EFFORT, POSITION):
            raise DescriptionError(f"joint '{name}': unknown command interface '{interface}'")
        if not prepared.joints[name].effort > 0:
            raise DescriptionError(f"joint '{name}' has no positive effort limit in the URDF")
    return names


def _add_tcp_site(spec: mujoco.MjSpec, prepared: PreparedUrdf, frame: str) -> None:
    """A site named ``frame`` at the URDF frame ``frame``: on its body when the spec has one
    (MuJoCo moves it with the body when it fuses it), else on its nearest ancestor body through
    the URDF's fixed joints, at the composed fixed transform. An MJCF site of that name is
    taken as it is."""
    if spec.site(frame) is not None:
        return
    if frame not in prepared.links:
        raise DescriptionError(f"TCP frame '{frame}' is not a link of the URDF")
    transform = np.eye(4)
    link = frame
    while spec.body(link) is None:
        if link not in prepared.fixed_parents:
            raise DescriptionError(
                f"TCP frame '{frame}': the scene has no body '{link}' and it hangs on no fixed "
                "joint of the URDF, so the site has nowhere to go"
            )
        parent, xyz, rpy = prepared.fixed_parents[link]
        step = np.eye(4)
        step[:3, :3] = _rpy_to_matrix(np.array(rpy))
        step[:3, 3] = xyz
        transform = step @ transform
        link = parent
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, transform[:3, :3].ravel())
    spec.body(link).add_site(
        name=frame, pos=transform[:3, 3], quat=quat, size=[TCP_SITE_SIZE, 0, 0]
    )


def _rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF rpy: fixed-axis X, then Y, then Z: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def _add_actuators(
    spec: mujoco.MjSpec,
    prepared: PreparedUrdf,
    actuated: tuple[str, ...],
    interfaces: Mapping[str, str],
    gains: ServoGains,
) -> None:
    for name in actuated:
        joint = prepared.joints[name]
        actuator = spec.add_actuator(name=name, target=name)
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        if interfaces.get(name, EFFORT) == EFFORT:
            actuator.set_to_motor()
            actuator.ctrlrange = [-joint.effort, joint.effort]
            actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        else:
            if joint.kind == "prismatic":
                actuator.set_to_position(kp=gains.prismatic_kp, kv=gains.prismatic_kv)
            else:
                actuator.set_to_position(kp=gains.kp, kv=gains.kv)
            if joint.lower is not None and joint.upper is not None:
                actuator.ctrlrange = [joint.lower, joint.upper]
                actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
            else:  # a continuous joint: any target angle
                actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        actuator.forcerange = [-joint.effort, joint.effort]
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE


# The cube's contacts with the robot (it has priority over every robot geom, so these are
# those contacts' parameters): a soft-finger contact (condim 4: torsional friction about the
# normal, as a finger pad's contact patch gives; with point contacts alone a cube pinched at two
# edges pivoted about the line through them, 33° on the SO-101, and fell out), and a time
# constant of 4 timesteps instead of MuJoCo's default 0.02 s, which is mass-normalised: between
# the SO-101's 12 g jaw and a light cube it let the jaw sink 7-9 mm into the cube at 10 N, and
# the cube rolled out of the grip. The table and floor outrank the cube: the cube meets them
# with their own contact, point contacts with a time constant of 10 timesteps on the table,
# MuJoCo's default 0.02 s on the floor. As stiff as the cube's, a put-down that pressed the cube
# on the table let it slip up between the Panda's 15 g fingers, which the 20 N servo then shut
# at 0.5 m/s (the runaway check latched in 1-2 trials of 20); at MuJoCo's default, the Z1's jaw
# pressed its 12.5 g cube 3.5 mm into the table, and it sprang out of the grip as the lift
# began (1-4 trials of 20).
CUBE_CONDIM = 4
CUBE_CONTACT_TIME_CONSTANT_STEPS = 4.0
TABLE_CONTACT_TIME_CONSTANT_STEPS = 10.0
CUBE_PRIORITY = 1
SURFACE_PRIORITY = 2


def _add_objects(spec: mujoco.MjSpec, objects: GraspScene | None, timestep: float) -> None:
    if objects is None:
        table_size, table_center = TABLE_HALF_SIZE, TABLE_CENTER
        half, mass, start = CUBE_HALF_SIZE, CUBE_MASS, (0.5, 0.0)
        table_top = 0.0
    else:
        table_size, table_center = objects.table_half_size, objects.table_center
        half, mass, start = objects.cube_half_size, objects.cube_mass, objects.cube_start
        table_top = objects.table_height
    world = spec.worldbody
    world.add_light(pos=[0, 0, 3], dir=[0, 0, -1])
    if not any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in world.geoms):  # an MJCF's own
        world.add_geom(
            name=FLOOR_GEOM,
            type=mujoco.mjtGeom.mjGEOM_PLANE,
            size=[3, 3, 0.1],
            pos=[0, 0, FLOOR_HEIGHT],
            priority=SURFACE_PRIORITY,
        )
    world.add_geom(
        name=TABLE_GEOM,
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=list(table_size),
        pos=list(table_center),
        priority=SURFACE_PRIORITY,
        solref=[TABLE_CONTACT_TIME_CONSTANT_STEPS * timestep, 1.0],
    )
    cube = world.add_body(name=CUBE_BODY, pos=[start[0], start[1], table_top + half])
    cube.add_freejoint(name=f"{CUBE_BODY}_joint")
    cube.add_geom(
        name=f"{CUBE_BODY}_geom",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[half] * 3,
        condim=CUBE_CONDIM,
        priority=CUBE_PRIORITY,
        solref=[CUBE_CONTACT_TIME_CONSTANT_STEPS * timestep, 1.0],
    )
    # Solid cube: I = m (2a)² / 6 about each axis (a = half size); explicit, as for the robot.
    cube.mass = mass
    cube.ipos = [0.0, 0.0, 0.0]  # set explicitly: left unset, MjSpec takes the body position
    cube.iquat = [1.0, 0.0, 0.0, 0.0]
    cube.inertia = [mass * (2 * half) ** 2 / 6] * 3
    cube.explicitinertial = True


def _rotation(quaternion: FloatArray) -> FloatArray:
    """The 3 x 3 rotation of a MuJoCo quaternion (w, x, y, z)."""
    flat = np.zeros(9)
    mujoco.mju_quat2Mat(flat, np.asarray(quaternion, dtype=np.float64))
    return flat.reshape(3, 3)


def compose_payload(model: mujoco.MjModel, tcp_frame: str, payload: Payload) -> None:
    """Add ``payload`` to a compiled scene (the MuJoCo backend's, under its lock): the body that
    carries the TCP site becomes that body and the payload composed into one rigid body — mass
    m₁ + m, centre of mass (m₁ p₁ + m p)/(m₁ + m), inertia Σ Iᵢ + mᵢ (|dᵢ|² E − dᵢ dᵢᵀ) about it
    (dᵢ from the new centre of mass) in principal axes — and MuJoCo's derived constants are
    recomputed (``mj_setConst``). The simulator's *model* changes, as a grasp would change the
    real arm; its state is untouched."""
    site = model.site(tcp_frame)
    body = int(site.bodyid[0])
    site_rotation = _rotation(model.site_quat[site.id])
    # The payload in the body's frame.
    payload_com = model.site_pos[site.id] + site_rotation @ payload.com
    payload_inertia = (
        np.zeros((3, 3))
        if payload.inertia is None
        else site_rotation @ payload.inertia @ site_rotation.T
    )
    # The body's own inertia in its frame (principal axes iquat, moments body_inertia).
    frame = _rotation(model.body_iquat[body])
    own_mass = float(model.body_mass[body])
    own_com = model.body_ipos[body].copy()
    own_inertia = frame @ np.diag(model.body_inertia[body]) @ frame.T
    mass = own_mass + payload.mass
    com = (own_mass * own_com + payload.mass * payload_com) / mass
    inertia = np.zeros((3, 3))
    for part_mass, part_com, part_inertia in (
        (own_mass, own_com, own_inertia),
        (payload.mass, payload_com, payload_inertia),
    ):
        offset = part_com - com
        inertia += part_inertia + part_mass * (
            offset @ offset * np.eye(3) - np.outer(offset, offset)
        )
    moments, axes = np.linalg.eigh(inertia)
    if np.linalg.det(axes) < 0:
        axes[:, 0] = -axes[:, 0]  # a rotation, not a reflection
    quaternion = np.zeros(4)
    mujoco.mju_mat2Quat(quaternion, axes.ravel())
    model.body_mass[body] = mass
    model.body_ipos[body] = com
    model.body_iquat[body] = quaternion
    model.body_inertia[body] = moments
    # On scratch data of its own: mj_setConst evaluates the model at qpos0 in the data it is
    # given, and the backend's state must stay as it is.
    mujoco.mj_setConst(model, mujoco.MjData(model))
