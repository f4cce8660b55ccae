"""ct_controllers.controllers.joint_impedance: τ = K (q* − q) + D (v* − v) + g(q), gain staging
and validation, and construction from controllers.yaml parameters."""

from __future__ import annotations

import threading

import numpy as np
import pinocchio as pin
import pytest
from helpers import bundled_config, new_robot_model, random_configuration, reference_sensitivity

from ct_controllers.controllers.controller import GainError, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.model.robot import RobotModel

DT = 1e-3


@pytest.fixture(scope="module")
def model() -> RobotModel:
    return new_robot_model()


@pytest.fixture(scope="module")
def reference_model() -> RobotModel:
    """A second, independent model instance for the expected values."""
    return new_robot_model()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(11)


def _gains(model: RobotModel, k: float = 100.0, d: float = 10.0):
    return np.full(model.nv, k), np.full(model.nv, d)


def _state(q, v=None) -> JointState:
    q = np.asarray(q, dtype=np.float64)
    return JointState(stamp=0.0, q=q, v=np.zeros_like(q) if v is None else np.asarray(v))


def test_zero_error_zero_gains_is_exactly_gravity(model, reference_model, rng):
    """With zero gains and zero error the output is exactly g(q) (feed-forward only), which
    also equals RNEA(q, 0, 0)."""
    zero = np.zeros(model.nv)
    controller = JointImpedanceController(model, zero, zero)
    for _ in range(10):
        q = random_configuration(model, rng)
        tau = controller.update(_state(q), JointReference.hold(q), DT)
        np.testing.assert_array_equal(tau, reference_model.gravity(q))
        np.testing.assert_allclose(
            tau, reference_model.inverse_dynamics(q, zero, zero), rtol=0, atol=1e-9
        )


def test_zero_error_with_gains_is_still_exactly_gravity(model, reference_model, rng):
    """At zero position and velocity error the stiffness and damping add nothing."""
    controller = JointImpedanceController(model, *_gains(model, 600.0, 50.0))
    q = random_configuration(model, rng)
    v = rng.normal(size=model.nv)
    reference = JointReference(q=q.copy(), v=v.copy(), a=np.ones(model.nv))
    tau = controller.update(_state(q, v), reference, DT)
    np.testing.assert_array_equal(tau, reference_model.gravity(q))


def test_without_gravity_compensation_zero_error_gives_zero(model, rng):
    """gravity_compensation=False and zero error give exactly zero effort."""
    controller = JointImpedanceController(
        model, *_gains(model, 600.0, 50.0), gravity_compensation=False
    )
    q = random_configuration(model, rng)
    tau = controller.update(_state(q), JointReference.hold(q), DT)
    np.testing.assert_array_equal(tau, np.zeros(model.nv))
    assert np.linalg.norm(model.gravity(q)) > 1.0  # gravity would not have been zero


def test_impedance_law_matches_a_hand_computation(model, reference_model):
    """τ_i = K_i (q*_i − q_i) + D_i (v*_i − v_i) + g_i(q), joint by joint."""
    stiffness = np.array([600.0, 500.0, 300.0, 250.0, 50.0, 40.0, 10.0, 100.0, 80.0])
    damping = np.array([50.0, 45.0, 25.0, 20.0, 3.0, 2.5, 0.5, 4.0, 3.0])
    controller = JointImpedanceController(model, stiffness, damping)
    q = np.array([0.1, 0.4, -0.2, -1.6, 0.3, 1.2, -0.5, 0.01, 0.02])
    v = np.array([0.2, -0.1, 0.0, 0.3, -0.4, 0.5, 0.1, -0.01, 0.02])
    q_ref = np.array([0.15, 0.35, -0.2, -1.5, 0.25, 1.25, -0.4, 0.02, 0.02])
    v_ref = np.array([0.0, 0.1, 0.05, 0.0, -0.2, 0.0, 0.3, 0.0, 0.01])
    zero = np.zeros(model.nv)
    g = reference_model.inverse_dynamics(q, zero, zero)  # RNEA, not the gravity algorithm
    tau = controller.update(_state(q, v), JointReference(q_ref, v_ref, zero), DT)
    for i in range(model.nv):
        expected = stiffness[i] * (q_ref[i] - q[i]) + damping[i] * (v_ref[i] - v[i]) + g[i]
        assert tau[i] == pytest.approx(expected, rel=1e-12, abs=1e-9), model.joint_names[i]
    # Spot check joint 1 fully by hand: 600·0.05 + 50·(−0.2) + g₁.
    assert tau[0] == pytest.approx(30.0 - 10.0 + g[0], abs=1e-9)


