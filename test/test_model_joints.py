"""The model layer on URDFs other than the bundled arm: continuous joints (Pinocchio's nq ≠ nv;
the stack keeps one unwrapped angle per joint), ``<mimic>`` followers (never commanded, their
position their master's), and frames that come only from the caller or the URDF.

Every quantity is checked against an independent Pinocchio model of the same robot: the
continuous joint replaced by a revolute joint with huge limits (nq = nv) and the mimic joint
made an independent joint, whose dynamics projected on the independent coordinates,
q_full = G q + c (G the mimic's Jacobian), are M = Gᵀ M_full G, b = Gᵀ b_full(q_full, G v),
g = Gᵀ g_full and J = J_full G. The Panda and the UR5 come from ``example-robot-data``
(installed with the venv, never copied here)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from ct_controllers.controllers.controller import JointState
from ct_controllers.ik.solver import IkOptions, IkSolver
from ct_controllers.model.configuration import ConfigurationMap, unwrap_angle
from ct_controllers.model.description import DescriptionError
from ct_controllers.model.link_tree import LinkTree
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import MimicJointError, NoTcpError, RobotModel
from ct_controllers.references.diff_ik_parameters import DiffIkParameters
from ct_controllers.references.diff_ik_qp import QpDiffIk
from ct_controllers.references.reference_generator import CartesianTarget
from ct_controllers.runtime.gain_stability import check_configurations
from ct_controllers.runtime.motion_requests import checked_motion

# example-robot-data installs beside Pinocchio, under cmeel.prefix/share (no Python module).
ROBOTS = Path(pin.__file__).parents[4] / "share" / "example-robot-data" / "robots"
PANDA = ROBOTS / "panda_description" / "urdf" / "panda.urdf"
UR5 = ROBOTS / "ur_description" / "urdf" / "ur5_robot.urdf"

MULTIPLIER, OFFSET = 2.0, 0.01  # the follower: right = 2 · left + 0.01 [m]
PAD = 'ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"'  # a finger pad's inertia


def _link(name: str, mass: float, com: str, inertia: str) -> str:
    return f"""
  <link name="{name}">
    <inertial><origin xyz="{com}" rpy="0.1 -0.2 0.3"/><mass value="{mass}"/>
      <inertia {inertia}/></inertial>
  </link>"""


def small_arm(mimic: bool = True, continuous: bool = True) -> str:
    """A 3-link arm — shoulder (revolute z), elbow (continuous y), wrist (revolute x) — with a
    tool frame and two prismatic fingers, the right one a <mimic> of the left."""
    inertia = 'ixx="0.02" ixy="0.001" ixz="-0.002" iyy="0.03" iyz="0.0015" izz="0.025"'
    elbow = (
        '<joint name="elbow" type="continuous">'
        if continuous
        else '<joint name="elbow" type="revolute">'
    )
    elbow_limit = (
        '<limit effort="40" velocity="3"/>'
        if continuous
        else '<limit lower="-10000" upper="10000" effort="40" velocity="3"/>'
    )
    follower = f'<mimic joint="left" multiplier="{MULTIPLIER}" offset="{OFFSET}"/>' if mimic else ""
    return f"""<?xml version="1.0"?>
<robot name="small_arm">
  <link name="base"/>
  {_link("link1", 2.0, "0.01 0.02 0.15", inertia)}
  {_link("link2", 1.5, "0.2 0.0 0.01", inertia)}
  {_link("link3", 0.8, "0.05 0.01 -0.02", inertia)}
  {_link("left_pad", 0.05, "0 0.01 0.02", PAD)}
  {_link("right_pad", 0.07, "0 -0.01 0.02", PAD)}
  <link name="tool"/>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="link1"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-2.5" upper="2.5" effort="80" velocity="2"/>
  </joint>
  {elbow}
    <parent link="link1"/><child link="link2"/><origin xyz="0 0.05 0.3" rpy="0.2 0 0"/>
    <axis xyz="0 1 0"/>{elbow_limit}
  </joint>
  <joint name="wrist" type="revolute">
    <parent link="link2"/><child link="link3"/><origin xyz="0.4 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-2" upper="2" effort="20" velocity="4"/>
  </joint>
  <joint name="tool_joint" type="fixed">
    <parent link="link3"/><child link="tool"/><origin xyz="0.12 0 0.03" rpy="0 1.5707963 0"/>
  </joint>
  <joint name="left" type="prismatic">
    <parent link="link3"/><child link="left_pad"/><origin xyz="0.1 0.01 0"/><axis xyz="0 1 0"/>
    <limit lower="0" upper="0.04" effort="30" velocity="0.2"/>
  </joint>
  <joint name="right" type="prismatic">
    <parent link="link3"/><child link="right_pad"/><origin xyz="0.1 -0.01 0"/>
    <axis xyz="0 -1 0"/><limit lower="0" upper="0.09" effort="30" velocity="0.4"/>{follower}
  </joint>
