"""The MuJoCo scene of any URDF (MuJoCo's own URDF import plus the stack's additions,
ct_controllers.hardware.mujoco_scene) is the robot Pinocchio reads from the same URDF: TCP and
body poses, mass matrix, gravity and bias forces agree at random states, as do the limits,
damping and friction, on every robot here — the bundled arm (xacro, primitives, armature), the
Franka Panda and the UR5 of the installed example-robot-data (STL meshes, fused fixed and
massless links, a <mimic> finger on the Panda), the UR5 with a continuous wrist (nq ≠ nv in
Pinocchio), the Kinova Jaco 2 (three continuous joints, ranges not centred on zero, every
collision mesh Collada, converted), the Unitree Z1 (a revolute jaw, joint friction, a fixed joint
named like its link), the SO-101 (5 DOF, a revolute jaw, links of grams) and the UR3 with its
gripper (a root link named "world" that its base is fused into), and the Tiago mobile manipulator
with its wheels, head and hand locked (ct_controllers.model.locked_joints; two links whose URDF
inertia MuJoCo refuses, mended). Pinocchio is used directly
(pin.buildModelFromXML), as the independent reader of the URDF; the robots come from the
installed packages, never copied here."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import pinocchio as pin
import pytest
from helpers import bundled_description

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.hardware.interface import JointCommand
from ct_controllers.hardware.mujoco_scene import build_scene, compile_scene
from ct_controllers.hardware.mujoco_system import MujocoConfig, MujocoSystem
from ct_controllers.model.description import DescriptionError, joint_armature
from ct_controllers.model.locked_joints import lock_joints

SAMPLES = 40
REL = 1e-6


_installed = example_robot_path


def _ur5_with_continuous_wrist() -> tuple[str, Path]:
    """The installed UR5 with wrist_3_joint made continuous (its <limit> keeps the effort) and
    given damping and friction: a continuous joint and <dynamics> as another vendor writes."""
    path = _installed("robots/ur_description/urdf/ur5_robot.urdf")
    root = ET.fromstring(path.read_text())
    (joint,) = [j for j in root.findall("joint") if j.get("name") == "wrist_3_joint"]
    joint.set("type", "continuous")
    dynamics = joint.find("dynamics")
    assert dynamics is not None
    dynamics.set("damping", "1.5")
    dynamics.set("friction", "0.7")
    return ET.tostring(root, encoding="unicode"), path.parent


def _tiago_arm_alone() -> tuple[str, Path]:
    """The installed Tiago with every movable joint but the torso lift and the arm locked: the
    wheels (continuous) at 1 and −2 rad, the head turned (0.4, −0.3 rad), the hand's joints at
    0 (its <mimic> followers with them)."""
    path = _installed("robots/tiago_description/robots/tiago.urdf")
    urdf = path.read_text()
    root = ET.fromstring(urdf)
    turned = {
        "wheel_left_joint": 1.0,
        "wheel_right_joint": -2.0,
        "head_1_joint": 0.4,
        "head_2_joint": -0.3,
    }
    hand = {
        j.get("name", ""): 0.0
        for j in root.findall("joint")
        if j.get("name", "").startswith("hand_")
        and j.get("type") != "fixed"
        and j.find("mimic") is None
    }
    return lock_joints(urdf, {**turned, **hand}), path.parent


@dataclass(frozen=True)
class Robot:
    name: str
    tcp: str

    def load(self) -> tuple[str, Path]:
        """(URDF text, the folder its meshes are looked up from)."""
        if self.name == "ct_arm":
            description = bundled_description()
            return description.urdf, Path(description.source).parent
        if self.name == "ur5_continuous":
            return _ur5_with_continuous_wrist()
        if self.name == "tiago_locked":
            return _tiago_arm_alone()
        path = _installed(
            {
                "panda": "robots/panda_description/urdf/panda.urdf",
                "ur5": "robots/ur_description/urdf/ur5_robot.urdf",
                "kinova": "robots/kinova_description/robots/kinova.urdf",
                "z1": "robots/z1_description/urdf/z1.urdf",
                "so101": "robots/so_arm_description/urdf/so101.urdf",
                "ur3_gripper": "robots/ur_description/urdf/ur3_gripper.urdf",
            }[self.name]
        )
        return path.read_text(), path.parent


ROBOTS = (
    Robot("ct_arm", "tcp"),
    Robot("panda", "panda_hand_tcp"),
    Robot("ur5", "tool0"),
    Robot("ur5_continuous", "tool0"),
    Robot("kinova", "j2s6s200_end_effector"),
    # a revolute jaw, joint friction, a fixed joint named like its link
    Robot("z1", "gripperStator"),
    # 5 DOF and a revolute jaw, grams-light links
    Robot("so101", "gripper_frame_link"),
    # a root link named "world", its base fused into it
    Robot("ur3_gripper", "tool0"),
    # a mobile manipulator, all but its torso and arm locked; MuJoCo-refused inertias mended
    Robot("tiago_locked", "hand_tool_link"),
)


@dataclass
class Pair:
    """One robot in both: Pinocchio's model (no mimic: every joint its own coordinate, as in
    MuJoCo before its equality constraints) and the compiled MuJoCo scene, mapped by name."""

    robot: Robot
    urdf: str
    pin_model: pin.Model
    pin_data: pin.Data
    mj_model: mujoco.MjModel
    joints: list[str]  # Pinocchio's joint order

    def random_state(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Pinocchio q, v and the joint angles θ), positions inside the URDF limits (a
        continuous joint anywhere in [−π, π], (cos θ, sin θ) in Pinocchio's q), velocities
        inside the velocity limits."""
        model = self.pin_model
        q, theta = np.zeros(model.nq), np.zeros(len(self.joints))
        for k, name in enumerate(self.joints):
            joint = model.joints[model.getJointId(name)]
            if joint.nq == 2:  # continuous: a unit complex number
                theta[k] = rng.uniform(-math.pi, math.pi)
                q[joint.idx_q : joint.idx_q + 2] = (math.cos(theta[k]), math.sin(theta[k]))
            else:
                low = model.lowerPositionLimit[joint.idx_q]
                high = model.upperPositionLimit[joint.idx_q]
                theta[k] = q[joint.idx_q] = rng.uniform(low, high)
        v = rng.uniform(-model.velocityLimit, model.velocityLimit)
        return q, v, theta

    def set_mujoco(self, data: mujoco.MjData, theta: np.ndarray, v: np.ndarray) -> None:
        data.qpos[:] = 0.0
        data.qvel[:] = 0.0
        for k, name in enumerate(self.joints):
            joint = self.mj_model.joint(name)
            data.qpos[joint.qposadr[0]] = theta[k]
            data.qvel[joint.dofadr[0]] = v[
                self.pin_model.joints[self.pin_model.getJointId(name)].idx_v
            ]
        mujoco.mj_forward(self.mj_model, data)

    @property
    def dofs(self) -> np.ndarray:
        """MuJoCo's dof address of each Pinocchio velocity coordinate."""
        model = self.pin_model
        dofs = np.zeros(model.nv, dtype=int)
        for name in self.joints:
            dofs[model.joints[model.getJointId(name)].idx_v] = self.mj_model.joint(name).dofadr[0]
        return dofs


