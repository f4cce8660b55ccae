"""The ros2_control bridge backend over real rclpy and real DDS (loopback): the whole stack in
this process (build_stack with ``backend: ros2_control_bridge``) against a separate process that
plays the ros2_control side (``ct_controllers.sim.ros2_control_plant``: a plant simulation
publishing JointState and applying Float64MultiArray efforts). The plant process publishes its
joints in reverse order, and is made to send NaN, unknown or unstamped joints, to stall (SIGSTOP)
and to restart."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator

import pytest
from backends import SLOW_LOOP_GAINS, PlantProcess
from helpers import bundled_description

from ct_controllers.config import load_config
from ct_controllers.hardware.interface import LifecycleState, NotArmedError
from ct_controllers.hardware.ros2_control_bridge import BridgeConfig, Ros2ControlBridge
from ct_controllers.runtime.stack import Stack, build_stack

pytestmark = pytest.mark.realtime  # plant rigs in this process (pyproject.toml)

RATE = 100.0  # [Hz] control loop
PERIOD = 1.0 / RATE
# Generous deadlines (20 periods): two Python processes and DDS on a shared 2-core machine see
# pauses of tens of ms — once just over 100 ms in CI — that are not the faults under test. The
# bounds below scale with them.
STATE_TIMEOUT = 0.2  # [s]
# The command deadline is longer than the state deadline: a stall of this process between ticks
# (230 ms once in a full run) otherwise trips the bridge's command deadline first, and the
# tests of the state watchdog see that fault instead of theirs.
COMMAND_TIMEOUT = 0.5  # [s]
STATES = "/ct_test_bridge/joint_states"
COMMANDS = "/ct_test_bridge/effort_controller/commands"
CONFIG = load_config(
    overrides={
        "backend": "ros2_control_bridge",
        "hardware.armed": True,
        "update_rate": RATE,
        "ros2_control_bridge.joint_states_topic": STATES,
        "ros2_control_bridge.command_topic": COMMANDS,
        "watchdog.state_timeout": STATE_TIMEOUT,
        "watchdog.command_timeout": COMMAND_TIMEOUT,
        **SLOW_LOOP_GAINS,
    }
)
JOINTS = list(CONFIG.joint_names)


def new_plant() -> PlantProcess:
    return PlantProcess(STATES, COMMANDS, JOINTS)


pytestmark = pytest.mark.usefixtures("frozen_heap")  # see conftest.frozen_heap


@pytest.fixture(scope="module")
def plant() -> Iterator[list[PlantProcess]]:
    holder = [new_plant()]  # a list, so that the restart test can replace it
    yield holder
    holder[0].stop()


@pytest.fixture(scope="module")
def stack(plant) -> Iterator[Stack]:
    stack = build_stack(CONFIG, bundled_description("ros2_control_bridge"))
    stack.bring_up()
    stack.loop.snapshot_decimation = 1
    yield stack
    stack.shut_down()


@pytest.fixture(autouse=True)
def _from_a_running_stack(request) -> None:
    """Each test starts from a stack without a fault: a test that failed midway leaves the
    module's stack faulted, and the tests after it would fail on that, not on their own."""
    if "stack" not in request.fixturenames:
        return
    stack, plant = request.getfixturevalue("stack"), request.getfixturevalue("plant")
    if stack.loop.fault is not None:
        recover(stack, plant[0])


def run(stack: Stack, seconds: float) -> None:
    stack.loop.run_ticks(round(seconds / PERIOD))


def recover(stack: Stack, plant: PlantProcess) -> None:
    """Normal data again, then reset the fault (fresh data needed)."""
    plant.send("ok")
    run(stack, 0.1)
    stack.loop.reset_fault()
    run(stack, 0.05)
    assert stack.loop.fault is None, stack.loop.reset_refused


def assert_safe_commands(report: dict) -> None:
    """The plant never got a malformed or non-finite command, nor one beyond the URDF limit."""
    assert report["bad_commands"] == 0
    model_limits = dict(zip(JOINTS, [176, 176, 110, 110, 110, 40, 40, 40, 40], strict=True))
    for name, value in report["max_command"].items():
        assert value <= model_limits[name] + 1e-9, name


def test_command_joints_must_name_every_joint_once():
    """A forward controller joint list with an unknown, a missing or a repeated joint is refused
    at construction, naming them."""
    joints = ("a", "b", "c")
    with pytest.raises(ValueError, match=r"unknown: x.*missing: c"):
        Ros2ControlBridge(joints, BridgeConfig(command_joints=("a", "b", "x")))
    with pytest.raises(ValueError, match="twice: a"):
        Ros2ControlBridge(joints, BridgeConfig(command_joints=("a", "a", "b", "c")))


def test_activation_is_refused_unless_armed():
    """Without hardware.armed the bridge configures (node up) but refuses to activate, naming
    the parameter, and publishes nothing."""
    config = load_config(overrides={"backend": "ros2_control_bridge", "update_rate": RATE})
    stack = build_stack(config, bundled_description("ros2_control_bridge"))
    try:
        with pytest.raises(NotArmedError, match=r"hardware\.armed"):
            stack.bring_up()
        assert stack.hardware.state is LifecycleState.INACTIVE
        assert isinstance(stack.hardware, Ros2ControlBridge) and stack.hardware.published == 0
    finally:
        stack.shut_down()


