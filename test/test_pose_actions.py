"""/ct/move_to_pose and /ct/grasp over real rclpy and DDS (loopback), against the node process
running the MuJoCo backend in real time."""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from ct_interfaces.action import Grasp, MoveJoints, MoveToPose
from rclpy.action import ActionClient
from ros_helpers import (
    ARM,
    CONFIG,
    HOME,
    Client,
    pose_message,
    ros_client,
    wait_ready,
)
from ros_helpers import goal as joint_goal

from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel

MODEL = RobotModel(load_description().urdf, CONFIG.tcp_frame, CONFIG.base_frame)
HOME_Q = np.array(CONFIG.home_positions)


@pytest.fixture(scope="module")
def client(node_process: subprocess.Popen) -> Iterator[Client]:  # type: ignore[type-arg]
    with ros_client("ct_pose_client") as client:
        client.move_to_pose = ActionClient(client.node, MoveToPose, "/ct/move_to_pose")  # type: ignore[attr-defined]
        client.grasp = ActionClient(client.node, Grasp, "/ct/grasp")  # type: ignore[attr-defined]
        assert wait_ready(client.move_to_pose.server_is_ready, 10.0)  # type: ignore[attr-defined]
        assert wait_ready(client.grasp.server_is_ready, 10.0)  # type: ignore[attr-defined]
        yield client


def send(client: Client, action: Any, goal: Any, timeout: float = 20.0) -> tuple[Any, list]:  # type: ignore[type-arg]
    feedback: list = []  # type: ignore[type-arg]
    future = action.send_goal_async(
        goal, feedback_callback=lambda message: feedback.append(message.feedback)
    )
    assert client.spin_until(future.done, 5.0)
    return client.result(future.result(), timeout), feedback


def measured_tcp(client: Client) -> np.ndarray:
    message = client.joint_states[-1]
    index = {n: i for i, n in enumerate(message.name)}
    q = np.array([message.position[index[n]] for n in MODEL.joint_names])
    return MODEL.frame_pose(q)


def test_move_to_pose_reaches_a_reachable_target_within_1mm_and_10mrad(client: Client) -> None:
    """A TCP target 10 cm from home, tool down: SUCCESS, and the published joint states put the
    TCP within 1 mm / 0.01 rad of it (an independent FK of the measured joints)."""
    client.wait_at_rest()
    start = measured_tcp(client)
    target = start[:3, 3] + np.array([0.05, 0.08, -0.03])
    goal = MoveToPose.Goal(
        target=pose_message(tuple(target)),
        position_tolerance=0.001,
        orientation_tolerance=0.01,
        timeout=8.0,
    )
    goal.target.pose.orientation.x, goal.target.pose.orientation.w = 1.0, 0.0
    quaternion = _quaternion(start[:3, :3])
    o = goal.target.pose.orientation
    o.x, o.y, o.z, o.w = quaternion
    result, feedback = send(client, client.move_to_pose, goal)  # type: ignore[attr-defined]
    assert result.error_code == MoveToPose.Result.SUCCESS, result.message
    assert result.position_error <= 0.001 and result.orientation_error <= 0.01
    assert feedback, (result.message, result.position_error)
    assert feedback[0].position_error > 0.05
    client.spin_until(lambda: False, 0.2)
    reached = measured_tcp(client)
    assert np.linalg.norm(reached[:3, 3] - target) <= 0.001
    rotation = reached[:3, :3] @ start[:3, :3].T
    assert math.acos(max(-1.0, min(1.0, (np.trace(rotation) - 1) / 2))) <= 0.01


