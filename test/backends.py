"""The three backends as test rigs: :mod:`ct_controllers.sim.rigs`, the one rig builder the
tests and ``ct-bench backends`` share (imported here by the names the tests use)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ct_controllers.controllers.controller import (
    Controller,
    ControlOutput,
    JointReference,
    JointState,
)
from ct_controllers.sim.gains import SLOW_LOOP_GAINS
from ct_controllers.sim.rigs import BACKENDS, MODES, REAL_RATE, Rig, make_rig
from ct_controllers.sim.ros2_control_plant import PlantProcess

__all__ = [
    "BACKENDS",
    "MODES",
    "REAL_RATE",
    "SLOW_LOOP_GAINS",
    "Limiting",
    "PlantProcess",
    "Rig",
    "make_rig",
]


class Limiting(Controller):
    """The stack's controller, asking its drives for ``limit`` (model order, [N·m | N]; NaN =
    no limit of its own) each tick, as the grasp chain asks its fingers' grip force."""

    def __init__(self, inner: Controller) -> None:
        super().__init__()
        self.inner = inner
        self.limit: np.ndarray | None = None

    def compute(self, state: JointState, reference: JointReference, dt: float) -> Any:
        return self.inner.compute(state, reference, dt)

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        output = self.inner.step(state, reference, dt)
        return ControlOutput(output.effort, output.reference, self.limit)
