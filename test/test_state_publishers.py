"""ct_controllers.ros.state_publishers over real rclpy/DDS (loopback): loop telemetry reaches
/diagnostics, including an injected overrun; a dead loop stops the joint states and is an
ERROR."""

from __future__ import annotations

import contextlib
import io
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from helpers import lockstep_config
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState as JointStateMessage

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.config import load_config
from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.model.link_tree import urdf_joints
from ct_controllers.ros.state_publishers import StateMessages, StatePublishers
from ct_controllers.runtime.controller_manager import ControllerManager
from ct_controllers.runtime.stack import Stack, build_stack
from ct_controllers.setup_assistant.cli import main as setup_main


class SlowOnce(JointImpedanceController):
    """Computes for 5 ms once (five control periods), then behaves."""

    slept = False

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        if not self.slept and state.stamp > 0.2:
            self.slept = True
            time.sleep(0.005)
        return super().compute(state, reference, dt)


def stack_running(
    kind: type[JointImpedanceController],
) -> tuple[Stack, ControllerManager, JointImpedanceController]:
    """The lockstep stack (not brought up) with a ``kind`` controller built from the bundled
    joint impedance's gains in place of it, and a manager that knows only that one."""
    stack = build_stack(lockstep_config())
    base = stack.controllers["joint_impedance"]
    assert isinstance(base, JointImpedanceController)
    controller = kind(base.model, base.stiffness, base.damping)
    stack.loop.controller = controller
    manager = ControllerManager(
        stack.loop,
        {"joint_impedance": controller},
        {"joint_impedance": "ct_controllers/JointImpedance"},
        "joint_impedance",
    )
    return stack, manager, controller


@contextmanager
def telemetry_nodes(
    name: str, listener_name: str
) -> Iterator[tuple[Node, Node, SingleThreadedExecutor]]:
    """rclpy in this process: a node for the publishers (namespace /ct) and a listener, on one
    executor; destroyed when done, not left to the garbage collector — a node's DDS participant
    outlives rclpy.shutdown() while the node object lives, and would serve its latched topics
    (/robot_description) to the later tests of the session."""
    rclpy.init()
    try:
        node = rclpy.create_node(name, namespace="/ct")
        listener = rclpy.create_node(listener_name)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.add_node(listener)
        try:
            yield node, listener, executor
        finally:
            executor.shutdown()
            listener.destroy_node()
            node.destroy_node()
    finally:
        rclpy.shutdown()


def test_an_injected_overrun_is_counted_and_reported_on_diagnostics() -> None:
    """A controller that computes for 5 ms once makes the loop count it as an overrun, and
    /diagnostics reports the count, the per-stage times and a compute maximum above 5 ms."""
    stack, manager, _ = stack_running(SlowOnce)
    publishers: StatePublishers | None = None
    with telemetry_nodes("ct_telemetry_test", "ct_telemetry_listener") as (
        node,
        listener,
        executor,
    ):
        try:
            received: list[DiagnosticArray] = []
            listener.create_subscription(DiagnosticArray, "/diagnostics", received.append, 10)
            stack.bring_up()
            publishers = StatePublishers(node, stack, manager, diagnostics_rate=5.0)
            stack.loop.run_ticks(500)  # lockstep: 0.5 s of sim time, the slow tick among them
            publishers.start()
            overruns = stack.loop.timing.overruns
            assert overruns >= 1  # the slow tick (others may overrun on a loaded machine, too)
            deadline = time.monotonic() + 10.0
            values: dict[str, str] = {}
            while time.monotonic() < deadline and not values:
                executor.spin_once(timeout_sec=0.1)
                for message in received:
                    for status in message.status:
                        if "control loop" in status.name:
                            values = {kv.key: kv.value for kv in status.values}
            assert values, "no control-loop status on /diagnostics"
            assert int(values["overruns"]) == overruns
            assert float(values["compute_max_us"]) >= 5000.0
            assert float(values["stage_controller_max_us"]) >= 5000.0
            for stage in ("read", "guard", "controller", "limiter", "write"):
                assert np.isfinite(float(values[f"stage_{stage}_p50_us"]))
        finally:
            if publishers is not None:
                publishers.stop()
            stack.shut_down()


class Kill(BaseException):
    """Not an Exception: the one kind that still ends the loop thread."""


