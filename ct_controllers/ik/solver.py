"""Full inverse kinematics: a candidate configuration for a TCP pose, with its residual.

Problem
    find q in [q_lo, q_hi] with T(q) = T*, T(q) the TCP pose in the base frame.

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
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray
from scipy.linalg import lapack

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
        lock_ids = [model.model.getJointId(name) for name in locked]
        self._model = (
            pin.buildReducedModel(model.model, lock_ids, reference) if lock_ids else model.model
        )
        self._data = self._model.createData()
        if not self._model.existFrame(self.frame):
            raise UnknownNameError(f"frame '{self.frame}' does not survive locking {locked}")
        self._frame_id = int(self._model.getFrameId(self.frame))
        # Reduced q index of each solved joint, and where it goes in the full q.
        self._reduced_index = np.array(
            [self._model.joints[self._model.getJointId(n)].idx_q for n in self.solved_joints]
        )
        self._full_index = model.indices(self.solved_joints)
        margin = self.options.limit_margin
        self._lower = self._model.lowerPositionLimit + margin
        self._upper = self._model.upperPositionLimit - margin
        if not (np.all(np.isfinite(self._lower)) and np.all(np.isfinite(self._upper))):
            raise ValueError("IK needs finite position limits for every solved joint")
        narrow = [
            name
            for name, i in zip(self.solved_joints, self._reduced_index, strict=True)
            if self._upper[i] < self._lower[i]
        ]
        if narrow:
            raise ValueError(f"IkOptions.limit_margin {margin} leaves no range on {narrow}")
        self._middle = 0.5 * (self._lower + self._upper)
        self._half_range = 0.5 * (self._upper - self._lower)
        self._rng = np.random.default_rng(self.options.random_seed)
        self._parallel = self.options.parallel_attempts

    # --- conversions -----------------------------------------------------------------------
    def nominal(self) -> FloatArray:
        """The default seed: the middle of every solved joint's range, full model order."""
        return self.to_full(self._middle[self._reduced_index])

    def to_full(self, solved: FloatArray) -> FloatArray:
        """Full model-order q from values of the solved joints (``solved_joints`` order)."""
        q = self.locked_q.copy()
        q[self._full_index] = solved
        return q

    # --- solve -----------------------------------------------------------------------------
    def solve(self, target: FloatArray, seed: FloatArray | None = None) -> IkResult:
        """A candidate for ``target`` (4x4 TCP pose in the base frame), starting from ``seed``
        (full model order; its locked joints are ignored; default :meth:`nominal`)."""
        start_time = time.perf_counter()
        pose = check_pose(target, "IK target")
        options = self.options
        lower, upper = self._lower, self._upper
        if seed is None:
            x = self._middle.copy()
        else:
            seed = np.asarray(seed, dtype=np.float64).reshape(-1)
            if seed.size != self.locked_q.size or not np.isfinite(seed).all():
                raise ValueError(f"IK seed: expected {self.locked_q.size} finite values")
            x = np.empty_like(self._middle)
            x[self._reduced_index] = seed[self._full_index]
            np.maximum(x, lower, out=x)
            np.minimum(x, upper, out=x)
        deadline = start_time + options.time_budget
        batch_from = start_time + options.batch_after
        p_goal = pose[:3, 3].copy()
        r_goal = pose[:3, :3].copy()
        goal = pin.SE3(r_goal, p_goal)
        tol_p, tol_r = options.position_tolerance, options.orientation_tolerance
        # Above this bound on ‖e_L‖², some world component is surely out of tolerance (‖e_L‖ and
        # the world error's norm agree to a factor 1 ± O(angle), i.e. 1 ± 1e-5 here); below it,
        # the world error decides.
        cost_maybe = 3.0 * (tol_p**2 + tol_r**2) * 1.01
        model, data, frame_id = self._model, self._data, self._frame_id
        compute_joint_jacobians = pin.computeJointJacobians
        update_frame_placement = pin.updateFramePlacement
        get_frame_jacobian = pin.getFrameJacobian
        frames_forward_kinematics = pin.framesForwardKinematics
        log3, log6, perf_counter = pin.log3, pin.log6, time.perf_counter
        dposv = _dposv
        max_step = options.max_step
        max_step_squared = max_step**2
        increase, decrease = options.damping_increase, options.damping_decrease
        min_damping = options.min_damping
        per_attempt = options.iterations_per_attempt
        window, progress = options.progress_window, options.progress_ratio
        max_restarts = options.max_restarts
        middle, half_range, rng = self._middle, self._half_range, self._rng
        lhs = np.empty((6, 6))
        diagonal = lhs.reshape(-1)[::7]  # a view: adding to it adds λ to the diagonal of lhs
        lhs_f = lhs.T  # the same symmetric matrix in Fortran order: LAPACK takes it without a copy

        def evaluate(x: FloatArray) -> tuple[FloatArray, FloatArray, float]:
            """J_L(x) and e_L = log6(T(x)⁻¹ T*) (TCP axes), ‖e_L‖²: seven Python calls."""
            compute_joint_jacobians(model, data, x)  # FK and every joint Jacobian
            placement = update_frame_placement(model, data, frame_id)
            jacobian = get_frame_jacobian(model, data, frame_id, _LOCAL)
            # .vector views the Motion's memory without keeping it alive: copy while it lives.
            motion = log6(placement.actInv(goal))
            error = motion.vector.copy()
            return jacobian, error, float(error.dot(error))

        def world_error(x: FloatArray) -> FloatArray:
            """[p* − p(x); log3(R* R(x)ᵀ)], base axes: what the tolerances are about."""
            frames_forward_kinematics(model, data, x)
            placement = data.oMf[frame_id]
            error = np.empty(6)
            error[:3] = p_goal - placement.translation
            error[3:] = log3(r_goal.dot(placement.rotation.T))
            return error

        def within(error: FloatArray) -> bool:
            e = error.tolist()
            return (
                max(abs(e[0]), abs(e[1]), abs(e[2])) <= tol_p
                and max(abs(e[3]), abs(e[4]), abs(e[5])) <= tol_r
            )

        def random_start() -> FloatArray:
            """A restart: uniform in the middle ``restart_spread`` of every range (odd restarts)
            or in the whole range (even ones)."""
            spread = options.restart_spread if restarts % 2 else 1.0
            return middle + half_range * rng.uniform(-spread, spread, size=middle.size)

        iterations = restarts = 0
        best_x, best_cost = x, math.inf
        converged = False
        final_error = None
        # --- attempts one at a time: the seed first, then random restarts ------------------
        while True:
            jacobian, error, cost = evaluate(x)
            damping = options.damping
            k = 0
            checkpoint = cost
            while True:
                if cost <= cost_maybe:
                    final_error = world_error(x)
                    if within(final_error):
                        converged = True
                        break
                if k % window == 0 and k:
                    # Past the first iterations, an attempt lives on only while it progresses.
                    if k >= per_attempt and cost > progress * checkpoint:
                        break
                    checkpoint = cost
                k += 1
                iterations += 1
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
            if cost < best_cost:
                best_x, best_cost = x, cost
            if converged or perf_counter() > deadline:
                break
            if max_restarts is not None and restarts >= max_restarts:
                break
            if perf_counter() > batch_from and self._parallel > 1:
                break
            restarts += 1
            x = random_start()

        # --- then ``parallel_attempts`` random attempts side by side, one LM step for all ----
        rows = self._parallel
        if max_restarts is not None:
            rows = min(rows, max_restarts - restarts)
        if not converged and rows > 0 and perf_counter() <= deadline:
            n = x.size
            xs = np.empty((rows, n))
            jacobians = np.empty((rows, 6, n))
            errors = np.empty((rows, 6))
            costs = [0.0] * rows
            dampings = [options.damping] * rows
            ages = [0] * rows
            checkpoints = [0.0] * rows
            lhs_b = np.empty((rows, 6, 6))

            def start(row: int) -> None:
                """A new random attempt in ``row`` (a restart like the ones above)."""
                nonlocal restarts
                restarts += 1
                xr = xs[row]
                xr[:] = random_start()
                compute_joint_jacobians(model, data, xr)
                placement = update_frame_placement(model, data, frame_id)
                jacobians[row] = get_frame_jacobian(model, data, frame_id, _LOCAL)
                motion = log6(placement.actInv(goal))
                e = errors[row]
                e[:] = motion.vector
                costs[row] = checkpoints[row] = float(e.dot(e))
                dampings[row] = options.damping
                ages[row] = 0

            for row in range(rows):
                start(row)
            done_row = -1
            while done_row < 0:
                # One LM step for every row (vectorized). The active set is read off the
                # current point: a joint on a bound whose descent direction J_Lᵀe_L (that is
                # −½ ∂‖e_L‖²/∂q) points out of its range is held, the others solve for e_L.
                gradients = np.matmul(errors[:, None, :], jacobians)[:, 0, :]
                held = ((xs <= lower) & (gradients < 0.0)) | ((xs >= upper) & (gradients > 0.0))
                free = jacobians * ~held[:, None, :]
                free_t = free.transpose(0, 2, 1)
                np.matmul(free, free_t, out=lhs_b)
                lhs_b.reshape(rows, 36)[:, ::7] += np.array(dampings)[:, None]
                steps = np.matmul(free_t, np.linalg.solve(lhs_b, errors[:, :, None]))[:, :, 0]
                lengths = np.sqrt(np.einsum("ij,ij->i", steps, steps))
                steps *= np.minimum(1.0, max_step / np.maximum(lengths, 1e-300))[:, None]
                candidates = xs + steps
                # Joints the step carries past a bound are projected onto it (the acceptance
                # test decides whether the projected step is taken).
                np.maximum(candidates, lower, out=candidates)
                np.minimum(candidates, upper, out=candidates)
                iterations += rows
                dropped = []
                for row in range(rows):
                    xr = candidates[row]
                    compute_joint_jacobians(model, data, xr)
                    placement = update_frame_placement(model, data, frame_id)
                    jacobian = get_frame_jacobian(model, data, frame_id, _LOCAL)
                    motion = log6(placement.actInv(goal))
                    e = motion.vector
                    c = float(e.dot(e))
                    if c < costs[row]:
                        xs[row] = xr
                        jacobians[row] = jacobian
                        errors[row] = e
                        costs[row] = c
                        dampings[row] = max(dampings[row] * decrease, min_damping)
                        if c <= cost_maybe:
                            final_error = world_error(xr)
                            if within(final_error):
                                done_row = row
                                break
                    else:
                        dampings[row] *= increase
                    age = ages[row] = ages[row] + 1
                    if age % window == 0:
                        if age >= per_attempt and costs[row] > progress * checkpoints[row]:
                            if costs[row] < best_cost:
                                best_x, best_cost = xs[row].copy(), costs[row]
                            if max_restarts is None or restarts < max_restarts:
                                start(row)
                            else:
                                dropped.append(row)
                        else:
                            checkpoints[row] = costs[row]
                if done_row >= 0 or perf_counter() > deadline:
                    break
                if dropped:  # no restart left for these rows: retire them
                    keep = np.setdiff1d(np.arange(rows), dropped)
                    rows = keep.size
                    if not rows:
                        break
                    xs, jacobians, errors = xs[keep], jacobians[keep], errors[keep]
                    costs = [costs[r] for r in keep]
                    dampings = [dampings[r] for r in keep]
                    ages = [ages[r] for r in keep]
                    checkpoints = [checkpoints[r] for r in keep]
                    lhs_b = np.empty((rows, 6, 6))
            if done_row >= 0:
                converged = True
                x = xs[done_row].copy()
            else:
                for row in range(rows):
                    if costs[row] < best_cost:
                        best_x, best_cost = xs[row].copy(), costs[row]
        if converged:
            best_x = x
        else:
            final_error = world_error(best_x)
        assert final_error is not None
        return IkResult(
            q=self.to_full(best_x[self._reduced_index]),
            joint_names=self.joint_names,
            position_error=final_error[:3],
            orientation_error=final_error[3:],
            converged=within(final_error),
            iterations=iterations,
            restarts=restarts,
            time=time.perf_counter() - start_time,
        )
