"""The grasp scene derived from the robot (issue 24 item 6, ``hardware/grasp_scene.py``): the
table, the cube and its placement region come from the arm's reach and the gripper's opening.
Checked: the reach against an independent sampling (other configurations) and the chain's own
length; on the bundled arm the derived scene is the one it had (region x ∈ [0.45, 0.60] m,
y ∈ ±0.15 m, a 5 cm cube starting at x = 0.5 m, the table centred 0.6 m out, top at z = 0)
within 5 mm; on the Panda
(example-robot-data) the region scales with its shorter reach and the cube fits its opening;
for one jaw closing on a fixed one the grip offset puts the cube's centre midway between the
jaws (FK of the jaw at the cube's width), and its smaller cube is of the same material (the 5 cm
cube's 0.1 kg); and the MuJoCo scene the stack simulates has that table and cube, whose contacts
are its own (soft-finger, 4 timesteps stiff)."""

from __future__ import annotations

import math
import re

import mujoco
import numpy as np
import pytest
from helpers import bundled_config, bundled_description, new_robot_model
from test_grip_width import panda_urdf
from test_one_jaw_gripper import JAW, one_jaw_urdf

from ct_controllers.bench.grasp import REGION
from ct_controllers.hardware.grasp_scene import (
    JAW_CLEARANCE,
    grasp_scene,
    grip_effort,
    table_height,
    tcp_reach,
)
from ct_controllers.hardware.mujoco_scene import CUBE_HALF_SIZE, TABLE_CENTER, TABLE_HALF_SIZE
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.model.grip_geometry import gripper_geometry
from ct_controllers.model.robot import RobotModel

OTHER_SAMPLES = 2000


def _horizontal_reach(model: RobotModel, seed: int) -> float:
    rng = np.random.default_rng(seed)
    lower, upper = model.limits.lower, model.limits.upper
    return max(
        float(np.linalg.norm(model.frame_pose(rng.uniform(lower, upper))[:2, 3]))
        for _ in range(OTHER_SAMPLES)
    )


def _chain_length(model: RobotModel) -> float:
    """An upper bound of any frame's distance from the base: the joint origins' offsets from
    the root to the TCP, plus the TCP's offset from its joint."""
    pin_model = model.model
    frame = pin_model.frames[model.tcp_frame_id]
    length = float(np.linalg.norm(frame.placement.translation))
    joint = frame.parentJoint
    while joint > 0:
        length += float(np.linalg.norm(pin_model.jointPlacements[joint].translation))
        joint = pin_model.parents[joint]
    return length


def test_the_reach_is_what_other_configurations_reach() -> None:
    """R (the largest horizontal TCP distance over the scene's samples) is at least 97 % of,
    and at most 1 % above, the largest over 2000 other random configurations, and below the
    chain's length, on the bundled arm and the Panda."""
    panda = RobotModel(panda_urdf().read_text(), "panda_hand_tcp", "panda_link0")
    for model in (new_robot_model(), panda):
        reach, other = tcp_reach(model), _horizontal_reach(model, seed=7)
        assert 0.97 * reach <= other <= 1.01 * reach, (reach, other)
        assert reach < _chain_length(model)


def pedestal_urdf(height: float) -> str:
    """The bundled arm (its ``<ros2_control>`` block taken out) on a pedestal: a root link
    ``floor`` ``height`` [m] below its base link, as a mobile base's root link is."""
    urdf = re.sub(r"<ros2_control.*?</ros2_control>", "", bundled_description().urdf, flags=re.S)
    pedestal = (
        '<link name="floor"/><joint name="pedestal" type="fixed"><parent link="floor"/>'
        f'<child link="base_link"/><origin xyz="0 0 {height}" rpy="0 0 0"/></joint>'
    )
    first = urdf.index("<link ")
    return urdf[:first] + pedestal + urdf[first:]


