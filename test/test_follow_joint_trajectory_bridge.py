"""FollowJointTrajectory through the node on the ros2_control bridge backend, against the plant
process (a module of its own: the node is `/ct/controller_manager` as the MuJoCo one of
test_follow_joint_trajectory, which must not be running meanwhile)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient
from ros_helpers import ARM, NodeProcess, moveit_trajectory, ros_client, stop_node
from test_follow_joint_trajectory import CONTROLLER, send, target

from ct_controllers.config import default_config_path, load_config
from ct_controllers.sim.gains import SLOW_LOOP_GAINS
from ct_controllers.sim.ros2_control_plant import PlantProcess


def test_a_goal_as_moveit_sends_it_succeeds_on_the_ros2_control_bridge(tmp_path: Path) -> None:
    """The node on the ros2_control bridge backend (100 Hz, the slow-loop gains) against the
    plant process over loopback DDS: the same MoveIt-shaped goal SUCCEEDED, and the plant's own
    joint positions within 0.012 rad of the last point (the loop-level runs on every backend
    and interface are in test_backend_interfaces)."""
    topics = f"/ct_trajectory_bridge_{os.getpid()}"
    parameters: dict[str, Any] = {
        "hardware.armed": True,
        "update_rate": 100,
        "ros2_control_bridge.joint_states_topic": f"{topics}/joint_states",
        "ros2_control_bridge.command_topic": f"{topics}/commands",
        "watchdog.state_timeout": 0.2,
        "watchdog.command_timeout": 0.2,
        **SLOW_LOOP_GAINS,
    }
    overrides = tmp_path / "bridge.yaml"
    overrides.write_text(yaml.safe_dump({"/**": {"ros__parameters": parameters}}))
    config = load_config()
    plant = PlantProcess(f"{topics}/joint_states", f"{topics}/commands", list(config.joint_names))
    command = [sys.executable, "-m", "ct_controllers.ros.control_node", "--target", "hardware"]
    bundled = str(default_config_path())
    node = NodeProcess(
        [*command, "--ros-args", "--params-file", bundled, "--params-file", str(overrides)]
    )
    try:
        with ros_client("ct_trajectory_bridge_client") as bridge:
            action = ActionClient(
                bridge.node, FollowJointTrajectory, f"{CONTROLLER}/follow_joint_trajectory"
            )
            assert action.wait_for_server(timeout_sec=10.0)
            bridge.trajectory = action  # type: ignore[attr-defined]
            start, goal = target(bridge, {"joint1": 0.3, "joint4": -0.2, "joint6": 0.2})
            status, result, _ = send(
                bridge, FollowJointTrajectory.Goal(trajectory=moveit_trajectory(start, goal, 1.5))
            )
            assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
            true = plant.report()["position"]
            for name, value in zip(ARM, goal, strict=True):
                assert abs(true[name] - value) < 0.012, (name, true[name], value)
    finally:
        stop_node(node)
        plant.stop()
