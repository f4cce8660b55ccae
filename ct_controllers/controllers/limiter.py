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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ct_controllers.controllers.controller import FloatArray

DEFAULT_RATE_LIMIT = 1000.0  # [N·m/s]


@dataclass(frozen=True)
class LimiterResult:
    """effort [N·m | N] to write; boolean flags per joint for each step that changed it."""

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
        self._previous: FloatArray | None = None

    def reset(self, previous_effort: FloatArray | None = None) -> None:
        """Forget (or set) the last written effort, e.g. on activation."""
        self._previous = (
            None if previous_effort is None else np.array(previous_effort, dtype=np.float64)
        )

    def limit(
        self, requested: FloatArray, fallback: Callable[[], FloatArray], dt: float
    ) -> LimiterResult:
        """Limit ``requested`` [N·m | N]; ``fallback()`` gives the safe-hold effort, computed
        only when some requested value is not finite (a non-finite fallback becomes 0)."""
        effort = np.array(requested, dtype=np.float64)
        if effort.shape != self.effort_limit.shape:
            raise ValueError(f"expected {self.effort_limit.size} efforts, got {effort.shape}")
        non_finite = ~np.isfinite(effort)
        if non_finite.any():
            safe = np.nan_to_num(
                np.asarray(fallback(), dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0
            )
            effort[non_finite] = safe[non_finite]
        rate_limited = np.zeros(effort.shape, dtype=bool)
        if self._previous is not None:
            step = self.rate_limit * dt
            low, high = self._previous - step, self._previous + step
            rate_limited = (effort < low) | (effort > high)
            effort = np.clip(effort, low, high)
        saturated = np.abs(effort) > self.effort_limit
        effort = np.clip(effort, -self.effort_limit, self.effort_limit)
        self._previous = effort.copy()
        return LimiterResult(
            effort=effort, saturated=saturated, rate_limited=rate_limited, non_finite=non_finite
        )
