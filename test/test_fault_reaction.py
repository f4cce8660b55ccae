"""The control loop's guard, watchdog and fault reaction on the real stack (MuJoCo lockstep,
Pinocchio, joint impedance, limiter), with sensor faults injected around the MuJoCo backend
(:class:`InjectingSystem`): the plant keeps running on what the loop writes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import hypothesis.strategies as st
import numpy as np
import pytest
from helpers import bundled_description, lockstep_config
from hypothesis import given, settings

from ct_controllers.config import ConfigError, load_config
from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.runtime.control_loop import FAILED, LoopSnapshot
from ct_controllers.runtime.stack import Stack, build_stack
from ct_controllers.sim.fault_injection import FAULTS, InjectingSystem

CONFIG = lockstep_config()
PERIOD = CONFIG.period
STATE_TIMEOUT = CONFIG.effective_state_timeout  # 3 periods
ARM = CONFIG.arm_joints
TARGET = (0.5, 0.6, 0.2, -1.3, 0.2, 1.0, 0.3)


class RecordingImpedance(JointImpedanceController):
    """Joint impedance that records every state it is given (to show what reaches it)."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.seen: list[JointState] = []

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        self.seen.append(state)
        return super().compute(state, reference, dt)


def new_stack(config=CONFIG) -> Stack:  # type: ignore[no-untyped-def]
    stack = build_stack(config, bundled_description(), wrap_hardware=InjectingSystem)
    current = stack.controller
    assert isinstance(current, JointImpedanceController)
    recorder = RecordingImpedance(current.model, current.stiffness, current.damping)
    stack.loop.controller = recorder
    stack.loop.snapshot_decimation = 1
    stack.bring_up()
    return stack


@pytest.fixture
def stack() -> Iterator[Stack]:
    stack = new_stack()
    try:
        yield stack
    finally:
        stack.shut_down()


def injector(stack: Stack) -> InjectingSystem:
    assert isinstance(stack.hardware, InjectingSystem)
    return stack.hardware


def latest(stack: Stack) -> LoopSnapshot:
    snapshot = stack.loop.snapshot()
    assert snapshot is not None
    return snapshot


def written(stack: Stack) -> np.ndarray:
    """What the MuJoCo actuators were last asked for (hardware order)."""
    report = injector(stack).actuation_report()
    assert report is not None
    return report.requested


def test_a_stalled_sensor_latches_a_fault_within_state_timeout_and_damps_to_rest(stack):
    """A frozen state during a motion: the loop writes the previous command (zero-order hold)
    for at most state_timeout, then latches a watchdog fault, ends the motion FAILED and writes
    the damp reaction; the first safe command comes within state_timeout + one period of the
    last fresh sample, and the written efforts stay within the URDF limits."""
    loop = stack.loop
    motion = loop.request_motion(ARM, TARGET, 2.0)
    loop.run_ticks(500)
    seen_before = len(loop.controller.seen)
    injector(stack).inject("stall")
    t_inject = injector(stack).now()
    ticks = 0
    while loop.fault is None:
        loop.run_ticks(1)
        ticks += 1
        # The first frozen sample is still a fresh one; then state_timeout, then one tick.
        assert ticks <= round(STATE_TIMEOUT / PERIOD) + 2
    assert "no fresh state" in loop.fault
    assert loop.motion_status(motion).state == FAILED
    record = loop.fault_record
    assert record is not None and record.first_safe_command is not None
    assert record.reaction_time is not None
    assert record.reaction_time <= STATE_TIMEOUT + PERIOD + 1e-9
    assert record.first_safe_command - t_inject <= STATE_TIMEOUT + PERIOD + 1e-9
    # The controller saw only the samples from before the stall (the first frozen one is the
    # last fresh one).
    assert len(loop.controller.seen) <= seen_before + 1
    limits = stack.model.limits.effort[stack.model.indices(stack.hardware.joint_names)]
    for _ in range(300):
        loop.run_ticks(1)
        assert np.all(np.abs(written(stack)) <= limits + 1e-12)
    assert loop.fault is not None  # latched


