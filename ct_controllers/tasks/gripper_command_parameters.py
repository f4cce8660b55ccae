"""The parameters of the gripper action controller entries in controllers.yaml, with the names,
meanings and defaults of ros2_controllers' Jazzy ``gripper_action_controller`` (GripperCommand)
and ``parallel_gripper_action_controller`` (ParallelGripperCommand). Their goals move the
gripper joint through the joint-level controller that runs; stall is judged from the measured
state.

    gripper_controller:
      type: ct_controllers/GripperActionController
      joint: left_finger_joint        # the gripper joint the goal's position is for
      goal_tolerance: 0.01            # [m | rad]
      max_effort: 0.0                 # [N | N·m] used when a goal gives 0; 0 = the joint's limit
      allow_stalling: false
      stall_velocity_threshold: 0.001 # [m/s | rad/s]
      stall_timeout: 1.0              # [s]
"""

from __future__ import annotations

from ct_controllers.interface_controllers import (
    GRIPPER,
    PARALLEL_GRIPPER,
    InterfaceControllerType,
)
from ct_controllers.parameter_schema import (
    REQUIRED,
    ParameterSchema,
    ParameterSpec,
    non_negative,
    positive,
)


def _schema(max_effort_default: float, max_velocity: bool) -> ParameterSchema:
    specs = [
        ParameterSpec(
            "joint",
            str,
            REQUIRED,
            "The gripper joint a goal's position is for (its mimic and coupled fingers follow)",
        ),
        ParameterSpec(
            "action_monitor_rate",
            float,
            20.0,
            "Rate of the action's feedback and of the stall checks",
            unit="Hz",
            validator=positive,
        ),
        ParameterSpec(
            "goal_tolerance",
            float,
            0.01,
            "Position error within which the goal counts as reached",
            unit="m | rad",
            validator=non_negative,
        ),
        ParameterSpec(
            "max_effort",
            float,
            max_effort_default,
            "Effort limit used when a goal gives 0; 0 = the joint's URDF limit",
            unit="N | N·m",
            validator=non_negative,
        ),
        ParameterSpec(
            "allow_stalling",
            bool,
            False,
            "A stalled gripper (e.g. on an object) ends SUCCEEDED instead of ABORTED",
        ),
        ParameterSpec(
            "stall_velocity_threshold",
            float,
            0.001,
            "Speed below which the moving gripper counts as stalled",
            unit="m/s | rad/s",
            validator=non_negative,
        ),
        ParameterSpec(
            "stall_timeout",
            float,
            1.0,
            "How long below the stall speed, short of the goal, before a stall is declared",
            unit="s",
            validator=non_negative,
        ),
    ]
    if max_velocity:
        specs.append(
            ParameterSpec(
                "max_velocity",
                float,
                0.1,
                "Speed used when a goal gives none",
                unit="m/s | rad/s",
                validator=positive,
            )
        )
    return ParameterSchema("", tuple(specs))


GRIPPER_ACTION_CONTROLLER = InterfaceControllerType(
    kind=GRIPPER, PARAMETERS=_schema(0.0, max_velocity=False)
)
PARALLEL_GRIPPER_ACTION_CONTROLLER = InterfaceControllerType(
    kind=PARALLEL_GRIPPER, PARAMETERS=_schema(10.0, max_velocity=True)
)
