"""The control node over real rclpy and real DDS (loopback): a separate node process, as users
run it, driven by an rclpy action client in the test process."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from controller_manager_msgs.srv import ListControllers, SwitchController
from ct_interfaces.action import MoveJoints
from ct_interfaces.srv import ResetFault
from rclpy.parameter import Parameter
from ros_helpers import (
    ARM,
    CONFIG,
    HOME,
    NODE,
    Client,
    goal,
    ros_client,
    start_node,
    stop_node,
    wait_ready,
)


@pytest.fixture(scope="module")
def node_process() -> Iterator[subprocess.Popen]:
    """The real node, started as `ct-bringup sim` would start it, with free joints allowed: a
    test zeroes joint1's stiffness and damping (refused by default, see test_gain_checks_node)."""
    process = start_node("--ros-args", "-p", "allow_free_joints:=true")
    yield process
    stop_node(process)


@pytest.fixture(scope="module")
def client(node_process: subprocess.Popen) -> Iterator[Client]:
    with ros_client() as client:
        yield client


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


def test_the_sim_node_publishes_clock_without_subscribing_to_its_own(client: Client) -> None:
    """The node is the /clock source: it publishes /clock but has no subscription to it (its
    clock is set where /clock is published; a self-subscription woke the executor about ten
    times per message, taking the GIL from the control thread). Its other subscriptions are
    untouched. That the node's clock still follows sim time is checked by the stale and future
    pose-goal tests, which stamp goals against /clock."""
    assert client.spin_until(lambda: len(client.clock) > 0, 5.0)
    namespace, name = NODE.rsplit("/", 1)
    publishers = dict(client.node.get_publisher_names_and_types_by_node(name, namespace))
    subscriptions = dict(client.node.get_subscriber_names_and_types_by_node(name, namespace))
    assert "/clock" in publishers
    assert "/clock" not in subscriptions


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


def test_gains_unstable_where_the_arm_is_are_refused(client: Client) -> None:
    """A damping of 10⁴ N·m·s/rad on every joint makes the 1 kHz sampled loop grow where the
    arm is (T·D/M far above 2): the set is refused naming the controller, the rate and the
    spectral radius, and the old value stays."""
    name = "joint_impedance.damping"
    old = list(client.get_parameter(name).double_array_value)
    (result,) = client.set_parameters(Parameter(name, value=[1e4] * len(old)))
    assert not result.successful
    assert "joint_impedance" in result.reason and "update_rate 1000 Hz" in result.reason
    assert "spectral radius" in result.reason and "not applied" in result.reason
    assert list(client.get_parameter(name).double_array_value) == old


def test_list_and_switch_controllers_with_ros2_control_semantics(client: Client) -> None:
    """ListControllers (controller_manager_msgs) names both joint-level controllers with their
    plugin types, joint_impedance active; a strict switch naming an unknown controller fails
    and changes nothing; deactivating the running controller alone is refused; a proper strict
    switch activates computed_torque, which ControllerState then reports; switching back (best
    effort, skipping an unknown name) restores joint_impedance."""

    def states() -> dict[str, str]:
        listed = client.call(ListControllers, f"{NODE}/list_controllers", ListControllers.Request())
        return {c.name: c.state for c in listed.controller}

    listed = client.call(ListControllers, f"{NODE}/list_controllers", ListControllers.Request())
    types = {c.name: c.type for c in listed.controller}
    assert types["joint_impedance"] == "ct_controllers/JointImpedance"
    assert types["computed_torque"] == "ct_controllers/ComputedTorque"
    assert states()["joint_impedance"] == "active"

    def switch(activate: list[str], deactivate: list[str], strict: bool = True) -> Any:
        request = SwitchController.Request(
            activate_controllers=activate,
            deactivate_controllers=deactivate,
            strictness=SwitchController.Request.STRICT
            if strict
            else SwitchController.Request.BEST_EFFORT,
        )
        return client.call(SwitchController, f"{NODE}/switch_controller", request)

    refused = switch(["computed_torque", "nope"], ["joint_impedance"])
    assert not refused.ok and "nope" in refused.message
    alone = switch([], ["joint_impedance"])
    assert not alone.ok and "uncommanded" in alone.message
    assert states()["joint_impedance"] == "active"

    done = switch(["computed_torque"], ["joint_impedance"])
    assert done.ok, done.message
    count = len(client.controller_states)
    assert client.spin_until(lambda: len(client.controller_states) > count + 5, 5.0)
    assert list(client.controller_states[-1].active_controllers) == ["computed_torque"]
    result = client.result(client.send(goal(["joint1"], [HOME[0] + 0.2], 1.0)))
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message
    best_effort = switch(["joint_impedance", "ghost"], ["computed_torque"], strict=False)
    assert best_effort.ok and "ghost" in best_effort.message
    result = client.result(client.send(goal(["joint1"], [HOME[0]], 1.0)))
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message


def test_a_goal_runs_with_its_controller_and_gives_it_back(client: Client) -> None:
    """MoveJoints with controller=computed_torque runs with it (ControllerState says so while it
    moves) and the selected controller is active again after the goal."""
    handle = client.send(goal(["joint2"], [HOME[1] + 0.2], 1.5, controller="computed_torque"))
    assert client.spin_until(
        lambda: (
            bool(client.controller_states)
            and list(client.controller_states[-1].active_controllers) == ["computed_torque"]
        ),
        3.0,
    )
    result = client.result(handle)
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message
    count = len(client.controller_states)
    assert client.spin_until(lambda: len(client.controller_states) > count + 5, 5.0)
    assert list(client.controller_states[-1].active_controllers) == ["joint_impedance"]
    client.result(client.send(goal(["joint2"], [HOME[1]], 1.0)))


