"""Assemble the stack from its configuration: description → model → hardware → controller →
limiter → control loop. Used by the ROS node, ``ct-sim`` and the tests alike."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ct_controllers.config import ConfigError, StackConfig
from ct_controllers.controllers.controller import Controller
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.hardware.guard import GuardLimits
from ct_controllers.hardware.interface import LifecycleState, SystemInterface
from ct_controllers.hardware.watchdog import WatchdogConfig
from ct_controllers.model.description import RobotDescription, load_description
from ct_controllers.model.grip_geometry import GripGeometry, gripper_geometry
from ct_controllers.model.robot import RobotModel
from ct_controllers.plugins import CONTROLLERS, HARDWARE, load_plugin
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.references.limit_approach import FINGER_LIMIT_MARGIN, LimitApproach
from ct_controllers.runtime.control_loop import ControlLoop
from ct_controllers.runtime.gain_stability import (
    GainStability,
    check_configurations,
)

LOG = logging.getLogger("ct_controllers")


@dataclass
class Stack:
    config: StackConfig
    description: RobotDescription
    model: RobotModel
    hardware: SystemInterface
    controller: Controller  # the one running at start (config.default_controller)
    loop: ControlLoop
    controllers: dict[str, Controller] = field(default_factory=dict)  # all loaded, by name
    # Their gains' stability at the loop's rate (and the safe hold's): controller name → check.
    gain_stability: dict[str, GainStability] = field(default_factory=dict)
    # The gripper's width frames and closing limits (None: no gripper, or no frames found).
    grip: GripGeometry | None = None

    def start(self) -> None:
        """Configure and activate the hardware, then start the loop thread."""
        self.bring_up()
        self.loop.start()

    def bring_up(self) -> None:
        """Configure and activate the hardware (no loop thread: drive ``loop.run_ticks``).
        The chosen backend is logged loudly (WARNING) first: real drives must never be a
        surprise."""
        hardware = self.description.hardware.plugin
        real = self.hardware.requires_arming
        LOG.warning(
            "hardware backend: %s (backend: %s) — %s",
            hardware,
            self.config.backend,
            (f"REAL HARDWARE, hardware.armed={self.config.armed}" if real else "simulation"),
        )
        self.hardware.configure()
        self.hardware.activate()

    def shut_down(self) -> None:
        self.loop.stop()
        if self.hardware.state is LifecycleState.ACTIVE:
            self.hardware.deactivate()
        if self.hardware.state is LifecycleState.INACTIVE:
            self.hardware.cleanup()  # releases buses, nodes and threads of real backends


def to_model_order(
    model: RobotModel, names: tuple[str, ...], values: object, what: str
) -> np.ndarray:
    """A per-joint vector given in ``names`` order, re-ordered to model order."""
    array = np.array(values, dtype=np.float64).reshape(-1)
    if array.size != len(names):
        raise ConfigError(f"{what}: expected {len(names)} values, got {array.size}")
    out = np.empty(model.nv)
    out[model.indices(names)] = array
    return out


def gain_stabilities(
    config: StackConfig, model: RobotModel, controllers: dict[str, Controller], delay: int
) -> dict[str, GainStability]:
    """One :class:`GainStability` per loaded controller (by name) and one for the safe hold's
    damping (``safe_hold.damping``), at ``update_rate`` with ``delay`` periods between a
    measurement and its effort (the backend's ``measurement_delay``)."""
    home = to_model_order(model, config.joint_names, config.home_positions, "home_positions")
    configurations = check_configurations(model, home)
    hold = np.diag(
        to_model_order(model, config.joint_names, config.safe_hold_damping, "safe_hold.damping")
    )
    checks = {
        name: GainStability(model, controller, configurations, config.period, delay)
        for name, controller in controllers.items()
    }
    checks["safe_hold.damping"] = GainStability(
        model, (np.zeros_like(hold), hold), configurations, config.period, delay
    )
    return checks


def _warn_of_unstable_gains(config: StackConfig, checks: dict[str, GainStability]) -> None:
    """At start-up: a warning for each controller (and the safe hold) whose sampled loop grows
    somewhere at ``update_rate`` (see :mod:`ct_controllers.runtime.gain_stability`)."""
    for name, check in checks.items():
        found = check.worst()
        if found is None or found.stable:
            continue
        what = name if name == "safe_hold.damping" else f"controller '{name}'"
        LOG.warning(
            "%s: unstable at update_rate %g Hz: its linearized sampled loop (%d period(s) of "
            "delay) has %s (worst of %d configurations), so motions there grow or chatter "
            "against the torque rate limit: lower its gains or raise update_rate",
            what,
            config.update_rate,
            check.delay,
            found.describe(),
            len(check.configurations),
        )


def check_command_interfaces(description: RobotDescription, hardware: SystemInterface) -> None:
    """Every joint is commanded through an interface its ``<ros2_control>`` joint lists as a
    ``<command_interface>`` (a joint that lists none is not checked); else ConfigError naming
    the joints, the interface asked for and those offered."""
    offered = {joint.name: joint.command_interfaces for joint in description.hardware.joints}
    refused = [
        f"{name}: {interface} (offers {', '.join(offered[name])})"
        for name, interface in zip(hardware.joint_names, hardware.command_interfaces, strict=True)
        if offered.get(name) and interface not in offered[name]
    ]
    if refused:
        raise ConfigError(
            f"{hardware.backend_name}: command interface(s) the robot description's "
            f"<ros2_control> block does not offer: {'; '.join(refused)}"
        )


def build_stack(
    config: StackConfig,
    description: RobotDescription | None = None,
    wrap_hardware: Callable[[SystemInterface], SystemInterface] | None = None,
) -> Stack:
    """The whole stack from ``config``; ``wrap_hardware`` (tests, benches) may wrap the backend,
    e.g. in :class:`~ct_controllers.sim.fault_injection.InjectingSystem`."""
    if description is None:
        description = load_description(
            config.robot_description or None, mappings={"backend": config.backend}
        )
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    for group, names in (
        ("arm_joints/gripper_joints", config.joint_names),
        ("<ros2_control>", description.hardware.joint_names),
    ):
        followers = [name for name in names if name in model.mimic]
        if followers:
            mimic = model.mimic[followers[0]]
            raise ConfigError(
                f"{group} lists the mimic joint '{mimic.name}': it follows '{mimic.master}' "
                "and is never commanded; list its master only"
            )
        unknown = sorted(set(names) - set(model.joint_names))
        if unknown:
            raise ConfigError(
                f"{group} name(s) {unknown} are not joints of the URDF "
                f"({', '.join(model.joint_names)})"
            )
        missing = sorted(set(model.joint_names) - set(names))
        if missing:
            raise ConfigError(f"{group} does not list the URDF joint(s) {missing}")
    grip = gripper_geometry(model, config.gripper_joints, config.grip_width_frames)
    plugin = description.hardware.plugin
    hardware_type = load_plugin(HARDWARE, plugin)
    # The plugin says which `backend:` value selects it (its BACKEND; one that says none is
    # taken as it is): a description given directly (robot_description) must agree.
    selected_by = hardware_type.BACKEND
    if selected_by is not None and selected_by != config.backend:
        raise ConfigError(
            f"parameter 'backend' is '{config.backend}' but the robot description's "
            f"<ros2_control> plugin is '{plugin}'"
        )
    hardware = hardware_type.from_config(description, config)  # armed as config.armed says
    check_command_interfaces(description, hardware)
    if wrap_hardware is not None:
        hardware = wrap_hardware(hardware)
    hardware.guard.configure(
        GuardLimits(
            max_state_age=config.effective_max_state_age,
            future_tolerance=config.future_tolerance,
            expected_frame=config.frame_id,
        )
    )
    if config.fault_reaction not in hardware.fault_reactions:
        raise ConfigError(
            f"parameter 'watchdog.fault_reaction': '{config.fault_reaction}' is not offered by "
            f"{description.hardware.plugin} (offers: {', '.join(hardware.fault_reactions)})"
        )
    # Every configured controller is loaded (configure time: unknown types and bad gains fail
    # here); the default one runs. Each owns its model's scratch data (not shared across
    # threads) and may make the model its own (a mass-scaled copy); otherwise the kinematic
    # tree is the stack's, shared read-only, so that chains can share a controller's per-tick
    # model state.
    controllers: dict[str, Controller] = {}
    for name, params in config.controllers.items():
        controller_type = load_plugin(CONTROLLERS, str(params["type"]))
        controller_model = model.with_own_data()
        controllers[name] = controller_type.from_parameters(
            controller_model, config.joint_names, params
        )
    stability = gain_stabilities(config, model, controllers, hardware.measurement_delay)
    _warn_of_unstable_gains(config, stability)
    controller = controllers[config.default_controller]
    limiter = CommandLimiter(
        model.limits.effort,
        to_model_order(
            model, config.joint_names, config.effort_rate_limit, "limiter.effort_rate_limit"
        ),
    )
    loop = ControlLoop(
        hardware,
        model,
        controller,
        limiter,
        period=config.period,
        # The backend says: a simulator as configured (paced or lockstep), a backend whose
        # read() waits for the bus cycle (CANopen SYNC) sets the pace itself, others (the
        # bridge) run on the loop's own schedule.
        paced=hardware.loop_paced,
        reference_limits=JointLimits(
            velocity=model.limits.velocity * config.reference_velocity_fraction,
            acceleration=to_model_order(
                model,
                config.joint_names,
                config.reference_max_acceleration,
                "references.max_acceleration",
            ),
            jerk=to_model_order(
                model, config.joint_names, config.reference_max_jerk, "references.max_jerk"
            ),
            # The arm's (revolute) goals stay inside the joint range, near a limit braked gently
            # enough that tracking does not carry the arm past it; the gripper's fingers' held
            # references FINGER_LIMIT_MARGIN inside theirs (their servo's margin); every plan
            # starts inside the range whatever the measured state (limit_approach.py).
            approach=LimitApproach.for_joints(
                model.limits.lower,
                model.limits.upper,
                np.isin(np.arange(model.nv), model.indices(config.arm_joints)),
                other_margin=FINGER_LIMIT_MARGIN,
            ),
        ),
        hold_damping=to_model_order(
            model, config.joint_names, config.safe_hold_damping, "safe_hold.damping"
        ),
        watchdog=WatchdogConfig(
            state_timeout=config.effective_state_timeout,
            command_timeout=config.effective_command_timeout,
            enabled=config.watchdog_enabled,
            speed_limit_factor=config.speed_limit_factor,
        ),
        fault_reaction=config.fault_reaction,
        realtime=config.realtime,
        overrun_fraction=config.overrun_fraction,
    )
    return Stack(
        config, description, model, hardware, controller, loop, controllers, stability, grip
    )
