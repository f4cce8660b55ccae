"""ct_controllers.runtime.fault_supervisor on its own: a stand-in backend that records what it is
told, the real watchdog and FaultReaction, no loop."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import new_robot_model

from ct_controllers.controllers.controller import JointState
from ct_controllers.hardware.interface import DAMP, DISABLE, HOLD, QUICK_STOP
from ct_controllers.hardware.watchdog import Watchdog, WatchdogConfig
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.runtime.fault_supervisor import (
    CONSECUTIVE_ERRORS_BEFORE_BACKOFF,
    FaultRecord,
    FaultSupervisor,
    check_fault_reaction,
)

MODEL = new_robot_model()
NV = MODEL.nv
LIMITS = JointLimits(
    velocity=np.full(NV, 1.0), acceleration=np.full(NV, 3.0), jerk=np.full(NV, 30.0)
)


class Drives:
    """What the supervisor asks of a backend, recorded."""

    backend_name = "stand-in"

    def __init__(self, reactions: tuple[str, ...] = (DAMP, HOLD)) -> None:
        self.fault_reactions = reactions
        self.applied: list[str] = []
        self.reported: str | None = None
        self.clock = 0.0

    def fault(self) -> str | None:
        return self.reported

    def apply_fault_reaction(self, reaction: str) -> None:
        self.applied.append(reaction)

    def reset_fault(self) -> None:
        self.reported = None

    def now(self) -> float:
        return self.clock


def supervisor(
    drives: Drives, reaction: str = DAMP, latched: list | None = None
) -> tuple[FaultSupervisor, Watchdog]:
    watchdog = Watchdog(WatchdogConfig(state_timeout=0.003, command_timeout=0.003))
    watchdog.start(0.0)

    def on_latch(now: float, hold: np.ndarray) -> None:
        if latched is not None:
            latched.append((now, hold))

    return (
        FaultSupervisor(
            drives,  # type: ignore[arg-type]
            watchdog,
            MODEL,
            np.full(NV, 5.0),
            LIMITS,
            reaction,
            0.001,
            on_latch=on_latch,
        ),
        watchdog,
    )


def moving(stamp: float, speed: float = 0.5) -> JointState:
    return JointState(stamp=stamp, q=np.zeros(NV), v=np.full(NV, speed), effort=np.zeros(NV))


def test_an_unknown_or_unoffered_reaction_is_refused():
    """check_fault_reaction names an unknown reaction, and one the backend does not offer."""
    with pytest.raises(ValueError, match="unknown fault reaction 'explode'"):
        check_fault_reaction("explode", Drives())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not offered by stand-in"):
        check_fault_reaction(QUICK_STOP, Drives())  # type: ignore[arg-type]


def test_a_latched_fault_is_recorded_and_the_motions_told_where_the_reaction_ends():
    """latch(): the fault and its record (reason, reaction, origin, detected), and on_latch
    gets the state's stamp and the damped stop's end (not the measured q of a moving arm)."""
    latched: list = []
    faults, _ = supervisor(Drives(), latched=latched)
    faults.latch("drive FAULT", moving(1.0), now=1.0, origin=0.99)
    assert faults.fault == "drive FAULT"
    assert faults.record == FaultRecord("drive FAULT", DAMP, 0.99, 1.0)
    assert faults.records == [faults.record]
    assert len(latched) == 1 and latched[0][0] == 1.0
    assert np.all(latched[0][1] > 0.0)  # the stop ends ahead of where it began


def test_the_reaction_is_computed_from_the_measured_state_even_if_latched_before_one():
    """A fault latched with no state: the reaction begins at the first reaction_command, from
    the (q, v) it is given; its effort is finite and its reference starts there."""
    faults, _ = supervisor(Drives())
    faults.latch("before the first tick", None, 0.0, 0.0)
    q = np.full(NV, 0.1)
    effort, reference = faults.reaction_command(q, np.zeros(NV), 0.001)
    assert effort.shape == (NV,) and np.all(np.isfinite(effort))
    assert np.allclose(reference.q, q)


def test_the_first_command_written_while_faulted_is_the_first_safe_command():
    """note_safe_command() sets first_safe_command once (later calls keep it), so the
    record's reaction_time is first safe command − origin."""
    faults, _ = supervisor(Drives())
    faults.latch("x", moving(1.0), 1.0, 0.995)
    faults.note_safe_command(1.001)
    faults.note_safe_command(1.002)
    assert faults.record is not None and faults.record.first_safe_command == 1.001
    assert faults.records[-1] is faults.record
    assert faults.record.reaction_time == pytest.approx(0.006)


def test_drive_level_reactions_are_applied_when_latched():
    """With quick_stop configured, latch() applies it to the drives at once."""
    drives = Drives((DAMP, QUICK_STOP, DISABLE))
    faults, _ = supervisor(drives, QUICK_STOP)
    faults.latch("heartbeat lost", moving(0.0), 0.0, 0.0)
    assert drives.applied == [QUICK_STOP]


