"""Pose goals at the boundary: frame, stamp, finiteness and quaternion checks, each failure with
its result code and a message naming the problem (codes are shared by all ct_interfaces
actions). Values no goal can mean (non-finite, farther than ``MAX_GOAL_DISTANCE`` from the base,
amounts beyond their bound: ``non_negative`` here, a Grasp's in ``GraspGoal``) are INVALID_GOAL,
before any IK; a stamp off by more than ``CLOCK_MISMATCH`` names the node's clock, the usual
cause being a wall-clock stamp sent to a node on sim time."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ct_interfaces.action import MoveToPose

from ct_controllers.errors import CtError
from ct_controllers.ros.conversions import from_time_msg
from ct_controllers.text import quoted

Codes = MoveToPose.Result
QUATERNION_TOLERANCE = 1e-3  # |‖q‖ − 1| accepted (then normalised)
MAX_GOAL_DISTANCE = 100.0  # [m] from the base frame's origin; beyond: not a goal for an arm
CLOCK_MISMATCH = 3600.0  # [s] a stamp this far off is on another clock, not late or early


class GoalRejected(CtError, ValueError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_stamp(
    stamp: Any,
    now: float,
    max_age: float,
    future_tolerance: float,
    what: str,
    clock: str = "",
) -> None:
    """Stamp zero means "now"; else it must be no older than ``max_age`` [s] and no further in
    the future than ``future_tolerance`` [s] on this node's clock (``clock`` names it, e.g.
    "sim time", for the hint given when a stamp is off by more than ``CLOCK_MISMATCH``)."""
    seconds = from_time_msg(stamp)
    if seconds == 0.0:
        return
    age = now - seconds
    hint = ""
    if abs(age) > CLOCK_MISMATCH and clock:
        hint = (
            f"; this node runs on {clock} (now {now:.3f} s): stamp with its clock, or stamp 0 "
            "for now"
        )
    if age > max_age:
        raise GoalRejected(
            Codes.STALE_GOAL,
            f"{what} is stamped {age:.3f} s ago (max_goal_age {max_age} s){hint}",
        )
    if age < -future_tolerance:
        raise GoalRejected(
            Codes.STALE_GOAL,
            f"{what} is stamped {-age:.3f} s in the future (tolerance {future_tolerance} s){hint}",
        )


def pose_from_message(
    pose_stamped: Any,
    base_frame: str,
    now: float,
    max_age: float,
    future_tolerance: float,
    what: str,
    clock: str = "",
) -> np.ndarray:
    """geometry_msgs/PoseStamped → 4x4 transform in the base frame, or GoalRejected."""
    frame = pose_stamped.header.frame_id
    if frame != base_frame:
        raise GoalRejected(
            Codes.UNKNOWN_FRAME,
            f"{what} is in frame {quoted(frame)}; goals must be in '{base_frame}'",
        )
    check_stamp(pose_stamped.header.stamp, now, max_age, future_tolerance, what, clock)
    p, o = pose_stamped.pose.position, pose_stamped.pose.orientation
    values = [p.x, p.y, p.z, o.x, o.y, o.z, o.w]
    if not all(math.isfinite(v) for v in values):
        raise GoalRejected(Codes.INVALID_GOAL, f"{what} has a non-finite value: {values}")
    distance = math.hypot(p.x, p.y, p.z)  # no overflow for 1e300
    if distance > MAX_GOAL_DISTANCE:
        raise GoalRejected(
            Codes.INVALID_GOAL,
            f"{what} position is {distance:.3g} m from the origin of '{base_frame}'; goals "
            f"farther than {MAX_GOAL_DISTANCE:g} m are refused",
        )
    norm = math.hypot(o.x, o.y, o.z, o.w)
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


def non_negative(value: float, name: str, maximum: float = math.inf) -> float:
    """``value`` if finite and within [0, ``maximum``], else GoalRejected (INVALID_GOAL)."""
    if not (math.isfinite(value) and 0 <= value <= maximum):
        bound = f"within [0, {maximum:g}]" if math.isfinite(maximum) else "finite and >= 0"
        raise GoalRejected(Codes.INVALID_GOAL, f"{name} must be {bound}, got {value}")
    return value


def clock_source(node: Any) -> str:
    """What the node's ROS clock follows: "sim time" (use_sim_time) or "the system clock"."""
    return "sim time" if node.get_clock().ros_time_is_active else "the system clock"


def summarize_pose(pose_stamped: Any) -> str:
    """A short description of a PoseStamped for the log: position [m] and frame."""
    p = pose_stamped.pose.position
    return f"({p.x:.3g}, {p.y:.3g}, {p.z:.3g}) m in {quoted(pose_stamped.header.frame_id, 32)}"
