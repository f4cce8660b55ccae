"""Configuring one drive by SDO before it is started: its producer heartbeat (1017h), its
consumer heartbeat on the master (1016h) and its reaction to losing it (6007h), the quick stop
(605Ah, 6085h), max torque (6072h) back to 1000 ‰, the mode (6060h), and its PDO mapping (layout
in :mod:`ct_controllers.hardware.cia402`: controlword, mode, target torque / target position and
max torque out;
statusword, mode display, torque, position and velocity actual in; all synchronous)."""

from __future__ import annotations

import canopen

from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.configuration import CanopenConfig, DriveConfig
from ct_controllers.hardware.canopen.object_dictionary import MASTER_NODE_ID, MAX_TORQUE_DEFAULT
from ct_controllers.hardware.interface import LifecycleError


def configure_drive(node: canopen.RemoteNode, drive: DriveConfig, config: CanopenConfig) -> None:
    """Write ``drive``'s configuration to ``node`` (blocking SDO round trips); LifecycleError
    naming the drive when one fails."""
    where = f"drive of joint '{drive.joint}' (node {drive.node_id})"
    try:
        node.sdo[cia402.PRODUCER_HEARTBEAT].raw = round(config.heartbeat_period * 1000)
        node.sdo[cia402.ABORT_CONNECTION_OPTION].raw = config.abort_connection_option
        node.sdo[cia402.CONSUMER_HEARTBEAT][1].raw = cia402.heartbeat_consumer_entry(
            MASTER_NODE_ID, round(config.master_heartbeat_timeout * 1000)
        )
        node.sdo[cia402.QUICK_STOP_OPTION].raw = config.quick_stop_option
        node.sdo[cia402.MAX_TORQUE].raw = MAX_TORQUE_DEFAULT  # no limit left from before
        node.sdo[cia402.QUICK_STOP_DECELERATION].raw = round(
            config.quick_stop_deceleration * drive.scaling.counts_per_unit
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
