"""ct_controllers.hardware.mujoco_scene: the MuJoCo scene built from the URDF is the same arm as
the Pinocchio model (kinematics and rigid-body dynamics), with the URDF limits."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
from helpers import bundled_description, new_robot_model, random_configuration

from ct_controllers.hardware.mujoco_scene import TCP_SITE, ServoGains, build_scene
from ct_controllers.model.description import DescriptionError
from ct_controllers.model.robot import RobotModel

SAMPLES = 200


def _close(value: np.ndarray, reference: np.ndarray, rel: float = 1e-6) -> bool:
    return bool(np.linalg.norm(value - reference) <= rel * max(1.0, np.linalg.norm(reference)))


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return new_robot_model()


@pytest.fixture(scope="module")
def arm_only() -> mujoco.MjModel:
    """The arm without table, floor and cube: no contacts."""
    return build_scene(bundled_description().urdf, with_objects=False).compile()


@pytest.fixture(scope="module")
def full_scene() -> mujoco.MjModel:
    return build_scene(bundled_description().urdf).compile()


@pytest.fixture(scope="module")
def dof_map(robot, arm_only) -> tuple[np.ndarray, np.ndarray]:
    """(qpos address, dof address) in MuJoCo for each Pinocchio joint, mapped by joint name."""
    qpos = np.array([arm_only.joint(n).qposadr[0] for n in robot.joint_names])
    dof = np.array([arm_only.joint(n).dofadr[0] for n in robot.joint_names])
    return qpos, dof


@pytest.fixture(scope="module")
def random_states(robot) -> list[tuple[np.ndarray, np.ndarray]]:
    """SAMPLES random (q within the limits, v within the velocity limits)."""
    rng = np.random.default_rng(7)
    return [
        (
            random_configuration(robot, rng),
            rng.uniform(-robot.limits.velocity, robot.limits.velocity),
        )
        for _ in range(SAMPLES)
    ]


def _set_state(model, data, dof_map, q, v):
    qpos_adr, dof_adr = dof_map
    data.qpos[:] = 0.0
    data.qvel[:] = 0.0
    data.qpos[qpos_adr] = q
    data.qvel[dof_adr] = v
    mujoco.mj_forward(model, data)


# --- agreement with Pinocchio ----------------------------------------------------------------
def test_scene_has_one_dof_per_urdf_joint(robot, arm_only):
    """Without objects, the scene's DOFs are exactly the URDF's movable joints."""
    assert arm_only.nq == arm_only.nv == robot.nv
    assert {arm_only.joint(i).name for i in range(arm_only.njnt)} == set(robot.joint_names)
    assert arm_only.nu == robot.nv


def test_tcp_pose_agrees_with_pinocchio(robot, arm_only, dof_map, random_states):
    """Site 'tcp' position and orientation equal RobotModel.frame_pose at random q."""
    data = mujoco.MjData(arm_only)
    site = arm_only.site(TCP_SITE).id
    for q, _ in random_states:
        _set_state(arm_only, data, dof_map, q, np.zeros_like(q))
        pose = robot.frame_pose(q)
        assert _close(data.site_xpos[site], pose[:3, 3]), q
        assert _close(data.site_xmat[site].reshape(3, 3), pose[:3, :3]), q


def test_mass_matrix_agrees_with_pinocchio(robot, arm_only, dof_map, random_states):
    """mj_fullM restricted to the joints (mapped by name) equals RobotModel.mass_matrix."""
    data = mujoco.MjData(arm_only)
    _, dof_adr = dof_map
    full = np.zeros((arm_only.nv, arm_only.nv))
    for q, _ in random_states:
        _set_state(arm_only, data, dof_map, q, np.zeros_like(q))
        mujoco.mj_fullM(arm_only, data, full)  # MuJoCo 4: (m, d, dst)
        mass = full[np.ix_(dof_adr, dof_adr)]
        assert _close(mass, robot.mass_matrix(q)), q


def test_gravity_agrees_with_pinocchio(robot, arm_only, dof_map, random_states):
    """qfrc_bias at zero velocity equals g(q)."""
    data = mujoco.MjData(arm_only)
    _, dof_adr = dof_map
    for q, _ in random_states:
        _set_state(arm_only, data, dof_map, q, np.zeros_like(q))
        assert _close(data.qfrc_bias[dof_adr], robot.gravity(q)), q


def test_bias_forces_agree_with_pinocchio(robot, arm_only, dof_map, random_states):
    """qfrc_bias at random (q, v) equals b(q, v) = C(q, v) v + g(q)."""
    data = mujoco.MjData(arm_only)
    _, dof_adr = dof_map
    velocity_terms = 0.0
    for q, v in random_states:
        _set_state(arm_only, data, dof_map, q, v)
        reference = robot.bias(q, v)
        assert _close(data.qfrc_bias[dof_adr], reference), (q, v)
        velocity_terms = max(velocity_terms, float(np.linalg.norm(reference - robot.gravity(q))))
    # The Coriolis/centrifugal part is not negligible, so C(q, v) v is really compared.
    assert velocity_terms > 1.0


# --- limits and actuators --------------------------------------------------------------------
def test_joint_ranges_are_the_urdf_limits_in_radians(robot, arm_only):
    """MuJoCo joint ranges equal the URDF limits (radians, not read as degrees)."""
    for i, name in enumerate(robot.joint_names):
        joint = arm_only.joint(name)
        assert joint.limited[0] == 1, name
        np.testing.assert_array_equal(
            joint.range, [robot.limits.lower[i], robot.limits.upper[i]], err_msg=name
        )
    assert arm_only.joint("joint1").range[1] == pytest.approx(2.967)  # not 2.967° = 0.0518 rad


def test_effort_actuators_are_motors_limited_to_the_urdf_effort(robot, arm_only):
    """Each joint gets a motor named after it with ctrlrange = forcerange = ±URDF effort."""
    for i, name in enumerate(robot.joint_names):
        actuator = arm_only.actuator(name)
        assert actuator.trnid[0] == arm_only.joint(name).id, name
        effort = robot.limits.effort[i]
        np.testing.assert_array_equal(actuator.ctrlrange, [-effort, effort], err_msg=name)
        np.testing.assert_array_equal(actuator.forcerange, [-effort, effort], err_msg=name)
        assert actuator.ctrllimited[0] == 1 and actuator.forcelimited[0] == 1
        assert actuator.gainprm[0] == 1.0 and not np.any(actuator.biasprm[:3]), name


def test_motor_applies_its_clamped_control_as_joint_force(robot, arm_only):
    """A motor applies ctrl clamped to ±effort directly as generalized force on its joint."""
    data = mujoco.MjData(arm_only)
    data.ctrl[:] = 1000.0  # beyond every effort limit
    data.ctrl[arm_only.actuator("joint3").id] = -7.5
    mujoco.mj_forward(arm_only, data)
    for i, name in enumerate(robot.joint_names):
        expected = -7.5 if name == "joint3" else robot.limits.effort[i]
        dof = arm_only.joint(name).dofadr[0]
        assert data.qfrc_actuator[dof] == pytest.approx(expected), name


def test_position_interface_gets_a_position_servo(robot):
    """A joint on the position interface gets a servo (kp, kv) whose ctrlrange is the joint
    range and forcerange ±effort; its force is kp (target − q) − kv v."""
    gains = ServoGains(kp=250.0, kv=12.0)
    model = build_scene(
        bundled_description().urdf,
        command_interfaces={"joint4": "position", "left_finger_joint": "position"},
        servo_gains=gains,
        with_objects=False,
    ).compile()
    for name in ("joint4", "left_finger_joint"):
        i = robot.q_index(name)
        actuator = model.actuator(name)
        np.testing.assert_array_equal(
            actuator.ctrlrange, [robot.limits.lower[i], robot.limits.upper[i]]
        )
        effort = robot.limits.effort[i]
        np.testing.assert_array_equal(actuator.forcerange, [-effort, effort])
    # The other joints keep their motors.
    np.testing.assert_array_equal(model.actuator("joint3").ctrlrange, [-110.0, 110.0])
    data = mujoco.MjData(model)
    data.qpos[model.joint("joint4").qposadr[0]] = -0.3
    data.qvel[model.joint("joint4").dofadr[0]] = 0.2
    data.ctrl[model.actuator("joint4").id] = -0.25
    mujoco.mj_forward(model, data)
    expected = gains.kp * (-0.25 - -0.3) - gains.kv * 0.2
    assert data.actuator_force[model.actuator("joint4").id] == pytest.approx(expected)
    # A target far off saturates at the URDF effort.
    data.ctrl[model.actuator("joint4").id] = 2.0
    mujoco.mj_forward(model, data)
    assert data.actuator_force[model.actuator("joint4").id] == pytest.approx(110.0)


def test_full_scene_has_table_and_cube_clear_of_arm_dofs(robot, full_scene):
    """The default scene adds a free cube (7 qpos) and keeps one actuator per arm joint."""
    assert full_scene.nq == robot.nq + 7
    assert full_scene.nu == robot.nv
    assert full_scene.body("cube").mass[0] == pytest.approx(0.1)
    data = mujoco.MjData(full_scene)
    mujoco.mj_forward(full_scene, data)
    cube_z = data.xpos[full_scene.body("cube").id][2]
    assert cube_z == pytest.approx(0.025)  # resting on the table top (z = 0)


# --- rejected descriptions -------------------------------------------------------------------
def test_unsupported_collision_shape_is_rejected_naming_it():
    """A collision mesh raises DescriptionError naming the link and the shape."""
    root = ET.fromstring(bundled_description().urdf)
    (link3,) = [link for link in root.findall("link") if link.get("name") == "link3"]
    geometry = link3.find("collision/geometry")
    assert geometry is not None
    geometry.clear()
    ET.SubElement(geometry, "mesh", filename="link3.stl")
    with pytest.raises(DescriptionError, match=r"link 'link3'.*'mesh'"):
        build_scene(ET.tostring(root, encoding="unicode"))


def test_interface_for_unknown_joint_is_rejected_naming_it():
    """A command interface for a joint the URDF lacks raises DescriptionError naming it."""
    with pytest.raises(DescriptionError, match="elbow_ghost"):
        build_scene(bundled_description().urdf, command_interfaces={"elbow_ghost": "effort"})


def test_unknown_interface_kind_is_rejected_naming_it():
    """An interface other than effort/position raises DescriptionError naming joint and kind."""
    with pytest.raises(DescriptionError, match=r"'joint2'.*'velocity'"):
        build_scene(bundled_description().urdf, command_interfaces={"joint2": "velocity"})


def test_missing_tcp_link_is_rejected():
    """A TCP link that is not in the URDF raises DescriptionError naming it."""
    with pytest.raises(DescriptionError, match="tool_ghost"):
        build_scene(bundled_description().urdf, tcp_link="tool_ghost")
