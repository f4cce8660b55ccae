"""The fixed-rate control loop: read → controller → limiter → write, in its own thread.

The loop is the only writer of hardware commands. Other threads talk to it through
:meth:`ControlLoop.request_motion` / :meth:`ControlLoop.hold` (picked up at the next tick
boundary) and read :meth:`ControlLoop.snapshot` (immutable copies, refreshed every
``snapshot_decimation`` ticks).

Modes: ``lockstep`` runs ticks back to back (the sim backend advances one period per write);
``paced`` sleeps to a fixed schedule on the monotonic clock. A tick that starts later than
``overrun_fraction`` of a period after its scheduled time, or whose compute time exceeds the
period, is an overrun; when the loop falls a whole period behind, the schedule is re-based (ticks
are skipped, not bunched) and that is counted too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ct_controllers.controllers.controller import Controller, FloatArray, JointReference, JointState
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.controllers.safe_hold import safe_hold_effort
from ct_controllers.hardware.interface import EFFORT, POSITION, JointCommand, SystemInterface
from ct_controllers.model.robot import RobotModel, UnknownNameError
from ct_controllers.references.joint_trajectory import (
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)
from ct_controllers.runtime.timing import TimingRecorder, TimingSummary

RUNNING = "running"
SUCCEEDED = "succeeded"
PREEMPTED = "preempted"
CANCELED = "canceled"
FAILED = "failed"  # no trajectory within the reference limits; the arm holds

MOTION_HISTORY = 64  # motions whose latest status stays queryable by id (motion_status)


@dataclass(frozen=True)
class MotionStatus:
    """A joint motion's progress as the loop sees it; times [s] on the hardware clock."""

    motion_id: int
    state: str  # running | succeeded | preempted | canceled | failed
    start_time: float
    duration: float
    progress: float  # 0..1


@dataclass(frozen=True)
class LoopSnapshot:
    """An immutable copy of the loop's latest state, all vectors in model joint order."""

    tick: int
    stamp: float  # [s] measurement time of the state
    joint_names: tuple[str, ...]
    position: FloatArray  # [rad | m]
    velocity: FloatArray  # [rad/s | m/s]
    measured_effort: FloatArray  # [N·m | N]
    reference_position: FloatArray  # [rad | m]
    commanded_effort: FloatArray  # [N·m | N], after the limiter
    saturated: np.ndarray  # limiter changed this joint on that tick
    motion: MotionStatus | None
    fault: str | None


@dataclass(frozen=True)
class _MotionRequest:
    motion_id: int
    indices: np.ndarray  # model indices of the named joints
    positions: FloatArray  # [rad | m]
    duration: float  # [s], 0 = from limits


