"""Fault reactions, computed from the *measured* state at the moment of the fault, never from the
last command.

- ``damp`` (default): come to rest with bounded deceleration. A jerk-limited stop (Ruckig, within
  the reference acceleration and jerk limits) from the measured (q, v) gives a velocity profile
  v*(t) that decays to zero; the effort damps the measured velocity onto it with gravity
  compensation, τ = g(q) + D (v*(t) − v). Once v* is zero this is the safe hold. A joint on the
  position interface is sent the stop's position q*(t).
- ``hold``: the safe hold at once, τ = g(q) − D v, position joints held where they were measured.
- ``quick_stop`` / ``disable``: the drive's own reaction (CiA 402 quick stop 605A, or disable
  voltage); the loop still writes the safe hold, which such a drive ignores until re-enabled.

The arm is taken as at rest (no stop profile needed) when every measured |v| is below
``REST_SPEED`` [rad/s | m/s].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ct_controllers.controllers.controller import FloatArray, JointReference
from ct_controllers.controllers.safe_hold import safe_hold_effort
from ct_controllers.hardware.interface import DAMP
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.joint_trajectory import (
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)

REST_SPEED = 1e-3  # [rad/s | m/s]


@dataclass
class FaultReaction:
    """The reaction in progress: started at ``start`` [s] (hardware clock) from the measured
    ``q0`` [rad | m], ``v0`` [rad/s | m/s]; ``stop`` is the bounded-deceleration profile (None
    for an immediate hold)."""

    kind: str
    start: float
    q0: FloatArray
    v0: FloatArray
    stop: JerkLimitedTrajectory | None

    @staticmethod
    def begin(
        kind: str, now: float, q: FloatArray, v: FloatArray, limits: JointLimits
    ) -> FaultReaction:
        stop = None
        if kind == DAMP and np.max(np.abs(v)) >= REST_SPEED:
            try:
                stop = JerkLimitedTrajectory.stop(now, q, v, limits)
            except TrajectoryError:
                stop = None  # no profile within the limits: damp at once (hold)
        return FaultReaction(kind, now, np.array(q, dtype=np.float64), np.array(v), stop)

    def reference(self, now: float) -> JointReference:
        """Where position-interface joints go: the stop's q*(t), then where it ends."""
        if self.stop is None:
            return JointReference.hold(self.q0)
        return self.stop.sample(now)

    def effort(
        self, model: RobotModel, q: FloatArray, v: FloatArray, damping: FloatArray, now: float
    ) -> FloatArray:
        """τ [N·m | N] from the measured q, v: g(q) + D (v*(t) − v)."""
        if self.stop is None:
            return safe_hold_effort(model, q, v, damping)
        target_v = self.stop.sample(now).v
        return model.gravity(q) + damping * (target_v - v)
