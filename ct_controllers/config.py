"""The stack configuration: ``config/controllers.yaml`` read into one validated, frozen object.

The YAML is a ROS 2 parameters file (``/**/controller_manager: ros__parameters: ...``), so the
same file feeds ``ros2 launch`` and the ROS-free tools. Nested keys become dotted parameter
names (``joint_impedance.stiffness``), as rclpy flattens them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ct_controllers.errors import ConfigError
from ct_controllers.interface_controllers import instance_entries, is_interface_controller
from ct_controllers.model.description import share_directory
from ct_controllers.model.payload import PayloadLimits
from ct_controllers.parameter_schema import PARAMETERS, section_schema
from ct_controllers.parameters_yaml import load_yaml
from ct_controllers.plugins import CONTROLLERS, UnknownPluginError, known_plugins, load_plugin
from ct_controllers.stack_parameters import PARAMETERS as STACK_PARAMETERS


@dataclass(frozen=True)
class RealtimeSettings:
    """priority: SCHED_FIFO priority 1–99 of the control thread, 0 = normal scheduling
    (ros2_control's ``thread_priority``, 50 by default there and here);
    cpu: the CPU the control thread is pinned to, -1 = any;
    lock_memory: lock the process's current and future pages in RAM (mlockall)."""

    priority: int = 50
    cpu: int = -1
    lock_memory: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ValueError(f"realtime.priority must be an integer, got {self.priority!r}")
        if not 0 <= self.priority <= 99:
            raise ValueError(f"realtime.priority must be 0 (off) or 1–99, got {self.priority}")
        if isinstance(self.cpu, bool) or not isinstance(self.cpu, int) or self.cpu < -1:
            raise ValueError(f"realtime.cpu must be a CPU number or -1 (any), got {self.cpu!r}")


@dataclass(frozen=True)
class Target:
    """A launch file's defaults."""

    backend: str
    use_sim_time: bool
    summary: str


# What ros2 launch ct_controllers sim.launch.py / hardware.launch.py (and ct-bringup, and
# ct_control_node --target) select by default.
TARGETS: dict[str, Target] = {
    "sim": Target("mujoco", True, "the stack on the MuJoCo backend (sim time on /clock)"),
    "hardware": Target(
        "ros2_control_bridge",
        False,
        "the stack on real drives (system clock); real backends refuse to activate unless "
        "hardware.armed is true",
    ),
}

OPTIONAL_WIDTH_FRAMES = "gripper.width_frames"  # may be left out: [] (from_parameters)
# Came after the first ct-setup files too: left out, it is "auto" (stack_parameters).
OPTIONAL_JOINT_STATES_TOPIC = "joint_states_topic"
# May be left out (files written before them): no payload may be set, as by default.
OPTIONAL_PAYLOAD = {
    "payload.rated_mass": 0.0,
    "payload.max_com_distance": 0.3,
    "grasp.identify_payload": False,
}
# May be left out (files written before them): the finger servo's defaults [N/m, N·s/m].
OPTIONAL_FINGER_SERVO = {"gripper.stiffness": 2000.0, "gripper.damping": 20.0}

# The sections a parameters file may give the controller manager in, first found wins;
# "/**/controller_manager" (the bundled file's) applies in every namespace
# (ct_controllers.node_names).
NODE_KEYS = (
    "/**/controller_manager",
    "/ct/controller_manager",
    "ct/controller_manager",
    "controller_manager",
    "/**",
)


def default_config_path() -> Path:
    return share_directory() / "config" / "controllers.yaml"


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}"""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def load_parameters(path: str | Path | None = None) -> dict[str, Any]:
    """The controller manager's parameters from a ROS 2 parameters file, flattened."""
    file = Path(path) if path is not None else default_config_path()
    try:
        document = load_yaml(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {file}") from None
    if not isinstance(document, Mapping):
        raise ConfigError(f"{file}: expected a mapping at the top level")
    for key in NODE_KEYS:
        if key in document:
            section = document[key]
            if not isinstance(section, Mapping) or "ros__parameters" not in section:
                raise ConfigError(f"{file}: '{key}' has no 'ros__parameters'")
            return flatten(section["ros__parameters"])
    raise ConfigError(f"{file}: no section for the controller manager (one of {NODE_KEYS})")


@dataclass(frozen=True)
class StackConfig:
    """Validated configuration (:meth:`from_parameters`; the stack's entries, their defaults and
    descriptions are :mod:`ct_controllers.stack_parameters`). Vectors are in ``joint_names``
    (arm then gripper) order."""

    update_rate: float  # [Hz]
    robot_description: str  # path, "" = bundled
    backend: str
    base_frame: str
    tcp_frame: str
    arm_joints: tuple[str, ...]
    gripper_joints: tuple[str, ...]
    # gripper.width_frames: the two frames the grip width is measured between, () = found
    # from the gripper joints (ct_controllers.model.grip_geometry).
    grip_width_frames: tuple[str, ...]
    home_positions: tuple[float, ...]  # [rad | m]
    default_controller: str
    controllers: Mapping[str, Mapping[str, Any]]  # name -> {"type": ..., gains ...}
    # The standard-interface controllers (trajectory, gripper actions: ct_controllers.
    # interface_controllers): name -> {"type": ..., entries ...}; they write no command.
    interface_controllers: Mapping[str, Mapping[str, Any]]
    reference_velocity_fraction: float  # of the URDF velocity limits [-]
    reference_max_acceleration: tuple[float, ...]  # [rad/s² | m/s²]
    reference_max_jerk: tuple[float, ...]  # [rad/s³ | m/s³]
    effort_rate_limit: tuple[float, ...]  # [N·m/s | N/s] per joint
    safe_hold_damping: tuple[float, ...]  # [N·m·s/rad | N·s/m]
    armed: bool  # hardware.armed: real backends refuse to activate unless true
    max_state_age: float  # [s], 0 = the state timeout
    future_tolerance: float  # [s]
    frame_id: str  # expected frame id of state messages, "" = not checked
    watchdog_enabled: bool
    state_timeout: float  # [s], 0 = 3 control periods
    command_timeout: float  # [s], 0 = 3 control periods
    fault_reaction: str
    speed_limit_factor: float  # [-] × the URDF velocity limit: a runaway fault; 0 = off
    realtime: RealtimeSettings
    cartesian_update_rate: float  # [Hz] task + differential IK; 0 = update_rate
    overrun_fraction: float  # [-] of a period: a tick starting later is an overrun
    # Live gain sets may leave a joint with no feedback at all (K = D = 0): it floats freely.
    allow_free_joints: bool
    # Where the joint states are also published (stack_parameters: auto | "" | a topic).
    joint_states_topic: str = "auto"
    # payload.rated_mass [kg] (0: no payload may be set), payload.max_com_distance [m].
    payload_rated_mass: float = 0.0
    payload_max_com_distance: float = 0.3
    # grasp.identify_payload: the Grasp identifies the held object's mass in HOLD.
    grasp_identify_payload: bool = False
    # gripper.stiffness [N/m], gripper.damping [N·s/m]: the finger servo's gains (Grasp and
    # GripperCommand), at the finger surface.
    gripper_stiffness: float = 2000.0
    gripper_damping: float = 20.0
    # Every parameter as given, flattened (a controller instance's entries, tools that show
    # the file).
    parameters: Mapping[str, Any] = field(default_factory=dict)
    # The plugin sections checked here, once (the selected backend's, sized by the joint
    # lists, and every other one present that has a registered schema): section -> parsed
    # values. A backend's ``from_config`` reads its own from here (:meth:`section`) instead of
    # parsing it again.
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def section(self, name: str) -> Mapping[str, Any]:
        """A plugin section's parsed values (``section("canopen")["node_ids"]``); ConfigError
        when the configuration has none of that name."""
        if name not in self.sections:
            raise ConfigError(
                f"the configuration has no checked section '{name}' "
                f"(has: {', '.join(sorted(self.sections)) or 'none'})"
            )
        return self.sections[name]

    @property
    def payload_limits(self) -> PayloadLimits:
        """What the arm may carry (``payload.*``): checks of payloads set or identified."""
        return PayloadLimits(self.payload_rated_mass, self.payload_max_com_distance)

    @property
    def effective_state_timeout(self) -> float:
        """[s] ``watchdog.state_timeout``, or 3 control periods when 0."""
        return self.state_timeout or 3.0 * self.period

    @property
    def effective_max_state_age(self) -> float:
        """[s] ``hardware.max_state_age``, or the state timeout when 0 (a sample older than the
        watchdog tolerates is as good as none)."""
        return self.max_state_age or self.effective_state_timeout

    @property
    def effective_command_timeout(self) -> float:
        """[s] ``watchdog.command_timeout``, or 3 control periods when 0."""
        return self.command_timeout or 3.0 * self.period

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.arm_joints + self.gripper_joints

    @property
    def period(self) -> float:
        return 1.0 / self.update_rate

    @property
    def cartesian_divisor(self) -> int:
        """Control ticks per step of the Cartesian stage (task + differential IK), ≥ 1."""
        if not self.cartesian_update_rate:
            return 1
        return round(self.update_rate / self.cartesian_update_rate)

    @property
    def effective_cartesian_rate(self) -> float:
        """[Hz] ``cartesian.update_rate``, or ``update_rate`` when 0."""
        return self.update_rate / self.cartesian_divisor

    @staticmethod
    def from_parameters(params: Mapping[str, Any]) -> StackConfig:
        """The flattened parameters checked: the stack's own entries by its schema
        (:data:`ct_controllers.stack_parameters.PARAMETERS`), each controller instance's entries
        gathered (its type checks them when it is built), and the plugin sections by their
        schemas. ConfigError names the parameter."""
        # gripper.width_frames came after the first ct-setup files: one written before it (or a
        # hand-written one) that leaves it out means "found from the gripper joints" ([]).
        # payload.* came later still: left out, no payload may be set (rated mass 0).
        params = {
            OPTIONAL_WIDTH_FRAMES: (),
            OPTIONAL_JOINT_STATES_TOPIC: "auto",
            **OPTIONAL_PAYLOAD,
            **OPTIONAL_FINGER_SERVO,
            **params,
        }
        values = STACK_PARAMETERS.parse(params)
        if values["grasp.identify_payload"] and values["payload.rated_mass"] <= 0.0:
            raise ConfigError(
                "parameter 'grasp.identify_payload' is true but 'payload.rated_mass' is 0: state "
                "the arm's rated payload, or no identified payload could be carried"
            )
        joints = values["arm_joints"] + values["gripper_joints"]
        controllers: dict[str, dict[str, Any]] = {}
        interface_controllers: dict[str, dict[str, Any]] = {}
        for controller in values["controllers"]:
            entries = instance_entries(controller, params)
            if "type" not in entries:
                raise ConfigError(f"controller '{controller}' has no 'type' parameter")
            if _serves_an_interface(str(entries["type"])):
                interface_controllers[controller] = entries
            else:
                controllers[controller] = entries
        if values["default_controller"] in interface_controllers:
            raise ConfigError(
                f"default_controller '{values['default_controller']}' is a "
                f"{interface_controllers[values['default_controller']]['type']}: it must be a "
                f"joint-level controller (one of {', '.join(controllers) or 'none configured'})"
            )
        backend = values["backend"]
        # Plugin sections, each checked by its plugin's schema: the selected backend's, sized
        # by the joint lists, and every other one present as it stands (a MuJoCo setup with
        # other joints need not rewrite the drive tables it does not use). A section nobody
        # uses may be left out.
        present = {key.split(".", 1)[0] for key in params if "." in key}
        sections: dict[str, Mapping[str, Any]] = {}
        for name in sorted(({backend} | present) & set(known_plugins(PARAMETERS))):
            schema = section_schema(name)
            assert schema is not None
            sections[name] = schema.parse(params, len(joints) if name == backend else None)
        return StackConfig(
            update_rate=values["update_rate"],
            robot_description=values["robot_description"],
            backend=backend,
            base_frame=values["base_frame"],
            tcp_frame=values["tcp_frame"],
            arm_joints=values["arm_joints"],
            gripper_joints=values["gripper_joints"],
            grip_width_frames=values["gripper.width_frames"],
            home_positions=values["home_positions"],
            default_controller=values["default_controller"],
            controllers=controllers,
            interface_controllers=interface_controllers,
            reference_velocity_fraction=values["references.velocity_fraction"],
            reference_max_acceleration=values["references.max_acceleration"],
            reference_max_jerk=values["references.max_jerk"],
            effort_rate_limit=values["limiter.effort_rate_limit"],
            safe_hold_damping=values["safe_hold.damping"],
            armed=values["hardware.armed"],
            max_state_age=values["hardware.max_state_age"],
            future_tolerance=values["hardware.future_tolerance"],
            frame_id=values["hardware.frame_id"],
            watchdog_enabled=values["watchdog.enabled"],
            state_timeout=values["watchdog.state_timeout"],
            command_timeout=values["watchdog.command_timeout"],
            fault_reaction=values["watchdog.fault_reaction"],
            speed_limit_factor=values["watchdog.speed_limit_factor"],
            realtime=RealtimeSettings(
                priority=values["realtime.priority"],
                cpu=values["realtime.cpu"],
                lock_memory=values["realtime.lock_memory"],
            ),
            cartesian_update_rate=values["cartesian.update_rate"],
            overrun_fraction=values["overrun_fraction"],
            allow_free_joints=values["allow_free_joints"],
            joint_states_topic=values["joint_states_topic"],
            payload_rated_mass=values["payload.rated_mass"],
            payload_max_com_distance=values["payload.max_com_distance"],
            grasp_identify_payload=values["grasp.identify_payload"],
            gripper_stiffness=values["gripper.stiffness"],
            gripper_damping=values["gripper.damping"],
            parameters=dict(params),
            sections=sections,
        )


def _serves_an_interface(type_name: str) -> bool:
    """Whether the controller type ``type_name`` is a standard-interface one (an unknown type
    is not: building the stack names it with the known ones)."""
    try:
        return is_interface_controller(load_plugin(CONTROLLERS, type_name))
    except UnknownPluginError:
        return False


def load_config(
    path: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> StackConfig:
    """Read and validate a configuration file; ``overrides`` replace single parameters."""
    params = load_parameters(path)
    params.update(overrides or {})
    return StackConfig.from_parameters(params)
