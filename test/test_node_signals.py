"""Signals to the real node (a separate process in its own process group, as launch starts it;
real DDS on loopback) while a goal of each action runs: the goal ends with a result, the node
exits 0 with its summary, no traceback, within SHUTDOWN_BOUND."""

from __future__ import annotations

import os
import signal
import time

import pytest
from action_msgs.msg import GoalStatus
from ct_interfaces.action import Grasp, MoveJoints, MoveToPose
from rclpy.action import ActionClient
from ros_helpers import ARM, HOME, goal, pose_message, ros_client, start_node, stop_node

SHUTDOWN_BOUND = 5.0  # [s] from the signal to the process's exit


def _grasp_goal() -> Grasp.Goal:
    return Grasp.Goal(
        grasp_pose=pose_message((0.5, 0.0, 0.025)),
        approach_offset=0.08,
        lift_height=0.1,
        grasp_effort=20.0,
        hold_duration=5.0,
    )


def _away_goal() -> MoveJoints.Goal:
    away = HOME.copy()
    away[0] += 1.0
    return goal(ARM, away.tolist(), 10.0)


SHUTDOWN_CASES = {
    "move_joints-SIGTERM": (MoveJoints, "/ct/move_joints", _away_goal, [signal.SIGTERM]),
    "move_joints-SIGINTx2": (
        MoveJoints,
        "/ct/move_joints",
        _away_goal,
        [signal.SIGINT, signal.SIGINT],
    ),
    "move_to_pose-SIGINTx2": (
        MoveToPose,
        "/ct/move_to_pose",
        lambda: MoveToPose.Goal(target=pose_message((0.45, 0.2, 0.3)), timeout=30.0),
        [signal.SIGINT, signal.SIGINT],
    ),
    "grasp-SIGTERM": (Grasp, "/ct/grasp", _grasp_goal, [signal.SIGTERM]),
}


@pytest.mark.parametrize("case", list(SHUTDOWN_CASES))
def test_a_signal_mid_goal_aborts_it_with_a_result_and_exits_cleanly(case):
    """SIGTERM, or SIGINT twice in a row (a terminal's Ctrl-C, then launch's own), to the node's
        process group while a goal runs: the goal ends ABORTED with FAULT "node shutting down", the
        node exits 0 within 5 s, prints its exit summary and no traceback; the goal was logged once
    when it arrived and once when it ended, and nothing else per goal."""
    action_type, name, make_goal, signals = SHUTDOWN_CASES[case]
    process = start_node(start_new_session=True)  # its own process group, as launch gives it
    try:
        with ros_client(f"ct_signal_client_{case.replace('-', '_')}") as client:
            action = ActionClient(client.node, action_type, name)
            assert action.wait_for_server(timeout_sec=10.0)
            future = action.send_goal_async(make_goal())
            assert client.spin_until(future.done, 10.0)
            handle = future.result()
            assert handle.accepted
            result = handle.get_result_async()
            client.spin_until(lambda: False, 0.5)  # the goal is running
            assert not result.done()
            for signum in signals:
                os.killpg(process.pid, signum)
                time.sleep(0.05)
            signalled = time.monotonic()
            assert client.spin_until(result.done, SHUTDOWN_BOUND), "no result before exit"
            response = result.result()
            assert response.status == GoalStatus.STATUS_ABORTED
            assert response.result.error_code == action_type.Result.FAULT
            assert response.result.message == "node shutting down"
        output, _ = process.communicate(timeout=SHUTDOWN_BOUND)
        exited = time.monotonic() - signalled
        assert process.returncode == 0, output
        assert exited < SHUTDOWN_BOUND, exited
        assert "Traceback" not in output, output
        assert "ticks" in output and "overruns" in output, output
        # The goal was logged when it arrived and when it ended (code, duration, message).
        goal_lines = [
            line for line in output.splitlines() if f"{action_type.__name__} goal" in line
        ]
        assert any("received:" in line for line in goal_lines), output
        assert any(
            "ended FAULT after" in line and "node shutting down" in line for line in goal_lines
        )
        assert len(goal_lines) == 2, goal_lines
    finally:
        stop_node(process)
