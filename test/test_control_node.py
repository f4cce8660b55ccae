"""The control node over real rclpy and real DDS (loopback): a separate node process, as users
run it, driven by an rclpy action client in the test process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest
import rclpy
from ct_interfaces.action import MoveJoints
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import GetParameters, SetParameters
from rclpy.action import ActionClient
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from ct_controllers.config import load_config

CONFIG = load_config()
ARM = list(CONFIG.arm_joints)
HOME = np.array(CONFIG.home_positions[: len(ARM)])


class Client:
    """A test-side node with an action client and subscriptions, spun by hand."""

    def __init__(self) -> None:
        self.node = Node("ct_test_client")
        self.move_joints = ActionClient(self.node, MoveJoints, "/ct/move_joints")
        self.joint_states: list[JointState] = []
        self.clock: list[Clock] = []
        self.node.create_subscription(JointState, "/ct/joint_states", self.joint_states.append, 10)
        self.node.create_subscription(Clock, "/clock", self.clock.append, 10)

    def spin_until(self, condition, timeout: float) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.02)
            if condition():
                return True
        return False

    def send(self, goal: MoveJoints.Goal, feedback: list | None = None):  # type: ignore[no-untyped-def]
        future = self.move_joints.send_goal_async(
            goal, feedback_callback=(feedback.append if feedback is not None else None)
        )
        assert self.spin_until(future.done, 5.0), "goal not answered"
        return future.result()

    def result(self, handle, timeout: float = 15.0):  # type: ignore[no-untyped-def]
        future = handle.get_result_async()
        assert self.spin_until(future.done, timeout), "no result"
        return future.result().result

    def set_parameters(self, *parameters: Parameter) -> list:  # type: ignore[type-arg]
        client = self.node.create_client(SetParameters, "/ct/controller_manager/set_parameters")
        assert client.wait_for_service(timeout_sec=5.0)
        request = SetParameters.Request(parameters=[p.to_parameter_msg() for p in parameters])
        future = client.call_async(request)
        assert self.spin_until(future.done, 5.0)
        return list(future.result().results)

    def get_parameter(self, name: str) -> ParameterMsg:
        client = self.node.create_client(GetParameters, "/ct/controller_manager/get_parameters")
        assert client.wait_for_service(timeout_sec=5.0)
        future = client.call_async(GetParameters.Request(names=[name]))
        assert self.spin_until(future.done, 5.0)
        return future.result().values[0]

    def latest_arm_positions(self) -> np.ndarray:
        message = self.joint_states[-1]
        index = {n: i for i, n in enumerate(message.name)}
        return np.array([message.position[index[n]] for n in ARM])


@pytest.fixture(scope="module")
def node_process() -> Iterator[subprocess.Popen]:
    """The real node, started as `ct-bringup sim` would start it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ct_controllers.ros.control_node", "--target", "sim"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    yield process
    if process.poll() is None:
        process.kill()
        process.wait(5)


@pytest.fixture(scope="module")
def client(node_process: subprocess.Popen) -> Iterator[Client]:
    rclpy.init()
    client = Client()
    assert client.move_joints.wait_for_server(timeout_sec=20.0), "action server never appeared"
    assert client.spin_until(lambda: len(client.joint_states) > 0, 10.0), "no joint states"
    yield client
    client.node.destroy_node()
    rclpy.shutdown()


def goal(names: list[str], positions: list[float], duration: float = 1.0) -> MoveJoints.Goal:
    return MoveJoints.Goal(joint_names=names, positions=positions, duration=duration)


def test_joint_states_are_stamped_with_sim_time_and_clock_is_published(client: Client) -> None:
    """/ct/joint_states carries every joint by name with a sim-time stamp that advances, and
    /clock is published with the same time base."""
    count = len(client.joint_states)
    assert client.spin_until(lambda: len(client.joint_states) > count + 10, 5.0)
    first, last = client.joint_states[count], client.joint_states[-1]
    assert set(last.name) == set(CONFIG.joint_names)
    t0 = first.header.stamp.sec + first.header.stamp.nanosec * 1e-9
    t1 = last.header.stamp.sec + last.header.stamp.nanosec * 1e-9
    assert t1 > t0
    assert client.spin_until(lambda: len(client.clock) > 0, 5.0)
    clock = client.clock[-1].clock
    assert abs(clock.sec + clock.nanosec * 1e-9 - t1) < 1.0


def test_move_joints_reaches_a_goal_given_in_any_joint_order(client: Client) -> None:
    """A reachable goal, joints listed out of order, succeeds with a small final error, feedback
    arrives at >= 10 Hz, and the published joint states show the arm at the goal."""
    target = {"joint4": -1.3, "joint1": 0.5, "joint2": 0.6}
    feedback: list = []
    handle = client.send(goal(list(target), list(target.values()), 1.0), feedback)
    assert handle.accepted
    start = time.monotonic()
    result = client.result(handle)
    elapsed = time.monotonic() - start
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message
    assert np.all(np.abs(result.final_error) <= 0.01)
    assert len(feedback) >= 10 * elapsed * 0.8 - 1
    client.spin_until(lambda: False, 0.3)
    positions = client.latest_arm_positions()
    for name, value in target.items():
        assert abs(positions[ARM.index(name)] - value) < 0.01


