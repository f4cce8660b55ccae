"""ct_controllers.runtime.gain_stability: which gains grow at which rate, over which
configurations, and the stack's start-up use of it."""

from __future__ import annotations

import numpy as np
from helpers import bundled_config, new_robot_model

from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.hardware.canopen.system import CanopenCia402System
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.runtime.gain_stability import (
    SAMPLES,
    GainStability,
    check_configurations,
)
from ct_controllers.runtime.stack import to_model_order


def _bundled_impedance(model):
    config = bundled_config()
    params = config.controllers["joint_impedance"]
    names = config.joint_names
    stiffness = to_model_order(model, names, params["stiffness"], "K")
    damping = to_model_order(model, names, params["damping"], "D")
    home = to_model_order(model, names, config.home_positions, "home")
    return JointImpedanceController(model, stiffness, damping), home


def test_configurations_are_home_then_samples_within_limits_with_one_joint_at_zero():
    """Home first, then SAMPLES configurations inside the limits, the i-th with joint i mod nv
    at zero; the same list on every call (seeded)."""
    model = new_robot_model()
    home = np.full(model.nv, 0.01)
    configurations = check_configurations(model, home)
    assert len(configurations) == SAMPLES + 1
    np.testing.assert_array_equal(configurations[0], home)
    for i, q in enumerate(configurations[1:]):
        assert np.all(q >= model.limits.lower) and np.all(q <= model.limits.upper)
        joint = i % model.nv
        assert q[joint] == min(max(0.0, model.limits.lower[joint]), model.limits.upper[joint])
    again = check_configurations(model, home)
    assert all(np.array_equal(a, b) for a, b in zip(configurations, again, strict=True))


def test_the_bundled_impedance_is_stable_at_1_khz_not_at_100_hz_and_gains_override():
    """The bundled joint impedance: stable everywhere checked at 1 kHz in MuJoCo (no delay);
    at 100 Hz over a bus (one period of delay) unstable at home already; a quarter of its gains
    and half its damping passed as an override make it stable again, without touching the
    controller's own gains."""
    model = new_robot_model()
    controller, home = _bundled_impedance(model)
    configurations = check_configurations(model, home)
    fast = GainStability(model, controller, configurations, 1e-3, MujocoSystem.measurement_delay)
    worst = fast.worst()
    assert worst is not None and worst.stable, worst
    slow = GainStability(
        model, controller, configurations, 1e-2, CanopenCia402System.measurement_delay
    )
    at_home = slow.at(home)
    assert at_home is not None and not at_home.stable
    softer = {"stiffness": controller.stiffness / 4, "damping": controller.damping / 8}
    fixed = slow.worst(softer)
    assert fixed is not None and fixed.stable, fixed
    assert not slow.at(home).stable  # type: ignore[union-attr]  # its own gains unchanged
