"""A FollowJointTrajectory goal checked at the boundary and its tolerances resolved, as
ros2_controllers' joint_trajectory_controller (Jazzy) does, plus this stack's own checks.

:func:`check_trajectory` takes the goal's plain values (no ROS types here: the action server
converts) and returns the waypoints in the controller's joint order, or raises
:class:`TrajectoryRejected` naming the problem — nothing has moved then. JTC's checks: joint
names and points present, every name a joint of the controller and none twice, all the
controller's joints unless partial goals are allowed, ``time_from_start`` strictly increasing,
each point's positions (and velocities, accelerations if given) one per joint, no effort, a last
velocity of zero unless allowed, a trajectory that does not end in the past. Ours: every value
finite, positions inside the joint limits (continuous joints have none), velocities within the
URDF's.

:func:`resolve_tolerances` merges a goal's ``path_tolerance`` / ``goal_tolerance`` /
``goal_time_tolerance`` into the controller's defaults with control_msgs' JointTolerance rules:
a value > 0 replaces the default, 0 keeps it, −1 erases it (no check), any other negative
value is refused. A tolerance of 0 is "not checked" (:func:`violations`).

Units: times [s], positions [rad | m], velocities [rad/s | m/s], accelerations [rad/s² | m/s²].
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ct_controllers.errors import CtError
from ct_controllers.references.spline_trajectory import Waypoint

ERASE = -1.0  # control_msgs/JointTolerance: "the tolerance is erased"


INVALID = "invalid"  # FollowJointTrajectory INVALID_GOAL
JOINTS = "joints"  # INVALID_JOINTS: unknown, repeated or (not allowed) missing joints
OLD_HEADER = "old_header"  # OLD_HEADER_TIMESTAMP: the trajectory ended in the past


class TrajectoryRejected(CtError, ValueError):
    """The goal is invalid (the message names what); nothing was started. ``kind``: which of
    the action's error codes it is (:data:`INVALID`, :data:`JOINTS`, :data:`OLD_HEADER`)."""

    def __init__(self, message: str, kind: str = INVALID) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class GoalPoint:
    """One trajectory_msgs/JointTrajectoryPoint, in the goal's joint order (empty sequences:
    not given)."""

    time_from_start: float
    positions: Sequence[float]
    velocities: Sequence[float] = ()
    accelerations: Sequence[float] = ()
    effort: Sequence[float] = ()


@dataclass(frozen=True)
class JointBounds:
    """A joint's URDF limits: position [rad | m] (±inf when continuous), velocity > 0."""

    lower: float
    upper: float
    velocity: float


@dataclass(frozen=True)
class CheckedTrajectory:
    """The goal's waypoints in the controller's joint order (``joints``: those it names; the
    others hold), and its start on the clock the caller gave (``start_time`` [s])."""

    joints: tuple[str, ...]
    waypoints: tuple[Waypoint, ...]
    start_time: float


MAX_POINTS = 100_000  # a 1000 s trajectory at 100 Hz; checking more would hold the GIL for s


def check_sizes(names: int, points: int, controller_joints: Sequence[str]) -> None:
    """The goal's sizes, checked before anything that scales with them (a hostile goal of
    10⁵ names or 10⁶ points is refused at once, not checked element by element)."""
    if names > len(controller_joints):
        raise TrajectoryRejected(
            f"{names} joint names; this controller has {len(controller_joints)} joints", JOINTS
        )
    if points > MAX_POINTS:
        raise TrajectoryRejected(f"{points} points; at most {MAX_POINTS} are accepted")


