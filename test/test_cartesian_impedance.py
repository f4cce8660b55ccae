"""ct_controllers/CartesianImpedance: the law checked against independent computations —
Pinocchio's own inverse inertia for Λ, its ABA for the nullspace's TCP acceleration and for a
push held at the compliance K⁻¹F, eigenvalues for the damping ratio, finite differences of the
law for the linear feedback the gain judgement uses — and its parameters refused by name."""

from __future__ import annotations

import math
import threading

import numpy as np
import pinocchio as pin
import pytest
from backends import make_rig
from helpers import home_configuration, new_robot_model

from ct_controllers.controllers.cartesian_impedance import (
    PARAMETERS,
    CartesianImpedanceController,
    ratio_damping,
)
from ct_controllers.controllers.controller import CARTESIAN, JOINT, GainError
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.plugins import CONTROLLERS, UnknownPluginError, load_plugin
from ct_controllers.references.reference_generator import CartesianTarget, TargetError
from ct_controllers.runtime.gain_checks import judge_gains
from ct_controllers.runtime.gain_stability import GainStability, check_configurations
from ct_controllers.sim.gains import SLOW_LOOP_CARTESIAN_IMPEDANCE
from ct_controllers.types import JointReference, JointState

DT = 1e-3  # [s] the bundled update_rate
ANISOTROPIC = (900.0, 300.0, 600.0, 40.0, 20.0, 30.0)  # [N/m; N·m/rad]


@pytest.fixture(scope="module")
def model():
    return new_robot_model()


def _controller(model, **changes) -> CartesianImpedanceController:
    return CartesianImpedanceController(model.with_own_data(), **changes)


def _arm_model(model, q):
    """Pinocchio's model of the arm with the other joints (fingers) locked at ``q``'s values:
    the system the law's Λ and N describe (the fingers held by their own servo)."""
    locked = [model.model.getJointId(name) for name in ("left_finger_joint", "right_finger_joint")]
    reduced = pin.buildReducedModel(model.model, locked, model.pinocchio_configuration(q))
    return reduced, reduced.createData()


def _configurations(model, count=6):
    """Home and seeded random configurations away from singularities (manipulability of the
    TCP Jacobian above the law's threshold: λ = 0 there, Λ exact)."""
    found = [home_configuration(model)]
    for q in check_configurations(model, home_configuration(model))[1:]:
        jacobian = model.frame_jacobian(q)[:, :7]
        if math.sqrt(max(np.linalg.det(jacobian @ jacobian.T), 0.0)) > 0.02:
            found.append(q)
        if len(found) == count:
            break
    return found


def _tcp_jacobian(reduced, data, q_arm):
    frame = reduced.getFrameId("tcp")
    return pin.computeFrameJacobian(
        reduced, data, q_arm, frame, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    )


def test_operational_space_inertia_matches_pinocchios_inverse_inertia(model) -> None:
    """Λ = (J M_a⁻¹ Jᵀ)⁻¹ of the law (Cholesky solves on the controller's M) equals the inverse
    of J M⁻¹ Jᵀ with Pinocchio's computeMinverse (its ABA-based inverse inertia) of the arm
    with the fingers locked, at home and random configurations away from singularities."""
    controller = _controller(model)
    for q in _configurations(model):
        reduced, data = _arm_model(model, q)
        q_arm = q[:7]
        inverse_mass = pin.computeMinverse(reduced, data, q_arm)
        inverse_mass = np.triu(inverse_mass) + np.triu(inverse_mass, 1).T
        jacobian = _tcp_jacobian(reduced, data, q_arm)
        expected = np.linalg.inv(jacobian @ inverse_mass @ jacobian.T)
        space = controller._operational_space(model.frame_jacobian(q), model.mass_matrix(q))
        assert space.damping_squared == 0.0
        assert np.allclose(space.inertia, expected, rtol=1e-9, atol=1e-9 * abs(expected).max())


