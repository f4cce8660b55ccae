"""Base of every controller (the values it exchanges with the loop are in
:mod:`ct_controllers.types`).

A controller is plain Python: it gets the measured state, a reference and the period, and returns
efforts. All vectors are in the model's joint order (``RobotModel.joint_names``). Gains are
*staged* from any thread and applied together at the next tick boundary, never half-applied; so
is a payload at the TCP (:meth:`Controller.stage_payload`), which replaces the controller's model
(and its per-tick model state) with one that carries it.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from scipy.linalg import expm

from ct_controllers.errors import GainError
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.payload import Payload, PayloadError
from ct_controllers.model.robot import RobotModel
from ct_controllers.parameter_schema import (
    PER_JOINT,
    SCALAR,
    ParameterProblem,
    ParameterSchema,
    ParameterSpec,
    non_negative,
)
from ct_controllers.types import ControlOutput, FloatArray, JointReference, JointState

__all__ = [
    "CARTESIAN",
    "JOINT",
    "ControlOutput",
    "Controller",
    "FloatArray",
    "GainError",
    "JointReference",
    "JointState",
]

# What a controller takes as its input (:attr:`Controller.ACCEPTS`): the loop's joint reference
# (q*, v*, a*), or a Cartesian target (:class:`~ct_controllers.references.reference_generator.
# CartesianTarget`, through the controller's ``set_target``).
JOINT = "joint"
CARTESIAN = "cartesian"


def gain_spec(name: str) -> ParameterSpec:
    """A per-joint gain as a controller without a schema of its own has it: one value ≥ 0 per
    joint, live (what its ``GAIN_NAMES`` are checked as)."""
    return ParameterSpec(name, float, (), name, per_joint=True, live=True, validator=non_negative)


def per_joint_gain(spec: ParameterSpec, value: object, size: int) -> FloatArray:
    """A per-joint vector checked by its ``spec`` (:meth:`ParameterSpec.check`: ``size`` finite
    numbers its validator accepts), as an array; :class:`GainError` naming it otherwise."""
    if spec.zero_by_default and isinstance(value, (list, tuple)) and not value:
        return np.zeros(size)
    try:
        return np.array(spec.check(value, size), dtype=np.float64)
    except ParameterProblem as problem:
        raise GainError(f"{spec.name}: {problem}") from None


def shaped_gain(spec: ParameterSpec, value: object) -> FloatArray:
    """A gain that is not per joint checked by its ``spec``: a scalar as a 1-element array, a
    fixed-size sequence (:attr:`ParameterSpec.sizes`) as an array of its values;
    :class:`GainError` naming it otherwise."""
    if spec.shape == SCALAR and isinstance(value, np.ndarray) and value.size == 1:
        value = float(value.reshape(-1)[0])  # already shaped (a validated set, staged)
    try:
        checked = spec.check(value)
    except ParameterProblem as problem:
        raise GainError(f"{spec.name}: {problem}") from None
    return np.array([checked] if spec.shape == SCALAR else checked, dtype=np.float64)


def checked_parameters(
    controller: str,
    schema: ParameterSchema,
    model_joint_names: tuple[str, ...],
    joint_names: tuple[str, ...],
    params: Mapping[str, object],
) -> dict[str, Any]:
    """A controller instance's controllers.yaml entries (``params``, without the instance's
    prefix) checked against its type's ``schema`` — the one place a controller's entries are
    validated and given their defaults — by name within the schema:

    - per-joint entries (required: a default is sized for the bundled arm only; those
      :attr:`~ct_controllers.parameter_schema.ParameterSpec.zero_by_default` may be left out:
      0 for every joint), given in ``joint_names`` order, come back as arrays in model order;
      every model joint needs a value, a joint listed twice or unknown is refused;
    - the others of their spec's kind and accepted by its validator; absent, the spec's default.

    Entries the schema does not name (``type``) are left out. :class:`GainError` names the
    ``controller``, the entry or joint, and what is wrong."""
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
    values: dict[str, Any] = {}
    for spec in schema.parameters:
        if spec.per_joint:
            if spec.name not in params and not spec.zero_by_default:
                raise GainError(f"{controller}: parameter '{spec.name}' is missing")
            in_model_order = np.empty(len(model_joint_names))
            given = params.get(spec.name, ())
            in_model_order[order] = per_joint_gain(spec, given, len(joint_names))
            values[spec.name] = in_model_order
            continue
        try:
            values[spec.name] = spec.check(params.get(spec.name, spec.default))
        except ParameterProblem as problem:
            raise GainError(f"{controller}: {spec.name}: {problem}") from None
    return values


def gains_by_name(
    controller: str,
    gain_names: tuple[str, ...],
    model_joint_names: tuple[str, ...],
    joint_names: tuple[str, ...],
    params: Mapping[str, object],
) -> dict[str, FloatArray]:
    """Per-joint gains given in ``joint_names`` order (controllers.yaml) → model order, for a
    controller type without a schema of its own (each gain as :func:`gain_spec`): see
    :func:`checked_parameters`."""
    schema = ParameterSchema("", tuple(gain_spec(name) for name in gain_names))
    return checked_parameters(controller, schema, model_joint_names, joint_names, params)


class Controller(ABC):
    """Subclasses implement :meth:`compute`. A controller's live gains are its schema's live
    entries (``GAIN_NAMES``, set from :attr:`PARAMETERS` for every subclass that has one; a
    type without a schema lists per-joint gains there itself); the default
    :meth:`validate_gains` checks them by their specs' shapes, against ``self.model``."""

    # The type's parameters (``<instance>.<name>`` in controllers.yaml, for any instance name):
    # descriptions, defaults, validation (checked_parameters), which are live (the gains:
    # GAIN_NAMES is its live names).
    PARAMETERS: ClassVar[ParameterSchema | None] = None
    GAIN_NAMES: tuple[str, ...] = ()
    # What the controller takes (JOINT: the loop's joint reference; CARTESIAN: a Cartesian
    # target through its ``set_target``): the chain factory puts the differential IK in front of
    # a joint-space law and hands Cartesian targets straight to a Cartesian one.
    ACCEPTS: ClassVar[frozenset[str]] = frozenset({JOINT})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        schema = cls.__dict__.get("PARAMETERS")
        if schema is None:
            return
        given = cls.__dict__.get("GAIN_NAMES")
        if given is not None and tuple(given) != schema.live:
            raise TypeError(
                f"{cls.__name__}: GAIN_NAMES {tuple(given)} are not its schema's live entries "
                f"{schema.live}"
            )
        cls.GAIN_NAMES = schema.live

    # The controller's per-tick evaluation of its own model at the measured state, for
    # controllers that use the model; a chain running this controller on the same model reads
    # the same one (one evaluation per tick; see ct_controllers.model.model_state).
    model_state: ModelState | None = None
    model: RobotModel  # the controller's own model (set by subclasses)

    @classmethod
    def check_parameters(
        cls, model: RobotModel, joint_names: tuple[str, ...], params: Mapping[str, object]
    ) -> dict[str, Any]:
        """This type's controllers.yaml entries checked against :attr:`PARAMETERS` (without
        one, its ``GAIN_NAMES`` as :func:`gain_spec`), per-joint ones in ``model``'s order:
        :func:`checked_parameters`. What ``from_parameters`` builds the controller from."""
        return checked_parameters(
            cls.__name__, cls._schema(), model.joint_names, joint_names, params
        )

    @classmethod
    def _schema(cls) -> ParameterSchema:
        if cls.PARAMETERS is not None:
            return cls.PARAMETERS
        return ParameterSchema("", tuple(gain_spec(name) for name in cls.GAIN_NAMES))

    @classmethod
    def gain_specs(cls) -> dict[str, ParameterSpec]:
        """Each live gain's spec (``GAIN_NAMES``), from :attr:`PARAMETERS` where it names it."""
        schema = cls._schema()
        named = {spec.name: spec for spec in schema.parameters}
        return {name: named.get(name) or gain_spec(name) for name in cls.GAIN_NAMES}

    def __init__(self) -> None:
        self._staged: dict[str, FloatArray] | None = None
        # A model to install at the next tick (a payload staged): (model, its model state).
        self._staged_model: tuple[RobotModel, ModelState | None] | None = None
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
        without building the output around it. A new array, the caller's (:meth:`compute`)."""
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
            model, self._staged_model = self._staged_model, None
        if model is not None:
            self.install_model(*model)
        if staged:
            self.apply_gains(staged)

    @property
    def payload(self) -> Payload | None:
        """The payload the controller's model carries at the TCP now (None: nothing)."""
        model = getattr(self, "model", None)
        return None if model is None else model.payload

    def stage_payload(self, payload: Payload | None) -> None:
        """Carry ``payload`` at the TCP from the next tick on (None: clear it), together with
        any gains staged before that tick: the model with the payload (the controller's own
        unloaded model plus the payload, :meth:`RobotModel.with_payload`) and its model state
        are built here, on the caller's thread, and swapped in at the tick boundary (nothing
        is computed or allocated on the control thread). Bounds (rated mass, reach) are the
        caller's (:func:`~ct_controllers.model.payload.check_payload`). Raises
        :class:`PayloadError` for a controller without a model or whose model has no TCP;
        nothing is staged then. Any thread."""
        model = getattr(self, "model", None)
        if not isinstance(model, RobotModel):
            raise PayloadError(f"{type(self).__name__} has no model to carry a payload")
        if payload is not None and not model.has_tcp:
            raise PayloadError(f"{type(self).__name__}'s model has no TCP to carry a payload at")
        loaded = model.with_payload(payload)
        state = ModelState(loaded) if self.model_state is not None else None
        with self._staged_lock:
            self._staged_model = (loaded, state)
            if self._staged is None:
                self._staged = {}  # the tick's staged path runs (no gains in it)

    def install_model(self, model: RobotModel, model_state: ModelState | None) -> None:
        """Use ``model`` (and ``model_state``, built on it) from now on: called on the control
        thread at a tick boundary (:meth:`stage_payload`). Controllers that keep more of their
        model than these two override this."""
        self.model = model
        if model_state is not None:
            self.model_state = model_state

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        """Efforts and the joint reference tracked. Default: :meth:`compute`'s efforts,
        tracking ``reference`` as given; chains that generate their own reference override this
        (and implement :meth:`compute` as its ``effort``)."""
        return ControlOutput(self.compute(state, reference, dt), reference)

    def validate_gains(self, gains: Mapping[str, object]) -> dict[str, FloatArray]:
        """Check a (partial) gain set; return validated copies or raise :class:`GainError`.
        Default: names from ``GAIN_NAMES``, each of its spec's shape (:meth:`gain_specs`; ≥ 0
        unless the schema says otherwise): per joint a vector of ``self.model.nv`` values
        (model order), a fixed-size one as an array of its values, a scalar as a 1-element
        array (:func:`shaped_gain`)."""
        unknown = sorted(set(gains) - set(self.GAIN_NAMES))
        if unknown:
            raise GainError(f"unknown gain(s) {unknown}; known: {list(self.GAIN_NAMES)}")
        specs, size = self.gain_specs(), self.model.nv
        return {
            name: per_joint_gain(specs[name], value, size)
            if specs[name].shape == PER_JOINT
            else shaped_gain(specs[name], value)
            for name, value in gains.items()
        }

    def gain_values(
        self, values: Mapping[str, object], joint_names: tuple[str, ...]
    ) -> dict[str, object]:
        """Live gain parameters' values as ``ros2 param`` carries them → what
        :meth:`validate_gains` takes: per-joint ones (given in ``joint_names`` order, the
        configuration's) re-ordered to model order by name, the others (scalars, fixed-size
        vectors) as given. :class:`GainError` names a per-joint one of the wrong size."""
        specs = self.gain_specs()
        out: dict[str, object] = {}
        for name, value in values.items():
            spec = specs.get(name)
            if spec is None or spec.shape != PER_JOINT:
                out[name] = value  # validate_gains names an unknown gain
                continue
            array = np.array(value, dtype=np.float64).reshape(-1)
            if spec.zero_by_default and array.size == 0:
                array = np.zeros(len(joint_names))
            if array.size != len(joint_names):
                raise GainError(f"{name}: expected {len(joint_names)} values, got {array.size}")
            in_model_order = np.empty(self.model.nv)
            in_model_order[self.model.indices(joint_names)] = array
            out[name] = in_model_order
        return out

    def gain_labels(self, name: str, size: int) -> tuple[str, ...]:
        """What each of the ``size`` values of the validated gain ``name`` is, for messages:
        per-joint gains the model's joint names (model order); others ``name[i]``. Controllers
        with fixed-size gains name their elements (axes) here."""
        spec = self.gain_specs().get(name)
        if spec is not None and spec.shape == PER_JOINT and size == self.model.nv:
            names = [""] * self.model.nv
            for joint in self.model.joint_names:
                names[self.model.v_index(joint)] = joint
            return tuple(names)
        return tuple(f"{name}[{i}]" for i in range(size))

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
        """Efforts in model order [N·m | N]: a new float64 array, the caller's to keep or
        change (a chain completes it in place, e.g. the grasp runner's fingers)."""


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


