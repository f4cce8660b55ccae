"""The joints' own friction and damping as model terms of the joint-space laws (joint
impedance, computed torque): a dry-friction compensation and a viscous-damping feed-forward.

A joint with dry friction f [N·m | N] (the URDF's ``<dynamics friction>``, in the controller's
own model: :attr:`RobotModel.joint_friction`) stalls where the law's restoring effort falls
below f, short of its reference by up to f / K. The term

    τ_f = clip(K_f ⊙ e, −f, f),   e = q* − q,

pushes against it by up to f, in the direction of the error: outside the band |e| ≤ f / K_f the
friction is cancelled (τ_f = ±f), inside it τ_f is a stiffness K_f [N·m/rad | N/m], so the stall
is within f / K_f whatever the law's own stiffness. It never asks more than f: unlike a stiffer
law it costs nothing at large errors (no saturation a stall would not have had). Its slope K_f
is feedback like any stiffness: :meth:`Controller.linear_feedback` adds it (joint-diagonal, in
N·m/rad whatever the law's units), so the sampled-loop check bounds it
(``runtime/gain_stability.py``, and ``setup_assistant/gains.py`` designs it). Over-estimated
friction leaves the band's stiffness and a push of at most the excess; a joint without friction
in the model gets nothing (f = 0), whatever K_f.

Viscous damping D_p [N·m·s/rad | N·s/m] (the URDF's ``<dynamics damping>``,
:attr:`RobotModel.joint_damping`) costs a joint D_p v of effort while it moves: the laws' own
stiffness alone would let it lag its reference by D_p v / K (seconds on a light wrist whose
damping dwarfs its stiffness). The feed-forward τ_d = D_p ⊙ v*, on the *reference* velocity,
pays it: zero at rest, no feedback (measured v would cancel the damping the sampled loop relies
on, a period late), so the stability check is unchanged by it.
"""

from __future__ import annotations

import numpy as np

from ct_controllers.parameter_schema import ParameterSpec, non_negative
from ct_controllers.types import FloatArray

FRICTION_STIFFNESS = ParameterSpec(
    "friction_stiffness",
    float,
    (),  # left out: 0 for every joint (most robots' URDFs have no friction)
    "Slope K_f of the dry-friction compensation clip(K_f e, −f, f), f the URDF's <dynamics "
    "friction>, per joint; 0: none",
    "N·m/rad | N/m",
    per_joint=True,
    live=True,
    validator=non_negative,
)


def friction_compensation(
    error: FloatArray, friction: FloatArray, stiffness: FloatArray
) -> FloatArray:
    """τ_f = clip(K_f ⊙ e, −f, f) [N·m | N] of the module docstring: ``error`` e = q* − q
    [rad | m], ``friction`` f ≥ 0 [N·m | N], ``stiffness`` K_f [N·m/rad | N/m] (model order)."""
    return np.clip(stiffness * error, -friction, friction)


DAMPING_FEEDFORWARD = ParameterSpec(
    "damping_feedforward",
    bool,
    True,
    "Add D_p v*, D_p the URDF's <dynamics damping> and v* the reference velocity",
)


def friction_feedback(friction: FloatArray, stiffness: FloatArray) -> FloatArray:
    """The term's linear stiffness [N·m/rad | N/m] per joint near e = 0: K_f where the model
    has friction, else 0 (the term is zero there)."""
    return np.where(friction > 0.0, stiffness, 0.0)