def test_nullspace_torque_gives_no_tcp_acceleration(model) -> None:
    """At rest with the TCP on its target (e = 0) and the joint reference elsewhere, the law's
    torque less gravity is the nullspace posture torque N K_n (q_n − q): Pinocchio's ABA of the
    arm (fingers locked) turns it into a joint acceleration q̈ that is not small, yet moves the
    TCP by J q̈ ≈ 0 (to 1e-9 of the joint motion). Without the projector (the same torque
    unprojected) the TCP would accelerate."""
    rng = np.random.default_rng(3)
    for q in _configurations(model, 4):
        controller = _controller(model, nullspace_stiffness=50.0)
        controller.set_target(CartesianTarget(model.frame_pose(q), "base_link"))
        posture = q.copy()
        posture[:7] += rng.uniform(-0.3, 0.3, 7)
        state = JointState(0.0, q, np.zeros(model.nv))
        tau = controller.compute(state, JointReference.hold(posture), DT)
        reduced, data = _arm_model(model, q)
        q_arm = q[:7]
        acceleration = pin.aba(reduced, data, q_arm, np.zeros(7), tau[:7])  # M⁻¹(τ − g)
        jacobian = _tcp_jacobian(reduced, data, q_arm)
        assert np.linalg.norm(acceleration) > 0.1  # [rad/s²] the posture torque moves the arm
        assert np.linalg.norm(jacobian @ acceleration) < 1e-9 * np.linalg.norm(acceleration)
        unprojected = 50.0 * (posture[:7] - q_arm) + pin.computeGeneralizedGravity(
            reduced, data, q_arm
        )
        free = pin.aba(reduced, data, q_arm, np.zeros(7), unprojected)
        assert np.linalg.norm(jacobian @ free) > 1e-2 * np.linalg.norm(free)


@pytest.mark.parametrize("ratio", [0.3, 0.7])
def test_damping_ratio_holds_in_every_cartesian_mode(model, ratio) -> None:
    """D from a damping ratio ζ by double diagonalization: every eigenvalue s of the Cartesian
    dynamics Λ ẍ + D ẋ + K x = 0 (its 12 × 12 state matrix, numpy's eigvals) has −Re s / |s|
    = ζ, for an anisotropic stiffness, given full (rotated off the axes) and diagonal."""
    controller = _controller(model)
    q = home_configuration(model)
    space = controller._operational_space(model.frame_jacobian(q), model.mass_matrix(q))
    rotation = np.zeros((6, 6))
    rotation[:3, :3] = rotation[3:, 3:] = pin.exp3(np.array([0.3, -0.5, 0.8]))
    for stiffness in (np.diag(ANISOTROPIC), rotation @ np.diag(ANISOTROPIC) @ rotation.T):
        damping = ratio_damping(stiffness, space, ratio)
        inverse_inertia = np.linalg.inv(space.inertia)
        system = np.block(
            [
                [np.zeros((6, 6)), np.eye(6)],
                [-inverse_inertia @ stiffness, -inverse_inertia @ damping],
            ]
        )
        eigenvalues = np.linalg.eigvals(system)
        assert np.allclose(-eigenvalues.real / abs(eigenvalues), ratio, atol=1e-9)


def test_near_a_singularity_the_inertia_stays_bounded(model) -> None:
    """With the differential IK's measure: below the manipulability threshold s₀ (the arm
    straight up, and bending out of it) λ² = λ_max² (1 − s/s₀)² with s = sqrt(det(J Jᵀ))
    (numpy's determinant), Λ's largest eigenvalue stays ≤ 1/λ² (20 kg at the singularity
    itself, where J M⁻¹ Jᵀ is singular), and the law's torques there are finite."""
    controller = _controller(model)
    for bend in (0.0, 0.05, 0.2):
        q = model.neutral()
        q[3] = bend  # [rad] joint4: 0 is the straight, singular arm
        jacobian = model.frame_jacobian(q)
        space = controller._operational_space(jacobian, model.mass_matrix(q))
        measure = math.sqrt(max(np.linalg.det(jacobian[:, :7] @ jacobian[:, :7].T), 0.0))
        assert measure < 0.01
        expected = 0.05 * (1.0 - measure / 0.01) ** 2
        assert space.damping_squared == pytest.approx(expected, rel=1e-6, abs=1e-12)
        assert np.linalg.eigvalsh(space.inertia).max() <= 1.0 / expected * (1 + 1e-9)
        target = model.frame_pose(q)
        target[:3, 3] += [0.0, 0.0, 0.01]  # along the singular direction
        controller.set_target(CartesianTarget(target, "base_link"))
        tau = controller.compute(
            JointState(bend, q, np.zeros(model.nv)), JointReference.hold(q), DT
        )
        assert np.isfinite(tau).all()