@pytest.fixture(scope="module", params=ROBOTS, ids=lambda robot: robot.name)
def pair(request: pytest.FixtureRequest) -> Pair:
    robot: Robot = request.param
    urdf, folder = robot.load()
    pin_model = pin.buildModelFromXML(urdf)
    for name, value in joint_armature(urdf).items():  # ct_controllers' <dynamics armature>
        pin_model.armature[pin_model.joints[pin_model.getJointId(name)].idx_v] = value
    mj_model = compile_scene(
        build_scene(urdf, tcp_frame=robot.tcp, with_objects=False, urdf_directory=folder)
    )
    joints = [pin_model.names[i] for i in range(1, pin_model.njoints)]
    return Pair(robot, urdf, pin_model, pin_model.createData(), mj_model, joints)


def _close(value: np.ndarray, reference: np.ndarray) -> bool:
    return bool(np.linalg.norm(value - reference) <= REL * max(1.0, np.linalg.norm(reference)))


def test_scene_has_the_urdf_joints_and_one_actuator_per_non_mimic_joint(pair: Pair) -> None:
    """The scene's joints are the URDF's movable joints (names as Pinocchio reads them); every
    one but a mimic follower has an actuator named after it; fixed links are fused (fewer
    bodies than URDF links) but the root link keeps its body."""
    model = pair.mj_model
    assert {model.joint(i).name for i in range(model.njnt)} == set(pair.joints)
    urdf = ET.fromstring(pair.urdf)
    followers = {j.get("name") for j in urdf.iter("joint") if j.find("mimic") is not None}
    assert {model.actuator(i).name for i in range(model.nu)} == set(pair.joints) - followers
    links = [link.get("name") for link in urdf.findall("link")]
    children = {child.get("link") for child in urdf.iter("child")}
    (root,) = [name for name in links if name not in children]
    assert model.nbody < len(links) + 1  # + 1: MuJoCo's world body
    if root != "world":  # a root link named "world" is MuJoCo's world body
        assert model.body(root).parentid[0] == 0


