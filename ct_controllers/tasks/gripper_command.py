"""GripperCommand / ParallelGripperCommand goals, plain Python: the goal checked against the
gripper joint's limits, and the verdict over the measured samples — the semantics of
ros2_controllers' Jazzy ``gripper_action_controller`` and ``parallel_gripper_action_controller``
(``check_for_success``):

- reached: |p* − p| < ``goal_tolerance`` (strict) on a measured sample → SUCCEEDED,
  ``reached_goal`` true, ``stalled`` false;
- else stalled: the measured speed |ṗ| has not been above ``stall_velocity_threshold`` for more
  than ``stall_timeout`` (strict; the clock starts when the goal starts) → ``stalled`` true,
  ``reached_goal`` false, SUCCEEDED with ``allow_stalling``, else ABORTED.

p and ṗ are the position [m | rad] and velocity [m/s | rad/s] of the entry's ``joint`` as the
loop measured them, times [s] their measurement stamps. Canceling and preemption (a newer goal
cancels the running one) are the server's (``ros/gripper_command_action.py``).

Efforts are the joint's [N | N·m]; :class:`GripperLimits` holds the bounds a goal is checked
against: the joint's range and velocity limit, and the effort range the finger servo can
control (its smallest controllable force, :attr:`~ct_controllers.controllers.gripper.
GripperController.minimum_effort`, to the smallest URDF effort limit of the fingers, each
through the joint's lever).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ct_controllers.errors import CtError
from ct_controllers.model.grip_geometry import GripGeometry


class GripperGoalError(CtError, ValueError):
    """A goal refused at the boundary; the message names the field and the bound."""


@dataclass(frozen=True)
class GripperLimits:
    """What a goal for the gripper ``joint`` is checked against. ``lower``, ``upper`` [m | rad]
    its URDF range; ``max_velocity`` [m/s | rad/s] its URDF velocity limit; ``max_effort``
    [N | N·m] the largest effort every finger's drive gives (the smallest URDF limit of the
    fingers, in this joint's units). The smallest effort the finger servo controls depends on
    the goal's speed: :func:`checked_goal` takes it with the goal."""

    joint: str
    lower: float
    upper: float
    max_velocity: float
    max_effort: float


@dataclass(frozen=True)
class GripperGoal:
    """A checked goal: ``position`` [m | rad] of the entry's joint, the effort bound ``effort``
    [N | N·m] the fingers grip with at most, the servo's ``velocity`` [m/s | rad/s] of that
    joint."""

    position: float
    effort: float
    velocity: float


class GripperOutcome(NamedTuple):
    """How a goal ended on a measured sample, as the reference reports it."""

    reached_goal: bool
    stalled: bool
    succeeded: bool  # SUCCEEDED, else ABORTED


def checked_goal(
    limits: GripperLimits,
    position: float,
    effort: float,
    velocity: float,
    minimum_effort: float,
    effort_field: str = "max_effort",
) -> GripperGoal:
    """The goal checked, or GripperGoalError naming the problem (nothing is changed). ``effort``
    and ``velocity`` are what the goal asks after defaults were applied (a goal's 0 is the
    entry's value, which the caller substitutes); ``minimum_effort`` [N | N·m] the servo's
    smallest controllable effort at ``velocity``. ``effort_field``: the goal's field named in
    messages."""
    joint = limits.joint
    if not math.isfinite(position):
        raise GripperGoalError(f"position must be a finite number, got {position}")
    if not limits.lower <= position <= limits.upper:
        raise GripperGoalError(
            f"position {position:g} is outside the range of '{joint}' "
            f"[{limits.lower:g}, {limits.upper:g}]"
        )
    if not math.isfinite(velocity) or velocity <= 0.0:
        raise GripperGoalError(f"velocity must be finite and > 0, got {velocity}")
    if velocity > limits.max_velocity:
        raise GripperGoalError(
            f"velocity {velocity:g} is above the URDF velocity limit {limits.max_velocity:g} "
            f"of '{joint}'"
        )
    if not math.isfinite(effort) or effort < 0.0:
        raise GripperGoalError(f"{effort_field} must be finite and >= 0, got {effort}")
    if effort > limits.max_effort:
        raise GripperGoalError(
            f"{effort_field} {effort:g} is above {limits.max_effort:g}, the effort limit of the "
            f"gripper's drives ('{joint}' units); {effort_field} must be in "
            f"[{_rounded_up(minimum_effort):g}, {limits.max_effort:g}]"
        )
    if effort < minimum_effort:
        bound = _rounded_up(minimum_effort)
        raise GripperGoalError(
            f"{effort_field} {effort:g} is below {bound:g}, the smallest effort with which the "
            "finger servo still controls a finger (its weight plus its damping at the closing "
            f"speed); {effort_field} must be in [{bound:g}, {limits.max_effort:g}]"
        )
    return GripperGoal(float(position), float(effort), float(velocity))


