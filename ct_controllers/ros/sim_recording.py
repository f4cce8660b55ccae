"""Recording a simulated run without the node: the same topics and messages the node publishes
and records, built from the loop's snapshots (no node, no DDS).

- :class:`LockstepRecorder`, :class:`GraspRecorder` (``ct-sim --record``, ``ct-bench grasp
  --record``): lockstep runs, stamped with sim time.
- :class:`PacedRecorder` (``ct-bench loop --record``): a paced loop's state messages built and
  serialized as the node's state publishers do, from a thread of their own at the state rate,
  with or without recording them (to the MCAP writer process, as the node records).

Topics: ``/robot_description`` and ``/tf_static`` once, then at ``rate`` [Hz] of sim time
``/ct/joint_states``, ``/tf`` (with ``ct_object`` and, during a grasp, ``ct_goal``) and
``/ct/controller_state``, ``/diagnostics`` at 1 Hz; a grasp adds ``/ct/grasp/goal``,
``/ct/grasp/status``, ``/ct/grasp/feedback`` (20 Hz, as the action server) and
``/ct/grasp/result``, as the node records a Grasp goal.

The recorder is an observer of the run (:meth:`started` once the stack is up, :meth:`ticked`
after each batch of ticks): it builds and writes the messages between ticks, in the loop's
thread, outside every tick's timing (a writer thread beside a lockstep loop would compete for
the GIL during ticks).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from action_msgs.msg import GoalInfo, GoalStatus
from ct_interfaces.action import Grasp
from geometry_msgs.msg import PoseStamped
from rclpy.serialization import serialize_message
from tf2_msgs.msg import TFMessage

from ct_controllers.ros.conversions import to_time_msg
from ct_controllers.ros.recorder import McapRecorder, RecordingSummary
from ct_controllers.ros.state_publishers import StateMessages
from ct_controllers.ros.tf_publisher import (
    DESCRIPTION_TOPIC,
    TF_STATIC_TOPIC,
    TF_TOPIC,
    TfFrames,
    quaternion_xyzw,
)

STATE_RATE = 100.0  # [Hz] of sim time, as the node's state publishers
DIAGNOSTICS_RATE = 1.0  # [Hz]
FEEDBACK_RATE = 20.0  # [Hz], as the Grasp action server (FEEDBACK_PERIOD 0.05 s)
GRASP_TOPIC = "/ct/grasp"


def pose_stamped(pose: np.ndarray | None, frame: str, stamp: Any) -> PoseStamped:
    """A 4x4 pose as PoseStamped (an empty frame for None: "no pose", as in a Grasp goal)."""
    message = PoseStamped()
    if pose is None:
        return message
    message.header.frame_id = frame
    message.header.stamp = stamp
    position = message.pose.position
    position.x, position.y, position.z = (float(v) for v in pose[:3, 3])
    x, y, z, w = quaternion_xyzw(pose[:3, :3])  # not pin.Quaternion(pose[:3, :3]): it leaks
    o = message.pose.orientation
    o.x, o.y, o.z, o.w = x, y, z, w
    return message


class LockstepRecorder:
    """Records a lockstep run's state topics to ``path`` (see the module docstring).
    ``active``: the name reported as the active controller."""

    def __init__(
        self,
        path: str,
        active: str,
        rate: float = STATE_RATE,
        goal_target: Callable[[], Any] | None = None,
    ) -> None:
        self.recorder = McapRecorder(path, process=False)  # between ticks, never dropped
        self.active = active
        self.period = 1.0 / rate  # [s] of sim time
        self.goal_target = goal_target
        self.stack: Any = None
        self.messages: StateMessages | None = None
        self.frames: TfFrames | None = None
        self._next_state = 0.0
        self._next_diagnostics = 0.0

    def started(self, stack: Any) -> None:
        """The stack is up (before the first tick): the description and static transforms."""
        self.stack = stack
        self.messages = StateMessages(stack, lambda: self.active)
        self.frames = TfFrames(stack, self.goal_target)
        snapshot = stack.loop.snapshot()
        now = 0.0 if snapshot is None else snapshot.stamp
        description, static = self.frames.latched(to_time_msg(now))
        self.write(DESCRIPTION_TOPIC, description, now)
        self.write(TF_STATIC_TOPIC, static, now)
        self._next_state = self._next_diagnostics = now

    def ticked(self, stack: Any) -> None:
        """After a batch of ticks: the state topics if their period of sim time has passed."""
        assert self.messages is not None and self.frames is not None, "started() first"
        snapshot = stack.loop.snapshot()
        if snapshot is None:
            return
        now = snapshot.stamp
        if now + 1e-9 >= self._next_state:
            self._next_state = max(self._next_state + self.period, now)
            stamp = to_time_msg(now)
            self.write("/ct/joint_states", self.messages.joint_state(snapshot, stamp), now)
            tf = self.frames.message(snapshot.position, stamp)
            if tf is not None:
                self.write(TF_TOPIC, tf, now)
            self.write("/ct/controller_state", self.messages.controller_state(snapshot, stamp), now)
        if now + 1e-9 >= self._next_diagnostics:
            self._next_diagnostics = max(self._next_diagnostics + 1.0 / DIAGNOSTICS_RATE, now)
            self.write("/diagnostics", self.messages.diagnostics(to_time_msg(now)), now)

    def write(self, topic: str, message: Any, stamp: float) -> None:
        """``message`` on ``topic`` at sim time ``stamp`` [s]."""
        self.recorder.write(topic, message, max(0, math.floor(stamp * 1e9)))  # as to_time_msg

    def close(self) -> RecordingSummary:
        return self.recorder.close()


class GraspRecorder(LockstepRecorder):
    """A lockstep grasp run (the bench's: the phase machine installed in the loop, no action):
    the state topics, and the grasp as the node records a Grasp goal."""

    def __init__(self, path: str, active: str, runner: Any, goal: Any) -> None:
        super().__init__(path, active, goal_target=lambda: _tcp_target(runner))
        self.runner, self.goal = runner, goal
        self.info = GoalInfo()
        self.info.goal_id.uuid = list(uuid.uuid4().bytes)
        self._next_feedback = 0.0
        self._ended = False

    def started(self, stack: Any) -> None:
        super().started(stack)
        snapshot = stack.loop.snapshot()
        now = 0.0 if snapshot is None else snapshot.stamp
        base = stack.config.base_frame
        stamp = to_time_msg(now)
        self.info.stamp = stamp
        goal = Grasp.Goal(
            grasp_pose=pose_stamped(self.goal.grasp_pose, base, stamp),
            place_pose=pose_stamped(self.goal.place_pose, base, stamp),
            approach_offset=float(self.goal.approach_offset),
            lift_height=float(self.goal.lift_height),
            grasp_effort=float(self.goal.grasp_effort),
            hold_duration=float(self.goal.hold_duration),
        )
        self.write(f"{GRASP_TOPIC}/goal", goal, now)
        status = GoalStatus(goal_info=self.info, status=GoalStatus.STATUS_EXECUTING)
        self.write(f"{GRASP_TOPIC}/status", status, now)
        self._next_feedback = now

    def ticked(self, stack: Any) -> None:
        super().ticked(stack)
        snapshot = stack.loop.snapshot()
        if snapshot is None or snapshot.stamp + 1e-9 < self._next_feedback or self._ended:
            return
        now = snapshot.stamp
        self._next_feedback = max(self._next_feedback + 1.0 / FEEDBACK_RATE, now)
        task = self.runner.task
        records = task.transitions
        entered = records[-1].time if records else 0.0
        target = _tcp_target(self.runner)
        assert self.frames is not None
        if target is None:
            error = float("nan")
        else:
            tcp = self.frames.tree.model.frame_pose(snapshot.position)
            error = float(np.linalg.norm(target[:3, 3] - tcp[:3, 3]))
        feedback = Grasp.Feedback(
            phase=task.phase.value,
            phase_elapsed=max(0.0, now - entered),
            position_error=error,
            checks=list(task.checks),
        )
        self.write(f"{GRASP_TOPIC}/feedback", feedback, now)

    def ended(self, code: int, message: str, stamp: float) -> None:
        """The grasp's result (``Grasp.Result`` code and message) at sim time ``stamp``."""
        from ct_controllers.ros.grasp_action import GraspServer

        self._ended = True
        result = GraspServer._result(code, message, self.runner.task)
        self.write(f"{GRASP_TOPIC}/result", result, stamp)
        status = (
            GoalStatus.STATUS_SUCCEEDED
            if code == Grasp.Result.SUCCESS
            else GoalStatus.STATUS_ABORTED
        )
        self.write(f"{GRASP_TOPIC}/status", GoalStatus(goal_info=self.info, status=status), stamp)


def _tcp_target(runner: Any) -> Any:
    output = runner.last_output
    return None if output is None else output.tcp_target


class PacedRecorder:
    """What the node's recording costs a paced loop, without the node: a thread that does what
    the node's state publishers do for each new snapshot at ``rate`` [Hz] — build
    /ct/joint_states, /tf and /ct/controller_state and serialize them (to publish) — and, with a
    ``recorder``, hands the same bytes to it (log time: the wall clock, as the node's in real
    time). Run once without and once with a recorder, the difference is what recording adds."""

    def __init__(
        self,
        stack: Any,
        active: str,
        recorder: McapRecorder | None = None,
        rate: float = STATE_RATE,
    ) -> None:
        self.recorder, self.stack = recorder, stack
        self.messages = StateMessages(stack, lambda: active)
        self.frames = TfFrames(stack)
        self.period = 1.0 / rate  # [s]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ct-paced-recorder", daemon=True)

    def start(self) -> None:
        description, static = self.frames.latched(to_time_msg(0.0))
        self._send(DESCRIPTION_TOPIC, description)
        self._send(TF_STATIC_TOPIC, static)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _send(self, topic: str, message: Any, message_type: type | None = None) -> None:
        # Serialized as the node serializes it to publish (the /tf bytes come serialized).
        data = message if isinstance(message, bytes) else serialize_message(message)
        if self.recorder is not None:
            self.recorder.write(topic, data, message_type=message_type or type(message))

    def _run(self) -> None:
        last = -1.0
        next_time = time.monotonic()
        while not self._stop.wait(max(0.0, next_time - time.monotonic())):
            next_time = max(next_time + self.period, time.monotonic())
            snapshot = self.stack.loop.snapshot()
            if snapshot is None or snapshot.stamp <= last:
                continue
            last = snapshot.stamp
            stamp = to_time_msg(snapshot.stamp)
            self._send("/ct/joint_states", self.messages.joint_state(snapshot, stamp))
            tf = self.frames.serialized(snapshot.position, snapshot.stamp)
            if tf is not None:
                self._send(TF_TOPIC, tf, TFMessage)
            self._send("/ct/controller_state", self.messages.controller_state(snapshot, stamp))
