"""ct_controllers.model.frames: the TCP Jacobian against finite differences of FK, the pose-error
convention and its pairing with the LOCAL_WORLD_ALIGNED Jacobian, the point shift, and pose
validation."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
from helpers import new_robot_model, random_configuration

from ct_controllers.model.frames import (
    check_pose,
    pose_error,
    pose_error_norms,
    rotation_error,
    shift_jacobian,
    skew,
)
from ct_controllers.model.robot import RobotModel

STEP = 1e-6  # [rad | m] central-difference step


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return new_robot_model()


def finite_difference_jacobian(robot: RobotModel, q: np.ndarray, frame: str) -> np.ndarray:
    """6 x nv by central differences of FK: linear rows from the origin's displacement, angular
    rows from log3(R(q + h) R(q − h)ᵀ) / 2h (world-frame angular velocity)."""
    jacobian = np.empty((6, robot.nv))
    for j in range(robot.nv):
        dq = np.zeros(robot.nq)
        dq[j] = STEP
        plus, minus = robot.frame_pose(q + dq, frame), robot.frame_pose(q - dq, frame)
        jacobian[:3, j] = (plus[:3, 3] - minus[:3, 3]) / (2 * STEP)
        jacobian[3:, j] = pin.log3(plus[:3, :3] @ minus[:3, :3].T) / (2 * STEP)
    return jacobian


@pytest.mark.parametrize("frame", ["tcp", "hand", "link4"])
def test_tcp_jacobian_matches_finite_differences_of_fk(robot, frame):
    """At 25 random configurations the LOCAL_WORLD_ALIGNED Jacobian (linear; angular) equals
    central differences of FK to 1e-7 absolute (the O(h²) + rounding error is ~1e-10)."""
    rng = np.random.default_rng(8)
    for _ in range(25):
        q = random_configuration(robot, rng)
        analytic = robot.frame_jacobian(q, frame)
        numeric = finite_difference_jacobian(robot, q, frame)
        np.testing.assert_allclose(analytic, numeric, atol=1e-7, rtol=0)


def test_point_shift_seed_exercise():
    """Seed 001's exercise: J_ω = (0, 0, 1), J_v,C = 0 and r = (0.1, 0, 0) give
    J_v,T = J_ω × r = (0, 0.1, 0)."""
    jacobian = np.zeros((6, 1))
    jacobian[5, 0] = 1.0
    shifted = shift_jacobian(jacobian, np.array([0.1, 0.0, 0.0]))
    np.testing.assert_allclose(shifted[:3, 0], [0.0, 0.1, 0.0], atol=1e-15)
    np.testing.assert_array_equal(shifted[3:], jacobian[3:])


def test_point_shift_moves_the_hand_jacobian_to_the_tcp(robot):
    """The hand-origin Jacobian shifted by r = p_tcp − p_hand (base axes) is the TCP Jacobian,
    column by column J_v + J_ω × r, at random configurations."""
    rng = np.random.default_rng(9)
    for _ in range(10):
        q = random_configuration(robot, rng)
        hand, tcp = robot.frame_pose(q, "hand"), robot.frame_pose(q, "tcp")
        offset = tcp[:3, 3] - hand[:3, 3]
        assert np.linalg.norm(offset) > 0.05  # a real lever arm
        shifted = shift_jacobian(robot.frame_jacobian(q, "hand"), offset)
        np.testing.assert_allclose(shifted, robot.frame_jacobian(q, "tcp"), atol=1e-12)
        hand_jacobian = robot.frame_jacobian(q, "hand")
        by_columns = hand_jacobian[:3] + np.cross(hand_jacobian[3:].T, offset).T
        np.testing.assert_allclose(shifted[:3], by_columns, atol=1e-12)


def test_skew_is_the_cross_product():
    """[a]× b = a × b."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=3), rng.normal(size=3)
    np.testing.assert_allclose(skew(a) @ b, np.cross(a, b), atol=1e-15)


