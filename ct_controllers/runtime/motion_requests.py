"""Joint motions on the control thread: the request checked at the boundary, the trajectory that
carries it out, its status and the statuses of recent motions.

A motion request moves named joints to positions [rad | m] over a duration [s] (0 = as fast as
the reference limits allow). :func:`checked_motion` validates it on the caller's thread; the loop
hands it to :class:`Motions` at a tick boundary, which plans a jerk-limited trajectory from the
measured state, samples it every tick and reports the motion's :class:`MotionStatus`: running,
then succeeded — or preempted by a newer request, canceled by a hold, failed (no trajectory
within the limits, a fault latched, or requested while faulted). :class:`MotionHistory` keeps
the latest status of the last ``MOTION_HISTORY`` motions for any thread to query by id.

Everything but :func:`checked_motion` and :meth:`Motions.status` runs on the control thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.model.robot import RobotModel, UnknownNameError
from ct_controllers.references.joint_trajectory import (
    MAX_DURATION,
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)
from ct_controllers.runtime.trajectory_motion import (
    GOAL_TOLERANCE_VIOLATED,
    PATH_TOLERANCE_VIOLATED,
    TrajectoryMotion,
    TrajectoryPlan,
)
from ct_controllers.text import name_few

RUNNING = "running"
SUCCEEDED = "succeeded"
PREEMPTED = "preempted"
CANCELED = "canceled"
FAILED = "failed"  # no trajectory within the reference limits; the arm holds
# A trajectory (FollowJointTrajectory) ended by its tolerances: the measured position is held.
TOLERANCE_VIOLATIONS = (PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED)
MOTION_HISTORY = 64  # motions whose latest status stays queryable by id (motion_status)


@dataclass(frozen=True)
class MotionStatus:
    """A joint motion's progress as the loop sees it; times [s] on the hardware clock."""

    motion_id: int
    state: str  # running | succeeded | preempted | canceled | failed | *_tolerance_violated
    start_time: float
    duration: float
    progress: float  # 0..1
    message: str = ""  # why it failed (the planner's message), else empty

    def moved_to(self, state: str, now: float) -> MotionStatus:
        """This motion in ``state`` at ``now`` [s]: progress = elapsed / duration, within 0..1
        (1 for a motion of no duration)."""
        elapsed = now - self.start_time
        progress = 1.0 if self.duration <= 0 else min(1.0, max(0.0, elapsed / self.duration))
        return MotionStatus(self.motion_id, state, self.start_time, self.duration, progress)


@dataclass(frozen=True)
class MotionRequest:
    """A checked request: move the joints at model ``indices`` to ``positions`` [rad | m] over
    ``duration`` [s] (0 = from the reference limits)."""

    motion_id: int
    indices: np.ndarray  # model indices of the named joints
    positions: FloatArray  # [rad | m]
    duration: float  # [s], 0 = from limits


@dataclass(frozen=True)
class TrajectoryRequest:
    """A checked trajectory (:class:`~ct_controllers.runtime.trajectory_motion.TrajectoryPlan`)
    with its motion id."""

    motion_id: int
    plan: TrajectoryPlan


class JointMotion(NamedTuple):
    """A joint motion checked against the robot (:func:`checked_motion`): the joints at model
    ``indices`` to ``positions`` [rad | m] over ``duration`` [s] (0 = from the reference
    limits). What the ROS layer hands the loop: names are mapped to model order once, here."""

    indices: np.ndarray  # model indices of the named joints
    positions: FloatArray  # [rad | m]
    duration: float  # [s]


