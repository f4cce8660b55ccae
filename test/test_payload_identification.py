"""ct_controllers.model.payload_identification: mass and centre of mass of a payload from joint
torques measured in static holds, checked against MuJoCo's truth (a body of known mass fixed at
a known centre of mass, held by a PD + unloaded-gravity law until it settles), and refused when
the data cannot support an estimate."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import bundled_description, home_configuration, new_robot_model

from ct_controllers.model.payload import Payload
from ct_controllers.model.payload_identification import (
    IdentificationSettings,
    PayloadEstimate,
    PayloadRefusal,
    PayloadRegressor,
    Refusal,
    identify_mass,
    identify_payload,
    plan_holds,
    supporting_joints,
)
from ct_controllers.sim.payload_plant import Holds, PayloadPlant, static_holds

# Hold gains of the bundled configuration's joint impedance (per joint, model order).
STIFFNESS = np.array([600.0, 600.0, 300.0, 300.0, 100.0, 100.0, 50.0, 100.0, 100.0])
DAMPING = np.array([50.0, 50.0, 25.0, 25.0, 6.0, 6.0, 3.0, 4.0, 4.0])
COM = (0.01, -0.015, 0.04)  # [m] in the TCP frame: off every axis
MASS_TOLERANCE = 0.05  # [-] of the true mass
COM_TOLERANCE = 0.01  # [m]


@functools.cache
def _plan() -> tuple[np.ndarray, ...]:
    model = new_robot_model()
    return plan_holds(model, home_configuration(model)).configurations


@functools.cache
def _holds(mass: float | None) -> Holds:
    """The planned holds in MuJoCo with a payload of ``mass`` [kg] at :data:`COM` (None: the
    empty gripper)."""
    model = new_robot_model()
    payload = None if mass is None else Payload(mass, COM)
    plant = PayloadPlant(bundled_description(), model, payload)
    return static_holds(plant, _plan(), STIFFNESS, DAMPING, settle=1.0, average=0.2)


def _check(result: PayloadEstimate | PayloadRefusal, mass: float) -> PayloadEstimate | None:
    """An estimate must be right (mass within 5 %, c within 1 cm of MuJoCo's); a refusal is
    allowed. The estimate, or None."""
    if isinstance(result, PayloadRefusal):
        return None
    assert abs(result.payload.mass - mass) <= MASS_TOLERANCE * mass, result
    assert np.linalg.norm(result.payload.com - np.array(COM)) <= COM_TOLERANCE, result
    return result


def test_regressor_times_parameters_is_the_loaded_models_extra_gravity() -> None:
    """A(q) [m, m c] equals g(q) of the model with the payload added as a spatial inertia
    (``pin.Inertia`` moved by the TCP placement, through RNEA) minus the unloaded g(q), at random
    configurations: the regressor's columns and the TCP-frame change of parameters are right."""
    model = new_robot_model()
    payload = Payload(0.7, (0.02, -0.01, 0.05))
    loaded = model.with_payload(payload)
    regressor = PayloadRegressor(model)
    rng = np.random.default_rng(3)
    theta = np.r_[payload.mass, payload.mass * payload.com]
    for _ in range(5):
        q = rng.uniform(model.limits.lower, model.limits.upper)
        extra = (loaded.gravity(q) - model.gravity(q))[regressor.rows]
        np.testing.assert_allclose(regressor.matrix(q) @ theta, extra, atol=1e-10)
        np.testing.assert_allclose(
            regressor.unloaded_gravity(q), model.gravity(q)[regressor.rows], atol=1e-12
        )
    assert supporting_joints(model) == tuple(f"joint{i}" for i in range(1, 8))


@pytest.mark.parametrize("mass", [0.1, 0.5, 1.0])
def test_mujoco_holds_identify_mass_and_com(mass: float) -> None:
    """Holds in the eight planned configurations with a MuJoCo body of 0.1, 0.5 or 1.0 kg at a
    known c: 0.5 and 1 kg are identified (mass within 5 %, c within 1 cm, a condition ≤ 50);
    0.1 kg is identified as well or refused as uncertain, never wrong."""
    holds = _holds(mass)
    result = identify_payload(new_robot_model(), holds.q, holds.effort, holds.v)
    estimate = _check(result, mass)
    if mass >= 0.5:
        assert estimate is not None, result
        assert estimate.condition <= 50.0
        assert estimate.samples == len(_plan())
        # The confidence is honest: the truth is within 3σ of the estimate.
        assert abs(estimate.payload.mass - mass) <= 3 * estimate.mass_std + 1e-3
    else:
        assert estimate is not None or result.reason is Refusal.UNCERTAIN, result


@pytest.mark.parametrize("sigma", [0.02, 0.05])
@pytest.mark.parametrize("mass", [0.1, 0.5, 1.0])
def test_noisy_torques_give_a_right_estimate_or_a_refusal(mass: float, sigma: float) -> None:
    """Gaussian noise of σ = 0.02 or 0.05 N·m on every hold's measured torques, 20 draws, the
    identification told σ: each result is within the tolerances or refused — never a confident
    wrong answer; at 1 kg and 0.02 N·m every draw still gives an estimate (measured: 20/20;
    0.5 kg 14/20; 0.1 kg and everything at 0.05 N·m refused as uncertain)."""
    holds = _holds(mass)
    model = new_robot_model()
    settings = IdentificationSettings(torque_noise=sigma)
    rng = np.random.default_rng(11)
    estimates = 0
    for _ in range(20):
        noisy = holds.effort + rng.normal(0.0, sigma, holds.effort.shape)
        result = identify_payload(model, holds.q, noisy, holds.v, settings=settings)
        estimates += _check(result, mass) is not None
    if mass == 1.0 and sigma == 0.02:
        assert estimates >= 18


def test_a_single_configuration_or_repeated_holds_are_refused_as_unexcited() -> None:
    """One hold, and the same hold eight times, cannot determine the component of m c along
    gravity: refused as unexcited with the condition and the least excited parameters named."""
    holds = _holds(1.0)
    model = new_robot_model()
    for q, effort in (
        (holds.q[:1], holds.effort[:1]),
        (np.repeat(holds.q[:1], 8, axis=0), np.repeat(holds.effort[:1], 8, axis=0)),
    ):
        result = identify_payload(model, q, effort)
        assert isinstance(result, PayloadRefusal), result
        assert result.reason is Refusal.UNEXCITED
        assert result.condition > 50.0
        assert "least excited: com" in result.message


def test_turning_only_about_the_gravity_axis_is_unexcited() -> None:
    """Holds that differ only by the first joint (a turn about the vertical) leave the TCP's
    attitude to gravity unchanged: refused as unexcited, whatever the number of holds."""
    model = new_robot_model()
    start = home_configuration(model)
    configurations = []
    for angle in np.linspace(-1.0, 1.0, 6):
        q = start.copy()
        q[model.q_index(supporting_joints(model)[0])] += angle
        configurations.append(q)
    loaded = model.with_payload(Payload(1.0, COM))
    efforts = np.array([loaded.gravity(q) for q in configurations])
    result = identify_payload(model, np.array(configurations), efforts)
    assert isinstance(result, PayloadRefusal) and result.reason is Refusal.UNEXCITED, result


def test_bad_samples_are_refused_with_a_reason_naming_them() -> None:
    """A NaN torque (not finite, the sample named), a joint without any measured effort (named;
    leaving it out, the others identify the payload), a joint moving faster than the hold
    limit (moving), fewer equations than unknowns (too few) and an empty gripper (no mass) are
    each refused with their reason."""
    holds = _holds(1.0)
    model = new_robot_model()
    effort = holds.effort.copy()
    effort[2, 3] = np.nan
    result = identify_payload(model, holds.q, effort)
    assert isinstance(result, PayloadRefusal) and result.reason is Refusal.NOT_FINITE
    assert "[2]" in result.message
    unmeasured = holds.effort.copy()
    wrist = supporting_joints(model)[-1]
    unmeasured[:, model.q_index(wrist)] = np.nan  # a backend that measures no effort there
    result = identify_payload(model, holds.q, unmeasured)
    assert isinstance(result, PayloadRefusal) and result.reason is Refusal.NOT_FINITE
    assert f"no measured effort on joint(s) {wrist}" in result.message
    without = [name for name in supporting_joints(model) if name != wrist]
    assert _check(identify_payload(model, holds.q, unmeasured, joints=without), 1.0) is not None
    moving = holds.v.copy()
    moving[4, 1] = 0.2  # [rad/s]
    result = identify_payload(model, holds.q, holds.effort, moving)
    assert isinstance(result, PayloadRefusal) and result.reason is Refusal.MOVING
    assert "[4]" in result.message
    result = identify_payload(
        model, holds.q[:1], holds.effort[:1], settings=IdentificationSettings(estimate_bias=True)
    )
    assert isinstance(result, PayloadRefusal) and result.reason is Refusal.TOO_FEW
    empty = _holds(None)
    result = identify_payload(model, empty.q, empty.effort, empty.v)
    assert isinstance(result, PayloadRefusal) and result.reason is Refusal.NO_MASS, result
    with pytest.raises(ValueError, match="effort"):
        identify_payload(model, holds.q, holds.effort[:, :3])


def test_torque_bias_is_cancelled_by_differencing_against_empty_holds() -> None:
    """A constant torque bias of up to 0.5 N·m per joint (a sensor offset) on both the loaded
    and the empty holds: differencing against the empty holds identifies 1 kg within the
    tolerances; the same data without differencing is refused (the residual exposes the bias)
    or, if estimated, right; estimating the bias as unknowns gives a right answer or a refusal."""
    loaded, empty = _holds(1.0), _holds(None)
    model = new_robot_model()
    bias = np.zeros(model.nv)
    rows = model.indices(supporting_joints(model))
    bias[rows] = np.random.default_rng(5).uniform(-0.5, 0.5, rows.size)
    differenced = identify_payload(
        model,
        loaded.q,
        loaded.effort + bias,
        loaded.v,
        empty_q=empty.q,
        empty_effort=empty.effort + bias,
    )
    assert _check(differenced, 1.0) is not None, differenced
    plain = identify_payload(model, loaded.q, loaded.effort + bias, loaded.v)
    _check(plain, 1.0)  # refused, or right
    estimated = identify_payload(
        model,
        loaded.q,
        loaded.effort + bias,
        loaded.v,
        settings=IdentificationSettings(estimate_bias=True, max_condition=200.0),
    )
    if _check(estimated, 1.0) is not None:
        assert isinstance(estimated, PayloadEstimate)
        np.testing.assert_allclose(estimated.bias[rows], bias[rows], atol=0.05)


def test_planned_holds_stay_inside_the_limits_and_near_the_start() -> None:
    """Every planned hold is within the joint limits by the margin and moves only the three
    wrist joints, each at most the amplitude from the start — also from a start near a limit
    (offsets folded back inside); the plan's condition is the identification's excitation
    measure and is below the default limit."""
    model = new_robot_model()
    start = home_configuration(model)
    wrist = model.indices(supporting_joints(model)[-3:])
    start_near_limit = start.copy()
    start_near_limit[wrist[1]] = model.limits.upper[wrist[1]] - 0.1
    for origin in (start, start_near_limit):
        plan = plan_holds(model, origin, amplitude=0.6, margin=0.05)
        assert plan.condition <= 50.0
        for q in plan.configurations:
            assert np.all(q[wrist] >= model.limits.lower[wrist] + 0.05 - 1e-12)
            assert np.all(q[wrist] <= model.limits.upper[wrist] - 0.05 + 1e-12)
            others = np.setdiff1d(np.arange(model.nv), wrist)
            np.testing.assert_array_equal(q[others], origin[others])
            assert np.all(np.abs(q - origin) <= 0.6 + 1e-12)


def test_per_joint_noise_weights_the_precise_joints() -> None:
    """σ = 0.2 N·m on the two joints nearest the base, 0.01 N·m elsewhere (20 draws): told so
    per joint, the weighted fit identifies 1 kg every time within the tolerances (measured
    20/20); told one σ of 0.2 N·m for all, it refuses every time as uncertain (measured 0/20);
    never a wrong estimate. A σ for a joint whose torque is not used is refused naming it."""
    holds = _holds(1.0)
    model = new_robot_model()
    arm = supporting_joints(model)
    shoulder = model.indices(arm[:2])
    weighted = IdentificationSettings(joint_noise={arm[0]: 0.2, arm[1]: 0.2})
    uniform = IdentificationSettings(torque_noise=0.2)
    rng = np.random.default_rng(8)
    counts = {"weighted": 0, "uniform": 0}
    for _ in range(20):
        effort = holds.effort + rng.normal(0.0, 0.01, holds.effort.shape)
        effort[:, shoulder] += rng.normal(0.0, 0.2, (effort.shape[0], shoulder.size))
        for name, settings in (("weighted", weighted), ("uniform", uniform)):
            result = identify_payload(model, holds.q, effort, holds.v, settings=settings)
            counts[name] += _check(result, 1.0) is not None
    assert counts["weighted"] >= 18 and counts["uniform"] == 0, counts
    unused = next(name for name in model.joint_names if name not in arm)
    with pytest.raises(ValueError, match=unused):
        identify_payload(
            model,
            holds.q,
            holds.effort,
            settings=IdentificationSettings(joint_noise={unused: 0.1}),
        )


@pytest.mark.parametrize("mass", [0.1, 1.0])
def test_the_mass_alone_from_one_configuration(mass: float) -> None:
    """One MuJoCo hold (the first planned configuration) does not determine the COM
    (identify_payload: unexcited) but does determine the mass: identify_mass gives it within
    1 % of MuJoCo's with 3σ under 25 g, ``com_determined`` False and NaN COM errors; the COM it
    returns reproduces the payload's gravity torques at that configuration (Pinocchio, 1e-3
    N·m), though not the true COM (its component along gravity is not determined)."""
    holds = _holds(mass)
    q, effort, v = holds.q[:1], holds.effort[:1], holds.v[:1]
    model = new_robot_model()
    refused = identify_payload(model, q, effort, v)
    assert isinstance(refused, PayloadRefusal) and refused.reason == Refusal.UNEXCITED
    result = identify_mass(model, q, effort, v)
    assert isinstance(result, PayloadEstimate), result
    assert abs(result.payload.mass - mass) <= 0.01 * mass, result
    assert 3 * result.mass_std <= 0.025 and not result.com_determined
    assert np.all(np.isnan(result.com_std)) and result.condition < 50.0
    joints = model.indices(supporting_joints(model))
    truth = model.with_payload(Payload(mass, COM)).gravity(q[0]) - model.gravity(q[0])
    staged = model.with_payload(result.payload).gravity(q[0]) - model.gravity(q[0])
    np.testing.assert_allclose(staged[joints], truth[joints], atol=1e-3 + 0.01 * mass)


def test_the_mass_alone_is_refused_when_nothing_carries_it() -> None:
    """Empty-gripper holds at one configuration: identify_mass refuses (no mass distinguishable
    from zero), never a mass; bias estimation with it is a caller's error (ValueError)."""
    holds = _holds(None)
    model = new_robot_model()
    result = identify_mass(model, holds.q[:1], holds.effort[:1], holds.v[:1])
    assert isinstance(result, PayloadRefusal) and result.reason == Refusal.NO_MASS, result
    with pytest.raises(ValueError, match="bias"):
        identify_mass(
            model,
            holds.q[:1],
            holds.effort[:1],
            settings=IdentificationSettings(estimate_bias=True),
        )
