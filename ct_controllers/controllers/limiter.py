"""Command limiter: the last step before every write, whatever the controller.

Per joint, in order:
1. non-finite request → replaced by the fallback (safe-hold) effort, and reported;
2. effort-rate limit: |τ_k − τ_{k−1}| ≤ rate_limit · dt  [N·m/s | N/s] (default 1000, libfranka's
   bound on torque rate);
3. effort clamp to ±effort_limit [N·m | N] (the URDF limits).
The clamp comes last, so the written value is within the effort limit even when the rate limit
and the clamp disagree. Each tick reports which joints were changed by which step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ct_controllers.controllers.controller import FloatArray

DEFAULT_RATE_LIMIT = 1000.0  # [N·m/s]


class LimiterResult(NamedTuple):
    """effort [N·m | N] to write (a new array, the caller's); boolean flags per joint for each
    step that changed it, to be read only (a step that changed nothing flags one read-only
    array that the results share). (A NamedTuple: one is built every tick, in a third of a
    frozen dataclass's time.)"""

    effort: FloatArray
    saturated: np.ndarray  # clamped to the effort limit
    rate_limited: np.ndarray
    non_finite: np.ndarray

    @property
    def any_saturated(self) -> bool:
        return bool(self.saturated.any() or self.rate_limited.any() or self.non_finite.any())


class CommandLimiter:
    def __init__(
        self, effort_limit: FloatArray, rate_limit: FloatArray | float = DEFAULT_RATE_LIMIT
    ):
        self.effort_limit = np.array(effort_limit, dtype=np.float64)
        if not (np.all(np.isfinite(self.effort_limit)) and np.all(self.effort_limit > 0)):
            raise ValueError(f"effort limits must be finite and positive: {self.effort_limit}")
        self.rate_limit = np.broadcast_to(
            np.array(rate_limit, dtype=np.float64), self.effort_limit.shape
        ).copy()
        if not (np.all(np.isfinite(self.rate_limit)) and np.all(self.rate_limit > 0)):
            raise ValueError(f"effort-rate limits must be finite and positive: {self.rate_limit}")
        # The last written effort [N·m | N] as Python floats (the limiter's own: no one else
        # can change them), or None before the first tick / after a reset.
        self._previous: list[float] | None = None
        self._negative_limit = -self.effort_limit
        self._limit_values = self.effort_limit.ravel().tolist()
        # One value per joint in a vector: the tick can be checked value by value (below).
        self._vector = self.effort_limit.ndim == 1
        self._step_dt = math.nan
        self._step = self.rate_limit  # rate_limit · dt for the last dt [N·m | N] ...
        self._step_values: list[float] = []  # ... and as Python floats
        # "Nothing flagged", shared by the results (read-only: no one can set a flag in it).
        self._no_flags = np.zeros(self.effort_limit.shape, dtype=bool)
        self._no_flags.setflags(write=False)

    def reset(self, previous_effort: FloatArray | None = None) -> None:
        """Forget (or set) the last written effort [N·m | N], e.g. on activation (one value per
        joint, or one for all)."""
        self._previous = (
            None
            if previous_effort is None
            else np.broadcast_to(
                np.asarray(previous_effort, dtype=np.float64), self.effort_limit.shape
            )
            .ravel()
            .tolist()
        )

    def limit(
        self, requested: FloatArray, fallback: Callable[[], FloatArray], dt: float
    ) -> LimiterResult:
        """Limit ``requested`` [N·m | N]; ``fallback()`` gives the safe-hold effort, computed
        only when some requested value is not finite (a non-finite fallback becomes 0)."""
        effort = np.array(requested, dtype=np.float64)
        if effort.shape != self.effort_limit.shape:
            raise ValueError(f"expected {self.effort_limit.size} efforts, got {effort.shape}")
        if dt != self._step_dt:
            self._step_dt, self._step = dt, self.rate_limit * dt
            self._step_values = self._step.ravel().tolist()
        previous = self._previous
        if previous is not None and self._vector:
            values = effort.tolist()
            # The usual tick changes nothing: every value finite and strictly inside both its
            # effort limit and its rate window (bounds computed as below, in the same float
            # arithmetic). Checked in scalar Python: cheaper than the ten or so numpy calls on
            # a few joints. A NaN or ±inf fails the comparisons and takes the full path, and so
            # does a value on a bound (numpy's maximum/minimum may then pick the other signed
            # zero). The lengths match by construction (strict=True would add a fifth).
            for value, last, step, bound in zip(
                values, previous, self._step_values, self._limit_values, strict=False
            ):
                if abs(value) < bound and last - step < value < last + step:
                    continue
                break
            else:  # all inside: the output is the request
                self._previous = values
                no_flags = self._no_flags
                return LimiterResult(effort, no_flags, no_flags, no_flags)
        # A sum of squares is finite exactly when every value is (or overflows, and the
        # element-wise test below then finds nothing): one vector call on the healthy path.
        non_finite = self._no_flags
        if not math.isfinite(effort.dot(effort)):
            non_finite = ~np.isfinite(effort)
            if non_finite.any():
                safe = np.nan_to_num(
                    np.asarray(fallback(), dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0
                )
                effort[non_finite] = safe[non_finite]
        rate_limited = self._no_flags
        if previous is not None:
            written = np.array(previous)
            if not self._vector:
                written = written.reshape(effort.shape)
            limited = np.maximum(effort, written - self._step)
            np.minimum(limited, written + self._step, out=limited)
            rate_limited = limited != effort
            effort = limited
        clamped = np.maximum(effort, self._negative_limit)
        np.minimum(clamped, self.effort_limit, out=clamped)
        saturated = clamped != effort
        self._previous = clamped.ravel().tolist()
        return LimiterResult(
            effort=clamped, saturated=saturated, rate_limited=rate_limited, non_finite=non_finite
        )
