"""An object between the fingers, as the finger joints of a simulated plant feel it — the one
contact model of the rigs without a physics engine (the bridge's plant process and the simulated
CiA 402 drives, both through :func:`~ct_controllers.sim.drives.motor_step`; MuJoCo has a
real cube). The object is centred between the fingers and rigid but for a contact stiffness.

A finger is a listed gripper joint or one of its ``<mimic>`` followers. Its surface opening
o_i(q) [m] is a function of its joint's coordinate q (the listed joint's, model order). With
width frames (the stack's ``gripper.width_frames``, configured or found) it is the width w(q)
between them by forward kinematics, the other gripper joints closed, less the closed width, shared
among the joint's fingers (a follower's share × |multiplier|): a curve, interpolated, for a
revolute jaw (its tip swings on an arc), a line for a prismatic finger. Without width frames
every listed joint is a prismatic finger closed at 0 (o = q), a follower's o = |multiplier| ·
(q + offset / multiplier). The rate r_i = do_i/dq [m/rad | m/m] is the finger's lever where it
is (1 for a prismatic finger, ~ the tip's distance from the hinge for a revolute jaw).
Each finger meets a one-sided spring-damper at its share w/n of the object's width w, n the
fingers — half for two fingers, or for one joint whose mimic moves the other; all of it for one
jaw against a fixed jaw —

    f_i = max(0, k (w/n − o_i) − d ȯ_i)   while o_i < w/n (the finger pressed into it), else 0,

with ȯ_i = r_i q̇: a force [N] on the finger's surface, pushing it back open; its joint feels
r_i f_i [N·m | N] (virtual work: a follower's through its master, a revolute jaw's through its
lever at the contact). It never pulls: a finger leaving the object feels nothing.

The object enters between the fingers as they open around it: each finger's stop engages the
first time that finger is at or beyond w/n, and stays engaged until the object is replaced or
removed. A gripper that starts narrower than the object (the rigs' home opening is 0.02 m per
finger, a 5 cm object needs 0.025 m) is not inside it from the start; the grasp's APPROACH opens
the fingers, and from then on CLOSE closes them on the object.

What the plant reports as a finger's effort is what its drive reports — the force its motor
applies (a drive measures its motor current), not this contact force. In a steady grip the two
balance (up to gravity along the finger); while the finger moves, or hits the object, they differ
by the finger's inertial and friction forces. A grip force is therefore judged, as on a real
gripper, from the drive's own effort; the contact force is reported separately for checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray

from ct_controllers.model.grip_geometry import grip_geometry
from ct_controllers.model.robot import RobotModel

FloatArray = NDArray[np.float64]

CONTACT_STIFFNESS = 2.0e4  # [N/m] per finger: a 20 N grip presses 1 mm into the object
CONTACT_DAMPING = 20.0  # [N·s/m] per finger


@dataclass
class ObjectBetweenFingers:
    """An object ``width`` [m] wide between the fingers ``fingers`` (names: listed gripper joints
    and their mimic followers), finger i on the coordinate at model index ``indices[i]``, its
    opening a line o = s (q − c) of surface scale ``scales[i]`` [m/rad | m/m] and closed
    coordinate ``closed[i]`` [rad | m], or, where given, the curve ``curves[i]`` (module
    docstring); contact ``stiffness`` [N/m] and ``damping`` [N·s/m] per finger. Build it with
    :meth:`for_model`."""

    fingers: tuple[str, ...]
    indices: tuple[int, ...]
    scales: tuple[float, ...]
    closed: tuple[float, ...]
    width: float
    stiffness: float = CONTACT_STIFFNESS
    damping: float = CONTACT_DAMPING
    # Per finger, where the width frames give it: (coordinate samples [rad | m], the finger's
    # opening there [m]) — its opening by forward kinematics, interpolated (None: linear).
    curves: tuple[tuple[FloatArray, FloatArray], ...] | None = None
    engaged: np.ndarray = field(init=False)  # per finger: its stop has engaged

    def __post_init__(self) -> None:
        sizes = {len(self.fingers), len(self.indices), len(self.scales), len(self.closed)}
        if len(sizes) != 1 or not self.fingers:
            raise ValueError("an object between the fingers needs one row per finger")
        if not all(math.isfinite(s) and s != 0 for s in self.scales):
            raise ValueError(f"finger scales must be finite and non-zero, got {self.scales}")
        if not (math.isfinite(self.width) and self.width > 0):
            raise ValueError(f"object width must be finite and > 0 m, got {self.width}")
        if not (math.isfinite(self.stiffness) and self.stiffness > 0):
            raise ValueError(f"contact stiffness must be finite and > 0 N/m, got {self.stiffness}")
        if not (math.isfinite(self.damping) and self.damping >= 0):
            raise ValueError(f"contact damping must be finite and >= 0 N·s/m, got {self.damping}")
        self.engaged = np.zeros(len(self.fingers), dtype=bool)
        self._indices = np.array(self.indices, dtype=np.intp)
        self._scales = np.array(self.scales, dtype=float)
        self._closed = np.array(self.closed, dtype=float)
        if self.curves is not None and len(self.curves) != len(self.fingers):
            raise ValueError("an object between the fingers needs one curve per finger")
        # Each curve's slope do/dq [m/rad | m/m] between its samples, at the samples' midpoints.
        self._slopes = (
            None
            if self.curves is None
            else tuple((0.5 * (q[1:] + q[:-1]), np.diff(o) / np.diff(q)) for q, o in self.curves)
        )
        # Fixed once built, for the sub-step path (motor_step: 2000 calls a second, in-process
        # drives share the GIL with the control loop): the stop, and the joints the fingers'
        # forces go to — each finger's own, or summed through a 0/1 matrix where mimic
        # followers share their master's.
        self._stop = self.width / len(self.fingers)
        self._joints, owner = np.unique(self._indices, return_inverse=True)
        self._gather = (
            None
            if self._joints.size == self._indices.size
            else (np.arange(self._joints.size)[:, None] == owner[None, :]).astype(float)
        )

    @classmethod
    def for_model(
        cls,
        model: RobotModel,
        fingers: Sequence[str],
        width: float,
        stiffness: float = CONTACT_STIFFNESS,
        damping: float = CONTACT_DAMPING,
        width_frames: Sequence[str] = (),
    ) -> ObjectBetweenFingers:
        """The object between the named gripper joints of ``model`` and their mimic followers;
        with ``width_frames`` (the configuration's ``gripper.width_frames``, or those the stack
        found) each joint's lever and closed end come from the grip geometry between them
        (:func:`~ct_controllers.model.grip_geometry.grip_geometry`), else every joint is a
        prismatic finger closed at 0 (module docstring)."""
        fingers = list(fingers)
        indices = [model.q_index(n) for n in fingers]  # the error names an unknown one
        if width_frames:
            geometry = grip_geometry(model, fingers, width_frames)
            # A joint that closes towards its upper limit opens as its coordinate falls.
            levers = [
                lever if opened > shut else -lever
                for lever, shut, opened in zip(
                    geometry.levers, geometry.closed, geometry.opened, strict=True
                )
            ]
            closed = list(geometry.closed)
            widths = [
                _width_curve(model, fingers, k, width_frames, closed) for k in range(len(fingers))
            ]
        else:
            levers, closed = [1.0] * len(fingers), [0.0] * len(fingers)
        names, rows, scales, ends = list(fingers), list(indices), list(levers), list(closed)
        for k, name in enumerate(fingers):
            for follower in model.mimic.values():
                if follower.master != name or follower.multiplier == 0:
                    continue
                names.append(follower.name)
                rows.append(indices[k])
                scales.append(levers[k] * abs(follower.multiplier))
                ends.append(closed[k] if width_frames else -follower.offset / follower.multiplier)
        curves = None
        if width_frames:  # the joint's width, shared among its fingers by their scales
            total = {k: sum(abs(c) for r, c in zip(rows, scales, strict=True) if r == i)
                     for k, i in enumerate(indices)}  # fmt: skip
            owner = {i: k for k, i in enumerate(indices)}
            curves = tuple(
                (widths[owner[r]][0], widths[owner[r]][1] * abs(c) / total[owner[r]])
                for r, c in zip(rows, scales, strict=True)
            )
            # A straight curve (a prismatic finger's) is its line: the linear rows, cheaper.
            lines = [_line(samples, opening) for samples, opening in curves]
            if all(line is not None for line in lines):
                scales = [line[0] for line in lines if line is not None]
                ends = [line[1] for line in lines if line is not None]
                curves = None
        return cls(
            tuple(names),
            tuple(rows),
            tuple(float(s) for s in scales),
            tuple(float(c) for c in ends),
            float(width),
            float(stiffness),
            float(damping),
            curves,
        )

    @property
    def stop(self) -> float:
        """[m] the opening at which a finger touches the object: its share of the width (half
        for two fingers, all of it for one jaw)."""
        return self._stop

    def openings(self, q: FloatArray) -> FloatArray:
        """Each finger's surface opening o_i [m] at positions ``q`` (model order)."""
        if self.curves is None:
            return self._scales * (q[self._indices] - self._closed)
        return np.array(
            [np.interp(q[i], *curve) for i, curve in zip(self.indices, self.curves, strict=True)]
        )

    def rates(self, q: FloatArray) -> FloatArray:
        """Each finger's do_i/dq [m/rad | m/m] at ``q``: the rate of its surface per unit of
        its joint, through which its force reaches the joint."""
        if self._slopes is None:
            return self._scales
        return np.array(
            [np.interp(q[i], *slope) for i, slope in zip(self.indices, self._slopes, strict=True)]
        )

    def engage(self, q: FloatArray) -> None:
        """Engage the stop of every finger at or beyond it (``q`` the plant's positions)."""
        self.engaged |= self.openings(q) >= self._stop

    def finger_forces(self, q: FloatArray, v: FloatArray) -> FloatArray:
        """The normal force [N] between each finger and the object (0 = no contact), in
        :attr:`fingers` order."""
        return self._forces(self.openings(q), self.rates(q), v)

    def _forces(self, opening: FloatArray, rate: FloatArray, v: FloatArray) -> FloatArray:
        speed = rate * v[self._indices]
        force = self.stiffness * (self._stop - opening) - self.damping * speed
        return np.where(self.engaged & (opening < self._stop), np.maximum(force, 0.0), 0.0)

    def add_joint_forces(self, q: FloatArray, v: FloatArray, force: FloatArray) -> None:
        """Engage, then add the contact forces to the generalized forces ``force`` [N·m | N] (in
        place, model order) — each finger's through its rate do_i/dq (its lever) — as
        :func:`~ct_controllers.sim.drives.motor_step` does at every sub-step."""
        opening, rate = self.openings(q), self.rates(q)
        self.engaged |= opening >= self._stop
        joint_forces = rate * self._forces(opening, rate, v)
        if self._gather is None:
            force[self._indices] += joint_forces
        else:  # a mimic follower's onto its master's
            force[self._joints] += self._gather @ joint_forces


