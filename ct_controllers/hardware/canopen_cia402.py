"""CANopen CiA 402 drives, one node per joint (plugin ``ct_controllers/CanopenCia402System``),
over python-can and the ``canopen`` stack.

configure (only when ``hardware.armed``: the refusal comes before the bus is opened): open the
bus, start the master's own heartbeat, add a remote node per joint, configure each drive by SDO
(producer heartbeat 1017h, consumer heartbeat 1016h on the master, abort connection option 6007h,
quick stop option 605Ah, max torque 6072h back to 1000 ‰, mode 6060h) and map its PDOs (layout in
:mod:`ct_controllers.hardware.cia402`: controlword, mode, target torque / target position out;
statusword, mode display, torque, position and velocity actual in; all synchronous).

The drives watch us: the master is a node of its own (``MASTER_NODE_ID``, a ``canopen.LocalNode``
whose NMT heartbeat producer sends every ``master_heartbeat_period`` from python-can's cyclic
send thread, independent of the control loop and of our cycle thread), and every drive consumes
that heartbeat (1016h: the master's node id and ``master_heartbeat_timeout`` in ms) with
``abort_connection_option`` (6007h, default 3: quick stop) as its reaction to losing it. A
controller process that dies — SIGKILL, a crash, a frozen interpreter — stops the heartbeat, and
every enabled drive quick-stops on its own ramp (6085h) within that time instead of holding the
last torque it was sent. (SYNC loss alone is not what the drives watch: the heartbeat comes from
a thread of its own, so a stalled cycle thread with a live process is caught by our own
``command_timeout`` and by the drives' PDO timing where they have it.)
activate (only when ``hardware.armed``): NMT start, then a cycle thread of our own every control
period sends each drive's RPDOs and a SYNC; the drives answer with their TPDOs, which make one
:class:`StateSample` per SYNC (stamped with the SYNC time, sequence = SYNC count). The CiA 402
enable sequence (shutdown → switch on → enable operation) runs in cyclic synchronous *position*
mode holding the measured position, so no drive is ever enabled with a zero torque under
gravity; the first command switches to cyclic synchronous torque (``canopen.mode: torque``).

Faults the backend detects itself, from its cycle thread and its receive thread, independently
of the control loop (reported through :meth:`fault`, latched until :meth:`reset_fault`):
- a drive's heartbeat (consumer time ``heartbeat_timeout``, 1016h semantics) missing or not
  OPERATIONAL;
- a drive in FAULT (or leaving OPERATION ENABLED on its own);
- a drive's TPDOs missing for ``pdo_timeout``;
- a CAN error frame or a failed send (bus error);
- no command written for ``command_timeout`` after the first one (the control loop stalled;
  until the first write the enabled drives hold their position in CSP): the backend then sends
  the CiA 402 quick stop itself (the drive decelerates on its quick-stop ramp, 605Ah), since
  nothing else can act.
``read()`` blocks until the next SYNC's sample (at most 1.5 periods: a SYNC that comes a little
late is waited for, not ticked over with the old sample), so the control loop runs on the bus's
cycle, one tick per SYNC.

Units: commands [N·m | N] (torque mode) or [rad | m] (position mode); the per-joint
:class:`~ct_controllers.hardware.cia402.JointScaling` converts to per-mille and encoder counts.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import can
import canopen
import numpy as np
from canopen import objectdictionary as od

from ct_controllers.hardware import cia402
from ct_controllers.hardware.cia402 import DriveState, JointScaling, UnitRangeError
from ct_controllers.hardware.interface import (
    DAMP,
    DISABLE,
    EFFORT,
    HOLD,
    POSITION,
    QUICK_STOP,
    CommandRejected,
    FloatArray,
    JointCommand,
    LifecycleError,
    StateSample,
    SystemInterface,
    reactions,
)
from ct_controllers.model.description import RobotDescription

if TYPE_CHECKING:
    from ct_controllers.config import StackConfig

TORQUE = "torque"
POSITION_MODE = "position"
MASTER_NODE_ID = 0x7F  # not a drive: the master's own node id (its heartbeat is 0x77F)
MAX_TORQUE_DEFAULT = 1000  # [‰ of rated torque] 6072h when no effort limit is set


# --- the object dictionary both sides use ----------------------------------------------------
def _variable(
    name: str, index: int, subindex: int, data_type: int, default: int | None = None
) -> od.ODVariable:
    variable = od.ODVariable(name, index, subindex)
    variable.data_type = data_type
    variable.access_type = "rw"
    variable.default = default
    variable.pdo_mappable = index >= 0x6000
    return variable


def cia402_object_dictionary(node_id: int) -> od.ObjectDictionary:
    """The objects this backend uses, for a drive at ``node_id`` (the simulated drives serve the
    same dictionary). PDOs start disabled (bit 31 of the COB-ID); the master maps and enables
    them by SDO."""
    dictionary = od.ObjectDictionary()
    dictionary.node_id = node_id
    dictionary.add_object(_variable("Device type", 0x1000, 0, od.UNSIGNED32, 0x00020192))
    consumer = od.ODArray("Consumer heartbeat time", cia402.CONSUMER_HEARTBEAT)
    consumer.add_member(_variable("Number of entries", 0x1016, 0, od.UNSIGNED8, 1))
    consumer.add_member(_variable("Consumer heartbeat time 1", 0x1016, 1, od.UNSIGNED32, 0))
    dictionary.add_object(consumer)
    dictionary.add_object(
        _variable("Producer heartbeat time", cia402.PRODUCER_HEARTBEAT, 0, od.UNSIGNED16, 0)
    )
    for base, cob_base, layouts, what in (
        (0x1400, 0x200, cia402.RPDO_LAYOUT, "RPDO"),
        (0x1800, 0x180, cia402.TPDO_LAYOUT, "TPDO"),
    ):
        for number in range(len(layouts)):
            com = od.ODRecord(f"{what}{number + 1} communication", base + number)
            cob_id = (cob_base + 0x100 * number + node_id) | (1 << 31)
            com.add_member(_variable("Highest sub-index", base + number, 0, od.UNSIGNED8, 2))
            com.add_member(_variable("COB-ID", base + number, 1, od.UNSIGNED32, cob_id))
            com.add_member(_variable("Transmission type", base + number, 2, od.UNSIGNED8, 255))
            dictionary.add_object(com)
            mapping = od.ODRecord(f"{what}{number + 1} mapping", base + 0x200 + number)
            mapping.add_member(_variable("Number of entries", base + 0x200 + number, 0, 5, 0))
            for sub in range(1, 9):
                mapping.add_member(
                    _variable(f"Entry {sub}", base + 0x200 + number, sub, od.UNSIGNED32, 0)
                )
            dictionary.add_object(mapping)
    for name, index, data_type, default in (
        ("Controlword", cia402.CONTROLWORD, od.UNSIGNED16, 0),
        ("Statusword", cia402.STATUSWORD, od.UNSIGNED16, 0),
        ("Quick stop option code", cia402.QUICK_STOP_OPTION, od.INTEGER16, 2),
        ("Modes of operation", cia402.MODES_OF_OPERATION, od.INTEGER8, 0),
        ("Modes of operation display", cia402.MODES_DISPLAY, od.INTEGER8, 0),
        ("Position actual value", cia402.POSITION_ACTUAL, od.INTEGER32, 0),
        ("Velocity actual value", cia402.VELOCITY_ACTUAL, od.INTEGER32, 0),
        ("Target torque", cia402.TARGET_TORQUE, od.INTEGER16, 0),
        ("Max torque", cia402.MAX_TORQUE, od.UNSIGNED16, 1000),
        ("Rated torque", cia402.RATED_TORQUE, od.UNSIGNED32, 1000),
        ("Torque actual value", cia402.TORQUE_ACTUAL, od.INTEGER16, 0),
        ("Target position", cia402.TARGET_POSITION, od.INTEGER32, 0),
        ("Quick stop deceleration", cia402.QUICK_STOP_DECELERATION, od.UNSIGNED32, 0),
        ("Abort connection option code", cia402.ABORT_CONNECTION_OPTION, od.INTEGER16, 1),
    ):
        dictionary.add_object(_variable(name, index, 0, data_type, default))
    return dictionary


def master_object_dictionary(heartbeat_period: float) -> od.ObjectDictionary:
    """The master's own node: device type and its producer heartbeat time (1017h, from
    ``heartbeat_period`` [s], whole ms), which its NMT heartbeat producer sends at."""
    dictionary = od.ObjectDictionary()
    dictionary.node_id = MASTER_NODE_ID
    dictionary.add_object(_variable("Device type", 0x1000, 0, od.UNSIGNED32, 0))
    dictionary.add_object(
        _variable(
            "Producer heartbeat time",
            cia402.PRODUCER_HEARTBEAT,
            0,
            od.UNSIGNED16,
            round(heartbeat_period * 1000),
        )
    )
    return dictionary


# --- configuration ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DriveConfig:
    """One joint's drive: CANopen ``node_id`` and its unit conversion."""

    joint: str
    node_id: int
    scaling: JointScaling


