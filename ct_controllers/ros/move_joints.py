"""``/ct/move_joints`` (ct_interfaces/action/MoveJoints): validate at the boundary, hand the
motion to the control loop, report feedback at 20 Hz and the measured result.

A rejected goal is accepted and aborted at once with its code and a message (a bare rejection
carries no reason). Success means the measured error is within ``GOAL_TOLERANCE`` after the
trajectory, not that the trajectory ended, on a snapshot fresh on the loop's clock
(``ros/goals.py: snapshot_fresh``).

Validation is linear in the goal's size and starts with its size (more names than the arm has
joints is refused before anything looks at them); messages name at most a few offenders. A goal
the trajectory planner cannot plan (from the measured position, at rest) is INVALID_GOAL with
the planner's own message, before it reaches the loop.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any

import numpy as np
from ct_interfaces.action import MoveJoints

from ct_controllers.references.joint_trajectory import (
    MAX_DURATION,
    JerkLimitedTrajectory,
    TrajectoryError,
)
from ct_controllers.ros.goals import SHUTTING_DOWN, motion_action_server, snapshot_fresh
from ct_controllers.runtime.control_loop import (
    FAILED,
    PREEMPTED,
    RUNNING,
    SUCCEEDED,
    LoopSnapshot,
)
from ct_controllers.runtime.motion_requests import JointMotion, checked_motion
from ct_controllers.text import control_characters, name_few, quoted

Result = MoveJoints.Result
FEEDBACK_PERIOD = 0.05  # [s] 20 Hz
GOAL_TOLERANCE = 0.01  # [rad] per joint, for SUCCESS after the trajectory ends
SETTLE_TIMEOUT = 2.0  # [s] after the trajectory ends, to get within tolerance


class MoveJointsServer:
    def __init__(
        self, node: Any, stack: Any, manager: Any, arbiter: Any, callback_group: Any
    ) -> None:
        self.stack, self.manager, self.arbiter = stack, manager, arbiter
        self.config = stack.config
        self.loop = stack.loop
        self._arm = set(self.config.arm_joints)
        self.server = motion_action_server(
            node,
            MoveJoints,
            "move_joints",
            self._execute,
            callback_group,
            arbiter=arbiter,
            summary=summarize,
        )

    def validate(self, goal: Any) -> str | None:
        """None, or why the goal is invalid (naming at most a few offending items). Linear in
        the goal's size; the size itself is checked first."""
        names, positions = goal.joint_names, goal.positions
        arm = len(self.config.arm_joints)
        if not names:
            return "joint_names is empty"
        if len(names) > arm or len(positions) > arm:
            return (
                f"{len(names)} joint names and {len(positions)} positions; the arm has {arm} joints"
            )
        if len(positions) != len(names):
            return f"{len(names)} joint names but {len(positions)} positions"
        malformed = [quoted(n) for n in names if control_characters(n)]
        if malformed:
            return f"joint name(s) with control characters: {name_few(malformed, separator=', ')}"
        duplicates = [quoted(n) for n, count in Counter(names).items() if count > 1]
        if duplicates:
            return f"joint(s) listed twice: {name_few(duplicates, separator=', ')}"
        unknown = [quoted(n) for n in names if n not in self._arm]
        follower = next(
            (self.stack.model.mimic[n] for n in names if n in self.stack.model.mimic), None
        )
        if follower is not None:  # a <mimic> joint: it follows its master, never commanded
            return (
                f"joint {quoted(follower.name)} is a mimic joint: it follows "
                f"{quoted(follower.master)} and is never commanded; name {quoted(follower.master)}"
            )
        if unknown:
            return (
                f"unknown arm joint(s): {name_few(unknown, separator=', ')}; arm joints are "
                f"{', '.join(self.config.arm_joints)}"
            )
        bad = [f"{n}={p}" for n, p in zip(names, positions, strict=True) if not math.isfinite(p)]
        if bad:
            return f"non-finite position(s): {name_few(bad, separator=', ')}"
        if not (math.isfinite(goal.duration) and 0 <= goal.duration <= MAX_DURATION):
            return f"duration must be within [0, {MAX_DURATION:g}] s, got {goal.duration}"
        if goal.controller and goal.controller not in self.manager.controllers:
            return (
                f"unknown controller {quoted(goal.controller)}; loaded: "
                f"{', '.join(self.manager.controllers)}"
            )
        return None

    def checked(self, goal: Any) -> JointMotion | str:
        """The goal as the loop's checked motion (names mapped to model order, once), or why
        not: the ROS-level checks (:meth:`validate`), the robot's (limits, lengths, duration),
        then whether the planner can plan it."""
        problem = self.validate(goal)
        if problem is not None:
            return problem
        try:
            motion = checked_motion(
                self.stack.model, list(goal.joint_names), list(goal.positions), goal.duration
            )
        except ValueError as exc:  # e.g. outside the joint limits
            return str(exc)
        return self.plannable(motion) or motion

    def plannable(self, motion: JointMotion) -> str | None:
        """None, or the planner's message if no trajectory exists from the measured position
        (at rest) to the motion's goal within the reference limits and the duration bound."""
        snapshot = self.loop.snapshot()
        if snapshot is None:
            return None  # the loop plans from its first state and reports a failure itself
        target = snapshot.reference_position.copy()
        target[motion.indices] = motion.positions
        try:
            JerkLimitedTrajectory(
                0.0,
                snapshot.position,
                np.zeros_like(snapshot.position),
                target,
                self.loop.reference_limits,
                motion.duration,
            )
        except TrajectoryError as exc:
            return str(exc)
        return None

    def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        motion = self.checked(goal)  # checked once; from here on in model order
        if isinstance(motion, str):
            goal_handle.abort()
            return Result(error_code=Result.INVALID_GOAL, message=motion)
        if not self.loop.running:
            goal_handle.abort()
            return Result(error_code=Result.FAULT, message=self._loop_down())

        def take_over() -> int:
            motion_id = self.loop.request(motion)
            self.manager.use(goal.controller)  # validated: a loaded controller or ""
            return motion_id

        token, motion_id = self.arbiter.start(take_over)
        try:
            return self._follow(goal_handle, token, motion_id, motion.indices, motion.positions)
        finally:
            self._release(token)

    def _release(self, token: int) -> None:
        """Give back the controller this goal ran with, unless a newer goal took over."""
        if self.arbiter.is_current(token):
            self.manager.release()
        self.arbiter.finish(token)

    def _follow(
        self,
        goal_handle: Any,
        token: int,
        motion_id: int,
        indices: np.ndarray,
        target: np.ndarray,
    ) -> Any:
        def finish(code: int, message: str, snapshot: LoopSnapshot | None) -> Any:
            final_error = [] if snapshot is None else (target - snapshot.position[indices]).tolist()
            if code == Result.SUCCESS:
                goal_handle.succeed()
            elif code == Result.CANCELED:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            return Result(error_code=code, message=message, final_error=final_error)

        settle_deadline: float | None = None
        last_tick = -1
        while not self.arbiter.stopping.is_set():
            snapshot = self.loop.wait_for_snapshot(last_tick, timeout=1.0)
            if not self.loop.running:
                return finish(Result.FAULT, self._loop_down(), snapshot)
            if snapshot is None or snapshot.tick == last_tick:
                self.loop.hold()
                return finish(Result.FAULT, "no state from the control loop", snapshot)
            last_tick = snapshot.tick
            if snapshot.fault:
                return finish(Result.FAULT, snapshot.fault, snapshot)
            status = self.loop.motion_status(motion_id)
            newer_started = snapshot.motion is not None and snapshot.motion.motion_id > motion_id
            if not self.arbiter.is_current(token) or (
                (status is not None and status.state == PREEMPTED)
                or (status is None and newer_started)
            ):
                return finish(Result.PREEMPTED, "preempted by a newer goal", snapshot)
            if goal_handle.is_cancel_requested:
                self.loop.hold()
                deadline = time.monotonic() + 1.0
                while time.monotonic() < deadline:
                    status = self.loop.motion_status(motion_id)
                    if status is None or status.state != RUNNING:
                        break
                    snapshot = self.loop.wait_for_snapshot(snapshot.tick, 0.2) or snapshot
                return finish(Result.CANCELED, "canceled; stopping and holding", snapshot)
            if status is None:
                continue  # the loop has not picked the request up yet
            if status.state == FAILED:
                return finish(
                    Result.UNREACHABLE,
                    status.message or "no trajectory within the reference limits",
                    snapshot,
                )
            error = target - snapshot.position[indices]
            goal_handle.publish_feedback(
                MoveJoints.Feedback(error=error.tolist(), progress=status.progress)
            )
            if status.state == SUCCEEDED:
                # On a fresh measurement only (a frozen snapshot's error is not the arm's).
                if np.all(np.abs(error) <= GOAL_TOLERANCE) and snapshot_fresh(self.loop, snapshot):
                    return finish(Result.SUCCESS, "reached the goal", snapshot)
                settle_deadline = settle_deadline or snapshot.stamp + SETTLE_TIMEOUT
                if snapshot.stamp > settle_deadline:
                    return finish(
                        Result.TIMEOUT,
                        f"trajectory ended but the error {np.abs(error).max():.4f} rad stayed "
                        f"above {GOAL_TOLERANCE} rad for {SETTLE_TIMEOUT} s",
                        snapshot,
                    )
            time.sleep(FEEDBACK_PERIOD)
        self.loop.hold()
        return finish(Result.FAULT, SHUTTING_DOWN, self.loop.snapshot())

    def _loop_down(self) -> str:
        return self.loop.stopped_reason or "the control loop is not running"


def summarize(goal: Any) -> str:
    """A short description of a MoveJoints goal for the log."""
    count = len(goal.joint_names)
    if count > 8:
        return f"{count} joints (oversized), duration {goal.duration:g} s"
    targets = ", ".join(
        f"{quoted(name, 16)}={value:.3f}"
        for name, value in zip(goal.joint_names, goal.positions, strict=False)
    )
    controller = f", controller {quoted(goal.controller)}" if goal.controller else ""
    return f"{targets}; duration {goal.duration:g} s{controller}"
