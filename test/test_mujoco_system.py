"""ct_controllers.hardware.mujoco_system: lifecycle, command validation at the hardware boundary,
the actuation report, lockstep determinism and paced timing of the MuJoCo backend."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import bundled_description, home_by_name, lockstep_config, new_robot_model

from ct_controllers.hardware.interface import (
    CommandRejected,
    JointCommand,
    LifecycleError,
    LifecycleState,
)
from ct_controllers.hardware.mujoco_scene import ServoGains
from ct_controllers.hardware.mujoco_system import PACED, MujocoConfig, MujocoSystem
from ct_controllers.model.robot import RobotModel

JOINTS = bundled_description().hardware.joint_names
EFFORTS = ("effort",) * len(JOINTS)


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return new_robot_model()


def make_system(**config: Any) -> MujocoSystem:
    settings: dict[str, Any] = {"initial_positions": home_by_name(), "with_objects": False}
    settings.update(config)
    return MujocoSystem(bundled_description().urdf, JOINTS, MujocoConfig(**settings))


@pytest.fixture
def active() -> Iterator[MujocoSystem]:
    system = make_system()
    system.configure()
    system.activate()
    yield system
    if system.state is LifecycleState.ACTIVE:
        system.deactivate()


def command(sequence: int, values, names=JOINTS, interfaces=None, stamp: float = 0.0):
    values = np.asarray(values, dtype=np.float64)
    return JointCommand(
        stamp=stamp,
        sequence=sequence,
        joint_names=tuple(names),
        interfaces=tuple(interfaces) if interfaces is not None else ("effort",) * len(names),
        values=values,
    )


def gravity_in_hardware_order(robot: RobotModel, position: np.ndarray) -> np.ndarray:
    """g(q) for a state sample in hardware joint order, returned in hardware order."""
    index = robot.indices(JOINTS)
    q = np.empty(robot.nq)
    q[index] = position
    return robot.gravity(q)[index]


# --- lifecycle -------------------------------------------------------------------------------
def test_lifecycle_order_is_enforced():
    """read needs configure; write needs activate; transitions only from their source state."""
    system = make_system()
    assert system.state is LifecycleState.UNCONFIGURED
    with pytest.raises(LifecycleError, match="read"):
        system.read()
    with pytest.raises(LifecycleError, match="write"):
        system.write(command(1, np.zeros(len(JOINTS))))
    with pytest.raises(LifecycleError, match="activate"):
        system.activate()
    system.configure()
    assert system.state is LifecycleState.INACTIVE
    system.read()  # allowed when inactive
    with pytest.raises(LifecycleError, match="write"):
        system.write(command(1, np.zeros(len(JOINTS))))
    with pytest.raises(LifecycleError, match="configure"):
        system.configure()
    system.activate()
    system.write(command(1, np.zeros(len(JOINTS))))
    with pytest.raises(LifecycleError, match="cleanup"):
        system.cleanup()
    system.deactivate()
    with pytest.raises(LifecycleError, match="write"):
        system.write(command(2, np.zeros(len(JOINTS))))
    system.cleanup()
    assert system.state is LifecycleState.UNCONFIGURED
    with pytest.raises(LifecycleError, match="read"):
        system.read()


def test_sequence_restarts_on_activation():
    """After deactivate/activate a writer may start its sequence again from 0."""
    system = make_system()
    system.configure()
    system.activate()
    system.write(command(5, np.zeros(len(JOINTS))))
    system.deactivate()
    system.activate()
    system.write(command(0, np.zeros(len(JOINTS))))


def test_initial_positions_are_applied_by_name():
    """initial_positions by joint name set the starting joint positions, at rest, t = 0."""
    start = {"joint4": -1.1, "joint2": 0.3, "right_finger_joint": 0.035}
    system = make_system(initial_positions=start)
    system.configure()
    sample = system.read()
    assert sample.joint_names == JOINTS
    assert sample.stamp == 0.0
    for name, value in zip(JOINTS, sample.position, strict=True):
        assert value == start.get(name, 0.0), name
    np.testing.assert_array_equal(sample.velocity, 0.0)


def test_initial_position_for_unknown_joint_is_rejected():
    """An initial position for a joint the backend does not drive is an error naming it."""
    system = make_system(initial_positions={"elbow_ghost": 0.1})
    with pytest.raises(ValueError, match="elbow_ghost"):
        system.configure()


# --- command validation ----------------------------------------------------------------------
def _bad_commands() -> list[tuple[str, JointCommand, str]]:
    values = np.linspace(-3.0, 3.0, len(JOINTS))
    unknown = ("elbow_ghost", *JOINTS[1:])
    dropped = JOINTS[:-1]
    duplicate = (*JOINTS, "joint2")
    nan = values.copy()
    nan[4] = np.nan
    inf = values.copy()
    inf[0] = -np.inf
    interfaces = list(EFFORTS)
    interfaces[6] = "position"
    return [
        ("unknown joint", command(10, values, unknown), "elbow_ghost"),
        ("missing joint", command(10, values[:-1], dropped), "right_finger_joint"),
        ("duplicate joint", command(10, np.append(values, 0.0), duplicate), "joint2"),
        ("NaN", command(10, nan), "joint5"),
        ("-inf", command(10, inf), "joint1"),
        ("wrong interface", command(10, values, interfaces=interfaces), "joint7"),
        ("repeated sequence", command(1, values), "sequence 1"),
        ("older sequence", command(0, values), "sequence 0"),
        ("length mismatch", command(10, values[:-1]), "length mismatch"),
        ("non-finite stamp", command(10, values, stamp=np.nan), "stamp"),
    ]


@pytest.mark.parametrize(
    ("case", "bad", "named"), _bad_commands(), ids=[c[0] for c in _bad_commands()]
)
def test_rejected_command_names_the_problem_and_writes_nothing(active, case, bad, named):
    """An invalid command raises CommandRejected naming the problem; ctrl, sim time and state
    are unchanged, and the next valid command is still accepted."""
    active.write(command(1, np.full(len(JOINTS), 0.5)))
    assert active.data is not None
    ctrl, sim_time = active.data.ctrl.copy(), active.data.time
    qpos = active.data.qpos.copy()
    with pytest.raises(CommandRejected, match=named):
        active.write(bad)
    np.testing.assert_array_equal(active.data.ctrl, ctrl)
    assert active.data.time == sim_time
    np.testing.assert_array_equal(active.data.qpos, qpos)
    active.write(command(2, np.full(len(JOINTS), 0.25)))  # the rejected sequence did not count
    assert active.data.time > sim_time


def test_shuffled_command_is_reordered_by_name(active):
    """Values given in a shuffled joint order reach the actuator of the joint they name."""
    torque = {name: 0.5 + 0.25 * i for i, name in enumerate(JOINTS)}
    order = list(JOINTS)
    np.random.default_rng(3).shuffle(order)
    assert tuple(order) != JOINTS
    active.write(command(1, [torque[n] for n in order], order))
    report = active.actuation_report()
    assert report.joint_names == JOINTS
    for name, requested in zip(report.joint_names, report.requested, strict=True):
        assert requested == torque[name], name
    assert active.model is not None and active.data is not None
    for name in JOINTS:  # independently of the report: MuJoCo's actuator of that name
        assert active.data.ctrl[active.model.actuator(name).id] == torque[name], name


def test_actuation_report_separates_request_input_and_forces(robot):
    """A request beyond the ctrlrange is reported as written (requested), clamped (effective),
    and the actuator/joint forces are what the clamped input produced (the finger servo at
    400 N/m here, so that its force stays inside the force range)."""
    system = make_system(
        command_interfaces={"left_finger_joint": "position"},
        servo_gains=ServoGains(prismatic_kp=400.0),
    )
    system.configure()
    system.activate()
    before = system.read()
    values = np.full(len(JOINTS), -2.0)
    values[JOINTS.index("joint6")] = 100.0  # effort limit 40 N·m
    values[JOINTS.index("joint1")] = -500.0  # effort limit 176 N·m
    finger = JOINTS.index("left_finger_joint")
    values[finger] = 0.5  # position target beyond the 0.04 m range
    interfaces = list(EFFORTS)
    interfaces[finger] = "position"
    system.write(command(1, values, interfaces=interfaces))
    report = system.actuation_report()
    np.testing.assert_array_equal(report.requested, values)
    expected_input = values.copy()
    expected_input[JOINTS.index("joint6")] = 40.0
    expected_input[JOINTS.index("joint1")] = -176.0
    expected_input[finger] = 0.04
    np.testing.assert_array_equal(report.effective, expected_input)
    # Motors: force = clamped input. Servo: kp (target − q) − kv v + g(q) from the state before
    # the step (the finger's gravity is 0 in this pose).
    expected_force = expected_input.copy()
    kp, kv = system.config.servo_gains.prismatic_kp, system.config.servo_gains.prismatic_kv
    gravity = gravity_in_hardware_order(robot, before.position)[finger]
    expected_force[finger] = (
        kp * (0.04 - before.position[finger]) - kv * before.velocity[finger] + gravity
    )
    assert expected_force[finger] == pytest.approx(8.0)
    np.testing.assert_allclose(report.actuator_force, expected_force, rtol=1e-12)
    np.testing.assert_allclose(report.joint_force, expected_force, rtol=1e-12)
    # The measured effort of the next sample is that joint force.
    np.testing.assert_allclose(system.read().effort, report.joint_force, rtol=1e-12)


def test_actuation_report_before_any_write_is_zero_for_motors():
    """Right after configure, motors request 0 and a position servo holds its start position."""
    system = make_system(command_interfaces={"joint4": "position"})
    system.configure()
    report = system.actuation_report()
    j4 = JOINTS.index("joint4")
    assert report.requested[j4] == home_by_name()["joint4"]
    np.testing.assert_array_equal(np.delete(report.requested, j4), 0.0)


# --- position servos ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["lockstep", PACED])
def test_position_servos_hold_against_gravity_without_sag(robot, mode):
    """Every joint on the position interface, commanded to stay where it starts (home) for 1 s
    of sim time: joint2, which carries 34 N·m of gravity, stays within 0.01 rad (kp = 400 N·m/rad
    alone would leave it g/kp = 0.084 rad low), thanks to the gravity feed-forward, in lockstep
    and paced; at rest each servo's force — the measured effort — is the gravity torque of an
    independent model (Pinocchio), within 1e-6 N·m."""
    system = make_system(mode=mode, command_interfaces={name: "position" for name in JOINTS})
    system.configure()
    system.activate()
    start = system.read()
    interfaces = ("position",) * len(JOINTS)
    sequence = 0
    while system.now() < 1.0:
        sequence += 1
        system.write(command(sequence, start.position, interfaces=interfaces))
        if mode == PACED:
            time.sleep(0.002)
        system.read()
    end = system.read()
    j2 = JOINTS.index("joint2")
    assert gravity_in_hardware_order(robot, start.position)[j2] < -30.0
    assert abs(end.position[j2] - start.position[j2]) < 0.01
    assert np.max(np.abs(end.position - start.position)) < 1e-6
    np.testing.assert_allclose(
        end.effort, gravity_in_hardware_order(robot, end.position), rtol=0, atol=1e-6
    )


def test_effort_joints_beside_position_servos_get_their_torque_unchanged(robot):
    """Mixed interfaces (arm on effort, fingers on position): the arm's motors apply exactly the
    torque written (no feed-forward added), the fingers' servos hold their position."""
    fingers = ("left_finger_joint", "right_finger_joint")
    system = make_system(command_interfaces={name: "position" for name in fingers})
    system.configure()
    system.activate()
    start = system.read()
    interfaces = tuple("position" if n in fingers else "effort" for n in JOINTS)
    arm = np.array([n not in fingers for n in JOINTS])
    for k in range(1, 201):
        sample = system.read()
        values = np.where(arm, gravity_in_hardware_order(robot, sample.position), start.position)
        system.write(command(k, values, interfaces=interfaces))
        report = system.actuation_report()
        np.testing.assert_array_equal(report.actuator_force[arm], values[arm])
    end = system.read()
    assert np.max(np.abs(end.position - start.position)) < 1e-6


