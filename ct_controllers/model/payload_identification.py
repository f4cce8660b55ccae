"""Payload identification from joint torques measured in static holds.

The model. A payload (mass m [kg], centre of mass c [m] in the TCP frame) fixed to the TCP adds
its weight to the body that carries the TCP. At rest (v = 0, a = 0) the measured joint torques
are the loaded arm's gravity torques plus what the model does not know (a torque bias b, static
friction, noise):

    τ_meas(q) = g₀(q) + Y_j(q) π_j + b + ε

with g₀ the unloaded model's gravity torques and Y_j (nv × 10) the columns of Pinocchio's
joint-torque regressor (``computeJointTorqueRegressor`` at v = a = 0) that belong to the TCP's
parent joint j, whose dynamic parameters π_j = [m, m c_j, I_j] are in that joint's frame. At rest
the six inertia columns are zero: only (m, h_j = m c_j) act. With the TCP at (R, p) in joint j's
frame, c_j = p + R c, so h_j = m p + R h with h = m c, and in the TCP frame's parameters
θ = [m, h] (4 numbers):

    y(q) := τ_meas(q) − g₀(q) = Y_j,0:4(q) T θ + b + ε,     T = [[1, 0], [p, R]]

linear in θ. Stacked over holds in several configurations, θ̂ = argmin ‖A θ − y‖² (optionally
with b, one constant per joint, as unknowns too), c = h/m.

Bias and friction. Two ways, chosen by the caller:

- *differencing* (the default for real drives): holds of the empty gripper at the same
  configurations give r₀(q) = τ₀ − g₀(q), the arm's own unmodelled torque (sensor bias, model
  error); it is subtracted, y = (τ_meas − g₀)(q_loaded) − r₀(q_empty). What the two holds share
  cancels: a constant bias and the unloaded model's error. Static friction does not cancel
  reliably (it depends on how each hold was approached) and is not modelled: it is left in the
  residual, which the standard errors see;
- *estimation*: ``estimate_bias`` adds one constant per joint to the unknowns (needs more
  configurations; a bias that varies with the configuration is not captured).

How well the data determines θ. The regressor's condition number κ after scaling each column to
unit norm (units differ: N·m/kg against N·m/(kg·m)) is the excitation measure: the holds must
turn the TCP so that gravity acts along different axes of the TCP frame (a single configuration
never determines the component of h along gravity: κ = ∞). Standard errors from the residual,
cov(θ̂) = σ̂² (AᵀA)⁻¹ with σ̂² = max(RSS / (rows − unknowns), σ_floor²) (σ_floor the torque noise
the caller states: noiseless data must not claim a zero error; with a σ per joint, the rows are
weighted by 1/σ_j and the same holds in units of σ), and for c = h/m by the delta
method (∂c/∂m = −h/m², ∂c/∂h = I/m).

The result is an estimate with its confidence, or a refusal that says why (never a bare array):
samples that are not holds (moving), too few, not finite, a condition above the limit
(unexcited), or three standard errors above the tolerance asked for (uncertain: for c, of the
distance ‖ĉ − c‖, not of each axis alone).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from ct_controllers.model.payload import Payload, tcp_parent
from ct_controllers.model.robot import RobotModel
from ct_controllers.types import FloatArray

PARAMETER_NAMES = ("mass", "com.x", "com.y", "com.z")  # what θ = [m, m c] identifies


class Refusal(enum.Enum):
    """Why an estimate was refused."""

    NOT_FINITE = "not_finite"  # a NaN or inf in q, v or the measured effort
    MOVING = "moving"  # a sample is not a hold: a joint speed above the limit
    TOO_FEW = "too_few"  # fewer equations than unknowns (plus one for the residual)
    UNEXCITED = "unexcited"  # the regressor's condition is above the limit
    UNCERTAIN = "uncertain"  # a parameter's 3σ is above its tolerance
    NO_MASS = "no_mass"  # the mass is not distinguishable from zero: c is undefined


@dataclass(frozen=True)
class IdentificationSettings:
    """Limits of an identification.

    - ``max_condition`` [-]: of the column-scaled regressor; above it, unexcited;
    - ``max_speed`` [rad/s | m/s]: a sample with a faster joint (of those whose torques are
      used) is not a hold;
    - ``mass_tolerance`` [kg], ``com_tolerance`` [m]: three standard errors must be within them
      (for c, of its distance: 3 √(σx² + σy² + σz²));
    - ``torque_noise`` [N·m | N]: σ of every joint's measured torque, the floor of the
      residual's standard deviation; ``joint_noise``: σ of the named joints, where they differ
      (a drive's torque resolution); the equations are weighted by 1/σ;
    - ``estimate_bias``: a constant torque per joint as unknowns too (else none: difference
      against empty holds, or assume the model exact)."""

    max_condition: float = 50.0
    max_speed: float = 0.01
    mass_tolerance: float = 0.025
    com_tolerance: float = 0.01
    torque_noise: float = 0.01
    estimate_bias: bool = False
    joint_noise: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PayloadEstimate:
    """An identified payload: ``payload`` (m [kg], c [m] in the TCP frame; no inertia), the
    standard errors ``mass_std`` [kg] and ``com_std`` [m] (per TCP axis), the excitation
    measure ``condition`` [-], ``residual_rms`` [N·m | N] of the fit, the number of ``samples``,
    and ``bias`` [N·m | N] per joint (model order; zero where not estimated or not used)."""

    payload: Payload
    mass_std: float
    com_std: FloatArray
    condition: float
    residual_rms: float
    samples: int
    bias: FloatArray
    # False for a mass-only estimate (:func:`identify_mass`): ``com_std`` is NaN and
    # ``payload.com`` only the part the holds determine (see there).
    com_determined: bool = True


@dataclass(frozen=True)
class PayloadRefusal:
    """No estimate: the ``reason``, a ``message`` that names what failed, and what was measured
    (``condition`` [-], NaN when not reached; ``samples``)."""

    reason: Refusal
    message: str
    condition: float
    samples: int


PayloadResult = PayloadEstimate | PayloadRefusal


def supporting_joints(model: RobotModel) -> tuple[str, ...]:
    """The joints (model order) whose torque the TCP's load changes: those that move it."""
    joint, _ = tcp_parent(model.model, model.tcp_frame_id)
    support = {int(j) for j in model.model.supports[joint]}
    return tuple(name for name in model.joint_names if model.model.getJointId(name) in support)


class PayloadRegressor:
    """y(q) = A(q) θ at rest, θ = [m, m c] (TCP frame): A (rows × 4) for the joints ``joints``
    (names; default :func:`supporting_joints`), with its own scratch data."""

    def __init__(self, model: RobotModel, joints: Sequence[str] | None = None) -> None:
        self.model = model
        self.joints = tuple(joints) if joints is not None else supporting_joints(model)
        self.rows = model.indices(self.joints)
        pin_model = model.unloaded_model
        self._pin_model = pin_model
        self._data = pin_model.createData()
        joint, placement = tcp_parent(pin_model, model.tcp_frame_id)
        # Columns of joint j's parameters in the regressor (10 per joint, joints from 1).
        self._columns = slice(10 * (joint - 1), 10 * (joint - 1) + 4)
        # θ_j = T θ: m_j = m, h_j = m p + R h.
        self._to_joint = np.eye(4)
        self._to_joint[1:, 0] = placement.translation
        self._to_joint[1:, 1:] = placement.rotation
        self._zeros = np.zeros(pin_model.nv)

    def matrix(self, q: FloatArray) -> FloatArray:
        """A(q) (len(joints) × 4) [N·m/kg | N·m/(kg·m)]: ∂τ/∂θ of the chosen joints at rest."""
        configuration = self.model.pinocchio_configuration(q)
        regressor = pin.computeJointTorqueRegressor(
            self._pin_model, self._data, configuration, self._zeros, self._zeros
        )
        return np.array(regressor[self.rows, self._columns]) @ self._to_joint

    def unloaded_gravity(self, q: FloatArray) -> FloatArray:
        """g₀(q) of the chosen joints [N·m | N]: the model without any payload."""
        configuration = self.model.pinocchio_configuration(q)
        gravity = pin.computeGeneralizedGravity(self._pin_model, self._data, configuration)
        return np.array(gravity[self.rows])


def regressor_condition(regressor: PayloadRegressor, configurations: Sequence[FloatArray]) -> float:
    """κ of the stacked, column-scaled regressor over ``configurations``: how well holds there
    determine θ (independent of the payload: plan holds with it before moving). ∞ if singular."""
    stacked = np.vstack([regressor.matrix(np.asarray(q)) for q in configurations])
    return _scaled_condition(stacked)


def _scaled_condition(matrix: FloatArray) -> float:
    norms = np.linalg.norm(matrix, axis=0)
    if np.any(norms <= 1e-12 * max(float(norms.max()), 1e-300)):
        return math.inf
    singular = np.linalg.svd(matrix / norms, compute_uv=False)
    return math.inf if singular[-1] <= 0.0 else float(singular[0] / singular[-1])


def _weakest(matrix: FloatArray, names: Sequence[str]) -> str:
    """The unknowns the least excited direction is made of (the right singular vector of the
    smallest singular value of the column-scaled matrix), largest first."""
    norms = np.linalg.norm(matrix, axis=0)
    norms[norms == 0.0] = 1.0
    _, _, right = np.linalg.svd(matrix / norms)
    direction = np.abs(right[-1])
    order = np.argsort(direction)[::-1]
    return ", ".join(names[i] for i in order[:2] if direction[i] > 0.2)


def identify_payload(
    model: RobotModel,
    q: FloatArray,
    effort: FloatArray,
    v: FloatArray | None = None,
    empty_q: FloatArray | None = None,
    empty_effort: FloatArray | None = None,
    joints: Sequence[str] | None = None,
    settings: IdentificationSettings = IdentificationSettings(),
    mass_only: bool = False,
) -> PayloadResult:
    """Identify the payload at the TCP of ``model`` (its unloaded model is used) from holds.
    ``mass_only``: :func:`identify_mass` (the same checks of the samples first).

    ``q`` (N × nv, model order) [rad | m] the hold configurations, ``effort`` (N × nv) [N·m | N]
    the joint torques measured there (averaged over the hold), ``v`` (N × nv) the joint speeds
    measured (None: not checked). ``empty_q``, ``empty_effort`` (N × nv): holds of the empty
    gripper at the same configurations, for differencing (see the module docstring), or None.
    ``joints``: whose torques to use (default: :func:`supporting_joints`; leave out joints
    without a torque measurement). Returns a :class:`PayloadEstimate` or a
    :class:`PayloadRefusal`; ValueError for arrays of the wrong shape (a caller's mistake, not
    the data's)."""
    if mass_only and settings.estimate_bias:
        raise ValueError("a mass-only identification estimates no bias: difference instead")
    regressor = PayloadRegressor(model, joints)
    q = _samples(q, model.nv, "q")
    effort = _samples(effort, model.nv, "effort")
    count = q.shape[0]
    if effort.shape[0] != count:
        raise ValueError(f"{count} configurations but {effort.shape[0]} effort samples")
    arrays = [("q", q), ("effort", effort[:, regressor.rows])]
    if v is not None:
        v = _samples(v, model.nv, "v")
        arrays.append(("v", v[:, regressor.rows]))
    if (empty_q is None) != (empty_effort is None):
        raise ValueError("differencing needs both empty_q and empty_effort")
    if empty_q is not None and empty_effort is not None:
        empty_q = _samples(empty_q, model.nv, "empty_q")
        empty_effort = _samples(empty_effort, model.nv, "empty_effort")
        if empty_q.shape[0] != count or empty_effort.shape[0] != count:
            raise ValueError(f"differencing needs {count} empty holds, one per configuration")
        arrays += [("empty_q", empty_q), ("empty_effort", empty_effort[:, regressor.rows])]
    unmeasured = [
        joint
        for joint, column in zip(regressor.joints, effort[:, regressor.rows].T, strict=True)
        if np.all(np.isnan(column))
    ]
    if unmeasured:
        return PayloadRefusal(
            Refusal.NOT_FINITE,
            f"no measured effort on joint(s) {', '.join(unmeasured)} (the backend measures "
            "none there): identify from the others (joints=...)",
            math.nan,
            count,
        )
    for name, array in arrays:
        if not np.all(np.isfinite(array)):
            bad = sorted({int(i) for i in np.argwhere(~np.isfinite(array))[:, 0]})
            return PayloadRefusal(
                Refusal.NOT_FINITE, f"{name} is not finite in sample(s) {bad}", math.nan, count
            )
    if v is not None:  # the joints whose torques are used must be still (others may move)
        speed = np.abs(v[:, regressor.rows]).max(axis=1)
        moving = [int(i) for i in np.flatnonzero(speed > settings.max_speed)]
        if moving:
            return PayloadRefusal(
                Refusal.MOVING,
                f"sample(s) {moving} are not holds: joint speed up to {speed.max():.3g} "
                f"(limit {settings.max_speed:g})",
                math.nan,
                count,
            )
    if mass_only:
        return _solve_mass(regressor, q, effort, count, empty_q, empty_effort, settings)
    rows = len(regressor.joints)
    blocks, targets = [], []
    for i in range(count):
        blocks.append(regressor.matrix(q[i]))
        residual = effort[i, regressor.rows] - regressor.unloaded_gravity(q[i])
        if empty_q is not None and empty_effort is not None:
            residual -= empty_effort[i, regressor.rows] - regressor.unloaded_gravity(empty_q[i])
        targets.append(residual)
    matrix = np.vstack(blocks)
    names = list(PARAMETER_NAMES)
    if settings.estimate_bias:
        matrix = np.hstack((matrix, np.tile(np.eye(rows), (count, 1))))
        names += [f"bias.{name}" for name in regressor.joints]
    target = np.concatenate(targets)
    unknowns = matrix.shape[1]
    if matrix.shape[0] < unknowns + 1:
        return PayloadRefusal(
            Refusal.TOO_FEW,
            f"{matrix.shape[0]} equations ({count} sample(s) × {rows} joints) for {unknowns} "
            "unknowns: hold in more configurations",
            math.nan,
            count,
        )
    # Weighted least squares: each joint's equations divided by its torque noise σ_j, so the
    # residual is in units of σ and a precise joint counts for more.
    weights = np.tile(1.0 / _joint_noise(settings, regressor.joints), count)
    weighted, weighted_target = matrix * weights[:, None], target * weights
    condition = _scaled_condition(weighted)
    if not condition <= settings.max_condition:
        return PayloadRefusal(
            Refusal.UNEXCITED,
            f"the holds do not determine the payload: regressor condition {condition:.3g} "
            f"(limit {settings.max_condition:g}); least excited: {_weakest(matrix, names)}; "
            "hold with the TCP turned about more axes",
            condition,
            count,
        )
    solution, *_ = np.linalg.lstsq(weighted, weighted_target, rcond=None)
    fitted = target - matrix @ solution  # [N·m | N]
    dof = matrix.shape[0] - unknowns
    # The residual's variance in units of σ², at least 1: the stated noise is a floor.
    scale = max(float(np.sum((fitted * weights) ** 2)) / dof, 1.0)
    covariance = scale * np.linalg.inv(weighted.T @ weighted)
    mass, moment = float(solution[0]), solution[1:4]
    mass_std = math.sqrt(covariance[0, 0])
    bias = np.zeros(model.nv)
    if settings.estimate_bias:
        bias[regressor.rows] = solution[4:]
    if not mass > 3.0 * mass_std:
        return PayloadRefusal(
            Refusal.NO_MASS,
            f"mass {mass:.4g} ± {mass_std:.2g} kg is not distinguishable from zero: no payload "
            "(its centre of mass is undefined)",
            condition,
            count,
        )
    com = moment / mass
    # Delta method: c = h/m, ∂c/∂[m, h] = [−h/m², I/m].
    gradient = np.hstack((-com[:, None] / mass, np.eye(3) / mass))
    com_std = np.sqrt(np.diag(gradient @ covariance[:4, :4] @ gradient.T))
    uncertain = []
    if 3.0 * mass_std > settings.mass_tolerance:
        uncertain.append(f"mass ± {mass_std:.3g} kg (3σ limit {settings.mass_tolerance:g})")
    # The distance error ‖ĉ − c‖: its standard deviation is at most √(σx² + σy² + σz²).
    com_spread = float(np.sqrt(np.sum(com_std**2)))
    if 3.0 * com_spread > settings.com_tolerance:
        worst = int(np.argmax(com_std))
        uncertain.append(
            f"com ± {com_spread * 1e3:.3g} mm (3σ limit {settings.com_tolerance * 1e3:g} mm; "
            f"worst {PARAMETER_NAMES[1 + worst]} ± {com_std[worst] * 1e3:.3g} mm)"
        )
    if uncertain:
        return PayloadRefusal(
            Refusal.UNCERTAIN,
            f"estimate m = {mass:.4g} kg, c = {np.round(com, 4).tolist()} m too uncertain: "
            + "; ".join(uncertain),
            condition,
            count,
        )
    return PayloadEstimate(
        payload=Payload(mass, np.asarray(com, dtype=np.float64)),
        mass_std=mass_std,
        com_std=com_std,
        condition=condition,
        residual_rms=float(np.sqrt(np.mean(fitted**2))),
        samples=count,
        bias=bias,
    )


def identify_mass(
    model: RobotModel,
    q: FloatArray,
    effort: FloatArray,
    v: FloatArray | None = None,
    joints: Sequence[str] | None = None,
    settings: IdentificationSettings = IdentificationSettings(),
) -> PayloadResult:
    """The payload's mass alone, from holds that need not determine its centre of mass — one
    configuration is enough (a grasp holding its object still at one pose).

    At one configuration the component of h = m c along gravity (in the TCP frame, R_tcpᵀ ĝ)
    moves no joint: A(q) has that null direction, and θ = [m, h] is not determined (κ = ∞,
    :func:`identify_payload` refuses it as unexcited). The mass is: its column has no part in
    the null direction (e₁ ⟂ null(A)), so it is an estimable function of θ. Solved by the
    truncated pseudo-inverse of the weighted, column-scaled regressor: singular directions
    below σ_max / ``max_condition`` are dropped (the null direction), θ̂ is the solution with
    no part along them, m̂ = θ̂₀ and cov = σ̂² V_r S_r⁻² V_rᵀ (scaled back), σ̂² as in
    :func:`identify_payload`. The condition reported is that of the kept directions.

    The estimate's ``payload.com`` is ĥ/m̂ with no part along the dropped directions: not the
    object's centre of mass, but one that gives the same gravity torques at every
    configuration whose TCP has the same orientation as the holds' (the gravity direction in
    the TCP frame unchanged: a lift, a carry at a constant tool orientation); ``com_std`` is NaN
    and ``com_determined`` False. Refusals as :func:`identify_payload`, plus ``unexcited`` when
    the mass itself is not determined (its column in a dropped direction); ``uncertain`` judges
    the mass alone."""
    return identify_payload(model, q, effort, v, joints=joints, settings=settings, mass_only=True)


def _solve_mass(
    regressor: PayloadRegressor,
    q: FloatArray,
    effort: FloatArray,
    count: int,
    empty_q: FloatArray | None,
    empty_effort: FloatArray | None,
    settings: IdentificationSettings,
) -> PayloadResult:
    """:func:`identify_mass` on checked samples."""
    blocks, targets = [], []
    for i in range(count):
        blocks.append(regressor.matrix(q[i]))
        residual = effort[i, regressor.rows] - regressor.unloaded_gravity(q[i])
        if empty_q is not None and empty_effort is not None:
            residual -= empty_effort[i, regressor.rows] - regressor.unloaded_gravity(empty_q[i])
        targets.append(residual)
    matrix, target = np.vstack(blocks), np.concatenate(targets)
    weights = np.tile(1.0 / _joint_noise(settings, regressor.joints), count)
    weighted, weighted_target = matrix * weights[:, None], target * weights
    norms = np.linalg.norm(weighted, axis=0)
    if not norms[0] > 0.0:
        return PayloadRefusal(
            Refusal.UNEXCITED, "the mass moves no joint used at these holds", math.inf, count
        )
    norms[norms == 0.0] = 1.0
    left, singular, right = np.linalg.svd(weighted / norms, full_matrices=False)
    kept = int(np.sum(singular > singular[0] / settings.max_condition))
    if weighted.shape[0] < kept + 1:
        return PayloadRefusal(
            Refusal.TOO_FEW,
            f"{weighted.shape[0]} equations for {kept} determined unknowns: hold longer or in "
            "more configurations",
            math.nan,
            count,
        )
    dropped = right[kept:]
    if dropped.size and float(np.max(np.abs(dropped[:, 0]))) > 1e-3:
        return PayloadRefusal(
            Refusal.UNEXCITED,
            "the holds do not determine the mass: it shares an unexcited direction with the "
            f"centre of mass (its part {float(np.max(np.abs(dropped[:, 0]))):.2g})",
            math.inf,
            count,
        )
    condition = float(singular[0] / singular[kept - 1])
    basis, inverse = right[:kept].T, 1.0 / singular[:kept]
    scaled = basis @ (inverse * (left[:, :kept].T @ weighted_target))
    solution = scaled / norms
    fitted = target - matrix @ solution  # [N·m | N]
    dof = weighted.shape[0] - kept
    scale = max(float(np.sum((fitted * weights) ** 2)) / dof, 1.0)
    covariance = scale * (basis * inverse**2) @ basis.T / np.outer(norms, norms)
    mass, mass_std = float(solution[0]), math.sqrt(max(float(covariance[0, 0]), 0.0))
    if not mass > 3.0 * mass_std:
        return PayloadRefusal(
            Refusal.NO_MASS,
            f"mass {mass:.4g} ± {mass_std:.2g} kg is not distinguishable from zero: no payload",
            condition,
            count,
        )
    if 3.0 * mass_std > settings.mass_tolerance:
        return PayloadRefusal(
            Refusal.UNCERTAIN,
            f"estimate m = {mass:.4g} kg too uncertain: mass ± {mass_std:.3g} kg (3σ limit "
            f"{settings.mass_tolerance:g})",
            condition,
            count,
        )
    return PayloadEstimate(
        payload=Payload(mass, np.asarray(solution[1:4] / mass, dtype=np.float64)),
        mass_std=mass_std,
        com_std=np.full(3, math.nan),
        condition=condition,
        residual_rms=float(np.sqrt(np.mean(fitted**2))),
        samples=count,
        bias=np.zeros(regressor.model.nv),
        com_determined=False,
    )


def _joint_noise(settings: IdentificationSettings, joints: Sequence[str]) -> FloatArray:
    """σ [N·m | N] of each of ``joints``: its ``joint_noise`` entry, else ``torque_noise``.
    ValueError naming a value that is not finite and positive, or an unknown joint."""
    unknown = sorted(set(settings.joint_noise) - set(joints))
    if unknown:
        raise ValueError(f"joint_noise names joint(s) whose torques are not used: {unknown}")
    noise = np.array([settings.joint_noise.get(name, settings.torque_noise) for name in joints])
    bad = [name for name, value in zip(joints, noise, strict=True) if not value > 0]
    if bad or not np.all(np.isfinite(noise)):
        raise ValueError(f"torque noise must be finite and positive, got {noise.tolist()}")
    return noise


def _samples(array: FloatArray, size: int, name: str) -> FloatArray:
    """``array`` as N × size (one sample a row; a single sample may be 1-D)."""
    out = np.array(array, dtype=np.float64)
    if out.ndim == 1:
        out = out[None, :]
    if out.ndim != 2 or out.shape[1] != size:
        raise ValueError(f"{name}: expected samples of {size} values, got shape {out.shape}")
    return out


@dataclass(frozen=True)
class HoldPlan:
    """Where to hold for an identification: ``configurations`` (model order) [rad | m], each
    inside the joint limits, and the ``condition`` [-] of the regressor they give."""

    configurations: tuple[FloatArray, ...]
    condition: float


def plan_holds(
    model: RobotModel,
    start: FloatArray,
    amplitude: float = 0.6,
    joints: Sequence[str] | None = None,
    margin: float = 0.05,
) -> HoldPlan:
    """Hold configurations around ``start`` that turn the TCP about different axes: ``start``,
    then each of the last three joints that move the TCP (``joints``: the three to move, by
    name) turned by +``amplitude`` and −``amplitude`` [rad] alone, then the first two together —
    eight holds, each joint at most ``amplitude`` from ``start`` (a small, bounded motion with
    the object in hand) and at least ``margin`` [rad | m] inside its limits (an offset that would
    leave them is folded to the other side). The plan's condition says whether it is enough
    (:func:`identify_payload` refuses above its limit): check it before moving."""
    start = np.asarray(start, dtype=np.float64)
    moved = tuple(joints) if joints is not None else supporting_joints(model)[-3:]
    indices = model.indices(moved)
    lower = model.limits.lower[indices] + margin
    upper = model.limits.upper[indices] - margin
    offsets = [np.zeros(len(moved))]
    for axis in range(len(moved)):
        for sign in (1.0, -1.0):
            offset = np.zeros(len(moved))
            offset[axis] = sign * amplitude
            offsets.append(offset)
    if len(moved) >= 2:
        both = np.zeros(len(moved))
        both[:2] = amplitude
        offsets.append(both)
    configurations = []
    for offset in offsets:
        q = start.copy()
        target = start[indices] + offset
        target = np.where(target > upper, start[indices] - offset, target)
        target = np.where(target < lower, start[indices] - offset, target)
        q[indices] = np.clip(target, lower, upper)
        configurations.append(q)
    regressor = PayloadRegressor(model)
    return HoldPlan(tuple(configurations), regressor_condition(regressor, configurations))
