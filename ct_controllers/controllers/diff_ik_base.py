"""What the two differential-IK generators (DLS and QP) share: parameters, status, and the tick
around the velocity solve.

One tick, at the *reference* configuration q* (integrated by the generator itself, started from
the measured state and re-synchronised to it when the two drift apart):

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
4. rate-limited goal following: before the solve, the task (e_w and the feedforward) is scaled
   by one factor α ≤ 1 such that the DLS motion B J_w⁺ e_w + v_ff moves the TCP with
   ‖linear‖ ≤ ``max_linear_velocity`` and ‖angular‖ ≤ ``max_angular_velocity`` — a far goal is
   approached at bounded speed along the DLS direction, not by a jump, and the QP's joint bounds
   do not bend the path;
5. the subclass computes the joint velocity v (:meth:`DifferentialIkBase._solve`), which is
   scaled again if J v still exceeds a bound;
6. integration: q*ₖ₊₁ = q*ₖ + dt·v on the controlled joints (the others hold where they were),
   v* = v, a* = 0 or (vₖ − vₖ₋₁)/dt.

Multi-rate (``update_divisor`` K ≥ 1, as a ros2_control chained controller with its own
``update_rate``): the solve above runs on every K-th tick with dt_K = K·dt, giving v and
q*_end = q*_start + dt_K·v; the K ticks it covers hand the joint controller the points of that
segment, q*_j = q*_start + j·dt·v (j = 1..K), v* = v — the references a 1/dt-rate generator would
give if v stayed constant over the K ticks. The segment lies inside the QP's position bounds
because both ends do (the bounds are convex). A new target is taken at the next solve, at most
K − 1 ticks later. K = 1 is the single-rate generator.

Units: λ_min, λ_max in m on the position rows and, as the same number, dimensionless on the
orientation rows (the task is taken with 1 m ≡ 1 rad; rescale with ``task_weights``). This λ
enters squared, on J Jᵀ: it is not the Levenberg–Marquardt damping of the full IK solver.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray
from scipy.linalg import lapack

from ct_controllers.controllers.controller import (
    FloatArray,
    GainError,
    JointReference,
    JointState,
)
from ct_controllers.controllers.reference_generator import (
    CartesianTarget,
    ReferenceGenerator,
    per_joint,
)
from ct_controllers.model.robot import RobotModel

MANIPULABILITY = "manipulability"
CONDITION_NUMBER = "condition_number"
SINGULARITY_MEASURES = (MANIPULABILITY, CONDITION_NUMBER)
ZERO = "zero"
FINITE_DIFFERENCE = "finite_difference"
ACCELERATIONS = (ZERO, FINITE_DIFFERENCE)

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
_dpotrf = lapack.dpotrf
_dposv = lapack.dposv


@dataclass(frozen=True)
class DiffIkParameters:
    """Parameters of the differential-IK generators; validated on construction
    (:class:`GainError` naming the parameter). Per-joint values are in the generator's
    ``joint_names`` order (or name → value maps, through
    :meth:`DifferentialIkBase.parameters_for`).

    damping               λ_min [m | -]  DLS damping far from singularities (> 0)
    max_damping           λ_max [m | -]  damping at a singularity (≥ λ_min)
    singularity_measure   "manipulability" (∏σᵢ) or "condition_number" (σ_max/σ_min), of the
                          active rows of J (unweighted)
    singularity_threshold s₀: manipulability below which damping rises [m³ for the full 6-row
                          task with 1 m ≡ 1 rad], or the condition number above which it does [-]
    task_weights          (6,) [-] weights of (x, y, z, rx, ry, rz) in base axes; 0 removes the
                          axis; at least one > 0
    bandwidth             B (n,) [1/s] per-joint gain of the task correction, > 0
    posture               (n,) [rad | m] preferred configuration; None: the measured one at the
                          first tick (or reset)
    posture_weight        w_p [-] ≥ 0: the posture displacement q_post − q*, projected on the
                          nullspace of J_w, is added to the task correction with this weight
                          (before B); the QP uses it as the target of a nullspace-only
                          regularization (see the QP module)
    max_linear_velocity   [m/s]   bound on the commanded TCP speed
    max_angular_velocity  [rad/s] bound on the commanded TCP angular speed
    velocity_scale        (0, 1]  fraction of the URDF joint velocity limits that v* may use
    position_margin       [rad | m] ≥ 0: the QP keeps q* in [lower + margin, upper − margin];
                          the DLS does not enforce position limits (use the QP where they matter)
    position_tolerance    [m]   status: converged when ‖p* − p(q*)‖ ≤ this ...
    orientation_tolerance [rad] ... and ‖log3(R* R(q*)ᵀ)‖ ≤ this
    resync_threshold      [rad | m] q* is reset to the measured q when they differ by more on
                          some controlled joint (None: never)
    acceleration          "zero" or "finite_difference" for a*
    """

    bandwidth: FloatArray
    damping: float = 1e-3
    max_damping: float = 0.05
    singularity_measure: str = MANIPULABILITY
    singularity_threshold: float = 0.01
    task_weights: FloatArray = field(default_factory=lambda: np.ones(6))
    posture: FloatArray | None = None
    posture_weight: float = 0.05
    max_linear_velocity: float = 0.25
    max_angular_velocity: float = 1.0
    velocity_scale: float = 1.0
    position_margin: float = 0.05
    position_tolerance: float = 1e-4
    orientation_tolerance: float = 1e-3
    resync_threshold: float | None = 0.2
    acceleration: str = ZERO

    def __post_init__(self) -> None:
        def positive(name: str, value: float, allow_zero: bool = False) -> float:
            number = float(value)
            if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
                bound = "≥ 0" if allow_zero else "> 0"
                raise GainError(f"{name}: must be finite and {bound}, got {value!r}")
            return number

        positive("damping", self.damping)
        if positive("max_damping", self.max_damping) < self.damping:
            raise GainError(
                f"max_damping: must be ≥ damping ({self.damping}), got {self.max_damping}"
            )
        if self.singularity_measure not in SINGULARITY_MEASURES:
            raise GainError(
                f"singularity_measure: '{self.singularity_measure}' is not one of "
                f"{', '.join(SINGULARITY_MEASURES)}"
            )
        threshold = positive("singularity_threshold", self.singularity_threshold)
        if self.singularity_measure == CONDITION_NUMBER and threshold < 1:
            raise GainError(f"singularity_threshold: a condition number is ≥ 1, got {threshold}")
        weights = np.array(self.task_weights, dtype=np.float64).reshape(-1)
        if weights.size != 6 or not np.isfinite(weights).all() or (weights < 0).any():
            raise GainError(f"task_weights: expected 6 finite values ≥ 0, got {weights.tolist()}")
        if not (weights > 0).any():
            raise GainError("task_weights: at least one axis must have a weight > 0")
        object.__setattr__(self, "task_weights", weights)
        bandwidth = np.array(self.bandwidth, dtype=np.float64).reshape(-1)
        if not np.isfinite(bandwidth).all() or (bandwidth <= 0).any():
            raise GainError(f"bandwidth: values must be finite and > 0, got {bandwidth.tolist()}")
        object.__setattr__(self, "bandwidth", bandwidth)
        if self.posture is not None:
            posture = np.array(self.posture, dtype=np.float64).reshape(-1)
            if posture.size != bandwidth.size or not np.isfinite(posture).all():
                raise GainError(
                    f"posture: expected {bandwidth.size} finite values, got {posture.tolist()}"
                )
            object.__setattr__(self, "posture", posture)
        # Read-only arrays: a parameter set is a value (caches rely on it).
        for array in (self.task_weights, self.bandwidth, self.posture):
            if array is not None:
                array.setflags(write=False)
        positive("posture_weight", self.posture_weight, allow_zero=True)
        positive("max_linear_velocity", self.max_linear_velocity)
        positive("max_angular_velocity", self.max_angular_velocity)
        if not (0 < self.velocity_scale <= 1):
            raise GainError(f"velocity_scale: must be in (0, 1], got {self.velocity_scale}")
        positive("position_margin", self.position_margin, allow_zero=True)
        positive("position_tolerance", self.position_tolerance)
        positive("orientation_tolerance", self.orientation_tolerance)
        if self.resync_threshold is not None:
            positive("resync_threshold", self.resync_threshold)
        if self.acceleration not in ACCELERATIONS:
            raise GainError(
                f"acceleration: '{self.acceleration}' is not one of {', '.join(ACCELERATIONS)}"
            )


@dataclass(frozen=True)
class DiffIkStatus:
    """What the last tick did, measured at the reference q* it started from.

    position_error     [m]   ‖p* − p(q*)‖
    orientation_error  [rad] ‖log3(R* R(q*)ᵀ)‖
    converged          both within the parameters' tolerances (a statement about q*, not about
                       the measured arm)
    damping            λ used [m | -]
    manipulability     ∏σᵢ of the active rows of J (always computed: one Cholesky factorization)
    condition_number   σ_max/σ_min of the same (inf if singular) when it is the singularity measure;
                       NaN otherwise (not computed, it costs an eigen-decomposition)
    rate_scale         α ≤ 1 applied for the TCP velocity bounds (1: not rate limited)
    velocity_limited   v* was scaled (DLS) or clipped (QP) to the joint velocity limits
    resynced           q* was reset to the measured q this tick
    solver             "dls", or the QP solver's status string
    """

    position_error: float
    orientation_error: float
    converged: bool
    damping: float
    manipulability: float
    condition_number: float
    rate_scale: float
    velocity_limited: bool
    resynced: bool
    solver: str


@dataclass
class TaskView:
    """The weighted task of one tick, handed to :meth:`DifferentialIkBase._solve`; with
    J_w⁺ = J_wᵀ (J_w J_wᵀ + λ² I)⁻¹ (the damped pseudo-inverse):

    jacobian (m, n)     J_w, the active rows of W J at q*
    error (m,)          e_w [m | rad]
    damping_squared     λ² [m² | -]
    task_step (n,)      J_w⁺ e_w [rad | m], the DLS correction before the bandwidth
    feedforward (n,)    v_ff = J_w⁺ W ẋ_ff [rad/s | m/s] (zeros without a target twist)
    posture_step (n,)   d = q_post − q* [rad | m]
    nullspace_posture   N_λ d = (I − J_w⁺ J_w) d [rad | m]
    q (n,)              q* of the controlled joints [rad | m]
    velocity_limit (n,) [rad/s | m/s], URDF limit × velocity_scale
    has_feedforward     whether the target carried a twist
    """

    jacobian: FloatArray
    error: FloatArray
    damping_squared: float
    task_step: FloatArray
    feedforward: FloatArray
    posture_step: FloatArray
    nullspace_posture: FloatArray
    q: FloatArray
    velocity_limit: FloatArray
    has_feedforward: bool


@dataclass(frozen=True)
class _ParameterCache:
    parameters: DiffIkParameters
    rows: NDArray[np.intp]
    all_rows: bool
    unit_weights: bool
    row_weights: FloatArray
    zeros_rows: FloatArray
    damping_squared: float
    damping_squared_span: float
    velocity_limit: FloatArray


def _selector(index: NDArray[np.intp]) -> slice | NDArray[np.intp]:
    """``slice(a, a + n)`` if ``index`` is a, a+1, ..., a+n−1; else ``index`` itself."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index


