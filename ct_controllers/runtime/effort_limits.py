"""The effort limits of position-interface joints: what their drives may push with (a gripper's
grip force), as the controller asks (``ControlOutput.effort_limit``), handed to the backend
(``SystemInterface.set_effort_limit``) by the control thread just before its write."""

from __future__ import annotations

import math

import numpy as np

from ct_controllers.controllers.controller import FloatArray
from ct_controllers.hardware.interface import SystemInterface


class EffortLimits:
    """The limits set on ``hardware``'s position joints (``position_mask``, hardware order;
    ``model_index``: hardware → model index): only changes are handed on."""

    def __init__(
        self, hardware: SystemInterface, model_index: np.ndarray, position_mask: np.ndarray
    ) -> None:
        self.hardware = hardware
        self.model_index = model_index
        self.position_mask = position_mask
        # [N·m | N] the limits handed to the backend, model order, NaN = its default.
        self.current = np.full(len(model_index), np.nan)
        self._asked: FloatArray | None = None  # the controller's last array

    def apply(self, limits: FloatArray | None) -> None:
        """Hand the backend ``limits`` (model order, NaN or None = the backend's default) where
        they differ from the ones set: one ``set_effort_limit`` per changed position joint.
        Effort joints are skipped (their limited effort is the bound). A limit the backend
        cannot set raises (a fault naming the joint): the goal should have been refused."""
        if limits is self._asked:
            return  # the same array as last tick (None included): nothing changed
        current = self.current
        wanted = np.full(current.size, np.nan) if limits is None else np.asarray(limits)
        for name, index, position in zip(
            self.hardware.joint_names, self.model_index, self.position_mask, strict=True
        ):
            value, now_set = float(wanted[index]), float(current[index])
            if not position or value == now_set or (math.isnan(value) and math.isnan(now_set)):
                continue
            self.hardware.set_effort_limit(name, None if math.isnan(value) else value)
            current[index] = value
        self._asked = limits
