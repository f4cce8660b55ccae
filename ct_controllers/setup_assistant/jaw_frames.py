"""Fingertip frames for a lone jaw whose URDF has none to measure it by.

A single jaw closing on a fixed one (the SO-101's, the Unitree Z1's) is often a link whose frame
sits on its hinge, with no fixed jaw link beside it: its frame's distance to any other does not
change as it turns, so the grip width (:mod:`~ct_controllers.model.grip_geometry`) has nothing to
measure. ct-setup then adds two frames, in the xacro it writes (the user's URDF is included
unchanged), as an engineer would add a TCP:

- ``<jaw>_tip`` on the jaw's link, at its fingertip: the point of the jaw's collision geometry
  farthest from the hinge axis (a prismatic jaw: its link's origin, which the joint moves);
- ``<jaw>_fixed_tip`` on the link the jaw hangs on, where that fingertip is with the jaw closed.

The width between them is the distance of the fingertip from where it closes: the opening at the
tips, 0 closed. The closing limit is the one of the two URDF limits at which the jaw's collision
geometry comes nearest the geometry of the link it hangs on (MuJoCo's own distance, the scene the
stack simulates). No collision geometry on either: no frames (the width is then the summed joint
opening, as ct-setup says).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import pinocchio as pin

from ct_controllers.hardware.mujoco_scene import build_scene, compile_scene
from ct_controllers.model.robot import RobotModel
from ct_controllers.setup_assistant.chain import Chain
from ct_controllers.setup_assistant.urdf_tree import RobotTree, UrdfJoint, parse_robot

# [m] how far geometry is searched for when finding the closing limit
SEARCH_DISTANCE = 0.5
PROBE = "ct_setup_fingertip_probe"  # the probe geom's name (closing limit)


@dataclass(frozen=True)
class FixedFrame:
    """A frame added to the URDF: ``link`` hung on ``parent`` by a fixed joint ``joint`` at
    ``xyz`` [m] (``parent``'s axes)."""

    link: str
    joint: str
    parent: str
    xyz: tuple[float, float, float]
    comment: str = ""
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)  # [rad] URDF roll, pitch, yaw

    def urdf(self) -> str:
        xyz = " ".join(f"{v:.6g}" for v in self.xyz)
        rpy = " ".join(f"{v:.9g}" for v in self.rpy)
        return (
            f'<link name="{self.link}"/>'
            f'<joint name="{self.joint}" type="fixed"><parent link="{self.parent}"/>'
            f'<child link="{self.link}"/><origin xyz="{xyz}" rpy="{rpy}"/></joint>'
        )


@dataclass(frozen=True)
class JawFrames:
    """The two frames (module docstring) and the jaw's closing limit [rad | m]."""

    tip: FixedFrame
    fixed_tip: FixedFrame
    closed: float

    @property
    def frames(self) -> tuple[FixedFrame, FixedFrame]:
        return (self.tip, self.fixed_tip)

    @property
    def width_frames(self) -> tuple[str, str]:
        return (self.tip.link, self.fixed_tip.link)


def free_name(tree: RobotTree, wanted: str) -> str:
    """``wanted``, or it numbered, free among the URDF's link and joint names (and with
    ``_joint`` appended)."""
    taken = set(tree.links) | {j.name for j in tree.joints}
    name, count = wanted, 1
    while name in taken or f"{name}_joint" in taken:
        count += 1
        name = f"{wanted}{count}"
    return name


def _body_points(model: mujoco.MjModel, body: int) -> np.ndarray:
    """The collision geometry of ``body`` as points in its frame [m]: each mesh's vertices, each
    primitive's bounding-box corners."""
    points = []
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    for geom in range(model.ngeom):
        if model.geom_bodyid[geom] != body or not (
            model.geom_contype[geom] or model.geom_conaffinity[geom]
        ):
            continue
        rotation = np.zeros(9)
        mujoco.mju_quat2Mat(rotation, model.geom_quat[geom])
        if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_MESH:
            mesh = model.geom_dataid[geom]
            start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
            local = np.asarray(model.mesh_vert[start : start + count], float)
        else:
            center, half = model.geom_aabb[geom, :3], model.geom_aabb[geom, 3:]
            local = center + corners * half
        points.append(model.geom_pos[geom] + local @ rotation.reshape(3, 3).T)
    return np.concatenate(points) if points else np.empty((0, 3))