</robot>"""


class Reference:
    """The independent model: ``urdf`` built by Pinocchio without mimic joints (every joint
    its own coordinate) and its projection on ``model``'s joint positions."""

    def __init__(self, urdf: str, model: RobotModel) -> None:
        self.pin = pin.buildModelFromXML(urdf)
        assert self.pin.nq == self.pin.nv
        self.data = self.pin.createData()
        names = list(self.pin.names)[1:]
        # q_full = G q + c: the independent joints copied, each follower its master's line.
        self.G = np.zeros((self.pin.nv, model.nv))
        self.c = np.zeros(self.pin.nv)
        for name in names:
            row = self.pin.joints[self.pin.getJointId(name)].idx_v
            if name in model.mimic:
                follower = model.mimic[name]
                self.G[row, model.q_index(follower.master)] = follower.multiplier
                self.c[row] = follower.offset
            else:
                self.G[row, model.q_index(name)] = 1.0

    def full(self, q: np.ndarray) -> np.ndarray:
        return self.G @ q + self.c

    def mass(self, q):
        full = pin.crba(self.pin, self.data, self.full(q))
        full = np.triu(full) + np.triu(full, 1).T
        return self.G.T @ full @ self.G

    def bias(self, q, v):
        return self.G.T @ pin.nonLinearEffects(self.pin, self.data, self.full(q), self.G @ v)

    def gravity(self, q):
        return self.G.T @ pin.computeGeneralizedGravity(self.pin, self.data, self.full(q))

    def pose(self, q, frame):
        pin.framesForwardKinematics(self.pin, self.data, self.full(q))
        return self.data.oMf[self.pin.getFrameId(frame)].homogeneous.copy()

    def jacobian(self, q, frame):
        full = pin.computeFrameJacobian(
            self.pin, self.data, self.full(q), self.pin.getFrameId(frame), pin.LOCAL_WORLD_ALIGNED
        )
        return full @ self.G


def random_positions(model: RobotModel, rng: np.random.Generator, turns: float = 3.0):
    """Joint positions within the limits; a continuous joint anywhere in ±``turns`` turns."""
    lower = np.where(np.isfinite(model.limits.lower), model.limits.lower, -turns * 2 * math.pi)
    upper = np.where(np.isfinite(model.limits.upper), model.limits.upper, turns * 2 * math.pi)
    return rng.uniform(lower, upper)


def assert_agrees(model: RobotModel, reference: Reference, frames, seed: int, samples: int = 20):
    """M, b, g, FK and Jacobians through RobotModel and through a ModelState equal the
    reference's at random configurations and velocities."""
    rng = np.random.default_rng(seed)
    state = ModelState(model)
    for _ in range(samples):
        q = random_positions(model, rng)
        v = rng.uniform(-2.0, 2.0, model.nv)
        bound = state.at(JointState(0.0, q, v))
        np.testing.assert_allclose(model.mass_matrix(q), reference.mass(q), atol=1e-10)
        np.testing.assert_allclose(bound.mass_matrix(), reference.mass(q), atol=1e-10)
        np.testing.assert_allclose(model.bias(q, v), reference.bias(q, v), atol=1e-9)
        np.testing.assert_allclose(bound.bias(), reference.bias(q, v), atol=1e-9)
        np.testing.assert_allclose(model.gravity(q), reference.gravity(q), atol=1e-10)
        np.testing.assert_allclose(bound.gravity(), reference.gravity(q), atol=1e-10)
        a = rng.uniform(-3.0, 3.0, model.nv)
        np.testing.assert_allclose(
            model.inverse_dynamics(q, v, a), reference.mass(q) @ a + reference.bias(q, v), atol=1e-9
        )
        for frame in frames:
            fid = model.frame_id(frame)
            np.testing.assert_allclose(
                model.frame_pose(q, frame), reference.pose(q, frame), atol=1e-12
            )
            np.testing.assert_allclose(bound.frame_pose(fid), reference.pose(q, frame), atol=1e-12)
            np.testing.assert_allclose(
                model.frame_jacobian(q, frame), reference.jacobian(q, frame), atol=1e-12
            )
            np.testing.assert_allclose(
                bound.frame_jacobian(fid), reference.jacobian(q, frame), atol=1e-12
            )


