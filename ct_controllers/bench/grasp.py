"""``ct-bench grasp``: pick-and-place trials through the real stack in MuJoCo.

Each trial builds the stack from controllers.yaml (MuJoCo lockstep at 1 kHz), places the cube at a
random pose on the table — the scene derived from the robot's reach R and its gripper's opening
(``hardware/grasp_scene.py``): x ∈ [0.435 R, 0.58 R], y ∈ ±0.145 R, yaw ∈ [−45°, 45°], a cube
of min(5 cm, 0.625 × the full opening), or for one revolute jaw that cannot hold that cube
top-down the largest its tilted grasp holds (``hardware/jaw_grasp.py``); the bundled arm:
x ∈ [0.45, 0.60] m, y ∈ ±0.15 m, 5 cm; an arm whose goal-check IK does not reach 8 cm
(approach) and 10 cm (lift) above every sample of that region gets a region and lowered
heights it reaches (``bench/grasp_reach.py``, printed as ``placement:``) — takes of the cube's
four equivalent top-down grasps (quarter turns about its vertical) the first the goal check
accepts with its joints clear of their limits (:func:`best_reachable`), and runs the grasp
phase machine → differential IK (QP, OSQP) → computed torque (arm) and the gripper servo
(fingers) → limiter → MuJoCo: approach from above, close, lift 10 cm, hold 0.5 s, put it back,
release. A trial succeeds when the machine reaches DONE within 10 s of sim time;
every failure is reported with its phase and reason. The Grasp action's goal check runs first
(``chains/grasp_goal.py``: an IK solution for the grasp and pre-grasp poses): a goal it would
refuse ends the trial UNREACHABLE, with its reason, before anything moves.

Each trial is a pure function of (seed, trial index, options): its cube comes from a random
stream of its own (:func:`trial_cube`), and it builds its own stack. ``--workers N`` runs the
trials in N worker processes (spawned, not forked: no thread or DDS state is inherited; none of
them starts rclpy) with the same per-trial results as one process; results are gathered and
printed in trial order.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ct_controllers.bench.grasp_reach import SOLVE_RESTARTS, GraspReach, grasp_reach
from ct_controllers.chains.grasp_goal import grasp_goal_ik, no_gripper_refusal, unreachable_pose
from ct_controllers.chains.grasp_runner import GraspRunner, ObjectReading, build_grasp_runner
from ct_controllers.config import ConfigError, StackConfig, load_config
from ct_controllers.hardware.grasp_scene import (
    GraspScene,
    cube_size,
    grasp_scene,
    with_fingertips,
)
from ct_controllers.hardware.jaw_grasp import robot_jaw_grasp
from ct_controllers.hardware.mujoco_objects import ObjectSensor, fingertip_depth, place_object
from ct_controllers.hardware.mujoco_scene import CUBE_BODY, CUBE_HALF_SIZE
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.ik.solver import IkSolver
from ct_controllers.model.description import load_description
from ct_controllers.model.grip_geometry import gripper_geometry
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.stack import Stack, build_stack, to_model_order
from ct_controllers.sim_demo import RunObserver
from ct_controllers.tasks.phases import ACTIVE_PHASES, GraspGoal, GraspTask, Phase, lifted

REGION = {"x": (0.45, 0.60), "y": (-0.15, 0.15), "yaw": (-math.pi / 4, math.pi / 4)}
TRIAL_LIMIT = 10.0  # [s] of sim time per trial
SENSING = ("full", "joints")
# Success-rate goals: with the object sensor, and by the robot's own joint sensing alone.
GOAL_SUCCESS_RATE = {"full": 0.98, "joints": 0.95}
# A trial's final phase when the Grasp action's goal check would refuse its goal (no IK solution
# for its grasp or pre-grasp pose, :func:`~ct_controllers.chains.grasp_goal.unreachable_pose`):
# nothing moves, and the trial says so rather than timing out in APPROACH.
UNREACHABLE = "UNREACHABLE"
QUARTER_TURNS = (0.0, math.pi / 2, -math.pi / 2, math.pi)  # [rad] a cube's equivalent grasps
# [rad | m] inside the goal check's bounds (the limits less the differential IK's margin) that a
# grasp's and its lift's IK solutions keep every joint, for it to be taken without looking
# further (:func:`best_reachable`)
LIMIT_ROOM = 0.1


@dataclass(frozen=True)
class TrialResult:
    trial: int
    cube: tuple[float, float, float]  # x [m], y [m], yaw [rad]
    success: bool
    final_phase: str
    reason: str
    sim_time: float  # [s]
    phase_durations: dict[str, float] = field(default_factory=dict)


def trial_cube(
    seed: int, trial: int, region: Mapping[str, tuple[float, float]] = REGION
) -> tuple[float, float, float]:
    """Trial ``trial``'s cube pose (x [m], y [m], yaw [rad]), uniform over ``region`` (the
    robot's scene's, :func:`robot_scene`; by default the bundled arm's REGION): a pure
    function of (seed, trial, region). Each trial draws from a stream of its own — numpy's
    ``SeedSequence(seed, spawn_key=(trial,))``, i.e. child ``trial`` of
    ``SeedSequence(seed).spawn`` — so its cube does not depend on which trials ran before it,
    in which process or in which order."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(trial,)))
    x, y, yaw = (float(rng.uniform(*region[k])) for k in ("x", "y", "yaw"))
    return x, y, yaw


