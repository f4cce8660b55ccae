"""Parallel gripper: a position servo per finger whose force saturates at the requested limit,
and that pushes with exactly that limit once the finger is blocked, as a gripper drive does for
a grasp (Franka's "grasp with force").

    free:     τ_i = clip(K (r_i − q_i) − D q̇_i + g_i(q), −F_i, F_i)
    pressing: τ_i = clip(s_i P_i − D q̇_i + g_i(q), −F_i, F_i)

where the servo reference r_i moves toward the finger target q*_i at no more than ``speed``
[m/s] (as a gripper drive closes at a set speed: fingers that slam into an object at full force
dent soft contacts by centimetres). K [N/m] and D [N·s/m] are the free finger's spring and
damper; g_i is the gravity force on the finger from the controller's model.

A finger presses (s_i = the sign of r_i − q_i) once it is blocked: held more than
:data:`CONTACT_GAP` short of its reference and still (surface speed at most
:data:`STALL_FRACTION` of ``speed``) for two of the free servo's time constants, 2 D / K (a free
finger whose reference starts moving is still at first, and moving at 0.9 ``speed`` by then,
critically damped). It stops pressing when its reference moves back toward it (the target
opens), when it comes within half the gap of its reference or when it moves toward it faster
than ``speed`` (what blocked it gave way). Its force P_i starts at the spring's, K |r_i − q_i|, and
rises to F_i at F_i / :data:`PRESS_RISE_TIME` per second. Why a force mode: without it the
spring must reach F_i through r − q, and r stays inside the finger's range, so K ≥ F_i / (what
is left of the range past the object) — 300 N/m at the fingertip for 15 N on a 5 cm object —
while the free finger sampled at the loop's rate with a period of delay is stable only below a K
set by its mass and that rate (:func:`sampled_finger_gains`; a one-jaw arm's jaw on a 100 Hz
drive rig: about 200 N/m; measured there: 808 N/m rang at 50-60 rad/s between its end stop and
the object).

The reference stays inside the finger's URDF range [lower, upper] whatever the measured state
and the target: it starts from the measured opening clipped into the range (a finger pushed past
its limit is pulled back, not held there), and a target is taken within ``margin`` of the range
at most ([lower + margin, upper − margin]: a reference on the limit itself puts the finger past
it by its tracking error; ``FINGER_LIMIT_MARGIN``, 0.5 mm, by default).

The smallest force limit the servo controls (:attr:`GripperController.minimum_effort`). With
F_i below what the free finger itself needs, the clip — not the servo — sets the force, and
nothing controls where the finger goes: measured, 1e-6 N let a finger run 9.5 mm past its
limit. A free finger needs, at most, its weight (the gravity force on a prismatic joint whose
axis can point along gravity: m_i |g|, m_i the mass the joint carries) and the damping force of
moving at the servo's own speed, D · speed (the servo's reference moves at ``speed``: following
it costs D · speed in steady state, 2 N with the defaults). So

    F_min = max_i m_i |g| + D · speed                       [N]

(bundled fingers: 0.05 kg · 9.81 m/s² + 20 N·s/m · 0.1 m/s = 2.49 N). Above it, the servo's own
spring K (r − q) takes up the rest: the arm's accelerations on the finger (m_i · a), the
friction of a real drive; a smaller D or a slower speed lowers the bound. A Grasp asking for
less is refused at the goal check (``ros/grasp_action.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pinocchio as pin
from scipy.linalg import expm

from ct_controllers.controllers.controller import (
    FloatArray,
    JointReference,
    JointState,
    sampled_loop_radius,
)
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.limit_approach import FINGER_LIMIT_MARGIN

# [m] of finger surface: a finger held still this far or farther short of its reference for
# 2 D / K is blocked (it presses).
CONTACT_GAP = 0.002
# A finger moving at most this fraction of the servo's speed counts as still (stalled).
STALL_FRACTION = 0.1
# [s] a pressing finger's force rises from the spring's to the limit over at most this long:
# stepped, it bounced off a stiff object (the SO-101's jaw on a 100 Hz drive rig: 2 N → 15 N in
# one period threw it open at 3 rad/s, and once kept CLOSE past its 2 s).
PRESS_RISE_TIME = 0.1


class _Press:
    """One finger's force mode: ``sign`` 0.0 free, else ±1.0, the direction it presses in;
    ``level`` P [N | N·m] its force, rising to the limit; ``stalled`` [s] how long it has been
    still and short of its reference, while free."""

    __slots__ = ("level", "sign", "stalled")

    def __init__(self) -> None:
        self.sign = 0.0
        self.level = 0.0
        self.stalled = 0.0


class GripperController:
    def __init__(
        self,
        model: RobotModel,
        joint_names: Sequence[str],
        stiffness: float = 2000.0,
        damping: float = 20.0,
        speed: float = 0.1,
        margin: float = FINGER_LIMIT_MARGIN,
        levers: Sequence[float] | None = None,
        force_levers: Sequence[float] | None = None,
    ) -> None:
        """``margin`` [m]: targets are taken at least this far inside the fingers' range.
        ``levers`` [m/rad | m/m] per joint: how far the finger surface moves per unit of the
        joint (:attr:`~ct_controllers.model.grip_geometry.GripGeometry.levers`; None: 1 each, a
        prismatic finger). The servo's stiffness [N/m], damping [N·s/m], speed [m/s], margin [m]
        and force limits [N] are the finger surface's: a joint of lever l gets K l², D l²,
        speed / l, margin / l and F l (a revolute jaw: N·m/rad, N·m·s/rad, rad/s, rad, N·m).
        ``force_levers`` [m/rad | m/m] per joint: its effort per newton of squeeze on every
        finger it moves, where that is not its lever (a mimic master moving two fingers:
        ``GripGeometry.force_levers``; None: ``levers``); the force limits go through it."""
        for name, value in (
            ("stiffness", stiffness),
            ("damping", damping),
            ("speed", speed),
            ("margin", margin),
        ):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"gripper {name} must be finite and >= 0, got {value}")
        self.model = model
        self.joint_names = tuple(joint_names)
        self.indices = model.indices(self.joint_names)
        self.stiffness = stiffness
        self.damping = damping
        self.max_effort = model.limits.effort[self.indices]
        self.lower = model.limits.lower[self.indices]  # [m] the fingers' range
        self.upper = model.limits.upper[self.indices]
        self._index_list = self.indices.tolist()
        lever = np.ones(len(self.joint_names)) if levers is None else np.array(levers, float)
        if lever.shape != (len(self.joint_names),) or not np.all(np.isfinite(lever) & (lever > 0)):
            raise ValueError(
                f"gripper levers must be one positive number per joint {self.joint_names}, "
                f"got {levers!r}"
            )
        self.levers = lever
        self._lever_list = lever.tolist()
        force_lever = lever if force_levers is None else np.array(force_levers, float)
        if force_lever.shape != lever.shape or not np.all(
            np.isfinite(force_lever) & (force_lever > 0)
        ):
            raise ValueError(
                f"gripper force levers must be one positive number per joint "
                f"{self.joint_names}, got {force_levers!r}"
            )
        self.force_levers = force_lever
        self._force_lever_list = force_lever.tolist()
        joint_margin = margin / lever  # [m | rad]
        if not np.all(self.upper - self.lower > 2 * joint_margin):
            raise ValueError(
                f"gripper margin {margin} m leaves no range of {self.joint_names} "
                f"[{self.lower.tolist()}, {self.upper.tolist()}]"
            )
        self.margin = margin
        self._range_list = list(zip(self.lower.tolist(), self.upper.tolist(), strict=True))
        self._target_range_list = list(
            zip(
                (self.lower + joint_margin).tolist(),
                (self.upper - joint_margin).tolist(),
                strict=True,
            )
        )
        self._max_effort_list = self.max_effort.tolist()
        self.speed = speed
        # r [m] and ṙ [m/s] per finger as Python floats (the servo's arithmetic is scalar; its
        # own lists, replaced each tick, never handed out).
        self._reference: list[float] | None = None
        self._reference_velocity = [0.0] * len(self.joint_names)
        self._press = [_Press() for _ in self.joint_names]  # per finger (module docstring)
        self.model_state = ModelState(model)

    @property
    def finger_masses(self) -> FloatArray:
        """[kg] per finger: the mass its surface carries, M_ii / l_i² (M_ii the joint's diagonal
        of the mass matrix, armature included, at the model's neutral configuration: a finger's
        subtree turns or slides about its own axis whatever the arm does; l_i its lever)."""
        diagonal = np.diag(self.model.mass_matrix(self.model.neutral()))[self.indices]
        return np.asarray(diagonal / self.levers**2, dtype=float)

    def lightest_finger(self, joint_damping: FloatArray) -> tuple[float, float]:
        """(mass [kg], viscous damping [N·s/m]) at the surface of the finger carrying the least
        mass (:attr:`finger_masses`): what its servo gains are designed for
        (:func:`sampled_finger_gains`). ``joint_damping`` [N·m·s/rad | N·s/m] per joint, model
        order: the joints' own (URDF ``<dynamics damping>``, a drive's friction)."""
        masses = self.finger_masses
        lightest = int(np.argmin(masses))
        damping = float(joint_damping[self.indices[lightest]])
        return float(masses[lightest]), damping / float(self.levers[lightest]) ** 2

    @property
    def finger_weight(self) -> FloatArray:
        """[N] per finger: the largest gravity force on it, m_i |g| (m_i the mass its joint
        carries: the subtree of its link), whatever the arm's configuration."""
        pin_model = self.model.model
        data = pin_model.createData()  # scratch of its own: this may run on any thread
        pin.computeSubtreeMasses(pin_model, data)
        gravity = float(np.linalg.norm(pin_model.gravity.linear))
        joints = [pin_model.getJointId(name) for name in self.joint_names]
        return np.array([data.mass[joint] * gravity for joint in joints])

    @property
    def stroke_time(self) -> float:
        """[s] how long the servo's reference takes over the longest finger's whole range at
        ``speed``: (upper − lower) · l / speed, of finger surface; 0 where that is not a finite
        time (no fingers, an unbounded joint, speed 0)."""
        if not self.joint_names or self.speed == 0:
            return 0.0
        stroke = float(np.max((self.upper - self.lower) * self.levers))  # [m] of surface
        return stroke / self.speed if math.isfinite(stroke) else 0.0

    @property
    def minimum_effort(self) -> float:
        """[N] the smallest force limit under which the servo still controls a free finger:
        its weight plus the damping at the servo's speed (module docstring). No fingers (an
        arm without a gripper): 0, nothing to control."""
        if not self.joint_names:
            return 0.0
        return float(self.finger_weight.max()) + self.damping * self.speed

    def reset(self) -> None:
        """Restart the servo reference from the measured opening on the next tick."""
        self._reference = None
        self._reference_velocity = [0.0] * len(self.joint_names)
        self._press = [_Press() for _ in self.joint_names]

    @property
    def pressing(self) -> tuple[bool, ...]:
        """Per finger (``joint_names`` order), whether it pressed with its force limit on the
        last :meth:`compute` or :meth:`compute_into` (blocked short of its reference)."""
        return tuple(press.sign != 0.0 for press in self._press)

    @property
    def reference(self) -> FloatArray | None:
        """The servo reference r [m] per finger (``joint_names`` order) after the last
        :meth:`compute` or :meth:`compute_into` — what a finger on the position interface is
        sent — or None before (a new array)."""
        return None if self._reference is None else np.array(self._reference)

    @property
    def reference_velocity(self) -> FloatArray:
        """ṙ [m/s] per finger over the last :meth:`compute` or :meth:`compute_into` (within
        ±``speed``; a new array)."""
        return np.array(self._reference_velocity)

    def fill_reference(self, reference: JointReference) -> None:
        """Write the servo's reference into a full joint reference (model order), in place, on
        the fingers: q* = r [m], v* = ṙ [m/s], a* = 0 — what fingers on the position interface
        are sent. After a :meth:`compute` (:meth:`compute_into` can do it in the same pass)."""
        if self._reference is None:
            raise RuntimeError("no servo reference before the first compute")
        q, v, a = reference.q, reference.v, reference.a
        for index, r, rate in zip(
            self._index_list, self._reference, self._reference_velocity, strict=True
        ):
            q[index] = r
            v[index] = rate
            a[index] = 0.0

    def compute(
        self,
        state: JointState,
        target: FloatArray,
        effort_limit: FloatArray,
        dt: float,
        evaluated: ModelState | None = None,
    ) -> FloatArray:
        """Finger efforts [N] in ``joint_names`` order for finger targets [m] and force limits
        [N] (each capped at the URDF effort limit; a negative or NaN limit counts as 0).
        ``evaluated``: the tick's model state at ``state`` when the caller has one (a chain
        sharing its evaluation), else the gripper's own."""
        effort = np.zeros(self.model.nv)
        self.compute_into(effort, state, target.tolist(), effort_limit.tolist(), dt, evaluated)
        return effort[self.indices]  # a copy (fancy indexing)

    def compute_into(
        self,
        effort: FloatArray,
        state: JointState,
        targets: Sequence[float],
        effort_limits: Sequence[float],
        dt: float,
        evaluated: ModelState | None = None,
        reference: JointReference | None = None,
    ) -> None:
        """:meth:`compute` for a chain that assembles every joint's effort: the finger efforts
        [N] are written into ``effort`` (model order) on the fingers, its other joints left as
        they are; ``targets`` [m] and ``effort_limits`` [N] one per finger (``joint_names``
        order), as Python floats. With ``reference``, also :meth:`fill_reference` it, in the
        same pass."""
        if evaluated is None:
            evaluated = self.model_state.at(state)
        q, v, gravity = state.q, state.v, evaluated.gravity()
        ranges = self._range_list
        if self._reference is None:  # the measured opening, clipped into the range
            self._reference = [
                min(max(opening, lower), upper)
                for opening, (lower, upper) in zip(q[self.indices].tolist(), ranges, strict=True)
            ]
        # Per finger, in scalar arithmetic (two fingers: cheaper than a dozen numpy calls on
        # two-element arrays), and with comparisons rather than min()/max() calls: each `if`
        # below takes the bound exactly where max(x, lo) / min(x, hi) would, and like them
        # keeps a NaN x. A NaN target or state gives a NaN effort, which the limiter refuses.
        stiffness, damping = self.stiffness, self.damping
        surface_step = self.speed * dt  # [m] of finger surface
        surface_stall = STALL_FRACTION * self.speed  # [m/s]
        surface_gap, surface_near = CONTACT_GAP, 0.5 * CONTACT_GAP  # [m]
        # [s] still and short of the reference for this long: blocked (2 D / K).
        settle = 2.0 * damping / stiffness if stiffness > 0.0 else 0.0
        moving = dt > 0
        references: list[float] = []
        velocities: list[float] = []
        rise = dt / PRESS_RISE_TIME if moving else 0.0  # of the limit, this tick
        for index, target, force, maximum, r, (lower, upper), lever, force_lever, press in zip(
            self._index_list,
            targets,
            effort_limits,
            self._max_effort_list,
            self._reference,
            self._target_range_list,
            self._lever_list,
            self._force_lever_list,
            self._press,
            strict=True,
        ):
            # The finger surface's units into the joint's (lever 1: unchanged).
            step = surface_step / lever
            limit = force * force_lever
            squared = lever * lever
            # The target within the margin of the range (a NaN stays NaN), then
            # r += clip(target − r, ±step).
            if target < lower:
                target = lower
            if upper < target:
                target = upper
            change = target - r
            if -step > change:
                change = -step
            if step < change:
                change = step
            r += change
            rate = change / dt if moving else 0.0
            references.append(r)
            velocities.append(rate)
            speed = v.item(index)
            error = r - q.item(index)
            bound = limit if limit > 0.0 else 0.0  # a NaN or negative limit gives 0 N
            if maximum < bound:
                bound = maximum
            # Pressing or free (module docstring), on the finger surface: the conditions to
            # stay written so that a NaN target, error or speed ends pressing (the spring then
            # gives the NaN effort the limiter refuses).
            surface_error, surface_speed = lever * error, lever * speed
            sign = press.sign
            if sign != 0.0:
                if not (
                    sign * change >= 0.0
                    and sign * surface_error >= surface_near
                    and sign * surface_speed <= self.speed
                ):
                    press.sign = sign = 0.0
            elif abs(surface_error) > surface_gap and abs(surface_speed) <= surface_stall:
                press.stalled += dt
                if press.stalled > 0.0 and press.stalled >= settle:
                    press.sign = sign = 1.0 if surface_error > 0.0 else -1.0
                    press.level = squared * stiffness * abs(error)  # from the spring's force
                    press.stalled = 0.0
            else:
                press.stalled = 0.0
            if sign != 0.0:  # τ = s P − D q̇ + g, P rising to the limit, clipped at ±bound
                level = press.level + rise * bound
                if bound < level:
                    level = bound
                press.level = level
                tau = sign * level - squared * damping * speed + gravity.item(index)
            else:  # τ = K (r − q) − D q̇ + g, clipped at ±bound
                tau = squared * (stiffness * error - damping * speed) + gravity.item(index)
            if bound < tau:
                tau = bound
            if -bound > tau:
                tau = -bound
            effort[index] = tau
            if reference is not None:
                reference.q[index] = r
                reference.v[index] = rate
                reference.a[index] = 0.0
        self._reference, self._reference_velocity = references, velocities


