"""What crosses the hardware boundary each tick: a measured state sample and a joint command.
A leaf (it imports nothing of the hardware layer), so that the boundary guard and every backend
share the types without an import circle; :mod:`ct_controllers.hardware.interface` re-exports
them."""

from __future__ import annotations

from typing import NamedTuple

from ct_controllers.types import FloatArray


class StateSample(NamedTuple):
    """Measured joint state at one instant. (A NamedTuple, immutable: a backend builds one
    every tick, in a third of a frozen dataclass's time.)

    stamp     [s] measurement time in this process's clock (sim time with MuJoCo); NaN when
              the source gave none
    position  [rad | m], velocity [rad/s | m/s], effort [N·m | N] (measured/applied actuator
              effort; NaN where not measured), each in ``joint_names`` order.
    sequence  the source's sample counter, if it has one (None otherwise)
    frame_id  the frame id the source message carried, if any (None otherwise)

    A backend hands samples over as its source gave them (names in the source's order); the
    :class:`~ct_controllers.hardware.guard.BoundaryGuard` checks them and re-orders them by name.
    """

    stamp: float
    joint_names: tuple[str, ...]
    position: FloatArray
    velocity: FloatArray
    effort: FloatArray
    sequence: int | None = None
    frame_id: str | None = None


class JointCommand(NamedTuple):
    """One command for every claimed joint. (A NamedTuple, immutable: the loop builds one
    every tick.)

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