CURVE_SAMPLES = 201  # per gripper joint's range: the width curve's samples


def _width_curve(
    model: RobotModel,
    joints: Sequence[str],
    k: int,
    frames: Sequence[str],
    closed: Sequence[float],
) -> tuple[FloatArray, FloatArray]:
    """Gripper joint ``joints[k]``'s width curve: samples of its range [rad | m] and the width
    w [m] between ``frames`` there (their distance less the closed one), the other gripper joints
    closed, by forward kinematics (the gripper's frames ride on the hand: the arm's joints do not
    change their distance)."""
    index = model.q_index(joints[k])
    lower, upper = float(model.limits.lower[index]), float(model.limits.upper[index])
    q = np.zeros(model.nq)
    q[[model.q_index(n) for n in joints]] = closed
    first, second = (model.frame_id(f) for f in frames)
    data = model.model.createData()  # scratch of its own: the plant's threads use model.data

    def distance(at: FloatArray) -> float:
        # One forward kinematics for both frames (this runs 201 times per gripper joint).
        pin.framesForwardKinematics(model.model, data, model.pinocchio_configuration(at))
        return float(np.linalg.norm(data.oMf[first].translation - data.oMf[second].translation))

    shut = distance(q)
    samples = np.linspace(lower, upper, CURVE_SAMPLES)
    widths = np.empty(CURVE_SAMPLES)
    for n, value in enumerate(samples):
        q[index] = value
        widths[n] = distance(q) - shut
    return samples, widths


def _line(samples: FloatArray, opening: FloatArray) -> tuple[float, float] | None:
    """(scale, closed) of o = scale (q − closed) when the curve is a line within 1e-9 m (and
    not flat), else None."""
    slope, intercept = np.polyfit(samples, opening, 1)
    if slope == 0 or np.abs(slope * samples + intercept - opening).max() > 1e-9:
        return None
    return float(slope), float(-intercept / slope)
