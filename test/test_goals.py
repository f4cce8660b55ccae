"""ct_controllers.ros.goals.GoalArbiter: one current goal; taking over the loop and becoming
current happen together, so two goals starting at once cannot interleave."""

from __future__ import annotations

import threading
import time

import pytest

from ct_controllers.ros.goals import GoalArbiter


def test_the_current_goal_is_the_one_that_took_over_last_even_when_starts_overlap():
    """While goal A is inside its take-over, goal B's start waits: B's take-over runs after A's
    has returned, never during it, and B (the last to take over the loop) is the current one."""
    arbiter = GoalArbiter()
    order: list[str] = []
    inside_a = threading.Event()
    b_starting = threading.Event()
    overlapped: list[bool] = []
    tokens: dict[str, int] = {}

    def take_over_a() -> str:
        inside_a.set()
        assert b_starting.wait(5.0)
        time.sleep(0.05)  # B is now blocked in start(), not running its take-over
        order.append("A")
        return "motion A"

    def take_over_b() -> str:
        overlapped.append(len(order) == 0)  # A's take-over not finished?
        order.append("B")
        return "motion B"

    def start_a() -> None:
        tokens["A"], _ = arbiter.start(take_over_a)

    thread = threading.Thread(target=start_a)
    thread.start()
    assert inside_a.wait(5.0)
    b_starting.set()
    tokens["B"], motion = arbiter.start(take_over_b)
    thread.join(5.0)
    assert order == ["A", "B"] and overlapped == [False] and motion == "motion B"
    assert arbiter.is_current(tokens["B"]) and not arbiter.is_current(tokens["A"])


def test_a_failed_take_over_changes_nothing():
    """A take-over that raises propagates its exception; the goal that was current stays so."""
    arbiter = GoalArbiter()
    token, _ = arbiter.start(lambda: None)

    def invalid() -> None:
        raise ValueError("position outside the joint limits")

    with pytest.raises(ValueError, match="joint limits"):
        arbiter.start(invalid)
    assert arbiter.is_current(token)
    arbiter.finish(token)
    assert not arbiter.is_current(token)


def test_the_target_is_the_current_goals_until_it_ends_or_is_preempted():
    """target() is the current goal's TCP target as a copy (changing it changes nothing
    inside); a goal without a target (MoveJoints) preempting one clears it, and so does the end
    of the goal that set it; a provider answering None (a grasp holding) gives None."""
    import numpy as np

    arbiter = GoalArbiter()
    assert arbiter.target() is None
    pose = np.eye(4)
    pose[:3, 3] = [0.4, 0.1, 0.3]
    first, _ = arbiter.start(lambda: None, target=lambda: pose)
    seen = arbiter.target()
    assert np.array_equal(seen, pose)
    seen[0, 3] = 9.0
    assert arbiter.target()[0, 3] == 0.4
    arbiter.start(lambda: None)  # preempted by a goal with no pose target
    assert arbiter.target() is None
    arbiter.finish(first)  # the preempted goal ending later changes nothing
    third, _ = arbiter.start(lambda: None, target=lambda: None)
    assert arbiter.target() is None
    fourth, _ = arbiter.start(lambda: None, target=lambda: pose)
    arbiter.finish(third)
    assert arbiter.target() is not None
    arbiter.finish(fourth)
    assert arbiter.target() is None


def test_a_result_timeout_that_is_not_a_positive_finite_time_is_refused():
    """GoalArbiter's result_timeout (how long every action server keeps a finished goal's
    result): 0, negative, NaN and infinite are refused with a message naming the value; a
    positive one is kept as given, and the default is rclpy's 900 s."""
    import pytest

    from ct_controllers.ros.goals import RESULT_TIMEOUT

    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=f"result timeout must be finite and > 0 s, got {bad}"):
            GoalArbiter(bad)
    assert GoalArbiter(2.5).result_timeout == 2.5
    assert GoalArbiter().result_timeout == RESULT_TIMEOUT == 900.0
