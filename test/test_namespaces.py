"""Several arms in one ROS domain (issue 23, items 3 and 4): the namespace and name a user
gives win over the plan's defaults; two nodes in two namespaces each serve only their own goals
and clocks; a second node with a taken name refuses to start. Real `ct-bringup` processes over
loopback DDS, real rclpy clients.

The configuration is this checkout's config/controllers.yaml, given by path: the venv's ament
share may link to another checkout's copy."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
import rclpy
from ct_interfaces.action import MoveJoints
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionClient
from rclpy.expand_topic_name import expand_topic_name
from rclpy.node import Node
from rclpy.validate_full_topic_name import validate_full_topic_name
from rclpy.validate_namespace import validate_namespace
from rclpy.validate_node_name import validate_node_name
from rclpy.validate_topic_name import validate_topic_name
from ros_helpers import ARM, NodeProcess, spin_until, wait_ready
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from ct_controllers.config import load_config
from ct_controllers.launch_plan import launch_plan
from ct_controllers.node_names import (
    absolute_namespace,
    key_matches,
    node_name,
    split_user_names,
    topic_name,
)
from ct_controllers.ros.dds import PROFILE, PROFILE_VARIABLES
from ct_controllers.ros.node_uniqueness import (
    DISCOVERY_WINDOW,
    LOOPBACK_DISCOVERY_WINDOW,
    MOTION_ACTIONS,
    PROBE_TIMEOUT,
    WINDOW_VARIABLE,
    discovery_window,
    standard_actions,
)

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "config" / "controllers.yaml")
BRINGUP = str(Path(sys.executable).parent / "ct-bringup")
# [s] for a node to serve its actions: start-up (imports, model, the discovery window) takes
# 5-10 s on a loaded 2-core machine; generous so a busy CI runner does not fail the test.
START_TIMEOUT = 60.0


@pytest.fixture(scope="module", autouse=True)
def product_discovery_window() -> Iterator[None]:
    """This module tests the start-up check: its nodes wait out the product's discovery window
    (conftest.py shortens it for the nodes of every other module)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(WINDOW_VARIABLE, raising=False)
        yield


def bringup(*arguments: str) -> list[str]:
    return [BRINGUP, "sim", "--config", CONFIG, *arguments]


def print_plan(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        bringup("--print-plan", *arguments), capture_output=True, text=True, timeout=60
    )


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


# --- names as rcl has them --------------------------------------------------------------------
@pytest.mark.parametrize(
    "value", ["arm2", "/arm2", "/", "/a/b_c", "_x", "2arm", "/arm2/", "a//b", "a-b", "~", "{ns}"]
)
def test_namespace_validation_agrees_with_rcl(value: str) -> None:
    """absolute_namespace accepts exactly the namespaces rcl's validator accepts (made
    absolute), and refuses the others with a ValueError that quotes the value."""
    absolute = value if value.startswith("/") else f"/{value}"
    try:
        validate_namespace(absolute)
        rcl_ok = True
    except Exception:
        rcl_ok = False
    if rcl_ok:
        assert absolute_namespace(value) == absolute
    else:
        with pytest.raises(ValueError, match="is not a ROS namespace"):
            absolute_namespace(value)


@pytest.mark.parametrize("value", ["controller_manager", "cm2", "_a", "2cm", "a/b", "a-b", ""])
def test_node_name_validation_agrees_with_rcl(value: str) -> None:
    """node_name accepts exactly the names rcl's validator accepts."""
    try:
        validate_node_name(value)
        rcl_ok = True
    except Exception:
        rcl_ok = False
    if rcl_ok:
        assert node_name(value) == value
    else:
        with pytest.raises(ValueError, match="is not a ROS node name"):
            node_name(value)


@pytest.mark.parametrize("value", ["/clock", "clock", "/arm2/clock", "~/clock", "/2c", "a//b"])
def test_topic_validation_agrees_with_rcl(value: str) -> None:
    """topic_name accepts exactly the topic names rcl accepts and can expand into a valid fully
    qualified name (in a node /arm2/cm)."""
    try:
        validate_topic_name(value)
        validate_full_topic_name(expand_topic_name(value, "cm", "/arm2"))
        rcl_ok = True
    except Exception:
        rcl_ok = False
    if rcl_ok:
        assert topic_name(value) == value
    else:
        with pytest.raises(ValueError, match="is not a ROS topic name"):
            topic_name(value)


