"""ct_controllers.ros.state_publishers over real rclpy/DDS (loopback): loop telemetry reaches
/diagnostics, including an injected overrun."""

from __future__ import annotations

import time

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from helpers import lockstep_config
from rclpy.executors import SingleThreadedExecutor

from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.ros.state_publishers import StatePublishers
from ct_controllers.runtime.controller_manager import ControllerManager
from ct_controllers.runtime.stack import build_stack


class SlowOnce(JointImpedanceController):
    """Computes for 5 ms once (five control periods), then behaves."""

    slept = False

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        if not self.slept and state.stamp > 0.2:
            self.slept = True
            time.sleep(0.005)
        return super().compute(state, reference, dt)


def test_an_injected_overrun_is_counted_and_reported_on_diagnostics() -> None:
    """A controller that computes for 5 ms once makes the loop count it as an overrun, and
    /diagnostics reports the count, the per-stage times and a compute maximum above 5 ms."""
    config = lockstep_config()
    stack = build_stack(config)
    base = stack.controllers["joint_impedance"]
    assert isinstance(base, JointImpedanceController)
    slow = SlowOnce(base.model, base.stiffness, base.damping)
    stack.loop.controller = slow
    manager = ControllerManager(
        stack.loop,
        {"joint_impedance": slow},
        {"joint_impedance": "ct_controllers/JointImpedance"},
        "joint_impedance",
    )
    publishers: StatePublishers | None = None
    rclpy.init()
    try:
        node = rclpy.create_node("ct_telemetry_test", namespace="/ct")
        listener = rclpy.create_node("ct_telemetry_listener")
        received: list[DiagnosticArray] = []
        listener.create_subscription(DiagnosticArray, "/diagnostics", received.append, 10)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.add_node(listener)
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
        rclpy.shutdown()
