"""ct_controllers.bench.grasp_reach and the grasp bench's use of it: where an arm grasps top-down
(placement region, approach offset, lift height) from its goal check's IK, and a cube's four
equivalent grasps.

Cost: ct-setup of the SO-101 and the Panda (~10 s), the SO-101's map (~4 s), ten goal checks
(~5 s), two SO-101 trials (~8 s), the pedestal arm's ct-setup and trial (~2 s), two Panda
trials (~15 s)."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import numpy as np
import pytest
from test_grasp_scene import pedestal_urdf

from ct_controllers.bench.grasp import (
    LIMIT_ROOM,
    best_reachable,
    cube_grasps,
    grasp_setup,
    limit_clearance,
    robot_reach,
    robot_scene,
    run_trial,
    top_down_grasp,
    trial_cube,
)
from ct_controllers.bench.grasp_reach import MIN_HEIGHT
from ct_controllers.bench.robots import example_robot_path
from ct_controllers.chains.grasp_goal import grasp_goal_ik, unreachable_pose
from ct_controllers.chains.pose_goal import goal_ik
from ct_controllers.config import StackConfig, load_config
from ct_controllers.references.diff_ik_parameters import DEFAULT_POSITION_MARGIN
from ct_controllers.runtime.stack import to_model_order
from ct_controllers.setup_assistant.cli import main as setup_main
from ct_controllers.tasks.phases import DEFAULT_APPROACH_OFFSET, DEFAULT_LIFT_HEIGHT, GraspGoal


def _set_up(out: Path, urdf: str) -> StackConfig:
    """ct-setup of example-robot-data's ``urdf`` into ``out``, loaded for lockstep MuJoCo."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = setup_main([str(example_robot_path(urdf)), "-o", str(out)])
    assert code == 0, printed.getvalue()
    return load_config(str(out / "controllers.yaml"), overrides={"mujoco.mode": "lockstep"})


@pytest.fixture(scope="module")
def so101(tmp_path_factory: pytest.TempPathFactory) -> StackConfig:
    """ct-setup's configuration of the SO-101 (5 arm joints, one revolute jaw)."""
    return _set_up(tmp_path_factory.mktemp("so101"), "robots/so_arm_description/urdf/so101.urdf")


def test_the_bundled_arm_keeps_its_scene_region_and_the_goal_defaults() -> None:
    """The bundled arm reaches 8 cm above (approach) and 10 cm above (lift) every sample of its
    scene's region: the placement is the scene's own, nothing derived."""
    config = load_config(overrides={"mujoco.mode": "lockstep"})
    reach, scene = robot_reach(config), robot_scene(config)
    assert not reach.derived and reach.note == ""
    assert reach.region == scene.region
    assert (reach.approach_offset, reach.lift_height) == (
        DEFAULT_APPROACH_OFFSET,
        DEFAULT_LIFT_HEIGHT,
    )


def test_a_small_arm_gets_a_region_and_heights_its_goal_check_accepts(so101: StackConfig) -> None:
    """The SO-101 does not reach 8 cm above its grasps in the scene's region (its wrist pitch
    at its limit): the derived placement lowers the approach and the lift (to at least
    MIN_HEIGHT), keeps the region's length and the cube on the table, and says why. Checked
    independently of the map (its bounded restarts, neighbouring seeds, 27 samples): ten seeded
    cubes of the region, each with a grasp the Grasp action's own goal check (full time budget,
    seeded with home) accepts at these offsets, whose lifted pose has an IK solution too."""
    reach, scene = robot_reach(so101), robot_scene(so101)
    assert reach.derived and "placed at" in reach.note
    assert MIN_HEIGHT <= reach.approach_offset < DEFAULT_APPROACH_OFFSET
    assert MIN_HEIGHT <= reach.lift_height <= DEFAULT_LIFT_HEIGHT
    assert math.isclose(reach.x[1] - reach.x[0], scene.x[1] - scene.x[0], rel_tol=1e-9)
    table = (
        scene.table_center[0] - scene.table_half_size[0],
        scene.table_center[0] + scene.table_half_size[0],
    )
    assert table[0] < reach.x[0] < reach.x[1] < table[1]
    setup = grasp_setup(so101, (*scene.cube_start, 0.0), install=False)
    try:
        stack = setup.stack
        assert setup.scene is not None
        ik = grasp_goal_ik(stack)
        home = to_model_order(stack.model, so101.joint_names, so101.home_positions, "home")
        for trial in range(10):
            cube = trial_cube(7, trial, reach.region)
            goals = [reach.goal(pose) for pose in cube_grasps(*cube, setup.scene)]
            accepted = [g for g in goals if unreachable_pose(ik, g, home) is None]
            assert accepted, (cube, [unreachable_pose(ik, g, home) for g in goals])
            lifted = np.array(accepted[0].grasp_pose)
            lifted[2, 3] += reach.lift_height
            assert ik.solve(lifted, seed=home).converged, cube
    finally:
        stack.shut_down()


