"""ct_controllers.controllers.computed_torque: the three laws, checked against independent
computations (M and b from separate algorithms, the analytic closed-loop solution)."""

from __future__ import annotations

import threading

import numpy as np
import pinocchio as pin
import pytest
from helpers import new_robot_model, random_configuration, reference_sensitivity

from ct_controllers.controllers.computed_torque import (
    COMPUTED_TORQUE,
    PD,
    PD_GRAVITY,
    ComputedTorqueController,
)
from ct_controllers.controllers.controller import GainError, JointReference, JointState
from ct_controllers.model.robot import RobotModel


def _random_state(model: RobotModel, rng: np.random.Generator) -> tuple[JointState, JointReference]:
    q = random_configuration(model, rng)
    v = rng.uniform(-1, 1, model.nv)
    reference = JointReference(
        q=q + rng.uniform(-0.1, 0.1, model.nv),
        v=v + rng.uniform(-0.5, 0.5, model.nv),
        a=rng.uniform(-2, 2, model.nv),
    )
    return JointState(0.0, q, v), reference


def test_zero_error_and_zero_gains_give_exactly_the_feed_forward_terms() -> None:
    """With zero gains and the reference on the state, computed torque is M(q) q̈_d + b(q, q̇)
    (M from CRBA, b from the nonlinear-effects algorithm: an independent route), PD + gravity is
    g(q) and PD is exactly zero."""
    model = new_robot_model()
    reference_model = new_robot_model()
    zeros = np.zeros(model.nv)
    rng = np.random.default_rng(1)
    for _ in range(20):
        state, reference = _random_state(model, rng)
        on_state = JointReference(state.q, state.v, reference.a)
        ct = ComputedTorqueController(model, zeros, zeros, COMPUTED_TORQUE)
        expected = reference_model.mass_matrix(state.q) @ reference.a + reference_model.bias(
            state.q, state.v
        )
        np.testing.assert_allclose(ct.update(state, on_state, 0.001), expected, atol=1e-9)
        pdg = ComputedTorqueController(model, zeros, zeros, PD_GRAVITY)
        np.testing.assert_array_equal(
            pdg.update(state, on_state, 0.001), reference_model.gravity(state.q)
        )
        pd = ComputedTorqueController(model, zeros, zeros, PD)
        np.testing.assert_array_equal(pd.update(state, on_state, 0.001), zeros)


def test_feed_forward_effort_is_added_in_every_mode() -> None:
    """A reference's feed-forward effort adds to each law's output unchanged."""
    model = new_robot_model()
    rng = np.random.default_rng(2)
    state, reference = _random_state(model, rng)
    effort = rng.uniform(-5, 5, model.nv)
    with_ff = JointReference(reference.q, reference.v, reference.a, effort)
    gains = np.full(model.nv, 10.0)
    for mode in (COMPUTED_TORQUE, PD, PD_GRAVITY):
        controller = ComputedTorqueController(model, gains, gains, mode)
        base = controller.update(state, reference, 0.001)
        np.testing.assert_allclose(controller.update(state, with_ff, 0.001), base + effort)


def test_exact_model_error_follows_the_analytic_critically_damped_solution() -> None:
    """Plant = the same model (ABA, semi-implicit Euler, dt = 1e-4 s). A step of e0 in the
    reference with K_p = ω², K_d = 2ω gives ë + 2ω ė + ω² e = 0, whose solution from e(0) = e0,
    ė(0) = 0 is e(t) = e0 (1 + ω t) e^(−ω t); the simulated error matches it on every joint to 1 %
    of e0 (the Euler discretization is O(ω dt) = 2e-3)."""
    model = new_robot_model()
    omega, dt, duration = 20.0, 1e-4, 0.5
    controller = ComputedTorqueController(
        model, np.full(model.nv, omega**2), np.full(model.nv, 2 * omega), COMPUTED_TORQUE
    )
    plant, plant_data = model.model, model.model.createData()
    q0 = np.array([0.0, 0.4, 0.0, -1.6, 0.0, 1.2, 0.0, 0.02, 0.02])
    e0 = np.array([0.05, -0.04, 0.03, 0.05, -0.05, 0.04, 0.05, 0.004, -0.004])
    reference = JointReference.hold(q0 + e0)
    q, v = q0.copy(), np.zeros(model.nv)
    worst = 0.0
    for k in range(round(duration / dt)):
        tau = controller.update(JointState(k * dt, q, v), reference, dt)
        a = pin.aba(plant, plant_data, q, v, tau)
        v = v + a * dt
        q = q + v * dt
        t = (k + 1) * dt
        analytic = e0 * (1 + omega * t) * np.exp(-omega * t)
        worst = max(worst, float(np.max(np.abs((reference.q - q) - analytic) / np.abs(e0))))
    assert worst < 0.01


