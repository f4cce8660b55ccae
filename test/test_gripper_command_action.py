"""control_msgs GripperCommand and ParallelGripperCommand on ``/ct/<controller>/gripper_cmd``,
over real rclpy and DDS (loopback), against the node process on the MuJoCo backend (real time):
the semantics of ros2_controllers' Jazzy gripper_action_controller — reached, stalled with and
without allow_stalling, a newer goal cancelling the running one, cancel, bad goals rejected.

The node runs this worktree's config/controllers.yaml (its ``gripper_controller``) with two more
entries: ``stalling_gripper`` (allow_stalling true) and ``parallel_gripper``
(ParallelGripperActionController)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from action_msgs.msg import GoalStatus
from control_msgs.action import GripperCommand, ParallelGripperCommand
from ct_interfaces.action import MoveJoints, MoveToPose
from rclpy.action import ActionClient
from ros_helpers import (
    ARM,
    HOME,
    Client,
    NodeProcess,
    pose_message,
    ros_client,
    start_node,
    wait_ready,
)
from ros_helpers import goal as joint_goal

CONFIG = Path(__file__).resolve().parents[1] / "config" / "controllers.yaml"
FINGERS = ("left_finger_joint", "right_finger_joint")
TOLERANCE = 0.01  # [m] the entries' goal_tolerance (the reference's default)
CUBE_HALF = 0.025  # [m] the grasp scene's 5 cm cube, between the bundled fingers
EXTRA = {
    "controllers": [
        "joint_impedance",
        "computed_torque",
        "joint_trajectory_controller",
        "gripper_controller",
        "stalling_gripper",
        "parallel_gripper",
    ],
    "stalling_gripper": {
        "type": "ct_controllers/GripperActionController",
        "joint": "left_finger_joint",
        "allow_stalling": True,
    },
    "parallel_gripper": {
        "type": "ct_controllers/ParallelGripperActionController",
        "joint": "left_finger_joint",
    },
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    extra = tmp_path_factory.mktemp("grippers") / "grippers.yaml"
    extra.write_text(yaml.safe_dump({"/**": {"ros__parameters": EXTRA}}))
    process = start_node("--ros-args", "--params-file", str(CONFIG), "--params-file", str(extra))
    try:
        yield process
    finally:
        import signal

        process.send_signal(signal.SIGINT)
        try:
            output = process.communicate(timeout=15)[0]
        finally:
            if process.poll() is None:
                process.kill()
        print(output[-4000:])


@pytest.fixture(scope="module")
def client(node: NodeProcess) -> Iterator[Client]:
    with ros_client("ct_gripper_client") as client:
        actions = {
            "gripper": ActionClient(
                client.node, GripperCommand, "/ct/gripper_controller/gripper_cmd"
            ),
            "stalling": ActionClient(
                client.node, GripperCommand, "/ct/stalling_gripper/gripper_cmd"
            ),
            "parallel": ActionClient(
                client.node, ParallelGripperCommand, "/ct/parallel_gripper/gripper_cmd"
            ),
            "pose": ActionClient(client.node, MoveToPose, "/ct/move_to_pose"),
        }
        for action in actions.values():
            assert wait_ready(action.server_is_ready, 10.0)
        client.actions = actions  # type: ignore[attr-defined]
        yield client


def command(position: float, max_effort: float = 0.0) -> GripperCommand.Goal:
    goal = GripperCommand.Goal()
    goal.command.position = position
    goal.command.max_effort = max_effort
    return goal


def send(client: Client, action: str, goal: Any, feedback: list | None = None) -> Any:  # type: ignore[type-arg]
    """The goal handle (accepted or not)."""
    future = client.actions[action].send_goal_async(  # type: ignore[attr-defined]
        goal,
        feedback_callback=None if feedback is None else (lambda m: feedback.append(m.feedback)),
    )
    assert client.spin_until(future.done, 5.0), "goal not answered"
    return future.result()


def outcome(client: Client, handle: Any, timeout: float = 15.0) -> tuple[int, Any]:
    """(goal status, result) of an accepted goal."""
    assert handle.accepted
    future = handle.get_result_async()
    assert client.spin_until(future.done, timeout), "no result"
    response = future.result()
    return response.status, response.result


def run(client: Client, action: str, goal: Any, timeout: float = 15.0) -> tuple[int, Any]:
    return outcome(client, send(client, action, goal), timeout)


def fingers(client: Client) -> np.ndarray:
    """The measured finger positions [m] of the latest /ct/joint_states."""
    client.spin_until(lambda: False, 0.1)
    message = client.joint_states[-1]
    index = {n: i for i, n in enumerate(message.name)}
    return np.array([message.position[index[n]] for n in FINGERS])


def test_open_and_close_on_nothing_reach_the_goal(client: Client) -> None:
    """Open (0.04 m), then close (0 m) with nothing between the fingers: each SUCCEEDED with
    reached_goal and not stalled, the result's position within goal_tolerance of the goal, and
    both fingers there as /ct/joint_states measures them (the right finger follows the left);
    the close's feedback (20 Hz) follows the left finger down."""
    for target in (0.04, 0.0):
        feedback: list = []  # type: ignore[type-arg]
        status, result = outcome(client, send(client, "gripper", command(target), feedback))
        assert status == GoalStatus.STATUS_SUCCEEDED
        assert result.reached_goal and not result.stalled
        assert abs(result.position - target) < TOLERANCE
        np.testing.assert_allclose(fingers(client), target, atol=TOLERANCE)
    assert len(feedback) >= 2, feedback
    positions = [f.position for f in feedback]
    assert positions[0] > positions[-1] and all(0.0 <= p <= 0.041 for p in positions)


