"""/ct/joint_trajectory_controller over real rclpy and DDS (loopback) against the node process
(MuJoCo, real time): FollowJointTrajectory as MoveIt's simple controller manager sends it, JTC's
checks and codes, tolerances, preemption, cancel, the ~/joint_trajectory stream, ~/query_state
and ~/controller_state."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Time
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance, JointTrajectoryControllerState
from control_msgs.srv import QueryTrajectoryState
from controller_manager_msgs.srv import ListControllers, SwitchController
from rclpy.action import ActionClient
from ros_helpers import (
    ARM,
    Client,
    duration,
    moveit_trajectory,
    ros_client,
    wait_ready,
)
from trajectory_msgs.msg import JointTrajectory

from ct_controllers.ros.goals import request_qos

CONTROLLER = "/ct/joint_trajectory_controller"
Result = FollowJointTrajectory.Result


@pytest.fixture(scope="module")
def client(node_process: subprocess.Popen) -> Iterator[Client]:  # type: ignore[type-arg]
    with ros_client("ct_trajectory_client") as client:
        action = ActionClient(
            client.node, FollowJointTrajectory, f"{CONTROLLER}/follow_joint_trajectory"
        )
        assert wait_ready(action.server_is_ready, 10.0)
        client.trajectory = action  # type: ignore[attr-defined]
        client.states = []  # type: ignore[attr-defined]
        client.node.create_subscription(
            JointTrajectoryControllerState,
            f"{CONTROLLER}/controller_state",
            client.states.append,  # type: ignore[attr-defined]
            10,
        )
        client.stream = client.node.create_publisher(  # type: ignore[attr-defined]
            JointTrajectory, f"{CONTROLLER}/joint_trajectory", 10
        )
        yield client


def send(client: Client, goal: Any, timeout: float = 20.0) -> tuple[int, Any, list[Any]]:
    """(status, result, feedback) of one goal."""
    feedback: list[Any] = []
    handle = send_only(client, goal, feedback)
    future = handle.get_result_async()
    assert client.spin_until(future.done, timeout), "no result"
    return future.result().status, future.result().result, feedback


def send_only(client: Client, goal: Any, feedback: list[Any] | None = None) -> Any:
    future = client.trajectory.send_goal_async(  # type: ignore[attr-defined]
        goal,
        feedback_callback=None if feedback is None else (lambda m: feedback.append(m.feedback)),
    )
    assert client.spin_until(future.done, 5.0), "goal not answered"
    handle = future.result()
    assert handle.accepted
    return handle


def target(client: Client, offsets: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    client.wait_at_rest()
    start = client.latest_arm_positions()
    goal = start.copy()
    for name, offset in offsets.items():
        goal[ARM.index(name)] += offset
    return start, goal


def node_time(client: Client) -> float:
    """[s] the node's clock (sim time): the latest joint state's stamp."""
    stamp = client.joint_states[-1].header.stamp
    return stamp.sec + stamp.nanosec * 1e-9


def test_a_goal_as_moveit_sends_it_succeeds_at_its_goal(client: Client) -> None:
    """Stamp 0, the start state at t = 0, empty tolerances, goal_time_tolerance 0: SUCCEEDED with
    SUCCESSFUL, feedback for the arm's joints along the way, and the measured joints within the
    entry's 0.01 rad goal tolerance of the last point."""
    start, goal = target(client, {"joint1": 0.3, "joint2": -0.15, "joint4": 0.25, "joint7": 0.4})
    status, result, feedback = send(
        client, FollowJointTrajectory.Goal(trajectory=moveit_trajectory(start, goal, 1.5))
    )
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert result.error_code == Result.SUCCESSFUL
    assert feedback and list(feedback[-1].joint_names) == list(ARM)
    assert len(feedback[-1].desired.velocities) == len(ARM)
    client.spin_until(lambda: False, 0.1)
    assert np.abs(client.latest_arm_positions() - goal).max() <= 0.01


def _with(trajectory: JointTrajectory, **changes: Any) -> FollowJointTrajectory.Goal:
    goal = FollowJointTrajectory.Goal(trajectory=trajectory)
    for name, value in changes.items():
        setattr(goal, name, value)
    return goal


