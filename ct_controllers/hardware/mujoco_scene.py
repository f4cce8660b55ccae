"""The MuJoCo scene, built in code (``mujoco.MjSpec``) from the same URDF Pinocchio loads.

The robot is walked link by link: each URDF link becomes a body at its joint origin, with the
URDF inertial (mass, COM, full inertia tensor) taken as given (``inertiafromgeom = false``), so the
simulated arm is the Pinocchio arm; collision shapes become geoms. Deliberate differences from the
Pinocchio model: none in kinematics or rigid-body dynamics (the same armature, from
``<dynamics armature>``; no joint damping or friction, no joint-level force limit); MuJoCo adds
joint-range constraints and contacts.

Around the robot: a floor, a table whose top is the base plane z = 0, and a 5 cm cube on it.
Actuators, one per joint: a ``motor`` (effort interface; ctrl and force range = the URDF effort
limit) or a ``position`` servo (position interface; ctrl range = joint range, force range = the
URDF effort limit).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass

import mujoco
import numpy as np

from ct_controllers.hardware.interface import EFFORT, POSITION
from ct_controllers.model.description import DescriptionError, joint_armature

TCP_SITE = "tcp"
CUBE_BODY = "cube"
CUBE_HALF_SIZE = 0.025  # [m]
CUBE_MASS = 0.1  # [kg]
TABLE_HALF_SIZE = (0.35, 0.5, 0.02)  # [m]
TABLE_CENTER = (0.6, 0.0, -0.02)  # [m], top surface at z = 0
FLOOR_HEIGHT = -0.75  # [m]


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


def _floats(text: str | None, default: str) -> np.ndarray:
    return np.array([float(x) for x in (text or default).split()], dtype=np.float64)


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


def _quat(rpy: np.ndarray) -> np.ndarray:
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, _rpy_to_matrix(rpy).ravel())
    return quat


def _origin(element: ET.Element | None) -> tuple[np.ndarray, np.ndarray]:
    if element is None:
        return np.zeros(3), np.zeros(3)
    return _floats(element.get("xyz"), "0 0 0"), _floats(element.get("rpy"), "0 0 0")


def _add_link(body: mujoco.MjsBody, link: ET.Element, mass_scale: float) -> None:
    inertial = link.find("inertial")
    if inertial is not None:
        xyz, rpy = _origin(inertial.find("origin"))
        mass_el = inertial.find("mass")
        inertia_el = inertial.find("inertia")
        if mass_el is None or inertia_el is None:
            raise DescriptionError(f"link '{link.get('name')}': <inertial> lacks mass or inertia")
        i = {k: float(inertia_el.get(k, "0")) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
        tensor = np.array(
            [
                [i["ixx"], i["ixy"], i["ixz"]],
                [i["ixy"], i["iyy"], i["iyz"]],
                [i["ixz"], i["iyz"], i["izz"]],
            ]
        )
        rotation = _rpy_to_matrix(rpy)
        tensor = rotation @ tensor @ rotation.T  # into the link frame
        body.mass = float(mass_el.get("value", "0")) * mass_scale
        body.ipos = xyz
        body.fullinertia = [
            tensor[0, 0],
            tensor[1, 1],
            tensor[2, 2],
            tensor[0, 1],
            tensor[0, 2],
            tensor[1, 2],
        ]
        body.explicitinertial = True
    for index, collision in enumerate(link.findall("collision")):
        xyz, rpy = _origin(collision.find("origin"))
        geometry = collision.find("geometry")
        shape = None if geometry is None else next(iter(geometry), None)
        if shape is None:
            continue
        geom = body.add_geom(name=f"{link.get('name')}_collision_{index}", pos=xyz, quat=_quat(rpy))
        if shape.tag == "cylinder":
            geom.type = mujoco.mjtGeom.mjGEOM_CYLINDER
            geom.size = [float(shape.get("radius", "0")), float(shape.get("length", "0")) / 2, 0]
        elif shape.tag == "box":
            geom.type = mujoco.mjtGeom.mjGEOM_BOX
            geom.size = _floats(shape.get("size"), "0 0 0") / 2
        elif shape.tag == "sphere":
            geom.type = mujoco.mjtGeom.mjGEOM_SPHERE
            geom.size = [float(shape.get("radius", "0")), 0, 0]
        else:
            raise DescriptionError(
                f"link '{link.get('name')}': collision shape '{shape.tag}' is not supported "
                "(use cylinder, box or sphere)"
            )
        # Inertia comes from <inertial> only; geoms are massless collision shapes.
        geom.mass = 0.0
        geom.density = 0.0


def build_scene(
    urdf: str,
    timestep: float = 0.001,
    command_interfaces: Mapping[str, str] | None = None,
    servo_gains: ServoGains = ServoGains(),
    tcp_link: str = "tcp",
    with_objects: bool = True,
    mass_scale: float = 1.0,
) -> mujoco.MjSpec:
    """Build the scene spec. ``command_interfaces`` maps joint name to "effort" (default) or
    "position"; the actuator for joint J is named ``J`` either way. ``mass_scale`` multiplies
    every link mass, rotational inertia about the link COM unchanged (plant model error for
    experiments; 1 = the URDF)."""
    if not (np.isfinite(mass_scale) and mass_scale > 0):
        raise ValueError(f"mass_scale must be finite and positive, got {mass_scale}")
    root = ET.fromstring(urdf)
    armature = joint_armature(urdf)
    links = {link.get("name", ""): link for link in root.findall("link")}
    joints = root.findall("joint")
    children: dict[str, list[ET.Element]] = {}
    child_links: set[str] = set()
    for joint in joints:
        parent = joint.find("parent")
        child = joint.find("child")
        if parent is None or child is None:
            raise DescriptionError(f"joint '{joint.get('name')}' lacks <parent> or <child>")
        children.setdefault(parent.get("link", ""), []).append(joint)
        child_links.add(child.get("link", ""))
    roots = [name for name in links if name not in child_links]
    if len(roots) != 1:
        raise DescriptionError(f"the URDF must have one root link, found: {roots}")

    spec = mujoco.MjSpec()
    spec.modelname = root.get("name", "robot")
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    spec.compiler.autolimits = True
    spec.compiler.degree = False  # URDF angles are radians; MjSpec defaults to degrees
    spec.option.timestep = timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    # Grasping: MuJoCo's soft friction lets a held object creep (measured here: a 0.1 kg cube
    # slid 2 mm/s out of a 2 × 20 N grasp with the default pyramidal cone). An elliptic cone
    # with a high impedance ratio makes static friction hold.
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 10.0

    interfaces = dict(command_interfaces or {})
    movable: list[ET.Element] = []

    def walk(body: mujoco.MjsBody, link_name: str) -> None:
        _add_link(body, links[link_name], mass_scale)
        for joint in children.get(link_name, []):
            child = joint.find("child")
            assert child is not None
            child_name = child.get("link", "")
            if child_name not in links:
                raise DescriptionError(
                    f"joint '{joint.get('name')}' names child link '{child_name}', which is missing"
                )
            xyz, rpy = _origin(joint.find("origin"))
            child_body = body.add_body(name=child_name, pos=xyz, quat=_quat(rpy))
            kind = joint.get("type")
            if kind in ("revolute", "continuous", "prismatic"):
                mj_joint = child_body.add_joint(name=joint.get("name"))
                mj_joint.type = (
                    mujoco.mjtJoint.mjJNT_SLIDE
                    if kind == "prismatic"
                    else mujoco.mjtJoint.mjJNT_HINGE
                )
                axis = joint.find("axis")
                mj_joint.axis = _floats(None if axis is None else axis.get("xyz"), "1 0 0")
                mj_joint.armature = armature.get(joint.get("name", ""), 0.0)
                limit = joint.find("limit")
                if kind != "continuous" and limit is not None:
                    mj_joint.range = [
                        float(limit.get("lower", "0")),
                        float(limit.get("upper", "0")),
                    ]
                    mj_joint.limited = mujoco.mjtLimited.mjLIMITED_TRUE
                movable.append(joint)
            elif kind != "fixed":
                raise DescriptionError(f"joint '{joint.get('name')}': type '{kind}' not supported")
            walk(child_body, child_name)

    base = spec.worldbody.add_body(name=roots[0])
    walk(base, roots[0])

    tcp = spec.body(tcp_link)
    if tcp is None:
        raise DescriptionError(f"TCP link '{tcp_link}' is not in the URDF")
    tcp.add_site(name=TCP_SITE, size=[0.005, 0, 0])

    movable_names = {j.get("name") for j in movable}
    unknown = sorted(set(interfaces) - movable_names)
    if unknown:
        raise DescriptionError(
            f"command interface given for unknown joint(s): {', '.join(unknown)}"
        )
    for joint in movable:
        name = joint.get("name", "")
        limit = joint.find("limit")
        effort = float(limit.get("effort", "0")) if limit is not None else 0.0
        if effort <= 0:
            raise DescriptionError(f"joint '{name}' has no positive effort limit in the URDF")
        actuator = spec.add_actuator(name=name, target=name)
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        interface = interfaces.get(name, EFFORT)
        if interface == EFFORT:
            actuator.set_to_motor()
            actuator.ctrlrange = [-effort, effort]
        elif interface == POSITION:
            if joint.get("type") == "prismatic":
                actuator.set_to_position(kp=servo_gains.prismatic_kp, kv=servo_gains.prismatic_kv)
            else:
                actuator.set_to_position(kp=servo_gains.kp, kv=servo_gains.kv)
            assert limit is not None
            actuator.ctrlrange = [float(limit.get("lower", "0")), float(limit.get("upper", "0"))]
        else:
            raise DescriptionError(f"joint '{name}': unknown command interface '{interface}'")
        actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        actuator.forcerange = [-effort, effort]
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE

    if with_objects:
        _add_objects(spec)
    return spec


def _add_objects(spec: mujoco.MjSpec) -> None:
    world = spec.worldbody
    world.add_light(pos=[0, 0, 3], dir=[0, 0, -1])
    world.add_geom(
        name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[3, 3, 0.1], pos=[0, 0, FLOOR_HEIGHT]
    )
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=list(TABLE_HALF_SIZE),
        pos=list(TABLE_CENTER),
    )
    cube = world.add_body(name=CUBE_BODY, pos=[0.5, 0.0, CUBE_HALF_SIZE])
    cube.add_freejoint(name=f"{CUBE_BODY}_joint")
    cube.add_geom(
        name=f"{CUBE_BODY}_geom", type=mujoco.mjtGeom.mjGEOM_BOX, size=[CUBE_HALF_SIZE] * 3
    )
    # Solid cube: I = m (2a)² / 6 about each axis (a = half size); explicit, as for the robot.
    cube.mass = CUBE_MASS
    cube.ipos = [0.0, 0.0, 0.0]  # set explicitly: left unset, MjSpec takes the body position
    cube.iquat = [1.0, 0.0, 0.0, 0.0]
    cube.inertia = [CUBE_MASS * (2 * CUBE_HALF_SIZE) ** 2 / 6] * 3
    cube.explicitinertial = True
