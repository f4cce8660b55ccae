"""The CANopen object dictionary both sides use: a CiA 402 drive's objects (the simulated drives
serve the same dictionary) and the master's own node, whose NMT heartbeat the drives watch."""

from __future__ import annotations

from canopen import objectdictionary as od

from ct_controllers.hardware import cia402

MASTER_NODE_ID = 0x7F  # not a drive: the master's own node id (its heartbeat is 0x77F)
MAX_TORQUE_DEFAULT = 1000  # [‰ of rated torque] 6072h when no effort limit is set


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
