"""Differential IK as a quadratic program: the DLS task plus joint position limits (with a
margin, so that the *integrated* q* stays inside), joint velocity limits and a posture
regularization. The default generator where limits matter.

Variable u (n,) [rad | m], with v* = B u + v_ff (B = diag(bandwidth) [1/s] > 0, and
v_ff = J_wᵀ (J_w J_wᵀ + λ²I)⁻¹ W ẋ_ff the feedforward of a target twist), d = q_post − q*:

    minimize    ½‖J_w u − e_w‖² + ½ λ² ‖u‖² + ½ (u − w_p d)ᵀ N_μ (u − w_p d)
    subject to  v_lo ≤ B u + v_ff ≤ v_hi

    i.e.  P = J_wᵀ J_w + λ² I + N_μ,   q = −(J_wᵀ e_w + w_p N_μ d),   A = I,
          l = (v_lo − v_ff) / B,   u = (v_hi − v_ff) / B          (element-wise)

    N_μ = I − J_wᵀ (J_w J_wᵀ + μ² I)⁻¹ J_w,   μ² = 1e-10

    v_lo = max(−v_max, min(0, (q_lower + margin − q*) / dt))
    v_hi = min(+v_max, max(0, (q_upper − margin − q*) / dt))

N_μ is, to ~μ²/σ², the orthogonal projector on the nullspace of J_w: the posture term
regularizes only the directions the task does not see. So, without active bounds, the task
rows get the DLS step (u = J_wᵀ(J_w J_wᵀ + λ²I)⁻¹ e_w up to λ² and μ² terms; tested against
:mod:`ct_controllers.references.diff_ik`), the nullspace moves toward the posture with the
same weight w_p as in the DLS, the posture cannot pull the task off its goal at steady state,
and P is well conditioned (eigenvalues ≥ min(σ² + λ², 1 + λ²) — without the projector term
the nullspace would only have λ² = 1e-6 of curvature, and OSQP's 1e-6 tolerances would leave
it undetermined).

q* + dt·v* stays in [lower + margin, upper − margin] once it is there (v = 0 is always
feasible, so a q* that starts outside the margin is not pushed further out). The solution is
finally clipped onto [v_lo, v_hi] to remove the solver's tolerance-sized violations, so the
integrated limits hold exactly. The base class's rate limiting scales the task (e_w, v_ff)
before the solve, so that far goals do not saturate joint velocity bounds one joint at a time
(which would bend the TCP path), and v* after it if needed, by α ∈ (0, 1] — which keeps v*
feasible (the feasible set is convex and contains 0).

The unconstrained minimizer first: P u = −q by one Cholesky solve. When it lies inside the
bounds it is the QP's optimum, exactly (a convex QP whose unconstrained minimizer is feasible),
and no solver runs — on the grasp's ticks no bound binds (every tick of ``ct-bench loop``). That
is checked first where the bounds come from, without building them: |v| < v_max and
q* + dt·v inside [lower + margin, upper − margin] imply v_lo ≤ v ≤ v_hi; what this sufficient
test does not pass takes the exact one on [l, u]. Only when a bound binds (a joint near a
position or velocity limit) is the box QP solved:

- DAQP (``qp_solver="daqp"``, the default): a dual active-set solver for dense problems, exact
  to machine precision, no setup to keep; 4.2 µs p50 / 6 µs p99 per binding solve on this
  machine against OSQP's 10.7 / 22 µs (12,000 binding solves from random starts and targets);
- OSQP (``qp_solver="osqp"``): the problem is set up once (sparsity of the dense
  upper-triangular P and of A = I fixed); each binding solve updates P's values, q, l and u and
  solves, warm-started (``warm_starting``) from the previous primal and dual solution, to OSQP's
  1e-6 tolerances.

See ``ct-bench diffik``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import osqp
import scipy.sparse as sparse
from daqp import solve as _daqp_solve
from scipy.linalg import lapack

from ct_controllers.errors import GainError
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.diff_ik_base import DifferentialIkBase
from ct_controllers.references.diff_ik_parameters import DiffIkParameters
from ct_controllers.references.diff_ik_task import TaskView
from ct_controllers.types import FloatArray

OSQP = "osqp"
DAQP = "daqp"
UNCONSTRAINED = "unconstrained"  # the status when no bound binds (no solver call)
QP_SOLVERS = (OSQP, DAQP)
PROJECTOR_DAMPING_SQUARED = 1e-10  # μ² [m² | -]: N_μ is the nullspace projector to ~μ²/σ²
_dposv = lapack.dposv
_OSQP_OK = (int(osqp.SolverStatus.OSQP_SOLVED), int(osqp.SolverStatus.OSQP_SOLVED_INACCURATE))

OSQP_SETTINGS = {
    "verbose": False,
    "eps_abs": 1e-6,  # the task residual e_w is in m and rad: 1 µm-level solutions
    "eps_rel": 1e-6,
    "polishing": False,  # prints to stdout even when not verbose; the final clip does its job
    "warm_starting": True,
    "max_iter": 4000,
}


class BoxQp(NamedTuple):
    """minimize ½ uᵀ P u − descentᵀ u subject to lower ≤ u ≤ upper (P = ``hessian``, n x n,
    symmetric positive definite; u [rad | m], see the module docstring)."""

    hessian: FloatArray
    descent: FloatArray
    lower: FloatArray
    upper: FloatArray


class _Limits(NamedTuple):
    """What one parameter set makes of the URDF limits of the controlled joints."""

    parameters: DiffIkParameters
    low: FloatArray  # lower + margin [rad | m]
    high: FloatArray  # upper − margin [rad | m]
    inverse_velocity: FloatArray  # 1 / (URDF velocity limit × velocity_scale) [s/rad | s/m]
    inverse_bandwidth: FloatArray  # 1 / B [s]


@functools.cache
def _sparsity(n: int) -> tuple[sparse.csc_matrix, sparse.csc_matrix]:
    """The QP's fixed sparsity: a dense upper-triangular P and A = I (n x n, CSC), built once
    per size (OSQP copies them at setup; they are never changed)."""
    return sparse.triu(np.ones((n, n)), format="csc"), sparse.identity(n, format="csc")


class QpDiffIk(DifferentialIkBase):
    """QP differential IK (see the module docstring)."""

    solver_name = DAQP
    projects_posture = False  # the QP projects the posture with its own N_μ

    def __init__(
        self,
        model: RobotModel,
        joint_names: Sequence[str],
        parameters: DiffIkParameters | None = None,
        frame: str | None = None,
        qp_solver: str = DAQP,
        update_divisor: int = 1,
    ) -> None:
        if qp_solver not in QP_SOLVERS:
            raise GainError(f"qp_solver: '{qp_solver}' is not one of {', '.join(QP_SOLVERS)}")
        super().__init__(model, joint_names, parameters, frame, update_divisor)
        self.qp_solver = self.solver_name = qp_solver
        n = len(self.joint_names)
        # CSC order of the upper triangle of a dense n x n matrix: column by column.
        upper_rows: list[int] = []
        upper_cols: list[int] = []
        for column in range(n):
            for row in range(column + 1):
                upper_rows.append(row)
                upper_cols.append(column)
        # Flat (row-major) index of each upper-triangle entry: P_x = hessian.take(index).
        self._upper_flat = np.array(upper_rows, dtype=np.intp) * n + np.array(upper_cols)
        self._limits_of: _Limits | None = None
        self._diagonal_for = math.nan  # the λ² that ``_diagonal`` = (1 + λ²) I was built for
        self._diagonal = np.eye(n)
        self._problem: osqp.OSQP | None = None
        self._solver: Any = None
        self._no_constraints = np.zeros((0, n))  # DAQP: simple bounds only, no general rows
        self._identity = np.eye(n)
        # μ² I for each number m ≤ 6 of active task rows.
        self._projector_damping = tuple(np.eye(m) * PROJECTOR_DAMPING_SQUARED for m in range(7))
        if qp_solver == OSQP:
            # The builtin algebra named, not looked up: OSQP's default lookup tries to import
            # its CUDA and MKL backends on every construction (~0.2 ms of file-system searches,
            # on a goal's thread that shares the GIL with the control loop).
            self._problem = osqp.OSQP(algebra="builtin")
            pattern, identity = _sparsity(n)
            self._problem.setup(
                P=pattern, q=np.zeros(n), A=identity, l=-np.ones(n), u=np.ones(n), **OSQP_SETTINGS
            )
            # The extension object behind the osqp 1.x Python interface, when it has one (the
            # pinned osqp does): same calls, without the wrapper's per-call bookkeeping.
            self._solver = getattr(self._problem, "_solver", None)

    def _check_parameters(self, parameters: DiffIkParameters) -> None:
        super()._check_parameters(parameters)
        too_wide = 2 * parameters.position_margin >= self._upper - self._lower
        if too_wide.any():
            names = [n for n, wide in zip(self.joint_names, too_wide, strict=True) if wide]
            raise GainError(
                f"position_margin: {parameters.position_margin} leaves no range on {names}"
            )

    def _limits(self) -> _Limits:
        """The current parameter set's position window and velocity limits (built once per
        set)."""
        limits = self._limits_of
        if limits is None or limits.parameters is not self.parameters:
            parameters = self.parameters
            margin = parameters.position_margin
            velocity = self._velocity_limit * parameters.velocity_scale
            limits = self._limits_of = _Limits(
                parameters,
                self._lower + margin,
                self._upper - margin,
                1.0 / velocity,
                1.0 / parameters.bandwidth,
            )
        return limits

    def _bounds(self, task: TaskView, dt: float) -> tuple[FloatArray, FloatArray]:
        """[v_lo, v_hi] [rad/s | m/s]: velocity limits and the integrated position limits."""
        limits = self._limits()
        inverse_dt = 1.0 / dt
        low = (limits.low - task.q) * inverse_dt
        np.minimum(low, 0.0, out=low)
        np.maximum(low, -task.velocity_limit, out=low)
        high = (limits.high - task.q) * inverse_dt
        np.maximum(high, 0.0, out=high)
        np.minimum(high, task.velocity_limit, out=high)
        return low, high

    def _objective(self, task: TaskView) -> tuple[FloatArray, FloatArray]:
        """P and −q of this tick's QP (module docstring): (hessian, descent)."""
        jacobian = task.jacobian
        # X = (J_w J_wᵀ + μ² I)⁻¹ J_w, so that N_μ = I − J_wᵀ X and P = I + J_wᵀ (J_w − X) + λ² I.
        # (J_w J_wᵀ is the task's; damped here into a new array, which LAPACK may overwrite.)
        damped = task.gram + self._projector_damping[jacobian.shape[0]]
        _, solved, info = _dposv(damped.T, jacobian, overwrite_a=1)
        if info != 0:
            raise FloatingPointError(f"J_w J_wᵀ + μ²I not positive definite (LAPACK info {info})")
        hessian = jacobian.T.dot(jacobian - solved)
        if task.damping_squared != self._diagonal_for:  # (1 + λ²) I, rebuilt when λ changes
            self._diagonal_for = task.damping_squared
            self._diagonal = self._identity * (1.0 + task.damping_squared)
        hessian += self._diagonal
        # −q of the QP: J_wᵀ e_w + w_p N_μ d = J_wᵀ (e_w − w_p X d) + w_p d.
        weight = self.parameters.posture_weight
        posture = task.posture_step
        descent = jacobian.T.dot(task.error - weight * solved.dot(posture))
        descent += weight * posture
        return hessian, descent

    def box_qp(self, task: TaskView, dt: float) -> tuple[BoxQp, FloatArray, FloatArray]:
        """This tick's QP (module docstring) and the velocity bounds [v_lo, v_hi] it encodes."""
        hessian, descent = self._objective(task)
        return self._bounded(hessian, descent, task, dt)

    def _bounded(
        self, hessian: FloatArray, descent: FloatArray, task: TaskView, dt: float
    ) -> tuple[BoxQp, FloatArray, FloatArray]:
        """The QP of ``hessian`` and ``descent`` (:meth:`_objective`) with this tick's bounds."""
        v_low, v_high = self._bounds(task, dt)
        if task.has_feedforward:
            bandwidth = self.parameters.bandwidth
            u_low = (v_low - task.feedforward) / bandwidth
            u_high = (v_high - task.feedforward) / bandwidth
        else:
            inverse_bandwidth = self._limits().inverse_bandwidth
            u_low, u_high = v_low * inverse_bandwidth, v_high * inverse_bandwidth
        return BoxQp(hessian, descent, u_low, u_high), v_low, v_high

    def _solve(self, task: TaskView, dt: float) -> tuple[FloatArray, bool, str]:
        # The unconstrained minimizer P u = −q first (P is symmetric positive definite: one
        # Cholesky solve), tested where the bounds come from (module docstring) on v = B u +
        # v_ff and the q*ₖ₊₁ = q* + dt·v the base class integrates, in scalar maths on plain
        # lists (cheaper than building the bounds). What this sufficient test does not pass —
        # a bound binding, or a q* outside the window moving back in — takes the exact test.
        hessian, descent = self._objective(task)
        _, u, info = _dposv(hessian, descent)
        if info == 0 and math.isfinite(u.dot(u)):
            limits = self._limits()
            velocity = self.parameters.bandwidth * u
            if task.has_feedforward:
                velocity += task.feedforward
            speed = (abs(velocity) * limits.inverse_velocity).tolist()  # |v| / v_max
            fastest = max(speed)
            if fastest < 1.0:
                q_next = task.q + dt * velocity
                if min((q_next - limits.low).tolist()) >= 0.0 and (
                    max((q_next - limits.high).tolist()) <= 0.0
                ):
                    return velocity, fastest >= 1.0 - 1e-9, UNCONSTRAINED
        qp, v_low, v_high = self._bounded(hessian, descent, task, dt)
        if info == 0 and (qp.lower <= u).all() and (u <= qp.upper).all():
            ok, status = True, UNCONSTRAINED
        else:
            u, ok, status = self.solve_bounded(qp)
        if not ok or not math.isfinite(u.dot(u)):
            # v = 0 is always feasible: hold q* and say so.
            return np.zeros_like(task.q), False, f"{status}: holding"
        velocity = self.parameters.bandwidth * u + task.feedforward
        # Remove the solver's tolerance-sized violations: the bounds then hold exactly.
        np.maximum(velocity, v_low, out=velocity)
        np.minimum(velocity, v_high, out=velocity)
        limited = bool(np.count_nonzero(np.abs(velocity) >= task.velocity_limit * (1 - 1e-9)))
        return velocity, limited, status

    def solve_bounded(self, qp: BoxQp) -> tuple[FloatArray, bool, str]:
        """``qp`` by the chosen solver (the tick asks only when a bound binds): (u, solved,
        status)."""
        hessian, u_low, u_high = qp.hessian, qp.lower, qp.upper
        gradient = -qp.descent
        if self._solver is not None:
            # The osqp 1.x extension object behind osqp.OSQP: the same update/solve calls
            # without the Python wrapper's per-call bookkeeping (half the time at n = 7).
            solver = self._solver
            # warm_starting=True: each solve starts from the previous primal and dual solution,
            # kept inside OSQP (no copy through Python).
            solver.update_data_vec(q=gradient, l=u_low, u=u_high)
            solver.update_data_mat(P_x=hessian.take(self._upper_flat), P_i=None, A_x=None, A_i=None)
            solver.solve()
            info = solver.info
            # A copy: the solver's buffer changes next solve.
            return np.array(solver.solution.x), info.status_val in _OSQP_OK, str(info.status)
        if self._problem is not None:  # the public interface (another osqp version)
            self._problem.update(Px=hessian.take(self._upper_flat), q=gradient, l=u_low, u=u_high)
            result = self._problem.solve(raise_error=False)
            return np.array(result.x), result.info.status_val in _OSQP_OK, str(result.info.status)
        # DAQP: simple bounds are the first rows of the bound vectors when A has fewer rows.
        x, _, exitflag, _ = _daqp_solve(hessian, gradient, self._no_constraints, u_high, u_low)
        ok = exitflag >= 1
        return np.array(x), ok, "solved" if ok else f"daqp exitflag {exitflag}"