def checked_motion(
    model: RobotModel,
    joint_names: Sequence[str],
    positions: Sequence[float] | FloatArray,
    duration: float,
) -> JointMotion:
    """The :class:`JointMotion` of a request by joint names, or ValueError naming the problem:
    unknown/duplicate joint, length, non-finite, outside the joint limits, duration outside
    [0, MAX_DURATION]."""
    names = list(joint_names)
    if len(names) > model.nv:  # before anything that scales with the request
        raise ValueError(f"{len(names)} joint names; the robot has {model.nv} joints")
    values = np.array(positions, dtype=np.float64).reshape(-1)
    if len(names) != values.size:
        raise ValueError(f"{len(names)} joint names but {values.size} positions")
    try:
        indices = model.indices(names)  # unknown / duplicate names raise here
    except UnknownNameError as exc:  # a KeyError; this function promises ValueError
        raise ValueError(str(exc)) from None
    if not np.all(np.isfinite(values)):
        raise ValueError(f"non-finite position in {values.tolist()}")
    if not (np.isfinite(duration) and 0 <= duration <= MAX_DURATION):
        raise ValueError(f"duration must be within [0, {MAX_DURATION:g}] s, got {duration}")
    lower, upper = model.limits.lower[indices], model.limits.upper[indices]
    outside = [
        f"{n}={v:.4g} not in [{lo:.4g}, {hi:.4g}]"
        for n, v, lo, hi in zip(names, values, lower, upper, strict=True)
        if not lo <= v <= hi
    ]
    if outside:
        raise ValueError("position outside the joint limits: " + name_few(outside))
    return JointMotion(indices, values, float(duration))


class MotionHistory:
    """The latest status of the last ``size`` motions by id, oldest forgotten first, so that a
    motion replaced by a newer request can still be seen as PREEMPTED. Thread-safe."""

    def __init__(self, size: int = MOTION_HISTORY) -> None:
        self.size = size
        self._statuses: dict[int, MotionStatus] = {}
        self._lock = threading.Lock()

    def record(self, status: MotionStatus) -> None:
        with self._lock:
            self._statuses[status.motion_id] = status
            while len(self._statuses) > self.size:
                del self._statuses[next(iter(self._statuses))]  # the oldest

    def get(self, motion_id: int) -> MotionStatus | None:
        with self._lock:
            return self._statuses.get(motion_id)


