"""ct_controllers.references.joint_approach: the joint-space approach to an IK solution, the
hand-over to the differential IK, a target changed on the way, and the warm-up."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ARM, new_robot_model

from ct_controllers.controllers.controller import JointReference, JointState
from ct_controllers.ik import IkOptions, IkSolver
from ct_controllers.model.frames import pose_error
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.diff_ik_qp import QpDiffIk
from ct_controllers.references.joint_approach import APPROACH, CARTESIAN, JointSpaceApproach
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.references.limit_approach import LimitApproach
from ct_controllers.references.reference_generator import CartesianTarget

DT = 1e-3


def limits_for(robot: RobotModel) -> JointLimits:
    """The loop's default reference limits, with the stack's limit approach on the arm."""
    return JointLimits(
        velocity=robot.limits.velocity * 0.5,
        acceleration=np.full(robot.nv, 3.0),
        jerk=np.full(robot.nv, 30.0),
        approach=LimitApproach.for_joints(
            robot.limits.lower, robot.limits.upper, np.isin(np.arange(robot.nv), robot.indices(ARM))
        ),
    )


def far_goal(robot: RobotModel, home: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(target pose, an IK solution of it): the TCP of a configuration far from home."""
    q = home.copy()
    q[robot.indices(ARM)] = [1.9, 1.2, -0.8, -1.0, 1.5, -1.1, 0.4]
    pose = robot.frame_pose(q)
    solver = IkSolver(
        robot,
        locked={"left_finger_joint": 0.0, "right_finger_joint": 0.0},
        options=IkOptions(time_budget=0.2, limit_margin=0.005),
    )
    result = solver.solve(pose, seed=home)
    assert result.converged
    return pose, result.q


def run(
    generator: JointSpaceApproach, home: np.ndarray, targets: list[CartesianTarget], ticks: int
) -> list[JointReference]:
    """Perfect tracking: each tick's state is the previous reference."""
    state = JointState(0.0, home.copy(), np.zeros(home.size))
    references = []
    for k in range(ticks):
        reference = generator.update(state, targets[min(k, len(targets) - 1)], DT)
        references.append(reference)
        state = JointState((k + 1) * DT, reference.q, reference.v)
    return references


def test_approach_goes_to_the_ik_solution_then_the_diff_ik_finishes(robot, home):
    """From home to a target 1.9 rad of joint1 away: the references start on the measured
    state, stay within the reference velocity limits, move the arm to the IK solution and hold
    the fingers; the differential IK takes over on the tick the trajectory ends, from its end
    (no step in q*: each tick moves q* by at most v_max·dt), with the IK solution as its posture;
    the final q* puts the TCP on the target (≤ 1e-4 m, 1e-3 rad)."""
    pose, solution = far_goal(robot, home)
    limits = limits_for(robot)
    generator = JointSpaceApproach(QpDiffIk(new_robot_model(), ARM), solution, limits, pose)
    arm = robot.indices(ARM)
    np.testing.assert_array_equal(generator.parameters.posture, solution[arm])
    target = CartesianTarget(pose, "base_link")
    first = generator.update(JointState(0.0, home.copy(), np.zeros(robot.nv)), target, DT)
    np.testing.assert_allclose(first.q, home, atol=1e-12)
    assert generator.trajectory is not None and generator.phase == APPROACH
    duration = generator.trajectory.duration
    assert duration > 1.0
    references = [first, *run(generator, first.q, [target], round(duration / DT) + 500)]
    assert generator.phase == CARTESIAN and generator.status is not None
    steps = np.abs(np.diff([r.q for r in references], axis=0))
    assert np.all(steps <= limits.velocity * DT * (1 + 1e-6) + 1e-9)
    handover = round(duration / DT)
    np.testing.assert_allclose(references[handover].q[arm], solution[arm], atol=1e-6)
    fingers = robot.indices(("left_finger_joint", "right_finger_joint"))
    assert all(np.array_equal(r.q[fingers], home[fingers]) for r in references)
    error = pose_error(robot.frame_pose(references[-1].q), pose)
    assert np.linalg.norm(error[:3]) <= 1e-4 and np.linalg.norm(error[3:]) <= 1e-3


def test_a_target_changed_during_the_approach_ends_it_there(robot, home):
    """A new target (another object than the one solved for, another pose) on the approach: the
    differential IK takes over on that tick, from the approach's current reference (q* moves
    by at most v_max·dt), and ``message`` says why; the same pose in a new target object does
    not end the approach."""
    pose, solution = far_goal(robot, home)
    limits = limits_for(robot)
    generator = JointSpaceApproach(QpDiffIk(new_robot_model(), ARM), solution, limits, pose)
    same = [CartesianTarget(pose.copy(), "base_link") for _ in range(300)]
    references = run(generator, home, same, 300)
    assert generator.phase == APPROACH
    moved = pose.copy()
    moved[:3, 3] += 0.05
    state = JointState(0.3, references[-1].q, references[-1].v)
    after = generator.update(state, CartesianTarget(moved, "base_link"), DT)
    assert generator.phase == CARTESIAN
    assert "target changed" in generator.message
    assert np.all(np.abs(after.q - references[-1].q) <= limits.velocity * 2 * DT)


def test_prepare_leaves_the_approach_unstarted(robot, home):
    """prepare() (the switching thread's warm-up) warms the differential IK at the solution
    and changes nothing a tick can see: no trajectory, still approaching, no status; the first
    tick then starts on the measured state."""
    pose, solution = far_goal(robot, home)
    generator = JointSpaceApproach(
        QpDiffIk(new_robot_model(), ARM), solution, limits_for(robot), pose
    )
    target = CartesianTarget(pose, "base_link")
    state = JointState(0.0, home.copy(), np.zeros(robot.nv))
    generator.prepare(state, target, DT)
    assert generator.trajectory is None and generator.phase == APPROACH
    assert generator.status is None and generator.diff_ik.reference_q is None
    np.testing.assert_allclose(generator.update(state, target, DT).q, home, atol=1e-12)


def test_bad_goal_or_pose_is_rejected(robot, home):
    """A goal of the wrong size or with a NaN, or a pose that is not 4x4: ValueError naming it."""
    limits = limits_for(robot)
    pose = robot.frame_pose(home)
    with pytest.raises(ValueError, match="approach goal"):
        JointSpaceApproach(QpDiffIk(new_robot_model(), ARM), home[:7], limits, pose)
    bad = home.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="approach goal"):
        JointSpaceApproach(QpDiffIk(new_robot_model(), ARM), bad, limits, pose)
    with pytest.raises(ValueError, match="approach pose"):
        JointSpaceApproach(QpDiffIk(new_robot_model(), ARM), home, limits, pose[:3])