def test_staged_gains_apply_only_at_the_next_update(model):
    """Stiffness and damping staged together leave the controller unchanged until update(),
    which installs both before computing; staging again replaces the pending set."""
    k0, d0 = _gains(model, 100.0, 10.0)
    controller = JointImpedanceController(model, k0, d0, gravity_compensation=False)
    k1, d1 = _gains(model, 200.0, 20.0)
    controller.stage_gains({"stiffness": k1, "damping": d1})
    np.testing.assert_array_equal(controller.stiffness, k0)
    np.testing.assert_array_equal(controller.damping, d0)
    q = np.zeros(model.nv)
    state = _state(q, np.full(model.nv, 0.1))
    reference = JointReference(q=q + 0.01, v=np.zeros(model.nv), a=np.zeros(model.nv))
    tau = controller.update(state, reference, DT)
    np.testing.assert_array_equal(controller.stiffness, k1)
    np.testing.assert_array_equal(controller.damping, d1)
    np.testing.assert_allclose(tau, 200.0 * 0.01 - 20.0 * 0.1, rtol=1e-12)  # new gains used
    # Staged gains are copies: mutating the caller's array changes nothing.
    k2 = np.full(model.nv, 300.0)
    controller.stage_gains({"stiffness": k2})
    k2[:] = -1.0
    controller.update(state, reference, DT)
    np.testing.assert_array_equal(controller.stiffness, 300.0)
    np.testing.assert_array_equal(controller.damping, d1)


def test_separately_staged_gains_are_applied_together(model):
    """Stiffness and damping staged in two calls before a tick both take effect at that tick."""
    controller = JointImpedanceController(model, *_gains(model))
    controller.stage_gains({"stiffness": np.full(model.nv, 7.0)})
    controller.stage_gains({"damping": np.full(model.nv, 3.0)})
    np.testing.assert_array_equal(controller.stiffness, 100.0)
    np.testing.assert_array_equal(controller.damping, 10.0)
    q = np.zeros(model.nv)
    controller.update(_state(q), JointReference.hold(q), DT)
    np.testing.assert_array_equal(controller.stiffness, 7.0)
    np.testing.assert_array_equal(controller.damping, 3.0)


def test_gains_staged_from_another_thread_are_never_half_applied(model):
    """While another thread stages matching (K, D) pairs, every tick sees a matching pair."""
    controller = JointImpedanceController(model, *_gains(model, 1.0, 1.0))
    stop = threading.Event()

    def stager():
        value = 1.0
        while not stop.is_set():
            value = value % 50 + 1.0
            controller.stage_gains(
                {"stiffness": np.full(model.nv, value), "damping": np.full(model.nv, value)}
            )

    thread = threading.Thread(target=stager)
    thread.start()
    q = np.zeros(model.nv)
    seen = set()
    try:
        for _ in range(3000):
            controller.update(_state(q), JointReference.hold(q), DT)
            k, d = controller.stiffness, controller.damping
            assert np.all(k == k[0]) and np.all(d == d[0])
            assert k[0] == d[0]
            seen.add(float(k[0]))
    finally:
        stop.set()
        thread.join()
    assert len(seen) > 1  # the stager really changed gains during the run


