"""ct-setup (ct_controllers.setup_assistant): from a URDF to a configuration the stack accepts.

Robots from installed packages, never copied into this repository: the Franka Panda and the UR5
of example-robot-data (a 7-DOF arm with a mimic finger and meshes; a 6-DOF arm without a
gripper) and the bundled arm. What ct-setup writes is checked the stack's way — its
configuration loader, description parser, controller plugins and gain check — independently of
how the setup assistant designed it. (Bringing the Panda up in MuJoCo needs the scene builder's
mesh support: not here.)
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.config import StackConfig, load_config, load_parameters
from ct_controllers.controllers.controller import Controller
from ct_controllers.controllers.gripper import finger_loop_radius, pressed_loop_radius
from ct_controllers.model.description import (
    RobotDescription,
    default_description_path,
    load_description,
)
from ct_controllers.model.robot import RobotModel
from ct_controllers.plugins import CONTROLLERS, HARDWARE, load_plugin
from ct_controllers.runtime.gain_stability import GainStability
from ct_controllers.runtime.stack import gain_stabilities, to_model_order
from ct_controllers.setup_assistant.cli import main

MARGIN = 2.0  # every gain doubled must still be stable: the margin ct-setup promises
DELAYS = (0, 1)  # MuJoCo; the bus and topic backends


example_robot = example_robot_path


ROBOTS = {
    "panda": lambda: example_robot("panda_description/urdf/panda.urdf"),
    "ur5": lambda: example_robot("ur_description/urdf/ur5_robot.urdf"),
    # a lone revolute jaw with no frame to measure it (ct-setup adds fingertip frames), joint
    # friction, a fixed joint named like its link
    "z1": lambda: example_robot("z1_description/urdf/z1.urdf"),
    "ct_arm": default_description_path,
}


@dataclass(frozen=True)
class Written:
    urdf: Path
    out: Path
    code: int
    stdout: str
    digest: str  # of the user's URDF before the run


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _quietly(*argv: str) -> tuple[int, str]:
    """main() in-process, its stdout captured (module-scoped fixtures have no capsys)."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(list(argv))
    return code, stdout.getvalue()


@pytest.fixture(scope="module", params=sorted(ROBOTS))
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """ct-setup run once per robot, in-process, into a directory of its own."""
    urdf = ROBOTS[request.param]()
    before = _digest(urdf)
    out = tmp_path_factory.mktemp(request.param) / "config"
    code, stdout = _quietly(str(urdf), "-o", str(out))
    return Written(urdf, out, code, stdout, before)


@dataclass(frozen=True)
class Loaded:
    config: StackConfig
    description: RobotDescription
    model: RobotModel
    controllers: dict[str, Controller]


def _load(written: Written) -> Loaded:
    """The written configuration through the stack's own loaders, as build_stack reads it."""
    config = load_config(written.out / "controllers.yaml")
    description = load_description(config.robot_description, mappings={"backend": config.backend})
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    controllers = {
        name: load_plugin(CONTROLLERS, str(params["type"])).from_parameters(
            model.with_own_data(), config.joint_names, params
        )
        for name, params in config.controllers.items()
    }
    return Loaded(config, description, model, controllers)


def test_output_loads_with_the_stacks_loaders(written: Written) -> None:
    """Exit 0; controllers.yaml loads with load_config; its robot_description expands with the
    configured backend to exactly one <ros2_control> block of a registered hardware plugin that
    the backend selects; arm + gripper joints and the block's joints are exactly the URDF's
    movable joints (build_stack's check); TCP and base are frames of the model; every controller
    builds from its plugin; and the user's URDF is unchanged."""
    assert written.code == 0, written.stdout
    loaded = _load(written)
    config, description, model = loaded.config, loaded.description, loaded.model
    plugin = description.hardware.plugin
    assert config.backend == load_plugin(HARDWARE, plugin).BACKEND
    for names in (config.joint_names, description.hardware.joint_names):
        assert sorted(names) == sorted(model.joint_names)
        assert len(set(names)) == len(names)
    assert model.model.existFrame(config.tcp_frame)
    assert model.model.existFrame(config.base_frame)
    assert set(loaded.controllers) == {"joint_impedance", "computed_torque"}
    assert _digest(written.urdf) == written.digest, "ct-setup changed the user's URDF"


def test_standard_interface_controllers_are_written_for_the_arm_and_its_gripper(
    written: Written,
) -> None:
    """Beside the joint-level controllers: the trajectory controller for the arm joints, and,
    for an arm with a gripper (not the UR5), a GripperCommand controller for its first gripper
    joint with the reference's defaults (allow_stalling false, goal_tolerance 0.01)."""
    config = load_config(written.out / "controllers.yaml")
    interface = config.interface_controllers
    assert list(interface["joint_trajectory_controller"]["joints"]) == list(config.arm_joints)
    if not config.gripper_joints:
        assert set(interface) == {"joint_trajectory_controller"}
        return
    assert set(interface) == {"joint_trajectory_controller", "gripper_controller"}
    gripper = interface["gripper_controller"]
    assert gripper["type"] == "ct_controllers/GripperActionController"
    assert gripper["joint"] == config.gripper_joints[0]
    assert gripper["allow_stalling"] is False and gripper["goal_tolerance"] == 0.01


def test_every_entry_carries_a_comment(written: Written) -> None:
    """Every parameter line of controllers.yaml has a comment (its description and unit), and
    the file holds every parameter the stack's loader read (nothing left to defaults unseen)."""
    text = (written.out / "controllers.yaml").read_text()
    body = text.split("ros__parameters:", 1)[1]
    entries = [
        line for line in body.splitlines() if ":" in line and not line.rstrip().endswith(":")
    ]
    assert entries and all("#" in line for line in entries)
    parameters = load_parameters(written.out / "controllers.yaml")
    assert len(entries) == len(parameters)