@dataclass(frozen=True)
class CanopenConfig:
    """The bus and its timing. Times [s]; ``period`` is the SYNC (= control) period."""

    interface: str = "virtual"
    channel: str = "ct_can0"
    bitrate: int = 1_000_000  # [bit/s]
    mode: str = TORQUE  # torque (CST) | position (CSP)
    period: float = 0.004
    heartbeat_period: float = 0.01
    heartbeat_timeout: float = 0.03
    pdo_timeout: float = 0.0  # 0 = 3 periods
    command_timeout: float = 0.0  # 0 = 3 periods
    quick_stop_option: int = 6
    quick_stop_deceleration: float = 10.0  # [rad/s² | m/s²] written to 6085h in counts/s²
    enable_timeout: float = 1.0
    # The master's heartbeat (node MASTER_NODE_ID) and what each drive does without it: the
    # consumer time written to its 1016h (whole ms, 1..65535) and its 6007h reaction.
    master_heartbeat_period: float = 0.01
    master_heartbeat_timeout: float = 0.03
    abort_connection_option: int = cia402.ABORT_QUICK_STOP

    def __post_init__(self) -> None:
        if self.mode not in (TORQUE, POSITION_MODE):
            raise ValueError(f"canopen.mode '{self.mode}' is not one of torque, position")
        if self.heartbeat_timeout <= self.heartbeat_period:
            raise ValueError("canopen.heartbeat_timeout must exceed canopen.heartbeat_period")
        if not 0.001 <= self.master_heartbeat_period <= 65.535:
            raise ValueError("canopen.master_heartbeat_period must be within 1 ms .. 65.535 s")
        if not self.master_heartbeat_period < self.master_heartbeat_timeout <= 65.535:
            raise ValueError(
                "canopen.master_heartbeat_timeout must exceed canopen.master_heartbeat_period "
                "and be at most 65.535 s (1016h holds whole ms in 16 bits)"
            )
        if self.abort_connection_option not in cia402.ABORT_CONNECTION_OPTIONS:
            raise ValueError(
                f"canopen.abort_connection_option {self.abort_connection_option} is not one of "
                f"{cia402.ABORT_CONNECTION_OPTIONS}"
            )

    @property
    def effective_pdo_timeout(self) -> float:
        return self.pdo_timeout or 3.0 * self.period

    @property
    def effective_command_timeout(self) -> float:
        return self.command_timeout or 3.0 * self.period