def test_a_parallel_command_moves_at_its_velocity(client: Client) -> None:
    """ParallelGripperCommand from closed to 0.03 m at 0.05 m/s (half the default speed):
    SUCCEEDED, reached_goal, its result state naming the joint with its measured position, and
    it took at least the 0.4 s that 0.02 m (to within the tolerance) take at 0.05 m/s."""
    assert run(client, "gripper", command(0.0))[0] == GoalStatus.STATUS_SUCCEEDED
    goal = ParallelGripperCommand.Goal()
    goal.command.name = ["left_finger_joint"]
    goal.command.position = [0.03]
    goal.command.velocity = [0.05]
    started = time.monotonic()
    status, result = run(client, "parallel", goal)
    took = time.monotonic() - started
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert result.reached_goal and not result.stalled
    assert list(result.state.name) == ["left_finger_joint"]
    assert abs(result.state.position[0] - 0.03) < TOLERANCE
    assert took >= 0.02 / 0.05 * 0.95, took


def test_closing_on_the_cube_stalls_aborted_or_succeeded_as_allow_stalling_says(
    client: Client,
) -> None:
    """With the fingers open around the grasp scene's cube (MoveToPose, tool down at it), a
    close with max_effort 15 N stalls on it: ABORTED with allow_stalling false, SUCCEEDED with
    it true — both stalled, not reached_goal, after the 1 s stall_timeout, the finger at the
    cube's face (2.5 cm from the centre) pushing with the 15 N asked, not the 40 N it could.
    After the SUCCEEDED one the grip stays (the controller goes on commanding its goal, as the
    reference's): the arm lifts the cube 8 cm (MoveToPose) and puts it back, and the fingers'
    opening stays the cube's — a dropped cube would have let them close to 0."""
    assert run(client, "gripper", command(0.04))[0] == GoalStatus.STATUS_SUCCEEDED
    for z in (0.105, 0.025):
        status, result = run(client, "pose", MoveToPose.Goal(target=pose_message((0.5, 0.0, z))))
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    try:
        for action, expected in (
            ("gripper", GoalStatus.STATUS_ABORTED),
            ("stalling", GoalStatus.STATUS_SUCCEEDED),
        ):
            started = time.monotonic()
            status, result = run(client, action, command(0.0, 15.0))
            took = time.monotonic() - started
            assert status == expected, action
            assert result.stalled and not result.reached_goal
            assert took > 1.0
            assert abs(result.position - CUBE_HALF) < 0.004, result.position
            assert abs(abs(result.effort) - 15.0) < 1.5, result.effort
            if action == "stalling":
                # The opening (the two fingers' sum; the cube may slide between them: each
                # presses with 15 N) stays the cube's as it is lifted and put back.
                gripped = fingers(client).sum()
                assert abs(gripped - 2 * CUBE_HALF) < 0.008, gripped
                for z in (0.105, 0.025):
                    goal = MoveToPose.Goal(target=pose_message((0.5, 0.0, z)))
                    assert run(client, "pose", goal)[0] == GoalStatus.STATUS_SUCCEEDED
                    assert abs(fingers(client).sum() - gripped) < 0.003, fingers(client)
            assert run(client, "gripper", command(0.04))[0] == GoalStatus.STATUS_SUCCEEDED
    finally:
        run(client, "pose", MoveToPose.Goal(target=pose_message((0.5, 0.0, 0.105))))


