"""Real-time scheduling of the control thread, as ros2_control's controller manager does it.

On a non-real-time kernel a normal-priority thread can be preempted by any other runnable thread
for a scheduler time slice (milliseconds): the multi-ms stalls that show up as overruns. A
``SCHED_FIFO`` thread preempts every normal one as soon as it becomes runnable and keeps the CPU
until it sleeps; the kernel's RT throttling (``/proc/sys/kernel/sched_rt_runtime_us``, 95 % by
default) still leaves the rest of the machine some time should it never sleep. Optionally the
thread is pinned to one CPU, and the process's memory locked (no page fault on the hot
path, including pages the kernel would otherwise reclaim).

Each setting that cannot be applied (no ``CAP_SYS_NICE``/rtprio limit, an unknown CPU, an
``RLIMIT_MEMLOCK`` too small) is reported and the loop runs on without it, as ros2_control warns
"Could not enable FIFO RT scheduling policy" and goes on.

What this does not fix: the GIL. A thread of the same process running Python holds it for up to
``sys.getswitchinterval()`` (5 ms by default) before a waiting control thread gets it; processes
that run other Python threads beside the loop (the ROS node's executor) shorten that interval.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

from ct_controllers.config import RealtimeSettings

__all__ = ["GIL_SWITCH_INTERVAL", "RealtimeReport", "RealtimeSettings", "apply_to_current_thread"]

MCL_CURRENT, MCL_FUTURE = 1, 2  # <sys/mman.h>
# [s] sys.setswitchinterval for processes where other Python threads run beside the control
# thread (the node's executor, a goal building and preparing its chain): about the longest a
# running thread keeps the GIL once the control thread waits for it. At 0.5 ms a control thread
# waking into another thread's Python work started up to half a period late: a paced 1 kHz loop
# beside a thread building a goal's chain (model copy + QP IK) every 50 ms overran 323–348 times
# in 20 s at 0.5 ms, 20–40 at 0.1 ms (0–35 with no such thread; `ct-bench gil`).
GIL_SWITCH_INTERVAL = 0.0001


@dataclass(frozen=True)
class RealtimeReport:
    """What the control thread got: policy ("SCHED_FIFO" or "SCHED_OTHER"), priority, the CPUs
    it may run on, whether memory is locked, and one sentence per setting that failed."""

    policy: str
    priority: int
    cpus: tuple[int, ...]
    memory_locked: bool
    problems: tuple[str, ...]

    def describe(self) -> str:
        text = f"{self.policy} priority {self.priority}, CPUs {list(self.cpus)}"
        text += ", memory locked" if self.memory_locked else ""
        return text + "".join(f"; {problem}" for problem in self.problems)


def apply_to_current_thread(settings: RealtimeSettings) -> RealtimeReport:
    """Apply ``settings`` to the calling thread (Linux: pid 0 = this thread) and report."""
    problems: list[str] = []
    if settings.cpu >= 0:
        try:
            os.sched_setaffinity(0, (settings.cpu,))
        except (OSError, ValueError) as exc:
            problems.append(f"could not pin to CPU {settings.cpu}: {exc}")
    if settings.priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(settings.priority))
        except OSError as exc:
            problems.append(
                f"could not enable SCHED_FIFO priority {settings.priority} ({exc}); needs "
                "CAP_SYS_NICE or an rtprio limit (/etc/security/limits.conf)"
            )
    memory_locked = False
    if settings.lock_memory:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        if libc.mlockall(MCL_CURRENT | MCL_FUTURE) == 0:
            memory_locked = True
        else:
            error = ctypes.get_errno()
            problems.append(f"could not lock memory: {os.strerror(error)} (RLIMIT_MEMLOCK)")
    fifo = os.sched_getscheduler(0) == os.SCHED_FIFO
    return RealtimeReport(
        policy="SCHED_FIFO" if fifo else "SCHED_OTHER",
        priority=os.sched_getparam(0).sched_priority,
        cpus=tuple(sorted(os.sched_getaffinity(0))),
        memory_locked=memory_locked,
        problems=tuple(problems),
    )
