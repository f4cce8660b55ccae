"""The fixed-rate control loop: read → controller → limiter → write, in its own thread.

This module is the loop itself — its thread, its pacing and the tick, which reads top-down and
calls the parts, each in its own module:

- :mod:`~ct_controllers.runtime.loop_requests`: what other threads ask (motion, hold, controller
  switch, fault reset), taken at a tick boundary;
- :mod:`~ct_controllers.runtime.motion_requests`: the motions, their trajectory, status and
  history;
- :mod:`~ct_controllers.runtime.fault_supervisor`: latching, the reaction, escalation, reset;
- :mod:`~ct_controllers.runtime.position_targets` and
  :mod:`~ct_controllers.runtime.effort_limits`: what position-interface joints are sent;
- :mod:`~ct_controllers.runtime.loop_snapshot`: the snapshots and diagnostics other threads read.

Each tick the controller returns efforts and the full joint reference it tracked
(:class:`~ct_controllers.controllers.controller.ControlOutput`): joints on the effort interface
are sent the limited effort (the limiter is the last step before the write), joints on the
position interface the reference's q*, within the joint limits and rate-limited to the URDF
velocity (:class:`~ct_controllers.runtime.position_targets.PositionTargets`); the interfaces may
be mixed, joint by joint. A controller may also bound what the drives of position joints push
with (a gripper's grip force: ``ControlOutput.effort_limit``); the loop hands a changed limit to
the backend (``SystemInterface.set_effort_limit``) on its own thread, just before the write
(:class:`~ct_controllers.runtime.effort_limits.EffortLimits`).

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
import threading
import time
from collections.abc import Sequence

import numpy as np

from ct_controllers.controllers.controller import Controller, FloatArray, JointReference, JointState
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.controllers.safe_hold import safe_hold_effort
from ct_controllers.hardware.guard import FRESH, BoundaryGuard
from ct_controllers.hardware.interface import (
    DAMP,
    JointCommand,
    LifecycleState,
    SystemInterface,
)
from ct_controllers.hardware.watchdog import Watchdog, WatchdogConfig
from ct_controllers.model.payload import Payload, PayloadError
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.joint_trajectory import JerkLimitedTrajectory, JointLimits
from ct_controllers.references.limit_approach import LimitApproach
from ct_controllers.runtime.effort_limits import EffortLimits
from ct_controllers.runtime.fault_supervisor import (
    CONSECUTIVE_ERRORS_BEFORE_BACKOFF,
    FaultRecord,
    FaultSupervisor,
)
from ct_controllers.runtime.loop_requests import LoopRequests
from ct_controllers.runtime.loop_snapshot import LoopSnapshot, SnapshotBoard, loop_diagnostics
from ct_controllers.runtime.motion_requests import (
    CANCELED,
    FAILED,
    MOTION_HISTORY,
    PREEMPTED,
    RUNNING,
    SUCCEEDED,
    JointMotion,
    Motions,
    MotionStatus,
    TrajectoryRequest,
    checked_motion,
)
from ct_controllers.runtime.position_targets import PositionTargets
from ct_controllers.runtime.realtime import (
    RealtimeReport,
    RealtimeSettings,
    apply_to_current_thread,
)
from ct_controllers.runtime.speed_limit import speed_limit_of
from ct_controllers.runtime.timing import (
    StageRecorder,
    TimingRecorder,
    TimingSummary,
    is_overrun,
    next_start,
    sleep_until,
)
from ct_controllers.runtime.trajectory_motion import TrajectoryMotion, TrajectoryPlan

__all__ = [  # the loop, and what its callers import from here
    "CANCELED",
    "CONSECUTIVE_ERRORS_BEFORE_BACKOFF",
    "DEADLINE_WAKE_MARGIN",
    "FAILED",
    "MOTION_HISTORY",
    "PREEMPTED",
    "RUNNING",
    "STAGES",
    "SUCCEEDED",
    "ControlLoop",
    "FaultRecord",
    "LoopSnapshot",
    "MotionStatus",
]

LOG = logging.getLogger("ct_controllers")

DEADLINE_WAKE_MARGIN = 1e-4  # [s] a tick woken for the state deadline comes this long after it

# The stages the loop times, in the order they run; task, diff_ik and joint_controller are the
# parts of "controller" that a chained controller reports (its ``stage_breakdown``).
STAGES = ("read", "guard", "controller", "task", "diff_ik", "joint_controller", "limiter", "write")


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
        # Where the safe hold and the fault reactions take g(q) from: ``model``, or the model
        # with the payload of :meth:`stage_payload` (this thread's, swapped at a tick boundary).
        self.hold_model = model
        self.controller = controller
        self.limiter = limiter
        self.period = period
        self.paced = paced
        # hardware order -> model order: q_model[self._model_index] = q_hardware
        self._model_index = model.indices(hardware.joint_names)
        missing = sorted(set(model.joint_names) - set(hardware.joint_names))
        if missing:
            raise ValueError(f"model joint(s) not driven by the hardware: {', '.join(missing)}")
        # model order -> hardware order: q_model = q_hardware[self._hardware_index]
        self._hardware_index = np.argsort(self._model_index)
        self._joint_names = hardware.joint_names
        self._interfaces = tuple(hardware.command_interfaces)
        self._targets = PositionTargets(model, self._interfaces, self._model_index, period)
        self._effort_limits = EffortLimits(hardware, self._model_index, self._targets.mask)
        self.hold_damping = (
            np.array(hold_damping, dtype=np.float64)
            if hold_damping is not None
            else np.full(model.nv, 5.0)
        )
        # Default reference limits: half the URDF velocity, 3 rad/s², 30 rad/s³, and the joint
        # range (no margin: plans start and stay inside it, held positions are clipped into it).
        self.reference_limits = reference_limits or JointLimits(
            velocity=model.limits.velocity * 0.5,
            acceleration=np.full(model.nv, 3.0),
            jerk=np.full(model.nv, 30.0),
            approach=LimitApproach.for_joints(
                model.limits.lower, model.limits.upper, np.zeros(model.nv, dtype=bool)
            ),
        )
        self.snapshot_decimation = max(1, snapshot_decimation)
        self.overrun_fraction = overrun_fraction
        self.timing = TimingRecorder()
        self.stages = StageRecorder(stages=STAGES)
        # The loop's own stages' rings, resolved once (a chain's are recorded by name).
        self._read_ring = self.stages.ring("read")
        self._guard_ring = self.stages.ring("guard")
        self._controller_ring = self.stages.ring("controller")
        self._limiter_ring = self.stages.ring("limiter")
        self._write_ring = self.stages.ring("write")
        self.realtime = realtime if realtime is not None else RealtimeSettings()
        self.realtime_report: RealtimeReport | None = None  # set when the loop thread starts
        self.guard: BoundaryGuard = hardware.guard
        # The guard's index of the last source order seen, and the gather it composes with
        # hardware -> model order (recomputed only when the source's order changes).
        self._source_order: np.ndarray | None = None
        self._gather = self._hardware_index
        watchdog = watchdog or WatchdogConfig.for_period(period)
        self.watchdog = Watchdog(watchdog)
        self._watchdog_started = False
        self._motions = Motions(self.reference_limits)
        self._supervisor = FaultSupervisor(
            hardware,
            self.watchdog,
            model,
            self.hold_damping,
            self.reference_limits,
            fault_reaction,
            period,
            on_latch=self._motions.abort,
            speed_limit=speed_limit_of(model, watchdog.speed_limit_factor),
        )
        self._requests = LoopRequests()
        self._snapshots = SnapshotBoard()
        self._last_state: JointState | None = None  # the last accepted, fresh state (model order)
        # The last written command (hardware order): the array written, never changed after.
        self._last_values: np.ndarray | None = None
        self._fallback = self._hold_effort  # bound once: the limiter's fallback, every tick
        # The controller whose stage_breakdown (a chain's task, diff_ik, joint_controller
        # times) was looked up, and that dict (None: a plain controller): once per controller.
        self._breakdown_of: Controller | None = None
        self._breakdown: dict[str, float] | None = None
        self.stale_ticks = 0  # ticks without a fresh sample (rejected or repeated)
        self._sequence = 0
        self._thread: threading.Thread | None = None
        self._schedule: float | None = None  # next scheduled tick of run_ticks [perf_counter s]
        self._stop = threading.Event()
        self._stage = "read"  # the stage the tick is in, named by a fault if it raises
        self._consecutive_errors = 0  # ticks in a row that raised
        self.stopped_reason: str | None = None  # why the loop thread ended, if not stop()

    # --- the parts' state, as the loop's callers read it ---------------------------------------
    @property
    def fault(self) -> str | None:
        """The latched fault (None when none is)."""
        return self._supervisor.fault

    @property
    def fault_record(self) -> FaultRecord | None:
        """The latched (or last) fault."""
        return self._supervisor.record

    @property
    def faults(self) -> list[FaultRecord]:
        """Every fault latched, oldest first."""
        return self._supervisor.records

    @property
    def reset_refused(self) -> str:
        """Why the last reset_fault() did not clear the fault ("" when it did)."""
        return self._supervisor.reset_refused

    @property
    def fault_reaction(self) -> str:
        """The configured fault reaction: damp | hold | quick_stop | disable."""
        return self._supervisor.reaction

    @property
    def position_step(self) -> FloatArray:
        """[rad | m] the most a position target moves in one tick (URDF velocity × period)."""
        return self._targets.step

    @property
    def _trajectory(self) -> JerkLimitedTrajectory | None:
        return self._motions.trajectory

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
        return self.request(checked_motion(self.model, joint_names, positions, duration))

    def request(self, motion: JointMotion) -> int:
        """Queue a checked motion (:func:`checked_motion`: the ROS layer checks a goal once and
        hands it here); otherwise as :meth:`request_motion`. Returns the motion id."""
        return self._requests.post_motion(motion.indices, motion.positions, motion.duration)

    def request_trajectory(self, plan: TrajectoryPlan) -> int:
        """Queue a checked trajectory (a FollowJointTrajectory goal, :class:`TrajectoryPlan`):
        it starts at the next tick from the measured state and preempts any running motion.
        Returns the motion id (its status: :meth:`motion_status`)."""
        return self._requests.post_trajectory(plan)

    @property
    def following(self) -> TrajectoryMotion | None:
        """The latest trajectory started (running or ended): its spline and start time on the
        hardware clock, for feedback and state queries. Any thread."""
        return self._motions.following

    def hold(self) -> None:
        """Stop any motion and hold the measured position from the next tick on."""
        self._requests.post_hold()

    def stage_payload(self, payload: Payload | None) -> None:
        """Compensate gravity in the safe hold and the fault reactions with ``payload`` at the
        TCP (None: without one) from the next tick on, as the controllers do with theirs: an
        arm faulted while holding an object is held, not let sag under it. The loaded model is
        built here, on the caller's thread (the tick only swaps it in); its bounds are the
        caller's to check (:func:`~ct_controllers.model.payload.check_payload`). Any thread."""
        if payload is not None and not self.model.has_tcp:
            raise PayloadError("the control loop's model has no TCP to carry a payload at")
        self._requests.post_hold_model(self.model.with_payload(payload))

    @property
    def hold_payload(self) -> Payload | None:
        """The payload the safe hold and the fault reactions compensate now (None: none)."""
        return self.hold_model.payload

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
        self._requests.post_controller(controller)

    def motion_status(self, motion_id: int) -> MotionStatus | None:
        """The latest status of a motion the loop has started (running, succeeded, preempted
        or canceled); None if it has not started yet or is long forgotten. Any thread."""
        return self._motions.status(motion_id)

    def reset_fault(self) -> None:
        """Leave the fault at the next tick, holding the position measured then, if fresh state
        is flowing (within ``state_timeout``) and the hardware's own fault clears; otherwise the
        fault stays latched and :attr:`reset_refused` says why."""
        self._requests.post_reset()

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
        seen = self._requests.resets_processed
        self.reset_fault()
        if not self._requests.wait_for_reset(seen, timeout):
            return f"no control tick within {timeout} s to process the reset"
        return None if self.fault is None else (self.reset_refused or self.fault)

    # --- what other threads read -----------------------------------------------------------
    def snapshot(self) -> LoopSnapshot | None:
        return self._snapshots.latest()

    def now(self) -> float:
        """The loop's clock [s]: the backend's, the one every state stamp and snapshot stamp is
        on (sim time with MuJoCo, the system clock on the ros2_control bridge, the monotonic
        clock of the CANopen SYNC), so ``now() - snapshot.stamp`` is the snapshot's age. Any
        thread."""
        return self.hardware.now()

    def wait_for_snapshot(self, after_tick: int = -1, timeout: float = 1.0) -> LoopSnapshot | None:
        """Block until a snapshot newer than ``after_tick`` exists (or timeout, or the loop
        thread ended on its own: then at once)."""
        return self._snapshots.wait(after_tick, timeout, lambda: self.stopped_reason is not None)

    def diagnostics(self) -> dict[str, object]:
        """Guard counters, watchdog and fault state for /diagnostics (key → value). Any thread."""
        return loop_diagnostics(
            self.hardware,
            self.guard,
            self.watchdog,
            self._supervisor,
            self.stale_ticks,
            self.realtime_report,
        )

    # --- the tick --------------------------------------------------------------------------
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
        # Hot path: what is used more than once is bound to a local; the fault is read where it
        # can have changed (supervision, requests, the controller).
        clock = time.perf_counter
        supervisor = self._supervisor
        hardware = self.hardware
        started = clock()
        try:
            sample = hardware.read()
        except Exception as exc:  # a backend read error must not stop the loop unguarded
            now = hardware.now()
            self.guard.read_failed(f"read failed: {type(exc).__name__}: {exc}")
            fresh = False
        else:
            read = clock()
            self._read_ring.add(read - started)
            now = hardware.now()
            fresh = self.guard.admit_state(sample, now) is FRESH
            self._guard_ring.add(clock() - read)
        self._stage = "watchdog"
        if not self._watchdog_started:
            self.watchdog.start(now)
            self._watchdog_started = True
        state: JointState | None
        if fresh:
            # Fresh as of when it was measured (its stamp), not when this tick took it in: a
            # sample that waited in a queue does not extend the state deadline.
            stamp = sample.stamp
            self.watchdog.state_fresh(now if now < stamp else stamp)  # min(stamp, now)
            self._last_state = state = self._state_from(stamp)
        else:
            self.stale_ticks += 1
            state = self._last_state
        last_values = self._last_values
        supervisor.supervise(state, now, fresh, last_values is not None)
        if state is None:
            return  # nothing measured yet: nothing can be computed, nothing is written
        self._stage = "requests"
        if self._requests.waiting:
            self._take_requests(state, now)
        if supervisor.fault is None and not fresh and last_values is not None:
            self._stage = "write"
            self._write(last_values, state.stamp, now)  # zero-order hold, no new data
            return
        self._stage = "reference"
        reference = self._motions.reference(state)
        requested: FloatArray | None = None
        limits: FloatArray | None = None  # the controller's effort limits (position joints)
        before_controller = clock()
        self._stage = "controller"
        if supervisor.fault is None:
            try:
                # Efforts, and the joint reference the controller tracked (a chain's own):
                # what position joints are sent.
                output = self.controller.step(state, reference, self.period)
                requested, reference = output.effort, output.reference
                limits = output.effort_limit
            except Exception as exc:  # a controller bug must not leave the arm uncommanded
                self._latch_fault(f"controller raised {type(exc).__name__}: {exc}", state, now, now)
        # Nothing from here to the write latches a fault (a stage that raises ends the tick).
        healthy = supervisor.fault is None
        if not healthy:
            self._stage = "fault reaction"
            requested, reference = supervisor.reaction_command(state.q, state.v, now)
        assert requested is not None
        before_limiter = clock()
        self._controller_ring.add(before_limiter - before_controller)
        controller = self.controller
        if controller is not self._breakdown_of:  # once per controller, not per tick
            self._breakdown_of = controller
            self._breakdown = getattr(controller, "stage_breakdown", None)
        breakdown = self._breakdown
        if breakdown:  # a chained controller's own stages (task, diff_ik, joint_controller)
            self.stages.record_all(breakdown)
        self._stage = "limiter"
        limited = self.limiter.limit(requested, self._fallback, self.period)
        targets = self._targets
        values = targets.values(limited.effort, reference.q, state.q, healthy)
        before_write = clock()
        self._limiter_ring.add(before_write - before_limiter)
        if healthy and targets.any:
            self._stage = "effort limits"  # hardware I/O: timed with the write
            self._effort_limits.apply(limits)
        self._stage = "write"
        self._write(values, state.stamp, now)
        self._write_ring.add(clock() - before_write)
        if not healthy:
            supervisor.note_safe_command(now)
        if self.timing.ticks % self.snapshot_decimation == 0:
            self._stage = "snapshot"
            self._publish(
                state,
                reference,
                limited.effort,
                targets.saturated(limited.saturated | limited.rate_limited | limited.non_finite),
                fresh,
            )

    def _hold_effort(self) -> FloatArray:
        """The limiter's fallback for a non-finite request: the safe hold's effort [N·m | N] at
        the last measured state (the one this tick computed from)."""
        state = self._last_state
        assert state is not None
        return safe_hold_effort(self.hold_model, state.q, state.v, self.hold_damping)

    def _state_from(self, stamp: float) -> JointState:
        """The sample the guard just accepted, in model order: everything the backend measured —
        position, velocity and effort (NaN on joints it does not measure) — under ``stamp``, in
        arrays of its own (a JointState is never changed once handed on: the controller and the
        snapshots keep it). One gather per array, by an index composed once per source order
        (the guard's) with hardware -> model order (this loop's)."""
        guard = self.guard
        order = guard.order
        if order is not self._source_order:
            self._source_order = order
            self._gather = order[self._hardware_index]
        gather = self._gather
        # Positional (stamp, q, v, effort): a NamedTuple builds faster without keywords.
        return JointState(
            stamp, guard.position[gather], guard.velocity[gather], guard.effort[gather]
        )

    def _take_requests(self, state: JointState, now: float) -> None:
        """What other threads posted, in order: a controller switch, a fault reset (then
        acknowledged), and — unless faulted: a motion then fails at once — a hold, a motion."""
        motion, hold, reset, controller, hold_model = self._requests.take()
        if controller is not None:
            self.controller = controller
        if hold_model is not None:  # the safe hold and the fault reactions' g(q) from now on
            self.hold_model = self._supervisor.model = hold_model
        if reset:
            if self.fault is not None:
                self._try_reset(state, now)
            self._requests.acknowledge_reset()
        if self.fault is not None:
            if motion is not None:  # no motion starts from a fault
                self._motions.refuse(motion, state.stamp)
            return
        if hold:
            self._motions.stop(state)
        if isinstance(motion, TrajectoryRequest):
            self._motions.start_trajectory(motion, state)
        elif motion is not None:
            self._motions.start(motion, state)

    def _try_reset(self, state: JointState, now: float) -> None:
        if self._supervisor.try_reset(now):
            self._motions.hold(state.q)
            self.limiter.reset(None)

    def _latch_fault(
        self, reason: str, state: JointState | None, now: float, origin: float
    ) -> None:
        """Latch ``reason`` until :meth:`reset_fault`: a running motion ends FAILED and the
        fault reaction starts from the measured state (the last one accepted)."""
        self._supervisor.latch(reason, state, now, origin)

    def _publish(
        self,
        state: JointState,
        reference: JointReference,
        effort: FloatArray,
        saturated: np.ndarray,
        fresh: bool = True,
    ) -> None:
        assert state.effort is not None  # the loop's states carry the measured effort
        self._snapshots.publish(
            LoopSnapshot(
                tick=self.timing.ticks,
                stamp=state.stamp,
                joint_names=self.model.joint_names,
                position=state.q,
                velocity=state.v,
                measured_effort=state.effort,
                reference_position=np.array(reference.q),
                commanded_effort=np.array(effort),
                saturated=np.array(saturated),
                motion=self._motions.current,
                fault=self.fault,
                state_fresh=fresh,
                guard_rejections=self.guard.counts(),
                fault_record=self.fault_record,
            )
        )

    def _write(self, values: np.ndarray, stamp: float, now: float) -> None:
        """Write ``values`` (hardware order; an array of this tick's own, which nothing changes
        afterwards: the backends copy what they keep, and it is kept as the zero-order hold)."""
        self._sequence = sequence = self._sequence + 1
        self.hardware.write(
            JointCommand(stamp, sequence, self._joint_names, self._interfaces, values)
        )
        self._last_values = values
        self.watchdog.command_written(now)

    def _on_tick_error(self, exc: Exception) -> None:
        """A stage raised: latch a fault that names it (the first error of a fault is logged
        with its traceback), then write the fault reaction from the last measured state at
        once. If even that fails (the backend's write raising, say), the drives are asked for
        their own stop (quick stop, else disable) and the next tick tries again; after
        ``CONSECUTIVE_ERRORS_BEFORE_BACKOFF`` failing ticks in a row the loop sleeps a period
        between tries rather than spin."""
        self._consecutive_errors += 1
        errors = self._consecutive_errors
        now = self._now_or_last()
        state = self._last_state
        self._supervisor.tick_failed(self._stage, exc, state, now, errors)
        if state is None:
            return
        try:
            effort, reference = self._supervisor.reaction_command(state.q, state.v, now)
            limited = self.limiter.limit(effort, self._fallback, self.period)
            self._write(
                self._targets.values(limited.effort, reference.q, state.q), state.stamp, now
            )
            self._supervisor.note_safe_command(now)
        except Exception as second:
            self._supervisor.reaction_failed(second, errors)

    def _now_or_last(self) -> float:
        try:
            return self.hardware.now()
        except Exception:
            return self._last_state.stamp if self._last_state is not None else 0.0

    # --- running ---------------------------------------------------------------------------
    def run_ticks(self, count: int) -> None:
        """Run ``count`` ticks on the calling thread (paced or not), recording timing. Paced,
        consecutive calls keep one schedule (``run_ticks(1)`` in a loop ticks once a period)
        unless the caller came back more than a period late."""
        now = time.perf_counter()
        scheduled = self._schedule if self._schedule is not None else now
        if scheduled < now - self.period:
            scheduled = now
        if self.paced:
            for _ in range(count):
                scheduled = self._one_timed_tick(scheduled)
        else:  # _one_timed_tick unpaced, its calls bound once: each tick starts when scheduled
            clock = time.perf_counter
            tick = self.tick
            record = self.timing.record
            period = self.period
            # Started when scheduled: late only for a negative overrun_fraction.
            late = is_overrun(0.0, 0.0, period, self.overrun_fraction)
            for _ in range(count):
                start = clock()
                tick()
                compute = clock() - start
                record(start, start, compute, late or compute > period)
                scheduled = start + period
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
        self._supervisor.loop_died(self.stopped_reason, self._now_or_last())
        self._snapshots.wake_waiters()
        self._requests.wake_waiters()

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
        self._supervisor.allow_escalation()
        self.start()
        return None

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def timing_summary(self) -> TimingSummary:
        return self.timing.summary()