def _lowest_downward_tcp(model: RobotModel, seed: int) -> float:
    """The 5th percentile of the TCP's height over random configurations (other samples than
    the scene's) whose tool z is within 30° of down and whose horizontal distance is in the
    region's band, [0.435 R, 0.58 R]."""
    rng = np.random.default_rng(seed)
    reach = tcp_reach(model)
    heights = []
    for _ in range(8000):
        pose = model.frame_pose(rng.uniform(model.limits.lower, model.limits.upper))
        distance = float(np.linalg.norm(pose[:2, 3]))
        if 0.435 * reach <= distance <= 0.58 * reach and pose[2, 2] <= -math.cos(math.pi / 6):
            heights.append(float(pose[2, 3]))
    return float(np.percentile(heights, 5))


def test_the_table_is_the_base_plane_unless_the_arm_cannot_point_down_that_low() -> None:
    """The bundled arm and the Panda point their tool down below their base plane over the
    region (their scene's table stays at z = 0); the bundled arm on a 0.8 m pedestal whose root
    link is the floor (a mobile base's case) cannot reach the floor: its table comes up to
    0.8 m plus that same arm's own lowest downward reach (5th percentile, sampled here
    independently, within 3 cm), below its mount."""
    bundled = new_robot_model()
    panda = RobotModel(panda_urdf().read_text(), "panda_hand_tcp", "panda_link0")
    lowest = _lowest_downward_tcp(bundled, seed=7)
    assert lowest < 0.0 and _lowest_downward_tcp(panda, seed=7) < 0.0
    assert table_height(bundled) == 0.0 and table_height(panda) == 0.0
    raised = RobotModel(pedestal_urdf(0.8), "tcp", "floor")
    height = table_height(raised)
    assert abs(height - (0.8 + lowest)) < 0.03, (height, lowest)
    assert 0.0 < height < 0.8
    scene = grasp_scene(raised, gripper_geometry(raised, bundled_config().gripper_joints))
    assert scene.table_height == height
    assert scene.table_center[2] + scene.table_half_size[2] == pytest.approx(height)
    assert scene.tcp_height == pytest.approx(height + scene.cube_half_size)


def test_the_bundled_arm_keeps_its_scene_and_the_panda_scales() -> None:
    """Bundled: region, cube, table within 5 mm of the fixed numbers it had; no grip offset.
    Panda: the region is the bundled one scaled by the reaches' ratio, the cube ≤ 0.625 of its
    80 mm opening, the table's top at the base plane."""
    config = bundled_config()
    model = new_robot_model()
    scene = grasp_scene(model, gripper_geometry(model, config.gripper_joints))
    for key in ("x", "y"):
        assert np.allclose(scene.region[key], REGION[key], atol=0.005), (key, scene.region)
    assert scene.yaw == REGION["yaw"]
    assert abs(scene.cube_half_size - CUBE_HALF_SIZE) < 1e-9
    assert np.allclose(scene.table_center, TABLE_CENTER, atol=0.005)
    assert np.allclose(scene.table_half_size, TABLE_HALF_SIZE, atol=0.005)
    assert scene.grip_offset == (0.0, 0.0, 0.0)
    assert np.allclose(scene.cube_start, (0.5, 0.0), atol=0.005)
    panda = RobotModel(panda_urdf().read_text(), "panda_hand_tcp", "panda_link0")
    grip = gripper_geometry(panda, ("panda_finger_joint1",))
    assert grip is not None
    scaled = grasp_scene(panda, grip)
    ratio = scaled.reach / scene.reach
    assert ratio < 0.95  # the Panda reaches less far than the bundled arm
    for key in ("x", "y"):
        assert np.allclose(scaled.region[key], np.array(scene.region[key]) * ratio, atol=1e-9)
    assert 2 * scaled.cube_half_size <= 0.625 * grip.open_width + 1e-9
    assert scaled.table_center[2] + scaled.table_half_size[2] == 0.0
    assert np.linalg.norm(scaled.grip_offset) < 1e-9  # mimic fingers: symmetric


