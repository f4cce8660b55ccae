"""The fixed-rate control loop: read → controller → limiter → write, in its own thread.

Each tick the controller returns efforts and the full joint reference it tracked
(:class:`~ct_controllers.controllers.controller.ControlOutput`): joints on the effort interface
are sent the limited effort (the limiter is the last step before the write), joints on the
position interface the reference's q*, within the joint limits and rate-limited to the URDF
velocity (:meth:`ControlLoop._hardware_values`); the interfaces may be mixed, joint by joint.
A controller may also bound what the drives of position joints push with (a gripper's grip
force: ``ControlOutput.effort_limit``); the loop hands a changed limit to the backend
(``SystemInterface.set_effort_limit``) on its own thread, just before the write
(:meth:`ControlLoop._apply_effort_limits`).

The loop is the only writer of hardware commands. Other threads talk to it through
:meth:`ControlLoop.request_motion` / :meth:`ControlLoop.hold` (picked up at the next tick
boundary) and read :meth:`ControlLoop.snapshot` (immutable copies, refreshed every
``snapshot_decimation`` ticks).

Every state sample passes the hardware's boundary guard before anything uses it; a rejected or
repeated sample never reaches a controller (the previous command is written again, a zero-order
hold, until the watchdog's state deadline). The watchdog (on by default, on the hardware clock)
latches a fault when no fresh state arrives for ``state_timeout`` or no command was written for
``command_timeout`` (the loop itself stalled); a fault the backend reports (drive FAULT, lost
heartbeat) or an exception anywhere in a tick (a controller, a planner, the limiter, a backend's
write: :meth:`ControlLoop.tick` names the stage) latches one too: the loop thread never dies of
an exception. A latched fault applies the configured
reaction (:mod:`ct_controllers.runtime.fault_reaction`) from the last *measured* state, records
the time from the fault to the first safe command, and lasts until :meth:`ControlLoop.reset_fault`
with fresh data flowing. Faulted without fresh state for ``state_timeout``, the loop has nothing
to compute a reaction from: it then has drives that offer it quick stop (or disable) on their own
feedback. Should the thread still end (a ``BaseException``, or a bug in this module), the loop
says so (:attr:`ControlLoop.running` False, :attr:`ControlLoop.stopped_reason`, the fault), wakes
every waiter, asks the drives for their own stop, and :meth:`ControlLoop.reset_fault_and_wait`
starts a new thread from the measured state.

Modes: ``lockstep`` runs ticks back to back (the sim backend advances one period per write);
``paced`` sleeps to a fixed schedule on the monotonic clock (with one extra tick just after
the state deadline while the state is stale: :meth:`ControlLoop._deadline_wake`). A tick that
starts later than ``overrun_fraction`` of a period after its scheduled time, or whose compute
time exceeds the period, is an overrun; when the loop falls a whole period behind, the schedule
is re-based (ticks are skipped, not bunched) and that is counted too.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ct_controllers.controllers.controller import Controller, FloatArray, JointReference, JointState
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.controllers.safe_hold import safe_hold_effort
from ct_controllers.hardware.guard import BoundaryGuard, GuardResult
from ct_controllers.hardware.interface import (
    DAMP,
    DISABLE,
    EFFORT,
    FAULT_REACTIONS,
    POSITION,
    QUICK_STOP,
    JointCommand,
    LifecycleState,
    StateSample,
    SystemInterface,
)
from ct_controllers.hardware.watchdog import Watchdog, WatchdogConfig
from ct_controllers.model.robot import RobotModel, UnknownNameError
from ct_controllers.references.joint_trajectory import (
    MAX_DURATION,
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)
from ct_controllers.runtime.fault_reaction import FaultReaction
from ct_controllers.runtime.realtime import (
    RealtimeReport,
    RealtimeSettings,
    apply_to_current_thread,
)
from ct_controllers.runtime.timing import (
    StageRecorder,
    TimingRecorder,
    TimingSummary,
    is_overrun,
    next_start,
    sleep_until,
)
from ct_controllers.text import name_few

LOG = logging.getLogger("ct_controllers")

RUNNING = "running"
SUCCEEDED = "succeeded"
PREEMPTED = "preempted"
CANCELED = "canceled"
FAILED = "failed"  # no trajectory within the reference limits; the arm holds
CONSECUTIVE_ERRORS_BEFORE_BACKOFF = 10  # failing ticks in a row before the loop sleeps a period
DEADLINE_WAKE_MARGIN = 1e-4  # [s] a tick woken for the state deadline comes this long after it

# The stages the loop times, in the order they run; task, diff_ik and joint_controller are the
# parts of "controller" that a chained controller reports (its ``stage_breakdown``).
STAGES = ("read", "guard", "controller", "task", "diff_ik", "joint_controller", "limiter", "write")
MOTION_HISTORY = 64  # motions whose latest status stays queryable by id (motion_status)


@dataclass(frozen=True)
class MotionStatus:
    """A joint motion's progress as the loop sees it; times [s] on the hardware clock."""

    motion_id: int
    state: str  # running | succeeded | preempted | canceled | failed
    start_time: float
    duration: float
    progress: float  # 0..1
    message: str = ""  # why it failed (the planner's message), else empty