PARAMETER_KEYS = ("/**/cm", "/ct/cm", "cm", "/*/cm", "/**", "/a/*/cm", "ct/cm")
APPLIED = """
import json, sys
import rclpy
from rclpy.context import Context
applied = []
for namespace in sys.argv[2:]:
    context = Context()
    args = ["x", "--ros-args", "--params-file", sys.argv[1], "-r", "__ns:=" + namespace]
    rclpy.init(args=args, context=context)
    node = rclpy.create_node(
        "cm", context=context, automatically_declare_parameters_from_overrides=True
    )
    names = sorted(n for n in node._parameters if n.startswith("k"))
    applied.append([node.get_fully_qualified_name(), names])
    node.destroy_node()
    rclpy.shutdown(context=context)
print(json.dumps(applied))
"""


def test_parameter_sections_apply_as_rcl_applies_them(tmp_path: Path) -> None:
    """For nodes in several namespaces, key_matches says a section applies exactly when rcl
    gives the node that section's parameter (real rclpy nodes loading the file)."""
    document = {key: {"ros__parameters": {f"k{i}": i}} for i, key in enumerate(PARAMETER_KEYS)}
    path = tmp_path / "keys.yaml"
    path.write_text(json.dumps(document))  # JSON is YAML
    namespaces = ("/", "/ct", "/arm2", "/a/b", "/a/b/c")
    result = subprocess.run(
        [sys.executable, "-c", APPLIED, str(path), *namespaces],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    applied = json.loads(result.stdout.strip().splitlines()[-1])
    assert [fqn for fqn, _ in applied] == [f"{n.rstrip('/')}/cm" for n in namespaces]
    for fqn, names in applied:
        expected = sorted(f"k{i}" for i, key in enumerate(PARAMETER_KEYS) if key_matches(key, fqn))
        assert names == expected, (fqn, names, expected)
    assert any(names for _, names in applied) and not all(
        len(names) == len(PARAMETER_KEYS) for _, names in applied
    )


def test_user_renaming_rules_are_taken_out_of_the_ros_arguments() -> None:
    """split_user_names finds the first __ns/__node/__name and /clock rule for the node (also
    node-targeted), inside --ros-args sections only, leaves every other argument in order, and
    drops a --ros-args section left empty."""
    given = split_user_names(
        [
            "--record",
            "-r",  # outside --ros-args: not a remap
            "--ros-args",
            "-p",
            "x:=-r",
            "-r",
            "controller_manager:__ns:=arm2",
            "--remap",
            "__name:=cm2",
            "-r",
            "__ns:=/later",
            "-r",
            "bridge:__ns:=/b",
            "-r",
            "/clock:=/arm2/clock",
            "--",
            "--ros-args",
            "-r",
            "__node:=third",
        ],
        "controller_manager",
    )
    assert (given.name, given.namespace, given.clock_topic) == ("cm2", "/arm2", "/arm2/clock")
    assert given.rest == (
        "--record",
        "-r",
        "--ros-args",
        "-p",
        "x:=-r",
        "-r",
        "bridge:__ns:=/b",
        "--",
    )
    with pytest.raises(ValueError, match="not a ROS namespace"):
        split_user_names(["--ros-args", "-r", "__ns:=/9"], "controller_manager")


# --- the plan: what ct-bringup and the launch files start ------------------------------------
def test_the_users_namespace_wins_in_the_plan_and_print_plan() -> None:
    """`ct-bringup --print-plan` with `--ros-args -r __ns:=/arm2 -r __node:=cm` (or
    --namespace) prints the fully qualified name the node gets; the command line carries only
    that namespace and name (rcl takes the first rule: a default left before it would win);
    the launch plan (namespace:=, what the launch files pass) says the same."""
    result = print_plan("--ros-args", "-r", "__ns:=/arm2", "-r", "__node:=cm", "-p", "a:=1")
    assert result.returncode == 2 and "no parameters for /arm2/cm" in result.stderr
    assert "/**/cm" in result.stderr  # the key that would serve it
    for arguments in (["--namespace", "arm2"], ["--ros-args", "-r", "__ns:=/arm2"]):
        result = print_plan(*arguments, "--ros-args", "-p", "update_rate:=500")
        assert result.returncode == 0, result.stderr
        printed = json.loads(result.stdout)
        assert printed["node"] == "/arm2/controller_manager"
        ros_arguments = printed["ros_arguments"]
        assert [a for a in ros_arguments if a.startswith("__ns:=")] == ["__ns:=/arm2"]
        assert "/ct" not in " ".join(ros_arguments)
        assert ros_arguments[-2:] == ["-p", "update_rate:=500"]
    plan = launch_plan("sim", config=CONFIG, namespace="arm2", clock_topic="clock")
    assert plan.node == "/arm2/controller_manager" and plan.namespace == "arm2"
    assert plan.clock == "/arm2/clock" and plan.remappings() == [("/clock", "clock")]
    assert plan.ros_arguments()[:5] == [
        "--ros-args",
        "-r",
        "__node:=controller_manager",
        "-r",
        "__ns:=/arm2",
    ]
    assert plan.ros_arguments()[-2:] == ["-r", "/clock:=clock"]
    default = launch_plan("sim", config=CONFIG)
    assert default.node == "/ct/controller_manager" and default.remappings() == []
    conflict = print_plan("--namespace", "a", "--ros-args", "-r", "__ns:=/b")
    assert conflict.returncode == 2 and "given twice" in conflict.stderr
    assert print_plan("--namespace", "a b").returncode == 2


def test_a_parameter_file_for_another_node_is_refused(tmp_path: Path) -> None:
    """A configuration keyed /ct/controller_manager, started in /arm2, would leave the node on
    its defaults without a word: the plan refuses it naming the node and the keys."""
    copy = tmp_path / "old.yaml"
    copy.write_text(
        Path(CONFIG).read_text().replace("/**/controller_manager:", "/ct/controller_manager:", 1)
    )
    assert launch_plan("sim", config=str(copy)).node == "/ct/controller_manager"
    with pytest.raises(
        ValueError, match=r"no parameters for /arm2/controller_manager .*/ct/controller_manager"
    ):
        launch_plan("sim", config=str(copy), namespace="/arm2")


# --- two arms, one domain ----------------------------------------------------------------------
class Watcher:
    """A client node watching both arms: joint states, both clocks, diagnostics, and an action
    client for each arm's MoveJoints."""

    def __init__(self) -> None:
        self.node = Node("ct_namespace_watcher")
        self.states: dict[str, list[JointState]] = {"arm1": [], "arm2": []}
        self.clocks: dict[str, list[Clock]] = {"/clock": [], "/arm2/clock": []}
        self.diagnostics: list[DiagnosticArray] = []
        self.actions = {
            arm: ActionClient(self.node, MoveJoints, f"/{arm}/move_joints") for arm in self.states
        }
        for arm, messages in self.states.items():
            self.node.create_subscription(JointState, f"/{arm}/joint_states", messages.append, 10)
        for topic, ticks in self.clocks.items():
            self.node.create_subscription(Clock, topic, ticks.append, 100)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)

    def spin_until(self, condition, timeout: float) -> bool:
        return spin_until(self.node, condition, timeout)

    def arm(self, arm: str) -> np.ndarray:
        message = self.states[arm][-1]
        index = {n: i for i, n in enumerate(message.name)}
        return np.array([message.position[index[n]] for n in ARM])


