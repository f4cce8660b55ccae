"""ct_controllers.hardware.jaw_grasp on the Unitree Z1 of example-robot-data (ct-setup's
configuration: its one revolute jaw against the 15 cm fixed one): the cube and the tilted grasp
derived from the jaws' collision geometry, checked against MuJoCo's own collision of the cube
with the jaws (3D, not the analysis' projection), and the pick through the whole stack.

Cost: one ct-setup (~5 s), one analysis (~2 s), two bench trials (~15 s)."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

from ct_controllers.bench.grasp import robot_scene, run_trial, trial_cube
from ct_controllers.bench.robots import example_robot_path
from ct_controllers.chains.grasp_runner import grasp_gripper
from ct_controllers.config import StackConfig, load_config
from ct_controllers.hardware.grasp_scene import CUBE_MAX_SIZE, cube_size
from ct_controllers.hardware.jaw_grasp import FIXED_JAW_GAP, JawGrasp, robot_jaw_grasp
from ct_controllers.hardware.mujoco_scene import build_scene, compile_scene
from ct_controllers.model.description import RobotDescription, load_description
from ct_controllers.model.grip_geometry import gripper_geometry
from ct_controllers.model.robot import RobotModel
from ct_controllers.setup_assistant.cli import main as setup_main


@pytest.fixture(scope="module")
def z1(tmp_path_factory: pytest.TempPathFactory) -> StackConfig:
    """ct-setup's configuration of the Z1 (its tool frame and jaw frames added)."""
    out = tmp_path_factory.mktemp("z1")
    urdf = example_robot_path("robots/z1_description/urdf/z1.urdf")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = setup_main([str(urdf), "-o", str(out)])
    assert code == 0, printed.getvalue()
    return load_config(str(out / "controllers.yaml"), overrides={"mujoco.mode": "lockstep"})


def _description(config: StackConfig) -> tuple[RobotDescription, Path]:
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    return description, Path(description.source).parent


def _grasp(config: StackConfig) -> JawGrasp:
    description, directory = _description(config)
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    grip = gripper_geometry(model, config.gripper_joints, config.grip_width_frames)
    grasp = robot_jaw_grasp(description.urdf, directory, config.tcp_frame, grip, cube_size(grip))
    assert grasp is not None
    return grasp


def _with_cube(config: StackConfig, grasp: JawGrasp, shift: float) -> mujoco.MjModel:
    """The robot's MuJoCo scene (no objects) with a fixed box of the grasp's cube where the
    grasp puts it, moved ``shift`` [m] along the cube's y (toward the moving jaw)."""
    description, directory = _description(config)

    def spec() -> mujoco.MjSpec:
        return build_scene(
            description.urdf,
            tcp_frame=config.tcp_frame,
            urdf_directory=directory,
            with_objects=False,
        )

    plain = compile_scene(spec())
    data = mujoco.MjData(plain)
    mujoco.mj_kinematics(plain, data)
    site = plain.site(config.tcp_frame).id
    tcp = np.eye(4)
    tcp[:3, :3], tcp[:3, 3] = data.site_xmat[site].reshape(3, 3), data.site_xpos[site]
    cube = tcp @ np.linalg.inv(grasp.tcp_in_cube)
    cube[:3, 3] += shift * cube[:3, 1]
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, cube[:3, :3].ravel())
    built = spec()
    built.worldbody.add_geom(
        name="probe_cube",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[grasp.size / 2] * 3,
        pos=cube[:3, 3].tolist(),
        quat=quat.tolist(),
    )
    return compile_scene(built)


def _jaw_geoms(model: mujoco.MjModel, joint: str) -> tuple[list[int], list[int]]:
    """The colliding geoms of the moving jaw and of the body it hangs on."""
    jaw = int(model.joint(joint).bodyid[0])
    holder = int(model.body_parentid[jaw])

    def of(body: int) -> list[int]:
        return [
            g
            for g in range(model.ngeom)
            if model.geom_bodyid[g] == body and (model.geom_contype[g] or model.geom_conaffinity[g])
        ]

    return of(jaw), of(holder)


def _distance(model: mujoco.MjModel, data: mujoco.MjData, geoms: list[int]) -> float:
    probe = model.geom("probe_cube").id
    return min(mujoco.mj_geomDistance(model, data, probe, g, 0.2, None) for g in geoms)


