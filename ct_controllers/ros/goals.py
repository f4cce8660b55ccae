"""One active motion goal at a time, across every action: a new goal preempts the running one."""

from __future__ import annotations

import itertools
import threading


class GoalArbiter:
    """Hands out tokens; only the newest token is current. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._current = 0

    def start(self) -> int:
        """A new goal becomes current; the previous one is preempted."""
        with self._lock:
            self._current = next(self._counter)
            return self._current

    def is_current(self, token: int) -> bool:
        return token == self._current

    def finish(self, token: int) -> None:
        """The goal ended; nothing is current unless a newer goal started."""
        with self._lock:
            if self._current == token:
                self._current = 0
