"""ct_controllers.parameter_schema: each plugin owns its parameters. A backend's section is
checked by the backend's schema only, a configuration names only the plugins it uses, and the
bundled YAML's plugin sections are the schemas' defaults."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import rclpy
import rclpy.context
import yaml
from helpers import new_robot_model
from rclpy.parameter import Parameter

from ct_controllers.config import ConfigError, load_config, load_parameters
from ct_controllers.controllers.cartesian_impedance import CartesianImpedanceController
from ct_controllers.controllers.computed_torque import ComputedTorqueController
from ct_controllers.controllers.controller import GainError
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.interface_controllers import is_interface_controller
from ct_controllers.parameter_schema import (
    FIXED,
    PARAMETERS,
    PER_JOINT,
    SCALAR,
    ParameterProblem,
    ParameterSchema,
    ParameterSpec,
    Range,
    non_negative,
    one_of,
    positive,
    section_schema,
)
from ct_controllers.plugins import CONTROLLERS, HARDWARE, known_plugins, load_plugin
from ct_controllers.ros.parameters import declare_entry, live_gains
from ct_controllers.runtime.stack import build_stack
from ct_controllers.stack_parameters import PARAMETERS as STACK_PARAMETERS

BACKENDS = ("mujoco", "ros2_control_bridge", "canopen")


def _config_without(tmp_path: Path, *sections: str, **changes: object) -> Path:
    """The bundled configuration file without the named sections (and with ``changes``)."""
    document = yaml.safe_load(
        (Path(__file__).parents[1] / "config" / "controllers.yaml").read_text()
    )
    params = document["/**/controller_manager"]["ros__parameters"]
    for section in sections:
        del params[section]
    params.update(changes)
    path = tmp_path / "controllers.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_every_backend_registers_the_schema_of_its_section():
    """Each bundled backend's section has a schema registered under its `backend:` name, the
    same object the backend class parses its section with."""
    assert set(BACKENDS) <= set(known_plugins(PARAMETERS))
    for plugin in known_plugins(HARDWARE):
        hardware = load_plugin(HARDWARE, plugin)
        assert isinstance(hardware.PARAMETERS, ParameterSchema), plugin
        assert section_schema(hardware.PARAMETERS.section) is hardware.PARAMETERS


def test_the_bundled_sections_are_the_schemas_defaults():
    """The YAML defaults derive from the schemas: every plugin section of the bundled file holds
    exactly its schema's parameters, at their defaults where they have one (the required ones,
    which describe the robot, are there with the bundled arm's values), and every schema entry
    is described."""
    bundled = load_parameters()
    for section in BACKENDS:
        schema = section_schema(section)
        assert schema is not None
        in_file = {k: v for k, v in bundled.items() if k.startswith(f"{section}.")}
        assert set(schema.required) <= set(in_file), section
        defaults = {k: v for k, v in in_file.items() if k not in schema.required}
        assert defaults == schema.defaults(), section
        assert all(d for d, _ in schema.describe().values())
    for instance in bundled["controllers"]:
        controller_type = load_plugin(CONTROLLERS, bundled[f"{instance}.type"])
        schema = controller_type.PARAMETERS
        in_file = {
            k.split(".", 1)[1]: v
            for k, v in bundled.items()
            if k.startswith(f"{instance}.") and not k.endswith(".type")
        }
        if is_interface_controller(controller_type):
            # Its entries per joint by name (the trajectory controller's tolerances) are the
            # robot's, as per-joint gains are: present for each of its joints, no others.
            joints = tuple(in_file.get("joints", ()))  # a gripper controller has one `joint`
            names = controller_type.joint_parameter_names(instance, joints)
            joint_entries = {k.split(".", 1)[1] for k in names}
            assert joint_entries <= set(in_file), instance
            in_file = {k: v for k, v in in_file.items() if k not in joint_entries}
            required = {spec.name for spec in schema.parameters if spec.required}
            in_file = {k: v for k, v in in_file.items() if k not in required}
        assert in_file == schema.defaults(), instance


def test_a_mujoco_config_needs_no_other_backends_sections(tmp_path: Path):
    """A MuJoCo configuration without the canopen and ros2_control_bridge sections loads, and the
    stack builds from it: only the selected backend's section is required."""
    path = _config_without(tmp_path, "canopen", "ros2_control_bridge")
    config = load_config(path, overrides={"mujoco.mode": "lockstep"})
    assert set(config.sections) == {"mujoco"}
    stack = build_stack(config)
    assert stack.hardware.backend_name == "ct_controllers/MujocoSystem"
    with pytest.raises(ConfigError, match="no checked section 'canopen'"):
        config.section("canopen")


