"""The waypoint trajectory as joint_trajectory_controller samples it: each segment's degree from
what both ends carry, checked against independent computations — numpy's linear interpolation,
the boundary conditions solved as a linear system (cubic, quintic), and finite differences of
the sampled positions for the sampled velocities and accelerations."""

from __future__ import annotations

import numpy as np
import pytest

from ct_controllers.references.spline_trajectory import NONE, SplineTrajectory, Waypoint


def _w(time, q, v=None, a=None) -> Waypoint:
    array = lambda x: None if x is None else np.array(x, dtype=float)  # noqa: E731
    return Waypoint(time, array(q), array(v), array(a))


def _boundary_solution(t: float, ends: list[tuple[float, ...]]) -> np.ndarray:
    """The polynomial through the given (q, v[, a]) at τ = 0 and τ = t, solved as the linear
    system of its boundary conditions (an independent computation of the closed forms)."""
    order = len(ends[0])  # 2: cubic, 3: quintic
    degree = 2 * order - 1
    rows, values = [], []
    for tau, values_at in ((0.0, ends[0]), (t, ends[1])):
        for derivative in range(order):
            row = [
                0.0
                if k < derivative
                else np.prod(range(k - derivative + 1, k + 1)) * tau ** (k - derivative)
                for k in range(degree + 1)
            ]
            rows.append(row)
            values.append(values_at[derivative])
    return np.linalg.solve(np.array(rows), np.array(values))


def test_positions_only_are_linear_between_waypoints_as_numpy_interpolates() -> None:
    """Waypoints with positions only, the start state at 0.2 rad: the sample at any time equals
    numpy's piecewise-linear interpolation through (0, start), (1, 0.5), (3, -0.5); the velocity
    is the segment's slope, the acceleration 0."""
    start = _w(0.0, [0.2], [0.3])  # the measured velocity does not make the first segment cubic
    trajectory = SplineTrajectory(start, [_w(1.0, [0.5]), _w(3.0, [-0.5])])
    for time in np.linspace(0.0, 2.99, 37):
        sample = trajectory.sample(time)
        assert sample.positions[0] == pytest.approx(
            np.interp(time, [0, 1, 3], [0.2, 0.5, -0.5]), abs=1e-12
        )
        slope = 0.3 if time < 1.0 else -0.5
        assert sample.velocities[0] == pytest.approx(slope, abs=1e-12)
        assert sample.accelerations[0] == 0.0
        assert sample.segment == (0 if time < 1.0 else 1)


@pytest.mark.parametrize("with_accelerations", [False, True], ids=["cubic", "quintic"])
def test_velocities_make_it_cubic_and_accelerations_quintic(with_accelerations: bool) -> None:
    """Two joints, a segment of 1.7 s from (q, v[, a]) to (q, v[, a]): the sampled positions
    follow the polynomial solved from the boundary conditions as a linear system, and the
    sampled velocities and accelerations are the finite differences of the sampled positions."""
    a0, a1 = ([0.4, -1.0], [0.0, 2.0]) if with_accelerations else (None, None)
    start = _w(0.0, [0.1, -0.4], [0.2, 0.0], a0)
    end = _w(1.7, [0.9, 0.3], [0.0, -0.5], a1)
    trajectory = SplineTrajectory(start, [end])
    for joint in range(2):
        ends = [
            (start.positions[joint], start.velocities[joint])  # type: ignore[index]
            + ((start.accelerations[joint],) if with_accelerations else ()),  # type: ignore[index]
            (end.positions[joint], end.velocities[joint])  # type: ignore[index]
            + ((end.accelerations[joint],) if with_accelerations else ()),  # type: ignore[index]
        ]
        coefficients = _boundary_solution(1.7, ends)
        for time in np.linspace(0.0, 1.69, 23):
            expected = np.polyval(coefficients[::-1], time)
            assert trajectory.sample(time).positions[joint] == pytest.approx(expected, abs=1e-9)
    h = 1e-5
    for time in (0.3, 0.85, 1.4):
        before, at, after = (trajectory.sample(time + d) for d in (-h, 0.0, h))
        velocity = (after.positions - before.positions) / (2 * h)
        acceleration = (after.positions - 2 * at.positions + before.positions) / h**2
        np.testing.assert_allclose(at.velocities, velocity, atol=1e-6)
        np.testing.assert_allclose(at.accelerations, acceleration, atol=1e-3)


def test_a_first_waypoint_at_zero_is_the_start_and_the_end_is_held() -> None:
    """A first waypoint at t = 0 replaces the measured start (MoveIt sends the start state
    there); before it the sample is that waypoint, past the last one the last position is held
    at rest and flagged after_end, on the last waypoint's segment."""
    measured = _w(0.0, [5.0], [1.0])
    trajectory = SplineTrajectory(measured, [_w(0.0, [0.0], [0.0]), _w(2.0, [1.0], [0.0])])
    assert trajectory.sample(0.0).positions[0] == 0.0
    assert trajectory.sample(1.0).positions[0] == pytest.approx(0.5)  # the symmetric cubic
    assert trajectory.sample(1.0).segment == 1
    held = trajectory.sample(7.0)
    assert held.after_end and held.segment == 1
    assert held.positions[0] == 1.0 and held.velocities[0] == 0.0
    assert trajectory.duration == 2.0


def test_interpolation_none_steps_and_an_unknown_method_is_refused() -> None:
    """``none`` gives each segment's start state (a step) at rest; a method that is neither
    splines nor none is a ValueError naming it."""
    trajectory = SplineTrajectory(
        _w(0.0, [0.0]), [_w(1.0, [1.0]), _w(2.0, [3.0])], interpolation=NONE
    )
    assert trajectory.sample(0.5).positions[0] == 0.0
    assert trajectory.sample(1.5).positions[0] == 1.0
    assert trajectory.sample(1.5).velocities[0] == 0.0
    with pytest.raises(ValueError, match="'cubic'"):
        SplineTrajectory(_w(0.0, [0.0]), [_w(1.0, [1.0])], interpolation="cubic")
