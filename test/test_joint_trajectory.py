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
from ct_controllers.references.limit_approach import LimitApproach

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


# --- starts at or past a limit (issue 23) ------------------------------------------------------
RANGED = JointLimits(
    velocity=LIMITS.velocity,
    acceleration=LIMITS.acceleration,
    jerk=LIMITS.jerk,
    approach=LimitApproach.for_joints(
        np.full(N, -2.0), np.full(N, 2.0), np.arange(N) < 4, other_margin=0.001
    ),
)


@pytest.mark.parametrize("stop", [False, True], ids=["goal", "stop"])
def test_a_plan_from_past_or_at_a_limit_never_leaves_the_range(stop: bool) -> None:
    """300 plans from random measured states up to 50 mrad past the limits, at them, or just
    inside, with any velocity within the bounds — towards the limit too — to random goals (with
    and without a requested duration) and stops: every sample of the reference (1 ms apart)
    lies inside [−2, 2]; the reference starts on the measured position clipped into the range,
    and ends at rest at least the joints' margins inside it (the approach's 5 mrad on joints
    0-3, 1 mm on the others)."""
    rng = np.random.default_rng(7)
    margin = RANGED.approach.margin  # type: ignore[union-attr]
    for _ in range(150):
        q0 = rng.choice([-2.05, -2.0, -1.999, 1.999, 2.0, 2.05, 0.0], N) + rng.uniform(
            -0.005, 0.005, N
        )
        v0 = rng.uniform(-1.0, 1.0, N) * LIMITS.velocity
        goal = rng.uniform(-2.0, 2.0, N)
        duration = float(rng.choice([0.0, 4.0]))
        trajectory = JerkLimitedTrajectory(0.0, q0, v0, goal, RANGED, duration, stop=stop)
        q, _, _ = _sampled(trajectory)
        assert q.min() >= -2.0 and q.max() <= 2.0, (q0, v0, q.min(), q.max())
        np.testing.assert_allclose(q[0], np.clip(q0, -2.0, 2.0), atol=1e-12)
        end = trajectory.sample(trajectory.duration + 1.0)
        # (to Ruckig's rounding at the end of a stop, 1e-7)
        assert (np.abs(end.q) <= 2.0 - margin + 1e-7).all(), (end.q, 2.0 - margin)
        np.testing.assert_array_equal(end.v, 0.0)


def test_a_start_well_inside_is_planned_as_without_the_range() -> None:
    """Away from the limits (and their stopping distances) the range changes nothing: the same
    duration and samples as the plain limits, goal and stop."""
    rng = np.random.default_rng(8)
    for stop in (False, True):
        q0, v0 = rng.uniform(-1.0, 1.0, N), rng.uniform(-0.3, 0.3, N)
        goal = rng.uniform(-1.0, 1.0, N)
        plain = JerkLimitedTrajectory(0.0, q0, v0, goal, LIMITS, stop=stop)
        ranged = JerkLimitedTrajectory(0.0, q0, v0, goal, RANGED, stop=stop)
        assert ranged.duration == plain.duration
        for t in np.linspace(0.0, plain.duration, 9):
            np.testing.assert_array_equal(ranged.sample(t).q, plain.sample(t).q)


def test_the_held_position_is_clipped_into_the_range() -> None:
    """JointLimits.inside clips into the approach's range (a copy without one)."""
    q = np.array([2.5, -2.5, 0.3, 1.0, -1.0, 0.0, 3.0])
    np.testing.assert_array_equal(RANGED.inside(q), np.clip(q, -2.0, 2.0))
    unclipped = LIMITS.inside(q)
    np.testing.assert_array_equal(unclipped, q)
    assert unclipped is not q