def _quaternion(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """Rotation matrix → (x, y, z, w), Shepperd's method (independent of the node's code)."""
    w = math.sqrt(max(0.0, 1 + np.trace(rotation))) / 2
    x = math.copysign(
        math.sqrt(max(0.0, 1 + rotation[0, 0] - rotation[1, 1] - rotation[2, 2])) / 2,
        rotation[2, 1] - rotation[1, 2],
    )
    y = math.copysign(
        math.sqrt(max(0.0, 1 - rotation[0, 0] + rotation[1, 1] - rotation[2, 2])) / 2,
        rotation[0, 2] - rotation[2, 0],
    )
    z = math.copysign(
        math.sqrt(max(0.0, 1 - rotation[0, 0] - rotation[1, 1] + rotation[2, 2])) / 2,
        rotation[1, 0] - rotation[0, 1],
    )
    return (x, y, z, w)


@pytest.mark.parametrize(
    ("changes", "code", "words"),
    [
        ({"frame": "camera"}, MoveToPose.Result.UNKNOWN_FRAME, "camera"),
        ({"past": 2.0}, MoveToPose.Result.STALE_GOAL, "ago"),
        ({"future": 5.0}, MoveToPose.Result.STALE_GOAL, "future"),
        ({"quaternion": (0.5, 0.0, 0.0, 0.5)}, MoveToPose.Result.INVALID_GOAL, "unit quaternion"),
        ({"position": (math.nan, 0.0, 0.3)}, MoveToPose.Result.INVALID_GOAL, "non-finite"),
        ({"position": (2.5, 0.0, 0.3)}, MoveToPose.Result.UNREACHABLE, "no IK solution"),
        ({"tolerance": -0.1}, MoveToPose.Result.INVALID_GOAL, "position_tolerance"),
    ],
    ids=["frame", "stale", "future", "quaternion", "nan", "unreachable", "tolerance"],
)
def test_bad_pose_goals_are_aborted_with_their_code_and_move_nothing(
    client: Client,
    changes: dict,
    code: int,
    words: str,  # type: ignore[type-arg]
) -> None:
    """Each rejection class comes back at once with its code and a message naming the problem,
    and the arm does not move."""
    client.wait_at_rest()
    before = client.latest_arm_positions()
    assert client.spin_until(lambda: client.clock[-1].clock.sec >= 3, 30.0)
    now = client.clock[-1].clock
    stamp = (0, 0)
    if "future" in changes:
        stamp = (now.sec + int(changes["future"]), now.nanosec)
    if "past" in changes:  # max_goal_age is 1 s
        stamp = (now.sec - int(changes["past"]), now.nanosec)
    goal = MoveToPose.Goal(
        target=pose_message(
            changes.get("position", (0.5, 0.0, 0.3)),
            changes.get("quaternion", (1.0, 0.0, 0.0, 0.0)),
            changes.get("frame", "base_link"),
            stamp,
        ),
        position_tolerance=changes.get("tolerance", 0.001),
    )
    result, _ = send(client, client.move_to_pose, goal, 10.0)  # type: ignore[attr-defined]
    assert result.error_code == code, result.message
    assert words in result.message
    client.spin_until(lambda: False, 0.2)
    assert np.max(np.abs(client.latest_arm_positions() - before)) < 1e-3


def test_cancel_of_move_to_pose_stops_the_arm(client: Client) -> None:
    """A canceled MoveToPose returns CANCELED and the arm comes to rest short of the target."""
    client.wait_at_rest()
    start = measured_tcp(client)
    target = start[:3, 3] + np.array([0.0, 0.2, 0.0])
    goal = MoveToPose.Goal(target=pose_message(tuple(target), _quaternion(start[:3, :3])))
    future = client.move_to_pose.send_goal_async(goal)  # type: ignore[attr-defined]
    assert client.spin_until(future.done, 5.0)
    handle = future.result()
    client.spin_until(lambda: False, 0.3)
    cancel = handle.cancel_goal_async()
    assert client.spin_until(cancel.done, 5.0)
    result = client.result(handle)
    assert result.error_code == MoveToPose.Result.CANCELED, result.message
    client.wait_at_rest()
    assert np.linalg.norm(measured_tcp(client)[:3, 3] - target) > 0.02


def test_grasp_picks_the_cube_and_reports_each_phase(client: Client) -> None:
    """A Grasp goal at the cube (on the table at x 0.5 m): SUCCESS with final phase DONE, the
    four phase durations, and feedback naming the phases as they pass; without
    grasp.identify_payload its payload fields say nothing was identified ("", NaN)."""
    client.wait_at_rest()
    goal = Grasp.Goal(
        grasp_pose=pose_message((0.5, 0.0, 0.025)),
        approach_offset=0.08,
        lift_height=0.1,
        grasp_effort=20.0,
        hold_duration=0.3,
    )
    started = time.monotonic()
    result, feedback = send(client, client.grasp, goal, 30.0)  # type: ignore[attr-defined]
    assert result.error_code == Grasp.Result.SUCCESS, result.message
    assert result.final_phase == "DONE"
    assert result.payload_status == "" and math.isnan(result.payload_mass)
    assert len(result.phase_durations) == 4 and all(d > 0 for d in result.phase_durations)
    phases = [f.phase for f in feedback]
    assert {"APPROACH", "CLOSE", "HOLD", "RELEASE"} <= set(phases)
    assert len(feedback) >= 10 * (time.monotonic() - started) * 0.5


@pytest.mark.parametrize(
    ("changes", "code", "words"),
    [
        ({"frame": "world"}, Grasp.Result.UNKNOWN_FRAME, "world"),
        ({"effort": 500.0}, Grasp.Result.INVALID_GOAL, "grasp_effort"),
        ({"position": (2.0, 0.0, 0.025)}, Grasp.Result.UNREACHABLE, "no IK solution"),
    ],
    ids=["frame", "effort", "unreachable"],
)
def test_bad_grasp_goals_are_aborted_with_their_code(
    client: Client,
    changes: dict,
    code: int,
    words: str,  # type: ignore[type-arg]
) -> None:
    """Grasp goals in an unknown frame, with an out-of-range effort or out of reach come back at
    once with their code and a message."""
    goal = Grasp.Goal(
        grasp_pose=pose_message(
            changes.get("position", (0.5, 0.0, 0.025)), frame=changes.get("frame", "base_link")
        ),
        approach_offset=0.08,
        lift_height=0.1,
        grasp_effort=changes.get("effort", 20.0),
        hold_duration=0.3,
    )
    result, _ = send(client, client.grasp, goal, 10.0)  # type: ignore[attr-defined]
    assert result.error_code == code, result.message
    assert words in result.message


def test_move_to_pose_reaches_a_pose_where_the_differential_ik_alone_stalls(
    client: Client,
) -> None:
    """From home (MoveJoints there first), the TCP pose of a configuration on which the
    differential IK alone stalls 0.69 m short (trial 89 of ``ct-bench reach --seed 0``, see
    test_bench_reach.py), through the node: SUCCESS within the 10 s default timeout, the
    published joint states putting the TCP within 1 mm / 0.01 rad of it. Back home after."""

    def go_home() -> None:
        result = client.result(client.send(joint_goal(ARM, HOME.tolist(), 3.0)), 20.0)
        assert result.error_code == MoveJoints.Result.SUCCESS, result.message
        client.wait_at_rest()

    go_home()
    q = HOME_Q.copy()
    stalls = [1.752703, -0.704363, -1.50915, 0.944011, -0.143022, -1.469108, -2.519885]
    q[MODEL.indices(CONFIG.arm_joints)] = stalls
    target = MODEL.frame_pose(q)
    message = pose_message(tuple(target[:3, 3]), _quaternion(target[:3, :3]))
    move = MoveToPose.Goal(target=message, position_tolerance=0.001, orientation_tolerance=0.01)
    try:
        result, _ = send(client, client.move_to_pose, move, 20.0)  # type: ignore[attr-defined]
        assert result.error_code == MoveToPose.Result.SUCCESS, result.message
        client.spin_until(lambda: False, 0.2)
        reached = measured_tcp(client)
        assert np.linalg.norm(reached[:3, 3] - target[:3, 3]) <= 0.001
        rotation = reached[:3, :3] @ target[:3, :3].T
        assert math.acos(max(-1.0, min(1.0, (np.trace(rotation) - 1) / 2))) <= 0.01
    finally:
        go_home()
