"""ct_controllers.references.joint_trajectory: quintic point-to-point moves, checked against their
boundary conditions, finite differences and the velocity/acceleration bounds."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial import polynomial as P

from ct_controllers.references.joint_trajectory import (
    MIN_DURATION,
    QuinticTrajectory,
    minimum_duration,
)

N = 9


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(42)


def _random_move(rng: np.random.Generator):
    q0 = rng.uniform(-2.0, 2.0, N)
    q1 = rng.uniform(-2.0, 2.0, N)
    v0 = rng.uniform(-1.0, 1.0, N)
    return q0, v0, q1


def test_boundary_conditions_hold(rng):
    """q(0) = q0, q'(0) = v0, q''(0) = 0 and q(T) = q1, q'(T) = 0, q''(T) = 0, evaluated from the
    coefficients with numpy's polynomial routines (not sample())."""
    for _ in range(20):
        q0, v0, q1 = _random_move(rng)
        duration = rng.uniform(0.2, 3.0)
        trajectory = QuinticTrajectory.between(10.0, q0, v0, q1, duration)
        coefficients = trajectory.coefficients  # 6 x n, lowest order first
        position = [P.polyval(t, coefficients) for t in (0.0, duration)]
        velocity = [P.polyval(t, P.polyder(coefficients)) for t in (0.0, duration)]
        acceleration = [P.polyval(t, P.polyder(coefficients, 2)) for t in (0.0, duration)]
        np.testing.assert_allclose(position[0], q0, atol=1e-12)
        np.testing.assert_allclose(velocity[0], v0, atol=1e-12)
        np.testing.assert_allclose(acceleration[0], 0.0, atol=1e-12)
        np.testing.assert_allclose(position[1], q1, atol=1e-9)
        np.testing.assert_allclose(velocity[1], 0.0, atol=1e-9)
        np.testing.assert_allclose(acceleration[1], 0.0, atol=1e-8)


def test_sample_starts_and_ends_on_the_boundary_states(rng):
    """sample() at the start gives (q0, v0, 0); at and after the end (q1, 0, 0); before the
    start it holds the start."""
    q0, v0, q1 = _random_move(rng)
    trajectory = QuinticTrajectory.between(5.0, q0, v0, q1, 1.5)
    start = trajectory.sample(5.0)
    np.testing.assert_allclose(start.q, q0, atol=1e-12)
    np.testing.assert_allclose(start.v, v0, atol=1e-12)
    np.testing.assert_allclose(start.a, 0.0, atol=1e-12)
    just_before_end = trajectory.sample(6.5 - 1e-9)
    np.testing.assert_allclose(just_before_end.q, q1, atol=1e-9)
    np.testing.assert_allclose(just_before_end.v, 0.0, atol=1e-6)
    np.testing.assert_allclose(just_before_end.a, 0.0, atol=1e-5)
    for late in (6.5, 7.0, 100.0):
        end = trajectory.sample(late)
        np.testing.assert_allclose(end.q, q1, atol=1e-9)
        np.testing.assert_array_equal(end.v, 0.0)
        np.testing.assert_array_equal(end.a, 0.0)
    np.testing.assert_allclose(trajectory.goal, q1, atol=1e-9)
    np.testing.assert_allclose(trajectory.sample(4.0).q, q0, atol=1e-12)
    assert trajectory.progress(4.0) == 0.0
    assert trajectory.progress(5.75) == pytest.approx(0.5)
    assert trajectory.progress(9.0) == 1.0


def test_velocity_and_acceleration_match_finite_differences(rng):
    """v(t) and a(t) equal central differences of q(t) and v(t) inside the interval."""
    h = 1e-6
    for _ in range(10):
        q0, v0, q1 = _random_move(rng)
        duration = rng.uniform(0.3, 3.0)
        trajectory = QuinticTrajectory.between(0.0, q0, v0, q1, duration)
        for t in np.linspace(0.01, duration - 0.01, 25):
            sample = trajectory.sample(t)
            dq = (trajectory.sample(t + h).q - trajectory.sample(t - h).q) / (2 * h)
            dv = (trajectory.sample(t + h).v - trajectory.sample(t - h).v) / (2 * h)
            np.testing.assert_allclose(sample.v, dq, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(sample.a, dv, rtol=1e-6, atol=1e-5)


def test_minimum_duration_respects_velocity_and_acceleration_bounds(rng):
    """From rest, a move of minimum_duration stays within both bounds on every joint, and is
    tight: some joint reaches (nearly) one of its bounds unless MIN_DURATION governs."""
    for _ in range(40):
        q0 = rng.uniform(-2.0, 2.0, N)
        q1 = q0 + rng.uniform(-3.0, 3.0, N) * (rng.random(N) < 0.7)
        max_velocity = rng.uniform(0.1, 3.0, N)
        max_acceleration = rng.uniform(0.5, 10.0, N)
        duration = minimum_duration(q0, q1, max_velocity, max_acceleration)
        trajectory = QuinticTrajectory.between(0.0, q0, np.zeros(N), q1, duration)
        samples = [trajectory.sample(t) for t in np.linspace(0.0, duration, 201)]
        # Densely, straight from the coefficients (columns: joints, rows: times).
        times = np.linspace(0.0, duration, 20001)
        dense_v = P.polyval(times, P.polyder(trajectory.coefficients)).T
        dense_a = P.polyval(times, P.polyder(trajectory.coefficients, 2)).T
        peak_v = np.abs(np.vstack([[s.v for s in samples], dense_v])).max(axis=0)
        peak_a = np.abs(np.vstack([[s.a for s in samples], dense_a])).max(axis=0)
        assert np.all(peak_v <= max_velocity * (1 + 1e-6))
        assert np.all(peak_a <= max_acceleration * (1 + 1e-6))
        if duration > MIN_DURATION:
            use = np.maximum(peak_v / max_velocity, peak_a / max_acceleration)
            assert use.max() > 0.99


def test_zero_move_takes_the_minimum_duration():
    """Not moving at all still gets MIN_DURATION (never a zero-length trajectory)."""
    q = np.ones(N)
    assert minimum_duration(q, q, np.ones(N), np.ones(N)) == MIN_DURATION


@pytest.mark.parametrize("duration", [0.0, -1.0, np.nan, np.inf, -np.inf])
def test_invalid_durations_are_rejected(duration):
    """A duration that is not positive and finite raises ValueError."""
    with pytest.raises(ValueError, match="duration"):
        QuinticTrajectory.between(0.0, np.zeros(N), np.zeros(N), np.ones(N), duration)
