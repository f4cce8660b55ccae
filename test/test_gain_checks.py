"""ct_controllers.runtime.gain_checks: live gain sets judged as a whole state (no joint without
feedback, never worse and always a way back to the configured gains, a warning far above them),
on the bundled arm's Pinocchio model and the bundled controllers.yaml gains."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import bundled_config, new_robot_model

from ct_controllers.controllers.computed_torque import ComputedTorqueController
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.runtime.gain_checks import (
    LARGE_FACTOR,
    judge_gains,
    large_gains,
    moves_toward,
    recovery_radius,
)
from ct_controllers.runtime.gain_stability import GainStability, check_configurations
from ct_controllers.runtime.stack import to_model_order

JOINTS = bundled_config().joint_names


def _model_order(values: object) -> np.ndarray:
    return to_model_order(_model(), JOINTS, values, "gains")


@functools.cache
def _model():
    return new_robot_model()


@functools.cache
def _home() -> np.ndarray:
    return _model_order(bundled_config().home_positions)


def _configured() -> dict[str, np.ndarray]:
    """The bundled joint impedance gains (model order): K [N·m/rad | N/m], D [N·m·s/rad | N·s/m]."""
    params = bundled_config().controllers["joint_impedance"]
    return {
        "stiffness": _model_order(params["stiffness"]),
        "damping": _model_order(params["damping"]),
    }


@functools.cache
def _check(period: float = 1e-3, delay: int = 0) -> GainStability:
    """The bundled joint impedance's stability check at ``period`` [s] with ``delay`` periods."""
    gains = _configured()
    controller = JointImpedanceController(_model(), gains["stiffness"], gains["damping"])
    configurations = check_configurations(_model(), _home())
    return GainStability(_model(), controller, configurations, period, delay)


def _with(gains: dict[str, np.ndarray], gain: str, joint: str, value: float) -> np.ndarray:
    """``gains[gain]`` with one joint's value replaced."""
    out = gains[gain].copy()
    out[list(JOINTS).index(joint)] = value
    return out


def _judge(current, change, check=None, allow_free_joints=False, q="home"):
    return judge_gains(
        "joint_impedance",
        check or _check(),
        current,
        change,
        _configured(),
        _home() if q == "home" else q,
        allow_free_joints=allow_free_joints,
    )


def test_a_set_leaving_a_joint_without_feedback_is_refused_naming_only_that_joint() -> None:
    """Judged on the whole state: with every stiffness already 0 (a stable state: the damping
    still acts), a set of damping 0 on joint7 alone leaves joint7 with no feedback at all, so it
    is refused naming joint7 and no other joint; damping 0 everywhere names all nine. The same
    set alone from the configured gains (stiffness still there) is no free-joint matter."""
    configured = _configured()
    no_stiffness = {**configured, "stiffness": np.zeros(len(JOINTS))}
    assert _judge(configured, {"stiffness": no_stiffness["stiffness"]}).accepted
    verdict = _judge(no_stiffness, {"damping": _with(configured, "damping", "joint7", 0.0)})
    assert verdict.refusal is not None
    assert "no feedback at all" in verdict.refusal and "joint joint7 " in verdict.refusal
    assert not any(f"{joint} " in verdict.refusal for joint in JOINTS if joint != "joint7")
    assert "allow_free_joints" in verdict.refusal and "not applied" in verdict.refusal
    everything = _judge(no_stiffness, {"damping": np.zeros(len(JOINTS))})
    assert everything.refusal is not None
    assert all(joint in everything.refusal for joint in JOINTS)
    alone = _judge(configured, {"damping": _with(configured, "damping", "joint7", 0.0)})
    assert alone.refusal is None or "no feedback" not in alone.refusal


def test_allow_free_joints_accepts_a_joint_without_feedback_with_a_warning() -> None:
    """With allow_free_joints the same set is applied, and a warning names the free joint."""
    configured = _configured()
    no_stiffness = {**configured, "stiffness": np.zeros(len(JOINTS))}
    change = {"damping": _with(configured, "damping", "joint7", 0.0)}
    verdict = _judge(no_stiffness, change, allow_free_joints=True)
    assert verdict.accepted, verdict.refusal
    assert any("joint7" in w and "without any feedback" in w for w in verdict.warnings)