# --- the small arm ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def arm() -> RobotModel:
    return RobotModel(small_arm(), tcp_frame="tool", base_frame="base")


def test_continuous_joint_and_mimic_follower_agree_with_an_independent_model(arm):
    """With a continuous elbow (Pinocchio nq = nv + 1) and a mimic finger (no coordinate), the
    model layer's M, b, g, τ = RNEA, FK and Jacobians (of the TCP and of the follower's pad)
    equal those of the same arm with a huge-limit revolute elbow and an independent finger,
    projected on the independent joints — at configurations over ±3 turns of the elbow."""
    assert arm.model.nq == arm.nv + 1  # Pinocchio's (cos, sin) for the elbow
    assert arm.nq == arm.nv == 4  # the stack's: one position per joint
    assert arm.joint_names == ("shoulder", "elbow", "wrist", "left")
    assert arm.continuous_joints == ("elbow",)
    reference = Reference(small_arm(mimic=False, continuous=False), arm)
    assert_agrees(arm, reference, ("tool", "right_pad", "left_pad", "link2"), seed=1)


def test_a_continuous_joint_has_no_position_limit(arm):
    """The continuous elbow's position limits are −inf/+inf (the others the URDF's); its
    velocity and effort limits are the URDF's; a motion request beyond ±π on it is accepted,
    one beyond the wrist's range is refused naming the joint."""
    elbow, wrist = arm.q_index("elbow"), arm.q_index("wrist")
    assert arm.limits.lower[elbow] == -math.inf and arm.limits.upper[elbow] == math.inf
    assert (arm.limits.lower[wrist], arm.limits.upper[wrist]) == (-2.0, 2.0)
    assert arm.limits.velocity[elbow] == 3.0 and arm.limits.effort[elbow] == 40.0
    motion = checked_motion(arm, ["elbow"], [7.5], 1.0)
    assert motion.positions.tolist() == [7.5]
    with pytest.raises(ValueError, match=re.escape("wrist=2.5")):
        checked_motion(arm, ["wrist"], [2.5], 1.0)


def test_unwrapping_a_continuous_angle_across_pi(arm):
    """Joint positions → Pinocchio's q → joint positions: atan2 gives the wrapped angle; given
    the previous angle, the unwrapped one (3.1 → 3.2 stays 3.2, not −3.08; −3.1 → −3.2 too,
    and many turns out). The robot at θ and θ + 2π is the same (FK, M, g)."""
    conversion = ConfigurationMap(arm.model)
    for previous, angle in ((3.1, 3.2), (-3.1, -3.2), (20.0, 20.5), (-0.1, 0.2)):
        q = np.array([0.3, angle, -0.4, 0.02])
        configuration = conversion.to_pinocchio(q)
        elbow = arm.model.joints[arm.model.getJointId("elbow")].idx_q
        assert configuration[elbow : elbow + 2] == pytest.approx([math.cos(angle), math.sin(angle)])
        wrapped = conversion.from_pinocchio(configuration)[1]
        assert -math.pi < wrapped <= math.pi
        assert math.isclose(math.remainder(wrapped - angle, 2 * math.pi), 0.0, abs_tol=1e-12)
        near = np.array([0.3, previous, -0.4, 0.02])
        np.testing.assert_allclose(conversion.from_pinocchio(configuration, near), q, atol=1e-12)
        assert unwrap_angle(wrapped, previous) == pytest.approx(angle, abs=1e-12)
        turned = q + np.array([0.0, 2 * math.pi, 0.0, 0.0])
        np.testing.assert_allclose(arm.frame_pose(turned), arm.frame_pose(q), atol=1e-12)
        np.testing.assert_allclose(arm.mass_matrix(turned), arm.mass_matrix(q), atol=1e-12)
        np.testing.assert_allclose(arm.gravity(turned), arm.gravity(q), atol=1e-12)


