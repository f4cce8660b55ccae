"""Shared by sim.launch.py and hardware.launch.py (a real ROS 2 Jazzy install with launch_ros)."""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from ct_controllers.ros.dds import PROFILE


def generate(backend: str, use_sim_time: bool) -> LaunchDescription:
    share = get_package_share_directory("ct_controllers")
    profile = str(PROFILE)
    arguments = [
        DeclareLaunchArgument(
            "backend", default_value=backend, description="mujoco | ros2_control_bridge | canopen"
        ),
        DeclareLaunchArgument(
            "robot_description",
            default_value="",
            description="URDF/xacro path; empty = the bundled ct_arm",
        ),
        DeclareLaunchArgument("use_sim_time", default_value=str(use_sim_time).lower()),
        DeclareLaunchArgument(
            "config", default_value=os.path.join(share, "config", "controllers.yaml")
        ),
        DeclareLaunchArgument(
            "dds_network",
            default_value="0",
            description="1 = let DDS use the network (default: loopback only)",
        ),
    ]
    loopback = [
        SetEnvironmentVariable("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp"),
        SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE", "SYSTEM_DEFAULT"),
        SetEnvironmentVariable("FASTRTPS_DEFAULT_PROFILES_FILE", profile),
        SetEnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE", profile),
        SetEnvironmentVariable("CT_DDS_NETWORK", LaunchConfiguration("dds_network")),
    ]
    node = Node(
        package="ct_controllers",
        executable="ct_control_node",
        name="controller_manager",
        namespace="ct",
        output="screen",
        parameters=[
            LaunchConfiguration("config"),
            {
                "backend": LaunchConfiguration("backend"),
                "robot_description": LaunchConfiguration("robot_description"),
                "use_sim_time": LaunchConfiguration("use_sim_time"),
            },
        ],
    )
    return LaunchDescription([*arguments, *loopback, node])
