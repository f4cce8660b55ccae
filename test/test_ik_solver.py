"""ct_controllers.ik.solver: candidates with residuals (never bare arrays), joint limits kept
without flips, unreachable targets reported as such, locked joints, option validation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin
import pytest
from helpers import new_robot_model

from ct_controllers.ik import IkOptions, IkResult, IkSolver
from ct_controllers.model.frames import pose_error
from ct_controllers.model.robot import RobotModel, UnknownNameError

FINGERS = {"left_finger_joint": 0.02, "right_finger_joint": 0.02}
TOLERANCE = 1e-5
# Generous: the tests check correctness, not speed (ct-bench ik measures that), and must not
# fail because a shared machine was busy.
BUDGET = 0.1


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return new_robot_model()


@pytest.fixture(scope="module")
def arm(robot: RobotModel) -> np.ndarray:
    return robot.indices([f"joint{i}" for i in range(1, 8)])


def solver_for(robot: RobotModel, **options) -> IkSolver:
    return IkSolver(robot, "tcp", locked=FINGERS, options=IkOptions(time_budget=BUDGET, **options))


def random_arm_configuration(robot, arm, rng, lower=None, upper=None) -> np.ndarray:
    q = robot.neutral()
    q[robot.q_index("left_finger_joint")] = q[robot.q_index("right_finger_joint")] = 0.02
    low = robot.limits.lower[arm] if lower is None else lower
    high = robot.limits.upper[arm] if upper is None else upper
    q[arm] = rng.uniform(low, high)
    return q


def assert_converged_within_limits(robot, result: IkResult, target: np.ndarray) -> None:
    """Converged by an independent FK (every component ≤ TOLERANCE), the reported residual is
    that error, and q is within the joint limits."""
    assert result.converged, (result.position_error, result.orientation_error)
    error = pose_error(robot.frame_pose(result.q), target)
    assert np.abs(error).max() <= TOLERANCE
    np.testing.assert_allclose(error[:3], result.position_error, atol=1e-12)
    np.testing.assert_allclose(error[3:], result.orientation_error, atol=1e-12)
    assert np.all(result.q >= robot.limits.lower) and np.all(result.q <= robot.limits.upper)


def test_random_reachable_targets_are_solved_within_limits(robot, arm):
    """TRAC-IK protocol in small: 60 random targets (FK of random in-limit configurations),
    nominal seed. Every result converges; the pose error re-computed from the returned q by an
    independent FK is within 1e-5 per component and equals the reported residual; q is within
    the joint limits and the fingers stay at their locked value."""
    solver = solver_for(robot)
    rng = np.random.default_rng(21)
    for _ in range(60):
        target = robot.frame_pose(random_arm_configuration(robot, arm, rng))
        result = solver.solve(target)
        assert isinstance(result, IkResult)
        assert_converged_within_limits(robot, result, target)
        assert result.q[robot.q_index("left_finger_joint")] == 0.02
        assert result.joint_names == robot.joint_names


def test_unreachable_target_ends_not_converged_with_its_residual(robot):
    """A target 3 m from the base (the arm reaches about 1.3 m) ends with converged = False
    within the time budget; the reported residual is the one of the returned q, at least the
    distance left beyond the reach, and q is still within the limits."""
    budget = 0.01
    solver = IkSolver(robot, locked=FINGERS, options=IkOptions(time_budget=budget))
    target = np.eye(4)
    target[:3, 3] = [3.0, 0.0, 0.36]
    result = solver.solve(target)
    assert not result.converged
    assert result.position_residual > 3.0 - 1.4
    assert result.iterations > 0 and result.restarts > 0
    assert result.time < budget + 0.02
    error = pose_error(robot.frame_pose(result.q), target)
    np.testing.assert_allclose(error[:3], result.position_error, atol=1e-12)
    assert np.all(result.q >= robot.limits.lower) and np.all(result.q <= robot.limits.upper)


def test_solutions_near_joint_limits_do_not_flip(robot, arm):
    """Targets whose configuration has two joints within 0.02 rad of a limit, seeded 0.05 rad
    away: the bounded, projected LM converges in the first attempt (no restart) to the nearby
    solution — the limits are kept by projection with an acceptance test, not by a clip that
    throws the arm onto another branch."""
    solver = solver_for(robot)
    rng = np.random.default_rng(5)
    lower, upper = robot.limits.lower[arm], robot.limits.upper[arm]
    for _ in range(30):
        q_true = random_arm_configuration(robot, arm, rng, 0.8 * lower, 0.8 * upper)
        for joint in rng.choice(arm, size=2, replace=False):
            at_upper = rng.random() < 0.5
            bound = robot.limits.upper[joint] if at_upper else robot.limits.lower[joint]
            q_true[joint] = bound - np.sign(bound) * rng.uniform(0.0, 0.02)
        target = robot.frame_pose(q_true)
        seed = q_true.copy()
        seed[arm] = np.clip(q_true[arm] + rng.uniform(-0.05, 0.05, arm.size), lower, upper)
        result = solver.solve(target, seed)
        assert result.converged and result.restarts == 0
        assert np.abs(result.q[arm] - q_true[arm]).max() < 0.2


def test_limit_margin_keeps_solutions_inside_the_narrowed_range(robot, arm):
    """With ``limit_margin`` m, every candidate lies in [lower + m, upper − m]: targets of
    random configurations inside that range converge there (also from seeds at the limits);
    a target whose only nearby solutions need a joint at its limit is solved with that joint
    m inside, or reported not converged — never returned outside the narrowed range."""
    margin = 0.05
    solver = solver_for(robot, limit_margin=margin)
    rng = np.random.default_rng(8)
    lower, upper = robot.limits.lower[arm] + margin, robot.limits.upper[arm] - margin
    for _ in range(30):
        target = robot.frame_pose(random_arm_configuration(robot, arm, rng, lower, upper))
        seed = robot.neutral()
        at_lower = rng.random(arm.size) < 0.5
        seed[arm] = np.where(at_lower, robot.limits.lower[arm], robot.limits.upper[arm])
        result = solver.solve(target, seed)
        assert_converged_within_limits(robot, result, target)
        assert np.all(result.q[arm] >= lower - 1e-12) and np.all(result.q[arm] <= upper + 1e-12)
    q = robot.neutral()
    q[arm] = [0.3, 0.5, robot.limits.upper[arm[2]], -1.2, 0.4, 1.0, 0.5]
    result = solver.solve(robot.frame_pose(q), q)
    assert np.all(result.q[arm] >= lower - 1e-12) and np.all(result.q[arm] <= upper + 1e-12)


def test_limit_margin_leaving_no_range_names_the_joints(robot):
    """A margin of half a joint's range or more: ValueError naming the margin and the joints."""
    with pytest.raises(ValueError, match=r"limit_margin 2\.1 leaves no range on .*joint2"):
        solver_for(robot, limit_margin=2.1)


