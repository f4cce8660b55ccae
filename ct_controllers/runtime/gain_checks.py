"""Live gain sets judged as a whole state (``ros2 param set`` on ``/ct/controller_manager``).

A set changes one or more gain vectors of a controller; what runs afterwards is the controller's
*whole* gain state: its current gains with the set applied. :func:`judge_gains` judges that
state, never the set alone, by three rules. The ROS node only gathers the inputs (current gains,
configured gains, the measured configuration) and logs or refuses as told.

1. **No joint without feedback.** A state in which a joint gets no feedback at all (the torque
   depends neither on its position nor on its velocity: stiffness and damping both 0) leaves
   that joint a double integrator: it drifts with whatever velocity it has, and falls wherever
   gravity is not compensated exactly. Its spectral radius is exactly 1 (a double eigenvalue:
   the drift grows linearly), so the stability rule below cannot see it. Such a set is refused
   with the joints named, unless the read-only parameter ``allow_free_joints`` is true.

2. **Never worse, and always a way back.** The sampled loop where the arm is
   (:class:`~ct_controllers.runtime.gain_stability.GainStability`) decides; a set is refused
   on stability grounds only when the resulting state is

   (a) unstable where the arm is (spectral radius above 1 + 1e-6, see ``Stability``), and
   (b) worse than the current state (a larger radius there), and
   (c) not a *step back*: a set that moves every gain it changes toward (or onto) its
       configured value, each new value between the current and the configured one, whose
       radius stays within the *recovery bound*.

   (b): a set that does not raise the radius makes nothing worse; refusing it would only keep
   the arm in the worse state (e.g. lowering one gain at a time where the configured gains are
   themselves unstable, at a low rate over a bus).

   (c): restoring K and D one ``ros2 param set`` at a time passes through a state with one of
   them restored and the other not. From a state without damping that is the configured
   stiffness with no damping: an undamped oscillator that the zero-order hold makes grow a
   little, radius √(1 + ω²T²/2) per joint, 1.0011 at 1 kHz for the bundled arm (1.0032 with a
   period of delay). Refusing it made recovery depend on the order in which the operator
   restored the gains (K then D refused, D then K accepted). The recovery bound is the largest
   radius on that way back, computed for this controller, rate and delay rather than chosen
   (:func:`recovery_radius`: over the checked configurations, the configured gains restored one
   gain parameter at a time, in any order, from all gains zero). It is the price of the way
   back and no more. Only steps toward the configured gains get it, so it cannot be used to
   walk away from them, and the state it admits is left by the next step back.

   Why not a fixed margin on 1? Any margin wide enough for the way back (1e-3 at 1 kHz, 3e-3
   with a period of delay, more at lower rates) would also admit, from the configured gains, a
   set such as damping 0 whose oscillation grows e-fold every second or so, and stays.

3. **Gains far above the configured ones.** A set with a gain above :data:`LARGE_FACTOR` × its
   configured value on some joint is applied when rules 1 and 2 pass, with a warning naming
   the joints (the axes of a Cartesian gain) and the factors. The linear model can call such
   gains stable, yet they saturate the drive at tiny errors (5143 N·m/rad on a wrist
   configured for 50 reaches its 40 N·m limit at 0.45°), and a factor of ten is more often a
   typo (an extra digit, a unit) than intent.

"Configured" gains are the controller's gains at start-up: ``config/controllers.yaml`` (the
bundled file unless the launch overrides it). Per-joint vectors are in model order; a
controller's other gains (a Cartesian stiffness, a scalar) have the shapes their schema gives
them (:meth:`Controller.validate_gains`), and its linear feedback
(:meth:`Controller.linear_feedback`) maps them to the joints.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ct_controllers.controllers.controller import Controller, FloatArray
from ct_controllers.runtime.gain_stability import GainStability, Stability

LARGE_FACTOR = 10.0  # a gain above this × its configured value is reported (rule 3)


@dataclass(frozen=True)
class GainVerdict:
    """The judgement of one controller's gain set. ``refusal`` says why it must not be applied
    (None: apply it); ``warnings`` are to be logged once it is applied; ``here`` and ``before``
    are the sampled loop where the arm is with and without the set, when they were evaluated."""

    refusal: str | None
    warnings: tuple[str, ...] = ()
    here: Stability | None = None
    before: Stability | None = None

    @property
    def accepted(self) -> bool:
        return self.refusal is None


def whole_state(
    current: Mapping[str, FloatArray], change: Mapping[str, FloatArray]
) -> dict[str, FloatArray]:
    """The gain state after a set: every gain of ``current`` with ``change`` applied (copies)."""
    return {
        name: np.array(value, dtype=np.float64) for name, value in {**current, **change}.items()
    }


def _joint_names(check: GainStability) -> list[str]:
    """Joint names by v index of ``check``'s model."""
    names = [""] * check.plant.nv
    for name in check.plant.joint_names:
        names[check.plant.v_index(name)] = name
    return names


