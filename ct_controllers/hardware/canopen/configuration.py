"""The CANopen backend's parameters: the bus and its timing (:class:`CanopenConfig`), a drive per
joint (:class:`DriveConfig`: node id and unit conversion), and how both come from a stack config
(:func:`from_stack_config`, the plugin constructor's half that reads parameters)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ct_controllers.hardware import cia402
from ct_controllers.hardware.cia402 import JointScaling
from ct_controllers.model.description import RobotDescription

if TYPE_CHECKING:
    from ct_controllers.config import StackConfig

TORQUE = "torque"
POSITION_MODE = "position"


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


@dataclass(frozen=True)
class CanopenSetup:
    """What the plugin constructor takes: the joints (``<ros2_control>`` order), a drive per joint
    and the bus."""

    joint_names: tuple[str, ...]
    drives: tuple[DriveConfig, ...]
    config: CanopenConfig


def from_stack_config(description: RobotDescription, config: StackConfig) -> CanopenSetup:
    """Joints from ``<ros2_control>``, drives from ``canopen.*`` (per joint in ``arm_joints +
    gripper_joints`` order), joint types (revolute / prismatic) from the URDF."""
    params = config.canopen
    assert params is not None
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
    return CanopenSetup(
        tuple(joints),
        tuple(drives),
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
