"""A joint jog's chain: the jog servo (``references/joint_jog.py``) → the selected controller, as
one controller the loop runs (the limiter stays the last step). The jog's joint reference goes to
the controller as the loop's would: a joint law tracks it; Cartesian impedance follows its
forward kinematics with the posture in the nullspace. If anything here raises, the loop latches
a fault naming it and runs its fault reaction."""

from __future__ import annotations

from ct_controllers.chains.wrapping import WrappingController
from ct_controllers.controllers.controller import (
    Controller,
    ControlOutput,
    FloatArray,
    JointReference,
    JointState,
)
from ct_controllers.references.joint_jog import JogServo


class JogChain(WrappingController):
    def __init__(self, servo: JogServo, inner: Controller) -> None:
        super().__init__()
        self.servo = servo
        self.inner = inner

    @property
    def moving(self) -> bool:
        """Whether the jog's reference moves (for the end of a deselected stream)."""
        return self.servo.moving

    @property
    def wrapped(self) -> Controller:
        return self.inner

    def prepare(self, state: JointState, dt: float) -> None:
        """The jog restarts from the loop's reference at the first tick."""
        self.servo.restart()
        self.inner.prepare(state, dt)

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return self.compute_output(state, reference, dt).effort

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        jogged = self.servo.update(state, reference, dt)
        return ControlOutput(self.inner.step(state, jogged, dt).effort, jogged)