def test_the_selected_backends_section_is_required(tmp_path: Path):
    """A configuration selecting a backend without that backend's section names the first
    missing parameter of the section."""
    path = _config_without(tmp_path, "canopen")
    with pytest.raises(ConfigError, match=r"parameter 'canopen\.interface' is missing"):
        load_config(path, overrides={"backend": "canopen"})


def test_an_unused_section_is_checked_as_it_stands_not_sized_by_the_joints():
    """A section present but not in use is checked by its schema (values, types, cross checks)
    without sizing its per-joint lists by the joint lists; in use, they must match."""
    load_config(overrides={"canopen.node_ids": [1, 2, 3]})
    with pytest.raises(ConfigError, match=r"'canopen\.node_ids': expected 9 values, got 3"):
        load_config(overrides={"backend": "canopen", "canopen.node_ids": [1, 2, 3]})
    with pytest.raises(ConfigError, match=r"'canopen\.bitrate': expected an integer"):
        load_config(overrides={"canopen.bitrate": "fast"})


def test_a_controllers_entries_are_checked_by_its_types_schema():
    """A controller's from_parameters takes its entries through its type's schema alone: an
    absent read-only entry takes the schema's default, a per-joint entry comes back in model
    order, and each spec's kind and validator (one_of, positive, >= 0) refuse a bad value with
    GainError naming the entry."""
    model = new_robot_model()
    names = tuple(reversed(model.joint_names))
    gains = {"kp": [float(i) for i in range(9)], "kd": [1.0] * 9}
    values = ComputedTorqueController.check_parameters(model, names, gains)
    assert values["mode"] == ComputedTorqueController.PARAMETERS.spec("mode").default
    assert values["model_mass_scale"] == 1.0
    assert values["kp"][model.v_index(names[3])] == 3.0
    for bad, named in (
        ({"mode": "fast"}, "mode: 'fast' is not one of computed_torque"),
        ({"model_mass_scale": 0.0}, "model_mass_scale: must be > 0"),
        ({"model_mass_scale": "heavy"}, "model_mass_scale: expected a number"),
        ({"kd": [1.0] * 8 + [-1.0]}, re.escape("kd: values must be in [0, inf]")),
        ({"kd": [1.0] * 8 + [math.nan]}, "kd: non-finite"),
    ):
        with pytest.raises(GainError, match=named):
            ComputedTorqueController.from_parameters(model, names, {**gains, **bad})
    flags = JointImpedanceController.check_parameters(
        model, names, {"stiffness": [1.0] * 9, "damping": [1.0] * 9}
    )
    schema = JointImpedanceController.PARAMETERS
    for flag in ("gravity_compensation", "coriolis_compensation", "inertia_decoupling"):
        assert flags[flag] is schema.spec(flag).default, flag


def test_live_gains_are_checked_by_the_same_specs():
    """Staging live gains checks each one with its schema spec (what from_parameters uses):
    the same words for the same fault on either path."""
    model = new_robot_model()
    controller = JointImpedanceController(model, np.ones(model.nv), np.ones(model.nv))
    with pytest.raises(GainError, match="stiffness: values must be in") as staged:
        controller.stage_gains({"stiffness": [-1.0] * 9})
    with pytest.raises(GainError) as loaded:
        JointImpedanceController.from_parameters(
            model, model.joint_names, {"stiffness": [-1.0] * 9, "damping": [1.0] * 9}
        )
    assert str(staged.value) in str(loaded.value)