def test_the_mimic_follower_follows_its_master_and_is_never_commanded(arm):
    """The follower has no coordinate: its position is multiplier · master + offset (reported
    by follower_positions, and its pad's pose and the link tree's transform are those of the
    independent model with it there); naming it where a joint is commanded or looked up is
    refused with a message naming its master."""
    follower = arm.mimic["right"]
    assert (follower.master, follower.multiplier, follower.offset) == ("left", MULTIPLIER, OFFSET)
    free = RobotModel(small_arm(mimic=False), tcp_frame="tool")  # the follower independent
    tree = LinkTree(arm, small_arm())
    for left in (0.0, 0.013, 0.04):
        q = np.array([0.2, -1.0, 0.5, left])
        assert arm.follower_positions(q) == {"right": pytest.approx(MULTIPLIER * left + OFFSET)}
        q_free = np.append(q, MULTIPLIER * left + OFFSET)[free.indices((*arm.joint_names, "right"))]
        np.testing.assert_allclose(
            arm.frame_pose(q, "right_pad"), free.frame_pose(q_free, "right_pad"), atol=1e-12
        )
        transforms = {(t.parent, t.child): t for t in tree.moving_transforms(q)}
        pad = transforms[("link3", "right_pad")].matrix()
        expected = np.linalg.inv(free.frame_pose(q_free, "link3")) @ free.frame_pose(
            q_free, "right_pad"
        )
        np.testing.assert_allclose(pad, expected, atol=1e-9)
    message = re.escape("joint 'right' is a mimic joint: it follows 'left'")
    with pytest.raises(MimicJointError, match=message):
        arm.q_index("right")
    with pytest.raises(ValueError, match=message):
        checked_motion(arm, ["shoulder", "right"], [0.1, 0.02], 1.0)
    with pytest.raises(MimicJointError, match=message):
        IkSolver(arm, locked={"right": 0.02})


def test_ik_turns_a_continuous_joint_past_pi(arm):
    """Full IK on the small arm (finger master locked, its follower with it): targets made by
    FK at configurations whose elbow lies beyond ±π, from seeds on the other side of ±π,
    converge — the elbow is not held in a range — and the candidate's FK is the target."""
    solver = IkSolver(arm, locked={"left": 0.02}, options=IkOptions(time_budget=1.0))
    assert solver.solved_joints == ("shoulder", "elbow", "wrist")
    for elbow, seed_elbow in ((3.0, -3.0), (-2.9, 3.1), (4.5, 0.0)):
        q = np.array([0.4, elbow, 0.6, 0.02])
        target = arm.frame_pose(q)
        result = solver.solve(target, seed=np.array([0.3, seed_elbow, 0.5, 0.0]))
        assert result.converged, (elbow, result)
        np.testing.assert_allclose(arm.frame_pose(result.q), target, atol=1e-4)
        assert result.q[arm.q_index("left")] == 0.02
        assert math.isclose(
            math.remainder(result.q[arm.q_index("elbow")] - elbow, 2 * math.pi), 0.0, abs_tol=1e-3
        )


def test_the_qp_differential_ik_does_not_bound_a_continuous_joint(arm):
    """The QP differential IK's position bounds hold the revolute joints in their range and
    leave the continuous elbow free: driven to a target reached only with the elbow past +π
    from 2.9 rad, q*'s elbow crosses π (no bound at ±π), and every other joint stays in its
    range less the margin."""
    joints = ("shoulder", "elbow", "wrist")
    margin = 0.05
    generator = QpDiffIk(
        arm.with_own_data(),
        joints,
        DiffIkParameters(bandwidth=np.full(3, 20.0), position_margin=margin),
    )
    start = np.array([0.4, 2.9, 0.3, 0.02])
    goal = np.array([0.4, 3.6, 0.3, 0.02])
    target = CartesianTarget(arm.frame_pose(goal), "base")
    state = JointState(0.0, start, np.zeros(arm.nv))
    generator.reset(state)
    elbows = []
    for tick in range(3000):
        reference = generator.compute(state, target, 1e-3)
        state = JointState(tick * 1e-3, reference.q.copy(), np.zeros(arm.nv))
        elbows.append(reference.q[arm.q_index("elbow")])
        for name in ("shoulder", "wrist"):
            i = arm.q_index(name)
            assert arm.limits.lower[i] + margin - 1e-12 <= reference.q[i]
            assert reference.q[i] <= arm.limits.upper[i] - margin + 1e-12
    assert max(elbows) > math.pi + 0.3
    np.testing.assert_allclose(arm.frame_pose(state.q)[:3, 3], target.pose[:3, 3], atol=1e-3)


def test_sampled_gain_check_configurations_are_finite_on_a_continuous_joint(arm):
    """The gain check's random configurations (uniform within the joint limits) stay finite on
    a joint without limits: the continuous elbow is sampled within one turn, [−π, π]."""
    configurations = check_configurations(arm, np.zeros(arm.nv))
    elbow = np.array([q[arm.q_index("elbow")] for q in configurations[1:]])
    assert np.isfinite(np.array(configurations)).all()
    assert (np.abs(elbow) <= math.pi).all() and np.ptp(elbow) > 1.0


