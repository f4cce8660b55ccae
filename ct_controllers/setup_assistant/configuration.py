"""What ``controllers.yaml`` holds for the user's robot: every value the setup assistant chose
(frames, joints, home, gains, limits, description, backend sections), as entries for
:func:`~ct_controllers.setup_assistant.yaml_writer.render`. Per-joint vectors are in
``arm_joints + gripper_joints`` order, as the stack reads them.

Backend sections: every installed backend with a parameter schema gets its section, sized for
this robot. The CANopen drive table (node ids 1…n, encoder resolution, gear ratio, offsets) can
only be a placeholder until the drives are known; its rated torque is the URDF effort limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ct_controllers.controllers.computed_torque import ComputedTorqueController
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.parameter_schema import ParameterSchema, section_schema
from ct_controllers.plugins import CONTROLLERS, plugin_entry_points
from ct_controllers.references.trajectory_controller_parameters import (
    JOINT_TRAJECTORY_CONTROLLER,
)
from ct_controllers.setup_assistant.chain import Chain
from ct_controllers.setup_assistant.design_model import DesignModel
from ct_controllers.setup_assistant.gains import COMPUTED_TORQUE, JOINT_IMPEDANCE, GainDesign
from ct_controllers.setup_assistant.yaml_writer import Entry, schema_entries
from ct_controllers.stack_parameters import PARAMETERS as STACK_PARAMETERS
from ct_controllers.tasks.gripper_command_parameters import GRIPPER_ACTION_CONTROLLER

DIGITS = 5  # significant digits of the written gains and limits
ENCODER_RESOLUTION = 524288  # [counts/motor rev] CANopen placeholder (19-bit encoder)
GEAR_RATIO = 100.0  # [motor rev/joint rev] CANopen placeholder


@dataclass(frozen=True)
class Choices:
    """Everything the file is written from."""

    chain: Chain
    design: DesignModel
    home: tuple[float, ...]  # [rad | m] configuration order
    gains: GainDesign
    robot_description: str
    backend: str
    backends: tuple[str, ...]  # the backends whose sections are written
    width_frames: tuple[str, ...] = ()  # gripper.width_frames: () = none found
    # gripper.stiffness [N/m], gripper.damping [N·s/m]: the finger servo's, designed (None: not
    # written, no gripper)
    finger_servo: tuple[float, float] | None = None


def rounded(values: np.ndarray) -> list[float]:
    """``values`` to ``DIGITS`` significant digits (what the file says)."""
    return [float(f"{v:.{DIGITS}g}") for v in np.asarray(values, dtype=np.float64).tolist()]


def controller_type(cls: object) -> str:
    """The plugin name registered for a controller class (as the YAML's ``type`` names it)."""
    for entry_point in plugin_entry_points(CONTROLLERS):
        if entry_point.load() is cls:
            return entry_point.name
    raise LookupError(f"{cls!r} is not registered in {CONTROLLERS}")


def _schema(cls: type) -> ParameterSchema:
    schema = getattr(cls, "PARAMETERS", None)
    assert isinstance(schema, ParameterSchema)
    return schema


TRAJECTORY_CONTROLLER = "joint_trajectory_controller"
PATH_TOLERANCE = 0.2  # [rad | m] the trajectory controller's per-joint path tolerance
GOAL_TOLERANCE = 0.01  # [rad | m] and goal tolerance: MoveJoints' success bound


def trajectory_controller_entries(arm_joints: tuple[str, ...]) -> list[Entry]:
    """The trajectory controller's entry (FollowJointTrajectory for the arm's joints, MoveIt's
    controller): JTC's defaults, with a path and a goal tolerance per joint."""
    schema = JOINT_TRAJECTORY_CONTROLLER.PARAMETERS
    name = TRAJECTORY_CONTROLLER
    plugin = controller_type(JOINT_TRAJECTORY_CONTROLLER)
    found = [Entry(f"{name}.type", plugin, "controller plugin")]
    found += schema_entries(schema, {f"{name}.joints": list(arm_joints)}, prefix=name)
    tolerances = {"trajectory": PATH_TOLERANCE, "goal": GOAL_TOLERANCE}
    for full, spec in JOINT_TRAJECTORY_CONTROLLER.joint_parameter_names(name, arm_joints).items():
        found.append(Entry(full, tolerances[spec.name], f"{spec.describe()}; ct-setup"))
    return found


GRIPPER_CONTROLLER = "gripper_controller"


def gripper_controller_entries(gripper_joints: tuple[str, ...]) -> list[Entry]:
    """The gripper controller's entry (GripperCommand on gripper_controller/gripper_cmd, MoveIt's
    gripper controller) for the first gripper joint (the others follow it), the reference's
    defaults; none for an arm without a gripper."""
    if not gripper_joints:
        return []
    name = GRIPPER_CONTROLLER
    plugin = controller_type(GRIPPER_ACTION_CONTROLLER)
    found = [Entry(f"{name}.type", plugin, "controller plugin")]
    given = {f"{name}.joint": gripper_joints[0]}
    notes = {f"{name}.joint": "ct-setup: the first gripper joint"}
    return found + schema_entries(
        GRIPPER_ACTION_CONTROLLER.PARAMETERS, given, prefix=name, notes=notes
    )


def entries(choices: Choices) -> list[Entry]:
    """The file's entries: the stack's own, the two controllers', the backends' sections."""
    chain, design, gains = choices.chain, choices.design, choices.gains
    joints = len(chain.joint_names)
    per_joint = design.to_config
    values: dict[str, Any] = {
        "update_rate": float(gains.update_rate),
        "robot_description": choices.robot_description,
        "backend": choices.backend,
        "base_frame": chain.base,
        "tcp_frame": chain.tcp,
        "arm_joints": list(chain.arm_joints),
        "gripper_joints": list(chain.gripper_joints),
        "gripper.width_frames": list(choices.width_frames),
        "home_positions": [round(v, 4) for v in choices.home],
        "default_controller": gains.default_controller,
        "controllers": [JOINT_IMPEDANCE, COMPUTED_TORQUE, TRAJECTORY_CONTROLLER]
        + ([GRIPPER_CONTROLLER] if chain.gripper_joints else []),
        "references.max_acceleration": rounded(per_joint(gains.max_acceleration)),
        "references.max_jerk": rounded(per_joint(gains.max_jerk)),
        "limiter.effort_rate_limit": rounded(per_joint(gains.effort_rate_limit)),
        "safe_hold.damping": rounded(per_joint(gains.hold_damping)),
    }
    if choices.finger_servo is not None:
        values["gripper.stiffness"], values["gripper.damping"] = rounded(
            np.array(choices.finger_servo)
        )
    notes = {
        "robot_description": "written by ct-setup",
        "gripper.width_frames": "ct-setup: found from the gripper joints, or as given",
        "gripper.stiffness": "ct-setup: the default, or lowered with the damping",
        "gripper.damping": "ct-setup: the default, or critically damped where the lightest "
        "finger needs it: stable ×2 at update_rate with a period of delay, and pressing",
        "references.max_acceleration": "ct-setup: half the effort left after gravity, and "
        "about 0.05 rad of tracking error",
        "references.max_jerk": "ct-setup: 10 × max_acceleration per second",
        "limiter.effort_rate_limit": "ct-setup: the effort limit in 50 ms",
        "safe_hold.damping": "ct-setup: the joint impedance damping, stable with margin",
    }
    found = schema_entries(STACK_PARAMETERS, values, notes=notes)
    controllers: Mapping[str, tuple[type, dict[str, Any]]] = {
        JOINT_IMPEDANCE: (
            JointImpedanceController,
            {
                "stiffness": rounded(per_joint(gains.stiffness)),
                "damping": rounded(per_joint(gains.damping)),
                "friction_stiffness": rounded(per_joint(gains.friction_stiffness)),
            },
        ),
        COMPUTED_TORQUE: (
            ComputedTorqueController,
            {
                "kp": rounded(per_joint(gains.kp)),
                "kd": rounded(per_joint(gains.kd)),
                "friction_stiffness": rounded(per_joint(gains.ct_friction_stiffness)),
            },
        ),
    }
    for name, (cls, gain_values) in controllers.items():
        found.append(Entry(f"{name}.type", controller_type(cls), "controller plugin"))
        found += schema_entries(
            _schema(cls),
            {f"{name}.{key}": value for key, value in gain_values.items()},
            prefix=name,
            notes={f"{name}.{key}": "ct-setup: from the model" for key in gain_values},
        )
    found += trajectory_controller_entries(chain.arm_joints)
    found += gripper_controller_entries(tuple(chain.gripper_joints))
    effort = per_joint(design.model.limits.effort)
    sections: dict[str, dict[str, Any]] = {
        "ros2_control_bridge": {"command_joints": list(chain.joint_names)},
        "canopen": {
            "node_ids": list(range(1, joints + 1)),
            "encoder_resolution": [ENCODER_RESOLUTION] * joints,
            "gear_ratio": [GEAR_RATIO] * joints,
            "position_offset": [0.0] * joints,
            "rated_torque": rounded(effort),
        },
    }
    placeholders = {
        "canopen.node_ids",
        "canopen.encoder_resolution",
        "canopen.gear_ratio",
        "canopen.position_offset",
    }
    for backend in choices.backends:
        schema = section_schema(backend)
        if schema is None:
            continue
        given = {f"{backend}.{k}": v for k, v in sections.get(backend, {}).items()}
        found += schema_entries(
            schema,
            given,
            notes={name: "PLACEHOLDER: set your drives' values" for name in placeholders},
        )
    return found
