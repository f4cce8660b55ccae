"""ct_controllers.config and ct_controllers.plugins: the controllers.yaml parameters, validated
into a StackConfig, and plugins resolved by name."""

from __future__ import annotations

import math
import re

import pytest
import yaml

from ct_controllers.config import (
    ConfigError,
    StackConfig,
    default_config_path,
    load_config,
    load_parameters,
)
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.plugins import (
    CONTROLLERS,
    HARDWARE,
    UnknownPluginError,
    known_plugins,
    load_plugin,
)
from ct_controllers.runtime.stack import build_stack

ARM = ["joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "joint7"]


def test_bundled_config_loads():
    """config/controllers.yaml loads into a StackConfig with the documented values."""
    assert default_config_path().is_file()
    config = load_config()
    assert config.update_rate == 1000.0 and config.period == pytest.approx(1e-3)
    assert config.arm_joints == tuple(ARM)
    assert config.gripper_joints == ("left_finger_joint", "right_finger_joint")
    assert config.joint_names == (*ARM, "left_finger_joint", "right_finger_joint")
    assert config.home_positions == (0.0, 0.4, 0.0, -1.6, 0.0, 1.2, 0.0, 0.02, 0.02)
    assert config.default_controller == "joint_impedance"
    impedance = config.controllers["joint_impedance"]
    assert impedance["type"] == "ct_controllers/JointImpedance"
    assert impedance["stiffness"][0] == 600.0 and impedance["gravity_compensation"] is True
    assert config.effort_rate_limit == (1000.0,) * 7 + (20000.0,) * 2
    assert len(config.safe_hold_damping) == 9
    assert config.section("mujoco")["mode"] in ("paced", "lockstep")
    assert config.section("mujoco")["timestep"] == 0.001
    assert config.backend == "mujoco" and config.tcp_frame == "tcp"


def test_parameters_are_flattened_with_dots():
    """Nested YAML keys become dotted parameter names, as rclpy flattens them."""
    params = load_parameters()
    assert params["joint_impedance.type"] == "ct_controllers/JointImpedance"
    assert params["mujoco.timestep"] == 0.001
    assert params["limiter.effort_rate_limit"][0] == 1000.0


def test_overrides_replace_single_parameters():
    """load_config(overrides=...) replaces exactly the named parameters."""
    config = load_config(overrides={"mujoco.mode": "lockstep", "update_rate": 500})
    assert config.section("mujoco")["mode"] == "lockstep"
    assert config.period == pytest.approx(2e-3)
    assert config.home_positions == load_config().home_positions


@pytest.mark.parametrize(
    "name",
    [
        "update_rate",
        "tcp_frame",
        "arm_joints",
        "home_positions",
        "default_controller",
        "mujoco.timestep",
        "safe_hold.damping",
        "limiter.effort_rate_limit",
    ],
)
def test_missing_parameter_is_named(name):
    """A missing parameter raises ConfigError naming it."""
    params = load_parameters()
    del params[name]
    with pytest.raises(ConfigError, match=re.escape(f"'{name}' is missing")):
        StackConfig.from_parameters(params)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"gripper_joints": ["left_finger_joint", "joint3"]}, "joint3"),
        ({"arm_joints": [*ARM[:6], "joint1"]}, "joint1"),
    ],
    ids=["across-groups", "within-arm"],
)
def test_joint_listed_twice_is_named(overrides, named):
    """A joint in arm_joints/gripper_joints twice raises ConfigError naming it."""
    with pytest.raises(ConfigError, match=rf"listed twice.*'{named}'"):
        load_config(overrides=overrides)


def test_default_controller_must_be_loaded():
    """default_controller must be among controllers; the error names both."""
    with pytest.raises(ConfigError, match=r"default_controller 'cartesian_impedance'.*"):
        load_config(overrides={"default_controller": "cartesian_impedance"})


def test_controller_without_type_is_named():
    """A controller listed in 'controllers' needs a '<name>.type' parameter."""
    with pytest.raises(ConfigError, match="'gravity_only'"):
        load_config(overrides={"controllers": ["joint_impedance", "gravity_only"]})


