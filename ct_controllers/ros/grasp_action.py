"""``/ct/grasp`` (ct_interfaces/action/Grasp): the APPROACH → CLOSE → HOLD → RELEASE machine on
the real stack (phase machine → differential IK → the selected joint controller + the gripper
servo → limiter), on every backend that drives the gripper joints. An object sensor is an
optional plug-in the backend offers (``SystemInterface.object_sensor``: MuJoCo's simulated one);
without one the task judges by the robot's own sensing (finger positions, velocities, efforts),
and the result's ``checks`` say what the verdict rested on.

Boundary checks: a robot without a gripper (``gripper_joints: []``: INVALID_GOAL, "this robot
has no gripper ...", checked first, nothing moves; the other actions work as on any arm), frames
(UNKNOWN_FRAME), stamps (STALE_GOAL), non-finite or non-unit poses and
out-of-range amounts (INVALID_GOAL), a grasp_effort below what the finger servo can control (its
finger's weight plus its damping at the closing speed, ``GripperController.minimum_effort``:
below it nothing controls where a finger goes; INVALID_GOAL, giving the bound), a grasp_effort
the backend cannot enforce — fingers on the
position interface whose drives' effort limit it cannot set (INVALID_GOAL, naming the joint) —,
a grasp or pre-grasp pose without an IK solution (UNREACHABLE). A phase that fails ends
PHASE_FAILED with the phase and its reason; feedback carries the phase, the time in it and the
TCP position error.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from ct_interfaces.action import Grasp

from ct_controllers.chains.grasp_goal import no_gripper_refusal, unreachable_pose
from ct_controllers.chains.grasp_runner import (
    GraspRunner,
    build_grasp_runner,
    finger_force_limit,
    grasp_parameters,
    grip_force_refusal,
    minimum_grasp_effort,
)
from ct_controllers.ros.goals import SHUTTING_DOWN, motion_action_server, parameter_value
from ct_controllers.ros.pose_goals import (
    GoalRejected,
    clock_source,
    pose_from_message,
    summarize_pose,
)
from ct_controllers.runtime.grasp_payload import NOT_RUN, GraspPayload, GraspPayloadOutcome
from ct_controllers.tasks.phases import (
    ACTIVE_PHASES,
    GraspGoal,
    GraspTask,
    Phase,
)

Result = Grasp.Result
FEEDBACK_PERIOD = 0.05  # [s]


class GraspServer:
    def __init__(
        self, node: Any, stack: Any, manager: Any, arbiter: Any, ik: Any, callback_group: Any
    ) -> None:
        self.node, self.stack, self.manager, self.arbiter, self.ik = (
            node,
            stack,
            manager,
            arbiter,
            ik,
        )
        self.config = stack.config
        self.loop = stack.loop
        self._feedback_model = stack.model.with_own_data()  # this node's goal threads
        self.minimum_effort = minimum_grasp_effort(stack)  # [N] per finger
        # grasp.identify_payload: HOLD identifies the object's mass (runtime/grasp_payload.py).
        self.identify = bool(self.config.grasp_identify_payload)
        self._identification_model = stack.model.with_own_data() if self.identify else None
        # The last grasp's identification (for /diagnostics), None before any.
        self.last_payload: GraspPayloadOutcome | None = None
        self.server = motion_action_server(
            node,
            Grasp,
            "grasp",
            self._execute,
            callback_group,
            arbiter=arbiter,
            summary=lambda goal: (
                f"grasp at {summarize_pose(goal.grasp_pose)}, effort {goal.grasp_effort:g} N"
            ),
        )

    def _parameter(self, name: str) -> float:
        return parameter_value(self.node, name)

    def validate(self, goal: Any, q: np.ndarray) -> GraspGoal:
        """The goal as a :class:`GraspGoal`, or GoalRejected. Checked once each: the message
        (frames, stamps, finite values, unit quaternions: :func:`pose_from_message`), the goal's
        own values (rigid poses, amounts within their bounds: GraspGoal, the one place), what
        depends on this robot and backend (the finger effort limit, a grip force the backend
        can enforce) and reachability (grasp, pre-grasp and place poses)."""
        refusal = no_gripper_refusal(self.config.gripper_joints)
        if refusal is not None:
            raise GoalRejected(Result.INVALID_GOAL, refusal)
        now = self.node.get_clock().now().nanoseconds * 1e-9
        age, future = self._parameter("max_goal_age"), self._parameter("goal_future_tolerance")
        base = self.config.base_frame
        clock = clock_source(self.node)
        grasp = pose_from_message(goal.grasp_pose, base, now, age, future, "grasp_pose", clock)
        place = (
            None
            if goal.place_pose.header.frame_id == ""
            else pose_from_message(goal.place_pose, base, now, age, future, "place_pose", clock)
        )
        try:
            request = GraspGoal(
                grasp_pose=grasp,
                place_pose=place,
                approach_offset=goal.approach_offset,
                lift_height=goal.lift_height,
                grasp_effort=goal.grasp_effort,
                hold_duration=goal.hold_duration,
            )
        except ValueError as exc:
            raise GoalRejected(Result.INVALID_GOAL, str(exc)) from None
        effort = request.grasp_effort
        finger_limit = finger_force_limit(self.stack)
        if effort > finger_limit:
            raise GoalRejected(
                Result.INVALID_GOAL,
                f"grasp_effort must be in (0, {finger_limit}] N per finger, got {effort}",
            )
        if effort < self.minimum_effort:
            bound = math.ceil(self.minimum_effort * 1000.0) / 1000.0  # shown rounded up
            raise GoalRejected(
                Result.INVALID_GOAL,
                f"grasp_effort {effort:g} N is below {bound:g} N, the smallest force with which "
                "the finger servo still controls a finger (its weight plus its damping at the "
                f"closing speed); grasp_effort must be in [{bound:g}, {finger_limit:g}] N",
            )
        # Position fingers grip with their drives' effort: only a limit the backend can set
        # makes grasp_effort the grip force.
        refusal = grip_force_refusal(self.stack.hardware, self.config.gripper_joints, effort)
        if refusal is not None:
            raise GoalRejected(Result.INVALID_GOAL, refusal)
        reason = unreachable_pose(self.ik, request, q)
        if reason is not None:
            raise GoalRejected(Result.UNREACHABLE, reason)
        return request

    def _execute(self, goal_handle: Any) -> Any:
        snapshot = self.loop.snapshot()
        hardware = self.stack.hardware
        if snapshot is None or not self.loop.running:
            goal_handle.abort()
            message = self.loop.stopped_reason or "no state from the control loop"
            return self._result(Result.FAULT, message, None)
        missing = sorted(set(self.config.gripper_joints) - set(hardware.joint_names))
        if missing:
            goal_handle.abort()
            return self._result(
                Result.FAULT,
                f"this backend drives no gripper joint(s) {', '.join(missing)}; Grasp needs them",
                None,
            )
        try:
            request = self.validate(goal_handle.request, snapshot.position)
        except GoalRejected as rejection:
            goal_handle.abort()
            return self._result(rejection.code, str(rejection), None)
        runner = self._runner()
        runner.task.start(request)
        payload = self._payload()
        via = "diff_ik" if runner.arm.GENERATES_REFERENCE else "pose"  # what `active` says
        name = f"grasp → {via} → {self.manager.selected}"
        token, _ = self.arbiter.start(
            lambda: self.manager.use_chain(name, runner),
            target=lambda: _tcp_target(runner),  # the ct_goal TF frame
        )
        try:
            return self._follow(goal_handle, token, runner, payload)
        finally:
            if payload is not None:
                payload.clear()  # however the goal ended, the object is no longer the model's
            if self.arbiter.is_current(token):
                self.loop.hold()
                self.manager.release()
            runner.release_target()  # a Cartesian controller: its joint reference's FK again
            self.arbiter.finish(token)

    def _payload(self) -> GraspPayload | None:
        """This goal's HOLD identification (None unless grasp.identify_payload)."""
        if self._identification_model is None:
            return None
        return GraspPayload(
            self._identification_model,
            self.stack.controllers,
            self.config.payload_limits,
            loop=self.stack.loop,
            restore=lambda: getattr(self.node, "payload", None),  # the node's parameters'
        )

    def _runner(self) -> GraspRunner:
        return build_grasp_runner(
            self.stack,
            self.stack.controllers[self.manager.selected],
            task=GraspTask(grasp_parameters(self.stack, identify_payload=self.identify)),
        )

    def _follow(
        self, goal_handle: Any, token: int, runner: GraspRunner, payload: GraspPayload | None
    ) -> Any:
        task = runner.task

        def result(code: int, message: str) -> Any:
            return self._result(code, message, task, self._payload_outcome(task, payload))

        last_tick = -1
        while not self.arbiter.stopping.is_set():
            snapshot = self.loop.wait_for_snapshot(last_tick, timeout=1.0)
            if not self.loop.running:
                goal_handle.abort()
                message = self.loop.stopped_reason or "the control loop is not running"
                return result(Result.FAULT, message)
            if snapshot is None or snapshot.tick == last_tick:
                goal_handle.abort()
                return result(Result.FAULT, "no state from the control loop")
            last_tick = snapshot.tick
            if payload is not None:
                payload.step(task, snapshot)  # in HOLD's identify stage: measure, identify
                if task.phase in (Phase.RELEASE, Phase.DONE, Phase.FAILED):
                    payload.clear()  # the object is let go: out of the model
            if snapshot.fault:
                goal_handle.abort()
                return result(Result.FAULT, snapshot.fault)
            if not self.arbiter.is_current(token):
                goal_handle.abort()
                return result(Result.PREEMPTED, "preempted by a newer goal")
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                return result(Result.CANCELED, "canceled; stopping and holding")
            if task.phase == Phase.DONE:
                goal_handle.succeed()
                return result(Result.SUCCESS, _success_message(task))
            if task.phase == Phase.FAILED and task.failure is not None:
                goal_handle.abort()
                return result(
                    Result.PHASE_FAILED, f"{task.failure.source.value}: {task.failure.reason}"
                )
            records = task.transitions
            entered = records[-1].time if records else snapshot.stamp
            feedback = Grasp.Feedback(
                phase=task.phase.value,
                phase_elapsed=max(0.0, snapshot.stamp - entered),
                position_error=self._position_error(runner, snapshot.position),
                checks=list(task.checks),
            )
            goal_handle.publish_feedback(feedback)
            time.sleep(FEEDBACK_PERIOD)
        goal_handle.abort()
        return result(Result.FAULT, SHUTTING_DOWN)

    def _position_error(self, runner: GraspRunner, q: np.ndarray) -> float:
        """TCP position error [m] to the phase machine's current target (feedback thread's
        own model: Pinocchio scratch data is not shared with the control thread)."""
        output = runner.last_output
        if output is None or output.tcp_target is None:
            return float("nan")
        tcp = self._feedback_model.frame_pose(q)
        return float(np.linalg.norm(output.tcp_target[:3, 3] - tcp[:3, 3]))

    def _payload_outcome(
        self, task: GraspTask, payload: GraspPayload | None
    ) -> GraspPayloadOutcome | None:
        """What the goal's HOLD identification came to (None: not configured); kept for
        /diagnostics."""
        if payload is None:
            return None
        outcome = payload.outcome
        if not payload.done and task.identification_timed_out:
            outcome = GraspPayloadOutcome(
                NOT_RUN,
                f"the identification did not finish within {task.parameters.identify_timeout} s "
                "of HOLD's identify stage",
            )
        self.last_payload = outcome
        return outcome

    @staticmethod
    def _result(
        code: int,
        message: str,
        task: GraspTask | None,
        payload: GraspPayloadOutcome | None = None,
    ) -> Any:
        if task is None:
            return _with_payload(Result(error_code=code, message=message), payload)
        final = (
            task.phase.value
            if task.phase != Phase.FAILED or task.failure is None
            else (task.failure.source.value)
        )
        durations = task.phase_durations
        return _with_payload(
            Result(
                error_code=code,
                message=message,
                final_phase=final,
                phase_durations=[float(durations.get(p, 0.0)) for p in ACTIVE_PHASES],
                checks=list(task.checks),
            ),
            payload,
        )


def _with_payload(result: Any, payload: GraspPayloadOutcome | None) -> Any:
    """``result`` with its payload fields: the outcome's, or "" and NaN when the grasp does
    not identify (grasp.identify_payload false)."""
    outcome = payload or GraspPayloadOutcome("", "")
    result.payload_status = outcome.status
    result.payload_message = outcome.message
    result.payload_mass = float(outcome.mass)
    result.payload_mass_std = float(outcome.mass_std)
    result.payload_condition = float(outcome.condition)
    return result


def _tcp_target(runner: GraspRunner) -> np.ndarray | None:
    """The phase machine's current TCP target (the control thread replaces the output each
    task tick; one read of it here), None once the task holds the arm (DONE, FAILED)."""
    output = runner.last_output
    return None if output is None else output.tcp_target


def _success_message(task: GraspTask) -> str:
    """DONE, and what it rested on: a verdict without an object sensor says so."""
    if task.object_observed:
        return "object picked, held and released (object and gripper checked)"
    return (
        "object picked, held and released, judged by the gripper alone (no object sensor): "
        + ", ".join(task.checks)
    )
