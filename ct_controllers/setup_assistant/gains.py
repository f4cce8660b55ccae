"""Gains designed from the model, for joint impedance, computed torque and the safe hold, at the
loop's rate; and the reference and limiter limits that go with them.

Per joint i (model order), over the stack's own check configurations (home and the seeded
samples of :func:`~ct_controllers.runtime.gain_stability.check_configurations`) and
``EXTRA_SAMPLES`` more:

1. **Reflected inertia**, worst case: mᵢ = maxₙ Mᵢᵢ(qₙ) [kg·m² | kg] (M includes the drives'
   armature), the heaviest the joint ever is with the others held: a loop designed on it reaches
   the bandwidth everywhere (lighter configurations respond faster).
2. **Target**: bandwidth ωᵢ = ``bandwidth`` [rad/s] and damping ratio ζᵢ. Joint impedance:
   Kᵢ = mᵢ ωᵢ² [N·m/rad | N/m], Dᵢ = 2 ζᵢ mᵢ ωᵢ [N·m·s/rad | N·s/m]; computed torque (error
   dynamics ë + kd ė + kp e = 0): kpᵢ = ωᵢ² [s⁻²], kdᵢ = 2 ζᵢ ωᵢ [s⁻¹].
3. **Effort limit**: a tracking error of ``MAX_ERROR`` (0.1 rad, 0.01 m) must not ask more than
   the effort left after gravity, Kᵢ · e ≤ τᵢ − maxₙ |gᵢ(qₙ)| (for computed torque the joint's
   own term, mᵢ kpᵢ e, the same bound): ωᵢ ≤ √((τᵢ − gᵢ) / (mᵢ e)). A joint whose limit does
   not hold the arm everywhere in its ranges (gᵢ ≥ τᵢ: Baxter's shoulder, whose gravity spring
   the URDF lacks) is reported and designed with gᵢ = ``SHORT_GRAVITY`` · τᵢ: the arm sags at
   the limit where it cannot hold itself; ct-setup's home is chosen where it can.
4. **Sampled-loop stability** at ``update_rate``, by the stack's own check
   (:class:`~ct_controllers.runtime.gain_stability.GainStability`, with 0 and 1 period of delay:
   MuJoCo and the bus/topic backends) applied to the gains × ``GAIN_MARGIN``: until that is
   stable everywhere, one step is taken at the worst configuration — one joint's ζᵢ × ``STEP``
   (not below ``MIN_DAMPING_RATIO``), the one that lowers the spectral radius most, when it
   does at least half as much as the best step of one joint's ωᵢ × ``STEP``; else that one.
   The written gains are then stable with a gain margin of 2 (doubling every gain keeps every
   sampled loop stable). The loop's plant includes the joints' own viscous damping (the URDF's
   ``<dynamics damping>``, see :mod:`~ct_controllers.runtime.gain_stability`).
5. **Dry friction** (the URDF's ``<dynamics friction>``): each law's friction compensation
   (:mod:`~ct_controllers.controllers.friction`) gets the slope Kᵢ that keeps the stall within
   the TCP tolerance of :mod:`~ct_controllers.setup_assistant.friction`, lowered (× ``STEP`` on
   the joint that helps most, its law's gains held) until the law with it is stable × margin
   at ``update_rate`` as in step 4; the stall that remains, f / (K_f + the law's own stiffness),
   is reported. Without friction the slope is 0 (the term is off).

The default controller is joint impedance, unless the stability step held an arm joint's
impedance bandwidth under half the target where computed torque keeps twice as much.
The safe hold (damping only) starts at the impedance damping and is lowered the same way.
Reference limits: acceleration aᵢ = min(½ (τᵢ − gᵢ) / mᵢ, ωᵢ² · ``TRACKING_ERROR``) — half the
effort left after gravity, and a tracking error of about ``TRACKING_ERROR`` under joint impedance
(e ≈ a / ω²) — jerk 10 aᵢ; effort-rate limit τᵢ / ``EFFORT_RISE`` (full effort in 50 ms).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ct_controllers.controllers.computed_torque import ComputedTorqueController
from ct_controllers.controllers.controller import Controller, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.gain_stability import GainStability, Stability, check_configurations
from ct_controllers.setup_assistant.design_model import DesignModel
from ct_controllers.setup_assistant.errors import SetupError
from ct_controllers.setup_assistant.friction import FrictionNeed, friction_need, stall
from ct_controllers.types import FloatArray

BANDWIDTH = 20.0  # [rad/s] default target closed-loop bandwidth
DAMPING_RATIO = 1.0  # [-] default target damping ratio (critically damped)
MIN_DAMPING_RATIO = 0.5  # [-] the stability step lowers ζ no further (then ω)
GAIN_MARGIN = 2.0  # [-] the written gains × this are still stable
DELAYS = (0, 1)  # [periods] measurement-to-effort delays checked (MuJoCo; bus or topics)
STEP = 0.9  # [-] one stability step: ω or ζ of one joint × this
MAX_STEPS = 600
EXTRA_SAMPLES = 40  # configurations checked besides the stack's own
MAX_ERROR = (0.1, 0.01)  # [rad, m] revolute, prismatic: K · this ≤ effort left after gravity
TRACKING_ERROR = (0.05, 0.005)  # [rad, m] the reference acceleration's tracking error target
EFFORT_RISE = 0.05  # [s] the effort-rate limit reaches the effort limit in this long
SHORT_GRAVITY = 0.5  # [-] of the effort limit: the gravity a joint too weak to hold the arm
# everywhere is designed with (the other half is its feedback's)
JERK_PER_ACCELERATION = 10.0  # [1/s]
JOINT_IMPEDANCE = "joint_impedance"  # the controller instances written
COMPUTED_TORQUE = "computed_torque"


@dataclass(frozen=True)
class JointGains:
    """One joint's design: worst-case inertia [kg·m² | kg], effort limit and largest gravity
    effort [N·m | N], the bandwidths [rad/s] and damping ratios chosen for joint impedance and
    computed torque, and what lowered them (empty: the targets stood); its dry friction
    [N·m | N], the friction stall allowed and the largest left under each law [rad | m] (0
    without friction)."""

    name: str
    inertia: float
    effort: float
    gravity: float
    bandwidth: float
    damping_ratio: float
    ct_bandwidth: float
    ct_damping_ratio: float
    lowered_by: tuple[str, ...]
    friction: float = 0.0
    allowed_stall: float = 0.0
    stall: float = 0.0
    ct_stall: float = 0.0


@dataclass(frozen=True)
class GainDesign:
    """The designed values, in model order; ``joints`` in configuration order; ``radius``: per
    check (controller name, ``safe_hold.damping``), the worst spectral radius of its gains ×
    ``GAIN_MARGIN`` over the checked configurations and delays."""

    stiffness: FloatArray
    damping: FloatArray
    kp: FloatArray
    kd: FloatArray
    friction_stiffness: FloatArray  # [N·m/rad | N/m] joint impedance's compensation slope
    ct_friction_stiffness: FloatArray  # [N·m/rad | N/m] computed torque's
    hold_damping: FloatArray
    max_acceleration: FloatArray
    max_jerk: FloatArray
    effort_rate_limit: FloatArray
    joints: tuple[JointGains, ...]
    radius: Mapping[str, float]
    bandwidth: float
    damping_ratio: float
    update_rate: float
    default_controller: str  # JOINT_IMPEDANCE or COMPUTED_TORQUE (see design_gains)


class _DampingOnly(Controller):
    """The safe hold's feedback (τ = −D v) as a controller, so that the stack's
    :class:`GainStability` evaluates trial damping through ``gains`` like any controller's."""

    GAIN_NAMES = ("damping",)

    def __init__(self, model: RobotModel, damping: FloatArray) -> None:
        super().__init__()
        self.model = model
        self.damping = np.array(damping, dtype=np.float64)

    def linear_feedback(
        self,
        q: FloatArray,
        gains: Mapping[str, FloatArray] | None = None,
        model: RobotModel | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        damping = (gains or {}).get("damping", self.damping)
        return np.zeros((damping.size, damping.size)), np.diag(damping)

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return -self.damping * state.v


def configurations(design: DesignModel, home: FloatArray) -> list[FloatArray]:
    """The stack's check configurations at ``home`` (model order) and ``EXTRA_SAMPLES`` more,
    seeded, joint ``i mod nv`` of the i-th at zero (or its nearest limit), as the stack's are."""
    model = design.model
    found = check_configurations(model, home)
    rng = np.random.default_rng(1)
    lower, upper = model.limits.lower, model.limits.upper
    for i in range(EXTRA_SAMPLES):
        q = rng.uniform(lower, upper)
        q[i % model.nv] = min(max(0.0, lower[i % model.nv]), upper[i % model.nv])
        found.append(q)
    return found


Gains = Callable[[FloatArray, FloatArray], dict[str, FloatArray]]


def _lower(
    checks: list[GainStability],
    gains: Gains,
    omega: FloatArray,
    zeta: FloatArray,
    names: tuple[str, ...],
    reasons: list[list[str]],
    what: str,
    rate: float,
    damping_only: bool = False,
) -> float:
    """Lower ω, ζ (in place) until ``gains(ω, ζ)`` × margin is stable in every check (module
    docstring, step 4); record why per joint; return the worst radius at the end."""
    lowered: dict[int, Stability] = {}
    for _ in range(MAX_STEPS):
        worst, check = max(
            ((c.worst(_scaled(gains(omega, zeta))), c) for c in checks),
            key=lambda pair: pair[0].radius if pair[0] is not None else 0.0,
        )
        if worst is None or worst.stable:
            break
        # The best step of each kind; the damping step is taken when it lowers the radius at
        # least half as much as the bandwidth step (a light mode over-damped by gains sized for
        # the heavy configuration is the usual cause, and ζ costs less than ω), else that one.
        found: dict[str, tuple[float, int]] = {}
        moves = ("damping",) if damping_only else ("damping", "bandwidth")
        if not np.any(zeta):  # a law without a damping ratio (the friction slope): ω only
            moves = ("bandwidth",)
        for move in moves:
            for j in range(omega.size):
                trial_omega, trial_zeta = omega.copy(), zeta.copy()
                if move == "bandwidth":
                    trial_omega[j] *= STEP
                elif zeta[j] * STEP >= MIN_DAMPING_RATIO or damping_only:
                    trial_zeta[j] *= STEP
                else:
                    continue
                trial = check.at(worst.at, _scaled(gains(trial_omega, trial_zeta)))
                assert trial is not None
                if move not in found or trial.radius < found[move][0]:
                    found[move] = (trial.radius, j)
        gain = {m: worst.radius - found[m][0] for m in found}
        if gain.get("damping", 0.0) > 0.0 and gain["damping"] >= 0.5 * gain.get("bandwidth", 0.0):
            best: tuple[float, int, str] | None = (*found["damping"], "damping")
        elif gain.get("bandwidth", 0.0) > 0.0:
            best = (*found["bandwidth"], "bandwidth")
        else:
            best = None
        if best is None or best[0] >= worst.radius:
            omega *= STEP  # no one joint helps: all together
            for j in range(omega.size):
                lowered.setdefault(j, worst)
            continue
        _, j, move = best
        if move == "bandwidth":
            omega[j] *= STEP
        else:
            zeta[j] *= STEP
        lowered.setdefault(j, worst)
    else:
        raise SetupError(f"{what}: no stable gains found in {MAX_STEPS} steps (a model problem?)")
    for j, where in lowered.items():
        reasons[j].append(
            f"{what} sampled loop at {rate:g} Hz (radius {where.radius:.2f} with gains "
            f"×{GAIN_MARGIN:g} at q = [{', '.join(f'{v:.2f}' for v in where.at)}])"
        )
    final = [c.worst(_scaled(gains(omega, zeta))) for c in checks]
    return max(s.radius for s in final if s is not None)


def _scaled(gains: dict[str, FloatArray]) -> dict[str, FloatArray]:
    return {name: GAIN_MARGIN * value for name, value in gains.items()}


def _friction_slope(
    need: FrictionNeed,
    law: dict[str, FloatArray],
    controller: Controller,
    samples: list[FloatArray],
    period: float,
    names: tuple[str, ...],
    reasons: list[list[str]],
    what: str,
    rate: float,
) -> tuple[FloatArray, float]:
    """Step 5 for one law (its gains ``law`` held): the friction compensation's slope [N·m/rad |
    N/m] per joint, and the worst radius of the law with it × margin."""
    checks = [GainStability(controller.model, controller, samples, period, d) for d in DELAYS]
    scale = np.ones(need.friction.size)  # the slope is need.stiffness × scale²

    def with_slope(s: FloatArray, z: FloatArray) -> dict[str, FloatArray]:
        return {**law, "friction_stiffness": need.stiffness * s * s}

    what = f"{what} friction compensation"
    radius = _lower(checks, with_slope, scale, np.zeros_like(scale), names, reasons, what, rate)
    return with_slope(scale, scale)["friction_stiffness"], radius


def design_gains(
    design: DesignModel,
    home: FloatArray,
    update_rate: float,
    bandwidth: float = BANDWIDTH,
    damping_ratio: float = DAMPING_RATIO,
) -> GainDesign:
    """The design of the module docstring at ``home`` [rad | m] (model order)."""
    model = design.model
    names = design.names
    samples = configurations(design, home)
    diagonals = [np.diag(model.mass_matrix(q)) for q in samples]
    inertia = np.max(diagonals, axis=0)
    lightest = np.min(diagonals, axis=0)
    gravity = np.max([np.abs(model.gravity(q)) for q in samples], axis=0)
    effort = model.limits.effort
    for j, name in enumerate(names):
        if not (effort[j] > 0 and math.isfinite(effort[j])):
            raise SetupError(
                f"joint '{name}' has effort limit {effort[j]:g} in the URDF: the stack clamps "
                "every command to it; give the drive's limit in <limit effort=...>"
            )
    reasons: list[list[str]] = [[] for _ in names]
    short = gravity >= effort
    for j in np.flatnonzero(short).tolist():
        reasons[j].append(
            f"effort: its limit {effort[j]:g} does not hold the arm against gravity everywhere "
            f"(up to {gravity[j]:.3g} at the sampled configurations: it sags there at the "
            f"limit), designed as if gravity took {SHORT_GRAVITY:g} of it"
        )
    designed_gravity = np.where(short, SHORT_GRAVITY * effort, gravity)
    error = np.where(design.prismatic, MAX_ERROR[1], MAX_ERROR[0])
    spare = effort - designed_gravity
    effort_bandwidth = np.sqrt(spare / (inertia * error))
    omega = np.full(model.nv, float(bandwidth))
    for j in np.flatnonzero(effort_bandwidth < omega).tolist():
        omega[j] = effort_bandwidth[j]
        unit = "m" if design.prismatic[j] else "rad"
        reasons[j].append(
            f"effort: {error[j]:g} {unit} × K ≤ limit {effort[j]:g} − gravity "
            f"{round(designed_gravity[j], 6):.3g}"
        )
    ct_omega, zeta, ct_zeta = (
        omega.copy(),
        np.full(model.nv, damping_ratio),
        np.full(model.nv, damping_ratio),
    )
    period = 1.0 / update_rate

    def impedance(w: FloatArray, z: FloatArray) -> dict[str, FloatArray]:
        return {"stiffness": inertia * w * w, "damping": 2.0 * z * inertia * w}

    def computed(w: FloatArray, z: FloatArray) -> dict[str, FloatArray]:
        return {"kp": w * w, "kd": 2.0 * z * w}

    start = impedance(omega, zeta)
    controllers: dict[str, Controller] = {
        JOINT_IMPEDANCE: JointImpedanceController(model, start["stiffness"], start["damping"]),
        COMPUTED_TORQUE: ComputedTorqueController(model, ct_omega**2, 2.0 * ct_zeta * ct_omega),
    }
    radius: dict[str, float] = {}
    for name, w, z, law in (
        (JOINT_IMPEDANCE, omega, zeta, impedance),
        (COMPUTED_TORQUE, ct_omega, ct_zeta, computed),
    ):
        checks = [GainStability(model, controllers[name], samples, period, d) for d in DELAYS]
        radius[name] = _lower(checks, law, w, z, names, reasons, name, update_rate)
    gains = impedance(omega, zeta)
    ct = computed(ct_omega, ct_zeta)
    need = friction_need(design, samples)
    slopes = {name: np.zeros(model.nv) for name in (JOINT_IMPEDANCE, COMPUTED_TORQUE)}
    for name, held in ((JOINT_IMPEDANCE, gains), (COMPUTED_TORQUE, ct)):
        if need.any:  # (without friction the term is off: slope 0, the law's radius stands)
            slopes[name], radius[name] = _friction_slope(
                need, held, controllers[name], samples, period, names, reasons, name, update_rate
            )
    stalls = stall(need.friction, slopes[JOINT_IMPEDANCE] + gains["stiffness"])
    ct_stalls = stall(need.friction, slopes[COMPUTED_TORQUE] + ct["kp"] * lightest)
    hold_scale = np.ones(model.nv)
    hold_zeta = np.ones(model.nv)

    def hold(w: FloatArray, z: FloatArray) -> dict[str, FloatArray]:
        return {"damping": gains["damping"] * z}

    hold_checks = [
        GainStability(model, _DampingOnly(model, gains["damping"]), samples, period, d)
        for d in DELAYS
    ]
    radius["safe_hold.damping"] = _lower(
        hold_checks, hold, hold_scale, hold_zeta, names, reasons, "safe_hold", update_rate, True
    )
    # The default controller: joint impedance, unless the sampled loop held an arm joint's
    # impedance to under half the target bandwidth where computed torque (which acts through
    # M(q), so a light mode gets light gains) keeps at least twice as much.
    arm = design.arm
    held = (omega[arm] < 0.5 * bandwidth) & (ct_omega[arm] >= 2.0 * omega[arm])
    default = COMPUTED_TORQUE if np.any(held) else JOINT_IMPEDANCE
    followed = ct_omega if default == COMPUTED_TORQUE else omega
    tracking = np.where(design.prismatic, TRACKING_ERROR[1], TRACKING_ERROR[0])
    acceleration = np.minimum(0.5 * spare / inertia, followed**2 * tracking)
    joints = tuple(
        JointGains(
            name=names[j],
            inertia=float(inertia[j]),
            effort=float(effort[j]),
            gravity=float(gravity[j]),
            bandwidth=float(omega[j]),
            damping_ratio=float(zeta[j]),
            ct_bandwidth=float(ct_omega[j]),
            ct_damping_ratio=float(ct_zeta[j]),
            lowered_by=tuple(reasons[j]),
            friction=float(need.friction[j]),
            allowed_stall=float(need.allowed[j]),
            stall=float(stalls[j]),
            ct_stall=float(ct_stalls[j]),
        )
        for j in design.order
    )
    return GainDesign(
        stiffness=gains["stiffness"],
        damping=gains["damping"],
        kp=ct["kp"],
        kd=ct["kd"],
        friction_stiffness=slopes[JOINT_IMPEDANCE],
        ct_friction_stiffness=slopes[COMPUTED_TORQUE],
        hold_damping=hold(hold_scale, hold_zeta)["damping"],
        max_acceleration=acceleration,
        max_jerk=JERK_PER_ACCELERATION * acceleration,
        effort_rate_limit=effort / EFFORT_RISE,
        joints=joints,
        radius=radius,
        bandwidth=bandwidth,
        damping_ratio=damping_ratio,
        update_rate=update_rate,
        default_controller=default,
    )
