"""The grasp task-phase machine: APPROACH → CLOSE → HOLD → RELEASE → DONE, FAILED from any phase.

Plain Python. Each tick it takes an observation (measured, stamped) and returns the references
for that tick: a TCP target pose for the arm (through differential IK) and finger targets with an
effort limit for the gripper. Every transition needs its observed condition to hold for a
continuous dwell window (``DwellCondition``); an observation older than ``freshness`` counts as
"not satisfied", and no fresh observation for ``stale_limit`` fails the task. Each phase has a
timeout. DONE and FAILED freeze the outputs into a hold; a new run needs ``reset()``.

Phase by phase, what it writes and the observed condition that ends it:
- APPROACH: TCP → pre-grasp, then → grasp pose, fingers open; ends when the TCP pose error is
  within tolerance.
- CLOSE: hold the TCP, fingers → closed with effort ≤ grasp_effort; ends on contact on both
  fingers (where a contact sensor exists), or on a stall: fingers still, above the empty-gripper
  minimum, pressing with ≥ 0.8 grasp_effort (measured effort) or, where no effort is measured,
  blocked short of their closed target. Its timeout counts beyond the time the finger servo
  takes over the gripper's whole stroke (``stroke_time``).
- HOLD: lift (carry to the place pose if any), hold, put down; every stage needs the gripper to
  keep its grip — the grip width (measured between the gripper's two width frames, the same on
  every gripper; without it the fingers' openings summed: the object may shift between
  independently servoed fingers, its width does not change) above the empty minimum and
  within slip_tolerance of what it was when CLOSE ended, the measured finger effort ≥
  grip_effort_fraction of grasp_effort — and, where the object's pose is observed, the object to
  rise with the lift and stay put relative to the TCP for hold_duration. The fingers closing to
  the empty minimum, or the width changing by more than slip_failure, is a lost object: FAILED.
  The put-down target is the place pose shifted by how far the object slid in the hand (where
  the object is observed: its position in the TCP frame when CLOSE ended less that when the
  put-down began, in TCP axes), so that the object, not the TCP, returns to the place: an object
  that slid 8 mm toward the fingertips while lifted otherwise meets the table 8 mm before the TCP
  reaches its target, and the stage never ends (measured on a one-jaw gripper in MuJoCo).
  Unobserved, the slide is unknown, and observed, a turn in the grip is not undone (the SO-101's
  cube rolled 6-20° in its jaws' wedge and met the table edge first): the put-down also ends
  once the TCP rests above its target (across within position_tolerance, above it by at most
  slip_tolerance, still within ``REST_DISTANCE`` for the dwell): the surface holds the object
  up.
  With ``identify_payload``, an ``identify`` stage before ``hold`` at the same pose: the same
  grip checks, and it ends only once the outside says the payload identification is done
  (:meth:`GraspTask.identification_finished`) or after ``identify_timeout``.
- RELEASE: open, then retreat along −tool z; ends when the fingers are open past release_width
  (a measured grip width: past that fraction of the full opening) and the TCP moved away (and,
  where observed, the object stayed).

With a measured ``grip_width`` every width check is on it (closed on nothing: below twice the
empty minimum; stalled: above it; released: release_width / open_width of the full opening), so
the checks mean the same on two fingers, a finger and its mimic follower, or one jaw.

A verdict says what it rested on: :attr:`GraspTask.checks` lists the checks that ended a phase
or stage (``tcp_pose``, ``finger_contact``, ``finger_stall_effort``, ``finger_stall_position``,
``aperture``, ``grip_effort``, ``object_rise``, ``object_slip``, ``fingers_open``,
``tcp_retreat``, ``object_stayed``). A DONE without an object sensor checked the gripper only,
and says so.

Frames: every pose is a 4x4 transform in the base frame; the tool z axis points from the hand
toward the fingertips (the approach direction). Units: m, rad, s, N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

import numpy as np

from ct_controllers.model.frames import check_pose, pose_error_norms
from ct_controllers.references.joint_trajectory import MAX_DURATION
from ct_controllers.tasks.conditions import DwellCondition
from ct_controllers.types import FloatArray


class Phase(Enum):
    APPROACH = "APPROACH"
    CLOSE = "CLOSE"
    HOLD = "HOLD"
    RELEASE = "RELEASE"
    DONE = "DONE"
    FAILED = "FAILED"


ACTIVE_PHASES = (Phase.APPROACH, Phase.CLOSE, Phase.HOLD, Phase.RELEASE)


MAX_OFFSET = 1.0  # [m] approach_offset and lift_height: beyond the arm's reach, not a grasp
DEFAULT_APPROACH_OFFSET = 0.08  # [m] a GraspGoal's approach_offset unless given
DEFAULT_LIFT_HEIGHT = 0.1  # [m] a GraspGoal's lift_height unless given
# [m] a TCP that stays this near one point through the dwell has stopped (the unobserved
# put-down: a TCP still converging on its target moves farther in the 0.1 s dwell).
REST_DISTANCE = 0.0005


@dataclass(frozen=True)
class GraspGoal:
    """A grasp goal, checked once, here: whoever builds one (the ``/ct/grasp`` boundary, a
    bench, a test) gets a checked goal, and nothing downstream checks it again.

    grasp_pose: TCP pose at grasp (4x4, base frame [m]); place_pose: where to put the object
    down (None = back where it was); approach_offset [m] along −tool z for the pre-grasp and the
    retreat, and lift_height [m] along base z, each within [0, ``MAX_OFFSET``]; grasp_effort [N]
    per finger, an upper bound, > 0; hold_duration [s] within [0, ``MAX_DURATION``].

    The poses must be rigid transforms (finite, a proper rotation: determinant +1, no
    reflection; :func:`~ct_controllers.model.frames.check_pose`); the goal holds read-only copies
    of them. ``pre_grasp_pose`` (derived once, here, read-only) is the grasp pose backed off
    along its tool z, p_pre = p_grasp − approach_offset · z_tool, same rotation: the first
    APPROACH target, and the pose the ``/ct/grasp`` boundary checks for reachability. A bad value
    raises ValueError naming it."""

    grasp_pose: FloatArray
    place_pose: FloatArray | None = None
    approach_offset: float = DEFAULT_APPROACH_OFFSET
    lift_height: float = DEFAULT_LIFT_HEIGHT
    grasp_effort: float = 20.0
    hold_duration: float = 0.5
    pre_grasp_pose: FloatArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("grasp_pose", "place_pose"):
            pose = getattr(self, name)
            if pose is None:
                continue
            try:  # finite, rigid, a proper rotation (no reflection)
                checked = check_pose(pose, name)
            except ValueError as exc:
                raise ValueError(f"{name} is not a rigid transform: {exc}") from None
            checked.setflags(write=False)
            object.__setattr__(self, name, checked)
        bounds = (
            ("approach_offset", MAX_OFFSET, "m"),
            ("lift_height", MAX_OFFSET, "m"),
            ("hold_duration", MAX_DURATION, "s"),
        )
        for name, maximum, unit in bounds:
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 <= value <= maximum):
                raise ValueError(f"{name} must be within [0, {maximum:g}] {unit}, got {value}")
        if not (math.isfinite(self.grasp_effort) and self.grasp_effort > 0):
            raise ValueError(f"grasp_effort must be finite and > 0 N, got {self.grasp_effort}")
        tool_z = self.grasp_pose[:3, 2]
        pre_grasp = _translated(self.grasp_pose, -self.approach_offset * tool_z)
        pre_grasp.setflags(write=False)
        object.__setattr__(self, "pre_grasp_pose", pre_grasp)


@dataclass(frozen=True)
class GraspParameters:
    """Tolerances [m, rad], windows and timeouts [s], gripper thresholds [m, m/s, N]."""

    dwell: float = 0.1
    freshness: float = 0.05
    stale_limit: float = 0.5
    position_tolerance: float = 0.005
    orientation_tolerance: float = 0.05
    timeouts: dict[Phase, float] = field(
        default_factory=lambda: {
            Phase.APPROACH: 6.0,
            Phase.CLOSE: 2.0,
            Phase.HOLD: 8.0,
            Phase.RELEASE: 4.0,
        }
    )
    # Finger opening when open [m] (each finger); on the stack the runner maps the task's
    # finger targets [0, open_width] onto each gripper joint's closed … open limits.
    open_width: float = 0.04
    # Per-finger opening below which the fingers closed on nothing [m] (a measured grip width:
    # twice this, whatever the gripper).
    empty_minimum: float = 0.003
    contact_force: float = 0.5  # normal force on a finger counting as contact [N]
    stall_speed: float = 0.002  # finger speed counting as stalled [m/s]
    grip_effort_fraction: float = 0.5  # measured finger effort kept through HOLD, of grasp_effort
    slip_tolerance: float = 0.01  # object displacement relative to the TCP counted as slip [m]
    slip_failure: float = 0.03  # ... beyond which the grasp is lost: FAILED [m]
    # Per-finger opening that counts as released [m] (a measured grip width: the same fraction
    # of the gripper's full opening, release_width / open_width).
    release_width: float = 0.03
    retreat_distance: float = 0.03  # TCP travel away from the object before DONE [m]
    # HOLD's "identify" stage (before "hold", at the same pose): the arm held still while the
    # outside identifies the payload from the joint torques and says it is done
    # (:meth:`GraspTask.identification_finished`); at most identify_timeout [s], which HOLD's
    # timeout grows by. False: no such stage.
    identify_payload: bool = False
    identify_timeout: float = 4.0
    # [s] the gripper servo's travel over the gripper's whole stroke at its speed
    # (:attr:`~ct_controllers.controllers.gripper.GripperController.stroke_time`): CLOSE's
    # timeout counts beyond it, so that a wide or slow gripper keeps the margin the default 2 s
    # gives the bundled fingers' 4 cm at 0.1 m/s (0.4 s; the SO-101's 13.6 cm jaw: 1.4 s, and it
    # closed on its cube in 1.5-1.8 s). 0: the timeout as given.
    stroke_time: float = 0.0


class GraspObservation(NamedTuple):
    """One measured sample. finger_* are per finger (left, right): opening [m], speed [m/s],
    effort [N] (None if the backend does not measure it); contact_forces [N] per finger if a
    contact sensor exists, else None; object_pose (4x4, base frame) if observed, else None.
    (A NamedTuple: one is built every tick, in half the time of a frozen dataclass.)"""

    stamp: float
    tcp_pose: FloatArray
    finger_positions: FloatArray
    finger_velocities: FloatArray
    finger_efforts: FloatArray | None
    contact_forces: FloatArray | None = None
    object_pose: FloatArray | None = None
    # [m] the grip width measured geometrically (the distance between the two width frames less
    # that with the gripper closed: the same on every gripper), or None: the finger openings
    # summed; open_grip_width [m] the same fully open (None: 2 open_width).
    grip_width: float | None = None
    open_grip_width: float | None = None


@dataclass(frozen=True)
class TaskOutput:
    """References for this tick. tcp_target None = hold the arm where it is (DONE/FAILED);
    finger_target [m] per finger with |effort| ≤ finger_effort_limit [N]."""

    phase: Phase
    stage: str
    tcp_target: FloatArray | None
    finger_target: float
    finger_effort_limit: float


@dataclass(frozen=True)
class Transition:
    time: float
    source: Phase
    target: Phase
    reason: str
    values: dict[str, float]


def _translated(pose: FloatArray, offset: FloatArray) -> FloatArray:
    moved = np.array(pose, dtype=np.float64)
    moved[:3, 3] += offset
    return moved


def lifted(pose: FloatArray, height: float) -> FloatArray:
    """``pose`` (4x4) moved ``height`` [m] up along base z, same rotation (a new array): HOLD's
    lift and carry targets."""
    return _translated(pose, np.array([0.0, 0.0, height]))


def _finite(observation: GraspObservation) -> bool:
    """Every number of the observation is finite: a sum of squares is finite exactly when every
    term is (a finite one past 1e154 overflows and reads as not finite: no sensor reports
    such numbers)."""
    # The poses by one numpy dot each; the per-finger arrays (a few values) in Python floats,
    # cheaper than a numpy call each.
    pose = observation.tcp_pose.ravel()
    total = pose.dot(pose)
    for values in (
        observation.finger_positions,
        observation.finger_velocities,
        observation.finger_efforts,
        observation.contact_forces,
    ):
        if values is not None:
            for value in values.tolist():
                total += value * value
    if observation.object_pose is not None:
        pose = observation.object_pose.ravel()
        total += pose.dot(pose)
    return math.isfinite(observation.stamp) and math.isfinite(total)


def _summed(values: list[float]) -> float:
    """Σ values, added in order from the first (as numpy sums fewer than 8 values)."""
    total = 0.0
    for value in values:
        total += value
    return total


def _per_finger(quantity: str, values: list[float]) -> dict[str, float]:
    """A transition's per-finger values by name: ``left_``/``right_`` + ``quantity`` for a
    two-finger gripper (the bundled arm's order, left then right), ``finger<i>_`` + ``quantity``
    for any other count (one actuated jaw or finger whose follower mimics it: its one opening;
    contact forces: one per finger body the sensor sees)."""
    if len(values) == 2:
        return {f"left_{quantity}": float(values[0]), f"right_{quantity}": float(values[1])}
    return {f"finger{i}_{quantity}": float(value) for i, value in enumerate(values)}


def _distance(a: list[float], b: list[float]) -> float:
    """‖a − b‖ [m] of two 3-vectors, in Python floats (cheaper than numpy on three values)."""
    x, y, z = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    return math.sqrt(x * x + y * y + z * z)


class GraspTask:
    def __init__(self, parameters: GraspParameters | None = None) -> None:
        self.parameters = parameters or GraspParameters()
        self.goal: GraspGoal | None = None
        self._handlers = {
            Phase.APPROACH: self._approach,
            Phase.CLOSE: self._close,
            Phase.HOLD: self._hold,
            Phase.RELEASE: self._release,
        }
        self.reset()

    # --- lifecycle -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to a clean APPROACH with no goal, timers or references."""
        self.phase = Phase.APPROACH
        self.stage = "pre_grasp"
        self.goal = None
        self.transitions: list[Transition] = []
        self.failure: Transition | None = None
        self._phase_start: float | None = None
        self._stage_start: float | None = None
        self._last_fresh: float | None = None
        self._condition = DwellCondition(self.parameters.dwell, self.parameters.freshness)
        self._hold_pose: FloatArray | None = None
        self._object_in_tcp: FloatArray | None = None  # at the end of CLOSE
        self._object_in_tcp_at_hold: FloatArray | None = None  # when the hold stage began
        # [m, TCP axes] the put-down target's shift for the object's slide in the hand.
        self._put_down_shift: FloatArray | None = None
        # [m] base frame: where the TCP was when it began resting above the put-down target.
        self._rest_anchor: FloatArray | None = None
        self._grasp_height: float | None = None  # object z [m] at the end of CLOSE
        self._release_object: FloatArray | None = None
        self._release_tcp: FloatArray | None = None
        self._carry_targets: list[tuple[str, FloatArray]] = []
        self._carry_stages: list[str] = []  # the names of _carry_targets' stages, in order
        self._phase_durations: dict[Phase, float] = {}
        self._stage_target: FloatArray | None = None  # of the current stage, read-only
        self._stage_output: TaskOutput | None = None  # of the current stage
        self._grip_width: float | None = None  # [m] the grip width when CLOSE ended
        self._checks: dict[str, None] = {}  # the checks that ended a phase or stage, in order
        # Set by another thread (the one identifying the payload) when it is done: a bool
        # written once, read by the control thread's ticks.
        self._identified = False
        self.identification_timed_out = False

    def start(self, goal: GraspGoal) -> None:
        """Begin a run. Refused unless freshly reset (no implicit restart after DONE/FAILED)."""
        if self.goal is not None:
            raise RuntimeError(f"task already ran (phase {self.phase.value}); call reset() first")
        self.goal = goal

    def identification_finished(self) -> None:
        """The payload identification of HOLD's ``identify`` stage is done (whatever its
        outcome): the stage may end once its other conditions hold. Any thread."""
        self._identified = True

    @property
    def identifying(self) -> bool:
        """In HOLD's ``identify`` stage: the arm is held at the lifted pose for the outside to
        identify the payload."""
        return self.phase == Phase.HOLD and self.stage == "identify"

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.DONE, Phase.FAILED)

    @property
    def checks(self) -> tuple[str, ...]:
        """The checks this run's verdicts rested on so far, in the order first used."""
        return tuple(self._checks)

    @property
    def object_observed(self) -> bool:
        """Some verdict of this run rested on an observed object (pose or contact)."""
        return any(name.startswith(("object_", "finger_contact")) for name in self._checks)

    def _checked(self, *names: str) -> None:
        for name in names:
            self._checks[name] = None

    @property
    def phase_durations(self) -> dict[Phase, float]:
        """[s] spent in each phase that has ended."""
        return dict(self._phase_durations)

    def target(self) -> FloatArray | None:
        """The TCP target (4x4, base frame, read-only) of the current stage — the array the next
        :meth:`update` outputs unless it changes stage — or None without a goal or once
        finished. Does not step the task."""
        if self.goal is None or self.finished:
            return None
        return self._target()

    # --- the tick ------------------------------------------------------------------------------
    def update(self, now: float, observation: GraspObservation) -> TaskOutput:
        if self.goal is None:
            raise RuntimeError("no goal: call start(goal) first")
        if self.finished:
            return self._frozen()
        p = self.parameters
        if self._phase_start is None:
            self._phase_start = self._stage_start = now
        usable = _finite(observation) and 0.0 <= now - observation.stamp <= p.freshness
        if usable:
            self._last_fresh = now
        elif now - (self._last_fresh if self._last_fresh is not None else self._phase_start) > (
            p.stale_limit
        ):
            age = now - observation.stamp if math.isfinite(observation.stamp) else math.inf
            return self._fail(
                now, f"observations stale for more than {p.stale_limit} s", {"observation_age": age}
            )
        elapsed = now - self._phase_start
        limit = p.timeouts[self.phase]
        if self.phase == Phase.HOLD and p.identify_payload:
            limit += p.identify_timeout  # the identify stage's own time
        elif self.phase == Phase.CLOSE:
            limit += p.stroke_time  # the fingers' travel at the servo's speed
        if elapsed > limit:
            return self._fail(
                now, f"{self.phase.value} timed out after {limit} s", {"elapsed": elapsed}
            )
        result = self._handlers[self.phase](now, observation, usable)
        return result if result is not None else self._output()

    # --- phases --------------------------------------------------------------------------------
    def _approach(self, now: float, obs: GraspObservation, usable: bool) -> TaskOutput | None:
        target = self._target()
        position, angle = pose_error_norms(obs.tcp_pose, target) if usable else (math.inf, math.inf)
        p = self.parameters
        within = position <= p.position_tolerance and angle <= p.orientation_tolerance
        if self._judge(now, obs, usable and within):
            values = {"position_error": position, "orientation_error": angle}
            self._checked("tcp_pose")
            if self.stage == "pre_grasp":
                self._next_stage(now, "grasp")
            else:
                self._hold_pose = np.array(self.goal.grasp_pose)  # type: ignore[union-attr]
                self._enter(now, Phase.CLOSE, "closing", "TCP at the grasp pose", values)
        return None

    def _close(self, now: float, obs: GraspObservation, usable: bool) -> TaskOutput | None:
        p = self.parameters
        # Per-finger values as Python floats: a few comparisons, cheaper than numpy calls.
        aperture = obs.finger_positions.tolist()
        width = obs.grip_width
        # Closed on nothing: the width below both fingers' empty minimum (per finger without a
        # measured width).
        if width is None:
            empty = all(opening < p.empty_minimum for opening in aperture)
            above_empty = all(opening > p.empty_minimum for opening in aperture)
        else:
            empty, above_empty = width < 2 * p.empty_minimum, width > 2 * p.empty_minimum
        if usable and empty:
            return self._fail(
                now,
                "fingers closed on nothing",
                _per_finger("opening", aperture),
            )
        contact = obs.contact_forces is not None and all(
            force >= p.contact_force for force in obs.contact_forces.tolist()
        )
        # Stalled: still, above the empty minimum (blocked short of the closed target, 0), and
        # pressing with the grasp force where the effort is measured.
        minimum = 0.8 * self.goal.grasp_effort  # type: ignore[union-attr]
        stalled = (
            all(abs(speed) <= p.stall_speed for speed in obs.finger_velocities.tolist())
            and above_empty
            and (
                obs.finger_efforts is None
                or all(abs(effort) >= minimum for effort in obs.finger_efforts.tolist())
            )
        )
        if self._judge(now, obs, usable and (contact or stalled)):
            if contact:
                self._checked("finger_contact")
            else:
                measured = obs.finger_efforts is not None
                self._checked("finger_stall_effort" if measured else "finger_stall_position")
            self._grip_width = _summed(aperture) if width is None else width
            self._object_in_tcp = (
                None if obs.object_pose is None else self._relative(obs.tcp_pose, obs.object_pose)
            )
            self._grasp_height = None if obs.object_pose is None else float(obs.object_pose[2, 3])
            values = _per_finger("opening", aperture)
            if obs.contact_forces is not None:
                values |= _per_finger("force", obs.contact_forces.tolist())
            self._carry_targets = self._plan_carry()
            self._carry_stages = [name for name, _ in self._carry_targets]
            self._enter(
                now,
                Phase.HOLD,
                self._carry_targets[0][0],
                "contact on both fingers" if contact else "fingers stalled on the object",
                values,
            )
        return None

    def _hold(self, now: float, obs: GraspObservation, usable: bool) -> TaskOutput | None:
        """Stages lift → (carry) → (identify) → hold → put_down. Losing the object (slip beyond
        slip_failure from the grasp) fails at any stage; the hold stage needs the object's pose
        relative to the TCP to stay within slip_tolerance of what it was when the hold began,
        for hold_duration; the lift needs the object to have risen with the TCP."""
        p = self.parameters
        slip = self._slip(obs, self._object_in_tcp) if usable else math.inf
        if usable and slip > p.slip_failure:
            return self._fail(now, "object slipped out of the grasp", {"slip": slip})
        # Per-finger values as Python floats: a few comparisons, cheaper than numpy calls.
        aperture = obs.finger_positions.tolist()
        width = _summed(aperture) if obs.grip_width is None else obs.grip_width
        drift = self._width_change(width) if usable else math.inf
        if usable and width < 2 * p.empty_minimum:
            return self._fail(
                now,
                "object lost: the fingers closed on nothing",
                _per_finger("opening", aperture),
            )
        if usable and drift > p.slip_failure:
            return self._fail(
                now, "object lost: the grip width changed", {"grip_width_change": drift}
            )
        grip = drift <= p.slip_tolerance
        efforts = obs.finger_efforts
        if efforts is not None:
            minimum = p.grip_effort_fraction * self.goal.grasp_effort  # type: ignore[union-attr]
            grip = grip and all(abs(effort) >= minimum for effort in efforts.tolist())
        target = self._target()
        position, angle = pose_error_norms(obs.tcp_pose, target) if usable else (math.inf, math.inf)
        reached = position <= p.position_tolerance and angle <= p.orientation_tolerance
        condition = usable and reached and grip
        rise: float | None = None  # [m] judged in the lift stage where the object is observed
        hold_slip: float | None = None  # [m] judged in the hold stage where it is observed
        if self.stage == "lift" and obs.object_pose is not None and self._grasp_height is not None:
            rise = obs.object_pose.item(2, 3) - self._grasp_height
            condition = condition and rise >= 0.8 * self.goal.lift_height  # type: ignore[union-attr]
        if self.stage == "hold" and obs.object_pose is not None:
            hold_slip = self._slip(obs, self._object_in_tcp_at_hold) if usable else math.inf
            condition = condition and hold_slip <= p.slip_tolerance
        if self.stage == "put_down" and usable and not reached:
            # Unobserved, the object may have slid in the grip; observed, the target's shift
            # undoes a slide but not a turn (a cube rolled in a one-jaw wedge meets the table
            # with an edge first): it is down once the TCP stops above its target within the
            # slip allowed (the surface holds the object up).
            condition = grip and self._rested(obs.tcp_pose, target)
        if self.stage == "identify" and not self._identified:
            assert self._stage_start is not None
            if now - self._stage_start <= p.identify_timeout:
                condition = False  # held still for the identification until it is done
            else:
                self.identification_timed_out = True
        if self._judge(now, obs, condition):
            # The verdict's values and checks, built only when it is reached (not every tick).
            values = {
                "position_error": position,
                "orientation_error": angle,
                "slip": slip,
                "grip_width_change": drift,
            }
            checks = ["tcp_pose", "aperture"] + ([] if efforts is None else ["grip_effort"])
            if rise is not None:
                values["object_rise"] = rise
                checks.append("object_rise")
            if hold_slip is not None:
                values["hold_slip"] = hold_slip
                checks.append("object_slip")
            self._checked(*checks)
            names = self._carry_stages
            stage_index = names.index(self.stage)
            if stage_index + 1 < len(names):
                self._next_stage(now, names[stage_index + 1])
                if self.stage == "put_down":
                    self._put_down_shift = self._grip_shift(obs)
                if self.stage == "hold":
                    self._object_in_tcp_at_hold = (
                        None
                        if obs.object_pose is None
                        else self._relative(obs.tcp_pose, obs.object_pose)
                    )
            else:
                self._release_tcp = np.array(obs.tcp_pose)
                self._enter(now, Phase.RELEASE, "opening", "object held and placed", values)
        return None

    def _release(self, now: float, obs: GraspObservation, usable: bool) -> TaskOutput | None:
        p = self.parameters
        if self.stage == "opening":
            if obs.grip_width is None:
                openings = obs.finger_positions.tolist()
                opened = all(opening >= p.release_width for opening in openings)
            else:  # the same fraction of the gripper's full opening
                full = 2 * p.open_width if obs.open_grip_width is None else obs.open_grip_width
                opened = obs.grip_width >= p.release_width / p.open_width * full
            if self._judge(now, obs, usable and opened):
                self._checked("fingers_open")
                self._next_stage(now, "retreat")
                # The object settles as the fingers let go; it must stay put from here on.
                self._release_object = (
                    None if obs.object_pose is None else np.array(obs.object_pose)
                )
            return None
        assert self._release_tcp is not None
        moved_away = _distance(obs.tcp_pose[:3, 3].tolist(), self._release_tcp[:3, 3].tolist())
        if obs.object_pose is not None and self._release_object is not None:
            object_moved = _distance(
                obs.object_pose[:3, 3].tolist(), self._release_object[:3, 3].tolist()
            )
        else:
            object_moved = 0.0  # nothing to observe: the retreat distance alone decides
        stays = object_moved <= p.slip_tolerance
        away = moved_away >= p.retreat_distance
        if self._judge(now, obs, usable and stays and away):
            observed = obs.object_pose is not None and self._release_object is not None
            self._checked("tcp_retreat", *(["object_stayed"] if observed else []))
            self._enter(
                now,
                Phase.DONE,
                "done",
                "fingers open and the object stayed",
                {"tcp_moved": moved_away, "object_moved": object_moved},
            )
        return None

    # --- helpers -------------------------------------------------------------------------------
    def _approach_target(self) -> FloatArray:
        goal = self.goal
        assert goal is not None
        if self.stage == "pre_grasp":
            return np.array(goal.pre_grasp_pose)
        return np.array(goal.grasp_pose)

    def _plan_carry(self) -> list[tuple[str, FloatArray]]:
        """HOLD stages: lift; carry above the place pose (if any); hold; put down."""
        goal = self.goal
        assert goal is not None
        place = goal.grasp_pose if goal.place_pose is None else goal.place_pose
        stages = [("lift", lifted(goal.grasp_pose, goal.lift_height))]
        if goal.place_pose is not None:
            stages.append(("carry", lifted(place, goal.lift_height)))
        if self.parameters.identify_payload:  # held still at the lifted (carried) pose
            stages.append(("identify", stages[-1][1]))
        stages.append(("hold", stages[-1][1]))
        stages.append(("put_down", np.array(place)))
        return stages

    def _width_change(self, width: float) -> float:
        """Change [m] of the grip width ``width`` (measured, else both openings summed) since
        CLOSE ended."""
        if self._grip_width is None:
            return 0.0
        return abs(width - self._grip_width)

    def _slip(self, obs: GraspObservation, reference: FloatArray | None) -> float:
        """Displacement [m] of the object relative to the TCP since ``reference`` (the object's
        pose in the TCP frame then)."""
        if obs.object_pose is None or reference is None:
            return 0.0  # unobserved: slip cannot be judged (a real gripper needs a sensor)
        tcp = obs.tcp_pose
        # The object's position in the TCP frame, R_tcpᵀ (p_object − p_tcp): the translation of
        # T_tcp⁻¹ T_object without inverting a 4x4 (the TCP pose is a rigid transform). The
        # product stays numpy's (its BLAS may fuse multiply-adds); the rest in Python floats.
        x, y, z = tcp[:3, :3].T.dot(np.asarray(obs.object_pose)[:3, 3] - tcp[:3, 3]).tolist()
        x0, y0, z0 = reference[:3, 3].tolist()
        x, y, z = x - x0, y - y0, z - z0
        return math.sqrt(x * x + y * y + z * z)

    def _rested(self, tcp: FloatArray, target: FloatArray) -> bool:
        """Whether the TCP (4x4) rests above ``target`` (4x4): within position_tolerance of it
        across (base x, y) and orientation_tolerance in rotation, above it along base z by at
        most slip_tolerance, and within REST_DISTANCE of where it was when this first held
        (the anchor moves, and the dwell restarts, whenever the TCP moves farther)."""
        p = self.parameters
        error = tcp[:3, 3] - target[:3, 3]
        angle = pose_error_norms(tcp, target)[1]
        above = (
            math.hypot(float(error[0]), float(error[1])) <= p.position_tolerance
            and -p.position_tolerance <= float(error[2]) <= p.slip_tolerance
            and angle <= p.orientation_tolerance
        )
        if not above:
            self._rest_anchor = None
            return False
        anchor = self._rest_anchor
        if anchor is None or float(np.linalg.norm(tcp[:3, 3] - anchor)) > REST_DISTANCE:
            self._rest_anchor = np.array(tcp[:3, 3])
            return False
        return True

    def _grip_shift(self, obs: GraspObservation) -> FloatArray | None:
        """[m, TCP axes] how far the object has to move back in the hand to be where it was at
        the end of CLOSE: a0 − a1, its position in the TCP frame then and now (None: not
        observed)."""
        if obs.object_pose is None or self._object_in_tcp is None:
            return None
        now = self._relative(obs.tcp_pose, obs.object_pose)
        return np.asarray(self._object_in_tcp[:3, 3] - now[:3, 3], dtype=np.float64)

    @staticmethod
    def _relative(tcp_pose: FloatArray, object_pose: FloatArray) -> FloatArray:
        """The object's pose in the TCP frame."""
        return np.asarray(np.linalg.inv(tcp_pose) @ np.asarray(object_pose), dtype=np.float64)

    def _judge(self, now: float, obs: GraspObservation, satisfied: bool) -> bool:
        """Whether the stage's condition has held for its dwell, with this sample."""
        stamp = obs.stamp if math.isfinite(obs.stamp) else -math.inf
        return self._condition.met(now, stamp, satisfied)

    def _next_stage(self, now: float, stage: str) -> None:
        self.stage = stage
        self._stage_target = None
        self._stage_output = None
        self._stage_start = now
        # The "hold" stage's window is the goal's hold duration; every other one is the dwell.
        dwell = self.goal.hold_duration if stage == "hold" and self.goal else self.parameters.dwell
        self._condition = DwellCondition(dwell, self.parameters.freshness)

    def _enter(
        self, now: float, phase: Phase, stage: str, reason: str, values: dict[str, float]
    ) -> None:
        assert self._phase_start is not None
        self._phase_durations[self.phase] = now - self._phase_start
        self.transitions.append(Transition(now, self.phase, phase, reason, dict(values)))
        self.phase = phase
        self._phase_start = now
        self._next_stage(now, stage)

    def _fail(self, now: float, reason: str, values: dict[str, float]) -> TaskOutput:
        self._enter(now, Phase.FAILED, "failed", reason, values)
        self.failure = self.transitions[-1]
        return self._frozen()

    def _frozen(self) -> TaskOutput:
        return TaskOutput(self.phase, self.stage, None, math.nan, 0.0)

    def _output(self) -> TaskOutput:
        """The stage's output: built when the stage begins, then the same object every tick
        (phase, stage, target and finger references change only with the stage)."""
        output = self._stage_output
        if output is None:
            goal = self.goal
            assert goal is not None
            closed = self.phase == Phase.CLOSE or self.phase == Phase.HOLD
            finger_target = 0.0 if closed else self.parameters.open_width
            output = self._stage_output = TaskOutput(
                self.phase, self.stage, self._target(), finger_target, goal.grasp_effort
            )
        return output

    def _target(self) -> FloatArray:
        """The TCP target of the current stage: computed once when the stage begins, then the
        same read-only array every tick (consumers may rely on its identity to skip work)."""
        if self._stage_target is None:
            self._stage_target = self._compute_target()
            self._stage_target.setflags(write=False)
        return self._stage_target

    def _compute_target(self) -> FloatArray:
        p = self.parameters
        if self.phase == Phase.APPROACH:
            return self._approach_target()
        if self.phase == Phase.CLOSE:
            assert self._hold_pose is not None
            return np.array(self._hold_pose)
        if self.phase == Phase.HOLD:
            target = np.array(dict(self._carry_targets)[self.stage])
            if self.stage == "put_down" and self._put_down_shift is not None:
                target[:3, 3] += target[:3, :3] @ self._put_down_shift
            return target
        # RELEASE, or DONE on the tick it is entered (the release pose is held through it).
        assert self._release_tcp is not None
        if self.stage == "retreat":
            tool_z = self._release_tcp[:3, 2]
            return _translated(self._release_tcp, -2 * p.retreat_distance * tool_z)
        return np.array(self._release_tcp)