@pytest.mark.parametrize("size", [8, 10])
def test_home_positions_of_wrong_length_are_named(size):
    """home_positions must have one value per joint; the error names the parameter."""
    with pytest.raises(ConfigError, match=rf"'home_positions': expected 9 values, got {size}"):
        load_config(overrides={"home_positions": [0.0] * size})


def test_non_finite_home_position_is_named():
    """home_positions must be finite numbers."""
    with pytest.raises(ConfigError, match="'home_positions'"):
        load_config(overrides={"home_positions": [0.0] * 8 + [float("nan")]})


@pytest.mark.parametrize("rate", [0, 0.5, 10001, 1e6, float("nan"), float("inf"), -1000])
def test_update_rate_out_of_range_is_named(rate):
    """update_rate outside [1, 10000] Hz (or not finite) raises ConfigError naming it."""
    with pytest.raises(ConfigError, match="'update_rate'"):
        load_config(overrides={"update_rate": rate})


@pytest.mark.parametrize("rate", [1, 10000, 250.0])
def test_update_rate_bounds_are_inclusive(rate):
    """The update-rate range includes its ends."""
    assert load_config(overrides={"update_rate": rate}).update_rate == rate


@pytest.mark.parametrize(
    ("name", "value"),
    [("update_rate", "1000"), ("update_rate", True), ("tcp_frame", 3), ("arm_joints", "joint1")],
)
def test_wrong_type_is_named(name, value):
    """A parameter of the wrong type (a bool is not a number) raises ConfigError naming it."""
    with pytest.raises(ConfigError, match=re.escape(f"'{name}'")):
        load_config(overrides={name: value})


def test_non_positive_rate_limit_is_named():
    """limiter.effort_rate_limit must be positive on every joint, one value per joint."""
    with pytest.raises(ConfigError, match=re.escape("'limiter.effort_rate_limit'")):
        load_config(overrides={"limiter.effort_rate_limit": [1000.0] * 8 + [0.0]})
    with pytest.raises(ConfigError, match=re.escape("'limiter.effort_rate_limit'")):
        load_config(overrides={"limiter.effort_rate_limit": [1000.0] * 8})


def test_config_file_errors(tmp_path):
    """A missing file, a non-mapping document and a file without the node's section raise
    ConfigError naming the file; any of the accepted node keys works."""
    with pytest.raises(ConfigError, match="not found"):
        load_parameters(tmp_path / "missing.yaml")
    not_mapping = tmp_path / "list.yaml"
    not_mapping.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=re.escape("list.yaml")):
        load_parameters(not_mapping)
    other_node = tmp_path / "other.yaml"
    other_node.write_text(yaml.safe_dump({"/some_other_node": {"ros__parameters": {}}}))
    with pytest.raises(ConfigError, match="no section"):
        load_parameters(other_node)
    wildcard = tmp_path / "wildcard.yaml"
    section = yaml.safe_load(default_config_path().read_text())["/**/controller_manager"]
    wildcard.write_text(yaml.safe_dump({"/**": section}))
    assert load_config(wildcard) == load_config()


def test_build_stack_rejects_an_unknown_joint_by_name():
    """A configuration naming a joint the URDF lacks fails in build_stack, naming it."""
    config = load_config(
        overrides={
            "mujoco.mode": "lockstep",
            "arm_joints": [*ARM, "joint8"],
            "home_positions": [0.0] * 10,
            "safe_hold.damping": [1.0] * 10,
            "references.max_acceleration": [1.0] * 10,
            "references.max_jerk": [1.0] * 10,
            "limiter.effort_rate_limit": [1.0] * 10,
            "joint_impedance.stiffness": [1.0] * 10,
            "joint_impedance.damping": [1.0] * 10,
        }
    )
    with pytest.raises(ConfigError, match="'joint8'"):
        build_stack(config)


