"""Jerk-limited point-to-point joint trajectories (Ruckig) that start on the measured state
(clipped into the joint range when the limits carry it: a start at or past a limit is brought
back inside, :mod:`ct_controllers.references.limit_approach`).

From the measured (q, v) and zero acceleration (accelerations are not measured) to (q_goal, 0, 0),
time-synchronized across joints, within per-joint velocity [rad/s | m/s], acceleration
[rad/s² | m/s²] and jerk [rad/s³ | m/s³] bounds. A requested duration is a minimum: a move the
bounds cannot do that fast takes longer, and ``duration`` says how long.

Ruckig computes in double precision with a fixed numerical horizon: durations beyond ~7,600 s
fail with codes its Python ``Result`` enum does not list (-101, "trajectory duration exceeds its
numerical limits"), which surface as a bare ``ValueError``. Durations are therefore bounded by
``MAX_DURATION`` at the boundary, and every planner error, listed or not, is a
:class:`TrajectoryError` carrying the planner's own message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from ruckig import ControlInterface, InputParameter, Result, Ruckig, Synchronization, Trajectory

from ct_controllers.errors import CtError
from ct_controllers.references.limit_approach import LimitApproach
from ct_controllers.types import FloatArray, JointReference

MAX_DURATION = 3600.0  # [s] longest requested duration; Ruckig's horizon is ~7,600 s
# Ruckig's error codes (ruckig/result.hpp); its Python enum lists only some of them.
RUCKIG_ERRORS = {
    -1: "error",
    -100: "invalid input",
    -101: "trajectory duration exceeds its numerical limits",
    -102: "a position limit is violated",
    -104: "no phase synchronization",
    -110: "execution time calculation failed",
    -111: "synchronization calculation failed",
}


class TrajectoryError(CtError, ValueError):
    """No trajectory within the bounds (e.g. an initial velocity beyond them)."""


@dataclass(frozen=True)
class JointLimits:
    """Reference limits per joint (the trajectory layer's, not the actuators'). ``approach``,
    when given, keeps goals inside the joint range and brakes gently towards a limit a goal is
    near, so that tracking does not carry the arm past it, and keeps every plan inside the
    range whatever state it starts from (:mod:`ct_controllers.references.limit_approach`)."""

    velocity: FloatArray  # [rad/s | m/s]
    acceleration: FloatArray  # [rad/s² | m/s²]
    jerk: FloatArray  # [rad/s³ | m/s³]
    approach: LimitApproach | None = None

    def __post_init__(self) -> None:
        for name in ("velocity", "acceleration", "jerk"):
            value = np.asarray(getattr(self, name))
            if not (np.all(np.isfinite(value)) and np.all(value > 0)):
                raise ValueError(f"reference {name} limits must be finite and positive: {value}")
        if self.approach is not None and self.approach.lower.size != np.size(self.velocity):
            raise ValueError(
                f"limit approach for {self.approach.lower.size} joints, reference limits for "
                f"{np.size(self.velocity)}"
            )

    def inside(self, q: FloatArray) -> FloatArray:
        """``q`` [rad | m] clipped into the joint range of ``approach`` (a new array; a copy of
        ``q`` without an approach): what a held reference may be."""
        if self.approach is None:
            return np.array(q, dtype=np.float64)
        return np.clip(q, self.approach.lower, self.approach.upper)


class JerkLimitedTrajectory:
    """A Ruckig trajectory on the hardware clock: ``sample(t)`` for t in [start, start + T],
    holding the goal after T."""

    def __init__(
        self,
        start_time: float,
        q0: FloatArray,
        v0: FloatArray,
        goal: FloatArray,
        limits: JointLimits,
        minimum_duration: float = 0.0,
        stop: bool = False,
    ) -> None:
        """``stop=True`` ignores ``goal`` and brings every joint to rest as fast as the
        acceleration and jerk limits allow (bounded deceleration); ``goal`` becomes the position
        where it ends (with ``limits.approach``, at least its margin inside the range: a stop
        that would end closer to a limit comes back to the margin). With ``limits.approach`` a
        goal is planned at least its margin inside the joint range (``goal`` is then the planned
        one) and braked towards gently near a limit; and every plan, a stop too, starts from
        (q0, v0) clipped into the range (:meth:`LimitApproach.start_inside`) and never leaves
        it: a profile whose extrema would (a time-synchronised one braking more gently than the
        fastest stop) is planned again with those joints unsynchronised, and if even that leaves
        the range the plan is a :class:`TrajectoryError`."""
        n = len(q0)
        approach = limits.approach
        goal = np.asarray(goal, dtype=np.float64)
        if approach is not None and not stop:
            goal = approach.planned_goal(goal)
        if not (np.isfinite(minimum_duration) and 0 <= minimum_duration <= MAX_DURATION):
            raise TrajectoryError(
                f"duration must be within [0, {MAX_DURATION:g}] s, got {minimum_duration}"
            )
        # Start within the bounds: a measured velocity a hair above them (noise) is clipped.
        start_q = np.asarray(q0, dtype=np.float64)
        start_v = np.clip(v0, -limits.velocity, limits.velocity)
        if approach is not None:  # and inside the range, able to stop within it
            start_q, start_v = approach.start_inside(
                start_q, start_v, limits.acceleration, limits.jerk
            )
        parameters = InputParameter(n)
        parameters.current_position = start_q.tolist()
        parameters.current_velocity = start_v.tolist()
        parameters.current_acceleration = [0.0] * n
        if stop:
            parameters.control_interface = ControlInterface.Velocity
        else:
            parameters.target_position = goal.tolist()
        parameters.target_velocity = [0.0] * n
        parameters.target_acceleration = [0.0] * n
        parameters.max_velocity = np.asarray(limits.velocity, dtype=np.float64).tolist()
        parameters.max_acceleration = np.asarray(limits.acceleration, dtype=np.float64).tolist()
        parameters.max_jerk = np.asarray(limits.jerk, dtype=np.float64).tolist()
        if minimum_duration > 0:
            parameters.minimum_duration = float(minimum_duration)
        braking = (
            approach.braking(goal, limits.acceleration)
            if approach is not None and not stop
            else None
        )
        if braking is not None and braking.any:
            parameters.min_acceleration = braking.minimum.tolist()
            parameters.max_acceleration = braking.maximum.tolist()
        self._trajectory = _plan(parameters)
        if braking is not None and braking.any:
            lowest, highest = _extrema(self._trajectory)
            if braking.passes_goal(start_q, goal, lowest, highest):
                # Braking that gently from this velocity would carry the reference past its
                # goal towards the limit: brake as hard as the reference limits allow instead.
                parameters.min_acceleration = None
                parameters.max_acceleration = np.asarray(limits.acceleration).tolist()
                self._trajectory = _plan(parameters)
        if approach is not None:
            self._keep_inside(parameters, approach)
            if stop:
                end = np.array(self._trajectory.at_time(self._trajectory.duration)[0])
                inside = approach.planned_goal(end)
                if not np.array_equal(inside, end):
                    # A stop that would end within a joint's margin of its limit (where tracking
                    # puts the joint past it) ends on the margin instead: the same brake, then
                    # back to the margin, with the same bounds.
                    parameters.control_interface = ControlInterface.Position
                    parameters.target_position = inside.tolist()
                    parameters.per_dof_synchronization = None
                    self._trajectory = _plan(parameters)
                    self._keep_inside(parameters, approach)
        self.start_time = float(start_time)
        self.duration = float(self._trajectory.duration)
        end = self._trajectory.at_time(self.duration)[0] if stop else goal
        self.goal = np.array(end, dtype=np.float64)

    def _keep_inside(self, parameters: InputParameter, approach: LimitApproach) -> None:
        """The plan within the joint range (see ``__init__``), or :class:`TrajectoryError`."""
        outside = approach.outside(*_extrema(self._trajectory))
        if not outside.any():
            return
        # Unsynchronised, a joint takes its own fastest profile: from a start that can stop
        # inside (start_inside), that brakes at once and stays in.
        parameters.per_dof_synchronization = [
            Synchronization.No if out else Synchronization.Time for out in outside.tolist()
        ]
        self._trajectory = _plan(parameters)
        lowest, highest = _extrema(self._trajectory)
        outside = approach.outside(lowest, highest)
        if outside.any():
            joints = np.flatnonzero(outside).tolist()
            raise TrajectoryError(
                f"no trajectory within the joint range for joint(s) at index {joints}: "
                f"extrema {lowest[outside].tolist()} .. {highest[outside].tolist()}, range "
                f"{approach.lower[outside].tolist()} .. {approach.upper[outside].tolist()}"
            )

    @classmethod
    def stop(
        cls, start_time: float, q0: FloatArray, v0: FloatArray, limits: JointLimits
    ) -> JerkLimitedTrajectory:
        """Come to rest from (q0, v0) with bounded deceleration and jerk."""
        return cls(start_time, q0, v0, q0, limits, stop=True)

    def sample(self, time: float) -> JointReference:
        t = time - self.start_time
        if t >= self.duration:
            zeros = np.zeros_like(self.goal)
            return JointReference(q=self.goal.copy(), v=zeros, a=zeros.copy())
        position, velocity, acceleration = self._trajectory.at_time(max(0.0, t))
        return JointReference(q=np.array(position), v=np.array(velocity), a=np.array(acceleration))

    def progress(self, time: float) -> float:
        """Fraction of the duration elapsed, 0..1."""
        if self.duration <= 0:
            return 1.0
        return float(np.clip((time - self.start_time) / self.duration, 0.0, 1.0))


def _extrema(trajectory: Trajectory) -> tuple[FloatArray, FloatArray]:
    """The lowest and highest position [rad | m] per joint over the whole trajectory."""
    extrema = trajectory.position_extrema
    return (
        np.array([extremum.min for extremum in extrema]),
        np.array([extremum.max for extremum in extrema]),
    )


def _plan(parameters: InputParameter) -> Trajectory:
    """Ruckig's trajectory for ``parameters``, or :class:`TrajectoryError`."""
    n = parameters.degrees_of_freedom
    trajectory = Trajectory(n)
    try:
        result = Ruckig(n).calculate(parameters, trajectory)
    except (ValueError, RuntimeError) as exc:  # a code the enum does not list, or a throw
        raise TrajectoryError(f"trajectory planner (Ruckig): {_planner_message(exc)}") from None
    if result not in (Result.Working, Result.Finished):
        raise TrajectoryError(f"no jerk-limited trajectory within the limits ({result})")
    return trajectory


def _planner_message(exc: Exception) -> str:
    """Ruckig's message for ``exc``, naming the error code where it is one it documents."""
    text = str(exc)
    match = re.match(r"(-?\d+) is not a valid Result", text)
    if match is not None:
        code = int(match.group(1))
        return f"error {code}: {RUCKIG_ERRORS.get(code, 'unknown error')}"
    return text
