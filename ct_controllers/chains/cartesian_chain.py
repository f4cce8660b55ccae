"""The MoveToPose chain: differential IK → the joint-level controller, as one controller the loop
runs (so the limiter stays the last step). The TCP target may be replaced from any thread; the
joints the IK does not control (the fingers) hold where they were when the chain started. Each
tick's full joint reference is part of its output (:meth:`compute_output`), so joints on the
position interface follow the IK as effort joints do."""

from __future__ import annotations

import time

import numpy as np

from ct_controllers.chains.wrapping import WrappingController
from ct_controllers.controllers.controller import (
    Controller,
    ControlOutput,
    FloatArray,
    JointReference,
    JointState,
)
from ct_controllers.model.frames import pose_error_norms
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.reference_generator import CartesianTarget, ReferenceGenerator


class CartesianChain(WrappingController):
    def __init__(
        self,
        model: RobotModel,
        diff_ik: ReferenceGenerator,
        joint_controller: Controller,
        target: FloatArray,
    ) -> None:
        super().__init__()
        self.model = model
        self.diff_ik = diff_ik
        self.joint_controller = joint_controller
        self.base_frame = model.model.frames[model.base_frame_id].name
        self.stage_breakdown: dict[str, float] = {"diff_ik": 0.0, "joint_controller": 0.0}
        # A second model for errors() on the goal's thread (Pinocchio scratch data is not
        # thread-safe; the control thread uses ``model``).
        self._error_model = model.with_own_data()
        self._target = CartesianTarget(
            pose=np.array(target, dtype=np.float64), frame=self.base_frame
        ).validated(self.base_frame)

    def set_target(self, pose: FloatArray, twist: FloatArray | None = None) -> None:
        """Replace the TCP target (4x4, base frame) and its optional feed-forward twist (6,:
        linear [m/s]; angular [rad/s], base axes); validated here, used from the next tick."""
        self._target = CartesianTarget(
            pose=np.array(pose, dtype=np.float64),
            frame=self.base_frame,
            twist=None if twist is None else np.array(twist, dtype=np.float64),
        ).validated(self.base_frame)

    @property
    def target(self) -> FloatArray:
        return self._target.pose.copy()

    def errors(self, q: FloatArray) -> tuple[float, float]:
        """(position [m], orientation [rad]) error of the TCP at ``q`` to the target; for one
        thread other than the control thread."""
        return pose_error_norms(self._error_model.frame_pose(q), self._target.pose)

    @property
    def wrapped(self) -> Controller:
        return self.joint_controller

    def prepare(self, state: JointState, dt: float) -> None:
        """Warm the differential IK (its own model and solver) toward the current target; the
        joint controller may be running in the loop: it is not touched."""
        self.diff_ik.prepare(state, self._target, dt)

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return self.compute_output(state, reference, dt).effort

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