def test_build_stack_rejects_a_config_missing_a_urdf_joint():
    """A configuration that leaves out a URDF joint fails in build_stack, naming it."""
    config = load_config(
        overrides={
            "gripper_joints": ["left_finger_joint"],
            "home_positions": [0.0] * 8,
            "safe_hold.damping": [1.0] * 8,
            "references.max_acceleration": [1.0] * 8,
            "references.max_jerk": [1.0] * 8,
            "limiter.effort_rate_limit": [1.0] * 8,
        }
    )
    with pytest.raises(ConfigError, match="'right_finger_joint'"):
        build_stack(config)


def test_plugins_resolve_by_name():
    """The registered plugin names load the classes the stack uses."""
    assert load_plugin(HARDWARE, "ct_controllers/MujocoSystem") is MujocoSystem
    assert load_plugin(CONTROLLERS, "ct_controllers/JointImpedance") is JointImpedanceController
    assert "ct_controllers/MujocoSystem" in known_plugins(HARDWARE)


def test_a_plugin_installed_while_the_process_runs_is_found_and_a_removed_one_forgotten(
    tmp_path, monkeypatch
):
    """The installed packages' entry points are scanned once and kept (a scan reads every
    distribution's metadata: 20-60 ms), yet a package that appears in a folder already on
    ``sys.path`` (its ``.dist-info`` with an ``entry_points.txt``, as pip writes it) is found
    by the next lookup, and once the folder leaves ``sys.path`` its plugin is unknown again."""
    import os

    monkeypatch.syspath_prepend(str(tmp_path))
    name = "ct_cache_probe/Impedance"
    assert name not in known_plugins(CONTROLLERS)
    info = tmp_path / "ct_cache_probe-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ct-cache-probe\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[ct_controllers.controllers]\n"
        f"{name} = ct_controllers.controllers.joint_impedance:JointImpedanceController\n"
    )
    # A folder's new contents are told by its modification time, as importlib.metadata tells
    # them; a later one than the scan's, whatever the file system's clock granularity.
    stamp = os.stat(tmp_path).st_mtime_ns + 10**9
    os.utime(tmp_path, ns=(stamp, stamp))
    assert name in known_plugins(CONTROLLERS)
    assert load_plugin(CONTROLLERS, name) is JointImpedanceController
    monkeypatch.undo()
    assert name not in known_plugins(CONTROLLERS)
    with pytest.raises(UnknownPluginError):
        load_plugin(CONTROLLERS, name)


def test_unknown_hardware_plugin_lists_the_known_ones():
    """An unknown plugin name raises UnknownPluginError naming it and listing the known."""
    with pytest.raises(UnknownPluginError) as info:
        load_plugin(HARDWARE, "ct_controllers/FakeRobot")
    message = str(info.value)
    assert "'ct_controllers/FakeRobot'" in message
    assert "known: " in message and "ct_controllers/MujocoSystem" in message
    assert isinstance(info.value, LookupError)


def test_unknown_controller_type_lists_the_known_ones():
    """An unknown controller type in the config fails in build_stack with the known types."""
    config = load_config(overrides={"joint_impedance.type": "ct_controllers/Cartesian"})
    with pytest.raises(UnknownPluginError, match="ct_controllers/JointImpedance"):
        build_stack(config)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"references.velocity_fraction": 0.0}, "references.velocity_fraction"),
        ({"references.velocity_fraction": 1.5}, "references.velocity_fraction"),
        ({"references.max_jerk": [30.0] * 8 + [-1.0]}, "references.max_jerk"),
        ({"references.max_acceleration": [3.0] * 8}, "references.max_acceleration"),
    ],
    ids=["zero-fraction", "fraction-above-one", "negative-jerk", "short-acceleration"],
)
def test_reference_limits_are_validated(overrides, named):
    """Reference limits out of range or of the wrong length raise ConfigError naming them."""
    with pytest.raises(ConfigError, match=named):
        load_config(overrides=overrides)