def _equilibrium(controller, model, q):
    """The controller holding the TCP pose at ``q`` with the posture ``q``: its first tick
    there (the commanded pose starts on the target)."""
    controller.set_target(CartesianTarget(model.frame_pose(q), "base_link"))
    controller.compute(JointState(0.0, q, np.zeros(model.nv)), JointReference.hold(q), DT)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"stiffness_frame": "tcp", "stiffness": ANISOTROPIC, "damping_ratio": 0.6},
        {"damping_mode": "explicit", "stiffness_frame": "tcp", "stiffness": ANISOTROPIC},
    ],
    ids=["base-ratio", "tcp-ratio", "tcp-explicit"],
)
def test_linear_feedback_is_the_laws_derivative(model, changes) -> None:
    """linear_feedback (what the sampled-loop check and the gain judgement evaluate) equals
    −∂τ/∂q and −∂τ/∂v of the law itself (central differences of compute, gravity removed, about
    an equilibrium), arm and fingers, in the base and TCP stiffness frames, with damping from a
    ratio and explicit."""
    for q in _configurations(model, 3):
        controller = _controller(model, **changes)
        _equilibrium(controller, model, q)
        reference = JointReference.hold(q)
        step = 1e-6
        numeric_k, numeric_d = np.zeros((model.nv, model.nv)), np.zeros((model.nv, model.nv))
        for j in range(model.nv):
            offset = np.zeros(model.nv)
            offset[j] = step
            for sign in (1.0, -1.0):
                moved = q + sign * offset
                tau = controller.compute(
                    JointState(0.0, moved, np.zeros(model.nv)), reference, DT
                ) - model.gravity(moved)
                numeric_k[:, j] -= sign * tau / (2 * step)
                tau = controller.compute(JointState(0.0, q, sign * offset), reference, DT)
                numeric_d[:, j] -= sign * (tau - model.gravity(q)) / (2 * step)
        stiffness, damping = controller.linear_feedback(q)
        assert np.allclose(stiffness, numeric_k, atol=1e-4 * abs(stiffness).max())
        assert np.allclose(damping, numeric_d, atol=1e-4 * abs(damping).max())


def _push(controller, model, force, seconds=3.0):
    """Simulate the arm (Pinocchio's ABA on the whole model, fingers included; semi-implicit
    Euler at the control period) under the controller holding its start pose — home with the
    TCP tilted and turned (joints 1, 6, 7), so that its axes are not the base's — with
    ``force`` [N] at the TCP (base axes) from t = 0: the start position [m], the TCP pose and
    the largest joint speed at the end."""
    q = home_configuration(model)
    q[0], q[5], q[6] = 0.4, 0.8, 0.7  # [rad] the TCP tilted and turned: axes off the base's
    v = np.zeros(model.nv)
    plant = model.with_own_data()
    data = plant.model.createData()
    start = plant.frame_pose(q)
    controller.set_target(CartesianTarget(start, "base_link"))
    reference = JointReference.hold(q)
    wrench = np.concatenate([force, np.zeros(3)])
    for k in range(int(seconds / DT)):
        tau = controller.compute(JointState(k * DT, q.copy(), v.copy()), reference, DT)
        tau += plant.frame_jacobian(q).T @ wrench
        acceleration = pin.aba(plant.model, data, q, v, tau)
        v = v + DT * acceleration
        q = q + DT * v
    return start[:3, 3], plant.frame_pose(q), np.abs(v).max()


@pytest.mark.parametrize("frame", ["base", "tcp"])
def test_a_static_push_is_held_at_the_compliance(model, frame) -> None:
    """A 10 N push at the TCP (in the base frame) against the stiffness: at rest the TCP is
    displaced by K⁻¹F — (F/k) along the push for a base-frame K, R K⁻¹ Rᵀ F for a TCP-frame K
    (anisotropic, R the TCP rotation) — within 5 %, its orientation kept."""
    controller = _controller(model, stiffness=ANISOTROPIC, stiffness_frame=frame)
    force = np.array([6.0, -8.0, 0.0])  # [N], 10 N
    start, pose, speed = _push(controller, model, force)
    translational = np.diag(ANISOTROPIC[:3])
    rotation = pose[:3, :3] if frame == "tcp" else np.eye(3)
    expected = rotation @ np.linalg.inv(translational) @ rotation.T @ force
    displacement = pose[:3, 3] - start
    assert speed < 1e-3  # [rad/s | m/s] at rest
    assert np.linalg.norm(displacement - expected) <= 0.05 * np.linalg.norm(expected)