BAD_GOALS = {
    "unknown joint": (
        lambda t: setattr(
            t, "joint_names", ["joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "elbow"]
        ),
        Result.INVALID_JOINTS,
        "elbow",
    ),
    "partial": (
        lambda t: (
            setattr(t, "joint_names", list(ARM[:6])),
            [
                setattr(p, n, list(getattr(p, n))[:6])
                for p in t.points
                for n in ("positions", "velocities", "accelerations")
            ],
        ),
        Result.INVALID_JOINTS,
        "allow_partial_joints_goal",
    ),
    "no points": (lambda t: setattr(t, "points", []), Result.INVALID_GOAL, "no points"),
    "times": (
        lambda t: setattr(t.points[2], "time_from_start", duration(0.01)),
        Result.INVALID_GOAL,
        "strictly increase",
    ),
    "nan": (
        lambda t: t.points[3].positions.__setitem__(2, math.nan),
        Result.INVALID_GOAL,
        "non-finite",
    ),
    "limits": (
        lambda t: t.points[-1].positions.__setitem__(0, 10.0),
        Result.INVALID_GOAL,
        "outside its limits",
    ),
    "sizes": (
        lambda t: setattr(t.points[1], "velocities", [0.0, 0.0]),
        Result.INVALID_GOAL,
        "2 velocities",
    ),
    "end velocity": (
        lambda t: t.points[-1].velocities.__setitem__(1, 0.1),
        Result.INVALID_GOAL,
        "allow_nonzero_velocity_at_trajectory_end",
    ),
    "ended": (
        lambda t: setattr(t.header, "stamp", Time(sec=1)),
        Result.OLD_HEADER_TIMESTAMP,
        "ago",
    ),
}


@pytest.mark.parametrize("case", BAD_GOALS)
def test_an_invalid_goal_is_aborted_with_its_code_and_nothing_moves(
    client: Client, case: str
) -> None:
    """Each of JTC's checks and ours (unknown joints, partial goals, no points, times not
    increasing, NaN, outside the limits, sizes, a nonzero end velocity, a trajectory that
    ended): ABORTED at once with INVALID_JOINTS / INVALID_GOAL / OLD_HEADER_TIMESTAMP and a
    message naming the problem; the arm stays where it was."""
    change, code, words = BAD_GOALS[case]
    start, goal = target(client, {"joint1": 0.2})
    trajectory = moveit_trajectory(start, goal, 1.0)
    trajectory.points = list(trajectory.points)
    for point in trajectory.points:
        point.positions, point.velocities = list(point.positions), list(point.velocities)
    change(trajectory)
    status, result, _ = send(client, FollowJointTrajectory.Goal(trajectory=trajectory), 5.0)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == code and words in result.error_string, result.error_string
    client.spin_until(lambda: False, 0.2)
    assert np.abs(client.latest_arm_positions() - start).max() < 1e-3


def test_a_path_tolerance_violation_aborts_and_holds_the_measured_position(client: Client) -> None:
    """A goal's path tolerance of 0.1 mrad on a fast motion: ABORTED, PATH_TOLERANCE_VIOLATED,
    the message naming a joint's position error; the arm then holds where it was measured (at
    rest soon after, far short of the goal)."""
    start, goal = target(client, {"joint1": 0.6})
    tolerances = [JointTolerance(name=n, position=1e-4) for n in ARM]
    status, result, _ = send(
        client, _with(moveit_trajectory(start, goal, 1.2), path_tolerance=tolerances)
    )
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.PATH_TOLERANCE_VIOLATED, result.error_string
    assert "position error" in result.error_string
    client.wait_at_rest()
    assert abs(client.latest_arm_positions()[0] - start[0]) < 0.2


def test_a_goal_tolerance_not_met_in_goal_time_aborts(client: Client) -> None:
    """A goal tolerance of 1 µrad (not reachable) with 0.2 s of goal time: ABORTED with
    GOAL_TOLERANCE_VIOLATED, naming goal_time."""
    start, goal = target(client, {"joint2": 0.1})
    tolerances = [JointTolerance(name=n, position=1e-6) for n in ARM]
    status, result, _ = send(
        client,
        _with(
            moveit_trajectory(start, goal, 0.8),
            goal_tolerance=tolerances,
            goal_time_tolerance=duration(0.2),
        ),
    )
    assert status == GoalStatus.STATUS_ABORTED
    assert (
        result.error_code == Result.GOAL_TOLERANCE_VIOLATED
        and "goal_time 0.2" in result.error_string
    )


def test_a_new_goal_preempts_the_running_one_as_jtc_does(client: Client) -> None:
    """A second goal a third of the way through a 3 s one, planned as MoveIt replans (its t = 0
    point the positions measured then, at rest — while the arm moves at about 0.25 rad/s): the
    first ends ABORTED with INVALID_GOAL and JTC's words, the second SUCCEEDED; it starts from
    the measured state, velocity included, so joint1 never turns back (JTC would step its
    velocity reference to 0 there)."""
    start, goal = target(client, {"joint1": 0.5})
    first = send_only(
        client, FollowJointTrajectory.Goal(trajectory=moveit_trajectory(start, goal, 3.0))
    )
    client.spin_until(lambda: False, 1.2)
    at_preemption = client.latest_arm_positions()[0]
    seen = len(client.joint_states)
    second_goal = goal.copy()
    second_goal[0] = start[0] + 0.7
    status, result, _ = send(
        client,
        FollowJointTrajectory.Goal(
            trajectory=moveit_trajectory(client.latest_arm_positions(), second_goal, 2.0)
        ),
    )
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    first_result = first.get_result_async()
    assert client.spin_until(first_result.done, 5.0)
    assert first_result.result().status == GoalStatus.STATUS_ABORTED
    assert first_result.result().result.error_code == Result.INVALID_GOAL
    assert "preempted" in first_result.result().result.error_string
    after = [m.position[list(m.name).index("joint1")] for m in client.joint_states[seen:]]
    assert min(after) > at_preemption - 0.01


def test_cancel_stops_the_arm_and_holds(client: Client) -> None:
    """A cancel half-way: CANCELED; the arm comes to rest short of the goal and stays there."""
    start, goal = target(client, {"joint4": -0.5})
    handle = send_only(
        client, FollowJointTrajectory.Goal(trajectory=moveit_trajectory(start, goal, 2.5))
    )
    client.spin_until(lambda: False, 1.0)
    cancel = handle.cancel_goal_async()
    assert client.spin_until(cancel.done, 5.0)
    future = handle.get_result_async()
    assert client.spin_until(future.done, 5.0)
    assert future.result().status == GoalStatus.STATUS_CANCELED
    client.wait_at_rest()
    stopped = client.latest_arm_positions()[3]
    assert goal[3] + 0.05 < stopped < start[3]
    client.spin_until(lambda: False, 0.5)
    assert abs(client.latest_arm_positions()[3] - stopped) < 2e-3


def test_the_trajectory_topic_replaces_the_running_trajectory_and_ignores_a_bad_one(
    client: Client,
) -> None:
    """Two messages on ~/joint_trajectory (Servo's stream): the second replaces the first, the
    arm ends at the second's goal; then an invalid message (NaN) changes nothing."""
    start, goal = target(client, {"joint1": -0.4})
    client.stream.publish(moveit_trajectory(start, goal, 2.0))  # type: ignore[attr-defined]
    client.spin_until(lambda: False, 0.5)
    second = start.copy()
    second[5] += 0.3
    now = client.latest_arm_positions()
    client.stream.publish(moveit_trajectory(now, second, 1.5))  # type: ignore[attr-defined]
    client.spin_until(lambda: False, 2.5)
    client.wait_at_rest()
    reached = client.latest_arm_positions()
    assert abs(reached[5] - second[5]) < 0.01 and abs(reached[0] - goal[0]) > 0.1
    bad = moveit_trajectory(reached, reached + 0.1, 1.0)
    bad.points[4].positions = [math.nan] * len(ARM)
    client.stream.publish(bad)  # type: ignore[attr-defined]
    client.spin_until(lambda: False, 0.8)
    assert np.abs(client.latest_arm_positions() - reached).max() < 2e-3


def test_a_future_stamp_waits_query_state_samples_and_controller_state_reports(
    client: Client,
) -> None:
    """A goal stamped 1 s ahead on the node's clock: the arm holds until then, then moves; while
    it runs, ~/query_state at a time 0.5 s into the trajectory gives positions between start
    and goal, and ~/controller_state names the controller's joints with errors below the path
    tolerance; the goal succeeds."""
    start, goal = target(client, {"joint3": 0.3})
    trajectory = moveit_trajectory(start, goal, 1.0)
    begin = node_time(client) + 1.0
    trajectory.header.stamp = Time(sec=int(begin), nanosec=int((begin % 1) * 1e9))
    handle = send_only(client, FollowJointTrajectory.Goal(trajectory=trajectory))
    client.spin_until(lambda: node_time(client) > begin - 0.3, 3.0)
    assert abs(client.latest_arm_positions()[2] - start[2]) < 1e-3  # still waiting
    client.spin_until(lambda: node_time(client) > begin + 0.2, 3.0)
    asked = begin + 0.5
    response = client.call(
        QueryTrajectoryState,
        f"{CONTROLLER}/query_state",
        QueryTrajectoryState.Request(time=Time(sec=int(asked), nanosec=int((asked % 1) * 1e9))),
    )
    assert response.success, response.message
    queried = response.position[list(response.name).index("joint3")]
    assert start[2] + 0.05 < queried < goal[2] - 0.05
    future = handle.get_result_async()
    assert client.spin_until(future.done, 10.0)
    assert future.result().status == GoalStatus.STATUS_SUCCEEDED
    states = client.states  # type: ignore[attr-defined]
    assert states and list(states[-1].joint_names) == list(ARM)
    assert max(abs(e) for m in states[-20:] for e in m.error.positions) < 0.2


def test_a_burst_of_100_trajectory_goals_is_answered_in_full(client: Client) -> None:
    """100 FollowJointTrajectory goals sent at once (deep client queues, as the server's): every
    one accepted and answered; each ends SUCCEEDED or ABORTED as preempted (INVALID_GOAL), at
    least one (the one started last) SUCCEEDED; a goal after the burst works."""
    action = ActionClient(
        client.node,
        FollowJointTrajectory,
        f"{CONTROLLER}/follow_joint_trajectory",
        goal_service_qos_profile=request_qos(),
        result_service_qos_profile=request_qos(),
        cancel_service_qos_profile=request_qos(),
    )
    assert wait_ready(action.server_is_ready, 10.0)
    start, goal = target(client, {"joint1": 0.05})
    trajectory = moveit_trajectory(start, goal, 0.3, count=5)
    futures = [
        action.send_goal_async(FollowJointTrajectory.Goal(trajectory=trajectory))
        for _ in range(100)
    ]
    assert client.spin_until(lambda: all(f.done() for f in futures), 60.0)
    handles = [f.result() for f in futures]
    assert all(h.accepted for h in handles)
    results = [h.get_result_async() for h in handles]
    assert client.spin_until(lambda: all(r.done() for r in results), 120.0), sum(
        r.done() for r in results
    )
    outcomes = {(r.result().status, r.result().result.error_code) for r in results}
    assert outcomes <= {
        (GoalStatus.STATUS_SUCCEEDED, Result.SUCCESSFUL),
        (GoalStatus.STATUS_ABORTED, Result.INVALID_GOAL),
    }, outcomes
    statuses = [r.result().status for r in results]
    assert statuses.count(GoalStatus.STATUS_SUCCEEDED) >= 1  # the one started last
    client.node.destroy_client(action)
    status, result, _ = send(
        client, FollowJointTrajectory.Goal(trajectory=moveit_trajectory(goal, start, 0.5, count=5))
    )
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string


def test_an_inactive_trajectory_controller_rejects_goals_and_ignores_the_stream(
    client: Client,
) -> None:
    """switch_controller (STRICT) deactivates joint_trajectory_controller: list_controllers says
    inactive, a goal is rejected (as JTC's precondition) and a stream message moves nothing;
    activated again, a goal succeeds."""
    node = "/ct/controller_manager"

    def switch(**lists: list[str]) -> Any:
        request = SwitchController.Request(strictness=SwitchController.Request.STRICT, **lists)
        return client.call(SwitchController, f"{node}/switch_controller", request)

    def state() -> str:
        listed = client.call(ListControllers, f"{node}/list_controllers", ListControllers.Request())
        return {c.name: c.state for c in listed.controller}["joint_trajectory_controller"]

    assert state() == "active"
    assert switch(deactivate_controllers=["joint_trajectory_controller"]).ok
    try:
        assert state() == "inactive"
        start, goal = target(client, {"joint1": 0.2})
        future = client.trajectory.send_goal_async(  # type: ignore[attr-defined]
            FollowJointTrajectory.Goal(trajectory=moveit_trajectory(start, goal, 0.5))
        )
        assert client.spin_until(future.done, 5.0)
        assert not future.result().accepted
        client.stream.publish(moveit_trajectory(start, goal, 0.5))  # type: ignore[attr-defined]
        client.spin_until(lambda: False, 0.8)
        assert np.abs(client.latest_arm_positions() - start).max() < 1e-3
    finally:
        assert switch(activate_controllers=["joint_trajectory_controller"]).ok
    assert state() == "active"
    status, result, _ = send(
        client, FollowJointTrajectory.Goal(trajectory=moveit_trajectory(start, goal, 0.5))
    )
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
