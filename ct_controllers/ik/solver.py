"""Full inverse kinematics: a candidate configuration for a TCP pose, with its residual.

Problem
    find q in [q_lo, q_hi] with T(q) = T*, T(q) the TCP pose in the base frame. q holds one
    position per joint (model order); a continuous joint's angle has no bound (its restarts
    spread over one turn about 0), and Pinocchio gets the (cos, sin) configuration of it.

Iteration (Levenberg–Marquardt on the 6D log error, projected)
    e_L = log6(T(q)⁻¹ T*)  [m; rad] (TCP axes),  J_L the TCP Jacobian in ``LOCAL`` (TCP axes):
    to first order e_L(q + Δq) = e_L − J_L Δq (the pairing: error T⁻¹T* in TCP axes ↔ LOCAL
    Jacobian). Each iteration solves

    Δq = J_Lᵀ (J_L J_Lᵀ + λ_LM I)⁻¹ e_L    ≡  (J_LᵀJ_L + λ_LM I)⁻¹ J_Lᵀ e_L   (push-through)

    λ_LM is the Levenberg–Marquardt damping on JᵀJ (not squared): its own parameter, unrelated to
    the λ of the differential-IK controllers, which enters squared (λ² on J Jᵀ). The 6x6 form is
    the cheaper one for n ≥ 6 and is solved by a Cholesky factorization (LAPACK ``dposv``).
    The local form costs seven Python calls per evaluation (FK + Jacobian + log6) against
    twelve for the base-axes error, and converged in fewer iterations on both arms; LM steps do
    not depend on the axes the task is written in (‖e_L‖ = ‖e_W‖ up to O(angle)).

    Joint limits are respected inside the iteration, never by clipping blindly:
    - the step is bounded, ‖Δq‖ ≤ ``max_step``;
    - active set: the joints the step would carry past a bound are moved exactly onto it, and
      the others solve again (their columns only) for the error that is left,
      Δq_free = J_freeᵀ (J_free J_freeᵀ + λ_LM I)⁻¹ (e − J Δq_fixed);
    - the candidate is *accepted only if it lowers ‖e‖²*; otherwise it is rejected and λ_LM
      grows (×``damping_increase``). Accepted steps shrink it (×``damping_decrease``).
    A projection that does not help is therefore never taken: no unnoticed "flip" of the arm.

Restarts
    The first attempt starts from the seed (default: the middle of every joint's range). After
    ``iterations_per_attempt`` iterations an attempt lives on only while ‖e‖² keeps falling (by
    a factor ``progress_ratio`` every ``progress_window`` iterations): slow but steady
    convergence near a singular solution is kept, a local minimum is abandoned. Restarts are
    random configurations, alternately uniform in the middle ``restart_spread`` fraction of
    every range and in the whole range, until the time budget is spent. The best candidate seen
    is returned.

    Restarts run one at a time for the first ``batch_after`` seconds of the solve, then
    ``parallel_attempts`` at once: every row of the batch is an independent attempt (its own q,
    λ_LM, age and progress check, replaced by a fresh random one when abandoned) and one LM step
    is taken for all rows with stacked arrays (one batched 6x6 solve), the rows' FK, Jacobian
    and log6 being evaluated in turn. Python's cost per call, not arithmetic, bounds the time of
    an iteration (~15 µs alone, ~6 µs per row in a batch of 16), so the batch runs about 2.5
    times as many LM iterations in the same time. The targets that need many restarts (their
    solutions close to joint limits, where most random starts end in a local minimum with a
    joint held on a bound) get that many more attempts within the budget, while the common
    case that is solved by its first restarts keeps the lower latency of one attempt at a time.

    In the batch the active set is read off the current point instead of the trial step (one
    solve per step instead of two): a joint on a bound whose descent direction J_Lᵀe_L points
    out of its range is held (its column of J_L zeroed), the others solve
    Δq_free = J_freeᵀ (J_free J_freeᵀ + λ_LM I)⁻¹ e_L, and a joint the step carries past a bound
    is projected onto it; the bound on ‖Δq‖ and the acceptance test are the same as above.

Converged means every component of the *base-axes* error of :mod:`ct_controllers.model.frames`,
e = [p* − p(q); log3(R* R(q)ᵀ)], is within tolerance: |e_p|ᵢ ≤ ``position_tolerance`` [m] and
|e_R|ᵢ ≤ ``orientation_tolerance`` [rad], checked on the returned q (the residual reported is that
error). A candidate is not an executable motion: collisions, dynamics and the path to it are the
caller's business.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray
from scipy.linalg import lapack

from ct_controllers.ik.branches import nearest_branch, periodic_joints
from ct_controllers.model.configuration import ConfigurationMap
from ct_controllers.model.frames import check_pose
from ct_controllers.model.robot import RobotModel, UnknownNameError

FloatArray = NDArray[np.float64]

_LOCAL = pin.ReferenceFrame.LOCAL
_dposv = lapack.dposv


@dataclass(frozen=True)
class IkOptions:
    """Parameters of :class:`IkSolver`.

    position_tolerance     [m]    per component of p* − p
    orientation_tolerance  [rad]  per component of log3(R* Rᵀ)
    time_budget            [s]    wall time for the whole solve (restarts included)
    damping                [-]    initial λ_LM on J_LᵀJ_L (J_L in m/rad and rad/rad: the task is
                                  taken with 1 m ≡ 1 rad); Levenberg–Marquardt, not the DLS λ
    damping_increase       [-]    λ_LM factor after a rejected step (> 1)
    damping_decrease       [-]    λ_LM factor after an accepted step (in (0, 1])
    min_damping            [-]    floor of λ_LM (> 0 keeps J Jᵀ + λ_LM I positive definite)
    max_step               [rad | m]  bound on the Euclidean length ‖Δq‖ of one step
    iterations_per_attempt [-]    iterations before an attempt must show progress to go on
    progress_window        [-]    iterations between two progress checks
    progress_ratio         [-]    in (0, 1): ‖e_L‖² must fall below this fraction of its value one
                                  window earlier, or the attempt is abandoned
    restart_spread         [-]    in (0, 1]: odd restarts are uniform in mid ± spread · half-range,
                                  even ones in the whole range
    parallel_attempts      [-]    ≥ 1: restart attempts run side by side once ``batch_after`` has
                                  passed (1: one at a time throughout)
    batch_after            [s]    ≥ 0: time into the solve after which restarts are batched
    max_restarts           [-]    restarts at most (None: as many as the budget allows)
    random_seed            [-]    seed of the solver's own random generator (restarts)
    limit_margin           [rad | m] ≥ 0: solutions are sought in [lower + margin, upper − margin]
                                  of every solved joint (e.g. the margin a differential IK
                                  keeps, so that what this solver finds, it can reach)
    """

    position_tolerance: float = 1e-5
    orientation_tolerance: float = 1e-5
    time_budget: float = 5e-3
    damping: float = 1e-2
    damping_increase: float = 10.0
    damping_decrease: float = 0.5
    min_damping: float = 1e-9
    max_step: float = 1.5
    iterations_per_attempt: int = 8
    progress_window: int = 2
    progress_ratio: float = 0.85
    restart_spread: float = 0.7
    parallel_attempts: int = 16
    batch_after: float = 0.6e-3
    max_restarts: int | None = None
    random_seed: int | None = 0
    limit_margin: float = 0.0

    def __post_init__(self) -> None:
        positive = {
            "position_tolerance": self.position_tolerance,
            "orientation_tolerance": self.orientation_tolerance,
            "time_budget": self.time_budget,
            "damping": self.damping,
            "min_damping": self.min_damping,
            "max_step": self.max_step,
        }
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"IkOptions.{name} must be finite and > 0, got {value}")
        if not (math.isfinite(self.damping_increase) and self.damping_increase > 1):
            raise ValueError(f"IkOptions.damping_increase must be > 1, got {self.damping_increase}")
        if not (0 < self.damping_decrease <= 1):
            raise ValueError(
                f"IkOptions.damping_decrease must be in (0, 1], got {self.damping_decrease}"
            )
        if not (0 < self.restart_spread <= 1):
            raise ValueError(
                f"IkOptions.restart_spread must be in (0, 1], got {self.restart_spread}"
            )
        if self.iterations_per_attempt < 1:
            raise ValueError(
                f"IkOptions.iterations_per_attempt must be ≥ 1, got {self.iterations_per_attempt}"
            )
        if self.progress_window < 1:
            raise ValueError(f"IkOptions.progress_window must be ≥ 1, got {self.progress_window}")
        if not (0 < self.progress_ratio < 1):
            raise ValueError(
                f"IkOptions.progress_ratio must be in (0, 1), got {self.progress_ratio}"
            )
        if self.parallel_attempts < 1:
            raise ValueError(
                f"IkOptions.parallel_attempts must be ≥ 1, got {self.parallel_attempts}"
            )
        if not (math.isfinite(self.batch_after) and self.batch_after >= 0):
            raise ValueError(
                f"IkOptions.batch_after must be finite and ≥ 0, got {self.batch_after}"
            )
        if self.max_restarts is not None and self.max_restarts < 0:
            raise ValueError(f"IkOptions.max_restarts must be ≥ 0, got {self.max_restarts}")
        if not (math.isfinite(self.limit_margin) and self.limit_margin >= 0):
            raise ValueError(
                f"IkOptions.limit_margin must be finite and ≥ 0, got {self.limit_margin}"
            )


@dataclass(frozen=True)
class IkResult:
    """A candidate, never a bare array.

    q                  [rad | m] candidate configuration, model order (``joint_names``); locked
                       joints at their locked value
    joint_names        the model's joint names, the order of ``q``
    position_error     [m]   p* − p(q), base axes (3,)
    orientation_error  [rad] log3(R* R(q)ᵀ), base axes, short arc (3,)
    converged          every component within its tolerance
    iterations         LM iterations over all attempts
    restarts           attempts after the first
    time               [s] wall time of the solve
    """

    q: FloatArray
    joint_names: tuple[str, ...]
    position_error: FloatArray
    orientation_error: FloatArray
    converged: bool
    iterations: int
    restarts: int
    time: float

    @property
    def position_residual(self) -> float:
        """‖p* − p(q)‖ [m]."""
        return float(np.linalg.norm(self.position_error))

    @property
    def orientation_residual(self) -> float:
        """‖log3(R* R(q)ᵀ)‖ [rad], the rotation angle left."""
        return float(np.linalg.norm(self.orientation_error))


class IkSolver:
    """Full IK for one frame of a :class:`RobotModel`, over a subset of its joints.

    ``locked`` maps joint name → position [rad | m] for the joints the solver must not move (a
    gripper's fingers); every other joint is solved for, within its URDF position limits (less
    ``IkOptions.limit_margin``). The solver builds its own reduced Pinocchio model and scratch
    data once; it is not thread-safe.
    """

    def __init__(
        self,
        model: RobotModel,
        frame: str | None = None,
        locked: Mapping[str, float] | None = None,
        options: IkOptions | None = None,
    ) -> None:
        self.options = options or IkOptions()
        # One solve at a time: the search works in this solver's scratch model data, and goal
        # checks run on several executor threads at once (MoveToPose's and the Grasp's).
        self._lock = threading.RLock()
        self.joint_names = model.joint_names
        self.frame = frame if frame is not None else model.model.frames[model.tcp_frame_id].name
        model.frame_id(self.frame)  # raises UnknownNameError naming it
        locked = dict(locked or {})
        for name, value in locked.items():
            model.q_index(name)  # raises UnknownNameError naming it
            if not math.isfinite(value):
                raise ValueError(f"locked position of '{name}' is not finite: {value}")
        self.solved_joints: tuple[str, ...] = tuple(n for n in model.joint_names if n not in locked)
        if not self.solved_joints:
            raise ValueError("every joint is locked: nothing to solve for")
        reference = model.neutral()
        for name, value in locked.items():
            reference[model.q_index(name)] = value
        self.locked_q = reference  # full model order; the solved joints are overwritten
        # A locked master takes its mimic followers with it (Pinocchio cannot reduce a model
        # that keeps a follower of a joint it locks).
        followers = [f.name for f in model.mimic.values() if f.master in locked]
        lock_ids = [model.model.getJointId(name) for name in (*locked, *followers)]
        self._model = (
            pin.buildReducedModel(
                model.model, lock_ids, model.configuration.to_pinocchio(reference)
            )
            if lock_ids
            else model.model
        )
        # The iteration runs on joint positions (one per joint: a continuous joint's angle,
        # unbounded); Pinocchio gets its configuration (the same array when nq == nv).
        reduced = ConfigurationMap(self._model)
        self._to_pinocchio = reduced.to_pinocchio
        self._data = self._model.createData()
        if not self._model.existFrame(self.frame):
            raise UnknownNameError(f"frame '{self.frame}' does not survive locking {locked}")
        self._frame_id = int(self._model.getFrameId(self.frame))
        # Reduced joint-position index of each solved joint, and where it goes in the full q.
        solved_joints = [self._model.joints[self._model.getJointId(n)] for n in self.solved_joints]
        self._reduced_index = np.array([joint.idx_v for joint in solved_joints], dtype=np.intp)
        self._full_index = model.indices(self.solved_joints)
        margin = self.options.limit_margin
        # Position bounds per reduced joint position; a continuous joint has none (±inf).
        lower = np.full(self._model.nv, -np.inf)
        upper = np.full(self._model.nv, np.inf)
        for joint in solved_joints:
            if joint.nq == 1:
                lower[joint.idx_v] = self._model.lowerPositionLimit[joint.idx_q]
                upper[joint.idx_v] = self._model.upperPositionLimit[joint.idx_q]
        self._lower = lower + margin
        self._upper = upper - margin
        unbounded = [
            name
            for name, joint in zip(self.solved_joints, solved_joints, strict=True)
            if joint.nq == 1
            and not (np.isfinite(lower[joint.idx_v]) and np.isfinite(upper[joint.idx_v]))
        ]
        if unbounded:
            raise ValueError(f"IK needs finite position limits for the solved joints {unbounded}")
        narrow = [
            name
            for name, i in zip(self.solved_joints, self._reduced_index, strict=True)
            if self._upper[i] < self._lower[i]
        ]
        if narrow:
            raise ValueError(f"IkOptions.limit_margin {margin} leaves no range on {narrow}")
        # Seeds and restarts: the middle of each range, spread over it; a continuous joint's
        # over one turn about 0.
        circle = reduced.continuous_mask
        spread_lower = np.where(circle, -np.pi, self._lower)
        spread_upper = np.where(circle, np.pi, self._upper)
        self._middle = 0.5 * (spread_lower + spread_upper)
        self._half_range = 0.5 * (spread_upper - spread_lower)
        self._rng = np.random.default_rng(self.options.random_seed)
        self._parallel = self.options.parallel_attempts
        # Full model order: the solved joints' bounds (the locked ones pinned where they are
        # locked) and which of them are angles, for :meth:`nearest_branch`.
        self._full_lower = self.locked_q.copy()
        self._full_upper = self.locked_q.copy()
        self._full_lower[self._full_index] = self._lower[self._reduced_index]
        self._full_upper[self._full_index] = self._upper[self._reduced_index]
        self._periodic = np.zeros(model.nq, dtype=bool)
        self._periodic[self._full_index] = periodic_joints(model)[self._full_index]

    # --- conversions -----------------------------------------------------------------------
    def nominal(self) -> FloatArray:
        """The default seed: the middle of every solved joint's range, full model order."""
        return self.to_full(self._middle[self._reduced_index])

    def to_full(self, solved: FloatArray) -> FloatArray:
        """Full model-order q from values of the solved joints (``solved_joints`` order)."""
        q = self.locked_q.copy()
        q[self._full_index] = solved
        return q

    def bounds(self) -> tuple[FloatArray, FloatArray]:
        """The range [rad | m] solutions are sought in, full model order (limits less
        ``limit_margin``; ±inf for a continuous joint; a locked joint's locked value)."""
        return self._full_lower.copy(), self._full_upper.copy()

    def nearest_branch(self, q: FloatArray, reference: FloatArray) -> FloatArray:
        """``q`` (a solution, full model order) with every solved revolute or continuous
        joint moved by whole turns to its position nearest ``reference`` inside the solve's
        range (:func:`~ct_controllers.ik.branches.nearest_branch`): the same TCP pose."""
        return nearest_branch(q, reference, self._full_lower, self._full_upper, self._periodic)

    # --- solve -----------------------------------------------------------------------------
    def solve(
        self,
        target: FloatArray,
        seed: FloatArray | None = None,
        time_budget: float | None = None,
    ) -> IkResult:
        """A candidate for ``target`` (4x4 TCP pose in the base frame), starting from ``seed``
        (full model order; its locked joints are ignored; default :meth:`nominal`), within
        ``time_budget`` [s] of wall time (default and upper bound: the options'). Any thread;
        one solve at a time."""
        with self._lock:
            return self._solve(target, seed, time_budget)

    def _solve(
        self,
        target: FloatArray,
        seed: FloatArray | None,
        time_budget: float | None,
    ) -> IkResult:
        start_time = time.perf_counter()
        budget = self.options.time_budget
        if time_budget is not None:
            if not (math.isfinite(time_budget) and time_budget > 0):
                raise ValueError(f"IK time_budget must be finite and > 0, got {time_budget}")
            budget = min(budget, time_budget)
        pose = check_pose(target, "IK target")
        if seed is None:
            x = self._middle.copy()
        else:
            seed = np.asarray(seed, dtype=np.float64).reshape(-1)
            if seed.size != self.locked_q.size or not np.isfinite(seed).all():
                raise ValueError(f"IK seed: expected {self.locked_q.size} finite values")
            x = np.empty_like(self._middle)
            x[self._reduced_index] = seed[self._full_index]
            np.maximum(x, self._lower, out=x)
            np.minimum(x, self._upper, out=x)
        search = _Search(self, pose, start_time, budget)
        search.one_at_a_time(x)
        search.side_by_side()
        best_x, final_error = search.candidate()
        return IkResult(
            q=self.to_full(best_x[self._reduced_index]),
            joint_names=self.joint_names,
            position_error=final_error[:3],
            orientation_error=final_error[3:],
            converged=search.within(final_error),
            iterations=search.iterations,
            restarts=search.restarts,
            time=time.perf_counter() - start_time,
        )


