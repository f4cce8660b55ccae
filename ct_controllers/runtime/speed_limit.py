"""The runaway check: a joint *measured* faster than ``factor`` × its URDF velocity limit on
``SAMPLES`` fresh samples in a row latches a fault (as a drive's or Franka's velocity-limit
reflex would), so an arm the loop no longer controls — gains the loop's real delay made
unstable, a plant that is not the model, a wrong sign — ends in the fault reaction instead of
flailing on. Nothing the stack commands comes near it: references move at most at half the
URDF limit and position targets are rate-limited to the limit itself.

Two samples, not one: a contact impulse (a finger meeting an object) can spike one measured
velocity; a runaway persists. Joints without a positive finite velocity limit are not checked.
Hot path: one comparison over the velocity vector per fresh sample, no allocation unless over.
"""

from __future__ import annotations

import math

import numpy as np

from ct_controllers.controllers.controller import FloatArray
from ct_controllers.model.robot import RobotModel

SAMPLES = 2  # consecutive fresh samples over the limit that latch the fault
DEFAULT_FACTOR = 2.0  # [-] × the URDF velocity limit


class SpeedLimit:
    """``limits`` [rad/s | m/s] per joint (model order, the URDF's), ``names`` and ``units``
    ("rad/s" | "m/s") for the message; ``factor`` > 0."""

    def __init__(
        self,
        limits: FloatArray,
        factor: float,
        names: tuple[str, ...],
        units: tuple[str, ...],
    ) -> None:
        if not (math.isfinite(factor) and factor > 0.0):
            raise ValueError(f"speed limit factor must be finite and > 0, got {factor}")
        limits = np.asarray(limits, dtype=np.float64)
        checked = np.isfinite(limits) & (limits > 0.0)
        self.limits = limits
        self.factor = factor
        # [rad/s | m/s] the bound per joint; +inf where not checked (never exceeded)
        self.bound = np.where(checked, factor * np.where(checked, limits, 1.0), np.inf)
        self.names = names
        self.units = units
        self._over = 0  # consecutive samples over the bound so far
        self._speed = np.empty(limits.size)  # |v|, written in place each sample
        self._exceeds = np.empty(limits.size, dtype=bool)

    def check(self, v: FloatArray) -> str | None:
        """One fresh sample's measured velocities ``v`` [rad/s | m/s] (model order): the fault
        message on the ``SAMPLES``-th consecutive one with a joint over its bound, else None."""
        speed = np.abs(v, out=self._speed)
        if not np.greater(speed, self.bound, out=self._exceeds).any():
            self._over = 0
            return None
        self._over += 1
        if self._over < SAMPLES:
            return None
        ratio = speed / self.bound
        i = int(np.argmax(ratio))
        return (
            f"speed limit: joint '{self.names[i]}' measured at {abs(v[i]):.3g} {self.units[i]} "
            f"on {self._over} samples in a row, over {self.factor:g} × its URDF velocity limit "
            f"{self.limits[i]:.4g} {self.units[i]}"
        )

    def reset(self) -> None:
        """Forget the samples counted (a fault reset: counting starts again)."""
        self._over = 0


def speed_limit_of(model: RobotModel, factor: float) -> SpeedLimit | None:
    """The check for ``model``'s joints (its URDF velocity limits, model order) at ``factor``;
    None for 0 (off)."""
    if factor == 0.0:
        return None
    units = tuple(
        "m/s" if "Prismatic" in kind or kind.startswith("JointModelP") else "rad/s"
        for kind in (
            model.model.joints[model.model.getJointId(name)].shortname()
            for name in model.joint_names
        )
    )
    return SpeedLimit(model.limits.velocity, factor, tuple(model.joint_names), units)
