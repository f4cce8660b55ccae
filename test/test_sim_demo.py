"""ct_controllers.sim_demo: the scripted motion behind ``make sim``, whole stack in lockstep."""

from __future__ import annotations

import numpy as np
import pytest

from ct_controllers.config import load_config
from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel
from ct_controllers.sim_demo import (
    FINAL_ERROR_LIMIT,
    MOVE_TIME,
    PATTERNS,
    SETTLE_TIME,
    SimSummary,
    run_scripted_motion,
    scripted_waypoints,
)


def _run() -> SimSummary:
    return run_scripted_motion(load_config(overrides={"mujoco.mode": "lockstep"}))


@pytest.fixture(scope="module")
def summary() -> SimSummary:
    return _run()


def test_scripted_motion_succeeds(summary):
    """The run ends back home within FINAL_ERROR_LIMIT, and ok says so."""
    assert summary.ok is True
    assert summary.final_error <= FINAL_ERROR_LIMIT
    home = load_config().home_positions[:7]
    np.testing.assert_allclose(summary.final_position, home, atol=FINAL_ERROR_LIMIT)


def test_tracking_error_stays_small(summary):
    """The arm follows the reference within 0.05 rad throughout, and it did really move."""
    assert summary.tracking_error_max < 0.05
    assert 0 < summary.tracking_error_rms <= summary.tracking_error_max
    assert summary.waypoints == len(PATTERNS) + 1


def test_run_covers_every_move_in_sim_time(summary):
    """Sim time covers all moves and settles (lockstep: one period per tick, no ticks lost)."""
    minimum = summary.waypoints * (MOVE_TIME + SETTLE_TIME)
    assert minimum <= summary.sim_time < minimum + 0.2
    assert summary.ticks == summary.timing.ticks
    assert summary.sim_time == pytest.approx((summary.ticks - 10) * 1e-3, abs=1e-9)
    assert summary.timing.jitter.max == 0.0  # nothing is scheduled in lockstep


def test_lockstep_run_is_bit_for_bit_repeatable(summary):
    """A second run ends at exactly the same joint positions (float equality)."""
    again = _run()
    assert again.final_position == summary.final_position
    assert again.ticks == summary.ticks
    assert again.tracking_error_max == summary.tracking_error_max


def test_waypoints_come_from_the_robot_and_stay_inside_its_limits():
    """The scripted waypoints are derived from the configured robot: each inside the URDF
    limits, each arm joint at most 0.5 rad from home and really moved by some waypoint, home
    last; with home moved, the waypoints move with it (they are not fixed numbers)."""
    config = load_config()
    description = load_description(None, mappings={"backend": config.backend})
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    arm = model.indices(config.arm_joints)
    home = np.array(config.home_positions[: len(arm)])
    waypoints = scripted_waypoints(model, config)
    assert len(waypoints) == len(PATTERNS) + 1
    np.testing.assert_array_equal(waypoints[-1], home)
    for waypoint in waypoints:
        assert np.all(waypoint >= model.limits.lower[arm])
        assert np.all(waypoint <= model.limits.upper[arm])
        assert np.all(np.abs(waypoint - home) <= 0.5 + 1e-12)
    moved = np.max(np.abs(np.array(waypoints) - home), axis=0)
    assert np.all(moved > 0.05)
    shifted = home + 0.1
    other = load_config(
        overrides={"home_positions": [*shifted, *config.home_positions[len(arm) :]]}
    )
    assert not np.allclose(scripted_waypoints(model, other)[0], waypoints[0])
