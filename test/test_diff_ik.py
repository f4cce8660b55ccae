"""ct_controllers.references.diff_ik (DLS) and the shared tick of diff_ik_base: convergence,
the singular straight-arm start, unreachable targets, rate-limited goal following, task
weights, bandwidth, posture in the nullspace, feedforward twist, parameter validation and
staging, target validation. Runs are kinematic: the measured q is the reference q* of the
previous tick."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM, new_robot_model

from ct_controllers.controllers.controller import GainError, JointReference, JointState
from ct_controllers.model.frames import pose_error
from ct_controllers.references.diff_ik import DlsDiffIk
from ct_controllers.references.diff_ik_parameters import DiffIkParameters
from ct_controllers.references.reference_generator import CartesianTarget, TargetError

DT = 1e-3


def parameters(**changes) -> DiffIkParameters:
    return DiffIkParameters(**{"bandwidth": np.full(7, 10.0), **changes})


def offset_target(robot, q, shift=(0.08, -0.10, -0.06), rotation=(0.2, -0.15, 0.25)) -> np.ndarray:
    pose = robot.frame_pose(q)
    pose[:3, 3] += shift
    pose[:3, :3] = pin.exp3(np.array(rotation)) @ pose[:3, :3]
    return pose


def run(generator, q, target, steps, twist=None, dt=DT):
    """Kinematic loop; returns the references of every tick."""
    references: list[JointReference] = []
    for k in range(steps):
        pose = target(k) if callable(target) else target
        reference = generator.update(
            JointState(k * dt, q, np.zeros_like(q)), CartesianTarget(pose, "base_link", twist), dt
        )
        references.append(reference)
        q = reference.q
    return references


def test_reaches_a_reachable_target(robot, home):
    """From home, a target 0.14 m / 0.35 rad away is reached by q* to 1e-6 m / 1e-6 rad within
    3 s, and the status says converged (at the tolerance of the parameters)."""
    generator = DlsDiffIk(new_robot_model(), ARM, parameters())
    target = offset_target(robot, home)
    references = run(generator, home.copy(), target, 3000)
    error = pose_error(robot.frame_pose(references[-1].q), target)
    assert np.linalg.norm(error[:3]) < 1e-6 and np.linalg.norm(error[3:]) < 1e-6
    assert generator.status is not None and generator.status.converged


def test_singular_straight_arm_start_neither_explodes_nor_claims_success(robot):
    """From the all-zero pose (straight up: J has rank 3), toward the home TCP pose: the damping
    is raised to λ_max on the first tick, every v* is finite and within the joint velocity
    limits, q* stays finite, the status is not converged while the error is large — and the arm
    leaves the singularity and gets there."""
    generator = DlsDiffIk(new_robot_model(), ARM, parameters())
    q = robot.neutral()
    q[7:] = 0.02
    home = robot.neutral()
    home[robot.indices(ARM)] = [0.0, 0.4, 0.0, -1.6, 0.0, 1.2, 0.0]
    target = robot.frame_pose(home)
    limits = robot.limits.velocity
    references = run(generator, q, target, 6000)
    first = references[0]
    status = generator.status
    assert status is not None
    for reference in references:
        assert np.isfinite(reference.q).all() and np.isfinite(reference.v).all()
        assert np.all(np.abs(reference.v) <= limits + 1e-12)
    generator.reset()
    generator.update(JointState(0.0, q, np.zeros(9)), CartesianTarget(target, "base_link"), DT)
    start = generator.status
    assert start is not None
    assert start.manipulability < 1e-9 and start.damping == pytest.approx(0.05)
    assert not start.converged and start.position_error > 0.3
    assert np.abs(first.v).max() > 0  # it does move
    assert status.converged and status.position_error < 1e-4


def test_unreachable_target_is_not_claimed(robot, home):
    """A target 2 m above the base (reach ≈ 1.3 m), with the orientation of the straight-up
    arm: after 4 s the arm is stretched toward it, singular, with raised damping; the status is
    not converged and its residual is the distance left (≥ 2 − reach); q* and v* stay finite,
    v* within the joint velocity limits. (The DLS does not keep position limits: a wrist joint
    may wind past its range here; the QP test of the same target shows the limits held.)"""
    generator = DlsDiffIk(new_robot_model(), ARM, parameters())
    target = robot.frame_pose(robot.neutral())
    target[:3, 3] = [0.0, 0.0, 2.0]
    references = run(generator, home.copy(), target, 4000)
    status = generator.status
    assert status is not None and not status.converged
    reach = np.linalg.norm(robot.frame_pose(references[-1].q)[:3, 3])
    assert status.position_error == pytest.approx(
        np.linalg.norm(target[:3, 3] - robot.frame_pose(references[-2].q)[:3, 3]), rel=1e-6
    )
    assert status.position_error >= 2.0 - reach - 1e-9 and reach < 1.4
    assert status.damping > 0.01
    assert all(np.isfinite(r.q).all() and np.isfinite(r.v).all() for r in references)
    assert all(np.all(np.abs(r.v) <= robot.limits.velocity + 1e-12) for r in references)


def test_far_goal_is_followed_at_bounded_tcp_speed(robot, home):
    """A goal 0.6 m away with max_linear_velocity 0.2 m/s: the TCP moves at most 0.2 m/s
    (measured by FK between ticks) and the first tick moves it by ≤ 0.2 mm — no jump; the
    status reports the rate scale < 1 while far."""
    generator = DlsDiffIk(
        new_robot_model(), ARM, parameters(max_linear_velocity=0.2, max_angular_velocity=0.5)
    )
    target = offset_target(robot, home, shift=(0.3, -0.45, 0.25), rotation=(0.0, 0.0, 0.6))
    q = home.copy()
    previous = robot.frame_pose(q)
    speeds, angular = [], []
    for k in range(400):
        reference = generator.update(
            JointState(k * DT, q, np.zeros(9)), CartesianTarget(target, "base_link"), DT
        )
        pose = robot.frame_pose(reference.q)
        speeds.append(np.linalg.norm(pose[:3, 3] - previous[:3, 3]) / DT)
        angular.append(np.linalg.norm(pin.log3(pose[:3, :3] @ previous[:3, :3].T)) / DT)
        previous, q = pose, reference.q
        if k == 0:
            assert generator.status is not None and generator.status.rate_scale < 1.0
    assert max(speeds) <= 0.2 * (1 + 1e-3) and max(angular) <= 0.5 * (1 + 1e-3)
    assert speeds[0] * DT <= 0.2e-3 * (1 + 1e-3)
    assert np.median(speeds) > 0.15  # it does go at about the bound


def test_zero_task_weight_removes_the_axis(robot, home):
    """With the z weight 0, a target only 5 cm lower produces no motion (|v*| < 1e-9 on every
    tick: the axis is out of the task), while a weight of 1e-3 does move the arm; and a target
    5 cm along x and 5 cm lower converges in x, the status still reporting the z error left."""
    start = robot.frame_pose(home)
    lower = start.copy()
    lower[2, 3] -= 0.05
    for weight, moves in ((0.0, False), (1e-3, True)):
        weights = np.array([1.0, 1.0, weight, 1.0, 1.0, 1.0])
        generator = DlsDiffIk(new_robot_model(), ARM, parameters(task_weights=weights))
        references = run(generator, home.copy(), lower, 100)
        moved = max(np.abs(r.v).max() for r in references)
        assert (moved > 1e-3) if moves else (moved < 1e-9)
    weights = np.array([1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    generator = DlsDiffIk(new_robot_model(), ARM, parameters(task_weights=weights))
    target = lower.copy()
    target[0, 3] += 0.05
    references = run(generator, home.copy(), target, 2000)
    end = robot.frame_pose(references[-1].q)
    assert abs(end[0, 3] - target[0, 3]) < 1e-5
    assert generator.status is not None and not generator.status.converged
    assert generator.status.position_error > 0.01


def test_bandwidth_sets_the_error_decay_rate(robot, home):
    """With B = b I and a small error far from singularities, one tick multiplies the error by
    ≈ (1 − b·dt) (DLS with λ² ≪ σ²)."""
    b = 20.0
    generator = DlsDiffIk(new_robot_model(), ARM, parameters(bandwidth=np.full(7, b)))
    target = offset_target(robot, home, shift=(0.002, -0.001, 0.001), rotation=(0.002, 0, 0))
    references = run(generator, home.copy(), target, 2)
    before = np.linalg.norm(pose_error(robot.frame_pose(references[0].q), target))
    after = np.linalg.norm(pose_error(robot.frame_pose(references[1].q), target))
    assert after / before == pytest.approx(1 - b * DT, abs=2e-4)


def test_posture_moves_only_in_the_nullspace(robot, home):
    """A posture target away from home, weight 1: at steady state the TCP is still on its goal
    (error < 1e-6) while the joints are closer to the posture than without the posture term."""
    target = offset_target(robot, home, shift=(0.03, 0.02, -0.02), rotation=(0.1, 0.0, 0.0))
    posture = home[:7] + np.array([0.4, 0.0, -0.5, 0.0, 0.3, 0.0, -0.4])
    ends = {}
    for weight in (0.0, 1.0):
        generator = DlsDiffIk(
            new_robot_model(), ARM, parameters(posture=posture, posture_weight=weight)
        )
        references = run(generator, home.copy(), target, 4000)
        end = references[-1].q
        assert np.linalg.norm(pose_error(robot.frame_pose(end), target)) < 1e-6
        ends[weight] = np.linalg.norm(end[:7] - posture)
    assert ends[1.0] < ends[0.0] - 0.05


def test_feedforward_twist_removes_the_tracking_lag(robot, home):
    """A target moving at 0.1 m/s along y: with its twist as feedforward the steady tracking
    error is < 0.1 mm; without it, the lag is ≈ v/b = 10 mm."""
    start = robot.frame_pose(home)
    velocity = 0.1  # [m/s]

    def moving(k: int) -> np.ndarray:
        pose = start.copy()
        pose[1, 3] += velocity * k * DT
        return pose

    errors = {}
    for twist in (None, np.array([0.0, velocity, 0.0, 0.0, 0.0, 0.0])):
        generator = DlsDiffIk(new_robot_model(), ARM, parameters())
        references = run(generator, home.copy(), moving, 1000, twist=twist)
        # The reference of tick k is q*(t_{k+1}): compare it with the target at k + 1.
        errors[twist is None] = np.linalg.norm(
            robot.frame_pose(references[-1].q)[:3, 3] - moving(1000)[:3, 3]
        )
    assert errors[False] < 1e-4
    assert errors[True] == pytest.approx(velocity / 10.0, rel=0.1)


def test_other_joints_hold_and_acceleration_modes(robot, home):
    """The fingers (not controlled) keep their reference at the synchronised value with v* = 0;
    a* is 0 by default and (v_k − v_{k−1})/dt in finite_difference mode."""
    q = home.copy()
    q[7:] = 0.031
    target = offset_target(robot, home)
    zero = DlsDiffIk(new_robot_model(), ARM, parameters())
    references = run(zero, q.copy(), target, 3)
    assert np.all(references[-1].q[7:] == 0.031) and np.all(references[-1].v[7:] == 0)
    assert np.all(references[-1].a == 0)
    fd = DlsDiffIk(new_robot_model(), ARM, parameters(acceleration="finite_difference"))
    references = run(fd, q.copy(), target, 3)
    np.testing.assert_allclose(references[2].a, (references[2].v - references[1].v) / DT)


def test_reference_resynchronises_when_the_arm_is_held_back(robot, home):
    """When the measured q drifts from q* by more than resync_threshold, q* restarts from the
    measured state and the status says so; below it, q* keeps integrating its own path."""
    generator = DlsDiffIk(new_robot_model(), ARM, parameters(resync_threshold=0.1))
    target = offset_target(robot, home)
    state = JointState(0.0, home.copy(), np.zeros(9))
    generator.update(state, CartesianTarget(target, "base_link"), DT)
    generator.update(state, CartesianTarget(target, "base_link"), DT)
    assert generator.status is not None and not generator.status.resynced
    held = home.copy()
    held[0] += 0.3
    reference = generator.update(
        JointState(0.0, held, np.zeros(9)), CartesianTarget(target, "base_link"), DT
    )
    assert generator.status.resynced
    assert abs(reference.q[0] - held[0]) < 0.01


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"damping": 0.0}, "damping"),
        ({"max_damping": 1e-4}, "max_damping"),
        ({"singularity_measure": "volume"}, "singularity_measure"),
        ({"singularity_measure": "condition_number", "singularity_threshold": 0.5}, "threshold"),
        ({"task_weights": np.zeros(6)}, "task_weights"),
        ({"task_weights": np.ones(5)}, "task_weights"),
        ({"task_weights": -np.ones(6)}, "task_weights"),
        ({"bandwidth": np.zeros(7)}, "bandwidth"),
        ({"posture": np.zeros(3)}, "posture"),
        ({"posture_weight": -1.0}, "posture_weight"),
        ({"max_linear_velocity": 0.0}, "max_linear_velocity"),
        ({"velocity_scale": 1.5}, "velocity_scale"),
        ({"position_margin": float("nan")}, "position_margin"),
        ({"acceleration": "magic"}, "acceleration"),
    ],
)
def test_invalid_parameters_name_the_parameter(changes, named):
    """Each invalid parameter raises GainError naming it."""
    with pytest.raises(GainError, match=named):
        parameters(**changes)


def test_parameters_are_staged_and_applied_at_the_next_tick(robot, home):
    """stage_parameters validates now (a bad set raises and stages nothing) and applies at the
    next update, all together; per-joint values may be given by joint name."""
    generator = DlsDiffIk(new_robot_model(), ARM, parameters())
    with pytest.raises(GainError, match="bandwidth"):
        generator.stage_parameters({"bandwidth": {"joint1": 5.0}})  # joints missing
    with pytest.raises(GainError, match="elbow_ghost"):
        generator.stage_parameters({"bandwidth": {"elbow_ghost": 5.0}})
    generator.stage_parameters(
        {"bandwidth": {name: 4.0 for name in ARM}, "max_linear_velocity": 0.1}
    )
    assert generator.parameters.max_linear_velocity == 0.25  # not yet
    run(generator, home.copy(), offset_target(robot, home), 1)
    assert generator.parameters.max_linear_velocity == 0.1
    np.testing.assert_array_equal(generator.parameters.bandwidth, 4.0)
    with pytest.raises(GainError, match="bandwidth"):
        DlsDiffIk(new_robot_model(), ARM, DiffIkParameters(bandwidth=np.ones(3)))


def test_targets_are_validated(robot, home):
    """A target in another frame, a non-rigid pose or a non-finite twist is rejected with
    TargetError naming the problem; the generator's state is unchanged."""
    generator = DlsDiffIk(new_robot_model(), ARM, parameters())
    state = JointState(0.0, home.copy(), np.zeros(9))
    pose = robot.frame_pose(home)
    with pytest.raises(TargetError, match=r"'tcp'.*'base_link'"):
        generator.update(state, CartesianTarget(pose, "tcp"), DT)
    bad = pose.copy()
    bad[:3, :3] *= 2
    with pytest.raises(TargetError, match="rotation"):
        generator.update(state, CartesianTarget(bad, "base_link"), DT)
    with pytest.raises(TargetError, match="twist"):
        generator.update(state, CartesianTarget(pose, "base_link", np.full(6, np.nan)), DT)
    with pytest.raises(ValueError, match="dt"):
        generator.update(state, CartesianTarget(pose, "base_link"), 0.0)
    assert generator.reference_q is None and generator.status is None