def test_limits_damping_friction_and_effort_agree_with_pinocchio(pair: Pair) -> None:
    """Per joint: MuJoCo's range equals Pinocchio's position limits (none for a continuous
    joint, nor for a mimic follower: its master's range bounds it), its damping and
    frictionloss Pinocchio's damping and friction, and the actuator's force range ± Pinocchio's
    effort limit."""
    model, pin_model = pair.mj_model, pair.pin_model
    urdf = ET.fromstring(pair.urdf)
    followers = {j.get("name") for j in urdf.iter("joint") if j.find("mimic") is not None}
    for name in pair.joints:
        joint = pin_model.joints[pin_model.getJointId(name)]
        mj_joint = model.joint(name)
        if joint.nq == 2 or name in followers:
            assert mj_joint.limited[0] == 0, name
        else:
            assert mj_joint.limited[0] == 1, name
            np.testing.assert_allclose(
                mj_joint.range,
                [
                    pin_model.lowerPositionLimit[joint.idx_q],
                    pin_model.upperPositionLimit[joint.idx_q],
                ],
                err_msg=name,
            )
        dof = mj_joint.dofadr[0]
        assert model.dof_damping[dof] == pytest.approx(pin_model.damping[joint.idx_v]), name
        assert model.dof_frictionloss[dof] == pytest.approx(pin_model.friction[joint.idx_v]), name
        assert model.dof_armature[dof] == pytest.approx(pin_model.armature[joint.idx_v]), name
        actuator = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
        if actuator >= 0:
            effort = pin_model.effortLimit[joint.idx_v]
            np.testing.assert_allclose(model.actuator_forcerange[actuator], [-effort, effort])
    if pair.robot.name == "ur5_continuous":  # the perturbation really reached MuJoCo
        assert model.dof_frictionloss[model.joint("wrist_3_joint").dofadr[0]] == 0.7


def test_poses_and_dynamics_agree_with_pinocchio(pair: Pair) -> None:
    """At random states: the TCP site and every body named after a URDF link have Pinocchio's
    frame pose; mj_fullM (with armature) equals crba (symmetrized); qfrc_bias at zero velocity
    equals g(q) and at the random velocity b(q, v) = C(q, v) v + g(q) — with a Coriolis part
    that is not negligible."""
    model, pin_model, pin_data = pair.mj_model, pair.pin_model, pair.pin_data
    data = mujoco.MjData(model)
    dofs = pair.dofs
    site = model.site(pair.robot.tcp).id
    tcp_frame = pin_model.getFrameId(pair.robot.tcp, pin.BODY)  # a link (Z1: a joint too)
    bodies = [
        (b, pin_model.getFrameId(model.body(b).name, pin.BODY))
        for b in range(1, model.nbody)
        if pin_model.existFrame(model.body(b).name)
    ]
    assert len(bodies) == model.nbody - 1  # every body is a URDF link
    rng = np.random.default_rng(11)
    full = np.zeros((model.nv, model.nv))
    velocity_terms = 0.0
    for _ in range(SAMPLES):
        q, v, theta = pair.random_state(rng)
        pin.framesForwardKinematics(pin_model, pin_data, q)
        pair.set_mujoco(data, theta, np.zeros(pin_model.nv))
        tcp = pin_data.oMf[tcp_frame]
        assert _close(data.site_xpos[site], tcp.translation), theta
        assert _close(data.site_xmat[site].reshape(3, 3), tcp.rotation), theta
        for body, frame in bodies:
            pose = pin_data.oMf[frame]
            assert _close(data.xpos[body], pose.translation), (model.body(body).name, theta)
            assert _close(data.xmat[body].reshape(3, 3), pose.rotation), model.body(body).name
        mujoco.mj_fullM(model, data, full)  # MuJoCo 4: (m, d, dst)
        mass = pin.crba(pin_model, pin_data, q)
        mass = np.triu(mass) + np.triu(mass, 1).T
        assert _close(full[np.ix_(dofs, dofs)], mass), theta
        gravity = pin.computeGeneralizedGravity(pin_model, pin_data, q).copy()
        assert _close(data.qfrc_bias[dofs], gravity), theta
        pair.set_mujoco(data, theta, v)
        bias = pin.nonLinearEffects(pin_model, pin_data, q, v).copy()
        assert _close(data.qfrc_bias[dofs], bias), (theta, v)
        velocity_terms = max(velocity_terms, float(np.linalg.norm(bias - gravity)))
    assert velocity_terms > 0.1


