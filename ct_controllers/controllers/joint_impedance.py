"""Joint impedance: τ = K (q* − q) + D (v* − v) + g(q).

K [N·m/rad | N/m] and D [N·m·s/rad | N·s/m] are per-joint vectors in model order. Gravity
compensation uses the controller's own model.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ct_controllers.controllers.controller import (
    Controller,
    FloatArray,
    GainError,
    JointReference,
    JointState,
    per_joint_gain,
)
from ct_controllers.model.robot import RobotModel


class JointImpedanceController(Controller):
    GAIN_NAMES = ("stiffness", "damping")

    def __init__(
        self,
        model: RobotModel,
        stiffness: FloatArray,
        damping: FloatArray,
        gravity_compensation: bool = True,
    ) -> None:
        super().__init__()
        self.model = model
        gains = self.validate_gains({"stiffness": stiffness, "damping": damping})
        self.stiffness = gains["stiffness"]
        self.damping = gains["damping"]
        self.gravity_compensation = gravity_compensation

    @classmethod
    def from_parameters(
        cls, model: RobotModel, joint_names: tuple[str, ...], params: Mapping[str, object]
    ) -> JointImpedanceController:
        """Build from controllers.yaml entries; per-joint vectors are in ``joint_names`` order."""
        index = model.indices(joint_names)
        # Every model joint needs a gain: the vectors below start as np.empty, so a joint left
        # out would otherwise get whatever that memory held.
        missing = [n for n in model.joint_names if n not in set(joint_names)]
        if missing:
            raise GainError(f"joint_impedance: no gains for joint(s) {', '.join(missing)}")
        gains = {}
        for name in cls.GAIN_NAMES:
            if name not in params:
                raise GainError(f"joint_impedance: parameter '{name}' is missing")
            values = per_joint_gain(name, params[name], len(joint_names))
            gains[name] = np.empty(model.nv)
            gains[name][index] = values
        gravity = params.get("gravity_compensation", True)
        if not isinstance(gravity, bool):
            raise GainError(f"gravity_compensation must be true or false, got {gravity!r}")
        return cls(model, gains["stiffness"], gains["damping"], gravity)

    def validate_gains(self, gains: Mapping[str, object]) -> dict[str, FloatArray]:
        unknown = sorted(set(gains) - set(self.GAIN_NAMES))
        if unknown:
            raise GainError(f"unknown gain(s) {unknown}; known: {list(self.GAIN_NAMES)}")
        return {name: per_joint_gain(name, value, self.model.nv) for name, value in gains.items()}

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        tau = self.stiffness * (reference.q - state.q) + self.damping * (reference.v - state.v)
        if self.gravity_compensation:
            tau += self.model.gravity(state.q)
        return tau