@pytest.mark.parametrize(
    ("update_rate", "cartesian_rate", "divisor"),
    [(1000, 0.0, 1), (1000, 1000, 1), (1000, 250, 4), (500, 100, 5), (1000, 1, 1000)],
)
def test_cartesian_rate_gives_whole_ticks_per_step(update_rate, cartesian_rate, divisor):
    """cartesian.update_rate divides update_rate into whole control ticks (0 = every tick)."""
    config = load_config(
        overrides={"update_rate": update_rate, "cartesian.update_rate": cartesian_rate}
    )
    assert config.cartesian_divisor == divisor


@pytest.mark.parametrize("cartesian_rate", [300, 2000, -250, math.nan])
def test_cartesian_rate_that_does_not_divide_is_named(cartesian_rate):
    """A Cartesian rate that is not update_rate / n (n ≥ 1 whole) raises ConfigError naming
    the parameter."""
    with pytest.raises(ConfigError, match=re.escape("'cartesian.update_rate'")):
        load_config(overrides={"update_rate": 1000, "cartesian.update_rate": cartesian_rate})


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5, math.nan])
def test_overrun_fraction_out_of_range_is_named(fraction):
    """overrun_fraction outside (0, 1] of a period raises ConfigError naming it."""
    with pytest.raises(ConfigError, match=re.escape("'overrun_fraction'")):
        load_config(overrides={"overrun_fraction": fraction})


def test_overrun_fraction_reaches_the_loop():
    """The configured fraction is the one the control loop counts overruns with."""
    from ct_controllers.runtime.stack import build_stack

    stack = build_stack(load_config(overrides={"mujoco.mode": "lockstep", "overrun_fraction": 0.2}))
    assert stack.loop.overrun_fraction == 0.2


ROBOT_ENTRIES = (
    "arm_joints",
    "gripper_joints",
    "base_frame",
    "tcp_frame",
    "home_positions",
    "references.max_acceleration",
    "references.max_jerk",
    "limiter.effort_rate_limit",
    "safe_hold.damping",
)


@pytest.mark.parametrize("name", ROBOT_ENTRIES)
def test_what_describes_the_robot_has_no_default(name):
    """The robot's own entries (joints, frames, home, per-joint values) are required: the
    schema has no default for them, and a configuration without one fails naming it and
    saying it describes the robot."""
    from ct_controllers.stack_parameters import PARAMETERS as STACK

    assert name in STACK.required and name not in STACK.defaults()
    params = load_parameters()
    del params[name]
    with pytest.raises(ConfigError, match=re.escape(f"'{name}' is missing (it has no default")):
        StackConfig.from_parameters(params)


def test_no_schema_default_names_the_bundled_arm():
    """No default of the stack's schema or of any registered section's names a joint, a link
    or a frame of the bundled URDF: those come from the configuration file only."""
    from ct_controllers.model.description import load_description
    from ct_controllers.model.link_tree import urdf_joints
    from ct_controllers.parameter_schema import PARAMETERS, section_schema
    from ct_controllers.stack_parameters import PARAMETERS as STACK

    joints = urdf_joints(load_description().urdf)
    names = {j.name for j in joints} | {j.parent for j in joints} | {j.child for j in joints}
    assert {"joint1", "tcp", "base_link", "left_finger_joint"} <= names
    schemas = [STACK] + [section_schema(s) for s in known_plugins(PARAMETERS)]
    for schema in schemas:
        assert schema is not None
        for key, value in schema.defaults().items():
            values = value if isinstance(value, list) else [value]
            named = sorted(v for v in values if isinstance(v, str) and v in names)
            assert not named, f"{key} defaults to {named}"


def test_no_section_has_a_per_joint_default_sized_for_one_arm():
    """A per-joint entry of a backend's section describes the user's hardware (drive ids,
    encoders, gears, ratings): it has no default (required when that backend is selected),
    unless one value stands for every joint; a default of the bundled arm's length fits no
    other arm."""
    from ct_controllers.parameter_schema import PARAMETERS, section_schema

    for section in known_plugins(PARAMETERS):
        schema = section_schema(section)
        assert schema is not None
        defaults = schema.defaults()
        for spec in schema.parameters:
            if spec.per_joint and not spec.required:
                assert len(defaults[spec.name]) <= 1, f"{section}.{spec.name}"


