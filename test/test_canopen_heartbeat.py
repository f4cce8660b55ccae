"""The drives watch us (issue 15, item 7): the CANopen master produces a heartbeat (node 127,
canopen's NMT heartbeat producer), configures every drive to consume it (1016h) with a quick stop
as its reaction to losing it (6007h = 3), and the simulated drives implement the consumer
(:mod:`ct_controllers.sim.drives`). Tested in-process and against a real controller
process killed with SIGKILL: python-can's virtual bus stays inside one process and this machine
has no vcan module, so the controller process's virtual channel is joined to the test's through
a socket (:mod:`ct_controllers.sim.can_link`); the kill closes that socket as a pulled
cable would, and nothing of the dead process reaches the drives any more."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import bundled_description, home_by_name, new_robot_model

from ct_controllers.config import load_config
from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.object_dictionary import MASTER_NODE_ID
from ct_controllers.hardware.canopen.system import CanopenCia402System
from ct_controllers.hardware.cia402 import DriveState
from ct_controllers.runtime.stack import Stack, build_stack
from ct_controllers.sim.can_link import VirtualChannelLink
from ct_controllers.sim.drives import WATCH_PERIOD, SimulatedDrives, simulated_drives_for

pytestmark = pytest.mark.realtime  # plant rigs in this process (pyproject.toml)

_channels = itertools.count()
RATE = 100.0  # [Hz], as the other CANopen tests (a pure-Python bus)
PERIOD = 1.0 / RATE
MASTER_PERIOD = 0.01  # [s] our heartbeat (the default)
# [s] the drives' consumer time on it. Not the default 30 ms: the heartbeat comes from a
# python-can software timer thread (and, across processes, two link threads) on a shared 2-core
# machine, which pauses for tens of ms now and then; the drive-side watch (the master on the
# drives) runs with the same slack in the other CANopen tests.
CONSUMER_TIME = 0.1
# [s] allowed beyond the consumer time for the drive's reaction: its own timer (2 ms) plus
# scheduling of the test process's threads on a shared machine (generous on purpose: a missed
# heartbeat is found on the drives' timer thread, which competes for the GIL with the bus).
REACTION_MARGIN = 0.05
CHILD = Path(__file__).with_name("canopen_master_process.py")


def overrides(channel: str, **extra: Any) -> dict[str, Any]:
    """The canopen stack at 100 Hz with the slack the other CANopen tests use."""
    values: dict[str, Any] = {
        "backend": "canopen",
        "hardware.armed": True,
        "update_rate": RATE,
        "canopen.channel": channel,
        "canopen.heartbeat_timeout": CONSUMER_TIME,
        "canopen.master_heartbeat_period": MASTER_PERIOD,
        "canopen.master_heartbeat_timeout": CONSUMER_TIME,
        "canopen.pdo_timeout": 6 * PERIOD,
        "watchdog.state_timeout": 6 * PERIOD,
        "watchdog.command_timeout": 6 * PERIOD,
        "default_controller": "computed_torque",
        "safe_hold.damping": [10.0, 10.0, 5.0, 5.0, 2.0, 2.0, 1.0, 2.0, 2.0],
        # The bus threads at normal scheduling, as the drives in the test's process are (a
        # real-time thread would wait for the GIL behind one of them).
        "realtime.priority": 0,
    }
    values.update(extra)
    return values


def drives_for(values: dict[str, Any]) -> SimulatedDrives:
    """Simulated drives matching the stack ``values`` configure (not configured itself)."""
    config = load_config(overrides=values)
    system = CanopenCia402System.from_config(bundled_description("canopen"), config)
    return simulated_drives_for(system, new_robot_model(), home_by_name(config))


pytestmark = pytest.mark.usefixtures("frozen_heap")  # see conftest.frozen_heap


@pytest.fixture
def in_process() -> Iterator[tuple[Stack, SimulatedDrives]]:
    values = overrides(f"ct_hb_can_{os.getpid()}_{next(_channels)}")
    drives = drives_for(values)
    stack = build_stack(load_config(overrides=values), bundled_description("canopen"))
    try:
        stack.bring_up()
        yield stack, drives
    finally:
        stack.shut_down()
        drives.close()


def test_configure_makes_every_drive_watch_the_masters_heartbeat(in_process):
    """After bring-up every drive's 1016h names the master (node 127) with the configured
    consumer time in whole ms and its 6007h says quick stop, both read back from the drive's own
    dictionary; every drive has heard the master's heartbeat, which reports OPERATIONAL."""
    stack, drives = in_process
    heard: list[int] = []
    drives.network.subscribe(0x700 + MASTER_NODE_ID, lambda _id, data, _t: heard.append(data[0]))
    time.sleep(5 * MASTER_PERIOD)
    for drive in drives.drives:
        entry = int(drive.node.sdo[cia402.CONSUMER_HEARTBEAT][1].raw)  # type: ignore[union-attr]
        assert cia402.decode_heartbeat_consumer_entry(entry) == (MASTER_NODE_ID, 100)
        option = drive.node.sdo[cia402.ABORT_CONNECTION_OPTION].raw  # type: ignore[union-attr]
        assert option == cia402.ABORT_QUICK_STOP
        assert drive.producer_heard_at is not None and not drive.heartbeat_lost
    assert set(drives.consumers().values()) == {(MASTER_NODE_ID, CONSUMER_TIME)}
    assert heard and set(heard) == {5}  # NMT OPERATIONAL
    assert stack.loop.fault is None