def test_the_z1s_cube_is_pinched_within_the_friction_cone_as_mujoco_collides_it(
    z1: StackConfig,
) -> None:
    """The Z1's top-down grasp of its 5 cm cube is squeezed out (the moving jaw's hull meets
    its top edge at 62°, past the 30° allowed: atan 1 less the 15° margin), so a smaller cube
    is pinched in a tilted grasp, both contact angles within the limit. MuJoCo's 3D collision of
    that cube, placed where the grasp puts it, agrees with the planar analysis: the cube stands
    FIXED_JAW_GAP (5 mm, across) off the fixed jaw, touches it when pushed over by that gap
    (within 0.5 mm), and the moving jaw meets the pushed cube at the predicted angle: clear 0.02 rad
    before it, into the cube 0.02 rad after; the force there (MuJoCo's contact normal) leans
    below horizontal by the predicted moving-jaw angle, within 5°. The fixed jaw's angle shows
    in the gap: MuJoCo's distance from the cube to it is the 5 mm gap across times the cosine of
    that angle (the cube's edge facing a slanted surface), within 0.3 mm."""
    grasp = _grasp(z1)
    assert grasp.size < CUBE_MAX_SIZE
    assert max(grasp.angles) <= grasp.limit == pytest.approx(math.radians(30.0))
    joint = z1.gripper_joints[0]
    model = _with_cube(z1, grasp, 0.0)
    jaw_geoms, holder_geoms = _jaw_geoms(model, joint)
    data = mujoco.MjData(model)
    address = model.joint(joint).qposadr[0]
    grip = gripper_geometry(
        RobotModel(_description(z1)[0].urdf, tcp_frame=z1.tcp_frame, base_frame=z1.base_frame),
        z1.gripper_joints,
        z1.grip_width_frames,
    )
    toward_open = math.copysign(1.0, grip.opened[0] - grip.closed[0])
    data.qpos[address] = grip.opened[0]
    mujoco.mj_forward(model, data)
    # The gap across, seen along the fixed jaw's surface normal at the contact.
    gap = FIXED_JAW_GAP * math.cos(grasp.angles[0])
    assert _distance(model, data, holder_geoms) == pytest.approx(gap, abs=3e-4)
    pushed = _with_cube(z1, grasp, -FIXED_JAW_GAP)
    data = mujoco.MjData(pushed)
    data.qpos[address] = grip.opened[0]
    mujoco.mj_forward(pushed, data)
    assert abs(_distance(pushed, data, holder_geoms)) < 5e-4
    assert _distance(pushed, data, jaw_geoms) > 0.0
    for offset, clear in ((0.02, True), (-0.02, False)):
        data.qpos[address] = grasp.closing + offset * toward_open
        mujoco.mj_forward(pushed, data)
        assert (_distance(pushed, data, jaw_geoms) > 0.0) is clear, offset
    data.qpos[address] = grasp.closing - 0.003 * toward_open
    mujoco.mj_forward(pushed, data)
    probe = pushed.geom("probe_cube").id
    cube_rotation = data.geom_xmat[probe].reshape(3, 3)
    forces = []
    for contact in data.contact[: data.ncon]:
        pair = (int(contact.geom1), int(contact.geom2))
        if probe not in pair or not set(pair) & set(jaw_geoms):
            continue
        normal = np.array(contact.frame[:3])  # from geom1 to geom2
        on_cube = normal if pair[1] == probe else -normal  # the jaw's push on the cube
        forces.append(cube_rotation.T @ on_cube)
    assert forces, "no contact between the jaw and the cube"
    y, z = np.mean(forces, axis=0)[1:]
    assert math.atan2(-z, -y) == pytest.approx(grasp.angles[1], abs=math.radians(5.0))


def test_the_z1s_jaw_closes_its_whole_stroke_in_its_fk_width_at_the_servo_speed(
    z1: StackConfig,
) -> None:
    """One revolute jaw moves the whole width: the grasp servo's stroke time is the distance
    the jaw frames move apart between closed and open (FK) over the servo's speed (0.1 m/s of
    jaw surface): over twice the bundled fingers' 0.4 s."""
    description, _ = _description(z1)
    model = RobotModel(description.urdf, tcp_frame=z1.tcp_frame, base_frame=z1.base_frame)
    grip = gripper_geometry(model, z1.gripper_joints, z1.grip_width_frames)
    assert grip is not None and len(grip.joints) == 1
    gripper = grasp_gripper(model, z1, grip)
    assert gripper.stroke_time == pytest.approx(grip.open_width / 0.1, rel=1e-9)
    assert gripper.stroke_time > 0.8


def test_the_z1_picks_the_derived_cube_through_the_whole_stack(z1: StackConfig) -> None:
    """With the derived cube and tilted grasp, ct-bench grasp's first two trials of seed 0 on
    the Z1 end DONE (they slipped out in HOLD with the 5 cm cube grasped top-down)."""
    scene = robot_scene(z1)
    assert scene.tcp_in_cube is not None
    for trial in (0, 1):
        result, _ = run_trial(z1, trial, trial_cube(0, trial, scene.region))
        assert result.success, result


def test_an_arm_of_five_joints_keeps_its_grasp_top_down(tmp_path: Path) -> None:
    """The SO-101 (5 arm joints and a revolute jaw): the tilted grasp a 6-joint arm would get
    (3°, 35 mm) is one its joints cannot take wherever the cube lies, so its grasp stays top-down
    (tilt 0) with the largest cube that holds there; both contact angles within the limit; the
    same geometry analysed for 6 joints tilts."""
    urdf = example_robot_path("robots/so_arm_description/urdf/so101.urdf")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        assert setup_main([str(urdf), "-o", str(tmp_path)]) == 0, printed.getvalue()
    config = load_config(str(tmp_path / "controllers.yaml"))
    assert len(config.arm_joints) == 5
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    directory = Path(description.source).parent
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    grip = gripper_geometry(model, config.gripper_joints, config.grip_width_frames)
    largest = cube_size(grip)
    five = robot_jaw_grasp(description.urdf, directory, config.tcp_frame, grip, largest, 5)
    six = robot_jaw_grasp(description.urdf, directory, config.tcp_frame, grip, largest, 6)
    assert five is not None and five.tilt == 0.0 and max(five.angles) <= five.limit
    assert five.size < largest
    assert six is not None and six.tilt != 0.0
    assert robot_scene(config).tcp_in_cube is not None  # the scene carries the top-down pose
