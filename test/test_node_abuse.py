"""The real node (a separate process, `ct-bringup sim`'s command line, real DDS on loopback)
against hostile and clumsy clients: goals the planner cannot plan, oversized goals, bursts of
goals, cancels and service calls, malformed names and stamps, and signals while goals run.

Every request gets an answer, every accepted goal a result, and the loop keeps running."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from controller_manager_msgs.srv import ListControllers
from ct_interfaces.action import Grasp, MoveJoints, MoveToPose
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from ros_helpers import ARM, HOME, Client, goal, pose_message, ros_client, wait_ready

from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel
from ct_controllers.ros.goals import request_qos

Result = MoveJoints.Result
SHUTDOWN_BOUND = 5.0  # [s] from the signal to the process's exit


def deep_action_client(node: Node, action: Any, name: str) -> ActionClient:
    """An action client whose service queues are as deep as the server's (a client's own
    response queue of 10 would drop the answers to a burst before this test could see them)."""
    return ActionClient(
        node,
        action,
        name,
        goal_service_qos_profile=request_qos(),
        result_service_qos_profile=request_qos(),
        cancel_service_qos_profile=request_qos(),
    )


def spin_until(executor: Any, condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        executor.spin_once(timeout_sec=0.01)
    return condition()


def home_goal(duration: float = 0.5) -> MoveJoints.Goal:
    return goal(ARM, HOME.tolist(), duration)


@pytest.fixture(scope="module")
def client(node_process: subprocess.Popen) -> Iterator[Client]:  # type: ignore[type-arg]
    with ros_client("ct_abuse_client") as client:
        yield client


def send(client: Client, message: MoveJoints.Goal, timeout: float = 20.0) -> Any:
    handle = client.send(message)
    assert handle.accepted
    return client.result(handle, timeout)


# --- goals the planner cannot plan, oversized and malformed goals ------------------------------
@pytest.mark.parametrize("duration", [7700.0, 1e9, 1e308])
def test_durations_beyond_the_planner_are_invalid_and_the_loop_lives(client, duration):
    """MoveJoints with a duration Ruckig cannot plan (it killed the loop before): INVALID_GOAL
    naming the bound; the next goal still succeeds (the loop runs)."""
    started = time.monotonic()
    result = send(client, home_goal(duration))
    assert result.error_code == Result.INVALID_GOAL, result.message
    assert "duration must be within [0, 3600] s" in result.message
    assert time.monotonic() - started < 2.0
    assert send(client, home_goal(0.3)).error_code == Result.SUCCESS


def test_ten_thousand_names_are_refused_cheaply_with_a_short_message(client):
    """10,000 joint names (~1 MB): INVALID_GOAL for their count, well under a second, a message
    under 200 characters; eight at once do not delay another goal by seconds."""
    names = [f"joint_with_a_long_name_{i:05d}_" + "x" * 70 for i in range(10_000)]
    big = goal(names, [0.0] * len(names), 1.0)
    started = time.monotonic()
    result = send(client, big)
    took = time.monotonic() - started
    assert result.error_code == Result.INVALID_GOAL
    assert "10000 joint names" in result.message and len(result.message) < 200, result.message
    assert took < 1.0, took
    handles = [client.move_joints.send_goal_async(big) for _ in range(8)]
    started = time.monotonic()
    result = send(client, home_goal(0.3))
    assert result.error_code == Result.SUCCESS, result.message
    assert time.monotonic() - started < 5.0
    assert client.spin_until(lambda: all(h.done() for h in handles), 10.0)


def test_rejected_goals_are_not_held_by_the_node(client, node_process):
    """20 rejected 1 MB goals leave the node's resident memory within 20 MB of where it was
    (before: rclpy held each request, ~3.3 MB, for the 15 min result expiry: +67 MB)."""
    names = ["n" * 90 + f"{i:05d}" for i in range(10_000)]
    big = goal(names, [0.0] * len(names), 1.0)
    send(client, big)  # the first one warms up whatever is allocated once

    def rss_mb() -> float:
        with open(f"/proc/{node_process.pid}/status") as status:
            line = next(line for line in status if line.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    before = rss_mb()
    for _ in range(20):
        assert send(client, big).error_code == Result.INVALID_GOAL
    grown = rss_mb() - before
    print(f"node RSS after 20 rejected 1 MB goals: {grown:+.1f} MB")
    assert grown < 20.0, grown


@pytest.mark.parametrize(
    ("names", "words"),
    [
        (["joint1\njoint2"], "control characters"),
        (["joint1\x1b[2J"], "control characters"),
        (["joint1", "joint1"], "listed twice"),
        ([f"nope{i}" for i in range(7)], "... and 4 more"),
    ],
    ids=["newline", "escape", "duplicate", "many-unknown"],
)
def test_malformed_names_are_invalid_with_a_short_reason(client, names, words):
    """Names with control characters, duplicates and many unknown names: INVALID_GOAL naming at
    most three offenders."""
    result = send(client, goal(names, [0.0] * len(names), 1.0))
    assert result.error_code == Result.INVALID_GOAL
    assert words in result.message, result.message


def test_pose_goal_stamped_on_another_clock_names_the_nodes_clock(client):
    """A wall-clock stamp sent to the sim-time node: STALE_GOAL that says the node runs on sim
    time and that stamp 0 means now."""
    action = ActionClient(client.node, MoveToPose, "/ct/move_to_pose")
    assert wait_ready(action.server_is_ready, 10.0)
    target = pose_message((0.4, 0.0, 0.4))
    target.header.stamp.sec = int(time.time())
    future = action.send_goal_async(MoveToPose.Goal(target=target))
    assert client.spin_until(future.done, 5.0)
    result = client.result(future.result(), 10.0)
    assert result.error_code == MoveToPose.Result.STALE_GOAL
    assert "sim time" in result.message and "stamp 0" in result.message, result.message


@pytest.mark.parametrize("value", [1e300, -1e300, 1e3])
def test_absurd_pose_values_are_invalid_before_any_ik(client, value):
    """A target 1e300 m (or 1 km) away: INVALID_GOAL at once, not UNREACHABLE after an IK."""
    action = ActionClient(client.node, MoveToPose, "/ct/move_to_pose")
    assert wait_ready(action.server_is_ready, 10.0)
    started = time.monotonic()
    future = action.send_goal_async(MoveToPose.Goal(target=pose_message((value, 0.0, 0.4))))
    assert client.spin_until(future.done, 5.0)
    result = client.result(future.result(), 10.0)
    assert result.error_code == MoveToPose.Result.INVALID_GOAL, result.message
    assert "goals farther than 100 m are refused" in result.message
    assert time.monotonic() - started < 1.0


def test_absurd_grasp_amounts_are_invalid(client):
    """A grasp with a 1e300 m lift: INVALID_GOAL naming the amount and its bound."""
    action = ActionClient(client.node, Grasp, "/ct/grasp")
    assert wait_ready(action.server_is_ready, 10.0)
    message = Grasp.Goal(
        grasp_pose=pose_message((0.5, 0.0, 0.025)),
        approach_offset=0.08,
        lift_height=1e300,
        grasp_effort=20.0,
        hold_duration=0.3,
    )
    future = action.send_goal_async(message)
    assert client.spin_until(future.done, 5.0)
    result = client.result(future.result(), 10.0)
    assert result.error_code == Grasp.Result.INVALID_GOAL
    assert "lift_height must be within [0, 1]" in result.message, result.message


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"approach_offset": 2.0}, "approach_offset must be within [0, 1] m"),
        ({"hold_duration": float("nan")}, "hold_duration must be within [0, 3600] s"),
        ({"grasp_effort": 0.0}, "grasp_effort must be finite and > 0 N"),
        ({"grasp_effort": float("inf")}, "grasp_effort must be finite and > 0 N"),
    ],
    ids=["offset", "hold-nan", "effort-zero", "effort-inf"],
)
def test_grasp_amounts_are_checked_once_into_the_goal(client, changes, words):
    """Each out-of-range Grasp amount is INVALID_GOAL naming it and its bound, the message of
    GraspGoal's own check (the one the action's boundary builds the goal through)."""
    action = ActionClient(client.node, Grasp, "/ct/grasp")
    assert wait_ready(action.server_is_ready, 10.0)
    amounts = {
        "approach_offset": 0.08,
        "lift_height": 0.1,
        "grasp_effort": 20.0,
        "hold_duration": 0.3,
    } | changes
    message = Grasp.Goal(grasp_pose=pose_message((0.5, 0.0, 0.025)), **amounts)
    future = action.send_goal_async(message)
    assert client.spin_until(future.done, 5.0)
    result = client.result(future.result(), 10.0)
    assert result.error_code == Grasp.Result.INVALID_GOAL, result.message
    assert words in result.message, result.message


# --- bursts ----------------------------------------------------------------------------------
def test_a_burst_of_200_goals_from_one_client_is_answered_in_full(client):
    """200 goals sent at once: every one gets a goal response, every accepted one a result (the
    last SUCCESS, the others PREEMPTED), none lost."""
    action = deep_action_client(client.node, MoveJoints, "/ct/move_joints")
    assert wait_ready(action.server_is_ready, 10.0)
    futures = [action.send_goal_async(home_goal(0.2)) for _ in range(200)]
    assert client.spin_until(lambda: all(f.done() for f in futures), 60.0), sum(
        f.done() for f in futures
    )
    handles = [f.result() for f in futures]
    assert all(h.accepted for h in handles)
    results = [h.get_result_async() for h in handles]
    assert client.spin_until(lambda: all(r.done() for r in results), 120.0), sum(
        r.done() for r in results
    )
    codes = [r.result().result.error_code for r in results]
    assert set(codes) <= {Result.SUCCESS, Result.PREEMPTED}, set(codes)
    assert codes.count(Result.SUCCESS) >= 1


def test_five_clients_with_fifty_goals_each_all_get_results(client):
    """5 clients × 50 goals at once: every goal answered, every accepted goal a result."""
    executor = SingleThreadedExecutor(context=client.node.context)
    nodes = [Node(f"ct_burst_client_{i}") for i in range(5)]
    try:
        actions = [deep_action_client(n, MoveJoints, "/ct/move_joints") for n in nodes]
        for node in nodes:
            executor.add_node(node)
        assert all(wait_ready(a.server_is_ready, 10.0) for a in actions)
        futures = [a.send_goal_async(home_goal(0.2)) for _ in range(50) for a in actions]
        assert spin_until(executor, lambda: all(f.done() for f in futures), 90.0), sum(
            f.done() for f in futures
        )
        handles = [f.result() for f in futures if f.result().accepted]
        assert len(handles) == 250
        results = [h.get_result_async() for h in handles]
        assert spin_until(executor, lambda: all(r.done() for r in results), 120.0), sum(
            r.done() for r in results
        )
    finally:
        for node in nodes:
            executor.remove_node(node)
            node.destroy_node()


def test_a_hundred_cancels_of_one_goal_are_all_answered(client):
    """100 cancel requests for one running goal: all 100 answered, the goal ends CANCELED, and
    the same client's next goal works."""
    action = deep_action_client(client.node, MoveJoints, "/ct/move_joints")
    assert wait_ready(action.server_is_ready, 10.0)
    away = HOME.copy()
    away[0] += 0.5
    future = action.send_goal_async(goal(ARM, away.tolist(), 5.0))
    assert client.spin_until(future.done, 5.0)
    handle = future.result()
    assert handle.accepted
    client.spin_until(lambda: False, 0.3)  # the motion is under way
    cancels = [handle.cancel_goal_async() for _ in range(100)]
    assert client.spin_until(lambda: all(c.done() for c in cancels), 30.0), sum(
        c.done() for c in cancels
    )
    result = handle.get_result_async()
    assert client.spin_until(result.done, 10.0)
    assert result.result().result.error_code == Result.CANCELED
    assert send(client, home_goal(1.0)).error_code == Result.SUCCESS