def _rounded_up(value: float) -> float:
    return math.ceil(value * 1000.0) / 1000.0


def default_effort(goal_effort: float, entry_effort: float, limit: float) -> float:
    """The effort bound a goal asks for [N | N·m]: its own, 0 = the entry's ``max_effort``,
    0 there = the joint's ``limit``. A non-finite or negative value is kept (the check names
    it)."""
    if goal_effort != 0.0:
        return goal_effort
    return entry_effort if entry_effort != 0.0 else limit


def parallel_command(
    joint: str,
    names: Sequence[str],
    positions: Sequence[float],
    velocities: Sequence[float],
    efforts: Sequence[float],
) -> tuple[float, float | None, float | None]:
    """A ParallelGripperCommand goal's ``command`` (sensor_msgs/JointState) for the entry's
    ``joint``: (position, velocity or None, effort or None); None where the goal leaves it out
    (empty, or 0: the entry's default). One position, as the reference requires; ``names``
    empty (the reference reads no names) or exactly ``[joint]``; velocity and effort empty or
    one value. GripperGoalError names what is wrong."""
    if len(positions) != 1:
        raise GripperGoalError(
            f"command.position must hold 1 value (for '{joint}'), got {len(positions)}"
        )
    if len(names) > 1:
        raise GripperGoalError(f"command.name must be empty or ['{joint}'], got {len(names)} names")
    if names and names[0] != joint:
        shown = repr(names[0][:64])
        raise GripperGoalError(
            f"command.name {shown} is not this controller's joint '{joint}' (the other "
            "gripper joints follow it)"
        )
    for field, values in (("velocity", velocities), ("effort", efforts)):
        if len(values) > 1:
            raise GripperGoalError(
                f"command.{field} must be empty or hold 1 value, got {len(values)}"
            )
    velocity = float(velocities[0]) if velocities and velocities[0] != 0.0 else None
    effort = float(efforts[0]) if efforts and efforts[0] != 0.0 else None
    return float(positions[0]), velocity, effort


def finger_targets(
    grip: GripGeometry | None, fingers: Sequence[str], joint: str, position: float
) -> list[float]:
    """Per gripper joint (``fingers`` order) [m | rad]: where it goes when ``joint`` goes to
    ``position``. With the gripper's geometry each finger goes the same fraction of the way
    from its closed to its open limit as ``joint`` does (a mirrored finger whose limits are the
    other way round closes with it); without, every finger to ``position``. A mimic follower is
    not a gripper joint: the model places it from its master."""
    if grip is None:
        return [float(position)] * len(fingers)
    k = list(grip.joints).index(joint)
    closed, opened = grip.closed[k], grip.opened[k]
    fraction = (position - closed) / (opened - closed)
    targets = grip.joint_target(fraction)
    targets[k] = float(position)  # exactly the goal's (the fraction's round trip may differ)
    return targets


class StallMonitor:
    """The reference's ``check_for_success`` over measured samples (module docstring): feed it
    each sample with :meth:`update`; it returns the outcome on the sample that ends the goal,
    None before."""

    def __init__(
        self,
        target: float,
        start_time: float,
        goal_tolerance: float,
        stall_velocity_threshold: float,
        stall_timeout: float,
        allow_stalling: bool,
    ) -> None:
        """``target`` [m | rad]; ``start_time`` [s] when the goal started (the stall clock's
        origin, the reference's ``last_movement_time_`` at acceptance)."""
        self.target = target
        self.last_movement = start_time
        self.goal_tolerance = goal_tolerance
        self.stall_velocity_threshold = stall_velocity_threshold
        self.stall_timeout = stall_timeout
        self.allow_stalling = allow_stalling

    def update(self, stamp: float, position: float, velocity: float) -> GripperOutcome | None:
        """The outcome on this sample (stamp [s], measured position [m | rad] and velocity
        [m/s | rad/s] of the joint), or None while the goal runs on."""
        if abs(self.target - position) < self.goal_tolerance:
            return GripperOutcome(reached_goal=True, stalled=False, succeeded=True)
        if abs(velocity) > self.stall_velocity_threshold:
            self.last_movement = stamp
            return None
        if stamp - self.last_movement > self.stall_timeout:
            return GripperOutcome(reached_goal=False, stalled=True, succeeded=self.allow_stalling)
        return None