def check_trajectory(
    joint_names: Sequence[str],
    points: Sequence[GoalPoint],
    controller_joints: Sequence[str],
    bounds: Mapping[str, JointBounds],
    *,
    stamp: float,
    now: float,
    allow_partial_joints_goal: bool,
    allow_nonzero_velocity_at_trajectory_end: bool,
) -> CheckedTrajectory:
    """The checks of the module docstring. ``stamp`` [s] the goal's ``header.stamp`` (0 = start
    now), ``now`` [s] on the same clock."""
    check_sizes(len(joint_names), len(points), controller_joints)
    if not joint_names:
        raise TrajectoryRejected("the trajectory names no joints")
    if not points:
        raise TrajectoryRejected("the trajectory has no points")
    known = set(controller_joints)
    unknown = [name for name in joint_names if name not in known]
    if unknown:
        raise TrajectoryRejected(
            f"unknown joint(s) {', '.join(unknown)}; this controller has: "
            f"{', '.join(controller_joints)}",
            JOINTS,
        )
    repeated = sorted({name for name in joint_names if list(joint_names).count(name) > 1})
    if repeated:
        raise TrajectoryRejected(f"joint(s) named twice: {', '.join(repeated)}", JOINTS)
    missing = [name for name in controller_joints if name not in set(joint_names)]
    if missing and not allow_partial_joints_goal:
        raise TrajectoryRejected(
            f"the trajectory leaves out joint(s) {', '.join(missing)} and "
            "allow_partial_joints_goal is false",
            JOINTS,
        )
    start_time = now if stamp == 0.0 else stamp
    if not math.isfinite(stamp):
        raise TrajectoryRejected(f"header.stamp {stamp} is not finite")
    previous = -math.inf
    size = len(joint_names)
    for index, point in enumerate(points):
        if not math.isfinite(point.time_from_start) or point.time_from_start < 0.0:
            raise TrajectoryRejected(
                f"point {index}: time_from_start {point.time_from_start} s is not a finite time ≥ 0"
            )
        if point.time_from_start <= previous:
            raise TrajectoryRejected(
                f"point {index}: time_from_start {point.time_from_start} s is not later than "
                f"point {index - 1}'s {previous} s (times must strictly increase)"
            )
        previous = point.time_from_start
        for what, values, optional in (
            ("positions", point.positions, False),
            ("velocities", point.velocities, True),
            ("accelerations", point.accelerations, True),
        ):
            if (optional and len(values) == 0) or len(values) == size:
                continue
            raise TrajectoryRejected(
                f"point {index}: {len(values)} {what} for {size} joint names"
                + (" (or none)" if optional else "")
            )
        if len(point.effort):
            raise TrajectoryRejected(
                f"point {index}: effort is not accepted (the active effort law computes it)"
            )
        for what, values in (
            ("positions", point.positions),
            ("velocities", point.velocities),
            ("accelerations", point.accelerations),
        ):
            bad = [n for n, v in zip(joint_names, values, strict=False) if not math.isfinite(v)]
            if bad:
                raise TrajectoryRejected(f"point {index}: non-finite {what} for {', '.join(bad)}")
        for name, value in zip(joint_names, point.positions, strict=True):
            bound = bounds[name]
            if not bound.lower <= value <= bound.upper:
                raise TrajectoryRejected(
                    f"point {index}: {name} position {value:.6g} is outside its limits "
                    f"[{bound.lower:.6g}, {bound.upper:.6g}]"
                )
        for name, value in zip(joint_names, point.velocities, strict=False):
            if abs(value) > bounds[name].velocity:
                raise TrajectoryRejected(
                    f"point {index}: {name} velocity {value:.6g} exceeds its limit "
                    f"{bounds[name].velocity:.6g}"
                )
    last = points[-1]
    if not allow_nonzero_velocity_at_trajectory_end and any(v != 0.0 for v in last.velocities):
        moving = [n for n, v in zip(joint_names, last.velocities, strict=True) if v != 0.0]
        raise TrajectoryRejected(
            f"the last point's velocity is not zero for {', '.join(moving)} and "
            "allow_nonzero_velocity_at_trajectory_end is false"
        )
    if start_time + last.time_from_start < now:
        raise TrajectoryRejected(
            f"the trajectory ended {now - start_time - last.time_from_start:.3f} s ago "
            "(header.stamp + the last time_from_start is in the past)",
            OLD_HEADER,
        )

    def array(values: Sequence[float]) -> np.ndarray | None:
        return np.array(values, dtype=np.float64) if len(values) else None

    order = tuple(name for name in controller_joints if name in set(joint_names))
    columns = [list(joint_names).index(name) for name in order]
    waypoints = tuple(
        Waypoint(
            point.time_from_start,
            np.array([point.positions[i] for i in columns], dtype=np.float64),
            None if not len(point.velocities) else array([point.velocities[i] for i in columns]),
            None
            if not len(point.accelerations)
            else array([point.accelerations[i] for i in columns]),
        )
        for point in points
    )
    return CheckedTrajectory(order, waypoints, start_time)