def test_the_bundled_stack_entries_are_the_stack_schemas_defaults():
    """The stack's own entries have a schema too: every entry of the bundled file belongs to
    the stack's schema, a registered section's or a controller instance, and the stack's entries
    are the stack schema's defaults (described, read-only), except the required ones — what
    describes the robot (joints, frames, home, per-joint values) has no default: the file gives
    the bundled arm's."""
    bundled = load_parameters()
    instances = set(bundled["controllers"])
    sections = set(known_plugins(PARAMETERS))
    stack = STACK_PARAMETERS.defaults()
    for name, value in bundled.items():
        owner = name.split(".", 1)[0] if "." in name else ""
        if owner in instances or owner in sections:
            continue
        if name in STACK_PARAMETERS.required:
            continue
        assert name in stack, f"{name}: in the bundled file but in no schema"
        assert value == stack[name], name
    assert set(stack) | set(STACK_PARAMETERS.required) <= set(bundled)
    assert all(d and not live for d, live in STACK_PARAMETERS.describe().values())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"update_rate": 0.5}, "parameter 'update_rate': must be in [1, 10000] Hz, got 0.5"),
        ({"realtime.priority": 100}, "parameter 'realtime.priority': must be 0 (off) or 1–99"),
        ({"realtime.cpu": -2}, "parameter 'realtime.cpu': must be a CPU number or -1 (any)"),
        ({"watchdog.fault_reaction": "explode"}, "'explode' is not one of damp, hold"),
        ({"arm_joints": ["joint1", ""]}, "'arm_joints': expected a list of non-empty names"),
        ({"hardware.future_tolerance": -1.0}, "must be finite and >= 0 s, got -1.0"),
    ],
    ids=["rate", "priority", "cpu", "reaction", "empty-name", "tolerance"],
)
def test_the_stack_schema_names_the_parameter_and_the_problem(overrides, message):
    """load_config checks the stack's own entries with the stack's schema: the error names the
    parameter and says what is wrong with it."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(overrides=overrides)


# --- shapes: per joint, a fixed size, a scalar (issue 26, item 4) ----------------------------


def test_a_spec_has_a_shape_and_checks_its_size():
    """A spec's size makes it a fixed-size sequence (one of the counts given) whatever the
    robot; a per-joint spec is sized by the joints; a scalar takes one number. Each shape
    refuses the others' values, naming what it expected."""
    fixed = ParameterSpec("k", float, (1.0,) * 6, "k", size=(6, 36), validator=non_negative)
    scalar = ParameterSpec("k_n", float, 1.0, "k_n", validator=non_negative)
    joints = ParameterSpec("kp", float, (1.0,) * 9, "kp", per_joint=True)
    assert (fixed.shape, scalar.shape, joints.shape) == (FIXED, SCALAR, PER_JOINT)
    assert fixed.sizes == (6, 36) and scalar.sizes == () and joints.sizes == ()
    assert fixed.check([2.0] * 6) == (2.0,) * 6
    assert len(fixed.check([0.0] * 36)) == 36
    with pytest.raises(ParameterProblem, match="expected 6 or 36 values, got 9"):
        fixed.check([1.0] * 9)
    with pytest.raises(ParameterProblem, match="expected a list"):
        fixed.check(1.0)
    with pytest.raises(ParameterProblem, match="expected a number"):
        scalar.check([1.0])
    with pytest.raises(ParameterProblem, match="expected 9 values, got 6"):
        joints.check([1.0] * 6, 9)
    with pytest.raises(ValueError, match="per-joint parameter takes no fixed size"):
        ParameterSpec("bad", float, (), "bad", per_joint=True, size=6)


def test_simple_bounds_are_the_descriptors_range():
    """A Range validator's bounds are the spec's (what the ROS descriptor's
    floating_point_range says); other validators and non-float kinds have none. The Range
    validators keep the words of the validators they replace."""
    assert ParameterSpec("a", float, 1.0, "a", validator=positive).bounds == (0.0, math.inf)
    assert ParameterSpec("b", float, 1.0, "b", validator=Range(0.5, 2.0)).bounds == (0.5, 2.0)
    assert ParameterSpec("c", str, "x", "c", validator=one_of("x")).bounds is None
    assert ParameterSpec("d", int, 1, "d", validator=positive).bounds is None
    assert positive(0.0) == "must be > 0, got 0.0"
    assert non_negative(-1.0) == "must be >= 0, got -1.0"
    assert non_negative((1.0, -1.0)) == "values must be in [0, inf], got [1.0, -1.0]"
    assert Range(0.5, 2.0)(3.0) == "must be in [0.5, 2], got 3.0"


def test_gain_names_are_the_schemas_live_entries():
    """Every bundled controller type's GAIN_NAMES is its schema's live entries (it is not
    written twice); a subclass declaring other GAIN_NAMES than its schema's is refused."""
    for plugin in known_plugins(CONTROLLERS):
        controller_type = load_plugin(CONTROLLERS, plugin)
        schema = controller_type.PARAMETERS
        if schema is not None and not is_interface_controller(controller_type):
            assert schema.live == controller_type.GAIN_NAMES, plugin
    for controller_type in (JointImpedanceController, CartesianImpedanceController):
        assert controller_type.PARAMETERS.live == controller_type.GAIN_NAMES
    with pytest.raises(TypeError, match="are not its schema's live entries"):
        type(
            "Inconsistent",
            (JointImpedanceController,),
            {"PARAMETERS": JointImpedanceController.PARAMETERS, "GAIN_NAMES": ("stiffness",)},
        )


