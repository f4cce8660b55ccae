"""The control loop's faults: latched, reacted to, escalated, recorded, reset.

A fault is latched (:meth:`FaultSupervisor.latch`) when the backend reports one (drive FAULT,
lost heartbeat), the watchdog expires (no fresh state for ``state_timeout``, no command written
for ``command_timeout``), a joint is measured running away (faster than twice its URDF velocity
limit: :mod:`ct_controllers.runtime.speed_limit`), a stage of the tick raises, or the loop
thread dies. From then on the loop writes the configured reaction
(:mod:`ct_controllers.runtime.fault_reaction`: damp to rest by default) computed from the last
*measured* state (:meth:`FaultSupervisor.reaction_command`);
quick stop and disable are the drives' own and are applied to them at once. Each fault is a
:class:`FaultRecord`, with the time from the fault to the first safe command written.

Escalation: faulted without fresh state for ``state_timeout`` (nothing to compute a reaction
from), or when the reaction cannot be written, drives that offer it are told to stop on their own
feedback — quick stop, else disable — once per fault (:meth:`FaultSupervisor.stop_drives`).

A fault lasts until a reset (:meth:`FaultSupervisor.try_reset`) with fresh state flowing and the
hardware's own fault cleared; otherwise :attr:`FaultSupervisor.reset_refused` says why.

Control thread only, but for reading the public attributes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.hardware.interface import (
    DAMP,
    DISABLE,
    FAULT_REACTIONS,
    QUICK_STOP,
    SystemInterface,
)
from ct_controllers.hardware.watchdog import Watchdog
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.runtime.fault_reaction import FaultReaction
from ct_controllers.runtime.speed_limit import SpeedLimit

LOG = logging.getLogger("ct_controllers")

CONSECUTIVE_ERRORS_BEFORE_BACKOFF = 10  # failing ticks in a row before the loop sleeps a period


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


def check_fault_reaction(reaction: str, hardware: SystemInterface) -> None:
    """ValueError unless ``reaction`` is a known fault reaction that ``hardware`` offers."""
    if reaction not in FAULT_REACTIONS:
        raise ValueError(
            f"unknown fault reaction '{reaction}' (known: {', '.join(FAULT_REACTIONS)})"
        )
    if reaction not in hardware.fault_reactions:
        raise ValueError(
            f"fault reaction '{reaction}' is not offered by {hardware.backend_name} "
            f"(offers: {', '.join(hardware.fault_reactions)})"
        )


class FaultSupervisor:
    """Latches faults, computes the reaction, escalates to the drives, resets.

    ``on_latch(now, hold)`` is told of each fault latched with a measured state: ``hold`` [rad |
    m] is where the reaction ends (the loop's motions stop there)."""

    def __init__(
        self,
        hardware: SystemInterface,
        watchdog: Watchdog,
        model: RobotModel,
        hold_damping: FloatArray,
        reference_limits: JointLimits,
        reaction: str = DAMP,
        period: float = 0.001,
        on_latch: Callable[[float, FloatArray], None] | None = None,
        speed_limit: SpeedLimit | None = None,
    ) -> None:
        check_fault_reaction(reaction, hardware)
        self.hardware = hardware
        self.watchdog = watchdog
        self.model = model
        self.reaction = reaction  # the configured reaction: damp | hold | quick_stop | disable
        self.hold_damping = hold_damping  # [N·m·s/rad | N·s/m] per joint
        self.reference_limits = reference_limits  # the damped stop's
        self.period = period  # [s] the back-off between failing ticks
        self.on_latch = on_latch
        self.speed_limit = speed_limit  # the runaway check on fresh samples (None: off)
        self.fault: str | None = None  # the latched fault, None when none is
        self.record: FaultRecord | None = None  # the latched (or last) fault
        self.records: list[FaultRecord] = []  # every fault latched, oldest first
        self.reset_refused: str = ""  # why the last reset did not clear the fault
        self._reaction: FaultReaction | None = None
        self._escalated: str | None = None  # drive-level reaction applied for lack of state

    # --- latching ---------------------------------------------------------------------------
    def supervise(self, state: JointState | None, now: float, fresh: bool, written: bool) -> None:
        """A tick's check: latch the hardware's fault, the watchdog's expiry (the command
        deadline once a command was ``written``) or, on a ``fresh`` state, a runaway
        (:mod:`~ct_controllers.runtime.speed_limit`); faulted without a ``fresh`` state, escalate
        when it has been missing for ``state_timeout``."""
        if self.fault is None:
            hardware_fault = self.hardware.fault()
            expiry = self.watchdog.check(now, written)
            if hardware_fault is not None:
                self.latch(hardware_fault, state, now, now)
            elif expiry is not None:
                self.latch(expiry.message, state, now, expiry.since)
            elif fresh and state is not None and self.speed_limit is not None:
                runaway = self.speed_limit.check(state.v)
                if runaway is not None:
                    self.latch(runaway, state, now, state.stamp)
        if self.fault is not None and not fresh:
            self.escalate_without_state(now)

    def latch(self, reason: str, state: JointState | None, now: float, origin: float) -> None:
        """Latch ``reason`` until a reset: record it, apply a drive-level reaction, and start
        the reaction from ``state`` (the last measured; None: from the first one measured)."""
        self.fault = reason
        self.record = FaultRecord(reason, self.reaction, origin, now)
        self.records.append(self.record)
        if self.reaction in (QUICK_STOP, DISABLE):
            try:
                self.hardware.apply_fault_reaction(self.reaction)
            except Exception as exc:
                self.fault = f"{reason}; {self.reaction} failed: {exc}"
        if state is None:
            self._reaction = None
            return
        self._reaction = FaultReaction.begin(
            self.reaction, now, state.q, state.v, self.reference_limits
        )
        if self.on_latch is not None:
            stop = self._reaction.stop
            self.on_latch(state.stamp, stop.goal if stop is not None else state.q)

    def loop_died(self, reason: str, now: float) -> None:
        """The loop thread ended on its own: the fault says so (added to one latched), and the
        drives are asked for their own stop, as nothing will command them now."""
        self.fault = reason if self.fault is None else f"{self.fault}; {reason}"
        self.record = FaultRecord(self.fault, self.reaction, now, now)
        self.records.append(self.record)
        try:
            self.stop_drives("control loop stopped")
        except Exception:
            LOG.exception("control loop: asking the drives to stop failed")

    # --- reacting ---------------------------------------------------------------------------
    def reaction_command(
        self, q: FloatArray, v: FloatArray, now: float
    ) -> tuple[FloatArray, JointReference]:
        """The fault reaction's effort [N·m | N] and reference at ``now``, from the measured
        (q, v)."""
        if self._reaction is None:  # latched before anything was measured
            self._reaction = FaultReaction.begin(self.reaction, now, q, v, self.reference_limits)
        effort = self._reaction.effort(self.model, q, v, self.hold_damping, now)
        return effort, self._reaction.reference(now)

    def note_safe_command(self, now: float) -> None:
        """A command was written at ``now`` while faulted: the first one is the fault's first
        safe command."""
        record = self.record
        if self.fault is not None and record is not None and record.first_safe_command is None:
            self.record = FaultRecord(
                record.reason, record.reaction, record.origin, record.detected, now
            )
            self.records[-1] = self.record

    def tick_failed(
        self, stage: str, exc: Exception, state: JointState | None, now: float, errors: int
    ) -> None:
        """A stage of the tick raised (``errors`` ticks in a row so far): latch a fault naming
        it (its first error logged with the traceback)."""
        if self.fault is None:
            LOG.error("control loop: %s raised; latching a fault", stage, exc_info=exc)
            self.latch(f"{stage} raised {type(exc).__name__}: {exc}", state, now, now)
        elif errors == 1:
            LOG.error("control loop: %s raised while faulted", stage, exc_info=exc)

    def reaction_failed(self, exc: Exception, errors: int) -> None:
        """Writing the reaction failed too: ask the drives for their own stop; after
        ``CONSECUTIVE_ERRORS_BEFORE_BACKOFF`` failing ticks in a row, sleep a period between
        tries rather than spin."""
        if errors == 1:
            LOG.error("control loop: the fault reaction failed too", exc_info=exc)
        self.stop_drives(f"fault reaction failed: {type(exc).__name__}: {exc}")
        if errors >= CONSECUTIVE_ERRORS_BEFORE_BACKOFF:
            time.sleep(self.period)

    # --- escalating -------------------------------------------------------------------------
    def escalate_without_state(self, now: float) -> None:
        """Faulted and no fresh state for ``state_timeout``: a reaction "from the measured state"
        has nothing to measure, so drives that can stop on their own feedback are told to
        (quick stop, else disable). Backends without either keep getting the reaction computed
        from the last state accepted."""
        if self.watchdog.state_silence(now) > self.watchdog.config.state_timeout:
            self.stop_drives("no measured state")

    def stop_drives(self, why: str) -> None:
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

    def allow_escalation(self) -> None:
        """Escalate again if needed (a new loop thread takes over)."""
        self._escalated = None

    # --- resetting --------------------------------------------------------------------------
    def try_reset(self, now: float) -> bool:
        """Clear the latched fault if the state is fresh (within ``state_timeout``) and the
        hardware's own fault resets; True if cleared, else :attr:`reset_refused` says why."""
        if not self.watchdog.state_is_fresh(now):
            self.reset_refused = (
                f"no fresh state for {self.watchdog.state_silence(now) * 1e3:.3f} ms: "
                "a fault is only reset with fresh data flowing"
            )
            return False
        try:
            self.hardware.reset_fault()
        except Exception as exc:
            self.reset_refused = f"hardware fault reset failed: {type(exc).__name__}: {exc}"
            return False
        hardware_fault = self.hardware.fault()
        if hardware_fault is not None:
            self.reset_refused = f"the hardware still reports: {hardware_fault}"
            return False
        self.reset_refused = ""
        self.fault = None
        if self.speed_limit is not None:
            self.speed_limit.reset()
        self._escalated = None
        self._reaction = None
        self.watchdog.command_written(self.hardware.now())  # the reset may have taken a while
        return True