def free_joints(check: GainStability, gains: Mapping[str, FloatArray]) -> list[str]:
    """The joints that ``gains`` leave with no feedback at all: no torque depends on their
    position or velocity (their columns of K and D are zero). Judged at the first checked
    configuration (home): M(q), through which some gains act, has no zero column anywhere."""
    matrices = check.feedback_at(check.configurations[0], gains)
    if matrices is None:
        return []
    stiffness, damping = matrices
    free = ~np.any(stiffness != 0.0, axis=0) & ~np.any(damping != 0.0, axis=0)
    names = _joint_names(check)
    return [names[j] for j in np.flatnonzero(free)]


def moves_toward(
    current: Mapping[str, FloatArray],
    change: Mapping[str, FloatArray],
    configured: Mapping[str, FloatArray],
) -> bool:
    """Whether every gain in ``change`` moves toward (or onto) its configured value: each new
    value lies between the current and the configured one, both included."""
    for name, new in change.items():
        if name not in current or name not in configured:
            return False
        if np.shape(current[name]) != np.shape(new) or np.shape(configured[name]) != np.shape(new):
            return False  # not comparable element by element
        low = np.minimum(current[name], configured[name])
        high = np.maximum(current[name], configured[name])
        slack = 1e-9 * np.maximum(1.0, np.abs(configured[name]))  # values that went through text
        if np.any(new < low - slack) or np.any(new > high + slack):
            return False
    return True


def recovery_radius(check: GainStability, configured: Mapping[str, FloatArray]) -> float:
    """The recovery bound of rule 2: the largest spectral radius met when ``configured`` is
    restored one gain parameter at a time, in any order, from all gains zero. That is the worst,
    over ``check``'s configurations, of every state with some (not all, not none) of the gains
    at their configured values and the others at zero; 1.0 when there is no such state."""
    names = sorted(configured)
    worst = 1.0
    for size in range(1, len(names)):
        for restored in itertools.combinations(names, size):
            gains = {
                name: configured[name] if name in restored else np.zeros_like(configured[name])
                for name in names
            }
            found = check.worst(gains)
            if found is not None:
                worst = max(worst, found.radius)
    return worst


Labels = Sequence[str] | Callable[[str, int], Sequence[str]]


def large_gains(
    change: Mapping[str, FloatArray],
    configured: Mapping[str, FloatArray],
    labels: Labels,
    factor: float = LARGE_FACTOR,
) -> dict[str, list[tuple[str, float]]]:
    """Per gain of ``change``: (element, new / configured) for each element (a joint of a
    per-joint gain, an axis of a Cartesian one, the value of a scalar) whose new value exceeds
    ``factor`` × its configured value (an infinite ratio where that is 0). ``labels``: the
    elements' names, one list for every gain (joint names), or per gain and size
    (:meth:`Controller.gain_labels`). A gain whose size differs from its configured value's is
    not compared."""
    found: dict[str, list[tuple[str, float]]] = {}
    for name, new in change.items():
        if name not in configured:
            continue
        reference = np.asarray(configured[name], dtype=np.float64)
        if reference.shape != np.shape(new):
            continue
        above = np.flatnonzero(new > factor * reference)
        if above.size:
            names = labels(name, reference.size) if callable(labels) else labels
            found[name] = [
                (names[j], float(new[j] / reference[j]) if reference[j] > 0 else np.inf)
                for j in above.tolist()
            ]
    return found


