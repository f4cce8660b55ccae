"""What the two differential-IK generators (DLS and QP) share: the tick around the velocity solve
and its status. The parts live beside it: the parameters in
:mod:`~ct_controllers.references.diff_ik_parameters`, the weighted task and its damping (steps
1-4) in :mod:`~ct_controllers.references.diff_ik_task`, the integration (step 6, multi-rate) in
:mod:`~ct_controllers.references.diff_ik_integration`, the solvers (step 5) in
:mod:`~ct_controllers.references.diff_ik` (DLS) and :mod:`~ct_controllers.references.diff_ik_qp`.

One tick, at the *reference* configuration q* (integrated by the generator itself, started from
the measured state and re-synchronised to it when the two drift apart):

1-4. the weighted task and its damping (:mod:`~ct_controllers.references.diff_ik_task`): pose
   error e = [p* − p(q*); log3(R* R(q*)ᵀ)] [m; rad] with the ``LOCAL_WORLD_ALIGNED`` TCP
   Jacobian J; task weights J_w = W J, e_w = W e (zero-weight rows removed); DLS damping λ raised
   near singularities of the arm (manipulability or condition number of the unweighted active
   rows); and rate-limited goal following: the task scaled by one α ≤ 1 so that the DLS motion
   moves the TCP within ``max_linear_velocity`` and ``max_angular_velocity``;
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
from dataclasses import replace
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ct_controllers.errors import GainError
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.diff_ik_integration import ReferenceIntegrator
from ct_controllers.references.diff_ik_parameters import FINITE_DIFFERENCE, DiffIkParameters
from ct_controllers.references.diff_ik_task import TaskView, WeightedTask, rate_scale
from ct_controllers.references.reference_generator import (
    CartesianTarget,
    ReferenceGenerator,
    per_joint,
)
from ct_controllers.types import FloatArray, JointReference, JointState


class DiffIkStatus(NamedTuple):
    """What the last tick did, measured at the reference q* it started from. (A NamedTuple: one
    is built every tick, in half the time of a frozen dataclass.)

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
    # Whether :meth:`_solve` reads :attr:`TaskView.nullspace_posture` (N_λ d).
    projects_posture: ClassVar[bool] = True

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
        self._task = WeightedTask(
            model, self._frame_id, self._v_sel, self._velocity_limit, self.projects_posture
        )
        self._integrator = ReferenceIntegrator(
            model.nv, self._q_sel, self._v_sel, len(self.joint_names), update_divisor
        )
        self._posture: FloatArray | None = None
        self.status: DiffIkStatus | None = None
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

    # --- state -----------------------------------------------------------------------------
    def reset(self, state: JointState | None = None) -> None:
        """Forget q* (the next tick starts from the measured state), or start from ``state``.
        Without a ``posture`` parameter, the posture is taken again from that state."""
        self._integrator.reset()
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
        q_ref = self._integrator.q_ref
        return None if q_ref is None else q_ref.copy()

    def _synchronise(self, state: JointState) -> None:
        """q* from the measured q, clipped into the joint range (every joint: a measured state
        past a limit — an arm running ahead of a preempted reference, a finger pushed open —
        never becomes a reference; the QP's bounds then keep q* from moving further out)."""
        q = np.array(state.q, dtype=np.float64)
        if q.shape != (self.model.nq,) or not np.isfinite(q).all():
            raise ValueError(f"state.q: expected {self.model.nq} finite values")
        limits = self.model.limits
        np.clip(q, limits.lower, limits.upper, out=q)
        self._integrator.q_ref = q
        if self._posture is None:
            self._posture = (
                self.parameters.posture.copy()
                if self.parameters.posture is not None
                else q[self._q_index].copy()
            )

    # --- the tick --------------------------------------------------------------------------
    def compute(self, state: JointState, target: CartesianTarget, dt: float) -> JointReference:
        integrator = self._integrator
        point = integrator.segment_point(dt)
        if point is not None:  # between two solves: the next point of the last segment
            return point
        if self.update_divisor == 1:
            return self._solve_tick(state, target, dt)
        end = self._solve_tick(state, target, dt * self.update_divisor)
        return integrator.start_segment(end, dt)

    def _solve_tick(self, state: JointState, target: CartesianTarget, dt: float) -> JointReference:
        """One solve over ``dt`` [s] (the single-rate tick): q*, v*, a* at its end."""
        goal = self._validated(target)
        parameters = self.parameters
        integrator = self._integrator
        q_sel = self._q_sel
        resynced = False
        if integrator.q_ref is None:
            self._synchronise(state)
            resynced = True
        elif parameters.resync_threshold is not None:
            offsets = (np.asarray(state.q)[q_sel] - integrator.q_ref[q_sel]).tolist()
            drift = max(max(offsets), -min(offsets))  # max |q − q*|
            if drift > parameters.resync_threshold:
                self._synchronise(state)
                integrator.forget_velocity()
                resynced = True
        q_ref = integrator.q_ref
        assert q_ref is not None and self._posture is not None
        q = q_ref[q_sel].copy()

        tick = self._task.at(q_ref, q, goal, parameters, self._posture)
        velocity, velocity_limited, solver = self._solve(tick.view, dt)

        # The rate limit again after the solve, as the guarantee (the posture and the bounds may
        # add TCP motion).
        scale = tick.rate_scale
        final_scale = rate_scale(tick.jacobian.dot(velocity), parameters)
        if final_scale < 1.0:
            velocity = velocity * final_scale
            scale *= final_scale

        reference = integrator.integrate(
            q, velocity, dt, parameters.acceleration == FINITE_DIFFERENCE and not resynced
        )
        self.status = DiffIkStatus(  # positional: built every tick
            tick.position_error,
            tick.orientation_error,
            tick.position_error <= parameters.position_tolerance
            and tick.orientation_error <= parameters.orientation_tolerance,
            math.sqrt(tick.view.damping_squared),
            tick.manipulability,
            tick.condition_number,
            scale,
            velocity_limited,
            resynced,
            solver,
        )
        return reference

    def _validated(self, target: CartesianTarget) -> CartesianTarget:
        """``target.validated`` for this generator's base frame, once per target object when its
        arrays are read-only (then nothing can have changed since it was checked)."""
        if target is self._checked_target:
            return self._checked_goal
        goal = target.validated(self.base_frame)
        if _frozen_array(target.pose) and (target.twist is None or _frozen_array(target.twist)):
            self._checked_target, self._checked_goal = target, goal
        return goal

    @abstractmethod
    def _solve(self, task: TaskView, dt: float) -> tuple[FloatArray, bool, str]:
        """The joint velocity v (n,) [rad/s | m/s] of the controlled joints, whether it was
        limited by the joint velocity limits, and the solver status."""
