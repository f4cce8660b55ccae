"""CiA 402 (drives and motion control) as pure functions: the object dictionary entries we use,
the state machine seen from both sides (statusword decoding and the controlword that steps a drive
towards OPERATION ENABLED; the drive's transitions for the simulated drives), the PDO layout,
and per-joint unit conversion. No bus, no threads: everything here is testable on its own.

Objects (index, sub-index 0): controlword 6040h (u16), statusword 6041h (u16), quick stop option
code 605Ah (i16), modes of operation 6060h (i8) and its display 6061h (i8), position actual 6064h
(i32, counts), velocity actual 606Ch (i32, counts/s), rated torque 6076h (u32, mN·m), torque actual
6077h (i16, per-mille of rated torque), target torque 6071h (i16, per-mille), max torque 6072h
(u16, per-mille: bounds the motor's torque in every mode, the position loop's too; mapped into
RPDO2 beside the target position), target position
607Ah (i32, counts), quick stop deceleration 6085h (u32, counts/s²), abort connection option code
6007h (i16: what a drive does when it loses its master, e.g. the master's heartbeat); heartbeat
consumer time 1016h and producer time 1017h.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from ct_controllers.errors import CtError

# --- objects ---------------------------------------------------------------------------------
CONSUMER_HEARTBEAT = 0x1016
PRODUCER_HEARTBEAT = 0x1017
ABORT_CONNECTION_OPTION = 0x6007
CONTROLWORD = 0x6040
STATUSWORD = 0x6041
QUICK_STOP_OPTION = 0x605A
MODES_OF_OPERATION = 0x6060
MODES_DISPLAY = 0x6061
POSITION_ACTUAL = 0x6064
VELOCITY_ACTUAL = 0x606C
TARGET_TORQUE = 0x6071
MAX_TORQUE = 0x6072
RATED_TORQUE = 0x6076
TORQUE_ACTUAL = 0x6077
TARGET_POSITION = 0x607A
QUICK_STOP_DECELERATION = 0x6085

# Abort connection option codes (6007h): the drive's reaction to a lost connection (its
# heartbeat consumer timing out on the master, bus-off, NMT stopped), in OPERATION ENABLED.
ABORT_NO_ACTION = 0
ABORT_FAULT = 1  # FAULT: brake, until a fault reset
ABORT_DISABLE_VOLTAGE = 2  # SWITCH ON DISABLED: brake
ABORT_QUICK_STOP = 3  # QUICK STOP ACTIVE: ramp to rest on 6085h, then per 605Ah
ABORT_CONNECTION_OPTIONS = (ABORT_NO_ACTION, ABORT_FAULT, ABORT_DISABLE_VOLTAGE, ABORT_QUICK_STOP)

# Modes of operation (6060h).
CYCLIC_SYNC_POSITION = 8
CYCLIC_SYNC_TORQUE = 10

# PDO layout, the same on both sides (index, bits): sent by the master on every SYNC cycle ...
RPDO_LAYOUT = (
    ((CONTROLWORD, 16), (MODES_OF_OPERATION, 8), (TARGET_TORQUE, 16)),  # RPDO1, 0x200 + id
    # RPDO2, 0x300 + id: max torque rides with the target position, so a changed limit (a
    # grip force) is in force from the SYNC its target goes with, without an SDO round trip
    # from the control thread (one lost SDO response would stall it for the SDO timeout).
    ((TARGET_POSITION, 32), (MAX_TORQUE, 16)),
)
# ... and by each drive in answer to SYNC (transmission type 1: every SYNC).
TPDO_LAYOUT = (
    ((STATUSWORD, 16), (MODES_DISPLAY, 8), (TORQUE_ACTUAL, 16)),  # TPDO1, 0x180 + id
    ((POSITION_ACTUAL, 32), (VELOCITY_ACTUAL, 32)),  # TPDO2, 0x280 + id
)
SYNCHRONOUS = 1  # PDO transmission type: every SYNC

# Controlword commands (bits: 0 switch on, 1 enable voltage, 2 quick stop (active low),
# 3 enable operation, 7 fault reset).
CW_SHUTDOWN = 0x0006
CW_SWITCH_ON = 0x0007
CW_ENABLE_OPERATION = 0x000F
CW_DISABLE_VOLTAGE = 0x0000
CW_QUICK_STOP = 0x0002
CW_FAULT_RESET = 0x0080


class DriveState(Enum):
    NOT_READY_TO_SWITCH_ON = "NOT READY TO SWITCH ON"
    SWITCH_ON_DISABLED = "SWITCH ON DISABLED"
    READY_TO_SWITCH_ON = "READY TO SWITCH ON"
    SWITCHED_ON = "SWITCHED ON"
    OPERATION_ENABLED = "OPERATION ENABLED"
    QUICK_STOP_ACTIVE = "QUICK STOP ACTIVE"
    FAULT_REACTION_ACTIVE = "FAULT REACTION ACTIVE"
    FAULT = "FAULT"


# Statusword (mask, value) per state, CiA 402 table 30.
_STATUS_PATTERNS = (
    (0x4F, 0x00, DriveState.NOT_READY_TO_SWITCH_ON),
    (0x4F, 0x40, DriveState.SWITCH_ON_DISABLED),
    (0x6F, 0x21, DriveState.READY_TO_SWITCH_ON),
    (0x6F, 0x23, DriveState.SWITCHED_ON),
    (0x6F, 0x27, DriveState.OPERATION_ENABLED),
    (0x6F, 0x07, DriveState.QUICK_STOP_ACTIVE),
    (0x4F, 0x0F, DriveState.FAULT_REACTION_ACTIVE),
    (0x4F, 0x08, DriveState.FAULT),
)
_STATUSWORD_OF = {
    DriveState.NOT_READY_TO_SWITCH_ON: 0x0000,
    DriveState.SWITCH_ON_DISABLED: 0x0040,
    DriveState.READY_TO_SWITCH_ON: 0x0021,
    DriveState.SWITCHED_ON: 0x0023,
    DriveState.OPERATION_ENABLED: 0x0027,
    DriveState.QUICK_STOP_ACTIVE: 0x0007,
    DriveState.FAULT_REACTION_ACTIVE: 0x000F,
    DriveState.FAULT: 0x0008,
}


def decode_statusword(statusword: int) -> DriveState:
    """The drive state a statusword (6041h) reports; ValueError for a pattern no state has."""
    for mask, value, state in _STATUS_PATTERNS:
        if statusword & mask == value:
            return state
    raise ValueError(f"statusword 0x{statusword:04X} matches no CiA 402 state")


def statusword_of(state: DriveState) -> int:
    """The statusword a drive in ``state`` reports (bits 0-6; manufacturer bits 0)."""
    return _STATUSWORD_OF[state]


def controlword_towards_enabled(state: DriveState) -> int:
    """The next controlword that moves a drive from ``state`` towards OPERATION ENABLED
    (shutdown → switch on → enable operation; fault reset from FAULT)."""
    if state is DriveState.FAULT:
        return CW_FAULT_RESET
    if state in (DriveState.SWITCH_ON_DISABLED, DriveState.NOT_READY_TO_SWITCH_ON):
        return CW_SHUTDOWN
    if state is DriveState.READY_TO_SWITCH_ON:
        return CW_SWITCH_ON
    if state is DriveState.QUICK_STOP_ACTIVE:
        return CW_DISABLE_VOLTAGE  # leave quick stop through SWITCH ON DISABLED
    return CW_ENABLE_OPERATION  # SWITCHED ON, OPERATION ENABLED (keep), FAULT REACTION (wait)


def drive_transition(
    state: DriveState, controlword: int, previous_controlword: int, quick_stop_option: int = 6
) -> DriveState:
    """The drive side of the state machine: the state after ``controlword`` arrives in ``state``.

    Fault reset needs a rising edge of bit 7. ``quick_stop_option`` (605Ah): 5 and 6 stay in
    QUICK STOP ACTIVE after the stop, the others end in SWITCH ON DISABLED (done by the drive's
    ramp, see the simulated drive)."""
    if state is DriveState.FAULT:
        rising = controlword & 0x80 and not previous_controlword & 0x80
        return DriveState.SWITCH_ON_DISABLED if rising else state
    if state in (DriveState.FAULT_REACTION_ACTIVE, DriveState.NOT_READY_TO_SWITCH_ON):
        return state  # automatic transitions only
    enable_voltage = bool(controlword & 0x02)
    quick_stop_requested = not controlword & 0x04  # bit 2 is active low
    switch_on = bool(controlword & 0x01)
    enable_operation = bool(controlword & 0x08)
    if not enable_voltage:
        return DriveState.SWITCH_ON_DISABLED  # transitions 7, 9, 10, 12
    if state is DriveState.QUICK_STOP_ACTIVE:
        if (
            not quick_stop_requested
            and switch_on
            and enable_operation
            and quick_stop_option in (5, 6)
        ):
            return DriveState.OPERATION_ENABLED  # transition 16
        return state  # options 0-2: the drive itself ends in SWITCH ON DISABLED after its ramp
    if quick_stop_requested:
        if state is DriveState.OPERATION_ENABLED:
            return DriveState.QUICK_STOP_ACTIVE  # transition 11
        return DriveState.SWITCH_ON_DISABLED  # transitions 7, 10
    if not switch_on:
        return DriveState.READY_TO_SWITCH_ON  # transitions 2, 6, 8 (shutdown)
    if state is DriveState.SWITCH_ON_DISABLED:
        return state  # switch on needs READY TO SWITCH ON first
    if not enable_operation:
        return DriveState.SWITCHED_ON  # transitions 3, 5
    if state in (DriveState.SWITCHED_ON, DriveState.OPERATION_ENABLED):
        return DriveState.OPERATION_ENABLED  # transition 4
    return DriveState.SWITCHED_ON  # READY TO SWITCH ON + enable: 3 first, 4 on the next


def heartbeat_consumer_entry(node_id: int, time_ms: int) -> int:
    """A 1016h sub-entry: bits 16-23 the producer's node id, bits 0-15 the time [ms]."""
    if not (1 <= node_id <= 127 and 0 <= time_ms <= 0xFFFF):
        raise ValueError(f"heartbeat consumer entry: node {node_id}, {time_ms} ms out of range")
    return (node_id << 16) | time_ms