@functools.lru_cache(maxsize=8)
def _scene(
    robot_description: str,
    backend: str,
    tcp: str,
    base: str,
    fingers: tuple[str, ...],
    frames: tuple[str, ...],
    arm_joints: int,
) -> GraspScene:
    description = load_description(robot_description or None, mappings={"backend": backend})
    model = RobotModel(description.urdf, tcp_frame=tcp, base_frame=base)
    grip = gripper_geometry(model, fingers, frames)
    source = Path(description.source)
    directory = str(source.parent) if source.is_file() else None
    jaw = robot_jaw_grasp(description.urdf, directory, tcp, grip, cube_size(grip), arm_joints)
    return grasp_scene(model, grip, jaw)


def robot_scene(config: StackConfig) -> GraspScene:
    """The grasp scene of ``config``'s robot (its reach and gripper: table, cube, placement
    region, grip offset), as its MuJoCo scene builds it; once per robot and process."""
    return _scene(*_robot(config))


def _robot(config: StackConfig) -> tuple[str, str, str, str, tuple[str, ...], tuple[str, ...], int]:
    """What a robot's grasp scene depends on: its description, backend, frames, gripper."""
    return (
        config.robot_description,
        config.backend,
        config.tcp_frame,
        config.base_frame,
        config.gripper_joints,
        config.grip_width_frames,
        len(config.arm_joints),
    )


def random_cubes(seed: int) -> Iterator[tuple[float, float, float]]:
    """Cube poses (x [m], y [m], yaw [rad]) drawn uniformly over REGION, reproducible by seed:
    one stream consumed in order (``ct-bench loop``'s cubes; ``ct-bench grasp`` gives each
    trial its own, :func:`trial_cube`)."""
    rng = np.random.default_rng(seed)
    while True:
        x, y, yaw = (float(rng.uniform(*REGION[k])) for k in ("x", "y", "yaw"))
        yield x, y, yaw


def top_down_grasp(x: float, y: float, yaw: float, scene: GraspScene | None = None) -> np.ndarray:
    """TCP pose for the cube at (x, y, yaw) [m, rad]: tool z down, fingers (tool y) across the
    cube's y faces, the grip's centre at the cube's centre — the TCP shifted by the scene's
    grip offset (0 for symmetric fingers; one jaw: toward its fixed jaw) — at the scene's
    grasp height (the cube's centre, higher where the fingers reach further past the TCP).
    ``scene``: the robot's (None: the bundled arm's 5 cm cube, no offset). A scene with a
    one-jaw grasp (``tcp_in_cube``, ``hardware/jaw_grasp.py``): the cube's pose resting on the
    table composed with the TCP's pose in it (tilted about the hinge axis)."""
    if scene is not None and (tcp_in_cube := scene.tcp_in_cube_pose) is not None:
        return cube_pose(x, y, yaw, scene) @ tcp_in_cube
    c, s = math.cos(yaw), math.sin(yaw)
    y_axis = np.array([-s, c, 0.0])
    z_axis = np.array([0.0, 0.0, -1.0])
    pose = np.eye(4)
    pose[:3, :3] = np.column_stack([np.cross(y_axis, z_axis), y_axis, z_axis])
    half = CUBE_HALF_SIZE if scene is None else scene.tcp_height
    offset = np.zeros(3) if scene is None else np.array(scene.grip_offset)
    pose[:3, 3] = np.array([x, y, half]) - pose[:3, :3] @ offset
    return pose


