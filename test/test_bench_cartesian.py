"""``ct-bench cartesian`` (issue 26, item 6): its pieces on short runs of the bundled arm in
MuJoCo lockstep — the push held at the compliance K⁻¹F, the circle it tracks, the update
times — and the command's JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ct_controllers.bench import cartesian
from ct_controllers.bench.cli import main as bench_main

ANISOTROPIC = (900.0, 300.0, 600.0, 40.0, 20.0, 30.0)  # [N/m; N·m/rad]


@pytest.fixture(scope="module")
def config():
    return cartesian.bench_config(cartesian.BUNDLED)


def test_a_10_n_push_displaces_the_tcp_by_the_compliance(config) -> None:
    """10 N along x, y and z in turn against an anisotropic K (900, 300, 600 N/m): each
    displacement is K⁻¹F within the bench's 5 % goal (11.1, 33.3 and 16.7 mm along the push,
    nothing across it), at rest (TCP speed < 1 mm/s), the TCP not turned (< 1 mrad)."""
    pushes = cartesian.push(config, ANISOTROPIC, seconds=1.5)
    assert [p.axis for p in pushes] == ["x", "y", "z"]
    for push, stiffness in zip(pushes, ANISOTROPIC[:3], strict=True):
        displacement = np.array(push.displacement)
        force = np.array(push.force)
        np.testing.assert_allclose(push.expected, force / stiffness, rtol=1e-9)
        assert np.linalg.norm(displacement - force / stiffness) <= 0.05 * 10.0 / stiffness
        assert push.stiffness_error <= cartesian.GOAL_STIFFNESS_ERROR
        assert push.speed < 1e-3 and push.rotation < 1e-3


def test_the_circle_starts_at_rest_and_its_twist_and_acceleration_are_its_derivatives() -> None:
    """The path: at t = 0 the start pose with zero twist; its radius is kept; after the ramp it
    turns at ω = 2π f; the twist is the pose's time derivative and the acceleration the
    twist's (central differences), the latter r ω² toward the centre after the ramp; the
    orientation never changes."""
    start = np.eye(4)
    start[:3, 3] = (0.4, 0.1, 0.3)
    path = cartesian.Circle(start, radius=0.05, frequency=0.5, ramp=2.0)
    pose, twist = path.at(0.0)
    np.testing.assert_array_equal(pose, start)
    np.testing.assert_array_equal(twist, np.zeros(6))
    for t in (0.3, 1.0, 1.9, 2.5, 4.2):
        pose, twist = path.at(t)
        assert math.isclose(np.linalg.norm(pose[:3, 3] - path.centre), 0.05, rel_tol=1e-12)
        np.testing.assert_array_equal(pose[:3, :3], start[:3, :3])
        h = 1e-6
        rate = (path.at(t + h)[0][:3, 3] - path.at(t - h)[0][:3, 3]) / (2 * h)
        np.testing.assert_allclose(twist[:3], rate, atol=1e-6)
        assert np.all(twist[3:] == 0.0)
        acceleration = (path.at(t + h)[1] - path.at(t - h)[1]) / (2 * h)
        np.testing.assert_allclose(path.acceleration(t), acceleration, atol=1e-5)
    assert path.phase(3.0)[1] == pytest.approx(math.pi)
    # After the ramp: only the centripetal r ω², toward the centre.
    pose = path.at(3.0)[0]
    inward = (path.centre - pose[:3, 3]) / 0.05
    np.testing.assert_allclose(path.acceleration(3.0)[:3], 0.05 * math.pi**2 * inward, atol=1e-12)


@pytest.mark.parametrize("method", cartesian.METHODS)
def test_each_method_follows_the_circle(config, method) -> None:
    """A quarter period measured after a quarter-period ramp (r = 5 cm, 0.5 Hz) on the
    bundled arm, each method on a fresh stack: no fault, a sample every 10 ms, and the TCP
    within a fifth of the radius of where the circle is throughout (the full bench: 5.1 mm RMS
    for the law, 0.2 mm with the feed-forward, 1.9 mm for the differential IK chain) — it
    moves with the circle: a TCP left at the start would be 0.77 r to 1.85 r from it over this
    window."""
    tracking = cartesian.circle(
        config, method, cartesian.default_stiffness(), periods=0.25, ramp_periods=0.25
    )
    assert tracking.fault is None
    assert tracking.samples >= 45  # every 10 ticks over 0.5 s
    assert tracking.max_m < 0.2 * 0.05, tracking
    assert 0 < tracking.rms_m <= tracking.max_m
    assert tracking.loop_controller_p50_us > 0


def test_the_feed_forward_wrench_removes_the_laws_lag(config) -> None:
    """The law lags the circle by about Λ ẍ*/K without an acceleration feed-forward (the full
    bench: 5.1 mm RMS); given Λ ẍ* as the target's wrench it follows within a tenth of that
    over the same window."""
    plain, fed = (
        cartesian.circle(
            config, method, cartesian.default_stiffness(), periods=0.25, ramp_periods=0.25
        )
        for method in ("cartesian_impedance", cartesian.FEED_FORWARD)
    )
    assert fed.rms_m < 0.1 * plain.rms_m, (plain, fed)


def test_update_times_are_measured_for_each_law(config) -> None:
    """p50 ≤ p99 ≤ max for the law, joint impedance and the differential IK chain, all
    positive; the law costs more than joint impedance (it does the most per tick)."""
    times = cartesian.update_times(config, cartesian.default_stiffness(), ticks=1500)
    assert set(times) == {"cartesian_impedance", "joint_impedance", "diff_ik_chain"}
    for figures in times.values():
        assert 0 < figures["p50_us"] <= figures["p99_us"] <= figures["max_us"]
    assert times["cartesian_impedance"]["p50_us"] > times["joint_impedance"]["p50_us"]


def test_the_command_prints_json_with_every_figure(capsys) -> None:
    """``ct-bench cartesian --json`` on short runs: one JSON object with, per robot, the three
    pushes and the goal's verdict, both methods on the circle, and the three update times."""
    code = bench_main(
        [
            "cartesian",
            "--push-seconds",
            "0.2",
            "--periods",
            "0.2",
            "--ramp",
            "0.2",
            "--ticks",
            "1100",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    (robot,) = report["robots"]
    assert robot["config"] == "bundled"
    assert [p["axis"] for p in robot["push"]["pushes"]] == ["x", "y", "z"]
    assert robot["push"]["met"] is (
        robot["push"]["worst_stiffness_error"] <= cartesian.GOAL_STIFFNESS_ERROR
    )
    assert set(robot["circle"]["methods"]) == set(cartesian.METHODS)
    assert set(robot["update_us"]) == {"cartesian_impedance", "joint_impedance", "diff_ik_chain"}
