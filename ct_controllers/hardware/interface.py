"""The hardware interface every backend implements, with the ros2_control lifecycle.

States: ``unconfigured --configure--> inactive --activate--> active --deactivate--> inactive``
and ``inactive --cleanup--> unconfigured``. ``read()`` works in inactive and active; ``write()``
only in active. Values always travel with their joint names; a backend maps names to its own
addresses once, at configure time.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from ct_controllers.errors import CtError

# The fault reactions and the boundary's sample and command types live in leaf modules (the
# guard and the configuration's schema import them without importing this one); re-exported.
from ct_controllers.hardware.fault_reactions import DAMP as DAMP
from ct_controllers.hardware.fault_reactions import DISABLE as DISABLE
from ct_controllers.hardware.fault_reactions import FAULT_REACTIONS as FAULT_REACTIONS
from ct_controllers.hardware.fault_reactions import HOLD as HOLD
from ct_controllers.hardware.fault_reactions import QUICK_STOP as QUICK_STOP
from ct_controllers.hardware.guard import BoundaryGuard
from ct_controllers.hardware.samples import JointCommand as JointCommand
from ct_controllers.hardware.samples import StateSample as StateSample
from ct_controllers.parameter_schema import ParameterSchema
from ct_controllers.types import FloatArray as FloatArray

if TYPE_CHECKING:
    from typing import Self

    from ct_controllers.config import StackConfig
    from ct_controllers.model.description import RobotDescription

EFFORT = "effort"
POSITION = "position"
COMMAND_INTERFACES = (EFFORT, POSITION)


class LifecycleState(Enum):
    UNCONFIGURED = "unconfigured"
    INACTIVE = "inactive"
    ACTIVE = "active"


# The states read() and write() test every tick, bound once (an Enum member looked up on its
# class costs several times a global's lookup).
_UNCONFIGURED = LifecycleState.UNCONFIGURED
_ACTIVE = LifecycleState.ACTIVE


class LifecycleError(CtError, RuntimeError):
    """A lifecycle transition or call that is not allowed in the current state."""


class CommandRejected(CtError, ValueError):
    """A command failed validation at the hardware boundary; nothing was written.

    ``reason`` is the guard's reason (``"sequence"``, ``"non_finite"``, ...)."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class EffortLimitError(CtError, ValueError):
    """An effort limit a backend cannot set: an unknown joint, a joint whose drive has no
    settable limit, or a value outside the range it can set."""


class NotArmedError(LifecycleError):
    """A real-hardware backend was asked to activate without ``hardware.armed: true``."""


def reactions(*names: str) -> tuple[str, ...]:
    """A backend's ``fault_reactions`` (typed as a variable-length tuple)."""
    return names


@dataclass(frozen=True)
class ActuationReport:
    """What happened to the last command, per joint, in the backend's joint order.

    requested     the value written by the caller (what a simulator stores as ``ctrl``)
    effective     the input after the backend's own input clamp (ctrlrange)
    actuator_force  actuator output before transmission [N·m | N]
    joint_force   generalized force the actuators apply to the joint after transmission and
                  joint-level limits (MuJoCo ``qfrc_actuator``) [N·m | N]
    """

    joint_names: tuple[str, ...]
    requested: FloatArray
    effective: FloatArray
    actuator_force: FloatArray
    joint_force: FloatArray


@dataclass(frozen=True)
class ObjectObservation:
    """What an object sensor reports: stamp [s] on the hardware clock; the object's pose 4x4 in
    the base frame (None if not seen); the normal force [N] between each finger and the object
    (None if not measured; 0 = no contact)."""

    stamp: float
    pose: FloatArray | None
    contact_forces: FloatArray | None


@dataclass(frozen=True)
class SimulatedScene:
    """A simulator's scene, for looking at it: the engine (``"mujoco"``), its model and data, and
    the lock the backend steps them under (hold it while reading the data)."""

    engine: str
    model: object
    data: object
    lock: object


