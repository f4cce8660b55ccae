"""What the control loop shows other threads: :class:`LoopSnapshot` (an immutable copy of its
latest state, published every ``snapshot_decimation`` ticks on a :class:`SnapshotBoard`) and
:func:`loop_diagnostics` (guard, watchdog and fault state for /diagnostics)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ct_controllers.controllers.controller import FloatArray
from ct_controllers.hardware.guard import BoundaryGuard
from ct_controllers.hardware.interface import SystemInterface
from ct_controllers.hardware.watchdog import Watchdog
from ct_controllers.runtime.fault_supervisor import FaultRecord, FaultSupervisor
from ct_controllers.runtime.motion_requests import MotionStatus
from ct_controllers.runtime.realtime import RealtimeReport


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


class SnapshotBoard:
    """The latest :class:`LoopSnapshot`: published by the control thread, read and waited for
    by any thread."""

    def __init__(self) -> None:
        self._latest: LoopSnapshot | None = None
        self._ready = threading.Condition()

    def publish(self, snapshot: LoopSnapshot) -> None:
        with self._ready:
            self._latest = snapshot
            self._ready.notify_all()

    def latest(self) -> LoopSnapshot | None:
        return self._latest

    def wait(
        self, after_tick: int, timeout: float, stopped: Callable[[], bool]
    ) -> LoopSnapshot | None:
        """Block until a snapshot newer than ``after_tick`` exists, ``timeout`` [s] passed, or
        ``stopped()`` (then at once); the latest snapshot."""
        with self._ready:
            self._ready.wait_for(
                lambda: (self._latest is not None and self._latest.tick > after_tick) or stopped(),
                timeout,
            )
            return self._latest

    def wake_waiters(self) -> None:
        """Wake :meth:`wait` callers to look again (the loop thread ended)."""
        with self._ready:
            self._ready.notify_all()


def loop_diagnostics(
    hardware: SystemInterface,
    guard: BoundaryGuard,
    watchdog: Watchdog,
    faults: FaultSupervisor,
    stale_ticks: int,
    realtime_report: RealtimeReport | None,
) -> dict[str, object]:
    """Guard counters, watchdog and fault state, the loop thread's scheduling and the
    hardware's own diagnostics, for /diagnostics (key → value). Any thread."""
    now = hardware.now()
    record = faults.record
    values: dict[str, object] = {
        f"guard.{key}": count for key, count in sorted(guard.counts().items())
    }
    values.update(
        {
            "guard.accepted_states": guard.accepted_counts()["state"],
            "guard.last_rejection": guard.last_rejection,
            "watchdog.enabled": watchdog.config.enabled,
            "watchdog.state_timeout_ms": watchdog.config.state_timeout * 1e3,
            "watchdog.command_timeout_ms": watchdog.config.command_timeout * 1e3,
            "watchdog.state_silence_ms": watchdog.state_silence(now) * 1e3,
            "watchdog.state_expiries": watchdog.expiries["state"],
            "watchdog.command_expiries": watchdog.expiries["command"],
            "fault": faults.fault or "",
            "fault.reaction": faults.reaction,
            "fault.count": len(faults.records),
            "fault.reset_refused": faults.reset_refused,
            "stale_ticks": stale_ticks,
            "loop.scheduling": (
                realtime_report.describe()
                if realtime_report is not None
                else "not applied (not started, or a free-running lockstep loop)"
            ),
        }
    )
    if record is not None and record.reaction_time is not None:
        values["fault.reaction_time_ms"] = record.reaction_time * 1e3
    values.update({f"hardware.{k}": v for k, v in hardware.diagnostics().items()})
    return values
