"""``<namespace>/<controller>/gripper_cmd``: control_msgs/action/GripperCommand
(``ct_controllers/GripperActionController`` entries) and control_msgs/action/
ParallelGripperCommand (``ct_controllers/ParallelGripperActionController``), as ros2_controllers'
Jazzy gripper_action_controller and parallel_gripper_action_controller serve them — a
controller ``gripper_controller`` of the node ``/ct/controller_manager`` serves
``/ct/gripper_controller/gripper_cmd``, where a ros2_control controller node in the manager's
namespace would, so MoveIt's ``GripperCommand`` controller handler drives it unchanged.

A goal moves the entry's ``joint`` to the goal's position, the other gripper joints following it
(a mirrored finger, a mimic follower), with the goal's effort bound (``max_effort``; 0 = the
entry's ``max_effort``, 0 there = the joints' URDF limit), through the Grasp's finger servo and
the command limiter (:mod:`ct_controllers.chains.gripper_command_runner`); the arm holds where
it is. Every ``1 / action_monitor_rate`` the measured position and velocity of the joint are
judged (:class:`~ct_controllers.tasks.gripper_command.StallMonitor`): within ``goal_tolerance``
→ SUCCEEDED, reached_goal; not moving faster than ``stall_velocity_threshold`` for
``stall_timeout`` → stalled, SUCCEEDED with ``allow_stalling``, else ABORTED; a success only on
a snapshot fresh on the loop's clock (``ros/goals.py: snapshot_fresh``), and none fresh for
``stall_timeout`` → ABORTED. A cancel ends
CANCELED and holds the measured position; a newer goal on the same action cancels the running
one (CANCELED, as the reference does); a newer goal of another action (the node runs one motion
goal at a time) ends it ABORTED. Results carry the measured position and velocity of the joint
and its measured effort (the commanded one where the backend measures none); feedback the same,
at the monitor rate.

A goal is rejected (the client's goal response; the reason in the node's log, as the results of
these actions carry no message) when the controller is not active, and for bad input, changing
nothing: a non-finite or out-of-range position, an effort above the drives' limit or below what
the finger servo controls, an effort the backend cannot enforce on position fingers
(:func:`~ct_controllers.chains.grasp_runner.grip_force_refusal`), in a ParallelGripperCommand a
wrong number of values or a joint name other than the entry's, a velocity above the URDF limit.
After a goal, as the reference's controller (which stays active and goes on commanding), the
fingers keep the goal's command — a grip on an object keeps gripping with the goal's effort —
around whatever runs next (an arm goal, a controller switch: the controller manager's overlay,
:func:`~ct_controllers.chains.gripper_command_runner.finger_hold`), until a goal that drives the
fingers itself (a gripper goal, a Grasp); a canceled goal leaves them holding the measured
position with the entry's ``max_effort`` (the reference's ``set_hold_position``).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from control_msgs.action import GripperCommand, ParallelGripperCommand
from rclpy.action import GoalResponse
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from sensor_msgs.msg import JointState

from ct_controllers.chains.grasp_runner import grip_force_refusal
from ct_controllers.chains.gripper_command_runner import (
    DEFAULT_SPEED,
    GripperCommandRunner,
    build_gripper_runner,
    finger_hold,
    gripper_limits,
    joint_force_lever,
    joint_lever,
    minimum_effort,
)
from ct_controllers.interface_controllers import GRIPPER, PARALLEL_GRIPPER, of_kind
from ct_controllers.plugins import CONTROLLERS, load_plugin
from ct_controllers.ros.goals import (
    SHUTTING_DOWN,
    SNAPSHOT_FRESHNESS,
    motion_action_server,
    snapshot_fresh,
)
from ct_controllers.runtime.control_loop import LoopSnapshot
from ct_controllers.tasks.gripper_command import (
    GripperGoal,
    GripperGoalError,
    GripperOutcome,
    StallMonitor,
    checked_goal,
    default_effort,
    parallel_command,
)

PREEMPTED_HERE = "preempted by a newer goal of this action"
CANCELED_HERE = "canceled"
STATUS_NAMES = {
    GoalStatus.STATUS_SUCCEEDED: "SUCCEEDED",
    GoalStatus.STATUS_CANCELED: "CANCELED",
    GoalStatus.STATUS_ABORTED: "ABORTED",
}


class GripperCommandServer:
    """One gripper controller entry's action server (``kind`` GRIPPER or PARALLEL_GRIPPER)."""

    def __init__(
        self,
        node: Any,
        stack: Any,
        manager: Any,
        arbiter: Any,
        name: str,
        entry: Any,
        callback_group: Any,
    ) -> None:
        self.node, self.stack, self.manager, self.arbiter = node, stack, manager, arbiter
        self.name = name
        self.loop = stack.loop
        controller_type = load_plugin(CONTROLLERS, str(entry["type"]))
        self.parallel = controller_type.kind == PARALLEL_GRIPPER
        schema = controller_type.PARAMETERS
        given = {k: v for k, v in entry.items() if k != "type"}
        self.parameters = schema.parse({**schema.defaults(), **given})
        self.joint = str(self.parameters["joint"])
        self.action = ParallelGripperCommand if self.parallel else GripperCommand
        self.log = node.get_logger()
        manager.add_interface_controller(name, str(entry["type"]), active=True)
        # Goals started by this server, counted inside the arbiter's take-over (under its lock,
        # so a goal that finds itself preempted sees whether this server started the newer one).
        self._started = 0
        self._lock = threading.Lock()
        self.unusable = self._unusable()
        if self.unusable is not None:
            self.log.warning(f"{name}: every goal will be rejected: {self.unusable}")
            self.limits = None
            self._default_minimum = math.inf
        else:
            self.limits = gripper_limits(stack, self.joint)
            self._default_velocity = (
                float(self.parameters["max_velocity"])
                if self.parallel
                else DEFAULT_SPEED / joint_lever(stack, self.joint)
            )
            self._default_minimum = minimum_effort(stack, self.joint, self._default_velocity)
        self.server = motion_action_server(
            node,
            self.action,
            f"{name}/gripper_cmd",
            self._execute,
            callback_group,
            arbiter=arbiter,
            summary=self._summary,
            goal_callback=self._on_goal,
            failure=lambda _message: self._result(self.loop.snapshot(), None),
            describe=self._describe,
        )

    def _unusable(self) -> str | None:
        """Why this entry cannot serve goals on this robot and backend, or None."""
        fingers = self.stack.config.gripper_joints
        if self.joint not in fingers:
            return (
                f"joint '{self.joint}' is not one of the gripper joints "
                f"({', '.join(fingers) or 'none: this robot has no gripper'})"
            )
        missing = sorted(set(fingers) - set(self.stack.hardware.joint_names))
        if missing:
            return f"this backend drives no gripper joint(s) {', '.join(missing)}"
        return None

    # --- the goal, checked --------------------------------------------------------------------
    def checked(self, goal: Any) -> GripperGoal | str:
        """The goal checked (module docstring), or why it is refused."""
        if not self.manager.is_active(self.name):
            return f"controller '{self.name}' is not active"
        if self.unusable is not None or self.limits is None:
            return str(self.unusable)
        limits = self.limits
        try:
            if self.parallel:
                command = goal.command
                position, velocity, effort = parallel_command(  # sizes checked first
                    self.joint, command.name, command.position, command.velocity, command.effort
                )
                field = "command.effort"
            else:
                position, velocity, effort = goal.command.position, None, goal.command.max_effort
                field = "command.max_effort"
            speed = self._default_velocity if velocity is None else velocity
            bound = default_effort(
                0.0 if effort is None else effort,
                float(self.parameters["max_effort"]),
                limits.max_effort,
            )
            smallest = (
                self._default_minimum
                if speed == self._default_velocity
                else (
                    minimum_effort(self.stack, self.joint, speed)
                    if math.isfinite(speed) and 0 < speed <= limits.max_velocity
                    else 0.0
                )
            )
            checked = checked_goal(limits, position, bound, speed, smallest, field)
        except GripperGoalError as exc:
            return str(exc)
        # [N] of finger surface; rounded: a prismatic finger's lever is 1 only to round-off (from
        # forward kinematics), and 40 N / (1 − 1e-16) is above a 40 N drive limit.
        force = round(checked.effort / joint_force_lever(self.stack, self.joint), 9)
        refusal = grip_force_refusal(
            self.stack.hardware, self.stack.config.gripper_joints, force, field
        )
        return refusal if refusal is not None else checked

    def _on_goal(self, goal: Any) -> GoalResponse:
        problem = self.checked(goal)
        if isinstance(problem, str):
            self.log.warning(f"{self.name}/gripper_cmd: goal rejected: {problem}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    # --- running it -------------------------------------------------------------------------
    def _execute(self, goal_handle: Any) -> Any:
        goal = self.checked(goal_handle.request)
        if isinstance(goal, str):  # changed since it was accepted (deactivated meanwhile)
            return self._end(goal_handle, GoalStatus.STATUS_ABORTED, goal, None)
        if self.loop.snapshot() is None or not self.loop.running:
            reason = self.loop.stopped_reason or "no state from the control loop"
            return self._end(goal_handle, GoalStatus.STATUS_ABORTED, reason, None)
        arm = self.stack.controllers[self.manager.selected]
        runner = build_gripper_runner(self.stack, arm, self.joint, goal)
        mine = 0

        def take_over() -> None:
            nonlocal mine
            self.loop.hold()  # the arm stops (bounded deceleration) and holds where it is
            self.manager.use_chain(f"{self.name} → {self.manager.selected}", runner)
            with self._lock:
                self._started += 1
                mine = self._started

        token, _ = self.arbiter.start(take_over)
        try:
            return self._follow(goal_handle, token, mine, goal)
        finally:
            self._hold_after(goal_handle, token, runner)
            self.arbiter.finish(token)

    def _hold_after(self, goal_handle: Any, token: int, runner: GripperCommandRunner) -> None:
        """What the fingers do once the goal ended, as the reference's controller, which stays
        active: canceled, hold the measured position with the entry's effort
        (``set_hold_position``); otherwise go on commanding the goal (a grip on an object keeps
        gripping), around whatever runs next (:func:`finger_hold`) — unless a newer goal of
        this action took over, or the controller was deactivated (then the joint controller
        holds the fingers). The arm holds where it is (a goal that ended current)."""
        ending = getattr(goal_handle, "ct_ending", "")
        if ending == PREEMPTED_HERE:
            return
        if not self.manager.is_active(self.name):  # deactivated: its command ends with it
            if self.arbiter.is_current(token):
                self.loop.hold()
                self.manager.release()
            return
        hold = runner
        if ending == CANCELED_HERE:
            snapshot = self.loop.snapshot()
            limits = self.limits
            if snapshot is not None and limits is not None:
                fingers = self.stack.model.indices(self.stack.config.gripper_joints)
                entry = float(self.parameters["max_effort"])
                effort = default_effort(0.0, entry, limits.max_effort)
                force = effort / joint_force_lever(self.stack, self.joint)
                hold = runner.holding(snapshot.position[fingers].tolist(), force)
        if self.arbiter.is_current(token):
            self.loop.hold()
            self.manager.release_with(finger_hold(hold), owner=self.name)
        else:  # another action's goal runs: the grip stays around its controller
            self.manager.set_overlay(finger_hold(hold), owner=self.name)

    def _follow(self, goal_handle: Any, token: int, mine: int, goal: GripperGoal) -> Any:
        index = self.stack.model.indices([self.joint])[0]
        period = 1.0 / float(self.parameters["action_monitor_rate"])
        snapshot = self.loop.snapshot()
        assert snapshot is not None
        monitor = StallMonitor(
            goal.position,
            snapshot.stamp,
            float(self.parameters["goal_tolerance"]),
            float(self.parameters["stall_velocity_threshold"]),
            float(self.parameters["stall_timeout"]),
            bool(self.parameters["allow_stalling"]),
        )
        aborted = GoalStatus.STATUS_ABORTED
        last_tick = -1
        stale_since: float | None = None  # [s] loop clock: since when the snapshots are stale
        while not self.arbiter.stopping.is_set():
            snapshot = self.loop.wait_for_snapshot(last_tick, timeout=1.0)
            if not self.loop.running:
                reason = self.loop.stopped_reason or "the control loop is not running"
                return self._end(goal_handle, aborted, reason, snapshot)
            if snapshot is None or snapshot.tick == last_tick:
                return self._end(goal_handle, aborted, "no state from the control loop", None)
            last_tick = snapshot.tick
            if snapshot.fault:
                return self._end(goal_handle, aborted, snapshot.fault, snapshot)
            if not self.arbiter.is_current(token):
                if self._started > mine:  # a newer goal of this action: the reference cancels
                    goal_handle.ct_ending = PREEMPTED_HERE
                    if not goal_handle.is_cancel_requested:  # EXECUTING → CANCELING → CANCELED
                        goal_handle._update_state(_rclpy.GoalEvent.CANCEL_GOAL)
                    return self._end(
                        goal_handle,
                        GoalStatus.STATUS_CANCELED,
                        "preempted by a newer goal of this action",
                        snapshot,
                    )
                return self._end(goal_handle, aborted, "preempted by a newer goal", snapshot)
            if not self.manager.is_active(self.name):  # switch_controller deactivated it
                return self._end(goal_handle, aborted, f"'{self.name}' deactivated", snapshot)
            if goal_handle.is_cancel_requested:
                goal_handle.ct_ending = CANCELED_HERE
                return self._end(
                    goal_handle,
                    GoalStatus.STATUS_CANCELED,
                    "canceled; holding the measured position",
                    snapshot,
                )
            outcome = monitor.update(
                snapshot.stamp,
                float(snapshot.position[index]),
                float(snapshot.velocity[index]),
            )
            # A success rests on a fresh measurement only (a frozen snapshot's position is not
            # the finger's); a stale one is judged again with the next snapshot, and stale ones
            # for stall_timeout end the goal (it has no timeout of its own).
            fresh = snapshot_fresh(self.loop, snapshot)
            if outcome is not None and (fresh or not outcome.succeeded):
                status = GoalStatus.STATUS_SUCCEEDED if outcome.succeeded else aborted
                reason = "reached the goal" if outcome.reached_goal else "stalled"
                return self._end(goal_handle, status, reason, snapshot, outcome)
            now = self.loop.now()
            stale_since = None if fresh else (now if stale_since is None else stale_since)
            if stale_since is not None and now - stale_since > monitor.stall_timeout:
                reason = (
                    f"no measurement fresher than {SNAPSHOT_FRESHNESS} s for "
                    f"{monitor.stall_timeout} s"
                )
                return self._end(goal_handle, aborted, reason, snapshot)
            goal_handle.publish_feedback(self._feedback(snapshot))
            time.sleep(period)
        return self._end(goal_handle, aborted, SHUTTING_DOWN, self.loop.snapshot())

    def _end(
        self,
        goal_handle: Any,
        status: int,
        reason: str,
        snapshot: LoopSnapshot | None,
        outcome: GripperOutcome | None = None,
    ) -> Any:
        if status == GoalStatus.STATUS_SUCCEEDED:
            goal_handle.succeed()
        elif status == GoalStatus.STATUS_CANCELED:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        goal_handle.ct_reason = reason  # for the end line of the log (_describe)
        return self._result(snapshot, outcome)

    # --- messages -----------------------------------------------------------------------------
    def _measured(self, snapshot: LoopSnapshot | None) -> tuple[float, float, float]:
        """(position [m | rad], velocity, effort [N | N·m]) of the joint: measured; the effort
        commanded where the backend measures none. NaN without a snapshot."""
        if snapshot is None:
            return math.nan, math.nan, math.nan
        index = self.stack.model.indices([self.joint])[0]
        effort = float(snapshot.measured_effort[index])
        if not math.isfinite(effort):
            effort = float(snapshot.commanded_effort[index])
        return float(snapshot.position[index]), float(snapshot.velocity[index]), effort

    def _result(self, snapshot: LoopSnapshot | None, outcome: GripperOutcome | None) -> Any:
        position, velocity, effort = self._measured(snapshot)
        stalled = outcome is not None and outcome.stalled
        reached = outcome is not None and outcome.reached_goal
        if self.parallel:
            state = JointState(
                name=[self.joint], position=[position], velocity=[velocity], effort=[effort]
            )
            return ParallelGripperCommand.Result(state=state, stalled=stalled, reached_goal=reached)
        return GripperCommand.Result(
            position=position, effort=effort, stalled=stalled, reached_goal=reached
        )

    def _feedback(self, snapshot: LoopSnapshot) -> Any:
        position, velocity, effort = self._measured(snapshot)
        if self.parallel:
            state = JointState(
                name=[self.joint], position=[position], velocity=[velocity], effort=[effort]
            )
            return ParallelGripperCommand.Feedback(state=state)
        return GripperCommand.Feedback(
            position=position, effort=effort, stalled=False, reached_goal=False
        )

    def _summary(self, goal: Any) -> str:
        command = goal.command
        if self.parallel:
            return (
                f"{self.name}: {len(command.position)} position(s) "
                f"{[round(p, 4) for p in command.position[:2]]}, "
                f"velocity {list(command.velocity[:2])}, effort {list(command.effort[:2])}"
            )
        return f"{self.name}: position {command.position:g}, max_effort {command.max_effort:g}"

    def _describe(self, goal_handle: Any, result: Any) -> tuple[str, str]:
        status = STATUS_NAMES.get(goal_handle.status, str(goal_handle.status))
        reason = getattr(goal_handle, "ct_reason", "")
        if self.parallel:
            position = list(result.state.position)
            effort = list(result.state.effort)
            shown = f"position {position}, effort {effort}"
        else:
            shown = f"position {result.position:.4f}, effort {result.effort:.3f}"
        return status, (
            f"{reason}; {shown}, stalled {result.stalled}, reached_goal {result.reached_goal}"
        )


def gripper_servers(
    node: Any, stack: Any, manager: Any, arbiter: Any, callback_group: Any
) -> dict[str, GripperCommandServer]:
    """A server for every gripper controller entry of the configuration (GRIPPER and
    PARALLEL_GRIPPER kinds), by entry name."""
    entries = stack.config.interface_controllers
    return {
        name: GripperCommandServer(node, stack, manager, arbiter, name, entry, callback_group)
        for kind in (GRIPPER, PARALLEL_GRIPPER)
        for name, entry in of_kind(entries, kind).items()
    }