def test_a_newer_goal_cancels_the_running_one_another_actions_aborts_it(client: Client) -> None:
    """A close preempted by an open on the same action ends CANCELED (as the reference's
    preempt_active_goal does) and the open SUCCEEDS; a close preempted by a MoveJoints goal
    (one motion goal at a time across every action) ends ABORTED, and its command stays on the
    fingers through the arm's motion (a ros2_control gripper controller runs beside the arm's):
    they end closed."""
    assert run(client, "gripper", command(0.04))[0] == GoalStatus.STATUS_SUCCEEDED
    first = send(client, "gripper", command(0.0))
    client.spin_until(lambda: False, 0.1)
    second = send(client, "gripper", command(0.04))
    assert outcome(client, first)[0] == GoalStatus.STATUS_CANCELED
    assert outcome(client, second)[0] == GoalStatus.STATUS_SUCCEEDED
    closing = send(client, "gripper", command(0.0))
    client.spin_until(lambda: False, 0.1)
    arm = client.send(joint_goal(ARM, HOME.tolist(), 0.5))
    assert outcome(client, closing)[0] == GoalStatus.STATUS_ABORTED
    assert client.result(arm).error_code == MoveJoints.Result.SUCCESS
    np.testing.assert_allclose(fingers(client), 0.0, atol=TOLERANCE)


def test_cancel_stops_the_fingers_where_they_are(client: Client) -> None:
    """A close canceled 0.1 s after it started ends CANCELED; the fingers stop short of the
    goal and stay where they stopped (within 2 mm over the next 0.5 s)."""
    assert run(client, "gripper", command(0.04))[0] == GoalStatus.STATUS_SUCCEEDED
    handle = send(client, "gripper", command(0.0))
    client.spin_until(lambda: False, 0.1)
    cancel = handle.cancel_goal_async()
    assert client.spin_until(cancel.done, 5.0)
    assert outcome(client, handle)[0] == GoalStatus.STATUS_CANCELED
    client.spin_until(lambda: False, 0.2)
    stopped = fingers(client)
    assert np.all(stopped > 0.015), stopped
    client.spin_until(lambda: False, 0.5)
    np.testing.assert_allclose(fingers(client), stopped, atol=2e-3)


def parallel(
    names: list[str], positions: list[float], velocities: list[float], efforts: list[float]
) -> ParallelGripperCommand.Goal:
    goal = ParallelGripperCommand.Goal()
    goal.command.name = names
    goal.command.position = positions
    goal.command.velocity = velocities
    goal.command.effort = efforts
    return goal


BAD_GOALS = [
    ("gripper", command(math.nan), "position must be a finite number"),
    ("gripper", command(-0.01), "outside the range of 'left_finger_joint'"),
    ("gripper", command(0.05), "outside the range"),
    ("gripper", command(0.02, 100.0), "command.max_effort 100 is above 40"),
    ("gripper", command(0.02, -5.0), "command.max_effort must be finite and >= 0"),
    ("gripper", command(0.02, 1.0), "command.max_effort 1 is below"),
    ("parallel", parallel([], [0.01, 0.02], [], []), "command.position must hold 1 value"),
    ("parallel", parallel(["wrist"], [0.01], [], []), "'wrist' is not this controller's joint"),
    ("parallel", parallel([], [0.01], [0.5], []), "above the URDF velocity limit"),
    ("parallel", parallel([], [0.01], [], [50.0]), "command.effort 50 is above 40"),
]


