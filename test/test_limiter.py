"""ct_controllers.controllers.limiter: property tests of the last step before every write.

The specification checked here, per joint and tick, with target = the request, or the fallback
(non-finite fallback → 0) where the request is not finite, and step = rate_limit · dt:
- first tick (or after reset()): output = clamp(target, ±limit);
- later ticks: output = the point of [prev − step, prev + step] ∩ [−limit, limit] nearest the
  target, so |output| ≤ limit and |output − prev| ≤ step;
- flags: non_finite where the request was not finite, rate_limited where the target was outside
  the rate window, saturated where the (rate-limited) target was beyond the effort limit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ct_controllers.controllers.limiter import DEFAULT_RATE_LIMIT, CommandLimiter

SPECIAL = [math.nan, math.inf, -math.inf, 1e308, -1e308, 1e12, -1e12, 0.0, -0.0]

requests = st.one_of(
    st.floats(-300.0, 300.0),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(SPECIAL),
)
fallback_values = st.one_of(
    st.floats(-300.0, 300.0), st.sampled_from([math.nan, math.inf, -math.inf])
)


@st.composite
def scenarios(draw):
    """Limits, dt and a sequence of (request, fallback) vectors for n joints."""
    n = draw(st.integers(1, 9))
    limit = np.array(draw(st.lists(st.floats(0.5, 500.0), min_size=n, max_size=n)))
    if draw(st.booleans()):
        rate: float | np.ndarray = draw(st.floats(1.0, 1e5))
    else:
        rate = np.array(draw(st.lists(st.floats(1.0, 1e5), min_size=n, max_size=n)))
    dt = draw(st.floats(1e-4, 2e-2))
    ticks = draw(
        st.lists(
            st.tuples(
                st.lists(requests, min_size=n, max_size=n),
                st.lists(fallback_values, min_size=n, max_size=n),
            ),
            min_size=1,
            max_size=25,
        )
    )
    return limit, rate, dt, [(np.array(r), np.array(f)) for r, f in ticks]


def _tolerance(previous: np.ndarray, step: np.ndarray) -> np.ndarray:
    """A few ulps: (prev + step) − prev may round above step."""
    return 4 * np.spacing(np.abs(previous) + step)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_output_respects_effort_and_rate_limits(scenario):
    """Whatever is requested (finite, huge, NaN, ±inf), the output is finite, within ±limit and
    changes by at most rate_limit·dt per tick; the first tick is limited only by the clamp."""
    limit, rate, dt, ticks = scenario
    limiter = CommandLimiter(limit, rate)
    step = np.broadcast_to(rate, limit.shape) * dt
    previous: np.ndarray | None = None
    for request, fallback in ticks:
        result = limiter.limit(request, lambda f=fallback: f, dt)
        out = result.effort
        assert out.shape == limit.shape
        assert np.all(np.isfinite(out))
        assert np.all(np.abs(out) <= limit)
        target = np.where(
            np.isfinite(request), request, np.where(np.isfinite(fallback), fallback, 0.0)
        )
        if previous is None:
            np.testing.assert_array_equal(out, np.clip(target, -limit, limit))
            assert not result.rate_limited.any()
        else:
            assert np.all(np.abs(out - previous) <= step + _tolerance(previous, step))
            low = np.maximum(previous - step, -limit)
            high = np.minimum(previous + step, limit)
            np.testing.assert_array_equal(out, np.clip(target, low, high))
        previous = out


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_non_finite_requests_use_the_fallback_and_are_flagged(scenario):
    """non_finite flags exactly the non-finite requests; those joints follow the fallback (0 if
    the fallback is not finite either), which is then limited like any request; the fallback
    is only evaluated when some request is not finite."""
    limit, rate, dt, ticks = scenario
    limiter = CommandLimiter(limit, rate)
    before: np.ndarray | None = None
    for request, fallback in ticks:
        calls: list[int] = []

        def give_fallback(f=fallback, calls=calls):
            calls.append(1)
            return f

        result = limiter.limit(request, give_fallback, dt)
        bad = ~np.isfinite(request)
        np.testing.assert_array_equal(result.non_finite, bad)
        assert len(calls) == (1 if bad.any() else 0)
        safe = np.where(np.isfinite(fallback), fallback, 0.0)
        if before is None:
            np.testing.assert_array_equal(result.effort[bad], np.clip(safe, -limit, limit)[bad])
        else:
            step = np.broadcast_to(rate, limit.shape) * dt
            expected = np.clip(
                safe, np.maximum(before - step, -limit), np.minimum(before + step, limit)
            )
            np.testing.assert_array_equal(result.effort[bad], expected[bad])
        before = result.effort


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_saturation_and_rate_flags_mark_exactly_the_limited_joints(scenario):
    """saturated is set exactly where the target was beyond the effort limit (on later ticks:
    and the rate window reached beyond it); rate_limited exactly where the target was outside
    the rate window; a target within ±limit is never flagged saturated."""
    limit, rate, dt, ticks = scenario
    limiter = CommandLimiter(limit, rate)
    step = np.broadcast_to(rate, limit.shape) * dt
    previous: np.ndarray | None = None
    for request, fallback in ticks:
        result = limiter.limit(request, lambda f=fallback: f, dt)
        target = np.where(
            np.isfinite(request), request, np.where(np.isfinite(fallback), fallback, 0.0)
        )
        beyond = np.abs(target) > limit
        assert not np.any(result.saturated & ~beyond)
        if previous is None:
            np.testing.assert_array_equal(result.saturated, beyond)
        else:
            reachable = ((target > limit) & (previous + step > limit)) | (
                (target < -limit) & (previous - step < -limit)
            )
            np.testing.assert_array_equal(result.saturated, reachable)
            outside = (target < previous - step) | (target > previous + step)
            np.testing.assert_array_equal(result.rate_limited, outside)
        assert result.any_saturated == bool(
            result.saturated.any() or result.rate_limited.any() or result.non_finite.any()
        )
        previous = result.effort


def _limited_as_specified(
    request: np.ndarray,
    fallback: np.ndarray,
    previous: np.ndarray | None,
    limit: np.ndarray,
    step: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The law in plain numpy, step after step: (effort, saturated, rate_limited, non_finite)."""
    non_finite = ~np.isfinite(request)
    target = np.where(non_finite, np.nan_to_num(fallback, nan=0.0, posinf=0.0, neginf=0.0), request)
    limited = target
    if previous is not None:
        limited = np.minimum(np.maximum(target, previous - step), previous + step)
    clamped = np.minimum(np.maximum(limited, -limit), limit)
    return clamped, clamped != limited, limited != target, non_finite


