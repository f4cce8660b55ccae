"""Pose errors and Jacobian point shifts, with the conventions spelled out.

Pose error (the one every Cartesian module of this package uses)
    e = [e_p; e_R] = [p* − p;  log3(R* Rᵀ)]                                   (6,) [m; rad]

    This is "desired × current⁻¹" for the rotation: E = R* Rᵀ is the rotation that takes the
    current TCP orientation onto the desired one, *expressed in the base frame*, and log3 returns
    its rotation vector on the short arc (angle in [0, π]; at exactly π either direction is as
    short). The translation part is the difference of the TCP origins, in base axes. It is NOT
    the linear part of log6(T* T⁻¹), which is the velocity of the point at the base origin and
    goes with a spatial (``WORLD``) Jacobian; nor log6(T⁻¹ T*), which is in TCP axes and goes
    with a ``LOCAL`` Jacobian.

Jacobian that goes with it
    The TCP Jacobian in ``LOCAL_WORLD_ALIGNED`` (``RobotModel.frame_jacobian``): rows
    (linear; angular), the linear rows being the velocity of the TCP *origin*, both in base axes.
    To first order ė = −J q̇ exactly for e_p, and d e_R/dt = −Jlog3(E) ω with Jlog3(E) → I as
    the error vanishes. Jlog3(E)ᵀ e_R = e_R holds exactly, so −Jᵀe is the exact gradient of
    ½‖e‖² even for large errors; only the Gauss-Newton curvature is approximate there.

Point shift
    A Jacobian taken at a point C (a wrist origin, a COM) gives the Jacobian at the tool point T,
    r = p_T − p_C in base axes, by the rigid-body velocity transfer v_T = v_C + ω × r:

        J_v,T = J_v,C + J_ω × r  (column by column)  =  J_v,C − [r]× J_ω,     J_ω,T = J_ω,C.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from ct_controllers.types import FloatArray


def skew(vector: FloatArray) -> FloatArray:
    """[v]×, the 3x3 matrix with [v]× a = v × a."""
    x, y, z = np.asarray(vector, dtype=np.float64).reshape(3)
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def check_pose(pose: object, name: str = "pose", tolerance: float = 1e-6) -> FloatArray:
    """A validated copy of a 4x4 homogeneous transform: finite, last row (0, 0, 0, 1), rotation
    block orthonormal with determinant +1 (within ``tolerance``). Raises ``ValueError`` naming
    ``name`` otherwise."""
    array = np.array(pose, dtype=np.float64)
    if array.shape != (4, 4):
        raise ValueError(f"{name}: expected a 4x4 homogeneous transform, got shape {array.shape}")
    # Scalar arithmetic on 16 floats: cheaper than numpy calls on a 4x4 (this runs per IK solve).
    rows = array.tolist()
    if not all(math.isfinite(v) for row in rows for v in row):
        raise ValueError(f"{name}: non-finite value")
    bottom = rows[3]
    if max(abs(bottom[0]), abs(bottom[1]), abs(bottom[2]), abs(bottom[3] - 1.0)) > tolerance:
        raise ValueError(f"{name}: last row must be (0, 0, 0, 1), got {bottom}")
    (a, b, c, _), (d, e, f, _), (g, h, i, _) = rows[:3]
    determinant = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    gram_error = max(
        abs(a * a + b * b + c * c - 1.0),
        abs(d * d + e * e + f * f - 1.0),
        abs(g * g + h * h + i * i - 1.0),
        abs(a * d + b * e + c * f),
        abs(a * g + b * h + c * i),
        abs(d * g + e * h + f * i),
    )
    if abs(determinant - 1.0) > tolerance or gram_error > tolerance:
        raise ValueError(f"{name}: the 3x3 block is not a rotation matrix")
    return array


def rotation_error(current: FloatArray, desired: FloatArray) -> FloatArray:
    """e_R = log3(R* Rᵀ) [rad], base axes, short arc (‖e_R‖ ≤ π), for 3x3 rotations."""
    return np.array(pin.log3(np.asarray(desired) @ np.asarray(current).T))


def pose_error(current: FloatArray, desired: FloatArray) -> FloatArray:
    """e = [p* − p; log3(R* Rᵀ)] (6,) [m; rad], base axes, for 4x4 poses in the base frame.
    Pairs with the ``LOCAL_WORLD_ALIGNED`` TCP Jacobian (see the module docstring)."""
    current = np.asarray(current, dtype=np.float64)
    desired = np.asarray(desired, dtype=np.float64)
    error = np.empty(6)
    error[:3] = desired[:3, 3] - current[:3, 3]
    error[3:] = pin.log3(desired[:3, :3] @ current[:3, :3].T)
    return error


def pose_error_norms(current: FloatArray, desired: FloatArray) -> tuple[float, float]:
    """(‖p* − p‖ [m], ‖log3(R* Rᵀ)‖ [rad]): the sizes of :func:`pose_error`'s two parts, as
    plain floats (tolerance checks)."""
    current = np.asarray(current)
    desired = np.asarray(desired)
    # Three-element vectors in Python floats (cheaper than numpy calls); R* Rᵀ stays numpy's.
    x, y, z = current[:3, 3].tolist()
    dx, dy, dz = desired[:3, 3].tolist()
    dx, dy, dz = dx - x, dy - y, dz - z
    rx, ry, rz = pin.log3(desired[:3, :3] @ current[:3, :3].T).tolist()
    return math.sqrt(dx * dx + dy * dy + dz * dz), math.sqrt(rx * rx + ry * ry + rz * rz)


def shift_jacobian(jacobian: FloatArray, offset: FloatArray) -> FloatArray:
    """The 6 x n Jacobian (linear; angular, base axes) at the point C moved to T = C + r.

    ``offset`` is r = p_T − p_C [m] in base axes. Returns a new array with
    J_v,T = J_v,C − [r]× J_ω (i.e. each column's J_v + J_ω × r) and J_ω unchanged.
    """
    jacobian = np.asarray(jacobian, dtype=np.float64)
    if jacobian.ndim != 2 or jacobian.shape[0] != 6:
        raise ValueError(f"expected a 6 x n Jacobian, got shape {jacobian.shape}")
    shifted = jacobian.copy()
    shifted[:3] -= skew(offset) @ jacobian[3:]
    return shifted
