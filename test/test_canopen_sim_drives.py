"""The simulated CiA 402 drives' own parts: the motor model's fast path (ABA on a model with the
rotor inertia as armature) against the M-solve it replaces, the drives' PDO packing against
canopen's own PDO variables, and the drives in a process of their own
(:class:`~ct_controllers.sim.drives_process.DrivesProcess`) serving a whole stack over the
cross-process virtual CAN link, injections and checks included."""

from __future__ import annotations

import os

import canopen
import numpy as np
import pytest
from helpers import new_robot_model

from ct_controllers.bench.backends import realtime_thread
from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.object_dictionary import cia402_object_dictionary
from ct_controllers.hardware.cia402 import DriveState
from ct_controllers.runtime.control_loop import SUCCEEDED
from ct_controllers.sim.drives import RotorDynamics, _PdoCodec, motor_step, rotor_inertia
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