def test_the_commanded_pose_moves_in_bounded_steps(model) -> None:
    """A far target (0.1 m and 0.5 rad away) is not jumped to: the commanded pose starts at the
    measured TCP pose and moves at most max_position_step [m] and max_rotation_step [rad] a
    tick, along the way, until it is the target. After prepare (an activation), and after a gap
    in the state's stamps, it starts again from the measured pose."""
    controller = _controller(model, max_position_step=0.001, max_rotation_step=0.004)
    q = home_configuration(model)
    start = model.frame_pose(q)
    goal = start.copy()
    goal[:3, 3] += [0.06, 0.0, -0.08]
    goal[:3, :3] = pin.exp3(np.array([0.0, 0.5, 0.0])) @ start[:3, :3]
    controller.set_target(CartesianTarget(goal, "base_link"))
    state = JointState(0.0, q, np.zeros(model.nv))
    previous = start
    for k in range(200):
        controller.compute(state._replace(stamp=k * DT), JointReference.hold(q), DT)
        commanded = controller.commanded_pose
        assert np.linalg.norm(commanded[:3, 3] - previous[:3, 3]) <= 0.001 + 1e-12
        turn = pin.log3(commanded[:3, :3] @ previous[:3, :3].T)
        assert np.linalg.norm(turn) <= 0.004 + 1e-12
        previous = commanded
    assert np.allclose(previous, goal, atol=1e-12)
    controller.prepare(state, DT)
    controller.compute(state._replace(stamp=0.2), JointReference.hold(q), DT)
    first = controller.commanded_pose
    assert np.linalg.norm(first[:3, 3] - start[:3, 3]) <= 0.001 + 1e-12
    for k in range(200):  # back on the target ...
        controller.compute(state._replace(stamp=0.2 + k * DT), JointReference.hold(q), DT)
    assert np.allclose(controller.commanded_pose, goal, atol=1e-12)
    # ... then a tick 0.1 s of state time later (the controller was not run): from the measured
    controller.compute(state._replace(stamp=0.5), JointReference.hold(q), DT)
    assert np.linalg.norm(controller.commanded_pose[:3, 3] - start[:3, 3]) <= 0.001 + 1e-12


def test_without_a_target_it_follows_the_joint_reference(model) -> None:
    """No Cartesian target (or after clear_target): the commanded pose is the forward kinematics
    of the joint reference, so a held reference holds the TCP where it is (at rest on it, only
    gravity is commanded), and a moved reference pulls the TCP toward its own TCP pose."""
    controller = _controller(model)
    q = home_configuration(model)
    state = JointState(0.0, q, np.zeros(model.nv))
    tau = controller.compute(state, JointReference.hold(q), DT)
    assert np.allclose(tau, model.gravity(q), atol=1e-9)
    ahead = q.copy()
    ahead[1] += 0.01  # [rad] joint2 forward: the reference's TCP moves
    tau = controller.compute(state._replace(stamp=DT), JointReference.hold(ahead), DT)
    pull = np.linalg.pinv(model.frame_jacobian(q).T) @ (tau - model.gravity(q))
    toward = model.frame_pose(ahead)[:3, 3] - model.frame_pose(q)[:3, 3]
    assert pull[:3] @ toward > 0.9 * np.linalg.norm(pull[:3]) * np.linalg.norm(toward)
    controller.set_target(CartesianTarget(model.frame_pose(ahead), "base_link"))
    controller.clear_target()
    controller.compute(state._replace(stamp=2 * DT), JointReference.hold(q), DT)
    assert controller.target is None