def test_seed_outside_the_limits_is_projected(robot, arm):
    """A seed beyond the limits starts from its projection; the candidate is within limits."""
    solver = solver_for(robot)
    q = robot.neutral()
    q[arm] = [0.3, 0.5, -0.2, -1.2, 0.4, 1.0, 0.5]
    seed = q.copy()
    seed[arm] += 10.0
    result = solver.solve(robot.frame_pose(q), seed)
    assert result.converged
    assert np.all(result.q >= robot.limits.lower) and np.all(result.q <= robot.limits.upper)


def test_result_is_a_frozen_candidate(robot):
    """IkResult is immutable and carries its residuals, iteration and restart counts, time."""
    result = solver_for(robot).solve(robot.frame_pose(solver_for(robot).nominal()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.converged = False  # type: ignore[misc]
    assert result.converged and result.iterations == 0 and result.restarts == 0
    assert result.position_error.shape == (3,) and result.orientation_error.shape == (3,)
    assert 0 < result.time < BUDGET


def test_full_pose_is_solved_for_a_rotated_target(robot, arm):
    """A target whose orientation differs from any seed by a large rotation (≈ 2.5 rad) is
    solved too (the short-arc rotation error converges, not only the position)."""
    q = robot.neutral()
    q[arm] = [1.0, -0.7, 0.9, -1.4, -1.2, 0.8, 2.0]
    target = robot.frame_pose(q)
    nominal_pose = robot.frame_pose(solver_for(robot).nominal())
    angle = np.linalg.norm(pin.log3(target[:3, :3] @ nominal_pose[:3, :3].T))
    assert angle > 1.5
    result = solver_for(robot).solve(target)
    assert result.converged


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("damping", 0.0),
        ("time_budget", -1.0),
        ("position_tolerance", float("nan")),
        ("max_step", 0.0),
        ("damping_increase", 1.0),
        ("damping_decrease", 0.0),
        ("restart_spread", 1.5),
        ("iterations_per_attempt", 0),
        ("max_restarts", -1),
        ("parallel_attempts", 0),
        ("batch_after", -1e-3),
        ("limit_margin", -0.01),
        ("limit_margin", float("inf")),
    ],
)
def test_invalid_options_name_the_parameter(field, value):
    """Each invalid option raises ValueError naming it."""
    with pytest.raises(ValueError, match=field):
        IkOptions(**{field: value})