def test_a_joint_without_feedback_is_seen_through_the_inertia_too() -> None:
    """Computed torque's kp [s⁻²], kd [s⁻¹] act through M(q) (K = M·diag(kp)): kp = kd = 0 on
    left_finger_joint leaves exactly that joint without feedback, although M couples joints."""
    params = bundled_config().controllers["computed_torque"]
    kp, kd = _model_order(params["kp"]), _model_order(params["kd"])
    controller = ComputedTorqueController(_model(), kp, kd)
    check = GainStability(_model(), controller, check_configurations(_model(), _home()), 1e-3, 0)
    gains = {"kp": kp, "kd": kd}
    change = {
        "kp": _with(gains, "kp", "left_finger_joint", 0.0),
        "kd": _with(gains, "kd", "left_finger_joint", 0.0),
    }
    verdict = judge_gains("computed_torque", check, gains, change, gains, _home())
    assert verdict.refusal is not None and "joint left_finger_joint " in verdict.refusal


@pytest.mark.parametrize("delay", [0, 1], ids=["mujoco", "bus"])
@pytest.mark.parametrize("first", ["stiffness", "damping"])
@pytest.mark.parametrize("start", ["free", "no_stiffness"])
def test_the_configured_gains_come_back_in_either_order(delay: int, first: str, start: str):
    """From every gain 0 (allow_free_joints) or from stiffness 0 with the damping configured,
    restoring the configured stiffness and damping one set at a time is accepted whichever
    comes first, with or without a period of delay, and ends stable. (Stiffness first from the
    free state passes through the undamped configured stiffness, radius just above 1: the
    measured defect, refused before.)"""
    check = _check(1e-3, delay)
    configured = _configured()
    zeros = np.zeros(len(JOINTS))
    state = {
        "stiffness": zeros,
        "damping": zeros if start == "free" else configured["damping"],
    }
    second = "damping" if first == "stiffness" else "stiffness"
    for gain in (first, second):
        verdict = _judge(state, {gain: configured[gain]}, check, allow_free_joints=True)
        assert verdict.accepted, verdict.refusal
        state = {**state, gain: configured[gain]}
    assert verdict.here is not None and verdict.here.stable


def test_the_way_back_is_marginal_and_warned_of() -> None:
    """The measured case: stiffness restored before damping from the free state is a marginal
    state (radius above 1, within the recovery bound); it is applied with a warning saying so."""
    zeros = np.zeros(len(JOINTS))
    free = {"stiffness": zeros, "damping": zeros}
    verdict = _judge(free, {"stiffness": _configured()["stiffness"]}, allow_free_joints=True)
    assert verdict.accepted and verdict.here is not None and not verdict.here.stable
    assert any("step back toward the configured gains" in w for w in verdict.warnings)


def test_the_recovery_bound_is_the_undamped_configured_stiffness() -> None:
    """The bound is computed, not chosen: for the two-gain impedance it is the worse of the two
    half-restored states, here the configured stiffness without damping (the damping without
    stiffness leaves an integrator: exactly 1); just above 1 at 1 kHz (the zero-order hold's
    growth, √(1 + ω²T²/2)), larger with a period of delay, larger again at 500 Hz."""
    configured = _configured()
    zeros = np.zeros(len(JOINTS))
    undamped = _check().worst({"stiffness": configured["stiffness"], "damping": zeros})
    assert undamped is not None
    assert recovery_radius(_check(), configured) == pytest.approx(undamped.radius)
    assert 1.0 + 1e-4 < undamped.radius < 1.002
    with_delay = recovery_radius(_check(1e-3, 1), configured)
    assert undamped.radius < with_delay < recovery_radius(_check(2e-3, 1), configured)


def test_unstable_sets_are_still_refused() -> None:
    """From the configured gains: damping 10⁴ everywhere (radius far above 1) is refused naming
    the rate and the radius; damping 0 everywhere (marginal, 1.0007, but away from the
    configured gains) is refused as no step back. From every gain 0: twice the configured
    stiffness without damping overshoots the configured gains and is refused too."""
    configured = _configured()
    zeros = np.zeros(len(JOINTS))
    big = _judge(configured, {"damping": np.full(len(JOINTS), 1e4)})
    assert big.refusal is not None and big.here is not None and big.here.radius > 100
    assert "update_rate 1000 Hz" in big.refusal and "spectral radius" in big.refusal
    assert "not applied" in big.refusal
    undamped = _judge(configured, {"damping": zeros})
    assert undamped.refusal is not None and "not a step back" in undamped.refusal
    free = {"stiffness": zeros, "damping": zeros}
    overshoot = _judge(free, {"stiffness": 2 * configured["stiffness"]}, allow_free_joints=True)
    assert overshoot.refusal is not None and "spectral radius" in overshoot.refusal


