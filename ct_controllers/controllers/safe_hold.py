"""Safe hold: gravity compensation plus joint damping about the *measured* state,
τ = g(q) − D v. The fallback for faults, cancels and non-finite controller output."""

from __future__ import annotations

import numpy as np

from ct_controllers.controllers.controller import FloatArray
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel


def safe_hold_effort(
    model: RobotModel, q: FloatArray, v: FloatArray, damping: FloatArray
) -> FloatArray:
    """τ = g(q) − D v [N·m | N], D [N·m·s/rad | N·s/m] per joint, from measured q, v."""
    return model.gravity(q) - damping * v


def safe_hold_at(evaluated: ModelState, damping: FloatArray) -> FloatArray:
    """:func:`safe_hold_effort` from the tick's model state (its g(q) and v)."""
    tau = damping * evaluated.v
    return np.subtract(evaluated.gravity(), tau, out=tau)
