"""The simulated CiA 402 drives' own parts: the motor model's fast path (ABA on a model with the
rotor inertia as armature) against the M-solve it replaces, the drives' PDO packing against
canopen's own PDO variables, and the drives in a process of their own
(:class:`~ct_controllers.sim.drives_process.DrivesProcess`) serving a whole stack over the
cross-process virtual CAN link, injections and checks included."""

from __future__ import annotations

import os

import canopen
import numpy as np
import pinocchio as pin
import pytest
from helpers import continuous_wrist, new_robot_model

from ct_controllers.bench.backends import realtime_thread
from ct_controllers.bench.robots import example_robot_path
from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.object_dictionary import cia402_object_dictionary
from ct_controllers.hardware.cia402 import DriveState
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.control_loop import SUCCEEDED
from ct_controllers.sim.drives import (
    FRICTION,
    MECHANICAL_TIME,
    ROTOR_INERTIA,
    ROTOR_MASS,
    SIZE_RATIO,
    RotorDynamics,
    _PdoCodec,
    drive_friction,
    motor_step,
    rotor_inertia,
)
from ct_controllers.sim.drives_process import DrivesProcess, DrivesProcessError
from ct_controllers.sim.object_contact import ObjectBetweenFingers
from ct_controllers.sim.rigs import make_rig

FINGERS = ["left_finger_joint", "right_finger_joint"]


def test_the_aba_step_is_the_mass_matrix_step() -> None:
    """Over 20 random states, efforts, finger servos and an object between the fingers, a 10 ms
    motor step with RotorDynamics (ABA, rotor inertia as armature) ends within 1e-9 of the step
    that forms M(q) + diag(rotor) and solves with it — also with braked joints (one or two) and
    a joint on a quick-stop ramp, where the ABA step takes the brakes' torques through M⁻¹."""
    model = new_robot_model()
    rotor = rotor_inertia(model)
    dynamics = RotorDynamics(model, rotor)
    contact = ObjectBetweenFingers.for_model(model, FINGERS, 0.03)
    rng = np.random.default_rng(7)
    lower, upper = model.limits.lower, model.limits.upper
    for trial in range(20):
        q = rng.uniform(lower, upper)
        v = rng.normal(scale=0.5, size=model.nv)
        efforts = rng.normal(scale=10.0, size=model.nv)
        locked = np.zeros(model.nv, dtype=bool)
        ramps: dict[int, float] = {}
        arm = rng.permutation(7)  # the arm's joints: the fingers are servoed below
        if trial % 4 >= 2:
            locked[arm[0]] = True
        if trial % 4 == 3:
            locked[arm[1]] = True
            ramps[int(arm[2])] = 5.0  # [rad/s²]
        finger = model.v_index(FINGERS[0])
        servos = {finger: (0.01, 4000.0, 60.0, 40.0)}
        solved = motor_step(model, q, v, rotor, efforts, locked, ramps, 0.01, servos, contact)
        fast = motor_step(
            model, q, v, rotor, efforts, locked, ramps, 0.01, servos, contact, dynamics
        )
        assert np.abs(fast[0] - solved[0]).max() < 1e-9, trial
        assert np.abs(fast[1] - solved[1]).max() < 1e-9, trial
    assert np.array_equal(model.model.armature, new_robot_model().model.armature)  # untouched


def _panda_urdf() -> str:
    return example_robot_path("panda_description/urdf/panda.urdf").read_text()


