"""Goals at a joint limit end within it (issue 13, item 5): the reference plans them
``LIMIT_MARGIN`` inside the range and brakes towards a near limit gently
(:mod:`ct_controllers.references.limit_approach`), so the arm, tracking it with either controller,
never passes the limit, and still ends within MoveJoints' success tolerance of the goal.

The planner's part is checked by sampling the reference; the whole property on the real stack
(``build_stack``: MuJoCo lockstep, Pinocchio, the controllers of controllers.yaml, the limiter),
sampling the measured position every tick. There MuJoCo's joint-range constraint is switched
off: it is a soft stop that catches an arm running past the limit about 2 mrad beyond it, which
would hide most of an overshoot (22 mrad without the approach, arm stretched) behind the sim's
own stop; the property is the controller's and the reference's, not the simulator's."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from helpers import bundled_description, lockstep_config

from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.references.joint_trajectory import JerkLimitedTrajectory, JointLimits
from ct_controllers.references.limit_approach import (
    LIMIT_APPROACH_DECELERATION,
    LIMIT_MARGIN,
    LimitApproach,
)
from ct_controllers.runtime.control_loop import SUCCEEDED
from ct_controllers.runtime.stack import Stack, build_stack

CONFIG = lockstep_config()
ARM = CONFIG.arm_joints
GOAL_TOLERANCE = 0.01  # [rad] MoveJoints' success tolerance (ros/move_joints.py GOAL_TOLERANCE)
SETTLE = 1.0  # [s] watched after each trajectory ends
# Per arm joint, the configuration [rad] (arm_joints order) its moves to both limits start from:
# the joint itself at 0, the others where its inertia is large (the arm's lead on a braking
# reference grows with M_ii) and where no link meets the table or the floor at either limit.
START = {
    "joint1": (0.0, 1.2, 0.0, -0.3, 0.0, 0.0, 0.0),  # stretched out: M₁₁ = 4.1 kg·m²
    "joint2": (1.5708, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),  # straight, tilting sideways of the table
    "joint3": (0.0, 0.0, 0.0, -1.6, 0.0, 0.0, 0.0),  # forearm horizontal
    "joint4": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "joint5": (0.0, 0.0, 0.0, -1.6, 0.0, 1.5, 0.0),  # hand sticking out of the forearm axis
    "joint6": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "joint7": (0.0, 0.4, 0.0, -1.6, 0.0, 1.2, 0.0),
}

# --- the planner ---------------------------------------------------------------------------
N = 3
LOWER, UPPER = np.full(N, -2.0), np.full(N, 2.0)
BOUNDS = dict(velocity=np.full(N, 1.0), acceleration=np.full(N, 3.0), jerk=np.full(N, 30.0))
PLAIN = JointLimits(**BOUNDS)
# Joints 0 and 1 have an approach, joint 2 (a finger, say) none.
APPROACHING = JointLimits(
    **BOUNDS, approach=LimitApproach.for_joints(LOWER, UPPER, np.array([True, True, False]))
)
STEP = 1e-3  # [s]


def sampled(trajectory: JerkLimitedTrajectory) -> tuple[np.ndarray, np.ndarray]:
    """Positions and accelerations every ``STEP`` over the trajectory."""
    times = trajectory.start_time + np.arange(0.0, trajectory.duration + STEP, STEP)
    samples = [trajectory.sample(t) for t in times]
    return np.array([s.q for s in samples]), np.array([s.a for s in samples])


def test_a_goal_at_a_limit_is_planned_the_margin_inside_it() -> None:
    """Goals at (or within the margin of) a limit are planned ``LIMIT_MARGIN`` inside it and the
    reference never leaves that; goals further inside, and joints without an approach, keep
    their goal exactly."""
    goal = np.array([2.0, -2.0 + LIMIT_MARGIN / 2, 2.0])
    trajectory = JerkLimitedTrajectory(0.0, np.zeros(N), np.zeros(N), goal, APPROACHING)
    expected = np.array([2.0 - LIMIT_MARGIN, -2.0 + LIMIT_MARGIN, 2.0])
    np.testing.assert_allclose(trajectory.goal, expected, atol=1e-12)
    q, _ = sampled(trajectory)
    assert q[:, 0].max() <= 2.0 - LIMIT_MARGIN + 1e-9
    assert q[:, 1].min() >= -2.0 + LIMIT_MARGIN - 1e-9
    np.testing.assert_allclose(trajectory.sample(trajectory.duration).q, expected, atol=1e-9)
    inside = np.array([1.9, -1.5, 0.3])
    kept = JerkLimitedTrajectory(0.0, np.zeros(N), np.zeros(N), inside, APPROACHING)
    np.testing.assert_array_equal(kept.goal, inside)


def test_braking_towards_a_near_limit_is_gentle_speeding_up_is_not() -> None:
    """Towards a limit its goal is near, a joint decelerates with at most
    ``LIMIT_APPROACH_DECELERATION`` and still speeds up with the full reference acceleration;
    a joint without an approach keeps the full bounds."""
    goal = np.array([2.0, -2.0, 2.0])
    trajectory = JerkLimitedTrajectory(0.0, np.zeros(N), np.zeros(N), goal, APPROACHING)
    _, a = sampled(trajectory)
    assert a[:, 0].min() >= -LIMIT_APPROACH_DECELERATION - 1e-9  # braking upwards
    assert a[:, 0].max() == pytest.approx(3.0, abs=1e-6)  # speeding up
    assert a[:, 1].max() <= LIMIT_APPROACH_DECELERATION + 1e-9  # braking downwards
    assert a[:, 1].min() == pytest.approx(-3.0, abs=1e-6)
    assert a[:, 2].min() < -LIMIT_APPROACH_DECELERATION  # no approach: brakes harder


def test_goals_away_from_the_limits_are_planned_as_without_an_approach() -> None:
    """Outside ``margin · a_max / deceleration`` of the limits nothing changes: same goal,
    same duration, same reference."""
    rng = np.random.default_rng(3)
    for _ in range(5):
        q0, goal = rng.uniform(-1.9, 1.9, N), rng.uniform(-1.9, 1.9, N)
        with_approach = JerkLimitedTrajectory(0.0, q0, np.zeros(N), goal, APPROACHING)
        plain = JerkLimitedTrajectory(0.0, q0, np.zeros(N), goal, PLAIN)
        assert with_approach.duration == plain.duration
        for t in np.linspace(0.0, plain.duration, 7):
            np.testing.assert_array_equal(with_approach.sample(t).q, plain.sample(t).q)


def test_gentle_braking_is_dropped_where_it_would_carry_the_reference_past_the_goal() -> None:
    """A joint already moving fast towards a limit its new goal is close to could not stop
    there braking gently: it is planned with the reference's own deceleration, so the
    approach never makes the reference go further than it would without it."""
    q0 = np.array([1.8, 0.0, 0.0])
    # 0.195 rad before the planned goal: 0.15 rad to brake at 3 rad/s², 1.1 rad at 0.3 rad/s².
    v0 = np.array([0.8, 0.0, 0.0])
    goal = np.array([2.0, 0.0, 0.0])
    trajectory = JerkLimitedTrajectory(0.0, q0, v0, goal, APPROACHING)
    assert trajectory.goal[0] == 2.0 - LIMIT_MARGIN
    plain = JerkLimitedTrajectory(0.0, q0, v0, trajectory.goal, PLAIN)
    q, _ = sampled(trajectory)
    q_plain, _ = sampled(plain)
    assert q[:, 0].max() == pytest.approx(q_plain[:, 0].max(), abs=1e-12)
    assert q[:, 0].max() <= trajectory.goal[0] + 1e-9
    assert trajectory.duration == plain.duration


def test_an_approach_must_fit_the_joints_and_its_ranges() -> None:
    """Mismatched lengths, a negative margin, a margin on an unbounded range or wider than half
    the range are configuration errors."""
    with pytest.raises(ValueError, match="limit approach for 2 joints"):
        JointLimits(
            **BOUNDS,
            approach=LimitApproach.for_joints(LOWER[:2], UPPER[:2], np.ones(2, dtype=bool)),
        )
    for margin, lower in ((-1e-3, LOWER), (1.0, np.full(N, 0.0)), (0.005, np.full(N, -np.inf))):
        with pytest.raises(ValueError, match="margin"):
            LimitApproach(lower, UPPER, np.full(N, margin), np.full(N, 1.0))
    unbounded = LimitApproach.for_joints(np.full(N, -np.inf), UPPER, np.ones(N, dtype=bool))
    np.testing.assert_array_equal(unbounded.margin, 0.0)  # no margin where there is no range


# --- the stack, MuJoCo lockstep ------------------------------------------------------------
def new_stack(controller: str, sim_joint_limits: bool) -> Stack:
    stack = build_stack(CONFIG, bundled_description())
    stack.bring_up()
    stack.loop.controller = stack.controllers[controller]  # before the first tick
    stack.loop.snapshot_decimation = 1  # every tick's measured position
    if not sim_joint_limits:
        assert isinstance(stack.hardware, MujocoSystem) and stack.hardware.model is not None
        stack.hardware.model.jnt_limited[:] = 0  # no joint-range constraint rows from now on
    return stack


@pytest.fixture(params=["joint_impedance", "computed_torque"])
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    stack = new_stack(request.param, sim_joint_limits=False)
    try:
        yield stack
    finally:
        stack.shut_down()


def move(
    stack: Stack, names: tuple[str, ...], goal: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run a motion to ``goal`` and ``SETTLE`` s more; (lowest, highest) measured position per
    joint over all of it, and the position on the first tick the motion reports SUCCEEDED (when
    MoveJoints first compares it with its tolerance)."""
    loop = stack.loop
    motion_id = loop.request_motion(names, goal)
    loop.run_ticks(1)
    snapshot = loop.snapshot()
    assert snapshot is not None and snapshot.motion is not None
    assert snapshot.motion.motion_id == motion_id
    lowest, highest = snapshot.position.copy(), snapshot.position.copy()
    at_success = None
    for _ in range(round((snapshot.motion.duration + SETTLE) / CONFIG.period)):
        loop.run_ticks(1)
        snapshot = loop.snapshot()
        assert snapshot is not None and snapshot.fault is None, snapshot
        np.minimum(lowest, snapshot.position, out=lowest)
        np.maximum(highest, snapshot.position, out=highest)
        assert snapshot.motion is not None
        if at_success is None and snapshot.motion.state == SUCCEEDED:
            at_success = snapshot.position.copy()
    assert at_success is not None, "the motion did not end"
    return lowest, highest, at_success


