"""ct_controllers.model.robot: names, kinematics and dynamics of the Pinocchio model, each checked
against an independent computation (RNEA columns, finite differences, URDF numbers)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from helpers import bundled_description, new_robot_model, random_configuration

from ct_controllers.model.robot import RobotModel, UnknownNameError

# URDF joint origins along z from base_link to the TCP [m]: joint1..joint7, flange→hand,
# hand→tcp.
TCP_HEIGHT_AT_ZERO = 0.15 + 0.21 + 0.20 + 0.22 + 0.20 + 0.20 + 0.081 + 0.045 + 0.09


@pytest.fixture(scope="module")
def model() -> RobotModel:
    return new_robot_model()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


# --- names -----------------------------------------------------------------------------------
def test_joint_names_are_the_movable_urdf_joints(model):
    """The model has the 9 movable joints, 1 DOF each, in kinematic order."""
    assert model.joint_names == (
        *(f"joint{i}" for i in range(1, 8)),
        "left_finger_joint",
        "right_finger_joint",
    )
    assert model.nq == model.nv == 9
    assert [model.q_index(n) for n in model.joint_names] == list(range(9))
    assert [model.v_index(n) for n in model.joint_names] == list(range(9))


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.q_index("elbow_ghost"),
        lambda m: m.v_index("elbow_ghost"),
        lambda m: m.indices(["joint1", "elbow_ghost"]),
    ],
    ids=["q_index", "v_index", "indices"],
)
def test_unknown_joint_name_raises_naming_it(model, call):
    """An unknown joint name raises UnknownNameError whose message names it and lists joints."""
    with pytest.raises(UnknownNameError) as info:
        call(model)
    message = str(info.value)
    assert "'elbow_ghost'" in message
    assert "joint7" in message  # the known names are listed
    assert not message.startswith('"')  # a plain sentence, not KeyError's quoted repr


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.frame_id("gripper_ghost"),
        lambda m: m.frame_pose(m.neutral(), "gripper_ghost"),
        lambda m: m.frame_jacobian(m.neutral(), "gripper_ghost"),
        lambda m: RobotModel(bundled_description().urdf, tcp_frame="gripper_ghost"),
        lambda m: RobotModel(bundled_description().urdf, base_frame="gripper_ghost"),
    ],
    ids=["frame_id", "frame_pose", "frame_jacobian", "tcp_frame", "base_frame"],
)
def test_unknown_frame_name_raises_naming_it(model, call):
    """An unknown frame name raises UnknownNameError naming it and listing the known frames."""
    with pytest.raises(UnknownNameError) as info:
        call(model)
    assert "'gripper_ghost'" in str(info.value)
    assert "tcp" in str(info.value)


def test_indices_follow_list_order_and_reject_duplicates(model):
    """indices() returns q indices in the given order and rejects a repeated name."""
    names = ["right_finger_joint", "joint3", "joint1"]
    idx = model.indices(names)
    q = np.arange(9.0)
    assert q[idx].tolist() == [8.0, 2.0, 0.0]
    with pytest.raises(ValueError, match="'joint3' is listed twice"):
        model.indices(["joint1", "joint3", "joint3"])


def test_limits_are_the_urdf_numbers(model):
    """Position, velocity and effort limits come from the URDF <limit> tags, in radians."""
    assert model.limits.lower[1] == -2.094 and model.limits.upper[1] == 2.094
    assert model.limits.upper[6] == 3.054
    assert model.limits.lower[7] == 0.0 and model.limits.upper[8] == 0.04
    np.testing.assert_array_equal(model.limits.effort, [176, 176, 110, 110, 110, 40, 40, 40, 40])
    assert model.limits.velocity[0] == 1.71 and model.limits.velocity[7] == 0.2


# --- dynamics --------------------------------------------------------------------------------
def _mass_matrix_by_rnea_columns(model: RobotModel, q: np.ndarray) -> np.ndarray:
    """M[:, j] = rnea(q, 0, e_j) − rnea(q, 0, 0): inertia matrix without CRBA."""
    zero = np.zeros(model.nv)
    bias = model.inverse_dynamics(q, zero, zero)
    columns = [model.inverse_dynamics(q, zero, e) - bias for e in np.eye(model.nv)]
    return np.column_stack(columns)


def test_mass_matrix_is_symmetric_and_equals_rnea_columns(model, rng):
    """M(q) from CRBA is symmetric, positive definite and equals the RNEA column construction."""
    for _ in range(20):
        q = random_configuration(model, rng)
        mass = model.mass_matrix(q)
        np.testing.assert_array_equal(mass, mass.T)
        reference = _mass_matrix_by_rnea_columns(model, q)
        assert np.max(np.abs(mass - reference)) <= 1e-9 * max(1.0, np.max(np.abs(reference)))
        assert np.all(np.linalg.eigvalsh(mass) > 0)


def test_rnea_equals_mass_times_acceleration_plus_bias(model, rng):
    """RNEA(q, v, a) = M(q) a + b(q, v) to 1e-9 at random states."""
    for _ in range(20):
        q = random_configuration(model, rng)
        v = rng.uniform(-model.limits.velocity, model.limits.velocity)
        a = rng.uniform(-5.0, 5.0, model.nv)
        tau = model.inverse_dynamics(q, v, a)
        np.testing.assert_allclose(
            tau, model.mass_matrix(q) @ a + model.bias(q, v), rtol=0, atol=1e-9
        )


def test_gravity_equals_rnea_at_rest(model, rng):
    """g(q) = RNEA(q, 0, 0), and b(q, 0) = g(q)."""
    zero = np.zeros(model.nv)
    for _ in range(20):
        q = random_configuration(model, rng)
        g = model.gravity(q)
        np.testing.assert_allclose(g, model.inverse_dynamics(q, zero, zero), rtol=0, atol=1e-9)
        np.testing.assert_allclose(model.bias(q, zero), g, rtol=0, atol=1e-9)


def test_gravity_at_zero_pose_is_analytic(model):
    """Straight up, gravity loads no joint; with joint2 at 90° its torque is the total mass
    beyond it times the COM lever arm (computed from the URDF numbers by hand)."""
    q = model.neutral()
    np.testing.assert_allclose(model.gravity(q), 0.0, atol=1e-12)
    q[1] = np.pi / 2  # joint2 about +y: the arm above it lies along +x
    # (mass, COM height above joint2) for link2..link7, hand, fingers (joint3.. at zero).
    parts = [(3.5, 0.10), (3.0, 0.20 + 0.11), (2.7, 0.42 + 0.10), (1.7, 0.62 + 0.10)]
    parts += [(1.8, 0.82 + 0.0405), (0.3, 0.901 + 0.0225), (0.7, 0.946 + 0.03)]
    parts += [(0.05, 0.946 + 0.06 + 0.025)] * 2
    moment = sum(m * h for m, h in parts)
    above = sum(m for m, _ in parts)
    assert above == pytest.approx(13.8)
    # Gravity's torque about +y of a mass at +x is r × F = (x, 0, 0) × (0, 0, −m g) = +m g x;
    # g(q) is the torque that holds it, the opposite.
    assert model.gravity(q)[1] == pytest.approx(-9.81 * moment, rel=1e-12)
    assert model.gravity(q)[0] == pytest.approx(0.0, abs=1e-12)


def test_returned_arrays_are_copies(model, rng):
    """Results are not views of pin.Data buffers: a later call does not change them."""
    q1, q2 = random_configuration(model, rng), random_configuration(model, rng)
    mass, g, pose = model.mass_matrix(q1), model.gravity(q1), model.frame_pose(q1)
    jac = model.frame_jacobian(q1)
    saved = [x.copy() for x in (mass, g, pose, jac)]
    model.mass_matrix(q2), model.gravity(q2), model.frame_pose(q2), model.frame_jacobian(q2)
    for before, after in zip(saved, (mass, g, pose, jac), strict=True):
        np.testing.assert_array_equal(before, after)


# --- kinematics ------------------------------------------------------------------------------
def test_tcp_jacobian_matches_finite_differences(model, rng):
    """The TCP Jacobian (LOCAL_WORLD_ALIGNED, linear rows then angular) equals central finite
    differences of frame_pose: position directly, rotation via log3(R₊ R₋ᵀ) / 2h."""
    h = 1e-6
    for _ in range(20):
        q = random_configuration(model, rng)
        jac = model.frame_jacobian(q)
        assert jac.shape == (6, model.nv)
        numeric = np.empty((6, model.nv))
        for i in range(model.nv):
            dq = np.zeros(model.nv)
            dq[i] = h
            plus, minus = model.frame_pose(q + dq), model.frame_pose(q - dq)
            numeric[:3, i] = (plus[:3, 3] - minus[:3, 3]) / (2 * h)
            numeric[3:, i] = pin.log3(plus[:3, :3] @ minus[:3, :3].T) / (2 * h)
        np.testing.assert_allclose(jac, numeric, rtol=0, atol=1e-6)


def test_tcp_pose_at_zero_configuration_is_straight_up(model):
    """At q = 0 the TCP is on the z axis at the sum of the URDF joint offsets, axes aligned."""
    pose = model.frame_pose(model.neutral())
    np.testing.assert_allclose(pose[:3, 3], [0.0, 0.0, TCP_HEIGHT_AT_ZERO], atol=1e-12)
    np.testing.assert_allclose(pose[:3, :3], np.eye(3), atol=1e-12)
    np.testing.assert_array_equal(pose[3], [0, 0, 0, 1])
    base = model.frame_pose(model.neutral(), "base_link")
    np.testing.assert_allclose(base, np.eye(4), atol=1e-15)


def test_tcp_sits_between_the_fingers(model, rng):
    """With equal finger openings the TCP is equidistant from both fingers, on the hand's
    approach axis 3 cm beyond the finger joints' midpoint."""
    for _ in range(10):
        q = random_configuration(model, rng)
        q[8] = q[7]
        tcp = model.frame_pose(q)
        left = model.frame_pose(q, "left_finger")[:3, 3]
        right = model.frame_pose(q, "right_finger")[:3, 3]
        middle = (left + right) / 2
        assert np.linalg.norm(tcp[:3, 3] - left) == pytest.approx(
            np.linalg.norm(tcp[:3, 3] - right), abs=1e-12
        )
        np.testing.assert_allclose(tcp[:3, 3] - middle, 0.03 * tcp[:3, 2], atol=1e-12)
        assert np.linalg.norm(left - right) == pytest.approx(2 * q[7], abs=1e-12)


