"""MoveToPose's ``controller`` field over the real node process (MuJoCo in real time, real
rclpy, loopback DDS), with a Cartesian impedance instance ``cart`` loaded beside the joint laws:
named, the pose goes straight to it — no differential IK runs — and is reached within the goal's
tolerances; an unknown name is refused before anything moves."""

from __future__ import annotations

import math
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from ct_interfaces.action import MoveToPose
from rclpy.action import ActionClient
from ros_helpers import CONFIG, Client, pose_message, ros_client, start_node, stop_node, wait_ready

from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel

MODEL = RobotModel(load_description().urdf, CONFIG.tcp_frame, CONFIG.base_frame)
Result = MoveToPose.Result


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """A client of the node running the bundled configuration plus ``cart``, a Cartesian
    impedance instance of its type's defaults (the joint impedance stays selected)."""
    document = yaml.safe_load(
        (Path(__file__).parents[1] / "config" / "controllers.yaml").read_text()
    )
    params = document["/**/controller_manager"]["ros__parameters"]
    params["controllers"] = [*params["controllers"], "cart"]
    params["cart"] = {"type": "ct_controllers/CartesianImpedance"}
    path = tmp_path_factory.mktemp("cart") / "controllers.yaml"
    path.write_text(yaml.safe_dump(document))
    node = start_node("--ros-args", "--params-file", str(path))
    try:
        with ros_client("ct_pose_controller_client") as client:
            action = ActionClient(client.node, MoveToPose, "/ct/move_to_pose")
            assert wait_ready(action.server_is_ready, 10.0)
            client.move_to_pose = action  # type: ignore[attr-defined]
            yield client
    finally:
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=15)
        stop_node(node)


def _measured_q(client: Client) -> np.ndarray:
    message = client.joint_states[-1]
    index = {n: i for i, n in enumerate(message.name)}
    return np.array([message.position[index[n]] for n in MODEL.joint_names])


def _quaternion(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """Rotation matrix → (x, y, z, w) (independent of the node's code: Eigen through
    Pinocchio's SE3 would be the node's own)."""
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
    return x, y, z, w


def _goal(client: Client, offset: tuple[float, float, float], controller: str) -> Any:
    """A goal ``offset`` [m] from the measured TCP, orientation kept, 1 mm / 0.01 rad."""
    start = MODEL.frame_pose(_measured_q(client))
    return MoveToPose.Goal(
        target=pose_message(tuple(start[:3, 3] + offset), _quaternion(start[:3, :3])),
        position_tolerance=0.001,
        orientation_tolerance=0.01,
        timeout=8.0,
        controller=controller,
    )


def _send(client: Client, goal: Any) -> Any:
    future = client.move_to_pose.send_goal_async(goal)  # type: ignore[attr-defined]
    assert client.spin_until(future.done, 5.0)
    return client.result(future.result(), 20.0)


def test_an_unknown_controller_is_refused_and_nothing_moves(client: Client) -> None:
    """controller "nope": INVALID_GOAL naming it and the loaded ones; nothing is commanded —
    the loop's joint reference stays the same in every controller state published meanwhile,
    no chain is installed (the active controller stays the selected one) — and the arm's joints
    stay within 1 mrad of where they were (0.4 mrad: the settling the node starts with)."""
    client.wait_at_rest()
    before = _measured_q(client)
    client.controller_states.clear()
    result = _send(client, _goal(client, (0.0, 0.0, -0.05), "nope"))
    assert result.error_code == Result.INVALID_GOAL, result.message
    assert "'nope'" in result.message and "cart" in result.message
    assert "joint_impedance" in result.message
    client.spin_until(lambda: False, 0.3)
    states = client.controller_states
    assert states
    assert all(list(state.desired) == list(states[0].desired) for state in states)
    assert {name for state in states for name in state.active_controllers} == {"joint_impedance"}
    assert np.abs(_measured_q(client) - before).max() < 1e-3


def test_named_cartesian_impedance_reaches_the_pose_without_a_differential_ik(
    client: Client,
) -> None:
    """controller "cart": SUCCESS; the published joint states then put the TCP within 1 mm /
    0.01 rad of the target (an independent FK of the measured joints); while the goal ran the
    active controller was the pose straight to cart ("pose → cart"), never a chain with a
    differential IK; afterwards the selected joint impedance runs again."""
    client.wait_at_rest()
    goal = _goal(client, (0.04, -0.03, -0.05), "cart")
    client.controller_states.clear()
    result = _send(client, goal)
    assert result.error_code == Result.SUCCESS, result.message
    p, o = goal.target.pose.position, goal.target.pose.orientation
    target = np.array([p.x, p.y, p.z])
    reached = MODEL.frame_pose(_measured_q(client))
    assert np.linalg.norm(reached[:3, 3] - target) <= 0.001
    x, y, z, w = _quaternion(reached[:3, :3])
    assert 2 * math.acos(min(1.0, abs(x * o.x + y * o.y + z * o.z + w * o.w))) <= 0.01
    active = [name for state in client.controller_states for name in state.active_controllers]
    assert "pose → cart" in active, sorted(set(active))
    assert not any("diff_ik" in name for name in active), sorted(set(active))
    assert client.spin_until(
        lambda: client.controller_states[-1].active_controllers == ["joint_impedance"], 2.0
    )
