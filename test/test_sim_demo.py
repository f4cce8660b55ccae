"""ct_controllers.sim_demo: the scripted motion behind ``make sim``, whole stack in lockstep."""

from __future__ import annotations

import numpy as np
import pytest

from ct_controllers.config import load_config
from ct_controllers.sim_demo import (
    FINAL_ERROR_LIMIT,
    MOVE_TIME,
    SETTLE_TIME,
    WAYPOINTS,
    SimSummary,
    run_scripted_motion,
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
    assert summary.waypoints == len(WAYPOINTS) + 1


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