def decode_heartbeat_consumer_entry(entry: int) -> tuple[int, int]:
    """A 1016h sub-entry → (producer node id, consumer time [ms]); time 0 (or node id 0) means
    the entry is not used."""
    return (entry >> 16) & 0x7F, entry & 0xFFFF


# --- units -----------------------------------------------------------------------------------
INT16 = (-(2**15), 2**15 - 1)
INT32 = (-(2**31), 2**31 - 1)


class UnitRangeError(CtError, ValueError):
    """A value does not fit the drive object it would be written to; nothing is written."""


@dataclass(frozen=True)
class JointScaling:
    """Joint units ↔ drive units for one joint.

    counts_per_unit  [counts/rad | counts/m] = encoder_resolution · gear_ratio / (2π or lead)
    offset           [rad | m] joint position at encoder count 0
    rated_effort     [N·m | N] joint effort at 1000 per-mille (6076h × gear ratio)
    """

    name: str
    counts_per_unit: float
    offset: float
    rated_effort: float

    @staticmethod
    def for_joint(
        name: str,
        encoder_resolution: int,
        gear_ratio: float,
        offset: float,
        rated_effort: float,
        prismatic: bool = False,
        screw_lead: float = 0.01,
    ) -> JointScaling:
        """``encoder_resolution`` [counts/motor rev], ``gear_ratio`` [motor rev/joint rev],
        ``screw_lead`` [m/joint rev] (prismatic joints)."""
        if not (encoder_resolution > 0 and gear_ratio > 0 and rated_effort > 0):
            raise ValueError(f"joint '{name}': resolution, gear ratio and rated effort must be > 0")
        per_rev = screw_lead if prismatic else 2.0 * math.pi
        return JointScaling(name, encoder_resolution * gear_ratio / per_rev, offset, rated_effort)

    def position_to_counts(self, position: float) -> int:
        """[rad | m] → counts (6064h/607Ah), rounded; UnitRangeError outside int32."""
        if not math.isfinite(position):
            raise UnitRangeError(f"joint '{self.name}': non-finite position {position}")
        counts = round((position - self.offset) * self.counts_per_unit)
        if not INT32[0] <= counts <= INT32[1]:
            raise UnitRangeError(f"joint '{self.name}': position {position} is beyond int32 counts")
        return counts

    def counts_to_position(self, counts: int) -> float:
        """counts → [rad | m]."""
        return counts / self.counts_per_unit + self.offset

    def counts_to_velocity(self, counts_per_second: int) -> float:
        """counts/s (606Ch) → [rad/s | m/s]."""
        return counts_per_second / self.counts_per_unit

    def velocity_to_counts(self, velocity: float) -> int:
        counts = round(velocity * self.counts_per_unit)
        return min(max(counts, INT32[0]), INT32[1])

    def effort_to_permille(self, effort: float, carried: float = 0.0) -> int:
        """[N·m | N] → per-mille of the rated effort (6071h), rounded, with ``carried`` [‰]
        added first (:class:`TorqueQuantizer`'s error); UnitRangeError when it is not finite or
        does not fit int16 (never wrapped)."""
        if not math.isfinite(effort):
            raise UnitRangeError(f"joint '{self.name}': non-finite effort {effort}")
        permille = round(effort / self.rated_effort * 1000.0 + carried)
        if not INT16[0] <= permille <= INT16[1]:
            raise UnitRangeError(
                f"joint '{self.name}': effort {effort} N·m is {permille} per-mille of the rated "
                f"{self.rated_effort} N·m, beyond int16"
            )
        return permille

    def permille_to_effort(self, permille: int) -> float:
        """per-mille (6077h) → [N·m | N]."""
        return permille * self.rated_effort / 1000.0


