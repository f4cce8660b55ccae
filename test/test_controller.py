"""ct_controllers.controllers.controller.sampled_loop_radius: the spectral radius of a sampled
joint-space feedback loop, against closed forms for one joint and against simulating the
continuous plant with held, delayed torques for the arm."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import new_robot_model, random_configuration

from ct_controllers.controllers.controller import sampled_loop_radius


@pytest.mark.parametrize("ratio", [0.1, 0.5, 1.5, 2.5])
def test_one_damped_joint_matches_its_closed_forms(ratio):
    """One joint, mass m, τ = −D v, a = T D / m. Without delay v⁺ = (1 − a) v: radius
    max(1, |1 − a|) (the position is an integrator: 1). With one period of delay v⁺ = v − a v⁻:
    the roots of z² − z + a, complex for a > 1/4 with modulus √a."""
    mass, period = 2.0, 1e-3
    damping = ratio * mass / period
    m, k, d = np.array([[mass]]), np.zeros((1, 1)), np.array([[damping]])
    assert sampled_loop_radius(m, k, d, period, 0) == pytest.approx(max(1.0, abs(1 - ratio)))
    roots = np.roots([1.0, -1.0, ratio])
    assert sampled_loop_radius(m, k, d, period, 1) == pytest.approx(
        max(1.0, float(np.abs(roots).max()))
    )
    if ratio > 0.25:
        assert np.abs(roots).max() == pytest.approx(math.sqrt(ratio))


def _simulated_growth(mass, stiffness, damping, period, delay, periods):
    """Per-period growth of ‖(q, v)‖ over the last half of a run: the plant M q̈ = τ stepped 20
    times a period (exact under the constant torque) with τ = −K q − D v measured ``delay``
    periods earlier and held for the period."""
    n = mass.shape[0]
    inverse = np.linalg.inv(mass)
    rng = np.random.default_rng(3)
    q, v = rng.normal(size=n), rng.normal(size=n)
    history = [(q.copy(), v.copy())] * (delay + 1)
    norms = []
    h = period / 20
    for _ in range(periods):
        measured_q, measured_v = history[0]
        acceleration = inverse @ (-stiffness @ measured_q - damping @ measured_v)
        for _ in range(20):
            q = q + h * v + 0.5 * h * h * acceleration
            v = v + h * acceleration
        history = [*history[1:], (q.copy(), v.copy())]
        norms.append(math.hypot(np.linalg.norm(q), np.linalg.norm(v)))
    half = periods // 2
    return (norms[-1] / norms[half]) ** (1.0 / (periods - 1 - half))


def _period_for(radius, mass, stiffness, damping, delay):
    """The period [s] at which the loop's radius is ``radius`` (> 1), by bisection."""
    low, high = 1e-4, 1e-1
    for _ in range(60):
        middle = math.sqrt(low * high)
        if sampled_loop_radius(mass, stiffness, damping, middle, delay) > radius:
            high = middle
        else:
            low = middle
    return low


@pytest.mark.parametrize("delay", [0, 1])
def test_the_arm_loop_grows_or_decays_as_its_radius_says(delay):
    """The arm at a random configuration under joint impedance (K = 300 N·m/rad, D = 20
    N·m·s/rad on every joint): at 1 ms its simulated motion decays, and at the period where
    the radius is 1.01 it grows; per period, by the radius to 0.1 %."""
    model = new_robot_model()
    q = random_configuration(model, np.random.default_rng(8))
    mass = model.mass_matrix(q)
    stiffness = np.diag(np.full(model.nv, 300.0))
    damping = np.diag(np.full(model.nv, 20.0))
    for period in (1e-3, _period_for(1.01, mass, stiffness, damping, delay)):
        radius = sampled_loop_radius(mass, stiffness, damping, period, delay)
        growth = _simulated_growth(mass, stiffness, damping, period, delay, 3000)
        assert growth == pytest.approx(radius, rel=1e-3), (period, radius, growth)
    assert sampled_loop_radius(mass, stiffness, damping, 1e-3, delay) < 1.0