def test_a_mimic_arms_step_is_the_free_follower_model_projected() -> None:
    """On an arm with a ``<mimic>`` finger (the Panda of example-robot-data; Pinocchio's ABA and
    M⁻¹ recursion refuse it), RotorDynamics' q̈ at 10 random states equals, within 1e-9, an
    independent computation on the model with the follower as a free joint (Pinocchio without
    ``mimic``): with G the mimic map (q̇_full = G q̇), (Gᵀ M_full G + diag(rotor)) q̈ = τ −
    Gᵀ b_full(q_full, G q̇) — free, and with a braked arm joint and a finger on a ramp (those
    rows' q̈ given, the others solved)."""
    urdf = _panda_urdf()
    model = RobotModel(urdf)
    assert model.mimic, "the premise: a mimic follower"
    rotor = rotor_inertia(model)
    dynamics = RotorDynamics(model, rotor)
    assert not dynamics.articulated
    free_model = pin.buildModelFromXML(urdf)  # the follower a joint of its own
    data = free_model.createData()
    column = {n: model.v_index(n) for n in model.joint_names}
    mapping = np.zeros((free_model.nv, model.nv))
    for joint_id in range(1, free_model.njoints):
        name = str(free_model.names[joint_id])
        row = free_model.joints[joint_id].idx_v
        if name in column:
            mapping[row, column[name]] = 1.0
        else:
            follower = model.mimic[name]
            mapping[row, column[follower.master]] = follower.multiplier
    offset = np.zeros(free_model.nq)  # the followers' offsets (configuration = G q + offset)
    for name, follower in model.mimic.items():
        offset[free_model.joints[free_model.getJointId(name)].idx_q] = follower.offset
    rng = np.random.default_rng(3)
    lower, upper = model.limits.lower, model.limits.upper
    braked, finger = model.v_index("panda_joint3"), model.v_index("panda_finger_joint1")
    for trial in range(10):
        q = rng.uniform(lower, upper)
        v = rng.normal(scale=0.5, size=model.nv)
        tau = rng.normal(scale=5.0, size=model.nv)
        full_q = mapping @ q + offset
        mass = pin.crba(free_model, data, full_q)
        mass = np.triu(mass) + np.triu(mass, 1).T
        reduced = mapping.T @ mass @ mapping + np.diag(rotor)
        bias = mapping.T @ pin.rnea(free_model, data, full_q, mapping @ v, np.zeros(free_model.nv))
        expected = np.linalg.solve(reduced, tau - bias)
        got = dynamics.acceleration(q, v, tau)
        assert np.abs(got - expected).max() < 1e-9 * max(1.0, np.abs(expected).max()), trial
        prescribed = np.zeros(model.nv, dtype=bool)
        prescribed[[braked, finger]] = True
        wanted = np.zeros(model.nv)
        wanted[finger] = -2.0  # [m/s²] on a ramp
        free = ~prescribed
        expected = wanted.copy()
        expected[free] = np.linalg.solve(
            reduced[np.ix_(free, free)], (tau - bias - reduced @ wanted)[free]
        )
        got = dynamics.constrained_acceleration(q, v, tau, prescribed, wanted)
        assert np.abs(got - expected).max() < 1e-9 * max(1.0, np.abs(expected).max()), trial


def test_a_continuous_joints_step_is_the_revolute_joints_step() -> None:
    """An arm with a continuous joint (nq ≠ nv: the UR5 with wrist_3_joint continuous, its
    position a (cos θ, sin θ) pair in Pinocchio) steps like the same arm with that joint
    revolute (nq = nv): over 10 random states, the wrist angle anywhere in ±(2π − 0.2) (inside
    the revolute twin's end stops, ±2π; past ±π, where (cos θ, sin θ) wraps), a 10 ms motor
    step with RotorDynamics (ABA) ends within 1e-9 of the revolute model's, and the angle stays
    unwrapped (the step from θ beyond π ends near θ, not 2π away)."""
    text = example_robot_path("ur_description/urdf/ur5_robot.urdf").read_text()
    continuous_urdf = continuous_wrist(text)
    continuous, revolute = RobotModel(continuous_urdf), RobotModel(text)
    assert continuous.continuous_joints == ("wrist_3_joint",) and revolute.model.nq == 6
    assert continuous.model.nq == 7
    wrist = continuous.v_index("wrist_3_joint")
    rotor = rotor_inertia(continuous)
    fast = RotorDynamics(continuous, rotor)
    reference = RotorDynamics(revolute, rotor_inertia(revolute))
    rng = np.random.default_rng(5)
    free = np.zeros(6, dtype=bool)
    for trial in range(10):
        q = rng.uniform(-3.0, 3.0, size=6)
        q[wrist] = rng.uniform(0.2 - 2 * np.pi, 2 * np.pi - 0.2)
        v = rng.normal(scale=0.5, size=6)
        tau = rng.normal(scale=5.0, size=6)
        step = motor_step(continuous, q, v, rotor, tau, free, {}, 0.01, dynamics=fast)
        same = motor_step(revolute, q, v, rotor, tau, free, {}, 0.01, dynamics=reference)
        assert np.abs(step[0] - same[0]).max() < 1e-9, trial
        assert np.abs(step[1] - same[1]).max() < 1e-9, trial
        assert abs(step[0][wrist] - q[wrist]) < 0.1, trial