def test_a_silent_master_cannot_re_enable_its_drives_until_its_heartbeat_returns(in_process):
    """With the master's heartbeat stopped (its producer alone: the loop and the SYNC cycle go
    on sending 'enable operation'), every drive quick-stops after the consumer time and stays in
    QUICK STOP ACTIVE, applying no torque of its loop; the master sees its drives leave
    OPERATION ENABLED and latches a fault. With the heartbeat back, reset_fault (disable voltage,
    then the enable sequence) brings every drive back to OPERATION ENABLED."""
    stack, drives = in_process
    system = stack.hardware
    assert isinstance(system, CanopenCia402System) and system.master is not None
    loop = stack.loop
    loop.run_ticks(20)
    assert loop.fault is None, loop.fault
    stopped = time.monotonic()
    system.master.nmt.stop_heartbeat()
    loop.run_ticks(round((CONSUMER_TIME + 0.2) / PERIOD))
    assert set(drives.states().values()) == {DriveState.QUICK_STOP_ACTIVE}
    assert set(drives.applied_efforts().values()) == {0.0}
    lost = [t for t in drives.master_lost_at().values() if t is not None]
    assert len(lost) == len(drives.drives)
    assert max(lost) - stopped <= CONSUMER_TIME + REACTION_MARGIN
    assert loop.fault is not None and "left OPERATION ENABLED" in loop.fault
    system.master.nmt.start_heartbeat(round(MASTER_PERIOD * 1000))
    for _ in range(10):  # an operator retries while data freshens
        loop.run_ticks(5)
        loop.reset_fault()
        loop.run_ticks(2)
        if loop.fault is None:
            break
    assert loop.fault is None, loop.reset_refused
    assert set(drives.states().values()) == {DriveState.OPERATION_ENABLED}


def test_abort_connection_option_fault_trips_the_drives():
    """With canopen.abort_connection_option 1, a lost master heartbeat puts every enabled drive
    in FAULT (brake on), where it stays: nothing but a fault reset leaves it."""
    values = overrides(
        f"ct_hb_can_{os.getpid()}_{next(_channels)}", **{"canopen.abort_connection_option": 1}
    )
    drives = drives_for(values)
    stack = build_stack(load_config(overrides=values), bundled_description("canopen"))
    try:
        stack.bring_up()
        stack.loop.run_ticks(10)
        system = stack.hardware
        assert isinstance(system, CanopenCia402System) and system.master is not None
        system.master.nmt.stop_heartbeat()
        stack.loop.run_ticks(round((CONSUMER_TIME + 0.2) / PERIOD))
        assert set(drives.states().values()) == {DriveState.FAULT}
    finally:
        stack.shut_down()
        drives.close()