def _closing_limit(
    tree: RobotTree, joint: UrdfJoint, urdf_directory: Path, tip: tuple[float, float, float]
) -> float:
    """The URDF limit of ``joint`` at which the fingertip ``tip`` (a point of the jaw's link,
    [m]) is nearest the collision geometry of the body the jaw hangs on: MuJoCo's distance from
    a 1 mm probe sphere placed there to that body's geoms (a geom that collides with nothing
    would be discarded as visual; nothing is simulated here)."""
    spec = build_scene(tree.urdf, urdf_directory=urdf_directory, with_objects=False)
    spec.body(joint.child).add_geom(
        name=PROBE,
        type=mujoco.mjtGeom.mjGEOM_SPHERE,
        size=[0.001, 0, 0],
        pos=list(tip),
        contype=1,
        conaffinity=0,
    )
    scene = compile_scene(spec)
    data = mujoco.MjData(scene)
    probe = scene.geom(PROBE).id
    holder = int(scene.body_parentid[scene.body(joint.child).id])
    geoms = [
        g
        for g in range(scene.ngeom)
        if scene.geom_bodyid[g] == holder and (scene.geom_contype[g] or scene.geom_conaffinity[g])
    ]
    distances = []
    for limit in (joint.lower, joint.upper):
        data.qpos[:] = 0.0
        data.qpos[scene.joint(joint.name).qposadr[0]] = limit
        mujoco.mj_forward(scene, data)
        distances.append(
            min(mujoco.mj_geomDistance(scene, data, probe, g, SEARCH_DISTANCE, None) for g in geoms)
        )
    return float(joint.lower if distances[0] <= distances[1] else joint.upper)


def jaw_tip_frames(
    tree: RobotTree, chain: Chain, model: RobotModel, urdf_directory: Path
) -> JawFrames | None:
    """The frames to add for ``chain``'s gripper (module docstring), or None: not one jaw (no
    mimic follower), or no collision geometry on the jaw or on the link it hangs on."""
    if len(chain.gripper_joints) != 1 or chain.followers:
        return None
    joint = tree.joint(chain.gripper_joints[0])
    scene = compile_scene(build_scene(tree.urdf, urdf_directory=urdf_directory, with_objects=False))
    jaw_body = scene.body(joint.child).id
    holder = int(scene.body_parentid[jaw_body])  # the body the jaw hangs on (fixed links fused)
    points = _body_points(scene, jaw_body)
    if points.size == 0 or not _body_points(scene, holder).size:
        return None
    tip = _fingertip(scene, joint, points)
    closed = _closing_limit(tree, joint, urdf_directory, tip)
    fixed = _closed_tip_in_parent(model, joint, tip, closed)
    name = free_name(tree, f"{joint.name}_tip")
    fixed_name = free_name(tree, f"{joint.name}_fixed_tip")
    return JawFrames(
        tip=FixedFrame(
            name,
            f"{name}_joint",
            joint.child,
            tip,
            f"ct-setup: {joint.name}'s fingertip (grip width frame)",
        ),
        fixed_tip=FixedFrame(
            fixed_name,
            f"{fixed_name}_joint",
            joint.parent,
            fixed,
            f"ct-setup: where {joint.name}'s fingertip closes, at {closed:g} (grip width frame)",
        ),
        closed=closed,
    )


def _fingertip(
    scene: mujoco.MjModel, joint: UrdfJoint, points: np.ndarray
) -> tuple[float, float, float]:
    """The jaw's fingertip in its link's frame [m]: for a hinge, the geometry point farthest
    from the axis (MuJoCo's body frame is the URDF link's); for a slide, the link's origin."""
    if joint.prismatic:
        return (0.0, 0.0, 0.0)
    index = scene.joint(joint.name).id
    axis = scene.jnt_axis[index] / np.linalg.norm(scene.jnt_axis[index])
    relative = points - scene.jnt_pos[index]
    radial = relative - np.outer(relative @ axis, axis)
    x, y, z = points[int(np.argmax(np.linalg.norm(radial, axis=1)))]
    return (float(x), float(y), float(z))


def _closed_tip_in_parent(
    model: RobotModel, joint: UrdfJoint, tip: tuple[float, float, float], closed: float
) -> tuple[float, float, float]:
    """Where ``tip`` (the jaw link's axes) is with the jaw at ``closed``, in the axes of the link
    the jaw hangs on [m]: Pinocchio's forward kinematics of the two links."""
    q = np.zeros(model.nq)
    q[model.q_index(joint.name)] = closed
    pin.framesForwardKinematics(model.model, model.data, model.pinocchio_configuration(q))
    jaw = model.data.oMf[model.frame_id(joint.child)]
    parent = model.data.oMf[model.frame_id(joint.parent)]
    x, y, z = parent.actInv(jaw.act(np.array(tip)))
    return (float(x), float(y), float(z))


def with_frames(tree: RobotTree, frames: tuple[FixedFrame, ...]) -> RobotTree:
    """``tree`` with ``frames`` added to its URDF (what the written xacro expands to)."""
    text = tree.urdf.rstrip()
    closing = text.rfind("</robot>")
    added = "".join(frame.urdf() for frame in frames)
    return parse_robot(text[:closing] + added + text[closing:], tree.source)
