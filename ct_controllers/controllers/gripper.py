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

from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.model.model_state import ModelState
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
        self._index_list = self.indices.tolist()
        self._max_effort_list = self.max_effort.tolist()
        self.speed = speed
        self._reference: FloatArray | None = None
        self._reference_velocity = np.zeros(len(self.joint_names))
        self.model_state = ModelState(model)

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

    def fill_reference(self, reference: JointReference) -> None:
        """Write the servo's reference into a full joint reference (model order), in place, on
        the fingers: q* = r [m], v* = ṙ [m/s], a* = 0 — what fingers on the position interface
        are sent. After a :meth:`compute`."""
        if self._reference is None:
            raise RuntimeError("no servo reference before the first compute")
        indices = self.indices
        reference.q[indices] = self._reference
        reference.v[indices] = self._reference_velocity
        reference.a[indices] = 0.0

    def compute(
        self,
        state: JointState,
        target: FloatArray,
        effort_limit: FloatArray,
        dt: float,
        evaluated: ModelState | None = None,
    ) -> FloatArray:
        """Finger efforts [N] in ``joint_names`` order for finger targets [m] and force limits
        [N] (each capped at the URDF effort limit; a negative or NaN limit counts as 0).
        ``evaluated``: the tick's model state at ``state`` when the caller has one (a chain
        sharing its evaluation), else the gripper's own."""
        if evaluated is None:
            evaluated = self.model_state.at(state)
        if self._reference is None:
            self._reference = state.q[self.indices]  # a copy (fancy indexing)
        # Per finger, in scalar arithmetic (two fingers: cheaper than a dozen numpy calls on
        # two-element arrays). NaN propagates as in numpy: a NaN target or state gives a NaN
        # effort, which the limiter refuses.
        q, v, gravity = state.q, state.v, evaluated.gravity()
        reference, reference_velocity = self._reference, self._reference_velocity
        step = self.speed * dt
        efforts = []
        for finger, (index, target_i, limit_i, maximum) in enumerate(
            zip(
                self._index_list,
                target.tolist(),
                effort_limit.tolist(),
                self._max_effort_list,
                strict=True,
            )
        ):
            r = float(reference[finger])
            # r += clip(target − r, −step, step)
            change = min(max(target_i - r, -step), step)
            reference[finger] = r + change
            reference_velocity[finger] = change / dt if dt > 0 else 0.0
            # τ = K (r − q) − D q̇ + g, clipped at ±limit; a NaN or negative limit gives 0 N.
            tau = (
                self.stiffness * (r + change - float(q[index]))
                - self.damping * float(v[index])
                + float(gravity[index])
            )
            limit = min(limit_i if limit_i > 0.0 else 0.0, maximum)
            efforts.append(max(min(tau, limit), -limit))
        return np.array(efforts)
