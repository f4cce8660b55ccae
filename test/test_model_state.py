"""ct_controllers.model.model_state: each quantity of the per-tick model state against an
independent computation, computed once per configuration, read-only, and right in any order of
asking (a frame's Jacobian pass places only the joints it needs)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from helpers import new_robot_model

from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel
from ct_controllers.types import JointState


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return new_robot_model()


def random_state(robot: RobotModel, rng: np.random.Generator) -> JointState:
    q = rng.uniform(robot.limits.lower, robot.limits.upper)
    return JointState(0.0, q, rng.normal(size=robot.nv))


def test_dynamics_agree_with_rnea_column_by_column(robot):
    """M(q) column i is rnea(q, 0, e_i) − g(q); b(q, v) is rnea(q, v, 0); g(q) is rnea(q, 0, 0);
    inverse_dynamics(a) is M a + b — RNEA (a second algorithm) against CRBA, nonLinearEffects and
    computeGeneralizedGravity, at 10 random states, to 1e-9."""
    rng = np.random.default_rng(1)
    data = robot.model.createData()
    evaluated = ModelState(robot)
    for _ in range(10):
        state = random_state(robot, rng)
        evaluated.at(state)
        zeros = np.zeros(robot.nv)
        gravity = pin.rnea(robot.model, data, state.q, zeros, zeros).copy()
        mass = np.column_stack(
            [pin.rnea(robot.model, data, state.q, zeros, column) - gravity for column in np.eye(9)]
        )
        np.testing.assert_allclose(evaluated.mass_matrix(), mass, atol=1e-9)
        np.testing.assert_allclose(evaluated.gravity(), gravity, atol=1e-9)
        bias = pin.rnea(robot.model, data, state.q, state.v, zeros)
        np.testing.assert_allclose(evaluated.bias(), bias, atol=1e-9)
        a = rng.normal(size=robot.nv)
        np.testing.assert_allclose(evaluated.inverse_dynamics(a), mass @ a + bias, atol=1e-9)


def test_frame_pose_and_jacobian_agree_with_finite_differences(robot):
    """Every frame's pose equals a fresh forward-kinematics pass, in either order of asking
    (Jacobian first: the TCP's pass places only the arm, and a finger frame asked afterwards
    must still be right); the TCP Jacobian's columns equal central differences of the TCP
    position (linear rows) and of its orientation (log3 of the rotation change, angular rows),
    to 1e-6."""
    rng = np.random.default_rng(2)
    data = robot.model.createData()
    finger = robot.frame_id("left_finger")
    tcp = robot.tcp_frame_id
    for jacobian_first in (True, False):
        evaluated = ModelState(robot)
        for _ in range(5):
            state = random_state(robot, rng)
            evaluated.at(state)
            if jacobian_first:
                jacobian = evaluated.frame_jacobian()
            pin.framesForwardKinematics(robot.model, data, state.q)
            for fid in (tcp, finger):
                np.testing.assert_allclose(
                    evaluated.frame_pose(fid), data.oMf[fid].homogeneous, atol=1e-12
                )
            if not jacobian_first:
                jacobian = evaluated.frame_jacobian()
            step = 1e-6
            for column in range(robot.nv):
                offset = np.zeros(robot.nv)
                offset[column] = step
                plus, minus = robot.frame_pose(state.q + offset), robot.frame_pose(state.q - offset)
                linear = (plus[:3, 3] - minus[:3, 3]) / (2 * step)
                angular = pin.log3(plus[:3, :3] @ minus[:3, :3].T) / (2 * step)
                np.testing.assert_allclose(jacobian[:3, column], linear, atol=1e-6)
                np.testing.assert_allclose(jacobian[3:, column], angular, atol=1e-6)


def test_frame_placement_is_the_pose_of_the_current_configuration(robot):
    """frame_placement's rotation and translation (views into Pinocchio's data, not copies) equal
    a fresh forward-kinematics pass at every configuration the state is bound to, asked before
    or after the frame's Jacobian and for a frame the Jacobian pass did not place; the same two
    arrays every time, and read-only."""
    rng = np.random.default_rng(4)
    data = robot.model.createData()
    finger = robot.frame_id("left_finger")
    evaluated = ModelState(robot)
    first = evaluated.frame_placement()
    for index in range(8):
        q = rng.uniform(robot.limits.lower, robot.limits.upper)
        evaluated.update(q)
        if index % 2:
            evaluated.frame_jacobian()
        pin.framesForwardKinematics(robot.model, data, q)
        for fid in (robot.tcp_frame_id, finger):
            rotation, translation = evaluated.frame_placement(fid)
            np.testing.assert_allclose(rotation, data.oMf[fid].rotation, atol=1e-12)
            np.testing.assert_allclose(translation, data.oMf[fid].translation, atol=1e-12)
        rotation, translation = evaluated.frame_placement()
        assert rotation is first[0] and translation is first[1]
        np.testing.assert_array_equal(evaluated.frame_pose()[:3, :3], rotation)
    with pytest.raises(ValueError):
        rotation[0, 0] = 1.0
    with pytest.raises(ValueError):
        translation[0] = 1.0


def test_each_quantity_is_computed_once_per_state_and_anew_for_the_next(robot):
    """Asked again for the same state object, the state does not evaluate again (the values in
    its buffers stay even where Pinocchio's scratch data is overwritten meanwhile); for a new
    state, the same buffers hold the new values (the TCP moved); update(q) without v evaluates
    b at v = 0."""
    rng = np.random.default_rng(3)
    evaluated = ModelState(robot)
    first = random_state(robot, rng)
    evaluated.at(first)
    pose, jacobian = evaluated.frame_pose(), evaluated.frame_jacobian()
    gravity = evaluated.gravity()
    first_gravity = gravity.copy()
    second = random_state(robot, rng)
    # Scribble over its Pinocchio data at another configuration: a second evaluation of the
    # same state would now read wrong values.
    pin.computeGeneralizedGravity(robot.model, evaluated.data, second.q)
    pin.framesForwardKinematics(robot.model, evaluated.data, second.q)
    evaluated.at(first)
    assert evaluated.frame_pose() is pose and evaluated.frame_jacobian() is jacobian
    np.testing.assert_allclose(evaluated.gravity(), first_gravity, atol=0)
    np.testing.assert_allclose(pose, robot.frame_pose(first.q), atol=1e-12)
    evaluated.at(second)
    np.testing.assert_allclose(evaluated.frame_pose(), robot.frame_pose(second.q), atol=1e-12)
    np.testing.assert_allclose(evaluated.gravity(), robot.gravity(second.q), atol=1e-9)
    assert not np.allclose(evaluated.gravity(), first_gravity)
    evaluated.update(second.q)
    np.testing.assert_allclose(evaluated.bias(), robot.gravity(second.q), atol=1e-9)


def test_what_it_hands_out_is_read_only(robot):
    """Poses, Jacobians, M, b and g cannot be changed through the arrays handed out (a stage
    writing into a shared evaluation would corrupt every later reader of the tick)."""
    evaluated = ModelState(robot).at(random_state(robot, np.random.default_rng(4)))
    for array in (
        evaluated.frame_pose(),
        evaluated.frame_jacobian(),
        evaluated.mass_matrix(),
        evaluated.bias(),
        evaluated.gravity(),
    ):
        with pytest.raises(ValueError, match="read-only"):
            array[0] += 1.0