def test_one_jaw_grip_offset_centres_the_cube_between_the_jaws() -> None:
    """One prismatic jaw against a fixed one: the cube is 0.625 of the 4 cm stroke, and the
    offset (tool frame) is the midpoint of the two jaw frames with the jaw opened to the cube's
    width plus the clearance on each side (as far as the stroke allows), seen from the TCP:
    (0, s/2 + c, 0) here, computed independently by FK; the cube's mass is the 5 cm cube's
    0.1 kg scaled by the volume."""
    model = RobotModel(one_jaw_urdf("prismatic"), "tcp", "base_link")
    grip = gripper_geometry(model, ("left_finger_joint",))
    assert grip is not None
    scene = grasp_scene(model, grip)
    size = 2 * scene.cube_half_size
    assert abs(size - 0.625 * 0.04) < 1e-9
    q = model.neutral()
    clearance = min(JAW_CLEARANCE, (0.04 - size) / 2)  # as much as the 4 cm stroke leaves
    q[model.q_index("left_finger_joint")] = size + 2 * clearance  # width = q_jaw
    tcp = model.frame_pose(q)
    middle = 0.5 * (model.frame_pose(q, "left_finger") + model.frame_pose(q, "right_finger"))
    expected = tcp[:3, :3].T @ (middle[:3, 3] - tcp[:3, 3])
    expected[2] = 0.0  # along the approach: not the grip's business (the frames lie across)
    assert np.allclose(scene.grip_offset, expected, atol=1e-9), (scene.grip_offset, expected)
    assert abs(scene.grip_offset[1] - (size / 2 + clearance)) < 1e-9
    # A smaller cube of the 5 cm cube's material (0.1 kg): lighter, not denser.
    assert math.isclose(scene.cube_mass, 0.1 * (size / 0.05) ** 3, rel_tol=1e-12)


@pytest.mark.parametrize("kind", ["prismatic", "revolute"])
def test_the_grip_is_the_cubes_weight_share_plus_the_jaws_friction(kind: str) -> None:
    """The grip for a cube: 20 N per 0.1 kg of cube, plus twice the squeeze the jaw's dry
    friction takes at the finger — its ``<dynamics friction>`` over the width's change per unit
    of the joint, measured here by FK of the width frames at the joint's two limits (1 for the
    prismatic jaw, about the 10 cm finger's length for the hinged one); without friction, the
    weight's share alone; the scene carries the grip for its own cube."""
    friction = 0.3  # [N·m | N]
    plain = one_jaw_urdf(kind)
    rubbing = re.sub(
        rf'(<joint name="{JAW}".*?)(</joint>)',
        rf'\1<dynamics friction="{friction}"/>\2',
        plain,
        count=1,
        flags=re.S,
    )
    model = RobotModel(rubbing, "tcp", "base_link")
    assert model.joint_friction[model.v_index(JAW)] == friction
    grip = gripper_geometry(model, (JAW,))
    assert grip is not None
    q = model.neutral()
    widths = []
    for limit in (model.limits.lower, model.limits.upper):
        q[model.q_index(JAW)] = limit[model.v_index(JAW)]
        tips = [model.frame_pose(q, frame)[:3, 3] for frame in grip.frames]
        widths.append(float(np.linalg.norm(tips[0] - tips[1])))
    span = model.limits.upper[model.v_index(JAW)] - model.limits.lower[model.v_index(JAW)]
    lever = abs(widths[1] - widths[0]) / span
    assert (0.9 < lever < 1.1) if kind == "prismatic" else (0.05 < lever < 0.12), lever
    for mass in (0.1, 0.034):
        expected = 20.0 * mass / 0.1 + 2 * friction / lever
        assert math.isclose(grip_effort(model, grip, mass), expected, rel_tol=1e-6)
    smooth = RobotModel(plain, "tcp", "base_link")
    assert math.isclose(grip_effort(smooth, grip, 0.034), 6.8, rel_tol=1e-12)
    scene = grasp_scene(model, grip)
    assert math.isclose(scene.grasp_effort, grip_effort(model, grip, scene.cube_mass))