@pytest.mark.parametrize("name", ["canopen.node_ids", "canopen.rated_torque"])
def test_a_canopen_config_without_its_drive_tables_is_refused_naming_one(name):
    """Backend canopen with parameters that leave out a drive table (node ids, ratings): a
    ConfigError naming it and saying it describes the robot (no default)."""
    params = load_parameters()
    params["backend"] = "canopen"
    del params[name]
    with pytest.raises(ConfigError, match=re.escape(f"'{name}' is missing (it has no default")):
        StackConfig.from_parameters(params)


def test_build_stack_refuses_a_mimic_follower_in_the_joint_lists(tmp_path):
    """A configuration that lists a <mimic> follower as a joint of its own fails in
    build_stack, naming the follower and its master."""
    from test_model_joints import small_arm

    joints = ("shoulder", "elbow", "wrist", "left", "right")
    block = "".join(
        f'<joint name="{j}"><command_interface name="effort"/>'
        '<state_interface name="position"/></joint>'
        for j in joints
    )
    urdf = small_arm().replace(
        "</robot>",
        '<ros2_control name="arm" type="system"><hardware><plugin>ct_controllers/MujocoSystem'
        f"</plugin></hardware>{block}</ros2_control></robot>",
    )
    path = tmp_path / "small_arm.urdf"
    path.write_text(urdf)
    n = len(joints)
    config = load_config(
        overrides={
            "robot_description": str(path),
            "base_frame": "base",
            "tcp_frame": "tool",
            "arm_joints": list(joints[:3]),
            "gripper_joints": list(joints[3:]),
            "home_positions": [0.0] * n,
            "safe_hold.damping": [1.0] * n,
            "references.max_acceleration": [1.0] * n,
            "references.max_jerk": [1.0] * n,
            "limiter.effort_rate_limit": [1.0] * n,
            "joint_impedance.stiffness": [1.0] * n,
            "joint_impedance.damping": [1.0] * n,
        }
    )
    with pytest.raises(ConfigError, match="mimic joint 'right': it follows 'left'"):
        build_stack(config)


def test_a_backend_reads_its_section_as_parsed_when_the_configuration_was_loaded():
    """load_config parses the selected backend's section once and keeps it; the backend's
    from_config reads the kept result, not the raw parameters again (a kept value that
    differs from the raw one is the one the backend takes)."""
    import dataclasses

    from ct_controllers.hardware.ros2_control_bridge import Ros2ControlBridge
    from ct_controllers.model.description import load_description

    config = load_config(overrides={"backend": "ros2_control_bridge"})
    kept = dict(config.section("ros2_control_bridge"))
    kept["command_topic"] = "/kept/commands"
    config = dataclasses.replace(config, sections={**config.sections, "ros2_control_bridge": kept})
    description = load_description(mappings={"backend": "ros2_control_bridge"})
    bridge = Ros2ControlBridge.from_config(description, config)
    assert bridge.config.command_topic == "/kept/commands"
    assert config.parameters["ros2_control_bridge.command_topic"] != "/kept/commands"


def test_the_configuration_and_hardware_interface_are_in_no_import_cycle():
    """config, stack_parameters, hardware.interface and hardware.guard import each other in
    no cycle — counting every import, those for type annotations only included."""
    import ast
    from pathlib import Path

    import ct_controllers

    root = Path(ct_controllers.__file__).parent
    modules: dict[str, set[str]] = {}
    for file in root.rglob("*.py"):
        name = ".".join(("ct_controllers", *file.relative_to(root).with_suffix("").parts))
        name = name.removesuffix(".__init__")
        imported: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        modules[name] = imported
    graph = {m: {d for d in deps if d in modules and d != m} for m, deps in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module == goal:
                return True
            if module not in seen:
                seen.add(module)
                todo.extend(graph[module])
        return False

    for module in (
        "ct_controllers.config",
        "ct_controllers.stack_parameters",
        "ct_controllers.hardware.interface",
        "ct_controllers.hardware.guard",
    ):
        assert not reaches(module, module), f"{module} is in an import cycle"
