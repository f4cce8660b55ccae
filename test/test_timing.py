"""The loop's timing records (ct_controllers.runtime.timing)."""

from __future__ import annotations

import numpy as np

from ct_controllers.runtime.timing import StageRecorder, TimingRecorder


def test_stage_recorder_lists_only_stages_that_ran() -> None:
    """Rings allocated up front for named stages are not reported until a stage records: the
    summary and ``stages`` list what ran, in the order given; an unnamed stage gets its ring on
    first use; samples come back as recorded."""
    recorder = StageRecorder(capacity=8, stages=("read", "task", "write"))
    assert recorder.stages == () and recorder.summary() == {}
    assert recorder.samples("task").size == 0
    recorder.record("write", 3e-6)
    recorder.record("read", 1e-6)
    recorder.record("extra", 2e-6)
    assert recorder.stages == ("read", "write", "extra")
    assert set(recorder.summary()) == {"read", "write", "extra"}
    np.testing.assert_array_equal(recorder.samples("read"), [1e-6])


def test_stage_recorder_rings_keep_the_last_capacity_samples() -> None:
    """A ring holds the last ``capacity`` samples of its stage, preallocated or not."""
    recorder = StageRecorder(capacity=4, stages=("read",))
    for i in range(10):
        recorder.record("read", float(i))
        recorder.record("other", float(-i))
    assert sorted(recorder.samples("read").tolist()) == [6.0, 7.0, 8.0, 9.0]
    assert sorted(recorder.samples("other").tolist()) == [-9.0, -8.0, -7.0, -6.0]


def test_timing_recorder_starts_empty_and_counts_overruns() -> None:
    """A new recorder reports nothing; each tick records its compute and jitter, and overruns
    are counted as flagged."""
    recorder = TimingRecorder(capacity=16)
    recorder.record(start=1.0, scheduled=1.0, compute=2e-4, overrun=False)
    recorder.record(start=1.0016, scheduled=1.001, compute=3e-4, overrun=True)
    summary = recorder.summary()
    assert summary.ticks == 2 and summary.overruns == 1
    assert summary.compute.max == 3e-4
    np.testing.assert_allclose(summary.jitter.max, 6e-4)
    np.testing.assert_allclose(summary.period.max, 1.6e-3)
