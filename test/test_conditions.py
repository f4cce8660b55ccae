"""ct_controllers.tasks.conditions: continuous dwell windows judged from stamped samples."""

from __future__ import annotations

import math

import pytest

from ct_controllers.tasks.conditions import DwellCondition

DT = 0.01  # [s] sample period


def _feed(condition: DwellCondition, start: float, samples: list[bool]) -> list[bool]:
    met = []
    for k, satisfied in enumerate(samples):
        t = start + k * DT
        met.append(condition.update(now=t, stamp=t, satisfied=satisfied).met)
    return met


def test_seed_001_dwell_exercise_gives_no_transition() -> None:
    """Seed 001 §12 exercise 8: dwell 0.1 s; true for 0.08 s, false for one sample, true for
    0.03 s → the condition is never met."""
    condition = DwellCondition(dwell=0.1, freshness=0.05)
    samples = [True] * 9 + [False] + [True] * 4  # 0.00..0.08 true, 0.09 false, 0.10..0.13 true
    assert not any(_feed(condition, 0.0, samples))


def test_met_after_exactly_the_dwell_of_continuous_samples() -> None:
    """Met at the first sample that is dwell after the window's first sample, not before."""
    condition = DwellCondition(dwell=0.1, freshness=0.05)
    met = _feed(condition, 1.0, [True] * 12)
    assert met.index(True) == 10 and all(met[10:])


def test_a_stale_sample_restarts_the_window_and_staleness_is_measured() -> None:
    """A sample older than the freshness limit counts as not satisfied and restarts the window;
    stale_for reports how long no fresh sample has arrived."""
    condition = DwellCondition(dwell=0.05, freshness=0.02)
    for k in range(4):
        condition.update(now=k * DT, stamp=k * DT, satisfied=True)
    state = condition.update(now=0.1, stamp=0.03, satisfied=True)  # 70 ms old
    assert not state.fresh and not state.met and state.held_for == 0.0
    assert state.stale_for == pytest.approx(0.07)
    met = _feed(condition, 0.11, [True] * 6)
    assert met == [False] * 5 + [True]


def test_future_or_non_finite_stamps_are_not_fresh() -> None:
    """A stamp from the future or NaN is never fresh and never counts toward the window."""
    condition = DwellCondition(dwell=0.0, freshness=0.05)
    assert not condition.update(now=1.0, stamp=1.5, satisfied=True).met
    assert not condition.update(now=1.0, stamp=math.nan, satisfied=True).met
    assert condition.update(now=1.0, stamp=1.0, satisfied=True).met


def test_reset_forgets_the_window() -> None:
    """After reset(), a window that was almost complete starts over."""
    condition = DwellCondition(dwell=0.1, freshness=0.05)
    _feed(condition, 0.0, [True] * 10)
    condition.reset()
    assert not any(_feed(condition, 0.1, [True] * 10))


@pytest.mark.parametrize(("dwell", "freshness"), [(-0.1, 0.05), (0.1, 0.0), (math.nan, 0.1)])
def test_invalid_windows_are_rejected(dwell: float, freshness: float) -> None:
    """Negative or NaN dwell and non-positive freshness raise ValueError."""
    with pytest.raises(ValueError):
        DwellCondition(dwell, freshness)
