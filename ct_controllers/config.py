"""The stack configuration: ``config/controllers.yaml`` read into one validated, frozen object.

The YAML is a ROS 2 parameters file (``/ct/controller_manager: ros__parameters: ...``), so the
same file feeds ``ros2 launch`` and the ROS-free tools. Nested keys become dotted parameter
names (``joint_impedance.stiffness``), as rclpy flattens them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ct_controllers.errors import ConfigError
from ct_controllers.hardware.interface import FAULT_REACTIONS
from ct_controllers.model.description import share_directory
from ct_controllers.parameter_schema import PARAMETERS, section_schema
from ct_controllers.plugins import known_plugins


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

NODE_KEYS = ("/ct/controller_manager", "ct/controller_manager", "controller_manager", "/**")


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
        document = yaml.safe_load(file.read_text())
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
    """Validated configuration. Vectors are in ``joint_names`` (arm then gripper) order."""

    update_rate: float  # [Hz]
    robot_description: str  # path, "" = bundled
    backend: str
    base_frame: str
    tcp_frame: str
    arm_joints: tuple[str, ...]
    gripper_joints: tuple[str, ...]
    home_positions: tuple[float, ...]  # [rad | m]
    default_controller: str
    controllers: Mapping[str, Mapping[str, Any]]  # name -> {"type": ..., gains ...}
    reference_velocity_fraction: float  # of the URDF velocity limits [-]
    reference_max_acceleration: tuple[float, ...]  # [rad/s² | m/s²]
    reference_max_jerk: tuple[float, ...]  # [rad/s³ | m/s³]
    effort_rate_limit: tuple[float, ...]  # [N·m/s | N/s] per joint
    safe_hold_damping: tuple[float, ...]  # [N·m·s/rad | N·s/m]
    armed: bool = False  # hardware.armed: real backends refuse to activate unless true
    max_state_age: float = 0.0  # [s], 0 = the state timeout
    future_tolerance: float = 0.001  # [s]
    frame_id: str = ""  # expected frame id of state messages, "" = not checked
    watchdog_enabled: bool = True
    state_timeout: float = 0.0  # [s], 0 = 3 control periods
    command_timeout: float = 0.0  # [s], 0 = 3 control periods
    fault_reaction: str = "damp"
    realtime: RealtimeSettings = field(default_factory=RealtimeSettings)
    cartesian_update_rate: float = 0.0  # [Hz] task + differential IK; 0 = update_rate
    overrun_fraction: float = 0.5  # [-] of a period: a tick starting later is an overrun
    # Live gain sets may leave a joint with no feedback at all (K = D = 0): it floats freely.
    allow_free_joints: bool = False
    # Every parameter as given, flattened: a plugin's ``from_config`` parses its own section
    # from these with its schema (:meth:`section`).
    parameters: Mapping[str, Any] = field(default_factory=dict)
    # The plugin sections checked here (the selected backend's and every other one present
    # that has a registered schema): section -> parsed values.
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
        def get(name: str, kind: type | tuple[type, ...]) -> Any:
            if name not in params:
                raise ConfigError(f"parameter '{name}' is missing")
            value = params[name]
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise ConfigError(f"parameter '{name}': expected {kind}, got {value!r}")
            return value

        def names(name: str) -> tuple[str, ...]:
            value = tuple(get(name, list))
            if not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f"parameter '{name}': expected a list of non-empty names")
            return value

        def numbers(name: str, size: int) -> tuple[float, ...]:
            value = get(name, list)
            if len(value) != size:
                raise ConfigError(f"parameter '{name}': expected {size} values, got {len(value)}")
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in value):
                raise ConfigError(f"parameter '{name}': expected finite numbers, got {value}")
            return tuple(float(v) for v in value)

        arm, gripper = names("arm_joints"), names("gripper_joints")
        joints = arm + gripper
        duplicates = sorted({n for n in joints if joints.count(n) > 1})
        if duplicates:
            raise ConfigError(f"joint(s) listed twice in arm_joints/gripper_joints: {duplicates}")
        rate = float(get("update_rate", (int, float)))
        if not (math.isfinite(rate) and 1.0 <= rate <= 10000.0):
            raise ConfigError(f"parameter 'update_rate': must be in [1, 10000] Hz, got {rate}")
        controller_names = names("controllers")
        controllers: dict[str, dict[str, Any]] = {}
        for controller in controller_names:
            prefix = f"{controller}."
            entries = {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}
            if "type" not in entries:
                raise ConfigError(f"controller '{controller}' has no 'type' parameter")
            controllers[controller] = entries
        default = get("default_controller", str)
        if default not in controllers:
            raise ConfigError(
                f"default_controller '{default}' is not among the controllers {controller_names}"
            )
        rate_limit = numbers("limiter.effort_rate_limit", len(joints))
        if min(rate_limit) <= 0:
            raise ConfigError(
                f"parameter 'limiter.effort_rate_limit' must be > 0, got {list(rate_limit)}"
            )
        fraction = float(get("references.velocity_fraction", (int, float)))
        if not (math.isfinite(fraction) and 0 < fraction <= 1):
            raise ConfigError(
                f"parameter 'references.velocity_fraction' must be in (0, 1], got {fraction}"
            )

        def seconds(name: str, allow_zero: bool = False) -> float:
            value = float(get(name, (int, float)))
            if not (math.isfinite(value) and (value > 0 or (allow_zero and value == 0))):
                bound = ">= 0" if allow_zero else "> 0"
                raise ConfigError(f"parameter '{name}' must be finite and {bound} s, got {value}")
            return value

        def one_of(name: str, choices: tuple[str, ...]) -> str:
            value = get(name, str)
            if value not in choices:
                raise ConfigError(
                    f"parameter '{name}': '{value}' is not one of {', '.join(choices)}"
                )
            return value

        backend = get("backend", str)

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
        try:
            realtime = RealtimeSettings(
                priority=get("realtime.priority", int),
                cpu=get("realtime.cpu", int),
                lock_memory=get("realtime.lock_memory", bool),
            )
        except ValueError as exc:
            raise ConfigError(f"parameter {exc}") from None
        overrun_fraction = float(get("overrun_fraction", (int, float)))
        if not 0 < overrun_fraction <= 1:
            raise ConfigError(
                f"parameter 'overrun_fraction': must be in (0, 1] of a period, got "
                f"{overrun_fraction}"
            )
        cartesian_rate = float(get("cartesian.update_rate", (int, float)))
        if cartesian_rate:
            ratio = rate / cartesian_rate if cartesian_rate > 0 else math.nan
            if not (ratio >= 1 and abs(ratio - round(ratio)) < 1e-9):
                raise ConfigError(
                    "parameter 'cartesian.update_rate': must divide update_rate "
                    f"({rate} Hz) into a whole number ≥ 1 of control ticks, got {cartesian_rate} "
                    "Hz (0 = update_rate)"
                )
        acceleration = numbers("references.max_acceleration", len(joints))
        jerk = numbers("references.max_jerk", len(joints))
        for name, values in (("max_acceleration", acceleration), ("max_jerk", jerk)):
            if min(values) <= 0:
                raise ConfigError(f"parameter 'references.{name}' must be > 0, got {values}")
        return StackConfig(
            update_rate=rate,
            robot_description=get("robot_description", str),
            backend=get("backend", str),
            base_frame=get("base_frame", str),
            tcp_frame=get("tcp_frame", str),
            arm_joints=arm,
            gripper_joints=gripper,
            home_positions=numbers("home_positions", len(joints)),
            default_controller=default,
            controllers=controllers,
            reference_velocity_fraction=fraction,
            reference_max_acceleration=acceleration,
            reference_max_jerk=jerk,
            effort_rate_limit=rate_limit,
            safe_hold_damping=numbers("safe_hold.damping", len(joints)),
            armed=get("hardware.armed", bool),
            max_state_age=seconds("hardware.max_state_age", allow_zero=True),
            future_tolerance=seconds("hardware.future_tolerance", allow_zero=True),
            frame_id=get("hardware.frame_id", str),
            watchdog_enabled=get("watchdog.enabled", bool),
            state_timeout=seconds("watchdog.state_timeout", allow_zero=True),
            command_timeout=seconds("watchdog.command_timeout", allow_zero=True),
            fault_reaction=one_of("watchdog.fault_reaction", FAULT_REACTIONS),
            realtime=realtime,
            cartesian_update_rate=cartesian_rate,
            overrun_fraction=overrun_fraction,
            allow_free_joints=get("allow_free_joints", bool),
            parameters=dict(params),
            sections=sections,
        )


def load_config(
    path: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> StackConfig:
    """Read and validate a configuration file; ``overrides`` replace single parameters."""
    params = load_parameters(path)
    params.update(overrides or {})
    return StackConfig.from_parameters(params)
