"""Arms whose URDF has joint friction and damping (``<dynamics friction damping>``): the sampled
plant with the joints' own damping (against a fine-step simulation), the laws' friction
compensation and damping feed-forward (ct_controllers.controllers.friction), and ct-setup's
design of the compensation on a variant of the bundled arm given friction and damping, written
into a tmp dir. The xArm7 of example-robot-data (friction 1 N·m, damping 2-10 N·m·s/rad) runs
the whole way in test_own_robot.py.
"""

from __future__ import annotations

import contextlib
import io
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from helpers import bundled_description, random_configuration

from ct_controllers.config import load_config
from ct_controllers.controllers.computed_torque import PD, ComputedTorqueController
from ct_controllers.controllers.controller import sampled_loop_radius
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.gain_stability import GainStability
from ct_controllers.setup_assistant.chain import discover_chain
from ct_controllers.setup_assistant.cli import main as setup_main
from ct_controllers.setup_assistant.design_model import design_model
from ct_controllers.setup_assistant.friction import friction_need
from ct_controllers.setup_assistant.gains import (
    COMPUTED_TORQUE,
    GAIN_MARGIN,
    JOINT_IMPEDANCE,
    configurations,
)
from ct_controllers.setup_assistant.urdf_tree import read_robot
from ct_controllers.types import JointReference, JointState

FRICTION = 1.5  # [N·m | N] given to every joint of the variant
DAMPING = 3.0  # [N·m·s/rad | N·s/m]


def _rubbing_urdf() -> str:
    """The bundled arm's URDF with every movable joint given FRICTION and DAMPING (its
    armature kept)."""
    root = ET.fromstring(bundled_description().urdf)
    for joint in root.findall("joint"):
        if joint.get("type") in ("revolute", "prismatic", "continuous"):
            dynamics = joint.find("dynamics")
            if dynamics is None:
                dynamics = ET.SubElement(joint, "dynamics")
            dynamics.set("friction", repr(FRICTION))
            dynamics.set("damping", repr(DAMPING))
    return ET.tostring(root, encoding="unicode")


@pytest.fixture(scope="module")
def rubbing() -> RobotModel:
    return RobotModel(_rubbing_urdf(), tcp_frame="tcp", base_frame="base_link")


def _simulated_growth(mass, plant_damping, stiffness, damping, period, delay, periods):
    """Per-period growth of ‖(q, v)‖ over the last half of a run: M q̈ + D_p q̇ = τ stepped 400
    times a period (semi-implicit in D_p) under τ = −K q − D v measured ``delay`` periods
    earlier and held for the period."""
    n = mass.shape[0]
    inverse = np.linalg.inv(mass)
    rng = np.random.default_rng(3)
    q, v = rng.normal(size=n), rng.normal(size=n)
    history = [(q.copy(), v.copy())] * (delay + 1)
    norms = []
    steps = 400
    h = period / steps
    implicit = np.linalg.inv(np.eye(n) + h * inverse * plant_damping)  # (I + h M⁻¹ D_p)⁻¹
    for _ in range(periods):
        measured_q, measured_v = history[0]
        drive = h * inverse @ (-stiffness @ measured_q - damping @ measured_v)
        for _ in range(steps):
            v = implicit @ (v + drive)
            q = q + h * v
        history = [*history[1:], (q.copy(), v.copy())]
        norms.append(math.hypot(np.linalg.norm(q), np.linalg.norm(v)))
    half = periods // 2
    return (norms[-1] / norms[half]) ** (1.0 / (periods - 1 - half))


