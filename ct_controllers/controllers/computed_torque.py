"""Computed torque (inverse dynamics) control and its two comparison laws.

    computed_torque:  τ = M(q) [q̈_d + K_d (q̇_d − q̇) + K_p (q_d − q)] + b(q, q̇)
    pd:               τ = K_p (q_d − q) + K_d (q̇_d − q̇)
    pd_gravity:       τ = K_p (q_d − q) + K_d (q̇_d − q̇) + g(q)

(each plus the reference's feed-forward effort τ_ff when it carries one, and the dry-friction
compensation τ_f = clip(K_f e, −f, f) of :mod:`~ct_controllers.controllers.friction`, in N·m:
0 unless the URDF has friction and ``friction_stiffness`` is given; and D_p v* for the joints'
own viscous damping, ``damping_feedforward``, the same module)

Units: in ``computed_torque`` mode the gains shape the error dynamics ë + K_d ė + K_p e = 0, so
K_p is in s⁻² and K_d in s⁻¹; in the PD modes K_p is in N·m/rad (N/m) and K_d in N·m·s/rad
(N·s/m).

M and b come from the controller's *own* model, which may differ from the plant (see
``RobotModel.with_mass_scale``): model error then enters through M_nom⁻¹ M_true q̈_des, which is
why this law is the most accurate with an exact model and degrades fastest with a wrong one.
The law is evaluated as one RNEA call, rnea(q, q̇, a_cmd) = M a_cmd + b, which is cheaper than
forming M and b separately and identical up to rounding.
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
from ct_controllers.parameter_schema import (
    ParameterSchema,
    ParameterSpec,
    non_negative,
    one_of,
    positive,
)

COMPUTED_TORQUE = "computed_torque"
PD = "pd"
PD_GRAVITY = "pd_gravity"
MODES = (COMPUTED_TORQUE, PD, PD_GRAVITY)

# A computed-torque instance's parameters (``<instance>.<name>``, whatever the instance is
# called): the gains are live, the rest is read-only.
PARAMETERS = ParameterSchema(
    "",
    (
        ParameterSpec(
            "mode",
            str,
            COMPUTED_TORQUE,
            "computed_torque | pd | pd_gravity",
            validator=one_of(*MODES),
        ),
        ParameterSpec(
            "kp",
            float,
            (400.0,) * 9,
            "K_p per joint: [s⁻²] in computed_torque mode, [N·m/rad | N/m] in pd",
            per_joint=True,
            live=True,
            validator=non_negative,
        ),
        ParameterSpec(
            "kd",
            float,
            (40.0,) * 9,
            "K_d per joint: [s⁻¹] in computed_torque mode, [N·m·s/rad | N·s/m] in pd",
            per_joint=True,
            live=True,
            validator=non_negative,
        ),
        FRICTION_STIFFNESS,
        DAMPING_FEEDFORWARD,
        ParameterSpec(
            "model_mass_scale",
            float,
            1.0,
            "Link masses of the controller's model × this",
            "-",
            validator=positive,
        ),
    ),
)


class ComputedTorqueController(Controller):
    PARAMETERS = PARAMETERS

    def __init__(
        self,
        model: RobotModel,
        kp: FloatArray,
        kd: FloatArray,
        mode: str = COMPUTED_TORQUE,
        friction_stiffness: FloatArray | None = None,
        damping_feedforward: bool = True,
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise GainError(f"unknown computed-torque mode '{mode}'; known: {', '.join(MODES)}")
        self.model = model
        self.mode = mode
        slope = np.zeros(model.nv) if friction_stiffness is None else friction_stiffness
        gains = self.validate_gains({"kp": kp, "kd": kd, "friction_stiffness": slope})
        self.kp = gains["kp"]
        self.kd = gains["kd"]
        self.friction_stiffness = gains["friction_stiffness"]
        self.friction = model.joint_friction.copy()  # [N·m | N], model order
        self._has_friction = bool(np.any(self.friction > 0.0))  # else the term is skipped
        # The joints' viscous damping [N·m·s/rad | N·s/m] paid on the reference velocity (None:
        # off, or none in the model).
        damped = damping_feedforward and bool(np.any(model.joint_damping > 0.0))
        self.plant_damping = model.joint_damping.copy() if damped else None
        self.model_state: ModelState = ModelState(model)

    @classmethod
    def from_parameters(
        cls, model: RobotModel, joint_names: tuple[str, ...], params: Mapping[str, object]
    ) -> ComputedTorqueController:
        """Build from controllers.yaml entries (``kp``, ``kd`` per joint in ``joint_names``
        order, ``mode``, ``model_mass_scale`` for model-error experiments), checked against
        :data:`PARAMETERS` (:meth:`Controller.check_parameters`)."""
        values = cls.check_parameters(model, joint_names, params)
        if values["model_mass_scale"] != 1.0:
            model = model.with_mass_scale(values["model_mass_scale"])
        return cls(
            model,
            values["kp"],
            values["kd"],
            values["mode"],
            values["friction_stiffness"],
            values["damping_feedforward"],
        )

    def linear_feedback(
        self,
        q: FloatArray,
        gains: Mapping[str, FloatArray] | None = None,
        model: RobotModel | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        gains = gains or {}
        kp, kd = gains.get("kp", self.kp), gains.get("kd", self.kd)
        # In computed-torque mode K_p [s⁻²], K_d [s⁻¹] act through the model's M(q); the
        # friction term's slope acts on each joint directly [N·m/rad | N/m].
        stiffness, damping = feedback_matrices(
            model or self.model, q, kp, kd, self.mode == COMPUTED_TORQUE
        )
        slope = friction_feedback(
            self.friction, gains.get("friction_stiffness", self.friction_stiffness)
        )
        return stiffness + np.diag(slope), damping

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        error = reference.q - state.q
        tau = self.kp * error
        tau += self.kd * (reference.v - state.v)
        if self.mode == COMPUTED_TORQUE:
            tau += reference.a
            tau = self.model_state.at(state).inverse_dynamics(tau)
        elif self.mode == PD_GRAVITY:
            tau += self.model_state.at(state).gravity()
        if reference.effort is not None:
            tau += reference.effort
        if self._has_friction:
            tau += friction_compensation(error, self.friction, self.friction_stiffness)
        if self.plant_damping is not None:
            tau += self.plant_damping * reference.v
        return tau