def test_a_target_changed_in_place_is_checked_again(robot, home):
    """The same target object is re-validated on every tick while its pose is writable: a pose
    corrupted in place after an accepted tick is rejected on the next. A read-only target is
    accepted tick after tick and tracked the same as a fresh object each tick."""
    generator = DlsDiffIk(new_robot_model(), ARM, parameters())
    state = JointState(0.0, home.copy(), np.zeros(9))
    pose = offset_target(robot, home)
    target = CartesianTarget(pose, "base_link")
    generator.update(state, target, DT)
    pose[:3, :3] *= 2
    with pytest.raises(TargetError, match="rotation"):
        generator.update(state, target, DT)

    frozen = offset_target(robot, home)
    frozen.setflags(write=False)
    one_target = CartesianTarget(frozen, "base_link")
    shared, q = DlsDiffIk(new_robot_model(), ARM, parameters()), home.copy()
    for k in range(50):
        q = shared.update(JointState(k * DT, q, np.zeros(9)), one_target, DT).q
    fresh = run(DlsDiffIk(new_robot_model(), ARM, parameters()), home, frozen.copy(), 50)
    np.testing.assert_array_equal(q, fresh[-1].q)


def test_multi_rate_generator_solves_every_kth_tick_and_follows_the_segment_between(robot, home):
    """With update_divisor 4, the generator equals a single-rate one run at 4·dt on every 4th
    tick (same q*, v*), and the three ticks between are equally spaced points of that segment:
    q*_j − q*_(j−1) = dt·v*, v* constant. A divisor < 1 is refused by name."""
    target = offset_target(robot, home)
    multi = DlsDiffIk(new_robot_model(), ARM, parameters(), update_divisor=4)
    single = DlsDiffIk(new_robot_model(), ARM, parameters())
    q_multi, q_single = home.copy(), home.copy()
    zeros = np.zeros(9)
    for k in range(60):
        references = []
        for j in range(4):
            state = JointState((4 * k + j) * DT, q_multi, zeros)
            references.append(multi.update(state, CartesianTarget(target, "base_link"), DT))
            q_multi = references[-1].q
        reference = single.update(
            JointState(4 * k * DT, q_single, zeros), CartesianTarget(target, "base_link"), 4 * DT
        )
        q_single = reference.q
        np.testing.assert_allclose(references[-1].q, reference.q, rtol=0, atol=1e-12)
        for j in range(4):
            np.testing.assert_array_equal(references[j].v, reference.v)
        for j in range(1, 4):
            np.testing.assert_allclose(
                references[j].q - references[j - 1].q, DT * reference.v, rtol=0, atol=1e-12
            )
    assert np.linalg.norm(robot.frame_pose(q_multi)[:3, 3] - target[:3, 3]) < 0.1
    with pytest.raises(GainError, match="update_divisor"):
        DlsDiffIk(new_robot_model(), ARM, parameters(), update_divisor=0)
