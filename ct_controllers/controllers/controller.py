"""Base of every controller (the values it exchanges with the loop are in
:mod:`ct_controllers.types`).

A controller is plain Python: it gets the measured state, a reference and the period, and returns
efforts. All vectors are in the model's joint order (``RobotModel.joint_names``). Gains are
*staged* from any thread and applied together at the next tick boundary, never half-applied.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from ct_controllers.errors import GainError
from ct_controllers.model.robot import RobotModel
from ct_controllers.parameter_schema import ParameterSchema
from ct_controllers.types import ControlOutput, FloatArray, JointReference, JointState

__all__ = [
    "ControlOutput",
    "Controller",
    "FloatArray",
    "GainError",
    "JointReference",
    "JointState",
]


def per_joint_gain(name: str, value: object, size: int, maximum: float = np.inf) -> FloatArray:
    """Validate a per-joint gain vector: ``size`` finite values in [0, maximum]."""
    array = np.array(value, dtype=np.float64).reshape(-1)
    if array.size != size:
        raise GainError(f"{name}: expected {size} values, got {array.size}")
    if not np.all(np.isfinite(array)):
        raise GainError(f"{name}: non-finite value in {array.tolist()}")
    if np.any(array < 0) or np.any(array > maximum):
        raise GainError(f"{name}: values must be in [0, {maximum}], got {array.tolist()}")
    return array


def gains_by_name(
    controller: str,
    gain_names: tuple[str, ...],
    model_joint_names: tuple[str, ...],
    joint_names: tuple[str, ...],
    params: Mapping[str, object],
) -> dict[str, FloatArray]:
    """Per-joint gains given in ``joint_names`` order (controllers.yaml) → model order. Every
    model joint needs a value; a missing joint or parameter raises :class:`GainError` naming it."""
    duplicates = sorted({n for n in joint_names if joint_names.count(n) > 1})
    if duplicates:
        raise GainError(f"{controller}: joint(s) listed twice: {', '.join(duplicates)}")
    missing = [n for n in model_joint_names if n not in set(joint_names)]
    if missing:
        raise GainError(f"{controller}: no gains for joint(s) {', '.join(missing)}")
    index = {name: i for i, name in enumerate(model_joint_names)}
    order = np.array([index[n] for n in joint_names if n in index], dtype=np.intp)
    unknown = [n for n in joint_names if n not in index]
    if unknown:
        raise GainError(f"{controller}: unknown joint(s) {', '.join(unknown)}")
    gains = {}
    for name in gain_names:
        if name not in params:
            raise GainError(f"{controller}: parameter '{name}' is missing")
        values = np.empty(len(model_joint_names))
        values[order] = per_joint_gain(name, params[name], len(joint_names))
        gains[name] = values
    return gains


class Controller(ABC):
    """Subclasses implement :meth:`compute`; controllers with per-joint gains list them in
    ``GAIN_NAMES`` (the default :meth:`validate_gains` checks those, against ``self.model``)."""

    # The type's parameters (``<instance>.<name>`` in controllers.yaml, for any instance name):
    # descriptions, defaults, which are live (the gains: GAIN_NAMES is its live names).
    PARAMETERS: ClassVar[ParameterSchema | None] = None
    GAIN_NAMES: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._staged: dict[str, FloatArray] | None = None
        self._staged_lock = threading.Lock()

    def stage_gains(self, gains: Mapping[str, object]) -> None:
        """Validate a gain set as a whole (raises :class:`GainError`, nothing staged) and stage it
        for the next tick. Safe to call from any thread."""
        validated = self.validate_gains(gains)
        with self._staged_lock:
            pending = dict(self._staged or {})
            pending.update(validated)
            self._staged = pending

    def update(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        """One control tick: apply staged gains, then compute efforts [N·m | N] — the effort
        of :meth:`step` (a chain's :meth:`compute` is its ``compute_output(...).effort``),
        without building the output around it."""
        if self._staged is not None:
            self._apply_staged()
        return self.compute(state, reference, dt)

    def step(self, state: JointState, reference: JointReference, dt: float) -> ControlOutput:
        """One control tick: apply staged gains, then :meth:`compute_output` — the efforts and
        the joint reference tracked (what the control loop writes to effort and position
        joints)."""
        if self._staged is not None:
            self._apply_staged()
        return self.compute_output(state, reference, dt)

    def _apply_staged(self) -> None:
        with self._staged_lock:
            staged, self._staged = self._staged, None
        if staged:
            self.apply_gains(staged)

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        """Efforts and the joint reference tracked. Default: :meth:`compute`'s efforts,
        tracking ``reference`` as given; chains that generate their own reference override this
        (and implement :meth:`compute` as its ``effort``)."""
        return ControlOutput(self.compute(state, reference, dt), reference)

    def validate_gains(self, gains: Mapping[str, object]) -> dict[str, FloatArray]:
        """Check a (partial) gain set; return validated copies or raise :class:`GainError`.
        Default: names from ``GAIN_NAMES``, each a vector of ``self.model.nv`` values ≥ 0."""
        unknown = sorted(set(gains) - set(self.GAIN_NAMES))
        if unknown:
            raise GainError(f"unknown gain(s) {unknown}; known: {list(self.GAIN_NAMES)}")
        size = self.model.nv  # type: ignore[attr-defined]
        return {name: per_joint_gain(name, value, size) for name, value in gains.items()}

    def apply_gains(self, gains: Mapping[str, FloatArray]) -> None:
        """Install validated gains (called on the control thread at a tick boundary)."""
        for name, value in gains.items():
            setattr(self, name, value.copy())

    def linear_feedback(
        self,
        q: FloatArray,
        gains: Mapping[str, FloatArray] | None = None,
        model: RobotModel | None = None,
    ) -> tuple[FloatArray, FloatArray] | None:
        """(K, D): this controller's feedback linearized at configuration ``q`` [rad | m],
        τ ≈ −K δq − D δv, as nv × nv matrices [N·m/rad | N/m] and [N·m·s/rad | N·s/m] in model
        order; None for controllers without joint feedback. ``gains`` (validated, model order)
        replace the current ones where given; ``model``, a copy of the controller's own, lets
        another thread than the control loop's evaluate it. See :func:`sampled_loop_radius`."""
        return None

    def prepare(self, state: JointState, dt: float) -> None:
        """Do at ``state`` (measured, model order) and period ``dt`` [s] the work whose first
        run is slow — caches, solver start-up, the model's scratch data, code not yet run —
        before the loop installs this controller, so that its first tick costs what the next
        ones do (a goal's first chained tick took ~1 ms, an overrun at 1 kHz, without it).
        Called by :meth:`ControlLoop.switch_controller` on the caller's thread while the loop
        may still run the previous controller: touch only what this controller owns alone, and
        leave it as if it had not run. Default: nothing."""
        return None

    @abstractmethod
    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        """Efforts in model order [N·m | N]."""


def feedback_matrices(
    model: RobotModel,
    q: FloatArray,
    stiffness: FloatArray,
    damping: FloatArray,
    through_inertia: bool,
) -> tuple[FloatArray, FloatArray]:
    """(K, D), nv × nv, of per-joint gains at ``q``: diag(stiffness), diag(damping) for gains in
    N·m/rad and N·m·s/rad, or M(q)·diag(stiffness), M(q)·diag(damping) for gains in s⁻² and
    s⁻¹ that act through the model's inertia (computed torque, inertia-decoupled impedance)."""
    if through_inertia:
        mass = model.mass_matrix(q)
        return mass * stiffness, mass * damping  # column j scaled by gain j: M·diag(gain)
    return np.diag(stiffness), np.diag(damping)


def sampled_loop_radius(
    mass_matrix: FloatArray,
    stiffness: FloatArray,
    damping: FloatArray,
    period: float,
    delay: int = 0,
) -> float:
    """Spectral radius of the sampled closed loop M q̈ = τ, τ = −K q − D v measured ``delay``
    periods before it is applied, then held for one period T [s] (zero-order hold): below 1
    every motion decays, above 1 some grows (the torque rate limit then holds it to a limit
    cycle: a chattering joint). Linearized about one configuration (M [kg·m² | kg] fixed, no
    Coriolis). A joint without stiffness leaves its position an integrator: exactly 1.

    The double integrator discretizes exactly: q⁺ = q + T v + T²/2 M⁻¹τ, v⁺ = v + T M⁻¹τ; the
    state is [x_k, x_k−1, …, x_k−delay] with x = (q, v)."""
    n = mass_matrix.shape[0]
    inverse_mass = np.linalg.inv(mass_matrix)
    transition = np.eye(2 * n)
    transition[:n, n:] = period * np.eye(n)
    gain = np.vstack((0.5 * period * period * inverse_mass, period * inverse_mass))
    feedback = -gain @ np.hstack((stiffness, damping))  # x_{k+1} += this @ x_{k-delay}
    size = 2 * n * (delay + 1)
    closed = np.zeros((size, size))
    closed[: 2 * n, : 2 * n] = transition
    closed[: 2 * n, 2 * n * delay : 2 * n * (delay + 1)] += feedback
    for i in range(1, delay + 1):  # the delay line
        closed[2 * n * i : 2 * n * (i + 1), 2 * n * (i - 1) : 2 * n * i] = np.eye(2 * n)
    return float(np.abs(np.linalg.eigvals(closed)).max())