def test_unknown_names_are_rejected(robot):
    """An unknown frame or locked joint is an UnknownNameError naming it; locking every joint is
    an error; a bad target or seed is rejected with its name."""
    with pytest.raises(UnknownNameError, match="wrist_ghost"):
        IkSolver(robot, "wrist_ghost")
    with pytest.raises(UnknownNameError, match="finger_ghost"):
        IkSolver(robot, locked={"finger_ghost": 0.0})
    with pytest.raises(ValueError, match="nothing to solve"):
        IkSolver(robot, locked={name: 0.0 for name in robot.joint_names})
    solver = solver_for(robot)
    with pytest.raises(ValueError, match="IK target"):
        solver.solve(np.eye(3))
    with pytest.raises(ValueError, match="IK seed"):
        solver.solve(np.eye(4), np.zeros(3))


def test_max_restarts_zero_is_a_single_local_attempt(robot):
    """With max_restarts = 0 an unreachable target returns after one attempt, not after the
    budget."""
    solver = IkSolver(robot, locked=FINGERS, options=IkOptions(time_budget=1.0, max_restarts=0))
    target = np.eye(4)
    target[:3, 3] = [3.0, 0.0, 0.36]
    result = solver.solve(target)
    assert not result.converged and result.restarts == 0 and result.time < 0.5


def test_batched_restarts_solve_within_limits(robot, arm):
    """Restarts batched from the start (batch_after = 0, 8 attempts side by side) on 40 random
    targets seeded far from their configuration (the opposite corner of the joint box, so most
    need restarts): every result converges, the pose error re-computed by an independent FK is
    within 1e-5 per component and equals the reported residual, q is within the joint limits,
    and the restarts reported are actually taken on some targets."""
    solver = solver_for(robot, batch_after=0.0, parallel_attempts=8)
    rng = np.random.default_rng(8)
    lower, upper = robot.limits.lower[arm], robot.limits.upper[arm]
    restarted = 0
    for _ in range(40):
        q_true = random_arm_configuration(robot, arm, rng)
        seed = q_true.copy()
        seed[arm] = np.where(q_true[arm] > 0.5 * (lower + upper), lower, upper)
        target = robot.frame_pose(q_true)
        result = solver.solve(target, seed)
        assert_converged_within_limits(robot, result, target)
        restarted += result.restarts > 0
    assert restarted > 0


@pytest.mark.parametrize("parallel", [1, 4])
def test_max_restarts_bounds_the_attempts_one_at_a_time_or_batched(robot, parallel):
    """An unreachable target with max_restarts = 6 takes exactly 6 restarts and returns before
    its (long) budget, whether restarts run one at a time or side by side from the start; the
    residual is still that of the returned q, within the limits."""
    solver = IkSolver(
        robot,
        locked=FINGERS,
        options=IkOptions(
            time_budget=1.0, max_restarts=6, parallel_attempts=parallel, batch_after=0.0
        ),
    )
    target = np.eye(4)
    target[:3, 3] = [3.0, 0.0, 0.36]
    result = solver.solve(target)
    assert not result.converged and result.restarts == 6 and result.time < 0.5
    error = pose_error(robot.frame_pose(result.q), target)
    np.testing.assert_allclose(error[:3], result.position_error, atol=1e-12)
    assert np.all(result.q >= robot.limits.lower) and np.all(result.q <= robot.limits.upper)