def _frozen_array(value: object) -> bool:
    """A read-only array that owns its memory: no one can change it in place (a read-only view
    of a writable array can still change through its base)."""
    return isinstance(value, np.ndarray) and not value.flags.writeable and value.base is None


class DifferentialIkBase(ReferenceGenerator[DiffIkParameters]):
    """Shared tick of the DLS and QP generators (see the module docstring).

    ``joint_names`` are the controlled joints (e.g. the 7 arm joints); every other joint of the
    model keeps the reference it had when q* was last synchronised with the measured state (a
    gripper's fingers hold). The generator owns its model and scratch data.
    """

    solver_name = "dls"

    def __init__(
        self,
        model: RobotModel,
        joint_names: Sequence[str],
        parameters: DiffIkParameters | None = None,
        frame: str | None = None,
        update_divisor: int = 1,
    ) -> None:
        """``update_divisor`` K: solve every K-th tick and follow the solution's segment in
        between (see the module docstring); 1 = every tick."""
        if isinstance(update_divisor, bool) or not isinstance(update_divisor, int):
            raise GainError(f"update_divisor: must be an integer ≥ 1, got {update_divisor!r}")
        if update_divisor < 1:
            raise GainError(f"update_divisor: must be ≥ 1, got {update_divisor}")
        self.update_divisor = update_divisor
        # The segment being followed between two solves: q*_start (model order), v and a
        # (model order), and the ticks of it handed out so far.
        self._segment: tuple[FloatArray, FloatArray, FloatArray] | None = None
        self._segment_ticks = 0
        self.model = model
        self.joint_names = tuple(joint_names)
        if not self.joint_names:
            raise GainError("joint_names: at least one controlled joint is needed")
        self._q_index = model.indices(self.joint_names)  # raises on unknown/duplicate names
        self._v_index = np.array([model.v_index(n) for n in self.joint_names], dtype=np.intp)
        # Basic slices where the joints are contiguous in q / v (cheaper than fancy indexing).
        self._q_sel: slice | NDArray[np.intp] = _selector(self._q_index)
        self._v_sel: slice | NDArray[np.intp] = _selector(self._v_index)
        self.frame = frame if frame is not None else model.model.frames[model.tcp_frame_id].name
        self._frame_id = model.frame_id(self.frame)
        self.base_frame = model.model.frames[model.base_frame_id].name
        self._lower = model.limits.lower[self._q_index].copy()
        self._upper = model.limits.upper[self._q_index].copy()
        self._velocity_limit = model.limits.velocity[self._q_index].copy()
        if not (np.isfinite(self._velocity_limit).all() and (self._velocity_limit > 0).all()):
            raise GainError(
                f"URDF velocity limits of {self.joint_names} must be finite and > 0, got "
                f"{self._velocity_limit.tolist()}"
            )
        if parameters is None:
            parameters = DiffIkParameters(bandwidth=np.full(len(self.joint_names), 10.0))
        self._check_parameters(parameters)
        super().__init__(parameters)
        self._q_ref: FloatArray | None = None
        self._v_previous = np.zeros(len(self.joint_names))
        self._posture: FloatArray | None = None
        self.status: DiffIkStatus | None = None
        self._cache: _ParameterCache | None = None
        self._checked_target: CartesianTarget | None = None  # the last read-only target ...
        self._checked_goal = CartesianTarget(np.eye(4), self.base_frame)  # ... and its check

    # --- parameters ------------------------------------------------------------------------
    def parameters_for(self, **changes: Any) -> DiffIkParameters:
        """The current parameters with ``changes`` applied and validated (:class:`GainError`).
        Per-joint values (``bandwidth``, ``posture``) may be scalars, sequences in
        ``joint_names`` order or name → value maps."""
        for name in ("bandwidth", "posture"):
            if name in changes and changes[name] is not None:
                changes[name] = per_joint(name, changes[name], self.joint_names)
        parameters = replace(self.parameters, **changes)
        self._check_parameters(parameters)
        return parameters

    def stage_parameters(self, parameters: DiffIkParameters | Mapping[str, Any]) -> None:
        """Stage a full parameter set, or a map of changes to the current one (validated now,
        applied at the next tick boundary)."""
        if not isinstance(parameters, DiffIkParameters):
            parameters = self.parameters_for(**dict(parameters))
        self._check_parameters(parameters)
        super().stage_parameters(parameters)

    def _check_parameters(self, parameters: DiffIkParameters) -> None:
        """Checks that need the generator (sizes, ranges); raises :class:`GainError`."""
        if parameters.bandwidth.size != len(self.joint_names):
            raise GainError(
                f"bandwidth: expected {len(self.joint_names)} values "
                f"({', '.join(self.joint_names)}), got {parameters.bandwidth.size}"
            )

    def apply_parameters(self, parameters: DiffIkParameters) -> None:
        super().apply_parameters(parameters)
        if parameters.posture is not None:
            self._posture = parameters.posture.copy()

    def _cache_for(self, parameters: DiffIkParameters) -> _ParameterCache:
        """Values derived from one (immutable) parameter set, computed once per set."""
        if self._cache is None or self._cache.parameters is not parameters:
            weights = parameters.task_weights
            rows = np.flatnonzero(weights > 0)
            self._cache = _ParameterCache(
                parameters=parameters,
                rows=rows,
                all_rows=rows.size == 6,
                unit_weights=bool(np.all(weights[rows] == 1.0)),
                row_weights=weights[rows].copy(),
                zeros_rows=np.zeros(rows.size),
                damping_squared=parameters.damping**2,
                damping_squared_span=parameters.max_damping**2 - parameters.damping**2,
                velocity_limit=self._velocity_limit * parameters.velocity_scale,
            )
        return self._cache

    # --- state -----------------------------------------------------------------------------
    def reset(self, state: JointState | None = None) -> None:
        """Forget q* (the next tick starts from the measured state), or start from ``state``.
        Without a ``posture`` parameter, the posture is taken again from that state."""
        self._q_ref = None
        self._segment = None
        self._v_previous = np.zeros(len(self.joint_names))
        if self.parameters.posture is None:
            self._posture = None
        if state is not None:
            self._synchronise(state)

    def prepare(self, state: JointState, target: CartesianTarget, dt: float) -> None:
        """One tick at ``state`` toward ``target`` off the control thread, then :meth:`reset`:
        the first real tick still starts from the measured state, but finds the parameter cache
        built, the target checked, the model's scratch data and the QP solver warm (OSQP
        warm-starts from this solve) — it then costs what later ticks do."""
        try:
            self.update(state, target, dt)
        finally:  # also when it raised: nothing of this tick may reach the first real one
            self.reset()
            self.status = None

    @property
    def reference_q(self) -> FloatArray | None:
        """The current q* [rad | m], model order (a copy), or None before the first tick."""
        return None if self._q_ref is None else self._q_ref.copy()

    def _synchronise(self, state: JointState) -> None:
        q = np.array(state.q, dtype=np.float64)
        if q.shape != (self.model.nq,) or not np.isfinite(q).all():
            raise ValueError(f"state.q: expected {self.model.nq} finite values")
        self._q_ref = q
        if self._posture is None:
            self._posture = (
                self.parameters.posture.copy()
                if self.parameters.posture is not None
                else q[self._q_index].copy()
            )

    # --- the tick --------------------------------------------------------------------------
    def compute(self, state: JointState, target: CartesianTarget, dt: float) -> JointReference:
        segment = self._segment
        if segment is not None and self._segment_ticks < self.update_divisor:
            # Between two solves: the next point of the last solution's segment.
            self._segment_ticks += 1
            q_start, v_full, a_full = segment
            return JointReference(
                q=q_start + (self._segment_ticks * dt) * v_full, v=v_full.copy(), a=a_full.copy()
            )
        if self.update_divisor == 1:
            return self._solve_tick(state, target, dt)
        end = self._solve_tick(state, target, dt * self.update_divisor)
        q_start = end.q - (dt * self.update_divisor) * end.v  # q* where this solve started
        self._segment = (q_start, end.v, end.a)
        self._segment_ticks = 1
        return JointReference(q=q_start + dt * end.v, v=end.v.copy(), a=end.a.copy())

    def _solve_tick(self, state: JointState, target: CartesianTarget, dt: float) -> JointReference:
        """One solve over ``dt`` [s] (the single-rate tick): q*, v*, a* at its end."""
        goal = self._validated(target)
        parameters = self.parameters
        cache = self._cache_for(parameters)
        q_sel, v_sel = self._q_sel, self._v_sel
        resynced = False
        if self._q_ref is None:
            self._synchronise(state)
            resynced = True
        elif parameters.resync_threshold is not None:
            drift = np.abs(np.asarray(state.q)[q_sel] - self._q_ref[q_sel]).max()
            if drift > parameters.resync_threshold:
                self._synchronise(state)
                self._v_previous = np.zeros(len(self.joint_names))
                resynced = True
        assert self._q_ref is not None and self._posture is not None
        q_ref = self._q_ref
        q = q_ref[q_sel].copy()

        data = self.model.data
        full_jacobian = pin.computeFrameJacobian(
            self.model.model, data, q_ref, self._frame_id, _LWA
        )  # also updates oMf of the frame
        placement = data.oMf[self._frame_id]
        error = np.empty(6)
        error[:3] = goal.pose[:3, 3] - placement.translation
        error[3:] = pin.log3(goal.pose[:3, :3].dot(placement.rotation.T))
        ex, ey, ez, erx, ery, erz = error.tolist()  # scalar maths: cheaper than 4 array calls
        position_error = math.sqrt(ex * ex + ey * ey + ez * ez)
        orientation_error = math.sqrt(erx * erx + ery * ery + erz * erz)

        jacobian = full_jacobian[:, v_sel]
        active = jacobian if cache.all_rows else jacobian[cache.rows]
        if cache.unit_weights:
            weighted, weighted_error = active, error if cache.all_rows else error[cache.rows]
        else:
            weighted = cache.row_weights[:, None] * active
            weighted_error = cache.row_weights * (error if cache.all_rows else error[cache.rows])
        m, n = weighted.shape
        gram = weighted.dot(weighted.T)
        # The singularity measure is the arm's, on the unweighted active rows (a small task
        # weight must not read as a singularity): ∏σᵢ = sqrt(det(J Jᵀ)) (det(JᵀJ) if m > n),
        # the product of a Cholesky diagonal.
        physical = gram if cache.unit_weights else active.dot(active.T)
        if m > n:
            physical = active.T.dot(active)
        factor, info = _dpotrf(physical, lower=0, clean=0)
        manipulability = float(factor.diagonal().prod()) if info == 0 else 0.0
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

        # One factorization of (J_w J_wᵀ + λ² I), three right-hand sides: the task error, the
        # feedforward twist and the posture displacement seen by the task.
        posture_step = self._posture - q
        if goal.twist is None:
            twist_rows = cache.zeros_rows
        elif cache.all_rows:
            twist_rows = cache.row_weights * goal.twist
        else:
            twist_rows = cache.row_weights * goal.twist[cache.rows]
        right_hand = np.array((weighted_error, twist_rows, weighted.dot(posture_step)))
        gram.flat[:: m + 1] += damping_squared
        # gram is symmetric, so its transpose is the same matrix in the Fortran order LAPACK
        # wants; right_hand.T likewise: no copies.
        _, solved, info = _dposv(gram.T, right_hand.T)
        if info != 0:
            raise FloatingPointError(f"J_w J_wᵀ + λ²I not positive definite (LAPACK info {info})")
        pseudo = weighted.T.dot(solved)  # J_w⁺ applied to the three columns
        task_step, feedforward = pseudo[:, 0], pseudo[:, 1]

        # Rate-limited goal following, before the solve: the DLS motion B J_w⁺e_w + v_ff would
        # move the TCP at J (B J_w⁺e_w + v_ff); the task (error and feedforward) is scaled by
        # the one factor α ≤ 1 that brings it within the TCP bounds. A far goal is then approached
        # at bounded speed along the DLS direction, and the QP's joint velocity bounds are not
        # what shapes the path (clipping joints one by one would bend it).
        rate_scale = self._rate_scale(
            jacobian.dot(parameters.bandwidth * task_step + feedforward), parameters
        )
        if rate_scale < 1.0:
            weighted_error = weighted_error * rate_scale
            task_step = task_step * rate_scale
            feedforward = feedforward * rate_scale
        task = TaskView(
            jacobian=weighted,
            error=weighted_error,
            damping_squared=damping_squared,
            task_step=task_step,
            feedforward=feedforward,
            posture_step=posture_step,
            nullspace_posture=posture_step - pseudo[:, 2],
            q=q,
            velocity_limit=cache.velocity_limit,
            has_feedforward=goal.twist is not None,
        )
        velocity, velocity_limited, solver = self._solve(task, dt)

        # ... and after it, as the guarantee (the posture and the bounds may add TCP motion).
        final_scale = self._rate_scale(jacobian.dot(velocity), parameters)
        if final_scale < 1.0:
            velocity = velocity * final_scale
            rate_scale *= final_scale

        q_ref[q_sel] = q + dt * velocity
        v_full = np.zeros(self.model.nv)
        v_full[v_sel] = velocity
        a_full = np.zeros(self.model.nv)
        if parameters.acceleration == FINITE_DIFFERENCE and not resynced:
            a_full[v_sel] = (velocity - self._v_previous) / dt
        self._v_previous = velocity
        self.status = DiffIkStatus(
            position_error=position_error,
            orientation_error=orientation_error,
            converged=position_error <= parameters.position_tolerance
            and orientation_error <= parameters.orientation_tolerance,
            damping=math.sqrt(damping_squared),
            manipulability=manipulability,
            condition_number=condition,
            rate_scale=rate_scale,
            velocity_limited=velocity_limited,
            resynced=resynced,
            solver=solver,
        )
        return JointReference(q=q_ref.copy(), v=v_full, a=a_full)

    def _validated(self, target: CartesianTarget) -> CartesianTarget:
        """``target.validated`` for this generator's base frame, once per target object when its
        arrays are read-only (then nothing can have changed since it was checked)."""
        if target is self._checked_target:
            return self._checked_goal
        goal = target.validated(self.base_frame)
        if _frozen_array(target.pose) and (target.twist is None or _frozen_array(target.twist)):
            self._checked_target, self._checked_goal = target, goal
        return goal

    @staticmethod
    def _rate_scale(twist: FloatArray, parameters: DiffIkParameters) -> float:
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

    @abstractmethod
    def _solve(self, task: TaskView, dt: float) -> tuple[FloatArray, bool, str]:
        """The joint velocity v (n,) [rad/s | m/s] of the controlled joints, whether it was
        limited by the joint velocity limits, and the solver status."""
