"""A streamed target's chain: the servo (``references/servo.py``) → the Cartesian target of the
controller that takes it, as one controller the loop runs (the limiter stays the last step).

The target goes where MoveToPose's go, into a chain of the chain factory
(``chains/tcp_chain_factory.py``): through the differential IK (QP, joint limits as constraints)
to the selected joint law, or straight to a controller that takes Cartesian targets
(:attr:`Controller.ACCEPTS`: Cartesian impedance), whose own step bounds then apply on top of
the servo's. Every tick: the measured TCP pose, twist (J q̇) and
manipulability at the measured state, the servo's commanded pose and twist, handed to the inner
controller, whose efforts and joint reference are the chain's.

If anything here raises, the loop latches a fault naming the stage and runs its fault reaction
(``runtime/control_loop.py``: the loop never dies of a controller's exception).
"""

from __future__ import annotations

import time

import numpy as np
import pinocchio as pin

from ct_controllers.chains.tcp_chain_factory import tcp_target_chain
from ct_controllers.chains.tcp_target_chain import TcpTargetChain
from ct_controllers.chains.wrapping import WrappingController
from ct_controllers.controllers.controller import (
    Controller,
    ControlOutput,
    FloatArray,
    JointReference,
    JointState,
)
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.servo import Servo, ServoOutput, manipulability


class StreamChain(WrappingController):
    """``servo`` → ``inner`` (the chain factory's chain to the selected controller).
    ``model``: the chain's own (scratch data of its own, the control thread's)."""

    def __init__(self, model: RobotModel, servo: Servo, inner: TcpTargetChain) -> None:
        super().__init__()
        self.model = model
        self.servo = servo
        self.inner = inner
        self.last: ServoOutput | None = None  # the last tick's (status, tests)
        self._commanded_q: FloatArray | None = None  # the IK's last joint reference
        self.stage_breakdown: dict[str, float] = {"servo": 0.0, "inner": 0.0}

    @property
    def moving(self) -> bool:
        """Whether the commanded pose moves (for the end of a deselected stream)."""
        return self.servo.moving

    @property
    def wrapped(self) -> Controller:
        return self.inner

    def prepare(self, state: JointState, dt: float) -> None:
        """The servo restarts from the measured state at the first tick; the inner controller
        prepares (the IK warms toward the measured TCP pose; Cartesian impedance restarts its
        commanded pose)."""
        self.servo.restart()
        self._commanded_q = None
        self.inner.prepare(state, dt)

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return self.compute_output(state, reference, dt).effort

    def _predicted_measure(self, q: FloatArray, pose: FloatArray, jacobian: FloatArray) -> float:
        """The manipulability where the last commanded pose would put the arm: one damped
        least-squares step from the IK's joint reference (or, without one, the measured ``q``
        at ``pose`` with ``jacobian``) to it. Why: the arm goes where the command leads, which
        runs ahead of the measured state, and near a stretched arm's singularity the band
        between the thresholds is a few millimetres of reach — judged at the measured state
        alone, the arm ended at 0.0007 m³ with the stop at 0.015 (MuJoCo, a target out of
        reach), with the prediction at 0.0033. Before the first command: the measured
        state's."""
        commanded = self.last
        if commanded is None:
            return manipulability(jacobian)
        if self._commanded_q is not None:
            q = self._commanded_q
            pose = self.model.frame_pose(q)
            jacobian = self.model.frame_jacobian(q)
        error = _pose_error(commanded.pose, pose)
        gram = jacobian.dot(jacobian.T)
        gram[np.diag_indices(6)] += PREDICTION_DAMPING
        predicted = q + jacobian.T.dot(np.linalg.solve(gram, error))
        return manipulability(self.model.frame_jacobian(predicted))

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        start = time.perf_counter()
        pose = self.model.frame_pose(state.q)
        jacobian = self.model.frame_jacobian(state.q)
        measure = manipulability(jacobian)
        if measure < PREDICTION_RANGE * self.servo.parameters.singularity_slowdown:
            # Only near a singularity: the prediction costs three more kinematics passes.
            measure = min(measure, self._predicted_measure(state.q, pose, jacobian))
        out = self.servo.update(float(state.stamp), pose, jacobian.dot(state.v), measure, dt)
        self.last = out
        inner = self.inner
        inner.set_target(out.pose, out.twist)
        after = time.perf_counter()
        output = inner.step(state, reference, dt)
        if inner.GENERATES_REFERENCE:  # the IK's q*: where the command leads the arm
            self._commanded_q = output.reference.q
        self.stage_breakdown["servo"] = after - start
        self.stage_breakdown["inner"] = time.perf_counter() - after
        return output


PREDICTION_DAMPING = 1e-4  # [m²] λ² of the one damped least-squares step of the prediction
# The prediction runs below this multiple of singularity_slowdown (measured at the measured
# state): a stretching arm at 0.25 m/s goes from 0.076 to 0.039 m³ in 0.1 s, so twice the
# slowdown threshold starts it well before the slowing.
PREDICTION_RANGE = 2.0


def _pose_error(target: FloatArray, pose: FloatArray) -> FloatArray:
    """(p* − p; log3(R* Rᵀ)) of two 4x4 poses [m; rad], base axes."""
    error = np.empty(6)
    error[:3] = target[:3, 3] - pose[:3, 3]
    error[3:] = pin.log3(target[:3, :3].dot(pose[:3, :3].T))
    return error


def stream_chain(
    model: RobotModel,
    servo: Servo,
    controller: Controller,
    arm_joints: tuple[str, ...],
    update_divisor: int,
    start_pose: FloatArray,
) -> StreamChain:
    """The chain of a stream to ``controller`` (the selected one), by the chain factory:
    straight to it if it takes Cartesian targets, else through a differential IK (QP) of its
    own, as MoveToPose's without the joint-space approach (a stream starts where the arm is).
    ``model``: the stack's; the chains get scratch data of their own. ``start_pose``: 4x4, base
    frame, the first target (the measured TCP pose)."""
    inner = tcp_target_chain(model, controller, arm_joints, update_divisor, start_pose)
    return StreamChain(model.with_own_data(), servo, inner)
