"""Chained controllers: from a Cartesian target to the joint references of the active
joint-level controller (joint impedance, computed torque) on the same tick.

A reference generator gets the measured state, a :class:`CartesianTarget` and the period, and
returns a :class:`~ct_controllers.controllers.controller.JointReference` (q*, v*, a*), model
order. Its parameters are staged from any thread and applied together at the next tick boundary,
as the gains of a :class:`~ct_controllers.controllers.controller.Controller` are.
"""

from __future__ import annotations

import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from ct_controllers.errors import CtError, GainError
from ct_controllers.model.frames import check_pose
from ct_controllers.types import FloatArray, JointReference, JointState


class TargetError(CtError, ValueError):
    """A target was rejected (unknown frame, not a pose, non-finite twist); the message says
    which."""


@dataclass(frozen=True)
class CartesianTarget:
    """A TCP target.

    pose   4x4 homogeneous transform [m] of the TCP, expressed in ``frame``
    frame  the frame the pose and twist are expressed in; generators accept only their
           model's base frame (a goal in a frame they cannot resolve is rejected)
    twist  optional feedforward TCP velocity (6,) = (linear [m/s]; angular [rad/s]) of the TCP
           origin, in ``frame`` axes; None means a fixed target
    wrench optional feedforward wrench (6,) = (force [N]; torque [N·m]) at the TCP origin, in
           ``frame`` axes, that a Cartesian law adds (Cartesian impedance); None: none
    """

    pose: FloatArray
    frame: str
    twist: FloatArray | None = None
    wrench: FloatArray | None = None

    def validated(self, base_frame: str) -> CartesianTarget:
        """A checked copy (pose a rigid transform, twist finite), or :class:`TargetError`."""
        if self.frame != base_frame:
            raise TargetError(
                f"target expressed in frame '{self.frame}'; this generator resolves only "
                f"'{base_frame}'"
            )
        try:
            pose = check_pose(self.pose, "target pose")
        except ValueError as exc:
            raise TargetError(str(exc)) from None
        twist = _six_values("twist", self.twist)
        wrench = _six_values("wrench", self.wrench)
        return CartesianTarget(pose=pose, frame=self.frame, twist=twist, wrench=wrench)


def _six_values(name: str, value: object) -> FloatArray | None:
    """A target's twist or wrench as 6 finite values (None stays None), or :class:`TargetError`."""
    if value is None:
        return None
    try:
        array = np.array(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TargetError(f"target {name}: expected 6 finite values, got {value!r}") from None
    if array.size != 6 or not np.isfinite(array).all():
        raise TargetError(f"target {name}: expected 6 finite values, got {value!r}")
    return array


ParametersT = TypeVar("ParametersT")


class ReferenceGenerator(ABC, Generic[ParametersT]):
    """Base of the chained controllers. Subclasses implement :meth:`compute`.

    ``parameters`` is an immutable (frozen, validated) object; :meth:`stage_parameters` queues a
    whole replacement, installed by :meth:`update` before the next compute, all or nothing.
    """

    def __init__(self, parameters: ParametersT) -> None:
        self.parameters = parameters
        self._staged: ParametersT | None = None
        self._staged_lock = threading.Lock()

    def stage_parameters(self, parameters: ParametersT) -> None:
        """Queue a validated parameter set for the next tick. Safe from any thread."""
        with self._staged_lock:
            self._staged = parameters

    def update(self, state: JointState, target: CartesianTarget, dt: float) -> JointReference:
        """One tick: install staged parameters, then compute the references. The arrays of the
        reference returned are new and the caller's (a chain may complete them in place)."""
        if self._staged is not None:
            with self._staged_lock:
                staged, self._staged = self._staged, None
            if staged is not None:
                self.apply_parameters(staged)
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be finite and > 0, got {dt}")
        return self.compute(state, target, dt)

    def apply_parameters(self, parameters: ParametersT) -> None:
        """Install a parameter set (on the control thread, at a tick boundary)."""
        self.parameters = parameters

    def prepare(self, state: JointState, target: CartesianTarget, dt: float) -> None:
        """Warm-up before the first tick, off the control thread (see
        :meth:`Controller.prepare`); leaves the generator as if it had not run. Default:
        nothing."""

    @abstractmethod
    def compute(self, state: JointState, target: CartesianTarget, dt: float) -> JointReference:
        """q* [rad | m], v* [rad/s | m/s], a* [rad/s² | m/s²] in model order."""


def per_joint(
    name: str, value: object, joint_names: tuple[str, ...], default: float | None = None
) -> FloatArray:
    """A per-joint vector in ``joint_names`` order from a scalar (same for all), a sequence in
    that order, or a mapping joint name → value (names not listed take ``default``). Finite
    values only. Raises :class:`GainError` naming ``name`` and any unknown joint."""
    try:
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - set(joint_names))
            if unknown:
                raise GainError(f"{name}: unknown joint(s) {unknown}; known: {list(joint_names)}")
            missing = [n for n in joint_names if n not in value]
            if missing and default is None:
                raise GainError(f"{name}: no value for joint(s) {missing}")
            array = np.array([float(value.get(n, default)) for n in joint_names])
        else:
            array = np.array(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, GainError):
            raise
        raise GainError(f"{name}: not numbers: {value!r}") from None
    if array.size == 1:
        array = np.full(len(joint_names), float(array[0]))
    if array.size != len(joint_names):
        raise GainError(
            f"{name}: expected {len(joint_names)} values ({', '.join(joint_names)}), "
            f"got {array.size}"
        )
    if not np.isfinite(array).all():
        raise GainError(f"{name}: non-finite value in {array.tolist()}")
    return array