@pytest.mark.parametrize("trial", [3, 5])
def test_the_so101_picks_its_cube(so101: StackConfig, trial: int) -> None:
    """The SO-101's jaws pinch its 35 mm cube at two top edges (the fixed jaw's face slants
    22°): the pick ends DONE with every object check (rise, slip, stayed). Before the cube's
    soft-finger contact, 4 timesteps stiff, its mass from the 5 cm cube's density and its grip
    from its mass (6.9 N, not 20), trial 3 pivoted about the line through the two contacts and
    was squeezed out; before the put-down
    ended on the TCP resting above its target with the object observed too, trial 5's cube,
    turned in the grip, met the table edge first and the put-down never ended."""
    result, setup = run_trial(so101, trial, trial_cube(0, trial, robot_reach(so101).region))
    assert result.success, result
    assert {"object_rise", "object_slip", "object_stayed"} <= set(setup.task.checks)


def test_an_arm_on_a_pedestal_picks_from_the_table_raised_to_its_reach(tmp_path: Path) -> None:
    """The bundled arm 0.8 m up on a pedestal whose root link is the floor (``ct-setup``'s
    base frame, as on a mobile base): with the table at the floor every grasp was refused
    UNREACHABLE (residual 0.35 m); the scene's table comes up to where the arm reaches top-down,
    and the pick ends DONE with every object check."""
    urdf = tmp_path / "pedestal.urdf"
    urdf.write_text(pedestal_urdf(0.8))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = setup_main([str(urdf), "-o", str(tmp_path / "out")])
    assert code == 0, printed.getvalue()
    config = load_config(
        str(tmp_path / "out" / "controllers.yaml"), overrides={"mujoco.mode": "lockstep"}
    )
    assert config.base_frame == "floor"
    scene = robot_scene(config)
    assert 0.3 < scene.table_height < 0.8
    result, setup = run_trial(config, 0, trial_cube(0, 0, robot_reach(config).region))
    assert result.success, result
    assert {"object_rise", "object_slip", "object_stayed"} <= set(setup.task.checks)


def test_a_cubes_four_grasps_hold_the_same_cube() -> None:
    """cube_grasps: the cube's own yaw first, then turned ±90° and 180° about the vertical;
    each grasp is top-down (tool z along −z) with its grip centre (the TCP moved by the grip
    offset, tool frame) on the same point, the cube's centre at the grasp height."""
    config = load_config(overrides={"mujoco.mode": "lockstep"})
    scene = robot_scene(config)
    x, y, yaw = 0.52, -0.04, math.radians(20)
    grasps = cube_grasps(x, y, yaw, scene)
    assert len(grasps) == 4
    np.testing.assert_allclose(grasps[0], top_down_grasp(x, y, yaw, scene), atol=1e-12)
    turns = (0.0, math.pi / 2, -math.pi / 2, math.pi)
    for pose, turn in zip(grasps, turns, strict=True):
        rotation = pose[:3, :3]
        np.testing.assert_allclose(rotation[:, 2], [0.0, 0.0, -1.0], atol=1e-12)
        np.testing.assert_allclose(
            rotation[:, 1], [-math.sin(yaw + turn), math.cos(yaw + turn), 0.0], atol=1e-12
        )
        centre = pose[:3, 3] + rotation @ np.array(scene.grip_offset)
        np.testing.assert_allclose(centre, [x, y, scene.tcp_height], atol=1e-12)


