"""Joint impedance with optional model terms.

    τ = K e + D ė + τ_ff + τ_f [+ g(q)] [+ C(q, v) v]                 (default: gravity only)
    τ = M(q) (q̈* + K e + D ė) + τ_ff + τ_f [+ g(q)] [+ C(q, v) v]     (inertia_decoupling)

with e = q* − q, ė = v* − v, τ_ff the reference's feed-forward effort and τ_f the dry-friction
compensation clip(K_f e, −f, f) (:mod:`~ct_controllers.controllers.friction`; 0 unless the URDF
has friction and ``friction_stiffness`` is given), plus D_p v* for the joints' own viscous
damping (``damping_feedforward``, the same module). Without decoupling
K is in N·m/rad (N/m) and D in N·m·s/rad (N·s/m); with inertia decoupling they shape the error
dynamics directly, K in s⁻² and D in s⁻¹. All three model terms come from the controller's own
model; with all of them on, the law is computed torque (evaluated as one RNEA call).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ct_controllers.controllers.controller import (
    Controller,
    FloatArray,
    JointReference,
    JointState,
    feedback_matrices,
)
from ct_controllers.controllers.friction import (
    DAMPING_FEEDFORWARD,
    FRICTION_STIFFNESS,
    friction_compensation,
    friction_feedback,
)
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel
from ct_controllers.parameter_schema import ParameterSchema, ParameterSpec, non_negative

# A joint impedance instance's parameters (``<instance>.<name>`` in controllers.yaml, whatever
# the instance is called): the gains are live, the rest shapes the law and is read-only.
PARAMETERS = ParameterSchema(
    "",
    (
        ParameterSpec(
            "stiffness",
            float,
            (600.0, 600.0, 300.0, 300.0, 100.0, 100.0, 50.0, 100.0, 100.0),
            "Joint stiffness K, per joint, arm then gripper",
            "N·m/rad | N/m",
            per_joint=True,
            live=True,
            validator=non_negative,
        ),
        ParameterSpec(
            "damping",
            float,
            (50.0, 50.0, 25.0, 25.0, 6.0, 6.0, 3.0, 4.0, 4.0),
            "Joint damping D, per joint, arm then gripper",
            "N·m·s/rad | N·s/m",
            per_joint=True,
            live=True,
            validator=non_negative,
        ),
        FRICTION_STIFFNESS,
        DAMPING_FEEDFORWARD,
        ParameterSpec("gravity_compensation", bool, True, "Add g(q) from the controller's model"),
        ParameterSpec(
            "coriolis_compensation", bool, False, "Add C(q, v) v from the controller's model"
        ),
        ParameterSpec(
            "inertia_decoupling",
            bool,
            False,
            "τ = M(q)(q̈* + K e + D ė) + ...; then K [s⁻²], D [s⁻¹]",
        ),
    ),
)


class JointImpedanceController(Controller):
    PARAMETERS = PARAMETERS

    def __init__(
        self,
        model: RobotModel,
        stiffness: FloatArray,
        damping: FloatArray,
        gravity_compensation: bool = True,
        coriolis_compensation: bool = False,
        inertia_decoupling: bool = False,
        friction_stiffness: FloatArray | None = None,
        damping_feedforward: bool = True,
    ) -> None:
        super().__init__()
        self.model = model
        gains = self.validate_gains(
            {
                "stiffness": stiffness,
                "damping": damping,
                "friction_stiffness": np.zeros(model.nv)
                if friction_stiffness is None
                else friction_stiffness,
            }
        )
        self.stiffness = gains["stiffness"]
        self.damping = gains["damping"]
        self.friction_stiffness = gains["friction_stiffness"]
        self.friction = model.joint_friction.copy()  # [N·m | N], model order
        self._has_friction = bool(np.any(self.friction > 0.0))  # else the term is skipped
        # The joints' viscous damping [N·m·s/rad | N·s/m] paid on the reference velocity (None:
        # off, or none in the model).
        damped = damping_feedforward and bool(np.any(model.joint_damping > 0.0))
        self.plant_damping = model.joint_damping.copy() if damped else None
        self.gravity_compensation = gravity_compensation
        self.coriolis_compensation = coriolis_compensation
        self.inertia_decoupling = inertia_decoupling
        self.model_state: ModelState = ModelState(model)

    @classmethod
    def from_parameters(
        cls, model: RobotModel, joint_names: tuple[str, ...], params: Mapping[str, object]
    ) -> JointImpedanceController:
        """Build from controllers.yaml entries (per-joint vectors in ``joint_names`` order),
        checked against :data:`PARAMETERS` (:meth:`Controller.check_parameters`)."""
        values = cls.check_parameters(model, joint_names, params)
        return cls(
            model,
            values["stiffness"],
            values["damping"],
            gravity_compensation=values["gravity_compensation"],
            coriolis_compensation=values["coriolis_compensation"],
            inertia_decoupling=values["inertia_decoupling"],
            friction_stiffness=values["friction_stiffness"],
            damping_feedforward=values["damping_feedforward"],
        )

    def linear_feedback(
        self,
        q: FloatArray,
        gains: Mapping[str, FloatArray] | None = None,
        model: RobotModel | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        gains = gains or {}
        stiffness = gains.get("stiffness", self.stiffness)
        damping = gains.get("damping", self.damping)
        # With inertia decoupling K [s⁻²], D [s⁻¹] act through M(q); the friction term's slope
        # acts on each joint directly [N·m/rad | N/m].
        matrices = feedback_matrices(
            model or self.model, q, stiffness, damping, self.inertia_decoupling
        )
        slope = friction_feedback(
            self.friction, gains.get("friction_stiffness", self.friction_stiffness)
        )
        return matrices[0] + np.diag(slope), matrices[1]

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        error = reference.q - state.q
        tau = self.stiffness * error
        tau += self.damping * (reference.v - state.v)
        evaluated = self.model_state.at(state)
        gravity, coriolis = self.gravity_compensation, self.coriolis_compensation
        if self.inertia_decoupling:
            tau += reference.a
            if gravity and coriolis:
                tau = evaluated.inverse_dynamics(tau)
            else:
                tau = evaluated.mass_matrix().dot(tau)
                if gravity:
                    tau += evaluated.gravity()
                elif coriolis:
                    tau += evaluated.bias()
                    tau -= evaluated.gravity()
        elif gravity and coriolis:
            tau += evaluated.bias()
        elif gravity:
            tau += evaluated.gravity()
        elif coriolis:
            tau += evaluated.bias()
            tau -= evaluated.gravity()
        if reference.effort is not None:
            tau += reference.effort
        if self._has_friction:
            tau += friction_compensation(error, self.friction, self.friction_stiffness)
        if self.plant_damping is not None:
            tau += self.plant_damping * reference.v
        return tau