# --- lockstep and paced ----------------------------------------------------------------------
def test_lockstep_write_advances_exactly_one_control_period():
    """In lockstep each write steps physics control_period / timestep times; read never does."""
    system = make_system(timestep=0.0005, control_period=0.002)
    system.configure()
    system.activate()
    assert system.data is not None
    for k in range(1, 51):
        system.read()
        system.read()
        system.write(command(k, np.zeros(len(JOINTS))))
        assert system.now() == pytest.approx(k * 0.002, abs=1e-12)
        assert system.read().stamp == system.now()
    # Independent count: MuJoCo's own step counter (4 physics steps per tick).
    assert system.data.time / system.model.opt.timestep == pytest.approx(200, abs=1e-9)


def _lockstep_run(robot: RobotModel, ticks: int = 500) -> tuple[np.ndarray, np.ndarray]:
    system = make_system(with_objects=True)
    system.configure()
    system.activate()
    phase = np.linspace(0.0, 2.0, len(JOINTS))
    for k in range(ticks):
        sample = system.read()
        tau = gravity_in_hardware_order(robot, sample.position)
        tau += 3.0 * np.sin(2 * np.pi * 1.5 * sample.stamp + phase)
        system.write(command(k, tau, stamp=sample.stamp))
    assert system.data is not None
    return system.data.qpos.copy(), system.data.qvel.copy()


