"""The drives' effort limit, a backend capability (issue 15, item 3: a position-controlled gripper
grips with a force it can enforce): ``SystemInterface.effort_limit_range`` /
``set_effort_limit``, set by the control loop from a controller's ``ControlOutput.effort_limit``
on position-interface joints — MuJoCo (the actuator's force range at run time), CANopen (max
torque 6072h, sent in RPDO2 to the simulated drives on a virtual bus) — and absent on the
ros2_control bridge (its forward command controller has no such interface)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from backends import Limiting
from helpers import bundled_description, home_by_name

from ct_controllers.hardware import cia402
from ct_controllers.hardware.interface import EffortLimitError, JointCommand
from ct_controllers.hardware.mujoco_system import MujocoConfig, MujocoSystem
from ct_controllers.runtime.control_loop import RUNNING
from ct_controllers.sim.rigs import MODES, Rig, make_rig

FINGERS = ("left_finger_joint", "right_finger_joint")
JOINTS = bundled_description().hardware.joint_names


def test_mujoco_bounds_an_actuator_force_by_the_limit_set_at_run_time() -> None:
    """MuJoCo: a position finger servo asked for 80 N (kp 4000 N/m × 2 cm) pushes with the limit
    set (5 N), and with the URDF limit (40 N) again once the limit is cleared (None); a motor
    (joint4 on the effort interface) is bounded the same way. The range offered is (0, URDF
    limit); a value outside it or an unknown joint is refused, nothing changed."""
    interfaces = {"left_finger_joint": "position"}
    system = MujocoSystem(
        bundled_description().urdf,
        JOINTS,
        MujocoConfig(
            initial_positions=home_by_name(), with_objects=False, command_interfaces=interfaces
        ),
    )
    system.configure()
    system.activate()
    finger, joint4 = JOINTS.index("left_finger_joint"), JOINTS.index("joint4")
    kinds = tuple(interfaces.get(n, "effort") for n in JOINTS)
    assert system.effort_limit_range("left_finger_joint") == (0.0, 40.0)
    assert system.effort_limit_range("joint4") == (0.0, 110.0)
    for bad in (("left_finger_joint", 41.0), ("left_finger_joint", -1.0), ("ghost", 1.0)):
        with pytest.raises(EffortLimitError):
            system.set_effort_limit(*bad)
    values = np.zeros(len(JOINTS))
    values[finger] = 0.04  # 2 cm ahead of the finger: 80 N asked
    values[joint4] = 50.0  # [N·m]

    def forces(sequence: int) -> tuple[float, float]:
        start = system.read()
        values[finger] = 0.04 if start.position[finger] < 0.03 else 0.0  # stay 1 cm+ away
        system.write(JointCommand(start.stamp, sequence, JOINTS, kinds, values))
        report = system.actuation_report()
        return float(report.actuator_force[finger]), float(report.actuator_force[joint4])

    system.set_effort_limit("left_finger_joint", 5.0)
    system.set_effort_limit("joint4", 10.0)
    assert forces(1) == pytest.approx((5.0, 10.0))
    system.set_effort_limit("left_finger_joint", None)
    system.set_effort_limit("joint4", None)
    assert forces(2) == pytest.approx((40.0, 50.0))


@pytest.fixture(scope="module")
def canopen_rig() -> Iterator[Rig]:
    """CANopen in cyclic synchronous position mode, a 5 cm object between the fingers."""
    rig = make_rig("canopen", object_width=0.05, **MODES[("canopen", "position")])
    try:
        yield rig
    finally:
        rig.close()


def move_fingers(rig: Rig, opening: float, settle: float) -> None:
    """Both fingers to ``opening`` [m] through the loop, then ``settle`` [s] more."""
    loop = rig.stack.loop
    motion = loop.request_motion(FINGERS, [opening, opening])
    for _ in range(round(5.0 / rig.config.period)):
        loop.run_ticks(1)
        status = loop.motion_status(motion)
        if status is not None and status.state != RUNNING:
            break
    loop.run_ticks(round(settle / rig.config.period))
    assert loop.fault is None, loop.fault


@pytest.mark.realtime
def test_canopen_max_torque_bounds_the_grip_of_position_fingers(canopen_rig: Rig) -> None:
    """CANopen, fingers in CSP: a 10 N limit reaches each finger drive's max torque 6072h
    (250 ‰ of its 40 N rated force, read back from the simulated drive's own dictionary); the
    fingers, opened around a 5 cm object and sent to close to 5 mm (far inside it), press it with
    10 N — the object's contact force within 0.3 N, the drives' reported torque −10 N within one
    per-mille step — and stop 0.5 mm inside it (10 N / 2e4 N/m). Cleared (None, 6072h back to
    1000 ‰) they press with the rated 40 N."""
    rig, hardware = canopen_rig, canopen_rig.stack.hardware
    assert hardware.effort_limit_range("left_finger_joint") == (0.04, 40.0)
    move_fingers(rig, 0.04, 0.3)  # open around the object
    for name in FINGERS:
        hardware.set_effort_limit(name, 10.0)
    drives = {d.joint: d for d in rig.plant.drives}
    move_fingers(rig, 0.005, 1.0)
    for name in FINGERS:  # in RPDO2 with every SYNC since
        assert drives[name].node.sdo[cia402.MAX_TORQUE].raw == 250
    contact = rig.contact_forces()
    snapshot = rig.stack.loop.snapshot()
    assert snapshot is not None
    measured = snapshot.measured_effort[rig.stack.model.indices(FINGERS)]
    positions = rig.true_positions()
    for name, effort in zip(FINGERS, measured, strict=True):
        assert contact[name] == pytest.approx(10.0, abs=0.3), contact
        assert effort == pytest.approx(-10.0, abs=0.041), measured
        assert positions[name] == pytest.approx(0.0245, abs=2e-4), positions
    for name in FINGERS:
        hardware.set_effort_limit(name, None)
    rig.stack.loop.run_ticks(round(0.5 / rig.config.period))
    for name in FINGERS:  # raised with the next write's targets
        assert drives[name].node.sdo[cia402.MAX_TORQUE].raw == 1000
    contact = rig.contact_forces()
    for name in FINGERS:
        assert contact[name] == pytest.approx(40.0, abs=0.5), contact
    move_fingers(rig, 0.02, 0.2)


def test_the_loop_sets_a_controllers_effort_limits_on_position_joints_when_they_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MuJoCo, arm on effort and fingers on position: a controller asking 7 N on every joint
    for 50 ticks makes the loop call the backend twice (once per finger: position joints only,
    only on a change) and the finger actuators' force range becomes ±7 N; asking NaN on one
    finger restores its default (±40 N), one call; None (the default everywhere) one more; a
    limit the backend cannot set (100 N > 40 N) latches a fault naming the joint."""
    rig = make_rig(
        "mujoco", **{"mujoco.command_interfaces": ["effort"] * 7 + ["position", "position"]}
    )
    try:
        inner = rig.stack.hardware.inner  # type: ignore[attr-defined]
        calls: list[tuple[str, float | None]] = []
        original = inner.set_effort_limit

        def spy(joint: str, limit: float | None) -> None:
            calls.append((joint, limit))
            original(joint, limit)

        monkeypatch.setattr(inner, "set_effort_limit", spy)
        loop, model = rig.stack.loop, rig.stack.model
        controller = Limiting(rig.stack.controller)
        loop.switch_controller(controller)

        def force_range(name: str) -> float:
            return float(inner.model.actuator_forcerange[inner.model.actuator(name).id, 1])

        controller.limit = np.full(model.nv, 7.0)
        loop.run_ticks(50)
        assert calls == [(n, 7.0) for n in FINGERS]
        assert [force_range(n) for n in FINGERS] == [7.0, 7.0]
        assert force_range("joint4") == 110.0  # effort joints: untouched
        calls.clear()
        limit = np.full(model.nv, 7.0)
        limit[model.v_index("left_finger_joint")] = np.nan
        controller.limit = limit
        loop.run_ticks(20)
        assert calls == [("left_finger_joint", None)]
        assert [force_range(n) for n in FINGERS] == [40.0, 7.0]
        calls.clear()
        controller.limit = None
        loop.run_ticks(20)
        assert calls == [("right_finger_joint", None)]
        assert [force_range(n) for n in FINGERS] == [40.0, 40.0]
        assert loop.fault is None
        controller.limit = np.full(model.nv, 100.0)
        loop.run_ticks(5)
        assert loop.fault is not None
        assert "effort limit" in loop.fault and "left_finger_joint" in loop.fault, loop.fault
    finally:
        rig.close()
