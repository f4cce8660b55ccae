"""Assemble the stack from its configuration: description → model → hardware → controller →
limiter → control loop. Used by the ROS node, ``ct-sim`` and the tests alike."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ct_controllers.config import ConfigError, StackConfig
from ct_controllers.controllers.controller import Controller, sampled_loop_radius
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.hardware.guard import GuardLimits
from ct_controllers.hardware.interface import LifecycleState, SystemInterface
from ct_controllers.hardware.watchdog import WatchdogConfig
from ct_controllers.model.description import RobotDescription, load_description
from ct_controllers.model.robot import RobotModel
from ct_controllers.plugins import CONTROLLERS, HARDWARE, load_plugin
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.runtime.control_loop import ControlLoop

LOG = logging.getLogger("ct_controllers")
# Random configurations (besides home) at which start-up checks the gains' sampled loops.
STABILITY_SAMPLES = 24
# The plugin each `backend:` value selects through the xacro argument; a description given
# directly (robot_description) that names one of these must name the backend's.
BACKEND_PLUGINS = {
    "mujoco": "ct_controllers/MujocoSystem",
    "ros2_control_bridge": "ct_controllers/Ros2ControlBridge",
    "canopen": "ct_controllers/CanopenCia402System",
}


@dataclass
class Stack:
    config: StackConfig
    description: RobotDescription
    model: RobotModel
    hardware: SystemInterface
    controller: Controller  # the one running at start (config.default_controller)
    loop: ControlLoop
    controllers: dict[str, Controller] = field(default_factory=dict)  # all loaded, by name

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


def _warn_of_unstable_gains(
    config: StackConfig, model: RobotModel, controllers: dict[str, Controller]
) -> None:
    """Gains are rate-dependent: warn (at start-up) of each controller, and of the safe hold's
    damping, whose sampled loop at ``update_rate`` grows somewhere (spectral radius of the
    linearized loop above 1 at ``home_positions`` or at one of ``STABILITY_SAMPLES`` random
    configurations, one joint at zero in each, as where joint axes line up). The plant is the
    model (URDF inertia and armature); a loop over a bus or ROS topics gets a period of delay,
    MuJoCo none. Real drives with more rotor inertia than the URDF says are safer than this."""
    delay = 0 if config.backend == "mujoco" else 1
    home = to_model_order(model, config.joint_names, config.home_positions, "home_positions")
    rng = np.random.default_rng(0)
    configurations = [home]
    lower, upper = model.limits.lower, model.limits.upper
    for i in range(STABILITY_SAMPLES):
        q = rng.uniform(lower, upper)
        joint = i % model.nv
        q[joint] = min(max(0.0, lower[joint]), upper[joint])
        configurations.append(q)
    masses = [model.mass_matrix(q) for q in configurations]
    hold = np.diag(to_model_order(model, config.joint_names, config.safe_hold_damping, "hold"))
    loops: dict[str, Controller | tuple[np.ndarray, np.ndarray]] = {
        f"controller '{name}'": controller for name, controller in controllers.items()
    }
    loops["safe_hold.damping"] = (np.zeros_like(hold), hold)
    for name, feedback in loops.items():
        worst, at = 0.0, home
        for q, mass in zip(configurations, masses, strict=True):
            gains = feedback.linear_feedback(q) if isinstance(feedback, Controller) else feedback
            if gains is None:
                break
            radius = sampled_loop_radius(mass, gains[0], gains[1], config.period, delay)
            if radius > worst:
                worst, at = radius, q
        if worst > 1.0 + 1e-6:
            LOG.warning(
                "%s: unstable at update_rate %g Hz: its linearized sampled loop (%d period(s) of "
                "delay) has spectral radius %.3f at q = %s [rad | m] (worst of %d "
                "configurations), so motions there grow or chatter against the torque rate "
                "limit: lower its gains or raise update_rate",
                name,
                config.update_rate,
                delay,
                worst,
                "[" + ", ".join(f"{value:.2f}" for value in at) + "]",
                len(configurations),
            )


def build_stack(
    config: StackConfig,
    description: RobotDescription | None = None,
    wrap_hardware: Callable[[SystemInterface], SystemInterface] | None = None,
) -> Stack:
    """The whole stack from ``config``; ``wrap_hardware`` (tests, benches) may wrap the backend,
    e.g. in :class:`~ct_controllers.hardware.fault_injection.InjectingSystem`."""
    if description is None:
        description = load_description(
            config.robot_description or None, mappings={"backend": config.backend}
        )
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    for group, names in (
        ("arm_joints/gripper_joints", config.joint_names),
        ("<ros2_control>", description.hardware.joint_names),
    ):
        unknown = sorted(set(names) - set(model.joint_names))
        if unknown:
            raise ConfigError(
                f"{group} name(s) {unknown} are not joints of the URDF "
                f"({', '.join(model.joint_names)})"
            )
        missing = sorted(set(model.joint_names) - set(names))
        if missing:
            raise ConfigError(f"{group} does not list the URDF joint(s) {missing}")
    plugin = description.hardware.plugin
    expected = BACKEND_PLUGINS.get(config.backend)
    if plugin in BACKEND_PLUGINS.values() and plugin != expected:  # third-party plugins pass
        raise ConfigError(
            f"parameter 'backend' is '{config.backend}' but the robot description's "
            f"<ros2_control> plugin is '{plugin}'"
        )
    hardware_type = load_plugin(HARDWARE, description.hardware.plugin)
    hardware = hardware_type.from_config(description, config)
    if wrap_hardware is not None:
        hardware = wrap_hardware(hardware)
    hardware.armed = config.armed
    hardware.guard.limits = GuardLimits(
        max_state_age=config.effective_max_state_age,
        future_tolerance=config.future_tolerance,
        expected_frame=config.frame_id,
    )
    if config.fault_reaction not in hardware.fault_reactions:
        raise ConfigError(
            f"parameter 'watchdog.fault_reaction': '{config.fault_reaction}' is not offered by "
            f"{description.hardware.plugin} (offers: {', '.join(hardware.fault_reactions)})"
        )
    # Every configured controller is loaded (configure time: unknown types and bad gains fail
    # here); the default one runs. Each owns its model: it may differ from the plant's, and it
    # is not shared across threads.
    controllers: dict[str, Controller] = {}
    for name, params in config.controllers.items():
        controller_type = load_plugin(CONTROLLERS, str(params["type"]))
        controller_model = RobotModel(description.urdf, config.tcp_frame, config.base_frame)
        controllers[name] = controller_type.from_parameters(
            controller_model, config.joint_names, params
        )
    _warn_of_unstable_gains(config, model, controllers)
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
        # MuJoCo: as configured; a backend whose read() waits for the bus cycle (CANopen SYNC)
        # sets the pace itself; others (the bridge) run on the loop's own schedule.
        paced=(
            config.mujoco_mode == "paced"
            if config.backend == "mujoco"
            else not hardware.paced_by_read
        ),
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
        ),
        hold_damping=to_model_order(
            model, config.joint_names, config.safe_hold_damping, "safe_hold.damping"
        ),
        watchdog=WatchdogConfig(
            state_timeout=config.effective_state_timeout,
            command_timeout=config.effective_command_timeout,
            enabled=config.watchdog_enabled,
        ),
        fault_reaction=config.fault_reaction,
        realtime=config.realtime,
        overrun_fraction=config.overrun_fraction,
    )
    return Stack(config, description, model, hardware, controller, loop, controllers)