@st.composite
def near_bounds(draw):
    """Limits, dt and ticks whose requests sit on, just beside or well inside the bounds of the
    tick they are made for: the last output ± the rate step, ± the effort limit (a function of
    the last output, the step and the limit), small moves, signed zeros, non-finite values."""
    n = draw(st.integers(1, 9))
    limit = np.array(draw(st.lists(st.floats(0.5, 500.0), min_size=n, max_size=n)))
    rate = np.array(draw(st.lists(st.floats(1.0, 1e5), min_size=n, max_size=n)))
    dt = draw(st.sampled_from([1e-3, 2e-3, 0.25]))
    kinds = st.sampled_from(
        ["low", "high", "below", "above", "-limit", "+limit", "inside", "zero", "-zero", "nan"]
    )
    ticks = draw(st.lists(st.lists(kinds, min_size=n, max_size=n), min_size=1, max_size=25))
    moves = draw(st.lists(st.floats(-0.999, 0.999), min_size=n, max_size=n))
    return limit, rate, dt, ticks, np.array(moves)


def _request(kinds, previous, step, limit, moves):  # type: ignore[no-untyped-def]
    last = np.zeros_like(limit) if previous is None else previous
    values = {
        "low": last - step,
        "high": last + step,
        "below": np.nextafter(last - step, -np.inf),
        "above": np.nextafter(last + step, np.inf),
        "-limit": -limit,
        "+limit": limit,
        "inside": last + moves * step,
        "zero": np.zeros_like(limit),
        "-zero": -np.zeros_like(limit),
        "nan": np.full_like(limit, np.nan),
    }
    return np.array([values[kind][i] for i, kind in enumerate(kinds)])


