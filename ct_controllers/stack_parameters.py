"""The stack's own parameters: the entries of controllers.yaml that belong to no plugin
(the loop's rate, the joints, the references, the limiter, the safe hold, the hardware boundary,
the Cartesian stage, scheduling, the watchdog), as a :class:`ParameterSchema` like a plugin's.

From it come the validation (:meth:`StackConfig.from_parameters
<ct_controllers.config.StackConfig.from_parameters>` parses with it), the ROS parameter
descriptors (``ros/parameters.py``: description with unit, read-only) and the YAML defaults
(``test/test_parameter_schema.py`` keeps the bundled file equal to them). Plain Python.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ct_controllers.hardware.fault_reactions import FAULT_REACTIONS
from ct_controllers.node_names import topic_name
from ct_controllers.parameter_schema import (
    REQUIRED,
    ParameterSchema,
    ParameterSpec,
    Range,
    one_of,
    positive,
)

# joint_states_topic's default: /joint_states for the node in its default namespace (/ct),
# nothing more in another one (ros/state_publishers.py, docs/ros-interface.md).
JOINT_STATES_AUTO = "auto"


def _names(value: tuple[str, ...]) -> str | None:
    return None if all(value) else "expected a list of non-empty names"


def _two_frames(value: tuple[str, ...]) -> str | None:
    if len(value) in (0, 2) and all(value):
        return None
    found = list(value)
    return f"expected two frame names, or [] to find them from the gripper joints, got {found}"


def _in_range(low: float, high: float, low_open: bool, what: str = "") -> Range:
    """``value`` in [low, high] (``low_open``: (low, high]); ``what`` follows the interval. A
    :class:`Range`: its bounds are the ROS descriptor's range too."""
    return Range(low, high, open_low=low_open, unit=what)


def _seconds(value: float) -> str | None:
    return None if value >= 0 else f"must be finite and >= 0 s, got {value}"


def _speed_limit_factor(value: float) -> str | None:
    if value == 0.0 or 1.0 <= value < float("inf"):
        return None
    return f"must be 0 (off) or a finite factor >= 1, got {value}"


def _joint_states_topic(value: str) -> str | None:
    if value in (JOINT_STATES_AUTO, ""):
        return None
    try:
        topic_name(value)
    except ValueError as exc:
        return f"expected '{JOINT_STATES_AUTO}', '' (none) or a topic name: {exc}"
    return None


def _non_negative_finite(value: float) -> str | None:
    return None if math.isfinite(value) and value >= 0 else f"must be finite and >= 0, got {value}"


def _priority(value: int) -> str | None:
    return None if 0 <= value <= 99 else f"must be 0 (off) or 1–99, got {value}"


def _cpu(value: int) -> str | None:
    return None if value >= -1 else f"must be a CPU number or -1 (any), got {value}"


def _joints_once(values: Mapping[str, Any], joint_count: int | None) -> str | None:
    joints = values["arm_joints"] + values["gripper_joints"]
    twice = sorted({n for n in joints if joints.count(n) > 1})
    return f"joint(s) listed twice in arm_joints/gripper_joints: {twice}" if twice else None


def _default_loaded(values: Mapping[str, Any], joint_count: int | None) -> str | None:
    default, names = values["default_controller"], values["controllers"]
    if default in names:
        return None
    return f"default_controller '{default}' is not among the controllers {names}"


def _cartesian_divides(values: Mapping[str, Any], joint_count: int | None) -> str | None:
    rate, cartesian = values["update_rate"], values["cartesian.update_rate"]
    if not cartesian:
        return None
    ratio = rate / cartesian if cartesian > 0 else math.nan
    if ratio >= 1 and abs(ratio - round(ratio)) < 1e-9:
        return None
    return (
        "parameter 'cartesian.update_rate': must divide update_rate "
        f"({rate} Hz) into a whole number ≥ 1 of control ticks, got {cartesian} Hz "
        "(0 = update_rate)"
    )


def _per_joint(name: str, description: str, unit: str, **kw: Any) -> Any:
    """A per-joint entry: the robot's, so without a default (REQUIRED)."""
    return ParameterSpec(name, float, REQUIRED, description, unit, per_joint=True, **kw)