@pytest.fixture(scope="module")
def two_arms() -> Iterator[tuple[Watcher, dict[str, NodeProcess]]]:
    """arm1 (namespace arm1, /clock) and arm2 (namespace /arm2 by remap, its clock on
    /arm2/clock), started one after the other, both serving."""
    processes = {"arm1": NodeProcess(bringup("--namespace", "arm1"), start_new_session=True)}
    rclpy.init()
    watcher = Watcher()
    try:
        assert wait_ready(watcher.actions["arm1"].server_is_ready, START_TIMEOUT), "".join(
            processes["arm1"].lines
        )
        processes["arm2"] = NodeProcess(
            bringup("--clock-topic", "/arm2/clock", "--ros-args", "-r", "__ns:=/arm2"),
            start_new_session=True,
        )
        assert wait_ready(watcher.actions["arm2"].server_is_ready, START_TIMEOUT), "".join(
            processes["arm2"].lines
        )
        assert watcher.spin_until(lambda: all(watcher.states.values()), 20.0), "no joint states"
        yield watcher, processes
    finally:
        for process in processes.values():
            stop(process)
        watcher.node.destroy_node()
        rclpy.shutdown()


def test_two_arms_in_two_namespaces_each_serve_only_their_own_goals(
    two_arms: tuple[Watcher, dict[str, NodeProcess]],
) -> None:
    """A MoveJoints sent to /arm1/move_joints moves arm1 to the goal and leaves arm2's
    /arm2/joint_states where they were (within 1 mrad, its resting noise is far below); the
    graph has one node in each namespace and none in the default /ct; both processes run."""
    watcher, processes = two_arms
    names = watcher.node.get_node_names_and_namespaces()
    assert names.count(("controller_manager", "/arm1")) == 1, names
    assert names.count(("controller_manager", "/arm2")) == 1, names
    assert ("controller_manager", "/ct") not in names, names
    arm2_before = watcher.arm("arm2")
    target = arm2_before.copy()
    target[0] += 0.4
    target[3] -= 0.2
    goal = MoveJoints.Goal(
        joint_names=["joint1", "joint4"],
        positions=[float(target[0]), float(target[3])],
        duration=1.0,
    )
    sent = watcher.actions["arm1"].send_goal_async(goal)
    assert watcher.spin_until(sent.done, 10.0) and sent.result().accepted
    arm2_during: list[np.ndarray] = []
    arm2_stamp = watcher.states["arm2"][-1].header.stamp
    result = sent.result().get_result_async()

    def ended() -> bool:
        arm2_during.append(watcher.arm("arm2"))  # arm2 as seen at every turn of the goal
        return result.done()

    assert watcher.spin_until(ended, 30.0)
    assert result.result().result.error_code == MoveJoints.Result.SUCCESS, (
        result.result().result.message
    )
    arm1 = watcher.arm("arm1")
    assert abs(arm1[0] - target[0]) < 0.01 and abs(arm1[3] - target[3]) < 0.01, arm1
    # arm2 kept publishing all along (its stamps advanced over the 1 s goal): its unchanged
    # state is measured, not a stale last message.
    stamp = watcher.states["arm2"][-1].header.stamp
    elapsed = (stamp.sec - arm2_stamp.sec) + (stamp.nanosec - arm2_stamp.nanosec) * 1e-9  # [s]
    assert elapsed > 0.5, f"arm2's joint states stalled ({elapsed:.3f} s of stamps)"
    drift = max(float(np.max(np.abs(q - arm2_before))) for q in arm2_during)
    assert drift < 1e-3, f"arm2 moved by {drift} rad for arm1's goal"
    assert all(p.poll() is None for p in processes.values())


