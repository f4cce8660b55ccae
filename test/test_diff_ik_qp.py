"""ct_controllers.references.diff_ik_qp: integrated joint positions and velocities within their
limits over long random runs, agreement with the DLS step when no bound is active, OSQP built
once, the daqp backend, and a MoveToPose-style motion on the MuJoCo arm."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from helpers import ARM, bundled_description, home_by_name, lockstep_config, new_robot_model

from ct_controllers.controllers.controller import GainError, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.hardware.interface import JointCommand
from ct_controllers.hardware.mujoco_system import MujocoConfig, MujocoSystem
from ct_controllers.model.frames import pose_error
from ct_controllers.references.diff_ik import DlsDiffIk
from ct_controllers.references.diff_ik_parameters import DiffIkParameters
from ct_controllers.references.diff_ik_qp import QpDiffIk
from ct_controllers.references.reference_generator import CartesianTarget

DT = 1e-3


def parameters(**changes) -> DiffIkParameters:
    return DiffIkParameters(**{"bandwidth": np.full(7, 10.0), **changes})


@pytest.mark.parametrize("divisor", [1, 4])
def test_long_random_runs_keep_integrated_positions_and_velocities_within_limits(robot, divisor):
    """24 runs of 400 ticks from random in-margin starts, each with 4 random targets (near, far,
    unreachable, some whose solution lies beyond the joint limits), random bandwidths and dt in
    [0.5, 4] ms: every integrated q* stays in [lower + margin, upper − margin] and every |v*| ≤
    velocity_scale × the URDF limit — exactly (no tolerance beyond 1e-12). Also with the QP
    solved every 4th tick (update_divisor 4): the points between two solves stay inside too.
    Both ways of solving are exercised: ticks where no bound binds (the unconstrained
    minimizer) and ticks where one does (DAQP)."""
    rng = np.random.default_rng(3)
    statuses: set[str] = set()
    arm = robot.indices(ARM)
    margin = 0.05
    lower, upper = robot.limits.lower[arm] + margin, robot.limits.upper[arm] - margin
    velocity_limit = 0.8 * robot.limits.velocity[arm]
    for _ in range(24):
        generator = QpDiffIk(
            new_robot_model(),
            ARM,
            parameters(
                bandwidth=rng.uniform(2.0, 50.0, 7),
                position_margin=margin,
                velocity_scale=0.8,
                max_linear_velocity=rng.uniform(0.1, 2.0),
                max_angular_velocity=rng.uniform(0.5, 5.0),
            ),
            update_divisor=divisor,
        )
        q = robot.neutral()
        q[arm] = rng.uniform(lower, upper)
        dt = rng.uniform(0.5e-3, 4e-3)
        for _ in range(4):
            target = np.eye(4)
            target[:3, :3] = pin.exp3(rng.normal(size=3))
            target[:3, 3] = rng.uniform([-1.5, -1.5, -0.5], [1.5, 1.5, 1.8])
            for k in range(100):
                reference = generator.update(
                    JointState(k * dt, q, np.zeros(9)), CartesianTarget(target, "base_link"), dt
                )
                q = reference.q
                assert np.all(q[arm] >= lower - 1e-12) and np.all(q[arm] <= upper + 1e-12)
                assert np.all(np.abs(reference.v[arm]) <= velocity_limit + 1e-12)
                assert generator.status is not None
                assert not generator.status.solver.endswith("holding"), generator.status.solver
                statuses.add(generator.status.solver)
    assert statuses == {"unconstrained", "solved"}


def test_unreachable_target_holds_the_limits_and_reports_its_residual(robot, home):
    """The DLS test's unreachable target (2 m above the base): the QP also ends not converged
    with the residual of the distance left, and every joint stays within its range."""
    generator = QpDiffIk(new_robot_model(), ARM, parameters())
    target = robot.frame_pose(robot.neutral())
    target[:3, 3] = [0.0, 0.0, 2.0]
    q = home.copy()
    arm = robot.indices(ARM)
    for k in range(4000):
        q = generator.update(
            JointState(k * DT, q, np.zeros(9)), CartesianTarget(target, "base_link"), DT
        ).q
        assert np.all(q[arm] >= robot.limits.lower[arm]) and np.all(
            q[arm] <= robot.limits.upper[arm]
        )
    status = generator.status
    assert status is not None and not status.converged and status.position_error > 0.6


def test_start_outside_the_margin_is_not_pushed_further_out(robot, home):
    """q* starting inside the hard limits but inside the margin zone (0.01 rad from joint 2's
    upper limit, margin 0.1) never moves further out, whatever the target."""
    generator = QpDiffIk(new_robot_model(), ARM, parameters(position_margin=0.1))
    q = home.copy()
    upper = robot.limits.upper[robot.q_index("joint2")]
    q[robot.q_index("joint2")] = upper - 0.01
    target = robot.frame_pose(q)
    target[:3, 3] += [0.3, 0.0, -0.3]
    previous = q[robot.q_index("joint2")]
    for k in range(500):
        q = generator.update(
            JointState(k * DT, q, np.zeros(9)), CartesianTarget(target, "base_link"), DT
        ).q
        assert q[robot.q_index("joint2")] <= max(previous, upper - 0.1) + 1e-12
        previous = q[robot.q_index("joint2")]


def test_without_active_bounds_the_qp_step_is_the_dls_step(robot, home):
    """Far from every bound, the QP's v* equals the DLS v* — the unconstrained optimum of the QP
    is the DLS formula — with OSQP and with daqp, at several configurations and targets: to
    1e-5 (relative to max |v*|) without posture, and to 1e-3 with a posture target 0.3 rad
    away at weight 0.5 (the QP's nullspace projector is N_μ, the DLS's N_λ: they differ by
    O(λ²/σ²))."""
    rng = np.random.default_rng(4)
    arm = robot.indices(ARM)
    for _ in range(8):
        q = home.copy()
        q[arm] += rng.uniform(-0.3, 0.3, 7)
        target = robot.frame_pose(q)
        target[:3, 3] += rng.normal(scale=0.003, size=3)
        state = JointState(0.0, q, np.zeros(9))
        goal = CartesianTarget(target, "base_link")
        posture = q[arm] + rng.normal(scale=0.3, size=7)
        for changes, tolerance in (
            ({"posture_weight": 0.0}, 1e-5),
            ({"posture": posture, "posture_weight": 0.5}, 1e-3),
        ):
            expected = DlsDiffIk(new_robot_model(), ARM, parameters(**changes)).update(
                state, goal, DT
            )
            for backend in ("osqp", "daqp"):
                generator = QpDiffIk(
                    new_robot_model(), ARM, parameters(**changes), qp_solver=backend
                )
                got = generator.update(state, goal, DT)
                scale = np.abs(expected.v).max()
                np.testing.assert_allclose(got.v, expected.v, atol=tolerance * scale)


def test_far_goal_follows_the_dls_path(robot, home):
    """Toward a far goal (tool turned over by π, 0.26 m away — the grasp pre-approach from home)
    the QP's task is rate-limited before the solve, so its joint velocity bounds do not bend the
    path: the QP's TCP stays within 1 mm of the DLS's on every tick, and both arrive."""
    target = np.eye(4)
    target[:3, :3] = np.diag([1.0, -1.0, -1.0])
    target[:3, 3] = [0.5, 0.0, 0.105]
    generators = [
        DlsDiffIk(new_robot_model(), ARM, parameters()),
        QpDiffIk(new_robot_model(), ARM, parameters()),
    ]
    qs = [home.copy(), home.copy()]
    for k in range(4500):
        for i, generator in enumerate(generators):
            qs[i] = generator.update(
                JointState(k * DT, qs[i], np.zeros(9)), CartesianTarget(target, "base_link"), DT
            ).q
        if k % 50 == 0:
            gap = robot.frame_pose(qs[0])[:3, 3] - robot.frame_pose(qs[1])[:3, 3]
            assert np.linalg.norm(gap) < 1e-3, k
    for generator in generators:
        assert generator.status is not None and generator.status.converged


def test_osqp_is_set_up_once_and_warm_started(robot, home):
    """With ``qp_solver="osqp"``: one OSQP problem per generator, kept across ticks; a repeated
    tick at the same state (warm-started from the previous solution) takes no more ADMM
    iterations than the first. The target is far and the velocity bounds tight, so that a
    bound binds and OSQP runs (its iteration count is not 0)."""
    generator = QpDiffIk(
        new_robot_model(),
        ARM,
        parameters(bandwidth=np.full(7, 50.0), velocity_scale=0.05, max_linear_velocity=5.0),
        qp_solver="osqp",
    )
    problem = generator._problem
    assert problem is not None
    target = robot.frame_pose(home)
    target[:3, 3] += [0.2, 0.0, 0.0]
    state = JointState(0.0, home.copy(), np.zeros(9))
    generator.update(state, CartesianTarget(target, "base_link"), DT)
    assert generator.status is not None and generator.status.solver == "solved"
    first = generator._solver.info.iter
    assert first > 0
    generator.reset(state)
    generator.update(state, CartesianTarget(target, "base_link"), DT)
    assert generator._problem is problem
    assert generator._solver.info.iter <= first


@pytest.mark.parametrize("backend", ["osqp", "daqp"])
def test_the_unconstrained_minimizer_is_the_solvers_optimum_when_no_bound_binds(
    robot, home, backend
):
    """At 30 random configurations, with near targets and postures (no bound binds) and far
    ones (velocity bounds bind): where no bound binds, the tick's v* — from one Cholesky solve
    of P u = −q, no solver call — is B u + v_ff for the u of DAQP (exact, an active-set method)
    on the same QP, to 1e-10 of max |v*|, and of an LU solve; where a bound binds, the tick's
    v* is the chosen solver's and within the bounds. DAQP to 1e-10; OSQP to 5e-5 in u (its 1e-6
    tolerances hold on scaled residuals, and P ⪰ I bounds the error in u by them only up to
    its scaling), i.e. B = 50 s⁻¹ times that in v*."""
    rng = np.random.default_rng(11)
    arm = robot.indices(ARM)
    settings = parameters(
        posture_weight=0.5,
        velocity_scale=0.3,
        bandwidth=np.full(7, 50.0),
        max_linear_velocity=5.0,
        max_angular_velocity=10.0,
    )
    generator = QpDiffIk(new_robot_model(), ARM, settings, qp_solver=backend)
    exact = QpDiffIk(new_robot_model(), ARM, settings, qp_solver="daqp")
    counts = {"unconstrained": 0, "solved": 0}
    for trial in range(30):
        q = home.copy()
        q[arm] += rng.uniform(-0.4, 0.4, 7)
        target = robot.frame_pose(q)
        far = trial % 2 == 1
        target[:3, 3] += rng.normal(scale=0.3 if far else 0.002, size=3)
        posture = q[arm] + rng.normal(scale=0.3 if far else 0.002, size=7)
        goal = CartesianTarget(target, "base_link")
        task = generator._task.at(q, q[arm], goal, settings, posture).view
        qp, v_low, v_high = generator.box_qp(task, DT)
        velocity, _, status = generator._solve(task, DT)
        counts[status] += 1
        assert np.all(velocity >= v_low) and np.all(velocity <= v_high)
        if status == "unconstrained":
            u, ok, _ = exact.solve_bounded(qp)
            np.testing.assert_allclose(
                u, np.linalg.solve(qp.hessian, qp.descent), rtol=0, atol=1e-10 * np.abs(u).max()
            )
            tolerance = 1e-10 * np.abs(settings.bandwidth * u).max()
        else:
            u, ok, _ = generator.solve_bounded(qp)
            tolerance = (5e-5 * 50.0) if backend == "osqp" else 1e-10 * np.abs(velocity).max()
        assert ok
        expected = settings.bandwidth * u + task.feedforward
        np.testing.assert_allclose(velocity, expected, rtol=0, atol=tolerance)
    assert counts["unconstrained"] >= 5 and counts["solved"] >= 5, counts


def test_the_quick_feasibility_test_agrees_with_the_bounds(robot, home):
    """The tick tests the unconstrained minimizer on v and q* + dt·v rather than on the QP's
    bounds [l, u]; it must take the same branch. At 200 random q* — a third of them within
    0.1 rad of a joint limit, some outside the margin — toward near and far targets: where the
    minimizer of P u = −q (LU solve) lies in [l, u] the tick says "unconstrained" and gives
    B u (1e-10); where it does not, the tick asked DAQP and its v* is DAQP's on the same QP,
    inside [v_lo, v_hi]. Both branches are seen, position bounds binding among them."""
    rng = np.random.default_rng(5)
    arm = robot.indices(ARM)
    lower, upper = robot.limits.lower[arm], robot.limits.upper[arm]
    settings = parameters(bandwidth=np.full(7, 20.0), velocity_scale=0.5, position_margin=0.05)
    generator = QpDiffIk(new_robot_model(), ARM, settings)
    exact = QpDiffIk(new_robot_model(), ARM, settings)
    counts = {"unconstrained": 0, "solved": 0, "position": 0}
    for trial in range(200):
        q = home.copy()
        q[arm] += rng.uniform(-0.5, 0.5, 7)
        if trial % 3 == 0:  # one joint near (or past the margin of) a limit
            joint = rng.integers(7)
            edge = lower[joint] if rng.random() < 0.5 else upper[joint]
            q[arm[joint]] = edge - np.sign(edge - q[arm[joint]]) * rng.uniform(0.0, 0.1)
        target = robot.frame_pose(q)
        target[:3, 3] += rng.normal(scale=0.003 if trial % 2 else 0.05, size=3)
        posture = q[arm] + rng.normal(scale=0.2, size=7)
        goal = CartesianTarget(target, "base_link")
        task = generator._task.at(q, q[arm], goal, settings, posture).view
        qp, v_low, v_high = exact.box_qp(task, DT)
        velocity, _, status = generator._solve(task, DT)
        u = np.linalg.solve(qp.hessian, qp.descent)
        inside = bool(np.all(qp.lower <= u) and np.all(u <= qp.upper))
        if inside:
            assert status == "unconstrained"
            np.testing.assert_allclose(
                velocity, settings.bandwidth * u, rtol=0, atol=1e-10 * np.abs(velocity).max()
            )
        else:
            assert status == "solved"
            expected, ok, _ = exact.solve_bounded(qp)
            assert ok
            np.testing.assert_allclose(velocity, settings.bandwidth * expected, rtol=0, atol=1e-9)
            position_bound = (v_low > -task.velocity_limit) | (v_high < task.velocity_limit)
            speeds = settings.bandwidth * u
            counts["position"] += bool(
                np.any(position_bound & ((speeds < v_low) | (speeds > v_high)))
            )
        assert np.all(velocity >= v_low) and np.all(velocity <= v_high)
        counts[status] += 1
    assert counts["unconstrained"] >= 20 and counts["solved"] >= 20, counts
    assert counts["position"] >= 5, counts


def test_margin_leaving_no_range_is_rejected(robot):
    """A position margin of half a joint's range or more is a GainError naming the parameter
    and the joints."""
    with pytest.raises(GainError, match=r"position_margin.*joint"):
        QpDiffIk(new_robot_model(), ARM, parameters(position_margin=2.2))
    with pytest.raises(GainError, match="qp_solver"):
        QpDiffIk(new_robot_model(), ARM, parameters(), qp_solver="cvx")


def test_mujoco_move_to_pose_reaches_a_reachable_target():
    """On the MuJoCo arm (lockstep, no table objects), read → QP diff-IK → joint impedance with
    the gains of config/controllers.yaml → command limiter → write, for 2.5 s toward a TCP
    target 0.14 m and 0.35 rad from home: the *measured* TCP ends within 1 mm and 0.01 rad of
    the target, and q* converged."""
    config = lockstep_config()
    description = bundled_description()
    joints = description.hardware.joint_names
    system = MujocoSystem(
        description.urdf,
        joints,
        MujocoConfig(
            timestep=config.section("mujoco")["timestep"],
            control_period=config.period,
            initial_positions=home_by_name(config),
            with_objects=False,
        ),
    )
    plant_model = new_robot_model()
    controller = JointImpedanceController.from_parameters(
        new_robot_model(), config.joint_names, config.controllers["joint_impedance"]
    )
    generator = QpDiffIk(new_robot_model(), config.arm_joints)
    limiter = CommandLimiter(plant_model.limits.effort)
    index = plant_model.indices(joints)
    system.configure()
    system.activate()
    try:
        sample = system.read()
        q = np.empty(plant_model.nq)
        q[index] = sample.position
        start = plant_model.frame_pose(q)
        target = start.copy()
        target[:3, 3] += [0.08, -0.10, -0.06]
        target[:3, :3] = pin.exp3(np.array([0.2, -0.15, 0.25])) @ start[:3, :3]
        goal = CartesianTarget(target, config.base_frame)
        dt = config.period
        for sequence in range(1, 2501):
            sample = system.read()
            q = np.empty(plant_model.nq)
            v = np.empty(plant_model.nv)
            q[index], v[index] = sample.position, sample.velocity
            state = JointState(sample.stamp, q, v)
            reference = generator.update(state, goal, dt)
            effort = controller.update(state, reference, dt)
            limited = limiter.limit(effort, lambda: np.zeros(plant_model.nv), dt)
            system.write(
                JointCommand(
                    stamp=sample.stamp,
                    sequence=sequence,
                    joint_names=joints,
                    interfaces=("effort",) * len(joints),
                    values=limited.effort[index],
                )
            )
        sample = system.read()
        q = np.empty(plant_model.nq)
        q[index] = sample.position
    finally:
        system.deactivate()
    error = pose_error(plant_model.frame_pose(q), target)
    assert np.linalg.norm(error[:3]) < 1e-3
    assert np.linalg.norm(error[3:]) < 1e-2
    assert generator.status is not None and generator.status.converged


@pytest.mark.parametrize("solver", ["dls", "osqp", "daqp"])
@pytest.mark.parametrize("divisor", [1, 4])
def test_prepare_leaves_the_generator_as_if_it_had_not_run(robot, home, solver, divisor):
    """prepare() at one state (the switching thread's warm-up) changes nothing a tick can see:
    q* is resynchronised from the state the first update gets (not the prepared one), the
    posture is taken from it, no status is reported; the references of the next ticks equal a
    fresh generator's — exactly for DLS and daqp (no solver state kept), to OSQP's tolerance
    (its warm start is the prepared solution) for OSQP."""
    arm = robot.indices(ARM)
    prepared_at = home.copy()
    prepared_at[arm] += 0.2
    start = home.copy()
    start[arm] -= 0.1
    target = robot.frame_pose(start)
    target[:3, 3] += (0.04, -0.03, 0.05)
    goal = CartesianTarget(target, "base_link")

    def generator():
        if solver == "dls":
            return DlsDiffIk(new_robot_model(), ARM, parameters(), update_divisor=divisor)
        return QpDiffIk(
            new_robot_model(), ARM, parameters(), qp_solver=solver, update_divisor=divisor
        )

    fresh, prepared = generator(), generator()
    prepared.prepare(JointState(0.0, prepared_at, np.zeros(9)), goal, DT)
    assert prepared.status is None and prepared.reference_q is None
    state = JointState(0.0, start, np.zeros(9))
    tolerance = 1e-6 if solver == "osqp" else 0.0
    for _ in range(2 * divisor + 1):
        expected = fresh.update(state, goal, DT)
        got = prepared.update(state, goal, DT)
        scale = max(np.abs(expected.v).max(), 1e-9)
        np.testing.assert_allclose(got.q, expected.q, rtol=0, atol=tolerance * scale * DT)
        np.testing.assert_allclose(got.v, expected.v, rtol=0, atol=tolerance * scale)
        if solver == "osqp":
            assert prepared.status is not None and fresh.status is not None
            assert prepared.status.solver == fresh.status.solver
        else:
            assert prepared.status == fresh.status


def test_a_measured_state_past_the_limits_starts_the_reference_inside_them(robot, home):
    """Synchronised to a measured state past joint7's lower limit (by 6 mrad, an arm that ran
    ahead of a preempted reference) and a finger 24.5 mm past its upper limit (the issue's
    soak), q* starts at those joints' limits — every joint's q* inside its URDF range — and,
    tick after tick towards a target beyond joint7's limit, stays inside; the fingers hold
    where q* started."""
    generator = QpDiffIk(new_robot_model(), ARM, parameters())
    q = home.copy()
    joint7, finger = robot.q_index("joint7"), robot.q_index("left_finger_joint")
    lower, upper = robot.limits.lower, robot.limits.upper
    q[joint7] = lower[joint7] - 0.006
    q[finger] = upper[finger] + 0.0245
    inside = np.clip(q, lower, upper)
    target = robot.frame_pose(inside)
    target[:3, :3] = target[:3, :3] @ pin.exp3(np.array([0.0, 0.0, -0.3]))  # joint7 further out
    measured = JointState(0.0, q, np.zeros(9))
    first = generator.update(measured, CartesianTarget(target, "base_link"), DT).q
    assert first[joint7] >= lower[joint7] and first[finger] == upper[finger]
    np.testing.assert_allclose(generator.reference_q, first)
    for k in range(1, 300):
        reference = generator.update(
            JointState(k * DT, q, np.zeros(9)), CartesianTarget(target, "base_link"), DT
        ).q
        assert (reference >= lower).all() and (reference <= upper).all(), reference
        assert reference[finger] == upper[finger]