def test_a_model_built_from_another_is_an_independent_copy_with_the_same_dynamics():
    """RobotModel(pin.Model) — what goal threads build instead of parsing the URDF again —
    keeps the armature and every inertia (equal M(q) and b(q, v) at random states), frames and
    limits, and owns its scratch data and model (changing the copy leaves the original)."""
    original = new_robot_model()
    copy = RobotModel(original.model, original.model.frames[original.tcp_frame_id].name)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q = pin.randomConfiguration(original.model)
        v = rng.normal(size=original.nv)
        np.testing.assert_array_equal(copy.mass_matrix(q), original.mass_matrix(q))
        np.testing.assert_array_equal(copy.bias(q, v), original.bias(q, v))
        np.testing.assert_array_equal(copy.frame_pose(q), original.frame_pose(q))
    np.testing.assert_array_equal(copy.model.armature, original.model.armature)
    assert copy.model.armature.max() > 0
    np.testing.assert_array_equal(copy.limits.effort, original.limits.effort)
    assert copy.data is not original.data and copy.model is not original.model
    copy.model.armature[0] += 1.0
    assert copy.model.armature[0] != original.model.armature[0]


def test_with_own_data_shares_the_tree_and_keeps_its_scratch_data_apart():
    """``with_own_data`` gives the same pin.Model (shared, so per-tick model states of the
    two are of one model) with scratch data of its own: evaluating one at a configuration
    leaves what the other evaluated in its data untouched, and both evaluate alike."""
    original = new_robot_model()
    other = original.with_own_data()
    assert other.model is original.model and other.data is not original.data
    assert other.joint_names == original.joint_names and other.tcp_frame_id == original.tcp_frame_id
    rng = np.random.default_rng(8)
    q1, q2 = (pin.randomConfiguration(original.model) for _ in range(2))
    pin.framesForwardKinematics(original.model, original.data, q1)
    before = original.data.oMf[original.tcp_frame_id].homogeneous
    np.testing.assert_array_equal(other.frame_pose(q2), original.frame_pose(q2))
    pin.framesForwardKinematics(original.model, original.data, q1)
    other.frame_pose(q2)  # evaluates in other.data only
    np.testing.assert_array_equal(original.data.oMf[original.tcp_frame_id].homogeneous, before)
    v = rng.normal(size=original.nv)
    np.testing.assert_array_equal(other.bias(q1, v), original.bias(q1, v))


