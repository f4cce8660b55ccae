"""Parameter declarations for the controller manager node: every entry of controllers.yaml is
declared with a descriptor (description with units, read-only for structural ones, the range of
a number whose validator has simple bounds), defaults taken from the bundled file, so a
``--params-file`` overrides them as ROS users expect. Every declaration comes from a schema
(:mod:`ct_controllers.parameter_schema`): the stack's own entries from the stack's
(:mod:`ct_controllers.stack_parameters`), a plugin's (a backend's section, a controller
instance's entries) from the plugin's; a controller's gains are live by its *type*, whatever
the instance is called."""

from __future__ import annotations

import array
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterValueException
from rclpy.parameter import Parameter

from ct_controllers.config import ConfigError, load_parameters
from ct_controllers.interface_controllers import is_interface_controller
from ct_controllers.model.payload import Payload, PayloadError, PayloadLimits, check_payload
from ct_controllers.parameter_schema import PARAMETERS, section_schema
from ct_controllers.plugins import CONTROLLERS, known_plugins, load_plugin
from ct_controllers.stack_parameters import PARAMETERS as STACK_PARAMETERS

# Parameters of the ROS boundary itself (not in controllers.yaml): name → (default, description).
ROS_ONLY: dict[str, tuple[float, str]] = {
    "max_goal_age": (1.0, "Oldest acceptable goal stamp, now − stamp [s]; stamp 0 = now"),
    "goal_future_tolerance": (0.05, "How far a goal stamp may lie in the future [s]"),
    "move_to_pose.default_timeout": (10.0, "MoveToPose timeout when the goal gives 0 [s]"),
}


# The payload carried at the TCP, set by hand like libfranka's setLoad: live parameters of the
# node (not of controllers.yaml's stack entries, which are read-only), name → (default,
# description). Mass 0 = nothing carried (the model without a payload).
PAYLOAD_MASS = "payload.mass"
PAYLOAD_COM = "payload.com"
PAYLOAD_PARAMETERS: dict[str, tuple[Any, str]] = {
    PAYLOAD_MASS: (
        0.0,
        "Mass of the payload carried at the TCP [kg], in the controllers' model from the next "
        "tick; 0 = none; at most payload.rated_mass",
    ),
    PAYLOAD_COM: (
        [0.0, 0.0, 0.0],
        "Centre of mass of the payload [m], x y z in the TCP frame; within "
        "payload.max_com_distance of the TCP",
    ),
}


# Simulation only (MuJoCo backend, read-only): an object fixed at the simulated arm's TCP that
# the controllers' model does not know — the truth a payload identification is checked against.
SIM_PAYLOAD_PARAMETERS: dict[str, tuple[Any, str]] = {
    "mujoco.payload_mass": (
        0.0,
        "Simulation only: mass of an object fixed at the simulated arm's TCP [kg], unknown to "
        "the controllers' model; 0 = none",
    ),
    "mujoco.payload_com": (
        [0.0, 0.0, 0.0],
        "Simulation only: that object's centre of mass [m], x y z in the TCP frame",
    ),
}


def payload_from_parameters(mass: Any, com: Any, limits: PayloadLimits) -> Payload | None:
    """The payload ``payload.mass`` [kg] and ``payload.com`` [m] (TCP frame) describe, checked
    against the arm's ``limits``: None for mass 0 (nothing carried). PayloadError naming the
    parameter and the problem otherwise."""
    if isinstance(mass, bool) or not isinstance(mass, (int, float)):
        raise PayloadError(f"parameter '{PAYLOAD_MASS}': expected a number [kg], got {mass!r}")
    items = list(com) if isinstance(com, (list, tuple, array.array)) else None
    if items is None or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in items):
        raise PayloadError(f"parameter '{PAYLOAD_COM}': expected 3 numbers [m], got {com!r}")
    if len(items) != 3:
        raise PayloadError(f"parameter '{PAYLOAD_COM}': expected 3 numbers [m], got {len(items)}")
    try:
        payload = check_payload(Payload(float(mass), np.array(items, dtype=np.float64)), limits)
    except PayloadError as exc:
        name = PAYLOAD_COM if "com" in str(exc) else PAYLOAD_MASS
        raise PayloadError(f"parameter '{name}': {exc}") from None
    return None if payload.mass == 0.0 else payload


