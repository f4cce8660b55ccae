"""ct_controllers.bench.ik and ct_controllers.bench.diffik: fast smoke runs of each ``main``
(small sample counts), the JSON they print, and the evidence file of ``ct-bench ik --dump``
re-checked independently from its own contents."""

from __future__ import annotations

import json

import numpy as np
import pinocchio as pin
import pytest

from ct_controllers.bench import diffik, ik
from ct_controllers.bench.cli import main as bench_main
from ct_controllers.model.frames import pose_error
from ct_controllers.model.robot import RobotModel


@pytest.mark.parametrize("robot", ["ct_arm", "panda"])
def test_ik_bench_prints_its_summary_as_json(robot, capsys):
    """``ct-bench ik --robot R --samples 25 --json`` (through the ct-bench dispatcher) prints one
    JSON object with the success rate and time statistics of 25 samples; on these arms almost
    every sample succeeds."""
    assert bench_main(["ik", "--robot", robot, "--samples", "25", "--seed", "3", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["robot"] == robot and summary["samples"] == 25
    assert summary["frame"] == ("tcp" if robot == "ct_arm" else "panda_hand_tcp")
    assert summary["success_rate"] >= 0.9
    assert 0 < summary["p50_ms"] <= summary["p99_ms"] <= summary["max_ms"]
    assert summary["solver_claims_disagreeing"] == 0


def test_ik_bench_dump_can_be_rechecked_from_the_file(tmp_path, capsys):
    """``--dump FILE.npz`` writes urdf_path, frame_name, joint_names (nq), targets (N×4×4),
    seeds and solutions (N×nq), success (N) and times (N); re-building the model from the
    dumped URDF, the success flags are exactly "every component of the pose error ≤ 1e-5 and
    time ≤ 5 ms", re-computed here from the dumped solutions."""
    path = tmp_path / "ik.npz"
    assert ik.main(["--robot", "ct_arm", "--samples", "20", "--dump", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dump"] == str(path)
    evidence = np.load(path)
    names = [str(n) for n in evidence["joint_names"]]
    n = len(names)
    assert names == [f"joint{i}" for i in range(1, 8)]
    assert evidence["targets"].shape == (20, 4, 4)
    assert evidence["seeds"].shape == evidence["solutions"].shape == (20, n)
    assert evidence["success"].shape == evidence["times"].shape == (20,)
    assert str(evidence["urdf_path"]).endswith("ct_arm.urdf.xacro")
    model = RobotModel(str(evidence["urdf_xml"]), tcp_frame=str(evidence["frame_name"]))
    index = model.indices(names)
    for i in range(20):
        q = model.neutral()
        for name, value in zip(
            evidence["locked_joint_names"], evidence["locked_positions"], strict=True
        ):
            q[model.q_index(str(name))] = value
        q[index] = evidence["solutions"][i]
        error = pose_error(model.frame_pose(q), evidence["targets"][i])
        expected = bool(np.abs(error).max() <= 1e-5 and evidence["times"][i] <= 5e-3)
        assert bool(evidence["success"][i]) == expected
        # The seeds are the nominal seed: the middle of every joint's range.
        middle = 0.5 * (model.limits.lower[index] + model.limits.upper[index])
        np.testing.assert_allclose(evidence["seeds"][i], middle)


def test_panda_is_loaded_from_the_installed_package():
    """The Panda URDF is read from the installed example-robot-data distribution (not from this
    repository), and its TCP frame panda_hand_tcp exists, 0.1034 m past the hand."""
    from ct_controllers.bench.robots import load_robot, panda_urdf_path

    path = panda_urdf_path()
    assert "site-packages" in str(path) and path.name == "panda.urdf"
    robot = load_robot("panda")
    assert robot.frame == "panda_hand_tcp" and len(robot.arm_joints) == 7
    q = robot.model.neutral()
    hand = robot.model.frame_pose(q, "panda_hand")
    tcp = robot.model.frame_pose(q, "panda_hand_tcp")
    offset = pin.SE3(hand).actInv(pin.SE3(tcp)).translation
    np.testing.assert_allclose(offset, [0.0, 0.0, 0.1034], atol=1e-9)


def test_diffik_bench_prints_every_solver_as_json(capsys):
    """``ct-bench diffik --steps 150 --json`` times our DLS and QP (OSQP, daqp) and pink (OSQP,
    daqp) on the same task; every solver tracks the same moving target (mean errors within
    10 % of each other), and times are positive; the binding-bound section times both QP
    solvers on solves that ran."""
    assert diffik.main(["--robot", "panda", "--steps", "150", "--json"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    solvers = outcome["solvers"]
    assert set(solvers) == {
        "ours DLS",
        "ours QP (OSQP)",
        "ours QP (daqp)",
        "pink + OSQP",
        "pink + daqp",
    }
    errors = [row["mean_tracking_error_mm"] for row in solvers.values()]
    assert max(errors) <= 1.1 * min(errors)
    for row in solvers.values():
        assert 0 < row["p50_us"] <= row["p99_us"]
    # Where a bound binds, both QP solvers are timed on solves they actually ran.
    binding = outcome["binding"]
    assert set(binding) == {"osqp", "daqp"}
    for row in binding.values():
        assert row["solves"] > 0 and 0 < row["fraction"] <= 1
        assert 0 < row["p50_us"] <= row["p99_us"]
