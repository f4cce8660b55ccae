"""ct_controllers.hardware.watchdog: the state and command deadlines on an explicit clock."""

from __future__ import annotations

import math

import pytest

from ct_controllers.hardware.watchdog import COMMAND, STATE, Watchdog, WatchdogConfig


def test_state_deadline_expires_after_state_timeout_without_fresh_state():
    """Fresh state within state_timeout keeps it quiet; silence longer than state_timeout
    expires it, reporting the silence and the time of the last fresh state."""
    watchdog = Watchdog(WatchdogConfig(state_timeout=0.003, command_timeout=1.0))
    watchdog.start(10.0)
    for k in range(1, 10):
        watchdog.state_fresh(10.0 + 0.001 * k)
        watchdog.command_written(10.0 + 0.001 * k)
        assert watchdog.check(10.0 + 0.001 * k) is None
    assert watchdog.check(10.009 + 0.003) is None  # exactly at the deadline: not yet
    expiry = watchdog.check(10.009 + 0.0031)
    assert expiry is not None and expiry.deadline == STATE
    assert expiry.since == pytest.approx(10.009)
    assert expiry.silence == pytest.approx(0.0031)
    assert "no fresh state for 3.100 ms" in expiry.message
    assert watchdog.expiries[STATE] == 1


def test_command_deadline_expires_without_writes():
    """With fresh state but no command written for longer than command_timeout, the command
    deadline expires; check_command=False ignores it."""
    watchdog = Watchdog(WatchdogConfig(state_timeout=1.0, command_timeout=0.002))
    watchdog.start(0.0)
    watchdog.state_fresh(0.004)
    assert watchdog.check(0.004, check_command=False) is None
    expiry = watchdog.check(0.004)
    assert expiry is not None and expiry.deadline == COMMAND
    assert "no fresh command" in expiry.message


def test_a_source_that_never_delivers_expires_from_start():
    """The deadlines run from start(): a source that never delivers expires too."""
    watchdog = Watchdog(WatchdogConfig(state_timeout=0.003, command_timeout=0.003))
    watchdog.start(5.0)
    assert watchdog.check(5.002) is None
    expiry = watchdog.check(5.004)
    assert expiry is not None and expiry.deadline == STATE


def test_disabled_watchdog_never_expires():
    """enabled=False: nothing expires however long the silence."""
    watchdog = Watchdog(WatchdogConfig(enabled=False))
    watchdog.start(0.0)
    assert watchdog.check(1e6) is None


def test_default_timeouts_are_three_periods_and_invalid_ones_are_named():
    """for_period gives 3 control periods where a timeout is 0; non-positive or non-finite
    timeouts are refused naming the parameter."""
    config = WatchdogConfig.for_period(0.002)
    assert config.state_timeout == pytest.approx(0.006)
    assert config.command_timeout == pytest.approx(0.006)
    assert WatchdogConfig.for_period(0.002, state_timeout=0.05).state_timeout == 0.05
    with pytest.raises(ValueError, match=r"watchdog\.state_timeout"):
        WatchdogConfig(state_timeout=-1.0)
    with pytest.raises(ValueError, match=r"watchdog\.command_timeout"):
        WatchdogConfig(command_timeout=math.inf)


def test_state_deadline_is_the_time_the_state_deadline_expires():
    """state_deadline() is the last fresh state's time + state_timeout (+ the 1 ns slack): a
    check just after it expires, one at it does not; inf when the watchdog is off."""
    watchdog = Watchdog(WatchdogConfig(state_timeout=0.03, command_timeout=1.0))
    watchdog.start(2.0)
    watchdog.state_fresh(2.5)
    deadline = watchdog.state_deadline()
    assert deadline == pytest.approx(2.53)
    assert watchdog.check(deadline, check_command=False) is None
    assert watchdog.check(deadline + 1e-6, check_command=False) is not None
    assert Watchdog(WatchdogConfig(enabled=False)).state_deadline() == math.inf