def test_pdo_packing_matches_canopens_own_variables() -> None:
    """For each PDO of the drives' layout, mapped as the master maps it, _PdoCodec.pack gives
    the bytes canopen's PDO variables build from the same values (extremes of each type
    included), and unpack reads them back."""
    node = canopen.LocalNode(5, cia402_object_dictionary(5))
    values = {
        cia402.CONTROLWORD: 0xFFFF,
        cia402.MODES_OF_OPERATION: -128,
        cia402.TARGET_TORQUE: -32768,
        cia402.TARGET_POSITION: -(2**31),
        cia402.MAX_TORQUE: 65535,
        cia402.STATUSWORD: 0x0627,
        cia402.MODES_DISPLAY: 10,
        cia402.TORQUE_ACTUAL: 32767,
        cia402.POSITION_ACTUAL: 2**31 - 1,
        cia402.VELOCITY_ACTUAL: -12345,
    }
    for maps, layouts in ((node.rpdo, cia402.RPDO_LAYOUT), (node.tpdo, cia402.TPDO_LAYOUT)):
        maps.read(from_od=True)
        for number, layout in enumerate(layouts, start=1):
            pdo = maps[number]
            pdo.clear()
            for index, bits in layout:
                pdo.add_variable(index, 0, bits)
            for index, _bits in layout:
                pdo[index].raw = values[index]
            codec = _PdoCodec(pdo)
            mine = {index: values[index] for index, _ in layout}
            assert bytes(codec.pack(mine)) == bytes(pdo.data), (number, layout)
            assert codec.unpack(pdo.data) == mine


@pytest.mark.realtime
def test_drives_in_a_process_of_their_own_serve_the_stack() -> None:
    """make_rig(drives_process=True): the drives run in another process (its pid is not ours),
    the stack comes up against them over the linked virtual channel, a joint motion there
    succeeds, a drive put in FAULT there faults the loop naming that drive and is reported in
    FAULT by the drives' process, and its injection answers with its onset on our clock
    (time.monotonic, before the loop's detection); the drives' own positions are within 30 mrad
    of the motion's goal (asked only now, after the fault reaction's stop: a request takes the
    loop's thread, and the command deadline runs meanwhile); an unknown request is refused
    naming it. Closing ends the process."""
    rig = make_rig("canopen", drives_process=True)
    drives = rig.plant
    try:
        # The loop ticks as its own thread would (realtime.*), as the bus threads do.
        with realtime_thread(rig.config.realtime):
            assert isinstance(drives, DrivesProcess)
            assert drives.process.pid != os.getpid()
            loop = rig.stack.loop
            home = dict(zip(rig.config.joint_names, rig.config.home_positions, strict=True))
            goal = {"joint1": home["joint1"] + 0.2, "joint4": home["joint4"] - 0.2}
            motion = loop.request_motion(list(goal), list(goal.values()), 0.5)
            for _ in range(round(3.0 / rig.config.period)):
                loop.run_ticks(1)
                status = loop.motion_status(motion)
                if status is not None and status.state == SUCCEEDED:
                    break
            loop.run_ticks(round(0.5 / rig.config.period))
            assert loop.fault is None, loop.fault
            assert loop.motion_status(motion).state == SUCCEEDED
            faults_before = len(loop.faults)
            onset = drives.enter_fault("joint5")
            for _ in range(round(1.0 / rig.config.period)):
                loop.run_ticks(1)
                if len(loop.faults) > faults_before:
                    break
            # Asked first: while no tick runs, the drives keep their last target torque, and an
            # arm held up against gravity by a constant torque drifts away (an inverted pendulum:
            # 0.85 rad once in CI, when the requests below took long on a loaded machine).
            truth = drives.positions()  # the fault reaction moved the arm a little
            assert loop.fault is not None and "joint5" in loop.fault, loop.fault
            assert drives.states()["joint5"] is DriveState.FAULT
            detected = rig.injector.inner.fault_detected_at  # type: ignore[attr-defined]
            assert detected is not None and onset < detected
            assert max(abs(truth[n] - v) for n, v in goal.items()) < 0.03, truth
            assert drives.syncs > 0 and drives.sync_timing()["count"] > 0
            with pytest.raises(DrivesProcessError, match="meteor"):
                drives.call("meteor")
    finally:
        rig.close()
    assert drives.process.poll() is not None


