"""What the launch files start (ct_controllers.launch_plan), run as real processes over loopback
DDS: the DDS environment with and without ``dds_network``, the node through the venv's ament
prefix, a refused hardware launch, the ros2_control bridge under the launch command line, and
``switch_controller`` with strictness 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from controller_manager_msgs.srv import ListControllers, SwitchController
from rcl_interfaces.srv import GetParameters, ListParameters
from ros_helpers import Client, ros_client

from ct_controllers.config import load_config
from ct_controllers.launch_plan import exit_message, launch_plan
from ct_controllers.ros.dds import PROFILE, PROFILE_VARIABLES, dds_environment, loopback_environment
from ct_controllers.sim.gains import SLOW_LOOP_GAINS
from ct_controllers.sim.ros2_control_plant import PlantProcess

VENV = Path(sys.executable).parent.parent
BIN = Path(sys.executable).parent
DDS_VARIABLES = ("CT_DDS_NETWORK", "RMW_IMPLEMENTATION", "ROS_AUTOMATIC_DISCOVERY_RANGE")
DDS_VARIABLES += PROFILE_VARIABLES


def venv_environment(**changes: str | None) -> dict[str, str]:
    """This session's environment with the venv as the ament prefix (as a user's shell after
    `export AMENT_PREFIX_PATH=$PWD/.venv`), plus ``changes`` (None = unset)."""
    env = {**os.environ, "AMENT_PREFIX_PATH": str(VENV)}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "w") as output:
        return subprocess.Popen(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


# --- item 5: one function decides the DDS environment ----------------------------------------
def test_dds_environment_pins_loopback_or_lifts_the_pinning() -> None:
    """dds_environment(False) is the four loopback variables and CT_DDS_NETWORK=0;
    dds_environment(True) is CT_DDS_NETWORK=1 and unsets a loopback profile inherited from the
    caller, while a profile of the user's own stays; the launch plan carries exactly it."""
    assert dds_environment(False) == {**loopback_environment(), "CT_DDS_NETWORK": "0"}
    pinned = {**os.environ, **loopback_environment()}
    lifted = {"CT_DDS_NETWORK": "1", PROFILE_VARIABLES[0]: None, PROFILE_VARIABLES[1]: None}
    assert dds_environment(True, pinned) == lifted
    own = {PROFILE_VARIABLES[0]: "/etc/robot/fastdds.xml", PROFILE_VARIABLES[1]: ""}
    assert dds_environment(True, own) == {"CT_DDS_NETWORK": "1"}
    for flag, expected in (("1", lifted), ("0", dds_environment(False))):
        assert launch_plan("sim", dds_network=flag, environ=pinned).environment == expected
    assert launch_plan("hardware", environ={**pinned, "CT_DDS_NETWORK": "1"}).environment == lifted


ENVIRONMENT_AFTER_IMPORT = """
import json, os, sys
import {module}
print(json.dumps({{name: os.environ.get(name) for name in {names!r}}}))
"""