def test_kp_and_kd_staged_together_are_never_half_applied() -> None:
    """While another thread stages (kp, kd) pairs with equal values, every tick sees a kp and kd
    from the same pair; a staged pair takes effect at the next update, not before."""
    model = new_robot_model()
    seen: list[tuple[float, float]] = []

    class Recording(ComputedTorqueController):
        def compute(self, state, reference, dt):  # type: ignore[no-untyped-def]
            seen.append((float(self.kp[0]), float(self.kd[0])))
            return super().compute(state, reference, dt)

    controller = Recording(model, np.ones(model.nv), np.ones(model.nv), PD)
    controller.stage_gains({"kp": np.full(model.nv, 5.0), "kd": np.full(model.nv, 5.0)})
    assert controller.kp[0] == 1.0 and controller.kd[0] == 1.0  # staged, not applied
    state, reference = _random_state(model, np.random.default_rng(3))
    controller.update(state, reference, 0.001)
    assert seen[-1] == (5.0, 5.0)

    stop = threading.Event()

    def stager() -> None:
        value = 6.0
        while not stop.is_set():
            controller.stage_gains({"kp": np.full(model.nv, value), "kd": np.full(model.nv, value)})
            value += 1.0

    thread = threading.Thread(target=stager)
    thread.start()
    try:
        for _ in range(5000):
            controller.update(state, reference, 0.001)
    finally:
        stop.set()
        thread.join()
    assert all(kp == kd for kp, kd in seen)
    assert len({kp for kp, _ in seen}) > 2  # the gains did change while ticking


def test_invalid_gains_and_modes_are_rejected_and_leave_the_old_gains() -> None:
    """Wrong length, negative, NaN or unknown gains raise GainError naming the problem and do not
    touch the running gains; an unknown mode is refused at construction."""
    model = new_robot_model()
    controller = ComputedTorqueController(model, np.ones(model.nv), np.ones(model.nv))
    for bad, words in (
        ({"kp": [1.0, 2.0]}, "expected 9"),
        ({"kd": -np.ones(model.nv)}, "kd"),
        ({"kp": np.full(model.nv, np.nan)}, "non-finite"),
        ({"stiffness": np.ones(model.nv)}, "unknown gain"),
    ):
        with pytest.raises(GainError, match=words):
            controller.stage_gains(bad)
    state, reference = _random_state(model, np.random.default_rng(4))
    controller.update(state, reference, 0.001)
    np.testing.assert_array_equal(controller.kp, np.ones(model.nv))
    with pytest.raises(GainError, match="unknown computed-torque mode 'fast'"):
        ComputedTorqueController(model, np.ones(model.nv), np.ones(model.nv), "fast")


def test_model_mass_scale_scales_gravity_exactly() -> None:
    """from_parameters with model_mass_scale s gives the controller a model whose gravity torque
    is exactly s times the nominal one (g depends on masses and COMs only), while the plant-side
    model is untouched."""
    model = new_robot_model()
    names = model.joint_names
    params = {"kp": [0.0] * 9, "kd": [0.0] * 9, "mode": PD_GRAVITY, "model_mass_scale": 1.5}
    controller = ComputedTorqueController.from_parameters(model, names, params)
    q = random_configuration(model, np.random.default_rng(5))
    state = JointState(0.0, q, np.zeros(model.nv))
    tau = controller.update(state, JointReference.hold(q), 0.001)
    np.testing.assert_allclose(tau, 1.5 * new_robot_model().gravity(q), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.gravity(q), new_robot_model().gravity(q))


def test_from_parameters_maps_gains_by_name() -> None:
    """Gains listed in a shuffled joint order land on the right joints."""
    model = new_robot_model()
    names = tuple(reversed(model.joint_names))
    kp = [float(i) for i in range(9)]
    controller = ComputedTorqueController.from_parameters(
        model, names, {"kp": kp, "kd": kp, "mode": PD}
    )
    for name, value in zip(names, kp, strict=True):
        assert controller.kp[model.q_index(name)] == value


def test_linear_feedback_is_the_torques_sensitivity_to_the_reference() -> None:
    """(K, D) of linear_feedback are ∂τ/∂q* and ∂τ/∂v* of compute() (central differences at a
    random state): M(q)K_p and M(q)K_d in computed-torque mode, diag(K_p) and diag(K_d) in the
    PD modes."""
    model = new_robot_model()
    rng = np.random.default_rng(5)
    kp, kd = rng.uniform(50.0, 400.0, model.nv), rng.uniform(1.0, 40.0, model.nv)
    q = random_configuration(model, rng)
    state = JointState(stamp=0.0, q=q, v=rng.normal(size=model.nv))
    for mode in (COMPUTED_TORQUE, PD, PD_GRAVITY):
        controller = ComputedTorqueController(model, kp, kd, mode)
        expected_k, expected_d = controller.linear_feedback(q)
        by_q, by_v = reference_sensitivity(controller, state)
        np.testing.assert_allclose(by_q, expected_k, rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(by_v, expected_d, rtol=1e-6, atol=1e-5)