@pytest.mark.parametrize(
    ("gains", "named"),
    [
        ({"stiffness": np.full(8, 10.0)}, "stiffness: expected 9"),
        ({"damping": np.full(10, 1.0)}, "damping: expected 9"),
        ({"stiffness": np.append(np.full(8, 10.0), -1.0)}, "stiffness: values must be in"),
        ({"damping": np.append(np.full(8, 1.0), np.nan)}, "damping: non-finite"),
        ({"stiffness": np.append(np.full(8, 10.0), np.inf)}, "stiffness: non-finite"),
        ({"stiffnes": np.full(9, 10.0)}, "stiffnes"),
        ({"stiffness": np.full(9, 5.0), "damping": np.full(9, -1.0)}, "damping"),
    ],
    ids=["short", "long", "negative", "nan", "inf", "unknown-name", "half-valid"],
)
def test_invalid_gains_raise_and_keep_the_old_gains(model, gains, named):
    """Invalid gain sets raise GainError naming the problem; nothing is staged, so the old
    gains stay in effect after the next update (a valid half of the set is not applied)."""
    k0, d0 = _gains(model, 123.0, 4.5)
    controller = JointImpedanceController(model, k0, d0)
    with pytest.raises(GainError, match=named):
        controller.stage_gains(gains)
    q = np.zeros(model.nv)
    controller.update(_state(q), JointReference.hold(q), DT)
    np.testing.assert_array_equal(controller.stiffness, k0)
    np.testing.assert_array_equal(controller.damping, d0)


def test_constructor_validates_gains(model):
    """Invalid gains at construction raise GainError too."""
    with pytest.raises(GainError, match="damping"):
        JointImpedanceController(model, np.full(model.nv, 1.0), np.full(model.nv, np.nan))


def test_from_parameters_maps_shuffled_names_to_model_order(model):
    """Per-joint vectors given in a shuffled joint-name order land on the named joints."""
    names = list(model.joint_names)
    np.random.default_rng(5).shuffle(names)
    assert tuple(names) != model.joint_names
    stiffness = {name: 100.0 + 10 * i for i, name in enumerate(model.joint_names)}
    damping = {name: 1.0 + i for i, name in enumerate(model.joint_names)}
    controller = JointImpedanceController.from_parameters(
        model,
        tuple(names),
        {
            "type": "ct_controllers/JointImpedance",
            "stiffness": [stiffness[n] for n in names],
            "damping": [damping[n] for n in names],
            "gravity_compensation": False,
        },
    )
    for name in model.joint_names:
        assert controller.stiffness[model.v_index(name)] == stiffness[name], name
        assert controller.damping[model.v_index(name)] == damping[name], name
    assert controller.gravity_compensation is False


def test_from_parameters_with_the_bundled_config(model):
    """The bundled controllers.yaml gains load in arm-then-gripper order with gravity on."""
    config = bundled_config()
    params = config.controllers["joint_impedance"]
    controller = JointImpedanceController.from_parameters(model, config.joint_names, params)
    assert controller.gravity_compensation is True
    assert controller.stiffness[model.v_index("joint1")] == 600.0
    assert controller.damping[model.v_index("right_finger_joint")] == 4.0


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"damping": [1.0] * 9}, "'stiffness' is missing"),
        ({"stiffness": [1.0] * 9, "damping": [1.0] * 8}, "damping: expected 9"),
        ({"stiffness": [1.0] * 9, "damping": [1.0] * 9, "gravity_compensation": "yes"}, "yes"),
    ],
    ids=["missing", "length", "gravity-not-bool"],
)
def test_from_parameters_rejects_bad_parameters(model, params, named):
    """Missing or malformed parameters raise GainError naming them."""
    with pytest.raises(GainError, match=named):
        JointImpedanceController.from_parameters(model, model.joint_names, params)


def test_from_parameters_requires_every_model_joint(model):
    """Parameters that leave a model joint without a gain are rejected naming the joint (its
    gain would otherwise be whatever np.empty happened to hold)."""
    names = model.joint_names[:-1]
    with pytest.raises(GainError, match="right_finger_joint"):
        JointImpedanceController.from_parameters(
            model, names, {"stiffness": [1.0] * 8, "damping": [1.0] * 8}
        )