def test_each_simulation_has_one_clock_and_each_arm_its_own_diagnostics(
    two_arms: tuple[Watcher, dict[str, NodeProcess]],
) -> None:
    """/clock has one publisher (arm1) and its stamps never go back; arm2's clock is on
    /arm2/clock alone; /diagnostics, global, carries one control-loop status per arm, named
    after its node."""
    watcher, _ = two_arms
    info = watcher.node.get_publishers_info_by_topic
    assert [(i.node_namespace, i.node_name) for i in info("/clock")] == [
        ("/arm1", "controller_manager")
    ]
    assert [(i.node_namespace, i.node_name) for i in info("/arm2/clock")] == [
        ("/arm2", "controller_manager")
    ]
    for ticks in watcher.clocks.values():
        ticks.clear()
    assert watcher.spin_until(lambda: all(len(t) >= 50 for t in watcher.clocks.values()), 20.0)
    for topic, ticks in watcher.clocks.items():
        stamps = [t.clock.sec * 10**9 + t.clock.nanosec for t in ticks]
        assert all(b > a for a, b in itertools.pairwise(stamps)), f"{topic} went back"

    def statuses() -> set[str]:
        return {s.name for m in watcher.diagnostics for s in m.status if "control loop" in s.name}

    expected = {"arm1/controller_manager: control loop", "arm2/controller_manager: control loop"}
    assert watcher.spin_until(lambda: expected <= statuses(), 10.0), statuses()


