"""What each controller claims and requires, in ros2_control's interface names, and which
hardware interfaces are available and claimed — what ``list_controllers`` and
``list_hardware_interfaces`` report. Plain Python.

The conventions (docs/ros-interface.md, "What a controller claims"):

- the **active joint-level controller** claims the command interface every joint is written
  through, ``<joint>/effort`` or, where the backend commands the joint's position,
  ``<joint>/position`` (the loop writes the limited effort, or the tracked q*, there); it
  requires the state interfaces ``<joint>/position`` and ``<joint>/velocity`` (what the loop
  measures) and, being chainable, exports the reference interfaces ``<joint>/position``,
  ``<joint>/velocity`` and ``<joint>/acceleration`` (the reference q*, v*, a* it tracks);
- a **standard-interface controller** (trajectory, gripper action) is chained in front of the
  selected joint-level one: it claims that controller's reference interfaces of its joints,
  ``<joint_controller>/<joint>/position|velocity|acceleration``, and its ``chain_connections``
  name that controller (computed as ros2_control's list_controllers does, from the required
  command interfaces whose prefix is a controller's name). Our chain follows whichever
  joint-level controller is active, so a switch of the joint-level controller re-chains it.

Required interfaces and references are listed for inactive and active controllers (as
ros2_control does); claimed ones only for active controllers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ct_controllers.model.description import HardwareDescription
from ct_controllers.runtime.controller_manager import (
    ACTIVE,
    INACTIVE,
    JOINT_LEVEL,
    UNCONFIGURED,
    ControllerStatus,
)

REFERENCES = ("position", "velocity", "acceleration")  # what a joint-level controller tracks
MEASURED = ("position", "velocity")  # the state interfaces the loop reads


@dataclass(frozen=True)
class ControllerInterfaces:
    """One controller's interfaces, in ros2_control's names (``joint/interface``, a chained
    controller's reference ``controller/joint/interface``)."""

    claimed: tuple[str, ...]
    required_command: tuple[str, ...]
    required_state: tuple[str, ...]
    references: tuple[str, ...]  # without the controller's prefix, as list_controllers shows
    is_chainable: bool
    is_chained: bool
    # (controller whose references this one claims, those references without its prefix)
    chain_connections: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class InterfaceStatus:
    """A hardware interface: ``available`` (a controller may claim it now), ``claimed``."""

    name: str
    available: bool
    claimed: bool


def controller_interfaces(
    statuses: Sequence[ControllerStatus],
    selected: str,
    command_interfaces: Mapping[str, str],
) -> dict[str, ControllerInterfaces]:
    """Every controller's interfaces. ``selected``: the active joint-level controller;
    ``command_interfaces``: joint → the interface the backend commands it through (hardware
    order)."""
    joints = tuple(command_interfaces)
    chained = any(s.kind != JOINT_LEVEL and s.state == ACTIVE for s in statuses)
    result: dict[str, ControllerInterfaces] = {}
    for status in statuses:
        configured = status.state in (INACTIVE, ACTIVE)
        if status.kind == JOINT_LEVEL:
            command = tuple(f"{j}/{i}" for j, i in command_interfaces.items())
            result[status.name] = ControllerInterfaces(
                claimed=command if status.state == ACTIVE else (),
                required_command=command if configured else (),
                required_state=_measured(joints) if configured else (),
                references=tuple(f"{j}/{r}" for j in joints for r in REFERENCES)
                if configured
                else (),
                is_chainable=True,
                is_chained=status.name == selected and chained,
                chain_connections=(),
            )
            continue
        references = tuple(f"{j}/{r}" for j in status.joints for r in REFERENCES)
        command = tuple(f"{selected}/{r}" for r in references)
        result[status.name] = ControllerInterfaces(
            claimed=command if status.state == ACTIVE else (),
            required_command=command if configured else (),
            required_state=_measured(status.joints) if configured else (),
            references=(),
            is_chainable=False,
            is_chained=False,
            chain_connections=((selected, references),) if configured else (),
        )
    return result


def hardware_interfaces(
    hardware: HardwareDescription,
    command_interfaces: Mapping[str, str],
    state: str,
    claimed: Sequence[str],
) -> tuple[list[InterfaceStatus], list[InterfaceStatus]]:
    """(command, state) interfaces of the ``<ros2_control>`` block, in file order. A command
    interface is available when the hardware is active and it is the one the backend commands
    the joint through (``command_interfaces``; another one the URDF lists cannot be written by
    this backend as configured); a state interface when the hardware is configured (inactive
    or active). ``claimed``: the command interfaces the active controllers claim."""
    taken = set(claimed)
    commands = [
        InterfaceStatus(
            name=f"{joint.name}/{interface}",
            available=state == ACTIVE and command_interfaces.get(joint.name) == interface,
            claimed=f"{joint.name}/{interface}" in taken,
        )
        for joint in hardware.joints
        for interface in joint.command_interfaces
    ]
    states = [
        InterfaceStatus(
            name=f"{joint.name}/{interface}", available=state != UNCONFIGURED, claimed=False
        )
        for joint in hardware.joints
        for interface in joint.state_interfaces
    ]
    return commands, states


def interface_controller_joints(
    interface_controllers: Mapping[str, Mapping[str, object]],
) -> dict[str, tuple[str, ...]]:
    """Each configured standard-interface controller's joints (``config.
    interface_controllers``): a trajectory controller's ``joints``, a gripper controller's
    ``joint``."""
    joints: dict[str, tuple[str, ...]] = {}
    for name, entries in interface_controllers.items():
        listed = entries.get("joints", entries.get("joint", ()))
        if isinstance(listed, str):
            joints[name] = (listed,)
        else:
            joints[name] = (
                tuple(str(j) for j in listed) if isinstance(listed, (list, tuple)) else ()
            )
    return joints


def _measured(joints: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"{j}/{m}" for j in joints for m in MEASURED)