def test_a_thousand_service_calls_at_once_are_all_answered(client):
    """1000 list_controllers calls at once: all 1000 answered."""
    service = client.node.create_client(
        ListControllers, "/ct/controller_manager/list_controllers", qos_profile=request_qos()
    )
    try:
        assert wait_ready(service.service_is_ready, 10.0)
        futures = [service.call_async(ListControllers.Request()) for _ in range(1000)]
        assert client.spin_until(lambda: all(f.done() for f in futures), 60.0), sum(
            f.done() for f in futures
        )
        assert all(len(f.result().controller) >= 2 for f in futures)
    finally:
        client.node.destroy_client(service)


# --- limits --------------------------------------------------------------------------------
@pytest.mark.parametrize("bound", ["upper", "lower"])
def test_a_goal_at_a_joint_limit_never_passes_it(client, bound):
    """MoveJoints to exactly joint1's URDF limit (2.967 rad measured 2.9689 before): every
    published joint state stays within the limit, and the goal still ends SUCCESS (it stops
    5 mrad short, within the 0.01 rad tolerance)."""
    limits = RobotModel(load_description().urdf).limits
    index = ARM.index("joint1")
    limit = float(limits.upper[index] if bound == "upper" else limits.lower[index])
    target = HOME.copy()
    target[index] = limit
    client.joint_states.clear()
    result = send(client, goal(ARM, target.tolist(), 0.0), timeout=30.0)
    assert result.error_code == Result.SUCCESS, result.message
    reached = [m.position[list(m.name).index("joint1")] for m in client.joint_states]
    assert len(reached) > 100
    extreme = max(reached) if bound == "upper" else min(reached)
    print(f"joint1 to its {bound} limit {limit:.4f} rad: reached {extreme:.5f} rad")
    assert (extreme <= limit) if bound == "upper" else (extreme >= limit), extreme
    assert send(client, home_goal(0.0), timeout=30.0).error_code == Result.SUCCESS
