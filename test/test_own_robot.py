"""Your own arm, end to end: ct-setup → ct-sim → MoveJoints and MoveToPose through the real node
→ ct-bench reach, one parametrized module over robots that come from installed packages, never
copied into this repository — the Franka Panda, the UR5, the xArm7 and the Kinova Jaco 2 of
example-robot-data (7 DOF with a mimic finger and meshes; 6 DOF, no gripper; 7 DOF, no gripper,
joint friction 1 N·m and damping 2-10 N·m·s/rad in its URDF; 6 DOF, three continuous joints,
ranges far from zero, every mesh Collada, its fingers fixed) — and the bundled arm's xacro, each
through the same ct-setup output. Also a made-up variant (the UR5 with a continuous wrist,
text-edited into a tmp dir) through ct-setup and ct-sim (a robot with locked joints through the
node: test_own_robot_locked.py): nothing here may be specific to these arms.

Cost, per robot: one ct-setup, one ct-sim (10 s of sim time, lockstep), one node process for
both actions (a few goals), REACH_SAMPLES reach goals in lockstep.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
import yaml
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from ct_interfaces.action import Grasp, MoveJoints, MoveToPose
from helpers import continuous_wrist
from rclpy.action import ActionClient
from ros_helpers import (
    Client,
    moveit_trajectory,
    pose_message,
    ros_client,
    start_node,
    stop_node,
    wait_ready,
)
from ros_helpers import goal as joint_goal

from ct_controllers.bench import reach
from ct_controllers.bench.robots import example_robot_path
from ct_controllers.cli import sim_main
from ct_controllers.config import StackConfig, load_config
from ct_controllers.hardware.mujoco_collision import scene_clearance
from ct_controllers.model.description import default_description_path, load_description
from ct_controllers.setup_assistant.cli import main as setup_main

# Random reachable poses per robot, drawn by the bench itself (``reach.run``: uniform in the joint
# limits, clear of the scene) from its default seed, not chosen to pass: ≥ 95 % of those the goal
# check accepts must succeed, i.e. all of them at this size. Lockstep is deterministic: the same
# poses, the same outcomes. Measured beyond this test (20 poses each, seeds 2, 3, 4): see
# README "Your own robot".
REACH_SAMPLES = 8
REACH_SEED = 0
REACH_SUCCESS = 0.95
# [rad] each arm joint's step from home (towards its wider side, or away): the first of these
# whose configuration is clear of the scene (the reach bench's check: no contact, 2 cm from the
# table, floor and cube) is the MoveJoints goal; the next clear one is where the TCP of the
# MoveToPose goal is (forward kinematics).
STEPS = (0.2, -0.2, 0.1, -0.1, 0.3, -0.3, 0.05, -0.05)
JOINT_TOLERANCE = 0.02  # [rad] measured, at rest, after SUCCESS


example_robot = example_robot_path


ROBOTS = {
    "panda": lambda: example_robot("panda_description/urdf/panda.urdf"),
    "ur5": lambda: example_robot("ur_description/urdf/ur5_robot.urdf"),
    "xarm7": lambda: example_robot("xarm_description/urdf/xarm7.urdf"),
    # Kinova Jaco 2: three continuous joints, ranges far from zero, Collada meshes, fixed fingers
    "kinova": lambda: example_robot("kinova_description/robots/kinova.urdf"),
    "ct_arm": default_description_path,
}


@dataclass(frozen=True)
class Setup:
    name: str
    config_path: Path
    config: StackConfig
    setup_output: str


def _quietly(function: Any, argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = function(argv)
    return code, out.getvalue()


def _setup(urdf: Path, out: Path) -> tuple[int, str]:
    return _quietly(setup_main, [str(urdf), "-o", str(out)])


@pytest.fixture(scope="module", params=list(ROBOTS))
def robot(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """ct-setup's output for one robot (the first command of the two)."""
    out = tmp_path_factory.mktemp(request.param)
    code, printed = _setup(ROBOTS[request.param](), out)
    assert code == 0, printed
    path = out / "controllers.yaml"
    return Setup(request.param, path, load_config(path), printed)


def _model(config: StackConfig) -> Any:
    from ct_controllers.model.robot import RobotModel

    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    return RobotModel(description.urdf, config.tcp_frame, config.base_frame)


def _clear_steps(config: StackConfig, model: Any) -> list[np.ndarray]:
    """The arm configurations of :data:`STEPS` (:func:`_stepped`) clear of the scene, in order."""
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    check = scene_clearance(description, config, reach.CLEARANCE)
    found = [_stepped(model, config, step) for step in STEPS]
    return [q for q in found if check.clear(dict(zip(config.arm_joints, q, strict=True)))]


