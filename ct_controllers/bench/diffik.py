"""``ct-bench diffik``: time of one differential-IK step, DLS and QP, next to pink.

Every solver runs the same task in the same process, one after the other: the 7 arm joints of
``--robot`` (fingers locked, the same reduced Pinocchio model for everyone), the TCP frame
following a moving target — a circle of radius 5 cm at 0.5 Hz in the base y-z plane around the
TCP pose of a home configuration, orientation fixed — plus a posture task toward that home
configuration, dt = 1 ms, ``--steps`` steps integrated kinematically (q ← q + dt·v).

One *step* is what a control tick pays: set the target, compute the joint velocity, integrate
(ours: ``DlsDiffIk.update`` / ``QpDiffIk.update``, which also runs FK and the Jacobian; pink:
``FrameTask.set_target`` + ``solve_ik`` + ``Configuration.integrate_inplace``, which also runs
FK and the Jacobians). Both QPs have joint position and velocity limits. Times are wall-clock
(``time.perf_counter``) per step, after ``WARM_UP`` untimed steps; the tracking column is the
mean TCP position error over the run, showing that everyone solved the task.

Measured on the Panda when the issue was written: pink + OSQP p50 685 µs / p99 1060 µs, pink +
daqp p50 86 µs / p99 162 µs (OSQP re-set-up per call is pink's cost; ours sets OSQP up once).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable

import numpy as np
import pinocchio as pin

from ct_controllers.bench.robots import ROBOTS, load_robot
from ct_controllers.controllers.controller import JointState
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.diff_ik import DlsDiffIk
from ct_controllers.references.diff_ik_base import DifferentialIkBase
from ct_controllers.references.diff_ik_parameters import DiffIkParameters
from ct_controllers.references.diff_ik_qp import QpDiffIk
from ct_controllers.references.reference_generator import CartesianTarget

DT = 1e-3  # [s]
BANDWIDTH = 10.0  # [1/s] ours; pink's FrameTask gain is BANDWIDTH · DT (fraction per step)
POSTURE_WEIGHT = 1e-3  # [-] ours; pink's PostureTask cost
RADIUS, FREQUENCY = 0.05, 0.5  # [m], [Hz] of the target circle
WARM_UP = 50
HOME = {
    "ct_arm": [0.0, 0.4, 0.0, -1.6, 0.0, 1.2, 0.0],
    "panda": [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785],
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ct-bench diffik", description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", choices=ROBOTS, default="panda")
    parser.add_argument("--steps", type=int, default=3000, help="timed steps per solver")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-pink", action="store_true", help="skip pink (e.g. where it is not installed)"
    )
    return parser


def arm_model(robot_name: str) -> tuple[RobotModel, str]:
    """The arm with its fingers locked, as a RobotModel of its own (7 joints)."""
    robot = load_robot(robot_name)
    full = robot.model
    reference = full.neutral()
    for name, value in robot.locked.items():
        reference[full.q_index(name)] = value
    locked_ids = [full.model.getJointId(name) for name in robot.locked]
    reduced = pin.buildReducedModel(full.model, locked_ids, reference)
    base = full.model.frames[full.base_frame_id].name
    return RobotModel(reduced, tcp_frame=robot.frame, base_frame=base), robot.frame


def targets(model: RobotModel, home: np.ndarray, count: int) -> list[np.ndarray]:
    """The circle of TCP poses, one per step."""
    start = model.frame_pose(home)
    poses = []
    for k in range(count):
        phase = 2 * np.pi * FREQUENCY * k * DT
        pose = start.copy()
        pose[1, 3] += RADIUS * (np.cos(phase) - 1.0)
        pose[2, 3] += RADIUS * np.sin(phase)
        poses.append(pose)
    return poses


def run_ours(
    generator: DifferentialIkBase, model: RobotModel, home: np.ndarray, poses: list[np.ndarray]
) -> tuple[np.ndarray, float]:
    """Per-step times [s] and the mean TCP position error [m]."""
    q = home.copy()
    zeros = np.zeros(model.nv)
    base = generator.base_frame
    times = np.empty(len(poses))
    errors = np.empty(len(poses))
    for k, pose in enumerate(poses):
        start = time.perf_counter()
        reference = generator.update(JointState(k * DT, q, zeros), CartesianTarget(pose, base), DT)
        q = reference.q
        times[k] = time.perf_counter() - start
        errors[k] = np.linalg.norm(model.frame_pose(q)[:3, 3] - pose[:3, 3])
    return times, float(errors[WARM_UP:].mean())


def run_pink(
    model: RobotModel, frame: str, home: np.ndarray, poses: list[np.ndarray], solver: str
) -> tuple[np.ndarray, float]:
    """The same task with pink; per-step times [s] and the mean TCP position error [m]."""
    import pink  # benchmark-only dependency
    from pink.tasks import FrameTask, PostureTask

    configuration = pink.Configuration(model.model, model.model.createData(), home.copy())
    frame_task = FrameTask(frame, position_cost=1.0, orientation_cost=1.0, gain=BANDWIDTH * DT)
    posture_task = PostureTask(cost=POSTURE_WEIGHT)
    posture_task.set_target(home.copy())
    tasks = [frame_task, posture_task]
    times = np.empty(len(poses))
    errors = np.empty(len(poses))
    with warnings.catch_warnings():
        # Per call, qpsolvers warns that it converts pink's dense matrices to sparse for OSQP
        # and osqp that raise_error's default will change: the conversion is part of what is
        # measured, the warnings are not.
        warnings.filterwarnings("ignore", module="qpsolvers")
        warnings.filterwarnings("ignore", module="osqp")
        for k, pose in enumerate(poses):
            start = time.perf_counter()
            frame_task.set_target(pin.SE3(pose[:3, :3], pose[:3, 3]))
            velocity = pink.solve_ik(configuration, tasks, DT, solver=solver, damping=1e-12)
            configuration.integrate_inplace(velocity, DT)
            times[k] = time.perf_counter() - start
            errors[k] = np.linalg.norm(model.frame_pose(configuration.q)[:3, 3] - pose[:3, 3])
    return times, float(errors[WARM_UP:].mean())


def run(robot_name: str, steps: int, with_pink: bool = True) -> dict[str, object]:
    model, frame = arm_model(robot_name)
    home = np.array(HOME[robot_name])
    poses = targets(model, home, steps + WARM_UP)
    parameters = DiffIkParameters(
        bandwidth=np.full(model.nv, BANDWIDTH), posture=home, posture_weight=POSTURE_WEIGHT
    )
    runners: dict[str, Callable[[], tuple[np.ndarray, float]]] = {
        "ours DLS": lambda: run_ours(
            DlsDiffIk(model, model.joint_names, parameters), model, home, poses
        ),
        "ours QP (OSQP)": lambda: run_ours(
            QpDiffIk(model, model.joint_names, parameters, qp_solver="osqp"), model, home, poses
        ),
        "ours QP (daqp)": lambda: run_ours(
            QpDiffIk(model, model.joint_names, parameters, qp_solver="daqp"), model, home, poses
        ),
    }
    if with_pink:
        runners["pink + OSQP"] = lambda: run_pink(model, frame, home, poses, "osqp")
        runners["pink + daqp"] = lambda: run_pink(model, frame, home, poses, "daqp")
    results = {}
    for name, runner in runners.items():
        times, tracking = runner()
        timed = times[WARM_UP:]
        results[name] = {
            "p50_us": float(np.percentile(timed, 50) * 1e6),
            "p99_us": float(np.percentile(timed, 99) * 1e6),
            "mean_us": float(timed.mean() * 1e6),
            "mean_tracking_error_mm": tracking * 1e3,
        }
    return {
        "robot": robot_name,
        "frame": frame,
        "steps": steps,
        "dt": DT,
        "solvers": results,
        "binding": binding_solves(model, steps),
    }


def binding_solves(model: RobotModel, steps: int, seed: int = 3) -> dict[str, dict[str, float]]:
    """The QP solvers where they are needed: on the circle no bound binds, and both QP rows
    above take the unconstrained minimizer (no solver call). Here, per solver, the same
    ``steps`` ticks from random starts toward far random targets with tight velocity bounds
    (velocity_scale 0.3, bandwidth 50 s⁻¹), where bounds bind on most ticks: the time of each
    box-QP solve (``QpDiffIk.solve_bounded``) and the fraction of ticks that needed one."""
    rng_lower, rng_upper = model.limits.lower + 0.05, model.limits.upper - 0.05
    outcome = {}
    for solver in ("osqp", "daqp"):
        rng = np.random.default_rng(seed)
        generator = QpDiffIk(
            model,
            model.joint_names,
            DiffIkParameters(
                bandwidth=np.full(model.nv, 50.0),
                position_margin=0.05,
                velocity_scale=0.3,
                max_linear_velocity=5.0,
                max_angular_velocity=10.0,
            ),
            qp_solver=solver,
        )
        solve = generator.solve_bounded
        times: list[float] = []

        def timed(qp, solve=solve, times=times):
            start = time.perf_counter()
            result = solve(qp)
            times.append(time.perf_counter() - start)
            return result

        generator.solve_bounded = timed  # type: ignore[method-assign]
        ticks = 0
        while ticks < steps:
            q = rng.uniform(rng_lower, rng_upper)
            generator.reset()
            target = np.eye(4)
            target[:3, :3] = pin.exp3(rng.normal(size=3))
            target[:3, 3] = model.frame_pose(q)[:3, 3] + rng.normal(scale=0.3, size=3)
            goal = CartesianTarget(target, generator.base_frame)
            for _ in range(min(100, steps - ticks)):
                q = generator.update(JointState(ticks * DT, q, np.zeros(model.nv)), goal, DT).q
                ticks += 1
        solves = np.array(times[WARM_UP:]) if len(times) > WARM_UP else np.array(times)
        outcome[solver] = {
            "p50_us": float(np.percentile(solves, 50) * 1e6) if solves.size else float("nan"),
            "p99_us": float(np.percentile(solves, 99) * 1e6) if solves.size else float("nan"),
            "solves": len(times),
            "fraction": len(times) / max(ticks, 1),
        }
    return outcome


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.steps < 1:
        print("ct-bench diffik: --steps must be ≥ 1")
        return 2
    outcome = run(args.robot, args.steps, with_pink=not args.no_pink)
    if args.json:
        print(json.dumps(outcome))
        return 0
    print(
        f"ct-bench diffik: {outcome['robot']} (frame {outcome['frame']}), {args.steps} steps of "
        f"{DT * 1e3:g} ms per solver, circle r = {RADIUS * 100:g} cm at {FREQUENCY:g} Hz"
    )
    print(
        f"  {'solver':16s} {'p50 [µs]':>9s} {'p99 [µs]':>9s} {'mean [µs]':>10s} {'track [mm]':>11s}"
    )
    solvers = outcome["solvers"]
    assert isinstance(solvers, dict)
    for name, row in solvers.items():
        print(
            f"  {name:16s} {row['p50_us']:9.1f} {row['p99_us']:9.1f} {row['mean_us']:10.1f} "
            f"{row['mean_tracking_error_mm']:11.3f}"
        )
    print("  issue anchors (Panda): pink + OSQP p50 685 / p99 1060 µs, pink + daqp 86 / 162 µs")
    binding = outcome["binding"]
    assert isinstance(binding, dict)
    print(
        "  where a bound binds (random starts, far targets, tight velocity bounds; "
        "the box-QP solve alone):"
    )
    for name, row in binding.items():
        print(
            f"    {name:5s} p50 {row['p50_us']:6.1f} µs  p99 {row['p99_us']:6.1f} µs  "
            f"({row['solves']} solves, {row['fraction']:.0%} of ticks)"
        )
    return 0