def test_continuous_joint_is_an_unlimited_hinge_with_an_unlimited_servo() -> None:
    """A continuous URDF joint (nq 2 in Pinocchio) is a hinge without range in MuJoCo, and on
    the position interface its servo takes any target angle (no ctrl range)."""
    urdf, folder = _ur5_with_continuous_wrist()
    assert pin.buildModelFromXML(urdf).nq == 7  # the premise: Pinocchio's nq ≠ nv
    model = compile_scene(
        build_scene(
            urdf,
            command_interfaces={"wrist_3_joint": "position"},
            with_objects=False,
            urdf_directory=folder,
        )
    )
    assert model.joint("wrist_3_joint").limited[0] == 0
    assert model.actuator("wrist_3_joint").ctrllimited[0] == 0
    data = mujoco.MjData(model)
    data.ctrl[model.actuator("wrist_3_joint").id] = 5.0  # beyond ±π: no clamp
    mujoco.mj_forward(model, data)
    assert data.actuator_force[model.actuator("wrist_3_joint").id] == pytest.approx(
        min(400.0 * 5.0, 28.0)
    )


def test_mimic_finger_is_an_equality_constraint_and_agrees_with_pinocchio_mimic() -> None:
    """The Panda's <mimic> finger: MuJoCo has a joint equality q2 = multiplier·q1 + offset with
    the URDF's coefficients (here perturbed to 0.5 and 0.01 so that they are really read) and no
    actuator on the follower; projected onto the master's coordinate (G = ∂q_full/∂q_reduced),
    MuJoCo's M, g and b equal those of Pinocchio's own mimic model (buildModelFromXML(mimic=
    True)); and in simulation the follower follows its master."""
    path = _installed("robots/panda_description/urdf/panda.urdf")
    root = ET.fromstring(path.read_text())
    (mimic,) = root.iter("mimic")
    mimic.set("multiplier", "0.5")
    mimic.set("offset", "0.01")
    urdf = ET.tostring(root, encoding="unicode")
    model = compile_scene(build_scene(urdf, with_objects=False, urdf_directory=path.parent))
    follower, master = model.joint("panda_finger_joint2"), model.joint("panda_finger_joint1")
    assert model.neq == 1 and model.eq_type[0] == mujoco.mjtEq.mjEQ_JOINT
    assert (model.eq_obj1id[0], model.eq_obj2id[0]) == (follower.id, master.id)
    np.testing.assert_allclose(model.eq_data[0, :5], [0.01, 0.5, 0, 0, 0])
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, follower.name) < 0

    reduced = pin.buildModelFromXML(urdf, mimic=True)
    reduced_data = reduced.createData()
    assert reduced.nv == model.nv - 1
    # G: MuJoCo dof <- reduced velocity coordinate (the follower moves 0.5 × its master).
    names = [reduced.names[i] for i in range(1, reduced.njoints)]
    gmap = np.zeros((model.nv, reduced.nv))
    for name in names:
        joint = reduced.joints[reduced.getJointId(name)]
        if joint.nv:
            gmap[model.joint(name).dofadr[0], joint.idx_v] = 1.0
    master_v = reduced.joints[reduced.getJointId(master.name)].idx_v
    gmap[follower.dofadr[0], master_v] = 0.5
    data = mujoco.MjData(model)
    full = np.zeros((model.nv, model.nv))
    rng = np.random.default_rng(5)
    for _ in range(SAMPLES):
        q = rng.uniform(reduced.lowerPositionLimit, reduced.upperPositionLimit)
        v = rng.uniform(-reduced.velocityLimit, reduced.velocityLimit)
        data.qpos[:] = gmap @ q
        data.qpos[follower.qposadr[0]] += 0.01
        data.qvel[:] = gmap @ v
        mujoco.mj_forward(model, data)
        mujoco.mj_fullM(model, data, full)  # MuJoCo 4: (m, d, dst)
        mass = pin.crba(reduced, reduced_data, q)
        mass = np.triu(mass) + np.triu(mass, 1).T
        assert _close(gmap.T @ full @ gmap, mass), q
        bias = pin.nonLinearEffects(reduced, reduced_data, q, v)
        assert _close(gmap.T @ data.qfrc_bias, bias), (q, v)
    # Simulated: the master pushed open, the follower keeps to 0.5 q1 + 0.01.
    mujoco.mj_resetData(model, data)
    data.qpos[follower.qposadr[0]] = 0.01
    data.ctrl[model.actuator(master.name).id] = 5.0  # [N] opening
    for _ in range(300):
        mujoco.mj_step(model, data)
    q1, q2 = data.qpos[master.qposadr[0]], data.qpos[follower.qposadr[0]]
    assert q1 > 0.005
    assert abs(q2 - (0.5 * q1 + 0.01)) < 1e-3


