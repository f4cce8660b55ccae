"""Observed conditions held over a continuous dwell window, with freshness.

A condition is judged from observations (each with its measurement stamp), never from "the
command was sent". It is *met* once it has been satisfied by every sample for ``dwell`` seconds
without interruption: one failing sample, or one sample older than ``freshness`` at the time it
is judged, restarts the window. Times are on the stack's clock [s].
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ConditionState:
    """met: held for the whole dwell; held_for [s] of the current window; fresh: the last sample
    was fresh; stale_for [s] since the last fresh sample (0 when fresh)."""

    met: bool
    held_for: float
    fresh: bool
    stale_for: float


class DwellCondition:
    def __init__(self, dwell: float, freshness: float) -> None:
        """dwell [s] ≥ 0: how long the condition must hold; freshness [s] > 0: the oldest a sample
        may be when judged."""
        if not (math.isfinite(dwell) and dwell >= 0):
            raise ValueError(f"dwell must be finite and >= 0 s, got {dwell}")
        if not (math.isfinite(freshness) and freshness > 0):
            raise ValueError(f"freshness must be finite and > 0 s, got {freshness}")
        self.dwell = dwell
        self.freshness = freshness
        self.reset()

    def reset(self) -> None:
        """Forget the window (no leftover timers)."""
        self._since: float | None = None  # stamp of the first sample of the current window
        self._last_fresh: float | None = None
        self._last_stamp = -math.inf
        self._fresh = False  # the last sample judged was fresh

    def met(self, now: float, stamp: float, satisfied: bool) -> bool:
        """Judge one sample measured at ``stamp`` at time ``now``: whether the condition has now
        held for the whole dwell (what :meth:`update` reports as ``met``, without building the
        report: the task machine asks this every tick)."""
        fresh = math.isfinite(stamp) and 0.0 <= now - stamp <= self.freshness
        self._fresh = fresh
        if fresh and stamp > self._last_stamp:
            self._last_stamp = stamp
            self._last_fresh = now
            if satisfied:
                if self._since is None:
                    self._since = stamp
            else:
                self._since = None
        elif not fresh:
            self._since = None  # a stale sample counts as "not satisfied"
        since = self._since
        return since is not None and self._last_stamp - since >= self.dwell - 1e-12

    def update(self, now: float, stamp: float, satisfied: bool) -> ConditionState:
        """Judge one sample measured at ``stamp`` at time ``now``, with the whole report."""
        met = self.met(now, stamp, satisfied)
        fresh = self._fresh
        held_for = 0.0 if self._since is None else self._last_stamp - self._since
        stale_for = 0.0 if fresh else (now - self._last_fresh if self._last_fresh else math.inf)
        return ConditionState(met=met, held_for=held_for, fresh=fresh, stale_for=stale_for)