def test_motion_through_the_bridge_with_joints_in_another_order(stack, plant):
    """The plant publishes its joints in reverse order; the bridge maps them by name and sends
    efforts in the forward controller's order: a motion reaches its target (checked on the
    plant's true positions) and every command was finite and within limits."""
    loop = stack.loop
    motion = loop.request_motion(["joint4", "joint1"], [-1.3, 0.3], 0.5)
    run(stack, 1.8)
    assert loop.fault is None, loop.fault
    assert loop.motion_status(motion).state == "succeeded"
    report = plant[0].report()
    snapshot = loop.snapshot()
    assert abs(report["position"]["joint4"] + 1.3) < 0.02, (report, snapshot, loop.diagnostics())
    assert abs(report["position"]["joint1"] - 0.3) < 0.02
    assert report["commands"] > 100
    assert_safe_commands(report)


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("nan", "state.non_finite"),
        ("unknown", "state.unknown_joint"),
        ("unstamped", "state.no_stamp"),
    ],
)
def test_bad_joint_states_are_rejected_and_end_in_the_fault_reaction(stack, plant, mode, reason):
    """NaN positions, an unknown joint name or a zero stamp from the ros2_control side are
    rejected by the guard (counted by reason), never reach the controller, and after
    state_timeout the fault reaction is written; the plant never receives a bad command."""
    loop = stack.loop
    before = stack.hardware.guard.counts().get(reason, 0)
    plant[0].send(mode)
    injected = time.time()
    guard = stack.hardware.guard
    for _ in range(round(0.6 / PERIOD)):
        loop.run_ticks(1)
        record = loop.fault_record
        # Until the bad message is counted too: a hiccup of the plant process can make the
        # state stale (and latch the fault) before its first bad message arrives.
        counted = guard.counts().get(reason, 0) > before
        if counted and loop.fault is not None and record is not None and record.first_safe_command:
            break
    assert loop.fault is not None and "no fresh state" in loop.fault, loop.diagnostics()
    assert stack.hardware.guard.counts().get(reason, 0) > before
    record = loop.fault_record
    assert record is not None and record.first_safe_command is not None
    # JointStates arrive every 5 ms: the last good one may be a period older than the injection.
    assert record.first_safe_command - injected <= STATE_TIMEOUT + 2 * PERIOD + 0.02
    assert_safe_commands(plant[0].report())
    recover(stack, plant[0])


def test_a_stalled_ros2_control_side_is_detected_and_recovered(stack, plant):
    """SIGSTOP on the plant process: no fresh JointState, the watchdog latches within
    state_timeout (+ one period) and the reaction is written; after SIGCONT and a reset the
    stack runs again."""
    loop = stack.loop
    run(stack, 0.1)
    process = plant[0].process
    process.send_signal(signal.SIGSTOP)
    stopped = time.time()
    try:
        run(stack, 0.3)
        assert loop.fault is not None and "no fresh state" in loop.fault
        record = loop.fault_record
        assert record is not None and record.first_safe_command is not None
        assert record.first_safe_command - stopped <= STATE_TIMEOUT + 2 * PERIOD + 0.02
    finally:
        process.send_signal(signal.SIGCONT)
    recover(stack, plant[0])


def test_a_restarted_ros2_control_side_is_detected_and_recovered(stack, plant):
    """The plant process is killed (fault latched; a reset is refused while nothing arrives),
    then a new one starts: its fresh data lets the reset through and a motion succeeds."""
    loop = stack.loop
    plant[0].stop()
    run(stack, 0.3)
    assert loop.fault is not None
    loop.reset_fault()
    run(stack, 0.05)
    assert loop.fault is not None and "fresh" in loop.reset_refused
    plant[0] = new_plant()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not loop.snapshot().state_fresh:
        run(stack, 0.05)
    recover(stack, plant[0])
    motion = loop.request_motion(["joint2"], [0.5], 0.5)
    run(stack, 1.5)
    assert loop.motion_status(motion).state == "succeeded", loop.fault
    assert abs(plant[0].report()["position"]["joint2"] - 0.5) < 0.02


def test_a_stalled_loop_gets_a_hold_published_by_the_bridge(stack, plant):
    """When the control loop stops writing during a motion, the bridge's own executor notices
    the missed command deadline and keeps publishing a hold from the measured state (gravity
    plus damping), so the forward controller is not left on a stale effort: the arm comes to
    rest. The loop then latches a missed command deadline — the bridge's, or its own watchdog's
    when the resumed ticks stall past ``command_timeout`` before the bridge's is read (seen in
    CI on a loaded machine) — and a reset with commands flowing clears it."""
    loop = stack.loop
    bridge = stack.hardware
    assert isinstance(bridge, Ros2ControlBridge)
    loop.request_motion(["joint1"], [0.0], 0.6)
    run(stack, 0.3)
    before = bridge.holds_published
    time.sleep(1.0)  # the loop is not ticking
    assert bridge.holds_published - before >= 10
    fault = bridge.fault()
    assert fault is not None and "no command" in fault
    report = plant[0].report()
    assert max(abs(v) for v in report["velocity"].values()) < 0.05
    assert_safe_commands(report)
    run(stack, 0.05)
    assert loop.fault is not None and re.search(r"no (fresh )?command", loop.fault), loop.fault
    recover(stack, plant[0])
    assert bridge.fault() is None
