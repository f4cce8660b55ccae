"""ct_controllers.runtime.loop_snapshot: the snapshot board other threads wait on."""

from __future__ import annotations

import threading
import time

import numpy as np

from ct_controllers.runtime.loop_snapshot import LoopSnapshot, SnapshotBoard


def snapshot(tick: int) -> LoopSnapshot:
    zeros = np.zeros(2)
    return LoopSnapshot(
        tick, 0.001 * tick, ("a", "b"), zeros, zeros, zeros, zeros, zeros, zeros, None, None
    )


def test_a_waiter_gets_the_first_snapshot_newer_than_its_tick():
    """wait(after_tick) returns once a newer snapshot is published, not before."""
    board = SnapshotBoard()
    board.publish(snapshot(10))
    publisher = threading.Timer(0.02, board.publish, args=(snapshot(20),))
    publisher.start()
    got = board.wait(10, 2.0, lambda: False)
    publisher.join()
    assert got is not None and got.tick == 20
    assert board.latest() is got


def test_a_waiter_returns_at_its_timeout_or_at_once_when_the_loop_stopped():
    """No newer snapshot: the latest after ``timeout``; stopped(): at once."""
    board = SnapshotBoard()
    board.publish(snapshot(5))
    started = time.monotonic()
    assert board.wait(5, 0.05, lambda: False).tick == 5  # type: ignore[union-attr]
    assert time.monotonic() - started >= 0.04
    started = time.monotonic()
    assert board.wait(5, 5.0, lambda: True).tick == 5  # type: ignore[union-attr]
    assert time.monotonic() - started < 1.0