def test_network_lifts_the_pinning_in_bringup_the_node_and_the_bridge() -> None:
    """With CT_DDS_NETWORK=1, in an environment pinned to loopback as the Makefile pins it,
    `ct-bringup --print-plan` and the node and bridge modules (which set DDS up when imported,
    before rclpy starts) leave no loopback profile; with CT_DDS_NETWORK=0 all three pin it.
    Nothing here creates a DDS participant."""
    for network in ("1", "0"):
        env = venv_environment(**loopback_environment(), CT_DDS_NETWORK=network)
        result = subprocess.run(
            [str(BIN / "ct-bringup"), "sim", "--print-plan"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["environment"] == dds_environment(network == "1", env)
        for module in (
            "ct_controllers.ros.control_node",
            "ct_controllers.hardware.ros2_control_bridge",
        ):
            code = ENVIRONMENT_AFTER_IMPORT.format(module=module, names=DDS_VARIABLES)
            result = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
            )
            assert result.returncode == 0, result.stderr
            seen = json.loads(result.stdout.strip().splitlines()[-1])
            if network == "1":
                assert seen[PROFILE_VARIABLES[0]] is None and seen[PROFILE_VARIABLES[1]] is None
            else:
                assert seen == {**loopback_environment(), "CT_DDS_NETWORK": "0"}, module


LOOPBACK_PARTICIPANT = """
import json, os, sys, time
from ct_controllers.ros.dds import PROFILE, ensure_loopback_dds
ensure_loopback_dds()
if os.environ.get("FASTRTPS_DEFAULT_PROFILES_FILE") != str(PROFILE):
    sys.exit(3)  # not pinned: start no participant at all
import rclpy
rclpy.init()
node = rclpy.create_node("ct_dds_pin_check")
node.create_publisher(__import__("std_msgs.msg").msg.String, "ct_dds_pin_check", 10)
time.sleep(0.5)
inodes = set()
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if target.startswith("socket:["):
        inodes.add(target[8:-1])
addresses = []
for table in ("/proc/net/udp", "/proc/net/udp6"):
    for line in open(table).readlines()[1:]:
        fields = line.split()
        if fields[9] in inodes:
            addresses.append(fields[1])
node.destroy_node()
rclpy.shutdown()
print(json.dumps(addresses))
"""


def test_the_loopback_environment_binds_every_socket_to_127_0_0_1() -> None:
    """From an environment with no DDS variables at all (a fresh shell), the function's
    loopback environment alone makes an rclpy participant bind every UDP socket to 127.0.0.1
    (hex 0100007F). The process checks that it is pinned before it starts DDS."""
    env = venv_environment(**dict.fromkeys(DDS_VARIABLES))
    result = subprocess.run(
        [sys.executable, "-c", LOOPBACK_PARTICIPANT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    addresses = json.loads(result.stdout.strip().splitlines()[-1])
    assert addresses, "no UDP socket: is DDS running?"
    assert all(a.split(":")[0] == "0100007F" for a in addresses), addresses


# --- items 1 and 8: the node as `ros2 run` / launch find it in the venv -----------------------
@pytest.fixture
def venv_node(tmp_path: Path) -> Iterator[tuple[Client, Path]]:
    """The sim node started with the launch plan's command line, its executable found through
    the venv's ament index (lib/ct_controllers/ct_control_node), and a client."""
    env = venv_environment()
    plan = launch_plan("sim", environ=env)
    command = plan.command(plan_executable(env))
    log = tmp_path / "node.log"
    process = start(command, plan.child_environment(env), log)
    try:
        with ros_client() as client:
            yield client, log
    finally:
        stop(process)


def plan_executable(env: dict[str, str]) -> str:
    """launch_plan(...).executable_path() as computed with ``env``'s AMENT_PREFIX_PATH."""
    code = (
        "import json; from ct_controllers.launch_plan import launch_plan; "
        "print(json.dumps(launch_plan('sim').executable_path()))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    path = json.loads(result.stdout.strip().splitlines()[-1])
    assert path == str(VENV / "lib" / "ct_controllers" / "ct_control_node")
    return path


def test_switch_with_strictness_zero_is_best_effort_with_a_warning(
    venv_node: tuple[Client, Path],
) -> None:
    """As in ros2_control, a switch_controller request with strictness 0 (the field left unset)
    is served BEST_EFFORT: it succeeds, skipping an unknown name instead of failing, says so in
    its message, and the node logs a warning; strictness 5 is still refused."""
    client, log = venv_node
    name = "/ct/controller_manager/switch_controller"
    request = SwitchController.Request(
        activate_controllers=["computed_torque", "no_such"],
        deactivate_controllers=["joint_impedance"],
    )
    assert request.strictness == 0
    response = client.call(SwitchController, name, request)
    assert response.ok, response.message
    assert "BEST_EFFORT" in response.message and "no_such" in response.message
    listed = client.call(
        ListControllers, "/ct/controller_manager/list_controllers", ListControllers.Request()
    )
    assert {c.name: c.state for c in listed.controller}["computed_torque"] == "active"
    assert client.spin_until(lambda: "strictness 0" in log.read_text(), 5.0)
    warning = [line for line in log.read_text().splitlines() if "strictness 0" in line]
    assert warning and "WARN" in warning[0], warning
    refused = client.call(SwitchController, name, SwitchController.Request(strictness=5))
    assert not refused.ok and "got 5" in refused.message
    back = SwitchController.Request(
        activate_controllers=["joint_impedance"],
        deactivate_controllers=["computed_torque"],
        strictness=SwitchController.Request.STRICT,
    )
    assert client.call(SwitchController, name, back).ok


# --- item 7: a refused hardware launch -------------------------------------------------------
@pytest.mark.parametrize("backend", ["ros2_control_bridge", "canopen"])
def test_an_unarmed_hardware_node_exits_2_with_one_line_naming_the_parameter(
    backend: str, tmp_path: Path
) -> None:
    """The hardware launch's node, unarmed, exits with code 2 and no traceback; the line the
    launch prints as it shuts down (exit_message) names hardware.armed. The CANopen backend
    refuses before it touches the bus: no SDO is sent, no SDO error is reported."""
    env = venv_environment()
    plan = launch_plan("hardware", backend=backend, environ=env)
    result = subprocess.run(
        plan.command(str(VENV / "lib" / "ct_controllers" / "ct_control_node")),
        env=plan.child_environment(env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    message = exit_message(result.returncode, result.stderr)
    assert "\n" not in message and message.startswith("ct_control_node exited with code 2: ")
    assert "hardware.armed" in message, message
    if backend == "canopen":
        assert "refusing to configure" in message
        assert "SDO" not in result.stderr + result.stdout
    assert exit_message(0) == "ct_control_node ended (exit code 0)"


# --- item 6: the bridge's own context under the launch command line ---------------------------
def test_the_bridge_node_keeps_its_name_and_parameters_under_the_launch_command_line(
    tmp_path: Path,
) -> None:
    """The hardware plan's command line (-r __node:=controller_manager -r __ns:=/ct
    --params-file ...) with backend ros2_control_bridge, armed, against a plant process: the
    graph has exactly one /ct/controller_manager and the bridge's own /ct_ros2_control_bridge,
    which has none of the control node's parameters; the node reports no duplicate name."""
    topics = f"/ct_plan_{os.getpid()}"
    config = load_config()
    overrides = tmp_path / "bridge.yaml"
    parameters = {
        "hardware.armed": True,
        "update_rate": 100,
        "ros2_control_bridge.joint_states_topic": f"{topics}/joint_states",
        "ros2_control_bridge.command_topic": f"{topics}/commands",
        **SLOW_LOOP_GAINS,
    }
    overrides.write_text(
        yaml.safe_dump({"/ct/controller_manager": {"ros__parameters": parameters}})
    )
    plant = PlantProcess(f"{topics}/joint_states", f"{topics}/commands", list(config.joint_names))
    env = venv_environment()
    plan = launch_plan("hardware", environ=env)
    log = tmp_path / "node.log"
    command = plan.command(str(VENV / "lib" / "ct_controllers" / "ct_control_node"))
    process = start([*command, "--params-file", str(overrides)], plan.child_environment(env), log)
    try:
        with ros_client() as client:

            def names() -> list[tuple[str, str]]:
                return client.node.get_node_names_and_namespaces()

            bridge = ("ct_ros2_control_bridge", "/")
            assert client.spin_until(lambda: bridge in names(), 10.0), names()
            assert names().count(("controller_manager", "/ct")) == 1, names()
            own = client.call(
                ListParameters, "/ct_ros2_control_bridge/list_parameters", ListParameters.Request()
            ).result.names
            assert "backend" not in own and "update_rate" not in own, own
            backend = client.call(
                GetParameters,
                "/ct/controller_manager/get_parameters",
                GetParameters.Request(names=["backend", "hardware.armed"]),
            ).values
            assert backend[0].string_value == "ros2_control_bridge" and backend[1].bool_value
        time.sleep(0.2)
        assert process.poll() is None, log.read_text()[-2000:]
        assert "already registered" not in log.read_text()
        assert PROFILE.name in plan.child_environment(env)[PROFILE_VARIABLES[0]]
    finally:
        stop(process)
        plant.stop()


# --- issue 23: the launch files' arguments reach the plan ------------------------------------
def test_every_launch_argument_reaches_the_plan_and_its_default_is_the_plans() -> None:
    """launch/common.py (read from this checkout; `launch` is not installed here, so its
    source is inspected, not run): each declared launch argument is passed, by its own name,
    to launch_plan, every keyword of launch_plan but ``environ`` and ``name`` (the node name,
    which a launch user gives launch_ros's way; ct-bringup takes ``-r __node:=``) is a launch
    argument, and the
    declared defaults give the same plan as no arguments at all (namespace ct, /clock)."""
    import ast
    import inspect

    source = ast.parse(
        (Path(__file__).resolve().parent.parent / "launch" / "common.py").read_text()
    )
    declared: dict[str, str] = {}
    forwarded: dict[str, str] = {}
    for call in (n for n in ast.walk(source) if isinstance(n, ast.Call)):
        name = getattr(call.func, "id", getattr(call.func, "attr", ""))
        if name == "DeclareLaunchArgument":
            default = next((k.value for k in call.keywords if k.arg == "default_value"), None)
            declared[ast.literal_eval(call.args[0])] = (
                ast.unparse(default) if default is not None else ""
            )
        elif name == "launch_plan":
            for keyword in call.keywords:
                value = keyword.value
                if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "argument":
                    forwarded[str(keyword.arg)] = ast.literal_eval(value.args[0])
    assert forwarded == {name: name for name in declared}, (declared, forwarded)
    keywords = set(inspect.signature(launch_plan).parameters) - {"target", "environ", "name"}
    assert keywords == set(declared)
    config = str(Path(__file__).resolve().parent.parent / "config" / "controllers.yaml")
    literal = {
        name: ast.literal_eval(value)
        for name, value in declared.items()
        if name in ("namespace", "clock_topic", "robot_description", "dds_network")
    }
    assert launch_plan("sim", config=config, **literal) == launch_plan("sim", config=config)
