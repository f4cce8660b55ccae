"""An arm without a gripper (the UR5 of example-robot-data, configured by ct-setup with
``gripper_joints: []``) on the real node: a Grasp goal is refused at the goal check with
INVALID_GOAL and a message saying the robot has no gripper, nothing moves, and MoveJoints still
works on the same node afterwards.

Cost: one ct-setup, one node process (MuJoCo), one Grasp goal, one short MoveJoints goal.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from ct_interfaces.action import Grasp, MoveJoints
from rclpy.action import ActionClient
from ros_helpers import Client, goal, pose_message, ros_client, start_node, stop_node, wait_ready

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.chains.grasp_goal import no_gripper_refusal
from ct_controllers.config import StackConfig, load_config
from ct_controllers.setup_assistant.cli import main as setup_main

STEP = 0.1  # [rad] the MoveJoints goal: the last arm joint this far from home
TOLERANCE = 0.02  # [rad] reached, at rest (as test_own_robot)
STILL = 1e-3  # [rad] "nothing moved" after the refused Grasp


def _ur5() -> Path:
    return example_robot_path("ur_description/urdf/ur5_robot.urdf")


@pytest.fixture(scope="module")
def config_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ur5")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = setup_main([str(_ur5()), "-o", str(out)])
    assert code == 0, printed.getvalue()
    return out / "controllers.yaml"


@pytest.fixture(scope="module")
def config(config_path: Path) -> StackConfig:
    loaded = load_config(config_path)
    assert loaded.gripper_joints == ()  # the premise: ct-setup found no gripper on the UR5
    return loaded


@pytest.fixture(scope="module")
def client(config_path: Path, config: StackConfig) -> Iterator[Client]:
    process = start_node("--config", str(config_path))
    try:
        with ros_client("ct_no_gripper") as client:
            client.grasp = ActionClient(client.node, Grasp, "/ct/grasp")  # type: ignore[attr-defined]
            assert wait_ready(client.grasp.server_is_ready, 10.0)  # type: ignore[attr-defined]
            yield client
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the node said: {''.join(process.lines)[-3000:]}") from exc
    finally:
        stop_node(process)


def _positions(client: Client, names: tuple[str, ...]) -> np.ndarray:
    message = client.joint_states[-1]
    index = {n: i for i, n in enumerate(message.name)}
    return np.array([message.position[index[n]] for n in names])


def test_refusal_only_without_a_gripper() -> None:
    """The refusal names the missing gripper for an empty gripper list and is None for any
    gripper (one finger or two)."""
    message = no_gripper_refusal(())
    assert message is not None and "no gripper" in message and "gripper_joints" in message
    assert no_gripper_refusal(("finger",)) is None
    assert no_gripper_refusal(("left", "right")) is None


def test_the_grasp_bench_refuses_it_with_the_actions_message(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ct-bench grasp --config`` of the UR5 exits 2 with the Grasp action's no-gripper
    message, before any trial (its trials used to run and time out in APPROACH, 6 s each)."""
    from ct_controllers.bench.grasp import main as grasp_bench

    code = grasp_bench(["--config", str(config_path), "--trials", "2"])
    printed = capsys.readouterr()
    assert code == 2
    assert printed.err.strip() == f"ct-bench grasp: {no_gripper_refusal(())}"
    assert "success" not in printed.out


def test_grasp_is_refused_and_nothing_moves(config: StackConfig, client: Client) -> None:
    """A well-formed Grasp goal on the UR5 ends INVALID_GOAL with the no-gripper message (the
    goal check, before any phase: no final phase, no checks) and the arm stays where it was."""
    client.wait_at_rest()
    before = _positions(client, config.arm_joints)
    request = Grasp.Goal(
        grasp_pose=pose_message((0.4, 0.0, 0.1), frame=config.base_frame),
        approach_offset=0.1,
        lift_height=0.05,
        grasp_effort=10.0,
        hold_duration=0.5,
    )
    future = client.grasp.send_goal_async(request)  # type: ignore[attr-defined]
    assert client.spin_until(future.done, 5.0), "goal not answered"
    result = client.result(future.result(), 10.0)
    assert result.error_code == Grasp.Result.INVALID_GOAL, result
    assert result.message == no_gripper_refusal(config.gripper_joints), result.message
    assert result.final_phase == "" and list(result.checks) == []
    client.spin_until(lambda: False, 0.5)
    assert np.max(np.abs(_positions(client, config.arm_joints) - before)) < STILL


def test_move_joints_works_without_a_gripper(config: StackConfig, client: Client) -> None:
    """After the refusal the same node runs MoveJoints on the arm: SUCCESS, the last joint at
    rest within TOLERANCE of its goal (home + STEP)."""
    client.wait_at_rest()
    arm = list(config.arm_joints)
    target = np.array(config.home_positions[: len(arm)])
    target[-1] += STEP
    handle = client.send(goal(arm, target.tolist(), duration=1.0))
    assert handle.accepted
    result = client.result(handle, 20.0)
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message
    client.wait_at_rest()
    assert np.max(np.abs(_positions(client, config.arm_joints) - target)) < TOLERANCE