class ObjectSensing(Protocol):
    """An object sensor plug-in (a simulator's privileged view, perception, tactile fingers)."""

    def observe(self) -> ObjectObservation: ...


@dataclass
class SystemInterface(ABC):
    """Base of every hardware backend.

    Subclasses implement :meth:`_read` and :meth:`_write`; the lifecycle hooks
    (``_on_configure`` ...) are optional. This base enforces the lifecycle and runs every command
    through the boundary guard (names, interfaces, finiteness, lengths, stamp, sequence) before a
    backend sees it; the control loop runs every state sample through the same guard.

    Real-hardware backends set ``requires_arming = True``: :meth:`activate` then refuses unless
    ``armed`` is true (parameter ``hardware.armed``). Arming is part of building a backend: the
    constructor takes ``armed`` (keyword) and ``from_config`` passes ``config.armed``; nothing
    arms a backend from outside afterwards. Backends that detect faults of their own
    (a drive in FAULT, a lost heartbeat) report them through :meth:`fault`; drives that offer a
    quick stop or a disable list them in ``fault_reactions``.
    """

    joint_names: tuple[str, ...]
    command_interfaces: tuple[str, ...]  # the interface each joint is commanded through
    state: LifecycleState = field(default=LifecycleState.UNCONFIGURED, init=False)
    armed: bool = field(default=False, kw_only=True)  # hardware.armed, given at construction
    _last_sequence: int = field(default=-1, init=False)
    _claimed: dict[str, str] = field(default_factory=dict, init=False)

    # Class-level settings (not dataclass fields: no annotation), overridden by backends.
    requires_arming = False
    fault_reactions = reactions(DAMP, HOLD)
    backend_name = "hardware"
    paced_by_read = False  # read() blocks until the hardware's next cycle (a bus master)
    # Control periods between a measurement and the effort computed from it taking effect: one
    # over a bus or ROS topics (the command goes out with the next cycle), none in a simulator
    # that steps after the write. The gain checks use it.
    measurement_delay = 1
    # The backend's clock is simulated: the node publishes /clock from it (sim time).
    publishes_clock = False
    # The `backend:` value that selects this plugin; None: the plugin is taken as the robot
    # description names it, whatever `backend:` says.
    BACKEND: ClassVar[str | None] = None
    # Its section of controllers.yaml (named as the `backend:` value that selects it), parsed by
    # from_config; None: a backend without parameters of its own.
    PARAMETERS: ClassVar[ParameterSchema | None] = None

    @classmethod
    def from_config(cls, description: RobotDescription, config: StackConfig) -> Self:
        """The plugin constructor: joints from the description's ``<ros2_control>`` block, the
        rest from ``config`` — the stack's settings (``armed=config.armed`` for a backend that
        ``requires_arming``) and the backend's own section only, as :attr:`PARAMETERS` parsed
        it once when the configuration was loaded (``config.section(PARAMETERS.section)``;
        never parsed again here). Every joint, link and frame name comes from the description
        or the configuration: a backend assumes none."""
        raise NotImplementedError(f"{cls.__name__} does not implement from_config")

    def __post_init__(self) -> None:

        if len(set(self.joint_names)) != len(self.joint_names):
            dup = sorted({n for n in self.joint_names if self.joint_names.count(n) > 1})
            raise ValueError(f"joint(s) listed twice: {', '.join(dup)}")
        if len(self.command_interfaces) != len(self.joint_names):
            raise ValueError(
                f"{len(self.command_interfaces)} command interfaces for "
                f"{len(self.joint_names)} joints"
            )
        for name, interface in zip(self.joint_names, self.command_interfaces, strict=True):
            if interface not in COMMAND_INTERFACES:
                raise ValueError(
                    f"joint '{name}': unknown command interface '{interface}' "
                    f"(known: {', '.join(COMMAND_INTERFACES)})"
                )
        self._claimed = dict(zip(self.joint_names, self.command_interfaces, strict=True))
        self.guard = BoundaryGuard(self.joint_names)

    # --- lifecycle -------------------------------------------------------------------------
    def configure(self) -> None:
        self._require(LifecycleState.UNCONFIGURED, "configure")
        self._on_configure()
        self.state = LifecycleState.INACTIVE

    def activate(self) -> None:
        self._require(LifecycleState.INACTIVE, "activate")
        self.check_armed("activate")
        self._on_activate()
        self._last_sequence = -1
        self.state = LifecycleState.ACTIVE

    def deactivate(self) -> None:
        self._require(LifecycleState.ACTIVE, "deactivate")
        self._on_deactivate()
        self.state = LifecycleState.INACTIVE

    def cleanup(self) -> None:
        self._require(LifecycleState.INACTIVE, "cleanup")
        self._on_cleanup()
        self.state = LifecycleState.UNCONFIGURED

    def check_armed(self, action: str) -> None:
        """Raise :class:`NotArmedError` naming the parameter when this backend drives real
        hardware and is not armed. :meth:`activate` checks it; a backend that touches the
        hardware already when it configures (a bus master writing to its drives) checks it
        there, before it opens anything."""
        if self.requires_arming and not self.armed:
            raise NotArmedError(
                f"refusing to {action} {self.backend_name}: it drives real hardware and "
                "parameter 'hardware.armed' is false (set hardware.armed: true to allow motion)"
            )

    def _on_configure(self) -> None:  # noqa: B027 - optional hook
        pass

    def _on_activate(self) -> None:  # noqa: B027 - optional hook
        pass

    def _on_deactivate(self) -> None:  # noqa: B027 - optional hook
        pass

    def _on_cleanup(self) -> None:  # noqa: B027 - optional hook
        pass

    def _require(self, expected: LifecycleState, action: str) -> None:
        if self.state is not expected:
            raise LifecycleError(
                f"cannot {action} in state '{self.state.value}' (needs '{expected.value}')"
            )

    # --- cyclic ----------------------------------------------------------------------------
    def read(self) -> StateSample:
        """The latest measured state. Allowed when inactive or active."""
        if self.state is _UNCONFIGURED:
            raise LifecycleError("cannot read in state 'unconfigured'")
        return self._read()

    def write(self, command: JointCommand) -> None:
        """Validate ``command`` against the claimed joints and interfaces, then write it.

        Raises :class:`CommandRejected` naming the problem; nothing is written in that case.
        """
        if self.state is not _ACTIVE:
            self._require(LifecycleState.ACTIVE, "write")
        # validate(), inlined: one call fewer on every tick.
        verdict = self.guard.admit_command(command, self._claimed, self._last_sequence, self.now())
        if not isinstance(verdict, np.ndarray):
            raise CommandRejected(verdict.message, verdict.reason)
        self._write(command, verdict)
        self._last_sequence = command.sequence

    def validate(self, command: JointCommand) -> FloatArray:
        """The command's values in this backend's joint order (the command's own array when it
        is already a float64 vector in that order: a backend copies what it keeps), or
        CommandRejected (counted by the guard under ``command.<reason>``)."""
        verdict = self.guard.admit_command(command, self._claimed, self._last_sequence, self.now())
        if not isinstance(verdict, np.ndarray):
            raise CommandRejected(verdict.message, verdict.reason)
        return verdict

    @abstractmethod
    def _read(self) -> StateSample:
        """Return the latest measured state (in ``joint_names`` order)."""

    @abstractmethod
    def _write(self, command: JointCommand, values: FloatArray) -> None:
        """Send validated ``values`` (in ``joint_names`` order) to the hardware. ``values`` may
        be the caller's own array (the command's): read it during the call, copy what is kept
        beyond it, never change it."""

    def now(self) -> float:
        """This backend's clock [s]: sim time for simulators, system time for real drives."""
        return time.monotonic()

    def actuation_report(self) -> ActuationReport | None:
        """Per-joint requested/effective/actuator/joint force of the last write, if known."""
        return None

    # --- faults ----------------------------------------------------------------------------
    def fault(self) -> str | None:
        """A fault the backend detected itself (drive FAULT, lost heartbeat, bus error, ...),
        None when healthy. Latched in the backend until :meth:`reset_fault`."""
        return None

    def reset_fault(self) -> None:  # noqa: B027 - optional hook
        """Clear the backend's own latched faults (e.g. a CiA 402 fault reset). Called by the
        control loop on the control thread when the operator resets a fault."""

    def apply_fault_reaction(self, reaction: str) -> None:
        """Drive-level reactions (``quick_stop``, ``disable``) for backends that list them in
        ``fault_reactions``; ``damp`` and ``hold`` are computed by the loop and need nothing."""
        if reaction not in self.fault_reactions:
            raise ValueError(
                f"fault reaction '{reaction}' is not offered by {self.backend_name} "
                f"(offers: {', '.join(self.fault_reactions)})"
            )

    def diagnostics(self) -> dict[str, object]:
        """Backend-specific status for /diagnostics (key → value)."""
        return {}

    # --- capabilities ----------------------------------------------------------------------
    @property
    def loop_paced(self) -> bool:
        """The control loop keeps its own schedule (sleeps to its period): True unless read()
        waits for the hardware's cycle (``paced_by_read``); a simulator running faster than
        real time (lockstep) says False."""
        return not self.paced_by_read

    def describe(self) -> str:
        """One phrase for the start-up log: what this backend drives."""
        return "real drives"

    def effort_limit_range(self, joint: str) -> tuple[float, float] | None:
        """(lowest, highest) effort limit [N·m | N] this backend can set on ``joint``'s drive
        while it runs, or None when it has none to set (the default; configured backends
        answer). The limit bounds the effort the drive's own loop applies — what a joint on the
        position interface pushes with, e.g. the grip force of a position-controlled gripper
        pressing into an object."""
        return None

    def set_effort_limit(self, joint: str, limit: float | None) -> None:
        """Bound the effort of ``joint``'s drive to ±``limit`` [N·m | N]; None restores the
        backend's default (the URDF effort limit, or the drive's rated torque).

        Commands reach the hardware only through the control loop, and so does this: the loop
        calls it on the control thread, between a controller's tick and the write that follows,
        when the limits the controller asks for (``ControlOutput.effort_limit``) change. Raises
        :class:`EffortLimitError` for an unknown joint, a joint without a settable limit or a
        value outside :meth:`effort_limit_range`; nothing is changed then."""
        if self.state is LifecycleState.UNCONFIGURED:
            raise LifecycleError("cannot set an effort limit in state 'unconfigured'")
        if joint not in self._claimed:
            raise EffortLimitError(f"unknown joint '{joint}'")
        span = self.effort_limit_range(joint)
        if span is None:
            raise EffortLimitError(
                f"{self.backend_name} has no settable effort limit on joint '{joint}'"
            )
        if limit is not None and not (span[0] <= limit <= span[1]):
            raise EffortLimitError(
                f"effort limit {limit} on joint '{joint}' outside [{span[0]:g}, {span[1]:g}] "
                f"(what {self.backend_name} can set)"
            )
        self._set_effort_limit(joint, limit)

    def _set_effort_limit(self, joint: str, limit: float | None) -> None:
        """Set a validated limit (backends whose :meth:`effort_limit_range` answers)."""
        raise NotImplementedError

    def object_sensor(self) -> ObjectSensing | None:
        """The object sensor this backend offers (configured), or None: then the grasp task
        judges by the robot's own sensing (joint positions, velocities, efforts) alone."""
        return None

    def simulated_scene(self) -> SimulatedScene | None:
        """The simulated scene this backend steps (configured), to render (a video, a viewer),
        or None: a backend of real drives has none."""
        return None