def test_arms_outside_the_default_namespace_leave_slash_joint_states_alone(
    two_arms: tuple[Watcher, dict[str, NodeProcess]],
) -> None:
    """joint_states_topic auto: /joint_states is the default namespace's (/ct) alone, so two
    arms in namespaces of their own never both publish there; each publishes
    <namespace>/joint_states (where joint_state_broadcaster under a controller manager in that
    namespace would)."""
    watcher, _ = two_arms
    info = watcher.node.get_publishers_info_by_topic
    assert info("/joint_states") == []
    for arm in ("arm1", "arm2"):
        assert [(i.node_namespace, i.node_name) for i in info(f"/{arm}/joint_states")] == [
            (f"/{arm}", "controller_manager")
        ]


def test_a_second_simulation_on_a_taken_clock_is_refused(
    two_arms: tuple[Watcher, dict[str, NodeProcess]],
) -> None:
    """A third simulated arm in its own namespace but on /clock (arm1's) exits 2 with one
    line naming /clock and its publisher (or "another node" when discovery has given the
    publisher's endpoint but not yet its node's name: seen under load); the two arms keep
    running."""
    _, processes = two_arms
    result = subprocess.run(
        bringup("--namespace", "arm3"), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stdout + result.stderr
    refusal = [line for line in result.stderr.splitlines() if line.startswith("ct_control_node: ")]
    assert len(refusal) == 1, result.stderr
    assert any(
        f"/clock is already published by {who} (another simulation)" in refusal[0]
        for who in ("/arm1/controller_manager", "another node")
    ), refusal[0]
    assert "Traceback" not in result.stderr
    assert all(p.poll() is None for p in processes.values())


def test_a_second_node_with_the_same_name_exits_2_and_the_first_keeps_serving(
    two_arms: tuple[Watcher, dict[str, NodeProcess]],
) -> None:
    """Started while /arm1/controller_manager runs, a node with the same name (and its own
    clock topic, so that only the name is taken) exits with code 2 and one line on stderr naming
    /arm1/controller_manager, within the discovery window plus start-up; the first keeps
    running and serving: a goal sent to it afterwards succeeds."""
    watcher, processes = two_arms
    started = time.monotonic()
    result = subprocess.run(
        bringup("--namespace", "arm1", "--clock-topic", "/arm1/clock"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - started
    assert result.returncode == 2, result.stdout + result.stderr
    refusal = [line for line in result.stderr.splitlines() if line.startswith("ct_control_node: ")]
    assert len(refusal) == 1, result.stderr
    assert "another node named /arm1/controller_manager is already running" in refusal[0]
    assert "Traceback" not in result.stderr
    assert took < START_TIMEOUT + discovery_window() + PROBE_TIMEOUT
    assert processes["arm1"].poll() is None
    names = watcher.node.get_node_names_and_namespaces()
    goal = MoveJoints.Goal(
        joint_names=["joint1"], positions=[float(watcher.arm("arm1")[0] - 0.3)], duration=0.5
    )
    sent = watcher.actions["arm1"].send_goal_async(goal)
    assert watcher.spin_until(sent.done, 10.0) and sent.result().accepted
    result_future = sent.result().get_result_async()
    assert watcher.spin_until(result_future.done, 30.0)
    assert result_future.result().result.error_code == MoveJoints.Result.SUCCESS
    assert names.count(("controller_manager", "/arm1")) == 1, names


def test_the_discovery_window_follows_the_dds_profile_in_use() -> None:
    """The short window only where Fast DDS reads the bundled profile (both variables name it,
    as ct_controllers.ros.dds sets them, and that profile announces every 0.5 s); with no
    profile, a profile of the user's, or the two variables disagreeing, the window that covers
    Fast DDS's default 3 s announcement period."""
    ours = dict.fromkeys(PROFILE_VARIABLES, str(PROFILE))
    assert discovery_window(ours) == LOOPBACK_DISCOVERY_WINDOW
    assert discovery_window({}) == DISCOVERY_WINDOW
    # CT_DISCOVERY_WINDOW, where the starter sets it, wins (the test session's 0: one look).
    assert discovery_window({**ours, WINDOW_VARIABLE: "0"}) == 0.0
    assert discovery_window({WINDOW_VARIABLE: " 2.5 "}) == 2.5
    for wrong in ("-1", "nan", "inf", "soon"):
        with pytest.raises(ValueError, match=WINDOW_VARIABLE):
            discovery_window({**ours, WINDOW_VARIABLE: wrong})
    assert discovery_window(dict.fromkeys(PROFILE_VARIABLES, "/home/me/fastdds.xml")) == (
        DISCOVERY_WINDOW
    )
    assert discovery_window({**ours, PROFILE_VARIABLES[1]: "/home/me/fastdds.xml"}) == (
        DISCOVERY_WINDOW
    )
    # The bundled profile's period is what the short window is built on.
    period = ElementTree.parse(PROFILE).find(".//{*}leaseAnnouncement")
    assert period is not None
    seconds = int(period.findtext("{*}sec", "0")) + int(period.findtext("{*}nanosec", "0")) * 1e-9
    assert seconds + 0.5 < LOOPBACK_DISCOVERY_WINDOW < DISCOVERY_WINDOW


def test_the_checked_actions_are_the_ones_the_node_serves(
    two_arms: tuple[Watcher, dict[str, NodeProcess]],
) -> None:
    """The uniqueness check looks for the servers of exactly the actions the node serves in its
    namespace; the node's private ones (``~/identify_payload``) are under its own name, which
    the node-name check covers."""
    watcher, _ = two_arms
    from rclpy.action import get_action_server_names_and_types_by_node

    served = {
        name
        for name, _ in get_action_server_names_and_types_by_node(
            watcher.node, "controller_manager", "/arm2"
        )
    }
    standard = standard_actions(load_config(CONFIG).interface_controllers)
    assert {n for n, _ in standard} == {
        "joint_trajectory_controller/follow_joint_trajectory",
        "gripper_controller/gripper_cmd",
    }
    private = {"/arm2/controller_manager/identify_payload"}
    assert served == {f"/arm2/{name}" for name, _ in (*MOTION_ACTIONS, *standard)} | private


def test_a_node_of_another_name_serving_the_same_actions_is_refused(
    two_arms: tuple[Watcher, dict[str, NodeProcess]],
    tmp_path: Path,
) -> None:
    """A node renamed (-r __node:=cm2) but in arm1's namespace would serve /arm1/move_joints a
    second time: it exits 2 naming that action and the node serving it; arm1 keeps running."""
    _, processes = two_arms
    config = tmp_path / "any_name.yaml"  # keyed for every node, so that cm2 gets the parameters
    config.write_text(Path(CONFIG).read_text().replace("/**/controller_manager:", "/**:", 1))
    command = [BRINGUP, "sim", "--config", str(config), "--namespace", "arm1"]
    command += ["--clock-topic", "/arm1/clock", "--ros-args", "-r", "__node:=cm2"]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    refusal = [line for line in result.stderr.splitlines() if line.startswith("ct_control_node: ")]
    assert len(refusal) == 1, result.stderr
    expected = (
        "/arm1/move_joints is already served by /arm1/controller_manager: refusing to start a "
        "second server of it as /arm1/cm2"
    )
    assert expected in refusal[0], refusal
    assert processes["arm1"].poll() is None
