"""Per-tick timing records of the control loop, preallocated (no allocation per tick)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np


def sleep_until(deadline: float) -> None:
    """Wait until ``deadline`` (``time.perf_counter`` [s]): sleep most of the way, then spin the
    last 200 µs (a sleep overshoots by ~50-100 µs)."""
    remaining = deadline - time.perf_counter()
    if remaining > 2e-4:
        time.sleep(remaining - 2e-4)
    while time.perf_counter() < deadline:
        pass


def is_overrun(late: float, compute: float, period: float, fraction: float) -> bool:
    """A paced tick's overrun: it started more than ``fraction`` of the ``period`` after its
    scheduled start, or it computed for longer than a period (all in seconds)."""
    return late > fraction * period or compute > period


def next_start(scheduled: float, period: float) -> float:
    """The scheduled start after the one at ``scheduled`` [s]; a loop that fell more than a
    whole period behind is re-based on now instead of bunching its late ticks."""
    following = scheduled + period
    now = time.perf_counter()
    return now if now > following + period else following


@dataclass(frozen=True)
class Percentiles:
    """p50, p99 and max of one figure [s], over the ``count`` most recent ticks."""

    p50: float
    p99: float
    max: float
    count: int

    @staticmethod
    def of(values: np.ndarray, reorder: bool = False) -> Percentiles:
        """The figures of ``values`` (1-D). ``reorder``: partition ``values`` in place instead
        of a copy of them (no allocation of their size; they are left reordered)."""
        if values.size == 0:
            return Percentiles(float("nan"), float("nan"), float("nan"), 0)
        p50, p99 = np.percentile(values, [50, 99], overwrite_input=reorder)
        return Percentiles(float(p50), float(p99), float(values.max()), int(values.size))

    def as_us(self) -> str:
        return (
            f"p50 {self.p50 * 1e6:.1f} µs, p99 {self.p99 * 1e6:.1f} µs, max {self.max * 1e6:.1f} µs"
        )


@dataclass(frozen=True)
class TimingSummary:
    ticks: int
    overruns: int
    compute: Percentiles  # read → write of one tick [s]
    jitter: Percentiles  # tick start − scheduled start [s]; 0 in lockstep (nothing scheduled)
    period: Percentiles  # start-to-start interval [s]


class TimingRecorder:
    """Ring buffers of the last ``capacity`` ticks.

    :meth:`summary` copies each ring into a scratch buffer allocated (and written) here and
    takes the percentiles in place there: copies of the rings' filled part, as long as ever
    more ticks filled them (the first ``capacity`` ticks, ~75 s at the loop's rate), raised the
    allocator's high-water mark, and so the node's RSS, by ~13 kB/s until then."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.capacity = capacity
        self._compute = _prefaulted(capacity)
        self._jitter = _prefaulted(capacity)
        self._period = _prefaulted(capacity)
        self._scratch = _prefaulted(capacity)
        self._scratch_lock = threading.Lock()  # summary() from any thread
        self.ticks = 0
        self.overruns = 0
        self._last_start: float | None = None

    def record(self, start: float, scheduled: float, compute: float, overrun: bool) -> None:
        i = self.ticks % self.capacity
        self._compute[i] = compute
        self._jitter[i] = start - scheduled
        self._period[i] = 0.0 if self._last_start is None else start - self._last_start
        self._last_start = start
        self.ticks += 1
        if overrun:
            self.overruns += 1

    def summary(self) -> TimingSummary:
        ticks, overruns = self.ticks, self.overruns
        n = min(ticks, self.capacity)
        periods = self._period[:n] if ticks <= self.capacity else self._period
        if ticks <= self.capacity and n > 0:
            periods = periods[1:]  # the first tick has no predecessor
        with self._scratch_lock:
            return TimingSummary(
                ticks=ticks,
                overruns=overruns,
                compute=_percentiles_via(self._scratch, self._compute[:n]),
                jitter=_percentiles_via(self._scratch, self._jitter[:n]),
                period=_percentiles_via(self._scratch, periods),
            )


def _percentiles_via(scratch: np.ndarray, values: np.ndarray) -> Percentiles:
    """:meth:`Percentiles.of` a copy of ``values`` made in ``scratch`` (as long or longer)."""
    copy = scratch[: values.size]
    np.copyto(copy, values)  # the control thread may write the ring meanwhile: take it once
    return Percentiles.of(copy, reorder=True)


class StageRing:
    """The compute times [s] of one stage, the last ``capacity`` ticks: what the control thread
    records into, resolved once (:meth:`StageRecorder.ring`), one call a tick."""

    __slots__ = ("capacity", "count", "values")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.values = _prefaulted(capacity)
        self.count = 0  # times recorded so far

    def add(self, seconds: float) -> None:
        count = self.count
        self.values[count % self.capacity] = seconds
        self.count = count + 1

    def samples(self) -> np.ndarray:
        """A copy of the recorded times [s] (the last ``capacity`` at most)."""
        return self.values[: min(self.count, self.capacity)].copy()


class StageRecorder:
    """Per-stage compute times [s] of the last ``capacity`` ticks, one ring per stage (read,
    controller, limiter, write, and whatever a chained controller reports: task, diff_ik,
    joint_controller). A stage not run on a tick records nothing for it.

    The rings of ``stages`` are allocated (and written) here, so that the control thread does
    not allocate them on the first tick a stage runs: 128 KiB each by default, whose allocation
    and first-touch page faults cost that tick ~0.2 ms (measured on the first tick of a grasp
    chain). Other stage names get their ring on first use. The loop records its own stages
    through rings it resolved once (:meth:`ring`); :meth:`record` looks the name up."""

    def __init__(self, capacity: int = 1 << 14, stages: Iterable[str] = ()) -> None:
        self.capacity = capacity
        self._rings: dict[str, StageRing] = {}
        self._scratch = _prefaulted(capacity)  # summary()'s copies (see TimingRecorder)
        self._scratch_lock = threading.Lock()
        for stage in stages:
            self.ring(stage)

    def ring(self, stage: str) -> StageRing:
        """The ring of ``stage`` (allocated on first use)."""
        ring = self._rings.get(stage)
        if ring is None:  # once per stage name, not per tick
            ring = self._rings[stage] = StageRing(self.capacity)
        return ring

    def record(self, stage: str, seconds: float) -> None:
        ring = self._rings.get(stage)
        if ring is None:
            ring = self.ring(stage)
        ring.add(seconds)

    def record_all(self, times: Mapping[str, float]) -> None:
        """:meth:`record` each stage's time [s] of ``times`` (a chain's breakdown, every tick:
        one call for them all)."""
        rings = self._rings
        for stage, seconds in times.items():
            ring = rings.get(stage)
            if ring is None:
                ring = self.ring(stage)
            count = ring.count  # StageRing.add, inlined
            ring.values[count % ring.capacity] = seconds
            ring.count = count + 1

    def samples(self, stage: str) -> np.ndarray:
        """A copy of the recorded times [s] of one stage (the last ``capacity`` at most)."""
        ring = self._rings.get(stage)
        if ring is None:
            return np.zeros(0)
        return ring.samples()

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages that have run at least once."""
        return tuple(stage for stage, ring in self._rings.items() if ring.count)

    def summary(self) -> dict[str, Percentiles]:
        with self._scratch_lock:
            return {
                stage: _percentiles_via(
                    self._scratch, ring.values[: min(ring.count, ring.capacity)]
                )
                for stage, ring in list(self._rings.items())
                if ring.count
            }


def _prefaulted(size: int) -> np.ndarray:
    """Zeros whose every page is already written: ``np.zeros`` maps large arrays lazily, and
    each first write to a page would then fault on the control thread."""
    return np.full(size, 0.0)


class GcMonitor:
    """Garbage-collector pauses [s], measured with ``gc.callbacks`` (any thread's collections:
    they stop every thread, the control thread included)."""

    def __init__(self) -> None:
        self.collections = 0
        self.total = 0.0
        self.longest = 0.0
        self._started: float | None = None

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def remove(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            pause = time.perf_counter() - self._started
            self._started = None
            self.collections += 1
            self.total += pause
            self.longest = max(self.longest, pause)
