"""ct_controllers.bench.tracking and timing: the benchmark reproduces the seed's published tables
(an independent C++ run of the same protocol), and on our MuJoCo arm computed torque beats
PD + gravity with an exact model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ct_controllers.bench import timing, tracking
from ct_controllers.controllers.computed_torque import (
    COMPUTED_TORQUE,
    PD_GRAVITY,
    ComputedTorqueController,
)

# Seed 004, §5–7 (Pinocchio C++, the same protocol): e_max, e_rms, e_final [rad], tau_peak [N·m].
SEED_LAWS = {
    "pd": (0.2619, 0.1304, 0.0878, 53.1390),
    "pd_gravity": (0.1306, 0.0621, 0.0357, 47.7904),
    "computed_torque": (0.0028, 0.0022, 0.0024, 42.0588),
}
SEED_DT_SWEEP = {0.01: 0.0111, 0.005: 0.0056, 0.002: 0.0022, 0.001: 0.0011}
SEED_MASS_SWEEP = {
    1.0: (0.0621, 0.0022),
    0.8: (0.0475, 0.0100),
    1.2: (0.0791, 0.0093),
    1.5: (0.1080, 0.0241),
    2.0: (0.1639, 0.0509),
    3.0: (0.3021, 0.1119),
}


@pytest.fixture(scope="module")
def sample_report() -> dict:
    return tracking.run("sample", dt=0.002, omega=6.0, duration=6.0, error_time="start")


def test_sample_manipulator_reproduces_the_seed_tables(sample_report: dict) -> None:
    """Every figure of the seed's three tables is reproduced to its printed precision."""
    for law, (e_max, e_rms, e_final, tau_peak) in SEED_LAWS.items():
        figures = sample_report["laws"][law]
        assert figures["e_max"] == pytest.approx(e_max, abs=6e-5)
        assert figures["e_rms"] == pytest.approx(e_rms, abs=6e-5)
        assert figures["e_final"] == pytest.approx(e_final, abs=6e-5)
        assert figures["tau_peak"] == pytest.approx(tau_peak, abs=6e-4)
    for row in sample_report["dt_sweep"]:
        assert row["e_rms"] == pytest.approx(SEED_DT_SWEEP[row["dt"]], abs=6e-5)
    for row in sample_report["mass_sweep"]:
        pdg, ct = SEED_MASS_SWEEP[row["scale"]]
        assert row["pd_gravity_e_rms"] == pytest.approx(pdg, abs=6e-5)
        assert row["computed_torque_e_rms"] == pytest.approx(ct, abs=6e-5)


def test_json_output_has_the_published_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """`ct-bench tracking --json` prints one object with laws, dt_sweep and mass_sweep as the
    issue specifies (errors in rad, torques in N·m)."""
    assert tracking.main(["--json", "--duration", "0.5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["laws"]) == {"pd", "pd_gravity", "computed_torque"}
    for figures in report["laws"].values():
        assert {"e_max", "e_rms", "e_final", "tau_peak"} <= set(figures)
    assert [row["dt"] for row in report["dt_sweep"]] == list(tracking.DT_SWEEP)
    assert [row["scale"] for row in report["mass_sweep"]] == list(tracking.MASS_SWEEP)
    assert {"pd_gravity_e_rms", "computed_torque_e_rms"} <= set(report["mass_sweep"][0])


def test_error_at_step_end_removes_the_one_step_trajectory_motion() -> None:
    """With --error-time end the computed-torque error no longer contains the trajectory's
    motion over one step (≈ ‖q̇_d‖ dt), so it is several times smaller than with `start`; the PD
    laws, whose error is large, barely change."""
    start = tracking.run("sample", 0.002, 6.0, 2.0, "start")["laws"]
    end = tracking.run("sample", 0.002, 6.0, 2.0, "end")["laws"]
    assert end["computed_torque"]["e_rms"] < start["computed_torque"]["e_rms"] / 2
    assert end["pd_gravity"]["e_rms"] == pytest.approx(start["pd_gravity"]["e_rms"], rel=0.05)


def test_on_the_mujoco_arm_computed_torque_beats_pd_gravity_with_an_exact_model() -> None:
    """ct_arm with MuJoCo as the plant (not the controller's own model): computed torque's RMS
    tracking error on the moving sine is at least 10× below PD + gravity's."""
    setup = tracking.ct_arm_setup()
    model = setup.controller_model
    inertia = np.diag(model.mass_matrix(setup.q0))  # type: ignore[attr-defined]
    kp, kd = inertia * 36.0, inertia * 12.0
    trajectory = tracking.SineTrajectory.seed_protocol(setup.q0, setup.moving)
    results = {}
    for mode in (PD_GRAVITY, COMPUTED_TORQUE):
        controller = ComputedTorqueController(model, kp, kd, mode)  # type: ignore[arg-type]
        results[mode] = tracking.simulate(
            setup.make_plant(0.002, 1.0),
            controller,
            trajectory,
            0.002,
            2.0,
            "start",
            setup.limit(0.002),
        )
    assert not any(r.diverged for r in results.values())
    assert results[COMPUTED_TORQUE].e_rms * 10 < results[PD_GRAVITY].e_rms


def test_timing_benchmark_reports_every_controller_and_the_floor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`ct-bench timing --json` reports p50 ≤ p99 ≤ max for every controller and the floors."""
    assert timing.main(["--ticks", "3000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"joint_impedance", "pd", "pd_gravity", "computed_torque", "limiter"} <= set(
        report["controllers"]
    )
    for figures in [*report["controllers"].values(), *report["floors"].values()]:
        assert 0 < figures["p50_us"] <= figures["p99_us"] <= figures["max_us"]
    assert "met" in report["computed_torque_goal"]