def _stepped(model: Any, config: StackConfig, step: float) -> np.ndarray:
    """The arm's home with each joint moved by ``step`` towards the side with more room,
    alternating in sign, inside the limits (model of the URDF: its own limits)."""
    arm = model.indices(config.arm_joints)
    home = np.array(config.home_positions[: len(arm)])
    lower, upper = model.limits.lower[arm], model.limits.upper[arm]
    towards = np.where(upper - home >= home - lower, 1.0, -1.0)
    return np.clip(home + towards * step, lower + 1e-3, upper - 1e-3)


def test_setup_prints_what_it_chose_and_the_next_command(robot: Setup) -> None:
    """ct-setup exits 0 and ends with the command that runs the arm: `ct-sim --config` of the
    file it wrote, which lists every movable joint of the URDF but a mimic follower."""
    assert f"next: ct-sim --config {robot.config_path}" in robot.setup_output
    followers = re.findall(r"(\S+) follows (\S+) \(<mimic>\)", robot.setup_output)
    assert all(f not in robot.config.joint_names for f, _ in followers)
    if robot.name == "panda":
        assert followers == [("panda_finger_joint2", "panda_finger_joint1")]
    if robot.name == "ur5":
        assert robot.config.gripper_joints == ()


def test_ct_sim_moves_the_arm_and_returns_home(robot: Setup) -> None:
    """`ct-sim --config` (the second command): the scripted motion, derived from the robot,
    ends back home within the stated limit, the arm having really moved (tracking error > 0)."""
    code, printed = _quietly(sim_main, ["--config", str(robot.config_path), "--json"])
    summary = json.loads(printed.strip().splitlines()[-1])
    assert code == 0, summary
    assert summary["ok"] and summary["final_error_rad"] <= summary["final_error_limit_rad"]
    assert 0 < summary["tracking_error_rms_rad"] <= summary["tracking_error_max_rad"] < 0.05


def test_reach_bench_succeeds_on_the_reachable_poses(robot: Setup) -> None:
    """`ct-bench reach --config` (approach method): of REACH_SAMPLES random poses the goal
    check accepts, ≥ 95 % end in SUCCESS (TCP within 1 mm / 0.01 rad for 0.1 s, judged by the
    bench from the measured state); every pose beyond the chain's reach is UNREACHABLE."""
    found = reach.run(
        REACH_SAMPLES,
        seed=REACH_SEED,
        unreachable=2,
        methods=("approach",),
        config_path=str(robot.config_path),
    )
    summary = found["methods"]["approach"]  # type: ignore[index]
    assert summary["goals"] >= REACH_SAMPLES - 1, summary
    assert summary["success_rate"] >= REACH_SUCCESS, summary
    far = found["unreachable"]
    assert far["unreachable"] == far["goals"] == 2, far  # type: ignore[index]


@pytest.fixture(scope="module")
def client(robot: Setup) -> Iterator[Client]:
    """The real node on the robot's configuration (as `ct-bringup sim --config`), MuJoCo paced."""
    process = start_node("--config", str(robot.config_path))
    try:
        if process.poll() is not None:
            pytest.fail("".join(process.lines))
        with ros_client(f"ct_own_{robot.name}") as client:
            client.move_to_pose = ActionClient(client.node, MoveToPose, "/ct/move_to_pose")  # type: ignore[attr-defined]
            client.grasp = ActionClient(client.node, Grasp, "/ct/grasp")  # type: ignore[attr-defined]
            assert wait_ready(client.move_to_pose.server_is_ready, 10.0)  # type: ignore[attr-defined]
            yield client
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the node said: {''.join(process.lines)[-3000:]}") from exc
    finally:
        stop_node(process)


def _positions(client: Client, names: tuple[str, ...]) -> np.ndarray:
    message = client.joint_states[-1]
    index = {n: i for i, n in enumerate(message.name)}
    return np.array([message.position[index[n]] for n in names])