def test_lockstep_runs_are_bit_for_bit_repeatable(robot):
    """Two lockstep runs with the same command sequence end in identical qpos and qvel."""
    first = _lockstep_run(robot)
    second = _lockstep_run(robot)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert np.abs(first[1]).max() > 1e-3  # the sinusoid really moved the arm


def test_paced_mode_follows_wall_time():
    """In paced mode sim time follows wall time: over ~0.1 s of reads (every ~1 ms, as a
    controller reads) sim time advances by the wall time since activation, within 30 ms;
    read() does the stepping, write() only holds the command."""
    system = make_system(mode=PACED)
    system.configure()
    system.activate()
    activated = time.monotonic()
    stamps = []
    while time.monotonic() - activated < 0.1:
        time.sleep(0.001)
        stamps.append(system.read().stamp)
    sample = system.read()
    elapsed = time.monotonic() - activated
    assert sample.stamp == pytest.approx(elapsed, abs=0.03)
    assert sample.stamp >= 0.07
    assert all(b >= a for a, b in itertools.pairwise(stamps))  # monotonic
    system.write(command(1, np.zeros(len(JOINTS))))
    assert system.now() == sample.stamp  # writing holds the command, it does not step
    time.sleep(0.005)
    assert system.now() == sample.stamp  # nothing steps between reads ...
    assert system.read().stamp > sample.stamp  # ... the next read does