# The finger servo's gains are designed as the arm's are (setup_assistant.gains): these gains ×
# FINGER_GAIN_MARGIN still stable at the loop's rate, with no delay (MuJoCo steps after the
# write) and with one period of delay (a bus cycle, a DDS round trip).
FINGER_GAIN_MARGIN = 2.0
FINGER_DELAYS = (0, 1)
# And the finger pressing a stiff object stable, a period of delay late: the object a contact
# spring of each of these stiffnesses [N/m] with this damping [N·s/m] (the plant rigs' object,
# sim/object_contact.py, is 2·10⁴ N/m and 20 N·s/m). The servo's damping, delayed, drives that
# contact's mode rather than damps it: critically damped, 570 N/m and 49 N·s/m, the bundled
# fingers on a 100 Hz drive rig (1.05 kg with the rotor) rang on the rigs' object at ±4 cm/s
# (radius 1.09) and CLOSE timed out; no contact is stable without damping of its own.
PRESSED_STIFFNESSES = tuple(float(k) for k in np.geomspace(1.0e3, 1.0e5, 9))
PRESSED_DAMPING = 20.0


def finger_loop_radius(
    stiffness: float,
    damping: float,
    mass: float,
    period: float,
    plant_damping: float = 0.0,
    contact_stiffness: float = 0.0,
    delays: Sequence[int] = FINGER_DELAYS,
) -> float:
    """The largest spectral radius of a finger surface of ``mass`` [kg] under the servo's spring
    ``stiffness`` [N/m] and damper ``damping`` [N·s/m], sampled every ``period`` [s] and applied
    each of ``delays`` periods later (zero-order hold); ``plant_damping`` [N·s/m] acts on it
    continuously (its joint's ``<dynamics damping>``, a drive's friction, a contact's damping),
    and so does ``contact_stiffness`` [N/m] (an object it presses; 0: free). Below 1 its motion
    decays. With a contact, the plant over a period is its exact (Φ, Γ) (one matrix
    exponential), handed to :func:`~ct_controllers.controllers.controller.sampled_loop_radius`,
    which builds the delayed loop as for the arm."""
    one = np.ones((1, 1))
    plant = None
    if contact_stiffness != 0.0:  # the contact spring in the plant over a period, exactly
        augmented = np.zeros((3, 3))
        augmented[0, 1] = 1.0
        augmented[1] = [-contact_stiffness / mass, -plant_damping / mass, 1.0 / mass]
        exponential = expm(augmented * period)
        plant = (exponential[:2, :2], exponential[:2, 2:])
    damped = None if plant_damping == 0.0 else np.array([plant_damping])
    return max(
        sampled_loop_radius(mass * one, stiffness * one, damping * one, period, d, damped, plant)
        for d in delays
    )


