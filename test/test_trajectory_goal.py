"""FollowJointTrajectory goals checked as joint_trajectory_controller checks them (plus NaN,
joint limits and URDF velocities): each bad goal is refused with a message naming its problem;
a good one comes back in the controller's joint order; goal tolerances follow control_msgs'
JointTolerance rules (> 0 replaces, 0 keeps the default, −1 erases, other negatives refused)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from ct_controllers.references.trajectory_goal import (
    MAX_POINTS,
    GoalPoint,
    GoalTolerance,
    JointBounds,
    StateTolerance,
    Tolerances,
    TrajectoryRejected,
    check_trajectory,
    resolve_tolerances,
    violations,
)

JOINTS = ("a", "b", "c")
BOUNDS = {
    "a": JointBounds(-1.0, 1.0, 2.0),
    "b": JointBounds(-2.0, 2.0, 1.0),
    "c": JointBounds(-math.inf, math.inf, 3.0),  # continuous
}


def check(names, points, stamp=0.0, now=100.0, partial=False, nonzero_end=False):
    return check_trajectory(
        names,
        points,
        JOINTS,
        BOUNDS,
        stamp=stamp,
        now=now,
        allow_partial_joints_goal=partial,
        allow_nonzero_velocity_at_trajectory_end=nonzero_end,
    )


GOOD = [GoalPoint(0.5, [0.1, 0.2, 5.0]), GoalPoint(1.0, [0.2, 0.1, 6.0], [0.0, 0.0, 0.0])]


@pytest.mark.parametrize(
    ("names", "points", "keywords", "message"),
    [
        ([], GOOD, {}, "names no joints"),
        (list(JOINTS), [], {}, "has no points"),
        (["a", "b", "x"], GOOD, {}, "unknown joint.*x.*this controller has: a, b, c"),
        (["a", "a", "b"], GOOD, {}, "named twice: a"),
        (["a", "b"], [GoalPoint(1.0, [0.0, 0.0])], {}, "leaves out joint.*c.*allow_partial"),
        (list(JOINTS), [GOOD[1], GOOD[0]], {}, "point 1.*not later than point 0"),
        (list(JOINTS), [GOOD[0], GoalPoint(0.5, [0, 0, 0])], {}, "point 1.*strictly increase"),
        (list(JOINTS), [GoalPoint(1.0, [0.0, 0.0])], {}, "point 0: 2 positions for 3"),
        (list(JOINTS), [GoalPoint(1.0, [0, 0, 0], [0.0])], {}, "1 velocities for 3.*or none"),
        (list(JOINTS), [GoalPoint(1.0, [0, 0, 0], effort=[1, 1, 1])], {}, "effort"),
        (list(JOINTS), [GoalPoint(1.0, [0, math.nan, 0])], {}, "non-finite positions for b"),
        (list(JOINTS), [GoalPoint(1.0, [0, 0, 0], [0, 0, math.inf])], {}, "velocities for c"),
        (list(JOINTS), [GoalPoint(1.0, [1.5, 0, 0])], {}, "a position 1.5 is outside"),
        (list(JOINTS), [GoalPoint(1.0, [0, 0, 0], [0, 1.5, 0])], {}, "b velocity 1.5 exceeds"),
        (list(JOINTS), [GoalPoint(1.0, [0, 0, 0], [0.5, 0, 0])], {}, "last point's velocity.*a"),
        (list(JOINTS), [GoalPoint(math.nan, [0, 0, 0])], {}, "time_from_start nan"),
        (list(JOINTS), GOOD, {"stamp": 90.0}, "ended 9.000 s ago"),
    ],
)
def test_a_bad_goal_is_refused_naming_its_problem(names, points, keywords, message) -> None:
    """Each case of JTC's and ours raises TrajectoryRejected with a message naming it."""
    with pytest.raises(TrajectoryRejected, match=message):
        check(names, points, **keywords)