# --- optional model terms (issue 3) -----------------------------------------------------------
def _model_terms_case(seed: int = 11):  # type: ignore[no-untyped-def]
    model = new_robot_model()
    rng = np.random.default_rng(seed)
    q = rng.uniform(model.limits.lower, model.limits.upper)
    v = rng.uniform(-1, 1, model.nv)
    reference = JointReference(
        q + rng.uniform(-0.1, 0.1, model.nv), v + 0.1, rng.uniform(-1, 1, model.nv)
    )
    return model, JointState(0.0, q, v), reference


def test_coriolis_term_matches_the_coriolis_matrix() -> None:
    """coriolis_compensation adds C(q, v) v, checked against Pinocchio's Coriolis matrix (a
    separate algorithm from the RNEA-based term the controller uses)."""
    model, state, reference = _model_terms_case()
    k, d = np.full(model.nv, 3.0), np.full(model.nv, 0.5)
    plain = JointImpedanceController(model, k, d, gravity_compensation=False)
    with_coriolis = JointImpedanceController(
        model, k, d, gravity_compensation=False, coriolis_compensation=True
    )
    reference_model = new_robot_model()
    coriolis = (
        pin.computeCoriolisMatrix(reference_model.model, reference_model.data, state.q, state.v)
        @ state.v
    )
    np.testing.assert_allclose(
        with_coriolis.update(state, reference, 0.001) - plain.update(state, reference, 0.001),
        coriolis,
        atol=1e-9,
    )


def test_inertia_decoupling_with_all_terms_is_computed_torque() -> None:
    """inertia_decoupling + gravity + Coriolis gives M(q)(q̈* + K e + D ė) + b(q, v), with M and b
    formed separately; without the model terms it is M(q)(q̈* + K e + D ė) alone."""
    model, state, reference = _model_terms_case(12)
    k, d = np.full(model.nv, 100.0), np.full(model.nv, 20.0)
    command = reference.a + k * (reference.q - state.q) + d * (reference.v - state.v)
    reference_model = new_robot_model()
    mass = reference_model.mass_matrix(state.q)
    full = JointImpedanceController(
        model, k, d, gravity_compensation=True, coriolis_compensation=True, inertia_decoupling=True
    )
    np.testing.assert_allclose(
        full.update(state, reference, 0.001),
        mass @ command + reference_model.bias(state.q, state.v),
        atol=1e-9,
    )
    bare = JointImpedanceController(
        model, k, d, gravity_compensation=False, inertia_decoupling=True
    )
    np.testing.assert_allclose(bare.update(state, reference, 0.001), mass @ command, atol=1e-9)


def test_feed_forward_effort_is_added() -> None:
    """The reference's feed-forward effort τ_ff adds to the impedance output unchanged."""
    model, state, reference = _model_terms_case(13)
    controller = JointImpedanceController(model, np.ones(model.nv), np.ones(model.nv))
    effort = np.linspace(-3, 3, model.nv)
    with_ff = JointReference(reference.q, reference.v, reference.a, effort)
    np.testing.assert_allclose(
        controller.update(state, with_ff, 0.001),
        controller.update(state, reference, 0.001) + effort,
    )


def test_linear_feedback_is_the_torques_sensitivity_to_the_reference(model, rng):
    """(K, D) of linear_feedback are ∂τ/∂q* and ∂τ/∂v* of compute() (central differences at
    random states): diag(K), diag(D) plainly, M(q)K and M(q)D with inertia decoupling."""
    stiffness, damping = rng.uniform(10.0, 500.0, model.nv), rng.uniform(1.0, 50.0, model.nv)
    for decoupling in (False, True):
        controller = JointImpedanceController(
            model, stiffness, damping, inertia_decoupling=decoupling
        )
        q = random_configuration(model, rng)
        expected_k, expected_d = controller.linear_feedback(q)
        by_q, by_v = reference_sensitivity(controller, _state(q, rng.normal(size=model.nv)))
        np.testing.assert_allclose(by_q, expected_k, rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(by_v, expected_d, rtol=1e-6, atol=1e-5)
