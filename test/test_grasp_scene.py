"""The grasp scene derived from the robot (issue 24 item 6, ``hardware/grasp_scene.py``): the
table, the cube and its placement region come from the arm's reach and the gripper's opening.
Checked: the reach against an independent sampling (other configurations) and the chain's own
length; on the bundled arm the derived scene is the one it had (region x ∈ [0.45, 0.60] m,
y ∈ ±0.15 m, a 5 cm cube starting at x = 0.5 m, the table centred 0.6 m out, top at z = 0)
within 5 mm; on the Panda
(example-robot-data) the region scales with its shorter reach and the cube fits its opening;
for one jaw closing on a fixed one the grip offset puts the cube's centre midway between the
jaws (FK of the jaw at the cube's width); and the MuJoCo scene the stack simulates has that
table and cube."""

from __future__ import annotations

import math

import mujoco
import numpy as np
from helpers import bundled_config, bundled_description, new_robot_model
from test_grip_width import panda_urdf
from test_one_jaw_gripper import one_jaw_urdf

from ct_controllers.bench.grasp import REGION
from ct_controllers.hardware.grasp_scene import JAW_CLEARANCE, grasp_scene, tcp_reach
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
    (0, s/2 + c, 0) here, computed independently by FK."""
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


def test_the_simulated_scene_is_the_derived_one() -> None:
    """The MuJoCo scene the stack builds from the configuration has the derived table (size,
    centre) and cube (size, mass, starting place), on the bundled arm."""
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
