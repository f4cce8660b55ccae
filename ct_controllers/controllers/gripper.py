"""Parallel gripper: a position servo per finger whose force saturates at the requested limit,
as a gripper drive does for a grasp (Franka's "grasp with force").

    τ_i = clip(K (r_i − q_i) − D q̇_i + g_i(q), −F_i, F_i)

where the servo reference r_i moves toward the finger target q*_i at no more than ``speed``
[m/s] (as a gripper drive closes at a set speed: fingers that slam into an object at full force
dent soft contacts by centimetres). K [N/m] is high so that a finger blocked by the object pushes
with the full limit F_i [N] (the grasp force) once r_i has run past it; D [N·s/m] damps. g_i is
the gravity force on the finger from the controller's model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ct_controllers.controllers.controller import FloatArray, JointState
from ct_controllers.model.robot import RobotModel


class GripperController:
    def __init__(
        self,
        model: RobotModel,
        joint_names: Sequence[str],
        stiffness: float = 2000.0,
        damping: float = 20.0,
        speed: float = 0.1,
    ) -> None:
        for name, value in (("stiffness", stiffness), ("damping", damping), ("speed", speed)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"gripper {name} must be finite and >= 0, got {value}")
        self.model = model
        self.joint_names = tuple(joint_names)
        self.indices = model.indices(self.joint_names)
        self.stiffness = stiffness
        self.damping = damping
        self.max_effort = model.limits.effort[self.indices]
        self.speed = speed
        self._reference: FloatArray | None = None
        self._reference_velocity = np.zeros(len(self.joint_names))

    def reset(self) -> None:
        """Restart the servo reference from the measured opening on the next tick."""
        self._reference = None
        self._reference_velocity = np.zeros(len(self.joint_names))

    @property
    def reference(self) -> FloatArray | None:
        """The servo reference r [m] per finger (``joint_names`` order) after the last
        :meth:`compute` — what a finger on the position interface is sent — or None before."""
        return None if self._reference is None else self._reference.copy()

    @property
    def reference_velocity(self) -> FloatArray:
        """ṙ [m/s] per finger over the last :meth:`compute` (within ±``speed``)."""
        return self._reference_velocity.copy()

    def compute(
        self, state: JointState, target: FloatArray, effort_limit: FloatArray, dt: float
    ) -> FloatArray:
        """Finger efforts [N] in ``joint_names`` order for finger targets [m] and force limits
        [N] (each capped at the URDF effort limit; a negative or NaN limit counts as 0)."""
        q = state.q[self.indices]
        v = state.v[self.indices]
        if self._reference is None:
            self._reference = q.copy()
        step = self.speed * dt
        # reference += clip(target − reference, −step, step), with min/max (np.clip is slower).
        change = np.minimum(np.maximum(target - self._reference, -step), step)
        self._reference = self._reference + change
        self._reference_velocity = change / dt if dt > 0 else np.zeros_like(change)
        # fmax ignores NaN: a NaN or negative limit gives 0 N.
        limit = np.minimum(np.fmax(effort_limit, 0.0), self.max_effort)
        gravity = self.model.gravity(state.q)[self.indices]
        tau = self.stiffness * (self._reference - q) - self.damping * v + gravity
        return np.minimum(np.maximum(tau, -limit), limit)