def test_move_joints_reaches_a_goal_derived_from_the_robot(robot: Setup, client: Client) -> None:
    """MoveJoints through the real node to each arm joint a step from home (STEPS, the first
    configuration clear of the scene): SUCCESS, and the published joint states at rest within
    JOINT_TOLERANCE of the goal."""
    model = _model(robot.config)
    clear = _clear_steps(robot.config, model)
    assert clear, "no configuration of STEPS is clear of the scene"
    target = clear[0]
    names = list(robot.config.arm_joints)
    client.wait_at_rest()
    result = client.send_to(client.move_joints, joint_goal(names, target.tolist(), 2.0))
    assert result is not None and result.error_code == MoveJoints.Result.SUCCESS, result
    client.wait_at_rest()
    error = np.abs(_positions(client, robot.config.arm_joints) - target)
    assert np.max(error) < JOINT_TOLERANCE, error


def test_a_moveit_shaped_trajectory_reaches_a_goal_derived_from_the_robot(
    robot: Setup, client: Client
) -> None:
    """FollowJointTrajectory as MoveIt sends it (stamp 0, the measured start at t = 0, quintic
    points over 2 s, empty tolerances) to the trajectory controller ct-setup wrote for the
    robot's arm joints, towards the second clear step from home (the first when there is only
    one): SUCCEEDED, and the published joint states within JOINT_TOLERANCE of its last point."""
    model = _model(robot.config)
    clear = _clear_steps(robot.config, model)
    target = clear[1] if len(clear) > 1 else clear[0]
    names = robot.config.arm_joints
    action = ActionClient(
        client.node,
        FollowJointTrajectory,
        "/ct/joint_trajectory_controller/follow_joint_trajectory",
    )
    assert wait_ready(action.server_is_ready, 10.0)
    client.wait_at_rest()
    start = _positions(client, names)
    trajectory = moveit_trajectory(start, target, 2.0, names=list(names))
    future = action.send_goal_async(FollowJointTrajectory.Goal(trajectory=trajectory))
    assert client.spin_until(future.done, 5.0), "goal not answered"
    handle = future.result()
    assert handle.accepted
    done = handle.get_result_async()
    assert client.spin_until(done.done, 20.0), "no result"
    assert done.result().status == GoalStatus.STATUS_SUCCEEDED, done.result().result
    client.wait_at_rest()
    error = np.abs(_positions(client, names) - target)
    assert np.max(error) < JOINT_TOLERANCE, error
    client.node.destroy_client(action)


def _quaternion(rotation: np.ndarray) -> tuple[float, float, float, float]:
    x, y, z, w = pin.Quaternion(rotation).coeffs()
    return float(x), float(y), float(z), float(w)


def test_move_to_pose_reaches_a_pose_derived_from_the_robot(robot: Setup, client: Client) -> None:
    """MoveToPose through the real node to the TCP pose (base frame) of a configuration a step
    from home (the second of STEPS clear of the scene; forward kinematics by Pinocchio of the
    URDF, independent of the node): SUCCESS, and the TCP of the published joint states within
    1 mm / 0.01 rad of it."""
    config = robot.config
    model = _model(config)
    clear = _clear_steps(config, model)
    assert len(clear) >= 2, "fewer than two configurations of STEPS are clear of the scene"
    q = np.zeros(model.nq)
    q[model.indices(config.joint_names)] = config.home_positions
    q[model.indices(config.arm_joints)] = clear[1]
    pin_model = model.model
    data = pin_model.createData()
    pin.framesForwardKinematics(pin_model, data, model.pinocchio_configuration(q))
    base = data.oMf[pin_model.getFrameId(config.base_frame)]
    target = base.inverse() * data.oMf[pin_model.getFrameId(config.tcp_frame)]
    goal = MoveToPose.Goal(
        target=pose_message(
            tuple(target.translation), _quaternion(target.rotation), frame=config.base_frame
        ),
        position_tolerance=0.001,
        orientation_tolerance=0.01,
        timeout=10.0,
    )
    client.wait_at_rest()
    result = client.send_to(client.move_to_pose, goal)  # type: ignore[attr-defined]
    assert result is not None and result.error_code == MoveToPose.Result.SUCCESS, result
    client.spin_until(lambda: False, 0.2)
    measured = np.zeros(model.nq)
    measured[model.indices(config.joint_names)] = _positions(client, config.joint_names)
    pin.framesForwardKinematics(pin_model, data, model.pinocchio_configuration(measured))
    reached = base.inverse() * data.oMf[pin_model.getFrameId(config.tcp_frame)]
    assert np.linalg.norm(reached.translation - target.translation) <= 0.0011
    assert np.linalg.norm(pin.log3(reached.rotation.T @ target.rotation)) <= 0.011


def _continuous_wrist(urdf: Path, out: Path) -> Path:
    """The UR5 with wrist_3_joint continuous (its position limits dropped), as a new file."""
    path = out / "ur5_continuous.urdf"
    path.write_text(continuous_wrist(urdf.read_text()))
    return path


