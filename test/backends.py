"""The three backends as test rigs: :mod:`ct_controllers.sim.rigs`, the one rig builder the
tests and ``ct-bench backends`` share (imported here by the names the tests use)."""

from __future__ import annotations

from collections.abc import Callable
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
from ct_controllers.tasks.phases import Phase

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


def run_grasp(rig: Rig, runner: Any, on_hold: Callable[[], None], samples: int = 5) -> Any:
    """Run ``runner`` (a started grasp, switched in) on ``rig`` for at most 30 s of its time, in
    10 ms chunks, no fault allowed; ``on_hold()`` once per chunk through the first ``samples``
    chunks of the hold stage; then the stack's own controller back. The task, as it ended."""
    loop, stack = rig.stack.loop, rig.stack
    chunk = max(1, round(0.01 / rig.config.period))
    held = 0
    for _ in range(round(30.0 / (chunk * rig.config.period))):
        loop.run_ticks(chunk)
        assert loop.fault is None, loop.fault
        task = runner.task
        if task.finished:
            break
        if task.phase is Phase.HOLD and task.stage == "hold" and held < samples:
            on_hold()
            held += 1
    loop.switch_controller(stack.controller)
    return runner.task