def test_a_cube_pushed_within_its_friction_limit_barely_creeps() -> None:
    """The scene's friction holds: the SO-101's 34 g cube pressed on the table by 10 N and
    pushed sideways by 8 N (80 % of the friction limit at μ = 1, as a jaw pressing it at an
    angle) moves less than 0.5 mm in 1 s, a quarter of the 2 mm/s a grasp judged by the joints
    alone takes as a stall; at MuJoCo's impratio 10 the same push crept more than 1 mm (the
    SO-101's and the Z1's jaws never stalled)."""
    config = bundled_config()
    spec = MujocoSystem.from_config(bundled_description(), config).scene_spec()
    drifts = {}
    for ratio in (spec.option.impratio, 10.0):
        spec.option.impratio = ratio
        model = spec.compile()
        model.body("cube").mass[0] = 0.0343
        data = mujoco.MjData(model)
        cube = model.body("cube").id
        for _ in range(200):  # settle on the table
            mujoco.mj_step(model, data)
        start = data.xpos[cube].copy()
        for _ in range(round(1.0 / model.opt.timestep)):
            data.xfrc_applied[cube, :3] = [8.0, 0.0, -10.0]
            mujoco.mj_step(model, data)
        drifts[ratio] = float(np.linalg.norm(data.xpos[cube][:2] - start[:2]))
    scene, default = drifts.values()
    assert scene < 0.0005, drifts
    assert default > 0.001, drifts


def test_the_simulated_scene_is_the_derived_one() -> None:
    """The MuJoCo scene the stack builds from the configuration has the derived table (size,
    centre) and cube (size, mass, starting place), on the bundled arm; the cube's contact
    parameters are its contacts' with the robot (priority over every robot geom): condim 4, a
    time constant of 4 timesteps; the table and floor outrank it with their own (10 timesteps,
    MuJoCo's default 0.02 s)."""
    config = bundled_config()
    system = MujocoSystem.from_config(bundled_description(), config)
    model = mujoco.MjSpec.compile(system.scene_spec())
    robot = new_robot_model()
    scene = grasp_scene(robot, gripper_geometry(robot, config.gripper_joints))
    table, cube = model.geom("table"), model.geom("cube_geom")
    assert np.allclose(table.size, scene.table_half_size, atol=1e-9)
    assert np.allclose(model.geom_pos[table.id], scene.table_center, atol=1e-9)
    assert np.allclose(cube.size, [scene.cube_half_size] * 3, atol=1e-9)
    start = model.body("cube").pos
    assert np.allclose(start, [*scene.cube_start, scene.cube_half_size], atol=1e-9)
    assert math.isclose(float(model.body("cube").mass[0]), scene.cube_mass)
    assert math.isclose(scene.cube_mass, 0.1)  # the 5 cm cube: 0.1 kg, as it was
    # Its contacts with the robot are the cube's: soft-finger (torsional friction), 4 timesteps
    # stiff; the table and floor outrank it (their own contact: 10 timesteps, MuJoCo's default).
    surfaces = [table.id, model.geom("floor").id]
    robot = [g for g in range(model.ngeom) if g not in (cube.id, *surfaces)]
    assert int(model.geom_priority[cube.id]) > int(np.max(model.geom_priority[robot]))
    assert all(model.geom_priority[g] > model.geom_priority[cube.id] for g in surfaces)
    assert np.allclose(model.geom_solref[table.id], [10 * model.opt.timestep, 1.0])
    assert np.allclose(model.geom_solref[model.geom("floor").id], [0.02, 1.0])
    assert int(model.geom_condim[cube.id]) == 4
    assert np.allclose(model.geom_solref[cube.id], [4 * model.opt.timestep, 1.0])
