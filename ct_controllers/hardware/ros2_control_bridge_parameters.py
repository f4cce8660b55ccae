"""The ros2_control bridge's section of controllers.yaml (``ros2_control_bridge.*``), its schema
beside the backend (:mod:`ct_controllers.hardware.ros2_control_bridge`) in a module of its own:
checking a configuration must not import rclpy."""

from __future__ import annotations

from ct_controllers.hardware.interface import EFFORT, POSITION
from ct_controllers.parameter_schema import REQUIRED, ParameterSchema, ParameterSpec, one_of

SECTION = "ros2_control_bridge"


def _names(names: tuple[str, ...]) -> str | None:
    if not all(names):
        return f"expected a list of non-empty names, got {list(names)}"
    twice = sorted({n for n in names if names.count(n) > 1})
    return f"{twice} twice" if twice else None


PARAMETERS = ParameterSchema(
    SECTION,
    (
        ParameterSpec(
            "joint_states_topic",
            str,
            "/joint_states",
            "sensor_msgs/JointState from the broadcaster",
        ),
        ParameterSpec(
            "command_topic",
            str,
            "/effort_controller/commands",
            "std_msgs/Float64MultiArray of the forward controller",
        ),
        ParameterSpec(
            "command_interface",
            str,
            EFFORT,
            "effort | position (the forward controller's)",
            validator=one_of(EFFORT, POSITION),
        ),
        ParameterSpec(
            "command_joints",
            str,
            REQUIRED,  # the robot's joints, as the forward_command_controller lists them
            "Joint order of the Float64MultiArray commands (every hardware joint once)",
            sequence=True,
            validator=_names,
        ),
    ),
)
