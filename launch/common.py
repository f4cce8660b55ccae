"""Shared by sim.launch.py and hardware.launch.py (a ROS 2 Jazzy install with launch_ros).

Every decision (which executable, the node's name and namespace, its parameter file and
parameters, the clock topic, the environment with or without ``dds_network``) is
``ct_controllers.launch_plan.launch_plan``'s, a plain function that the tests run too; this
file only turns the plan into launch actions, and ends the launch when the node ends, with the
reason in one error line.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from launch import LaunchContext, LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
    Shutdown,
    UnsetEnvironmentVariable,
)
from launch.event_handlers import OnProcessExit, OnProcessIO
from launch.logging import get_logger
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import Parameter

from ct_controllers.launch_plan import TARGETS, exit_message, launch_plan


def generate(target: str) -> LaunchDescription:
    """The launch description of ``target`` (``sim`` | ``hardware``)."""
    defaults = TARGETS[target]
    arguments = [
        DeclareLaunchArgument(
            "backend",
            default_value=defaults.backend,
            description="mujoco | ros2_control_bridge | canopen",
        ),
        DeclareLaunchArgument(
            "robot_description",
            default_value="",
            description="URDF/xacro path; empty = the bundled ct_arm",
        ),
        DeclareLaunchArgument("use_sim_time", default_value=str(defaults.use_sim_time).lower()),
        DeclareLaunchArgument(
            "config",
            default_value="",
            description="controllers.yaml; empty = the installed config/controllers.yaml",
        ),
        DeclareLaunchArgument(
            "namespace",
            default_value="ct",
            description="the node's namespace: relative (under a namespace an including launch "
            "pushes) or /absolute; a second arm needs its own, e.g. arm2",
        ),
        DeclareLaunchArgument(
            "clock_topic",
            default_value="/clock",
            description="where a simulation publishes its clock; one per simulation: a second "
            "simulated arm in the same ROS domain needs its own, e.g. /arm2/clock",
        ),
        DeclareLaunchArgument(
            "dds_network",
            default_value="",
            description="1 = let DDS use the network; empty = CT_DDS_NETWORK, else loopback only",
        ),
    ]
    return LaunchDescription([*arguments, OpaqueFunction(function=_from_plan, args=[target])])


def _from_plan(context: LaunchContext, target: str) -> list[Any]:
    def argument(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    plan = launch_plan(
        target,
        backend=argument("backend"),
        robot_description=argument("robot_description"),
        use_sim_time=argument("use_sim_time"),
        config=argument("config"),
        dds_network=argument("dds_network"),
        environ=dict(context.environment),
        namespace=argument("namespace"),
        clock_topic=argument("clock_topic"),
    )
    environment = [
        UnsetEnvironmentVariable(name) if value is None else SetEnvironmentVariable(name, value)
        for name, value in plan.environment.items()
    ]
    node = Node(
        package=plan.package,
        executable=plan.executable,
        name=plan.name,
        namespace=plan.namespace,
        remappings=plan.remappings(),
        output="screen",
        parameters=[
            *plan.parameter_files,
            *(Parameter(name, value, value_type=type(value)) for name, value in plan.parameters),
        ],
    )
    stderr: deque[str] = deque(maxlen=64)  # the node's last lines on standard error

    def on_stderr(event: Any) -> None:
        stderr.append(event.text.decode(errors="replace"))

    def on_exit(event: Any, _context: LaunchContext) -> list[Any]:
        message = exit_message(event.returncode, "".join(stderr))
        if event.returncode != 0:
            get_logger("ct_controllers").error(message)
        return [Shutdown(reason=message)]

    return [
        *environment,
        node,
        RegisterEventHandler(OnProcessIO(target_action=node, on_stderr=on_stderr)),
        RegisterEventHandler(OnProcessExit(target_action=node, on_exit=on_exit)),
    ]
