"""A ``ct_controllers/JointTrajectoryController`` entry's ROS side, named as ros2_controllers'
joint_trajectory_controller (Jazzy) names it under its controller manager's namespace
(``/ct/<name>/...``):

- ``<name>/follow_joint_trajectory`` (control_msgs/FollowJointTrajectory): the goal checked
  (:mod:`ct_controllers.references.trajectory_goal`), its tolerances resolved over the entry's,
  then handed to the control loop as a plan (:mod:`ct_controllers.runtime.trajectory_motion`)
  that the running joint-level controller tracks through the limiter. Ends SUCCEEDED
  (SUCCESSFUL), ABORTED with PATH_TOLERANCE_VIOLATED / GOAL_TOLERANCE_VIOLATED, ABORTED with
  INVALID_GOAL when a newer goal (of any action) or a ``joint_trajectory`` message preempts it
  (JTC's code and words), CANCELED (the arm stops with bounded deceleration and holds). An
  invalid goal is accepted and aborted at once with its code — INVALID_JOINTS, OLD_HEADER_
  TIMESTAMP or INVALID_GOAL — and a message naming the problem (JTC rejects it without a
  reason); while the controller is inactive (switch_controller) goals are rejected, as JTC's.
  Feedback (desired, actual, error of the goal's joints) at ``action_monitor_rate``.
- ``<name>/joint_trajectory`` (trajectory_msgs/JointTrajectory): each valid message replaces
  the running trajectory (MoveIt Servo's stream); an invalid one is logged and changes nothing.
- ``<name>/query_state`` (control_msgs/QueryTrajectoryState): the latest trajectory sampled at
  a time on the node's clock.
- ``<name>/controller_state`` (control_msgs/JointTrajectoryControllerState): reference,
  feedback, error and output (the commanded effort) of the controller's joints, at
  ``action_monitor_rate`` while measurements arrive.

Times: ``header.stamp`` and ``time_from_start`` on the node's clock (sim time in simulation);
stamp 0 = start now. Units: rad | m, rad/s | m/s, rad/s² | m/s², N·m | N.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTrajectoryControllerState
from control_msgs.srv import QueryTrajectoryState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ct_controllers.references.trajectory_controller_parameters import (
    TrajectoryControllerSettings,
    trajectory_controller_settings,
)
from ct_controllers.references.trajectory_goal import (
    JOINTS,
    OLD_HEADER,
    GoalPoint,
    GoalTolerance,
    JointBounds,
    TrajectoryRejected,
    check_sizes,
    check_trajectory,
    resolve_tolerances,
)
from ct_controllers.ros.conversions import from_time_msg, to_time_msg
from ct_controllers.ros.goals import SHUTTING_DOWN, motion_action_server, request_qos
from ct_controllers.runtime.control_loop import (
    FAILED,
    PREEMPTED,
    RUNNING,
    SUCCEEDED,
    LoopSnapshot,
)
from ct_controllers.runtime.trajectory_motion import (
    GOAL_TOLERANCE_VIOLATED,
    PATH_TOLERANCE_VIOLATED,
    ToleranceArrays,
    TrajectoryPlan,
)
from ct_controllers.text import quoted

Result = FollowJointTrajectory.Result
PREEMPTED_MESSAGE = "Current goal preempted by new incoming action."  # JTC's words
CODES = {JOINTS: Result.INVALID_JOINTS, OLD_HEADER: Result.OLD_HEADER_TIMESTAMP}
CANCEL_WAIT = 1.0  # [s] for the stop to begin before the canceled result is sent


def _seconds(duration: Any) -> float:
    """builtin_interfaces/Duration → [s]."""
    return float(duration.sec) + float(duration.nanosec) * 1e-9


def _tolerances(kind: str, tolerances: Any) -> list[GoalTolerance]:
    """control_msgs/JointTolerance[] as GoalTolerance; an acceleration tolerance is refused
    (joint accelerations are not measured, so it could not be checked)."""
    found = []
    for tolerance in tolerances:
        if tolerance.acceleration > 0.0:
            raise TrajectoryRejected(
                f"{kind}_tolerance of {quoted(tolerance.name)}: acceleration "
                f"{tolerance.acceleration} cannot be checked (joint accelerations are not "
                "measured); give 0 (the default) or -1"
            )
        found.append(
            GoalTolerance(
                tolerance.name, tolerance.position, tolerance.velocity, tolerance.acceleration
            )
        )
    return found


def _point(values: Any) -> list[float]:
    return [float(v) for v in values]


class JointTrajectoryControllerServer:
    def __init__(
        self,
        node: Any,
        stack: Any,
        manager: Any,
        arbiter: Any,
        callback_group: Any,
        name: str,
        entries: Any,
    ) -> None:
        self.node, self.stack, self.manager, self.arbiter = node, stack, manager, arbiter
        self.loop = stack.loop
        model = stack.model
        self.settings: TrajectoryControllerSettings = trajectory_controller_settings(
            name, entries, model.joint_names, {n: m.master for n, m in model.mimic.items()}
        )
        self.name = name
        limits = model.limits
        self.bounds = {
            joint: JointBounds(
                float(limits.lower[i]), float(limits.upper[i]), float(limits.velocity[i])
            )
            for joint, i in zip(model.joint_names, range(model.nv), strict=True)
        }
        self.indices = np.array(model.indices(list(self.settings.joints)))
        manager.add_interface_controller(name, str(entries["type"]))
        self.period = 1.0 / self.settings.action_monitor_rate
        self.server = motion_action_server(
            node,
            FollowJointTrajectory,
            f"{name}/follow_joint_trajectory",
            self._execute,
            callback_group,
            arbiter=arbiter,
            summary=summarize,
            failure=lambda message: Result(error_code=Result.INVALID_GOAL, error_string=message),
            accepting=self._active,
        )
        node.create_subscription(
            JointTrajectory,
            f"{name}/joint_trajectory",
            self._on_trajectory,
            10,
            callback_group=callback_group,
        )
        node.create_service(
            QueryTrajectoryState,
            f"{name}/query_state",
            self._query_state,
            qos_profile=request_qos(),
            callback_group=callback_group,
        )
        self.state_publisher = node.create_publisher(
            JointTrajectoryControllerState, f"{name}/controller_state", 10
        )
        self._last_state_tick = -1
        self.timer = node.create_timer(self.period, self._publish_state, callback_group)

    def _active(self) -> bool:
        active = self.manager.is_active(self.name)
        if not active:
            self.node.get_logger().error(
                f"{self.name}: can't accept new action goals: the controller is not active"
            )
        return bool(active)

    # --- checking ----------------------------------------------------------------------------
    def plan(
        self,
        trajectory: Any,
        path_tolerance: Any = (),
        goal_tolerance: Any = (),
        goal_time_tolerance: float = 0.0,
    ) -> TrajectoryPlan:
        """The message checked and made a plan for the loop, or TrajectoryRejected."""
        settings = self.settings
        now = self.node.get_clock().now().nanoseconds * 1e-9
        check_sizes(len(trajectory.joint_names), len(trajectory.points), settings.joints)
        points = [
            GoalPoint(
                _seconds(p.time_from_start),
                _point(p.positions),
                _point(p.velocities),
                _point(p.accelerations),
                _point(p.effort),
            )
            for p in trajectory.points
        ]
        checked = check_trajectory(
            list(trajectory.joint_names),
            points,
            settings.joints,
            self.bounds,
            stamp=from_time_msg(trajectory.header.stamp),
            now=now,
            allow_partial_joints_goal=settings.allow_partial_joints_goal,
            allow_nonzero_velocity_at_trajectory_end=(
                settings.allow_nonzero_velocity_at_trajectory_end
            ),
        )
        path = _tolerances("path", path_tolerance)
        goal = _tolerances("goal", goal_tolerance)
        resolved = resolve_tolerances(
            settings.tolerances, path, goal, goal_time_tolerance, settings.joints
        )
        joints = checked.joints

        def arrays(table: Any) -> ToleranceArrays:
            position = np.array([table[j].position if j in table else 0.0 for j in joints])
            velocity = np.array([table[j].velocity if j in table else 0.0 for j in joints])
            return ToleranceArrays(position, velocity)

        return TrajectoryPlan(
            joints,
            np.array(self.stack.model.indices(list(joints))),
            checked.waypoints,
            max(0.0, checked.start_time - now),
            settings.interpolation_method,
            arrays(resolved.path),
            arrays(resolved.goal),
            resolved.goal_time,
        )

    # --- the action --------------------------------------------------------------------------
    def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        try:
            if goal.multi_dof_trajectory.points or goal.multi_dof_trajectory.joint_names:
                raise TrajectoryRejected("multi-DOF trajectories are not supported")
            if goal.component_path_tolerance or goal.component_goal_tolerance:
                raise TrajectoryRejected("component tolerances are not supported")
            plan = self.plan(
                goal.trajectory,
                goal.path_tolerance,
                goal.goal_tolerance,
                _seconds(goal.goal_time_tolerance),
            )
        except TrajectoryRejected as exc:
            goal_handle.abort()
            code = CODES.get(exc.kind, Result.INVALID_GOAL)
            return Result(error_code=code, error_string=str(exc))
        if not self.loop.running:
            goal_handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string=self._loop_down())

        def take_over() -> int:
            motion_id = self.loop.request_trajectory(plan)
            self.manager.use("")  # the selected joint-level controller tracks it
            return motion_id

        token, motion_id = self.arbiter.start(take_over)
        try:
            return self._follow(goal_handle, token, motion_id, plan)
        finally:
            if self.arbiter.is_current(token):
                self.manager.release()
            self.arbiter.finish(token)

    def _follow(self, goal_handle: Any, token: int, motion_id: int, plan: TrajectoryPlan) -> Any:
        def finish(code: int, message: str, succeeded: bool = False) -> Any:
            if succeeded:
                goal_handle.succeed()
            else:
                goal_handle.abort()
            return Result(error_code=code, error_string=message)

        last_tick = -1
        while not self.arbiter.stopping.is_set():
            snapshot = self.loop.wait_for_snapshot(last_tick, timeout=1.0)
            if not self.loop.running:
                return finish(Result.INVALID_GOAL, self._loop_down())
            if snapshot is None or snapshot.tick == last_tick:
                self.loop.hold()
                return finish(Result.INVALID_GOAL, "no state from the control loop")
            last_tick = snapshot.tick
            if snapshot.fault:
                return finish(Result.INVALID_GOAL, f"fault: {snapshot.fault}")
            status = self.loop.motion_status(motion_id)
            newer = snapshot.motion is not None and snapshot.motion.motion_id > motion_id
            if not self.arbiter.is_current(token) or (
                (status is not None and status.state == PREEMPTED) or (status is None and newer)
            ):
                return finish(Result.INVALID_GOAL, PREEMPTED_MESSAGE)
            if goal_handle.is_cancel_requested:
                self.loop.hold()
                deadline = time.monotonic() + CANCEL_WAIT
                while time.monotonic() < deadline:
                    status = self.loop.motion_status(motion_id)
                    if status is None or status.state != RUNNING:
                        break
                    time.sleep(0.01)
                goal_handle.canceled()
                return Result(
                    error_code=Result.SUCCESSFUL, error_string="canceled; stopping and holding"
                )
            if status is None:
                continue  # not taken by the loop yet
            if status.state == SUCCEEDED:
                return finish(Result.SUCCESSFUL, "Goal successfully reached!", succeeded=True)
            if status.state == PATH_TOLERANCE_VIOLATED:
                return finish(Result.PATH_TOLERANCE_VIOLATED, status.message)
            if status.state == GOAL_TOLERANCE_VIOLATED:
                return finish(Result.GOAL_TOLERANCE_VIOLATED, status.message)
            if status.state == FAILED:
                return finish(Result.INVALID_GOAL, status.message or "the motion failed")
            goal_handle.publish_feedback(self._feedback(snapshot, plan))
            time.sleep(self.period)
        self.loop.hold()
        return finish(Result.INVALID_GOAL, SHUTTING_DOWN)

    def _feedback(self, snapshot: LoopSnapshot, plan: TrajectoryPlan) -> Any:
        indices = plan.indices
        following = self.loop.following
        desired = None
        if following is not None and following.plan is plan:
            desired = following.desired_at(snapshot.stamp)
        q = snapshot.reference_position if desired is None else desired.q
        v = np.zeros_like(q) if desired is None else desired.v
        a = np.zeros_like(q) if desired is None else desired.a
        measured_q, measured_v = snapshot.position, snapshot.velocity
        feedback = FollowJointTrajectory.Feedback()
        feedback.header.stamp = to_time_msg(snapshot.stamp)
        feedback.joint_names = list(plan.joint_names)
        feedback.desired = JointTrajectoryPoint(
            positions=q[indices].tolist(),
            velocities=v[indices].tolist(),
            accelerations=a[indices].tolist(),
        )
        feedback.actual = JointTrajectoryPoint(
            positions=measured_q[indices].tolist(), velocities=measured_v[indices].tolist()
        )
        feedback.error = JointTrajectoryPoint(
            positions=(q[indices] - measured_q[indices]).tolist(),
            velocities=(v[indices] - measured_v[indices]).tolist(),
        )
        return feedback

    # --- the topic, the query, the state -----------------------------------------------------
    def _on_trajectory(self, message: Any) -> None:
        logger = self.node.get_logger()
        if not self.manager.is_active(self.name):
            logger.warning(f"{self.name}: trajectory message ignored: the controller is inactive")
            return
        try:
            plan = self.plan(message)
        except TrajectoryRejected as exc:
            logger.warning(f"{self.name}: trajectory message rejected: {exc}")
            return
        if not self.loop.running:
            logger.warning(f"{self.name}: trajectory message ignored: {self._loop_down()}")
            return

        def take_over() -> int:
            motion_id = self.loop.request_trajectory(plan)
            self.manager.use("")
            return motion_id

        token, _ = self.arbiter.start(take_over)  # a running goal of any action is preempted
        self.arbiter.finish(token)  # no goal waits for this one's end

    def _query_state(self, request: Any, response: Any) -> Any:
        snapshot = self.loop.snapshot()
        following = self.loop.following
        if snapshot is None or following is None or following.spline is None:
            response.success = False
            response.message = "no trajectory has been started"
            return response
        now = self.node.get_clock().now().nanoseconds * 1e-9
        asked = from_time_msg(request.time)
        if not math.isfinite(asked):
            response.success, response.message = False, "the time is not finite"
            return response
        desired = following.desired_at(snapshot.stamp + (asked - now))
        if desired is None:
            response.success = False
            response.message = "the time is before the trajectory's start"
            return response
        indices = self.indices
        response.success = True
        response.message = ""
        response.name = list(self.settings.joints)
        response.position = desired.q[indices].tolist()
        response.velocity = desired.v[indices].tolist()
        response.acceleration = desired.a[indices].tolist()
        return response

    def _publish_state(self) -> None:
        snapshot = self.loop.snapshot()
        if snapshot is None or snapshot.tick == self._last_state_tick:
            return  # nothing newly measured: silence, as the joint states
        self._last_state_tick = snapshot.tick
        indices = self.indices
        following = self.loop.following
        desired = None if following is None else following.desired_at(snapshot.stamp)
        q = snapshot.reference_position
        v = np.zeros_like(q) if desired is None else desired.v
        a = np.zeros_like(q) if desired is None else desired.a
        message = JointTrajectoryControllerState()
        message.header.stamp = to_time_msg(snapshot.stamp)
        message.joint_names = list(self.settings.joints)
        message.reference = JointTrajectoryPoint(
            positions=q[indices].tolist(),
            velocities=v[indices].tolist(),
            accelerations=a[indices].tolist(),
        )
        message.feedback = JointTrajectoryPoint(
            positions=snapshot.position[indices].tolist(),
            velocities=snapshot.velocity[indices].tolist(),
        )
        message.error = JointTrajectoryPoint(
            positions=(q[indices] - snapshot.position[indices]).tolist(),
            velocities=(v[indices] - snapshot.velocity[indices]).tolist(),
        )
        message.output = JointTrajectoryPoint(effort=snapshot.commanded_effort[indices].tolist())
        message.speed_scaling_factor = 1.0
        self.state_publisher.publish(message)

    def _loop_down(self) -> str:
        return self.loop.stopped_reason or "the control loop is not running"


def summarize(goal: Any) -> str:
    """A short description of a FollowJointTrajectory goal for the log."""
    trajectory = goal.trajectory
    points = trajectory.points
    end = _seconds(points[-1].time_from_start) if len(points) else 0.0
    return (
        f"{len(trajectory.joint_names)} joints, {len(points)} points over {end:.3g} s, "
        f"stamp {from_time_msg(trajectory.header.stamp):.3f}"
    )
