"""Publishers fed from loop snapshots, on a steady schedule in a thread of their own (never from
the control thread, never through the executor): ``/ct/joint_states`` (and the same message on
``/joint_states``, parameter ``joint_states_topic``), ``/clock`` (sim),
``/ct/controller_state``, ``/diagnostics``, and what a visualizer draws the robot from
(``/robot_description`` and ``/tf_static`` once, ``/tf`` with each joint state: see
``ros/tf_publisher.py``).

Why not executor timers: every wake-up of rclpy's executor rebuilds its wait set and dispatches in
Python, holding the GIL the control thread needs; at the 100 Hz state rate those wake-ups were
the main source of the node's overruns (one 10 s idle node run each: 200–470 overruns with a
100 Hz timer, 35–43 with the timer at 10 Hz). A plain thread that sleeps to its schedule and
publishes costs only the messages themselves.

The node's own clock: with the MuJoCo backend this node *is* the /clock source. With
``use_sim_time`` rclpy's time source would subscribe the node to its own /clock, and each message
woke the multi-threaded executor about ten times (it re-dispatches a ready subscription until a
worker has taken the message): half a core at 100 Hz, all of it holding the GIL the control
thread needs (one 10 s sim node run each: ~1,100 overruns with that subscription, 22 without
use_sim_time). So the subscription is dropped and the node's clock is set here, to the stamp
published on /clock, when it is published.

Only new measurements are published: a snapshot whose stamp has not advanced (a loop that
stopped, or a backend whose state went stale) publishes no joint state, clock or controller
state, so a subscriber sees the silence a watchdog of its own can act on, never a frozen stamp
that looks alive. /diagnostics goes on and says why (ERROR).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import rclpy
from builtin_interfaces.msg import Time
from ct_interfaces.msg import ControllerState
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.serialization import serialize_message
from rclpy.time import Time as RosTime
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from ct_controllers.ros.conversions import to_time_msg
from ct_controllers.ros.tf_publisher import TfFrames, TfPublisher
from ct_controllers.stack_parameters import JOINT_STATES_AUTO

LOG = logging.getLogger("ct_controllers")
DEFAULT_NAMESPACE = "/ct"  # the control node's (ros/control_node.py)
SUMMARY_PERIOD = 1.0  # [s] how often the timing percentiles are recomputed


class StateMessages:
    """The state messages of a stack, built from loop snapshots (no node needed: the node's
    publishers and the lockstep recorders use the same). ``active``: the active controller's
    name, asked when a message is built. ``node``: the node's fully qualified name, which names
    its diagnostic status on the global /diagnostics (several arms: one status each)."""

    def __init__(
        self,
        stack: Any,
        active: Callable[[], str],
        gc_monitor: Any = None,
        node: str = "/ct/controller_manager",
        extra_values: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self.stack = stack
        # More key/values for the diagnostic status, asked when it is built (the payload).
        self.extra_values = extra_values
        self.diagnostic_name = f"{node.lstrip('/')}: control loop"
        self.config = stack.config
        self.active = active
        self.gc_monitor = gc_monitor
        self._summary: Any = None
        self._summary_time = 0.0
        self._mimic_rows: tuple[tuple[str, ...], list[tuple[str, int, float, float]]] | None = None

    def joint_state(self, snapshot: Any, stamp: Time) -> JointState:
        """Every joint, as joint_state_broadcaster publishes it: the measured ones, then each
        ``<mimic>`` follower of a measured master (θ = multiplier · θ_master + offset, its
        velocity likewise; effort NaN: no interface of ours measures it, JSB's value for a
        missing interface), so that robot_state_publisher and MoveIt see every joint."""
        names = list(snapshot.joint_names)
        position = snapshot.position.tolist()
        velocity = snapshot.velocity.tolist()
        effort = snapshot.measured_effort.tolist()
        for follower, master, multiplier, offset in self._followers(snapshot.joint_names):
            names.append(follower)
            position.append(multiplier * position[master] + offset)
            velocity.append(multiplier * velocity[master])
            effort.append(math.nan)
        message = JointState()
        message.header.stamp = stamp
        message.header.frame_id = self.config.base_frame
        message.name = names
        message.position = position
        message.velocity = velocity
        message.effort = effort
        return message

    def _followers(self, joint_names: tuple[str, ...]) -> list[tuple[str, int, float, float]]:
        """(follower, index of its master in ``joint_names``, multiplier, offset), computed
        once per joint list."""
        if self._mimic_rows is None or self._mimic_rows[0] != joint_names:
            index = {name: i for i, name in enumerate(joint_names)}
            rows = [
                (f.name, index[f.master], f.multiplier, f.offset)
                for f in self.stack.model.mimic.values()
                if f.master in index and f.name not in index
            ]
            self._mimic_rows = (tuple(joint_names), rows)
        return self._mimic_rows[1]

    def controller_state(self, snapshot: Any, stamp: Time) -> ControllerState:
        timing = self.timing()
        return ControllerState(
            stamp=stamp,
            active_controllers=[self.active()],
            joint_names=list(snapshot.joint_names),
            desired=snapshot.reference_position.tolist(),
            actual=snapshot.position.tolist(),
            error=(snapshot.reference_position - snapshot.position).tolist(),
            commanded_effort=snapshot.commanded_effort.tolist(),
            saturated=[bool(x) for x in snapshot.saturated],
            ticks=self.stack.loop.timing.ticks,
            overruns=self.stack.loop.timing.overruns,
            compute_time_p50=_finite(timing.compute.p50),
            compute_time_p99=_finite(timing.compute.p99),
            period_jitter_p99=_finite(timing.jitter.p99),
        )

    def timing(self) -> Any:
        """The loop's timing percentiles, recomputed at most once per SUMMARY_PERIOD: over 65k
        ticks they cost ~3 ms, which at the 100 Hz state rate would hold this executor thread
        (and the GIL the control thread needs) for a third of every period."""
        now = time.monotonic()
        if self._summary is None or now - self._summary_time >= SUMMARY_PERIOD:
            self._summary = self.stack.loop.timing_summary()
            self._summary_time = now
        return self._summary

    def diagnostics(self, stamp: Time) -> DiagnosticArray:
        snapshot = self.stack.loop.snapshot()
        timing = self.timing()
        fault = None if snapshot is None else snapshot.fault
        loop = self.stack.loop
        if not loop.running:
            fault = loop.stopped_reason or "control loop not running"
        elif loop.fault is not None:
            fault = loop.fault  # latched since the last snapshot
        status = DiagnosticStatus(
            level=DiagnosticStatus.ERROR if fault else DiagnosticStatus.OK,
            name=self.diagnostic_name,
            message=fault or "running",
            hardware_id=self.stack.description.hardware.plugin,
            values=[
                KeyValue(key="active_controller", value=self.active()),
                KeyValue(key="ticks", value=str(self.stack.loop.timing.ticks)),
                KeyValue(key="overruns", value=str(self.stack.loop.timing.overruns)),
                KeyValue(key="compute_p50_us", value=f"{timing.compute.p50 * 1e6:.1f}"),
                KeyValue(key="compute_p99_us", value=f"{timing.compute.p99 * 1e6:.1f}"),
                KeyValue(key="compute_max_us", value=f"{timing.compute.max * 1e6:.1f}"),
                KeyValue(key="jitter_p99_us", value=f"{timing.jitter.p99 * 1e6:.1f}"),
                KeyValue(key="period_p50_us", value=f"{timing.period.p50 * 1e6:.1f}"),
                KeyValue(key="period_max_us", value=f"{timing.period.max * 1e6:.1f}"),
                *self._stage_values(),
                *self._gc_values(),
                *(
                    KeyValue(key=key, value=str(value))
                    for key, value in self.stack.loop.diagnostics().items()
                ),
                *(
                    KeyValue(key=key, value=value)
                    for key, value in (self.extra_values() if self.extra_values else {}).items()
                ),
            ],
        )
        message = DiagnosticArray(status=[status])
        message.header.stamp = stamp
        return message

    def _stage_values(self) -> list[KeyValue]:
        values = []
        for stage, figures in self.stack.loop.stages.summary().items():
            for name, value in (("p50", figures.p50), ("p99", figures.p99), ("max", figures.max)):
                values.append(KeyValue(key=f"stage_{stage}_{name}_us", value=f"{value * 1e6:.1f}"))
        return values

    def _gc_values(self) -> list[KeyValue]:
        monitor = self.gc_monitor
        if monitor is None:
            return []
        return [
            KeyValue(key="gc_collections", value=str(monitor.collections)),
            KeyValue(key="gc_pause_max_us", value=f"{monitor.longest * 1e6:.1f}"),
        ]


class StatePublishers:
    def __init__(
        self,
        node: Any,
        stack: Any,
        manager: Any,
        state_rate: float = 100.0,  # [Hz] joint states, clock, controller state
        diagnostics_rate: float = 1.0,  # [Hz]
        goal_target: Callable[[], Any] | None = None,
        recorder: Any = None,
        extra_values: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        """Creates the publishers; :meth:`start` starts publishing, :meth:`stop` ends it.
        ``goal_target``: the running goal's TCP target or None (``GoalArbiter.target``), drawn
        as the ``ct_goal`` TF frame. ``recorder``: a
        :class:`~ct_controllers.ros.recorder.McapRecorder` that gets every message published
        here (but /clock), stamped with the node's clock. ``extra_values``: more key/values
        for the diagnostic status (asked at each)."""
        self.node, self.stack, self.manager = node, stack, manager
        self.config = stack.config
        self.recorder = recorder
        self.messages = StateMessages(
            stack,
            lambda: str(manager.active),
            getattr(node, "gc_monitor", None),
            node=node.get_fully_qualified_name(),
            extra_values=extra_values,
        )
        self.joint_states = node.create_publisher(JointState, "joint_states", 10)
        # The same message on joint_state_broadcaster's topic for robot_state_publisher, MoveIt
        # and Servo (parameter joint_states_topic; None: no second topic).
        extra = joint_states_topic(self.config.joint_states_topic, node.get_namespace())
        resolved = None if extra is None else node.resolve_topic_name(extra)
        self.broadcast_joint_states = (
            node.create_publisher(JointState, extra, 10)
            if resolved is not None and resolved != self.joint_states.topic_name
            else None
        )
        # A simulated backend is the clock source: /clock is published from its stamps.
        self.clock = (
            node.create_publisher(Clock, "/clock", 10) if stack.hardware.publishes_clock else None
        )
        self.controller_state = node.create_publisher(ControllerState, "controller_state", 10)
        self.diagnostics = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.tf = TfPublisher(node, TfFrames(stack, goal_target))
        self.state_period = 1.0 / state_rate  # [s]
        self.diagnostics_period = 1.0 / diagnostics_rate  # [s]
        self.drives_node_clock = self.clock is not None and _drop_clock_subscription(node)
        self._last_stamp: float | None = None  # [s] of the last joint state published
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Publish from a thread of its own until :meth:`stop` (steady clock: with
        use_sim_time the node's own clock follows the /clock published here)."""
        if self._thread is not None:
            raise RuntimeError("state publishers already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ct-state-publishers", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        try:
            self.publish_latched()
        except Exception as exc:
            if rclpy.ok():
                LOG.error("state publishers stopped: %s: %s", type(exc).__name__, exc)
            return
        next_state = next_diagnostics = time.monotonic()
        while not self._stop.wait(max(0.0, min(next_state, next_diagnostics) - time.monotonic())):
            now = time.monotonic()
            try:
                if now >= next_state:
                    self.publish_state()
                    next_state = max(next_state + self.state_period, now)
                if now >= next_diagnostics:
                    self.publish_diagnostics()
                    next_diagnostics = max(next_diagnostics + self.diagnostics_period, now)
            except Exception as exc:  # e.g. the context shut down under us: stop, say why
                if rclpy.ok():
                    LOG.error("state publishers stopped: %s: %s", type(exc).__name__, exc)
                return

    def _send(self, publisher: Any, message: Any) -> None:
        """Publish ``message`` (a message, or its CDR bytes); when recording, serialize it once
        and hand the same bytes to the publisher and the recorder (stamped with the node's
        clock)."""
        if self.recorder is None:
            publisher.publish(message)
            return
        data = message if isinstance(message, bytes) else serialize_message(message)
        publisher.publish(data)
        now = self.node.get_clock().now().nanoseconds
        self.recorder.write(publisher.topic_name, data, now, publisher.msg_type)

    def publish_latched(self) -> None:
        """/robot_description and /tf_static, once (transient local: late subscribers get
        them), stamped with the latest measurement time (0 before any)."""
        snapshot = self.stack.loop.snapshot()
        stamp = to_time_msg(0.0 if snapshot is None else snapshot.stamp)
        description, static = self.tf.frames.latched(stamp)
        self._send(self.tf.description, description)
        self._send(self.tf.static, static)

    def publish_state(self) -> None:
        snapshot = self.stack.loop.snapshot()
        if snapshot is None or not self.stack.loop.running:
            return
        if self._last_stamp is not None and snapshot.stamp <= self._last_stamp:
            return  # nothing newly measured: silence, not a frozen stamp
        self._last_stamp = snapshot.stamp
        stamp = to_time_msg(snapshot.stamp)
        if self.clock is not None:
            self.clock.publish(Clock(clock=stamp))
            node_clock = self.node.get_clock()
            if self.drives_node_clock and node_clock.ros_time_is_active:
                node_clock.set_ros_time_override(RosTime.from_msg(stamp))
        joint_state = self.messages.joint_state(snapshot, stamp)  # built once, sent to both
        if self.broadcast_joint_states is None:
            self._send(self.joint_states, joint_state)
        else:
            data = serialize_message(joint_state)
            self._send(self.joint_states, data)
            self._send(self.broadcast_joint_states, data)
        tf = self.tf.frames.serialized(snapshot.position, snapshot.stamp)  # CDR bytes
        if tf is not None:
            self._send(self.tf.dynamic, tf)
        self._send(self.controller_state, self.messages.controller_state(snapshot, stamp))

    def publish_diagnostics(self) -> None:
        message = self.messages.diagnostics(self.node.get_clock().now().to_msg())
        self._send(self.diagnostics, message)


def joint_states_topic(setting: str, namespace: str) -> str | None:
    """The second joint states topic for parameter ``joint_states_topic`` = ``setting`` in a
    node in ``namespace``: ``auto`` is ``/joint_states`` in the default namespace (where one arm
    runs), none elsewhere (several arms: each one's ``<namespace>/joint_states`` is where
    joint_state_broadcaster under a controller manager there publishes); ``""`` none."""
    if setting == JOINT_STATES_AUTO:
        return "/joint_states" if namespace == DEFAULT_NAMESPACE else None
    return setting or None


def _finite(value: float) -> float:
    return value if value == value else 0.0  # NaN (no samples yet) → 0


def _drop_clock_subscription(node: Any) -> bool:
    """Remove the node's subscription to /clock that rclpy's time source made for
    ``use_sim_time`` (see the module docstring); True if the node's clock is then set by
    :meth:`StatePublishers.publish_state`. The time source keeps it in ``_clock_sub`` (rclpy
    Foxy to Jazzy); should that change, the subscription stays and nothing else does. Setting
    ``use_sim_time`` again at run time makes the time source subscribe again."""
    source = getattr(node, "_time_source", None)
    subscription = getattr(source, "_clock_sub", None)
    if source is None or subscription is None:
        return False
    node.destroy_subscription(subscription)
    source._clock_sub = None
    return True
