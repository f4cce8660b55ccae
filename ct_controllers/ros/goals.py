"""What every motion action here shares: one active goal at a time across every action (a new
goal preempts the running one), goals that always end with a result (also at shutdown), a log
line per goal at its start and end, and request queues deep enough for bursts.

Request queues: rclpy's default services keep the last 10 requests (KEEP_LAST 10): a burst
beyond what the executor takes in time is dropped without an answer (measured: 200 goals from
one client, 186 never answered; 100 cancels of one goal, 88 unanswered). The goal, cancel and
result services and our own services keep ``REQUEST_QUEUE_DEPTH`` requests instead, so a burst
of that many at once is answered in full; more than that at once is dropped by DDS, as any
bounded queue must.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from action_msgs.msg import GoalInfo, GoalStatus
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.qos import HistoryPolicy, QoSProfile, qos_profile_services_default

T = TypeVar("T")
LOG = logging.getLogger("ct_controllers")
REQUEST_QUEUE_DEPTH = 1000  # requests each service keeps before DDS drops the oldest (see above)
RESULT_TIMEOUT = 900.0  # [s] a finished goal's result is kept this long (rclpy's default)
SHUTTING_DOWN = "node shutting down"
# [s] the oldest a loop snapshot may be (its measurement stamp against the loop's clock) for a
# goal's success to rest on it: fifty snapshot periods at 1 kHz, ten follow-loop periods.
SNAPSHOT_FRESHNESS = 0.5


def request_qos() -> QoSProfile:
    """The services' default QoS (reliable, volatile) with ``REQUEST_QUEUE_DEPTH``."""
    profile = QoSProfile(depth=REQUEST_QUEUE_DEPTH)
    profile.history = HistoryPolicy.KEEP_LAST
    profile.reliability = qos_profile_services_default.reliability
    profile.durability = qos_profile_services_default.durability
    return profile


class GoalArbiter:
    """Hands out tokens; only the newest token is current. Thread-safe. Also tells what the
    current goal aims the TCP at (:meth:`target`, for the ``ct_goal`` TF frame)."""

    def __init__(self, result_timeout: float = RESULT_TIMEOUT) -> None:
        """``result_timeout`` [s, the node's clock]: how long every action server keeps a
        finished goal's result (and its handle) for a client that asks for it late — rclpy's
        ``result_timeout``; the memory is held until then. Raises ValueError unless finite and
        positive."""
        if not (math.isfinite(result_timeout) and result_timeout > 0):
            raise ValueError(f"result timeout must be finite and > 0 s, got {result_timeout}")
        self.result_timeout = float(result_timeout)
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._current = 0
        self._target: Callable[[], Any] | None = None  # the current goal's, see start()
        self._executing = 0  # execute callbacks running, every action
        self.stopping = threading.Event()  # set at shutdown: every running goal ends ABORTED
        # An McapRecorder, or None: every goal, its feedback, its status and its result are
        # written to it (see guarded()).
        self.recorder: Any = None

    def start(
        self, take_over: Callable[[], T], target: Callable[[], Any] | None = None
    ) -> tuple[int, T]:
        """A new goal becomes current (the previous one is preempted) and ``take_over`` — what
        hands it the loop: its motion request, its chained controller — runs, both under one
        lock: the current goal is always the one whose motion the loop runs, even when two
        goals start at once (otherwise the earlier-started could request last and both end
        PREEMPTED). If ``take_over`` raises, nothing changes and the exception propagates.
        ``target``: what the goal aims the TCP at now, a 4x4 pose in the base frame or None
        (called from other threads: it must only read)."""
        with self._lock:
            result = take_over()
            self._current = next(self._counter)
            self._target = target
            return self._current, result

    def start_if_idle(
        self, take_over: Callable[[], T], target: Callable[[], Any] | None = None
    ) -> tuple[int, T] | None:
        """As :meth:`start`, but only when no goal is current (None then, and ``take_over`` is
        not called): for a goal that must not preempt a running one (an identification
        refuses to run while another goal moves the arm). The check and the start under one
        lock: a goal starting at the same moment is either seen or starts after this one."""
        with self._lock:
            if self._current != 0:
                return None
            result = take_over()
            self._current = next(self._counter)
            self._target = target
            return self._current, result

    def target(self) -> Any:
        """The current goal's TCP target (a copy of a 4x4 pose in the base frame), or None when
        no goal runs or it has no pose target now. Any thread."""
        provider = self._target  # one read: a goal ending meanwhile leaves this one consistent
        if provider is None:
            return None
        pose = provider()
        return None if pose is None else np.array(pose, dtype=np.float64)

    def is_current(self, token: int) -> bool:
        return token == self._current

    def finish(self, token: int) -> None:
        """The goal ended; nothing is current unless a newer goal started."""
        with self._lock:
            if self._current == token:
                self._current = 0
                self._target = None

    def entered(self) -> None:
        """An execute callback began (counted until :meth:`left`)."""
        with self._lock:
            self._executing += 1

    def left(self) -> None:
        with self._lock:
            self._executing -= 1

    @property
    def executing(self) -> int:
        """Execute callbacks running now (every action)."""
        return self._executing