class DiesAfterArmed(JointImpedanceController):
    """Raises Kill 2 s (wall clock) after it was armed (the publishers and the listener have
    been exchanging joint states by then)."""

    armed_at = float("inf")

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        if time.monotonic() > self.armed_at + 2.0:
            raise Kill("injected")
        return super().compute(state, reference, dt)


def test_a_dead_loop_stops_joint_states_and_is_an_error_on_diagnostics() -> None:
    """When the loop thread dies: /ct/joint_states stops (no message with a frozen stamp after
    the death), and /diagnostics says ERROR with 'control loop stopped'."""
    stack, manager, dying = stack_running(DiesAfterArmed)
    assert isinstance(dying, DiesAfterArmed)
    publishers: StatePublishers | None = None
    with telemetry_nodes("ct_dead_loop_test", "ct_dead_loop_listener") as (
        node,
        listener,
        executor,
    ):
        try:
            states: list[JointStateMessage] = []
            diagnostics: list[DiagnosticArray] = []
            listener.create_subscription(JointStateMessage, "/ct/joint_states", states.append, 100)
            listener.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
            publishers = StatePublishers(node, stack, manager, diagnostics_rate=5.0)
            stack.start()
            publishers.start()
            dying.armed_at = time.monotonic()
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline and stack.loop.running:
                executor.spin_once(timeout_sec=0.05)
            assert not stack.loop.running and stack.loop.stopped_reason is not None
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:  # settle: messages sent before the death arrive
                executor.spin_once(timeout_sec=0.05)
            # Judged from here on: a status sent just before the death may arrive after the
            # death was seen (it was cleared too early, and read OK, once in CI).
            diagnostics.clear()
            after = len(states)
            assert after > 10, "too few joint states before the death to tell"
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            assert len(states) == after, "joint states still published by a dead loop"
            stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in states]
            assert len(stamps) == len(set(stamps)), "a stamp was published twice"
            statuses = [s for m in diagnostics for s in m.status if "control loop" in s.name]
            assert statuses, "no diagnostics after the death"
            assert all(s.level == DiagnosticStatus.ERROR for s in statuses)
            assert all("control loop stopped: Kill: injected" in s.message for s in statuses)
        finally:
            if publishers is not None:
                publishers.stop()
            stack.shut_down()


def test_joint_states_carry_each_mimic_follower_as_mujoco_moves_it(tmp_path) -> None:
    """The Franka Panda of example-robot-data, set up by ct-setup (panda_finger_joint2 mimics
    panda_finger_joint1, an equality constraint in the MuJoCo scene): after the finger opened,
    the JointState message names every movable joint of the URDF once, the follower's position
    is within 1 mm of the one MuJoCo's constraint solver gives it (an independent computation
    of the same mimic), its velocity that of its master times the multiplier, and its effort
    NaN (no interface of ours measures it)."""
    urdf = example_robot_path("panda_description/urdf/panda.urdf")
    with contextlib.redirect_stdout(io.StringIO()):
        assert setup_main([str(urdf), "-o", str(tmp_path)]) == 0
    config = load_config(tmp_path / "controllers.yaml", overrides={"mujoco.mode": "lockstep"})
    stack = build_stack(config)
    stack.bring_up()
    try:
        stack.loop.request_motion(["panda_finger_joint1"], [0.03], 0.5)
        stack.loop.run_ticks(round(1.0 / config.period))
        hardware = stack.hardware
        assert isinstance(hardware, MujocoSystem) and hardware.model and hardware.data
        follower = hardware.data.qpos[hardware.model.joint("panda_finger_joint2").qposadr[0]]
        snapshot = stack.loop.snapshot()
        message = StateMessages(stack, lambda: "joint_impedance").joint_state(snapshot, Time())
    finally:
        stack.shut_down()
    movable = sorted(j.name for j in urdf_joints(stack.description.urdf) if j.type != "fixed")
    assert sorted(message.name) == movable
    values = zip(message.position, message.velocity, message.effort, strict=True)
    by_name = dict(zip(message.name, values, strict=True))
    assert by_name["panda_finger_joint1"][0] > 0.02  # the premise: the finger opened
    assert abs(by_name["panda_finger_joint2"][0] - follower) < 1e-3
    assert by_name["panda_finger_joint2"][1] == by_name["panda_finger_joint1"][1]  # multiplier 1
    assert math.isnan(by_name["panda_finger_joint2"][2])
    measured = [name for name in movable if name != "panda_finger_joint2"]
    assert all(math.isfinite(v) for name in measured for v in by_name[name])