class ControlLoop:
    def __init__(
        self,
        hardware: SystemInterface,
        model: RobotModel,
        controller: Controller,
        limiter: CommandLimiter,
        period: float = 0.001,
        paced: bool = False,
        hold_damping: FloatArray | None = None,
        reference_limits: JointLimits | None = None,
        snapshot_decimation: int = 10,
        overrun_fraction: float = 0.5,
    ) -> None:
        if not period > 0:
            raise ValueError(f"period must be positive, got {period}")
        self.hardware = hardware
        self.model = model
        self.controller = controller
        self.limiter = limiter
        self.period = period
        self.paced = paced
        # hardware order -> model order: q_model[self._model_index] = q_hardware
        self._model_index = model.indices(hardware.joint_names)
        missing = sorted(set(model.joint_names) - set(hardware.joint_names))
        if missing:
            raise ValueError(f"model joint(s) not driven by the hardware: {', '.join(missing)}")
        self._interfaces = tuple(hardware.command_interfaces)
        self._position_mask = np.array([i == POSITION for i in self._interfaces])
        if any(i not in (EFFORT, POSITION) for i in self._interfaces):
            raise ValueError(f"unsupported command interfaces {self._interfaces}")
        self.hold_damping = (
            np.array(hold_damping, dtype=np.float64)
            if hold_damping is not None
            else np.full(model.nv, 5.0)
        )
        # Default reference limits: half the URDF velocity, 3 rad/s², 30 rad/s³.
        self.reference_limits = reference_limits or JointLimits(
            velocity=model.limits.velocity * 0.5,
            acceleration=np.full(model.nv, 3.0),
            jerk=np.full(model.nv, 30.0),
        )
        self.snapshot_decimation = max(1, snapshot_decimation)
        self.overrun_fraction = overrun_fraction
        self.timing = TimingRecorder()

        self._sequence = 0
        self._trajectory: JerkLimitedTrajectory | None = None
        self._reference: JointReference | None = None
        self._motion: MotionStatus | None = None
        # Latest status of recent motions by id, so that one replaced by a newer request can
        # still be seen as PREEMPTED (the snapshot only shows the current motion).
        self._motion_history: dict[int, MotionStatus] = {}
        self._history_lock = threading.Lock()
        self._pending: _MotionRequest | None = None
        self._hold_requested = False
        self._reset_requested = False
        self._pending_controller: Controller | None = None
        self._request_lock = threading.Lock()
        self._next_motion_id = 1
        self._snapshot: LoopSnapshot | None = None
        self._snapshot_ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.fault: str | None = None

    # --- requests from other threads -------------------------------------------------------
    def request_motion(
        self,
        joint_names: Sequence[str],
        positions: Sequence[float] | FloatArray,
        duration: float = 0.0,
    ) -> int:
        """Queue a move of the named joints to ``positions`` [rad | m] over ``duration`` [s]
        (0 = as fast as the reference limits allow). Starts at the next tick from the measured
        state and preempts any running motion. Returns the motion id.

        Raises ValueError naming the problem (unknown/duplicate joint, length, non-finite,
        out of limits); nothing changes in that case.
        """
        names = list(joint_names)
        values = np.array(positions, dtype=np.float64).reshape(-1)
        if len(names) != values.size:
            raise ValueError(f"{len(names)} joint names but {values.size} positions")
        try:
            indices = self.model.indices(names)  # unknown / duplicate names raise here
        except UnknownNameError as exc:  # a KeyError; this method promises ValueError
            raise ValueError(str(exc)) from None
        if not np.all(np.isfinite(values)):
            raise ValueError(f"non-finite position in {values.tolist()}")
        if not (np.isfinite(duration) and duration >= 0):
            raise ValueError(f"duration must be finite and >= 0, got {duration}")
        lower, upper = self.model.limits.lower[indices], self.model.limits.upper[indices]
        outside = [
            f"{n}={v:.4g} not in [{lo:.4g}, {hi:.4g}]"
            for n, v, lo, hi in zip(names, values, lower, upper, strict=True)
            if not lo <= v <= hi
        ]
        if outside:
            raise ValueError("position outside the joint limits: " + "; ".join(outside))
        with self._request_lock:
            motion_id = self._next_motion_id
            self._next_motion_id += 1
            self._pending = _MotionRequest(motion_id, indices, values, float(duration))
        return motion_id

    def hold(self) -> None:
        """Stop any motion and hold the measured position from the next tick on."""
        with self._request_lock:
            self._pending = None
            self._hold_requested = True

    def switch_controller(self, controller: Controller) -> None:
        """Run ``controller`` from the next tick on (bumpless: the reference is kept, and the
        limiter's rate limit smooths the effort step). Any thread."""
        with self._request_lock:
            self._pending_controller = controller

    def motion_status(self, motion_id: int) -> MotionStatus | None:
        """The latest status of a motion the loop has started (running, succeeded, preempted
        or canceled); None if it has not started yet or is long forgotten. Any thread."""
        with self._history_lock:
            return self._motion_history.get(motion_id)

    # --- the tick --------------------------------------------------------------------------
    def tick(self) -> None:
        sample = self.hardware.read()
        q = np.empty(self.model.nq)
        v = np.empty(self.model.nv)
        q[self._model_index] = sample.position
        v[self._model_index] = sample.velocity
        state = JointState(stamp=sample.stamp, q=q, v=v)
        self._take_requests(state)
        reference = self._current_reference(state)

        def fallback() -> FloatArray:
            return safe_hold_effort(self.model, q, v, self.hold_damping)

        if self.fault is None:
            try:
                requested = self.controller.update(state, reference, self.period)
            except Exception as exc:  # a controller bug must not leave the arm uncommanded
                self._latch_fault(f"controller raised {type(exc).__name__}: {exc}", state)
                requested = fallback()
        else:
            requested = fallback()  # latched: safe hold until reset_fault()
        limited = self.limiter.limit(requested, fallback, self.period)
        values = limited.effort[self._model_index]
        if self._position_mask.any():
            targets = np.clip(reference.q, self.model.limits.lower, self.model.limits.upper)
            values = np.where(self._position_mask, targets[self._model_index], values)
        self._sequence += 1
        self.hardware.write(
            JointCommand(
                stamp=sample.stamp,
                sequence=self._sequence,
                joint_names=self.hardware.joint_names,
                interfaces=self._interfaces,
                values=values,
            )
        )
        if self.timing.ticks % self.snapshot_decimation == 0:
            self._publish(
                sample.effort,
                state,
                reference,
                limited.effort,
                limited.saturated | limited.rate_limited | limited.non_finite,
            )

    def _latch_fault(self, reason: str, state: JointState) -> None:
        """Enter safe hold (g(q) − D v from the measured state) until :meth:`reset_fault`; a
        running motion ends FAILED."""
        self.fault = reason
        if self._motion is not None and self._motion.state == RUNNING:
            self._set_motion(self._status(self._motion, FAILED, state.stamp))
        self._trajectory = None
        self._reference = JointReference.hold(state.q)

    def reset_fault(self) -> None:
        """Leave safe hold at the next tick, holding the position measured then."""
        with self._request_lock:
            self._reset_requested = True

    def _take_requests(self, state: JointState) -> None:
        with self._request_lock:
            pending, self._pending = self._pending, None
            hold, self._hold_requested = self._hold_requested, False
            reset, self._reset_requested = self._reset_requested, False
            controller, self._pending_controller = self._pending_controller, None
        if controller is not None:
            self.controller = controller
        if reset and self.fault is not None:
            self.fault = None
            self._trajectory = None
            self._reference = JointReference.hold(state.q)
        if self.fault is not None:
            if pending is not None:  # no motion starts from a fault
                self._set_motion(MotionStatus(pending.motion_id, FAILED, state.stamp, 0.0, 0.0))
            return
        if self._reference is None:
            self._reference = JointReference.hold(state.q)
        if hold:
            if self._motion is not None and self._motion.state == RUNNING:
                self._set_motion(self._status(self._motion, CANCELED, state.stamp))
            # Come to rest with bounded deceleration, then hold where the stop ends.
            try:
                self._trajectory = JerkLimitedTrajectory.stop(
                    state.stamp, state.q, state.v, self.reference_limits
                )
                self._reference = JointReference.hold(self._trajectory.goal)
            except TrajectoryError:
                self._trajectory = None
                self._reference = JointReference.hold(state.q)
        if pending is not None:
            if self._motion is not None and self._motion.state == RUNNING:
                self._set_motion(self._status(self._motion, PREEMPTED, state.stamp))
            goal = self._reference.q.copy()
            goal[pending.indices] = pending.positions
            try:
                self._trajectory = JerkLimitedTrajectory(
                    state.stamp, state.q, state.v, goal, self.reference_limits, pending.duration
                )
            except TrajectoryError:
                self._trajectory = None
                self._reference = JointReference.hold(state.q)
                self._set_motion(MotionStatus(pending.motion_id, FAILED, state.stamp, 0.0, 0.0))
                return
            self._set_motion(
                MotionStatus(
                    pending.motion_id, RUNNING, state.stamp, self._trajectory.duration, 0.0
                )
            )

    def _current_reference(self, state: JointState) -> JointReference:
        if self._trajectory is None:
            assert self._reference is not None
            return self._reference
        reference = self._trajectory.sample(state.stamp)
        finished = self._trajectory.progress(state.stamp) >= 1.0
        if self._motion is not None and self._motion.state == RUNNING:  # not a stop
            self._set_motion(
                self._status(self._motion, SUCCEEDED if finished else RUNNING, state.stamp)
            )
        if finished:
            self._reference = JointReference.hold(self._trajectory.goal)
            self._trajectory = None
        return reference

    def _set_motion(self, status: MotionStatus) -> None:
        self._motion = status
        with self._history_lock:
            self._motion_history[status.motion_id] = status
            while len(self._motion_history) > MOTION_HISTORY:
                del self._motion_history[next(iter(self._motion_history))]  # the oldest

    def _status(self, motion: MotionStatus, new_state: str, now: float) -> MotionStatus:
        elapsed = now - motion.start_time
        progress = 1.0 if motion.duration <= 0 else min(1.0, max(0.0, elapsed / motion.duration))
        return MotionStatus(
            motion.motion_id, new_state, motion.start_time, motion.duration, progress
        )

    def _publish(
        self,
        measured_effort: FloatArray,
        state: JointState,
        reference: JointReference,
        effort: FloatArray,
        saturated: np.ndarray,
    ) -> None:
        measured = np.empty(self.model.nv)
        measured[self._model_index] = measured_effort
        snapshot = LoopSnapshot(
            tick=self.timing.ticks,
            stamp=state.stamp,
            joint_names=self.model.joint_names,
            position=state.q,
            velocity=state.v,
            measured_effort=measured,
            reference_position=np.array(reference.q),
            commanded_effort=np.array(effort),
            saturated=np.array(saturated),
            motion=self._motion,
            fault=self.fault,
        )
        with self._snapshot_ready:
            self._snapshot = snapshot
            self._snapshot_ready.notify_all()

    def snapshot(self) -> LoopSnapshot | None:
        return self._snapshot

    def wait_for_snapshot(self, after_tick: int = -1, timeout: float = 1.0) -> LoopSnapshot | None:
        """Block until a snapshot newer than ``after_tick`` exists (or timeout)."""
        with self._snapshot_ready:
            self._snapshot_ready.wait_for(
                lambda: self._snapshot is not None and self._snapshot.tick > after_tick, timeout
            )
            return self._snapshot

    # --- running ---------------------------------------------------------------------------
    def run_ticks(self, count: int) -> None:
        """Run ``count`` ticks on the calling thread (paced or not), recording timing."""
        scheduled = time.perf_counter()
        for _ in range(count):
            scheduled = self._one_timed_tick(scheduled)

    def _one_timed_tick(self, scheduled: float) -> float:
        if self.paced:
            _sleep_until(scheduled)
        start = time.perf_counter()
        if not self.paced:
            scheduled = start
        self.tick()
        compute = time.perf_counter() - start
        late = start - scheduled
        overrun = late > self.overrun_fraction * self.period or compute > self.period
        self.timing.record(start, scheduled, compute, overrun)
        following = scheduled + self.period
        if self.paced and time.perf_counter() > following + self.period:
            following = time.perf_counter()  # fell a whole period behind: re-base, do not bunch
        return following

    def start(self) -> None:
        """Run the loop in its own thread until :meth:`stop`."""
        if self._thread is not None:
            raise RuntimeError("control loop already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ct-control-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        scheduled = time.perf_counter()
        while not self._stop.is_set():
            try:
                scheduled = self._one_timed_tick(scheduled)
            except Exception as exc:
                self.fault = f"control loop stopped: {type(exc).__name__}: {exc}"
                raise

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def timing_summary(self) -> TimingSummary:
        return self.timing.summary()


def _sleep_until(deadline: float) -> None:
    """Sleep most of the way, then spin the last 200 µs (sleep overshoots by ~50-100 µs)."""
    remaining = deadline - time.perf_counter()
    if remaining > 2e-4:
        time.sleep(remaining - 2e-4)
    while time.perf_counter() < deadline:
        pass