@dataclass
class _DriveStatus:
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


class CanopenCia402System(SystemInterface):
    """CiA 402 drives on one CAN bus, a drive per joint; see the module docstring."""

    requires_arming = True
    fault_reactions = reactions(DAMP, HOLD, QUICK_STOP, DISABLE)
    backend_name = "ct_controllers/CanopenCia402System"
    paced_by_read = True

    def __init__(
        self,
        joint_names: Sequence[str],
        drives: Sequence[DriveConfig],
        config: CanopenConfig = CanopenConfig(),
    ) -> None:
        interface = EFFORT if config.mode == TORQUE else POSITION
        super().__init__(
            joint_names=tuple(joint_names), command_interfaces=(interface,) * len(joint_names)
        )
        by_joint = {d.joint: d for d in drives}
        if len(by_joint) != len(drives):
            raise ValueError("canopen: a joint has two drives")
        missing = [n for n in self.joint_names if n not in by_joint]
        if missing:
            raise ValueError(f"canopen: no drive configured for joint(s) {', '.join(missing)}")
        unknown = sorted(set(by_joint) - set(self.joint_names))
        if unknown:
            raise ValueError(f"canopen: drive configured for unknown joint(s) {unknown}")
        ids = [d.node_id for d in drives]
        if len(set(ids)) != len(ids) or not all(1 <= i < MASTER_NODE_ID for i in ids):
            raise ValueError(
                f"canopen: node ids must be distinct and in 1..{MASTER_NODE_ID - 1} "
                f"({MASTER_NODE_ID} is the master's own), got {ids}"
            )
        self.drives = tuple(by_joint[n] for n in self.joint_names)
        self.config = config
        self.network: canopen.Network | None = None
        self.nodes: list[canopen.RemoteNode] = []
        self.master: canopen.LocalNode | None = None  # our own node: the heartbeat producer
        self._lock = threading.Lock()
        self._sample_ready = threading.Condition(self._lock)
        self._status = [_DriveStatus() for _ in self.drives]
        self._controlword = [cia402.CW_SHUTDOWN] * len(self.drives)
        self._mode = cia402.CYCLIC_SYNC_POSITION
        self._target_torque = [0] * len(self.drives)  # [per-mille]
        self._target_position = [0] * len(self.drives)  # [counts]
        self._override: int | None = None  # controlword forced by a quick stop / disable
        self._commanding = False  # the enable sequence is over; write() targets go out
        self._last_write = -math.inf
        self._sync_count = -1
        self._sync_time: dict[int, float] = {}
        self._sample: StateSample | None = None
        self._returned_sequence = -1
        self._faults: list[str] = []
        self._fault_at: float | None = None
        self.quick_stop_sent_at: float | None = None  # [s] time.monotonic
        self._cycle: threading.Thread | None = None
        self._stop = threading.Event()
        self._enabled_once = [False] * len(self.drives)
        self.sent_cycles = 0

    @classmethod
    def from_config(cls, description: RobotDescription, config: StackConfig) -> CanopenCia402System:
        """The plugin constructor: joints from ``<ros2_control>``, drives from ``canopen.*`` (per
        joint in ``arm_joints + gripper_joints`` order), joint types (revolute / prismatic) from
        the URDF."""
        params = config.canopen
        assert params is not None
        joints = description.hardware.joint_names
        types = {
            j.get("name", ""): j.get("type", "")
            for j in ET.fromstring(description.urdf).iter("joint")
        }
        order = {name: i for i, name in enumerate(config.joint_names)}
        drives = []
        for joint in joints:
            i = order[joint]
            drives.append(
                DriveConfig(
                    joint=joint,
                    node_id=params.node_ids[i],
                    scaling=JointScaling.for_joint(
                        joint,
                        params.encoder_resolution[i],
                        params.gear_ratio[i],
                        params.position_offset[i],
                        params.rated_torque[i],
                        prismatic=types.get(joint) == "prismatic",
                        screw_lead=params.screw_lead,
                    ),
                )
            )
        return cls(
            joints,
            drives,
            CanopenConfig(
                interface=params.interface,
                channel=params.channel,
                bitrate=params.bitrate,
                mode=params.mode,
                period=config.period,
                heartbeat_period=params.heartbeat_period,
                heartbeat_timeout=params.heartbeat_timeout,
                pdo_timeout=params.pdo_timeout,
                command_timeout=config.effective_command_timeout,
                quick_stop_option=params.quick_stop_option,
                enable_timeout=params.enable_timeout,
                master_heartbeat_period=params.master_heartbeat_period,
                master_heartbeat_timeout=params.master_heartbeat_timeout,
                abort_connection_option=params.abort_connection_option,
            ),
        )

    # --- lifecycle -------------------------------------------------------------------------
    def _on_configure(self) -> None:
        # Configuring writes to the drives (heartbeat, quick stop, PDO mapping by SDO): not
        # unless armed, and the refusal comes before the bus is opened.
        self.check_armed("configure")
        bus = can.Bus(
            interface=self.config.interface,
            channel=self.config.channel,
            bitrate=self.config.bitrate,
        )
        network = canopen.Network(bus)
        network.listeners.append(_ErrorFrameListener(self))  # type: ignore[arg-type]
        network.connect()
        self.network = network
        try:
            # Our heartbeat first: each drive starts watching it with the first one it hears
            # after its 1016h is written (CiA 301).
            master = canopen.LocalNode(
                MASTER_NODE_ID, master_object_dictionary(self.config.master_heartbeat_period)
            )
            network.add_node(master)
            self.master = master
            master.nmt.send_command(0x80)  # boot-up, PRE-OPERATIONAL: the producer starts (1017h)
            self.nodes = []
            for i, drive in enumerate(self.drives):
                node = canopen.RemoteNode(drive.node_id, cia402_object_dictionary(drive.node_id))
                network.add_node(node)
                self.nodes.append(node)
                network.subscribe(0x700 + drive.node_id, self._heartbeat_callback(i))
                self._configure_drive(i, node)
        except Exception:
            self._close()
            raise

    def _configure_drive(self, i: int, node: canopen.RemoteNode) -> None:
        drive = self.drives[i]
        where = f"drive of joint '{drive.joint}' (node {drive.node_id})"
        try:
            node.sdo[cia402.PRODUCER_HEARTBEAT].raw = round(self.config.heartbeat_period * 1000)
            node.sdo[cia402.ABORT_CONNECTION_OPTION].raw = self.config.abort_connection_option
            node.sdo[cia402.CONSUMER_HEARTBEAT][1].raw = cia402.heartbeat_consumer_entry(
                MASTER_NODE_ID, round(self.config.master_heartbeat_timeout * 1000)
            )
            node.sdo[cia402.QUICK_STOP_OPTION].raw = self.config.quick_stop_option
            node.sdo[cia402.MAX_TORQUE].raw = MAX_TORQUE_DEFAULT  # no limit left from before
            node.sdo[cia402.QUICK_STOP_DECELERATION].raw = round(
                self.config.quick_stop_deceleration * drive.scaling.counts_per_unit
            )
            node.sdo[cia402.MODES_OF_OPERATION].raw = cia402.CYCLIC_SYNC_POSITION
            for maps, layouts, cob_base in (
                (node.rpdo, cia402.RPDO_LAYOUT, 0x200),
                (node.tpdo, cia402.TPDO_LAYOUT, 0x180),
            ):
                maps.read(from_od=True)
                for number, layout in enumerate(layouts, start=1):
                    pdo = maps[number]
                    pdo.clear()
                    for index, bits in layout:
                        pdo.add_variable(index, 0, bits)
                    pdo.cob_id = cob_base + 0x100 * (number - 1) + drive.node_id
                    pdo.trans_type = cia402.SYNCHRONOUS
                    pdo.enabled = True
                    pdo.save()
        except (canopen.SdoCommunicationError, canopen.SdoAbortedError) as exc:
            raise LifecycleError(f"canopen: configuring the {where} failed: {exc}") from exc
        node.tpdo[2].add_callback(self._tpdo_callback(i, 2))
        node.tpdo[1].add_callback(self._tpdo_callback(i, 1))

    def _on_activate(self) -> None:
        assert self.network is not None
        # A bus master shares the GIL with its receive and cycle threads: the default 5 ms
        # switch interval would let one thread hold it for more than a SYNC period.
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))
        with self._lock:
            self._faults = []
            self._fault_at = None
            self._override = None
            self._commanding = False
            self._mode = cia402.CYCLIC_SYNC_POSITION
            self._controlword = [cia402.CW_SHUTDOWN] * len(self.drives)
            self._enabled_once = [False] * len(self.drives)
            self._last_write = -math.inf
        self.network.nmt.state = "OPERATIONAL"  # broadcast NMT start
        if self.master is not None:
            self.master.nmt.state = "OPERATIONAL"  # what our heartbeat says from now on
        self._stop.clear()
        self._cycle = threading.Thread(target=self._run_cycle, name="ct-canopen-sync", daemon=True)
        self._cycle.start()
        try:
            self._enable(self.config.enable_timeout)
        except Exception:
            self._stop_cycle()
            raise

    def _enable(self, timeout: float) -> None:
        """Step every drive to OPERATION ENABLED in position mode at its measured position."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                states = [s.state for s in self._status]
                heard = all(s.tpdo_sync >= 0 for s in self._status)
                for i, status in enumerate(self._status):
                    self._target_position[i] = status.position_counts
                    self._controlword[i] = cia402.controlword_towards_enabled(status.state)
                    if status.state is DriveState.OPERATION_ENABLED:
                        self._enabled_once[i] = True
                if heard and all(s is DriveState.OPERATION_ENABLED for s in states):
                    self._commanding = True
                    self._last_write = -math.inf  # the command deadline starts at the first write
                    break
            if time.monotonic() > deadline:
                detail = ", ".join(
                    f"{d.joint}={s.value}" for d, s in zip(self.drives, states, strict=True)
                )
                raise LifecycleError(
                    f"canopen: drives not OPERATION ENABLED after {timeout} s "
                    f"(canopen.enable_timeout): {detail}"
                )
            time.sleep(self.config.period)
        with self._sample_ready:  # a first sample taken while enabled
            self._sample_ready.wait_for(
                lambda: self._sample is not None and self._sample.sequence is not None
                and self._sample.sequence > self._sync_count - 2,
                timeout=10 * self.config.period,
            )  # fmt: skip

    def _on_deactivate(self) -> None:
        with self._lock:
            self._commanding = False
            self._override = cia402.CW_SHUTDOWN
        time.sleep(3 * self.config.period)  # let the shutdown go out on a few cycles
        self._stop_cycle()
        if self.network is not None:
            with contextlib.suppress(can.CanError):
                self.network.nmt.state = "PRE-OPERATIONAL"
        if self.master is not None:
            self.master.nmt.state = "PRE-OPERATIONAL"

    def _on_cleanup(self) -> None:
        self._close()

    def _stop_cycle(self) -> None:
        self._stop.set()
        if self._cycle is not None:
            self._cycle.join(2.0)
            self._cycle = None

    def _close(self) -> None:
        self._stop_cycle()
        if self.master is not None:
            # The drives then see our heartbeat stop: their 6007h reaction, in a state where
            # deactivate has already disabled them (nothing left to stop).
            self.master.nmt.stop_heartbeat()
            self.master = None
        if self.network is not None:
            with contextlib.suppress(Exception):
                self.network.disconnect()
        self.network = None
        self.nodes = []

    # --- the cycle (our thread) ------------------------------------------------------------
    def _run_cycle(self) -> None:
        period = self.config.period
        scheduled = time.monotonic()
        while not self._stop.is_set():
            self._one_cycle()
            scheduled += period
            delay = scheduled - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                scheduled = time.monotonic()  # fell behind: re-base, do not bunch

    def _one_cycle(self) -> None:
        assert self.network is not None
        now = time.monotonic()
        self._check_deadlines(now)
        with self._lock:
            override = self._override
            frames = []
            for i, node in enumerate(self.nodes):
                rpdo1, rpdo2 = node.rpdo[1], node.rpdo[2]
                rpdo1[cia402.CONTROLWORD].raw = (
                    override if override is not None else self._controlword[i]
                )
                rpdo1[cia402.MODES_OF_OPERATION].raw = self._mode
                rpdo1[cia402.TARGET_TORQUE].raw = self._target_torque[i]
                rpdo2[cia402.TARGET_POSITION].raw = self._target_position[i]
                frames.append((rpdo1.cob_id, bytes(rpdo1.data)))
                frames.append((rpdo2.cob_id, bytes(rpdo2.data)))
            self._sync_count += 1
            count = self._sync_count
            self._sync_time[count] = now
            self._sync_time.pop(count - 64, None)
        try:
            for cob_id, data in frames:
                self.network.send_message(cob_id, data)
            self.network.sync.transmit()
            self.sent_cycles += 1
        except (can.CanError, OSError) as exc:
            self._latch(f"canopen: bus error: {type(exc).__name__}: {exc}")

    def _check_deadlines(self, now: float) -> None:
        with self._lock:
            if not self._commanding:
                return
            statuses = list(self._status)
            last_write = self._last_write
        for drive, status in zip(self.drives, statuses, strict=True):
            where = f"drive of joint '{drive.joint}' (node {drive.node_id})"
            silence = now - status.heartbeat_at
            if silence > self.config.heartbeat_timeout:
                self._latch(
                    f"canopen: heartbeat of the {where} lost for {silence * 1e3:.1f} ms "
                    f"(consumer time {self.config.heartbeat_timeout * 1e3:.0f} ms)"
                )
            elif status.heartbeat_state not in (-1, 5):
                self._latch(f"canopen: {where} reports NMT state {status.heartbeat_state}")
            silence = now - status.tpdo_at
            if silence > self.config.effective_pdo_timeout:
                self._latch(
                    f"canopen: no PDO from the {where} for {silence * 1e3:.1f} ms "
                    f"(pdo_timeout {self.config.effective_pdo_timeout * 1e3:.1f} ms)"
                )
        silence = now - last_write  # -inf until the first write: enabled drives hold (CSP)
        if math.isfinite(silence) and silence > self.config.effective_command_timeout:
            self._latch(
                f"canopen: no command for {silence * 1e3:.1f} ms (command_timeout "
                f"{self.config.effective_command_timeout * 1e3:.1f} ms): quick stop"
            )
            self.apply_fault_reaction(QUICK_STOP)

    def _latch(self, reason: str) -> None:
        with self._lock:
            if reason.split(" for ")[0] in (f.split(" for ")[0] for f in self._faults):
                return
            self._faults.append(reason)
            if self._fault_at is None:
                self._fault_at = time.monotonic()
            self._sample_ready.notify_all()

    # --- the receive thread (canopen's notifier) -------------------------------------------
    def _heartbeat_callback(self, i: int) -> Any:
        def on_heartbeat(can_id: int, data: bytearray, timestamp: float) -> None:
            with self._lock:
                self._status[i].heartbeat_at = time.monotonic()
                self._status[i].heartbeat_state = data[0] & 0x7F if data else -1

        return on_heartbeat

    def _tpdo_callback(self, i: int, number: int) -> Any:
        drive = self.drives[i]

        def on_tpdo(pdo: Any) -> None:
            if number == 1:
                statusword = int(pdo[cia402.STATUSWORD].raw)
                try:
                    state = cia402.decode_statusword(statusword)
                except ValueError:
                    state = DriveState.NOT_READY_TO_SWITCH_ON
                with self._lock:
                    status = self._status[i]
                    status.statusword = statusword
                    status.state = state
                    status.mode_display = int(pdo[cia402.MODES_DISPLAY].raw)
                    status.torque_permille = int(pdo[cia402.TORQUE_ACTUAL].raw)
                    commanding = self._commanding and self._override is None
                where = f"drive of joint '{drive.joint}' (node {drive.node_id})"
                if state in (DriveState.FAULT, DriveState.FAULT_REACTION_ACTIVE):
                    self._latch(
                        f"canopen: {where} in {state.value} (statusword 0x{statusword:04X})"
                    )
                elif commanding and state is not DriveState.OPERATION_ENABLED:
                    self._latch(f"canopen: {where} left OPERATION ENABLED: {state.value}")
                return
            now = time.monotonic()
            with self._lock:
                status = self._status[i]
                status.position_counts = int(pdo[cia402.POSITION_ACTUAL].raw)
                status.velocity_counts = int(pdo[cia402.VELOCITY_ACTUAL].raw)
                status.tpdo_at = now
                status.tpdo_sync = self._sync_count
                count = self._sync_count
                if all(s.tpdo_sync == count for s in self._status):
                    self._sample = self._assemble(count)
                    self._sample_ready.notify_all()

        return on_tpdo

    def _assemble(self, count: int) -> StateSample:
        """One sample from every drive's answer to SYNC ``count`` (lock held)."""
        position = np.empty(len(self.drives))
        velocity = np.empty(len(self.drives))
        effort = np.empty(len(self.drives))
        for i, (drive, status) in enumerate(zip(self.drives, self._status, strict=True)):
            position[i] = drive.scaling.counts_to_position(status.position_counts)
            velocity[i] = drive.scaling.counts_to_velocity(status.velocity_counts)
            effort[i] = drive.scaling.permille_to_effort(status.torque_permille)
        return StateSample(
            stamp=self._sync_time.get(count, math.nan),
            joint_names=self.joint_names,
            position=position,
            velocity=velocity,
            effort=effort,
            sequence=count,
        )

    # --- cyclic interface ------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic()

    def _read(self) -> StateSample:
        with self._sample_ready:
            self._sample_ready.wait_for(
                lambda: (
                    self._sample is not None
                    and (self._sample.sequence or 0) > self._returned_sequence
                ),
                timeout=1.5 * self.config.period,
            )
            sample = self._sample
            if sample is None:
                raise LifecycleError("canopen: no sample from the drives yet")
            self._returned_sequence = sample.sequence or 0
            return sample

    def _write(self, command: JointCommand, values: FloatArray) -> None:
        try:
            if self.config.mode == TORQUE:
                converted = [
                    d.scaling.effort_to_permille(float(v))
                    for d, v in zip(self.drives, values, strict=True)
                ]
            else:
                converted = [
                    d.scaling.position_to_counts(float(v))
                    for d, v in zip(self.drives, values, strict=True)
                ]
        except UnitRangeError as exc:
            raise CommandRejected(str(exc), "range") from exc
        with self._lock:
            if self.config.mode == TORQUE:
                self._target_torque = converted
                if self._commanding and self._override is None:
                    self._mode = cia402.CYCLIC_SYNC_TORQUE
            else:
                self._target_position = converted
                self._mode = cia402.CYCLIC_SYNC_POSITION
            self._controlword = [cia402.CW_ENABLE_OPERATION] * len(self.drives)
            self._last_write = time.monotonic()

    # --- faults ----------------------------------------------------------------------------
    def fault(self) -> str | None:
        with self._lock:
            return "; ".join(self._faults) if self._faults else None

    @property
    def fault_detected_at(self) -> float | None:
        """[s] time.monotonic when the first latched fault was detected."""
        return self._fault_at

    def apply_fault_reaction(self, reaction: str) -> None:
        """``quick_stop``: controlword quick stop (the drive ramps down on 6085h and then, with
        605Ah = 5/6, holds in QUICK STOP ACTIVE); ``disable``: disable voltage (brake)."""
        super().apply_fault_reaction(reaction)
        if reaction not in (QUICK_STOP, DISABLE):
            return
        with self._lock:
            self._override = (
                cia402.CW_QUICK_STOP if reaction == QUICK_STOP else cia402.CW_DISABLE_VOLTAGE
            )
            if self.quick_stop_sent_at is None:
                self.quick_stop_sent_at = time.monotonic()

    def reset_fault(self) -> None:
        """Clear the latched faults when their causes are gone: heartbeats and PDOs fresh, then a
        fault reset and the enable sequence (blocking, at most ``enable_timeout``). Raises
        LifecycleError naming what is still wrong; the faults then stay latched."""
        now = time.monotonic()
        with self._lock:
            statuses = list(self._status)
        stale = [
            d.joint
            for d, s in zip(self.drives, statuses, strict=True)
            if now - s.heartbeat_at > self.config.heartbeat_timeout
            or now - s.tpdo_at > self.config.effective_pdo_timeout
        ]
        if stale:
            raise LifecycleError(f"canopen: no fresh heartbeat/PDO from {', '.join(stale)}")
        with self._lock:
            self._commanding = False
            self._override = None
            self._mode = cia402.CYCLIC_SYNC_POSITION
        self._enable(self.config.enable_timeout)
        with self._lock:
            self._faults = []
            self._fault_at = None
            self.quick_stop_sent_at = None

    # --- the drives' effort limit (max torque 6072h) ----------------------------------------
    def effort_limit_range(self, joint: str) -> tuple[float, float] | None:
        """Max torque 6072h, per-mille of the rated torque: from 1 ‰ to the rated torque
        [N·m | N]; configured only (it is written by SDO)."""
        if not self.nodes or joint not in self.joint_names:
            return None
        rated = self.drives[self.joint_names.index(joint)].scaling.rated_effort
        return rated / 1000.0, rated

    def _set_effort_limit(self, joint: str, limit: float | None) -> None:
        """Write the drive's max torque 6072h by SDO (blocking, one round trip: the control
        thread calls this only when a limit changes, e.g. once as a grasp begins); None
        restores 1000 ‰. The drive bounds its motor's torque by it in every mode, its CSP
        position loop included."""
        i = self.joint_names.index(joint)
        drive = self.drives[i]
        permille = (
            MAX_TORQUE_DEFAULT
            if limit is None
            else max(1, round(limit / drive.scaling.rated_effort * 1000.0))
        )
        try:
            self.nodes[i].sdo[cia402.MAX_TORQUE].raw = permille
        except (canopen.SdoCommunicationError, canopen.SdoAbortedError) as exc:
            raise LifecycleError(
                f"canopen: writing max torque 6072h = {permille} ‰ to the drive of joint "
                f"'{joint}' (node {drive.node_id}) failed: {exc}"
            ) from exc

    def drive_states(self) -> dict[str, str]:
        """Joint → the CiA 402 state its drive last reported."""
        with self._lock:
            return {d.joint: s.state.value for d, s in zip(self.drives, self._status, strict=True)}

    def diagnostics(self) -> dict[str, object]:
        values: dict[str, object] = {f"drive.{k}": v for k, v in self.drive_states().items()}
        values["sync_cycles"] = self.sent_cycles
        values["master_heartbeat_ms"] = round(self.config.master_heartbeat_period * 1000)
        values["drive_consumer_time_ms"] = round(self.config.master_heartbeat_timeout * 1000)
        values["fault"] = self.fault() or ""
        return values


class _ErrorFrameListener(can.Listener):
    """Latches a bus error on every CAN error frame (canopen's own listener skips them)."""

    def __init__(self, system: CanopenCia402System) -> None:
        self.system = system

    def on_message_received(self, msg: can.Message) -> None:
        if msg.is_error_frame:
            self.system._latch(
                f"canopen: bus error: CAN error frame (id 0x{msg.arbitration_id:X}, "
                f"data {bytes(msg.data).hex()})"
            )

    def on_error(self, exc: Exception) -> None:
        self.system._latch(f"canopen: bus error: {type(exc).__name__}: {exc}")
