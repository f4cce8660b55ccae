"""What the backend's three threads share, under one lock: the control thread writes targets and
reads samples, the cycle thread sends the targets with each SYNC and checks deadlines, the receive
thread (canopen's notifier) records what each drive answers. Faults are latched here, from
whichever thread detects them, until a reset clears them."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.object_dictionary import MAX_TORQUE_DEFAULT
from ct_controllers.hardware.cia402 import DriveState
from ct_controllers.hardware.interface import StateSample


@dataclass
class DriveStatus:
    """What the receive thread last heard from one drive (times on time.monotonic)."""

    statusword: int = 0
    state: DriveState = DriveState.NOT_READY_TO_SWITCH_ON
    mode_display: int = 0
    torque_permille: int = 0
    position_counts: int = 0
    velocity_counts: int = 0
    tpdo_at: float = -math.inf  # last TPDO2 (position/velocity)
    tpdo_sync: int = -1  # the SYNC count it answered
    heartbeat_at: float = -math.inf
    heartbeat_state: int = -1


class ProcessImage:
    """The drives' inputs and outputs and the cycle's bookkeeping, guarded by ``lock``
    (``sample_ready`` is a condition on it, notified on every new sample and every fault)."""

    def __init__(self, n_drives: int) -> None:
        self.lock = threading.Lock()
        self.sample_ready = threading.Condition(self.lock)
        self.status = [DriveStatus() for _ in range(n_drives)]
        # outputs: what the cycle thread sends in each drive's RPDOs
        self.controlword = [cia402.CW_SHUTDOWN] * n_drives
        self.mode = cia402.CYCLIC_SYNC_POSITION
        self.target_torque = [0] * n_drives  # [per-mille]
        self.target_position = [0] * n_drives  # [counts]
        # Max torque 6072h [‰ of rated] in RPDO2: ``max_torque`` is what goes out; a changed
        # limit is staged in ``staged_max_torque`` and goes out with the next write's targets,
        # at most min(old, new) until then (a lowered limit at once, a raised one with the
        # targets it was computed with).
        self.max_torque = [MAX_TORQUE_DEFAULT] * n_drives
        self.staged_max_torque = [MAX_TORQUE_DEFAULT] * n_drives
        self.override: int | None = None  # controlword forced by a quick stop / disable
        self.commanding = False  # the enable sequence is over; write() targets go out
        self.last_write = -math.inf  # [s] time.monotonic of the last write()
        # the cycle: SYNC count, its send times, the sample its answers made
        self.sync_count = -1
        self.sync_time: dict[int, float] = {}
        self.sample: StateSample | None = None
        # latched faults
        self.faults: list[str] = []
        self.fault_at: float | None = None  # [s] time.monotonic of the first
        self.quick_stop_sent_at: float | None = None  # [s] time.monotonic

    def latch(self, reason: str) -> None:
        """Latch a fault (once per kind: the text before " for " tells kinds apart) and wake a
        waiting read."""
        with self.lock:
            if reason.split(" for ")[0] in (f.split(" for ")[0] for f in self.faults):
                return
            self.faults.append(reason)
            if self.fault_at is None:
                self.fault_at = time.monotonic()
            self.sample_ready.notify_all()

    def clear_faults(self) -> None:
        with self.lock:
            self.faults = []
            self.fault_at = None
            self.quick_stop_sent_at = None