def test_the_bundled_arm_needs_no_configuration_conversion(model):
    """The bundled arm has no continuous or mimic joint (nq == nv in Pinocchio): the model
    layer's joint positions are Pinocchio's configuration, handed over as the same array (the
    per-tick fast path: nothing converted, nothing allocated)."""
    q = model.neutral()
    assert model.model.nq == model.nv == model.nq and not model.mimic
    assert model.configuration.identity and model.pinocchio_configuration(q) is q


def test_a_frame_named_by_a_fixed_joint_and_its_link_means_the_link() -> None:
    """The Unitree Z1 (example-robot-data) names the fixed joint ``gripperStator`` like the link
    it carries: the name means the link (its BODY frame), the joint's frame is renamed
    ``gripperStator_joint`` at the same placement, and what looks frames up by name works —
    the TCP's pose matches the URDF's forward kinematics (the chain's joint origins composed by
    hand), and the IK with the jaw locked builds its reduced model (Pinocchio's
    buildReducedModel refused the ambiguous name)."""
    from ct_controllers.bench.robots import example_robot_path
    from ct_controllers.ik.solver import IkSolver

    urdf = example_robot_path("robots/z1_description/urdf/z1.urdf").read_text()
    model = RobotModel(urdf, tcp_frame="gripperStator", base_frame="world")
    named = {str(f.name): f for f in model.model.frames if "gripperStator" in f.name}
    assert named["gripperStator"].type == pin.FrameType.BODY
    assert named["gripperStator_joint"].type == pin.FrameType.FIXED_JOINT
    assert model.model.frames[model.frame_id("gripperStator")].type == pin.FrameType.BODY
    # At q = 0 every Z1 joint origin has no rotation: the TCP is the sum of the origins from
    # link00 (world → link00 at 0) to gripperStator [m].
    origins = [
        (0, 0, 0.0585),
        (0, 0, 0.045),
        (-0.35, 0, 0),
        (0.218, 0, 0.057),
        (0.07, 0, 0),
        (0.0492, 0, 0),
        (0.051, 0, 0),
    ]
    pose = model.frame_pose(np.zeros(model.nq), "gripperStator")
    np.testing.assert_allclose(pose[:3, 3], np.sum(origins, axis=0), atol=1e-12)
    np.testing.assert_allclose(
        pose, model.frame_pose(np.zeros(model.nq), "gripperStator_joint"), atol=1e-12
    )
    solver = IkSolver(model, locked={"jointGripper": 0.0})
    assert solver.solve(pose).converged