_compute_joint_jacobians = pin.computeJointJacobians
_update_frame_placement = pin.updateFramePlacement
_get_frame_jacobian = pin.getFrameJacobian
_frames_forward_kinematics = pin.framesForwardKinematics
_log3, _log6 = pin.log3, pin.log6


class _Search:
    """One solve of :meth:`IkSolver.solve`: the target, the time budget, the counters and the
    best candidate so far, with the attempts as methods — :meth:`attempt` (one LM attempt from
    a start), :meth:`one_at_a_time` (the seed, then random restarts until ``batch_after``) and
    :meth:`side_by_side` (``parallel_attempts`` random attempts, one LM step for all)."""

    def __init__(
        self, solver: IkSolver, pose: FloatArray, start_time: float, budget: float
    ) -> None:
        options = solver.options
        self.options = options
        self.parallel = solver._parallel
        self.model, self.data, self.frame_id = solver._model, solver._data, solver._frame_id
        self.to_pinocchio = solver._to_pinocchio  # joint positions → Pinocchio's q
        self.lower, self.upper = solver._lower, solver._upper
        self.middle, self.half_range, self.rng = solver._middle, solver._half_range, solver._rng
        self.deadline = start_time + budget
        self.batch_from = start_time + options.batch_after
        self.p_goal = pose[:3, 3].copy()
        self.r_goal = pose[:3, :3].copy()
        self.goal = pin.SE3(self.r_goal, self.p_goal)
        self.tol_p, self.tol_r = options.position_tolerance, options.orientation_tolerance
        # Above this bound on ‖e_L‖², some world component is surely out of tolerance (‖e_L‖ and
        # the world error's norm agree to a factor 1 ± O(angle), i.e. 1 ± 1e-5 here); below it,
        # the world error decides.
        self.cost_maybe = 3.0 * (self.tol_p**2 + self.tol_r**2) * 1.01
        self.lhs = np.empty((6, 6))
        self.iterations = self.restarts = 0
        self.x = self.middle  # the current (or converged) point
        self.best_x, self.best_cost = self.middle, math.inf
        self.converged = False
        self.final_error: FloatArray | None = None

    # --- what an attempt measures ------------------------------------------------------------
    def evaluate(self, x: FloatArray) -> tuple[FloatArray, FloatArray, float]:
        """J_L(x) and e_L = log6(T(x)⁻¹ T*) (TCP axes), ‖e_L‖²: seven Python calls."""
        model, data, frame_id = self.model, self.data, self.frame_id
        _compute_joint_jacobians(model, data, self.to_pinocchio(x))  # FK, every joint Jacobian
        placement = _update_frame_placement(model, data, frame_id)
        jacobian = _get_frame_jacobian(model, data, frame_id, _LOCAL)
        # .vector views the Motion's memory without keeping it alive: copy while it lives.
        motion = _log6(placement.actInv(self.goal))
        error = motion.vector.copy()
        return jacobian, error, float(error.dot(error))

    def world_error(self, x: FloatArray) -> FloatArray:
        """[p* − p(x); log3(R* R(x)ᵀ)], base axes: what the tolerances are about."""
        _frames_forward_kinematics(self.model, self.data, self.to_pinocchio(x))
        placement = self.data.oMf[self.frame_id]
        error = np.empty(6)
        error[:3] = self.p_goal - placement.translation
        error[3:] = _log3(self.r_goal.dot(placement.rotation.T))
        return error

    def within(self, error: FloatArray) -> bool:
        e = error.tolist()
        return (
            max(abs(e[0]), abs(e[1]), abs(e[2])) <= self.tol_p
            and max(abs(e[3]), abs(e[4]), abs(e[5])) <= self.tol_r
        )

    def random_start(self) -> FloatArray:
        """A restart: uniform in the middle ``restart_spread`` of every range (odd restarts)
        or in the whole range (even ones)."""
        spread = self.options.restart_spread if self.restarts % 2 else 1.0
        middle = self.middle
        return middle + self.half_range * self.rng.uniform(-spread, spread, size=middle.size)

    # --- the attempts ------------------------------------------------------------------------
    def one_at_a_time(self, x: FloatArray) -> None:
        """Attempts one at a time: from ``x`` (the seed), then from random restarts, until one
        converges, the budget or the restarts are spent, or it is time to batch."""
        options = self.options
        max_restarts = options.max_restarts
        perf_counter = time.perf_counter
        while True:
            x, cost = self.attempt(x)
            if cost < self.best_cost:
                self.best_x, self.best_cost = x, cost
            if self.converged or perf_counter() > self.deadline:
                break
            if max_restarts is not None and self.restarts >= max_restarts:
                break
            if perf_counter() > self.batch_from and self.parallel > 1:
                break
            self.restarts += 1
            x = self.random_start()
        self.x = x

    def attempt(self, x: FloatArray) -> tuple[FloatArray, float]:
        """One LM attempt from ``x`` (see the module docstring: bounded step, active set,
        acceptance test); it ends converged (``self.converged``), abandoned for lack of progress
        or out of time. Returns where it ended and ‖e_L‖² there."""
        options = self.options
        lower, upper = self.lower, self.upper
        evaluate, world_error, within = self.evaluate, self.world_error, self.within
        perf_counter, deadline, cost_maybe = time.perf_counter, self.deadline, self.cost_maybe
        dposv = _dposv
        max_step_squared = options.max_step**2
        increase, decrease = options.damping_increase, options.damping_decrease
        min_damping = options.min_damping
        per_attempt = options.iterations_per_attempt
        window, progress = options.progress_window, options.progress_ratio
        lhs = self.lhs
        diagonal = lhs.reshape(-1)[::7]  # a view: adding to it adds λ to the diagonal of lhs
        lhs_f = lhs.T  # the same symmetric matrix in Fortran order: LAPACK takes it without a copy
        jacobian, error, cost = evaluate(x)
        damping = options.damping
        k = 0
        checkpoint = cost
        while True:
            if cost <= cost_maybe:
                self.final_error = world_error(x)
                if within(self.final_error):
                    self.converged = True
                    break
            if k % window == 0 and k:
                # Past the first iterations, an attempt lives on only while it progresses.
                if k >= per_attempt and cost > progress * checkpoint:
                    break
                checkpoint = cost
            k += 1
            self.iterations += 1
            np.dot(jacobian, jacobian.T, out=lhs)
            diagonal += damping
            step = jacobian.T.dot(dposv(lhs_f, error, overwrite_a=1)[1])
            length_squared = float(step.dot(step))
            if length_squared > max_step_squared:
                step *= math.sqrt(max_step_squared / length_squared)
            candidate = x + step
            below, above = candidate < lower, candidate > upper
            if np.count_nonzero(below) or np.count_nonzero(above):  # cheaper than .any()
                # Active set: the joints the step would carry past a bound go exactly to
                # it, and the others solve again for what is left of the error.
                hit = below | above
                fixed = np.where(below, lower, upper) - x
                fixed[~hit] = 0.0
                free = jacobian.copy()
                free[:, hit] = 0.0
                np.dot(free, free.T, out=lhs)
                diagonal += damping
                rest = error - jacobian.dot(fixed)
                step = free.T.dot(dposv(lhs_f, rest, overwrite_a=1)[1])
                length_squared = float(step.dot(step))
                if length_squared > max_step_squared:
                    step *= math.sqrt(max_step_squared / length_squared)
                candidate = x + fixed + step
                # The re-solved joints may cross a bound of their own: project them (the
                # acceptance test below decides whether the projected step is taken).
                np.maximum(candidate, lower, out=candidate)
                np.minimum(candidate, upper, out=candidate)
            new_jacobian, new_error, new_cost = evaluate(candidate)
            if new_cost < cost:
                x, jacobian, error, cost = candidate, new_jacobian, new_error, new_cost
                damping = max(damping * decrease, min_damping)
            else:
                damping *= increase
            if perf_counter() > deadline:
                break
        return x, cost

    def side_by_side(self) -> None:
        """Then ``parallel_attempts`` random attempts side by side, one LM step for all rows
        (see the module docstring), until one converges or the budget or restarts are spent."""
        options = self.options
        rows = self.parallel
        max_restarts = options.max_restarts
        if max_restarts is not None:
            rows = min(rows, max_restarts - self.restarts)
        perf_counter, deadline = time.perf_counter, self.deadline
        if self.converged or rows <= 0 or perf_counter() > deadline:
            return
        batch = _Batch(rows, self.x.size)
        for row in range(rows):
            self.start_row(batch, row)
        model, data, frame_id, goal = self.model, self.data, self.frame_id, self.goal
        to_pinocchio = self.to_pinocchio
        lower, upper = self.lower, self.upper
        world_error, within, cost_maybe = self.world_error, self.within, self.cost_maybe
        max_step = options.max_step
        increase, decrease = options.damping_increase, options.damping_decrease
        min_damping = options.min_damping
        per_attempt = options.iterations_per_attempt
        window, progress = options.progress_window, options.progress_ratio
        done_row = -1
        while done_row < 0:
            xs, jacobians, errors = batch.xs, batch.jacobians, batch.errors
            costs, dampings, ages, checkpoints = (
                batch.costs,
                batch.dampings,
                batch.ages,
                batch.checkpoints,
            )
            # One LM step for every row (vectorized). The active set is read off the
            # current point: a joint on a bound whose descent direction J_Lᵀe_L (that is
            # −½ ∂‖e_L‖²/∂q) points out of its range is held, the others solve for e_L.
            gradients = np.matmul(errors[:, None, :], jacobians)[:, 0, :]
            held = ((xs <= lower) & (gradients < 0.0)) | ((xs >= upper) & (gradients > 0.0))
            free = jacobians * ~held[:, None, :]
            free_t = free.transpose(0, 2, 1)
            np.matmul(free, free_t, out=batch.lhs)
            batch.lhs.reshape(rows, 36)[:, ::7] += np.array(dampings)[:, None]
            steps = np.matmul(free_t, np.linalg.solve(batch.lhs, errors[:, :, None]))[:, :, 0]
            lengths = np.sqrt(np.einsum("ij,ij->i", steps, steps))
            steps *= np.minimum(1.0, max_step / np.maximum(lengths, 1e-300))[:, None]
            candidates = xs + steps
            # Joints the step carries past a bound are projected onto it (the acceptance
            # test decides whether the projected step is taken).
            np.maximum(candidates, lower, out=candidates)
            np.minimum(candidates, upper, out=candidates)
            self.iterations += rows
            dropped = []
            for row in range(rows):
                xr = candidates[row]
                _compute_joint_jacobians(model, data, to_pinocchio(xr))
                placement = _update_frame_placement(model, data, frame_id)
                jacobian = _get_frame_jacobian(model, data, frame_id, _LOCAL)
                motion = _log6(placement.actInv(goal))
                e = motion.vector
                c = float(e.dot(e))
                if c < costs[row]:
                    xs[row] = xr
                    jacobians[row] = jacobian
                    errors[row] = e
                    costs[row] = c
                    dampings[row] = max(dampings[row] * decrease, min_damping)
                    if c <= cost_maybe:
                        self.final_error = world_error(xr)
                        if within(self.final_error):
                            done_row = row
                            break
                else:
                    dampings[row] *= increase
                age = ages[row] = ages[row] + 1
                if age % window == 0:
                    if age >= per_attempt and costs[row] > progress * checkpoints[row]:
                        if costs[row] < self.best_cost:
                            self.best_x, self.best_cost = xs[row].copy(), costs[row]
                        if max_restarts is None or self.restarts < max_restarts:
                            self.start_row(batch, row)
                        else:
                            dropped.append(row)
                    else:
                        checkpoints[row] = costs[row]
            if done_row >= 0 or perf_counter() > deadline:
                break
            if dropped:  # no restart left for these rows: retire them
                batch.retire(dropped)
                rows = batch.rows
                if not rows:
                    break
        if done_row >= 0:
            self.converged = True
            self.x = batch.xs[done_row].copy()
        else:
            for row in range(rows):
                if batch.costs[row] < self.best_cost:
                    self.best_x, self.best_cost = batch.xs[row].copy(), batch.costs[row]

    def start_row(self, batch: _Batch, row: int) -> None:
        """A new random attempt in ``row`` of ``batch`` (a restart like the ones one at a
        time)."""
        self.restarts += 1
        xr = batch.xs[row]
        xr[:] = self.random_start()
        model, data, frame_id = self.model, self.data, self.frame_id
        _compute_joint_jacobians(model, data, self.to_pinocchio(xr))
        placement = _update_frame_placement(model, data, frame_id)
        batch.jacobians[row] = _get_frame_jacobian(model, data, frame_id, _LOCAL)
        motion = _log6(placement.actInv(self.goal))
        e = batch.errors[row]
        e[:] = motion.vector
        batch.costs[row] = batch.checkpoints[row] = float(e.dot(e))
        batch.dampings[row] = self.options.damping
        batch.ages[row] = 0

    # --- the answer --------------------------------------------------------------------------
    def candidate(self) -> tuple[FloatArray, FloatArray]:
        """The point returned (the converged one, else the best seen) and its base-axes error."""
        if self.converged:
            best_x = self.x
        else:
            best_x = self.best_x
            self.final_error = self.world_error(best_x)
        assert self.final_error is not None
        return best_x, self.final_error


class _Batch:
    """The rows of :meth:`_Search.side_by_side`, one independent attempt each: its point,
    Jacobian, error, ‖e_L‖², λ_LM, age and the cost at its last progress check."""

    def __init__(self, rows: int, n: int) -> None:
        self.rows = rows
        self.xs = np.empty((rows, n))
        self.jacobians = np.empty((rows, 6, n))
        self.errors = np.empty((rows, 6))
        self.costs = [0.0] * rows
        self.dampings = [0.0] * rows
        self.ages = [0] * rows
        self.checkpoints = [0.0] * rows
        self.lhs = np.empty((rows, 6, 6))

    def retire(self, dropped: list[int]) -> None:
        """Remove the rows ``dropped`` (no restart left for them)."""
        keep = np.setdiff1d(np.arange(self.rows), dropped)
        self.rows = keep.size
        self.xs, self.jacobians, self.errors = (
            self.xs[keep],
            self.jacobians[keep],
            self.errors[keep],
        )
        self.costs = [self.costs[r] for r in keep]
        self.dampings = [self.dampings[r] for r in keep]
        self.ages = [self.ages[r] for r in keep]
        self.checkpoints = [self.checkpoints[r] for r in keep]
        self.lhs = np.empty((self.rows, 6, 6))