def result_code_names(result_type: Any) -> dict[int, str]:
    """error_code value → its constant's name (SUCCESS, INVALID_GOAL, ...)."""
    constants = ((name, getattr(result_type, name)) for name in dir(result_type) if name.isupper())
    return {value: name for name, value in constants if isinstance(value, int)}


class GoalRecording:
    """One goal's messages on a recorder (``arbiter.recorder``), under the action's name
    ``topic`` (e.g. ``/ct/move_to_pose``): ``<topic>/goal`` (the Goal), ``<topic>/feedback``
    (each Feedback the goal publishes), ``<topic>/result`` (the Result) and ``<topic>/status``
    (action_msgs/GoalStatus: the goal's id and acceptance stamp, EXECUTING at the start and the
    terminal status at the end, which ties the goal, feedback and result together). Stamped
    with ``clock`` (the node's)."""

    def __init__(self, recorder: Any, topic: str, clock: Any, goal_handle: Any) -> None:
        self.recorder, self.topic, self.clock = recorder, topic, clock
        self.info = GoalInfo(goal_id=goal_handle.goal_id, stamp=clock.now().to_msg())
        self.write("goal", goal_handle.request)
        self.write("status", GoalStatus(goal_info=self.info, status=GoalStatus.STATUS_EXECUTING))
        publish = goal_handle.publish_feedback

        def publish_feedback(feedback: Any) -> None:
            publish(feedback)
            self.write("feedback", feedback)

        goal_handle.publish_feedback = publish_feedback  # this goal's handle only

    def write(self, name: str, message: Any) -> None:
        self.recorder.write(f"{self.topic}/{name}", message, self.clock.now().nanoseconds)

    def ended(self, goal_handle: Any, result: Any) -> None:
        self.write("result", result)
        self.write("status", GoalStatus(goal_info=self.info, status=goal_handle.status))


def guarded(
    execute: Callable[[Any], Any],
    result_type: Any,
    action: str = "goal",
    summary: Callable[[Any], str] | None = None,
    arbiter: GoalArbiter | None = None,
    logger: Any = None,
    topic: str = "",
    clock: Any = None,
    failure: Callable[[str], Any] | None = None,
    describe: Callable[[Any, Any], tuple[str, str]] | None = None,
) -> Callable[[Any], Any]:
    """An execute callback that never ends a goal with a default result (whose error_code 0 is
    SUCCESS): an exception aborts the goal with FAULT and the exception as the message. A result
    type without ``error_code`` (control_msgs' gripper actions) gives ``describe(goal_handle,
    result)``, the (outcome, message) its end line logs. Logs the
    goal at INFO when it arrives (``action``, the id's first 8 hex digits, ``summary(goal)``)
    and when it ends (code, message, duration); counts it on ``arbiter`` so that shutdown can
    wait for it; and afterwards drops the goal's request from its handle, which rclpy keeps
    until the result expires (15 min): a rejected 1 MB goal would otherwise be held that long.
    With a recorder on ``arbiter`` (and ``topic``, ``clock``), the goal is recorded
    (:class:`GoalRecording`)."""
    codes = result_code_names(result_type)
    log = logger or LOG
    # The result of a goal that could not run (shutdown, an exception): our actions' FAULT
    # with the message, or what ``failure`` makes of it (a standard action's own code).
    failed = failure or (lambda message: result_type(error_code=result_type.FAULT, message=message))

    def run(goal_handle: Any) -> Any:
        goal_id = bytes(goal_handle.goal_id.uuid).hex()[:8]
        started = time.monotonic()
        try:
            described = summary(goal_handle.request) if summary is not None else ""
        except Exception as exc:  # a summary must never cost a goal its result
            described = f"(no summary: {type(exc).__name__})"
        log.info(f"{action} goal {goal_id} received: {described}")
        recorder = None if arbiter is None else arbiter.recorder
        recording = None
        if recorder is not None and topic and clock is not None:
            try:
                recording = GoalRecording(recorder, topic, clock, goal_handle)
            except Exception as exc:  # a recording must never cost a goal its result
                log.error(f"{action} goal {goal_id} not recorded: {type(exc).__name__}: {exc}")
        if arbiter is not None:
            arbiter.entered()
        try:
            if arbiter is not None and arbiter.stopping.is_set():
                goal_handle.abort()
                result = failed(SHUTTING_DOWN)
            else:
                result = execute(goal_handle)
        except Exception as exc:
            traceback.print_exc()
            if goal_handle.is_active:
                goal_handle.abort()
            result = failed(f"internal error: {type(exc).__name__}: {exc}")
        finally:
            if arbiter is not None:
                arbiter.left()
            if hasattr(goal_handle, "_goal_request"):  # rclpy's ServerGoalHandle, Foxy to Jazzy
                goal_handle._goal_request = None
        if recording is not None:
            recording.ended(goal_handle, result)
        message: Any
        if describe is not None:
            code, message = describe(goal_handle, result)
        else:
            code = codes.get(result.error_code, str(result.error_code))
            message = getattr(result, "message", None)
            if message is None:
                message = getattr(result, "error_string", "")
        log.info(
            f"{action} goal {goal_id} ended {code} after {time.monotonic() - started:.2f} s: "
            f"{message}"
        )
        return result

    return run


