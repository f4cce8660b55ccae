"""Simulated CiA 402 drives on a python-can bus, for tests and ``ct-bench faults``: a real
``canopen.LocalNode`` per joint (SDO server, NMT slave, heartbeat producer, PDOs configured by
the master over the bus) and a small motor model under the arm.

On every SYNC each operational drive takes the RPDOs the master sent before it (controlword,
mode, target torque / target position, max torque 6072h — written into its dictionary, as a drive
does with a mapped object), steps its CiA 402 state machine
(:func:`~ct_controllers.hardware.cia402.drive_transition`), the motors move, and every drive
answers with its TPDOs (statusword, mode display, torque, position and velocity actual).

The motor model: the arm's rigid-body dynamics from its URDF (Pinocchio: M(q) plus a reflected
rotor inertia on the diagonal, b(q, v), gravity), viscous joint friction — both sized for each
joint (:func:`rotor_inertia`, :func:`drive_friction`), the friction plus the URDF's own
``<dynamics damping>`` — for any arm the model layer takes (a ``<mimic>`` follower moves with
its master, a continuous joint keeps its unwrapped angle: :class:`RotorDynamics`), and per drive
- OPERATION ENABLED, cyclic synchronous torque: the target torque (per-mille of rated);
- OPERATION ENABLED, cyclic synchronous position: a stiff PD servo on the target position;
- QUICK STOP ACTIVE: the drive ramps its joint's speed to zero at the quick stop deceleration
  (6085h), then holds it;
- any other state: the holding brake locks the joint.
In a process of their own (:mod:`~ct_controllers.sim.drives_process`) the drives' threads run
at ``SCHED_FIFO`` ``DRIVES_PRIORITY`` where the process may, as the hardware they stand for
keeps its own time. The motors run on the drives' own clock
(``WATCH_PERIOD``), not on SYNC: between SYNCs, and without any, they move on under each
drive's last command (a drive in cyclic synchronous torque keeps its last target torque), as
real drives do when their master goes silent; a SYNC's answer is the state at the SYNC.

Each drive is a CiA 301 heartbeat consumer: once its 1016h names a producer (the master) and a
time, it watches that producer's heartbeat from the first one it hears, on its own timer
(``WATCH_PERIOD``); when none comes within the time, it applies its abort connection option
code (6007h) if it is in OPERATION ENABLED — 1 fault, 2 disable voltage, 3 quick stop (then its
605Ah ramp) — and records when (:meth:`SimulatedDrives.master_lost_at`). After that it does not
enable again until it has passed through SWITCH ON DISABLED (the master's disable-voltage step
of its enable sequence), nor at all while the heartbeat stays away; a heartbeat coming back
re-arms the watch (CiA 301).

Fault injection (the plant side of a fault, as it happens on a real bus):
:meth:`SimulatedDrives.stop_heartbeat`, :meth:`enter_fault`, :meth:`stop_pdos`,
:meth:`send_error_frame`, :meth:`drop_sdo_responses` (the drive serves an SDO request but its
response is lost on the bus). Every RPDO a drive takes in is logged for "nothing unsafe written"
checks (:attr:`SimulatedDrives.log`).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import can
import canopen
import numpy as np
import pinocchio as pin

from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.object_dictionary import cia402_object_dictionary
from ct_controllers.hardware.canopen.scheduling import threads_started_with
from ct_controllers.hardware.canopen.system import CanopenCia402System
from ct_controllers.hardware.cia402 import DriveState, JointScaling
from ct_controllers.model.configuration import ConfigurationMap
from ct_controllers.model.robot import RobotModel
from ct_controllers.sim.object_contact import (
    CONTACT_DAMPING,
    CONTACT_STIFFNESS,
    ObjectBetweenFingers,
)

# Reflected rotor inertia added to M's diagonal (rotor inertia × gear ratio²): [kg·m²] for a
# revolute joint, [kg] for a prismatic one (a fine-pitch screw reflects a large mass) — at most;
# a drive sized for a small joint reflects less (:func:`rotor_inertia`).
ROTOR_INERTIA = 0.1
ROTOR_MASS = 1.0
FRICTION = 0.5  # [N·m·s/rad | N·s/m] the drives' viscous friction — at most (drive_friction)
# A drive sized for its joint: its reflected rotor inertia at most SIZE_RATIO times the least
# inertia its joint moves (M(q)ᵢᵢ over the joint ranges, armature included), its viscous friction
# at most what gives the joint (that inertia plus the rotor's) a mechanical time constant of
# MECHANICAL_TIME. Bounds that leave every arm of the tests as it was (the bundled fingers' 1 kg
# is 20× their 0.05 kg, the Panda's 33× its fingers', its wrist's 0.1 kg·m² 15× its link's, the
# UR5's 6×; the bundled wrist's 0.5 N·m·s/rad on its 0.1 kg·m² armature is 0.2 s); a 10 cm
# revolute jaw of 1.7e-4 kg·m² gets 0.0068 kg·m² and 0.035 N·m·s/rad rather than 0.1 and 0.5,
# which dwarfed it and the gains designed for it (0.0675 N·m/rad at 100 Hz: a 7 s time
# constant against 0.5 N·m·s/rad).
SIZE_RATIO = 40.0
MECHANICAL_TIME = 0.2  # [s]
SERVO_BANDWIDTH = 60.0  # [rad/s] of the CSP position servo
SUBSTEP = 0.0005  # [s] integration step of the motor model
# SCHED_FIFO priority of the drives' threads (receive, timer, heartbeats; where permitted) in a
# process of their own: they stand for hardware of their own, so on a loaded machine their
# answers and heartbeats keep their time as a drive's do. Above the bus master's and the control
# loop's (realtime.priority, 50): a drive's controller does not wait for the host. (In the
# master's process they run at normal scheduling, and so should the master's bus threads: a
# real-time thread must not wait for the GIL behind a normal one preempted by other work.)
DRIVES_PRIORITY = 55
WATCH_PERIOD = 0.002  # [s] the drives' own timer: heartbeat consumer checks, the motors' steps
MAX_STEP = 0.05  # [s] longest motor step at once (a stalled simulation does not leap)
NOTIFIER_CYCLE = 0.05  # [s] longest wait of the network's receive thread for a frame


def least_inertia(model: RobotModel, samples: int = 64) -> np.ndarray:
    """Each joint's least inertia M(q)ᵢᵢ [kg·m² | kg] (armature included), model order, over
    ``samples`` configurations drawn (seeded) in the joint ranges (a continuous joint's in ±π)."""
    lower = np.where(np.isfinite(model.limits.lower), model.limits.lower, -np.pi)
    upper = np.where(np.isfinite(model.limits.upper), model.limits.upper, np.pi)
    rng = np.random.default_rng(0)
    diagonals = [np.diag(model.mass_matrix(rng.uniform(lower, upper))) for _ in range(samples)]
    return np.min(diagonals, axis=0)


def rotor_inertia(model: RobotModel, least: np.ndarray | None = None) -> np.ndarray:
    """Reflected rotor inertia per joint, model order, beyond the armature the model's M
    already has: the drives reflect ``ROTOR_INERTIA`` [kg·m²] on revolute joints and
    ``ROTOR_MASS`` [kg] on prismatic ones in all — at most ``SIZE_RATIO`` times the joint's
    least inertia (``least``: :func:`least_inertia`, computed when not given), a drive sized
    for its joint."""
    rotor = np.full(model.nv, ROTOR_INERTIA)
    pin_model = model.model
    for name in model.joint_names:
        # JointModelPX/PY/PZ and JointModelPrismaticUnaligned are the 1-DOF prismatic joints.
        if pin_model.joints[pin_model.getJointId(name)].shortname().startswith("JointModelP"):
            rotor[model.v_index(name)] = ROTOR_MASS
    least = least_inertia(model) if least is None else least
    rotor = np.minimum(rotor, SIZE_RATIO * least)
    return np.maximum(rotor - pin_model.armature, 0.0)


def drive_friction(model: RobotModel, least: np.ndarray | None = None) -> np.ndarray:
    """Viscous friction per joint [N·m·s/rad | N·s/m], model order: the drive's, ``FRICTION`` at
    most (least inertia + rotor) / ``MECHANICAL_TIME`` (a drive sized for its joint), plus the
    joint's own ``<dynamics damping>`` from the URDF (which MuJoCo simulates too, and the
    stack's gain design and damping feed-forward know); ``least`` as for :func:`rotor_inertia`."""
    least = least_inertia(model) if least is None else least
    inertia = least + rotor_inertia(model, least)
    return np.minimum(FRICTION, inertia / MECHANICAL_TIME) + model.joint_damping


class RotorDynamics:
    """The arm with its drives' reflected rotor inertia ``rotor`` (:func:`rotor_inertia`) as
    Pinocchio armature, on a model copy and scratch data of its own: q̈ = (M(q) + diag(rotor))⁻¹
    (τ − b(q, v)) for any arm the model layer takes — joint positions one per joint (model
    order), converted to Pinocchio's configuration here (a continuous joint's (cos θ, sin θ)).

    Where the articulated-body algorithm takes the model (no ``<mimic>`` joint), q̈ comes from it
    in O(n) compiled code — the motor model's free-joint step without forming M or solving with
    it in Python (which took longer than the 10 ms it simulated on a loaded machine). Pinocchio's
    ABA and M⁻¹ recursion refuse a mimic joint; on such a model q̈ comes from the same equation
    in reduced coordinates — M(q) and b(q, v) of the independent joints (Pinocchio's CRBA and
    RNEA take the follower's inertia and its forces through its master: Gᵀ M G and Gᵀ b of the
    model with the follower free, G the mimic map) — solved in Python: the follower moves with
    its master exactly, as MuJoCo's equality holds it (to its solver's tolerance)."""

    def __init__(self, model: RobotModel, rotor: np.ndarray) -> None:
        self.model = pin.Model(model.model)  # a copy: the caller's model keeps its armature
        self.model.armature = model.model.armature + rotor
        self.data = self.model.createData()
        self._configuration = ConfigurationMap(self.model).to_pinocchio  # scratch of its own
        # Pinocchio's aba and computeMinverse refuse a model with mimic joints.
        self.articulated = len(self.model.mimicking_joints) == 0
        # No continuous joint (nq == nv): Pinocchio takes the joint positions as they are, and
        # the sub-step calls ABA directly — no conversion call per sub-step (in-process drives
        # share the GIL with the control loop).
        self._direct = self.articulated and self.model.nq == self.model.nv

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """M(q) + diag(rotor), symmetric [kg·m² | kg] (model order)."""
        upper = pin.crba(self.model, self.data, self._configuration(q))
        return np.triu(upper) + np.triu(upper, 1).T

    def acceleration(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """q̈ [rad/s² | m/s²] under ``tau`` [N·m | N] (model order)."""
        if self._direct:
            return np.asarray(pin.aba(self.model, self.data, q, v, tau))
        configuration = self._configuration(q)
        if self.articulated:
            return np.asarray(pin.aba(self.model, self.data, configuration, v, tau))
        bias = pin.nonLinearEffects(self.model, self.data, configuration, v)
        return np.linalg.solve(self.mass_matrix(q), tau - bias)

    def constrained_acceleration(
        self,
        q: np.ndarray,
        v: np.ndarray,
        tau: np.ndarray,
        prescribed: np.ndarray,
        prescribed_acceleration: np.ndarray,
    ) -> np.ndarray:
        """q̈ when the joints in ``prescribed`` (a mask) move with ``prescribed_acceleration``
        (held by a brake: 0, or on a drive's ramp) and the others are free under ``tau``.

        The brakes add joint torques λ on the prescribed joints p only: q̈ = M⁻¹ (τ − b + Sₚᵀ λ)
        with q̈ₚ given, so (M⁻¹)ₚₚ λ = q̈ₚ − q̈₀ₚ where q̈₀ = M⁻¹ (τ − b) is the unconstrained
        (ABA) acceleration. M⁻¹ comes from Pinocchio's O(n²) recursion; only a |p|×|p| system
        is solved in Python. The same solution as M_ff q̈_f = τ_f − b_f − M_fp q̈ₚ, without
        forming and factoring M on every sub-step (7× slower: a braked joint made the
        simulated drives fall behind the bus, so their torques reached the motors late) —
        which is the way on a model with mimic joints (no ABA, no M⁻¹ recursion there)."""
        if not self.articulated:
            configuration = self._configuration(q)
            mass = self.mass_matrix(q)
            bias = pin.nonLinearEffects(self.model, self.data, configuration, v)
            acceleration = np.array(prescribed_acceleration, dtype=float)
            acceleration[~prescribed] = 0.0
            free = ~prescribed
            force = (tau - bias - mass @ acceleration)[free]
            acceleration[free] = np.linalg.solve(mass[np.ix_(free, free)], force)
            return acceleration
        configuration = q if self._direct else self._configuration(q)
        unconstrained = np.asarray(pin.aba(self.model, self.data, configuration, v, tau))
        inverse = pin.computeMinverse(self.model, self.data, configuration)  # upper triangle
        held = np.flatnonzero(prescribed)
        # The columns of the symmetric M⁻¹ for the held joints, from the upper triangle.
        columns = np.empty((self.model.nv, held.size))
        for k, j in enumerate(held):
            columns[: j + 1, k] = inverse[: j + 1, j]
            columns[j + 1 :, k] = inverse[j, j + 1 :]
        wanted = prescribed_acceleration[held]
        gap = wanted - unconstrained[held]
        if held.size == 1:  # one brake (the common case): no 1×1 solve's overhead
            acceleration = unconstrained + columns[:, 0] * (gap[0] / columns[held[0], 0])
        else:
            acceleration = unconstrained + columns @ np.linalg.solve(columns[held], gap)
        acceleration[held] = wanted  # exactly, not to rounding
        return acceleration


def motor_step(
    model: RobotModel,
    q: np.ndarray,
    v: np.ndarray,
    rotor: np.ndarray,
    efforts: np.ndarray,
    locked: np.ndarray,
    ramps: Mapping[int, float],
    dt: float,
    servos: Mapping[int, tuple[float, float, float, float]] | None = None,
    contact: ObjectBetweenFingers | None = None,
    dynamics: RotorDynamics | None = None,
    friction: np.ndarray | float = FRICTION,
) -> tuple[np.ndarray, np.ndarray]:
    """The motor model: (q, v) after ``dt`` [s] under ``efforts`` [N·m | N] (model order), with
    (M(q) + diag(rotor)) q̈ = τ − b(q, v) − friction·v for free joints; ``locked`` joints are held
    by their brakes; joints in ``ramps`` (index → deceleration [rad/s² | m/s²]) are slowed to rest
    by their drive; joints in ``servos`` (index → (target [rad | m], kp, kd, max effort)) are
    position-servoed by their drive at every sub-step, as a drive's fast inner loop does:
    τ = clip(kp (target − q) − kd v + g_i(q), ±max); ``contact``, an object between the
    fingers, adds its contact forces on the finger joints at every sub-step (the motors'
    efforts stay what they are: what a drive reports). Semi-implicit Euler in steps of at most
    ``SUBSTEP``; the joint limits are end stops. ``dynamics`` (the same model and ``rotor``):
    sub-steps take q̈ from it (ABA; with braked or ramped joints, its constrained form) rather
    than from solving with M — the same equation. ``friction`` [N·m·s/rad | N·s/m]: per joint
    (model order; :func:`drive_friction`) or one for all."""
    q, v = q.copy(), v.copy()
    steps = max(1, math.ceil(dt / SUBSTEP)) if dt > 0 else 0
    h = dt / steps if steps else 0.0
    for _ in range(steps):
        prescribed = locked.copy()
        acceleration = np.zeros(model.nv)
        for index, deceleration in ramps.items():
            prescribed[index] = True
            speed = abs(v[index])
            acceleration[index] = -math.copysign(min(deceleration, speed / h), v[index])
        v[locked] = 0.0
        free = ~prescribed
        applied = efforts
        if servos:
            applied = efforts.copy()
            gravity = model.gravity(q)
            for index, (target, kp, kd, limit) in servos.items():
                tau = kp * (target - q[index]) - kd * v[index] + gravity[index]
                applied[index] = min(max(tau, -limit), limit)
        if dynamics is not None and free.any():
            force = applied - friction * v
            if contact is not None:
                contact.add_joint_forces(q, v, force)
            if prescribed.any():
                acceleration = dynamics.constrained_acceleration(
                    q, v, force, prescribed, acceleration
                )
            else:
                acceleration = dynamics.acceleration(q, v, force)
        elif free.any():
            mass = model.mass_matrix(q) + np.diag(rotor)
            force = applied - model.bias(q, v) - friction * v
            if contact is not None:
                contact.add_joint_forces(q, v, force)
            force[free] -= mass[np.ix_(free, prescribed)] @ acceleration[prescribed]
            acceleration[free] = np.linalg.solve(mass[np.ix_(free, free)], force[free])
        v += h * acceleration
        v[locked] = 0.0
        q += h * v
    lower, upper = model.limits.lower, model.limits.upper
    hit = (q < lower) | (q > upper)
    q = np.clip(q, lower, upper)
    v[hit] = 0.0  # the mechanical end stop
    return q, v


@dataclass(frozen=True)
class RpdoRecord:
    """One cycle's command as a drive took it in (time.monotonic [s])."""

    time: float
    joint: str
    controlword: int
    mode: int
    target_torque: int  # [per-mille]
    target_position: int  # [counts]
    state: DriveState  # the state it put the drive in


def _read(node: canopen.LocalNode, index: int) -> int:
    """An integer object of the drive's own dictionary (no bus traffic)."""
    variable = node.sdo[index]
    assert isinstance(variable, canopen.sdo.SdoVariable)
    return int(variable.raw)


def _write(node: canopen.LocalNode, index: int, value: int) -> None:
    variable = node.sdo[index]
    assert isinstance(variable, canopen.sdo.SdoVariable)
    variable.raw = value


class _PdoCodec:
    """One PDO's mapped objects (index, byte offset, byte length, signed), from its mapping as
    the master wrote it: the drive packs and unpacks the PDO's bytes per object with
    ``int.from_bytes`` — what canopen's PDO variables do, without their per-access bookkeeping
    (nine drives' PDO objects through them took milliseconds of every SYNC)."""

    def __init__(self, pdo: canopen.pdo.PdoMap) -> None:
        fields: list[tuple[int, int, int, bool]] = []
        for variable in pdo.map:
            offset = variable.offset  # [bits], set once the map is read
            if offset is None or offset % 8 or variable.length % 8:
                raise ValueError(f"{pdo.name}: object 0x{variable.index:04X} is not byte-aligned")
            signed = variable.od.data_type in canopen.objectdictionary.SIGNED_TYPES
            fields.append((variable.index, offset // 8, variable.length // 8, signed))
        self.fields = tuple(fields)
        self.size = sum(length for _, _, length, _ in fields)

    def unpack(self, data: bytes | bytearray) -> dict[int, int]:
        """Object index → value of ``data`` (a received PDO)."""
        return {
            index: int.from_bytes(data[offset : offset + length], "little", signed=signed)
            for index, offset, length, signed in self.fields
        }

    def pack(self, values: Mapping[int, int]) -> bytearray:
        """The PDO's bytes for ``values`` (object index → value)."""
        data = bytearray(self.size)
        for index, offset, length, signed in self.fields:
            data[offset : offset + length] = values[index].to_bytes(length, "little", signed=signed)
        return data


# Objects the motor model reads every SYNC, mirrored from the drive's dictionary as SDO (and the
# RPDO-mapped max torque) write them: its dictionary itself is slow to read on the hot path.
_MIRRORED = (
    cia402.QUICK_STOP_OPTION,
    cia402.QUICK_STOP_DECELERATION,
    cia402.MAX_TORQUE,
)


class _Drive:
    def __init__(self, joint: str, node: canopen.LocalNode, scaling: JointScaling) -> None:
        self.joint = joint
        self.node = node
        self.scaling = scaling
        self.state = DriveState.SWITCH_ON_DISABLED
        self.previous_controlword = 0
        self.mode = 0
        self.pdo_ready = False
        self.send_pdos = True
        self.applied_effort = 0.0  # [N·m | N]
        self.hold_position: float | None = None
        # The heartbeat consumer (1016h sub 1): (producer node id, consumer time [s]).
        self.consumer: tuple[int, float] | None = None
        self.producer_heard_at: float | None = None  # monitoring starts with the first one
        self.heartbeat_lost = False  # the consumer timed out; a heartbeat re-arms it
        self.lost_at: float | None = None  # [s] time.monotonic of the last time-out
        self.connection_aborted = False  # 6007h applied: no enable before SWITCH ON DISABLED
        self.rpdo_max_torque = False  # its RPDO2 maps max torque 6072h (read at NMT start)
        self.max_torque = -1  # [‰] the last 6072h taken from RPDO2 (-1: none yet)
        self.sdo_responses_to_drop = 0  # fault injection: responses lost (-1: all)
        self.sdo_responses_dropped = 0
        self.objects = {index: _read(node, index) for index in _MIRRORED}  # of its dictionary
        self.rpdo_codecs: tuple[_PdoCodec, ...] = ()  # RPDO1, RPDO2 (at NMT start)
        self.tpdo_codecs: tuple[_PdoCodec, ...] = ()  # TPDO1, TPDO2
        self.command: dict[int, int] = {}  # object index → value, from the last RPDOs taken


class SimulatedDrives:
    """``joint_names`` driven by CiA 402 drives at ``node_ids`` on ``channel`` (python-can
    ``interface``), starting at ``initial_positions`` [rad | m] by joint name."""

    def __init__(
        self,
        model: RobotModel,
        joint_names: Sequence[str],
        node_ids: Sequence[int],
        scalings: Sequence[JointScaling],
        channel: str,
        interface: str = "virtual",
        initial_positions: Mapping[str, float] | None = None,
        log_size: int = 200_000,
        priority: int = 0,
    ) -> None:
        """``priority``: SCHED_FIFO priority of the drives' threads (0: normal scheduling;
        :data:`DRIVES_PRIORITY` in a process of their own)."""
        self.model = model
        self.priority = priority
        self.joint_names = tuple(joint_names)
        self._index = model.indices(self.joint_names)
        self.q = np.zeros(model.nq)  # [rad | m]
        for name, value in (initial_positions or {}).items():
            self.q[model.q_index(name)] = value
        self.v = np.zeros(model.nv)
        least = least_inertia(model)  # once: 64 mass matrices
        self.rotor = rotor_inertia(model, least)
        self.friction = drive_friction(model, least)
        self.dynamics = RotorDynamics(model, self.rotor)
        self.network = canopen.Network()
        # The receive thread checks for its stop between reads of at most this long: canopen's
        # 1 s held close() (disconnect() joins the thread) for a whole second on a bus the stack
        # had already left, every rig.
        self.network.NOTIFIER_CYCLE = NOTIFIER_CYCLE
        with threads_started_with(priority) as scheduling:  # its receive thread
            self.scheduling = scheduling
            self.network.connect(interface=interface, channel=channel)
        self.drives: list[_Drive] = []
        for joint, node_id, scaling in zip(joint_names, node_ids, scalings, strict=True):
            node = canopen.LocalNode(node_id, cia402_object_dictionary(node_id))
            self.network.add_node(node)
            self.drives.append(_Drive(joint, node, scaling))
        self._lock = threading.Lock()
        self.log: deque[RpdoRecord] = deque(maxlen=log_size)
        self.contact: ObjectBetweenFingers | None = None  # an object between the fingers
        self.syncs = 0
        self.sync_handling: deque[float] = deque(maxlen=10_000)  # [s] per SYNC answered
        self._last_step: float | None = None  # [s] time.monotonic the motors were stepped to
        self._last_sync: float | None = None  # [s] time.monotonic of the last SYNC
        self._producers: set[int] = set()  # node ids whose heartbeat we listen to
        self.network.subscribe(0x80, self._on_sync)
        self.network.subscribe(0, self._on_nmt)
        for drive in self.drives:
            drive.node.add_write_callback(self._sdo_write_callback(drive))
            self._lose_sdo_responses_on_request(drive)
            self._publish(drive)
            drive.node.nmt.send_command(0x80)  # boot: INITIALISING → PRE-OPERATIONAL
        self._closing = threading.Event()
        self._timer = threading.Thread(target=self._watch, name="ct-sim-drives", daemon=True)
        with threads_started_with(priority):
            self._timer.start()

    def close(self) -> None:
        self._closing.set()
        self._timer.join(2.0)
        for drive in self.drives:
            drive.node.nmt.stop_heartbeat()
        self.network.disconnect()

    # --- fault injection -------------------------------------------------------------------
    def _drive(self, joint: str) -> _Drive:
        for drive in self.drives:
            if drive.joint == joint:
                return drive
        raise KeyError(f"no simulated drive for joint '{joint}'")

    def stop_heartbeat(self, joint: str) -> None:
        """The drive's heartbeat stops (PDOs go on): a lost node as the consumer sees it."""
        self._drive(joint).node.nmt.stop_heartbeat()

    def enter_fault(self, joint: str) -> None:
        """The drive trips (e.g. over-current): FAULT, brake on, until a fault reset."""
        with self._lock:
            self._drive(joint).state = DriveState.FAULT

    def stop_pdos(self, joint: str) -> None:
        """The drive stops answering SYNC with its TPDOs (heartbeat goes on)."""
        with self._lock:
            self._drive(joint).send_pdos = False

    def send_error_frame(self) -> None:
        """A CAN error frame on the bus, as a controller reports a bus error."""
        assert self.network.bus is not None
        self.network.bus.send(can.Message(is_error_frame=True, arbitration_id=0x20000004))

    def drop_sdo_responses(self, joint: str, count: int = -1) -> None:
        """The drive's next ``count`` SDO responses (-1: all until :meth:`heal`) are lost on
        the bus: it serves each request (a download is written) but the master never hears the
        answer, as when a response frame is corrupted."""
        with self._lock:
            self._drive(joint).sdo_responses_to_drop = count

    def sdo_responses_dropped(self) -> dict[str, int]:
        """Joint → SDO responses its drive has lost (:meth:`drop_sdo_responses`)."""
        with self._lock:
            return {d.joint: d.sdo_responses_dropped for d in self.drives}

    def _lose_sdo_responses_on_request(self, drive: _Drive) -> None:
        server = drive.node.sdo
        send = server.send_response

        def send_response(response: bytes) -> None:
            with self._lock:
                drop = drive.sdo_responses_to_drop != 0
                if drop:
                    drive.sdo_responses_dropped += 1
                    if drive.sdo_responses_to_drop > 0:
                        drive.sdo_responses_to_drop -= 1
            if not drop:
                send(response)

        server.send_response = send_response  # type: ignore[method-assign]

    def heal(self) -> None:
        """Every injected fault undone (heartbeats, PDOs and SDO responses back; FAULT stays
        until reset)."""
        with self._lock, threads_started_with(self.priority):  # the heartbeats' threads
            for drive in self.drives:
                drive.send_pdos = True
                drive.sdo_responses_to_drop = 0
                period = _read(drive.node, cia402.PRODUCER_HEARTBEAT)
                drive.node.nmt.start_heartbeat(period)

    # --- the heartbeat consumer -------------------------------------------------------------
    def _sdo_write_callback(self, drive: _Drive) -> Callable[..., None]:
        def on_write(index: int, subindex: int, od: object, data: bytes, **_: object) -> None:
            if index in _MIRRORED and subindex == 0:
                assert isinstance(od, canopen.objectdictionary.ODVariable)
                drive.objects[index] = int(od.decode_raw(bytes(data)))
                return
            if index != cia402.CONSUMER_HEARTBEAT or subindex != 1:
                return
            entry = int.from_bytes(bytes(data), "little")
            node_id, time_ms = cia402.decode_heartbeat_consumer_entry(entry)
            with self._lock:
                drive.consumer = (node_id, time_ms / 1000.0) if node_id and time_ms else None
                drive.producer_heard_at = None  # monitoring (re)starts with the next heartbeat
                drive.heartbeat_lost = False
            if node_id and time_ms and node_id not in self._producers:
                self._producers.add(node_id)
                self.network.subscribe(0x700 + node_id, self._on_producer_heartbeat)

        return on_write

    def _on_producer_heartbeat(self, can_id: int, data: bytearray, timestamp: float) -> None:
        now = time.monotonic()
        with self._lock:
            for drive in self.drives:
                if drive.consumer is not None and drive.consumer[0] == can_id - 0x700:
                    drive.producer_heard_at = now
                    drive.heartbeat_lost = False

    def _check_consumer(self, drive: _Drive, now: float) -> None:
        """The consumer time-out and the drive's 6007h reaction to it (lock held)."""
        consumer, heard = drive.consumer, drive.producer_heard_at
        if consumer is None or heard is None or drive.heartbeat_lost or now - heard <= consumer[1]:
            return
        drive.heartbeat_lost = True
        drive.lost_at = now
        if drive.state is not DriveState.OPERATION_ENABLED:
            return  # nothing enabled to stop
        option = _read(drive.node, cia402.ABORT_CONNECTION_OPTION)
        reaction = {
            cia402.ABORT_FAULT: DriveState.FAULT,
            cia402.ABORT_DISABLE_VOLTAGE: DriveState.SWITCH_ON_DISABLED,
            cia402.ABORT_QUICK_STOP: DriveState.QUICK_STOP_ACTIVE,
        }.get(option)
        if reaction is not None:
            drive.state = reaction
            drive.connection_aborted = True
            drive.applied_effort = 0.0  # its torque loop is off from now (the ramp or brake)

    def _watch(self) -> None:
        """The drives' own timer: heartbeat consumers, and the motors when no SYNC comes."""
        while not self._closing.wait(WATCH_PERIOD):
            now = time.monotonic()
            with self._lock:
                for drive in self.drives:
                    self._check_consumer(drive, now)
                if self._last_sync is not None:
                    # The motors move on under the commands in force between SYNCs, so a SYNC
                    # finds them at most one WATCH_PERIOD behind: its answer (the state at the
                    # SYNC) costs a few sub-steps, not a whole period's.
                    self._advance(now, take_rpdos=False)

    # --- bus handlers (the simulation's receive thread) -------------------------------------
    def _on_nmt(self, can_id: int, data: bytearray, timestamp: float) -> None:
        # The LocalNode's own NMT handler ran first: PDOs are read when it becomes operational.
        for drive in self.drives:
            if drive.node.nmt.state == "OPERATIONAL" and not drive.pdo_ready:
                drive.node.rpdo.read()
                drive.node.tpdo.read()
                drive.rpdo_max_torque = any(
                    variable.index == cia402.MAX_TORQUE for variable in drive.node.rpdo[2].map
                )
                drive.rpdo_codecs = (
                    _PdoCodec(drive.node.rpdo[1]),
                    _PdoCodec(drive.node.rpdo[2]),
                )
                drive.tpdo_codecs = (
                    _PdoCodec(drive.node.tpdo[1]),
                    _PdoCodec(drive.node.tpdo[2]),
                )
                drive.pdo_ready = True

    def _on_sync(self, can_id: int, data: bytearray, timestamp: float) -> None:
        now = time.monotonic()
        try:
            self._answer_sync(now)
        finally:
            self.sync_handling.append(time.monotonic() - now)

    def sync_timing(self) -> dict[str, float]:
        """[ms] how long the drives took to answer a SYNC (RPDOs taken, motors stepped, TPDOs
        sent), over the last ones: p50, p99, max, and how many."""
        with self._lock:
            times = np.array(self.sync_handling) * 1e3
        if times.size == 0:
            return {"p50": 0.0, "p99": 0.0, "max": 0.0, "count": 0}
        return {
            "p50": float(np.median(times)),
            "p99": float(np.percentile(times, 99)),
            "max": float(times.max()),
            "count": int(times.size),
        }

    def _answer_sync(self, now: float) -> None:
        with self._lock:
            self.syncs += 1
            self._last_sync = now
            self._advance(now, take_rpdos=True)
            for drive in self.drives:
                if drive.pdo_ready and drive.send_pdos:
                    self._publish(drive)
        for drive in self.drives:
            if drive.pdo_ready and drive.send_pdos and drive.node.nmt.state == "OPERATIONAL":
                drive.node.tpdo[1].transmit()
                drive.node.tpdo[2].transmit()

    def _advance(self, now: float, take_rpdos: bool) -> None:
        """Step the drives and the motors to ``now`` [s] (lock held): on a SYNC each drive first
        takes in the RPDOs sent before it; on the drives' own clock they keep their last
        commands."""
        dt = 0.0 if self._last_step is None else min(now - self._last_step, MAX_STEP)
        self._last_step = now
        efforts = np.zeros(self.model.nv)
        locked = np.zeros(self.model.nv, dtype=bool)
        ramps: dict[int, float] = {}
        servos: dict[int, tuple[float, float, float, float]] = {}
        mass: np.ndarray | None = None  # M(q) and g(q), once per step for every CSP servo
        gravity: np.ndarray | None = None
        for drive, index in zip(self.drives, self._index, strict=True):
            if not drive.pdo_ready or drive.node.nmt.state != "OPERATIONAL":
                locked[index] = True
                drive.applied_effort = 0.0
                continue
            if take_rpdos:
                self._take_rpdo(drive, now)
            q, v = self.q[index], self.v[index]
            if drive.state is DriveState.OPERATION_ENABLED:
                drive.hold_position = None
                # Max torque 6072h [‰ of rated] bounds the motor in every mode (CiA 402);
                # this motor cannot exceed its rated torque.
                max_permille = min(drive.objects[cia402.MAX_TORQUE], 1000)
                if drive.mode == cia402.CYCLIC_SYNC_TORQUE:
                    permille = drive.command.get(cia402.TARGET_TORQUE, 0)
                    permille = int(np.clip(permille, -max_permille, max_permille))
                    efforts[index] = drive.scaling.permille_to_effort(permille)
                elif drive.mode == cia402.CYCLIC_SYNC_POSITION:
                    counts = drive.command.get(cia402.TARGET_POSITION, 0)
                    target = drive.scaling.counts_to_position(counts)
                    if mass is None or gravity is None:
                        mass, gravity = self.model.mass_matrix(self.q), self.model.gravity(self.q)
                    inertia = mass[index, index] + self.rotor[index]
                    kp = inertia * SERVO_BANDWIDTH**2
                    kd = 2.0 * inertia * SERVO_BANDWIDTH
                    limit = drive.scaling.permille_to_effort(max_permille)
                    servos[index] = (target, kp, kd, limit)
                    tau = kp * (target - q) - kd * v + gravity[index]
                    # Reported as torque actual; the servo itself runs per sub-step.
                    efforts[index] = float(np.clip(tau, -limit, limit))
                else:
                    locked[index] = True
            elif drive.state is DriveState.QUICK_STOP_ACTIVE:
                option = drive.objects[cia402.QUICK_STOP_OPTION]
                if option not in (5, 6) and (option == 0 or abs(v) == 0.0):
                    drive.state = DriveState.SWITCH_ON_DISABLED  # ramp done: disable
                    locked[index] = True
                    continue
                deceleration = (
                    drive.objects[cia402.QUICK_STOP_DECELERATION] / drive.scaling.counts_per_unit
                )
                ramps[index] = max(deceleration, 1e-6)
            else:
                locked[index] = True
            drive.applied_effort = efforts[index]
        self._step(efforts, locked, ramps, dt, servos)

    def _take_rpdo(self, drive: _Drive, now: float) -> None:
        rpdo1, rpdo2 = drive.node.rpdo[1], drive.node.rpdo[2]
        if not rpdo1.is_received:
            return
        command = drive.rpdo_codecs[0].unpack(rpdo1.data)
        if rpdo2.is_received:
            command.update(drive.rpdo_codecs[1].unpack(rpdo2.data))
        drive.command = command
        controlword = command[cia402.CONTROLWORD]
        mode = command[cia402.MODES_OF_OPERATION]
        option = drive.objects[cia402.QUICK_STOP_OPTION]
        state = cia402.drive_transition(
            drive.state, controlword, drive.previous_controlword, option
        )
        if state is DriveState.SWITCH_ON_DISABLED:
            drive.connection_aborted = False  # the master's way back: disable voltage first
        elif (
            state is DriveState.OPERATION_ENABLED
            and drive.state is not DriveState.OPERATION_ENABLED
            and (drive.connection_aborted or drive.heartbeat_lost)
        ):
            state = drive.state  # no enabling without the master's heartbeat
        drive.state = state
        drive.previous_controlword = controlword
        drive.mode = mode
        if drive.rpdo_max_torque and rpdo2.is_received:
            max_torque = command[cia402.MAX_TORQUE]
            if max_torque != drive.max_torque:  # into its dictionary, where the motor reads it
                drive.max_torque = max_torque
                _write(drive.node, cia402.MAX_TORQUE, max_torque)
        self.log.append(
            RpdoRecord(
                now,
                drive.joint,
                controlword,
                mode,
                command[cia402.TARGET_TORQUE],
                command.get(cia402.TARGET_POSITION, 0),
                drive.state,
            )
        )

    def _step(
        self,
        efforts: np.ndarray,
        locked: np.ndarray,
        ramps: dict[int, float],
        dt: float,
        servos: dict[int, tuple[float, float, float, float]],
    ) -> None:
        """Advance the motors by ``dt`` [s] (lock held)."""
        self.q, self.v = motor_step(
            self.model,
            self.q,
            self.v,
            self.rotor,
            efforts,
            locked,
            ramps,
            dt,
            servos,
            contact=self.contact,
            dynamics=self.dynamics,
            friction=self.friction,
        )

    def _publish(self, drive: _Drive) -> None:
        """Write the drive's actual values into its object dictionary (lock held or at init)."""
        index = self.model.q_index(drive.joint)
        scaling = drive.scaling
        values = {
            cia402.STATUSWORD: cia402.statusword_of(drive.state),
            cia402.MODES_DISPLAY: drive.mode,
            cia402.TORQUE_ACTUAL: min(
                max(round(drive.applied_effort / scaling.rated_effort * 1000), -32768), 32767
            ),
            cia402.POSITION_ACTUAL: scaling.position_to_counts(float(self.q[index])),
            cia402.VELOCITY_ACTUAL: scaling.velocity_to_counts(float(self.v[index])),
        }
        if drive.pdo_ready:
            for number, codec in enumerate(drive.tpdo_codecs, start=1):
                drive.node.tpdo[number].data = codec.pack(values)
        else:
            for object_index, value in values.items():
                _write(drive.node, object_index, value)

    # --- for checks ------------------------------------------------------------------------
    def positions(self) -> dict[str, float]:
        """Joint → true position [rad | m]."""
        with self._lock:
            return {n: float(self.q[self.model.q_index(n)]) for n in self.joint_names}

    def velocities(self) -> dict[str, float]:
        with self._lock:
            return {n: float(self.v[self.model.v_index(n)]) for n in self.joint_names}

    def place_object(
        self,
        width: float | None,
        fingers: Sequence[str],
        stiffness: float = CONTACT_STIFFNESS,
        damping: float = CONTACT_DAMPING,
        width_frames: Sequence[str] = (),
    ) -> None:
        """An object ``width`` [m] wide between the finger joints ``fingers`` from now on, with
        contact ``stiffness`` [N/m] and ``damping`` [N·s/m] per finger, each finger's lever from
        the grip geometry between ``width_frames`` where given
        (:mod:`~ct_controllers.sim.object_contact`); None removes it."""
        contact = (
            None
            if width is None
            else ObjectBetweenFingers.for_model(
                self.model, fingers, width, stiffness, damping, width_frames
            )
        )
        with self._lock:
            self.contact = contact

    def contact_forces(self) -> dict[str, float]:
        """Finger (a gripper joint, or a mimic follower of one) → the normal force [N] between
        it and the object now (none: empty)."""
        with self._lock:
            contact = self.contact
            if contact is None:
                return {}
            forces = contact.finger_forces(self.q, self.v)
        return {name: float(f) for name, f in zip(contact.fingers, forces, strict=True)}

    def last_target_torques(self) -> dict[str, int]:
        """Joint → the target torque [‰ of rated] its drive last took in (an RPDO1)."""
        with self._lock:
            records = list(self.log)[-3 * len(self.drives) :]
        return {record.joint: record.target_torque for record in records}

    def peak_target_torques(self) -> dict[str, int]:
        """Joint → the largest |target torque| [‰ of rated] its drive took in while in cyclic
        synchronous torque mode (joints never in it: absent)."""
        with self._lock:
            records = list(self.log)
        peak: dict[str, int] = {}
        for record in records:
            if record.mode == cia402.CYCLIC_SYNC_TORQUE:
                peak[record.joint] = max(peak.get(record.joint, 0), abs(record.target_torque))
        return peak

    def max_torques(self) -> dict[str, int]:
        """Joint → max torque 6072h [‰ of rated] in its drive's own dictionary."""
        with self._lock:
            return {d.joint: _read(d.node, cia402.MAX_TORQUE) for d in self.drives}

    def states(self) -> dict[str, DriveState]:
        with self._lock:
            return {d.joint: d.state for d in self.drives}

    def applied_efforts(self) -> dict[str, float]:
        """Joint → the effort [N·m | N] its drive applies (0 unless enabled in torque or
        position mode: a quick stop's ramp and a brake are not efforts of the drive's loop)."""
        with self._lock:
            return {d.joint: d.applied_effort for d in self.drives}

    def master_lost_at(self) -> dict[str, float | None]:
        """Joint → when (time.monotonic [s]) its drive's heartbeat consumer last timed out on
        the producer its 1016h names, or None."""
        with self._lock:
            return {d.joint: d.lost_at for d in self.drives}

    def consumers(self) -> dict[str, tuple[int, float] | None]:
        """Joint → (producer node id, consumer time [s]) as its drive's 1016h was written."""
        with self._lock:
            return {d.joint: d.consumer for d in self.drives}


def simulated_drives_for(
    system: CanopenCia402System,
    model: RobotModel,
    initial_positions: Mapping[str, float] | None = None,
) -> SimulatedDrives:
    """Simulated drives matching a (not yet configured) CANopen backend: the same joints, node
    ids, unit conversion and bus channel."""
    return SimulatedDrives(
        model,
        system.joint_names,
        [d.node_id for d in system.drives],
        [d.scaling for d in system.drives],
        channel=system.config.channel,
        interface=system.config.interface,
        initial_positions=initial_positions,
    )
