"""A Cartesian target reached in two phases: a joint-space approach to a full-IK solution, then
the differential IK for the finish. A reference generator like the differential IK it wraps, so
that :class:`~ct_controllers.chains.cartesian_chain.CartesianChain` runs it unchanged.

Why. The differential IK descends the task error from where the arm is: a straight-line TCP
motion, rate-limited, with the joint position limits as QP constraints. From far away it can
settle in a local minimum — a joint held on its QP bound, a large rotation taken the short way
round into a fold of the arm — and a goal the full IK had just called reachable ends in TIMEOUT
far from its target. Measured (``ct-bench reach``, MuJoCo lockstep, 200 random reachable poses
from home, seeds 0 and 1): the differential IK alone reached 155 and 164 of 199 goals, the rest
timed out up to 1.02 m short; with the approach, 199 of 199.

What, on the chain's ticks:

1. **Approach.** At the first tick, a jerk-limited joint trajectory
   (:class:`~ct_controllers.references.joint_trajectory.JerkLimitedTrajectory`, the planner and
   reference limits of joint motions, the limit approach included) from the measured (q, v) to
   ``goal``, a full-IK solution of the target: the controlled joints go to the solution, the
   others (a gripper's fingers) are brought to rest where they were. The joint controller
   tracks its samples; the differential IK does not run.
2. **Finish.** On the tick the trajectory ends, the differential IK takes over from its end
   (q* = the planned goal, v* = 0: no step in the reference) with the IK solution as its
   posture (``DiffIkParameters.posture``: the nullspace stays on the solution's branch), and
   closes what is left — the IK residual (≤ its tolerance) and whatever the trajectory's goal
   lost to the limit approach's margin — as it closes any Cartesian error.

A target other than the one ``goal`` solves (``CartesianChain.set_target``) ends the approach at
once: the differential IK takes over from the approach's current reference. A trajectory that
cannot be planned ends it too, before it starts; ``message`` says why (the differential IK then
runs from the measured state, as without an approach).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ct_controllers.references.diff_ik_base import DifferentialIkBase, DiffIkStatus
from ct_controllers.references.diff_ik_parameters import DiffIkParameters
from ct_controllers.references.joint_trajectory import (
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)
from ct_controllers.references.reference_generator import CartesianTarget, ReferenceGenerator
from ct_controllers.types import FloatArray, JointReference, JointState

APPROACH = "approach"
CARTESIAN = "cartesian"


class JointSpaceApproach(ReferenceGenerator[DiffIkParameters]):
    """Joint-space approach to ``goal``, then ``diff_ik`` (see the module docstring).

    diff_ik  the differential IK of the finish; its posture is set to ``goal`` here (its other
             parameters are kept; parameters staged on this generator go to it)
    goal     (nq,) [rad | m] model order: a full-IK solution of ``pose``; only the entries of
             ``diff_ik.joint_names`` are used
    limits   reference limits (model order) of the approach: those of joint motions
    pose     4x4 [m] the TCP target ``goal`` solves, base frame
    """

    def __init__(
        self,
        diff_ik: DifferentialIkBase,
        goal: FloatArray,
        limits: JointLimits,
        pose: FloatArray,
    ) -> None:
        model = diff_ik.model
        goal = np.array(goal, dtype=np.float64).reshape(-1)
        if goal.shape != (model.nq,) or not np.isfinite(goal).all():
            raise ValueError(f"approach goal: expected {model.nq} finite values")
        pose = np.array(pose, dtype=np.float64)
        if pose.shape != (4, 4):
            raise ValueError(f"approach pose: expected a 4x4 transform, got shape {pose.shape}")
        self.diff_ik = diff_ik
        self.limits = limits
        self.joint_names = diff_ik.joint_names
        self._controlled = model.indices(self.joint_names)
        diff_ik.apply_parameters(diff_ik.parameters_for(posture=goal[self._controlled]))
        super().__init__(diff_ik.parameters)
        self._goal = goal
        goal.setflags(write=False)
        self._pose = pose
        pose.setflags(write=False)
        self._solved_for: CartesianTarget | None = None  # the last target seen to equal pose
        self._trajectory: JerkLimitedTrajectory | None = None
        self.phase = APPROACH
        self.message = ""  # why the approach ended early, if it did

    @property
    def goal(self) -> FloatArray:
        """The IK solution approached [rad | m], model order (a copy)."""
        return self._goal.copy()

    @property
    def status(self) -> DiffIkStatus | None:
        """The differential IK's status (None during the approach)."""
        return self.diff_ik.status

    @property
    def trajectory(self) -> JerkLimitedTrajectory | None:
        """The approach's trajectory, once planned (its ``duration`` [s])."""
        return self._trajectory

    def stage_parameters(self, parameters: Any) -> None:
        """Staged on the differential IK (validated there, applied at its next tick)."""
        self.diff_ik.stage_parameters(parameters)

    def apply_parameters(self, parameters: DiffIkParameters) -> None:
        self.diff_ik.apply_parameters(parameters)
        self.parameters = parameters

    def update(self, state: JointState, target: CartesianTarget, dt: float) -> JointReference:
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be finite and > 0, got {dt}")
        reference = self.compute(state, target, dt)
        self.parameters = self.diff_ik.parameters
        return reference

    def prepare(self, state: JointState, target: CartesianTarget, dt: float) -> None:
        """Warm the differential IK where it will start (at ``goal``), off the control thread;
        nothing of it reaches the first tick (see :meth:`DifferentialIkBase.prepare`)."""
        at_goal = np.array(state.q, dtype=np.float64)
        at_goal[self._controlled] = self._goal[self._controlled]
        self.diff_ik.prepare(JointState(state.stamp, at_goal, np.zeros_like(state.v)), target, dt)

    def compute(self, state: JointState, target: CartesianTarget, dt: float) -> JointReference:
        if self.phase == APPROACH:
            reference = self._approach(state, target)
            if reference is not None:
                return reference
        return self.diff_ik.update(state, target, dt)

    def _approach(self, state: JointState, target: CartesianTarget) -> JointReference | None:
        """The approach's reference at ``state.stamp``, or None once it has ended (the
        differential IK then set up to take over)."""
        if target is not self._solved_for:
            if not np.array_equal(target.pose, self._pose):
                self.message = "the target changed during the approach"
                here = (
                    self._trajectory.sample(state.stamp).q if self._trajectory is not None else None
                )
                self._hand_over(state, here)
                return None
            self._solved_for = target
        if self._trajectory is None:
            goal = np.array(state.q, dtype=np.float64)
            goal[self._controlled] = self._goal[self._controlled]
            try:
                self._trajectory = JerkLimitedTrajectory(
                    state.stamp, state.q, state.v, goal, self.limits
                )
            except TrajectoryError as exc:
                self.message = f"no approach trajectory: {exc}"
                self._hand_over(state, None)
                return None
        trajectory = self._trajectory
        if trajectory.progress(state.stamp) < 1.0:
            return trajectory.sample(state.stamp)
        self._hand_over(state, trajectory.goal)
        return None

    def _hand_over(self, state: JointState, q: FloatArray | None) -> None:
        """The finish from here on: the differential IK starting at q* = ``q`` (None: the
        measured state)."""
        self.phase = CARTESIAN
        if q is None:
            self.diff_ik.reset()
        else:
            self.diff_ik.reset(JointState(state.stamp, q.copy(), np.zeros_like(state.v)))
