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
            QpDiffIk(model, model.joint_names, parameters), model, home, poses
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
    return {"robot": robot_name, "frame": frame, "steps": steps, "dt": DT, "solvers": results}


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
    return 0
