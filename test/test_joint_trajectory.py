"""ct_controllers.references.joint_trajectory: jerk-limited moves from the measured state, checked
by sampling (finite differences of the sampled positions, not Ruckig's own figures)."""

from __future__ import annotations

import numpy as np
import pytest

from ct_controllers.references.joint_trajectory import (
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)

N = 7
LIMITS = JointLimits(
    velocity=np.linspace(0.8, 1.6, N), acceleration=np.full(N, 3.0), jerk=np.full(N, 30.0)
)
STEP = 1e-3


def _sampled(trajectory: JerkLimitedTrajectory) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    times = trajectory.start_time + np.arange(0.0, trajectory.duration + STEP, STEP)
    samples = [trajectory.sample(t) for t in times]
    return (
        np.array([s.q for s in samples]),
        np.array([s.v for s in samples]),
        np.array([s.a for s in samples]),
    )


def test_starts_on_the_measured_state_and_ends_at_rest_on_the_goal() -> None:
    """q(0) = q0, v(0) = v0, a(0) = 0; at and after the end: q = goal, v = a = 0."""
    rng = np.random.default_rng(0)
    q0, v0, goal = rng.uniform(-1, 1, N), rng.uniform(-0.3, 0.3, N), rng.uniform(-1, 1, N)
    trajectory = JerkLimitedTrajectory(2.0, q0, v0, goal, LIMITS)
    start = trajectory.sample(2.0)
    np.testing.assert_allclose(start.q, q0, atol=1e-12)
    np.testing.assert_allclose(start.v, v0, atol=1e-12)
    np.testing.assert_allclose(start.a, 0.0, atol=1e-12)
    for t in (2.0 + trajectory.duration, 2.0 + trajectory.duration + 1.0):
        end = trajectory.sample(t)
        np.testing.assert_allclose(end.q, goal, atol=1e-9)
        np.testing.assert_array_equal(end.v, 0.0)
        np.testing.assert_array_equal(end.a, 0.0)
    assert trajectory.progress(2.0) == 0.0 and trajectory.progress(10.0) == 1.0


def test_velocity_and_acceleration_are_the_derivatives_of_position() -> None:
    """Central differences of the sampled q and v match the sampled v and a."""
    rng = np.random.default_rng(1)
    trajectory = JerkLimitedTrajectory(
        0.0, rng.uniform(-1, 1, N), np.zeros(N), rng.uniform(-1, 1, N), LIMITS
    )
    q, v, a = _sampled(trajectory)
    np.testing.assert_allclose((q[2:] - q[:-2]) / (2 * STEP), v[1:-1], atol=2e-3)
    np.testing.assert_allclose((v[2:] - v[:-2]) / (2 * STEP), a[1:-1], atol=3e-2)


@pytest.mark.parametrize("seed", range(5))
def test_velocity_acceleration_and_jerk_stay_within_the_limits(seed: int) -> None:
    """Over random moves, the finite-difference velocity, acceleration and jerk of the sampled
    reference stay within the limits (jerk to 5 %, the sampling error of a piecewise-constant
    jerk), and the move is time-optimal: some joint reaches one of its limits."""
    rng = np.random.default_rng(seed)
    trajectory = JerkLimitedTrajectory(
        0.0, rng.uniform(-2, 2, N), np.zeros(N), rng.uniform(-2, 2, N), LIMITS
    )
    q, _, _ = _sampled(trajectory)
    velocity = np.diff(q, axis=0) / STEP
    acceleration = np.diff(velocity, axis=0) / STEP
    jerk = np.diff(acceleration, axis=0) / STEP
    use_v = np.abs(velocity).max(axis=0) / LIMITS.velocity
    use_a = np.abs(acceleration).max(axis=0) / LIMITS.acceleration
    use_j = np.abs(jerk).max(axis=0) / LIMITS.jerk
    assert use_v.max() <= 1 + 1e-3 and use_a.max() <= 1 + 1e-2 and use_j.max() <= 1.05
    assert max(use_v.max(), use_a.max(), use_j.max()) > 0.95


def test_a_requested_duration_is_a_minimum() -> None:
    """A feasible longer duration is met exactly; a too-short one is stretched to what the limits
    allow, and the trajectory says so."""
    q0, goal = np.zeros(N), np.full(N, 1.0)
    fastest = JerkLimitedTrajectory(0.0, q0, np.zeros(N), goal, LIMITS).duration
    assert JerkLimitedTrajectory(0.0, q0, np.zeros(N), goal, LIMITS, 5.0).duration == (
        pytest.approx(5.0)
    )
    short = JerkLimitedTrajectory(0.0, q0, np.zeros(N), goal, LIMITS, fastest / 2)
    assert short.duration == pytest.approx(fastest)


def test_bad_durations_and_limits_are_rejected() -> None:
    """Negative or NaN durations raise TrajectoryError; zero, negative or NaN limits raise
    ValueError naming the limit."""
    for duration in (-1.0, float("nan")):
        with pytest.raises(TrajectoryError, match="duration"):
            JerkLimitedTrajectory(0.0, np.zeros(N), np.zeros(N), np.ones(N), LIMITS, duration)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="jerk"):
            JointLimits(LIMITS.velocity, LIMITS.acceleration, np.full(N, bad))


def test_a_measured_velocity_beyond_the_limit_is_clipped_not_refused() -> None:
    """Sensor noise can put the measured velocity a hair above the reference limit; the move
    then starts from the clipped velocity instead of failing."""
    v0 = LIMITS.velocity * 1.01
    trajectory = JerkLimitedTrajectory(0.0, np.zeros(N), v0, np.ones(N), LIMITS)
    np.testing.assert_allclose(trajectory.sample(0.0).v, LIMITS.velocity, atol=1e-12)
