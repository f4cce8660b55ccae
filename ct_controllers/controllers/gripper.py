"""Parallel gripper: a position servo per finger whose force saturates at the requested limit,
as a gripper drive does for a grasp (Franka's "grasp with force").

    τ_i = clip(K (r_i − q_i) − D q̇_i + g_i(q), −F_i, F_i)

where the servo reference r_i moves toward the finger target q*_i at no more than ``speed``
[m/s] (as a gripper drive closes at a set speed: fingers that slam into an object at full force
dent soft contacts by centimetres). K [N/m] is high so that a finger blocked by the object pushes
with the full limit F_i [N] (the grasp force) once r_i has run past it; D [N·s/m] damps. g_i is
the gravity force on the finger from the controller's model.

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

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.limit_approach import FINGER_LIMIT_MARGIN


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
        self.model_state = ModelState(model)

    @property
    def finger_masses(self) -> FloatArray:
        """[kg] per finger: the mass its surface carries, M_ii / l_i² (M_ii the joint's diagonal
        of the mass matrix, armature included, at the model's neutral configuration: a finger's
        subtree turns or slides about its own axis whatever the arm does; l_i its lever)."""
        diagonal = np.diag(self.model.mass_matrix(self.model.neutral()))[self.indices]
        return np.asarray(diagonal / self.levers**2, dtype=float)

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
        moving = dt > 0
        references: list[float] = []
        velocities: list[float] = []
        for index, target, force, maximum, r, (lower, upper), lever, force_lever in zip(
            self._index_list,
            targets,
            effort_limits,
            self._max_effort_list,
            self._reference,
            self._target_range_list,
            self._lever_list,
            self._force_lever_list,
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
            # τ = K (r − q) − D q̇ + g, clipped at ±bound; a NaN or negative limit gives 0 N.
            tau = squared * (
                stiffness * (r - q.item(index)) - damping * v.item(index)
            ) + gravity.item(index)
            bound = limit if limit > 0.0 else 0.0
            if maximum < bound:
                bound = maximum
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


# The largest D T / m the finger servo is designed to: sampled every T, a finger of mass m under
# damping D loses the fraction D T / m of its velocity per period (the measured velocity is held
# over the period): below 1 it settles without overshoot, past 1 it rings, past 2 it grows.
SAMPLED_DAMPING = 1.0


def sampled_finger_gains(
    stiffness: float, damping: float, mass: float, period: float
) -> tuple[float, float]:
    """(K [N/m], D [N·s/m]) for a finger surface carrying ``mass`` [kg] servoed every ``period``
    [s]: the given gains where D T / m ≤ :data:`SAMPLED_DAMPING`, else D at that bound and K at
    most critically damped with it, D² / (4 m). The defaults (2000 N/m, 20 N·s/m) stay on the
    bundled arm's 50 g fingers (0.4 at 1 kHz) and the Panda's 30 g (0.67); the SO-101's jaw,
    3.2 g at its fingertip (6.2), ran away at 20-40 rad/s under them (measured: ``ct-bench
    grasp`` of its ct-setup output, the runaway check latching in APPROACH)."""
    bound = SAMPLED_DAMPING * mass / period
    if damping <= bound:
        return stiffness, damping
    return min(stiffness, bound * bound / (4.0 * mass)), bound
