"""``ct-bench grasp --workers N`` and ``ct-bench backends --workers N`` (issue 18, item 5): trials
(rigs) in N worker processes give the same per-trial results (rows) as one process, in order;
each grasp trial's cube is a pure function of (seed, trial index). Real trials in MuJoCo
lockstep, real worker processes; nothing mocked."""

from __future__ import annotations

import json

import pytest

from ct_controllers.bench.backends import main as backends_main
from ct_controllers.bench.grasp import REGION, main, robot_scene, trial_cube
from ct_controllers.config import load_config

TRIALS = 3  # a worker runs two of them: a trial after another in the same process
SEED = 1


def grasp_report(capsys: pytest.CaptureFixture[str], workers: int) -> dict:
    code = main(["--trials", str(TRIALS), "--seed", str(SEED), "--workers", str(workers), "--json"])
    assert code == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_trial_cubes_are_a_pure_function_of_seed_and_index() -> None:
    """Trial k's cube is the same whether drawn first, last or alone (no shared stream consumed
    in order), differs between trials and between seeds, and lies in REGION."""
    forward = [trial_cube(SEED, k) for k in range(5)]
    backward = [trial_cube(SEED, k) for k in reversed(range(5))][::-1]
    assert forward == backward
    assert trial_cube(SEED, 3) == forward[3]
    assert len(set(forward)) == 5
    assert trial_cube(SEED + 1, 0) != forward[0]
    for cube in forward:
        for value, key in zip(cube, ("x", "y", "yaw"), strict=True):
            low, high = REGION[key]
            assert low <= value <= high, (key, value)


def test_two_workers_give_the_same_per_trial_results_as_one_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``ct-bench grasp --trials 3 --seed 1 --json`` with ``--workers 1`` (in process) and
    ``--workers 2`` (worker processes): the per-trial records — trial index, cube, success,
    final phase, reason, sim time, phase durations — are identical, bit for bit, and in trial
    order; so is everything in the summary but the wall time, trials per minute and the worker
    count, which says how many ran."""
    one = grasp_report(capsys, 1)
    two = grasp_report(capsys, 2)
    assert [r["trial"] for r in one["results"]] == list(range(TRIALS))
    region = robot_scene(load_config()).region  # the bundled arm's scene, as the bench's
    assert [tuple(r["cube"]) for r in one["results"]] == [
        trial_cube(SEED, k, region) for k in range(TRIALS)
    ]
    assert two["results"] == one["results"]
    assert (one["workers"], two["workers"]) == (1, 2)
    timing = {"wall_time", "trials_per_minute", "workers"}
    assert {k: v for k, v in two.items() if k not in timing} == {
        k: v for k, v in one.items() if k not in timing
    }
    # Not a vacuous comparison: the trials ran through their phases.
    for record in one["results"]:
        assert record["sim_time"] > 0 and record["phase_durations"], record


def test_workers_below_one_are_refused() -> None:
    """``--workers 0`` is a usage error (exit status 2), not a run."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--trials", "1", "--workers", "0"])
    assert exit_info.value.code == 2


def test_backends_lockstep_rigs_in_two_workers_give_the_same_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``ct-bench backends --modes mujoco:effort,mujoco:position --scenarios joint_motion,cancel
    --json`` with ``--workers 2`` (each MuJoCo rig in a worker process) prints the same rows,
    in ``--modes`` order, as ``--workers 1`` (every rig in this process): lockstep rigs on sim
    time do not depend on where or beside what they run."""
    argv = ["--modes", "mujoco:effort,mujoco:position", "--scenarios", "joint_motion,cancel"]
    reports = []
    for workers in (1, 2):
        code = backends_main([*argv, "--workers", str(workers), "--json"])
        assert code == 0
        reports.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    one, two = (report["results"] for report in reports)
    assert [(r["mode"], r["scenario"]) for r in one] == [
        ("effort", "joint_motion"),
        ("effort", "cancel"),
        ("position", "joint_motion"),
        ("position", "cancel"),
    ]
    assert two == one