def test_the_drives_are_sized_for_their_joints() -> None:
    """The simulated drives' reflected rotor inertia [kg·m² | kg] and viscous friction
    [N·m·s/rad | N·s/m] fit each joint: on the bundled arm as before (no rotor beyond its arm's
    0.1 kg·m² armature, 1 kg on each finger, 0.5 everywhere: what the other tests pin); on the
    Panda and the UR5 the full drives (0.1 kg·m², 1 kg; 0.5 plus the URDF's own damping: 0.003
    on the Panda's arm, 0.3 on its finger); on a 10 cm revolute jaw (the one-jaw variant of the
    bundled arm) SIZE_RATIO × its inertia about the hinge — Ixx + m (y² + z²) of its link's
    URDF inertial, 1.69e-4 kg·m², computed here by hand — and that inertia plus the rotor over
    MECHANICAL_TIME (0.2 s), where the full drive (0.1, 0.5) had dwarfed it."""
    from test_one_jaw_gripper import JAW, one_jaw_urdf

    bundled = new_robot_model()
    fingers = [bundled.v_index(n) for n in FINGERS]
    expected = np.zeros(bundled.nv)
    expected[fingers] = ROTOR_MASS
    np.testing.assert_array_equal(rotor_inertia(bundled), expected)
    np.testing.assert_array_equal(drive_friction(bundled), FRICTION)
    panda = RobotModel(_panda_urdf())
    finger = panda.v_index("panda_finger_joint1")
    expected = np.full(panda.nv, ROTOR_INERTIA)
    expected[finger] = ROTOR_MASS
    np.testing.assert_array_equal(rotor_inertia(panda), expected)
    damping = np.full(panda.nv, 0.003)
    damping[finger] = 0.3
    np.testing.assert_allclose(drive_friction(panda), FRICTION + damping, rtol=1e-12)
    ur5 = RobotModel(example_robot_path("ur_description/urdf/ur5_robot.urdf").read_text())
    np.testing.assert_array_equal(rotor_inertia(ur5), ROTOR_INERTIA)
    np.testing.assert_array_equal(drive_friction(ur5), FRICTION)
    jaw_arm = RobotModel(one_jaw_urdf("revolute"))
    jaw = jaw_arm.v_index(JAW)
    hinge = 4.2e-5 + 0.05 * (0.006**2 + 0.05**2)  # the long finger's inertial, about x
    assert rotor_inertia(jaw_arm)[jaw] == pytest.approx(SIZE_RATIO * hinge, rel=1e-9)
    friction = (1 + SIZE_RATIO) * hinge / MECHANICAL_TIME
    assert drive_friction(jaw_arm)[jaw] == pytest.approx(friction, rel=1e-9)
    assert rotor_inertia(jaw_arm)[jaw] < 0.1 * ROTOR_INERTIA and friction < 0.1 * FRICTION
