"""``/ct/move_to_pose`` (ct_interfaces/action/MoveToPose): the TCP to a pose through the chain
factory's chain (``chains/pose_goal.py``, shared with ``ct-bench reach``) to the goal's
``controller`` ("" = the selected one): for a joint law, a joint-space approach to the goal
check's IK solution, then differential IK (QP, joint limits as constraints) → the controller;
for one that takes Cartesian targets (Cartesian impedance), the pose straight to it.

Boundary checks (each aborts at once with its code and a message): frame (UNKNOWN_FRAME), stamp
(STALE_GOAL), non-finite values or a non-unit quaternion or negative tolerances, a controller
not loaded, or a Cartesian one with arm joints on the position interface (INVALID_GOAL), no
IK solution within the joint limits (UNREACHABLE, with the residual). Of the IK's solutions the
approach goes to the one on the branch nearest the measured configuration whose approach is
clear of the scene (``chains/approach_goal.py``; none clear: the nearest, with a warning). What
passes is a :class:`~ct_controllers.chains.pose_goal.PoseRequest`, built once in
:meth:`validate`, from which the chain is built and the goal followed. Success needs the measured
TCP within both tolerances for a continuous 0.1 s, on snapshots each judged fresh on the loop's
clock (``ros/goals.py: snapshot_fresh``: a frozen snapshot cannot count); the goal's timeout
gives TIMEOUT.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from ct_interfaces.action import MoveToPose

from ct_controllers.chains.pose_goal import (
    DEFAULT_ORIENTATION_TOLERANCE,
    DEFAULT_POSITION_TOLERANCE,
    SUCCESS_DWELL,
    PoseRequest,
    goal_ik,
    goal_selection,
    pose_chain,
)
from ct_controllers.chains.tcp_chain_factory import takes_cartesian_targets
from ct_controllers.chains.tcp_target_chain import TcpTargetChain
from ct_controllers.controllers.controller import Controller
from ct_controllers.hardware.interface import POSITION
from ct_controllers.references.joint_trajectory import MAX_DURATION
from ct_controllers.ros.goals import (
    SHUTTING_DOWN,
    SNAPSHOT_FRESHNESS,
    motion_action_server,
    parameter_value,
)
from ct_controllers.ros.pose_goals import (
    GoalRejected,
    clock_source,
    non_negative,
    pose_from_message,
    summarize_pose,
)
from ct_controllers.tasks.conditions import DwellCondition
from ct_controllers.text import quoted

Result = MoveToPose.Result
FEEDBACK_PERIOD = 0.05  # [s]


class MoveToPoseServer:
    def __init__(
        self, node: Any, stack: Any, manager: Any, arbiter: Any, callback_group: Any
    ) -> None:
        self.node, self.stack, self.manager, self.arbiter = node, stack, manager, arbiter
        self.config = stack.config
        self.loop = stack.loop
        self.ik = goal_ik(stack)  # the goal check
        self.selection = goal_selection(stack, self.ik)  # which solution the approach goes to
        self.server = motion_action_server(
            node,
            MoveToPose,
            "move_to_pose",
            self._execute,
            callback_group,
            arbiter=arbiter,
            summary=lambda goal: (
                summarize_pose(goal.target)
                + f", timeout {goal.timeout:g} s"
                + (f", controller {quoted(goal.controller)}" if goal.controller else "")
            ),
        )

    def _parameter(self, name: str) -> float:
        return parameter_value(self.node, name)

    def controller(self, name: str) -> tuple[str, Controller]:
        """The goal's controller by name ("" = the selected one), or GoalRejected
        (INVALID_GOAL) naming it and the loaded ones — or the arm joints on the position
        interface, for a controller that takes Cartesian targets: its efforts would not reach
        them, and they would hold."""
        controllers = self.manager.controllers
        if name and name not in controllers:
            raise GoalRejected(
                Result.INVALID_GOAL,
                f"unknown controller {quoted(name)}; loaded: {', '.join(controllers)}",
            )
        name = name or self.manager.selected
        controller = controllers[name]
        if takes_cartesian_targets(controller):
            hardware = self.stack.hardware
            interfaces = dict(zip(hardware.joint_names, hardware.command_interfaces, strict=True))
            held = [j for j in self.config.arm_joints if interfaces.get(j) == POSITION]
            if held:
                raise GoalRejected(
                    Result.INVALID_GOAL,
                    f"controller {quoted(name)} takes the pose directly and writes efforts; arm "
                    f"joint(s) {', '.join(held)} are on the position interface (name a joint "
                    "law: it runs behind the differential IK)",
                )
        return name, controller

    def validate(self, goal: Any, q: np.ndarray) -> PoseRequest:
        """The goal checked, once, into a :class:`PoseRequest` (its IK solution seeded with the
        measured ``q``, model order), or GoalRejected."""
        now = self.node.get_clock().now().nanoseconds * 1e-9
        pose = pose_from_message(
            goal.target,
            self.config.base_frame,
            now,
            self._parameter("max_goal_age"),
            self._parameter("goal_future_tolerance"),
            "target",
            clock_source(self.node),
        )
        position = non_negative(goal.position_tolerance, "position_tolerance")
        orientation = non_negative(goal.orientation_tolerance, "orientation_tolerance")
        timeout = non_negative(goal.timeout, "timeout", MAX_DURATION) or self._parameter(
            "move_to_pose.default_timeout"
        )
        selected = self.selection.select(pose, q)
        candidate = selected.candidate
        if not candidate.converged:
            raise GoalRejected(
                Result.UNREACHABLE,
                f"no IK solution within the joint limits: residual "
                f"{candidate.position_residual:.4f} m, {candidate.orientation_residual:.4f} rad",
            )
        if selected.clear is False:
            self.node.get_logger().warning(
                f"MoveToPose: no IK solution found with an approach clear of the scene "
                f"({selected.solutions} weighed); the nearest hits {selected.collision}"
            )
        return PoseRequest(
            pose=pose,
            position_tolerance=position or DEFAULT_POSITION_TOLERANCE,
            orientation_tolerance=orientation or DEFAULT_ORIENTATION_TOLERANCE,
            timeout=timeout,
            solution=candidate.q,
        )

    def _execute(self, goal_handle: Any) -> Any:
        snapshot = self.loop.snapshot()
        if snapshot is None or not self.loop.running:
            goal_handle.abort()
            message = self.loop.stopped_reason or "no state from the control loop"
            return Result(error_code=Result.FAULT, message=message)
        try:
            name, controller = self.controller(goal_handle.request.controller)
            request = self.validate(goal_handle.request, snapshot.position)
        except GoalRejected as rejection:
            goal_handle.abort()
            return Result(error_code=rejection.code, message=str(rejection))
        chain = pose_chain(self.stack, controller, request.pose, request.solution)
        # What `active` reports meanwhile: what runs between the pose and the efforts.
        active = f"pose → {name}" if takes_cartesian_targets(controller) else f"diff_ik → {name}"
        token, _ = self.arbiter.start(
            lambda: self.manager.use_chain(active, chain),
            target=lambda: request.pose,  # the ct_goal TF frame
        )
        try:
            return self._follow(goal_handle, token, chain, request)
        finally:
            if self.arbiter.is_current(token):
                self.loop.hold()  # the selected controller resumes from where the arm is
                self.manager.release()
            chain.release_target()  # a Cartesian controller: its joint reference's FK again
            self.arbiter.finish(token)

    def _follow(
        self,
        goal_handle: Any,
        token: int,
        chain: TcpTargetChain,
        request: PoseRequest,
    ) -> Any:
        errors = (float("nan"), float("nan"))

        def finish(code: int, message: str) -> Any:
            if code == Result.SUCCESS:
                goal_handle.succeed()
            elif code == Result.CANCELED:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            return Result(
                error_code=code,
                message=message,
                position_error=errors[0],
                orientation_error=errors[1],
            )

        # Each snapshot judged at the loop's clock's now, not at its own stamp: one judged
        # late (a frozen loop, a follow thread held up) is stale and restarts the window.
        within = DwellCondition(SUCCESS_DWELL, freshness=SNAPSHOT_FRESHNESS)
        start: float | None = None
        last_tick = -1
        while not self.arbiter.stopping.is_set():
            snapshot = self.loop.wait_for_snapshot(last_tick, timeout=1.0)
            if not self.loop.running:
                return finish(Result.FAULT, self.loop.stopped_reason or "control loop not running")
            if snapshot is None or snapshot.tick == last_tick:
                return finish(Result.FAULT, "no state from the control loop")
            last_tick = snapshot.tick
            start = snapshot.stamp if start is None else start
            errors = chain.errors(snapshot.position)
            if snapshot.fault:
                return finish(Result.FAULT, snapshot.fault)
            if not self.arbiter.is_current(token):
                return finish(Result.PREEMPTED, "preempted by a newer goal")
            if goal_handle.is_cancel_requested:
                return finish(Result.CANCELED, "canceled; stopping and holding")
            goal_handle.publish_feedback(
                MoveToPose.Feedback(position_error=errors[0], orientation_error=errors[1])
            )
            ok = (
                errors[0] <= request.position_tolerance
                and errors[1] <= request.orientation_tolerance
            )
            if within.update(self.loop.now(), snapshot.stamp, ok).met:
                return finish(Result.SUCCESS, "TCP within tolerance")
            if snapshot.stamp - start > request.timeout:
                return finish(
                    Result.TIMEOUT,
                    f"not within tolerance after {request.timeout} s: {errors[0]:.4f} m, "
                    f"{errors[1]:.4f} rad",
                )
            time.sleep(FEEDBACK_PERIOD)
        return finish(Result.FAULT, SHUTTING_DOWN)