def test_a_set_that_makes_nothing_worse_is_accepted_where_the_configured_gains_grow() -> None:
    """At 100 Hz over a bus the configured gains are unstable where the arm is. A quarter of the
    stiffness lowers the radius (still above 1): applied, with a warning that it is still
    unstable; twice the stiffness raises it and moves away from the configured gains: refused."""
    check = _check(1e-2, 1)
    configured = _configured()
    before = check.at(_home(), configured)
    assert before is not None and not before.stable
    softer = _judge(configured, {"stiffness": configured["stiffness"] / 4}, check)
    assert softer.accepted, softer.refusal
    assert softer.here is not None and 1.0 < softer.here.radius < before.radius
    assert any("makes nothing worse" in w for w in softer.warnings)
    stiffer = _judge(configured, {"stiffness": configured["stiffness"] * 2}, check)
    assert stiffer.refusal is not None


def test_gains_far_above_the_configured_ones_are_applied_with_a_warning() -> None:
    """A uniform stiffness of 5143 N·m/rad (the measured batch; wrist configured 50) is stable
    at 1 kHz and applied, with one warning naming each joint above 10× and its factor (joint7
    103×) and not joint1/joint2 (600 configured: 8.6×)."""
    verdict = _judge(_configured(), {"stiffness": np.full(len(JOINTS), 5143.0)})
    assert verdict.accepted, verdict.refusal
    (warning,) = [w for w in verdict.warnings if "above 10×" in w]
    assert "stiffness" in warning and "joint7 (103×)" in warning
    for joint in ("joint3", "joint4", "joint5", "joint6", "left_finger_joint"):
        assert f"{joint} (" in warning
    assert "joint1 (" not in warning and "joint2 (" not in warning


def test_large_gains_compare_per_joint_and_name_a_configured_zero() -> None:
    """Exactly 10× is not above it; a positive value where the configured one is 0 is reported
    with an infinite factor."""
    names = ("a", "b", "c")
    configured = {"k": np.array([1.0, 2.0, 0.0])}
    found = large_gains({"k": np.array([10.0, 20.1, 1.0])}, configured, names)
    assert found == {"k": [("b", pytest.approx(10.05)), ("c", np.inf)]}
    assert large_gains({"k": np.array([10.0, 20.0, 0.0])}, configured, names) == {}
    assert LARGE_FACTOR == 10.0


def test_a_step_back_lies_between_the_current_and_the_configured_values() -> None:
    """Onto or partway toward the configured value, from either side, is a step back; past it,
    or away from it, is not; an unchanged gain always is."""
    current = {"k": np.array([0.0, 10.0])}
    configured = {"k": np.array([5.0, 5.0])}
    assert moves_toward(current, {"k": np.array([5.0, 5.0])}, configured)
    assert moves_toward(current, {"k": np.array([2.0, 7.0])}, configured)
    assert moves_toward(current, {"k": np.array([0.0, 10.0])}, configured)
    assert not moves_toward(current, {"k": np.array([6.0, 5.0])}, configured)
    assert not moves_toward(current, {"k": np.array([5.0, 11.0])}, configured)


def test_without_a_measured_state_only_the_free_joint_and_large_gain_rules_apply() -> None:
    """Before the first measurement (q unknown) the stability rule cannot run; a free joint is
    still refused and a large gain still warned of."""
    configured = _configured()
    zeros = np.zeros(len(JOINTS))
    free = _judge(configured, {"stiffness": zeros, "damping": zeros}, q=None)
    assert free.refusal is not None and "no feedback" in free.refusal
    large = _judge(configured, {"stiffness": configured["stiffness"] * 20}, q=None)
    assert large.accepted and large.here is None
    assert any("above 10×" in w for w in large.warnings)
