"""Pose goals at the boundary: frame, stamp, finiteness and quaternion checks, each failure with
its result code and a message naming the problem (codes are shared by all ct_interfaces
actions)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ct_interfaces.action import MoveToPose

from ct_controllers.ros.conversions import from_time_msg

Codes = MoveToPose.Result
QUATERNION_TOLERANCE = 1e-3  # |‖q‖ − 1| accepted (then normalised)


class GoalRejected(ValueError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_stamp(stamp: Any, now: float, max_age: float, future_tolerance: float, what: str) -> None:
    """Stamp zero means "now"; else it must be no older than ``max_age`` [s] and no further in
    the future than ``future_tolerance`` [s] on this node's clock."""
    seconds = from_time_msg(stamp)
    if seconds == 0.0:
        return
    age = now - seconds
    if age > max_age:
        raise GoalRejected(
            Codes.STALE_GOAL, f"{what} is stamped {age:.3f} s ago (max_goal_age {max_age} s)"
        )
    if age < -future_tolerance:
        raise GoalRejected(
            Codes.STALE_GOAL,
            f"{what} is stamped {-age:.3f} s in the future (tolerance {future_tolerance} s)",
        )


def pose_from_message(
    pose_stamped: Any,
    base_frame: str,
    now: float,
    max_age: float,
    future_tolerance: float,
    what: str,
) -> np.ndarray:
    """geometry_msgs/PoseStamped → 4x4 transform in the base frame, or GoalRejected."""
    frame = pose_stamped.header.frame_id
    if frame != base_frame:
        raise GoalRejected(
            Codes.UNKNOWN_FRAME,
            f"{what} is in frame '{frame}'; goals must be in '{base_frame}'",
        )
    check_stamp(pose_stamped.header.stamp, now, max_age, future_tolerance, what)
    p, o = pose_stamped.pose.position, pose_stamped.pose.orientation
    values = [p.x, p.y, p.z, o.x, o.y, o.z, o.w]
    if not all(math.isfinite(v) for v in values):
        raise GoalRejected(Codes.INVALID_GOAL, f"{what} has a non-finite value: {values}")
    norm = math.sqrt(o.x**2 + o.y**2 + o.z**2 + o.w**2)
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        raise GoalRejected(
            Codes.INVALID_GOAL,
            f"{what} orientation is not a unit quaternion (norm {norm:.6f})",
        )
    x, y, z, w = o.x / norm, o.y / norm, o.z / norm, o.w / norm
    pose = np.eye(4)
    pose[:3, :3] = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    pose[:3, 3] = [p.x, p.y, p.z]
    return pose


def non_negative(value: float, name: str) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise GoalRejected(Codes.INVALID_GOAL, f"{name} must be finite and >= 0, got {value}")
    return value
