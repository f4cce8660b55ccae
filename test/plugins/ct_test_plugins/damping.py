"""``ct_test_plugins/Damping``: a pure damping controller, τ = D (v* − v).

It damps the velocity error and nothing else (no stiffness, no gravity): on a plant without
gravity that starts and ends at rest it still ends where the reference ends, since the position
error is the integral of a velocity error that decays to zero.
"""

from __future__ import annotations

from collections.abc import Mapping

from ct_controllers.controllers.controller import Controller, gains_by_name
from ct_controllers.model.robot import RobotModel
from ct_controllers.types import FloatArray, JointReference, JointState


class DampingController(Controller):
    """τ = D (v* − v) [N·m | N], D per joint [N·m·s/rad | N·s/m] (live gain ``damping``)."""

    GAIN_NAMES = ("damping",)

    def __init__(self, model: RobotModel, damping: FloatArray) -> None:
        super().__init__()
        self.model = model  # the default validate_gains sizes gain vectors by model.nv
        self.damping = damping.copy()

    @classmethod
    def from_parameters(
        cls, model: RobotModel, joint_names: tuple[str, ...], params: Mapping[str, object]
    ) -> DampingController:
        """From the controller's controllers.yaml entries (``damping``, per joint in
        ``joint_names`` order); a missing or bad value raises GainError naming it."""
        gains = gains_by_name("damping", cls.GAIN_NAMES, model.joint_names, joint_names, params)
        return cls(model, gains["damping"])

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return self.damping * (reference.v - state.v)