def test_the_damp_reaction_brings_a_moving_arm_to_rest_with_bounded_deceleration():
    """A fault during a fast motion (the sensor stays healthy: a controller exception) starts a
    stop from the measured velocity: the arm comes to rest (|v| < 0.01 rad/s) and its measured
    deceleration stays near the reference bound (3 rad/s²), unlike an abrupt hold (the stop
    profile lasts ~0.4 s; pure damping then removes the rest within 1.2 s)."""
    stack = new_stack()
    try:
        loop = stack.loop
        loop.request_motion(ARM, TARGET, 1.0)
        loop.run_ticks(400)
        v0 = latest(stack).velocity.copy()
        assert np.max(np.abs(v0)) > 0.3

        def broken(state: JointState, reference: JointReference, dt: float) -> FloatArray:
            raise RuntimeError("controller bug")

        loop.controller.compute = broken  # type: ignore[method-assign]
        velocities = []
        for _ in range(1200):
            loop.run_ticks(1)
            velocities.append(latest(stack).velocity.copy())
        assert loop.fault is not None and "controller bug" in loop.fault
        assert loop.fault_record is not None and loop.fault_record.reaction == "damp"
        arm = stack.model.indices(ARM)
        deceleration = np.abs(np.diff(np.array(velocities)[:, arm], axis=0)) / PERIOD
        assert np.max(deceleration) < 3.0 * 2.0  # damping tracks the 3 rad/s² stop profile
        assert np.max(np.abs(velocities[-1][arm])) < 0.01
    finally:
        stack.shut_down()


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "stall"])
def test_bad_samples_never_reach_the_controller_and_end_in_the_fault_reaction(stack, fault):
    """Every corrupted sample (NaN, inf, stale, future, unknown joint, read error) is rejected
    and counted, never handed to the controller; after state_timeout without a good one the
    fault is latched and the reaction written."""
    loop = stack.loop
    loop.run_ticks(50)
    seen = len(loop.controller.seen)
    injector(stack).inject(fault)
    for _ in range(round(STATE_TIMEOUT / PERIOD) + 2):
        loop.run_ticks(1)
    assert len(loop.controller.seen) == seen
    for state in loop.controller.seen:
        assert np.all(np.isfinite(state.q)) and np.all(np.isfinite(state.v))
    assert loop.fault is not None and "no fresh state" in loop.fault
    snapshot = latest(stack)
    assert not snapshot.state_fresh
    assert sum(snapshot.guard_rejections.values()) >= round(STATE_TIMEOUT / PERIOD)
    diagnostics = loop.diagnostics()
    assert diagnostics["fault"] == loop.fault
    assert diagnostics["watchdog.state_expiries"] == 1


def test_reset_is_refused_without_fresh_data_and_accepted_with_it(stack):
    """reset_fault() while the sensor is still stalled leaves the fault latched and says why;
    once fresh data flows again, the reset clears it and the arm holds where it was measured."""
    loop = stack.loop
    loop.run_ticks(20)
    injector(stack).inject("stall")
    loop.run_ticks(10)
    assert loop.fault is not None
    loop.reset_fault()
    loop.run_ticks(1)
    assert loop.fault is not None
    assert "fresh" in loop.reset_refused
    injector(stack).inject(None)
    loop.run_ticks(2)
    loop.reset_fault()
    loop.run_ticks(1)
    assert loop.fault is None and loop.reset_refused == ""
    at_reset = latest(stack).position.copy()
    loop.run_ticks(300)
    assert np.max(np.abs(latest(stack).position - at_reset)) < 2e-3


def test_a_fault_the_backend_reports_is_latched():
    """A backend that reports a fault of its own (drive FAULT, lost heartbeat) has it latched by
    the loop at the next tick, with the safe reaction written."""

    class Reporting(InjectingSystem):
        problem: str | None = None

        def fault(self) -> str | None:
            return self.problem

    stack = build_stack(CONFIG, bundled_description(), wrap_hardware=Reporting)
    stack.bring_up()
    try:
        stack.loop.run_ticks(10)
        assert isinstance(stack.hardware, Reporting)
        stack.hardware.problem = "drive joint3: FAULT (statusword 0x0008)"
        stack.loop.run_ticks(1)
        assert stack.loop.fault == "drive joint3: FAULT (statusword 0x0008)"
        assert stack.loop.fault_record is not None
        assert stack.loop.fault_record.first_safe_command is not None
    finally:
        stack.shut_down()


