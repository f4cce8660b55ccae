"""The weighted task of one differential-IK tick and its damping, at the reference configuration
q* (steps 1-4 of :mod:`ct_controllers.references.diff_ik_base`):

1. pose error e = [p* − p(q*); log3(R* R(q*)ᵀ)] [m; rad], base axes, short arc, with the
   ``LOCAL_WORLD_ALIGNED`` TCP Jacobian J (6 x n, the n controlled joints) — the pairing of
   :mod:`ct_controllers.model.frames`;
2. task weights: J_w = W J, e_w = W e, W = diag(w) with the zero-weight rows removed (a zero
   weight takes that axis out of the task, it does not merely down-weight it);
3. damping raised near singularities: with s the singularity measure of the arm — of the
   active rows of J, unweighted (a small task weight is not a singularity) — either the
   manipulability ∏σᵢ or the condition number κ = σ_max/σ_min, and s₀ its threshold,
       λ² = λ_min² + (λ_max² − λ_min²)(1 − s/s₀)²   if s < s₀    (manipulability),
       λ² = λ_min² + (λ_max² − λ_min²)(1 − κ₀/κ)²   if κ > κ₀    (condition number),
   λ_min² otherwise;
4. rate-limited goal following: the task (e_w and the feedforward) is scaled by one factor
   α ≤ 1 such that the DLS motion B J_w⁺ e_w + v_ff moves the TCP with
   ‖linear‖ ≤ ``max_linear_velocity`` and ‖angular‖ ≤ ``max_angular_velocity`` (:func:`rate_scale`).

One factorization of (J_w J_wᵀ + λ² I) serves three right-hand sides: the task error, the
feedforward twist and the posture displacement seen by the task (the last only for a solver that
projects the posture with N_λ, the DLS). The result is a
:class:`TaskView` for the solvers (DLS, QP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray
from scipy.linalg import lapack

from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.diff_ik_parameters import MANIPULABILITY, DiffIkParameters
from ct_controllers.references.reference_generator import CartesianTarget
from ct_controllers.types import FloatArray

_dpotrf = lapack.dpotrf
_dposv = lapack.dposv


class TaskView(NamedTuple):
    """The weighted task of one tick, handed to :meth:`DifferentialIkBase._solve`; with
    J_w⁺ = J_wᵀ (J_w J_wᵀ + λ² I)⁻¹ (the damped pseudo-inverse) (a NamedTuple: one is built
    every tick):

    jacobian (m, n)     J_w, the active rows of W J at q*
    gram (m, m)         J_w J_wᵀ (undamped; the QP damps it with its own μ²)
    error (m,)          e_w [m | rad]
    damping_squared     λ² [m² | -]
    task_step (n,)      J_w⁺ e_w [rad | m], the DLS correction before the bandwidth
    feedforward (n,)    v_ff = J_w⁺ W ẋ_ff [rad/s | m/s] (zeros without a target twist)
    posture_step (n,)   d = q_post − q* [rad | m]
    nullspace_posture   N_λ d = (I − J_w⁺ J_w) d [rad | m]; None where the solver does not use
                        it (the QP projects the posture with its own N_μ)
    q (n,)              q* of the controlled joints [rad | m]
    velocity_limit (n,) [rad/s | m/s], URDF limit × velocity_scale
    has_feedforward     whether the target carried a twist
    """

    jacobian: FloatArray
    gram: FloatArray
    error: FloatArray
    damping_squared: float
    task_step: FloatArray
    feedforward: FloatArray
    posture_step: FloatArray
    nullspace_posture: FloatArray | None
    q: FloatArray
    velocity_limit: FloatArray
    has_feedforward: bool


class TaskTick(NamedTuple):
    """One tick's task and what was measured on the way (for the status).

    view               the weighted task handed to the solver
    jacobian (6, n)    J of the controlled joints at q*, unweighted (all six rows)
    position_error     [m]   ‖p* − p(q*)‖
    orientation_error  [rad] ‖log3(R* R(q*)ᵀ)‖
    manipulability     ∏σᵢ of the active rows of J
    condition_number   σ_max/σ_min of the same, NaN unless it is the singularity measure
    rate_scale         α ≤ 1 applied to the task for the TCP velocity bounds
    """

    view: TaskView
    jacobian: FloatArray
    position_error: float
    orientation_error: float
    manipulability: float
    condition_number: float
    rate_scale: float


@dataclass(frozen=True)
class TaskCache:
    """Values derived from one (immutable) parameter set, computed once per set."""

    parameters: DiffIkParameters
    rows: NDArray[np.intp]
    all_rows: bool
    unit_weights: bool
    row_weights: FloatArray
    damping_squared: float
    damping_squared_span: float
    velocity_limit: FloatArray
    identity: FloatArray  # the m x m identity, m = the number of active task rows
    minimum_damping: FloatArray  # λ_min² I (m x m): the damping away from singularities
    # The right-hand sides of the task's solve (m x 3, or m x 2 without the posture
    # projection; Fortran order, as LAPACK takes them): written each tick, column 1 only with a
    # target twist (else zeros).
    right_hand: FloatArray


class _FrameViews(NamedTuple):
    """Views of the model state's frame placement and Jacobian (the same arrays every tick,
    rewritten in place): sliced once, not every tick."""

    rotation: FloatArray
    jacobian: FloatArray
    rotation_transposed: FloatArray  # rotationᵀ
    controlled: FloatArray | None  # jacobian[:, v_sel] when that is a view (v_sel a slice)

    @staticmethod
    def of(
        rotation: FloatArray, jacobian: FloatArray, v_sel: slice | NDArray[np.intp]
    ) -> _FrameViews:
        controlled = jacobian[:, v_sel] if isinstance(v_sel, slice) else None
        return _FrameViews(rotation, jacobian, rotation.T, controlled)


def rate_scale(twist: FloatArray, parameters: DiffIkParameters) -> float:
    """The largest α ≤ 1 with ‖α twist_lin‖ ≤ v_max and ‖α twist_ang‖ ≤ ω_max."""
    vx, vy, vz, wx, wy, wz = twist.tolist()
    linear = math.sqrt(vx * vx + vy * vy + vz * vz)
    angular = math.sqrt(wx * wx + wy * wy + wz * wz)
    scale = 1.0
    if linear > parameters.max_linear_velocity:
        scale = parameters.max_linear_velocity / linear
    if angular * scale > parameters.max_angular_velocity:
        scale = parameters.max_angular_velocity / angular
    return scale


class WeightedTask:
    """The task of frame ``frame_id`` for the controlled joints (velocity columns ``v_sel``,
    URDF velocity limits ``velocity_limit``), evaluated on ``model``'s scratch data."""

    def __init__(
        self,
        model: RobotModel,
        frame_id: int,
        v_sel: slice | NDArray[np.intp],
        velocity_limit: FloatArray,
        project_posture: bool = True,
    ) -> None:
        """``project_posture``: compute N_λ d (:attr:`TaskView.nullspace_posture`), for a
        solver that uses it (the DLS)."""
        self.model = model
        self.frame_id = frame_id
        self.v_sel = v_sel
        self.velocity_limit = velocity_limit
        self.project_posture = project_posture
        self._cache: TaskCache | None = None
        self._twist_written = False  # column 1 of the cache's right_hand holds a twist
        self._at_reference = ModelState(model)  # the model evaluated at q*
        self._views = _FrameViews.of(
            self._at_reference.frame_placement(frame_id)[0],
            self._at_reference.frame_jacobian(frame_id),
            v_sel,
        )
        self._goal_views: tuple[FloatArray | None, FloatArray, FloatArray] = (
            None,
            np.zeros(3),
            np.eye(3),
        )

    def cache_for(self, parameters: DiffIkParameters) -> TaskCache:
        """Values derived from one (immutable) parameter set, computed once per set."""
        if self._cache is None or self._cache.parameters is not parameters:
            weights = parameters.task_weights
            rows = np.flatnonzero(weights > 0)
            identity = np.eye(rows.size)
            self._cache = TaskCache(
                parameters=parameters,
                rows=rows,
                all_rows=rows.size == 6,
                unit_weights=bool(np.all(weights[rows] == 1.0)),
                row_weights=weights[rows].copy(),
                damping_squared=parameters.damping**2,
                damping_squared_span=parameters.max_damping**2 - parameters.damping**2,
                velocity_limit=self.velocity_limit * parameters.velocity_scale,
                identity=identity,
                minimum_damping=identity * parameters.damping**2,
                right_hand=np.zeros((rows.size, 3 if self.project_posture else 2), order="F"),
            )
        return self._cache

    def at(
        self,
        q_ref: FloatArray,
        q: FloatArray,
        goal: CartesianTarget,
        parameters: DiffIkParameters,
        posture: FloatArray,
    ) -> TaskTick:
        """The task at q* = ``q_ref`` (model order; ``q`` its controlled joints) toward
        ``goal`` (validated, base frame), with the posture ``posture`` of the controlled
        joints."""
        cache = self.cache_for(parameters)
        evaluated = self._at_reference.update(q_ref)
        full_jacobian = evaluated.frame_jacobian(self.frame_id)  # and the frame's pose with it
        rotation, position = evaluated.frame_placement(self.frame_id)
        views = self._views
        if rotation is not views.rotation or full_jacobian is not views.jacobian:
            views = self._views = _FrameViews.of(rotation, full_jacobian, self.v_sel)
        goal_pose = goal.pose
        goal_views = self._goal_views
        if goal_pose is not goal_views[0]:
            goal_views = self._goal_views = (goal_pose, goal_pose[:3, 3], goal_pose[:3, :3])
        error = np.empty(6)
        error[:3] = goal_views[1] - position
        error[3:] = pin.log3(goal_views[2].dot(views.rotation_transposed))
        ex, ey, ez, erx, ery, erz = error.tolist()  # scalar maths: cheaper than 4 array calls
        position_error = math.sqrt(ex * ex + ey * ey + ez * ez)
        orientation_error = math.sqrt(erx * erx + ery * ery + erz * erz)

        jacobian = (
            views.controlled if views.controlled is not None else full_jacobian[:, self.v_sel]
        )
        active = jacobian if cache.all_rows else jacobian[cache.rows]
        if cache.unit_weights:
            weighted, weighted_error = active, error if cache.all_rows else error[cache.rows]
        else:
            weighted = cache.row_weights[:, None] * active
            weighted_error = cache.row_weights * (error if cache.all_rows else error[cache.rows])
        m, n = weighted.shape
        gram = weighted.dot(weighted.T)  # a new array: the TaskView keeps it
        # The singularity measure is the arm's, on the unweighted active rows (a small task
        # weight must not read as a singularity): ∏σᵢ = sqrt(det(J Jᵀ)) (det(JᵀJ) if m > n),
        # the product of a Cholesky diagonal.
        physical = gram if cache.unit_weights else active.dot(active.T)
        if m > n:
            physical = active.T.dot(active)
        factor, info = _dpotrf(physical, lower=0, clean=0)
        manipulability = math.prod(factor.diagonal().tolist()) if info == 0 else 0.0
        condition = math.nan
        if parameters.singularity_measure == MANIPULABILITY:
            closeness = 1.0 - manipulability / parameters.singularity_threshold
        else:
            eigenvalues = np.linalg.eigvalsh(physical)
            smallest = math.sqrt(max(float(eigenvalues[0]), 0.0))
            largest = math.sqrt(max(float(eigenvalues[-1]), 0.0))
            condition = largest / smallest if smallest > 0 else math.inf
            closeness = 1.0 - parameters.singularity_threshold / condition
        damping_squared = cache.damping_squared
        if closeness > 0:
            damping_squared += cache.damping_squared_span * closeness * closeness
            damped = gram + cache.identity * damping_squared
        else:
            damped = gram + cache.minimum_damping

        # One factorization of (J_w J_wᵀ + λ² I), three right-hand sides: the task error, the
        # feedforward twist and the posture displacement seen by the task (DLS only).
        posture_step = posture - q
        right_hand = cache.right_hand
        right_hand[:, 0] = weighted_error
        if goal.twist is not None:
            twist = goal.twist if cache.all_rows else goal.twist[cache.rows]
            right_hand[:, 1] = cache.row_weights * twist
        elif self._twist_written:
            right_hand[:, 1] = 0.0
        self._twist_written = goal.twist is not None
        if self.project_posture:
            np.dot(weighted, posture_step, out=right_hand[:, 2])
        # damped is symmetric, so its transpose is the same matrix in the Fortran order LAPACK
        # wants (and LAPACK may overwrite it: it is this tick's); right_hand is read, not
        # overwritten (the solution is a new array).
        _, solved, info = _dposv(damped.T, right_hand, overwrite_a=1)
        if info != 0:
            raise FloatingPointError(f"J_w J_wᵀ + λ²I not positive definite (LAPACK info {info})")
        pseudo = weighted.T.dot(solved)  # J_w⁺ applied to the columns
        task_step, feedforward = pseudo[:, 0], pseudo[:, 1]

        # Rate-limited goal following, before the solve: the DLS motion B J_w⁺e_w + v_ff would
        # move the TCP at J (B J_w⁺e_w + v_ff); the task (error and feedforward) is scaled by
        # the one factor α ≤ 1 that brings it within the TCP bounds. A far goal is then approached
        # at bounded speed along the DLS direction, and the QP's joint velocity bounds are not
        # what shapes the path (clipping joints one by one would bend it).
        motion = parameters.bandwidth * task_step
        if goal.twist is not None:
            motion += feedforward
        scale = rate_scale(jacobian.dot(motion), parameters)
        if scale < 1.0:
            weighted_error = weighted_error * scale
            task_step = task_step * scale
            feedforward = feedforward * scale
        view = TaskView(
            jacobian=weighted,
            gram=gram,
            error=weighted_error,
            damping_squared=damping_squared,
            task_step=task_step,
            feedforward=feedforward,
            posture_step=posture_step,
            nullspace_posture=posture_step - pseudo[:, 2] if self.project_posture else None,
            q=q,
            velocity_limit=cache.velocity_limit,
            has_feedforward=goal.twist is not None,
        )
        return TaskTick(
            view, jacobian, position_error, orientation_error, manipulability, condition, scale
        )
