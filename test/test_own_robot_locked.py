"""A robot whose URDF has movable joints the stack does not drive — the Tiago of
example-robot-data, its wheels, head and hand locked by ct-setup — through the real node. A
module of its own: test_own_robot.py keeps rclpy initialised in its process for its
module-scoped clients."""

from __future__ import annotations

import contextlib
import io
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
from ct_interfaces.action import MoveJoints
from ros_helpers import Client, ros_client, start_node, stop_node
from ros_helpers import goal as joint_goal

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.config import load_config
from ct_controllers.setup_assistant.cli import main as setup_main

JOINT_TOLERANCE = 0.02  # [rad | m] measured, at rest, after SUCCESS (test_own_robot's)


def _quietly(function: Any, argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = function(argv)
    return code, out.getvalue()


def _positions(client: Client, names: tuple[str, ...]) -> np.ndarray:
    message = client.joint_states[-1]
    index = {n: i for i, n in enumerate(message.name)}
    return np.array([message.position[index[n]] for n in names])


def test_a_robot_with_locked_joints_moves_through_the_node(tmp_path: Path) -> None:
    """The Tiago (ct-setup with its hand not driven: wheels, head and hand locked) through the
    real node: /ct/joint_states carries its 8 driven joints and no locked one; /robot_description
    is its URDF with the locked joints fixed (what TF and robot_state_publisher then use);
    MoveJoints of the torso lift (prismatic, +5 cm) and the first arm joint (+0.2 rad) ends
    SUCCESS, the published joints at rest within JOINT_TOLERANCE of the goal."""
    from std_msgs.msg import String

    from ct_controllers.ros.tf_publisher import latched_qos

    urdf = example_robot_path("tiago_description/robots/tiago.urdf")
    code, printed = _quietly(
        setup_main, [str(urdf), "-o", str(tmp_path), "--gripper", "", "--tcp", "hand_tool_link"]
    )
    assert code == 0, printed
    config = load_config(tmp_path / "controllers.yaml")
    process = start_node("--config", str(tmp_path / "controllers.yaml"))
    try:
        with ros_client("ct_own_locked") as client:
            descriptions: list[String] = []
            client.node.create_subscription(
                String, "/robot_description", descriptions.append, latched_qos()
            )
            assert client.spin_until(lambda: bool(descriptions), 10.0), "no /robot_description"
            types = {
                j.get("name"): j.get("type")
                for j in ET.fromstring(descriptions[-1].data).findall("joint")
            }
            assert types["head_1_joint"] == "fixed" and types["wheel_left_joint"] == "fixed"
            client.wait_at_rest()
            assert list(client.joint_states[-1].name) == list(config.joint_names)
            home = dict(zip(config.joint_names, config.home_positions, strict=True))
            names = ["torso_lift_joint", "arm_1_joint"]
            target = [home["torso_lift_joint"] + 0.05, home["arm_1_joint"] + 0.2]
            result = client.send_to(client.move_joints, joint_goal(names, target, 2.0))
            assert result is not None and result.error_code == MoveJoints.Result.SUCCESS, result
            client.wait_at_rest()
            error = np.abs(_positions(client, tuple(names)) - np.array(target))
            assert np.max(error) < JOINT_TOLERANCE, error
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the node said: {''.join(process.lines)[-3000:]}") from exc
    finally:
        stop_node(process)
