"""A TCP whose z axis is the gripper's approach.

The Grasp approaches along the tool's z axis and closes the fingers across its y axis (the
convention of the Panda's ``panda_hand_tcp``, of UR's ``tool0`` and of the bundled arm: z out of
the flange, toward the fingertips). A URDF's tool-like frame need not follow it: the Unitree
Z1's deepest frame, ``gripperStator``, has its x axis along the jaws. Where the TCP ct-setup
found has a gripper whose approach is more than :data:`MAX_ANGLE` off its z axis, ct-setup adds
a frame, ``<tcp>_tool``, at the same origin on the same link, with

    z = the approach: from the arm's last joint to the midpoint of the width frames, gripper
        closed (unit vector);
    y = the closing direction: from one width frame to the other, gripper open, made
        orthogonal to z;
    x = y × z,

and takes it as the TCP (in the xacro ct-setup writes, the URDF included unchanged). A TCP the
user named (``--tcp``) is kept, with a line saying how far its z is from the approach.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ct_controllers.model.grip_geometry import GripGeometry
from ct_controllers.model.robot import RobotModel
from ct_controllers.setup_assistant.jaw_frames import FixedFrame, free_name
from ct_controllers.setup_assistant.urdf_tree import RobotTree

MAX_ANGLE = math.radians(20.0)  # [rad] between the TCP's z axis and the approach


@dataclass(frozen=True)
class Approach:
    """The gripper's approach and closing directions, unit vectors in the TCP's axes, and the
    angle [rad] between the approach and the TCP's z axis."""

    approach: np.ndarray
    closing: np.ndarray
    angle: float


def gripper_approach(model: RobotModel, grip: GripGeometry) -> Approach | None:
    """The directions of the module docstring at the model's neutral configuration (the arm's
    pose does not matter: everything is in the TCP's axes), or None where they are degenerate
    (the width frames' midpoint on the last joint's origin; the closing line along the
    approach)."""
    pin_model = model.model
    q = model.neutral()
    indices = model.indices(grip.joints)
    q[indices] = grip.closed
    tcp = model.frame_pose(q)
    rotation = tcp[:3, :3]
    closed = [model.frame_pose(q, name)[:3, 3] for name in grip.frames]
    pin.forwardKinematics(pin_model, model.data, model.pinocchio_configuration(q))
    wrist = model.data.oMi[pin_model.frames[model.tcp_frame_id].parentJoint].translation
    approach = rotation.T @ (0.5 * (closed[0] + closed[1]) - np.asarray(wrist))
    if np.linalg.norm(approach) < 1e-6:
        return None
    approach = approach / np.linalg.norm(approach)
    q[indices] = grip.opened
    a, b = (model.frame_pose(q, name)[:3, 3] for name in grip.frames)
    closing = rotation.T @ (a - b)
    closing = closing - (closing @ approach) * approach
    if np.linalg.norm(closing) < 1e-6:
        return None
    closing = closing / np.linalg.norm(closing)
    angle = math.acos(max(-1.0, min(1.0, float(approach[2]))))
    return Approach(approach, closing, angle)


def approach_tool_frame(tree: RobotTree, tcp: str, approach: Approach) -> FixedFrame:
    """The frame ``<tcp>_tool`` on link ``tcp``: its origin, z along the approach, y along the
    closing direction."""
    z, y = approach.approach, approach.closing
    rotation = np.column_stack([np.cross(y, z), y, z])
    roll, pitch, yaw = (float(v) for v in pin.rpy.matrixToRpy(rotation))
    name = free_name(tree, f"{tcp}_tool")
    return FixedFrame(
        name,
        f"{name}_joint",
        tcp,
        (0.0, 0.0, 0.0),
        f"ct-setup: the TCP, z along the gripper's approach, y across its fingers (on {tcp})",
        (roll, pitch, yaw),
    )