def test_controller_state_and_diagnostics_are_published(client: Client) -> None:
    """ControllerState carries every joint with desired/actual/error consistent with each other
    and loop timing; /diagnostics carries the loop's status with its tick count."""
    assert client.spin_until(lambda: len(client.controller_states) > 3, 5.0)
    state = client.controller_states[-1]
    assert set(state.joint_names) == set(CONFIG.joint_names)
    desired, actual = np.array(state.desired), np.array(state.actual)
    np.testing.assert_allclose(np.array(state.error), desired - actual)
    assert len(state.commanded_effort) == len(state.saturated) == len(state.joint_names)
    assert state.ticks > 0 and state.compute_time_p99 > 0
    assert client.spin_until(lambda: len(client.diagnostics) > 0, 3.0)
    statuses = [s for m in client.diagnostics for s in m.status if "control loop" in s.name]
    assert statuses, "no control-loop status on /diagnostics"
    values = {kv.key: kv.value for kv in statuses[-1].values}
    assert int(values["ticks"]) > 0 and values["active_controller"] == "joint_impedance"


def test_a_gain_change_changes_the_behaviour_within_a_few_ticks(client: Client) -> None:
    """While joint1 accelerates (commanded effort well above zero), setting its stiffness and
    damping to zero takes the commanded effort on joint1 (whose gravity torque is zero: vertical
    axis) to zero within 50 ms of sim time; restoring the gains makes it track again."""
    names = list(CONFIG.joint_names)
    stiffness = list(client.get_parameter("joint_impedance.stiffness").double_array_value)
    damping = list(client.get_parameter("joint_impedance.damping").double_array_value)
    index = names.index("joint1")

    def joint1_effort(message: Any) -> float:
        return float(message.commanded_effort[list(message.joint_names).index("joint1")])

    handle = client.send(goal(["joint1"], [HOME[0] + 0.8], 0.0))  # time-optimal: accelerating
    assert client.spin_until(
        lambda: (
            bool(client.controller_states)
            and abs(joint1_effort(client.controller_states[-1])) > 0.5
        ),
        3.0,
    ), "joint1 never pushed"
    zero_k = [0.0 if i == index else k for i, k in enumerate(stiffness)]
    zero_d = [0.0 if i == index else d for i, d in enumerate(damping)]
    results = client.set_parameters(
        Parameter("joint_impedance.stiffness", value=zero_k),
        Parameter("joint_impedance.damping", value=zero_d),
    )
    assert all(r.successful for r in results)

    def seconds(message: Any) -> float:
        return message.stamp.sec + message.stamp.nanosec * 1e-9

    # The set was answered, so it is staged; it applies at the next tick. Judge the messages
    # stamped from 50 ms (sim time) after the newest one seen once the answer is in.
    client.spin_until(lambda: False, 0.05)
    t0 = seconds(client.controller_states[-1])
    assert client.spin_until(lambda: seconds(client.controller_states[-1]) > t0 + 0.2, 3.0)
    late = [m for m in client.controller_states if seconds(m) > t0 + 0.05]
    assert late and all(abs(joint1_effort(m)) < 1e-6 for m in late)
    client.set_parameters(
        Parameter("joint_impedance.stiffness", value=stiffness),
        Parameter("joint_impedance.damping", value=damping),
    )
    client.result(handle)
    result = client.result(client.send(goal(["joint1"], [HOME[0]], 1.5)))
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message


def test_two_clients_at_once_do_not_corrupt_state(client: Client) -> None:
    """Two client nodes send goals at the same moment: one ends PREEMPTED, the other SUCCESS, and
    the arm ends at the winner's goal."""
    other = Client("ct_second_client")
    try:
        assert wait_ready(other.move_joints.server_is_ready, 10.0)
        first = client.move_joints.send_goal_async(goal(["joint3"], [0.3], 1.0))
        second = other.move_joints.send_goal_async(goal(["joint3"], [-0.3], 1.0))
        assert client.spin_until(first.done, 5.0) and other.spin_until(second.done, 5.0)
        results = {}
        for name, who, future in (("first", client, first), ("second", other, second)):
            result_future = future.result().get_result_async()
            assert who.spin_until(result_future.done, 15.0)
            results[name] = result_future.result().result
        codes = sorted(r.error_code for r in results.values())
        assert codes == [MoveJoints.Result.SUCCESS, MoveJoints.Result.PREEMPTED], results
        winner = 0.3 if results["first"].error_code == MoveJoints.Result.SUCCESS else -0.3
        client.spin_until(lambda: False, 0.3)
        assert abs(client.latest_arm_positions()[2] - winner) < 0.01
    finally:
        other.node.destroy_node()
    client.result(client.send(goal(["joint3"], [HOME[2]], 1.0)))


def test_reset_fault_without_a_fault_says_so(client: Client) -> None:
    """ResetFault with no latched fault succeeds and says there was none."""
    response = client.call(ResetFault, f"{NODE}/reset_fault", ResetFault.Request())
    assert response.ok and "no fault" in response.message


def test_node_shuts_down_cleanly_on_sigint(client: Client, node_process: subprocess.Popen) -> None:
    """SIGINT ends the node with exit code 0 and its timing summary printed."""
    node_process.send_signal(signal.SIGINT)
    output, _ = node_process.communicate(timeout=15)
    assert node_process.returncode == 0, output
    assert "ticks" in output and "overruns" in output