@pytest.mark.parametrize("delay", [0, 1])
def test_the_radius_with_the_joints_own_damping_is_the_simulated_growth(rubbing, delay):
    """The arm (the variant: D_p = 3 N·m·s/rad on every joint) at a random configuration under
    K = 300 N·m/rad, D = 2 N·m·s/rad, at a period (20 ms) where the loop without D_p grows: the
    radius with D_p matches the growth per period of a fine-step simulation of
    M q̈ + D_p q̇ = τ to 0.2 %, and is below the radius without D_p (damping is stabilizing;
    without delay it makes the loop stable)."""
    q = random_configuration(rubbing, np.random.default_rng(8))
    mass = rubbing.mass_matrix(q)
    stiffness = np.diag(np.full(rubbing.nv, 300.0))
    damping = np.diag(np.full(rubbing.nv, 2.0))
    plant = rubbing.joint_damping
    assert np.all(plant == DAMPING)
    period = 20e-3
    radius = sampled_loop_radius(mass, stiffness, damping, period, delay, plant)
    growth = _simulated_growth(mass, plant, stiffness, damping, period, delay, 300)
    assert growth == pytest.approx(radius, rel=2e-3), (radius, growth)
    undamped = sampled_loop_radius(mass, stiffness, damping, period, delay)
    assert undamped > 1.0 and radius < undamped
    assert radius < 1.0 or delay == 1


def _state(model: RobotModel, q: np.ndarray, v: np.ndarray | None = None) -> JointState:
    return JointState(0.0, q, np.zeros(model.nv) if v is None else v)


@pytest.mark.parametrize("law", ["joint_impedance", "computed_torque_pd"])
def test_the_friction_term_pushes_by_at_most_the_friction(rubbing, law):
    """With every other term off (gains 0, no gravity, no damping feed-forward), a law's effort
    is clip(K_f e, −f, f) per joint [N·m | N]: the friction f = 1.5 outside the band
    |e| ≤ f / K_f, the slope K_f inside it, in the error's direction."""
    slope = np.full(rubbing.nv, 100.0)  # [N·m/rad | N/m]: band 15 mrad
    zeros = np.zeros(rubbing.nv)
    if law == "joint_impedance":
        controller = JointImpedanceController(
            rubbing, zeros, zeros, False, False, False, slope, damping_feedforward=False
        )
    else:
        controller = ComputedTorqueController(rubbing, zeros, zeros, PD, slope, False)
    q = random_configuration(rubbing, np.random.default_rng(2))
    error = np.linspace(-0.05, 0.05, rubbing.nv)  # [rad | m]: outside and inside the band
    tau = controller.compute(_state(rubbing, q), JointReference.hold(q + error), 1e-3)
    np.testing.assert_allclose(tau, np.clip(slope * error, -FRICTION, FRICTION), atol=1e-12)
    assert np.all(np.abs(tau) <= FRICTION + 1e-12)


def test_the_friction_slope_is_feedback_only_where_the_urdf_has_friction(rubbing):
    """linear_feedback (what the sampled-loop check sees) adds diag(K_f) [N·m/rad | N/m] to the
    law's stiffness on the variant; on the bundled arm (no friction) the same K_f adds nothing,
    and its effort is the law's alone."""
    bundled = RobotModel(bundled_description().urdf, tcp_frame="tcp", base_frame="base_link")
    stiffness, damping = np.full(rubbing.nv, 50.0), np.full(rubbing.nv, 5.0)
    slope = np.full(rubbing.nv, 400.0)
    q = random_configuration(rubbing, np.random.default_rng(4))
    for model, added in ((rubbing, slope), (bundled, np.zeros(rubbing.nv))):
        controller = JointImpedanceController(model, stiffness, damping, friction_stiffness=slope)
        k, d = controller.linear_feedback(q)
        np.testing.assert_allclose(k, np.diag(stiffness + added))
        np.testing.assert_allclose(d, np.diag(damping))
    plain = JointImpedanceController(bundled, stiffness, damping)
    with_slope = JointImpedanceController(bundled, stiffness, damping, friction_stiffness=slope)
    reference = JointReference.hold(q + 0.01)
    np.testing.assert_array_equal(
        with_slope.compute(_state(bundled, q), reference, 1e-3),
        plain.compute(_state(bundled, q), reference, 1e-3),
    )


