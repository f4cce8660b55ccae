"""Controller types that serve ros2_control's standard interfaces (an action, its topics) and hand
their references to the joint-level controller that runs — the trajectory controller
(FollowJointTrajectory), the gripper action controllers (GripperCommand,
ParallelGripperCommand). Like a ros2_control controller chained in front of another, such a type
writes no command interface itself: its reference goes through the active effort law (joint
impedance, computed torque) and the command limiter as every other goal's does.

They are listed in ``controllers`` with a ``type`` as every controller is, registered under the
same entry-point group (``ct_controllers.controllers``), and told apart from the effort laws by
being an :class:`InterfaceControllerType` (a schema and a kind), not a
:class:`~ct_controllers.controllers.controller.Controller` class. Plain Python: no ROS here; the
node builds each one's ROS side (:mod:`ct_controllers.ros`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ct_controllers.parameter_schema import ParameterSchema, ParameterSpec
from ct_controllers.plugins import CONTROLLERS, load_plugin

TRAJECTORY = "trajectory"  # FollowJointTrajectory on <name>/follow_joint_trajectory
GRIPPER = "gripper"  # GripperCommand on <name>/gripper_cmd
PARALLEL_GRIPPER = "parallel_gripper"  # ParallelGripperCommand on <name>/gripper_cmd


@dataclass(frozen=True)
class InterfaceControllerType:
    """A standard-interface controller type. ``PARAMETERS``: its entries under the instance's
    name (``<instance>.<spec.name>``); ``joint_parameters``: entries per joint *by name*, as
    ros2_controllers writes them (``<instance>.constraints.<joint>.goal``): each spec declared as
    ``<instance>.<prefix>.<joint>.<spec.name>`` for every joint of the instance's ``joints``.
    ``GAIN_NAMES``: none are live (what the controller manager asks of every type)."""

    kind: str
    PARAMETERS: ParameterSchema
    joint_parameters: tuple[ParameterSpec, ...] = ()
    joint_parameter_prefix: str = ""
    GAIN_NAMES: tuple[str, ...] = ()

    def joint_parameter_names(self, instance: str, joints: tuple[str, ...]) -> dict[str, Any]:
        """Full name -> spec of every per-joint-name entry of ``instance``."""
        prefix = f"{instance}.{self.joint_parameter_prefix}." if self.joint_parameter_prefix else ""
        if not prefix:
            prefix = f"{instance}."
        return {
            f"{prefix}{joint}.{spec.name}": spec
            for joint in joints
            for spec in self.joint_parameters
        }


def is_interface_controller(type_object: object) -> bool:
    return isinstance(type_object, InterfaceControllerType)


def of_kind(controllers: Mapping[str, Mapping[str, Any]], kind: str) -> dict[str, Any]:
    """The entries (``config.interface_controllers``) whose type is of ``kind``: name ->
    entries."""
    found = {}
    for name, entries in controllers.items():
        type_object = load_plugin(CONTROLLERS, str(entries["type"]))
        if isinstance(type_object, InterfaceControllerType) and type_object.kind == kind:
            found[name] = entries
    return found


def instance_entries(instance: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The flattened entries of ``instance`` (``<instance>.x.y`` -> ``x.y``)."""
    prefix = f"{instance}."
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}
