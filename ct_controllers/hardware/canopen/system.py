"""CANopen CiA 402 drives, one node per joint (plugin ``ct_controllers/CanopenCia402System``),
over python-can and the ``canopen`` stack: the plugin, its lifecycle, read/write, faults and
effort limits (the other concepts live beside it: see :mod:`ct_controllers.hardware.canopen`).

configure (only when ``hardware.armed``: the refusal comes before the bus is opened): open the
bus, start the master's own heartbeat, add a remote node per joint, configure each drive by SDO
(producer heartbeat 1017h, consumer heartbeat 1016h on the master, abort connection option 6007h,
quick stop option 605Ah, max torque 6072h back to 1000 ‰, mode 6060h) and map its PDOs
(:mod:`.drive_setup`). These are the only SDO transfers: after configure, nothing the control
thread calls (read, write, the effort limit, a fault reset) waits on an acyclic transfer — max
torque 6072h, the grip force of a position-controlled finger, is mapped into RPDO2 and goes out
with every SYNC.

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
period sends each drive's RPDOs and a SYNC (:mod:`.cycle`); the drives answer with their TPDOs,
which make one :class:`StateSample` per SYNC (stamped with the SYNC time, sequence = SYNC count;
:mod:`.receive`). The CiA 402 enable sequence (shutdown → switch on → enable operation) runs in
cyclic synchronous *position* mode holding the measured position, so no drive is ever enabled
with a zero torque under gravity; the first command switches to cyclic synchronous torque
(``canopen.mode: torque``).

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
The bus threads (the SYNC cycle, python-can's receive thread, the master's heartbeat producer)
run at ``SCHED_FIFO`` ``realtime.priority``, as the control loop's thread does, where the
process may (:mod:`.scheduling`;
``diagnostics()["bus_threads"]`` says what they got): on a loaded machine their deadlines are
not kept at normal scheduling.
``read()`` blocks until the next SYNC's sample (at most 1.5 periods: a SYNC that comes a little
late is waited for, not ticked over with the old sample), so the control loop runs on the bus's
cycle, one tick per SYNC; a fault latched meanwhile ends the wait at once (the last sample comes
again, a repeated one), so the loop reacts to it without waiting for the next SYNC's answers.

Units: commands [N·m | N] (torque mode) or [rad | m] (position mode); the per-joint
:class:`~ct_controllers.hardware.cia402.JointScaling` converts to per-mille and encoder counts.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import can
import canopen

from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.configuration import (
    PARAMETERS,
    TORQUE,
    CanopenConfig,
    DriveConfig,
    from_stack_config,
)
from ct_controllers.hardware.canopen.cycle import SyncCycle
from ct_controllers.hardware.canopen.drive_setup import configure_drive
from ct_controllers.hardware.canopen.object_dictionary import (
    MASTER_NODE_ID,
    MAX_TORQUE_DEFAULT,
    cia402_object_dictionary,
    master_object_dictionary,
)
from ct_controllers.hardware.canopen.process_image import ProcessImage
from ct_controllers.hardware.canopen.receive import DriveReceiver, ErrorFrameListener
from ct_controllers.hardware.canopen.scheduling import threads_started_with
from ct_controllers.hardware.cia402 import DriveState, UnitRangeError
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

_DEFAULT_CONFIG = CanopenConfig()


class CanopenCia402System(SystemInterface):
    """CiA 402 drives on one CAN bus, a drive per joint; see the module docstring."""

    BACKEND = "canopen"  # the `backend:` value that selects it
    PARAMETERS = PARAMETERS  # its section of controllers.yaml (canopen.*)
    requires_arming = True
    fault_reactions = reactions(DAMP, HOLD, QUICK_STOP, DISABLE)
    backend_name = "ct_controllers/CanopenCia402System"
    paced_by_read = True

    def __init__(
        self,
        joint_names: Sequence[str],
        drives: Sequence[DriveConfig],
        config: CanopenConfig = _DEFAULT_CONFIG,
        *,
        armed: bool = False,
    ) -> None:
        """``armed``: ``hardware.armed``, without which it refuses to configure (that writes to
        the drives) and to activate."""
        interface = EFFORT if config.mode == TORQUE else POSITION
        super().__init__(
            joint_names=tuple(joint_names),
            command_interfaces=(interface,) * len(joint_names),
            armed=armed,
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
        self._image = ProcessImage(len(self.drives))
        # Torque targets in whole per-mille with the rounding error carried (cia402).
        self._torque_steps = cia402.TorqueQuantizer(tuple(d.scaling for d in self.drives))
        self._receiver = DriveReceiver(self._image, self.joint_names, self.drives)
        self._cycle = SyncCycle(
            self._image, self.drives, config, lambda: self.apply_fault_reaction(QUICK_STOP)
        )
        self._returned_sequence = -1
        self._returned_fault_at: float | None = None  # image.fault_at at the last read()
        self._enabled_once = [False] * len(self.drives)
        self.bus_threads = "not started"  # the scheduling the bus threads got

    @classmethod
    def from_config(cls, description: RobotDescription, config: StackConfig) -> CanopenCia402System:
        """The plugin constructor: joints, drives and bus from
        :func:`~ct_controllers.hardware.canopen.configuration.from_stack_config`, armed as
        ``hardware.armed`` says."""
        setup = from_stack_config(description, config)
        return cls(setup.joint_names, setup.drives, setup.config, armed=config.armed)

    @property
    def quick_stop_sent_at(self) -> float | None:
        """[s] time.monotonic when the backend first sent a quick stop / disable (None: not
        since the last reset)."""
        return self._image.quick_stop_sent_at

    @property
    def sent_cycles(self) -> int:
        """SYNC cycles sent (RPDOs and SYNC) since construction."""
        return self._cycle.sent_cycles

    # --- lifecycle -------------------------------------------------------------------------
    def _on_configure(self) -> None:
        # Configuring writes to the drives (heartbeat, quick stop, PDO mapping by SDO): not
        # unless armed, and the refusal comes before the bus is opened.
        self.check_armed("configure")
        # The threads canopen and python-can start here (receive, heartbeat) inherit it.
        with threads_started_with(self.config.thread_priority) as scheduling:
            self.bus_threads = scheduling
            self._configure_bus()

    def _configure_bus(self) -> None:
        bus = can.Bus(
            interface=self.config.interface,
            channel=self.config.channel,
            bitrate=self.config.bitrate,
        )
        network = canopen.Network(bus)
        network.listeners.append(ErrorFrameListener(self._image))  # type: ignore[arg-type]
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
            with self._image.lock:  # configure_drive writes 1000 ‰; the RPDOs send it on
                self._image.max_torque = [MAX_TORQUE_DEFAULT] * len(self.drives)
                self._image.staged_max_torque = [MAX_TORQUE_DEFAULT] * len(self.drives)
            for i, drive in enumerate(self.drives):
                node = canopen.RemoteNode(drive.node_id, cia402_object_dictionary(drive.node_id))
                network.add_node(node)
                self.nodes.append(node)
                network.subscribe(0x700 + drive.node_id, self._receiver.heartbeat_callback(i))
                configure_drive(node, drive, self.config)
                node.tpdo[2].add_callback(self._receiver.tpdo_callback(i, 2))
                node.tpdo[1].add_callback(self._receiver.tpdo_callback(i, 1))
        except Exception:
            self._close()
            raise

    def _on_activate(self) -> None:
        assert self.network is not None
        # A bus master shares the GIL with its receive and cycle threads: the default 5 ms
        # switch interval would let one thread hold it for more than a SYNC period.
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))
        image = self._image
        with image.lock:
            image.faults = []
            image.fault_at = None
            image.override = None
            image.commanding = False
            image.mode = cia402.CYCLIC_SYNC_POSITION
            image.controlword = [cia402.CW_SHUTDOWN] * len(self.drives)
            self._enabled_once = [False] * len(self.drives)
            image.last_write = -math.inf
        self._torque_steps.reset()
        self.network.nmt.state = "OPERATIONAL"  # broadcast NMT start
        if self.master is not None:
            self.master.nmt.state = "OPERATIONAL"  # what our heartbeat says from now on
        with threads_started_with(self.config.thread_priority):
            self._cycle.start(self.network, self.nodes)
        try:
            self._enable(self.config.enable_timeout)
        except Exception:
            self._cycle.stop()
            raise

    def _enable(self, timeout: float) -> None:
        """Step every drive to OPERATION ENABLED in position mode at its measured position."""
        image = self._image
        deadline = time.monotonic() + timeout
        while True:
            with image.lock:
                states = [s.state for s in image.status]
                heard = all(s.tpdo_sync >= 0 for s in image.status)
                for i, status in enumerate(image.status):
                    image.target_position[i] = status.position_counts
                    image.controlword[i] = cia402.controlword_towards_enabled(status.state)
                    if status.state is DriveState.OPERATION_ENABLED:
                        self._enabled_once[i] = True
                if heard and all(s is DriveState.OPERATION_ENABLED for s in states):
                    image.commanding = True
                    image.last_write = -math.inf  # the command deadline starts at the first write
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
        with image.sample_ready:  # a first sample taken while enabled
            image.sample_ready.wait_for(
                lambda: image.sample is not None and image.sample.sequence is not None
                and image.sample.sequence > image.sync_count - 2,
                timeout=10 * self.config.period,
            )  # fmt: skip

    def _on_deactivate(self) -> None:
        with self._image.lock:
            self._image.commanding = False
            self._image.override = cia402.CW_SHUTDOWN
        time.sleep(3 * self.config.period)  # let the shutdown go out on a few cycles
        self._cycle.stop()
        if self.network is not None:
            with contextlib.suppress(can.CanError):
                self.network.nmt.state = "PRE-OPERATIONAL"
        if self.master is not None:
            self.master.nmt.state = "PRE-OPERATIONAL"

    def _on_cleanup(self) -> None:
        self._close()

    def _close(self) -> None:
        self._cycle.stop()
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

    # --- cyclic interface ------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic()

    def _read(self) -> StateSample:
        image = self._image

        def ready() -> bool:
            # A new sample, or a fault latched since the last return: the loop then reacts at
            # once (with the last sample again, a repeated one) instead of at the next SYNC's.
            sample = image.sample
            if sample is not None and (sample.sequence or 0) > self._returned_sequence:
                return True
            return image.fault_at is not None and image.fault_at != self._returned_fault_at

        with image.sample_ready:
            image.sample_ready.wait_for(ready, timeout=1.5 * self.config.period)
            sample = image.sample
            self._returned_fault_at = image.fault_at
            if sample is None:
                raise LifecycleError("canopen: no sample from the drives yet")
            self._returned_sequence = sample.sequence or 0
            return sample

    def _write(self, command: JointCommand, values: FloatArray) -> None:
        try:
            if self.config.mode == TORQUE:
                converted = self._torque_steps.permille([float(v) for v in values])
            else:
                converted = [
                    d.scaling.position_to_counts(float(v))
                    for d, v in zip(self.drives, values, strict=True)
                ]
        except UnitRangeError as exc:
            raise CommandRejected(str(exc), "range") from exc
        image = self._image
        with image.lock:
            if self.config.mode == TORQUE:
                image.target_torque = converted
                if image.commanding and image.override is None:
                    image.mode = cia402.CYCLIC_SYNC_TORQUE
            else:
                image.target_position = converted
                image.mode = cia402.CYCLIC_SYNC_POSITION
            image.max_torque[:] = image.staged_max_torque  # a raised limit with these targets
            image.controlword = [cia402.CW_ENABLE_OPERATION] * len(self.drives)
            image.last_write = time.monotonic()

    # --- faults ----------------------------------------------------------------------------
    def fault(self) -> str | None:
        with self._image.lock:
            return "; ".join(self._image.faults) if self._image.faults else None

    @property
    def fault_detected_at(self) -> float | None:
        """[s] time.monotonic when the first latched fault was detected."""
        return self._image.fault_at

    def apply_fault_reaction(self, reaction: str) -> None:
        """``quick_stop``: controlword quick stop (the drive ramps down on 6085h and then, with
        605Ah = 5/6, holds in QUICK STOP ACTIVE); ``disable``: disable voltage (brake)."""
        super().apply_fault_reaction(reaction)
        if reaction not in (QUICK_STOP, DISABLE):
            return
        image = self._image
        with image.lock:
            image.override = (
                cia402.CW_QUICK_STOP if reaction == QUICK_STOP else cia402.CW_DISABLE_VOLTAGE
            )
            if image.quick_stop_sent_at is None:
                image.quick_stop_sent_at = time.monotonic()

    def reset_fault(self) -> None:
        """Clear the latched faults when their causes are gone: heartbeats and PDOs fresh, then a
        fault reset and the enable sequence (blocking, at most ``enable_timeout``). Raises
        LifecycleError naming what is still wrong; the faults then stay latched."""
        image = self._image
        now = time.monotonic()
        with image.lock:
            statuses = list(image.status)
        stale = [
            d.joint
            for d, s in zip(self.drives, statuses, strict=True)
            if now - s.heartbeat_at > self.config.heartbeat_timeout
            or now - s.tpdo_at > self.config.effective_pdo_timeout
        ]
        if stale:
            raise LifecycleError(f"canopen: no fresh heartbeat/PDO from {', '.join(stale)}")
        with image.lock:
            image.commanding = False
            image.override = None
            image.mode = cia402.CYCLIC_SYNC_POSITION
        self._enable(self.config.enable_timeout)
        image.clear_faults()

    # --- the drives' effort limit (max torque 6072h, in RPDO2) --------------------------------
    def effort_limit_range(self, joint: str) -> tuple[float, float] | None:
        """Max torque 6072h, per-mille of the rated torque: from 1 ‰ to the rated torque
        [N·m | N]; configured only (the PDOs are mapped then)."""
        if not self.nodes or joint not in self.joint_names:
            return None
        rated = self.drives[self.joint_names.index(joint)].scaling.rated_effort
        return rated / 1000.0, rated

    def _set_effort_limit(self, joint: str, limit: float | None) -> None:
        """Set the drive's max torque 6072h, which goes out in its RPDO2 (mapped at configure)
        with every SYNC: no SDO, nothing waited for. A lowered limit goes out with the next
        SYNC; a raised one with the next write's targets (until then the lower of old and new,
        so a target computed for the old limit never goes out with a higher one); None restores
        1000 ‰. The drive bounds its motor's torque by it in every mode, its CSP position loop
        included."""
        i = self.joint_names.index(joint)
        drive = self.drives[i]
        permille = (
            MAX_TORQUE_DEFAULT
            if limit is None
            else max(1, round(limit / drive.scaling.rated_effort * 1000.0))
        )
        image = self._image
        with image.lock:
            image.staged_max_torque[i] = permille
            image.max_torque[i] = min(image.max_torque[i], permille)

    def max_torques(self) -> dict[str, int]:
        """Joint → max torque 6072h [‰ of rated] its drive's RPDO2 carries now."""
        with self._image.lock:
            return dict(zip(self.joint_names, self._image.max_torque, strict=True))

    def drive_states(self) -> dict[str, str]:
        """Joint → the CiA 402 state its drive last reported."""
        with self._image.lock:
            return {
                d.joint: s.state.value for d, s in zip(self.drives, self._image.status, strict=True)
            }

    def diagnostics(self) -> dict[str, object]:
        values: dict[str, object] = {f"drive.{k}": v for k, v in self.drive_states().items()}
        values.update({f"max_torque.{k}": v for k, v in self.max_torques().items()})
        values["sync_cycles"] = self.sent_cycles
        values["bus_threads"] = self.bus_threads
        values["master_heartbeat_ms"] = round(self.config.master_heartbeat_period * 1000)
        values["drive_consumer_time_ms"] = round(self.config.master_heartbeat_timeout * 1000)
        values["fault"] = self.fault() or ""
        return values