def test_the_damping_feedforward_pays_the_urdf_damping_on_the_reference_velocity(rubbing):
    """With gains 0 and gravity off, joint impedance's effort is D_p v* [N·m | N] (D_p = 3) —
    the reference velocity's, whatever the measured one — and 0 with damping_feedforward off."""
    zeros = np.zeros(rubbing.nv)
    q = random_configuration(rubbing, np.random.default_rng(5))
    v_ref = np.linspace(-1.0, 1.0, rubbing.nv)
    reference = JointReference(q, v_ref, zeros)
    measured = _state(rubbing, q, np.full(rubbing.nv, 0.3))
    on = JointImpedanceController(rubbing, zeros, zeros, False)
    off = JointImpedanceController(rubbing, zeros, zeros, False, damping_feedforward=False)
    np.testing.assert_allclose(on.compute(measured, reference, 1e-3), DAMPING * v_ref)
    np.testing.assert_array_equal(off.compute(measured, reference, 1e-3), zeros)


def _quietly(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = setup_main(argv)
    return code, out.getvalue()


def _lowered_line(printed: str, joint: str) -> str:
    """ct-setup's line on what lowered ``joint``'s gains ("" if none)."""
    for line in printed.splitlines():
        if line.strip().startswith(f"{joint} (inertia"):
            return line
    return ""


def test_setup_designs_a_compensation_that_meets_the_stall_criterion(tmp_path: Path):
    """ct-setup on the variant (written into tmp_path): it writes friction_stiffness K_f for
    both laws, and says so. Per joint, the stall f / (K_f + the law's own stiffness, computed
    torque's on its lightest M(q)ᵢᵢ) is within the TCP tolerance's allowance
    (setup_assistant/friction.py) wherever the design does not name the sampled loop as what
    held K_f lower, and on most joints; every law with its K_f is stable with every gain × 2 at
    update_rate (0 and 1 period of delay), over the design's configurations."""
    urdf = tmp_path / "rubbing_arm.urdf"
    urdf.write_text(_rubbing_urdf())
    code, printed = _quietly([str(urdf), "-o", str(tmp_path / "out")])
    assert code == 0, printed
    assert "friction (<dynamics friction> on 9 joints" in printed, printed
    config = load_config(tmp_path / "out" / "controllers.yaml")
    tree = read_robot(urdf)
    design = design_model(tree, discover_chain(tree))
    model = design.model
    home = design.to_model(np.array(config.home_positions))
    samples = configurations(design, home)
    need = friction_need(design, samples)
    lightest = np.min([np.diag(model.mass_matrix(q)) for q in samples], axis=0)
    order = model.indices(config.joint_names)
    met = 0
    for name in (JOINT_IMPEDANCE, COMPUTED_TORQUE):
        entries = config.controllers[name]
        gains = {key: np.empty(model.nv) for key in ("k", "d", "slope")}
        keys = ("stiffness", "damping") if name == JOINT_IMPEDANCE else ("kp", "kd")
        for key, entry in zip(("k", "d", "slope"), (*keys, "friction_stiffness"), strict=True):
            gains[key][order] = entries[entry]
        assert np.all(gains["slope"] > 0.0), name
        own = gains["k"] if name == JOINT_IMPEDANCE else gains["k"] * lightest
        stall = FRICTION / (gains["slope"] + own)
        within = stall <= need.allowed * (1 + 1e-3)
        met += int(np.count_nonzero(within))
        held = [
            model.joint_names[j]
            for j in np.flatnonzero(~within)
            if f"{name} friction compensation sampled loop"
            not in _lowered_line(printed, model.joint_names[j])
        ]
        assert not held, (name, held, stall, need.allowed)
        if name == JOINT_IMPEDANCE:
            controller = JointImpedanceController(model, gains["k"], gains["d"])
            live = {"stiffness": gains["k"], "damping": gains["d"]}
        else:
            controller = ComputedTorqueController(model, gains["k"], gains["d"])
            live = {"kp": gains["k"], "kd": gains["d"]}
        live["friction_stiffness"] = gains["slope"]
        doubled = {key: GAIN_MARGIN * value for key, value in live.items()}
        for delay in (0, 1):
            check = GainStability(model, controller, samples, 1.0 / config.update_rate, delay)
            worst = check.worst(doubled)
            assert worst is not None and worst.stable, (name, delay, worst)
    assert met >= model.nv, met  # at least half the joint-law pairs meet it
