"""An object between the fingers, as the finger joints of a simulated plant feel it — the one
contact model of the rigs without a physics engine (the bridge's plant process and the simulated
CiA 402 drives, both through :func:`~ct_controllers.sim.drives.motor_step`; MuJoCo has a
real cube). The object is centred between the fingers and rigid but for a contact stiffness:
each finger joint meets a one-sided spring-damper at its share w/n of the object's width w, n
the prismatic fingers the listed joints move (each listed joint one, plus its ``<mimic>``
followers × their multipliers) — half for two fingers, or for one joint whose mimic moves the
other; all of it for one jaw against a fixed jaw closed at the jaw's zero —

    f_i = max(0, k (w/n − q_i) − d q̇_i)   while q_i < w/n (the finger pressed into it), else 0,

a force [N] on the finger joint along +q (it pushes the finger back open; q is each finger's
opening [m]). It never pulls: a finger leaving the object feels nothing.

The object enters between the fingers as they open around it: each finger's stop engages the
first time that finger is at or beyond w/2, and stays engaged until the object is replaced or
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
from numpy.typing import NDArray

from ct_controllers.model.robot import RobotModel

FloatArray = NDArray[np.float64]

CONTACT_STIFFNESS = 2.0e4  # [N/m] per finger: a 20 N grip presses 1 mm into the object
CONTACT_DAMPING = 20.0  # [N·s/m] per finger


@dataclass
class ObjectBetweenFingers:
    """An object ``width`` [m] wide between the fingers at model indices ``q_indices`` (position)
    and ``v_indices`` (velocity, force), with contact ``stiffness`` [N/m] and ``damping``
    [N·s/m] per finger. Build it with :meth:`for_model`."""

    q_indices: tuple[int, ...]
    v_indices: tuple[int, ...]
    width: float
    stiffness: float = CONTACT_STIFFNESS
    damping: float = CONTACT_DAMPING
    moving: float = 0.0  # n of the module docstring (0: one finger per listed joint)
    engaged: np.ndarray = field(init=False)  # per finger: its stop has engaged

    def __post_init__(self) -> None:
        if len(self.q_indices) != len(self.v_indices) or not self.q_indices:
            raise ValueError("an object between the fingers needs one index pair per finger")
        if not (math.isfinite(self.width) and self.width > 0):
            raise ValueError(f"object width must be finite and > 0 m, got {self.width}")
        if not (math.isfinite(self.stiffness) and self.stiffness > 0):
            raise ValueError(f"contact stiffness must be finite and > 0 N/m, got {self.stiffness}")
        if not (math.isfinite(self.damping) and self.damping >= 0):
            raise ValueError(f"contact damping must be finite and >= 0 N·s/m, got {self.damping}")
        self.engaged = np.zeros(len(self.q_indices), dtype=bool)

    @classmethod
    def for_model(
        cls,
        model: RobotModel,
        fingers: Sequence[str],
        width: float,
        stiffness: float = CONTACT_STIFFNESS,
        damping: float = CONTACT_DAMPING,
    ) -> ObjectBetweenFingers:
        """The object between the named finger joints of ``model`` (their mimic followers
        moving with them)."""
        moving = sum(
            1.0 + sum(abs(m.multiplier) for m in model.mimic.values() if m.master == name)
            for name in fingers
        )
        return cls(
            tuple(model.q_index(n) for n in fingers),
            tuple(model.v_index(n) for n in fingers),
            float(width),
            float(stiffness),
            float(damping),
            float(moving),
        )

    @property
    def stop(self) -> float:
        """[m] the finger opening at which a finger touches the object: its share of the
        width (half for two fingers, all of it for one jaw)."""
        return self.width / (self.moving or len(self.q_indices))

    def engage(self, q: FloatArray) -> None:
        """Engage the stop of every finger at or beyond it (``q`` the plant's positions)."""
        self.engaged |= q[list(self.q_indices)] >= self.stop

    def finger_forces(self, q: FloatArray, v: FloatArray) -> FloatArray:
        """The normal force [N] between each finger and the object (0 = no contact)."""
        opening = q[list(self.q_indices)]
        speed = v[list(self.v_indices)]
        force = self.stiffness * (self.stop - opening) - self.damping * speed
        return np.where(self.engaged & (opening < self.stop), np.maximum(force, 0.0), 0.0)

    def add_joint_forces(self, q: FloatArray, v: FloatArray, force: FloatArray) -> None:
        """Engage, then add the contact forces to the generalized forces ``force`` [N] (in
        place, model order), as :func:`~ct_controllers.sim.drives.motor_step` does at
        every sub-step."""
        self.engage(q)
        force[list(self.v_indices)] += self.finger_forces(q, v)