@settings(max_examples=300, deadline=None)
@given(near_bounds())
def test_the_output_is_the_law_bit_for_bit_on_and_beside_every_bound(scenario):
    """On, just beside (one ulp) and inside the rate window and the effort limit, with signed
    zeros and NaNs: the effort and every flag are bit for bit those of the law written out in
    numpy (a shortcut for ticks that change nothing must not change a bit of any output)."""
    limit, rate, dt, ticks, moves = scenario
    limiter = CommandLimiter(limit, rate)
    step = rate * dt
    fallback = np.linspace(-1.0, 1.0, limit.size)
    previous: np.ndarray | None = None
    for kinds in ticks:
        request = _request(kinds, previous, step, limit, moves)
        result = limiter.limit(request, lambda: fallback, dt)
        expected = _limited_as_specified(request, fallback, previous, limit, step)
        for name, value, want in zip(
            ("effort", "saturated", "rate_limited", "non_finite"), result, expected, strict=True
        ):
            assert value.dtype == want.dtype and value.tobytes() == want.tobytes(), name
        assert result.effort is not request  # the caller's own array
        previous = result.effort


# --- examples --------------------------------------------------------------------------------
def test_nan_request_becomes_the_fallback_on_the_first_tick():
    """A NaN on one joint is replaced by that joint's fallback; the others pass unchanged."""
    limiter = CommandLimiter(np.array([100.0, 100.0, 10.0]))
    result = limiter.limit(np.array([5.0, np.nan, 3.0]), lambda: np.array([-1.0, 7.5, 9.0]), 1e-3)
    np.testing.assert_array_equal(result.effort, [5.0, 7.5, 3.0])
    np.testing.assert_array_equal(result.non_finite, [False, True, False])
    assert result.any_saturated


def test_rate_limit_ramps_a_step_request():
    """A step request from 0 to 50 N·m at the default 1000 N·m/s ramps by 1 N·m per 1 ms tick."""
    limiter = CommandLimiter(np.array([176.0]))
    assert DEFAULT_RATE_LIMIT == 1000.0
    limiter.reset(np.array([0.0]))
    outputs = [limiter.limit(np.array([50.0]), np.zeros, 1e-3).effort[0] for _ in range(60)]
    np.testing.assert_allclose(outputs[:50], np.arange(1, 51), rtol=1e-12)
    assert outputs[55] == 50.0


def test_reset_forgets_the_previous_output():
    """After reset() the next tick is limited by the clamp only."""
    limiter = CommandLimiter(np.array([40.0]), rate_limit=10.0)
    limiter.limit(np.array([0.0]), np.zeros, 1e-3)
    assert limiter.limit(np.array([30.0]), np.zeros, 1e-3).effort[0] == pytest.approx(0.01)
    limiter.reset()
    assert limiter.limit(np.array([30.0]), np.zeros, 1e-3).effort[0] == 30.0


@pytest.mark.parametrize(
    "effort_limit",
    [[10.0, 0.0], [10.0, -5.0], [10.0, np.nan], [np.inf, 10.0]],
    ids=["zero", "negative", "nan", "inf"],
)
def test_invalid_effort_limits_are_rejected(effort_limit):
    """Effort limits must be finite and positive."""
    with pytest.raises(ValueError, match="effort limits"):
        CommandLimiter(np.array(effort_limit))


@pytest.mark.parametrize(
    "rate_limit",
    [0.0, -1000.0, np.nan, np.inf, [1000.0, 0.0], [1000.0, np.nan]],
    ids=["zero", "negative", "nan", "inf", "one-zero", "one-nan"],
)
def test_invalid_rate_limits_are_rejected(rate_limit):
    """Effort-rate limits must be finite and positive, per joint."""
    with pytest.raises(ValueError, match="rate limits"):
        CommandLimiter(np.array([10.0, 10.0]), rate_limit)


def test_wrong_lengths_are_rejected():
    """A request or a per-joint rate-limit vector of the wrong length raises ValueError."""
    limiter = CommandLimiter(np.array([10.0, 10.0, 10.0]))
    with pytest.raises(ValueError, match="expected 3 efforts"):
        limiter.limit(np.zeros(2), np.zeros, 1e-3)
    with pytest.raises(ValueError, match="expected 3 efforts"):
        limiter.limit(np.zeros(4), np.zeros, 1e-3)
    with pytest.raises(ValueError):
        CommandLimiter(np.array([10.0, 10.0, 10.0]), np.array([1.0, 2.0]))
