"""Joint positions (one per joint) ↔ Pinocchio's configuration vector q.

The stack holds one position per joint — the angle [rad] of a revolute or continuous joint, the
displacement [m] of a prismatic one — in the joint order of the velocity vector (Pinocchio's
``idx_v``): a joint-position vector has nv entries. Pinocchio's q has nq ≥ nv entries: a
continuous joint (``JointModelRUB*``, an unbounded revolute) is a point (cos θ, sin θ) on the unit
circle, nq = nv + number of continuous joints. A mimic follower (built with ``mimic=True``)
has no entry in either vector: Pinocchio computes its position from its master's,
θ_f = multiplier · θ_m + offset.

    q[idx_q] = θ                      revolute, prismatic (nq = nv = 1)
    q[idx_q : idx_q + 2] = (cos θ, sin θ)    continuous (nq = 2, nv = 1)

The inverse, (c, s) → θ, is atan2(s, c) ∈ (−π, π]; a continuous joint's *unwrapped* angle (the
one the stack keeps: no 2π jump when it turns past ±π) needs a nearby angle θ₀ to choose the
turn: θ = θ₀ + wrap(atan2(s, c) − θ₀), wrap to [−π, π).

For a model without continuous joints (nq == nv) the two vectors are the same and
:meth:`ConfigurationMap.to_pinocchio` hands back its input: no copy, no allocation.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray

from ct_controllers.errors import CtError
from ct_controllers.types import FloatArray


class UnsupportedJointError(CtError, ValueError):
    """A joint the model layer cannot represent with one position (a floating or planar
    joint): the message names it and its type."""


def unwrap_angle(angle: float, near: float) -> float:
    """``angle`` [rad] moved by whole turns to lie within π of ``near`` [rad] (in [near − π,
    near + π)): the unwrapped angle of a continuous joint from a wrapped measurement."""
    return near + (angle - near + math.pi) % (2.0 * math.pi) - math.pi


class ConfigurationMap:
    """The conversion for one ``pin.Model`` (see the module docstring)."""

    def __init__(self, model: pin.Model) -> None:
        single_q: list[int] = []
        single_v: list[int] = []
        circle_q: list[int] = []
        circle_v: list[int] = []
        continuous: list[str] = []
        for joint_id in range(1, model.njoints):
            joint = model.joints[joint_id]
            if joint.nq == 1 and joint.nv == 1:
                single_q.append(joint.idx_q)
                single_v.append(joint.idx_v)
            elif joint.nq == 2 and joint.nv == 1:  # an unbounded revolute: (cos θ, sin θ)
                circle_q.append(joint.idx_q)
                circle_v.append(joint.idx_v)
                continuous.append(str(model.names[joint_id]))
            elif joint.nq == 0 and joint.nv == 0:  # a mimic follower: no coordinate of its own
                continue
            else:
                raise UnsupportedJointError(
                    f"joint '{model.names[joint_id]}' ({joint.shortname()}) has nq/nv "
                    f"{joint.nq}/{joint.nv}; only revolute, continuous, prismatic and mimic "
                    "joints are supported (a fixed-base arm)"
                )
        self.nq = int(model.nq)  # Pinocchio's configuration size
        self.nv = int(model.nv)  # the joint-position (and velocity) vector's size
        self.identity = not circle_q  # nq == nv: the two vectors are the same
        self.continuous_joints: tuple[str, ...] = tuple(continuous)
        self._single_q = np.array(single_q, dtype=np.intp)
        self._single_v = np.array(single_v, dtype=np.intp)
        self._circle_cos = np.array(circle_q, dtype=np.intp)
        self._circle_sin = self._circle_cos + 1
        self._circle_v = np.array(circle_v, dtype=np.intp)
        self._circle_mask = np.zeros(self.nv, dtype=bool)
        self._circle_mask[self._circle_v] = True
        # Scratch for :meth:`to_pinocchio_into` (no allocation per call).
        self._single = np.zeros(len(single_q))
        self._angles = np.zeros(len(circle_q))
        self._trig = np.zeros(len(circle_q))

    @property
    def continuous_mask(self) -> NDArray[np.bool_]:
        """True at the joint-position index of each continuous joint (a copy)."""
        return self._circle_mask.copy()

    def _check(self, positions: FloatArray) -> None:
        if positions.shape != (self.nv,):
            raise ValueError(
                f"joint positions: expected {self.nv} values (one per joint), got shape "
                f"{positions.shape}"
            )

    def to_pinocchio(self, positions: FloatArray) -> FloatArray:
        """Pinocchio's q (nq) for joint ``positions`` (nv) [rad | m]: ``positions`` itself
        when nq == nv, else a new array."""
        if self.identity:
            return positions
        positions = np.asarray(positions, dtype=np.float64)
        self._check(positions)
        return self.to_pinocchio_into(positions, np.empty(self.nq))

    def to_pinocchio_into(self, positions: FloatArray, out: FloatArray) -> FloatArray:
        """:meth:`to_pinocchio` written into ``out`` (nq), returned; nothing allocated (the
        per-tick conversion of a model with continuous joints)."""
        if self.identity:
            np.copyto(out, positions)
            return out
        np.take(positions, self._single_v, out=self._single)
        np.put(out, self._single_q, self._single)
        np.take(positions, self._circle_v, out=self._angles)
        np.cos(self._angles, out=self._trig)
        np.put(out, self._circle_cos, self._trig)
        np.sin(self._angles, out=self._trig)
        np.put(out, self._circle_sin, self._trig)
        return out

    def from_pinocchio(self, q: FloatArray, near: FloatArray | None = None) -> FloatArray:
        """Joint positions (nv) [rad | m] of Pinocchio's ``q`` (nq), a new array. A continuous
        joint's angle is atan2(sin, cos) ∈ (−π, π], or, given ``near`` (joint positions),
        the angle within π of ``near``'s (unwrapped: no jump of 2π across ±π)."""
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (self.nq,):
            raise ValueError(f"q: expected {self.nq} values (Pinocchio's nq), got {q.shape}")
        positions = np.empty(self.nv)
        positions[self._single_v] = q[self._single_q]
        if not self.identity:
            angles = np.arctan2(q[self._circle_sin], q[self._circle_cos])
            if near is not None:
                reference = np.asarray(near, dtype=np.float64)[self._circle_v]
                angles = reference + np.mod(angles - reference + np.pi, 2.0 * np.pi) - np.pi
            positions[self._circle_v] = angles
        return positions