def test_backend_starts_a_mimic_follower_on_its_master_and_refuses_to_actuate_it() -> None:
    """The MuJoCo backend on the Panda (7 arm joints and the master finger, the <ros2_control>
    joints a Panda setup names): configured with the master finger at 0.03 m, the follower
    starts on its constraint (0.03 m, multiplier 1), so a step under zero effort leaves it there;
    naming the follower among the backend's joints is refused with its master named."""
    path = _installed("robots/panda_description/urdf/panda.urdf")
    joints = (*(f"panda_joint{i}" for i in range(1, 8)), "panda_finger_joint1")
    config = MujocoConfig(
        initial_positions={"panda_joint4": -1.5, "panda_finger_joint1": 0.03},
        tcp_frame="panda_hand_tcp",
        urdf_directory=str(path.parent),
        with_objects=False,
    )
    system = MujocoSystem(path.read_text(), joints, config)
    system.configure()
    assert system.model is not None and system.data is not None
    follower = system.model.joint("panda_finger_joint2").qposadr[0]
    assert system.data.qpos[follower] == pytest.approx(0.03)
    system.activate()
    sample = system.read()
    system.write(JointCommand(sample.stamp, 1, joints, system.command_interfaces, np.zeros(8)))
    # Started off its constraint it would jump by 0.03 m; on it, only the equality's softness
    # shows (14 µm while the hand, under zero effort, falls in that step).
    assert system.data.qpos[follower] == pytest.approx(0.03, abs=1e-4)
    with pytest.raises(
        DescriptionError, match=r"'panda_finger_joint2' mimics 'panda_finger_joint1'"
    ):
        MujocoSystem(path.read_text(), (*joints, "panda_finger_joint2"), config).configure()


def test_object_sensor_reads_the_configured_fingers_and_their_mimic_followers() -> None:
    """On the Panda with its master finger as the configured gripper joint, the backend's
    object sensor reads contact forces on both finger bodies: the master's and its mimic
    follower's (no finger names assumed)."""
    path = _installed("robots/panda_description/urdf/panda.urdf")
    joints = (*(f"panda_joint{i}" for i in range(1, 8)), "panda_finger_joint1")
    system = MujocoSystem(
        path.read_text(),
        joints,
        MujocoConfig(urdf_directory=str(path.parent), gripper_joints=("panda_finger_joint1",)),
    )
    system.configure()
    sensor = system.object_sensor()
    assert sensor is not None and system.model is not None
    names = [system.model.body(i).name for i in sensor.finger_ids]  # type: ignore[attr-defined]
    assert names == ["panda_leftfinger", "panda_rightfinger"]
    assert sensor.observe().contact_forces.shape == (2,)