def live_parameters(controllers: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """The parameters that may change at run time: ``<instance>.<gain>`` for every configured
    controller instance, whatever its name, and each live parameter of its *type* (its
    ``GAIN_NAMES``, the live entries of its schema). Everything else is read-only."""
    live = set()
    for instance, params in controllers.items():
        controller_type = load_plugin(CONTROLLERS, str(params["type"]))
        live |= {f"{instance}.{gain}" for gain in controller_type.GAIN_NAMES}
    return frozenset(live)


def live_gains(parameters: Any, live: frozenset[str]) -> dict[str, dict[str, Any]]:
    """Group a parameter set by controller instance: {"joint_impedance": {"stiffness": [...]}},
    a list's values as floats, a scalar as a float, as given (the controller re-orders its
    per-joint gains and checks every gain's shape: ``gain_values``, ``validate_gains``).
    ``live``: :func:`live_parameters`. Raises ValueError naming a parameter that cannot change
    at run time or is not numbers."""
    grouped: dict[str, dict[str, Any]] = {}
    for parameter in parameters:
        if parameter.name in ROS_ONLY or parameter.name in PAYLOAD_PARAMETERS:
            continue  # range-checked by its descriptor, read where it is used
        if parameter.name not in live:
            raise ValueError(f"'{parameter.name}' cannot be changed at run time")
        controller, gain = parameter.name.split(".", 1)
        value = parameter.value
        # Of the shape the gain's spec gives it (one per joint, a fixed size, a scalar): the
        # controller's validate_gains checks that, naming it.
        if isinstance(value, (list, tuple, array.array)):
            grouped.setdefault(controller, {})[gain] = [float(v) for v in value]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            grouped.setdefault(controller, {})[gain] = float(value)
        else:
            raise ValueError(f"'{parameter.name}': expected numbers, got {value!r}")
    return grouped


def _numeric(value: Any) -> bool:
    items = value if isinstance(value, (list, tuple)) else [value]
    return bool(items) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in items
    )


def _range(bounds: tuple[float, float] | None) -> list[FloatingPointRange]:
    """A spec's bounds (:attr:`ParameterSpec.bounds`) as the descriptor's range; rclpy enforces
    it on a double (not on arrays: there it documents, the schema checks). An unbounded side is
    the largest double (a range of inf is not every tool's)."""
    if bounds is None:
        return []
    low, high = (max(min(b, sys.float_info.max), -sys.float_info.max) for b in bounds)
    return [FloatingPointRange(from_value=low, to_value=high, step=0.0)]


def declare_entry(
    node: Any,
    name: str,
    default: Any,
    description: str,
    live: bool = False,
    bounds: tuple[float, float] | None = None,
) -> Any:
    """Declare one entry on ``node`` with its description, read-only unless ``live``, and the
    range ``bounds`` (a spec's :attr:`~ct_controllers.parameter_schema.ParameterSpec.bounds`);
    its value (the override's, else ``default``). A value outside the range: ConfigError
    naming the entry."""
    # A read-only number takes an integer or a double as the file writes it (`1000` or
    # `1000.0`; rclpy would refuse the one the default is not): its schema checks the value.
    # An empty list says nothing of its elements' type (rclpy takes it as bytes, and rcl reads
    # `[]` in a file as a value of no type): a read-only entry with that default
    # (gripper.width_frames: names) is dynamically typed, so that a file's `[a, b]` declares
    # it, and a file's `[]` is its default (taken as given, the parameter would have no value
    # and a dump of it would not load back). Declared by type alone it would stay
    # uninitialized under a file's `[]`, and get_parameters would fail for the whole node.
    empty = isinstance(default, (list, tuple)) and not default
    descriptor = ParameterDescriptor(
        name=name,
        description=description,
        read_only=not live,
        dynamic_typing=not live and (_numeric(default) or empty),
        floating_point_range=_range(bounds),
    )
    given = getattr(node, "_parameter_overrides", {}).get(name)  # rclpy keeps them here
    untyped = given is not None and given.type_ == Parameter.Type.NOT_SET
    try:
        value = node.declare_parameter(
            name, default, descriptor, ignore_override=empty and untyped
        ).value
    except InvalidParameterValueException as exc:  # outside the descriptor's range
        raise ConfigError(f"parameter '{name}': {exc}") from None
    # rcl reads an empty YAML list (`gripper_joints: []`: an arm with no gripper) as a value of
    # no type; no default is None, so None here is that empty list.
    return [] if value is None and isinstance(default, (list, tuple)) else value


def _required_given(node: Any) -> bool:
    """Whether the node's parameters (its ``--params-file`` and ``-p`` overrides, as rclpy
    read them) describe a robot of their own: any of the stack's required entries given. Then
    every required entry must come from them (:func:`_check_required`); with none given, the
    node runs the bundled arm, every entry from the bundled file."""
    overrides = getattr(node, "_parameter_overrides", {})  # rclpy keeps them here, by name
    required = set(STACK_PARAMETERS.required)
    return bool(required & set(overrides))


