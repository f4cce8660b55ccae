"""ct_controllers.runtime.control_loop on the real stack (build_stack(load_config(...)): MuJoCo,
Pinocchio, joint impedance, limiter), driven tick by tick with run_ticks().

The bundled controllers.yaml runs MuJoCo paced (wall clock, for the ROS node); these tests
override ``mujoco.mode`` to lockstep so that runs are deterministic and fast."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import bundled_description, lockstep_config, new_robot_model

from ct_controllers.bench.grasp import grasp_setup, top_down_grasp
from ct_controllers.config import load_config
from ct_controllers.controllers.controller import (
    ControlOutput,
    FloatArray,
    JointReference,
    JointState,
)
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.control_loop import (
    CANCELED,
    FAILED,
    PREEMPTED,
    RUNNING,
    SUCCEEDED,
    ControlLoop,
    LoopSnapshot,
)
from ct_controllers.runtime.motion_requests import checked_motion
from ct_controllers.runtime.stack import Stack, build_stack
from ct_controllers.tasks.phases import GraspGoal, Phase

CONFIG = lockstep_config()
ARM = CONFIG.arm_joints
# Reachable arm targets [rad], arm_joints order; away from home and from the table.
TARGET_A = (0.5, 0.6, 0.2, -1.3, 0.2, 1.0, 0.3)
TARGET_B = (-0.4, 0.3, -0.2, -1.8, -0.2, 1.3, -0.3)


def new_stack() -> Stack:
    stack = build_stack(CONFIG, bundled_description())
    stack.bring_up()
    return stack


@pytest.fixture
def stack() -> Iterator[Stack]:
    stack = new_stack()
    try:
        yield stack
    finally:
        stack.shut_down()


@pytest.fixture(scope="module")
def reference_model() -> RobotModel:
    """An independent model for expected values (not the loop's or the controller's)."""
    return new_robot_model()


def model_order(stack: Stack, names, values) -> np.ndarray:
    out = np.full(stack.model.nv, np.nan)
    out[stack.model.indices(names)] = values
    return out


def home(stack: Stack) -> np.ndarray:
    return model_order(stack, CONFIG.joint_names, CONFIG.home_positions)


def latest(stack: Stack) -> LoopSnapshot:
    snapshot = stack.loop.snapshot()
    assert snapshot is not None
    return snapshot


def run_seconds(stack: Stack, seconds: float) -> list[LoopSnapshot]:
    """Run whole snapshot periods for ``seconds`` of sim time; return every snapshot."""
    loop = stack.loop
    snapshots = []
    for _ in range(round(seconds / CONFIG.period / loop.snapshot_decimation)):
        loop.run_ticks(loop.snapshot_decimation)
        snapshots.append(latest(stack))
    return snapshots


# --- holding and moving ----------------------------------------------------------------------
def test_holding_home_keeps_the_arm_still(stack):
    """With no motion requested, the arm stays within 1e-4 rad of home for 1 s."""
    start = home(stack)
    snapshots = run_seconds(stack, 1.0)
    assert snapshots[-1].stamp == pytest.approx(1.0 - 10 * CONFIG.period, abs=1e-9)
    for snapshot in snapshots:
        assert np.max(np.abs(snapshot.position - start)) < 1e-4, snapshot.tick
        np.testing.assert_array_equal(snapshot.reference_position, start)
        assert snapshot.motion is None and snapshot.fault is None


def test_motion_reaches_its_target_and_succeeds(stack):
    """A requested motion runs, reports 'running' then 'succeeded' (once, in that order), takes
    at least the requested duration (a minimum: the reference limits may stretch it) and ends
    within 1e-3 rad of the target 0.5 s after its duration."""
    names = (*ARM, "left_finger_joint")
    goal = (*TARGET_A, 0.035)
    motion_id = stack.loop.request_motion(names, goal, 1.0)
    stack.loop.run_ticks(1)
    first = latest(stack).motion
    assert first is not None and first.duration >= 1.0
    states = [s.motion.state for s in run_seconds(stack, first.duration + 0.5) if s.motion]
    assert states[0] == RUNNING
    first_success = states.index(SUCCEEDED)
    assert set(states[:first_success]) == {RUNNING}
    assert set(states[first_success:]) == {SUCCEEDED}
    final = latest(stack)
    assert final.motion is not None and final.motion.motion_id == motion_id
    assert final.motion.progress == 1.0 and final.motion.duration == first.duration
    target = model_order(stack, names, goal)
    target[stack.model.q_index("right_finger_joint")] = home(stack)[8]  # not named: held
    assert np.max(np.abs(final.position - target)) < 1e-3
    np.testing.assert_allclose(final.reference_position, target, atol=1e-12)


def test_a_checked_motion_runs_as_the_same_request_by_names(stack):
    """loop.request(checked_motion(...)) — the ROS layer's path: names mapped to model order
    once, before the loop — moves the arm to the same reference, exactly, as request_motion
    with the names."""
    by_names = new_stack()
    try:
        by_names.loop.request_motion(ARM, TARGET_A, 1.0)
        motion = checked_motion(stack.model, ARM, TARGET_A, 1.0)
        assert list(motion.indices) == list(stack.model.indices(ARM))
        stack.loop.request(motion)
        a = run_seconds(stack, 1.5)[-1]
        b = run_seconds(by_names, 1.5)[-1]
        assert a.motion is not None and a.motion.state == SUCCEEDED
        np.testing.assert_array_equal(a.reference_position, b.reference_position)
        np.testing.assert_array_equal(a.position, b.position)
    finally:
        by_names.shut_down()


def test_default_duration_respects_the_reference_limits(stack):
    """duration=0 picks the shortest duration within the reference limits (half the URDF
    velocity, 3 rad/s², 30 rad/s³): no joint's reference exceeds them, and some joint reaches
    one of them (time-optimal)."""
    loop = stack.loop
    loop.snapshot_decimation = 1
    loop.request_motion(ARM, TARGET_B)
    loop.run_ticks(1)
    motion = latest(stack).motion
    assert motion is not None and motion.duration > 0
    positions = [latest(stack).reference_position]
    for _ in range(round(motion.duration / CONFIG.period) + 1):
        loop.run_ticks(1)
        positions.append(latest(stack).reference_position)
    velocity = np.diff(positions, axis=0) / CONFIG.period
    acceleration = np.diff(velocity, axis=0) / CONFIG.period
    peak_v = np.abs(velocity).max(axis=0) / (0.5 * stack.model.limits.velocity)
    peak_a = np.abs(acceleration).max(axis=0) / 3.0  # the loop's default bound [rad/s²]
    peak_j = np.abs(np.diff(acceleration, axis=0) / CONFIG.period).max(axis=0) / 30.0
    assert np.all(peak_v <= 1 + 1e-3) and np.all(peak_a <= 1 + 1e-2)
    assert np.all(peak_j <= 1 + 5e-2)
    assert max(peak_v.max(), peak_a.max(), peak_j.max()) > 0.95  # the shortest such duration


def test_second_request_preempts_the_running_motion(stack):
    """A request while a motion runs marks that motion PREEMPTED; the new one runs to success."""
    loop = stack.loop
    first = loop.request_motion(ARM, TARGET_A, 2.0)
    run_seconds(stack, 0.3)
    assert loop.motion_status(first).state == RUNNING
    second = loop.request_motion(ARM, TARGET_B, 1.0)
    assert second != first
    run_seconds(stack, 0.05)
    preempted = loop.motion_status(first)
    assert preempted is not None and preempted.state == PREEMPTED
    assert 0.1 < preempted.progress < 0.2  # ended ~0.3 s into its 2 s
    current = latest(stack).motion
    assert current is not None and current.motion_id == second and current.state == RUNNING
    run_seconds(stack, 1.5)
    assert loop.motion_status(second).state == SUCCEEDED
    assert loop.motion_status(first).state == PREEMPTED
    target = model_order(stack, ARM, TARGET_B)
    arm = stack.model.indices(ARM)
    assert np.max(np.abs(latest(stack).position - target)[arm]) < 1e-3


def test_hold_cancels_the_motion_and_stops_with_bounded_deceleration(stack):
    """hold() marks the running motion CANCELED; the reference starts on the measured state,
    decelerates within the reference acceleration limit (3 rad/s²) to rest, and then holds
    where the stop ended, where the arm settles."""
    loop = stack.loop
    motion_id = loop.request_motion(ARM, TARGET_A, 2.0)
    run_seconds(stack, 0.8)
    loop.snapshot_decimation = 1
    loop.hold()
    loop.run_ticks(1)
    snapshot = latest(stack)
    assert snapshot.motion is not None
    assert snapshot.motion.motion_id == motion_id and snapshot.motion.state == CANCELED
    assert loop.motion_status(motion_id).state == CANCELED
    assert np.max(np.abs(snapshot.position - home(stack))) > 0.05  # it was really moving ...
    assert np.max(np.abs(snapshot.velocity)) > 0.1  # ... and still is at the hold tick
    # The stop starts on the measured position (one tick of motion away at most).
    assert np.max(np.abs(snapshot.reference_position - snapshot.position)) < 5e-3
    references = [snapshot.reference_position]
    for _ in range(1500):
        loop.run_ticks(1)
        references.append(latest(stack).reference_position)
    velocity = np.diff(references, axis=0) / CONFIG.period
    acceleration = np.diff(velocity, axis=0) / CONFIG.period
    assert np.abs(acceleration[1:]).max() <= 3.0 * 1.02
    later = latest(stack)
    np.testing.assert_array_equal(later.reference_position, references[-2])  # holding
    assert np.max(np.abs(velocity[-100:])) == 0.0
    assert later.motion is not None and later.motion.state == CANCELED
    assert np.max(np.abs(later.position - later.reference_position)) < 2e-3  # settled there


def test_hold_without_motion_holds_where_the_arm_is(stack):
    """hold() with nothing running changes no status and keeps holding the measured pose."""
    stack.loop.run_ticks(10)
    stack.loop.hold()
    run_seconds(stack, 0.1)
    snapshot = latest(stack)
    assert snapshot.motion is None
    assert np.max(np.abs(snapshot.reference_position - home(stack))) < 1e-4


# --- rejected requests -----------------------------------------------------------------------
BAD_REQUESTS = [
    ("unknown joint", (["joint1", "elbow_ghost"], [0.1, 0.2], 1.0), "elbow_ghost"),
    ("duplicate joint", (["joint2", "joint3", "joint2"], [0.1, 0.2, 0.3], 1.0), "joint2"),
    ("length mismatch", (["joint1", "joint2"], [0.1], 1.0), "2 joint names but 1"),
    ("NaN", (["joint3"], [np.nan], 1.0), "non-finite"),
    ("out of limits", (["joint1", "joint4"], [0.1, -2.5], 1.0), "joint4"),
    ("finger out of limits", (["right_finger_joint"], [0.05], 1.0), "right_finger_joint"),
    ("negative duration", (["joint1"], [0.1], -1.0), "duration"),
    ("NaN duration", (["joint1"], [0.1], np.nan), "duration"),
]


@pytest.mark.parametrize(
    ("case", "arguments", "named"), BAD_REQUESTS, ids=[c[0] for c in BAD_REQUESTS]
)
def test_bad_request_raises_value_error_and_changes_nothing(stack, case, arguments, named):
    """An invalid request raises ValueError naming the problem; the running motion and its
    reference continue exactly as in a twin run without the bad request (lockstep), and no
    motion id is used up."""
    twin = new_stack()
    try:
        ids = [s.loop.request_motion(ARM, TARGET_A, 1.0) for s in (stack, twin)]
        assert ids[0] == ids[1]
        for s in (stack, twin):
            s.loop.run_ticks(200)
        with pytest.raises(ValueError, match=named):
            stack.loop.request_motion(*arguments)
        for s in (stack, twin):
            s.loop.run_ticks(300)
        mine, theirs = latest(stack), latest(twin)
        assert mine.tick == theirs.tick
        np.testing.assert_array_equal(mine.reference_position, theirs.reference_position)
        np.testing.assert_array_equal(mine.position, theirs.position)
        assert mine.motion == theirs.motion
        assert mine.motion is not None and mine.motion.state == RUNNING
        assert stack.loop.request_motion(ARM, TARGET_B) == twin.loop.request_motion(ARM, TARGET_B)
    finally:
        twin.shut_down()


def test_bad_request_while_holding_keeps_the_hold_reference(stack):
    """A rejected request while holding leaves the hold reference exactly as it was."""
    run_seconds(stack, 0.05)
    before = latest(stack).reference_position
    with pytest.raises(ValueError, match="joint4"):
        stack.loop.request_motion(["joint4"], [3.0])
    run_seconds(stack, 0.05)
    np.testing.assert_array_equal(latest(stack).reference_position, before)
    assert latest(stack).motion is None


# --- faults ----------------------------------------------------------------------------------
class NaNImpedance(JointImpedanceController):
    """A broken controller: every output is NaN."""

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return np.full(self.model.nv, np.nan)


class RaisingImpedance(JointImpedanceController):
    """A broken controller: compute raises."""

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        raise ZeroDivisionError("gain scheduling divided by zero")


def _check_safe_hold_is_written(
    stack: Stack, reference_model: RobotModel, ticks: int, flagged: bool = True, at_home=True
):
    damping = model_order(stack, CONFIG.joint_names, CONFIG.safe_hold_damping)
    zero = np.zeros(stack.model.nv)
    names = stack.hardware.joint_names
    for _ in range(ticks):
        stack.loop.run_ticks(1)
        snapshot = latest(stack)
        q, v = snapshot.position, snapshot.velocity
        expected = reference_model.inverse_dynamics(q, zero, zero) - damping * v  # g(q) − D v
        assert np.all(np.isfinite(snapshot.commanded_effort))
        np.testing.assert_allclose(snapshot.commanded_effort, expected, rtol=0, atol=1e-9)
        if flagged:
            assert snapshot.saturated.all()  # every joint flagged (non-finite request)
        report = stack.hardware.actuation_report()
        assert report is not None and np.all(np.isfinite(report.requested))
        for name, requested in zip(names, report.requested, strict=True):
            assert requested == snapshot.commanded_effort[stack.model.q_index(name)], name
    if at_home:
        assert np.max(np.abs(latest(stack).position - home(stack))) < 1e-3


def _swap_controller(stack: Stack, kind: type[JointImpedanceController]) -> None:
    current = stack.controller
    assert isinstance(current, JointImpedanceController)
    stack.loop.controller = kind(current.model, current.stiffness, current.damping)
    stack.loop.snapshot_decimation = 1


def test_nan_controller_output_is_replaced_by_safe_hold(stack, reference_model):
    """A controller returning NaN gets the safe-hold effort g(q) − D v written instead (in the
    snapshot and at the hardware), never NaN; the arm stays put."""
    _swap_controller(stack, NaNImpedance)
    _check_safe_hold_is_written(stack, reference_model, 300)
    assert stack.loop.fault is None


def test_raising_controller_records_a_fault_and_holds(stack, reference_model):
    """A controller that raises is reported as a fault and safe hold is written."""
    _swap_controller(stack, RaisingImpedance)
    _check_safe_hold_is_written(stack, reference_model, 100, flagged=False)
    fault = latest(stack).fault
    assert fault is not None and "ZeroDivisionError" in fault


class RaisingOnceImpedance(JointImpedanceController):
    """Raises in its first compute, then behaves."""

    raised = False

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        if not self.raised:
            self.raised = True
            raise RuntimeError("transient")
        return super().compute(state, reference, dt)


def test_a_fault_is_latched_until_reset(stack, reference_model):
    """A fault during a motion ends the motion FAILED; safe hold stays on although the controller
    would work again; a motion requested meanwhile is FAILED and nothing moves; after
    reset_fault() the controller runs again and holds the position measured at the reset."""
    motion_id = stack.loop.request_motion(ARM, TARGET_A, 2.0)
    run_seconds(stack, 0.2)
    _swap_controller(stack, RaisingOnceImpedance)
    stack.loop.run_ticks(1)
    assert stack.loop.fault is not None and "transient" in stack.loop.fault
    status = stack.loop.motion_status(motion_id)
    assert status is not None and status.state == FAILED
    run_seconds(stack, 0.5)  # the arm coasts to rest under safe hold
    refused = stack.loop.request_motion(ARM, TARGET_B, 1.0)
    _check_safe_hold_is_written(stack, reference_model, 50, flagged=False, at_home=False)
    refused_status = stack.loop.motion_status(refused)
    assert refused_status is not None and refused_status.state == FAILED
    stack.loop.reset_fault()
    stack.loop.run_ticks(1)
    at_reset = latest(stack).position.copy()
    assert stack.loop.fault is None
    run_seconds(stack, 0.5)
    final = latest(stack)
    np.testing.assert_array_equal(final.reference_position, at_reset)
    assert np.max(np.abs(final.position - at_reset)) < 2e-3


# --- timing ----------------------------------------------------------------------------------
class SlowOnceImpedance(JointImpedanceController):
    """Sleeps 3 ms in its first compute, then behaves."""

    slept = False

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        if not self.slept:
            self.slept = True
            time.sleep(0.003)
        return super().compute(state, reference, dt)


def test_timing_recorder_counts_an_injected_overrun(stack):
    """In a paced 1 kHz loop, one 3 ms compute is counted as an overrun and shows in the
    compute-time maximum."""
    current = stack.controller
    assert isinstance(current, JointImpedanceController)
    controller = SlowOnceImpedance(current.model, current.stiffness, current.damping)
    loop = ControlLoop(
        stack.hardware,
        stack.model,
        controller,
        CommandLimiter(
            stack.model.limits.effort,
            model_order(stack, CONFIG.joint_names, CONFIG.effort_rate_limit),
        ),
        period=CONFIG.period,
        paced=True,
    )
    loop.run_ticks(50)
    summary = loop.timing_summary()
    assert controller.slept
    assert summary.ticks == 50
    assert loop.timing.overruns >= 1
    assert summary.overruns == loop.timing.overruns
    assert summary.compute.max >= 0.003
    assert summary.period.count == 49


def test_loop_rejects_hardware_missing_model_joints(stack):
    """A loop whose hardware does not drive every model joint is refused, naming the joint."""
    partial = MujocoSystem(bundled_description().urdf, stack.hardware.joint_names[:-1])
    with pytest.raises(ValueError, match="right_finger_joint"):
        ControlLoop(partial, stack.model, stack.controller, stack.loop.limiter)


def test_switch_controller_takes_effect_at_the_next_tick_and_keeps_the_reference(stack):
    """switch_controller() installs the new controller at the next tick boundary; the running
    reference is kept and the arm does not jump."""
    from ct_controllers.controllers.computed_torque import ComputedTorqueController

    loop = stack.loop
    loop.snapshot_decimation = 1
    run_seconds(stack, 0.1)
    before = latest(stack)
    model = new_robot_model()
    replacement = ComputedTorqueController(model, np.full(model.nv, 400.0), np.full(model.nv, 40.0))
    loop.switch_controller(replacement)
    assert loop.controller is not replacement  # staged, not yet running
    loop.run_ticks(1)
    assert loop.controller is replacement
    run_seconds(stack, 0.5)
    after = latest(stack)
    np.testing.assert_array_equal(after.reference_position, before.reference_position)
    assert np.max(np.abs(after.position - before.position)) < 1e-3


def test_a_fault_latched_before_the_first_reference_still_ticks_safely(reference_model):
    """A fault latched on the very first tick (before any reference exists: e.g. a watchdog
    deadline passed between bring-up and the first tick) must not stop the loop: it writes the
    fault reaction, finite, from the measured state."""
    stack = new_stack()
    try:
        stack.loop.snapshot_decimation = 1
        stack.loop._latch_fault("injected before the first tick", None, 0.0, 0.0)
        stack.loop.run_ticks(20)
        snapshot = latest(stack)
        assert snapshot.fault is not None and "injected" in snapshot.fault
        assert np.all(np.isfinite(snapshot.commanded_effort))
    finally:
        stack.shut_down()


class PreparedImpedance(JointImpedanceController):
    """Records each prepare() call: the state and period it got, and on which thread."""

    def __init__(self, *args, fail: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fail = fail
        self.prepared: list[tuple[JointState, float, int]] = []

    def prepare(self, state: JointState, dt: float) -> None:
        self.prepared.append((state, dt, threading.get_ident()))
        if self.fail:
            raise RuntimeError("warm-up failed")


def test_switch_controller_prepares_the_controller_at_the_last_measured_state(stack):
    """switch_controller() calls the new controller's prepare() once, on the switching thread,
    with the loop's last measured state and its period, before the controller runs; with no
    state measured yet there is nothing to prepare at, and it is not called."""
    current = stack.controller
    assert isinstance(current, JointImpedanceController)
    unmeasured = new_stack()
    try:
        early = PreparedImpedance(current.model, current.stiffness, current.damping)
        unmeasured.loop.switch_controller(early)
        assert early.prepared == []
    finally:
        unmeasured.shut_down()
    run_seconds(stack, 0.05)
    measured = stack.loop._last_state
    assert measured is not None
    replacement = PreparedImpedance(current.model, current.stiffness, current.damping)
    switcher = threading.Thread(target=stack.loop.switch_controller, args=(replacement,))
    switcher.start()
    switcher.join()
    assert len(replacement.prepared) == 1
    state, dt, thread = replacement.prepared[0]
    assert state is measured and dt == CONFIG.period
    assert thread == switcher.ident != threading.get_ident()
    stack.loop.run_ticks(1)
    assert stack.loop.controller is replacement
    assert len(replacement.prepared) == 1


def test_a_failing_preparation_does_not_block_the_switch(stack, caplog):
    """A prepare() that raises is logged as a warning naming the controller and the error; the
    controller is still installed and runs."""
    current = stack.controller
    assert isinstance(current, JointImpedanceController)
    run_seconds(stack, 0.05)
    replacement = PreparedImpedance(current.model, current.stiffness, current.damping, fail=True)
    with caplog.at_level("WARNING", logger="ct_controllers"):
        stack.loop.switch_controller(replacement)
    assert "PreparedImpedance" in caplog.text and "warm-up failed" in caplog.text
    run_seconds(stack, 0.1)
    assert stack.loop.controller is replacement
    assert stack.loop.fault is None


# --- command interfaces: effort, position, mixed ----------------------------------------------
MIXED = ("effort",) * len(CONFIG.arm_joints) + ("position",) * len(CONFIG.gripper_joints)


def interface_stack(interfaces: tuple[str, ...]) -> Stack:
    """A lockstep MuJoCo stack whose joints use ``interfaces`` (joint_names order)."""
    config = load_config(
        overrides={"mujoco.mode": "lockstep", "mujoco.command_interfaces": list(interfaces)}
    )
    stack = build_stack(config, bundled_description())
    stack.bring_up()
    return stack


def hardware_values(stack: Stack) -> dict[str, float]:
    """Joint → the value the backend last took in (MuJoCo's actuator request)."""
    report = stack.hardware.actuation_report()
    assert report is not None
    return dict(zip(report.joint_names, report.requested.tolist(), strict=True))


def test_mixed_interfaces_send_each_joint_its_own_kind_of_value():
    """Arm on effort, fingers on position: each tick the fingers' servos are sent the reference
    position q* the loop tracked and the arm's motors the limited effort; a motion of joint1 to
    0.3 rad and of both fingers to 0.035 m reaches both goals (the fingers as position targets,
    the arm by torque)."""
    stack = interface_stack(MIXED)
    try:
        assert stack.hardware.command_interfaces == MIXED
        loop, model = stack.loop, stack.model
        loop.snapshot_decimation = 1
        names = ["joint1", *CONFIG.gripper_joints]
        loop.request_motion(names, [0.3, 0.035, 0.035], 1.0)
        for _ in range(1500):
            loop.run_ticks(1)
            snapshot = latest(stack)
            written = hardware_values(stack)
            for name in CONFIG.gripper_joints:
                index = model.q_index(name)
                assert written[name] == snapshot.reference_position[index], name
            for name in CONFIG.arm_joints:
                assert written[name] == snapshot.commanded_effort[model.v_index(name)], name
        final = latest(stack)
        assert final.motion is not None and final.motion.state == SUCCEEDED
        goal = model_order(stack, names, [0.3, 0.035, 0.035])
        reached = np.isfinite(goal)
        assert np.max(np.abs(final.position - goal)[reached]) < 1e-3
    finally:
        stack.shut_down()


class JumpingReference(JointImpedanceController):
    """Tracks a reference that jumps, from its first tick on, 0.5 rad ahead on joint1 and far
    past the upper limit on joint7."""

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        q = reference.q.copy()
        q[self.model.q_index("joint1")] += 0.5
        q[self.model.q_index("joint7")] += 10.0
        jumped = JointReference(q=q, v=reference.v, a=reference.a)
        return ControlOutput(self.compute(state, jumped, dt), jumped)


def test_position_targets_are_step_limited_and_kept_within_the_joint_limits():
    """On the position interface a reference that jumps is followed at the URDF velocity limit:
    each tick's target moves by at most velocity × period, the step limit is reported as a
    saturation while it acts, and the targets end at the reference within the joint limits
    (joint7's at its upper limit, not 10 rad past it)."""
    stack = interface_stack(("position",) * len(CONFIG.joint_names))
    try:
        loop, model = stack.loop, stack.model
        loop.snapshot_decimation = 1
        loop.run_ticks(5)
        start = hardware_values(stack)
        current = stack.controller
        assert isinstance(current, JointImpedanceController)
        loop.switch_controller(JumpingReference(current.model, current.stiffness, current.damping))
        step = model.limits.velocity * CONFIG.period
        j1, j7 = model.v_index("joint1"), model.v_index("joint7")
        previous, saturated_ticks = start, 0
        for _ in range(1100):  # joint7: 3.05 rad at 3.14 rad/s
            loop.run_ticks(1)
            written = hardware_values(stack)
            for name in model.joint_names:
                index = model.v_index(name)
                assert abs(written[name] - previous[name]) <= step[index] * (1 + 1e-9), name
                assert model.limits.lower[index] <= written[name] <= model.limits.upper[index]
            saturated_ticks += bool(latest(stack).saturated[j1])
            previous = written
        assert written["joint1"] == pytest.approx(start["joint1"] + 0.5, abs=1e-9)
        assert written["joint7"] == model.limits.upper[j7]
        # 0.5 rad at 1.71 rad/s: about 292 ticks of 1 ms flagged, none once it got there.
        assert abs(saturated_ticks - 0.5 / step[j1]) <= 2
        assert not latest(stack).saturated[j1]
        assert loop.fault is None
    finally:
        stack.shut_down()


def test_the_grasp_runner_commands_position_fingers_with_its_servo_reference():
    """Arm on effort, fingers on position, the grasp runner installed: every tick the fingers
    are sent the gripper servo's reference r (what an effort gripper's force law tracks), and
    during APPROACH the fingers open as the task asks while the arm approaches the cube."""
    config = load_config(
        overrides={"mujoco.mode": "lockstep", "mujoco.command_interfaces": list(MIXED)}
    )
    cube = (0.52, -0.05, 0.35)
    setup = grasp_setup(config, cube)
    try:
        loop, runner = setup.stack.loop, setup.runner
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*cube)))
        loop.snapshot_decimation = 1
        fingers = runner.gripper.joint_names
        loop.run_ticks(1)
        start = latest(setup.stack).position[runner.fingers].copy()
        for _ in range(400):
            loop.run_ticks(1)
            reference = runner.gripper.reference
            assert reference is not None
            written = hardware_values(setup.stack)
            for name, value in zip(fingers, reference, strict=True):
                assert written[name] == value, name
        output = runner.last_output
        assert output is not None and output.phase == Phase.APPROACH
        opened = latest(setup.stack).position[runner.fingers]
        target = output.finger_target
        assert np.all(np.abs(opened - target) < 0.5 * np.abs(start - target))
    finally:
        setup.stack.shut_down()
