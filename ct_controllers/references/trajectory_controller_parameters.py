"""The parameters of a ``ct_controllers/JointTrajectoryController`` entry in controllers.yaml: the
names, meanings and defaults of ros2_controllers' joint_trajectory_controller (Jazzy) that this
controller implements. It has no command or state interface parameters: its reference goes to
the joint-level controller that runs (joint impedance, computed torque), which writes the
effort; the measured state is the loop's.

    joint_trajectory_controller:
      type: ct_controllers/JointTrajectoryController
      joints: [joint1, ..., joint7]
      allow_partial_joints_goal: false
      allow_nonzero_velocity_at_trajectory_end: false
      interpolation_method: splines     # splines | none
      action_monitor_rate: 20.0         # [Hz]
      constraints:
        goal_time: 0.0                  # [s], 0 = wait for the goal tolerance indefinitely
        stopped_velocity_tolerance: 0.01  # [rad/s | m/s]
        joint1: {trajectory: 0.0, goal: 0.0}   # [rad | m], 0 = not checked
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ct_controllers.errors import ConfigError
from ct_controllers.interface_controllers import TRAJECTORY, InterfaceControllerType
from ct_controllers.parameter_schema import (
    REQUIRED,
    ParameterProblem,
    ParameterSchema,
    ParameterSpec,
    non_negative,
    one_of,
)
from ct_controllers.references.trajectory_goal import StateTolerance, Tolerances


def _unique_names(value: Any) -> str | None:
    if not value:
        return "must name at least one joint"
    twice = sorted({n for n in value if value.count(n) > 1})
    return f"names {twice} more than once" if twice else None


def _at_least_a_tenth(value: Any) -> str | None:
    return None if value >= 0.1 else f"must be >= 0.1, got {value}"


PARAMETERS = ParameterSchema(
    "",
    (
        ParameterSpec(
            "joints",
            str,
            REQUIRED,
            "Joints this controller's trajectories move, by name (a subset of the arm's and "
            "gripper's joints)",
            sequence=True,
            validator=_unique_names,
        ),
        ParameterSpec(
            "allow_partial_joints_goal",
            bool,
            False,
            "Accept a trajectory naming only some of the joints (the others hold)",
        ),
        ParameterSpec(
            "allow_nonzero_velocity_at_trajectory_end",
            bool,
            False,
            "Accept a trajectory whose last point has a nonzero velocity",
        ),
        ParameterSpec(
            "interpolation_method",
            str,
            "splines",
            "splines: linear/cubic/quintic by what the points carry; none: each point held "
            "until the next",
            validator=one_of("splines", "none"),
        ),
        ParameterSpec(
            "action_monitor_rate",
            float,
            20.0,
            "Rate of the action's feedback and of the tolerance checks' reports",
            unit="Hz",
            validator=_at_least_a_tenth,
        ),
        ParameterSpec(
            "constraints.goal_time",
            float,
            0.0,
            "Time after the trajectory's end within which the goal tolerances must be met; "
            "0 = no limit",
            unit="s",
            validator=non_negative,
        ),
        ParameterSpec(
            "constraints.stopped_velocity_tolerance",
            float,
            0.01,
            "Speed below which a joint counts as stopped at the goal; 0 = not checked",
            unit="rad/s | m/s",
            validator=non_negative,
        ),
    ),
)

JOINT_TOLERANCES = (
    ParameterSpec(
        "trajectory",
        float,
        0.0,
        "Largest position error while the trajectory runs (else ABORTED, "
        "PATH_TOLERANCE_VIOLATED); 0 = not checked",
        unit="rad | m",
        validator=non_negative,
    ),
    ParameterSpec(
        "goal",
        float,
        0.0,
        "Largest position error at the goal; 0 = not checked",
        unit="rad | m",
        validator=non_negative,
    ),
)

JOINT_TRAJECTORY_CONTROLLER = InterfaceControllerType(
    kind=TRAJECTORY,
    PARAMETERS=PARAMETERS,
    joint_parameters=JOINT_TOLERANCES,
    joint_parameter_prefix="constraints",
)


@dataclass(frozen=True)
class TrajectoryControllerSettings:
    """One trajectory controller entry, checked: its joints (names), JTC's options, and the
    default tolerances a goal's own replace (``goal`` velocity = stopped_velocity_tolerance, as
    JTC sets it)."""

    name: str
    joints: tuple[str, ...]
    allow_partial_joints_goal: bool
    allow_nonzero_velocity_at_trajectory_end: bool
    interpolation_method: str
    action_monitor_rate: float  # [Hz]
    tolerances: Tolerances


def trajectory_controller_settings(
    name: str,
    entries: Mapping[str, Any],
    robot_joints: Sequence[str],
    followers: Mapping[str, str],
) -> TrajectoryControllerSettings:
    """``name``'s entries (``config.interface_controllers[name]``) checked against the schema
    and the robot: every joint one of ``robot_joints`` and not a mimic follower (``followers``:
    follower -> its master, which a trajectory moves instead). ConfigError names the entry."""
    try:
        values = PARAMETERS.parse(entries)
    except ConfigError as exc:
        raise ConfigError(f"controller '{name}': {exc}") from None
    joints = tuple(values["joints"])
    unknown = [j for j in joints if j not in set(robot_joints)]
    if unknown:
        raise ConfigError(
            f"controller '{name}': joints {unknown} are not joints of the robot "
            f"({', '.join(robot_joints)})"
        )
    mimic = [f"{j} (follows {followers[j]})" for j in joints if j in followers]
    if mimic:
        raise ConfigError(
            f"controller '{name}': mimic joints cannot be commanded: {', '.join(mimic)}"
        )
    path: dict[str, StateTolerance] = {}
    goal: dict[str, StateTolerance] = {}
    stopped = values["constraints.stopped_velocity_tolerance"]
    for joint in joints:
        for spec in JOINT_TOLERANCES:
            key = f"constraints.{joint}.{spec.name}"
            try:
                value = spec.check(entries.get(key, spec.default))
            except ParameterProblem as wrong:
                raise ConfigError(f"parameter '{name}.{key}': {wrong}") from None
            if spec.name == "trajectory":
                path[joint] = StateTolerance(position=value)
            else:
                goal[joint] = StateTolerance(position=value, velocity=stopped)
    return TrajectoryControllerSettings(
        name,
        joints,
        values["allow_partial_joints_goal"],
        values["allow_nonzero_velocity_at_trajectory_end"],
        values["interpolation_method"],
        values["action_monitor_rate"],
        Tolerances(path, goal, values["constraints.goal_time"]),
    )
