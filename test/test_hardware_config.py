"""The hardware, watchdog, bridge and CANopen parameters of controllers.yaml: validated with
errors that name the parameter, wired by build_stack into the guard, the watchdog and the
backends; the backend switch by configuration, logged loudly."""

from __future__ import annotations

import logging
import re

import pytest
from helpers import bundled_description

from ct_controllers.config import ConfigError, load_config
from ct_controllers.hardware.canopen.system import CanopenCia402System
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.hardware.ros2_control_bridge import Ros2ControlBridge
from ct_controllers.model.description import parse_description
from ct_controllers.plugins import HARDWARE, load_plugin
from ct_controllers.runtime.stack import build_stack


def test_bundled_defaults():
    """Unarmed, watchdog on with 3-period deadlines (0 = default), damp reaction, the guard's
    age limit following the state timeout."""
    config = load_config()
    assert config.armed is False
    assert config.watchdog_enabled and config.fault_reaction == "damp"
    assert config.effective_state_timeout == pytest.approx(3 * config.period)
    assert config.effective_command_timeout == pytest.approx(3 * config.period)
    assert config.effective_max_state_age == pytest.approx(config.effective_state_timeout)
    assert len(config.section("canopen")["node_ids"]) == 9
    assert config.section("ros2_control_bridge")["command_joints"] == config.joint_names


BAD = [
    ({"watchdog.fault_reaction": "explode"}, "watchdog.fault_reaction"),
    ({"watchdog.state_timeout": -0.1}, "watchdog.state_timeout"),
    ({"hardware.max_state_age": float("nan")}, "hardware.max_state_age"),
    ({"hardware.armed": "yes"}, "hardware.armed"),
    ({"ros2_control_bridge.command_interface": "velocity"}, "command_interface"),
    ({"ros2_control_bridge.command_joints": ["joint1", "joint1"]}, "command_joints"),
    ({"backend": "canopen", "canopen.node_ids": [1, 2, 3, 4, 5, 6, 7, 8, 8]}, "node_ids"),
    ({"backend": "canopen", "canopen.node_ids": [1, 2, 3, 4, 5, 6, 7, 8, 200]}, "node_ids"),
    ({"backend": "canopen", "canopen.gear_ratio": [1.0] * 8}, "canopen.gear_ratio"),
    ({"canopen.heartbeat_timeout": 0.005}, "canopen.heartbeat_timeout"),
    ({"canopen.quick_stop_option": 3}, "605Ah"),
    ({"backend": "canopen", "canopen.node_ids": [1, 2, 3, 4, 5, 6, 7, 8, 127]}, "master's own"),
    ({"canopen.master_heartbeat_timeout": 0.01}, "canopen.master_heartbeat_timeout"),
    ({"canopen.master_heartbeat_timeout": 70.0}, "1016h"),
    ({"canopen.master_heartbeat_period": 0.0005}, "canopen.master_heartbeat_period"),
    ({"canopen.abort_connection_option": 4}, "6007h"),
    ({"canopen.mode": "velocity"}, "canopen.mode"),
    ({"mujoco.command_interfaces": ["velocity"]}, "mujoco.command_interfaces"),
    ({"mujoco.command_interfaces": ["effort", "position"]}, "mujoco.command_interfaces"),
]


@pytest.mark.parametrize(
    ("overrides", "named"), BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)]
)
def test_bad_hardware_parameters_are_named(overrides, named):
    """Each invalid value raises ConfigError naming the parameter."""
    with pytest.raises(ConfigError, match=re.escape(named)):
        load_config(overrides=overrides)


@pytest.mark.parametrize(
    ("backend", "kind"),
    [("mujoco", MujocoSystem), ("ros2_control_bridge", Ros2ControlBridge),
     ("canopen", CanopenCia402System)],
)  # fmt: skip
def test_backend_is_switched_by_configuration(backend, kind):
    """`backend:` picks the URDF plugin (xacro argument) and so the backend class; the real
    ones get the guard limits and arming from the configuration; the loop gets the deadlines."""
    config = load_config(overrides={"backend": backend, "watchdog.state_timeout": 0.02})
    stack = build_stack(config)
    try:
        assert isinstance(stack.hardware, kind)
        assert stack.hardware.requires_arming == (backend != "mujoco")
        assert stack.hardware.guard.limits.max_state_age == pytest.approx(0.02)
        assert stack.loop.watchdog.config.state_timeout == pytest.approx(0.02)
    finally:
        stack.shut_down()


@pytest.mark.parametrize("backend", ["ros2_control_bridge", "canopen"])
@pytest.mark.parametrize("armed", [False, True])
def test_a_real_backend_is_armed_as_it_is_built(backend, armed):
    """A real backend's arming is part of building it: from_config passes hardware.armed to
    the constructor, and build_stack leaves it so (nothing arms it from outside)."""
    config = load_config(overrides={"backend": backend, "hardware.armed": armed})
    description = bundled_description(backend)
    kind = load_plugin(HARDWARE, description.hardware.plugin)
    assert kind.from_config(description, config).armed is armed
    stack = build_stack(config, description)
    try:
        assert stack.hardware.armed is armed
    finally:
        stack.shut_down()


