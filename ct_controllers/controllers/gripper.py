"""Parallel gripper: a position servo per finger whose force saturates at the requested limit,
as a gripper drive does for a grasp (Franka's "grasp with force").

    τ_i = clip(K (q*_i − q_i) − D q̇_i + g_i(q), −F_i, F_i)

K [N/m] is high so that a finger blocked by the object pushes with the full limit F_i [N] (the
grasp force); D [N·s/m] bounds the free closing speed to about F/D. g_i is the gravity force on
the finger from the controller's model.
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
    ) -> None:
        for name, value in (("stiffness", stiffness), ("damping", damping)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"gripper {name} must be finite and >= 0, got {value}")
        self.model = model
        self.joint_names = tuple(joint_names)
        self.indices = model.indices(self.joint_names)
        self.stiffness = stiffness
        self.damping = damping
        self.max_effort = model.limits.effort[self.indices]

    def compute(
        self, state: JointState, target: FloatArray, effort_limit: FloatArray
    ) -> FloatArray:
        """Finger efforts [N] in ``joint_names`` order for finger targets [m] and force limits
        [N] (each capped at the URDF effort limit; a negative or NaN limit counts as 0)."""
        q = state.q[self.indices]
        v = state.v[self.indices]
        limit = np.minimum(np.nan_to_num(np.maximum(effort_limit, 0.0)), self.max_effort)
        gravity = self.model.gravity(state.q)[self.indices]
        return np.clip(self.stiffness * (target - q) - self.damping * v + gravity, -limit, limit)