def test_a_made_up_variant_with_a_continuous_joint_runs_too(tmp_path: Path) -> None:
    """The UR5 with a continuous wrist (text-edited URDF, in a tmp dir): ct-setup writes a
    configuration the stack loads (the continuous joint in arm_joints) and ct-sim's motion
    ends back home within its limit."""
    urdf = _continuous_wrist(ROBOTS["ur5"](), tmp_path)
    code, printed = _setup(urdf, tmp_path / "out")
    assert code == 0, printed
    path = tmp_path / "out" / "controllers.yaml"
    config = load_config(path)
    model = _model(config)
    assert "wrist_3_joint" in config.arm_joints
    assert "wrist_3_joint" in model.continuous_joints
    assert math.isinf(model.limits.upper[model.v_index("wrist_3_joint")])
    code, printed = _quietly(sim_main, ["--config", str(path), "--json"])
    summary = json.loads(printed.strip().splitlines()[-1])
    assert code == 0 and summary["ok"], summary


def test_a_required_entry_left_out_is_refused_by_the_node(tmp_path: Path) -> None:
    """A user's controllers.yaml without tcp_frame (a required entry: it describes the robot)
    does not run on the bundled arm's value: the node exits with code 2 naming 'tcp_frame'."""
    code, printed = _setup(ROBOTS["ur5"](), tmp_path)
    assert code == 0, printed
    path = tmp_path / "controllers.yaml"
    document = yaml.safe_load(path.read_text())
    parameters = next(iter(document.values()))["ros__parameters"]
    del parameters["tcp_frame"]
    path.write_text(yaml.safe_dump(document))
    process = start_node("--config", str(path))
    try:
        output, _ = process.communicate(timeout=60)
    finally:
        stop_node(process)
    assert process.returncode == 2, output
    assert "'tcp_frame'" in output and "parameters file does not give" in output, output


def test_grasp_on_an_arm_without_a_gripper_is_refused(robot: Setup, client: Client) -> None:
    """An arm with no gripper joints (the UR5): a Grasp goal is refused — never accepted and
    run — with INVALID_GOAL and a message naming the missing gripper; the arm does not move."""
    if robot.config.gripper_joints:
        pytest.skip("the robot has a gripper (its grasp: test_backend_grasp, ct-bench grasp)")
    client.wait_at_rest()
    before = _positions(client, robot.config.arm_joints)
    goal = Grasp.Goal(
        grasp_pose=pose_message((0.4, 0.0, 0.1), frame=robot.config.base_frame),
        approach_offset=0.1,
        lift_height=0.05,
        grasp_effort=10.0,
        hold_duration=0.5,
    )
    result = client.send_to(client.grasp, goal)  # type: ignore[attr-defined]
    assert result is not None and result.error_code == Grasp.Result.INVALID_GOAL, result
    assert "gripper" in result.message, result.message
    client.spin_until(lambda: False, 0.5)
    assert np.max(np.abs(_positions(client, robot.config.arm_joints) - before)) < 1e-3


def test_slash_joint_states_carry_every_joint_mimic_ones_too(robot: Setup, client: Client) -> None:
    """/joint_states (joint_state_broadcaster's topic, for robot_state_publisher and MoveIt)
    names every movable joint of the robot's URDF — read here from the XML, mimic followers
    such as the Panda's second finger included — each sample with the stamp and values of the
    same sample on /ct/joint_states."""
    from xml.etree import ElementTree

    from sensor_msgs.msg import JointState

    urdf = load_description(robot.config.robot_description, {"backend": "mujoco"}).urdf
    movable = {
        j.get("name")
        for j in ElementTree.fromstring(urdf).iter("joint")
        if j.get("type") in ("revolute", "prismatic", "continuous")
    }
    broadcast: list[JointState] = []
    subscription = client.node.create_subscription(
        JointState, "/joint_states", broadcast.append, 10
    )
    try:
        assert client.spin_until(lambda: len(broadcast) > 5, 5.0), "nothing on /joint_states"
        last = broadcast[-2]
        assert set(last.name) == movable
        stamp = (last.header.stamp.sec, last.header.stamp.nanosec)
        twin = [
            m for m in client.joint_states if (m.header.stamp.sec, m.header.stamp.nanosec) == stamp
        ]
        assert len(twin) == 1 and list(twin[0].position) == list(last.position)
    finally:
        client.node.destroy_subscription(subscription)
