"""Real-time scheduling of the bus master's own threads — the SYNC cycle, python-can's receive
thread (the notifier), the master's heartbeat producer — as the control loop's thread has it
(``realtime.priority``): on a loaded machine a normal-priority thread waits a scheduler time
slice (milliseconds) behind every other runnable one, and three such waits in a row (SYNC sent,
answers received, heartbeat sent) exceed a 100 Hz bus's 30 ms deadlines although our own work
took a fraction of that.

Linux starts a new thread with the scheduling policy of the thread that creates it; the threads
we do not create ourselves (python-can's notifier and cyclic send tasks, started inside
``canopen``) get theirs by being started within :func:`threads_started_with`, which gives the
calling thread ``SCHED_FIFO`` for that while and restores its own afterwards. Where the process
may not (no ``CAP_SYS_NICE``, rtprio limit 0) everything runs at normal scheduling and the
returned description says so, as the control loop's realtime settings do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def _fifo(priority: int) -> str | None:
    """Make the calling thread SCHED_FIFO ``priority``; None, or why not."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:  # EPERM; AttributeError: not Linux
        return f"SCHED_FIFO {priority} not permitted ({exc}): normal scheduling"
    return None


@contextlib.contextmanager
def threads_started_with(priority: int) -> Iterator[str]:
    """Threads started inside the context run at ``SCHED_FIFO`` ``priority`` (1–99; 0: normal
    scheduling, nothing changed); yields a description of what they got. The calling thread's
    own policy is restored on exit."""
    if priority == 0:
        yield "normal scheduling"
        return
    if not 1 <= priority <= 99:
        raise ValueError(f"a SCHED_FIFO priority is 1–99 (0: normal scheduling), got {priority}")
    policy, parameters = os.sched_getscheduler(0), os.sched_getparam(0)
    problem = _fifo(priority)
    try:
        yield problem or f"SCHED_FIFO priority {priority}"
    finally:
        if problem is None:
            os.sched_setscheduler(0, policy, parameters)


def run_this_thread_with(priority: int) -> str:
    """The calling thread (and every thread it starts from now on) at ``SCHED_FIFO``
    ``priority`` (0: unchanged); a description of what it got."""
    if priority == 0:
        return "normal scheduling"
    return _fifo(priority) or f"SCHED_FIFO priority {priority}"
