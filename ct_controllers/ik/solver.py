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
    max_restarts           [-]    restarts at most (None: as many as the budget allows)
    random_seed            [-]    seed of the solver's own random generator (restarts)
    """

    position_tolerance: float = 1e-5
    orientation_tolerance: float = 1e-5
    time_budget: float = 5e-3
    damping: float = 1e-2
    damping_increase: float = 10.0
    damping_decrease: float = 0.5
    min_damping: float = 1e-9
    max_step: float = 1.5
    iterations_per_attempt: int = 12
    progress_window: int = 4
    progress_ratio: float = 0.85
    restart_spread: float = 0.7
    max_restarts: int | None = None
    random_seed: int | None = 0

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
        if self.max_restarts is not None and self.max_restarts < 0:
            raise ValueError(f"IkOptions.max_restarts must be ≥ 0, got {self.max_restarts}")


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
    gripper's fingers); every other joint is solved for, within its URDF position limits. The
    solver builds its own reduced Pinocchio model and scratch data once; it is not thread-safe.
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
        self._lower = self._model.lowerPositionLimit.copy()
        self._upper = self._model.upperPositionLimit.copy()
        if not (np.all(np.isfinite(self._lower)) and np.all(np.isfinite(self._upper))):
            raise ValueError("IK needs finite position limits for every solved joint")
        self._middle = 0.5 * (self._lower + self._upper)
        self._half_range = 0.5 * (self._upper - self._lower)
        self._rng = np.random.default_rng(self.options.random_seed)

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
        max_step_squared = options.max_step**2
        increase, decrease = options.damping_increase, options.damping_decrease
        min_damping = options.min_damping
        per_attempt = options.iterations_per_attempt
        window, progress = options.progress_window, options.progress_ratio
        max_restarts = options.max_restarts
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

        iterations = restarts = 0
        best_x, best_cost = x, math.inf
        converged = False
        while True:
            jacobian, error, cost = evaluate(x)
            damping = options.damping
            k = 0
            checkpoint = cost
            while True:
                if cost <= cost_maybe and within(world_error(x)):
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
            restarts += 1
            spread = options.restart_spread if restarts % 2 else 1.0
            x = self._middle + self._half_range * self._rng.uniform(-spread, spread, size=x.size)
        if converged:
            best_x = x
        # The residual and the flag are re-computed on the returned candidate.
        final_error = world_error(best_x)
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
