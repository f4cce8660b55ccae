"""ct_controllers.bench.machine_floor: the bare paced loop really spends its work per tick on the
CPU, counts its ticks and overruns by the control loop's rule, and sees the time its thread is
kept off the CPU (here: by another Python thread holding the GIL)."""

from __future__ import annotations

import sys
import threading

import pytest

from ct_controllers.bench.machine_floor import paced_floor
from ct_controllers.runtime.timing import is_overrun


def test_each_tick_spins_its_work_and_every_tick_is_counted():
    """At 200 Hz for 0.2 s with 1 ms of work: 40 ticks, no tick shorter than its work, jitter
    percentiles in order, normal scheduling when none is asked for."""
    run = paced_floor(200.0, 1e-3, 0.2)
    assert run.ticks == 40
    assert run.compute_max >= 1e-3
    assert 0 <= run.jitter.p50 <= run.jitter.p99 <= run.jitter.max
    assert 0 <= run.stall_max <= run.compute_max
    assert run.scheduling.startswith("SCHED_OTHER")


def test_a_thread_kept_off_the_cpu_shows_as_stalls_and_overruns():
    """A second Python thread that never sleeps takes the GIL for a whole switch interval
    (5 ms) whenever the floor thread has to give it up, so ticks of a 200 Hz floor start late
    or are cut by a gap of about that length: overruns are counted and the longest stall or
    lateness is at least 2 ms."""
    previous = sys.getswitchinterval()
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            pass

    sys.setswitchinterval(0.005)
    hog = threading.Thread(target=busy, daemon=True)
    hog.start()
    try:
        run = paced_floor(200.0, 1e-3, 0.5)
    finally:
        stop.set()
        hog.join()
        sys.setswitchinterval(previous)
    assert run.overruns >= 1
    assert max(run.stall_max, run.jitter.max) >= 2e-3


def test_work_longer_than_a_period_overruns_every_tick():
    """A stack slower than its period makes a floor of the same work: every tick overruns."""
    run = paced_floor(500.0, 2.5e-3, 0.02)
    assert run.ticks == 10 and run.overruns == 10


def test_the_overrun_rule_is_the_control_loops():
    """Late by more than the fraction of a period, or computing longer than a period; exactly
    at either bound is not an overrun."""
    assert not is_overrun(0.5e-3, 1e-3, 1e-3, 0.5)
    assert is_overrun(0.51e-3, 0.1e-3, 1e-3, 0.5)
    assert is_overrun(0.0, 1.01e-3, 1e-3, 0.5)


@pytest.mark.parametrize(
    ("rate", "work", "seconds", "named"),
    [(0.0, 0.0, 1.0, "rate"), (100.0, -0.001, 1.0, "work"), (100.0, 0.0, -1.0, "seconds")],
)
def test_bad_arguments_are_refused_by_name(rate, work, seconds, named):
    """A non-positive rate or duration, or negative work, raises naming it."""
    with pytest.raises(ValueError, match=named):
        paced_floor(rate, work, seconds)
