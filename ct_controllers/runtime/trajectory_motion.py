"""A FollowJointTrajectory goal (or a ``~/joint_trajectory`` message) on the control thread: the
spline reference it samples every tick and the tolerance judgement ros2_controllers'
joint_trajectory_controller (Jazzy) makes every update.

The ROS layer checks the goal (:mod:`ct_controllers.references.trajectory_goal`) and posts a
:class:`TrajectoryPlan`: the waypoints of the goal's joints (model indices), when the trajectory
starts (``delay`` [s] after the tick that takes it in: a future ``header.stamp``), and the
resolved tolerances as arrays. The loop makes a :class:`TrajectoryMotion` of it at that tick,
from the *measured* state:

- **Start state.** The trajectory starts from the measured (q, v) of its joints, clipped into
  the joint range; a first waypoint at ``time_from_start`` 0 *is* the start (JTC) and is
  replaced by it — so a trajectory that preempts a moving arm does not jump to a position or a
  velocity it is not at. Segments take their degree from what both ends carry
  (:mod:`~ct_controllers.references.spline_trajectory`); when the arm is moving and the first
  waypoint it heads to carries no velocity, that waypoint is given the velocity of the segment
  after it (0 at the end), so that the first segment is the cubic from the measured velocity:
  bounded acceleration instead of a velocity step. At rest JTC's linear segment is kept. A lone
  waypoint at 0 (JTC would step to it) is reached over the time a jerk-limited move needs
  within the reference limits, stretched so that the quintic's peak speed stays within them.
- **Before the start** (a future stamp): a stop from the measured state with bounded
  deceleration (the reference limits), held until the start; the spline then starts from the
  state measured at that tick.
- **Judgement** every tick, errors = desired − measured of the trajectory's joints: before the
  last waypoint's time, a position or velocity error beyond the path tolerance ends it
  PATH_TOLERANCE_VIOLATED (the reference then holds the measured position, as JTC's hold);
  after it, every joint within its goal position tolerance and its speed within the goal
  velocity tolerance (JTC: ``stopped_velocity_tolerance``) ends it SUCCEEDED (the last waypoint
  is held); still outside ``goal_time`` [s] after the end (0 = no limit) ends it
  GOAL_TOLERANCE_VIOLATED (the measured position is held). A tolerance of 0 is not checked.

Units: times [s] on the hardware clock, positions [rad | m], velocities [rad/s | m/s].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.references.joint_trajectory import (
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)
from ct_controllers.references.spline_trajectory import SplineTrajectory, Waypoint

MOVING_SPEED = 1e-3  # [rad/s | m/s] a joint faster than this is moving (start segment: cubic)
# The quintic from rest to rest over T peaks at 1.875 times its mean speed: a lone waypoint's
# time is the jerk-limited move's time this many times over, so its peak stays within the
# limits the jerk-limited move keeps (its mean speed is at most the limit).
QUINTIC_PEAK_SPEED = 1.875

PATH_TOLERANCE_VIOLATED = "path_tolerance_violated"
GOAL_TOLERANCE_VIOLATED = "goal_tolerance_violated"


@dataclass(frozen=True)
class ToleranceArrays:
    """Per joint of a plan (its ``indices`` order): |error| allowed in position [rad | m] and
    velocity [rad/s | m/s]; 0 = not checked."""

    position: FloatArray
    velocity: FloatArray


@dataclass(frozen=True)
class TrajectoryPlan:
    """A checked trajectory for the loop: ``waypoints`` of ``joint_names`` (at model
    ``indices``, that order), starting ``delay`` [s] after the tick that takes it in, sampled with
    ``interpolation`` (splines | none), judged against ``path`` and ``goal`` tolerances, the
    goal within ``goal_time`` [s] after the end (0 = no limit)."""

    joint_names: tuple[str, ...]
    indices: np.ndarray
    waypoints: tuple[Waypoint, ...]
    delay: float
    interpolation: str
    path: ToleranceArrays
    goal: ToleranceArrays
    goal_time: float


@dataclass(frozen=True)
class Judgement:
    """How the trajectory stands after a tick: ``state`` None (running), ``"succeeded"``,
    :data:`PATH_TOLERANCE_VIOLATED` or :data:`GOAL_TOLERANCE_VIOLATED`; ``message`` names the
    joints and errors of a violation."""

    state: str | None
    message: str = ""


RUNNING_ON = Judgement(None)


class TrajectoryMotion:
    """One plan being followed (control thread; :attr:`spline` and :attr:`start_time` are set
    once, at the start, and may be read by other threads for feedback and queries)."""

    def __init__(
        self, plan: TrajectoryPlan, state: JointState, base: FloatArray, limits: JointLimits
    ) -> None:
        """``base``: the full reference [rad | m] the joints the plan does not move hold;
        ``limits``: the reference limits (range, speeds for the stop and a lone waypoint)."""
        self.plan = plan
        self.limits = limits
        self.base = np.array(base, dtype=np.float64)
        self.start_time = state.stamp + plan.delay
        self.spline: SplineTrajectory | None = None
        self._before_start: JerkLimitedTrajectory | None = None
        self._held: FloatArray | None = None  # the stop's end, before the start
        if plan.delay > 0.0:
            try:
                self._before_start = JerkLimitedTrajectory.stop(
                    state.stamp, state.q, state.v, limits
                )
            except TrajectoryError:
                self._held = limits.inside(state.q)
        else:
            self._begin(state)

    @property
    def duration(self) -> float:
        """[s] from the start to the last waypoint (0 before the start: not known yet)."""
        return 0.0 if self.spline is None else self.spline.duration

    def _begin(self, state: JointState) -> None:
        plan, indices = self.plan, self.plan.indices
        q = self.limits.inside(state.q)[indices]
        v = np.array(state.v[indices], dtype=np.float64)
        waypoints = list(plan.waypoints)
        if waypoints[0].time <= 0.0:
            if len(waypoints) == 1:  # a lone point "now": reached within the limits instead
                waypoints = [self._lone_waypoint(state, waypoints[0])]
            else:
                waypoints = waypoints[1:]  # the measured state is the start (replaces it)
        moving = bool(np.any(np.abs(v) > MOVING_SPEED))
        first = waypoints[0]
        if moving and first.velocities is None:
            following = waypoints[1] if len(waypoints) > 1 else None
            heading = (
                np.zeros_like(first.positions)
                if following is None
                else (following.positions - first.positions) / (following.time - first.time)
            )
            waypoints[0] = Waypoint(first.time, first.positions, heading, None)
        start = Waypoint(
            0.0, q, v if moving or first.velocities is not None else None, np.zeros_like(q)
        )
        spline = SplineTrajectory(start, waypoints, plan.interpolation)
        self.start_time = state.stamp  # at or after the planned start: from this state
        self.spline = spline  # last: a reader that sees the spline sees its start time

    def _lone_waypoint(self, state: JointState, point: Waypoint) -> Waypoint:
        goal = self.base.copy()
        goal[self.plan.indices] = point.positions
        try:
            move = JerkLimitedTrajectory(state.stamp, state.q, state.v, goal, self.limits)
            duration = max(move.duration * QUINTIC_PEAK_SPEED, 1e-3)
        except TrajectoryError:
            duration = 1.0  # (the goal's positions were checked inside the limits)
        zeros = np.zeros_like(point.positions)
        return Waypoint(duration, point.positions, zeros, zeros.copy())

    def sample(self, state: JointState) -> JointReference:
        """The full reference at ``state.stamp`` (starting the spline at the first tick at or
        after the start time)."""
        if self.spline is None and state.stamp >= self.start_time:
            self._begin(state)
        if self.spline is None:
            if self._before_start is not None:
                return self._before_start.sample(state.stamp)
            assert self._held is not None
            return JointReference.hold(self._held)
        sample = self.spline.sample(state.stamp - self.start_time)
        q = self.base.copy()
        v = np.zeros_like(q)
        a = np.zeros_like(q)
        indices = self.plan.indices
        q[indices] = sample.positions
        v[indices] = sample.velocities
        a[indices] = sample.accelerations
        return JointReference(q, v, a)

    def desired_at(self, time: float) -> JointReference | None:
        """The full reference [rad | m, /s, /s²] the spline gives at ``time`` [s, hardware
        clock], without starting anything (any thread); None before the spline starts or
        before ``time`` reaches it."""
        spline = self.spline
        if spline is None or time < self.start_time:
            return None
        sample = spline.sample(time - self.start_time)
        q, v, a = self.base.copy(), np.zeros_like(self.base), np.zeros_like(self.base)
        indices = self.plan.indices
        q[indices], v[indices], a[indices] = (
            sample.positions,
            sample.velocities,
            sample.accelerations,
        )
        return JointReference(q, v, a)

    def judge(self, state: JointState, reference: JointReference) -> Judgement:
        """The judgement of this tick (module docstring) from the measured state and the
        reference just sampled."""
        if self.spline is None:
            return RUNNING_ON
        indices = self.plan.indices
        position_error = reference.q[indices] - state.q[indices]
        velocity_error = reference.v[indices] - state.v[indices]
        since_end = state.stamp - self.start_time - self.spline.duration
        if since_end < 0.0:
            found = self._violations(self.plan.path, position_error, velocity_error)
            if found:
                return Judgement(PATH_TOLERANCE_VIOLATED, "path tolerance violated: " + found)
            return RUNNING_ON
        found = self._violations(self.plan.goal, position_error, velocity_error)
        if not found:
            return Judgement("succeeded")
        if 0.0 < self.plan.goal_time < since_end:
            return Judgement(
                GOAL_TOLERANCE_VIOLATED,
                f"goal tolerance not met {since_end:.3f} s after the trajectory's end "
                f"(goal_time {self.plan.goal_time:g} s): {found}",
            )
        return RUNNING_ON

    def goal(self) -> FloatArray:
        """The full position [rad | m] held once the trajectory ended."""
        q = self.base.copy()
        last = self.plan.waypoints[-1] if self.spline is None else self.spline.states[-1]
        q[self.plan.indices] = last.positions
        return q

    def measured_hold(self, state: JointState) -> FloatArray:
        """Where the reference holds after a violation: the measured positions of the
        trajectory's joints (inside the range), the others as they were."""
        q = self.base.copy()
        q[self.plan.indices] = self.limits.inside(state.q)[self.plan.indices]
        return q

    def _violations(
        self, tolerance: ToleranceArrays, position_error: FloatArray, velocity_error: FloatArray
    ) -> str:
        found = []
        for i, name in enumerate(self.plan.joint_names):
            for what, bound, error in (
                ("position", tolerance.position[i], position_error[i]),
                ("velocity", tolerance.velocity[i], velocity_error[i]),
            ):
                if bound > 0.0 and abs(error) > bound:
                    found.append(f"{name} {what} error {abs(error):.4g} > {bound:.4g}")
        return "; ".join(found[:4]) + (f" (+{len(found) - 4} more)" if len(found) > 4 else "")