def test_gains_pass_the_stacks_check_with_margin(written: Written) -> None:
    """The stack's gain check (runtime.stack.gain_stabilities, as at bring-up) finds every
    controller and the safe hold stable at update_rate with 0 and 1 period of delay — and still
    stable with every gain doubled (margin), at every configuration it checks."""
    loaded = _load(written)
    for delay in DELAYS:
        checks = gain_stabilities(loaded.config, loaded.model, loaded.controllers, delay)
        assert set(checks) == {"joint_impedance", "computed_torque", "safe_hold.damping"}
        for name, check in checks.items():
            found = check.worst()
            assert found is not None and found.stable, (name, delay, found)
            if name in loaded.controllers:
                controller = loaded.controllers[name]
                doubled = {g: MARGIN * getattr(controller, g) for g in controller.GAIN_NAMES}
                worst = check.worst(doubled)
            else:
                stiffness, damping = check.feedback
                worst = GainStability(
                    check.plant,
                    (MARGIN * stiffness, MARGIN * damping),
                    check.configurations,
                    check.period,
                    delay,
                ).worst()
            assert worst is not None and worst.stable, (name, delay, worst.describe())


def test_gains_follow_the_model_and_the_effort_limits(written: Written) -> None:
    """Independently of the design: computed torque kd² ≤ 4 kp (damping ratio ≤ 1 asked), and
    the joint impedance stiffness of each joint is at most (effort limit − largest gravity
    effort) / 0.1 rad (0.01 m) over the stack's check configurations, and at least its largest
    Mᵢᵢ(q) there × 1 rad²/s² (it asks a bandwidth, not nothing) — M and g from Pinocchio (a
    mimic follower carried by its master: Pinocchio's mimic joint)."""
    loaded = _load(written)
    model = loaded.model
    impedance, computed = (
        loaded.controllers["joint_impedance"],
        loaded.controllers["computed_torque"],
    )
    kp, kd = computed.kp, computed.kd
    assert np.all(kd**2 <= 4.0 * kp * (1 + 1e-3))
    check = gain_stabilities(loaded.config, model, loaded.controllers, 0)["joint_impedance"]
    pinocchio_model = pin.buildModelFromXML(loaded.description.urdf, mimic=True)
    data = pinocchio_model.createData()
    gravity = np.max(
        [
            np.abs(pin.computeGeneralizedGravity(pinocchio_model, data, q))
            for q in check.configurations
        ],
        axis=0,
    )
    inertia = np.max(
        [np.diag(pin.crba(pinocchio_model, data, q)) for q in check.configurations], axis=0
    )
    prismatic = np.array(
        [
            joint.shortname().startswith("JointModelP")
            for joint in sorted(pinocchio_model.joints[1:], key=lambda j: j.idx_v)
            if joint.nv == 1
        ]
    )
    error = np.where(prismatic, 0.01, 0.1)
    stiffness = impedance.stiffness
    assert np.all(stiffness * error <= (model.limits.effort - gravity) * (1 + 1e-3))
    assert np.all(stiffness >= inertia * 1.0)


def test_home_is_inside_the_limits_and_above_the_base(written: Written) -> None:
    """home_positions has one value per joint, each within its URDF limits; at home every link
    origin is above the base plane or no lower than at q = 0 (forward kinematics by Pinocchio),
    and the TCP Jacobian of the arm joints has full rank (no singular home)."""
    loaded = _load(written)
    config, model = loaded.config, loaded.model
    home = to_model_order(model, config.joint_names, config.home_positions, "home")
    assert np.all(home >= model.limits.lower) and np.all(home <= model.limits.upper)
    pin_model = model.model
    data = pin_model.createData()

    def heights(q: np.ndarray) -> np.ndarray:
        pin.framesForwardKinematics(pin_model, data, q)
        base = data.oMf[pin_model.getFrameId(config.base_frame, pin.BODY)].inverse()
        return np.array([(base * data.oMf[f]).translation[2] for f in range(len(pin_model.frames))])

    assert np.all(heights(home) >= np.minimum(heights(pin.neutral(pin_model)), 0.05) - 1e-6)
    arm = model.indices(config.arm_joints)
    jacobian = model.frame_jacobian(home)[:, arm]
    assert np.linalg.svd(jacobian, compute_uv=False)[-1] > 1e-3


def test_chain_is_the_urdf_path_from_base_to_tcp(written: Written) -> None:
    """arm_joints are the movable joints Pinocchio puts between the base frame and the TCP
    (model.supports of the TCP's joint, base's own supports removed), in that order; the
    gripper joints are every other movable joint; base is the URDF's root link."""
    loaded = _load(written)
    config, model = loaded.config, loaded.model
    pin_model = model.model
    # (BODY frames: the Z1 names a fixed joint like its link)
    tcp_joint = pin_model.frames[pin_model.getFrameId(config.tcp_frame, pin.BODY)].parentJoint
    base_joint = pin_model.frames[pin_model.getFrameId(config.base_frame, pin.BODY)].parentJoint
    above_base = set(pin_model.supports[base_joint])
    chain = [pin_model.names[j] for j in pin_model.supports[tcp_joint] if j not in above_base]
    assert tuple(chain) == config.arm_joints
    assert set(config.gripper_joints) == set(model.joint_names) - set(chain)
    root = ET.fromstring(loaded.description.urdf)
    children = {j.find("child").get("link") for j in root.findall("joint")}
    roots = [link.get("name") for link in root.findall("link") if link.get("name") not in children]
    assert roots == [config.base_frame]


def _canonical(element: ET.Element) -> tuple[object, ...]:
    """An element as tag, attributes, text and children, whitespace between elements aside."""
    return (
        element.tag,
        sorted(element.attrib.items()),
        (element.text or "").strip(),
        tuple(_canonical(child) for child in element),
    )