def test_targets_set_from_another_thread_arrive_whole(model) -> None:
    """set_target from another thread while the control thread ticks: every tick tracks one of
    the targets set, whole (its pose and its wrench from the same call), never a mix; the last
    one set is the one tracked after the next tick."""
    controller = _controller(model)
    q = home_configuration(model)
    base = model.frame_pose(q)
    targets = []
    for k in range(50):
        pose = base.copy()
        pose[2, 3] += 0.001 * k
        targets.append(CartesianTarget(pose, "base_link", wrench=[0.0, 0.0, float(k), 0, 0, 0]))
    done = threading.Event()

    def setter() -> None:
        for target in targets:
            controller.set_target(target)
        done.set()

    state = JointState(0.0, q, np.zeros(model.nv))
    thread = threading.Thread(target=setter)
    thread.start()
    k = 0
    while not done.is_set() or k < 2:
        controller.compute(state._replace(stamp=k * DT), JointReference.hold(q), DT)
        tracked = controller.target
        if tracked is not None:
            index = int(tracked.wrench[2])
            assert np.array_equal(tracked.pose, targets[index].pose)
        k += 1
    thread.join()
    controller.compute(state._replace(stamp=k * DT), JointReference.hold(q), DT)
    assert np.array_equal(controller.target.pose, targets[-1].pose)


def test_cartesian_capability_is_declared(model) -> None:
    """The controller says it takes a Cartesian target; the joint laws say they take a joint
    reference (what the chain factory dispatches on)."""
    assert frozenset({CARTESIAN}) == CartesianImpedanceController.ACCEPTS
    assert frozenset({JOINT}) == JointImpedanceController.ACCEPTS
    assert PARAMETERS.live == CartesianImpedanceController.GAIN_NAMES


def test_a_bad_target_is_refused_and_changes_nothing(model) -> None:
    """A target in another frame, a non-rigid pose, or a NaN wrench is refused naming it; the
    target tracked stays the last good one (a read-only copy: the caller's arrays are not
    kept)."""
    controller = _controller(model)
    q = home_configuration(model)
    good = CartesianTarget(model.frame_pose(q), "base_link")
    controller.set_target(good)
    bent = model.frame_pose(q)
    bent[:3, :3] *= 1.1
    for bad, words in (
        (CartesianTarget(model.frame_pose(q), "world"), "frame 'world'"),
        (CartesianTarget(bent, "base_link"), "not a rotation"),
        (
            CartesianTarget(model.frame_pose(q), "base_link", wrench=[0, 0, math.nan, 0, 0, 0]),
            "wrench",
        ),
    ):
        with pytest.raises(TargetError, match=words):
            controller.set_target(bad)
    controller.compute(JointState(0.0, q, np.zeros(model.nv)), JointReference.hold(q), DT)
    assert controller.target is not None
    assert np.array_equal(controller.target.pose, good.pose)
    assert not controller.target.pose.flags.writeable  # its own copy, handed out read-only
    assert good.pose.flags.writeable  # the caller's untouched


@pytest.mark.parametrize(
    ("entry", "value", "words"),
    [
        ("stiffness", [600.0] * 5, "stiffness: expected 6 or 36 values, got 5"),
        ("stiffness", [600.0, math.nan, 600.0, 30.0, 30.0, 30.0], "stiffness: non-finite"),
        ("stiffness", [600.0, -1.0, 600.0, 30.0, 30.0, 30.0], "stiffness: values must be >= 0"),
        ("stiffness", list(np.diag([1.0, 1, 1, 1, 1, -1]).ravel()), "not positive semi-definite"),
        ("stiffness", list((np.eye(6) + np.eye(6, k=1)).ravel()), "not symmetric"),
        ("damping_ratio", -0.5, "damping_ratio: must be >= 0"),
        ("damping", [1.0] * 7, "damping: expected 6 or 36 values"),
        ("nullspace_stiffness", [1.0, 2.0], "nullspace_stiffness: expected a number"),
        ("stiffness_frame", "world", "'world' is not one of base, tcp"),
        ("damping_mode", "critical", "'critical' is not one of ratio, explicit"),
        ("max_position_step", 0.0, "max_position_step: must be > 0"),
    ],
)
def test_bad_parameters_are_refused_naming_them(model, entry, value, words) -> None:
    """controllers.yaml entries of the wrong size, non-finite, negative, a non-symmetric or
    indefinite stiffness matrix, an unknown frame or mode: GainError naming the entry; and as a
    live set (the gains), nothing is staged."""
    joint_names = model.joint_names
    with pytest.raises(GainError, match=words):
        CartesianImpedanceController.from_parameters(
            model.with_own_data(), joint_names, {entry: value}
        )
    if entry in PARAMETERS.live:
        controller = _controller(model)
        before = {name: getattr(controller, name).copy() for name in PARAMETERS.live}
        with pytest.raises(GainError, match=words):
            controller.stage_gains({entry: value})
        assert controller._staged is None
        assert all(np.array_equal(getattr(controller, n), v) for n, v in before.items())


