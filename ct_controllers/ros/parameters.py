"""Parameter declarations for the controller manager node: every entry of controllers.yaml is
declared with a descriptor (description with units, read-only for structural ones), defaults taken
from the bundled file, so a ``--params-file`` overrides them as ROS users expect. A plugin's
parameters (a backend's section, a controller instance's entries) are declared from the plugin's
schema (:mod:`ct_controllers.parameter_schema`); a controller's gains are live by its *type*,
whatever the instance is called."""

from __future__ import annotations

import array
from collections.abc import Mapping
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.parameter import Parameter

from ct_controllers.config import load_parameters
from ct_controllers.parameter_schema import PARAMETERS, section_schema
from ct_controllers.plugins import CONTROLLERS, known_plugins, load_plugin

DESCRIPTIONS = {
    "update_rate": "Control loop rate [Hz]",
    "overrun_fraction": "A tick starting this part of a period late is an overrun, in (0, 1]",
    "robot_description": "URDF or xacro file; empty = the bundled ct_arm",
    "backend": "Hardware backend (xacro argument): mujoco | ros2_control_bridge | canopen",
    "base_frame": "Frame every goal pose must be expressed in",
    "tcp_frame": "Tool centre point frame",
    "arm_joints": "Arm joint names",
    "gripper_joints": "Gripper joint names",
    "home_positions": "Start pose of the simulator [rad | m], arm_joints then gripper_joints",
    "default_controller": "Controller used when a goal names none",
    "controllers": "Controllers to load",
    "allow_free_joints": "Live gain sets may leave a joint with stiffness and damping both 0",
    "references.velocity_fraction": "Reference velocity limit, fraction of the URDF limit [-]",
    "references.max_acceleration": "Reference acceleration limit per joint [rad/s² | m/s²]",
    "references.max_jerk": "Reference jerk limit per joint [rad/s³ | m/s³]",
    "limiter.effort_rate_limit": "Effort-rate limit per joint [N·m/s | N/s]",
    "safe_hold.damping": "Safe-hold joint damping [N·m·s/rad | N·s/m], per joint",
    "hardware.armed": "Real drives refuse to activate unless true",
    "hardware.max_state_age": "Oldest acceptable state sample, now − stamp [s]; 0 = state_timeout",
    "hardware.future_tolerance": "How far a state stamp may lie ahead of this clock [s]",
    "hardware.frame_id": "Frame id state messages must carry (empty = not checked)",
    "cartesian.update_rate": "Task + differential IK rate [Hz], divides update_rate; 0 = same",
    "realtime.priority": "SCHED_FIFO priority of the control thread, 1–99; 0 = normal",
    "realtime.cpu": "CPU the control thread is pinned to; -1 = any",
    "realtime.lock_memory": "Lock the process's memory in RAM (mlockall)",
    "watchdog.enabled": "Watchdog on state and command freshness (on by default)",
    "watchdog.state_timeout": "No fresh state this long → fault [s]; 0 = 3 control periods",
    "watchdog.command_timeout": "No command written this long → fault [s]; 0 = 3 periods",
    "watchdog.fault_reaction": "damp | hold | quick_stop | disable (drives that offer it)",
}

# Parameters of the ROS boundary itself (not in controllers.yaml): name → (default, description).
ROS_ONLY: dict[str, tuple[float, str]] = {
    "max_goal_age": (1.0, "Oldest acceptable goal stamp, now − stamp [s]; stamp 0 = now"),
    "goal_future_tolerance": (0.05, "How far a goal stamp may lie in the future [s]"),
    "move_to_pose.default_timeout": (10.0, "MoveToPose timeout when the goal gives 0 [s]"),
}


