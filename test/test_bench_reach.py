"""ct_controllers.bench.reach: MoveToPose (the chain the action builds, MuJoCo lockstep, from home)
on poses where the differential IK alone stalls, on poses it cannot reach, and a smoke run of
``ct-bench reach --json``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import lockstep_config

from ct_controllers.bench import reach
from ct_controllers.bench.cli import main as bench_main
from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel

CONFIG = lockstep_config()
MODEL = RobotModel(load_description().urdf, CONFIG.tcp_frame, CONFIG.base_frame)

# Arm configurations (joint1..joint7 [rad]) of `ct-bench reach --samples 200 --seed 0` whose
# TCP pose the differential IK alone (the chain before the approach) did not reach from home:
# TIMEOUT after 10 s, stalled at the final error noted (trial index in the bench's JSON).
LOCAL_MINIMA = {
    "11: 1.02 m": [2.937903, 1.880176, -0.237092, 1.079368, -0.015294, 0.122759, 1.745579],
    "89: 0.69 m": [1.752703, -0.704363, -1.50915, 0.944011, -0.143022, -1.469108, -2.519885],
    "123: 0.64 m": [-0.849525, 0.286339, 0.020786, 0.530463, -2.510398, 1.129881, -2.300259],
    "50: 0.46 m": [-2.535845, -2.019071, 0.474543, -1.29363, 2.821813, -1.643885, -0.292642],
    "175: 0.42 m": [-2.073154, -1.570836, -0.751844, -1.096528, -2.940838, -1.956164, 2.993247],
    "35: 0.35 m": [2.931555, 1.177626, -0.085834, -0.324032, 2.240257, -1.730419, 1.273022],
    "189: 0.34 m": [-1.267487, 1.274782, -1.854278, -0.503394, 0.945868, 1.731253, 1.910763],
    "127: 0.31 m": [1.612697, 0.887388, -0.935811, 0.650611, 2.582887, 0.773984, -0.810523],
    "27: 0.21 m": [-2.92897, 1.141855, 2.838029, 0.376376, -1.070009, -1.308718, 1.053793],
    "1: 0.18 m": [1.361833, 0.182701, 2.58172, 1.322795, -2.95075, 1.496809, -2.848859],
    "75: 0.13 m": [-1.983551, 1.286419, -2.832829, -0.525146, -0.159008, -1.187179, -0.880125],
    "141: 0.13 m": [2.088521, 1.324441, -2.162555, 1.535013, 0.112527, 1.020158, -1.415981],
}
# Trial 37 of the same run: every solution has joint4 within 1.3 mrad of its limit (the
# shoulder-to-wrist distance is joint4's alone), inside the 5 mrad that joint goals keep.
JOINT4_AT_ITS_LIMIT = [0.245727, -1.622374, -0.552172, -2.092741, 1.450155, 1.473656, -2.205405]


def pose_of(arm: list[float]) -> np.ndarray:
    q = np.empty(MODEL.nq)
    q[MODEL.indices(CONFIG.joint_names)] = CONFIG.home_positions
    q[MODEL.indices(CONFIG.arm_joints)] = arm
    return MODEL.frame_pose(q)


@pytest.mark.parametrize("arm", LOCAL_MINIMA.values(), ids=LOCAL_MINIMA.keys())
def test_the_approach_reaches_poses_where_the_differential_ik_alone_stalls(arm):
    """Each pose, from home through the action's chain (joint-space approach to the goal
    check's IK solution, then the differential IK) → joint impedance → MuJoCo: SUCCESS (the
    measured TCP within 1 mm and 0.01 rad for 0.1 s) within the action's 10 s default timeout,
    and the goal check's solution is what the arm went to (within the joint limits)."""
    outcome, solution = reach.run_goal(CONFIG, pose_of(arm), "approach")
    assert outcome.outcome == reach.SUCCESS, outcome
    assert outcome.position_error <= 1e-3 and outcome.orientation_error <= 1e-2
    assert outcome.seconds <= reach.DEFAULT_TIMEOUT
    assert solution is not None
    assert np.all(solution >= MODEL.limits.lower) and np.all(solution <= MODEL.limits.upper)


def test_chain_reach_bounds_the_tcp_distance_from_the_first_joint():
    """chain_reach's length bounds how far the TCP gets from the first arm joint's origin
    (forward kinematics at 2000 random in-limit configurations, Pinocchio), and is tight within
    30 % (the arm stretched gets close to it)."""
    shoulder, length = reach.chain_reach(MODEL, CONFIG.arm_joints)
    rng = np.random.default_rng(3)
    arm = MODEL.indices(CONFIG.arm_joints)
    farthest = 0.0
    for _ in range(2000):
        q = np.zeros(MODEL.nq)
        q[arm] = rng.uniform(MODEL.limits.lower[arm], MODEL.limits.upper[arm])
        farthest = max(farthest, float(np.linalg.norm(MODEL.frame_pose(q)[:3, 3] - shoulder)))
    assert farthest <= length
    assert farthest >= 0.7 * length


@pytest.mark.parametrize(
    "pose",
    [
        pose_of(JOINT4_AT_ITS_LIMIT),
        reach.unreachable_poses(1, 0, *reach.chain_reach(MODEL, CONFIG.arm_joints))[0],
    ],
    ids=["joint4-at-its-limit", "beyond-reach"],
)
def test_unreachable_poses_end_unreachable_at_the_goal_check(pose):
    """A pose whose solutions all need joint4 closer to its limit than joint goals go, and one
    1.2-1.8 × the chain's length from its first joint: UNREACHABLE at the goal check (within its
    IK budget, 0.2 s, plus slack for a busy machine), with the IK's residual; nothing moved (no
    sim time ran)."""
    outcome, solution = reach.run_goal(CONFIG, pose, "approach")
    assert outcome.outcome == reach.UNREACHABLE and solution is None
    assert outcome.position_error > 1e-3 and outcome.seconds == 0.0
    assert outcome.ik_ms <= 200.0 + 100.0


def test_reach_bench_prints_both_methods_side_by_side_as_json(capsys):
    """``ct-bench reach --samples 2 --unreachable 1 --json`` prints one JSON object: the
    sampling counts, a summary per method (baseline and approach, the same poses), the one
    pose beyond reach UNREACHABLE, and per trial the pose, the sampled and the IK's
    configuration and each method's outcome; the approach reaches both poses."""
    arguments = ["reach", "--samples", "2", "--unreachable", "1", "--seed", "3", "--json"]
    assert bench_main(arguments) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["samples"] == 2 and report["timeout"] == reach.DEFAULT_TIMEOUT
    assert report["sampling"]["drawn"] >= 2
    assert set(report["methods"]) == {"baseline", "approach"}
    approach = report["methods"]["approach"]
    assert approach["goals"] == 2 and approach["success"] == 2
    assert report["unreachable"] == {
        "goals": 1,
        "unreachable": 1,
        "ik_ms_max": pytest.approx(report["far"][0]["ik_ms"]),
    }
    for trial in report["trials"]:
        assert np.array(trial["pose"]).shape == (4, 4)
        assert len(trial["q_sample"]) == len(trial["q_ik"]) == 7
        assert set(trial["results"]) == {"baseline", "approach"}
