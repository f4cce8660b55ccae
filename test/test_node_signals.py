"""Signals to the real node (a separate process in its own process group, as launch starts it;
real DDS on loopback) while a goal of each action runs: the goal ends with a result, the node
exits 0 with its summary, no traceback and no nanobind leak report, within SHUTDOWN_BOUND. And
a double Ctrl-C under launch, repeated: the node always exits with its own code, never by the
signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from ct_interfaces.action import Grasp, MoveJoints, MoveToPose
from rclpy.action import ActionClient
from rclpy.node import Node
from ros_helpers import (
    ARM,
    HOME,
    NodeProcess,
    goal,
    pose_message,
    ros_client,
    stop_node,
    wait_ready,
)
from rosgraph_msgs.msg import Clock

from ct_controllers.launch_plan import launch_plan

SHUTDOWN_BOUND = 5.0  # [s] from the signal to the process's exit
BRINGUP = Path(sys.executable).with_name("ct-bringup")  # the venv's console script


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
    "grasp-SIGINT": (Grasp, "/ct/grasp", _grasp_goal, [signal.SIGINT]),
}


@pytest.mark.parametrize("case", list(SHUTDOWN_CASES))
def test_a_signal_mid_goal_aborts_it_with_a_result_and_exits_cleanly(case):
    """SIGTERM, SIGINT, or SIGINT twice in a row (a terminal's Ctrl-C, then launch's own), to the
    node's process group while a goal runs: the goal ends ABORTED with FAULT "node shutting
    down", the node exits 0 within 5 s, prints its exit summary, no traceback and no nanobind
    leak report (a running MoveToPose's or Grasp's ``ruckig.Trajectory`` outlived the
    interpreter: "nanobind: leaked 1 instances!", "leaked 11 types", ...); the goal was logged
    once when it arrived and once when it ended, and nothing else per goal."""
    action_type, name, make_goal, signals = SHUTDOWN_CASES[case]
    # `ct-bringup sim`, as users start it (the node's main() in the console script's process:
    # there, not under `python -m`, a trajectory left at exit was reported by nanobind), in a
    # process group of its own, as launch gives it.
    process = NodeProcess([str(BRINGUP), "sim"], start_new_session=True)
    try:
        with ros_client(f"ct_signal_client_{case.replace('-', '_')}") as client:
            action = ActionClient(client.node, action_type, name)
            assert wait_ready(action.server_is_ready, 10.0)
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
        assert "nanobind" not in output, output
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


# --- a double Ctrl-C under launch, many times ---------------------------------------------------
SIGINT_GAPS = (0.05, 0.3, 1.0)  # [s] from the terminal's SIGINT to launch's own
# The gaps in turn. Issue 23 asked for >= 20 runs (seen before its fix: exit -2 in 1 of 5 runs
# at 0.3 s) and was shown with 21; the suite runs 9 (3 per gap: a 1-in-5 failure at 0.3 s is
# caught with p ≈ 0.5 per run of the suite, a 1-in-2 one with p ≈ 0.9) — each run starts the
# node, 166 s for 21 on a loaded machine. CT_DOUBLE_SIGINT_RUNS=21 runs the count.
DOUBLE_SIGINT_RUNS = int(os.environ.get("CT_DOUBLE_SIGINT_RUNS", "9"))
START_BOUND = 60.0  # [s] from the start to the node's first /clock (a loaded 2-core machine)
REPOSITORY = Path(__file__).resolve().parents[1]


def test_a_double_sigint_under_launch_never_ends_the_node_by_the_signal(tmp_path, monkeypatch):
    """The node started as launch_ros starts it (the installed executable found through the
    ament index, one ``--ros-args`` section with the params file and the name remaps, from a
    directory outside the tree, in its own process group), then SIGINT to the group twice,
    0.05, 0.3 or 1 s apart (a terminal's Ctrl-C, then launch's own), in turn, 9 times: every
    run ends with the node's normal exit code 0, its summary printed and no traceback — never by
    the signal (exit -2: a SIGINT that arrived while the interpreter was finalizing, when CPython
    has put SIGINT back to its default action). Each run's node is brought up to its first
    /clock message, so the signals meet a running node."""
    # The venv as the ament prefix, as a sourced workspace sets it (`make test` does not).
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(Path(sys.executable).parents[1]))
    plan = launch_plan("sim", config=str(REPOSITORY / "config" / "controllers.yaml"))
    command = plan.command()
    environment = plan.child_environment(os.environ)
    rclpy.init()
    watcher = Node("ct_double_sigint_watcher")
    outcomes: list[tuple[float, int | None, float]] = []  # gap [s], exit code, stop time [s]
    try:
        for run in range(DOUBLE_SIGINT_RUNS):
            gap = SIGINT_GAPS[run % len(SIGINT_GAPS)]
            # A subscription of this run's own: the previous node's last messages, still
            # queued in the previous one, must not pass for this node being up.
            clocks: list[Clock] = []
            subscription = watcher.create_subscription(Clock, "/clock", clocks.append, 10)
            log = tmp_path / f"node_{run}.log"
            with open(log, "w") as output:
                process = subprocess.Popen(
                    command,
                    cwd=tmp_path,
                    env=environment,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            try:
                deadline = time.monotonic() + START_BOUND
                while not clocks and time.monotonic() < deadline and process.poll() is None:
                    rclpy.spin_once(watcher, timeout_sec=0.05)
                assert clocks, f"run {run}: no /clock: {log.read_text()}"
                os.killpg(process.pid, signal.SIGINT)
                signalled = time.monotonic()
                time.sleep(gap)
                if process.poll() is None:  # a gap longer than the stop: nothing to signal
                    os.killpg(process.pid, signal.SIGINT)
                process.wait(SHUTDOWN_BOUND + gap)
            finally:
                stop_node(process)
                watcher.destroy_subscription(subscription)
            outcomes.append((gap, process.returncode, round(time.monotonic() - signalled, 2)))
            text = log.read_text()
            assert process.returncode == 0, f"run {run} (gap {gap} s): {outcomes}\n{text}"
            assert "Traceback" not in text and "nanobind" not in text, text
            assert "ticks" in text and "overruns" in text, text
    finally:
        watcher.destroy_node()
        rclpy.shutdown()
    print(f"{len(outcomes)} double SIGINTs (gap [s], exit code, stop [s]): {outcomes}")