def test_oversized_goals_are_refused_before_their_elements_are_looked_at() -> None:
    """10⁵ joint names (all the same: the repeat check is quadratic in Python) and more than
    MAX_POINTS points are refused on their sizes, in milliseconds, not checked one by one."""
    names = ["a"] * 100_000
    points = [GoalPoint(0.001 * (i + 1), [0.0, 0.0, 0.0]) for i in range(MAX_POINTS + 1)]
    started = time.perf_counter()
    with pytest.raises(TrajectoryRejected, match="100000 joint names; this controller has 3"):
        check(names, GOOD)
    with pytest.raises(TrajectoryRejected, match=f"{MAX_POINTS + 1} points; at most"):
        check(list(JOINTS), points)
    # Checked one by one, the names alone took about 30 s (list.count per name): 2 s is a
    # bound a loaded machine meets and a quadratic check cannot.
    assert time.perf_counter() - started < 2.0


def test_a_good_goal_comes_back_in_the_controllers_order() -> None:
    """Names in another order (c, a, b): the waypoints' columns are in the controller's order,
    velocities only where the point gave them; stamp 0 starts now, a future stamp then; a
    continuous joint takes any position; partial goals when allowed name only their joints;
    a nonzero last velocity when allowed passes."""
    checked = check(
        ["c", "a", "b"],
        [GoalPoint(0.5, [7.0, 0.1, 0.2]), GoalPoint(1.0, [8.0, 0.3, 0.4], [0.0, 0.0, 0.0])],
    )
    assert checked.joints == JOINTS and checked.start_time == 100.0
    np.testing.assert_array_equal(checked.waypoints[0].positions, [0.1, 0.2, 7.0])
    assert checked.waypoints[0].velocities is None
    np.testing.assert_array_equal(checked.waypoints[1].velocities, [0.0, 0.0, 0.0])
    assert check(list(JOINTS), GOOD, stamp=104.0).start_time == 104.0
    partial = check(["b"], [GoalPoint(1.0, [0.5], [0.2])], partial=True, nonzero_end=True)
    assert partial.joints == ("b",)


def test_goal_tolerances_follow_the_joint_tolerance_rules() -> None:
    """Defaults a: path 0.1, goal 0.05; a goal giving a path 0.2 (replaces), a goal 0 (keeps
    the default), b path −1 (erased: not checked) and goal_time 0 (the default 2 s kept);
    −2 is illegal; an unknown joint is refused. violations() names what exceeds its bound."""
    defaults = Tolerances(
        path={"a": StateTolerance(0.1), "b": StateTolerance(0.1)},
        goal={"a": StateTolerance(0.05, 0.01)},
        goal_time=2.0,
    )
    resolved = resolve_tolerances(
        defaults,
        [GoalTolerance("a", 0.2), GoalTolerance("b", -1.0)],
        [GoalTolerance("a", 0.0)],
        0.0,
        JOINTS,
    )
    assert resolved.path["a"].position == 0.2 and resolved.path["b"].position == 0.0
    assert resolved.goal["a"] == StateTolerance(0.05, 0.01)
    assert resolved.goal_time == 2.0
    assert resolve_tolerances(defaults, [], [], 0.5, JOINTS).goal_time == 0.5
    with pytest.raises(TrajectoryRejected, match=r"path_tolerance of a: position -2\.0 is illegal"):
        resolve_tolerances(defaults, [GoalTolerance("a", -2.0)], [], 0.0, JOINTS)
    with pytest.raises(TrajectoryRejected, match="unknown joint 'x'"):
        resolve_tolerances(defaults, [], [GoalTolerance("x", 0.1)], 0.0, JOINTS)
    errors = np.array([0.15, 5.0, 9.0])
    assert violations(resolved.path, JOINTS, errors, np.zeros(3)) == []
    assert violations(defaults.path, JOINTS, errors, np.zeros(3)) == [
        "a position error 0.15 > 0.1",
        "b position error 5 > 0.1",
    ]
    assert violations(defaults.goal, JOINTS, np.zeros(3), np.array([0.02, 0, 0])) == [
        "a velocity error 0.02 > 0.01"
    ]