class Motions:
    """The joint reference the loop tracks when no fault is latched: a trajectory being
    followed, else a hold; and the current motion's status (control thread only).

    Before any motion the reference holds the first measured position. A trajectory's goal is
    held once it ends; a stop (:meth:`stop`) comes to rest with bounded deceleration and holds
    where it ends. With a limit approach in ``limits`` every reference stays inside the joint
    range whatever the measured state: plans start from it clipped into the range
    (:class:`~ct_controllers.references.joint_trajectory.JerkLimitedTrajectory`), and a held
    position is clipped into it."""

    def __init__(self, limits: JointLimits) -> None:
        self.limits = limits  # reference limits: velocity, acceleration, jerk per joint
        self.history = MotionHistory()
        self._trajectory: JerkLimitedTrajectory | None = None
        self._following: TrajectoryMotion | None = None  # a FollowJointTrajectory's
        self._last_following: TrajectoryMotion | None = None  # the latest one (queries)
        self._reference: JointReference | None = None  # held when no trajectory runs
        self._motion: MotionStatus | None = None

    @property
    def trajectory(self) -> JerkLimitedTrajectory | None:
        """The trajectory being followed (a motion's or a stop's), None while holding."""
        return self._trajectory

    @property
    def following(self) -> TrajectoryMotion | None:
        """The latest trajectory (FollowJointTrajectory) started, running or ended — its spline
        and start time, for feedback and state queries (any thread: they do not change once
        set)."""
        return self._last_following

    @property
    def current(self) -> MotionStatus | None:
        """The latest motion's status (None before the first)."""
        return self._motion

    def status(self, motion_id: int) -> MotionStatus | None:
        """The latest status of a recent motion; None if not started or long forgotten. Any
        thread."""
        return self.history.get(motion_id)

    def reference(self, state: JointState) -> JointReference:
        """The reference at ``state.stamp``: the trajectory's sample (the motion's status
        advanced: running, or succeeded at its end, whose goal is then held), else the hold."""
        following = self._following
        if following is not None:
            return self._follow(following, state)
        trajectory = self._trajectory
        if trajectory is None:
            if self._reference is None:  # the first measured state: hold it (inside the range)
                self._reference = JointReference.hold(self.limits.inside(state.q))
            return self._reference
        reference = trajectory.sample(state.stamp)
        finished = trajectory.progress(state.stamp) >= 1.0
        if self._motion is not None and self._motion.state == RUNNING:  # not a stop
            self._set(self._motion.moved_to(SUCCEEDED if finished else RUNNING, state.stamp))
        if finished:
            self._reference = JointReference.hold(trajectory.goal)
            self._trajectory = None
        return reference

    def _follow(self, following: TrajectoryMotion, state: JointState) -> JointReference:
        """The trajectory's reference this tick and its judgement: running on, succeeded (its
        last waypoint held), or a tolerance violated (the measured position held)."""
        reference = following.sample(state)
        judgement = following.judge(state, reference)
        motion = self._motion
        assert motion is not None
        if judgement.state is None:
            if following.spline is not None and motion.duration != following.duration:
                motion = MotionStatus(
                    motion.motion_id, RUNNING, following.start_time, following.duration, 0.0
                )
            self._set(motion.moved_to(RUNNING, state.stamp))
            return reference
        self._following = None
        if judgement.state == SUCCEEDED:
            self._set(motion.moved_to(SUCCEEDED, state.stamp))
            self._reference = JointReference.hold(following.goal())
            return reference
        ended = motion.moved_to(judgement.state, state.stamp)
        self._set(
            MotionStatus(
                ended.motion_id,
                judgement.state,
                ended.start_time,
                ended.duration,
                ended.progress,
                judgement.message,
            )
        )
        self.hold(following.measured_hold(state))
        assert self._reference is not None
        return self._reference

    def start_trajectory(self, request: TrajectoryRequest, state: JointState) -> None:
        """Preempt a running motion and follow ``request``'s trajectory from the measured
        state; the joints it does not move keep their held reference."""
        self._end_running(PREEMPTED, state.stamp)
        base = self._reference.q if self._reference is not None else state.q
        following = TrajectoryMotion(request.plan, state, self.limits.inside(base), self.limits)
        self._trajectory = None
        self._following = self._last_following = following
        self._set(
            MotionStatus(request.motion_id, RUNNING, following.start_time, following.duration, 0.0)
        )

    def stop(self, state: JointState) -> None:
        """Cancel a running motion; come to rest from the measured state with bounded
        deceleration and hold where the stop ends (at once, if no stop fits the limits)."""
        self._end_running(CANCELED, state.stamp)
        self._following = None
        try:
            self._trajectory = JerkLimitedTrajectory.stop(
                state.stamp, state.q, state.v, self.limits
            )
            self._reference = JointReference.hold(self._trajectory.goal)
        except TrajectoryError:
            self.hold(state.q)

    def start(self, request: MotionRequest, state: JointState) -> None:
        """Preempt a running motion and plan ``request`` from the measured state; the joints it
        does not name keep their held reference. No trajectory within the limits: the motion
        FAILED with the planner's message, and the measured position is held. Another exception
        from the planner propagates (the loop latches a fault)."""
        self._end_running(PREEMPTED, state.stamp)
        self._following = None
        goal = (self._reference.q if self._reference is not None else state.q).copy()
        goal[request.indices] = request.positions
        try:
            self._trajectory = JerkLimitedTrajectory(
                state.stamp, state.q, state.v, goal, self.limits, request.duration
            )
        except TrajectoryError as exc:
            self.hold(state.q)
            self._set(MotionStatus(request.motion_id, FAILED, state.stamp, 0.0, 0.0, str(exc)))
            return
        self._set(
            MotionStatus(request.motion_id, RUNNING, state.stamp, self._trajectory.duration, 0.0)
        )

    def refuse(self, request: MotionRequest | TrajectoryRequest, now: float) -> None:
        """``request`` does not start (a fault is latched): FAILED at ``now`` [s]."""
        self._set(MotionStatus(request.motion_id, FAILED, now, 0.0, 0.0))

    def abort(self, now: float, hold: FloatArray) -> None:
        """A fault was latched at ``now`` [s]: a running motion FAILED, no trajectory, and the
        reference holds ``hold`` [rad | m] (where the fault reaction ends)."""
        self._end_running(FAILED, now)
        self.hold(hold)

    def hold(self, q: FloatArray) -> None:
        """Follow no trajectory; hold ``q`` [rad | m] clipped into the joint range (of the
        reference limits' approach)."""
        self._trajectory = None
        self._following = None
        self._reference = JointReference.hold(self.limits.inside(q))

    def _end_running(self, state: str, now: float) -> None:
        if self._motion is not None and self._motion.state == RUNNING:
            self._set(self._motion.moved_to(state, now))

    def _set(self, status: MotionStatus) -> None:
        self._motion = status
        self.history.record(status)