def test_a_drive_reaction_the_backend_lacks_is_refused_at_configure_time():
    """fault_reaction quick_stop with the MuJoCo backend fails in build_stack, naming the
    parameter and what the backend offers."""
    config = load_config(
        overrides={"mujoco.mode": "lockstep", "watchdog.fault_reaction": "quick_stop"}
    )
    with pytest.raises(ConfigError, match=r"watchdog.fault_reaction.*offers: damp, hold"):
        build_stack(config, bundled_description())


@settings(max_examples=12, deadline=None)
@given(
    plan=st.lists(
        st.tuples(st.sampled_from([None, *FAULTS]), st.integers(min_value=1, max_value=8)),
        min_size=1,
        max_size=6,
    )
)
def test_property_no_fault_sequence_writes_outside_limits_or_feeds_bad_state(plan):
    """Whatever sequence of sensor faults (and recoveries) arrives during a motion, every
    written command is finite and within the URDF effort limits, every state the controller
    gets is finite, and the loop is either healthy or latched with the reaction written."""
    stack = new_stack()
    try:
        loop = stack.loop
        loop.request_motion(ARM, TARGET, 1.0)
        loop.run_ticks(100)
        limits = stack.model.limits.effort[stack.model.indices(stack.hardware.joint_names)]
        for fault, ticks in plan:
            injector(stack).inject(fault)
            for _ in range(ticks):
                loop.run_ticks(1)
                values = written(stack)
                assert np.all(np.isfinite(values))
                assert np.all(np.abs(values) <= limits + 1e-12)
        for state in loop.controller.seen:
            assert np.all(np.isfinite(state.q)) and np.all(np.isfinite(state.v))
        if loop.fault is not None:
            assert loop.fault_record is not None
            assert loop.fault_record.first_safe_command is not None
    finally:
        stack.shut_down()


class SkewingSystem(InjectingSystem):
    """A backend whose world goes on while the control loop is not looking: ``skip(dt)``
    advances its clock (and the stamps of what it measures) by ``dt`` [s] at once, as a real
    robot's time does while the loop is stalled."""

    skew = 0.0

    def skip(self, dt: float) -> None:
        self.skew += dt

    def now(self) -> float:
        return super().now() + self.skew

    def _read(self):  # type: ignore[no-untyped-def]
        sample = super()._read()
        return sample._replace(stamp=sample.stamp + self.skew)

    def _write(self, command, values):  # type: ignore[no-untyped-def]
        self.inner.write(command._replace(stamp=command.stamp - self.skew))  # the inner clock


def test_a_stalled_loop_latches_the_command_deadline():
    """When the loop itself was away longer than command_timeout (the plant ran on a stale
    command meanwhile), its next tick latches a 'no fresh command' fault and writes the
    reaction at once, although the state is fresh."""
    stack = build_stack(CONFIG, bundled_description(), wrap_hardware=SkewingSystem)
    stack.bring_up()
    try:
        loop = stack.loop
        loop.run_ticks(20)
        assert loop.fault is None
        assert isinstance(stack.hardware, SkewingSystem)
        stack.hardware.skip(CONFIG.effective_command_timeout + 0.002)
        loop.run_ticks(1)
        assert loop.fault is not None and "no fresh command" in loop.fault
        record = loop.fault_record
        assert record is not None and record.first_safe_command is not None
        assert record.first_safe_command == record.detected  # the same tick
    finally:
        stack.shut_down()


def test_reset_and_wait_reports_the_outcome_from_another_thread():
    """With the loop in its own thread, reset_fault_and_wait() returns why a reset was refused
    (no fresh data) and None once the fault is cleared; it never claims a reset it did not
    see processed."""
    stack = new_stack()
    try:
        loop = stack.loop
        assert loop.reset_fault_and_wait(0.5) is None  # nothing latched: nothing to refuse
        injector(stack).inject("stall")
        loop.start()
        deadline = time.monotonic() + 5.0
        while loop.fault is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert loop.fault is not None
        refused = loop.reset_fault_and_wait(2.0)
        assert refused is not None and "fresh" in refused
        injector(stack).inject(None)
        time.sleep(0.05)
        assert loop.reset_fault_and_wait(2.0) is None
        assert loop.fault is None
    finally:
        stack.shut_down()