def pressed_loop_radius(
    stiffness: float, damping: float, mass: float, period: float, plant_damping: float = 0.0
) -> float:
    """:func:`finger_loop_radius` of the finger pressing an object, one period of delay late:
    the largest over :data:`PRESSED_STIFFNESSES`, the contact's damping
    :data:`PRESSED_DAMPING` added to ``plant_damping``."""
    return max(
        finger_loop_radius(
            stiffness, damping, mass, period, plant_damping + PRESSED_DAMPING, contact, (1,)
        )
        for contact in PRESSED_STIFFNESSES
    )


def sampled_finger_gains(
    stiffness: float, damping: float, mass: float, period: float, plant_damping: float = 0.0
) -> tuple[float, float]:
    """(K [N/m], D [N·s/m]) for a finger surface carrying ``mass`` [kg] servoed every
    ``period`` [s], ``plant_damping`` [N·s/m] its own viscous friction: the given gains where,
    × :data:`FINGER_GAIN_MARGIN`, the free finger is stable (:func:`finger_loop_radius` ≤ 1)
    and, as they are, the pressing one (:func:`pressed_loop_radius` ≤ 1); else critically
    damped ones, K = m ω², D = 2 m ω, with the largest ω [rad/s] (bisected to 0.1 %) for which
    both still are, K at most the given.

    The defaults (2000 N/m, 20 N·s/m) stay on the bundled arm's 50 g fingers at 1 kHz; the
    Panda's 30 g get 1.6 kN/m, 14 N·s/m, the SO-101's jaw (3.2 g at its fingertip) 175 N/m,
    1.5 N·s/m; on a 100 Hz drive rig, with the drives' rotors and friction, the bundled fingers
    (1.05 kg) 150 N/m, 25 N·s/m, the SO-101's jaw (133 g) 76 N/m, 6.4 N·s/m, and the Z1's jaw
    (1.6 kg, 130 N·s/m of friction at its tip) keeps its 2000 N/m, 17.7 N·s/m. The force mode,
    not K, sets the grip."""
    margin = FINGER_GAIN_MARGIN

    def stable(k: float, d: float) -> bool:
        return (
            finger_loop_radius(margin * k, margin * d, mass, period, plant_damping) <= 1.0
            and pressed_loop_radius(k, d, mass, period, plant_damping) <= 1.0
        )

    if stable(stiffness, damping):
        return stiffness, damping
    low, high = 0.0, float(np.sqrt(stiffness / mass))
    while high - low > 1e-3 * high:
        middle = 0.5 * (low + high)
        if stable(mass * middle * middle, 2.0 * mass * middle):
            low = middle
        else:
            high = middle
    return mass * low * low, 2.0 * mass * low