# --- tolerances ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StateTolerance:
    """Per joint: |error| allowed in position, velocity, acceleration; 0 = not checked."""

    position: float = 0.0
    velocity: float = 0.0
    acceleration: float = 0.0


@dataclass(frozen=True)
class Tolerances:
    """Along the path and at the goal, per joint name; ``goal_time`` [s] after the trajectory's
    end for the goal tolerance to be met (0 = no limit, JTC's meaning)."""

    path: Mapping[str, StateTolerance] = field(default_factory=dict)
    goal: Mapping[str, StateTolerance] = field(default_factory=dict)
    goal_time: float = 0.0


@dataclass(frozen=True)
class GoalTolerance:
    """One control_msgs/JointTolerance of a goal."""

    name: str
    position: float = 0.0
    velocity: float = 0.0
    acceleration: float = 0.0


def _resolve(default: float, given: float, what: str) -> float:
    if not math.isfinite(given):
        raise TrajectoryRejected(f"{what} {given} is not finite")
    if given > 0.0:
        return given
    if abs(given - ERASE) < 1e-7:  # JTC compares within float epsilon
        return 0.0
    if given < 0.0:
        raise TrajectoryRejected(f"{what} {given} is illegal (> 0, 0 = default, -1 = none)")
    return default


def resolve_tolerances(
    defaults: Tolerances,
    path: Sequence[GoalTolerance],
    goal: Sequence[GoalTolerance],
    goal_time: float,
    controller_joints: Sequence[str],
) -> Tolerances:
    """The goal's tolerances over ``defaults`` (module docstring); a tolerance naming a joint
    the controller does not have is refused."""
    resolved: dict[str, dict[str, StateTolerance]] = {
        "path": dict(defaults.path),
        "goal": dict(defaults.goal),
    }
    for kind, given in (("path", path), ("goal", goal)):
        for tolerance in given:
            if tolerance.name not in controller_joints:
                raise TrajectoryRejected(
                    f"{kind}_tolerance names unknown joint '{tolerance.name}'; this "
                    f"controller has: {', '.join(controller_joints)}",
                    JOINTS,
                )
            base = resolved[kind].get(tolerance.name, StateTolerance())
            label = f"{kind}_tolerance of {tolerance.name}:"
            resolved[kind][tolerance.name] = StateTolerance(
                _resolve(base.position, tolerance.position, f"{label} position"),
                _resolve(base.velocity, tolerance.velocity, f"{label} velocity"),
                _resolve(base.acceleration, tolerance.acceleration, f"{label} acceleration"),
            )
    time = _resolve(defaults.goal_time, goal_time, "goal_time_tolerance")
    return Tolerances(resolved["path"], resolved["goal"], time)


def violations(
    tolerances: Mapping[str, StateTolerance],
    joints: Sequence[str],
    position_error: np.ndarray,
    velocity_error: np.ndarray,
    acceleration_error: np.ndarray | None = None,
) -> list[str]:
    """What exceeds its tolerance (``joints`` order errors), e.g. ``"joint2 position 0.12 >
    0.1"``; empty when within (a tolerance of 0 is not checked)."""
    found = []
    for i, name in enumerate(joints):
        tolerance = tolerances.get(name)
        if tolerance is None:
            continue
        checks = [("position", tolerance.position, position_error[i])]
        checks.append(("velocity", tolerance.velocity, velocity_error[i]))
        if acceleration_error is not None:
            checks.append(("acceleration", tolerance.acceleration, acceleration_error[i]))
        for what, bound, error in checks:
            if bound > 0.0 and abs(error) > bound:
                found.append(f"{name} {what} error {abs(error):.4g} > {bound:.4g}")
    return found
