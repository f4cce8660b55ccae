"""ct_controllers.runtime.loop_requests: the control loop's inbox on its own."""

from __future__ import annotations

import threading

import numpy as np

from ct_controllers.runtime.loop_requests import LoopRequests


def test_take_returns_what_was_posted_once_and_empties_the_inbox():
    """Posted motion, hold, reset, controller and the safe hold's model come out of one
    take(), and not again; ``waiting`` says whether anything is there."""
    requests = LoopRequests()
    assert not requests.waiting
    controller, hold_model = object(), object()
    motion_id = requests.post_motion(np.array([1]), np.array([0.3]), 2.0)
    requests.post_reset()
    requests.post_controller(controller)  # type: ignore[arg-type]
    requests.post_hold_model(hold_model)  # type: ignore[arg-type]
    assert requests.waiting
    motion, hold, reset, switched, model = requests.take()
    assert motion is not None and motion.motion_id == motion_id and motion.duration == 2.0
    assert (hold, reset, switched, model) == (False, True, controller, hold_model)
    assert not requests.waiting
    assert requests.take() == (None, False, False, None, None)


def test_motion_ids_increase_and_a_newer_motion_replaces_one_not_taken():
    """Ids are 1, 2, ...; only the latest motion posted before a take is taken."""
    requests = LoopRequests()
    first = requests.post_motion(np.array([0]), np.array([0.1]), 0.0)
    second = requests.post_motion(np.array([0]), np.array([0.2]), 0.0)
    assert (first, second) == (1, 2)
    motion = requests.take()[0]
    assert motion is not None and motion.motion_id == 2


def test_a_hold_drops_a_motion_not_yet_taken():
    """post_hold() after post_motion(): the take has the hold and no motion."""
    requests = LoopRequests()
    requests.post_motion(np.array([0]), np.array([0.1]), 0.0)
    requests.post_hold()
    motion, hold, _, _, _ = requests.take()
    assert motion is None and hold


def test_a_reset_waiter_wakes_when_the_reset_is_acknowledged():
    """wait_for_reset(mark) returns True once a reset after the mark is acknowledged, and
    False after its timeout when none is."""
    requests = LoopRequests()
    mark = requests.resets_processed
    assert not requests.wait_for_reset(mark, 0.01)
    requests.post_reset()
    acknowledger = threading.Timer(0.02, requests.acknowledge_reset)
    acknowledger.start()
    assert requests.wait_for_reset(mark, 2.0)
    acknowledger.join()
    assert requests.resets_processed == mark + 1
