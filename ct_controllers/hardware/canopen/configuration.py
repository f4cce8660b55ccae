"""The CANopen backend's parameters: its section of controllers.yaml (:data:`PARAMETERS`, the
schema: ``canopen.*``), the bus and its timing (:class:`CanopenConfig`), a drive per joint
(:class:`DriveConfig`: node id and unit conversion), and how both come from a stack config
(:func:`from_stack_config`, the plugin constructor's half that reads parameters: its own section
only)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ct_controllers.hardware import cia402
from ct_controllers.hardware.cia402 import JointScaling
from ct_controllers.model.description import RobotDescription
from ct_controllers.parameter_schema import (
    REQUIRED,
    ParameterSchema,
    ParameterSpec,
    non_negative,
    one_of,
    positive,
)

if TYPE_CHECKING:
    from ct_controllers.config import StackConfig

TORQUE = "torque"
POSITION_MODE = "position"
SECTION = "canopen"


def _node_ids(ids: tuple[int, ...]) -> str | None:
    if not all(1 <= i <= 126 for i in ids):
        return f"ids must be in 1..126 (127 is the master's own): {ids}"
    if len(set(ids)) != len(ids):
        return f"an id is used twice in {ids}"
    return None


def _quick_stop_option(option: int) -> str | None:
    if option in (0, 1, 2, 5, 6):
        return None
    return f"{option} is not one of 0, 1, 2, 5, 6 (CiA 402 605Ah)"


def _abort_connection_option(option: int) -> str | None:
    if option in (0, 1, 2, 3):
        return None
    return (
        f"{option} is not one of 0 (no action), 1 (fault), 2 (disable voltage), 3 (quick stop) "
        "(CiA 402 6007h)"
    )


def _priority(priority: int) -> str | None:
    if 0 <= priority <= 99:
        return None
    return f"{priority} is not 0 (normal scheduling) or a SCHED_FIFO priority 1..99"


def _heartbeats(values: Mapping[str, Any], joint_count: int | None) -> str | None:
    if values["heartbeat_timeout"] <= values["heartbeat_period"]:
        return (
            "parameter 'canopen.heartbeat_timeout' must exceed 'canopen.heartbeat_period' "
            f"({values['heartbeat_timeout']} <= {values['heartbeat_period']} s)"
        )
    period, timeout = values["master_heartbeat_period"], values["master_heartbeat_timeout"]
    if period < 0.001 or timeout > 65.535 or timeout <= period:
        return (
            "parameters 'canopen.master_heartbeat_period' and "
            "'canopen.master_heartbeat_timeout': the period must be >= 1 ms and the "
            "timeout exceed it, at most 65.535 s (1016h holds whole ms in 16 bits); got "
            f"{period} and {timeout} s"
        )
    return None


def _spec(name: str, kind: type, default: Any, description: str, unit: str = "", **kw: Any) -> Any:
    return ParameterSpec(name, kind, default, description, unit, **kw)


# The section ``canopen.*``: the bus, then per joint (arm_joints + gripper_joints order) the
# drive's node id and unit conversion, then the timing. Read-only: it shapes the bus. The
# per-joint entries have no default (REQUIRED): they are facts of the user's drives (ids,
# encoders, gears, ratings), which no default fits; ``ct-setup`` writes placeholders to be set.
PARAMETERS = ParameterSchema(
    SECTION,
    (
        _spec("interface", str, "virtual", "python-can interface (virtual, socketcan, ...)"),
        _spec("channel", str, "ct_can0", "python-can channel"),
        _spec("bitrate", int, 1_000_000, "CAN bit rate", "bit/s", validator=positive),
        _spec(
            "mode",
            str,
            TORQUE,
            "torque (cyclic synchronous torque) | position (cyclic synchronous position)",
            validator=one_of(TORQUE, POSITION_MODE),
        ),
        _spec(
            "node_ids",
            int,
            REQUIRED,
            "CANopen node id per joint, arm then gripper",
            per_joint=True,
            validator=_node_ids,
        ),
        _spec(
            "encoder_resolution",
            int,
            REQUIRED,
            "Encoder counts per motor revolution, per joint",
            "counts/motor rev",
            per_joint=True,
            validator=positive,
        ),
        _spec(
            "gear_ratio",
            float,
            REQUIRED,
            "Motor revolutions per joint revolution, per joint",
            "motor rev/joint rev",
            per_joint=True,
            validator=positive,
        ),
        _spec(
            "position_offset",
            float,
            REQUIRED,
            "Joint position at encoder count 0, per joint",
            "rad | m",
            per_joint=True,
        ),
        _spec(
            "rated_torque",
            float,
            REQUIRED,
            "Effort at 1000 ‰ of rated torque, per joint",
            "N·m | N",
            per_joint=True,
            validator=positive,
        ),
        _spec(
            "screw_lead",
            float,
            0.01,
            "Travel per joint revolution of the prismatic joints",
            "m",
            validator=positive,
        ),
        _spec(
            "heartbeat_period",
            float,
            0.01,
            "Heartbeat the host produces (drives' 1017h)",
            "s",
            validator=positive,
        ),
        _spec(
            "heartbeat_timeout",
            float,
            0.03,
            "Consumer heartbeat time (1016h): silence this long → fault",
            "s",
            validator=positive,
        ),
        _spec(
            "pdo_timeout",
            float,
            0.0,
            "No TPDO from a drive this long → fault; 0 = 3 periods",
            "s",
            validator=non_negative,
        ),
        _spec(
            "quick_stop_option",
            int,
            6,
            "605Ah quick-stop option code (6 = ramp, stay in QUICK STOP)",
            validator=_quick_stop_option,
        ),
        _spec(
            "master_heartbeat_period",
            float,
            0.01,
            "Heartbeat our master node (id 127) produces",
            "s",
            validator=positive,
        ),
        _spec(
            "master_heartbeat_timeout",
            float,
            0.03,
            "Drives' consumer time on it (1016h) → 6007h",
            "s",
            validator=positive,
        ),
        _spec(
            "abort_connection_option",
            int,
            3,
            "6007h on losing it: 0 none, 1 fault, 2 off, 3 quick stop",
            validator=_abort_connection_option,
        ),
        _spec(
            "enable_timeout",
            float,
            1.0,
            "Time allowed for NMT start, SDO setup and enable",
            "s",
            validator=positive,
        ),
    ),
    checks=(_heartbeats,),
)


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
    # SCHED_FIFO priority of the bus threads (:mod:`.scheduling`): from a stack config, the
    # control loop's own (realtime.priority); 0 = normal scheduling. Not permitted: normal,
    # said in diagnostics.
    thread_priority: int = 50

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
        if _priority(self.thread_priority) is not None:
            raise ValueError(f"canopen.thread_priority: {_priority(self.thread_priority)}")
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


@dataclass(frozen=True)
class CanopenSetup:
    """What the plugin constructor takes: the joints (``<ros2_control>`` order), a drive per joint
    and the bus."""

    joint_names: tuple[str, ...]
    drives: tuple[DriveConfig, ...]
    config: CanopenConfig


def from_stack_config(description: RobotDescription, config: StackConfig) -> CanopenSetup:
    """Joints from ``<ros2_control>``, drives from ``canopen.*`` (per joint in ``arm_joints +
    gripper_joints`` order; parsed here by :data:`PARAMETERS`), joint types (revolute /
    prismatic) from the URDF; the bus threads scheduled as the control loop's thread is
    (``realtime.priority``)."""
    params = PARAMETERS.parse(config.parameters, len(config.joint_names))
    joints = description.hardware.joint_names
    types = {
        j.get("name", ""): j.get("type", "") for j in ET.fromstring(description.urdf).iter("joint")
    }
    order = {name: i for i, name in enumerate(config.joint_names)}
    drives = []
    for joint in joints:
        i = order[joint]
        drives.append(
            DriveConfig(
                joint=joint,
                node_id=params["node_ids"][i],
                scaling=JointScaling.for_joint(
                    joint,
                    params["encoder_resolution"][i],
                    params["gear_ratio"][i],
                    params["position_offset"][i],
                    params["rated_torque"][i],
                    prismatic=types.get(joint) == "prismatic",
                    screw_lead=params["screw_lead"],
                ),
            )
        )
    return CanopenSetup(
        tuple(joints),
        tuple(drives),
        CanopenConfig(
            interface=params["interface"],
            channel=params["channel"],
            bitrate=params["bitrate"],
            mode=params["mode"],
            period=config.period,
            heartbeat_period=params["heartbeat_period"],
            heartbeat_timeout=params["heartbeat_timeout"],
            pdo_timeout=params["pdo_timeout"],
            command_timeout=config.effective_command_timeout,
            quick_stop_option=params["quick_stop_option"],
            enable_timeout=params["enable_timeout"],
            master_heartbeat_period=params["master_heartbeat_period"],
            master_heartbeat_timeout=params["master_heartbeat_timeout"],
            abort_connection_option=params["abort_connection_option"],
            thread_priority=config.realtime.priority,
        ),
    )