def motion_action_server(
    node: Any,
    action_type: Any,
    name: str,
    execute: Callable[[Any], Any],
    callback_group: Any,
    arbiter: GoalArbiter | None = None,
    summary: Callable[[Any], str] | None = None,
    failure: Callable[[str], Any] | None = None,
    accepting: Callable[[], bool] | None = None,
    goal_callback: Callable[[Any], GoalResponse] | None = None,
    describe: Callable[[Any, Any], tuple[str, str]] | None = None,
) -> Any:
    """An action server as every motion action here has it: every goal is accepted (a rejected
    one is aborted at once with its code and reason, which a bare rejection could not carry),
    cancels are accepted, the execute callback is :func:`guarded`, the goal, cancel and
    result services keep ``REQUEST_QUEUE_DEPTH`` requests, and results are kept for
    ``arbiter.result_timeout`` (``RESULT_TIMEOUT`` without an arbiter). ``failure``: the
    result of a goal that could not run, for an action without our FAULT code (see
    :func:`guarded`); ``accepting``: whether goals are taken now — a goal arriving while it is
    false is rejected (a standard controller that is not active rejects, as in ros2_control);
    ``goal_callback``: decides instead (a standard action whose result carries no reason
    rejects bad goals itself); ``describe`` as :func:`guarded` takes it. ``name`` may be
    relative to the node's namespace (``gripper_controller/gripper_cmd``)."""
    return ActionServer(
        node,
        action_type,
        name,
        execute_callback=guarded(
            execute,
            action_type.Result,
            action=action_type.__name__,
            summary=summary,
            arbiter=arbiter,
            logger=node.get_logger(),
            topic=_action_topic(node, name),
            clock=node.get_clock(),
            failure=failure,
            describe=describe,
        ),
        goal_callback=goal_callback
        or (
            lambda _goal: (
                GoalResponse.ACCEPT if accepting is None or accepting() else GoalResponse.REJECT
            )
        ),
        cancel_callback=lambda _goal: CancelResponse.ACCEPT,
        callback_group=callback_group,
        goal_service_qos_profile=request_qos(),
        result_service_qos_profile=request_qos(),
        cancel_service_qos_profile=request_qos(),
        result_timeout=arbiter.result_timeout if arbiter is not None else RESULT_TIMEOUT,
    )


def _action_topic(node: Any, name: str) -> str:
    """The action's full name: ``name`` if absolute, else under the node's namespace."""
    if name.startswith("~"):  # private: under the node's own name
        return f"{node.get_fully_qualified_name()}{name[1:]}"
    return name if name.startswith("/") else f"{node.get_namespace().rstrip('/')}/{name}"


def parameter_value(node: Any, name: str) -> float:
    """A numeric parameter of ``node`` as float (read when used: it may be set live)."""
    return float(node.get_parameter(name).value)


def snapshot_fresh(loop: Any, snapshot: Any, freshness: float = SNAPSHOT_FRESHNESS) -> bool:
    """Whether ``snapshot`` (a :class:`~ct_controllers.runtime.loop_snapshot.LoopSnapshot`) was
    measured at most ``freshness`` [s] ago on the loop's clock (``loop.now()``) — what a goal's
    success may rest on. A frozen snapshot ages and stops being fresh; its own stamp cannot
    vouch for it.

    The loop's clock, not the node's ROS clock: they are the same clock where the node's ROS
    clock is the stamps' (sim time, which the node takes from the loop's /clock, a publishing
    period behind; the system clock on the ros2_control bridge), but the CANopen backend stamps
    with the monotonic clock (the SYNC's), which a node on the system clock is not on."""
    age = loop.now() - snapshot.stamp
    return 0.0 <= age <= freshness