# Section "": the entries sit at the top of ros__parameters (dotted where nested). Every one is
# read-only once the stack runs. The joint lists come first: they size the per-joint entries.
# What describes the robot — its joints, frames, home and every per-joint value — has no
# default (REQUIRED): it comes from the configuration file (the bundled arm's from
# config/controllers.yaml), never from a name written here.
PARAMETERS = ParameterSchema(
    "",
    (
        ParameterSpec(
            "arm_joints", str, REQUIRED, "Arm joint names", sequence=True, validator=_names
        ),
        ParameterSpec(
            "gripper_joints",
            str,
            REQUIRED,
            "Gripper joint names (none: [])",
            sequence=True,
            validator=_names,
        ),
        ParameterSpec(
            "gripper.width_frames",
            str,
            (),
            "Two URDF frames whose origins' distance is the grip width [m] the grasp checks "
            "(fingertips, pads or finger links; the width with the gripper closed is taken as 0); "
            "[] = the gripper joints' child links (ct-setup writes what it found)",
            sequence=True,
            validator=_two_frames,
        ),
        ParameterSpec(
            "gripper.stiffness",
            float,
            2000.0,
            "Finger servo stiffness K at the finger surface (Grasp, GripperCommand): the free "
            "finger's spring toward its reference (a finger blocked short of it pushes with "
            "the force limit instead); a revolute jaw of lever l gets K l² [N·m/rad]",
            "N/m",
            validator=_in_range(0.0, 1.0e6, low_open=True, what=" N/m"),
        ),
        ParameterSpec(
            "gripper.damping",
            float,
            20.0,
            "Finger servo damping D at the finger surface; a light finger sampled at update_rate "
            "needs lower K and D to stay stable (ct-setup: designed from the model)",
            "N·s/m",
            validator=_in_range(0.0, 1.0e4, low_open=True, what=" N·s/m"),
        ),
        ParameterSpec(
            "update_rate",
            float,
            1000.0,
            "Control loop rate",
            "Hz",
            validator=_in_range(1.0, 10000.0, low_open=False, what=" Hz"),
        ),
        ParameterSpec(
            "overrun_fraction",
            float,
            0.5,
            "A tick starting this part of a period late is an overrun, in (0, 1]",
            validator=_in_range(0.0, 1.0, low_open=True, what=" of a period"),
        ),
        ParameterSpec(
            "robot_description", str, "", "URDF or xacro file; empty = the bundled ct_arm"
        ),
        ParameterSpec(
            "backend",
            str,
            "mujoco",
            "Hardware backend (xacro argument): mujoco | ros2_control_bridge | canopen",
        ),
        ParameterSpec(
            "base_frame",
            str,
            REQUIRED,
            "Frame every goal pose must be expressed in (a URDF link fixed to the world)",
        ),
        ParameterSpec("tcp_frame", str, REQUIRED, "Tool centre point frame (a URDF frame)"),
        _per_joint(
            "home_positions",
            "Start pose of the simulator, arm_joints then gripper_joints",
            "rad | m",
        ),
        ParameterSpec(
            "default_controller", str, "joint_impedance", "Controller used when a goal names none"
        ),
        ParameterSpec(
            "controllers",
            str,
            (
                "joint_impedance",
                "computed_torque",
                "joint_trajectory_controller",
                "gripper_controller",
            ),
            "Controllers to load: joint-level ones (one runs) and standard-interface ones "
            "(trajectory, gripper actions), each with its 'type'",
            sequence=True,
            validator=_names,
        ),
        ParameterSpec(
            "joint_states_topic",
            str,
            JOINT_STATES_AUTO,
            "Topic the joint states are also published on, besides <namespace>/joint_states, "
            "for robot_state_publisher, MoveIt and Servo (joint_state_broadcaster's topic): "
            "auto = /joint_states for the node in /ct (the default namespace), none in another "
            "namespace (two arms never share it); '' = none; else a topic name (relative names "
            "resolve in the node's namespace)",
            validator=_joint_states_topic,
        ),
        ParameterSpec(
            "allow_free_joints",
            bool,
            False,
            "Live gain sets may leave a joint with stiffness and damping both 0",
        ),
        ParameterSpec(
            "references.velocity_fraction",
            float,
            0.5,
            "Reference velocity limit, fraction of the URDF limit",
            "-",
            validator=_in_range(0.0, 1.0, low_open=True),
        ),
        _per_joint(
            "references.max_acceleration",
            "Reference acceleration limit per joint",
            "rad/s² | m/s²",
            validator=positive,
        ),
        _per_joint(
            "references.max_jerk",
            "Reference jerk limit per joint",
            "rad/s³ | m/s³",
            validator=positive,
        ),
        _per_joint(
            "limiter.effort_rate_limit",
            "Effort-rate limit per joint",
            "N·m/s | N/s",
            validator=positive,
        ),
        _per_joint(
            "safe_hold.damping",
            "Safe-hold joint damping, per joint",
            "N·m·s/rad | N·s/m",
        ),
        ParameterSpec(
            "payload.rated_mass",
            float,
            0.0,
            "Rated payload of the arm: a payload set by hand or identified above it is "
            "refused; 0 = none may be set (state the maker's rating to use payloads)",
            "kg",
            validator=_non_negative_finite,
        ),
        ParameterSpec(
            "payload.max_com_distance",
            float,
            0.3,
            "Farthest a payload's centre of mass may be from the TCP origin",
            "m",
            validator=positive,
        ),
        ParameterSpec(
            "grasp.identify_payload",
            bool,
            False,
            "Grasp: identify the held object's mass in HOLD (held still at the lifted pose) and "
            "carry it in the controllers' model until RELEASE; needs payload.rated_mass",
        ),
        ParameterSpec("hardware.armed", bool, False, "Real drives refuse to activate unless true"),
        ParameterSpec(
            "hardware.max_state_age",
            float,
            0.0,
            "Oldest acceptable state sample, now − stamp [s]; 0 = state_timeout",
            validator=_seconds,
        ),
        ParameterSpec(
            "hardware.future_tolerance",
            float,
            0.001,
            "How far a state stamp may lie ahead of this clock",
            "s",
            validator=_seconds,
        ),
        ParameterSpec(
            "hardware.frame_id",
            str,
            "",
            "Frame id state messages must carry (empty = not checked)",
        ),
        ParameterSpec(
            "cartesian.update_rate",
            float,
            0.0,
            "Task + differential IK rate [Hz], divides update_rate; 0 = same",
        ),
        ParameterSpec(
            "realtime.priority",
            int,
            50,
            "SCHED_FIFO priority of the control thread, 1–99; 0 = normal",
            validator=_priority,
        ),
        ParameterSpec(
            "realtime.cpu", int, -1, "CPU the control thread is pinned to; -1 = any", validator=_cpu
        ),
        ParameterSpec(
            "realtime.lock_memory", bool, False, "Lock the process's memory in RAM (mlockall)"
        ),
        ParameterSpec(
            "watchdog.enabled",
            bool,
            True,
            "Watchdog on state and command freshness (on by default)",
        ),
        ParameterSpec(
            "watchdog.state_timeout",
            float,
            0.0,
            "No fresh state this long → fault [s]; 0 = 3 control periods",
            validator=_seconds,
        ),
        ParameterSpec(
            "watchdog.command_timeout",
            float,
            0.0,
            "No command written this long → fault [s]; 0 = 3 periods",
            validator=_seconds,
        ),
        ParameterSpec(
            "watchdog.speed_limit_factor",
            float,
            2.0,
            "A joint measured faster than this × its URDF velocity limit on two fresh samples "
            "in a row → fault (a runaway) [-]; 0 = off",
            validator=_speed_limit_factor,
        ),
        ParameterSpec(
            "watchdog.fault_reaction",
            str,
            "damp",
            "damp | hold | quick_stop | disable (drives that offer it)",
            validator=one_of(*FAULT_REACTIONS),
        ),
    ),
    checks=(_joints_once, _default_loaded, _cartesian_divides),
    joint_lists=("arm_joints", "gripper_joints"),
)