def test_panda_tcp_gripper_and_mimic_follower(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Panda: TCP the URDF's own tool frame panda_hand_tcp at the chain's tip; both fingers
    the gripper, found where the tree branches; given only the mimic finger, its master joins
    it and the follower leaves the lists (never commanded: not in gripper_joints, the bridge's
    command_joints or the <ros2_control> block, as the stack requires); the written xacro
    includes the URDF unchanged (every link and joint of the original, meshes referenced as
    they were) and gives every joint of the block effort and position commands."""
    urdf = ROBOTS["panda"]()
    code, out, err = _run(
        capsys, str(urdf), "-o", str(tmp_path / "a"), "--gripper", "panda_finger_joint2"
    )
    assert code == 0, err
    config = load_config(tmp_path / "a" / "controllers.yaml")
    assert config.tcp_frame == "panda_hand_tcp"
    assert config.gripper_joints == ("panda_finger_joint1",)
    assert list(config.section("ros2_control_bridge")["command_joints"]) == list(config.joint_names)
    assert "panda_finger_joint1 (panda_finger_joint2 follows it" in out
    # What it chose and why, in a few lines: frames, joints, home, targets, each limit that
    # lowered a gain (the Panda's shoulder: its effort limit; joint1/joint3: the sampled loop).
    for said in (
        "base frame panda_link0",
        "TCP frame panda_hand_tcp",
        "arm joints (7)",
        "home [rad | m]",
        "20 rad/s, damping ratio 1",
        "panda_joint2 (inertia up to",
        "effort: 0.1 rad × K ≤ limit 87",
        "sampled loop at 1000 Hz",
        "default controller",
    ):
        assert said in out, said
    assert len(out.splitlines()) <= 25
    expanded = ET.fromstring(load_description(config.robot_description).urdf)
    original = ET.fromstring(urdf.read_text())
    for tag in ("link", "joint"):
        mine = {e.get("name"): _canonical(e) for e in expanded.findall(tag)}
        theirs = {e.get("name"): _canonical(e) for e in original.findall(tag)}
        assert mine == theirs
    blocks = expanded.findall("ros2_control")
    assert len(blocks) == 1
    assert [j.get("name") for j in blocks[0].findall("joint")] == list(config.joint_names)
    for joint in blocks[0].findall("joint"):
        commands = [c.get("name") for c in joint.findall("command_interface")]
        states = [s.get("name") for s in joint.findall("state_interface")]
        assert states == ["position", "velocity", "effort"]
        assert commands == ["effort", "position"]


def test_given_home_and_frames_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--home (arm joints only: the gripper at mid-range), --tcp and --base as given land in the
    file unchanged (to the file's 4 decimals)."""
    urdf = ROBOTS["ur5"]()
    home = [0.1, -1.2, 1.3, -1.6, -1.5, 0.2]
    code, _, err = _run(
        capsys,
        str(urdf),
        "-o",
        str(tmp_path),
        "--tcp",
        "ee_link",
        "--base",
        "base_link",
        "--home",
        ",".join(map(str, home)),
    )
    assert code == 0, err
    config = load_config(tmp_path / "controllers.yaml")
    assert (config.tcp_frame, config.base_frame) == ("ee_link", "base_link")
    assert config.home_positions == pytest.approx(home, abs=1e-4)
    assert config.gripper_joints == ()


def test_same_input_same_files(tmp_path: Path) -> None:
    """The choice is deterministic: two runs on the UR5 write the same controllers.yaml (the
    output directory's path aside)."""
    urdf = ROBOTS["ur5"]()
    texts = []
    for name in ("a", "b"):
        code, _ = _quietly(str(urdf), "-o", str(tmp_path / name))
        assert code == 0
        texts.append(
            (tmp_path / name / "controllers.yaml").read_text().replace(str(tmp_path / name), "DIR")
        )
    assert texts[0] == texts[1]


def test_vendor_ros2_control_block_gets_ours_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URDF whose <ros2_control> block names another vendor's plugin: ct-setup writes the xacro
    (the URDF included unchanged, its block too) and the stack's description parser picks our
    block; a continuous joint (nq ≠ nv in Pinocchio) gets a home in [−π, π]."""
    text = ROBOTS["ur5"]().read_text()
    text = text.replace(
        '<joint name="wrist_3_joint" type="revolute">',
        '<joint name="wrist_3_joint" type="continuous">',
    )
    vendor = (
        '<ros2_control name="vendor" type="system"><hardware><plugin>mock_components/GenericSystem'
        '</plugin></hardware><joint name="shoulder_pan_joint"><command_interface name="position"/>'
        "</joint></ros2_control></robot>"
    )
    urdf = tmp_path / "ur5_vendor.urdf"
    urdf.write_text(text.replace("</robot>", vendor))
    code, out, err = _run(capsys, str(urdf), "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert "not a plugin of ours" in out
    config = load_config(tmp_path / "out" / "controllers.yaml")
    description = load_description(config.robot_description, mappings={"backend": config.backend})
    assert config.backend == load_plugin(HARDWARE, description.hardware.plugin).BACKEND
    assert len(ET.fromstring(description.urdf).findall("ros2_control")) == 2
    wrist = config.home_positions[config.joint_names.index("wrist_3_joint")]
    assert -math.pi <= wrist <= math.pi


def _ur5_with_a_camera_and_our_block(tmp_path: Path, lock: str) -> Path:
    """The UR5 with a camera on a pan joint off the arm (hung on base_link) and a <ros2_control>
    block of ours driving the arm; ``lock``: the block's <param> elements."""
    text = ROBOTS["ur5"]().read_text()
    camera = (
        '<link name="camera"><inertial><mass value="0.2"/><inertia ixx="1e-4" ixy="0" ixz="0" '
        'iyy="1e-4" iyz="0" izz="1e-4"/></inertial></link><joint name="camera_pan" '
        'type="revolute"><parent link="base_link"/><child link="camera"/><origin '
        'xyz="-0.2 0 0.3"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="5" '
        'velocity="1"/></joint>'
    )
    joints = "".join(
        f'<joint name="{name}"><command_interface name="effort"/><state_interface '
        'name="position"/><state_interface name="velocity"/></joint>'
        for name in ROBOT_UR5_JOINTS
    )
    block = (
        '<ros2_control name="ours" type="system"><hardware><plugin>ct_controllers/MujocoSystem'
        f"</plugin>{lock}</hardware>{joints}</ros2_control>"
    )
    urdf = tmp_path / "ur5_camera.urdf"
    urdf.write_text(text.replace("</robot>", camera + block + "</robot>"))
    return urdf


def test_a_urdf_with_our_block_locks_where_its_block_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URDF carrying our block, which locks a camera's pan joint off the arm chain
    (<param name="locked.camera_pan">0.3</param>): ct-setup writes no xacro, takes that lock
    and says so; the stack's loaders read it locked there."""
    urdf = _ur5_with_a_camera_and_our_block(tmp_path, '<param name="locked.camera_pan">0.3</param>')
    code, out, err = _run(capsys, str(urdf), "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert "locked joints (1): camera_pan=0.3 [rad | m]" in out
    config = load_config(tmp_path / "out" / "controllers.yaml")
    assert Path(config.robot_description) == urdf.resolve()
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    assert dict(description.locked_joints) == {"camera_pan": 0.3}
    assert "camera_pan" not in RobotModel(description.urdf, config.tcp_frame).joint_names


def _broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.urdf"
    path.write_text('<robot name="x"><link name="a"></robot>')
    return path


def _no_effort(tmp_path: Path) -> Path:
    """The UR5 with its elbow's effort limit 0 (written to tmp_path)."""
    text = example_robot("ur_description/urdf/ur5_robot.urdf").read_text()
    start = text.index('<joint name="elbow_joint"')
    end = text.index("</joint>", start)
    joint = re.sub(r'effort="[^"]*"', 'effort="0"', text[start:end])
    path = tmp_path / "ur5_no_effort.urdf"
    path.write_text(text[:start] + joint + text[end:])
    return path


def _prefixed_xacro(tmp_path: Path) -> Path:
    """The UR5 as a xacro whose every link and joint name starts with ``$(arg prefix)``, an
    argument it does not declare (so it must be given), written to tmp_path."""
    text = example_robot("ur_description/urdf/ur5_robot.urdf").read_text()
    text = re.sub(r'(<(?:joint|link) name="|<(?:parent|child) link=")', r"\1$(arg prefix)", text)
    text = text.replace("<robot ", '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" ', 1)
    text = text.replace(' xmlns:xacro="http://wiki.ros.org/xacro"', "")
    path = tmp_path / "ur5_prefixed.urdf.xacro"
    path.write_text(text)
    return path


# The UR3 of example-robot-data with its (fixed) gripper: its upper arm reaches the cube.
UR3 = "ur_description/urdf/ur3_gripper.urdf"
UR3_HOME_IN_THE_CUBE = (-0.618, 0.404, -1.189, -0.813, -1.639, -0.831)  # [rad]


def test_ur3_home_is_clear_of_the_cube_and_ct_sim_of_it_ends_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The UR3 with gripper (issue #24): ct-setup's chosen home keeps more than SCENE_CLEARANCE
    (2 cm) from the cube of the scene the stack simulates for the written files — MuJoCo's own
    distance (mj_geomDistance of every robot shape to the cube, in MujocoSystem.from_config's
    scene of the loaded configuration) — and the summary says it was checked; ct-sim of that
    output exits 0, its final error within FINAL_ERROR_LIMIT."""
    from helpers import cube_distances

    from ct_controllers.cli import sim_main
    from ct_controllers.hardware.mujoco_collision import SCENE_CLEARANCE
    from ct_controllers.sim_demo import FINAL_ERROR_LIMIT

    code, stdout, _ = _run(capsys, str(example_robot(UR3)), "-o", str(tmp_path))
    assert code == 0
    assert "clear of the simulated table, floor and cube by 2 cm" in stdout
    config = load_config(tmp_path / "controllers.yaml")
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    [(distance, body)] = cube_distances(config, description, [{}])
    assert distance > SCENE_CLEARANCE, (distance, body)
    assert sim_main(["--config", str(tmp_path / "controllers.yaml"), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["ok"] and run["final_error_rad"] <= FINAL_ERROR_LIMIT, run


TIAGO = "tiago_description/robots/tiago.urdf"
TALOS = "talos_data/robots/talos_full_v2.urdf"


def test_joints_off_the_chain_are_locked_where_asked_and_the_arm_moves_in_ct_sim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Tiago mobile manipulator (wheels, head and a 19-joint hand beside its torso and arm):
    with the hand not the gripper (``--gripper ''``) ct-setup locks every joint it does not
    drive, at 0 (the limit nearest 0 where 0 is outside) or where ``--lock`` says, and says so;
    the stack's loaders read a model of the torso and arm alone, in which every link is where
    Pinocchio puts it in the full URDF with the locked joints at those positions (checked at
    the written home); ct-sim of that output exits 0 with the arm back home."""
    from ct_controllers.cli import sim_main
    from ct_controllers.sim_demo import FINAL_ERROR_LIMIT

    urdf = example_robot(TIAGO)
    code, stdout, stderr = _run(
        capsys,
        str(urdf),
        "-o",
        str(tmp_path),
        "--gripper",
        "",
        "--tcp",
        "hand_tool_link",
        "--lock",
        "head_1_joint=0.5,wheel_left_joint=-1.25",
    )
    assert code == 0, stderr
    assert "locked joints (40): wheel_right_joint=0, wheel_left_joint=-1.25, head_1_joint=0.5" in (
        stdout
    )
    config = load_config(tmp_path / "controllers.yaml")
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    arm = ["torso_lift_joint"] + [f"arm_{i}_joint" for i in range(1, 8)]
    assert list(config.arm_joints) == arm and list(model.joint_names) == arm
    assert description.locked_joints["head_1_joint"] == 0.5
    assert len(description.locked_joints) == 40  # the hand's followers too
    full = pin.buildModelFromXML(urdf.read_text())
    q_full = pin.neutral(full)
    positions = {
        **dict(description.locked_joints),
        **dict(zip(config.joint_names, config.home_positions, strict=True)),
    }
    for name, value in positions.items():
        joint = full.joints[full.getJointId(name)]
        if joint.nq == 2:  # a wheel: continuous
            q_full[joint.idx_q : joint.idx_q + 2] = (math.cos(value), math.sin(value))
        else:
            q_full[joint.idx_q] = value
    full_data = full.createData()
    pin.framesForwardKinematics(full, full_data, q_full)
    home = to_model_order(model, config.joint_names, config.home_positions, "home")
    for link in ("head_2_link", "wheel_left_link", "hand_index_flex_3_link", "hand_tool_link"):
        expected = full_data.oMf[full.getFrameId(link, pin.BODY)].homogeneous
        np.testing.assert_allclose(model.frame_pose(home, link), expected, atol=1e-9, err_msg=link)
    assert sim_main(["--config", str(tmp_path / "controllers.yaml"), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["ok"] and run["final_error_rad"] <= FINAL_ERROR_LIMIT, run


def test_a_dual_arm_robot_gets_one_arm_with_its_own_gripper_and_the_rest_locked() -> None:
    """Baxter (two arms, each with a two-finger gripper, one finger a <mimic> follower, and a
    head): the chain is the arm whose gripper was found (the longest chain leads into it), its
    TCP on that arm, not the other arm's; the other arm, its gripper and the head are locked."""
    from ct_controllers.setup_assistant.chain import discover_chain
    from ct_controllers.setup_assistant.urdf_tree import read_robot

    tree = read_robot(example_robot("baxter_description/urdf/baxter.urdf"))
    chain = discover_chain(tree)
    side, other = (
        ("right", "left") if chain.arm_joints[0].startswith("right") else ("left", "right")
    )
    joints = ("s0", "s1", "e0", "e1", "w0", "w1", "w2")
    assert chain.arm_joints == tuple(f"{side}_{j}" for j in joints)
    assert chain.gripper_joints == (f"{side[0]}_gripper_l_finger_joint",)
    assert chain.followers == {
        f"{side[0]}_gripper_r_finger_joint": f"{side[0]}_gripper_l_finger_joint"
    }
    assert tree.path(f"{side}_wrist", chain.tcp) is not None  # on that arm
    assert set(chain.locked) == {
        "head_pan",
        *(f"{other}_{j}" for j in joints),
        f"{other[0]}_gripper_l_finger_joint",
        f"{other[0]}_gripper_r_finger_joint",
    }


def test_an_arm_its_limits_do_not_hold_everywhere_starts_where_they_do_and_moves_in_ct_sim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Baxter's right arm (its shoulder's 50 N·m does not hold the arm stretched out: the real
    one has a gravity spring its URDF lacks): ct-setup says so and goes on; at the written home
    gravity takes at most 0.8 of every effort limit (Pinocchio's g(q) of the stack's model); the
    short joint's stiffness asks at most half its limit at 0.1 rad; ct-sim of the output (the
    other arm and the head locked; meshes that overlap at rest excluded) exits 0, back home."""
    from ct_controllers.cli import sim_main
    from ct_controllers.sim_demo import FINAL_ERROR_LIMIT

    code, stdout, stderr = _run(
        capsys, str(example_robot("baxter_description/urdf/baxter.urdf")), "-o", str(tmp_path)
    )
    assert code == 0, stderr
    assert "right_s1 (inertia up to" in stdout
    assert "its limit 50 does not hold the arm against gravity everywhere" in stdout
    loaded = _load(Written(tmp_path, tmp_path, code, stdout, ""))
    model = loaded.model
    home = to_model_order(model, loaded.config.joint_names, loaded.config.home_positions, "home")
    assert np.all(np.abs(model.gravity(home)) <= 0.8 * model.limits.effort)
    shoulder = model.v_index("right_s1")
    stiffness = loaded.controllers["joint_impedance"].stiffness[shoulder]
    assert stiffness * 0.1 <= 0.5 * model.limits.effort[shoulder] * (1 + 1e-3)
    assert sim_main(["--config", str(tmp_path / "controllers.yaml"), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["ok"] and run["final_error_rad"] <= FINAL_ERROR_LIMIT, run


def test_a_gripper_whose_fingers_branch_again_is_found_where_it_hangs() -> None:
    """Talos (a humanoid; its grippers' fingers branch again, the tips <mimic> the finger's
    root): the gripper is the branch at gripper_left_base_link, not the deeper one inside a
    finger (whose closure over <mimic> reaches back up the chain); its master is the one
    driven joint, the six others follow; the TCP is the wrist's tool frame; the legs, head and
    the other arm are locked."""
    from ct_controllers.setup_assistant.chain import discover_chain
    from ct_controllers.setup_assistant.urdf_tree import read_robot

    tree = read_robot(example_robot(TALOS))
    chain = discover_chain(tree)
    assert chain.gripper_joints == ("gripper_left_joint",)
    assert set(chain.followers.values()) == {"gripper_left_joint"} and len(chain.followers) == 6
    assert chain.tcp == "wrist_left_ft_tool_link"
    assert chain.arm_joints[-7:] == tuple(f"arm_left_{i}_joint" for i in range(1, 8))
    assert "leg_left_1_joint" in chain.locked and "arm_right_1_joint" in chain.locked


def test_a_humanoid_chest_whose_branches_are_arms_is_no_gripper() -> None:
    """iCub (reduced): its chest branches into two 7-joint arms and a neck, longer than the
    3-joint torso below them: no gripper there; the chain is the torso and one arm to its
    hand, the other arm, the head and the legs locked."""
    from ct_controllers.setup_assistant.chain import discover_chain
    from ct_controllers.setup_assistant.urdf_tree import read_robot

    tree = read_robot(example_robot("icub_description/robots/icub_reduced.urdf"))
    chain = discover_chain(tree)
    assert chain.gripper_joints == ()
    assert chain.arm_joints[:3] == ("torso_pitch", "torso_roll", "torso_yaw")
    side = chain.arm_joints[3][0]  # l or r
    assert len(chain.arm_joints) == 10 and all(n.startswith(side) for n in chain.arm_joints[3:])
    other = "r" if side == "l" else "l"
    assert f"{other}_elbow" in chain.locked and f"{side}_knee" in chain.locked


BAD_INPUTS = {
    # case: (robot or a maker of a bad file, extra arguments, what the message must name)
    "urdf does not parse": (_broken, [], "does not parse"),
    "urdf not found": (lambda tmp: tmp / "nope.urdf", [], "nope.urdf"),
    "tcp not there": ("panda", ["--tcp", "no_such_frame"], "no_such_frame"),
    "base not there": ("panda", ["--base", "no_such_base"], "no_such_base"),
    "gripper joint not there": ("panda", ["--gripper", "no_such_joint"], "no_such_joint"),
    "gripper joint on the arm chain": ("panda", ["--gripper", "panda_joint4"], "panda_joint4"),
    "gripper joint on the given chain": (
        "panda",
        ["--tcp", "panda_leftfinger", "--gripper", "panda_finger_joint1"],
        "panda_finger_joint1",
    ),
    "home outside the limits": ("panda", ["--home", "0,0,0,-3.5,0,1,0"], "panda_joint4"),
    "home of the wrong length": ("ur5", ["--home", "0,0,0"], "expected 6"),
    # ct-setup's own choice before #24: the UR3's upper arm 33 mm inside the cube
    "home inside the cube": (
        lambda tmp: example_robot(UR3),
        ["--home=" + ",".join(map(str, UR3_HOME_IN_THE_CUBE))],
        "upper_arm_link 33 mm inside cube",
    ),
    "home not a number": ("ur5", ["--home", "0,a,0,0,0,0"], "'a'"),
    # example-robot-data's double pendulum: <limit lower="0" upper="0" effort="0" velocity="0">
    "a joint with no range": (
        lambda tmp: example_robot("double_pendulum_description/urdf/double_pendulum.urdf"),
        [],
        "joint 'joint1' has no range",
    ),
    "a xacro argument not given": (_prefixed_xacro, [], "Undefined substitution argument prefix"),
    "xacro arguments for a plain urdf": ("ur5", ["prefix:=left_"], "not a .xacro"),
    "a xacro argument not NAME:=VALUE": (_prefixed_xacro, ["prefix=left_"], "'prefix=left_'"),
    "a lock on a driven joint": (
        lambda tmp: example_robot(TIAGO),
        ["--lock", "arm_1_joint=0"],
        "--lock arm_1_joint: the stack drives it",
    ),
    "a lock outside the joint's limits": (
        lambda tmp: example_robot(TIAGO),
        ["--lock", "head_1_joint=9"],
        "'head_1_joint': position 9 is outside its limits",
    ),
    "a lock not JOINT=POSITION": (
        lambda tmp: example_robot(TIAGO),
        ["--lock", "head_1_joint"],
        "'head_1_joint' is not JOINT=POSITION",
    ),
    "a lock of no movable joint": (
        lambda tmp: example_robot(TIAGO),
        ["--lock", "no_such_joint=0"],
        "--lock no_such_joint: not a movable joint off the chain",
    ),
    "our own block neither driving nor locking a joint": (
        lambda tmp: _ur5_with_a_camera_and_our_block(tmp, ""),
        [],
        "its own <ros2_control> block drives neither camera_pan nor locks them",
    ),
    "a lock given where our own block says": (
        lambda tmp: _ur5_with_a_camera_and_our_block(
            tmp, '<param name="locked.camera_pan">0.3</param>'
        ),
        ["--lock", "camera_pan=0.1"],
        "--lock given, but the URDF's own <ros2_control> block is ours",
    ),
    # Pinocchio builds a follower only after its master in its depth-first reading; Talos's
    # gripper tips come first
    "a <mimic> Pinocchio cannot build": (
        lambda tmp: example_robot(TALOS),
        [],
        "Pinocchio builds a <mimic> joint only after the joint it follows",
    ),
    "a joint with no effort limit": (
        _no_effort,
        [],
        "joint 'elbow_joint' has <limit effort=\"0\">",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_2_naming_it_and_writes_nothing(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bad input: exit code 2, one line on stderr that names the offending frame, joint,
    value or file, nothing on stdout, and the output directory not even created."""
    robot, extra, named = BAD_INPUTS[case]
    urdf = ROBOTS[robot]() if isinstance(robot, str) else robot(tmp_path)
    out = tmp_path / "out"
    code, stdout, stderr = _run(capsys, str(urdf), "-o", str(out), *extra)
    assert code == 2
    assert stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith("ct-setup: ") and named in stderr
    assert not out.exists()


def test_existing_files_are_kept_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second run into a directory that holds the files exits 2 naming them and leaves them
    as they were; --force replaces them with what the first run wrote."""
    urdf = ROBOTS["ur5"]()
    assert _run(capsys, str(urdf), "-o", str(tmp_path))[0] == 0
    config = tmp_path / "controllers.yaml"
    first = {p: p.read_bytes() for p in tmp_path.iterdir()}
    config.write_text(config.read_text() + "# edited\n")
    edited = config.read_bytes()
    code, stdout, stderr = _run(capsys, str(urdf), "-o", str(tmp_path))
    assert code == 2 and "already exist" in stderr and str(config) in stderr and stdout == ""
    assert config.read_bytes() == edited
    assert _run(capsys, str(urdf), "-o", str(tmp_path), "--force")[0] == 0
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == first


def test_yaml_scalars_read_back_as_written(tmp_path: Path) -> None:
    """Strings that YAML would read as something else (a path with spaces and a colon, 'true',
    an empty string, a number-like name) and floats are written so that the stack's loader
    reads back exactly the values given."""
    from ct_controllers.setup_assistant.yaml_writer import Entry, render

    values = {
        "robot_description": "/a path/with: colon.urdf",
        "frame": "true",
        "empty": "",
        "number_like": "1e3",
        "names": ["joint 1", "no", "ok_name"],
        "gains": [1e-7, 123456789.0, 0.1, 2.0],
        "flag": False,
        "count": 3,
    }
    file = tmp_path / "controllers.yaml"
    file.write_text(render([Entry(f"section.{k}", v, "a comment") for k, v in values.items()]))
    read = load_parameters(file)
    assert read == {f"section.{k}": v for k, v in values.items()}


def test_the_kinova_tcp_is_its_end_effector_frame_not_a_deeper_finger_tip() -> None:
    """The Kinova Jaco 2 (example-robot-data): among the links fixed to its last moving link
    (its fingers are fixed joints, one link deeper than the end effector), the default TCP is
    the frame named as a tool (``j2s6s200_end_effector``: the name matched as a whole word
    across its underscores), not the deepest finger tip; its three continuous joints are arm
    joints and there is no gripper."""
    from ct_controllers.setup_assistant.chain import discover_chain
    from ct_controllers.setup_assistant.urdf_tree import read_robot

    tree = read_robot(example_robot_path("robots/kinova_description/robots/kinova.urdf"))
    chain = discover_chain(tree)
    assert chain.tcp == "j2s6s200_end_effector"
    assert chain.arm_joints == tuple(f"j2s6s200_joint_{i}" for i in range(1, 7))
    assert chain.gripper_joints == ()


@pytest.mark.parametrize(
    ("path", "jaw", "tcp", "arm"),
    [
        ("robots/so_arm_description/urdf/so100.urdf", "gripper", "gripper", 5),
        ("robots/so_arm_description/urdf/so101.urdf", "gripper", "gripper_frame_link", 5),
        ("robots/z1_description/urdf/z1.urdf", "jointGripper", "gripperStator", 6),
    ],
    ids=["so100", "so101", "z1"],
)
def test_a_lone_jaw_at_the_chain_tip_is_the_gripper(
    path: str, jaw: str, tcp: str, arm: int
) -> None:
    """A single revolute jaw against a fixed one, the last joint of the chain (no branch in the
    tree): the SO-100, SO-101 and Unitree Z1 of example-robot-data. The jaw is the gripper, not
    an arm joint, and the TCP is fixed to the link the jaw hangs on (the jaw does not move it);
    an arm whose last joint is not named like a jaw (the UR5's wrist_3), or whose joints are all
    named so (a finger robot), keeps it."""
    from ct_controllers.setup_assistant.chain import discover_chain
    from ct_controllers.setup_assistant.urdf_tree import read_robot

    tree = read_robot(example_robot_path(path))
    chain = discover_chain(tree)
    assert chain.gripper_joints == (jaw,)
    assert len(chain.arm_joints) == arm and jaw not in chain.arm_joints
    assert chain.tcp == tcp
    assert jaw not in {j.name for j in tree.path(chain.base, chain.tcp) or ()}
    assert any("a lone jaw" in note for note in chain.notes)
    ur5 = discover_chain(
        read_robot(example_robot_path("robots/ur_description/urdf/ur5_robot.urdf"))
    )
    assert ur5.gripper_joints == () and ur5.arm_joints[-1] == "wrist_3_joint"
    assert discover_chain(tree, gripper=[]).gripper_joints == ()
    # A finger robot (TriFinger's finger_edu): every joint named "finger_...", none set apart.
    finger = read_robot(example_robot_path("robots/finger_edu_description/robots/finger_edu.urdf"))
    assert discover_chain(finger).gripper_joints == ()


@pytest.mark.parametrize(
    ("path", "jaw", "closes_at"),
    [
        # the SO-101 closes at its lower limit (−10°, just past its jaws meeting at 0), the
        # Z1's jaw at 0, parallel to its stator (it opens to −90°)
        ("robots/so_arm_description/urdf/so101.urdf", "gripper", -0.174533),
        ("robots/z1_description/urdf/z1.urdf", "jointGripper", 0.0),
    ],
    ids=["so101", "z1"],
)
def test_a_lone_jaw_gets_fingertip_frames_and_its_width_is_the_tip_chord(
    tmp_path: Path, path: str, jaw: str, closes_at: float
) -> None:
    """A revolute jaw whose link frame sits on its hinge (no URDF frame measures it): ct-setup
    writes a fingertip frame on the jaw and one where that fingertip closes, on the link it
    hangs on, into the xacro (the URDF included unchanged), and names them as width frames. The
    grip width the stack then measures is the chord of the fingertip's arc, checked against
    2 r sin(|θ − θ_closed| / 2) (r: the fingertip's distance from the hinge axis, from the
    URDF's joint axis) at both limits and mid-range; the closing limit found from the geometry
    is the one the robot closes at."""
    from ct_controllers.model.grip_geometry import gripper_geometry
    from ct_controllers.model.model_state import ModelState

    urdf = example_robot_path(path)
    code, printed = _quietly(str(urdf), "-o", str(tmp_path))
    assert code == 0, printed
    assert urdf.read_text() == example_robot_path(path).read_text()
    config = load_config(tmp_path / "controllers.yaml")
    assert config.grip_width_frames == (f"{jaw}_tip", f"{jaw}_fixed_tip")
    assert f"grip width between {jaw}_tip and {jaw}_fixed_tip (added in the xacro" in printed
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    grip = gripper_geometry(model, config.gripper_joints, config.grip_width_frames)
    assert grip is not None
    index = model.q_index(jaw)
    joint = model.model.joints[model.model.getJointId(jaw)]
    axis = np.array(
        [
            float(joint.shortname() == name)
            for name in ("JointModelRX", "JointModelRY", "JointModelRZ")
        ]
    )
    if not axis.any():  # JointModelRevoluteUnaligned
        axis = np.array(joint.extract().axis)
    tip_in_jaw = model.model.frames[model.frame_id(f"{jaw}_tip")].placement.translation
    radius = float(np.linalg.norm(tip_in_jaw - axis * (tip_in_jaw @ axis)))
    closed = grip.closed[0]
    assert closed == pytest.approx(closes_at)
    # The finger servo: the defaults where the jaw's mass at its tip holds them at update_rate,
    # else lowered (the SO-101's 3 g jaw tip) so that twice the gains is still a stable sampled
    # loop with a period of delay and the gains pressing a stiff object too (radii of the
    # finger's own 1-DOF loop, its URDF damping counted); the Grasp's servo runs the configured
    # gains.
    from ct_controllers.chains.grasp_runner import grasp_gripper

    servo = grasp_gripper(model, config, grip)
    mass = float(servo.finger_masses.min())
    friction = float(model.joint_damping[model.v_index(jaw)] / servo.levers[0] ** 2)
    assert (servo.stiffness, servo.damping) == (config.gripper_stiffness, config.gripper_damping)
    k, d, period = config.gripper_stiffness, config.gripper_damping, config.period
    assert finger_loop_radius(2 * k, 2 * d, mass, period, friction) <= 1.0 + 1e-3
    assert pressed_loop_radius(k, d, mass, period, friction) <= 1.0 + 1e-3
    lowered = (
        finger_loop_radius(4000.0, 40.0, mass, period, friction) > 1.0
        or pressed_loop_radius(2000.0, 20.0, mass, period, friction) > 1.0
    )
    assert (config.gripper_stiffness < 2000.0) == lowered
    assert ("finger servo:" in printed) == lowered
    for theta in (grip.opened[0], 0.5 * (grip.opened[0] + closed), closed):
        q = np.zeros(model.nq)
        q[index] = theta
        state = ModelState(model)
        state.update(q, np.zeros(model.nv))
        expected = 2 * radius * math.sin(abs(theta - closed) / 2)
        assert grip.width(state) == pytest.approx(expected, abs=1e-6)


def test_a_tcp_whose_z_is_not_the_approach_gets_a_tool_frame(tmp_path: Path) -> None:
    """The Unitree Z1's deepest frame, gripperStator, has its x axis along the jaws: ct-setup
    adds ``gripperStator_tool`` on that link, at its origin, and takes it as the TCP. Checked
    by forward kinematics of the written description, independently of how it was built: its z
    axis points from the last arm joint to the jaws' tips (closed) within 1°, its y axis along
    the line from the fixed to the moving tip (open) made orthogonal to z, and it is a proper
    rotation. The Panda's panda_hand_tcp, whose z is the approach already, is kept."""
    urdf = example_robot_path("robots/z1_description/urdf/z1.urdf")
    code, printed = _quietly(str(urdf), "-o", str(tmp_path))
    assert code == 0, printed
    config = load_config(tmp_path / "controllers.yaml")
    assert config.tcp_frame == "gripperStator_tool"
    assert "TCP frame gripperStator_tool: added in the xacro on gripperStator" in printed
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    q = model.neutral()
    tool, stator = model.frame_pose(q), model.frame_pose(q, "gripperStator")
    np.testing.assert_allclose(tool[:3, 3], stator[:3, 3], atol=1e-12)
    rotation = tool[:3, :3]
    np.testing.assert_allclose(rotation.T @ rotation, np.eye(3), atol=1e-9)
    assert np.linalg.det(rotation) == pytest.approx(1.0)
    pin_model = model.model
    pin.forwardKinematics(pin_model, model.data, model.pinocchio_configuration(q))
    wrist = model.data.oMi[pin_model.getJointId("joint6")].translation
    tips = [model.frame_pose(q, name)[:3, 3] for name in config.grip_width_frames]  # closed: 0
    approach = 0.5 * (tips[0] + tips[1]) - wrist
    approach /= np.linalg.norm(approach)
    assert rotation[:, 2] @ approach > math.cos(math.radians(1.0))
    opened = q.copy()
    opened[model.q_index("jointGripper")] = -1.5707
    closing = model.frame_pose(opened, "jointGripper_tip")[:3, 3] - tips[1]
    closing -= (closing @ rotation[:, 2]) * rotation[:, 2]
    assert abs(rotation[:, 1] @ closing) / np.linalg.norm(closing) > math.cos(math.radians(1.0))
    panda = _quietly(
        str(example_robot_path("panda_description/urdf/panda.urdf")), "-o", str(tmp_path / "panda")
    )
    assert panda[0] == 0 and "TCP frame panda_hand_tcp:" in panda[1] and "_tool" not in panda[1]


def test_xacro_arguments_are_used_and_kept_in_the_written_xacro(tmp_path: Path) -> None:
    """A xacro that needs an argument (every name of the UR5 prefixed by ``$(arg prefix)``):
    ``ct-setup FILE -o DIR prefix:=left_`` expands it with the argument, as ``xacro FILE
    prefix:=left_`` would, and the xacro it writes declares the argument with that default, so
    that the stack — which expands the description with ``backend`` alone — reads the same
    robot: its joints are the prefixed ones and the configuration loads."""
    urdf = _prefixed_xacro(tmp_path)
    out = tmp_path / "out"
    code, printed = _quietly(str(urdf), "-o", str(out), "prefix:=left_")
    assert code == 0, printed
    config = load_config(out / "controllers.yaml")
    assert config.arm_joints[0] == "left_shoulder_pan_joint"
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    joints = [j.get("name") for j in ET.fromstring(description.urdf).findall("joint")]
    assert set(config.arm_joints) <= set(joints)
    assert all(name.startswith("left_") for name in joints)
    assert (
        '<xacro:arg name="prefix" default="left_"/>' in Path(config.robot_description).read_text()
    )


ROBOT_UR5_JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)


def test_a_xacro_with_our_block_and_arguments_gets_a_wrapper_without_a_second_block(
    tmp_path: Path,
) -> None:
    """A xacro that carries a <ros2_control> block of ours and needs an argument (the prefixed
    UR5, its block naming the prefixed joints): the stack expands a description with
    ``backend`` alone, so ct-setup writes a wrapper that declares the argument — and adds no
    block of its own: the expanded description has exactly the one block, ours, whose joints
    are the configuration's."""
    urdf = _prefixed_xacro(tmp_path)
    joints = [f"$(arg prefix){j}" for j in ROBOT_UR5_JOINTS]
    block = (
        '<ros2_control name="ours" type="system"><hardware><plugin>ct_controllers/MujocoSystem'
        "</plugin></hardware>"
        + "".join(
            f'<joint name="{j}"><command_interface name="effort"/>'
            '<state_interface name="position"/><state_interface name="velocity"/></joint>'
            for j in joints
        )
        + "</ros2_control></robot>"
    )
    urdf.write_text(urdf.read_text().replace("</robot>", block))
    out = tmp_path / "out"
    code, printed = _quietly(str(urdf), "-o", str(out), "prefix:=right_")
    assert code == 0, printed
    assert "its own <ros2_control> block" in printed and "xacro arguments kept" in printed
    config = load_config(out / "controllers.yaml")
    assert Path(config.robot_description).parent == out.resolve()
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    blocks = ET.fromstring(description.urdf).findall("ros2_control")
    assert len(blocks) == 1 and blocks[0].get("name") == "ours"
    assert description.hardware.joint_names == config.joint_names
    assert config.arm_joints == tuple(f"right_{j}" for j in ROBOT_UR5_JOINTS)
