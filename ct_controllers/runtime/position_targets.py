"""What the control loop writes, joint by joint: the limited effort [N·m | N] to joints on the
effort interface; to joints on the position interface the tracked reference's q* [rad | m],
within the joint limits and rate-limited to the URDF velocity (:class:`PositionTargets`).

A reference that jumps (a controller switched in with another reference, a chain synchronising
to the measured state) is followed at the joint's top speed, not in one period, and the step
limit is reported as a saturation; a non-finite q* keeps the last target (reported too). Fault
reactions are written without the step limit: they start from the measured position, where a
position joint should go at once."""

from __future__ import annotations

import math

import numpy as np

from ct_controllers.controllers.controller import FloatArray
from ct_controllers.hardware.interface import EFFORT, POSITION
from ct_controllers.model.robot import RobotModel


class PositionTargets:
    """The hardware-order command values for a robot whose joints use ``interfaces`` (hardware
    order; ``model_index``: hardware → model index) at ``period`` [s]; keeps the last targets
    written (control thread only)."""

    def __init__(
        self,
        model: RobotModel,
        interfaces: tuple[str, ...],
        model_index: np.ndarray,
        period: float,
    ) -> None:
        if any(i not in (EFFORT, POSITION) for i in interfaces):
            raise ValueError(f"unsupported command interfaces {interfaces}")
        self.lower = model.limits.lower  # [rad | m]
        self.upper = model.limits.upper  # [rad | m]
        self.model_index = model_index
        self.mask = np.array([i == POSITION for i in interfaces])  # hardware order
        self.any = bool(self.mask.any())  # some joint is on the position interface
        self.joints = np.zeros(model.nv, dtype=bool)  # the position joints, model order
        self.joints[model_index] = self.mask
        self._effort_joints = ~self.joints  # model order
        # [rad | m] per period: the most a position target moves in one tick (URDF velocity).
        self.step = model.limits.velocity * period
        self._targets: FloatArray | None = None  # last written, model order
        self._unchanged = np.zeros(model.nv, dtype=bool)
        self._unchanged.setflags(write=False)
        # Position joints whose target the last command changed (step limit, non-finite q*).
        self.step_limited: np.ndarray = self._unchanged

    def values(
        self,
        effort: FloatArray,
        reference_q: FloatArray,
        measured_q: FloatArray,
        limit_steps: bool = False,
    ) -> np.ndarray:
        """Hardware order: ``effort`` [N·m | N] (model order) for effort joints; for position
        joints ``reference_q`` [rad | m] within the joint limits and, with ``limit_steps``, at
        most :attr:`step` from the last target written; a non-finite q* keeps the last target
        (``measured_q`` before the first)."""
        values = effort[self.model_index]
        if not self.any:
            return values
        targets = np.clip(reference_q, self.lower, self.upper)
        previous = self._targets
        self.step_limited = self._unchanged
        if not math.isfinite(targets.dot(targets)):  # a non-finite q*: the last target stays
            bad = ~np.isfinite(targets)
            last = previous if previous is not None else measured_q
            targets[bad] = last[bad]
            self.step_limited = bad & self.joints
        if limit_steps and previous is not None:
            stepped = np.minimum(np.maximum(targets, previous - self.step), previous + self.step)
            self.step_limited = self.step_limited | ((stepped != targets) & self.joints)
            targets = stepped
        self._targets = targets
        return np.where(self.mask, targets[self.model_index], values)

    def saturated(self, effort_flags: np.ndarray) -> np.ndarray:
        """Per joint (model order), what the last command changed: ``effort_flags`` (the
        limiter's) where an effort is written, the step limit where a position target is
        (``effort_flags`` itself when every joint takes an effort)."""
        if not self.any:
            return effort_flags  # every joint takes an effort, and nothing was step-limited
        return effort_flags & self._effort_joints | self.step_limited
