"""``ct-bench reach``: MoveToPose on random reachable poses, through the real chain in MuJoCo.

Poses (TRAC-IK style): arm joint positions uniform inside their limits (fingers at home), kept
only where the arm in the MuJoCo scene (``hardware/mujoco_scene.py``) is clear of everything
(:class:`~ct_controllers.hardware.mujoco_collision.SceneClearance` from home): every robot
collision shape at least ``CLEARANCE`` above the table-top plane z = 0 (the arm works above its
table) and from the table, floor and cube, and no two links in contact. FK gives the target TCP
pose (base frame); the configuration itself is not used again.

Each pose is one trial per method, each on a fresh stack from controllers.yaml in MuJoCo lockstep
(1 kHz), from the home pose: the goal check's full IK seeded with the measured configuration
and its choice among the IK's solutions (``chains/pose_goal.py``, ``chains/approach_goal.py``, as
the action's: the branch nearest the measured configuration, an approach clear of the scene; no
solution: UNREACHABLE, nothing moves), then the chain the action runs, switched into the loop,
with the action's success rule: the measured TCP within 1 mm and 0.01 rad for a continuous 0.1 s
(judged every 10 ticks), else TIMEOUT after ``--timeout`` s of sim time (the action's default).
``--config FILE``: the user's robot (its controllers.yaml, e.g. ``ct-setup``'s), the bundled arm
by default. Methods, side by side on the same poses:

- ``approach``: today's chain — a joint-space approach to the IK solution, then the differential
  IK (QP) for the finish (``controllers/joint_approach.py``);
- ``baseline``: the chain before it — the differential IK alone, from the measured state (the
  IK solution is not used).

``seconds`` is the sim time from the switch to the SUCCESS (dwell included). ``--unreachable K``
adds K poses beyond the arm's reach (TCP 1.2–1.8 × the chain's length from its first joint,
random orientation): each must end UNREACHABLE at the goal check, after ``ik_ms`` of wall time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
import pinocchio as pin

from ct_controllers.chains.pose_goal import (
    DEFAULT_ORIENTATION_TOLERANCE,
    DEFAULT_POSITION_TOLERANCE,
    SUCCESS_DWELL,
    goal_ik,
    goal_selection,
    pose_chain,
)
from ct_controllers.config import StackConfig, load_config
from ct_controllers.hardware.mujoco_collision import scene_clearance
from ct_controllers.model.description import RobotDescription, load_description
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.stack import build_stack
from ct_controllers.tasks.conditions import DwellCondition

CLEARANCE = 0.02  # [m] of every robot shape from the table plane, table, floor and cube
DEFAULT_TIMEOUT = 10.0  # [s] sim time; the action's move_to_pose.default_timeout
SETTLE_TICKS = 20  # ticks at home before the goal (a measured state to seed the IK with)
JUDGE_TICKS = 10  # ticks between two judgements of the success rule
METHODS = ("baseline", "approach")
GOAL_SUCCESS_RATE = 0.99
FAR = (1.2, 1.8)  # [-] of the chain's length: where the poses beyond reach lie
SUCCESS, TIMEOUT, UNREACHABLE, FAULT = "SUCCESS", "TIMEOUT", "UNREACHABLE", "FAULT"


@dataclass(frozen=True)
class Outcome:
    """One goal: outcome, the measured TCP's final errors [m], [rad] (the IK's residuals for
    UNREACHABLE), ``seconds`` of sim time from the switch to the outcome (0 for UNREACHABLE)."""

    outcome: str
    position_error: float
    orientation_error: float
    seconds: float
    ik_ms: float  # [ms] wall time of the goal check: its IK and the choice among solutions
    message: str = ""  # why it failed, or that no solution with a clear approach was found


def reachable_configurations(
    config: StackConfig,
    model: RobotModel,
    description: RobotDescription,
    seed: int,
    counts: dict[str, int],
) -> Iterator[np.ndarray]:
    """Full model-order configurations: arm uniform inside its limits (a continuous joint in
    [−π, π]), fingers at home, clear of the scene; ``counts`` records "drawn" and "rejected"."""
    check = scene_clearance(description, config, CLEARANCE)
    arm = model.indices(config.arm_joints)
    lower, upper = model.limits.lower[arm], model.limits.upper[arm]
    lower = np.where(np.isfinite(lower), lower, -math.pi)
    upper = np.where(np.isfinite(upper), upper, math.pi)
    home = np.empty(model.nq)
    home[model.indices(config.joint_names)] = config.home_positions
    rng = np.random.default_rng(seed)
    while True:
        q_arm = rng.uniform(lower, upper)
        counts["drawn"] = counts.get("drawn", 0) + 1
        if not check.clear(dict(zip(config.arm_joints, q_arm.tolist(), strict=True))):
            counts["rejected"] = counts.get("rejected", 0) + 1
            continue
        q = home.copy()
        q[arm] = q_arm
        yield q


def chain_reach(model: RobotModel, arm_joints: tuple[str, ...]) -> tuple[np.ndarray, float]:
    """The first arm joint's origin [m] (base frame) and an upper bound on how far the TCP gets
    from it [m]: the sum of the distances between consecutive arm joint origins and from the
    last one to the TCP (constant at every configuration; a prismatic joint adds its stroke)."""
    q = model.neutral()
    pin.framesForwardKinematics(model.model, model.data, model.pinocchio_configuration(q))
    ids = [model.model.getJointId(name) for name in arm_joints]
    points = [np.array(model.data.oMi[i].translation) for i in ids]
    points.append(np.array(model.data.oMf[model.tcp_frame_id].translation))
    length = sum(float(np.linalg.norm(b - a)) for a, b in itertools.pairwise(points))
    for name, i in zip(arm_joints, model.indices(arm_joints), strict=True):
        if model.model.joints[model.model.getJointId(name)].shortname().startswith("JointModelP"):
            length += float(model.limits.upper[i] - model.limits.lower[i])
    base = model.data.oMf[model.base_frame_id].inverse()
    return np.array((base * pin.SE3(np.eye(3), points[0])).translation), length


def unreachable_poses(
    count: int, seed: int, shoulder: np.ndarray, reach: float
) -> list[np.ndarray]:
    """TCP poses FAR × ``reach`` from ``shoulder`` (:func:`chain_reach`), random orientation."""
    rng = np.random.default_rng(seed + 10**6)
    poses = []
    for _ in range(count):
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        pose = np.eye(4)
        pose[:3, :3] = pin.exp3(rng.uniform(-math.pi, math.pi) * _unit(rng.normal(size=3)))
        pose[:3, 3] = shoulder + rng.uniform(*FAR) * reach * direction
        poses.append(pose)
    return poses


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def run_goal(
    config: StackConfig,
    pose: np.ndarray,
    method: str,
    timeout: float = DEFAULT_TIMEOUT,
    controller: str | None = None,
    description: RobotDescription | None = None,
) -> tuple[Outcome, np.ndarray | None]:
    """One MoveToPose goal on a fresh stack from home, as the action runs it; also the goal
    check's IK solution (None if it found none). ``method``: "approach" or "baseline". The IK
    is a fresh one (its restarts' random generator seeded alike): every method gets the same
    solution for the same pose."""
    if method not in METHODS:
        raise ValueError(f"method '{method}' is not one of {', '.join(METHODS)}")
    stack = build_stack(config, description)
    stack.bring_up()
    try:
        loop = stack.loop
        loop.run_ticks(SETTLE_TICKS)
        snapshot = loop.snapshot()
        assert snapshot is not None
        selected = goal_selection(stack, goal_ik(stack)).select(pose, snapshot.position)
        candidate = selected.candidate
        ik_ms = selected.time * 1e3
        note = "" if selected.clear is not False else f"approach not clear: {selected.collision}"
        if not candidate.converged:
            return (
                Outcome(
                    UNREACHABLE,
                    candidate.position_residual,
                    candidate.orientation_residual,
                    0.0,
                    ik_ms,
                    "no IK solution within the joint limits",
                ),
                None,
            )
        joint_controller = stack.controllers[controller or config.default_controller]
        goal = candidate.q if method == "approach" else None
        chain = pose_chain(stack, joint_controller, pose, goal)
        loop.switch_controller(chain)
        within = DwellCondition(SUCCESS_DWELL, freshness=1.0)
        start: float | None = None
        while True:
            loop.run_ticks(JUDGE_TICKS)
            snapshot = loop.snapshot()
            assert snapshot is not None
            start = snapshot.stamp if start is None else start
            position, orientation = chain.errors(snapshot.position)
            elapsed = snapshot.stamp - start
            if snapshot.fault:
                return Outcome(
                    FAULT, position, orientation, elapsed, ik_ms, snapshot.fault
                ), candidate.q
            ok = position <= DEFAULT_POSITION_TOLERANCE and orientation <= (
                DEFAULT_ORIENTATION_TOLERANCE
            )
            if within.update(loop.now(), snapshot.stamp, ok).met:
                return Outcome(SUCCESS, position, orientation, elapsed, ik_ms, note), candidate.q
            if elapsed > timeout:
                return Outcome(TIMEOUT, position, orientation, elapsed, ik_ms, note), candidate.q
    finally:
        stack.shut_down()


def summarize(outcomes: list[Outcome], samples: int) -> dict[str, object]:
    """Of the goals the goal check accepted (``outcomes``); ``success_rate_of_samples`` also
    counts the sampled poses it refused as not reached."""
    total = len(outcomes)
    succeeded = [o for o in outcomes if o.outcome == SUCCESS]
    failed = [o for o in outcomes if o.outcome != SUCCESS]
    times = np.array([o.seconds for o in succeeded]) if succeeded else np.array([math.nan])
    final = np.array([o.position_error for o in outcomes]) if outcomes else np.array([math.nan])
    return {
        "goals": total,
        "success": len(succeeded),
        "success_rate": len(succeeded) / total if total else math.nan,
        "success_rate_of_samples": len(succeeded) / samples,
        "outcomes": {k: sum(o.outcome == k for o in outcomes) for k in (SUCCESS, TIMEOUT, FAULT)},
        "seconds_p50": float(np.percentile(times, 50)),
        "seconds_p95": float(np.percentile(times, 95)),
        "seconds_max": float(times.max()),
        "final_position_error_p50_m": float(np.percentile(final, 50)),
        "final_position_error_max_m": float(final.max()),
        "failed_position_errors_m": sorted(o.position_error for o in failed),
        "failed_orientation_errors_rad": [
            o.orientation_error for o in sorted(failed, key=lambda o: o.position_error)
        ],
    }


def run(
    samples: int,
    seed: int,
    timeout: float = DEFAULT_TIMEOUT,
    unreachable: int = 10,
    controller: str | None = None,
    methods: tuple[str, ...] = METHODS,
    progress: bool = False,
    config_path: str | None = None,
) -> dict[str, object]:
    """The bench (module docstring) on the robot of ``config_path`` (None: the bundled arm)."""
    config = load_config(config_path, overrides={"mujoco.mode": "lockstep", "backend": "mujoco"})
    description = load_description(
        config.robot_description or None, mappings={"backend": config.backend}
    )
    model = RobotModel(description.urdf, config.tcp_frame, config.base_frame)
    arm = model.indices(config.arm_joints)
    counts: dict[str, int] = {}
    configurations = reachable_configurations(config, model, description, seed, counts)
    trials: list[dict[str, object]] = []
    by_method: dict[str, list[Outcome]] = {m: [] for m in methods}
    ik_rejected = 0
    for index in range(samples):
        q = next(configurations)
        pose = model.frame_pose(q)
        row: dict[str, object] = {
            "index": index,
            "q_sample": q[arm].tolist(),
            "pose": pose.tolist(),
        }
        results: dict[str, object] = {}
        for method in methods:
            outcome, solution = run_goal(config, pose, method, timeout, controller, description)
            if outcome.outcome == UNREACHABLE:
                ik_rejected += method == methods[0]
            else:
                by_method[method].append(outcome)
            if solution is not None:
                row["q_ik"] = solution[arm].tolist()
            results[method] = asdict(outcome)
            if progress:
                print(
                    f"  {index:4d} {method:9s} {outcome.outcome:11s} "
                    f"{outcome.position_error * 1e3:9.3f} mm {outcome.orientation_error:7.4f} rad "
                    f"{outcome.seconds:6.2f} s",
                    flush=True,
                )
        row["results"] = results
        trials.append(row)
    far: list[dict[str, object]] = []
    shoulder, reach = chain_reach(model, config.arm_joints)
    for pose in unreachable_poses(unreachable, seed, shoulder, reach):
        outcome, _ = run_goal(config, pose, methods[-1], timeout, controller, description)
        far.append({"pose": pose.tolist(), **asdict(outcome)})
    return {
        "config": config_path or "bundled",
        "samples": samples,
        "seed": seed,
        "timeout": timeout,
        "controller": controller or config.default_controller,
        "tolerance": {
            "position_m": DEFAULT_POSITION_TOLERANCE,
            "orientation_rad": DEFAULT_ORIENTATION_TOLERANCE,
            "dwell_s": SUCCESS_DWELL,
        },
        "sampling": {
            "drawn": counts.get("drawn", 0),
            "rejected_for_clearance": counts.get("rejected", 0),
            "clearance_m": CLEARANCE,
            "unreachable_by_goal_check": ik_rejected,
        },
        "methods": {m: summarize(by_method[m], samples) for m in methods},
        "unreachable": {
            "goals": len(far),
            "unreachable": sum(f["outcome"] == UNREACHABLE for f in far),
            "ik_ms_max": max((float(f["ik_ms"]) for f in far), default=math.nan),  # type: ignore[arg-type]
        },
        "trials": trials,
        "far": far,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ct-bench reach", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="controllers.yaml of the robot (default: the bundled)")
    parser.add_argument("--samples", type=int, default=200, help="N random reachable poses")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the poses")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="[s] per goal")
    parser.add_argument(
        "--unreachable", type=int, default=10, help="K poses beyond reach (must be UNREACHABLE)"
    )
    parser.add_argument("--controller", help="joint controller (default: controllers.yaml's)")
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated, of {', '.join(METHODS)} (default: both, side by side)",
    )
    parser.add_argument("--progress", action="store_true", help="a line per goal as it ends")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    methods = tuple(m for m in args.methods.split(",") if m)
    unknown = [m for m in methods if m not in METHODS]
    if args.samples < 1 or args.unreachable < 0 or unknown or not methods:
        print(
            f"ct-bench reach: --samples ≥ 1, --unreachable ≥ 0, --methods of {', '.join(METHODS)}"
        )
        return 2
    logging.getLogger("ct_controllers").setLevel(logging.ERROR)  # one backend line per goal
    started = time.perf_counter()
    outcome = run(
        args.samples,
        args.seed,
        args.timeout,
        args.unreachable,
        args.controller,
        methods,
        progress=args.progress and not args.json,
        config_path=args.config,
    )
    outcome["wall_seconds"] = time.perf_counter() - started
    if args.json:
        print(json.dumps(outcome))
        return 0
    sampling = outcome["sampling"]
    assert isinstance(sampling, dict)
    print(
        f"ct-bench reach: {args.samples} random reachable poses (seed {args.seed}; "
        f"{sampling['drawn']} drawn, {sampling['rejected_for_clearance']} not clear of the "
        f"scene by {CLEARANCE * 100:g} cm), MuJoCo lockstep from home, joint controller "
        f"{outcome['controller']}, timeout {args.timeout:g} s, success = TCP within "
        f"{DEFAULT_POSITION_TOLERANCE * 1e3:g} mm / {DEFAULT_ORIENTATION_TOLERANCE:g} rad "
        f"for {SUCCESS_DWELL:g} s"
    )
    print(f"  goal check UNREACHABLE among them: {sampling['unreachable_by_goal_check']}")
    print(
        f"  {'method':9s} {'success':>8s} {'rate':>8s} {'of all':>7s} {'TIMEOUT':>8s} "
        f"{'FAULT':>6s} {'p50 [s]':>8s} {'p95 [s]':>8s} {'max [s]':>8s} {'worst final [mm]':>17s}"
    )
    methods_summary = outcome["methods"]
    assert isinstance(methods_summary, dict)
    for name, row in methods_summary.items():
        counts = row["outcomes"]
        print(
            f"  {name:9s} {row['success']:>4d}/{row['goals']:<3d} "
            f"{row['success_rate'] * 100:7.1f}% {row['success_rate_of_samples'] * 100:6.1f}% "
            f"{counts[TIMEOUT]:8d} {counts[FAULT]:6d} "
            f"{row['seconds_p50']:8.2f} {row['seconds_p95']:8.2f} {row['seconds_max']:8.2f} "
            f"{row['final_position_error_max_m'] * 1e3:17.1f}"
        )
    far = outcome["unreachable"]
    assert isinstance(far, dict)
    print(
        f"  beyond reach: {far['unreachable']}/{far['goals']} UNREACHABLE at the goal check "
        f"(IK ≤ {far['ik_ms_max']:.0f} ms, nothing moved)"
    )
    print(
        f"  goal: ≥ {GOAL_SUCCESS_RATE:.0%} of the reachable goals succeed "
        f"({outcome['wall_seconds']:.0f} s wall)"
    )
    return 0