def test_a_full_stiffness_matrix_and_its_diagonal_are_the_same_gain(model) -> None:
    """36 values making a diagonal matrix and the 6 values of its diagonal validate to the same
    gain (its 6 × 6 matrix, row by row), as does a 6 × 6 array."""
    controller = _controller(model)
    diagonal = controller.validate_gains({"stiffness": ANISOTROPIC})["stiffness"]
    full = controller.validate_gains({"stiffness": list(np.diag(ANISOTROPIC).ravel())})
    array = controller.validate_gains({"stiffness": np.diag(ANISOTROPIC)})
    assert np.array_equal(diagonal, np.diag(ANISOTROPIC).ravel())
    assert np.array_equal(full["stiffness"], diagonal)
    assert np.array_equal(array["stiffness"], diagonal)


def test_the_gain_judgement_covers_cartesian_gains(model) -> None:
    """The sampled-loop judgement on the law's linear feedback: the defaults are stable at
    1 kHz everywhere checked; a 6-vector stiffness 10⁴ × larger is refused as unstable where
    the arm is; a scalar nullspace stiffness 20 × larger is applied with a warning naming it;
    fingers left without feedback are refused naming them."""
    controller = _controller(model)
    home = home_configuration(model)
    check = GainStability(model, controller, check_configurations(model, home), DT, 0)
    worst = check.worst()
    assert worst is not None and worst.stable
    current = {name: getattr(controller, name) for name in controller.GAIN_NAMES}
    stiff = controller.validate_gains({"stiffness": [6e6, 6e6, 6e6, 3e5, 3e5, 3e5]})
    verdict = judge_gains("cart", check, current, stiff, current, home)
    assert verdict.refusal is not None and "unstable" in verdict.refusal
    null = controller.validate_gains({"nullspace_stiffness": 200.0})
    verdict = judge_gains("cart", check, current, null, current, home)
    assert verdict.accepted
    assert any("nullspace_stiffness above 10×" in w and "(20×)" in w for w in verdict.warnings)
    free = controller.validate_gains({"finger_stiffness": 0.0, "finger_damping": 0.0})
    verdict = judge_gains("cart", check, current, free, current, home)
    assert verdict.refusal is not None and "left_finger_joint" in verdict.refusal


def test_the_entry_point_resolves_when_installed() -> None:
    """ct_controllers/CartesianImpedance resolves to this class through the controllers'
    entry-point group (once the package is installed with it: `make setup`)."""
    try:
        found = load_plugin(CONTROLLERS, "ct_controllers/CartesianImpedance")
    except UnknownPluginError:
        pytest.skip("the installed package metadata predates this entry point")
    assert found is CartesianImpedanceController


