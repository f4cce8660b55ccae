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
from collections.abc import Sequence
from dataclasses import dataclass, field

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
    """What the bare loop measured, per tick: lateness (``jitter_samples``), duration
    (``compute_samples``) and the longest gap between two clock reads beyond one chunk
    (``stall_samples``), all in seconds; ``chunks``: the work per tick, fixed for the run."""

    rate_hz: float
    work: float
    chunks: int
    overruns: int
    scheduling: str
    jitter_samples: np.ndarray = field(repr=False)
    compute_samples: np.ndarray = field(repr=False)
    stall_samples: np.ndarray = field(repr=False)

    @property
    def ticks(self) -> int:
        return int(self.compute_samples.size)

    @property
    def jitter(self) -> Percentiles:
        return Percentiles.of(self.jitter_samples)

    @property
    def compute(self) -> Percentiles:
        return Percentiles.of(self.compute_samples)

    @property
    def stall_max(self) -> float:
        return float(self.stall_samples.max())

    @property
    def stalls_over_half_period(self) -> int:
        return int(np.count_nonzero(self.stall_samples > 0.5 / self.rate_hz))

    @staticmethod
    def merge(runs: Sequence[FloorRun]) -> FloorRun:
        """One run of several segments of the same rate and work (e.g. one after each trial)."""
        if not runs:
            raise ValueError("nothing to merge")
        first = runs[0]
        return FloorRun(
            rate_hz=first.rate_hz,
            work=first.work,
            chunks=first.chunks,
            overruns=sum(run.overruns for run in runs),
            scheduling=first.scheduling,
            jitter_samples=np.concatenate([run.jitter_samples for run in runs]),
            compute_samples=np.concatenate([run.compute_samples for run in runs]),
            stall_samples=np.concatenate([run.stall_samples for run in runs]),
        )

    def as_dict(self) -> dict:
        jitter, compute = self.jitter, self.compute
        return {
            "rate_hz": self.rate_hz,
            "work_us": self.work * 1e6,
            "chunks": self.chunks,
            "ticks": self.ticks,
            "overruns": self.overruns,
            "jitter_p50_us": jitter.p50 * 1e6,
            "jitter_p99_us": jitter.p99 * 1e6,
            "jitter_max_us": jitter.max * 1e6,
            "compute_p50_us": compute.p50 * 1e6,
            "compute_p99_us": compute.p99 * 1e6,
            "compute_max_us": compute.max * 1e6,
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
    chunks: int | None = None,
) -> FloorRun:
    """Run the bare loop at ``rate`` [Hz] for ``seconds`` [s] of wall time in a thread of its
    own with ``settings`` (none: normal scheduling), each tick doing the fixed work that takes
    ``work`` [s] at the median — or, given ``chunks`` (e.g. an earlier run's), exactly that
    many chunks, without calibrating."""
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be > 0 Hz, got {rate}")
    period = 1.0 / rate
    if not (math.isfinite(work) and work >= 0):
        raise ValueError(f"work must be finite and >= 0 s, got {work}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"seconds must be > 0, got {seconds}")
    if chunks is not None and chunks < 0:
        raise ValueError(f"chunks must be >= 0, got {chunks}")
    count = max(1, round(seconds * rate))
    jitter = np.zeros(count)
    compute = np.zeros(count)
    gaps = np.zeros(count)
    overruns = 0
    per_tick = 0
    chunk_time = 0.0
    scheduling = ""
    clock = time.perf_counter

    def tick(scheduled: float, work_chunks: int) -> tuple[float, float, float]:
        """(lateness, duration, longest gap between clock reads) of one tick."""
        sleep_until(scheduled)
        start = last = clock()
        longest = 0.0
        for _ in range(work_chunks):
            work_chunk()
            now = clock()
            if now - last > longest:
                longest = now - last
            last = now
        return start - scheduled, last - start, longest

    def calibrate() -> int:
        """The chunks per tick, and the time of one chunk (for the stalls)."""
        nonlocal chunk_time
        times = np.zeros(CALIBRATION_CHUNKS)
        for i in range(CALIBRATION_CHUNKS):
            start = clock()
            work_chunk()
            times[i] = clock() - start
        chunk_time = float(np.median(times))
        if chunks is not None:
            return chunks
        if work == 0:
            return 0
        guess = max(1, round(work / chunk_time))
        durations = np.zeros(max(20, round(CALIBRATION_SECONDS * rate)))
        for _ in range(CALIBRATION_PASSES):
            scheduled = clock()
            for i in range(durations.size):
                durations[i] = tick(scheduled, guess)[1]
                scheduled = next_start(scheduled, period)
            chunk_time = float(np.median(durations)) / guess
            guess = max(1, round(work / chunk_time))
        return guess

    def run() -> None:
        nonlocal overruns, scheduling, per_tick
        scheduling = apply_to_current_thread(settings or RealtimeSettings(priority=0)).describe()
        per_tick = calibrate()
        scheduled = clock()
        for i in range(count):
            late, spent, longest = tick(scheduled, per_tick)
            jitter[i], compute[i], gaps[i] = late, spent, longest
            overruns += is_overrun(late, spent, period, overrun_fraction)
            scheduled = next_start(scheduled, period)

    thread = threading.Thread(target=run, name="ct-machine-floor", daemon=True)
    thread.start()
    thread.join()
    return FloorRun(
        rate_hz=rate,
        work=work,
        chunks=per_tick,
        overruns=overruns,
        scheduling=scheduling,
        jitter_samples=jitter,
        compute_samples=compute,
        stall_samples=np.maximum(gaps - chunk_time, 0.0),
    )
