"""The branch of an IK solution nearest a reference configuration.

A revolute joint's angle θ and θ + 2πk put the arm in the same place: a joint whose range is
wider than one turn (a UR's ±2π, a continuous joint's unbounded angle) has several positions for
one pose, and an IK solution on the wrong one sends the joint a full turn round (through the
table, or into the arm's own links) to arrive where a few degrees would have done.

Of every θᵢ + 2πkᵢ inside [lowerᵢ, upperᵢ] (kᵢ integer) the one nearest the reference rᵢ: the
distance |θ + 2πk − r| is convex in k, so the unconstrained optimum k* = round((r − θ) / 2π)
clipped to the feasible integers [⌈(lower − θ) / 2π⌉, ⌊(upper − θ) / 2π⌋] is the constrained one.
Joints that are not periodic (prismatic) are left as they are; so is θ itself when no other
position lies inside the range.
"""

from __future__ import annotations

import numpy as np

from ct_controllers.model.robot import RobotModel
from ct_controllers.types import FloatArray

TURN = 2.0 * np.pi


def periodic_joints(model: RobotModel) -> np.ndarray:
    """True at each joint (model order) whose position is an angle: revolute, continuous
    (Pinocchio's ``JointModelR*``: RX/RY/RZ, RevoluteUnaligned, the unbounded RUB*)."""
    return np.array(
        [
            model.model.joints[model.model.getJointId(name)].shortname().startswith("JointModelR")
            for name in model.joint_names
        ],
        dtype=bool,
    )


def nearest_branch(
    q: FloatArray,
    reference: FloatArray,
    lower: FloatArray,
    upper: FloatArray,
    periodic: np.ndarray,
) -> FloatArray:
    """``q`` with each periodic joint moved by whole turns to the position nearest
    ``reference`` inside [``lower``, ``upper``] (±inf: unbounded); a new array. ``q`` must lie
    inside the bounds (an IK solution does)."""
    q = np.asarray(q, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if not (q.shape == reference.shape == np.shape(lower) == np.shape(upper) == np.shape(periodic)):
        raise ValueError("nearest_branch: q, reference, bounds and mask must have one shape")
    with np.errstate(invalid="ignore"):  # ±inf bounds: no limit on k
        k_low = np.ceil((np.asarray(lower) - q) / TURN)
        k_high = np.floor((np.asarray(upper) - q) / TURN)
    k = np.round((reference - q) / TURN)
    k = np.minimum(np.maximum(k, k_low), k_high)
    # Never leave the range: a q outside its own bounds keeps its position.
    k = np.where(periodic & (k_low <= 0) & (k_high >= 0), k, 0.0)
    return q + TURN * k
