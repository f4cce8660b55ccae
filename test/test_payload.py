"""A payload on the controllers' model (ct_controllers.model.payload, Controller.stage_payload,
ct_controllers.runtime.payload): checked against the arm's limits, placed on the TCP's body as
MuJoCo composes it, staged and taken at a tick boundary like gains, clearable, and — identified
from holds — making computed torque track a 1 kg object as well as the exact model does."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from helpers import bundled_config, bundled_description, home_configuration, new_robot_model

from ct_controllers.bench.tracking import SineTrajectory, simulate
from ct_controllers.controllers.cartesian_impedance import CartesianImpedanceController
from ct_controllers.controllers.computed_torque import ComputedTorqueController
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.model.payload import Payload, PayloadError, PayloadLimits, check_payload
from ct_controllers.model.payload_identification import (
    PayloadEstimate,
    identify_payload,
    plan_holds,
)
from ct_controllers.runtime.payload import stage_payload
from ct_controllers.sim.mujoco_plant import limiter_for
from ct_controllers.sim.payload_plant import PayloadPlant, static_holds
from ct_controllers.types import JointReference, JointState

LIMITS = PayloadLimits(rated_mass=3.0, max_com_distance=0.3)
PAYLOAD = Payload(1.0, (0.01, -0.015, 0.04), np.diag([2e-3, 3e-3, 1e-3]))
STIFFNESS = np.array([600.0, 600.0, 300.0, 300.0, 100.0, 100.0, 50.0, 100.0, 100.0])
DAMPING = np.array([50.0, 50.0, 25.0, 25.0, 6.0, 6.0, 3.0, 4.0, 4.0])


@pytest.mark.parametrize(
    ("build", "named"),
    [
        (lambda: Payload(float("nan"), (0, 0, 0)), "mass must be finite"),
        (lambda: Payload(1.0, (0, float("inf"), 0)), "com must be finite"),
        (lambda: Payload(1.0, (0, 0)), "com must have shape"),
        (lambda: check_payload(Payload(-0.1, (0, 0, 0)), LIMITS), "mass -0.1 kg is negative"),
        (lambda: check_payload(Payload(3.5, (0, 0, 0)), LIMITS), "above the rated payload 3 kg"),
        (lambda: check_payload(Payload(1.0, (0, 0, 0.5)), LIMITS), "com [0.0, 0.0, 0.5] m"),
        (
            lambda: check_payload(Payload(1.0, (0, 0, 0), np.diag([1e-3, 1e-3, 5e-3])), LIMITS),
            "not a rigid body's",
        ),
    ],
)
def test_bad_payloads_are_refused_naming_the_field(build, named) -> None:
    """A NaN or infinite mass or COM, a COM of the wrong size, a negative mass, one above the
    rated payload, a COM beyond reach of the TCP and an inertia no rigid body has are each
    refused with a PayloadError that names the field and the value."""
    with pytest.raises(PayloadError, match=named.replace("[", r"\[").replace("]", r"\]")):
        build()


def test_loaded_model_matches_mujocos_composition_of_the_tcp_body() -> None:
    """The payload's effect on g(q) and M(q) (loaded minus unloaded) of the model with the
    payload (mass, COM off every axis, inertia) equals MuJoCo's for a body of that mass and
    inertia fixed at that COM — MuJoCo composes the loaded link itself — at random
    configurations; and the unloaded model is unchanged."""
    model = new_robot_model()
    before = [model.model.inertias[j].copy() for j in range(model.model.njoints)]
    loaded = model.with_payload(PAYLOAD)
    description = bundled_description()
    plants = [PayloadPlant(description, model, payload) for payload in (None, PAYLOAD)]
    rng = np.random.default_rng(7)
    for _ in range(4):
        q = rng.uniform(model.limits.lower, model.limits.upper)
        gravity, mass = [], []
        for plant in plants:
            plant.reset(q, np.zeros(model.nv))
            dof = plant._dof
            gravity.append(plant.data.qfrc_bias[dof].copy())
            full = np.zeros((plant.model.nv, plant.model.nv))
            mujoco.mj_fullM(plant.model, plant.data, full)
            mass.append(full[np.ix_(dof, dof)])
        np.testing.assert_allclose(
            loaded.gravity(q) - model.gravity(q), gravity[1] - gravity[0], atol=1e-9
        )
        np.testing.assert_allclose(
            loaded.mass_matrix(q) - model.mass_matrix(q), mass[1] - mass[0], atol=1e-7
        )
    for j, inertia in enumerate(before):
        assert model.model.inertias[j] == inertia
    assert loaded.with_payload(None).model is model.model  # cleared: the shared unloaded model


@pytest.mark.parametrize("kind", ["computed_torque", "joint_impedance", "cartesian_impedance"])
def test_a_staged_payload_is_taken_at_the_next_tick_with_staged_gains_and_cleared(kind) -> None:
    """A staged payload changes nothing until the controller's next tick; from that tick its
    efforts are those of the same controller built on the loaded model (computed torque's
    M a + b, joint impedance's gravity compensation, Cartesian impedance's g), gains staged
    before the tick are taken in the same tick, and staging None restores the unloaded
    efforts exactly."""
    model = new_robot_model()
    rng = np.random.default_rng(2)
    q = home_configuration(model) + rng.uniform(-0.2, 0.2, model.nv) * (model.limits.upper > 1)
    state = JointState(0.0, q, rng.uniform(-0.5, 0.5, model.nv))
    reference = JointReference(q + 0.01, np.zeros(model.nv), rng.uniform(-1, 1, model.nv))
    params = bundled_config().controllers

    def build(robot):
        if kind == "cartesian_impedance":
            return CartesianImpedanceController(robot)
        names = bundled_config().joint_names
        cls = ComputedTorqueController if kind == "computed_torque" else JointImpedanceController
        return cls.from_parameters(robot, names, params[kind])

    controller = build(model.with_own_data())
    unloaded = build(model.with_own_data())
    loaded = build(model.with_payload(PAYLOAD))
    references = (unloaded, loaded)

    def tick() -> tuple[np.ndarray, ...]:
        """One tick of the controller and of both references (same history: the Cartesian
        law's commanded pose is state)."""
        return tuple(c.update(state, reference, 1e-3) for c in (controller, *references))

    effort, without, _ = tick()
    np.testing.assert_array_equal(effort, without)
    controller.stage_payload(PAYLOAD)
    assert controller.payload is None  # staged, not taken: the model is the unloaded one
    assert controller.model.model is model.model
    if kind != "cartesian_impedance":
        name = controller.GAIN_NAMES[0]
        gains = {name: getattr(controller, name) * 0.5}
        for each in (controller, *references):
            each.stage_gains(gains)
    effort, without, with_payload = tick()
    np.testing.assert_allclose(effort, with_payload, atol=1e-10)
    assert not np.allclose(effort, without)
    assert controller.payload is PAYLOAD
    controller.stage_payload(None)
    effort, without, _ = tick()
    np.testing.assert_allclose(effort, without, atol=1e-10)
    assert controller.payload is None and controller.model.model is model.model


def test_stack_payload_refuses_bad_input_and_changes_nothing() -> None:
    """The stack's payload set checks the limits first: a negative mass, one above the rated
    payload and a COM out of reach are refused naming it, and no controller takes anything at
    its next tick; a good payload is staged on the model-based controllers only, by name."""
    model = new_robot_model()
    config = bundled_config()
    controllers = {
        "computed_torque": ComputedTorqueController.from_parameters(
            model.with_own_data(), config.joint_names, config.controllers["computed_torque"]
        ),
        "joint_impedance": JointImpedanceController.from_parameters(
            model.with_own_data(), config.joint_names, config.controllers["joint_impedance"]
        ),
    }
    state = JointState(0.0, home_configuration(model), np.zeros(model.nv))
    hold = JointReference(state.q, np.zeros(model.nv), np.zeros(model.nv))
    for bad, named in (
        (Payload(-1.0, (0, 0, 0)), "negative"),
        (Payload(4.0, (0, 0, 0)), "rated"),
        (Payload(1.0, (1.0, 0, 0)), "com"),
    ):
        with pytest.raises(PayloadError, match=named):
            stage_payload(controllers, bad, LIMITS)
        for controller in controllers.values():
            controller.update(state, hold, 1e-3)
            assert controller.payload is None and controller.model.model is model.model
    assert stage_payload(controllers, PAYLOAD, LIMITS) == tuple(controllers)
    for controller in controllers.values():
        controller.update(state, hold, 1e-3)
        assert controller.payload is PAYLOAD


def test_identified_payload_makes_computed_torque_track_like_the_exact_model() -> None:
    """Computed torque on MuJoCo carrying a 1 kg object (seed-004 sine on the seven arm joints,
    3 s, dt 1 ms, the stack's limiter), the controller's model without the payload, with the
    one identified from eight holds, and with the exact one: the identified model's RMS error
    is within 2x of the exact model's and at least 20x below the unloaded model's (measured:
    17.7, 0.129, 0.125 mrad)."""
    model = new_robot_model()
    truth = Payload(1.0, (0.01, -0.015, 0.04))
    description = bundled_description()
    start = home_configuration(model)
    holds = static_holds(
        PayloadPlant(description, model, truth),
        plan_holds(model, start).configurations,
        STIFFNESS,
        DAMPING,
    )
    estimate = identify_payload(model, holds.q, holds.effort, holds.v)
    assert isinstance(estimate, PayloadEstimate), estimate
    moving = np.zeros(model.nv, dtype=bool)
    moving[model.indices(bundled_config().arm_joints)] = True
    trajectory = SineTrajectory.seed_protocol(start, moving)
    gains = np.full(model.nv, 400.0), np.full(model.nv, 40.0)  # [s⁻²], [s⁻¹]
    errors = {}
    for name, payload in (("none", None), ("identified", estimate.payload), ("exact", truth)):
        controller = ComputedTorqueController(model.with_payload(payload), *gains)
        result = simulate(
            PayloadPlant(description, model, truth),
            controller,
            trajectory,
            1e-3,
            3.0,
            "end",
            limiter_for(model, 1e-3),
        )
        assert not result.diverged
        errors[name] = result.e_rms
    assert errors["identified"] <= 2.0 * errors["exact"], errors
    assert errors["none"] >= 20.0 * errors["identified"], errors


def test_the_configuration_states_the_limits_and_refuses_payloads_until_it_does() -> None:
    """``payload.rated_mass`` and ``payload.max_com_distance`` come from the configuration: by
    default (0 kg, nothing stated) every payload with mass is refused, the message saying the
    rating is not configured; with a rating, payloads up to it are accepted; a negative rating
    is refused at load naming the entry."""
    from ct_controllers.config import ConfigError, load_config

    unrated = bundled_config().payload_limits
    with pytest.raises(PayloadError, match=r"payload\.rated_mass is not configured"):
        check_payload(Payload(0.1, (0, 0, 0)), unrated)
    check_payload(Payload(0.0, (0, 0, 0)), unrated)  # nothing carried: always allowed
    rated = load_config(overrides={"payload.rated_mass": 3.0}).payload_limits
    assert rated == PayloadLimits(3.0, 0.3)
    check_payload(PAYLOAD, rated)
    with pytest.raises(ConfigError, match=r"payload\.rated_mass"):
        load_config(overrides={"payload.rated_mass": -1.0})
