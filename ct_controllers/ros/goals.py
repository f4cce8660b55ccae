"""One active motion goal at a time, across every action: a new goal preempts the running one."""

from __future__ import annotations

import itertools
import threading
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from rclpy.action import ActionServer, CancelResponse, GoalResponse

T = TypeVar("T")


class GoalArbiter:
    """Hands out tokens; only the newest token is current. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._current = 0

    def start(self, take_over: Callable[[], T]) -> tuple[int, T]:
        """A new goal becomes current (the previous one is preempted) and ``take_over`` — what
        hands it the loop: its motion request, its chained controller — runs, both under one
        lock: the current goal is always the one whose motion the loop runs, even when two
        goals start at once (otherwise the earlier-started could request last and both end
        PREEMPTED). If ``take_over`` raises, nothing changes and the exception propagates."""
        with self._lock:
            result = take_over()
            self._current = next(self._counter)
            return self._current, result

    def is_current(self, token: int) -> bool:
        return token == self._current

    def finish(self, token: int) -> None:
        """The goal ended; nothing is current unless a newer goal started."""
        with self._lock:
            if self._current == token:
                self._current = 0


def guarded(execute: Callable[[Any], Any], result_type: Any) -> Callable[[Any], Any]:
    """An execute callback that never ends a goal with a default result (whose error_code 0 is
    SUCCESS): an exception aborts the goal with FAULT and the exception as the message."""

    def run(goal_handle: Any) -> Any:
        try:
            return execute(goal_handle)
        except Exception as exc:
            traceback.print_exc()
            if goal_handle.is_active:
                goal_handle.abort()
            return result_type(
                error_code=result_type.FAULT, message=f"internal error: {type(exc).__name__}: {exc}"
            )

    return run


def motion_action_server(
    node: Any, action_type: Any, name: str, execute: Callable[[Any], Any], callback_group: Any
) -> Any:
    """An action server as every motion action here has it: every goal is accepted (a rejected
    one is aborted at once with its code and reason, which a bare rejection could not carry),
    cancels are accepted, and the execute callback is :func:`guarded`."""
    return ActionServer(
        node,
        action_type,
        name,
        execute_callback=guarded(execute, action_type.Result),
        goal_callback=lambda _goal: GoalResponse.ACCEPT,
        cancel_callback=lambda _goal: CancelResponse.ACCEPT,
        callback_group=callback_group,
    )


def parameter_value(node: Any, name: str) -> float:
    """A numeric parameter of ``node`` as float (read when used: it may be set live)."""
    return float(node.get_parameter(name).value)
