"""The chain of a joint-space law: differential IK → the joint-level controller, as one
controller the loop runs (so the limiter stays the last step). The TCP target may be replaced
from any thread; the joints the IK does not control (the fingers) hold where they were when the
chain started. Each tick's full joint reference is part of its output (:meth:`compute_output`),
so joints on the position interface follow the IK as effort joints do. Built by the chain
factory (``chains/tcp_chain_factory.py``) for a controller that takes joint references."""

from __future__ import annotations

import time

from ct_controllers.chains.tcp_target_chain import TcpTargetChain
from ct_controllers.controllers.controller import (
    Controller,
    ControlOutput,
    FloatArray,
    JointReference,
    JointState,
)
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.reference_generator import ReferenceGenerator, TargetError


class CartesianChain(TcpTargetChain):
    GENERATES_REFERENCE = True

    def __init__(
        self,
        model: RobotModel,
        diff_ik: ReferenceGenerator,
        joint_controller: Controller,
        target: FloatArray,
    ) -> None:
        super().__init__(model, target)
        self.diff_ik = diff_ik
        self.joint_controller = joint_controller
        self.stage_breakdown: dict[str, float] = {"diff_ik": 0.0, "joint_controller": 0.0}

    def set_target(
        self,
        pose: FloatArray,
        twist: FloatArray | None = None,
        wrench: FloatArray | None = None,
    ) -> None:
        """Replace the TCP target (4x4, base frame) and its optional feed-forward twist (6,:
        linear [m/s]; angular [rad/s], base axes); checked here, used from the next tick. A
        wrench is refused (TargetError): a joint reference carries none."""
        if wrench is not None:
            raise TargetError(
                "a wrench feed-forward needs a controller that takes Cartesian targets; "
                f"{type(self.joint_controller).__name__} takes joint references"
            )
        self._target = self.checked(pose, twist)

    @property
    def wrapped(self) -> Controller:
        return self.joint_controller

    def prepare(self, state: JointState, dt: float) -> None:
        """Warm the differential IK (its own model and solver) toward the current target; the
        joint controller may be running in the loop: it is not touched."""
        self.diff_ik.prepare(state, self._target, dt)

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        """The differential IK's joint reference (every joint: the arm's q*, v*, a* toward the
        target, the other joints held where the IK last synchronised them) and the joint
        controller's efforts tracking it; ``reference`` (the loop's own) is not used."""
        start = time.perf_counter()
        joint_reference = self.diff_ik.update(state, self._target, dt)
        after_ik = time.perf_counter()
        tau = self.joint_controller.update(state, joint_reference, dt)
        self.stage_breakdown["diff_ik"] = after_ik - start
        self.stage_breakdown["joint_controller"] = time.perf_counter() - after_ik
        return ControlOutput(tau, joint_reference)
