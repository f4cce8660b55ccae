"""The machine's own floor for a paced loop, in the spirit of ``cyclictest``: a bare loop paced
like the control loop (same sleep, same thread scheduling, same overrun rule) whose tick does a
fixed amount of CPU work — the same kind of small numpy operations the stack is made of, as many
as take the stack's median compute — and nothing else.

Whatever overruns this loop counts is the machine's, not the stack's: its tick always does the
same work, so a late start or a long tick means the thread was not running (a vCPU the
hypervisor stopped, a kernel thread, a higher-priority task) or ran slower (a vCPU sharing its
core, caches evicted by a neighbour, a lower clock). A floor that only spun for a fixed *time*
would see the first kind only; the stack sees both, and on this VM the second is common (ticks
of the same work taking 2–10× their median in bursts). Between chunks of its work it reads the
clock, so the longest gap between two reads, less one chunk, bounds the longest time the thread
was kept off the CPU inside a tick (a *stall*).

The number of chunks per tick is calibrated once, before the run, in the loop's own thread and
pacing: a first guess from chunks run back to back, then scaled twice so that the median of a
short paced run matches the requested work.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from ct_controllers.runtime.realtime import RealtimeSettings, apply_to_current_thread
from ct_controllers.runtime.timing import Percentiles, is_overrun, next_start, sleep_until

CALIBRATION_CHUNKS = 500  # chunks run back to back for the first guess
CALIBRATION_SECONDS = 0.2  # [s] of paced ticks (at least 20) that scale it to the median, ...
CALIBRATION_PASSES = 2  # ... twice

_MATRIX = np.linspace(-1.0, 1.0, 42).reshape(6, 7)  # a Jacobian-sized operand
_VECTOR = np.linspace(0.5, 1.5, 7)


def work_chunk() -> float:
    """One chunk of the floor's work (a few µs): a Gram matrix with a damped diagonal, two
    matrix-vector products, a norm and a clip — the shape of a differential-IK step."""
    gram = _MATRIX.dot(_MATRIX.T)
    gram.flat[::7] += 1e-3
    step = _MATRIX.T.dot(_MATRIX.dot(_VECTOR))
    bound = math.sqrt(step.dot(step))
    np.maximum(step, -bound, out=step)
    np.minimum(step, bound, out=step)
    return float(gram[0, 0]) + float(step[0])


@dataclass(frozen=True)
class FloorRun:
    """What the bare loop measured. Times in seconds; ``chunks``: work chunks per tick (fixed
    for the run); ``compute``: the ticks' durations; ``stall_*``: the longest gap between two
    clock reads beyond one median chunk, and how many ticks had one over half a period."""

    rate_hz: float
    work: float
    chunks: int
    ticks: int
    overruns: int
    jitter: Percentiles
    compute: Percentiles
    stall_max: float
    stalls_over_half_period: int
    scheduling: str

    def as_dict(self) -> dict:
        return {
            "rate_hz": self.rate_hz,
            "work_us": self.work * 1e6,
            "chunks": self.chunks,
            "ticks": self.ticks,
            "overruns": self.overruns,
            "jitter_p50_us": self.jitter.p50 * 1e6,
            "jitter_p99_us": self.jitter.p99 * 1e6,
            "jitter_max_us": self.jitter.max * 1e6,
            "compute_p50_us": self.compute.p50 * 1e6,
            "compute_p99_us": self.compute.p99 * 1e6,
            "compute_max_us": self.compute.max * 1e6,
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
    own with ``settings`` (none: normal scheduling), each tick doing the fixed work that takes
    ``work`` [s] at the median."""
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
    gaps = np.zeros(count)
    overruns = chunks = 0
    chunk_time = 0.0
    scheduling = ""
    clock = time.perf_counter

    def tick(scheduled: float, chunks: int) -> tuple[float, float, float]:
        """(lateness, duration, longest gap between clock reads) of one tick."""
        sleep_until(scheduled)
        start = last = clock()
        longest = 0.0
        for _ in range(chunks):
            work_chunk()
            now = clock()
            if now - last > longest:
                longest = now - last
            last = now
        return start - scheduled, last - start, longest

    def calibrate() -> int:
        nonlocal chunk_time
        if work == 0:
            return 0
        times = np.zeros(CALIBRATION_CHUNKS)
        for i in range(CALIBRATION_CHUNKS):
            start = clock()
            work_chunk()
            times[i] = clock() - start
        chunk_time = float(np.median(times))
        chunks = max(1, round(work / chunk_time))
        durations = np.zeros(max(20, round(CALIBRATION_SECONDS * rate)))
        for _ in range(CALIBRATION_PASSES):
            scheduled = clock()
            for i in range(durations.size):
                durations[i] = tick(scheduled, chunks)[1]
                scheduled = next_start(scheduled, period)
            chunk_time = float(np.median(durations)) / chunks
            chunks = max(1, round(work / chunk_time))
        return chunks

    def run() -> None:
        nonlocal overruns, scheduling, chunks
        scheduling = apply_to_current_thread(settings or RealtimeSettings(priority=0)).describe()
        chunks = calibrate()
        scheduled = clock()
        for i in range(count):
            late, spent, longest = tick(scheduled, chunks)
            jitter[i], compute[i], gaps[i] = late, spent, longest
            overruns += is_overrun(late, spent, period, overrun_fraction)
            scheduled = next_start(scheduled, period)

    thread = threading.Thread(target=run, name="ct-machine-floor", daemon=True)
    thread.start()
    thread.join()
    stalls = np.maximum(gaps - chunk_time, 0.0)
    return FloorRun(
        rate_hz=rate,
        work=work,
        chunks=chunks,
        ticks=count,
        overruns=overruns,
        jitter=Percentiles.of(jitter),
        compute=Percentiles.of(compute),
        stall_max=float(stalls.max()),
        stalls_over_half_period=int(np.count_nonzero(stalls > 0.5 * period)),
        scheduling=scheduling,
    )