def test_the_grasp_goal_check_keeps_the_differential_iks_margin(so101: StackConfig) -> None:
    """A grasp runs on the QP differential IK, which keeps every joint DEFAULT_POSITION_MARGIN
    (0.05 rad) inside its limits; MoveToPose's goal check keeps 5 mrad. Above an SO-101 grasp
    there is a height whose pre-grasp pose the 5 mrad check solves only with a joint inside
    the QP's margin (its lift stalled 8 mm short there): the Grasp goal check refuses it,
    naming the pre-grasp pose, and every solution it finds lies inside the QP's range."""
    scene = robot_scene(so101)
    setup = grasp_setup(so101, (*scene.cube_start, 0.0), install=False)
    try:
        stack = setup.stack
        assert setup.scene is not None
        model = stack.model
        home = to_model_order(model, so101.joint_names, so101.home_positions, "home")
        loose, grasp_ik = goal_ik(stack), grasp_goal_ik(stack)
        arm = model.indices(so101.arm_joints)
        lower = model.limits.lower[arm] + DEFAULT_POSITION_MARGIN
        upper = model.limits.upper[arm] - DEFAULT_POSITION_MARGIN
        pose = cube_grasps(*scene.cube_start, 0.0, setup.scene)[0]
        refused = []
        for height in np.arange(0.04, 0.13, 0.01):
            goal = GraspGoal(grasp_pose=pose, approach_offset=float(height))
            solved = loose.solve(goal.pre_grasp_pose, seed=home)
            strict = grasp_ik.solve(goal.pre_grasp_pose, seed=home)
            if strict.converged:
                q = strict.q[arm]
                assert np.all(q >= lower - 1e-9) and np.all(q <= upper + 1e-9), (height, q)
            elif solved.converged:
                q = solved.q[arm]
                assert np.any((q < lower) | (q > upper)), (height, q)
                reason = unreachable_pose(grasp_ik, goal, home)
                assert reason is not None and reason.startswith("pre-grasp pose"), reason
                assert unreachable_pose(loose, goal, home) is None
                refused.append(float(height))
        assert refused, "no height between the two checks' margins"
    finally:
        stack.shut_down()


@pytest.fixture(scope="module")
def panda(tmp_path_factory: pytest.TempPathFactory) -> StackConfig:
    """ct-setup's configuration of the Panda (7 joints, a mimic gripper)."""
    return _set_up(tmp_path_factory.mktemp("panda"), "robots/panda_description/urdf/panda.urdf")


def test_of_a_cubes_grasps_one_with_room_from_the_joint_limits_is_taken(
    panda: StackConfig,
) -> None:
    """The Panda's trial 19 of seed 1: the goal check accepts the grasp at the cube's own yaw,
    but its lift leaves a joint less than LIMIT_ROOM inside the bounds (joint 7 at its margin):
    that grasp ran to the 10 s limit with the lift stalled short. best_reachable takes a
    quarter-turned grasp of the same cube with room, and the trial with it ends DONE."""
    reach = robot_reach(panda)
    cube = trial_cube(1, 19, reach.region)
    setup = grasp_setup(panda, cube, install=False)
    try:
        stack = setup.stack
        assert setup.scene is not None
        home = to_model_order(stack.model, panda.joint_names, panda.home_positions, "home")
        ik = grasp_goal_ik(stack)
        goals = [reach.goal(pose) for pose in cube_grasps(*cube, setup.scene)]
        assert unreachable_pose(ik, goals[0], home) is None
        assert limit_clearance(ik, goals[0], home) < LIMIT_ROOM
        chosen, reason = best_reachable(ik, goals, home)
        assert reason is None and chosen is not goals[0]
        assert limit_clearance(ik, chosen, home) >= LIMIT_ROOM
    finally:
        stack.shut_down()
    stalled, _ = run_trial(panda, 19, cube, goal=goals[0], reach=reach)
    assert not stalled.success and stalled.final_phase == "HOLD", stalled
    result, _ = run_trial(panda, 19, cube, reach=reach)
    assert result.success, result