class TorqueQuantizer:
    """Target torques (6071h, whole per-mille of each drive's rated torque) whose mean is the
    commanded effort: each tick's rounding error is carried into the next command (error
    feedback, first-order sigma-delta). Plain rounding holds a step of 1 ‰ of rated torque: a
    joint whose stiffness K makes that step a position error of 0.5 ‰ / K rests anywhere in a
    dead band of that half-width (measured: the Kinova Jaco 2's light wrist, 0.02 rad off on
    the simulated drives). With the error carried, the command alternates between the two
    neighbouring steps in the proportion that gives the exact mean; the joint's inertia
    averages it, and each written value is within one step of the commanded effort."""

    def __init__(self, scalings: tuple[JointScaling, ...]) -> None:
        self.scalings = scalings
        self._carried = [0.0] * len(scalings)  # [‰] per drive

    def reset(self) -> None:
        """Nothing carried (a new activation, a command of another mode)."""
        self._carried = [0.0] * len(self.scalings)

    def permille(self, efforts: list[float]) -> list[int]:
        """One command [N·m | N] per drive → per-mille; UnitRangeError (as
        :meth:`JointScaling.effort_to_permille`) leaves what is carried unchanged."""
        converted = [
            scaling.effort_to_permille(effort, carried)
            for scaling, effort, carried in zip(self.scalings, efforts, self._carried, strict=True)
        ]
        self._carried = [
            effort / scaling.rated_effort * 1000.0 + carried - step
            for scaling, effort, carried, step in zip(
                self.scalings, efforts, self._carried, converted, strict=True
            )
        ]
        return converted
