"""Per-tick timing records of the control loop, preallocated (no allocation per tick)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Percentiles:
    """p50, p99 and max of one figure [s], over the ``count`` most recent ticks."""

    p50: float
    p99: float
    max: float
    count: int

    @staticmethod
    def of(values: np.ndarray) -> Percentiles:
        if values.size == 0:
            return Percentiles(float("nan"), float("nan"), float("nan"), 0)
        p50, p99 = np.percentile(values, [50, 99])
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
    """Ring buffers of the last ``capacity`` ticks."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.capacity = capacity
        self._compute = np.zeros(capacity)
        self._jitter = np.zeros(capacity)
        self._period = np.zeros(capacity)
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
        n = min(self.ticks, self.capacity)
        periods = self._period[:n] if self.ticks <= self.capacity else self._period
        if self.ticks <= self.capacity and n > 0:
            periods = periods[1:]  # the first tick has no predecessor
        return TimingSummary(
            ticks=self.ticks,
            overruns=self.overruns,
            compute=Percentiles.of(self._compute[:n].copy()),
            jitter=Percentiles.of(self._jitter[:n].copy()),
            period=Percentiles.of(periods.copy()),
        )
