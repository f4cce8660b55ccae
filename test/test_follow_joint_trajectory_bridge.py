"""FollowJointTrajectory through the node on the ros2_control bridge backend, against the plant
process (a module of its own: the node is `/ct/controller_manager` as the MuJoCo one of
test_follow_joint_trajectory, which must not be running meanwhile)."""

from __future__ import annotations

from pathlib import Path

from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient
from ros_helpers import ARM, bridge_node, moveit_trajectory, ros_client, wait_ready
from test_follow_joint_trajectory import CONTROLLER, send, target


def test_a_goal_as_moveit_sends_it_succeeds_on_the_ros2_control_bridge(tmp_path: Path) -> None:
    """The node on the ros2_control bridge backend (100 Hz, the slow-loop gains) against the
    plant process over loopback DDS: the same MoveIt-shaped goal SUCCEEDED, and the plant's own
    joint positions within 0.012 rad of the last point (the loop-level runs on every backend
    and interface are in test_backend_interfaces)."""
    with (
        bridge_node(tmp_path, "ct_trajectory_bridge") as (_, plant),
        ros_client("ct_trajectory_bridge_client") as bridge,
    ):
        action = ActionClient(
            bridge.node, FollowJointTrajectory, f"{CONTROLLER}/follow_joint_trajectory"
        )
        assert wait_ready(action.server_is_ready, 10.0)
        bridge.trajectory = action  # type: ignore[attr-defined]
        start, goal = target(bridge, {"joint1": 0.3, "joint4": -0.2, "joint6": 0.2})
        status, result, _ = send(
            bridge, FollowJointTrajectory.Goal(trajectory=moveit_trajectory(start, goal, 1.5))
        )
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        true = plant.report()["position"]
        for name, value in zip(ARM, goal, strict=True):
            assert abs(true[name] - value) < 0.012, (name, true[name], value)
