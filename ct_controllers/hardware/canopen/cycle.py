"""The SYNC/PDO cycle: a thread of our own that, every control period, checks the deadlines
(each drive's heartbeat and TPDOs, the control loop's commands), then sends each drive's RPDOs
and a SYNC; the drives answer with their TPDOs (see :mod:`.receive`). Between SYNCs it wakes for
any deadline that expires before the next one, so a silence is detected when its time is up."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

import can
import canopen

from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.configuration import CanopenConfig, DriveConfig
from ct_controllers.hardware.canopen.process_image import ProcessImage

_PAST_EXPIRY = 1e-4  # [s] a deadline's check runs this long after it: ``silence > timeout``


class SyncCycle:
    """The cycle thread (``ct-canopen-sync``). A missed deadline latches a fault in ``image``; a
    command deadline missed after the first write also calls ``quick_stop`` (the control loop
    stalled: nothing else can act)."""

    def __init__(
        self,
        image: ProcessImage,
        drives: Sequence[DriveConfig],
        config: CanopenConfig,
        quick_stop: Callable[[], None],
    ) -> None:
        self.image = image
        self.drives = tuple(drives)
        self.config = config
        self.quick_stop = quick_stop
        self.network: canopen.Network | None = None
        self.nodes: list[canopen.RemoteNode] = []
        self.sent_cycles = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, network: canopen.Network, nodes: Sequence[canopen.RemoteNode]) -> None:
        self.network = network
        self.nodes = list(nodes)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ct-canopen-sync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None

    def _run(self) -> None:
        period = self.config.period
        scheduled = time.monotonic()
        while not self._stop.is_set():
            self.one_cycle()
            scheduled += period
            if scheduled <= time.monotonic():
                scheduled = time.monotonic()  # fell behind: re-base, do not bunch
                continue
            self._wait_until(scheduled)

    def _wait_until(self, scheduled: float) -> None:
        """Sleep until ``scheduled`` [s, time.monotonic], waking on the way for every deadline
        (a heartbeat's consumer time, a drive's PDO timeout, the command timeout) that falls
        before it: a silence is caught when its time is up, not on the SYNC grid up to a period
        later (which left a lost heartbeat no margin to its bound)."""
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= scheduled:
                return
            deadline = self.next_deadline(now)
            self._stop.wait(min(scheduled, deadline) - now)
            if deadline < scheduled and not self._stop.is_set():
                self.check_deadlines(time.monotonic())

    def next_deadline(self, now: float) -> float:
        """[s, time.monotonic] the earliest deadline after ``now`` (inf: none while not
        commanding), just past its expiry so that the check finds it expired."""
        image = self.image
        with image.lock:
            if not image.commanding:
                return math.inf
            heartbeats = [s.heartbeat_at for s in image.status]
            pdos = [s.tpdo_at for s in image.status]
            last_write = image.last_write
        config = self.config
        candidates = [t + config.heartbeat_timeout for t in heartbeats]
        candidates += [t + config.effective_pdo_timeout for t in pdos]
        if math.isfinite(last_write):
            candidates.append(last_write + config.effective_command_timeout)
        future = [t for t in candidates if t > now]
        return min(future) + _PAST_EXPIRY if future else math.inf

    def one_cycle(self) -> None:
        assert self.network is not None
        image = self.image
        now = time.monotonic()
        self.check_deadlines(now)
        with image.lock:
            override = image.override
            frames = []
            for i, node in enumerate(self.nodes):
                rpdo1, rpdo2 = node.rpdo[1], node.rpdo[2]
                rpdo1[cia402.CONTROLWORD].raw = (
                    override if override is not None else image.controlword[i]
                )
                rpdo1[cia402.MODES_OF_OPERATION].raw = image.mode
                rpdo1[cia402.TARGET_TORQUE].raw = image.target_torque[i]
                rpdo2[cia402.TARGET_POSITION].raw = image.target_position[i]
                rpdo2[cia402.MAX_TORQUE].raw = image.max_torque[i]
                frames.append((rpdo1.cob_id, bytes(rpdo1.data)))
                frames.append((rpdo2.cob_id, bytes(rpdo2.data)))
            image.sync_count += 1
            count = image.sync_count
            image.sync_time[count] = now
            image.sync_time.pop(count - 64, None)
        try:
            for cob_id, data in frames:
                self.network.send_message(cob_id, data)
            self.network.sync.transmit()
            self.sent_cycles += 1
        except (can.CanError, OSError) as exc:
            image.latch(f"canopen: bus error: {type(exc).__name__}: {exc}")

    def check_deadlines(self, now: float) -> None:
        image = self.image
        with image.lock:
            if not image.commanding:
                return
            statuses = list(image.status)
            last_write = image.last_write
        for drive, status in zip(self.drives, statuses, strict=True):
            where = f"drive of joint '{drive.joint}' (node {drive.node_id})"
            silence = now - status.heartbeat_at
            if silence > self.config.heartbeat_timeout:
                image.latch(
                    f"canopen: heartbeat of the {where} lost for {silence * 1e3:.1f} ms "
                    f"(consumer time {self.config.heartbeat_timeout * 1e3:.0f} ms)"
                )
            elif status.heartbeat_state not in (-1, 5):
                image.latch(f"canopen: {where} reports NMT state {status.heartbeat_state}")
            silence = now - status.tpdo_at
            if silence > self.config.effective_pdo_timeout:
                image.latch(
                    f"canopen: no PDO from the {where} for {silence * 1e3:.1f} ms "
                    f"(pdo_timeout {self.config.effective_pdo_timeout * 1e3:.1f} ms)"
                )
        silence = now - last_write  # -inf until the first write: enabled drives hold (CSP)
        if math.isfinite(silence) and silence > self.config.effective_command_timeout:
            image.latch(
                f"canopen: no command for {silence * 1e3:.1f} ms (command_timeout "
                f"{self.config.effective_command_timeout * 1e3:.1f} ms): quick stop"
            )
            self.quick_stop()