def test_on_mujoco_through_the_loop_a_push_is_held_at_the_compliance() -> None:
    """The law as the loop runs it — the real MuJoCo plant (lockstep, effort interface), the
    guard, the command limiter last — switched in while the arm holds: the TCP stays where it
    was (within 1 mm), and a 10 N push applied to the hand at the TCP (MuJoCo's xfrc_applied:
    an external force, the plant's input, not its state) displaces it by K⁻¹F within 5 % once
    at rest; released, it comes back."""
    import mujoco

    rig = make_rig("mujoco")
    loop, config = rig.stack.loop, rig.config
    scene = rig.injector.inner.simulated_scene()
    assert scene is not None
    ticks = round(1.0 / config.period)
    try:
        loop.run_ticks(round(0.1 / config.period))
        controller = CartesianImpedanceController(
            rig.stack.model.with_own_data(), stiffness=ANISOTROPIC
        )
        loop.switch_controller(controller)
        loop.run_ticks(ticks)
        model = new_robot_model()
        start = controller.commanded_pose
        assert start is not None
        snapshot = loop.snapshot()
        assert snapshot is not None and snapshot.fault is None
        assert np.linalg.norm(model.frame_pose(snapshot.position)[:3, 3] - start[:3, 3]) < 1e-3
        hand = scene.model.jnt_bodyid[
            mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_JOINT, "joint7")
        ]
        force = np.array([6.0, -8.0, 0.0])  # [N], 10 N
        for _ in range(3):  # re-aimed each second: the TCP moves a little under the push
            tcp = model.frame_pose(loop.snapshot().position)[:3, 3]
            with scene.lock:
                lever = tcp - scene.data.xipos[hand]  # xfrc_applied acts at the body's COM
                scene.data.xfrc_applied[hand] = np.concatenate([force, np.cross(lever, force)])
            loop.run_ticks(ticks)
        snapshot = loop.snapshot()
        displacement = model.frame_pose(snapshot.position)[:3, 3] - start[:3, 3]
        expected = np.linalg.inv(np.diag(ANISOTROPIC[:3])) @ force
        print(f"MuJoCo push: displacement {displacement} m, K⁻¹F {expected} m")
        assert np.abs(snapshot.velocity).max() < 1e-3
        assert np.linalg.norm(displacement - expected) <= 0.05 * np.linalg.norm(expected)
        with scene.lock:
            scene.data.xfrc_applied[hand] = 0.0
        loop.run_ticks(2 * ticks)
        back = model.frame_pose(loop.snapshot().position)[:3, 3] - start[:3, 3]
        assert np.linalg.norm(back) < 1e-3
        assert loop.fault is None
    finally:
        with scene.lock:
            scene.data.xfrc_applied[:] = 0.0
        rig.close()


# Gains for the 100 Hz rigs with a period of delay (the bridge, CANopen): stable there.
SLOW_LOOP = SLOW_LOOP_CARTESIAN_IMPEDANCE


@pytest.mark.realtime
@pytest.mark.parametrize("backend", ["ros2_control_bridge", "canopen"])
def test_on_the_real_backends_a_target_3_cm_away_is_reached(backend) -> None:
    """The same law on the effort interfaces of the real backends' rigs (the ros2_control bridge
    against its plant process over loopback DDS, CANopen CiA 402 torque mode against simulated
    drives), at their 100 Hz with gains stable there: a Cartesian target 3 cm away (set from
    this thread while the loop runs) is reached — the plant's true joint positions put the TCP
    within 3 mm of it (an independent model's FK; the joint chain's bound on these rigs in
    test_backend_interfaces: CANopen's torque quantum, 0.1 % of the rated torque, is about
    1 mm at the TCP with these gains) — and no fault is latched."""
    model = new_robot_model()
    rig = make_rig(backend)
    loop, config = rig.stack.loop, rig.config
    try:
        # Everything slow before the loop runs: it is ticked on this thread, and a pause
        # between ticks is a command timeout to the bridge's watchdog.
        controller = CartesianImpedanceController(rig.stack.model.with_own_data(), **SLOW_LOOP)
        check = GainStability(
            rig.stack.model,
            controller,
            check_configurations(rig.stack.model, home_configuration(rig.stack.model)),
            config.period,
            rig.stack.hardware.measurement_delay,
        )
        worst = check.worst()
        assert worst is not None and worst.stable
        loop.run_ticks(round(0.2 / config.period))
        loop.switch_controller(controller)
        snapshot = loop.snapshot()
        assert snapshot is not None and snapshot.fault is None
        target = model.frame_pose(snapshot.position)
        target[:3, 3] += [0.02, -0.02, 0.01]
        controller.set_target(CartesianTarget(target, config.base_frame))
        loop.run_ticks(round(4.0 / config.period))
        truth = rig.true_positions()
        q = np.zeros(model.nq)
        for name, value in truth.items():
            q[model.q_index(name)] = value
        error = float(np.linalg.norm(model.frame_pose(q)[:3, 3] - target[:3, 3]))
        print(f"{backend}: plant TCP {error:.2e} m from the target")
        assert error <= 3e-3
        assert loop.fault is None
    finally:
        rig.close()