def test_frames_come_from_the_caller_or_the_urdf():
    """No frame is assumed: without a TCP, TCP-relative requests fail naming the cause (a
    named frame works); the base frame defaults to the URDF's root link; a base frame that
    moves with a joint, or that is offset from the world, is refused with the root named."""
    model = RobotModel(small_arm())
    assert not model.has_tcp and model.base_frame == "base"
    q = np.zeros(model.nv)
    with pytest.raises(NoTcpError, match="without a TCP frame"):
        model.frame_pose(q)
    with pytest.raises(NoTcpError, match="no TCP frame"):
        ModelState(model).update(q).frame_jacobian()
    np.testing.assert_allclose(
        model.frame_pose(q, "tool"), RobotModel(small_arm(), "tool").frame_pose(q)
    )
    with pytest.raises(DescriptionError, match=r"base frame 'link2' .*moves with a joint.*'base'"):
        RobotModel(small_arm(), "tool", base_frame="link2")
    offset = small_arm().replace(
        '<link name="base"/>',
        '<link name="world"/><link name="base"/><joint name="mount" type="fixed">'
        '<parent link="world"/><child link="base"/><origin xyz="0 0 0.5"/></joint>',
    )
    with pytest.raises(DescriptionError, match=r"offset by \[0.0, 0.0, 0.5\] m.*'world'"):
        RobotModel(offset, "tool", base_frame="base")


def test_without_continuous_joints_the_conversion_is_the_identity():
    """nq == nv (the bundled arm, the Panda, the UR5): Pinocchio is handed the joint-position
    array itself — no conversion, no copy."""
    model = RobotModel(small_arm(continuous=False), "tool")
    q = np.zeros(model.nv)
    assert model.configuration.identity and model.pinocchio_configuration(q) is q


# --- robots from example-robot-data ----------------------------------------------------------
def test_panda_loads_with_its_own_frames_and_its_mimic_finger():
    """The Panda (7 revolute joints, two fingers, the second a <mimic> of the first): its
    frames by name (panda_link0, panda_hand_tcp), 8 independent joints, the second finger a
    follower; M, b, g, FK and Jacobians agree with Pinocchio's Panda without mimic joints,
    projected."""
    urdf = PANDA.read_text()
    model = RobotModel(urdf, tcp_frame="panda_hand_tcp", base_frame="panda_link0")
    assert model.joint_names == (*(f"panda_joint{i}" for i in range(1, 8)), "panda_finger_joint1")
    assert model.mimic["panda_finger_joint2"].master == "panda_finger_joint1"
    assert model.configuration.identity
    reference = Reference(urdf, model)
    assert_agrees(model, reference, ("panda_hand_tcp", "panda_rightfinger"), seed=2, samples=8)


def _ur5_with_continuous(urdf: str, joints: tuple[str, ...]) -> str:
    root = ET.fromstring(urdf)
    for joint in root.findall("joint"):
        if joint.get("name") in joints:
            joint.set("type", "continuous")
    return ET.tostring(root, encoding="unicode")


def test_ur5_with_continuous_joints_agrees_with_the_revolute_ur5():
    """The UR5 (6 revolute joints, no gripper) by its frames (base_link, tool0); the same arm
    with shoulder_pan and wrist_3 made continuous (as UR's own description has them) computes
    through the model layer exactly what the revolute UR5 does (M, b, g, FK, Jacobians), and
    IK solves on it with those two joints unbounded."""
    urdf = UR5.read_text()
    revolute = RobotModel(urdf, tcp_frame="tool0", base_frame="base_link")
    assert revolute.nv == 6 and not revolute.mimic and revolute.configuration.identity
    continuous = RobotModel(
        _ur5_with_continuous(urdf, ("shoulder_pan_joint", "wrist_3_joint")), "tool0", "base_link"
    )
    assert continuous.model.nq == 8 and continuous.nq == 6
    assert continuous.joint_names == revolute.joint_names
    assert_agrees(continuous, Reference(urdf, continuous), ("tool0", "wrist_2_link"), seed=3)
    solver = IkSolver(continuous, options=IkOptions(time_budget=1.0))
    rng = np.random.default_rng(4)
    for _ in range(3):
        q = random_positions(continuous, rng, turns=0.5)
        target = continuous.frame_pose(q)
        result = solver.solve(target)
        assert result.converged
        np.testing.assert_allclose(revolute.frame_pose(result.q), target, atol=1e-4)