def test_escalation_asks_the_drives_once_per_fault_quick_stop_first():
    """stop_drives(): quick stop if offered, else disable, once until a reset; with neither,
    nothing is applied."""
    drives = Drives((DAMP, DISABLE, QUICK_STOP))
    faults, _ = supervisor(drives)
    faults.latch("x", moving(0.0), 0.0, 0.0)
    faults.stop_drives("no measured state")
    faults.stop_drives("no measured state")
    assert drives.applied == [QUICK_STOP]
    assert faults.fault == "x; no measured state: quick_stop"
    only_disable = Drives((DAMP, DISABLE))
    other, _ = supervisor(only_disable)
    other.latch("y", moving(0.0), 0.0, 0.0)
    other.stop_drives("why")
    assert only_disable.applied == [DISABLE]
    plain = Drives()
    third, _ = supervisor(plain)
    third.latch("z", moving(0.0), 0.0, 0.0)
    third.stop_drives("why")
    assert plain.applied == [] and third.fault == "z"


def test_supervise_latches_the_hardware_fault_before_the_watchdog_and_escalates_without_state():
    """supervise(): the backend's fault is latched (origin = now); a stale state beyond
    state_timeout while faulted escalates to the drives."""
    drives = Drives((DAMP, QUICK_STOP))
    faults, watchdog = supervisor(drives)
    watchdog.state_fresh(0.0)
    drives.reported = "drive 3 in FAULT"
    faults.supervise(moving(0.001), 0.001, fresh=True, written=False)
    assert faults.fault == "drive 3 in FAULT" and faults.record.origin == 0.001  # type: ignore[union-attr]
    faults.supervise(moving(0.001), 0.002, fresh=False, written=True)
    assert drives.applied == []  # not yet state_timeout without state
    faults.supervise(moving(0.001), 0.01, fresh=False, written=True)
    assert drives.applied == [QUICK_STOP]


def test_supervise_latches_a_watchdog_expiry_with_its_origin():
    """No fresh state for state_timeout: the expiry is latched, its origin the last fresh
    state."""
    faults, watchdog = supervisor(Drives())
    watchdog.state_fresh(0.5)
    faults.supervise(moving(0.5), 0.51, fresh=False, written=True)
    assert faults.fault is not None and "state" in faults.fault
    assert faults.record is not None and faults.record.origin == 0.5


def test_a_reset_needs_fresh_state_and_the_hardware_fault_cleared():
    """try_reset(): refused (saying why) without fresh state or while the hardware still
    reports a fault; otherwise the fault is cleared and escalation is possible again."""
    drives = Drives((DAMP, QUICK_STOP))
    faults, watchdog = supervisor(drives)
    faults.latch("x", moving(0.0), 0.0, 0.0)
    faults.stop_drives("why")
    assert not faults.try_reset(1.0)
    assert "no fresh state" in faults.reset_refused and faults.fault is not None
    watchdog.state_fresh(1.0)
    drives.reset_fault = lambda: None  # type: ignore[method-assign]
    drives.reported = "still broken"
    assert not faults.try_reset(1.0)
    assert faults.reset_refused == "the hardware still reports: still broken"
    drives.reported = None
    assert faults.try_reset(1.0)
    assert faults.fault is None and faults.reset_refused == ""
    faults.latch("again", moving(1.0), 1.0, 1.0)
    faults.stop_drives("why")
    assert drives.applied == [QUICK_STOP, QUICK_STOP]


def test_a_failing_stage_latches_a_fault_naming_it_and_a_failing_reaction_escalates():
    """tick_failed() latches '<stage> raised <Type>: <message>' (only if none is latched);
    reaction_failed() asks the drives for their own stop."""
    drives = Drives((DAMP, DISABLE))
    faults, _ = supervisor(drives)
    faults.tick_failed("limiter", RuntimeError("bug"), moving(0.0), 0.0, 1)
    assert faults.fault == "limiter raised RuntimeError: bug"
    faults.tick_failed("write", RuntimeError("later"), moving(0.0), 0.0, 2)
    assert faults.fault == "limiter raised RuntimeError: bug" and len(faults.records) == 1
    faults.reaction_failed(OSError("bus"), CONSECUTIVE_ERRORS_BEFORE_BACKOFF - 1)
    assert drives.applied == [DISABLE]
    assert "fault reaction failed: OSError: bus: disable" in faults.fault


def test_a_dead_loop_is_added_to_the_fault_and_recorded():
    """loop_died(): the reason joins a latched fault, a record is added, drives are stopped."""
    drives = Drives((DAMP, QUICK_STOP))
    faults, _ = supervisor(drives)
    faults.latch("x", moving(0.0), 0.0, 0.0)
    faults.loop_died("control loop stopped: Kill: ", 2.0)
    assert faults.fault is not None and faults.fault.startswith("x; control loop stopped")
    assert len(faults.records) == 2 and faults.records[-1].detected == 2.0
    assert drives.applied == [QUICK_STOP]