def sampled_plant(
    mass_matrix: FloatArray, period: float, plant_damping: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """(Φ, Γ): the plant M q̈ + D_p q̇ = τ over one period T [s] under a held τ, x⁺ = Φ x + Γ τ
    with x = (q, v). ``plant_damping`` D_p [N·m·s/rad | N·s/m] per joint (model order): the
    joints' own viscous damping (the URDF's ``<dynamics damping>``, which MuJoCo and the drives
    have), acting continuously, not through the sampled torque. None or zero: the double
    integrator, exactly q⁺ = q + T v + T²/2 M⁻¹τ, v⁺ = v + T M⁻¹τ; else exactly
    Φ = e^{AT}, Γ = ∫₀ᵀ e^{As} ds B (A = [0 I; 0 −M⁻¹D_p], B = [0; M⁻¹]), one matrix
    exponential of the augmented [A B; 0 0] T. It depends on M and T only: computed once per
    configuration by a caller that checks many gains there."""
    n = mass_matrix.shape[0]
    inverse_mass = np.linalg.inv(mass_matrix)
    if plant_damping is None or not np.any(plant_damping):
        transition = np.eye(2 * n)
        transition[:n, n:] = period * np.eye(n)
        gain = np.vstack((0.5 * period * period * inverse_mass, period * inverse_mass))
        return transition, gain
    augmented = np.zeros((3 * n, 3 * n))
    augmented[:n, n : 2 * n] = np.eye(n)
    augmented[n : 2 * n, n : 2 * n] = -inverse_mass * np.asarray(plant_damping)  # M⁻¹ diag(D_p)
    augmented[n : 2 * n, 2 * n :] = inverse_mass
    exponential = expm(augmented * period)
    return exponential[: 2 * n, : 2 * n], exponential[: 2 * n, 2 * n :]


def sampled_loop_radius(
    mass_matrix: FloatArray,
    stiffness: FloatArray,
    damping: FloatArray,
    period: float,
    delay: int = 0,
    plant_damping: FloatArray | None = None,
    plant: tuple[FloatArray, FloatArray] | None = None,
) -> float:
    """Spectral radius of the sampled closed loop M q̈ + D_p q̇ = τ, τ = −K q − D v measured
    ``delay`` periods before it is applied, then held for one period T [s] (zero-order hold):
    below 1 every motion decays, above 1 some grows (the torque rate limit then holds it to a
    limit cycle: a chattering joint). Linearized about one configuration (M [kg·m² | kg] fixed,
    no Coriolis). A joint without stiffness leaves its position an integrator: exactly 1.

    The plant over a period is :func:`sampled_plant` (``plant``: its (Φ, Γ) already computed
    for this M, T and ``plant_damping``). The state is [x_k, x_k−1, …, x_k−delay] with
    x = (q, v)."""
    n = mass_matrix.shape[0]
    transition, gain = plant or sampled_plant(mass_matrix, period, plant_damping)
    feedback = -gain @ np.hstack((stiffness, damping))  # x_{k+1} += this @ x_{k-delay}
    size = 2 * n * (delay + 1)
    closed = np.zeros((size, size))
    closed[: 2 * n, : 2 * n] = transition
    closed[: 2 * n, 2 * n * delay : 2 * n * (delay + 1)] += feedback
    for i in range(1, delay + 1):  # the delay line
        closed[2 * n * i : 2 * n * (i + 1), 2 * n * (i - 1) : 2 * n * i] = np.eye(2 * n)
    return float(np.abs(np.linalg.eigvals(closed)).max())