def _labels(check: GainStability) -> Labels:
    """The names of a gain's elements: the controller's (:meth:`Controller.gain_labels`), or the
    joint names for a fixed feedback."""
    if isinstance(check.feedback, Controller):
        return check.feedback.gain_labels
    return _joint_names(check)


def _listing(joints: Sequence[str]) -> str:
    return ("joint " if len(joints) == 1 else "joints ") + ", ".join(joints)


def judge_gains(
    name: str,
    check: GainStability,
    current: Mapping[str, FloatArray],
    change: Mapping[str, FloatArray],
    configured: Mapping[str, FloatArray],
    q: FloatArray | None,
    allow_free_joints: bool = False,
) -> GainVerdict:
    """Judge the gain set ``change`` (validated) of controller ``name`` by the module's rules:
    on the whole state ``current`` (every gain) with ``change`` applied, against the
    ``configured`` gains, where the arm is (``q`` [rad | m]; None while no state has been
    measured: rules 1 and 3 only). All vectors in model order."""
    gains = whole_state(current, change)
    warnings: list[str] = []
    free = free_joints(check, gains)
    if free and not allow_free_joints:
        return GainVerdict(
            refusal=(
                f"{name}: these gains leave {_listing(free)} with no feedback at all (stiffness "
                "and damping both 0, with the current gains and this set applied): it would "
                "drift or fall freely; not applied (the read-only parameter allow_free_joints, "
                "set at launch, allows free-floating joints)"
            )
        )
    if free:
        warnings.append(
            f"{name}: {_listing(free)} now without any feedback (allow_free_joints is true)"
        )
    rate = f"update_rate {1.0 / check.period:g} Hz ({check.delay} period(s) of delay)"
    here = before = None
    if q is not None:
        here = check.at(q, gains)
    if here is not None and not here.stable:
        before = check.at(here.at, whole_state(current, {}))
        was = "" if before is None else f" (the current gains give {before.radius:.4f})"
        if before is not None and here.radius <= before.radius:
            warnings.append(
                f"{name}: still unstable where the arm is at {rate}: {here.describe()}{was}; "
                "applied: it makes nothing worse"
            )
        else:
            toward = moves_toward(current, change, configured)
            bound = recovery_radius(check, configured) if toward else None
            if bound is not None and here.radius <= bound:
                warnings.append(
                    f"{name}: a step back toward the configured gains through a marginal state "
                    f"at {rate}: {here.describe()}, within the recovery bound {bound:.4f}; set "
                    "the remaining gains to their configured values to finish"
                )
            else:
                why = (
                    f"beyond the recovery bound {bound:.4f}"
                    if bound is not None
                    else "not a step back toward the configured gains"
                )
                return GainVerdict(
                    refusal=(
                        f"{name}: these gains make the loop unstable where the arm is, at {rate}: "
                        f"{here.describe()}{was}, {why}; not applied"
                    ),
                    here=here,
                    before=before,
                )
    elif here is not None:
        worst = check.worst(gains)
        if worst is not None and not worst.stable:
            warnings.append(
                f"{name}: the new gains are stable here but not everywhere at {rate}: "
                f"{worst.describe()}"
            )
    for gain, joints in large_gains(change, configured, _labels(check)).items():
        listed = ", ".join(
            f"{joint} ({ratio:.3g}×)" if np.isfinite(ratio) else f"{joint} (configured 0)"
            for joint, ratio in joints
        )
        warnings.append(
            f"{name}: {gain} above {LARGE_FACTOR:g}× the configured gains on {listed}; applied"
        )
    return GainVerdict(refusal=None, warnings=tuple(warnings), here=here, before=before)
