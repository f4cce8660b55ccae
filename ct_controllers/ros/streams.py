"""Streamed targets, as MoveIt Servo and crisp take them (issue 26, item 3): ``~/target_pose``
(geometry_msgs/PoseStamped, ``ros/pose_stream.py``), ``~/target_twist``
(geometry_msgs/TwistStamped, ``ros/twist_stream.py``) and ``~/joint_jog`` (control_msgs/JointJog
velocities, ``ros/joint_jog_stream.py``; where the installed control_msgs has JointJog). Thin:
each message is checked (``references/servo.py``, ``references/joint_jog.py``) and handed to its
servo; the control thread does the rest
(``chains/stream_chain.py``). This module: the selection, the status, the counters.

Selection: the live parameter ``stream.command_type`` (``none`` | ``pose`` | ``twist`` |
``joint_jog``), set with
``ros2 param set /ct/controller_manager stream.command_type pose`` — MoveIt Servo's command-type
switch, over the standard parameter service (no std_srvs in this venv; no interface to build).
Selecting takes the arm as a goal does (a running goal ends PREEMPTED); a goal arriving while a
stream is selected takes the arm back: the stream ends (status INACTIVE, the parameter back to
``none``), as goals preempt each other. A fault latched ends it too. Setting ``none`` halts the
stream (bounded deceleration from the measured state) and then holds where the arm is.

Published: ``~/servo_status`` (diagnostic_msgs/DiagnosticStatus: ``message`` the reason, the
value ``code`` the servo's code, level OK / WARN near a singularity or halting / ERROR stopped at
a singularity), every change. Dropped messages are counted by reason on ``/diagnostics``
(``stream_dropped_<reason>``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rclpy.qos import QoSProfile

from ct_controllers.chains.jog_chain import JogChain
from ct_controllers.chains.stream_chain import StreamChain, stream_chain
from ct_controllers.parameter_schema import ParameterSchema, ParameterSpec
from ct_controllers.references.joint_jog import JogServo
from ct_controllers.references.servo import (
    DECELERATE_FOR_SINGULARITY,
    DROP_REASONS,
    HALT_FOR_SINGULARITY,
    HALTING_NO_COMMAND,
    INACTIVE,
    NOT_SELECTED,
    STREAM_PARAMETERS,
    Servo,
    ServoParameters,
    StatusLog,
    StreamError,
)
from ct_controllers.ros.joint_jog_stream import JointJogStream, joint_jog_available
from ct_controllers.ros.parameters import declare_entry
from ct_controllers.ros.pose_stream import PoseStream
from ct_controllers.ros.twist_stream import TwistStream

NONE = "none"
POSE = "pose"
TWIST = "twist"
JOINT_JOG = "joint_jog"
COMMAND_TYPES = (NONE, POSE, TWIST, JOINT_JOG)
COMMAND_TYPE = "stream.command_type"
SELECTION = ParameterSchema(
    "stream",
    (
        ParameterSpec(
            "command_type",
            str,
            NONE,
            "The stream that drives the arm: none | pose (~/target_pose) | twist "
            "(~/target_twist) | joint_jog (~/joint_jog)",
            live=True,
            validator=lambda v: None if v in COMMAND_TYPES else f"not one of {COMMAND_TYPES}",
        ),
    ),
)
MONITOR_PERIOD = 0.02  # [s] status publishing and goal / fault watch
END_TIMEOUT = 2.0  # [s] the longest a deselected stream's halt is waited for before holding
LEVELS = {
    DECELERATE_FOR_SINGULARITY: DiagnosticStatus.WARN,
    HALTING_NO_COMMAND: DiagnosticStatus.WARN,
    HALT_FOR_SINGULARITY: DiagnosticStatus.ERROR,
}


class StreamServer:
    def __init__(
        self, node: Any, stack: Any, manager: Any, arbiter: Any, callback_group: Any
    ) -> None:
        self.node, self.stack, self.manager, self.arbiter = node, stack, manager, arbiter
        self.config = stack.config
        self.loop = stack.loop
        values = {}
        for spec in STREAM_PARAMETERS.parameters:
            name = STREAM_PARAMETERS.full_name(spec)
            values[name] = declare_entry(
                node, name, spec.default, spec.describe(), spec.live, spec.bounds
            )
        spec = SELECTION.parameters[0]
        declare_entry(node, COMMAND_TYPE, NONE, spec.describe(), live=True)
        self.parameters = ServoParameters.from_values(values)  # ValueError naming one
        self.servo = Servo(self.parameters)  # the pose and twist streams'
        self.jog_servo = JogServo(self.parameters, self.loop.reference_limits)
        self._log: StatusLog = self.servo  # the selected stream's status
        self.model = stack.model.with_own_data()  # the callbacks' (TCP-frame targets)
        self.tcp_frame = stack.model.tcp_frame
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(("received", "taken", *DROP_REASONS), 0)
        self._token = 0  # the arbiter's, while a stream holds the arm
        self._chain: StreamChain | JogChain | None = None
        self._ending: float | None = None  # [s, monotonic] when a deselected stream began ending
        self.selected = NONE
        self.status_publisher = node.create_publisher(
            DiagnosticStatus, "~/servo_status", QoSProfile(depth=100)
        )
        self.streams: tuple[Any, ...] = (
            PoseStream(self, node, callback_group),
            TwistStream(self, node, callback_group),
        )
        if joint_jog_available():
            self.streams += (JointJogStream(self, node, callback_group),)
        self.timer = node.create_timer(MONITOR_PERIOD, self._monitor, callback_group=callback_group)

    # --- selection (the parameter callback's thread) ----------------------------------------
    @staticmethod
    def owns(name: str) -> bool:
        return name == COMMAND_TYPE

    def check(self, value: Any) -> str | None:
        """What is wrong with selecting ``value`` now (None: fine)."""
        problem = SELECTION.parameters[0].validator(value)  # type: ignore[misc]
        if problem:
            return f"{COMMAND_TYPE}: {value!r} {problem}"
        if value == JOINT_JOG and not joint_jog_available():
            return (
                f"{COMMAND_TYPE}: the installed control_msgs has no JointJog (make setup "
                "builds ours)"
            )
        if value != NONE:
            if not self.loop.running or self.loop.snapshot() is None:
                return f"{COMMAND_TYPE}: the control loop is not running"
            if self.loop.fault is not None:
                return f"{COMMAND_TYPE}: a fault is latched ({self.loop.fault}); reset it first"
        return None

    def select(self, value: str) -> None:
        """Take the arm for stream ``value`` (checked), or end the stream (``none``)."""
        with self._lock:
            if value == NONE:
                if self._chain is not None and self._ending is None:
                    self._halt()  # no target from now on: the servo halts
                    self._ending = time.monotonic()
                self.selected = NONE
                return
            controller = self.stack.controllers[self.manager.selected]
            chain: StreamChain | JogChain
            if value == JOINT_JOG:
                self.jog_servo.restart()
                chain = JogChain(self.jog_servo, controller)
                self._log = self.jog_servo
            else:
                snapshot = self.loop.snapshot()
                start = self.stack.model.with_own_data().frame_pose(snapshot.position)
                self.servo.restart()
                chain = stream_chain(
                    self.stack.model,
                    self.servo,
                    controller,
                    self.config.arm_joints,
                    self.config.cartesian_divisor,
                    start,
                )
                self._log = self.servo
            name = f"{value} stream → {self.manager.selected}"
            self._token, _ = self.arbiter.start(
                lambda: self.manager.use_chain(name, chain),
                # The ct_goal TF frame: the commanded TCP pose (a jog has none).
                target=None if value == JOINT_JOG else (lambda: self.servo.commanded_pose),
            )
            self._chain, self._ending, self.selected = chain, None, value
        self.node.get_logger().info(f"{COMMAND_TYPE}: {value} ({name})")

    def _halt(self) -> None:
        """No target from now on (the chain halts from the measured state)."""
        if isinstance(self._chain, JogChain):
            self.jog_servo.drop_jog()
        else:
            self.servo.drop_target()

    # --- messages (executor threads) ----------------------------------------------------------
    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def accepts(self, stream: str) -> bool:
        """Count a message of ``stream``; whether it is selected (else counted as dropped)."""
        self._count("received")
        if self.selected != stream or self._chain is None:
            self._count(NOT_SELECTED)
            return False
        return True

    def now(self) -> float:
        """The node's clock [s], against which stamps are judged."""
        return float(self.node.get_clock().now().nanoseconds * 1e-9)

    def measured_tcp(self) -> Any:
        """The measured TCP pose (4x4, base frame) of the latest snapshot, or None."""
        snapshot = self.loop.snapshot()
        if snapshot is None:
            return None
        with self._lock:  # the model's scratch data: one callback at a time
            return self.model.frame_pose(snapshot.position)

    def dropped(self, topic: str, exc: StreamError) -> None:
        self._count(exc.reason)
        self.node.get_logger().warning(
            f"{topic} dropped ({exc.reason}): {exc}", throttle_duration_sec=1.0
        )

    def taken(self) -> None:
        self._count("taken")

    # --- status, goals, faults (a timer) --------------------------------------------------------
    def _monitor(self) -> None:
        try:
            self._watch()
        finally:
            for log in (self.servo, self.jog_servo):
                for status in log.take_statuses():
                    self._publish(status.code, status.message)

    def _watch(self) -> None:
        with self._lock:
            chain, token, ending = self._chain, self._token, self._ending
        if chain is None:
            return
        if not self.arbiter.is_current(token):  # a goal took the arm
            self._ended("a goal took the arm", release=False)
        elif self.loop.fault is not None or not self.loop.running:
            self._ended(f"fault: {self.loop.fault or self.loop.stopped_reason}", release=True)
        elif ending is not None and (not chain.moving or time.monotonic() - ending > END_TIMEOUT):
            self._ended("stream deselected", release=True)

    def _ended(self, why: str, release: bool) -> None:
        """The stream gives the arm up: to the selected controller holding where the arm is
        (``release``), or to the goal that took it."""
        with self._lock:
            chain, token = self._chain, self._token
            self._chain, self._ending = None, None
            was = self.selected
            self.selected = NONE
        if chain is None:
            return
        if release and self.arbiter.is_current(token):
            self.loop.hold()
            self.manager.release()
        if isinstance(chain, StreamChain):  # Cartesian impedance: its reference's FK again
            chain.inner.release_target()
        self.arbiter.finish(token)
        self._log.set_status(INACTIVE, f"no stream selected: {why}")
        if was != NONE:  # the parameter says what runs
            from rclpy.parameter import Parameter

            self.node.set_parameters([Parameter(COMMAND_TYPE, value=NONE)])
        self.node.get_logger().info(f"{COMMAND_TYPE}: stream ended ({why})")

    def _publish(self, code: int, message: str) -> None:
        status = DiagnosticStatus(
            level=LEVELS.get(code, DiagnosticStatus.OK),
            name=f"{self.node.get_fully_qualified_name().lstrip('/')}: servo",
            message=message,
            values=[KeyValue(key="code", value=str(code))],
        )
        self.status_publisher.publish(status)

    def diagnostics(self) -> dict[str, object]:
        """The stream's counters for /diagnostics (key → value). Any thread."""
        with self._lock:
            counts = dict(self.counts)
        out: dict[str, object] = {"stream_selected": self.selected}
        out["stream_received"] = counts.pop("received")
        out["stream_taken"] = counts.pop("taken")
        out.update({f"stream_dropped_{reason}": n for reason, n in counts.items()})
        status = self._log.status
        out["servo_status"] = f"{status.code}: {status.message}"
        return out
