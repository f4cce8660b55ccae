"""ct_controllers.references.limit_approach: the start of a plan clipped into the joint range
(issue 23) — the stopping speed checked against Ruckig's own time-optimal stop, an independent
implementation, and the clipped start on its own."""

from __future__ import annotations

import numpy as np
import pytest
from ruckig import ControlInterface, InputParameter, Ruckig, Trajectory

from ct_controllers.references.limit_approach import (
    FINGER_LIMIT_MARGIN,
    LimitApproach,
    stopping_speed,
)


def ruckig_stop_distance(speed: float, acceleration: float, jerk: float) -> float:
    """How far Ruckig's fastest stop (velocity interface, to v = a = 0) from ``speed`` and
    a = 0 travels, within ``acceleration`` and ``jerk``."""
    parameters = InputParameter(1)
    parameters.control_interface = ControlInterface.Velocity
    parameters.current_position, parameters.current_velocity = [0.0], [speed]
    parameters.current_acceleration = [0.0]
    parameters.target_velocity, parameters.target_acceleration = [0.0], [0.0]
    parameters.max_velocity = [10.0 * speed + 1.0]
    parameters.max_acceleration, parameters.max_jerk = [acceleration], [jerk]
    trajectory = Trajectory(1)
    Ruckig(1).calculate(parameters, trajectory)
    return float(trajectory.at_time(trajectory.duration)[0][0])


@pytest.mark.parametrize(
    ("acceleration", "jerk"),
    [(3.0, 30.0), (0.5, 5.0), (10.0, 1000.0)],
    ids=["arm", "fingers", "stiff"],
)
def test_the_stopping_speed_stops_within_the_distance(acceleration: float, jerk: float) -> None:
    """For distances on both sides of a³/j² (the triangular and the trapezoidal stop), Ruckig's
    fastest stop from ``stopping_speed(d)`` travels d to within 1e-7 — never more than d — and
    from 1 % faster travels further: the speed is the largest that fits."""
    knee = acceleration**3 / jerk**2
    for distance in (knee / 50, knee / 2, knee, 2 * knee, 40 * knee):
        speed = float(stopping_speed(np.array([distance]), acceleration, jerk)[0])
        travelled = ruckig_stop_distance(speed, acceleration, jerk)
        assert travelled <= distance + 1e-12
        assert travelled == pytest.approx(distance, abs=1e-7)
        assert ruckig_stop_distance(1.01 * speed, acceleration, jerk) > distance


def test_at_the_limit_no_speed_towards_it_and_unbounded_ranges_no_cap() -> None:
    """0 room: 0 speed; an unbounded range: no cap (inf)."""
    speeds = stopping_speed(np.array([0.0, np.inf]), 3.0, 30.0)
    assert speeds[0] == 0.0 and speeds[1] == np.inf


def test_a_start_is_clipped_into_the_range_and_able_to_stop_in_it() -> None:
    """Positions past a limit come back onto it with no speed further out (speed back in is
    kept); a joint inside moving towards a limit keeps at most the speed that stops in the
    room left before its margin (none within the margin); a state well inside, and a joint
    with an unbounded range, keep their values exactly."""
    approach = LimitApproach.for_joints(
        np.array([-2.0, -2.0, -2.0, -np.inf, 0.0]),
        np.array([2.0, 2.0, 2.0, np.inf, 0.04]),
        np.array([True, True, True, False, False]),
        other_margin=FINGER_LIMIT_MARGIN,
    )
    acceleration = np.array([3.0, 3.0, 3.0, 3.0, 0.5])
    jerk = np.array([30.0, 30.0, 30.0, 30.0, 5.0])
    q = np.array([2.01, -1.99, 1.997, 50.0, -0.002])
    v = np.array([0.4, -0.9, 0.2, 5.0, 0.05])
    start_q, start_v = approach.start_inside(q, v, acceleration, jerk)
    np.testing.assert_array_equal(start_q, [2.0, -1.99, 1.997, 50.0, 0.0])
    room = float(stopping_speed(np.array([-1.99 - (-2.0 + 0.005)]), 3.0, 30.0)[0])
    np.testing.assert_allclose(start_v, [0.0, -room, 0.0, 5.0, 0.05], rtol=1e-12, atol=0.0)
    speeds = np.array([0.2, 0.2, 0.2, 0.2, 0.05])  # each stops well before its margin
    far = approach.start_inside(np.full(5, 0.02), speeds, acceleration, jerk)
    np.testing.assert_array_equal(far[1], speeds)  # room enough: unchanged
    back = approach.start_inside(np.array([2.01, 0, 0, 0, 0.05]), -v, acceleration, jerk)[1]
    assert back[0] == -0.4 and back[4] == -0.05  # moving back in: kept
    assert approach.margin.tolist() == [0.005, 0.005, 0.005, 0.0, FINGER_LIMIT_MARGIN]
