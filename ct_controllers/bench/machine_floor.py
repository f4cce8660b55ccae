"""The machine's own floor for a paced loop, in the spirit of ``cyclictest``: a bare loop paced
like the control loop (same sleep, same thread scheduling, same overrun rule) whose tick does no
work but spin for a fixed time — the stack's median compute — on the CPU.

Whatever overruns this loop counts is the machine's, not the stack's: the tick always needs the
same CPU time, so a late start or a long tick means the thread was not running (a vCPU the
hypervisor stopped, a kernel thread, a higher-priority task). While it spins it reads the clock
continuously, so the longest gap between two consecutive reads is the longest time the thread
was kept off the CPU inside a tick (a *stall*).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from ct_controllers.runtime.realtime import RealtimeSettings, apply_to_current_thread
from ct_controllers.runtime.timing import Percentiles, is_overrun, next_start, sleep_until


@dataclass(frozen=True)
class FloorRun:
    """What the bare loop measured. Times in seconds; ``stall_*``: gaps in the spinning
    thread's clock reads, the longest and how many exceeded half a period."""

    rate_hz: float
    work: float
    ticks: int
    overruns: int
    jitter: Percentiles
    compute_max: float
    stall_max: float
    stalls_over_half_period: int
    scheduling: str

    def as_dict(self) -> dict:
        return {
            "rate_hz": self.rate_hz,
            "work_us": self.work * 1e6,
            "ticks": self.ticks,
            "overruns": self.overruns,
            "jitter_p50_us": self.jitter.p50 * 1e6,
            "jitter_p99_us": self.jitter.p99 * 1e6,
            "jitter_max_us": self.jitter.max * 1e6,
            "compute_max_us": self.compute_max * 1e6,
            "stall_max_us": self.stall_max * 1e6,
            "stalls_over_half_period": self.stalls_over_half_period,
            "scheduling": self.scheduling,
        }


def paced_floor(
    rate: float,
    work: float,
    seconds: float,
    settings: RealtimeSettings | None = None,
    overrun_fraction: float = 0.5,
) -> FloorRun:
    """Run the bare loop at ``rate`` [Hz] for ``seconds`` [s] of wall time in a thread of its
    own with ``settings`` (none: normal scheduling), each tick spinning for ``work`` [s]."""
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be > 0 Hz, got {rate}")
    period = 1.0 / rate
    if not (math.isfinite(work) and work >= 0):
        raise ValueError(f"work must be finite and >= 0 s, got {work}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"seconds must be > 0, got {seconds}")
    count = max(1, round(seconds * rate))
    jitter = np.zeros(count)
    compute = np.zeros(count)
    stalls = np.zeros(count)
    overruns = 0
    scheduling = ""

    def run() -> None:
        nonlocal overruns, scheduling
        scheduling = apply_to_current_thread(settings or RealtimeSettings(priority=0)).describe()
        clock = time.perf_counter
        scheduled = clock()
        for i in range(count):
            sleep_until(scheduled)
            start = last = clock()
            end = start + work
            longest = 0.0
            while last < end:
                now = clock()
                if now - last > longest:
                    longest = now - last
                last = now
            spent = clock() - start
            late = start - scheduled
            jitter[i], compute[i], stalls[i] = late, spent, longest
            overruns += is_overrun(late, spent, period, overrun_fraction)
            scheduled = next_start(scheduled, period)

    thread = threading.Thread(target=run, name="ct-machine-floor", daemon=True)
    thread.start()
    thread.join()
    return FloorRun(
        rate_hz=rate,
        work=work,
        ticks=count,
        overruns=overruns,
        jitter=Percentiles.of(jitter),
        compute_max=float(compute.max()),
        stall_max=float(stalls.max()),
        stalls_over_half_period=int(np.count_nonzero(stalls > 0.5 * period)),
        scheduling=scheduling,
    )
