"""Parameter declarations for the controller manager node: every entry of controllers.yaml is
declared with a descriptor (description with units, read-only for structural ones), defaults taken
from the bundled file, so a ``--params-file`` overrides them as ROS users expect."""

from __future__ import annotations

import array
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor

from ct_controllers.config import load_parameters

DESCRIPTIONS = {
    "update_rate": "Control loop rate [Hz]",
    "overrun_fraction": "A tick starting this part of a period late is an overrun, in (0, 1]",
    "robot_description": "URDF or xacro file; empty = the bundled ct_arm",
    "backend": "Hardware backend (xacro argument): mujoco | ros2_control_bridge | canopen",
    "base_frame": "Frame every goal pose must be expressed in",
    "tcp_frame": "Tool centre point frame",
    "arm_joints": "Arm joint names",
    "gripper_joints": "Gripper joint names",
    "home_positions": "Start pose of the simulator [rad | m], arm_joints then gripper_joints",
    "default_controller": "Controller used when a goal names none",
    "controllers": "Controllers to load",
    "allow_free_joints": "Live gain sets may leave a joint with stiffness and damping both 0",
    "references.velocity_fraction": "Reference velocity limit, fraction of the URDF limit [-]",
    "references.max_acceleration": "Reference acceleration limit per joint [rad/s² | m/s²]",
    "references.max_jerk": "Reference jerk limit per joint [rad/s³ | m/s³]",
    "limiter.effort_rate_limit": "Effort-rate limit per joint [N·m/s | N/s]",
    "safe_hold.damping": "Safe-hold joint damping [N·m·s/rad | N·s/m], per joint",
    "joint_impedance.type": "Controller plugin type",
    "joint_impedance.stiffness": "Joint stiffness K [N·m/rad | N/m], per joint, arm then gripper",
    "joint_impedance.damping": "Joint damping D [N·m·s/rad | N·s/m], per joint, arm then gripper",
    "joint_impedance.gravity_compensation": "Add g(q) from the controller's model",
    "joint_impedance.coriolis_compensation": "Add C(q, v) v from the controller's model",
    "joint_impedance.inertia_decoupling": "τ = M(q)(q̈* + K e + D ė) + ...; then K [s⁻²], D [s⁻¹]",
    "computed_torque.type": "Controller plugin type",
    "computed_torque.mode": "computed_torque | pd | pd_gravity",
    "computed_torque.kp": "K_p per joint: [s⁻²] in computed_torque mode, [N·m/rad | N/m] in pd",
    "computed_torque.kd": "K_d per joint: [s⁻¹] in computed_torque mode, [N·m·s/rad | N·s/m] in pd",
    "computed_torque.model_mass_scale": "Link masses of the controller's model × this [-]",
    "hardware.armed": "Real drives refuse to activate unless true",
    "hardware.max_state_age": "Oldest acceptable state sample, now − stamp [s]; 0 = state_timeout",
    "hardware.future_tolerance": "How far a state stamp may lie ahead of this clock [s]",
    "hardware.frame_id": "Frame id state messages must carry (empty = not checked)",
    "cartesian.update_rate": "Task + differential IK rate [Hz], divides update_rate; 0 = same",
    "realtime.priority": "SCHED_FIFO priority of the control thread, 1–99; 0 = normal",
    "realtime.cpu": "CPU the control thread is pinned to; -1 = any",
    "realtime.lock_memory": "Lock the process's memory in RAM (mlockall)",
    "watchdog.enabled": "Watchdog on state and command freshness (on by default)",
    "watchdog.state_timeout": "No fresh state this long → fault [s]; 0 = 3 control periods",
    "watchdog.command_timeout": "No command written this long → fault [s]; 0 = 3 periods",
    "watchdog.fault_reaction": "damp | hold | quick_stop | disable (drives that offer it)",
    "ros2_control_bridge.joint_states_topic": "sensor_msgs/JointState from the broadcaster",
    "ros2_control_bridge.command_topic": "std_msgs/Float64MultiArray of the forward controller",
    "ros2_control_bridge.command_interface": "effort | position (the forward controller's)",
    "ros2_control_bridge.command_joints": "Joint order of the Float64MultiArray commands",
    "canopen.interface": "python-can interface (virtual, socketcan, ...)",
    "canopen.channel": "python-can channel",
    "canopen.bitrate": "CAN bit rate [bit/s]",
    "canopen.mode": "torque (cyclic synchronous torque) | position (cyclic synchronous position)",
    "canopen.node_ids": "CANopen node id per joint, arm then gripper",
    "canopen.encoder_resolution": "Encoder counts per motor revolution, per joint",
    "canopen.gear_ratio": "Motor revolutions per joint revolution, per joint",
    "canopen.position_offset": "Joint position at encoder count 0 [rad | m], per joint",
    "canopen.rated_torque": "Effort at 1000 ‰ of rated torque [N·m | N], per joint",
    "canopen.screw_lead": "Travel per joint revolution of the prismatic joints [m]",
    "canopen.heartbeat_period": "Heartbeat the host produces (drives' 1017h) [s]",
    "canopen.heartbeat_timeout": "Consumer heartbeat time (1016h): silence this long → fault [s]",
    "canopen.pdo_timeout": "No TPDO from a drive this long → fault [s]; 0 = 3 periods",
    "canopen.quick_stop_option": "605Ah quick-stop option code (6 = ramp, stay in QUICK STOP)",
    "canopen.enable_timeout": "Time allowed for NMT start, SDO setup and enable [s]",
    "canopen.master_heartbeat_period": "Heartbeat our master node (id 127) produces [s]",
    "canopen.master_heartbeat_timeout": "Drives' consumer time on it (1016h) → 6007h [s]",
    "canopen.abort_connection_option": "6007h on losing it: 0 none, 1 fault, 2 off, 3 quick stop",
    "mujoco.mode": "paced (sim time follows the wall clock) | lockstep (as fast as possible)",
    "mujoco.timestep": "Physics step [s]; the control period must be a whole multiple",
    "mujoco.command_interfaces": "effort | position, for every joint or per joint (arm, gripper)",
}