@pytest.fixture
def parameter_node():
    """A plain rclpy node in a context of its own: parameters only, nothing to discover."""
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("ct_parameter_shapes", context=context)
    try:
        yield node
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def test_shaped_gains_through_rclpy_parameters(parameter_node):
    """The way a `ros2 param set` takes on the node, with rclpy's own parameters: each entry of
    a Cartesian impedance instance declared from its schema (ros/parameters.py), a validator's
    simple bounds as the descriptor's floating_point_range (rclpy then refuses a negative
    damping ratio itself); a 6-vector stiffness and a scalar nullspace stiffness set, grouped
    by live_gains, brought to the controller's form by gain_values and validated; a per-joint
    gain given in another joint order arrives in model order by name; wrong shapes are refused
    naming the gain."""
    node = parameter_node
    model = new_robot_model()
    controller = CartesianImpedanceController(model)
    schema = CartesianImpedanceController.PARAMETERS
    for spec in schema.parameters:
        default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
        declare_entry(node, f"cart.{spec.name}", default, spec.describe(), spec.live, spec.bounds)
    (ratio,) = node.describe_parameters(["cart.damping_ratio"])
    assert ratio.floating_point_range[0].from_value == 0.0
    (step,) = node.describe_parameters(["cart.max_position_step"])
    assert step.read_only and step.floating_point_range[0].from_value == 0.0
    refused = node.set_parameters([Parameter("cart.damping_ratio", value=-1.0)])[0]
    assert not refused.successful
    live = frozenset(f"cart.{name}" for name in CartesianImpedanceController.GAIN_NAMES)
    stiffness = [500.0, 400.0, 300.0, 20.0, 20.0, 20.0]
    new = [
        Parameter("cart.stiffness", value=stiffness),
        Parameter("cart.nullspace_stiffness", value=20.0),
    ]
    assert all(r.successful for r in node.set_parameters(new))
    grouped = live_gains(node.get_parameters(["cart.stiffness", "cart.nullspace_stiffness"]), live)
    gains = controller.validate_gains(controller.gain_values(grouped["cart"], model.joint_names))
    assert np.array_equal(gains["stiffness"], np.diag(stiffness).ravel())
    assert np.array_equal(gains["nullspace_stiffness"], [20.0])
    with pytest.raises(ValueError, match="cannot be changed at run time"):
        live_gains([Parameter("cart.stiffness_frame", value="tcp")], live)
    with pytest.raises(GainError, match="stiffness: expected 6 or 36 values, got 9"):
        controller.validate_gains(
            controller.gain_values({"stiffness": [1.0] * 9}, model.joint_names)
        )
    with pytest.raises(GainError, match="nullspace_stiffness: expected a number"):
        controller.validate_gains(
            controller.gain_values({"nullspace_stiffness": [1.0, 2.0]}, model.joint_names)
        )
    joint = JointImpedanceController(model, np.ones(model.nv), np.ones(model.nv))
    reversed_names = tuple(reversed(model.joint_names))
    values = {"stiffness": [float(i) for i in range(model.nv)]}
    moved = joint.gain_values(values, reversed_names)["stiffness"]
    for i, name in enumerate(reversed_names):
        assert moved[model.q_index(name)] == float(i)
    with pytest.raises(GainError, match="stiffness: expected 9 values, got 2"):
        joint.gain_values({"stiffness": [1.0, 2.0]}, model.joint_names)


def test_a_value_outside_the_descriptors_range_is_refused_naming_it():
    """The stack's own bounded entries have their range on the descriptor too (update_rate:
    [1, 10000] Hz); a file's value outside a declared range is refused by rclpy at declaration,
    reported as a ConfigError naming the entry (the node's exit 2, not a traceback)."""
    assert STACK_PARAMETERS.spec("update_rate").bounds == (1.0, 10000.0)
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(
        "ct_parameter_ranges",
        context=context,
        parameter_overrides=[Parameter("cart.damping_ratio", value=-0.5)],
    )
    try:
        with pytest.raises(ConfigError, match=re.escape("parameter 'cart.damping_ratio'")):
            declare_entry(node, "cart.damping_ratio", 1.0, "ζ", True, (0.0, math.inf))
        assert not node.has_parameter("cart.damping_ratio")
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