@dataclass(frozen=True)
class FaultRecord:
    """One latched fault, times [s] on the hardware clock.

    origin   when the fault began as far as the loop can tell: the last fresh state for a state
             timeout, the last written command for a command timeout, else the detection tick
    detected the tick that latched it
    first_safe_command  when the first command of the fault reaction was written (None until)
    """

    reason: str
    reaction: str
    origin: float
    detected: float
    first_safe_command: float | None = None

    @property
    def reaction_time(self) -> float | None:
        """[s] from the fault (origin) to the first safe command."""
        if self.first_safe_command is None:
            return None
        return self.first_safe_command - self.origin


@dataclass(frozen=True)
class LoopSnapshot:
    """An immutable copy of the loop's latest state, all vectors in model joint order."""

    tick: int
    stamp: float  # [s] measurement time of the state
    joint_names: tuple[str, ...]
    position: FloatArray  # [rad | m]
    velocity: FloatArray  # [rad/s | m/s]
    measured_effort: FloatArray  # [N·m | N] as the backend measured it (NaN: not measured)
    reference_position: FloatArray  # [rad | m] q* the controller tracked (a chain's own)
    commanded_effort: FloatArray  # [N·m | N], after the limiter
    # Changed on that tick: by the effort limiter (effort joints) or the position target's
    # step limit or non-finite fallback (position joints).
    saturated: np.ndarray
    motion: MotionStatus | None
    fault: str | None
    state_fresh: bool = True  # this tick's sample was accepted by the guard and new
    guard_rejections: Mapping[str, int] = field(default_factory=dict)  # "state.stale" -> count
    fault_record: FaultRecord | None = None  # the latched (or last) fault


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
        watchdog: WatchdogConfig | None = None,
        fault_reaction: str = DAMP,
        realtime: RealtimeSettings | None = None,
    ) -> None:
        """``watchdog`` None = on, with 3 control periods for both deadlines;
        ``fault_reaction``: damp (default) | hold | quick_stop | disable (the last two only for
        hardware that offers them); ``realtime``: scheduling of the loop thread (None = SCHED_FIFO
        priority 50), applied when the loop keeps a period (paced, or a backend whose read waits
        for the bus cycle) — a free-running lockstep loop never sleeps, and a real-time priority
        would only starve the rest of the machine."""
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
        self._any_position = bool(self._position_mask.any())
        self._position_joints = np.zeros(model.nv, dtype=bool)  # the same, in model order
        self._position_joints[self._model_index] = self._position_mask
        # [rad | m] per period: the most a position target moves in one tick (URDF velocity).
        self.position_step = model.limits.velocity * period
        self._position_targets: FloatArray | None = None  # last written, model order
        self._no_position_flags = np.zeros(model.nv, dtype=bool)
        self._no_position_flags.setflags(write=False)
        self._position_step_limited: np.ndarray = self._no_position_flags
        # [N·m | N] the effort limits handed to the backend, model order, NaN = its default.
        self._effort_limits = np.full(model.nv, np.nan)
        self._effort_limits_asked: FloatArray | None = None  # the controller's last array
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
        self.stages = StageRecorder(stages=STAGES)
        if fault_reaction not in FAULT_REACTIONS:
            raise ValueError(
                f"unknown fault reaction '{fault_reaction}' (known: {', '.join(FAULT_REACTIONS)})"
            )
        if fault_reaction not in hardware.fault_reactions:
            raise ValueError(
                f"fault reaction '{fault_reaction}' is not offered by {hardware.backend_name} "
                f"(offers: {', '.join(hardware.fault_reactions)})"
            )
        self.fault_reaction = fault_reaction
        self.realtime = realtime if realtime is not None else RealtimeSettings()
        self.realtime_report: RealtimeReport | None = None  # set when the loop thread starts
        self.guard: BoundaryGuard = hardware.guard
        self.watchdog = Watchdog(watchdog or WatchdogConfig.for_period(period))
        self._watchdog_started = False
        self._last_state: JointState | None = None  # the last accepted, fresh state (model order)
        self._last_values: np.ndarray | None = None  # the last written command (hardware order)
        self._reaction: FaultReaction | None = None
        self._escalated: str | None = None  # drive-level reaction applied for lack of state
        self.fault_record: FaultRecord | None = None
        self.faults: list[FaultRecord] = []  # every fault latched, oldest first
        self.reset_refused: str = ""  # why the last reset_fault() did not clear the fault
        self.stale_ticks = 0  # ticks without a fresh sample (rejected or repeated)

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
        self._reset_done = threading.Condition()
        self._resets_processed = 0
        self._pending_controller: Controller | None = None
        self._request_lock = threading.Lock()
        self._next_motion_id = 1
        self._snapshot: LoopSnapshot | None = None
        self._snapshot_ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._schedule: float | None = None  # next scheduled tick of run_ticks [perf_counter s]
        self._stop = threading.Event()
        self.fault: str | None = None
        self._stage = "read"  # the stage the tick is in, named by a fault if it raises
        self._consecutive_errors = 0  # ticks in a row that raised
        self.stopped_reason: str | None = None  # why the loop thread ended, if not stop()

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
        if len(names) > self.model.nv:  # before anything that scales with the request
            raise ValueError(f"{len(names)} joint names; the robot has {self.model.nv} joints")
        values = np.array(positions, dtype=np.float64).reshape(-1)
        if len(names) != values.size:
            raise ValueError(f"{len(names)} joint names but {values.size} positions")
        try:
            indices = self.model.indices(names)  # unknown / duplicate names raise here
        except UnknownNameError as exc:  # a KeyError; this method promises ValueError
            raise ValueError(str(exc)) from None
        if not np.all(np.isfinite(values)):
            raise ValueError(f"non-finite position in {values.tolist()}")
        if not (np.isfinite(duration) and 0 <= duration <= MAX_DURATION):
            raise ValueError(f"duration must be within [0, {MAX_DURATION:g}] s, got {duration}")
        lower, upper = self.model.limits.lower[indices], self.model.limits.upper[indices]
        outside = [
            f"{n}={v:.4g} not in [{lo:.4g}, {hi:.4g}]"
            for n, v, lo, hi in zip(names, values, lower, upper, strict=True)
            if not lo <= v <= hi
        ]
        if outside:
            raise ValueError("position outside the joint limits: " + name_few(outside))
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
        limiter's rate limit smooths the effort step). Any thread. First, on the caller's
        thread, ``controller.prepare`` at the last measured state, so that its first tick in
        the loop is not its slowest (a failing preparation is logged; that tick then reports
        the error itself, through the fault path)."""
        state = self._last_state
        if state is not None:
            try:
                controller.prepare(state, self.period)
            except Exception as exc:  # a warm-up failure must not block the switch
                LOG.warning(
                    "preparing %s failed (%s: %s); its first tick will do that work",
                    type(controller).__name__,
                    type(exc).__name__,
                    exc,
                )
        with self._request_lock:
            self._pending_controller = controller

    def motion_status(self, motion_id: int) -> MotionStatus | None:
        """The latest status of a motion the loop has started (running, succeeded, preempted
        or canceled); None if it has not started yet or is long forgotten. Any thread."""
        with self._history_lock:
            return self._motion_history.get(motion_id)

    # --- the tick --------------------------------------------------------------------------
    def _state_from(self, sample: StateSample) -> JointState:
        """The guarded sample in model order: everything the backend measured — position,
        velocity and effort (NaN on joints it does not measure) — under the sample's stamp."""
        q = np.empty(self.model.nq)
        v = np.empty(self.model.nv)
        effort = np.empty(self.model.nv)
        q[self._model_index] = sample.position
        v[self._model_index] = sample.velocity
        effort[self._model_index] = sample.effort
        return JointState(stamp=sample.stamp, q=q, v=v, effort=effort)

    def _read_guarded(self) -> tuple[GuardResult, float]:
        """Read one sample and run it through the guard; a read that raises is a rejection."""
        started = time.perf_counter()
        try:
            sample = self.hardware.read()
        except Exception as exc:  # a backend read error must not stop the loop unguarded
            now = self.hardware.now()
            message = f"read failed: {type(exc).__name__}: {exc}"
            return self.guard.read_failed(message), now
        read = time.perf_counter()
        self.stages.record("read", read - started)
        now = self.hardware.now()
        result = self.guard.check_state(sample, now)
        self.stages.record("guard", time.perf_counter() - read)
        return result, now

    def tick(self) -> None:
        """One control period. Never raises an ``Exception``: whatever a stage raises latches
        a fault naming the stage, and the fault reaction is written at once (see
        :meth:`_on_tick_error`)."""
        self._stage = "read"
        try:
            self._tick()
        except Exception as exc:
            self._on_tick_error(exc)
        else:
            self._consecutive_errors = 0

    def _tick(self) -> None:
        clock = time.perf_counter
        result, now = self._read_guarded()
        self._stage = "watchdog"
        if not self._watchdog_started:
            self.watchdog.start(now)
            self._watchdog_started = True
        fresh = result.accepted and result.fresh
        if fresh:
            assert result.sample is not None
            # Fresh as of when it was measured (its stamp), not when this tick took it in: a
            # sample that waited in a queue does not extend the state deadline.
            self.watchdog.state_fresh(min(result.sample.stamp, now))
            self._last_state = self._state_from(result.sample)
        else:
            self.stale_ticks += 1
        state = self._last_state
        if self.fault is None:
            hardware_fault = self.hardware.fault()
            expiry = self.watchdog.check(now, check_command=self._last_values is not None)
            if hardware_fault is not None:
                self._latch_fault(hardware_fault, state, now, now)
            elif expiry is not None:
                self._latch_fault(expiry.message, state, now, expiry.since)
        if self.fault is not None and not fresh:
            self._escalate_without_state(now)
        if state is None:
            return  # nothing measured yet: nothing can be computed, nothing is written
        self._stage = "requests"
        self._take_requests(state, now)
        if self.fault is None and not fresh and self._last_values is not None:
            self._stage = "write"
            self._write(self._last_values, state.stamp, now)  # zero-order hold, no new data
            return
        self._stage = "reference"
        reference = self._current_reference(state)
        q, v = state.q, state.v

        def fallback() -> FloatArray:
            return safe_hold_effort(self.model, q, v, self.hold_damping)

        requested: FloatArray | None = None
        limits: FloatArray | None = None  # the controller's effort limits (position joints)
        before_controller = clock()
        self._stage = "controller"
        if self.fault is None:
            try:
                # Efforts, and the joint reference the controller tracked (a chain's own):
                # what position joints are sent.
                output = self.controller.step(state, reference, self.period)
                requested, reference = output.effort, output.reference
                limits = output.effort_limit
            except Exception as exc:  # a controller bug must not leave the arm uncommanded
                self._latch_fault(f"controller raised {type(exc).__name__}: {exc}", state, now, now)
        if self.fault is not None:
            self._stage = "fault reaction"
            requested, reference = self._reaction_command(q, v, now)
        assert requested is not None
        before_limiter = clock()
        self.stages.record("controller", before_limiter - before_controller)
        breakdown = getattr(self.controller, "stage_breakdown", None)
        if breakdown:  # a chained controller's own stages (task, diff_ik, joint_controller)
            for stage, seconds in breakdown.items():
                self.stages.record(stage, seconds)
        self._stage = "limiter"
        limited = self.limiter.limit(requested, fallback, self.period)
        values = self._hardware_values(limited.effort, reference, limit_steps=self.fault is None)
        before_write = clock()
        self.stages.record("limiter", before_write - before_limiter)
        if self.fault is None and self._any_position:
            self._stage = "effort limits"  # hardware I/O: timed with the write
            self._apply_effort_limits(limits)
        self._stage = "write"
        self._write(values, state.stamp, now)
        self.stages.record("write", clock() - before_write)
        self._note_safe_command(now)
        if self.timing.ticks % self.snapshot_decimation == 0:
            self._stage = "snapshot"
            self._publish(
                state,
                reference,
                limited.effort,
                (limited.saturated | limited.rate_limited | limited.non_finite)
                & ~self._position_joints  # the effort limiter, where an effort is written
                | self._position_step_limited,
                fresh,
            )

    def _reaction_command(
        self, q: FloatArray, v: FloatArray, now: float
    ) -> tuple[FloatArray, JointReference]:
        """The fault reaction's effort [N·m | N] and reference at ``now``, from the measured
        (q, v)."""
        if self._reaction is None:  # latched before anything was measured
            self._reaction = FaultReaction.begin(
                self.fault_reaction, now, q, v, self.reference_limits
            )
        effort = self._reaction.effort(self.model, q, v, self.hold_damping, now)
        return effort, self._reaction.reference(now)

    def _hardware_values(
        self, effort: FloatArray, reference: JointReference, limit_steps: bool = False
    ) -> np.ndarray:
        """Hardware order: the limited effort [N·m | N] for effort joints; for position joints
        the tracked reference's q* [rad | m] within the joint limits and, with ``limit_steps``,
        at most ``position_step`` [rad | m] (URDF velocity limit × period) from the last target
        written: a reference that jumps (a controller switched in with another reference, a
        chain synchronising to the measured state) is followed at the joint's top speed, not in
        one period, and the step limit is reported as a saturation; a non-finite q* keeps the
        last target (reported too). Fault reactions write without the step limit: they start
        from the measured position, where a position joint should go at once."""
        values = effort[self._model_index]
        if not self._any_position:
            return values
        targets = np.clip(reference.q, self.model.limits.lower, self.model.limits.upper)
        previous = self._position_targets
        self._position_step_limited = self._no_position_flags
        if not math.isfinite(targets.dot(targets)):  # a non-finite q*: the last target stays
            bad = ~np.isfinite(targets)
            assert self._last_state is not None  # nothing is written before a measurement
            last = previous if previous is not None else self._last_state.q
            targets[bad] = last[bad]
            self._position_step_limited = bad & self._position_joints
        if limit_steps and previous is not None:
            stepped = np.minimum(
                np.maximum(targets, previous - self.position_step), previous + self.position_step
            )
            self._position_step_limited = self._position_step_limited | (
                (stepped != targets) & self._position_joints
            )
            targets = stepped
        self._position_targets = targets
        return np.where(self._position_mask, targets[self._model_index], values)

    def _apply_effort_limits(self, limits: FloatArray | None) -> None:
        """Hand the backend the effort limits the controller asks for on position joints
        (model order, NaN or None = the backend's default) where they differ from the ones
        set: one ``set_effort_limit`` per changed joint, on this thread, before the write.
        Effort joints are skipped (their limited effort is the bound). A limit the backend
        cannot set raises (a fault naming the joint): the goal should have been refused."""
        if limits is self._effort_limits_asked:
            return  # the same array as last tick (None included): nothing changed
        wanted = np.full(self.model.nv, np.nan) if limits is None else np.asarray(limits)
        current = self._effort_limits
        for name, index, position in zip(
            self.hardware.joint_names, self._model_index, self._position_mask, strict=True
        ):
            value, now_set = float(wanted[index]), float(current[index])
            if not position or value == now_set or (math.isnan(value) and math.isnan(now_set)):
                continue
            self.hardware.set_effort_limit(name, None if math.isnan(value) else value)
            current[index] = value
        self._effort_limits_asked = limits

    def _note_safe_command(self, now: float) -> None:
        record = self.fault_record
        if self.fault is not None and record is not None and record.first_safe_command is None:
            self.fault_record = FaultRecord(
                record.reason, record.reaction, record.origin, record.detected, now
            )
            self.faults[-1] = self.fault_record

    def _on_tick_error(self, exc: Exception) -> None:
        """A stage raised: latch a fault that names it (the first error of a fault is logged
        with its traceback), then write the fault reaction from the last measured state at
        once. If even that fails (the backend's write raising, say), the drives are asked for
        their own stop (quick stop, else disable) and the next tick tries again; after
        ``CONSECUTIVE_ERRORS_BEFORE_BACKOFF`` failing ticks in a row the loop sleeps a period
        between tries rather than spin."""
        stage = self._stage
        self._consecutive_errors += 1
        now = self._now_or_last()
        state = self._last_state
        if self.fault is None:
            LOG.error("control loop: %s raised; latching a fault", stage, exc_info=exc)
            reason = f"{stage} raised {type(exc).__name__}: {exc}"
            self._latch_fault(reason, state, now, now)
        elif self._consecutive_errors == 1:
            LOG.error("control loop: %s raised while faulted", stage, exc_info=exc)
        if state is None:
            return
        try:
            effort, reference = self._reaction_command(state.q, state.v, now)
            limited = self.limiter.limit(
                effort,
                lambda: safe_hold_effort(self.model, state.q, state.v, self.hold_damping),
                self.period,
            )
            self._write(self._hardware_values(limited.effort, reference), state.stamp, now)
            self._note_safe_command(now)
        except Exception as second:
            if self._consecutive_errors == 1:
                LOG.error("control loop: the fault reaction failed too", exc_info=second)
            self._stop_drives(f"fault reaction failed: {type(second).__name__}: {second}")
            if self._consecutive_errors >= CONSECUTIVE_ERRORS_BEFORE_BACKOFF:
                time.sleep(self.period)

    def _now_or_last(self) -> float:
        try:
            return self.hardware.now()
        except Exception:
            return self._last_state.stamp if self._last_state is not None else 0.0

    def _stop_drives(self, why: str) -> None:
        """Ask drives that can stop on their own feedback to do so: quick stop, else disable
        (once per fault; ``why`` is added to the fault)."""
        if self._escalated is not None:
            return
        for reaction in (QUICK_STOP, DISABLE):
            if reaction in self.hardware.fault_reactions:
                self._escalated = reaction
                try:
                    self.hardware.apply_fault_reaction(reaction)
                    self.fault = f"{self.fault}; {why}: {reaction}"
                except Exception as exc:
                    self.fault = f"{self.fault}; {why}, {reaction} failed: {exc}"
                return
        self._escalated = ""  # nothing to escalate to

    def _write(self, values: np.ndarray, stamp: float, now: float) -> None:
        self._sequence += 1
        self.hardware.write(
            JointCommand(
                stamp=stamp,
                sequence=self._sequence,
                joint_names=self.hardware.joint_names,
                interfaces=self._interfaces,
                values=values,
            )
        )
        self._last_values = np.array(values, dtype=np.float64)
        self.watchdog.command_written(now)

    def _escalate_without_state(self, now: float) -> None:
        """Faulted and no fresh state for ``state_timeout``: a reaction "from the measured state"
        has nothing to measure, so drives that can stop on their own feedback are told to
        (quick stop, else disable). Backends without either keep getting the reaction computed
        from the last state accepted."""
        if self.watchdog.state_silence(now) > self.watchdog.config.state_timeout:
            self._stop_drives("no measured state")

    def _latch_fault(
        self, reason: str, state: JointState | None, now: float, origin: float
    ) -> None:
        """Latch ``reason`` until :meth:`reset_fault`: a running motion ends FAILED and the
        fault reaction starts from the measured state (the last one accepted)."""
        self.fault = reason
        self.fault_record = FaultRecord(reason, self.fault_reaction, origin, now)
        self.faults.append(self.fault_record)
        if self.fault_reaction in (QUICK_STOP, DISABLE):
            try:
                self.hardware.apply_fault_reaction(self.fault_reaction)
            except Exception as exc:
                self.fault = f"{reason}; {self.fault_reaction} failed: {exc}"
        if state is None:
            self._reaction = None
            return
        if self._motion is not None and self._motion.state == RUNNING:
            self._set_motion(self._status(self._motion, FAILED, state.stamp))
        self._reaction = FaultReaction.begin(
            self.fault_reaction, now, state.q, state.v, self.reference_limits
        )
        self._trajectory = None
        end = self._reaction.stop.goal if self._reaction.stop is not None else state.q
        self._reference = JointReference.hold(end)

    def reset_fault(self) -> None:
        """Leave the fault at the next tick, holding the position measured then, if fresh state
        is flowing (within ``state_timeout``) and the hardware's own fault clears; otherwise the
        fault stays latched and :attr:`reset_refused` says why."""
        with self._request_lock:
            self._reset_requested = True

    def reset_fault_and_wait(self, timeout: float = 1.0) -> str | None:
        """:meth:`reset_fault`, then wait (at most ``timeout`` [s]) for the tick that processes
        it; None when the fault is cleared (or none was latched), else why not (the refusal, or
        that no tick came). For callers on other threads while the loop thread runs (the ROS
        ResetFault service); with ``run_ticks`` on the same thread it would only time out."""
        if self.fault is None:
            return None  # nothing latched, nothing to reset
        if not self.running and self.stopped_reason is not None:
            refusal = self.restart()
            if refusal is not None:
                return refusal
        with self._reset_done:
            seen = self._resets_processed
        self.reset_fault()
        with self._reset_done:
            processed = self._reset_done.wait_for(lambda: self._resets_processed > seen, timeout)
        if not processed:
            return f"no control tick within {timeout} s to process the reset"
        return None if self.fault is None else (self.reset_refused or self.fault)

    def _take_requests(self, state: JointState, now: float) -> None:
        with self._request_lock:
            pending, self._pending = self._pending, None
            hold, self._hold_requested = self._hold_requested, False
            reset, self._reset_requested = self._reset_requested, False
            controller, self._pending_controller = self._pending_controller, None
        if controller is not None:
            self.controller = controller
        if self._reference is None:  # the first measured state: hold it (faulted or not)
            self._reference = JointReference.hold(state.q)
        if reset and self.fault is not None:
            self._try_reset(state, now)
        if reset:
            with self._reset_done:
                self._resets_processed += 1
                self._reset_done.notify_all()
        if self.fault is not None:
            if pending is not None:  # no motion starts from a fault
                self._set_motion(MotionStatus(pending.motion_id, FAILED, state.stamp, 0.0, 0.0))
            return
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
            except TrajectoryError as exc:
                self._trajectory = None
                self._reference = JointReference.hold(state.q)
                self._set_motion(
                    MotionStatus(pending.motion_id, FAILED, state.stamp, 0.0, 0.0, str(exc))
                )
                return
            self._set_motion(
                MotionStatus(
                    pending.motion_id, RUNNING, state.stamp, self._trajectory.duration, 0.0
                )
            )

    def _try_reset(self, state: JointState, now: float) -> None:
        if not self.watchdog.state_is_fresh(now):
            self.reset_refused = (
                f"no fresh state for {self.watchdog.state_silence(now) * 1e3:.3f} ms: "
                "a fault is only reset with fresh data flowing"
            )
            return
        try:
            self.hardware.reset_fault()
        except Exception as exc:
            self.reset_refused = f"hardware fault reset failed: {type(exc).__name__}: {exc}"
            return
        hardware_fault = self.hardware.fault()
        if hardware_fault is not None:
            self.reset_refused = f"the hardware still reports: {hardware_fault}"
            return
        self.reset_refused = ""
        self.fault = None
        self._escalated = None
        self._reaction = None
        self._trajectory = None
        self._reference = JointReference.hold(state.q)
        self.limiter.reset(None)
        self.watchdog.command_written(self.hardware.now())  # the reset may have taken a while

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
        state: JointState,
        reference: JointReference,
        effort: FloatArray,
        saturated: np.ndarray,
        fresh: bool = True,
    ) -> None:
        assert state.effort is not None  # the loop's states carry the measured effort
        snapshot = LoopSnapshot(
            tick=self.timing.ticks,
            stamp=state.stamp,
            joint_names=self.model.joint_names,
            position=state.q,
            velocity=state.v,
            measured_effort=state.effort,
            reference_position=np.array(reference.q),
            commanded_effort=np.array(effort),
            saturated=np.array(saturated),
            motion=self._motion,
            fault=self.fault,
            state_fresh=fresh,
            guard_rejections=self.guard.counts(),
            fault_record=self.fault_record,
        )
        with self._snapshot_ready:
            self._snapshot = snapshot
            self._snapshot_ready.notify_all()

    def snapshot(self) -> LoopSnapshot | None:
        return self._snapshot

    def diagnostics(self) -> dict[str, object]:
        """Guard counters, watchdog and fault state for /diagnostics (key → value). Any thread."""
        now = self.hardware.now()
        record = self.fault_record
        values: dict[str, object] = {
            f"guard.{key}": count for key, count in sorted(self.guard.counts().items())
        }
        values.update(
            {
                "guard.accepted_states": self.guard.accepted_counts()["state"],
                "guard.last_rejection": self.guard.last_rejection,
                "watchdog.enabled": self.watchdog.config.enabled,
                "watchdog.state_timeout_ms": self.watchdog.config.state_timeout * 1e3,
                "watchdog.command_timeout_ms": self.watchdog.config.command_timeout * 1e3,
                "watchdog.state_silence_ms": self.watchdog.state_silence(now) * 1e3,
                "watchdog.state_expiries": self.watchdog.expiries["state"],
                "watchdog.command_expiries": self.watchdog.expiries["command"],
                "fault": self.fault or "",
                "fault.reaction": self.fault_reaction,
                "fault.count": len(self.faults),
                "fault.reset_refused": self.reset_refused,
                "stale_ticks": self.stale_ticks,
                "loop.scheduling": (
                    self.realtime_report.describe()
                    if self.realtime_report is not None
                    else "not applied (not started, or a free-running lockstep loop)"
                ),
            }
        )
        if record is not None and record.reaction_time is not None:
            values["fault.reaction_time_ms"] = record.reaction_time * 1e3
        values.update({f"hardware.{k}": v for k, v in self.hardware.diagnostics().items()})
        return values

    def wait_for_snapshot(self, after_tick: int = -1, timeout: float = 1.0) -> LoopSnapshot | None:
        """Block until a snapshot newer than ``after_tick`` exists (or timeout, or the loop
        thread ended on its own: then at once)."""
        with self._snapshot_ready:
            self._snapshot_ready.wait_for(
                lambda: (
                    (self._snapshot is not None and self._snapshot.tick > after_tick)
                    or self.stopped_reason is not None
                ),
                timeout,
            )
            return self._snapshot

    # --- running ---------------------------------------------------------------------------
    def run_ticks(self, count: int) -> None:
        """Run ``count`` ticks on the calling thread (paced or not), recording timing. Paced,
        consecutive calls keep one schedule (``run_ticks(1)`` in a loop ticks once a period)
        unless the caller came back more than a period late."""
        now = time.perf_counter()
        scheduled = self._schedule if self._schedule is not None else now
        if scheduled < now - self.period:
            scheduled = now
        for _ in range(count):
            scheduled = self._one_timed_tick(scheduled)
        self._schedule = scheduled

    def _one_timed_tick(self, scheduled: float) -> float:
        if self.paced:
            sleep_until(scheduled)
        start = time.perf_counter()
        if not self.paced:
            scheduled = start
        self.tick()
        compute = time.perf_counter() - start
        overrun = is_overrun(start - scheduled, compute, self.period, self.overrun_fraction)
        self.timing.record(start, scheduled, compute, overrun)
        if not self.paced:
            return scheduled + self.period
        return self._deadline_wake(next_start(scheduled, self.period))

    def _deadline_wake(self, following: float) -> float:
        """The next paced tick's start [s, perf_counter]: ``following``, or just after the
        watchdog's state deadline when that comes first (the state has been stale for more than
        state_timeout − period). The deadline is then judged when it passes, not up to a period
        later at the next tick: the reaction to a stale state comes ``state_timeout`` after the
        last fresh measurement plus the wake-up latency. That tick is an extra one (the
        schedule goes on from it). Not for a backend whose read waits for its own cycle."""
        if self.fault is not None or not self._watchdog_started or self.hardware.paced_by_read:
            return following
        remaining = self.watchdog.state_deadline() - self.hardware.now()  # [s] hardware clock
        return min(following, time.perf_counter() + remaining + DEADLINE_WAKE_MARGIN)

    def start(self) -> None:
        """Run the loop in its own thread until :meth:`stop`."""
        if self._thread is not None:
            raise RuntimeError("control loop already started")
        self._stop.clear()
        self.stopped_reason = None
        self._thread = threading.Thread(target=self._run, name="ct-control-loop", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """The loop thread is alive (False before :meth:`start`, after :meth:`stop`, and if it
        ended on its own: then :attr:`stopped_reason` says why)."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        if self.paced or self.hardware.paced_by_read:
            self.realtime_report = apply_to_current_thread(self.realtime)
            for problem in self.realtime_report.problems:
                LOG.warning("control loop thread: %s; running without it", problem)
        scheduled = time.perf_counter()
        try:
            while not self._stop.is_set():
                try:
                    scheduled = self._one_timed_tick(scheduled)
                except Exception as exc:  # outside the tick (timing): counted, not fatal
                    self._stage = "timing"
                    self._on_tick_error(exc)
                    scheduled = time.perf_counter()
        except BaseException as exc:  # logged with its traceback; nothing above to raise to
            self._loop_died(exc)

    def _loop_died(self, exc: BaseException) -> None:
        """The thread ends by an exception (not :meth:`stop`): say so everywhere, wake every
        waiter, and ask the drives for their own stop, as nothing will command them now."""
        self.stopped_reason = f"control loop stopped: {type(exc).__name__}: {exc}"
        LOG.critical("%s", self.stopped_reason, exc_info=exc)
        now = self._now_or_last()
        self.fault = (
            self.stopped_reason if self.fault is None else f"{self.fault}; {self.stopped_reason}"
        )
        self.fault_record = FaultRecord(self.fault, self.fault_reaction, now, now)
        self.faults.append(self.fault_record)
        try:
            self._stop_drives("control loop stopped")
        except Exception:
            LOG.exception("control loop: asking the drives to stop failed")
        with self._snapshot_ready:
            self._snapshot_ready.notify_all()
        with self._reset_done:
            self._reset_done.notify_all()

    def restart(self) -> str | None:
        """Start a new loop thread after the previous one ended on its own; the fault stays
        latched until a reset with fresh data. None when started, else why not."""
        if self.running:
            return None
        if self._stop.is_set():
            return "the control loop was stopped (shutdown); it is not restarted"
        if self.hardware.state != LifecycleState.ACTIVE:
            return (
                f"the control loop cannot restart: the hardware is {self.hardware.state.value}, "
                "not active"
            )
        LOG.warning("restarting the control loop thread (%s)", self.stopped_reason)
        self._thread = None
        self._escalated = None
        self.start()
        return None

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def timing_summary(self) -> TimingSummary:
        return self.timing.summary()