def test_goals_at_every_arm_joint_limit_end_within_it(stack: Stack) -> None:
    """For every arm joint, from rest at ``START``: a move to its lower limit, then across the
    whole range to its upper one. The measured position (every tick, through the motion and
    ``SETTLE`` s after) never passes the limit, and when the motion reports SUCCEEDED it is within
    MoveJoints' tolerance of the goal. Measured (printed): joint impedance runs 2.0–2.2 mrad
    past the planned goal with joints 1–2 (ending ≥ 2.8 mrad inside the limit; 22–25 mrad past
    the limit without the approach), computed torque stays on it (5.0 mrad inside)."""
    model = stack.model
    name = type(stack.loop.controller).__name__
    for joint in ARM:
        i = model.q_index(joint)
        move(stack, ARM, START[joint])
        for side, limit in ((-1, model.limits.lower[i]), (1, model.limits.upper[i])):
            lowest, highest, at_success = move(stack, (joint,), (limit,))
            furthest = highest[i] if side > 0 else lowest[i]
            past = side * (furthest - limit)
            error = abs(at_success[i] - limit)
            print(
                f"{name} {joint} {'upper' if side > 0 else 'lower'} limit {limit:+.3f}: "
                f"furthest {furthest:+.5f} rad ({past * 1e3:+.2f} mrad past the limit), "
                f"error at SUCCEEDED {error * 1e3:.2f} mrad"
            )
            assert past <= 0.0, f"{joint} passed its limit {limit} by {past * 1e3:.3f} mrad"
            assert error <= GOAL_TOLERANCE, f"{joint}: {error * 1e3:.2f} mrad from the goal"


@pytest.mark.parametrize("controller", ["joint_impedance", "computed_torque"])
def test_the_reported_goal_joint1_at_its_upper_limit_from_home(controller: str) -> None:
    """The issue's case as ct-bringup sim runs it (MuJoCo's joint-range constraint on): joint1
    to exactly 2.967 rad from home reached 2.9689 rad before; now it stays below 2.967 and ends
    within the tolerance."""
    stack = new_stack(controller, sim_joint_limits=True)
    try:
        i = stack.model.q_index("joint1")
        assert stack.model.limits.upper[i] == 2.967
        _, highest, at_success = move(stack, ("joint1",), (2.967,))
        print(f"{controller}: joint1 highest {highest[i]:.5f} rad, at SUCCEEDED {at_success[i]}")
        assert highest[i] <= 2.967
        assert abs(at_success[i] - 2.967) <= GOAL_TOLERANCE
    finally:
        stack.shut_down()