class ControllerProcess:
    """The whole stack in a child process (``canopen_master_process.py``) on a virtual channel
    joined to ``channel`` here."""

    def __init__(self, values: dict[str, Any]) -> None:
        here, there = socket.socketpair()
        self.link = VirtualChannelLink(values["canopen.channel"], here)
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), "--fd", str(there.fileno()),
             "--overrides", json.dumps(values)],
            pass_fds=[there.fileno()], stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        there.close()
        assert self.process.stdout is not None
        self.first_line = self.process.stdout.readline().strip()

    def kill(self) -> float:
        """SIGKILL; the time.monotonic [s] just before it."""
        killed = time.monotonic()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        return killed

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.link.close()


def _wait_until_not_enabled(drives: SimulatedDrives, timeout: float) -> dict[str, DriveState]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = drives.states()
        if DriveState.OPERATION_ENABLED not in states.values():
            break
        time.sleep(0.001)
    return drives.states()


@pytest.mark.parametrize("abort_option", [cia402.ABORT_QUICK_STOP, cia402.ABORT_NO_ACTION])
def test_a_killed_controller_process_leaves_no_drive_holding_its_torque(abort_option):
    """A controller process (the whole stack, its loop running a motion in torque mode) is
    killed with SIGKILL. With 6007h = quick stop (the default), every drive leaves OPERATION
    ENABLED on its heartbeat consumer: not before the consumer time minus one heartbeat period
    after the kill (it was the consumer, not the end of SYNC: till then each drive held the
    last torque it was sent) and within the consumer time + REACTION_MARGIN; each is then in
    QUICK STOP ACTIVE, its loop's torque is zero, and the arm is at rest after the ramp. With
    6007h = 0 (no action: what a drive without the watch does) the same kill leaves every drive
    OPERATION ENABLED, still applying the last nonzero torques, 0.5 s later — the hazard."""
    channel = f"ct_hb_kill_{os.getpid()}_{next(_channels)}"
    values = overrides(channel, **{"canopen.abort_connection_option": abort_option})
    drives = drives_for(values)
    controller = ControllerProcess(values)
    try:
        assert controller.first_line.startswith("commanding"), controller.first_line
        assert set(drives.states().values()) == {DriveState.OPERATION_ENABLED}
        before = drives.applied_efforts()
        assert max(abs(v) for v in before.values()) > 1.0  # [N·m] holding against gravity
        killed = controller.kill()
        half_way = time.monotonic()
        time.sleep(max(0.0, killed + CONSUMER_TIME / 2 - half_way))
        assert set(drives.states().values()) == {DriveState.OPERATION_ENABLED}
        if abort_option == cia402.ABORT_NO_ACTION:
            # The last torques the process sent: read after the kill, not `before` (a command
            # can still go out between that read and the kill; seen once in a quiet full run).
            last = drives.applied_efforts()
            assert max(abs(v) for v in last.values()) > 1.0  # nonzero: the hazard
            time.sleep(0.5)
            assert set(drives.states().values()) == {DriveState.OPERATION_ENABLED}
            held = drives.applied_efforts()
            assert held == last  # the last torque, still applied
            assert controller.link.ended.is_set()  # nothing of the dead process on the bus
            return
        states = _wait_until_not_enabled(drives, CONSUMER_TIME + 1.0)
        assert set(states.values()) == {DriveState.QUICK_STOP_ACTIVE}
        lost = drives.master_lost_at()
        reactions = {j: t - killed for j, t in lost.items() if t is not None}
        assert len(reactions) == len(drives.drives)
        print(f"kill → quick stop [ms]: {sorted(round(r * 1e3, 1) for r in reactions.values())}")
        assert min(reactions.values()) >= CONSUMER_TIME - MASTER_PERIOD - 2 * WATCH_PERIOD
        assert max(reactions.values()) <= CONSUMER_TIME + REACTION_MARGIN
        time.sleep(4 * WATCH_PERIOD)  # the drives' next own step
        assert set(drives.applied_efforts().values()) == {0.0}
        time.sleep(0.5)  # the quick-stop ramp (6085h, 10 rad/s²) from well under 1 rad/s
        assert max(abs(v) for v in drives.velocities().values()) < 1e-6
        assert set(drives.states().values()) == {DriveState.QUICK_STOP_ACTIVE}
    finally:
        controller.close()
        drives.close()