def test_pose_error_pairs_with_the_lwa_jacobian(robot):
    """e(q + δq) = e(q) − [J_v; Jlog3(R* Rᵀ) J_ω] δq + O(δq²): the sign and frame of the error
    go with the LOCAL_WORLD_ALIGNED Jacobian (a 1e-5 step at random configurations, the desired
    pose ~0.05 m / 0.1 rad away; O(δq²) ≈ 1e-9); and Jlog3ᵀ e_R = e_R, so −Jᵀe is the exact
    gradient."""
    rng = np.random.default_rng(2)
    for _ in range(10):
        q = random_configuration(robot, rng)
        desired = robot.frame_pose(q)
        desired[:3, 3] += rng.normal(scale=0.03, size=3)
        desired[:3, :3] = pin.exp3(rng.normal(scale=0.05, size=3)) @ desired[:3, :3]
        step = rng.normal(scale=1e-5, size=robot.nq)
        current = robot.frame_pose(q)
        jacobian = robot.frame_jacobian(q)
        error = pose_error(current, desired)
        actual = pose_error(robot.frame_pose(q + step), desired)
        # Translation: ė = −J_v q̇ exactly.
        np.testing.assert_allclose(actual[:3], error[:3] - jacobian[:3] @ step, atol=1e-8)
        # Rotation: ė_R = −Jlog3(R* Rᵀ) J_ω q̇, Jlog3 → I as the error vanishes.
        jlog = pin.Jlog3(desired[:3, :3] @ current[:3, :3].T)
        np.testing.assert_allclose(actual[3:], error[3:] - jlog @ jacobian[3:] @ step, atol=1e-8)
        np.testing.assert_allclose(jlog.T @ error[3:], error[3:], atol=1e-12)  # Jlog3ᵀ e = e


def test_pose_error_is_desired_times_current_inverse_on_the_short_arc():
    """e_R = log3(R* Rᵀ): for R* = Rz(θ) R the error is θ ẑ, and past π it takes the short way
    (angle 2π − θ, opposite axis); e_p is the difference of the origins (not the linear part of
    log6, which differs as soon as there is a rotation)."""
    current = np.eye(4)
    current[:3, 3] = [0.4, 0.1, 0.3]
    for angle in (0.3, 2.5, 3.5, 5.0):
        desired = current.copy()
        desired[:3, :3] = pin.exp3(np.array([0.0, 0.0, angle])) @ current[:3, :3]
        desired[:3, 3] = [0.5, -0.2, 0.1]
        error = pose_error(current, desired)
        short = angle if angle <= np.pi else angle - 2 * np.pi
        np.testing.assert_allclose(error[3:], [0.0, 0.0, short], atol=1e-12)
        assert np.linalg.norm(error[3:]) <= np.pi
        np.testing.assert_allclose(error[:3], desired[:3, 3] - current[:3, 3], atol=1e-15)
        log6_linear = pin.log6(pin.SE3(desired) * pin.SE3(current).inverse()).linear
        assert np.linalg.norm(log6_linear - error[:3]) > 1e-3
    np.testing.assert_allclose(rotation_error(np.eye(3), np.eye(3)), 0.0)


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("shape", "4x4"),
        ("nan", "non-finite"),
        ("last row", "last row"),
        ("scaled", "not a rotation"),
        ("reflection", "not a rotation"),
    ],
)
def test_check_pose_rejects_what_is_not_a_rigid_transform(case, named):
    """A 3x4, a NaN, a bad last row, a scaled rotation block and a reflection are rejected with
    a message naming the problem and the argument."""
    pose = np.eye(4)
    if case == "shape":
        pose = np.eye(4)[:3]
    elif case == "nan":
        pose[0, 3] = np.nan
    elif case == "last row":
        pose[3, 0] = 0.1
    elif case == "scaled":
        pose[:3, :3] *= 1.01
    elif case == "reflection":
        pose[2, 2] = -1.0
    with pytest.raises(ValueError, match=named) as info:
        check_pose(pose, "goal")
    assert "goal" in str(info.value)


def test_check_pose_returns_a_copy():
    """The validated pose is a copy: changing the input later does not change it."""
    pose = np.eye(4)
    checked = check_pose(pose)
    pose[0, 3] = 1.0
    assert checked[0, 3] == 0.0


def test_pose_error_norms_match_an_independent_rotation_angle() -> None:
    """The orientation error equals the angle from the trace formula, the position error the
    Euclidean distance (moved here from the grasp task's tests with the function it checks)."""
    a = np.eye(4)
    a[:3, :3] = np.diag([1.0, -1.0, -1.0])
    a[:3, 3] = [0.1, 0.2, 0.3]
    b = a.copy()
    b[:3, :3] = pin.exp3(np.array([0.0, 0.3, 0.4])) @ a[:3, :3]
    b[:3, 3] += [0.03, 0.0, 0.04]
    position, angle = pose_error_norms(a, b)
    relative = b[:3, :3] @ a[:3, :3].T
    assert angle == pytest.approx(math.acos((np.trace(relative) - 1) / 2))
    assert position == pytest.approx(0.05)
    assert (position, angle) == pytest.approx(
        (np.linalg.norm(pose_error(a, b)[:3]), np.linalg.norm(pose_error(a, b)[3:]))
    )
