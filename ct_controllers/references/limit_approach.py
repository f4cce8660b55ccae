"""Goals at a joint limit: planned inside it, and approached gently enough that tracking does
not carry the arm past it.

Why. A jerk-limited reference never leaves the joint range, but the arm follows it with an error.
While the reference brakes with a deceleration a [rad/s²], a controller without inertia
feed-forward (joint impedance, τ = K e + D ė + g) has to make the braking torque M(q)·a out of
its spring, so the arm runs *ahead* of the reference by about e ≈ M(q)·a / K, and is still ahead
when the reference stops at the goal. Measured in MuJoCo lockstep with the bundled gains and the
reference's 3 rad/s² (joint-range constraints switched off, which otherwise catch the arm 2 mrad
past the limit and hide the rest): 7 mrad past the goal for joint1 from home, 22 mrad with the arm
stretched out (M₁₁ = 4.45 kg·m², K₁ = 600 N·m/rad: M·a/K = 22 mrad), 25 mrad for joint2. That is
more than MoveJoints' 10 mrad success tolerance, so stopping short alone cannot absorb it.
Computed torque feeds M(q)·q̈* forward and, with an exact model, does not run ahead (0 measured);
with a model error it does, in proportion to the error.

What, per joint that has an approach (the arm's revolute joints in the stack):

1. The planned goal is kept ``margin`` inside the range (a clip: goals further inside are not
   touched). A goal exactly at a limit ends ``margin`` short of it, which MoveJoints' tolerance
   accepts; the trajectory's ``goal`` (and the loop's reference) show the planned value.
2. A joint whose planned goal lies within ``zone = margin · a_max / deceleration`` of the limit
   it moves towards brakes towards that limit with at most ``deceleration`` (an asymmetric
   acceleration bound of the planner: Ruckig's ``min_acceleration`` near the upper limit,
   ``max_acceleration`` near the lower one); speeding up is not slowed. The lead M·a/K shrinks in
   proportion, and outside the zone the lead at the full a_max is below the distance to the limit
   (the lead scales with a, so zone is where a_max would use up the margin's budget).
3. If braking that gently from the measured velocity would carry the *reference* past its goal
   (a new goal close ahead of a fast-moving joint), the trajectory is planned with the reference
   limits' own deceleration instead: the gentler approach must never be the reason for an
   overshoot.

Defaults (bundled robot and gains): ``LIMIT_MARGIN`` 5 mrad, half the MoveJoints tolerance, so
that a goal at a limit still succeeds with 5 mrad left for the final tracking error; and
``LIMIT_APPROACH_DECELERATION`` 0.3 rad/s², chosen so that the joint impedance's worst lead,
max over q of M_ii(q) / K_i = 4.45 / 600 s² (joint1 and joint2, arm stretched) times 0.3 rad/s²
= 2.2 mrad, stays within half the margin (the rest for the coupling from the other joints and
the second-order transient). Stiffer gains or a smaller reference acceleration need no change;
a softer stiffness K or a heavier arm needs a proportionally smaller deceleration. Measured with
them (test/test_joint_limit_goals.py): joint impedance 2.0–2.2 mrad past the planned goal for
joints 1–2, so at least 2.8 mrad inside the limit, computed torque on the planned goal; the price
is a longer final braking, e.g. joint1 from 0 to 2.967 rad in 5.1 s instead of 3.9 s.

Starts at or past a limit (issue 23). A plan starts on the measured state, and that state can lie
at a limit moving towards it, or past it (the arm tracking a reference runs ahead of it; a goal
preempting another one takes the arm where that one left it: measured 5.3 mrad of reference past
joint7's limit, a finger 24.5 mm past its own). From there a jerk-limited reference that starts
on the measured (q, v) runs further out while it brakes: from v towards the limit and a = 0,
with the bounds a_max and j_max, a stop that ends at rest (a = 0) covers

    d(v) = v·√(v / j_max)                      for v ≤ a_max² / j_max  (a triangular pulse)
    d(v) = v² / (2 a_max) + v·a_max / (2 j_max) otherwise            (a trapezoid)

(the velocity curve of either is point-symmetric about its middle: d = v·T/2). So the plan
starts from the measured state *clipped into the limits* (:meth:`LimitApproach.start_inside`): q
into [lower, upper] — a step back of at most the excursion, which pulls the arm inside — and a
velocity towards a limit capped at the speed whose stop fits the room left before the margin
(none within it: the arm tracks a braking reference with a lead, and a finger on its soft
joint impedance overshot a reference braked onto its limit by 53 µm), the inverse of d:

    v_max(d) = (d² j_max)^(1/3)                              for d ≤ a_max³ / j_max²
    v_max(d) = −a_max² / (2 j_max) + √(a_max⁴ / (4 j_max²) + 2 a_max d)   otherwise

(0 at the margin). Braking from there takes the reference to rest inside the range with bounded
acceleration and jerk; the planner then checks the plan's position extrema against the range
(a time-synchronised profile may brake more gently than the fastest stop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ct_controllers.types import FloatArray

LIMIT_MARGIN = 0.005  # [rad] a goal is planned at least this far inside the joint range
LIMIT_APPROACH_DECELERATION = 0.3  # [rad/s²] braking towards a limit the goal is near
OVERSHOOT_TOLERANCE = 1e-9  # [rad | m] Ruckig's own rounding at the target
# [m] a gripper finger's references are kept this far inside its range: a reference on the limit
# itself puts the finger past it by its tracking error (measured: µm at rest, against MuJoCo's
# soft joint-range constraint) — 0.5 mm costs the servo's 2000 N/m 1 N, a fraction of any grip.
FINGER_LIMIT_MARGIN = 0.0005


@dataclass(frozen=True)
class LimitApproach:
    """Per joint (model order): the position range [rad | m], the ``margin`` [rad | m] a goal is
    planned inside it (0 = none) and the ``deceleration`` [rad/s² | m/s²] of the braking towards
    a limit the goal is near (inf = not limited). See the module docstring for why."""

    lower: FloatArray  # [rad | m]
    upper: FloatArray  # [rad | m]
    margin: FloatArray  # [rad | m]
    deceleration: FloatArray  # [rad/s² | m/s²]

    def __post_init__(self) -> None:
        arrays = {
            name: np.array(getattr(self, name), dtype=np.float64).reshape(-1)
            for name in ("lower", "upper", "margin", "deceleration")
        }
        sizes = {name: value.size for name, value in arrays.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"limit approach: vectors of different lengths {sizes}")
        lower, upper = arrays["lower"], arrays["upper"]
        margin, deceleration = arrays["margin"], arrays["deceleration"]
        if not (np.all(np.isfinite(margin)) and np.all(margin >= 0)):
            raise ValueError(f"limit approach: margin must be finite and >= 0: {margin}")
        if not np.all(lower <= upper):
            raise ValueError(f"limit approach: range [{lower}, {upper}] empty or not numbers")
        with_margin = margin > 0
        if not np.all(np.isfinite(lower[with_margin]) & np.isfinite(upper[with_margin])):
            raise ValueError(f"limit approach: a margin on an unbounded range [{lower}, {upper}]")
        if not np.all((upper - lower)[with_margin] > 2 * margin[with_margin]):
            raise ValueError(
                f"limit approach: range [{lower}, {upper}] narrower than twice the margin {margin}"
            )
        if not (np.all(deceleration > 0) and not np.any(np.isnan(deceleration))):
            raise ValueError(f"limit approach: deceleration must be > 0: {deceleration}")
        for name, value in arrays.items():
            object.__setattr__(self, name, value)

    @classmethod
    def for_joints(
        cls,
        lower: FloatArray,
        upper: FloatArray,
        selected: np.ndarray,
        margin: float = LIMIT_MARGIN,
        deceleration: float = LIMIT_APPROACH_DECELERATION,
        other_margin: float = 0.0,
    ) -> LimitApproach:
        """``margin`` and ``deceleration`` for the ``selected`` joints (a boolean mask) that
        have a bounded range; ``other_margin`` and no gentle braking for the other bounded
        joints (e.g. a gripper's fingers: ``FINGER_LIMIT_MARGIN``); nothing for unbounded
        ones."""
        bounded = np.isfinite(lower) & np.isfinite(upper)
        mask = np.asarray(selected, dtype=bool) & bounded
        return cls(
            lower=np.asarray(lower, dtype=np.float64),
            upper=np.asarray(upper, dtype=np.float64),
            margin=np.where(mask, margin, np.where(bounded, other_margin, 0.0)),
            deceleration=np.where(mask, deceleration, np.inf),
        )

    def start_inside(
        self,
        q: FloatArray,
        v: FloatArray,
        acceleration: FloatArray,
        jerk: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """The measured (q [rad | m], v [rad/s | m/s]) clipped into the limits (module
        docstring): q into [lower, upper]; v towards a limit at most the speed from which a
        stop within ``acceleration`` [rad/s² | m/s²] and ``jerk`` [rad/s³ | m/s³] (from a = 0
        to rest) ends ``margin`` short of it (0 within the margin). New arrays; a state well
        inside keeps its values exactly."""
        q = np.clip(np.asarray(q, dtype=np.float64), self.lower, self.upper)
        v = np.array(v, dtype=np.float64)
        # The room before the margin (none once inside it): a plan that starts outside the
        # margin zone does not enter it braking, one that starts in it goes no further out.
        room_up = np.maximum(self.upper - self.margin - q, 0.0)
        room_down = np.maximum(q - self.lower - self.margin, 0.0)
        toward_upper = stopping_speed(room_up, acceleration, jerk)
        toward_lower = stopping_speed(room_down, acceleration, jerk)
        return q, np.minimum(np.maximum(v, -toward_lower), toward_upper)

    def outside(self, lowest: FloatArray, highest: FloatArray) -> np.ndarray:
        """Per joint: whether positions with extrema ``lowest`` / ``highest`` [rad | m] leave
        the range (by more than the planner's rounding)."""
        return (lowest < self.lower - OVERSHOOT_TOLERANCE) | (
            highest > self.upper + OVERSHOOT_TOLERANCE
        )

    def planned_goal(self, goal: FloatArray) -> FloatArray:
        """``goal`` kept ``margin`` inside the range (unchanged where it already is)."""
        return np.clip(goal, self.lower + self.margin, self.upper - self.margin)

    def braking(self, goal: FloatArray, acceleration: FloatArray) -> Braking:
        """The planner's asymmetric acceleration bounds for the planned ``goal``, from the
        reference's symmetric ``acceleration`` bound [rad/s² | m/s²]: towards a limit within
        ``margin · acceleration / deceleration`` of the goal the braking is at most
        ``deceleration``."""
        acceleration = np.asarray(acceleration, dtype=np.float64)
        brake = np.minimum(self.deceleration, acceleration)
        zone = self.margin * acceleration / brake
        gentler = (self.margin > 0) & (brake < acceleration)
        near_upper = gentler & (goal >= self.upper - zone)
        near_lower = gentler & (goal <= self.lower + zone)
        return Braking(
            minimum=np.where(near_upper, -brake, -acceleration),
            maximum=np.where(near_lower, brake, acceleration),
            near_upper=near_upper,
            near_lower=near_lower,
        )


def stopping_speed(distance: FloatArray, acceleration: FloatArray, jerk: FloatArray) -> FloatArray:
    """[rad/s | m/s] per joint: the highest speed from which a jerk-limited stop (from a = 0 to
    rest, within ``acceleration`` and ``jerk``) covers at most ``distance`` [rad | m] (≥ 0; inf
    for an unbounded range): the inverse of the stopping distance d(v) of the module
    docstring, a hair short of it (the planner's rounding)."""
    d = np.maximum(np.asarray(distance, dtype=np.float64) - OVERSHOOT_TOLERANCE, 0.0)
    a = np.asarray(acceleration, dtype=np.float64)
    j = np.asarray(jerk, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # inf − inf on an unbounded range, replaced below
        triangular = np.cbrt(d * d * j)
        trapezoid = np.sqrt(a**4 / (4 * j * j) + 2 * a * d) - a * a / (2 * j)
    speed = np.where(d <= a**3 / (j * j), triangular, trapezoid)
    return np.where(np.isinf(d), np.inf, speed)


@dataclass(frozen=True)
class Braking:
    """Acceleration bounds [rad/s² | m/s²] for the planner (``minimum`` < 0 < ``maximum``) and
    the joints whose braking towards their upper / lower limit they make gentler."""

    minimum: FloatArray
    maximum: FloatArray
    near_upper: np.ndarray
    near_lower: np.ndarray

    @property
    def any(self) -> bool:
        return bool(np.any(self.near_upper) or np.any(self.near_lower))

    def passes_goal(
        self, start: FloatArray, goal: FloatArray, lowest: FloatArray, highest: FloatArray
    ) -> bool:
        """Whether a reference planned with these bounds, from ``start`` to ``goal`` with
        position extrema ``lowest`` / ``highest`` per joint, goes beyond both its start and its
        goal towards the limit a joint was braking gently for: then the gentle braking is what
        carries it there, and it is dropped."""
        up = self.near_upper & (highest > np.maximum(start, goal) + OVERSHOOT_TOLERANCE)
        down = self.near_lower & (lowest < np.minimum(start, goal) - OVERSHOOT_TOLERANCE)
        return bool(np.any(up | down))