def _check_required(node: Any, names: list[str]) -> None:
    """A required entry (:data:`~ct_controllers.parameter_schema.REQUIRED`: the robot's joints,
    frames, per-joint values) the user's file leaves out is a ConfigError naming each: the
    bundled arm's value is never taken for the user's robot."""
    overrides = set(getattr(node, "_parameter_overrides", {}))
    missing = [name for name in names if name not in overrides]
    if missing:
        raise ConfigError(
            f"the parameters file does not give {', '.join(repr(m) for m in missing)}: each "
            "describes the robot and has no default (the bundled arm's is not taken)"
        )


def declare_all(node: Any) -> dict[str, Any]:
    """Declare the stack's parameters, defaults from the bundled configuration, each plugin's
    from its schema (description with unit, live or read-only): the stack's own entries; the
    selected backend's section and every other one the bundled file documents; for every
    controller instance the configuration names (``controllers``, whatever the names), ``type``
    and its type's parameters. Return their (overridden) values. Under a parameters file that
    describes a robot of its own, each required entry (no default: joints, frames, per-joint
    values) of the stack and of the selected backend's section must come from it: ConfigError
    naming what it leaves out."""
    bundled = load_parameters()
    own_robot = _required_given(node)
    sections = set(known_plugins(PARAMETERS))
    bundled_instances = set(bundled.get("controllers", ()))
    values: dict[str, Any] = {}
    stack_defaults = STACK_PARAMETERS.defaults()
    for spec in STACK_PARAMETERS.parameters:
        name = STACK_PARAMETERS.full_name(spec)
        default = bundled[name] if name in bundled else stack_defaults[name]  # (REQUIRED: none)
        values[name] = declare_entry(node, name, default, spec.describe(), spec.live, spec.bounds)
    required = list(STACK_PARAMETERS.required)  # the robot's: from the user's file
    documented = {name.split(".", 1)[0] for name in bundled if "." in name}
    for section in sorted(({values["backend"]} | documented) & sections):
        schema = section_schema(section)
        assert schema is not None
        if section == values["backend"]:
            required += schema.required
        defaults = schema.defaults()
        for spec in schema.parameters:
            name = schema.full_name(spec)
            default = bundled[name] if name in bundled else defaults[name]
            values[name] = declare_entry(
                node, name, default, spec.describe(), spec.live, spec.bounds
            )
    for instance in values["controllers"]:
        type_name = f"{instance}.type"
        if type_name in bundled:
            type_value = declare_entry(
                node, type_name, bundled[type_name], "Controller plugin type"
            )
        else:  # an instance of the user's: its type must come with the parameters file
            descriptor = ParameterDescriptor(
                name=type_name, description="Controller plugin type", read_only=True
            )
            type_value = node.declare_parameter(type_name, Parameter.Type.STRING, descriptor).value
        if not isinstance(type_value, str):
            continue  # no type: the configuration says so, naming the instance
        values[type_name] = type_value
        type_object = load_plugin(CONTROLLERS, type_value)
        schema = type_object.PARAMETERS
        if schema is None:
            continue
        # Defaults: a bundled instance of the same type, else the type's own.
        template = next(
            (i for i in sorted(bundled_instances) if bundled.get(f"{i}.type") == type_value), None
        )
        for spec in schema.parameters:
            name = f"{instance}.{spec.name}"
            if (spec.per_joint and not spec.zero_by_default) or spec.required:
                required.append(name)  # the bundled arm's gains fit no other robot
            default = bundled.get(f"{template}.{spec.name}")
            if default is None and spec.zero_by_default:  # left out: 0 for every joint
                default = [0.0] * (len(values["arm_joints"]) + len(values["gripper_joints"]))
            if default is None:  # a required entry (no default) is declared empty: given or not
                default = schema.defaults().get(spec.name, [] if spec.sequence else "")
            values[name] = declare_entry(
                node, name, default, spec.describe(), spec.live, spec.bounds
            )
        if is_interface_controller(type_object):  # entries per joint by name (JTC's)
            joints = tuple(values.get(f"{instance}.joints") or ())
            for name, spec in type_object.joint_parameter_names(instance, joints).items():
                default = bundled.get(name, spec.default)
                values[name] = declare_entry(
                    node, name, default, spec.describe(), spec.live, spec.bounds
                )
    for name, (default, description) in PAYLOAD_PARAMETERS.items():
        values[name] = declare_entry(node, name, default, description, live=True)
    if values["backend"] == "mujoco":  # the simulated arm's own load (read-only)
        for name, (default, description) in SIM_PAYLOAD_PARAMETERS.items():
            values[name] = declare_entry(node, name, default, description)
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
    if own_robot:
        _check_required(node, required)
    return values
