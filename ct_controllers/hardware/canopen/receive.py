"""The receive thread (canopen's notifier): each drive's heartbeat and TPDOs go into the process
image, and the answers of every drive to one SYNC make one :class:`StateSample` (stamped with
the SYNC time, sequence = SYNC count). A drive in FAULT, a drive leaving OPERATION ENABLED while
commanded, and CAN error frames are latched as faults."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import can
import numpy as np

from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.configuration import DriveConfig
from ct_controllers.hardware.canopen.process_image import ProcessImage
from ct_controllers.hardware.cia402 import DriveState
from ct_controllers.hardware.interface import StateSample


class DriveReceiver:
    """The handlers canopen calls for the drives' heartbeats and TPDOs."""

    def __init__(
        self, image: ProcessImage, joint_names: tuple[str, ...], drives: Sequence[DriveConfig]
    ) -> None:
        self.image = image
        self.joint_names = joint_names
        self.drives = tuple(drives)

    def heartbeat_callback(self, i: int) -> Callable[[int, bytearray, float], None]:
        image = self.image

        def on_heartbeat(can_id: int, data: bytearray, timestamp: float) -> None:
            with image.lock:
                image.status[i].heartbeat_at = time.monotonic()
                image.status[i].heartbeat_state = data[0] & 0x7F if data else -1

        return on_heartbeat

    def tpdo_callback(self, i: int, number: int) -> Callable[[Any], None]:
        image = self.image
        drive = self.drives[i]

        def on_tpdo(pdo: Any) -> None:
            if number == 1:
                statusword = int(pdo[cia402.STATUSWORD].raw)
                try:
                    state = cia402.decode_statusword(statusword)
                except ValueError:
                    state = DriveState.NOT_READY_TO_SWITCH_ON
                with image.lock:
                    status = image.status[i]
                    status.statusword = statusword
                    status.state = state
                    status.mode_display = int(pdo[cia402.MODES_DISPLAY].raw)
                    status.torque_permille = int(pdo[cia402.TORQUE_ACTUAL].raw)
                    commanding = image.commanding and image.override is None
                where = f"drive of joint '{drive.joint}' (node {drive.node_id})"
                if state in (DriveState.FAULT, DriveState.FAULT_REACTION_ACTIVE):
                    image.latch(
                        f"canopen: {where} in {state.value} (statusword 0x{statusword:04X})"
                    )
                elif commanding and state is not DriveState.OPERATION_ENABLED:
                    image.latch(f"canopen: {where} left OPERATION ENABLED: {state.value}")
                return
            now = time.monotonic()
            with image.lock:
                status = image.status[i]
                status.position_counts = int(pdo[cia402.POSITION_ACTUAL].raw)
                status.velocity_counts = int(pdo[cia402.VELOCITY_ACTUAL].raw)
                status.tpdo_at = now
                status.tpdo_sync = image.sync_count
                count = image.sync_count
                if all(s.tpdo_sync == count for s in image.status):
                    image.sample = self._assemble(count)
                    image.sample_ready.notify_all()

        return on_tpdo

    def _assemble(self, count: int) -> StateSample:
        """One sample from every drive's answer to SYNC ``count`` (lock held)."""
        position = np.empty(len(self.drives))
        velocity = np.empty(len(self.drives))
        effort = np.empty(len(self.drives))
        for i, (drive, status) in enumerate(zip(self.drives, self.image.status, strict=True)):
            position[i] = drive.scaling.counts_to_position(status.position_counts)
            velocity[i] = drive.scaling.counts_to_velocity(status.velocity_counts)
            effort[i] = drive.scaling.permille_to_effort(status.torque_permille)
        return StateSample(
            stamp=self.image.sync_time.get(count, math.nan),
            joint_names=self.joint_names,
            position=position,
            velocity=velocity,
            effort=effort,
            sequence=count,
        )


class ErrorFrameListener(can.Listener):
    """Latches a bus error on every CAN error frame (canopen's own listener skips them)."""

    def __init__(self, image: ProcessImage) -> None:
        self.image = image

    def on_message_received(self, msg: can.Message) -> None:
        if msg.is_error_frame:
            self.image.latch(
                f"canopen: bus error: CAN error frame (id 0x{msg.arbitration_id:X}, "
                f"data {bytes(msg.data).hex()})"
            )

    def on_error(self, exc: Exception) -> None:
        self.image.latch(f"canopen: bus error: {type(exc).__name__}: {exc}")