def live_parameters(controllers: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """The parameters that may change at run time: ``<instance>.<gain>`` for every configured
    controller instance, whatever its name, and each live parameter of its *type* (its
    ``GAIN_NAMES``, the live entries of its schema). Everything else is read-only."""
    live = set()
    for instance, params in controllers.items():
        controller_type = load_plugin(CONTROLLERS, str(params["type"]))
        live |= {f"{instance}.{gain}" for gain in controller_type.GAIN_NAMES}
    return frozenset(live)


def live_gains(
    parameters: Any, joint_names: tuple[str, ...], live: frozenset[str]
) -> dict[str, dict[str, Any]]:
    """Group a parameter set by controller instance: {"joint_impedance": {"stiffness": [...]}}.
    ``live``: :func:`live_parameters`. Raises ValueError naming a parameter that cannot change
    at run time or is malformed."""
    grouped: dict[str, dict[str, Any]] = {}
    for parameter in parameters:
        if parameter.name in ROS_ONLY:
            continue  # range-checked by its descriptor, read where it is used
        if parameter.name not in live:
            raise ValueError(f"'{parameter.name}' cannot be changed at run time")
        controller, gain = parameter.name.split(".", 1)
        value = parameter.value
        if not isinstance(value, (list, tuple, array.array)):
            raise ValueError(f"'{parameter.name}': expected a list of {len(joint_names)} numbers")
        grouped.setdefault(controller, {})[gain] = [float(v) for v in value]
    return grouped


def _declare(node: Any, name: str, default: Any, description: str, live: bool = False) -> Any:
    descriptor = ParameterDescriptor(name=name, description=description, read_only=not live)
    return node.declare_parameter(name, default, descriptor).value


def declare_all(node: Any) -> dict[str, Any]:
    """Declare the stack's parameters, defaults from the bundled configuration, each plugin's
    from its schema (description with unit, live or read-only): the stack's own entries; the
    selected backend's section and every other one the bundled file documents; for every
    controller instance the configuration names (``controllers``, whatever the names), ``type``
    and its type's parameters. Return their (overridden) values."""
    bundled = load_parameters()
    sections = set(known_plugins(PARAMETERS))
    bundled_instances = set(bundled.get("controllers", ()))

    def plugin_owned(name: str) -> bool:
        prefix = name.split(".", 1)[0]
        return "." in name and (prefix in sections or prefix in bundled_instances)

    values: dict[str, Any] = {}
    for name, default in bundled.items():
        if not plugin_owned(name):
            values[name] = _declare(node, name, default, DESCRIPTIONS.get(name, name))
    documented = {name.split(".", 1)[0] for name in bundled if "." in name}
    for section in sorted(({values["backend"]} | documented) & sections):
        schema = section_schema(section)
        assert schema is not None
        defaults = schema.defaults()
        for name, (description, live) in schema.describe().items():
            values[name] = _declare(
                node, name, bundled.get(name, defaults[name]), description, live
            )
    for instance in values["controllers"]:
        type_name = f"{instance}.type"
        if type_name in bundled:
            type_value = _declare(node, type_name, bundled[type_name], "Controller plugin type")
        else:  # an instance of the user's: its type must come with the parameters file
            descriptor = ParameterDescriptor(
                name=type_name, description="Controller plugin type", read_only=True
            )
            type_value = node.declare_parameter(type_name, Parameter.Type.STRING, descriptor).value
        if not isinstance(type_value, str):
            continue  # no type: the configuration says so, naming the instance
        values[type_name] = type_value
        schema = load_plugin(CONTROLLERS, type_value).PARAMETERS
        if schema is None:
            continue
        # Defaults: a bundled instance of the same type, else the type's own.
        template = next(
            (i for i in sorted(bundled_instances) if bundled.get(f"{i}.type") == type_value), None
        )
        for spec in schema.parameters:
            name = f"{instance}.{spec.name}"
            default = bundled.get(f"{template}.{spec.name}", schema.defaults()[spec.name])
            values[name] = _declare(node, name, default, spec.describe(), spec.live)
    for name, (default, description) in ROS_ONLY.items():
        node.declare_parameter(
            name,
            default,
            ParameterDescriptor(
                name=name,
                description=description,
                floating_point_range=[FloatingPointRange(from_value=0.0, to_value=3600.0)],
            ),
        )
    return values
