"""ct_controllers.runtime.speed_limit: a joint measured running away (faster than the factor × its
URDF velocity limit, two fresh samples in a row) latches a fault and the reaction brings it to
rest; a one-sample spike and the stack's own fastest motions do not."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import lockstep_config, new_robot_model

from ct_controllers.config import load_config
from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.hardware.watchdog import WatchdogConfig
from ct_controllers.runtime.speed_limit import SAMPLES, speed_limit_of
from ct_controllers.runtime.stack import build_stack


def test_two_samples_over_the_bound_latch_one_spike_does_not() -> None:
    """Against the bundled URDF (joint3 1.745 rad/s, the fingers 0.2 m/s) at factor 2: one
    sample at 3.6 rad/s then one within is no fault; ``SAMPLES`` in a row over name the joint,
    its speed with its unit and the limit; a prismatic finger's message says m/s."""
    model = new_robot_model()
    check = speed_limit_of(model, 2.0)
    assert check is not None and SAMPLES == 2
    v = np.zeros(model.nv)
    over = v.copy()
    over[model.v_index("joint3")] = 3.6  # > 2 × 1.745
    assert check.check(over) is None
    assert check.check(v) is None  # the spike is forgotten
    assert check.check(over) is None
    message = check.check(over)
    assert message is not None
    assert "'joint3'" in message and "3.6 rad/s" in message and "1.745 rad/s" in message
    finger = v.copy()
    finger[model.v_index("left_finger_joint")] = -0.5  # > 2 × 0.2 m/s, either sign
    check.reset()
    check.check(finger)
    message = check.check(finger)
    assert message is not None and "'left_finger_joint'" in message and "m/s" in message
    assert speed_limit_of(model, 0.0) is None  # off


@pytest.mark.parametrize("factor", [0.5, -1.0, float("inf"), float("nan")])
def test_a_factor_below_one_or_not_finite_is_refused_naming_it(factor: float) -> None:
    """The configuration refuses a factor that is neither 0 (off) nor a finite value >= 1,
    naming the parameter."""
    with pytest.raises(ValueError, match="speed_limit_factor"):
        load_config(overrides={"watchdog.speed_limit_factor": factor})
    with pytest.raises(ValueError, match="speed_limit_factor"):
        WatchdogConfig(speed_limit_factor=factor)


class RunawayController(JointImpedanceController):
    """A controller with the wrong sign on joint3's feedback: positive velocity feedback of
    60 N·m·s/rad (a runaway, as a loop whose delay made its gains unstable)."""

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        tau = self.model.gravity(state.q)
        index = self.model.v_index("joint3")
        tau[index] += 60.0 * (state.v[index] + 0.5)
        return tau


def test_a_runaway_joint_latches_the_fault_and_the_reaction_stops_it() -> None:
    """MuJoCo in lockstep: joint3 driven away by positive feedback is stopped by the fault named
    after it before it reaches 3 × its limit, and the damped reaction brings every joint below
    0.05 rad/s within 1 s; with the check off (factor 0) the same controller runs on past 2 ×
    the limit unfaulted."""
    config = lockstep_config()
    stack = build_stack(config)
    stack.bring_up()
    model, loop = stack.model, stack.loop
    limit = model.limits.velocity[model.v_index("joint3")]
    try:
        loop.run_ticks(200)
        loop.switch_controller(RunawayController(model, np.ones(model.nv), np.ones(model.nv)))
        peak = 0.0
        for _ in range(2000):
            loop.run_ticks(1)
            snapshot = loop.snapshot()
            assert snapshot is not None
            peak = max(peak, abs(snapshot.velocity[model.v_index("joint3")]))
            if loop.fault is not None:
                break
        assert loop.fault is not None and "speed limit: joint 'joint3'" in loop.fault
        assert peak < 3.0 * limit, (peak, limit)  # (snapshots: every 10th tick)
        loop.run_ticks(1000)
        snapshot = loop.snapshot()
        assert snapshot is not None
        assert np.max(np.abs(snapshot.velocity)) < 0.05, snapshot.velocity
    finally:
        stack.shut_down()
    config = load_config(overrides={"mujoco.mode": "lockstep", "watchdog.speed_limit_factor": 0.0})
    stack = build_stack(config)
    stack.bring_up()
    model, loop = stack.model, stack.loop
    try:
        loop.run_ticks(200)
        loop.switch_controller(RunawayController(model, np.ones(model.nv), np.ones(model.nv)))
        peak = 0.0
        for _ in range(100):
            loop.run_ticks(10)
            snapshot = loop.snapshot()
            assert snapshot is not None
            peak = max(peak, abs(snapshot.velocity[model.v_index("joint3")]))
        assert loop.fault is None, loop.fault
        assert peak > 2.0 * limit, (peak, limit)
    finally:
        stack.shut_down()