BAD_IDS = [
    "nan",
    "negative",
    "above-range",
    "effort-above-limit",
    "negative-effort",
    "effort-below-servo",
    "parallel-two-positions",
    "parallel-unknown-joint",
    "parallel-velocity-above-limit",
    "parallel-effort-above-limit",
]


@pytest.mark.parametrize(("action", "goal", "words"), BAD_GOALS, ids=BAD_IDS)
def test_bad_goals_are_rejected_naming_the_problem_and_move_nothing(
    client: Client, node: NodeProcess, action: str, goal: Any, words: str
) -> None:
    """Each bad goal is rejected (the goal response; these results carry no message: the
    node's log names the problem) and the fingers do not move."""
    before = fingers(client)
    seen = len(node.lines)
    handle = send(client, action, goal)
    assert not handle.accepted

    def said() -> list[str]:
        return [line for line in node.lines[seen:] if words in line]

    assert client.spin_until(lambda: bool(said()), 3.0), words
    line = said()[0]
    assert "goal rejected" in line
    np.testing.assert_allclose(fingers(client), before, atol=1e-3)


def test_a_burst_of_goals_is_answered_in_full(client: Client, node: NodeProcess) -> None:
    """50 goals sent at once, alternately bad (rejected) and good: every one is answered; each
    good one ends CANCELED (a newer goal of the action took over) or SUCCEEDED (the one started
    last, or one already there) — none ABORTED — and the fingers end at a succeeded one's
    position."""
    futures = []
    targets = [0.05 if k % 2 == 0 else (0.04 if k % 4 == 1 else 0.0) for k in range(50)]
    for target in targets:
        goal = command(target)
        futures.append(client.actions["gripper"].send_goal_async(goal))  # type: ignore[attr-defined]
    assert client.spin_until(lambda: all(f.done() for f in futures), 20.0)
    handles = [f.result() for f in futures]
    assert [h.accepted for h in handles] == [k % 2 == 1 for k in range(50)]
    accepted = [h for h in handles if h.accepted]
    results = [h.get_result_async() for h in accepted]
    assert client.spin_until(lambda: all(r.done() for r in results), 30.0)
    statuses = [r.result().status for r in results]
    # The executor's threads take the goals in no set order: the one started last succeeds;
    # each other is canceled by the next, unless it reached its goal first (already there:
    # the reference's check succeeds on the first sample). None is ABORTED.
    assert set(statuses) <= {GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_SUCCEEDED}, statuses
    assert GoalStatus.STATUS_CANCELED in statuses and GoalStatus.STATUS_SUCCEEDED in statuses
    good = [t for k, t in enumerate(targets) if k % 2 == 1]
    succeeded = GoalStatus.STATUS_SUCCEEDED
    reached = {t for t, status in zip(good, statuses, strict=True) if status == succeeded}
    position = fingers(client)
    assert any(np.allclose(position, t, atol=TOLERANCE) for t in reached), (position, reached)


def test_zz_a_running_goal_gets_its_result_at_shutdown(client: Client, node: NodeProcess) -> None:
    """(Last: it stops the module's node.) A ParallelGripperCommand closing at 1 mm/s (40 s) is
    running when the node gets SIGINT: its result arrives, ABORTED, and the node exits 0."""
    import signal

    assert run(client, "gripper", command(0.04))[0] == GoalStatus.STATUS_SUCCEEDED
    handle = send(client, "parallel", parallel([], [0.0], [0.001], []))
    assert handle.accepted
    client.spin_until(lambda: False, 0.5)
    node.send_signal(signal.SIGINT)
    status, _ = outcome(client, handle, timeout=10.0)
    assert status == GoalStatus.STATUS_ABORTED
    assert node.wait(15) == 0
