"""The hardware interface every backend implements, with the ros2_control lifecycle.

States: ``unconfigured --configure--> inactive --activate--> active --deactivate--> inactive``
and ``inactive --cleanup--> unconfigured``. ``read()`` works in inactive and active; ``write()``
only in active. Values always travel with their joint names; a backend maps names to its own
addresses once, at configure time.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

EFFORT = "effort"
POSITION = "position"
COMMAND_INTERFACES = (EFFORT, POSITION)


class LifecycleState(Enum):
    UNCONFIGURED = "unconfigured"
    INACTIVE = "inactive"
    ACTIVE = "active"


class LifecycleError(RuntimeError):
    """A lifecycle transition or call that is not allowed in the current state."""


class CommandRejected(ValueError):
    """A command failed validation at the hardware boundary; nothing was written."""


@dataclass(frozen=True)
class StateSample:
    """Measured joint state at one instant.

    stamp     [s] measurement time in this process's clock (sim time with MuJoCo)
    position  [rad | m], velocity [rad/s | m/s], effort [N·m | N] (measured/applied actuator
              effort), each in ``joint_names`` order.
    """

    stamp: float
    joint_names: tuple[str, ...]
    position: FloatArray
    velocity: FloatArray
    effort: FloatArray


@dataclass(frozen=True)
class JointCommand:
    """One command for every claimed joint.

    stamp      [s] stamp of the state sample the command was computed from
    sequence   strictly increasing per writer
    interfaces per joint, ``"effort"`` ([N·m | N]) or ``"position"`` ([rad | m])
    values     in ``joint_names`` order
    """

    stamp: float
    sequence: int
    joint_names: tuple[str, ...]
    interfaces: tuple[str, ...]
    values: FloatArray


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


@dataclass
class SystemInterface(ABC):
    """Base of every hardware backend.

    Subclasses implement :meth:`_read` and :meth:`_write`; the lifecycle hooks
    (``_on_configure`` ...) are optional. This base enforces the lifecycle and validates every
    command (names, interfaces, finiteness, lengths, sequence) before a backend sees it.
    """

    joint_names: tuple[str, ...]
    command_interfaces: tuple[str, ...]  # the interface each joint is commanded through
    state: LifecycleState = field(default=LifecycleState.UNCONFIGURED, init=False)
    _last_sequence: int = field(default=-1, init=False)
    _claimed: dict[str, str] = field(default_factory=dict, init=False)

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

    # --- lifecycle -------------------------------------------------------------------------
    def configure(self) -> None:
        self._require(LifecycleState.UNCONFIGURED, "configure")
        self._on_configure()
        self.state = LifecycleState.INACTIVE

    def activate(self) -> None:
        self._require(LifecycleState.INACTIVE, "activate")
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
        if self.state is LifecycleState.UNCONFIGURED:
            raise LifecycleError("cannot read in state 'unconfigured'")
        return self._read()

    def write(self, command: JointCommand) -> None:
        """Validate ``command`` against the claimed joints and interfaces, then write it.

        Raises :class:`CommandRejected` naming the problem; nothing is written in that case.
        """
        self._require(LifecycleState.ACTIVE, "write")
        values = self.validate(command)
        self._write(command, values)
        self._last_sequence = command.sequence

    def validate(self, command: JointCommand) -> FloatArray:
        """The command's values re-ordered to this backend's joint order, or CommandRejected."""
        names = command.joint_names
        if not (len(names) == len(command.interfaces) == len(command.values)):
            raise CommandRejected(
                f"length mismatch: {len(names)} names, {len(command.interfaces)} interfaces, "
                f"{len(command.values)} values"
            )
        position_of = {name: i for i, name in enumerate(names)}
        if len(position_of) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise CommandRejected(f"joint(s) listed twice: {', '.join(dup)}")
        unknown = [n for n in names if n not in self._claimed]
        if unknown:
            raise CommandRejected(
                f"unknown joint(s): {', '.join(unknown)}; this hardware has: "
                f"{', '.join(self.joint_names)}"
            )
        missing = [n for n in self.joint_names if n not in position_of]
        if missing:
            raise CommandRejected(f"no command for joint(s): {', '.join(missing)}")
        order = [position_of[n] for n in self.joint_names]
        for name, i in zip(self.joint_names, order, strict=True):
            if command.interfaces[i] != self._claimed[name]:
                raise CommandRejected(
                    f"joint '{name}' is commanded through '{self._claimed[name]}', "
                    f"got '{command.interfaces[i]}'"
                )
            if not math.isfinite(float(command.values[i])):
                raise CommandRejected(f"joint '{name}': non-finite value {command.values[i]}")
        if not math.isfinite(command.stamp):
            raise CommandRejected(f"non-finite stamp {command.stamp}")
        if command.sequence <= self._last_sequence:
            raise CommandRejected(
                f"sequence {command.sequence} is not after the last one ({self._last_sequence})"
            )
        return np.asarray(command.values, dtype=np.float64)[order]

    @abstractmethod
    def _read(self) -> StateSample:
        """Return the latest measured state (in ``joint_names`` order)."""

    @abstractmethod
    def _write(self, command: JointCommand, values: FloatArray) -> None:
        """Send validated ``values`` (in ``joint_names`` order) to the hardware."""

    def now(self) -> float:
        """This backend's clock [s]: sim time for simulators, system time for real drives."""
        return time.monotonic()

    def actuation_report(self) -> ActuationReport | None:
        """Per-joint requested/effective/actuator/joint force of the last write, if known."""
        return None