def test_each_bundled_backend_says_which_backend_value_selects_it():
    """The `backend:` value → plugin mapping comes from the plugins (their BACKEND, the same
    name as their parameter section), and the bundled URDF's xacro argument picks exactly that
    plugin."""
    for backend in ("mujoco", "ros2_control_bridge", "canopen"):
        plugin = bundled_description(backend).hardware.plugin
        kind = load_plugin(HARDWARE, plugin)
        assert kind.BACKEND == backend == kind.PARAMETERS.section, plugin


def test_a_description_naming_another_backend_is_refused():
    """A robot description whose <ros2_control> plugin is another of our backends than
    `backend:` names is refused, naming both."""
    config = load_config(overrides={"backend": "canopen"})
    with pytest.raises(ConfigError, match=r"'canopen'.*ct_controllers/MujocoSystem"):
        build_stack(config, bundled_description("mujoco"))


def test_the_backend_is_logged_loudly_at_start(caplog):
    """Bringing the stack up logs the backend at WARNING level, saying whether it is real
    hardware and armed."""
    config = load_config(overrides={"mujoco.mode": "lockstep"})
    stack = build_stack(config, bundled_description())
    with caplog.at_level(logging.WARNING, logger="ct_controllers"):
        stack.bring_up()
    stack.shut_down()
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("ct_controllers/MujocoSystem" in m and "simulation" in m for m in messages)


def test_gains_unstable_at_the_rate_are_warned_of_at_build_time(caplog):
    """The bundled gains at 1 kHz build without a stability warning. At a 100 Hz loop the
    joint impedance's are warned of once, naming the controller and the rate, with a spectral
    radius above 1 and the configuration where it is worst. Computed torque (T·K_d = 0.4 there)
    and the safe hold's damping are not."""
    with caplog.at_level(logging.WARNING, logger="ct_controllers"):
        build_stack(load_config(overrides={"mujoco.mode": "lockstep"}), bundled_description())
    assert not [r for r in caplog.records if "spectral radius" in r.getMessage()]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ct_controllers"):
        config = load_config(overrides={"mujoco.mode": "lockstep", "update_rate": 100.0})
        build_stack(config, bundled_description())
    warnings = [r.getMessage() for r in caplog.records if "spectral radius" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("controller 'joint_impedance': unstable at update_rate 100 Hz")
    figure = re.search(r"spectral radius (\d+\.\d+) at q = \[([^\]]+)\]", warnings[0])
    assert figure is not None
    assert float(figure.group(1)) > 1.0
    assert len(figure.group(2).split(",")) == 9  # one value per joint


@pytest.mark.parametrize(
    ("interfaces", "expected"),
    [
        (["effort"], ("effort",) * 9),
        (["position"], ("position",) * 9),
        (["effort"] * 7 + ["position"] * 2, ("effort",) * 7 + ("position",) * 2),
    ],
)
def test_mujoco_command_interfaces_come_from_the_configuration(interfaces, expected):
    """``mujoco.command_interfaces`` (one for every joint, or one per joint in arm_joints +
    gripper_joints order) puts MuJoCo's joints on the effort or the position interface, by
    name: the backend's interfaces and the loop's are those."""
    config = load_config(overrides={"mujoco.command_interfaces": interfaces})
    stack = build_stack(config, bundled_description())
    try:
        hardware = stack.hardware
        by_name = dict(zip(hardware.joint_names, hardware.command_interfaces, strict=True))
        assert tuple(by_name[n] for n in config.joint_names) == expected
        assert stack.loop._interfaces == stack.hardware.command_interfaces
    finally:
        stack.shut_down()


@pytest.mark.parametrize(
    ("backend", "overrides"),
    [
        ("mujoco", {"mujoco.command_interfaces": ["position"]}),
        ("ros2_control_bridge", {"ros2_control_bridge.command_interface": "position"}),
        ("canopen", {"canopen.mode": "position"}),
    ],
)
def test_an_interface_the_description_does_not_offer_is_refused(backend, overrides):
    """A joint whose <ros2_control> block offers only the effort command interface cannot be
    put on the position interface by any backend: ConfigError at build time, naming the joint,
    the interface asked for and what it offers."""
    description = bundled_description(backend)
    urdf = description.urdf.replace(
        '<joint name="joint3"><command_interface name="effort"/>'
        '<command_interface name="position"/>',
        '<joint name="joint3"><command_interface name="effort"/>',
    )
    assert urdf != description.urdf
    config = load_config(overrides={"backend": backend, **overrides})
    with pytest.raises(ConfigError, match=r"joint3: position \(offers effort\)"):
        build_stack(config, parse_description(urdf))
