"""The control loop's safe hold and fault reactions carry a staged payload
(``ControlLoop.stage_payload``, through ``runtime.payload.stage_payload``): an arm faulted while
it holds 1 kg is held by g(q) with the payload, not let sink at the speed the missing gravity
torque drives through the hold's damping."""

from __future__ import annotations

import numpy as np

from ct_controllers.config import load_config
from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.model.payload import Payload
from ct_controllers.runtime.payload import stage_payload
from ct_controllers.runtime.stack import build_stack
from ct_controllers.sim.payload_plant import load_mujoco_scene

TRUTH = Payload(1.0, (0.01, -0.015, 0.04))  # [kg], [m] TCP frame
SETTLE = 1.5  # [s] the controllers carrying it, before the fault
AFTER = 0.6  # [s] of the fault reaction: > 2 time constants M/D of every loaded joint


class RaisingImpedance(JointImpedanceController):
    """A broken controller: compute raises (the fault is latched with fresh state flowing)."""

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        raise ZeroDivisionError("gain scheduling divided by zero")


def _speed_after_a_fault(loop_carries: bool) -> tuple[FloatArray, FloatArray]:
    """MuJoCo in lockstep carrying ``TRUTH``, the controllers told so (and the loop too when
    ``loop_carries``); at home a controller fault latches the default reaction (the arm at
    rest: the safe hold τ = g(q) − D v). Returns the joint velocities [rad/s] after ``AFTER``
    and the terminal velocities predicted without the payload in the hold,
    D⁻¹ (g_unloaded(q) − g_loaded(q)) (Pinocchio), both model order."""
    config = load_config(overrides={"mujoco.mode": "lockstep", "payload.rated_mass": 3.0})
    stack = build_stack(config)
    stack.bring_up()
    loop, model = stack.loop, stack.model
    try:
        with stack.hardware.lock:
            load_mujoco_scene(stack.hardware.model, config.tcp_frame, TRUTH)
        stage_payload(
            stack.controllers,
            TRUTH,
            config.payload_limits,
            loop if loop_carries else None,
        )
        loop.run_ticks(round(SETTLE / loop.period))
        assert loop.hold_payload == (TRUTH if loop_carries else None)
        loop.switch_controller(RaisingImpedance(model, np.ones(model.nv), np.ones(model.nv)))
        loop.run_ticks(round(AFTER / loop.period))
        assert loop.fault is not None and "controller raised" in loop.fault
        snapshot = loop.snapshot()
        assert snapshot is not None
        q = snapshot.position
        damping = np.empty(model.nv)
        damping[model.indices(config.joint_names)] = config.safe_hold_damping
        missing = model.gravity(q) - model.with_payload(TRUTH).gravity(q)
        return snapshot.velocity, missing / damping
    finally:
        stack.shut_down()


def test_a_fault_while_holding_a_payload_holds_it_when_the_loop_carries_it() -> None:
    """Without the payload in the hold, the loaded joints sink at the terminal speed its missing
    gravity torque gives through the damping (MuJoCo's measured velocity within 25 % of
    Pinocchio's D⁻¹ Δg on every joint where that exceeds 5 mrad/s); with it, every joint is
    below a tenth of the largest of those speeds."""
    sinking, predicted = _speed_after_a_fault(loop_carries=False)
    loaded = np.abs(predicted) > 5e-3
    assert loaded.sum() >= 2, predicted  # the shoulder and elbow feel 1 kg
    np.testing.assert_allclose(sinking[loaded], predicted[loaded], rtol=0.25)
    held, _ = _speed_after_a_fault(loop_carries=True)
    assert np.max(np.abs(held)) < 0.1 * np.max(np.abs(predicted)), (held, predicted)