@pytest.mark.parametrize(
    ("names", "positions", "duration", "expected"),
    [
        (["joint1", "jointX"], [0.1, 0.2], 1.0, "jointX"),
        (["joint1", "joint1"], [0.1, 0.2], 1.0, "twice"),
        (["joint1", "joint2"], [0.1], 1.0, "2 joint names but 1 positions"),
        (["joint1"], [float("nan")], 1.0, "non-finite"),
        (["joint1"], [0.1], -1.0, "duration"),
        (["joint1"], [5.0], 1.0, "outside the joint limits"),
        (["left_finger_joint"], [0.01], 1.0, "left_finger_joint"),
    ],
)
def test_invalid_move_joints_goal_is_aborted_with_a_reason_and_moves_nothing(
    client: Client, names: list[str], positions: list[float], duration: float, expected: str
) -> None:
    """A bad goal is accepted then aborted at once with INVALID_GOAL and a message naming the
    problem; the arm does not move."""
    assert client.spin_until(
        lambda: np.max(np.abs(client.joint_states[-1].velocity)) < 1e-3, 10.0
    ), "the arm did not come to rest"
    before = client.latest_arm_positions()
    handle = client.send(goal(names, positions, duration))
    result = client.result(handle, timeout=5.0)
    assert result.error_code == MoveJoints.Result.INVALID_GOAL
    assert expected in result.message
    client.spin_until(lambda: False, 0.3)
    assert np.max(np.abs(client.latest_arm_positions() - before)) < 1e-3


def test_a_new_goal_preempts_the_running_one(client: Client) -> None:
    """While a long motion runs, a second goal preempts it: the first ends PREEMPTED, the second
    succeeds from the measured state."""
    first = client.send(goal(ARM, (HOME + 0.3).tolist(), 4.0))
    client.spin_until(lambda: False, 0.5)
    second = client.send(goal(ARM, HOME.tolist(), 1.0))
    first_result = client.result(first)
    assert first_result.error_code == MoveJoints.Result.PREEMPTED, first_result.message
    second_result = client.result(second)
    assert second_result.error_code == MoveJoints.Result.SUCCESS, second_result.message


def test_cancel_brings_the_arm_to_rest(client: Client) -> None:
    """Canceling a running motion returns CANCELED and the arm comes to rest short of the goal."""
    handle = client.send(goal(ARM, (HOME + 0.4).tolist(), 4.0))
    client.spin_until(lambda: False, 0.8)
    cancel = handle.cancel_goal_async()
    assert client.spin_until(cancel.done, 5.0)
    result = client.result(handle)
    assert result.error_code == MoveJoints.Result.CANCELED, result.message
    client.spin_until(lambda: False, 0.5)
    last = client.joint_states[-1]
    assert np.max(np.abs(np.array(last.velocity))) < 0.05
    assert np.max(np.abs(client.latest_arm_positions() - (HOME + 0.4))) > 0.05
    # Leave the arm at home for the next tests.
    result = client.result(client.send(goal(ARM, HOME.tolist(), 1.0)))
    assert result.error_code == MoveJoints.Result.SUCCESS


def _udp_local_addresses(pid: int) -> list[str]:
    """Local addresses of the UDP sockets a process holds (from /proc, no tools needed)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    addresses = []
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        with open(table) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    addresses.append(fields[1])
    return addresses


def test_dds_sockets_are_bound_to_loopback_only(
    client: Client, node_process: subprocess.Popen
) -> None:
    """Every UDP socket of the node process is bound to 127.0.0.1 (hex 0100007F): no traffic can
    leave the machine."""
    addresses = _udp_local_addresses(node_process.pid)
    assert addresses, "the node holds no UDP sockets: is DDS running?"
    assert all(a.split(":")[0] == "0100007F" for a in addresses), addresses


def test_gain_parameters_are_validated_as_a_whole(client: Client) -> None:
    """A stiffness of the wrong length is rejected with a reason and the old value stays; a
    valid one is accepted; a structural parameter (arm_joints) is read-only."""
    name = "joint_impedance.stiffness"
    old = list(client.get_parameter(name).double_array_value)
    (result,) = client.set_parameters(Parameter(name, value=[1.0, 2.0]))
    assert not result.successful and "expected 9 values" in result.reason
    assert list(client.get_parameter(name).double_array_value) == old
    (result,) = client.set_parameters(Parameter(name, value=[-1.0, *old[1:]]))
    assert not result.successful and "[0, inf]" in result.reason
    new = [value * 1.1 for value in old]
    (result,) = client.set_parameters(Parameter(name, value=new))
    assert result.successful, result.reason
    assert list(client.get_parameter(name).double_array_value) == pytest.approx(new)
    (result,) = client.set_parameters(Parameter("arm_joints", value=["a"]))
    assert not result.successful
    client.set_parameters(Parameter(name, value=old))


def test_node_shuts_down_cleanly_on_sigint(client: Client, node_process: subprocess.Popen) -> None:
    """SIGINT ends the node with exit code 0 and its timing summary printed."""
    node_process.send_signal(signal.SIGINT)
    output, _ = node_process.communicate(timeout=15)
    assert node_process.returncode == 0, output
    assert "ticks" in output and "overruns" in output