def test_gravity_compensation_holds_the_home_pose(robot):
    """τ = g(q) from the Pinocchio model holds the arm still at home: |Δq| < 1e-6 rad."""
    system = make_system()
    system.configure()
    system.activate()
    start = system.read().position
    for k in range(500):
        sample = system.read()
        system.write(command(k, gravity_in_hardware_order(robot, sample.position)))
    end = system.read()
    assert end.stamp == pytest.approx(0.5)
    assert np.max(np.abs(end.position - start)) < 1e-6
    # Without compensation the arm falls: the check above is not vacuous.
    fall = make_system()
    fall.configure()
    fall.activate()
    for k in range(500):
        fall.write(command(k, np.zeros(len(JOINTS))))
    assert np.max(np.abs(fall.read().position - start)) > 1e-2


def test_invalid_mujoco_configs_are_rejected():
    """Unknown mode, non-positive timestep and a period that is not a whole number of
    timesteps are ValueErrors; so is an interface configured for an unknown joint."""
    with pytest.raises(ValueError, match="realtime"):
        MujocoConfig(mode="realtime")
    with pytest.raises(ValueError, match="positive"):
        MujocoConfig(timestep=0.0)
    with pytest.raises(ValueError, match="whole multiple"):
        MujocoConfig(timestep=0.001, control_period=0.0015)
    with pytest.raises(ValueError, match="elbow_ghost"):
        make_system(command_interfaces={"elbow_ghost": "position"})


def test_the_configured_tcp_frame_gets_its_site_at_pinocchios_tcp_pose(robot):
    """Built by the plugin constructor from controllers.yaml, the backend's scene has a site
    named after the configured tcp_frame (a frame fusing removes), at the pose Pinocchio gives
    that frame at the home configuration; the URDF's folder is passed on (for its meshes)."""
    config = lockstep_config()
    system = MujocoSystem.from_config(bundled_description(), config)
    assert system.config.tcp_frame == config.tcp_frame
    assert system.config.urdf_directory is not None
    system.configure()
    assert system.model is not None and system.data is not None
    site = system.data.site(config.tcp_frame)
    q = robot.neutral()
    for name, value in home_by_name(config).items():
        q[robot.q_index(name)] = value
    pose = robot.frame_pose(q, config.tcp_frame)
    np.testing.assert_allclose(site.xpos, pose[:3, 3], atol=1e-9)
    np.testing.assert_allclose(site.xmat.reshape(3, 3), pose[:3, :3], atol=1e-9)
