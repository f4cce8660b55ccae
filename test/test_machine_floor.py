"""ct_controllers.bench.machine_floor: the bare paced loop does a fixed amount of work per tick,
calibrated to the requested median, counts its ticks and overruns by the control loop's rule,
and sees the time its thread is kept off the CPU (here: by another Python thread holding the
GIL)."""

from __future__ import annotations

import sys
import threading

import pytest

from ct_controllers.bench.machine_floor import FloorRun, paced_floor
from ct_controllers.runtime.timing import is_overrun


def test_each_tick_does_its_work_and_every_tick_is_counted():
    """At 1 kHz for 0.5 s with 0.3 ms of work: 500 ticks of a fixed number of chunks whose
    median duration is the work (within a factor of 3: on this VM the calibration has been seen
    0.6-1.5x off when the machine's speed changed between it and the run), jitter and compute
    percentiles in order, normal scheduling when none is asked for."""
    run = paced_floor(1000.0, 3e-4, 0.5)
    assert run.ticks == 500 and run.chunks >= 1
    assert 1e-4 <= run.compute.p50 <= 9e-4
    assert run.compute.p50 <= run.compute.p99 <= run.compute.max
    assert 0 <= run.jitter.p50 <= run.jitter.p99 <= run.jitter.max
    assert 0 <= run.stall_max <= run.compute.max
    assert run.scheduling.startswith("SCHED_OTHER")


def test_the_work_per_tick_grows_with_the_requested_work():
    """Three times the work is more chunks per tick (about three times, within the
    calibration's noise on this machine); no work is no chunk."""
    one = paced_floor(1000.0, 1e-4, 0.05).chunks
    three = paced_floor(1000.0, 3e-4, 0.05).chunks
    assert 1.2 <= three / one <= 8.0
    assert paced_floor(1000.0, 0.0, 0.05).chunks == 0


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
    """A stack twice slower than its period makes a floor of the same work: every tick
    overruns."""
    run = paced_floor(500.0, 4e-3, 0.02)
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


def test_given_chunks_are_used_as_is_and_segments_merge():
    """An earlier run's chunk count is reused without calibration (the same work in every
    segment); merged segments add their ticks and overruns and pool their samples."""
    first = paced_floor(1000.0, 2e-4, 0.05)
    second = paced_floor(1000.0, 2e-4, 0.03, chunks=first.chunks)
    assert second.chunks == first.chunks and second.ticks == 30
    merged = FloorRun.merge([first, second])
    assert merged.ticks == 80 and merged.overruns == first.overruns + second.overruns
    assert merged.compute.max == max(first.compute.max, second.compute.max)
    assert merged.chunks == first.chunks and merged.as_dict()["ticks"] == 80


def test_negative_chunks_are_refused_by_name():
    """A negative chunk count raises naming it."""
    with pytest.raises(ValueError, match="chunks"):
        paced_floor(100.0, 0.0, 1.0, chunks=-1)
