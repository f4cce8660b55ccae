"""The joints' dry friction in the gain design.

A joint with dry friction f [N·m | N] (the URDF's ``<dynamics friction>``, which MuJoCo
simulates as frictionloss) stops where its controller's restoring effort falls below f: short of
its reference by up to f / K, K its stiffness [N·m/rad | N/m]. Only stiffness decides that stall:
a friction feed-forward on the reference velocity vanishes at rest, and one on the position error
is a stiffness by another name, bounded by the same sampled loop. So the design asks, per joint i,

    Kᵢ ≥ fᵢ / eᵢ,   eᵢ = min(``ANGLE``, ``DISTANCE`` / ℓᵢ) (revolute), ``DISTANCE`` / max(ℓᵢ, 1)
                    (prismatic),

the stall eᵢ allowed being the one that moves the TCP at most ``DISTANCE`` and turns it at most
``ANGLE``; ℓᵢ = maxₙ ‖J_v,i(qₙ)‖ [m/rad | -] is the joint's lever to the TCP over the design's
configurations (0 for a gripper joint: its TCP column is zero). Joint impedance's Kᵢ is the
stiffness itself; computed torque's is M(q)ᵢᵢ kpᵢ, least where the joint is lightest, so
kpᵢ ≥ fᵢ / (eᵢ minₙ Mᵢᵢ(qₙ)). Where the sampled loop allows less, the design keeps what it allows
and says what stall remains (:func:`stall`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ct_controllers.setup_assistant.design_model import DesignModel
from ct_controllers.types import FloatArray

DISTANCE = 2e-4  # [m] the TCP moved by one joint's friction stall, at most
ANGLE = 2e-3  # [rad] the TCP turned by one joint's friction stall, at most


@dataclass(frozen=True)
class FrictionNeed:
    """Per joint (model order): dry friction [N·m | N], the stall allowed [rad | m] and the
    stiffness that keeps the stall within it [N·m/rad | N/m] (0 without friction)."""

    friction: FloatArray
    allowed: FloatArray
    stiffness: FloatArray

    @property
    def any(self) -> bool:
        return bool(np.any(self.friction > 0.0))


def friction_need(design: DesignModel, samples: list[FloatArray]) -> FrictionNeed:
    """The criterion of the module docstring over ``samples`` (model order)."""
    model = design.model
    friction = np.asarray(model.joint_friction, dtype=np.float64).copy()
    lever = np.zeros(model.nv)
    if model.has_tcp:
        for q in samples:
            lever = np.maximum(lever, np.linalg.norm(model.frame_jacobian(q)[:3], axis=0))
    allowed = np.where(
        design.prismatic,
        DISTANCE / np.maximum(lever, 1.0),
        np.minimum(ANGLE, DISTANCE / np.maximum(lever, 1e-12)),
    )
    return FrictionNeed(friction, allowed, friction / allowed)


def stall(friction: FloatArray, stiffness: FloatArray) -> FloatArray:
    """The largest stall f / K [rad | m] per joint (0 without friction, inf without stiffness)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(friction > 0.0, friction / stiffness, 0.0)