def cube_grasps(x: float, y: float, yaw: float, scene: GraspScene) -> list[np.ndarray]:
    """The top-down grasps of the cube at (x, y, yaw) [m, rad] (:func:`top_down_grasp`), its
    yaw first, then turned a quarter turn either way, then a half turn: a cube's grasp turned
    about its vertical axis by a quarter turn grasps the same cube across its other faces, and
    an arm of five joints (or a wrist's limits) reaches some of these and not others."""
    return [top_down_grasp(x, y, yaw + turn, scene) for turn in QUARTER_TURNS]


def cube_pose(x: float, y: float, yaw: float, scene: GraspScene) -> np.ndarray:
    """The pose of ``scene``'s cube resting on its table (the cube's centre half its size [m]
    above the table's top) at (x, y, yaw)."""
    pose = np.eye(4)
    c, s = math.cos(yaw), math.sin(yaw)
    pose[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    pose[:3, 3] = [x, y, scene.table_height + scene.cube_half_size]
    return pose


@dataclass
class GraspSetup:
    """A stack with the grasp runner built (and installed, unless set up with ``install=False``)."""

    stack: Stack
    task: GraspTask
    runner: GraspRunner
    sensor: ObjectSensor
    # The robot's grasp scene, its grasp height from the fingers' geometry in this scene.
    scene: GraspScene | None = None


def grasp_setup(
    config: StackConfig,
    cube: tuple[float, float, float],
    record: bool = False,
    sense: Callable[[ObjectSensor], ObjectReading] | None = None,
    install: bool = True,
    sensing: str = "full",
) -> GraspSetup:
    """Build and bring up the stack, place the cube, build the runner (not started) and, with
    ``install``, install it in the loop (else the caller switches it in, e.g. into a running
    loop as a goal does). ``sensing``: "full" (the simulated object sensor: pose and contact
    forces) or "joints" (no object sensor: the task judges by the joint state alone)."""
    if sensing not in SENSING:
        raise ValueError(f"sensing must be one of {', '.join(SENSING)}, got {sensing!r}")
    stack = build_stack(config)
    stack.bring_up()
    hardware = stack.hardware
    if not isinstance(hardware, MujocoSystem):
        raise TypeError("the grasp benchmark needs the MuJoCo backend")
    place_object(hardware, CUBE_BODY, cube_pose(*cube, robot_scene(config)))
    # The scene's sensor: the cube and the bodies this robot's finger joints move (a mimic
    # follower's too), whatever their names.
    sensor = hardware.object_sensor()
    if not isinstance(sensor, ObjectSensor):
        raise TypeError("the grasp benchmark needs the scene's cube and its object sensor")
    reader: Callable[[], ObjectReading] | None = None  # "joints": no object sensor
    if sensing == "full":
        reader = sensor.observe if sense is None else functools.partial(sense, sensor)
    runner = build_grasp_runner(
        stack, stack.controllers["computed_torque"], record=record, sense_object=reader
    )
    if install:
        stack.loop.switch_controller(runner)
    return GraspSetup(stack, runner.task, runner, sensor, fingertip_scene(config, hardware, sensor))


def fingertip_scene(
    config: StackConfig, hardware: MujocoSystem, sensor: ObjectSensor
) -> GraspScene:
    """The robot's grasp scene with its grasp height for the fingers' reach past the TCP, at
    the present pose (home: the fingers open as they approach), in ``hardware``'s scene."""
    depth = fingertip_depth(hardware, sensor.finger_ids, config.tcp_frame)
    return with_fingertips(robot_scene(config), depth)


def run_trial(
    config: StackConfig,
    trial: int,
    cube: tuple[float, float, float],
    goal: GraspGoal | None = None,
    record: bool = False,
    sensing: str = "full",
    observers: Callable[[GraspSetup, GraspGoal], Sequence[RunObserver]] | None = None,
    reach: GraspReach | None = None,
) -> tuple[TrialResult, GraspSetup]:
    """One trial. ``goal``: the grasp goal (None: the cube's top-down grasps with the robot's
    approach offset and lift height, ``reach`` or :func:`robot_reach`, and the scene's grip
    effort for its cube (``hardware/grasp_scene.grip_effort``): of those the goal check accepts,
    :func:`best_reachable`). ``observers``: made from the set-up trial and its goal (a recorder,
    a video renderer), they look at the run between ticks (see ``sim_demo.RunObserver``)."""
    setup = grasp_setup(config, cube, record, sensing=sensing)
    try:
        stack = setup.stack
        home = to_model_order(stack.model, config.joint_names, config.home_positions, "home")
        if goal is None:
            assert setup.scene is not None
            placement = reach or robot_reach(config)
            effort = setup.scene.grasp_effort
            goals = [
                placement.goal(pose, grasp_effort=effort)
                for pose in cube_grasps(*cube, setup.scene)
            ]
        else:
            goals = [goal]
        grasp_goal, unreachable = best_reachable(grasp_goal_ik(stack), goals, home)
        if unreachable is not None:  # the action's goal check refuses it: nothing moves
            return TrialResult(trial, cube, False, UNREACHABLE, unreachable, 0.0), setup
        setup.task.start(grasp_goal)
        loop = setup.stack.loop
        watching = list(observers(setup, grasp_goal)) if observers is not None else []
        for observer in watching:
            observer.started(setup.stack)
        ticks = round(TRIAL_LIMIT / config.period)
        for _ in range(ticks // 10):
            loop.run_ticks(10)
            for observer in watching:
                observer.ticked(setup.stack)
            if setup.task.finished or loop.fault is not None:
                break
        snapshot = loop.snapshot()
        sim_time = 0.0 if snapshot is None else snapshot.stamp
    finally:
        setup.stack.shut_down()
    task = setup.task
    if task.phase == Phase.DONE:
        reason = "done"
    elif task.failure is not None:
        reason = task.failure.reason
    elif loop.fault is not None:
        reason = f"control loop fault: {loop.fault}"
    else:
        reason = f"{task.phase.value}: not finished within {TRIAL_LIMIT} s"
    failed_in = task.failure.source.value if task.failure is not None else task.phase.value
    result = TrialResult(
        trial=trial,
        cube=cube,
        success=task.phase == Phase.DONE,
        final_phase="DONE" if task.phase == Phase.DONE else failed_in,
        reason=reason,
        sim_time=sim_time,
        phase_durations={p.value: d for p, d in task.phase_durations.items()},
    )
    return result, setup


def best_reachable(
    ik: IkSolver, goals: Sequence[GraspGoal], q: np.ndarray
) -> tuple[GraspGoal, str | None]:
    """Of ``goals`` (a cube's equivalent grasps, the preferred first), the first the Grasp
    action's goal check accepts from ``q`` whose grasp and lift keep every joint at least
    ``LIMIT_ROOM`` inside the bounds the check solves within (:func:`limit_clearance`), else
    the accepted one with the most room, with None; or the first goal with the check's reason
    when it accepts none. The grasp runs on the differential IK, which follows its own path
    and stops at the margin it keeps from a limit: an accepted grasp whose lift needed a wrist
    joint past it stalled (the Panda, seed 1 trial 19: joint 7 at −2.847 rad, 1.6 cm short),
    where the same cube grasped a quarter turn round has room. Taking the most room always
    instead lengthened the approaches (APPROACH p50 2.5 → 3.1 s on the Panda, one timed out)."""
    best: tuple[float, GraspGoal] | None = None
    first: str | None = None
    for candidate in goals:
        unreachable = unreachable_pose(ik, candidate, q)
        if unreachable is not None:
            first = first or unreachable
            continue
        clearance = limit_clearance(ik, candidate, q)
        if clearance >= LIMIT_ROOM:
            return candidate, None
        if best is None or clearance > best[0]:
            best = (clearance, candidate)
    if best is None:
        return goals[0], first
    return best[1], None


def limit_clearance(ik: IkSolver, goal: GraspGoal, q: np.ndarray) -> float:
    """[rad | m] the least distance of any joint ``ik`` solves from the bounds it solves
    within (the limits less its margin; a continuous joint: none), over the grasp pose's
    solution from ``q`` and the lifted pose's from that one (the lift continues from the
    grasp; −inf where either has none)."""
    lower, upper = ik.bounds()
    grasp = ik.solve(goal.grasp_pose, seed=q)
    if not grasp.converged:
        return -math.inf
    lift = ik.solve(lifted(goal.grasp_pose, goal.lift_height), seed=grasp.q)
    if not lift.converged:
        return -math.inf
    solved = np.isfinite(lower) & np.isfinite(upper) & (upper > lower)
    clearance = math.inf
    for solution in (grasp.q, lift.q):
        room = np.minimum(solution - lower, upper - solution)[solved]
        if room.size:
            clearance = min(clearance, float(room.min()))
    return clearance


# A robot's grasp placement per process: (description, backend, frames, joints, home) → reach.
_REACHES: dict[tuple[object, ...], GraspReach] = {}


def robot_reach(config: StackConfig) -> GraspReach:
    """Where ``config``'s robot grasps top-down: the placement region, approach offset and
    lift height its goal check's IK reaches from home (``bench/grasp_reach.py``), over its
    grasp scene as MuJoCo builds it; once per robot and process."""
    key = (*_robot(config), tuple(config.arm_joints), tuple(config.home_positions))
    if key not in _REACHES:
        scene = robot_scene(config)
        setup = grasp_setup(config, (*scene.cube_start, 0.0), install=False)
        try:
            stack = setup.stack
            fingertips = setup.scene
            assert fingertips is not None
            home = to_model_order(stack.model, config.joint_names, config.home_positions, "home")
            _REACHES[key] = grasp_reach(
                fingertips,
                grasp_goal_ik(stack, max_restarts=SOLVE_RESTARTS),
                home,
                partial(cube_grasps, scene=fingertips),
            )
        finally:
            setup.stack.shut_down()
    return _REACHES[key]


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned worker processes (a fork would copy this process's threads and any
    DDS state mid-flight), each ending itself if this process dies without shutting the pool
    down (killed), rather than waiting on its queue forever."""
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(
        workers, mp_context=context, initializer=_end_with_parent, initargs=(os.getpid(),)
    )


def _end_with_parent(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def seeded_trial(
    config: StackConfig, seed: int, sensing: str, reach: GraspReach, trial: int
) -> TrialResult:
    """Trial ``trial`` of ``seed``: its cube from :func:`trial_cube` over ``reach``'s region,
    a stack of its own — a pure function of its arguments, run in this process or in a worker
    alike."""
    cube = trial_cube(seed, trial, reach.region)
    return run_trial(config, trial, cube, sensing=sensing, reach=reach)[0]


def run_trials(
    config: StackConfig, seed: int, trials: int, sensing: str = "full", workers: int = 1
) -> list[TrialResult]:
    """Trials 0 … ``trials`` − 1 of ``seed``, in trial order: in this process (``workers`` 1)
    or in ``workers`` processes (:func:`worker_pool`), each trial sent to whichever worker is
    free. The workers build their stacks as this process does; none starts rclpy."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    one = partial(seeded_trial, config, seed, sensing, robot_reach(config))
    if workers == 1:
        return [one(trial) for trial in range(trials)]
    with worker_pool(min(workers, trials)) as pool:
        return list(pool.map(one, range(trials)))


def run(
    trials: int,
    seed: int,
    config: StackConfig | None = None,
    sensing: str = "full",
    workers: int = 1,
) -> dict:
    """``trials`` trials of ``seed`` (see :func:`run_trials`) and their summary; ``wall_time``
    [s] and ``trials_per_minute`` include starting the workers. A robot without a gripper:
    ConfigError with the Grasp action's own refusal, before anything is built."""
    config = config or load_config(overrides={"mujoco.mode": "lockstep"})
    refusal = no_gripper_refusal(config.gripper_joints)
    if refusal is not None:  # as the Grasp action refuses it: nothing is built or moved
        raise ConfigError(refusal)
    reach = robot_reach(config)  # before the clock: the trials' rate is the trials'
    scene = robot_scene(config)
    wall = time.perf_counter()
    results = run_trials(config, seed, trials, sensing, workers)
    wall = time.perf_counter() - wall
    successes = sum(r.success for r in results)
    durations = {}
    for phase in ACTIVE_PHASES:
        values = [
            r.phase_durations[phase.value] for r in results if phase.value in r.phase_durations
        ]
        if values:
            p50, p95 = np.percentile(values, [50, 95])
            durations[phase.value] = {"p50": float(p50), "p95": float(p95)}
    return {
        "trials": trials,
        "successes": successes,
        "success_rate": successes / trials if trials else 0.0,
        "failures": [
            {"trial": r.trial, "phase": r.final_phase, "reason": r.reason, "cube": list(r.cube)}
            for r in results
            if not r.success
        ],
        "phase_durations": durations,
        "sim_time_max": max((r.sim_time for r in results), default=0.0),
        "wall_time": wall,
        "workers": workers,
        "trials_per_minute": 60.0 * trials / wall if wall > 0 else 0.0,
        "seed": seed,
        "sensing": sensing,
        "region": reach.region,
        "table_height": scene.table_height,
        "cube_mass": scene.cube_mass,
        "grasp_effort": scene.grasp_effort,
        "approach_offset": reach.approach_offset,
        "lift_height": reach.lift_height,
        "placement": reach.note,
        "goal_success_rate": GOAL_SUCCESS_RATE[sensing],
        "results": [asdict(r) for r in results],
    }


def plot_trial(path: str, config: StackConfig, cube: tuple[float, float, float]) -> TrialResult:
    """One trial with its TCP error, finger opening, cube height and phase bands, as a PNG."""
    result, setup = run_trial(config, 0, cube, record=True)
    plot_records(path, result, setup)
    return result


def showcase_trial(
    config: StackConfig,
    cube: tuple[float, float, float],
    plot: str | None = None,
    record: str | None = None,
    video: Any = None,
) -> tuple[TrialResult, list[str]]:
    """One trial, plotted (PNG), recorded (MCAP: the state topics, TF and the grasp as the
    node records a Grasp goal) and filmed (``video``: a ``VideoRecorder``), as asked; returns
    its result and a line per output."""
    from ct_controllers.ros.sim_recording import GraspRecorder

    made: list[Any] = []

    def observers(setup: GraspSetup, goal: GraspGoal) -> list[RunObserver]:
        if record:
            made.append(
                GraspRecorder(record, "grasp → diff_ik → computed_torque", setup.runner, goal)
            )
        if video is not None:
            made.append(video)
        return made

    try:
        result, setup = run_trial(config, 0, cube, record=plot is not None, observers=observers)
    except BaseException:
        for observer in made:
            observer.close()
        raise
    lines = []
    for observer in made:
        if isinstance(observer, GraspRecorder):
            code = _result_code(result)
            observer.ended(code, result.reason, result.sim_time)
        lines.append(observer.close().describe())
    if plot:
        plot_records(plot, result, setup)
        lines.append(f"plot: {plot}")
    return result, lines


def _result_code(result: TrialResult) -> int:
    """The Grasp action's error code for a bench trial's outcome."""
    from ct_interfaces.action import Grasp

    if result.success:
        return int(Grasp.Result.SUCCESS)
    if result.reason.startswith("control loop fault"):
        return int(Grasp.Result.FAULT)
    return int(Grasp.Result.PHASE_FAILED)


def plot_records(path: str, result: TrialResult, setup: GraspSetup) -> None:
    """A recorded trial's TCP error, finger opening, cube height and phase bands, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = setup.runner.records or []
    t = np.array([r.time for r in records])
    figure, axes = plt.subplots(3, 1, sharex=True, figsize=(8, 6))
    series = (
        ("TCP error [m]", [r.tcp_error for r in records]),
        ("finger opening [m]", [r.finger_opening for r in records]),
        ("cube height [m]", [r.object_height for r in records]),
    )
    colors = {"APPROACH": "#dde", "CLOSE": "#ede", "HOLD": "#dfd", "RELEASE": "#fed"}
    for axis, (label, values) in zip(axes, series, strict=True):
        axis.plot(t, values, color="k", linewidth=1)
        axis.set_ylabel(label)
        start = 0
        for i in range(1, len(records) + 1):
            if i == len(records) or records[i].phase != records[start].phase:
                axis.axvspan(
                    t[start],
                    t[i - 1],
                    color=colors.get(records[start].phase.value, "#eee"),
                    linewidth=0,
                )
                start = i
    axes[0].set_title(
        f"grasp trial: {result.final_phase} ({result.reason})\nbands: APPROACH "
        "blue, CLOSE violet, HOLD green, RELEASE orange",
        fontsize=10,
    )
    axes[-1].set_xlabel("sim time [s]")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    from ct_controllers.cli import add_video_arguments, video_recorder

    parser = argparse.ArgumentParser(
        prog="ct-bench grasp",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="trial k's cube comes from (seed, k) alone: the same whatever --workers",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="run the trials in N worker processes (1: in this one); the same per-trial results "
        "whatever N, printed in trial order",
    )
    parser.add_argument("--config", help="controllers.yaml of the robot (default: the bundled)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", metavar="FILE.png", help="also run one trial and plot it")
    parser.add_argument(
        "--record",
        metavar="FILE.mcap",
        help="also run one trial and record it to MCAP (state topics, TF, the grasp goal with "
        "its feedback and result; sim time)",
    )
    add_video_arguments(parser)
    parser.add_argument(
        "--sensing",
        choices=SENSING,
        default="full",
        help="full: the simulated object sensor (pose, contact forces); joints: none, the task "
        "judges by the joint state alone",
    )
    parser.add_argument(
        "--cartesian-rate",
        type=float,
        default=0.0,
        help="[Hz] rate of the task + differential-IK stage (cartesian.update_rate; 0: every tick)",
    )
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("--trials must be >= 1")
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    try:
        config = load_config(
            args.config,
            overrides={"mujoco.mode": "lockstep", "cartesian.update_rate": args.cartesian_rate},
        )
    except ConfigError as exc:
        parser.error(str(exc))
    try:
        report = run(args.trials, args.seed, config, args.sensing, args.workers)
    except ConfigError as exc:  # a robot without a gripper
        print(f"ct-bench grasp: {exc}", file=sys.stderr)
        return 2
    outputs: list[str] = []
    if args.plot or args.record or args.video:
        video = video_recorder(args) if args.video else None
        cube = trial_cube(args.seed, 0, robot_reach(config).region)
        outputs = showcase_trial(config, cube, args.plot, args.record, video)[1]
    if args.json:
        print(json.dumps(report))
        return 0
    scene, reach = robot_scene(config), robot_reach(config)
    # A table raised to where the arm reaches down (its root link below: a pedestal, a base).
    table = f"; table top at {scene.table_height:.3f} m" if scene.table_height > 0 else ""
    print(
        f"ct-bench grasp: {report['trials']} trials (seed {args.seed}), "
        f"{2000 * scene.cube_half_size:.0f} mm cube of {1000 * scene.cube_mass:.3g} g gripped "
        f"with {scene.grasp_effort:.3g} N, x ∈ [{reach.x[0]:.3f}, {reach.x[1]:.3f}] m, "
        f"y ∈ ±{reach.y[1]:.3f} m, yaw ∈ ±45° (from the reach {scene.reach:.3f} m and the "
        f"gripper's opening{table}), approach {100 * reach.approach_offset:.0f} cm, lift "
        f"{100 * reach.lift_height:.0f} cm; task + diff IK at "
        f"{config.effective_cartesian_rate:.0f} Hz; sensing: {args.sensing}"
    )
    if reach.note:
        print(f"  placement: {reach.note}")
    print(
        f"  success {report['successes']}/{report['trials']} = {report['success_rate']:.1%} "
        f"(goal ≥ {GOAL_SUCCESS_RATE[args.sensing]:.0%}), longest trial "
        f"{report['sim_time_max']:.2f} s sim "
        f"(limit {TRIAL_LIMIT:.0f} s)"
    )
    workers = report["workers"]
    print(
        f"  workers: {'1 (this process)' if workers == 1 else f'{workers} processes'}, wall "
        f"{report['wall_time']:.1f} s, {report['trials_per_minute']:.1f} trials/min"
    )
    for phase, figures in report["phase_durations"].items():
        print(f"  {phase:9s} p50 {figures['p50']:.3f} s  p95 {figures['p95']:.3f} s")
    for failure in report["failures"]:
        print(
            f"  FAILED trial {failure['trial']}: {failure['phase']}: {failure['reason']} "
            f"(cube x {failure['cube'][0]:.3f}, y {failure['cube'][1]:.3f}, "
            f"yaw {math.degrees(failure['cube'][2]):.0f}°)"
        )
    for output in outputs:
        print(f"  {output}")
    return 0