# Everything that shapes the stack is fixed once it runs; gains are live: "<controller>.<gain>"
# with <gain> one of the controller's GAIN_NAMES (per-joint vectors, arm then gripper order).
LIVE = {
    "joint_impedance.stiffness",
    "joint_impedance.damping",
    "computed_torque.kp",
    "computed_torque.kd",
}


# Parameters of the ROS boundary itself (not in controllers.yaml): name → (default, description).
ROS_ONLY: dict[str, tuple[float, str]] = {
    "max_goal_age": (1.0, "Oldest acceptable goal stamp, now − stamp [s]; stamp 0 = now"),
    "goal_future_tolerance": (0.05, "How far a goal stamp may lie in the future [s]"),
    "move_to_pose.default_timeout": (10.0, "MoveToPose timeout when the goal gives 0 [s]"),
}


def live_gains(parameters: Any, joint_names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Group a parameter set by controller: {"joint_impedance": {"stiffness": [...]}, ...}.
    Raises ValueError naming a parameter that cannot change at run time or is malformed."""
    grouped: dict[str, dict[str, Any]] = {}
    for parameter in parameters:
        if parameter.name in ROS_ONLY:
            continue  # range-checked by its descriptor, read where it is used
        if parameter.name not in LIVE:
            raise ValueError(f"'{parameter.name}' cannot be changed at run time")
        controller, gain = parameter.name.split(".", 1)
        value = parameter.value
        if not isinstance(value, (list, tuple, array.array)):
            raise ValueError(f"'{parameter.name}': expected a list of {len(joint_names)} numbers")
        grouped.setdefault(controller, {})[gain] = [float(v) for v in value]
    return grouped


def declare_all(node: Any) -> dict[str, Any]:
    """Declare every parameter of the bundled configuration; return their (overridden) values."""
    values: dict[str, Any] = {}
    for name, default in load_parameters().items():
        descriptor = ParameterDescriptor(
            name=name,
            description=DESCRIPTIONS.get(name, name),
            read_only=name not in LIVE,
        )
        values[name] = node.declare_parameter(name, default, descriptor).value
    for name, (default, description) in ROS_ONLY.items():
        node.declare_parameter(
            name,
            default,
            ParameterDescriptor(
                name=name,
                description=description,
                floating_point_range=[FloatingPointRange(from_value=0.0, to_value=3600.0)],
            ),
        )
    return values
