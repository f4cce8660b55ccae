"""``ct-bench loop``: does the full stack keep its period?

Lockstep: the whole stack — grasp phase machine → differential IK (QP) → computed torque →
limiter → MuJoCo — at 1 kHz, grasp trials back to back for ``--sim-seconds`` of sim time (default
60 s); prints the real-time factor and the per-stage compute times, beside a bare loop that only
steps the same MuJoCo scene with zero torque (the floor). Goal: ≥ 10× real time.

Paced: the same stack with the loop in its own thread paced to 1 kHz on the monotonic clock (the
simulation following the wall clock) for ``--paced-seconds`` of wall time (default 60 s); prints
period jitter (tick start − scheduled start) p50/p99/max and overruns (a tick starting more than
half a period late, or computing for more than a period). Then the same with the machine loaded
by a second process spinning a busy loop on one core. Each trial of a paced run is followed, for as
long and under the same load, by the machine's floor (:mod:`ct_controllers.bench.machine_floor`):
a bare loop paced and scheduled alike whose ticks do a fixed amount of numpy work, calibrated to
the stack's median compute — the overruns, slowdowns and stalls the machine causes by itself.
Each paced run also reports the goals' starts: the compute of a chain's first ticks after its
switch. Goal on this non-real-time kernel: p99 jitter ≤ 100 µs and no overrun at 1 kHz.

``--record FILE.mcap``: what recording costs the node's loop. Two more paced runs, each with its
machine floor: one with a thread doing what the node's state publishers do at 100 Hz (build the
joint states, /tf and the controller state from each snapshot and serialize them to publish),
one with the same thread also recording them to FILE.mcap as the node does (the same bytes handed
to the MCAP writer process; ros/sim_recording.PacedRecorder, ros/recorder.py). Their overruns
differ by what recording adds.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import subprocess
import sys
import time
from typing import Any

import mujoco
import numpy as np

from ct_controllers.bench.grasp import grasp_setup, random_cubes, top_down_grasp
from ct_controllers.bench.machine_floor import FloorRun, paced_floor
from ct_controllers.config import StackConfig, load_config
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.model.description import load_description
from ct_controllers.runtime.realtime import GIL_SWITCH_INTERVAL
from ct_controllers.runtime.timing import GcMonitor, Percentiles, is_overrun
from ct_controllers.tasks.phases import GraspGoal

GOAL_RTF = 10.0
GOAL_JITTER_P99 = 100e-6  # [s]
GOAL_DELAY = 0.05  # [s] paced runs: the loop's run before the grasp goal arrives
GOAL_START_TICKS = 5  # paced runs: the ticks after a goal's switch reported as its start


def lockstep(sim_seconds: float, seed: int, cartesian_rate: float = 0.0) -> dict:
    """``cartesian_rate`` [Hz]: the task + differential-IK stage's own rate (0 = every tick)."""
    config = load_config(
        overrides={"mujoco.mode": "lockstep", "cartesian.update_rate": cartesian_rate}
    )
    stage_samples: dict[str, list[np.ndarray]] = {}
    sim_time = wall = physics = 0.0
    trials = total_ticks = 0
    for cube in random_cubes(seed):
        if sim_time >= sim_seconds:
            break
        setup = grasp_setup(config, cube)
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*cube)))
        loop = setup.stack.loop
        start = time.perf_counter()
        ticks = 0
        while not setup.task.finished and sim_time + ticks * config.period < sim_seconds:
            loop.run_ticks(10)
            ticks += 10
        wall += time.perf_counter() - start
        sim_time += ticks * config.period
        total_ticks += ticks
        physics += getattr(setup.stack.hardware, "physics_seconds", math.nan)
        trials += 1
        for stage in loop.stages.stages:
            stage_samples.setdefault(stage, []).append(loop.stages.samples(stage))
        stage_samples.setdefault("tick", []).append(
            loop.timing._compute[: min(loop.timing.ticks, loop.timing.capacity)].copy()
        )
        setup.stack.shut_down()
    floor_rtf = _floor_rtf(config, min(sim_seconds, 10.0))
    stages = {}
    for stage, parts in stage_samples.items():
        figures = Percentiles.of(np.concatenate(parts))
        stages[stage] = {"p50_us": figures.p50 * 1e6, "p99_us": figures.p99 * 1e6}
    return {
        "rtf": sim_time / wall,
        "floor_rtf": floor_rtf,
        "sim_seconds": sim_time,
        "wall_seconds": wall,
        "trials": trials,
        "cartesian_rate_hz": config.effective_cartesian_rate,
        "physics_mean_us": physics / max(total_ticks, 1) * 1e6,
        "stages": stages,
    }


def _floor_rtf(config: StackConfig, sim_seconds: float) -> float:
    """MuJoCo alone: the same scene stepped with zero torque, no controller, no Python stack."""
    description = load_description(
        config.robot_description or None, mappings={"backend": config.backend}
    )  # the configured robot, not the bundled one, in the very scene the stack builds
    model = MujocoSystem.from_config(description, config).scene_spec().compile()
    data = mujoco.MjData(model)
    steps = round(sim_seconds / model.opt.timestep)
    start = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(model, data)
    return sim_seconds / (time.perf_counter() - start)


BUNDLED = "bundled"  # --config's name for the bundled configuration


def robot_motion(config_path: str | None, sim_seconds: float) -> dict:
    """Lockstep on any robot (``config_path``; None: the bundled arm): ct-sim's scripted motion,
    derived from the robot's home and limits (:mod:`ct_controllers.sim_demo`), run again and
    again for ``sim_seconds`` of sim time; real-time factor, MuJoCo alone (floor), tick and
    stage compute p50/p99 pooled over the runs. The same workload on every robot: what differs
    is the robot (its joints, meshes, contacts)."""
    from ct_controllers.sim_demo import run_scripted_motion

    config = load_config(config_path, overrides={"mujoco.mode": "lockstep", "backend": "mujoco"})
    sim_time = wall = 0.0
    ticks: list[np.ndarray] = []
    stage_samples: dict[str, list[np.ndarray]] = {}
    runs = 0
    while sim_time < sim_seconds:
        summary = run_scripted_motion(config)
        sim_time += summary.sim_time
        wall += summary.wall_time
        ticks.append(summary.tick_compute)
        for stage, samples in summary.stage_compute.items():
            stage_samples.setdefault(stage, []).append(samples)
        runs += 1
        if not summary.ok:
            raise RuntimeError(f"{config_path or BUNDLED}: the scripted motion did not end home")
    tick = Percentiles.of(np.concatenate(ticks))
    stages = {}
    for stage, parts in stage_samples.items():
        figures = Percentiles.of(np.concatenate(parts))
        stages[stage] = {"p50_us": figures.p50 * 1e6, "p99_us": figures.p99 * 1e6}
    return {
        "config": config_path or BUNDLED,
        "joints": len(config.joint_names),
        "runs": runs,
        "rtf": sim_time / wall,
        "floor_rtf": _floor_rtf(config, min(sim_seconds, 10.0)),
        "sim_seconds": sim_time,
        "wall_seconds": wall,
        "tick_p50_us": tick.p50 * 1e6,
        "tick_p99_us": tick.p99 * 1e6,
        "stages": stages,
    }


def print_robots(rows: list[dict]) -> None:
    """The robots side by side (:func:`robot_motion`)."""
    print(
        "ct-bench loop: lockstep at 1000 Hz, ct-sim's scripted motion (derived from each robot) "
        "through the full stack (joint trajectory → controller → limiter → MuJoCo)"
    )
    print(
        f"  {'robot':40s} {'joints':>6s} {'RTF':>7s} {'floor RTF':>10s} "
        f"{'tick p50 [µs]':>14s} {'tick p99 [µs]':>14s}  write p50/p99 [µs]"
    )
    for row in rows:
        write = row["stages"].get("write", {"p50_us": math.nan, "p99_us": math.nan})
        print(
            f"  {row['config'][-40:]:40s} {row['joints']:6d} {row['rtf']:6.1f}x "
            f"{row['floor_rtf']:9.1f}x {row['tick_p50_us']:14.1f} {row['tick_p99_us']:14.1f}  "
            f"{write['p50_us']:.0f}/{write['p99_us']:.0f}"
        )


def paced(
    wall_seconds: float,
    seed: int,
    rate: float = 1000.0,
    freeze: bool = True,
    realtime: bool = True,
    cartesian_rate: float = 0.0,
    messages: bool = False,
    record: str | None = None,
) -> dict:
    """``freeze``: after each set-up, collect and ``gc.freeze()`` what was built (as the ROS
    node does), so that collections during the run only scan what the run allocates.
    ``realtime``: the loop thread's scheduling as configured (SCHED_FIFO 50 by default), else
    normal scheduling (``realtime.priority`` 0). ``messages``: a thread beside the loop builds
    and serializes the state messages as the node's state publishers do; ``record``: and
    records them to this MCAP file as the node records (see the module docstring)."""
    overrides: dict[str, object] = {
        "mujoco.mode": "paced",
        "update_rate": rate,
        "cartesian.update_rate": cartesian_rate,
    }
    if not realtime:
        overrides["realtime.priority"] = 0
    config = load_config(overrides=overrides)
    # As the node: the goals' thread (here, this one) shares the GIL with the control thread.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    recorder = None
    if record:
        from ct_controllers.ros.recorder import McapRecorder

        recorder = McapRecorder(record)
    try:
        report = _paced(config, wall_seconds, seed, freeze, messages or bool(record), recorder)
    finally:
        sys.setswitchinterval(switch_interval)
        summary = None if recorder is None else recorder.close()
    if summary is not None:
        report["recording"] = {
            "path": summary.path,
            "messages": summary.messages,
            "dropped": summary.dropped,
        }
    return report


def _paced(
    config: StackConfig,
    wall_seconds: float,
    seed: int,
    freeze: bool,
    messages: bool = False,
    recorder: Any = None,
) -> dict:
    scheduling = ""
    monitor = GcMonitor()
    monitor.install()
    jitter: list[np.ndarray] = []
    compute: list[np.ndarray] = []
    overruns = ticks = gc_collections = goal_start_overruns = 0
    gc_total = 0.0
    goal_start_compute: list[float] = []  # per goal: the longest compute of its first ticks
    floors: list[FloorRun] = []
    segments: list[dict[str, float]] = []  # per trial: the stack's and its floor's overruns
    stack_seconds = 0.0
    for cube in random_cubes(seed):
        if stack_seconds >= wall_seconds:
            break
        setup = grasp_setup(config, cube, install=False)
        loop = setup.stack.loop
        if freeze:
            gc.collect()
            gc.freeze()
        collections_before, total_before = monitor.collections, monitor.total
        # As in the node: the loop runs (holding the arm with its default controller) when the
        # goal arrives, and the goal's thread prepares and switches in its chain.
        started = time.monotonic()
        deadline = started + wall_seconds - stack_seconds
        loop.start()
        recording = None
        if messages:
            from ct_controllers.ros.sim_recording import PacedRecorder

            active = "grasp → diff_ik → computed_torque"
            recording = PacedRecorder(setup.stack, active, recorder)
            recording.start()
        time.sleep(GOAL_DELAY)
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*cube)))
        loop.switch_controller(setup.runner)  # prepares it here, first
        switched_at = loop.timing.ticks  # the chain runs from this tick or the next
        while not setup.task.finished and time.monotonic() < deadline:
            time.sleep(0.05)
        if recording is not None:
            recording.stop()
        setup.stack.shut_down()
        trial_seconds = time.monotonic() - started
        stack_seconds += trial_seconds
        window = slice(switched_at, switched_at + GOAL_START_TICKS)
        if switched_at + GOAL_START_TICKS <= min(loop.timing.ticks, loop.timing.capacity):
            late, compute_s = loop.timing._jitter[window], loop.timing._compute[window]
            goal_start_compute.append(float(compute_s.max()))
            goal_start_overruns += sum(
                is_overrun(lag, busy, config.period, config.overrun_fraction)
                for lag, busy in zip(late.tolist(), compute_s.tolist(), strict=True)
            )
        if loop.realtime_report is not None:
            scheduling = loop.realtime_report.describe()
        gc_collections += monitor.collections - collections_before
        gc_total += monitor.total - total_before
        if freeze:
            gc.unfreeze()
        n = min(loop.timing.ticks, loop.timing.capacity)
        jitter.append(loop.timing._jitter[:n].copy())
        compute.append(loop.timing._compute[:n].copy())
        overruns += loop.timing.overruns
        ticks += loop.timing.ticks
        # The machine's floor right after the trial and for as long, so that both meet the same
        # machine: the same pacing, scheduling and overrun rule, each tick the same fixed work,
        # calibrated once to the first trial's median compute.
        floor = paced_floor(
            config.update_rate,
            float(np.median(compute[0])),
            trial_seconds,
            config.realtime,
            config.overrun_fraction,
            chunks=floors[0].chunks if floors else None,
        )
        floors.append(floor)
        segments.append(
            {"seconds": trial_seconds, "overruns": loop.timing.overruns, "floor": floor.overruns}
        )
    monitor.remove()
    figures = Percentiles.of(np.concatenate(jitter))
    computing = Percentiles.of(np.concatenate(compute))
    floor = FloorRun.merge(floors)
    return {
        # Per-tick samples [s] for --plot (not printed with --json).
        "_samples": {
            "jitter": np.concatenate(jitter),
            "compute": np.concatenate(compute),
            "floor_jitter": floor.jitter_samples,
            "floor_compute": floor.compute_samples,
        },
        "rate_hz": config.update_rate,
        "cartesian_rate_hz": config.effective_cartesian_rate,
        "ticks": ticks,
        "jitter_p50_us": figures.p50 * 1e6,
        "jitter_p99_us": figures.p99 * 1e6,
        "jitter_max_us": figures.max * 1e6,
        "compute_p50_us": computing.p50 * 1e6,
        "compute_p99_us": computing.p99 * 1e6,
        "overruns": overruns,
        "gc_freeze": freeze,
        "gc_collections": gc_collections,
        "gc_pause_total_ms": gc_total * 1e3,
        "scheduling": scheduling,
        "floor": floor.as_dict(),
        "segments": segments,
        # A goal's start: the ticks from its switch on, where a chain's first tick used to
        # overrun (see Controller.prepare).
        "goal_start": {
            "goals": len(goal_start_compute),
            "ticks": GOAL_START_TICKS,
            "compute_max_p50_us": float(np.median(goal_start_compute)) * 1e6
            if goal_start_compute
            else math.nan,
            "compute_max_max_us": max(goal_start_compute, default=math.nan) * 1e6,
            "overruns": goal_start_overruns,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ct-bench loop",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help="a robot's controllers.yaml ('bundled': the bundled one); repeat to compare robots "
        "side by side in one run. Given, the lockstep workload is ct-sim's scripted motion, "
        "derived from each robot (any arm, with or without a gripper); paced runs are skipped",
    )
    parser.add_argument("--sim-seconds", type=float, default=60.0)
    parser.add_argument("--paced-seconds", type=float, default=60.0)
    parser.add_argument("--no-load", action="store_true", help="skip the loaded paced run")
    parser.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="[Hz] paced rate (its period must be a multiple of 1 ms)",
    )
    parser.add_argument(
        "--cartesian-rate",
        type=float,
        default=0.0,
        help="[Hz] rate of the task + differential-IK stage, dividing the loop rate "
        "(cartesian.update_rate; default 0: every tick)",
    )
    parser.add_argument("--lockstep-only", action="store_true")
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="paced runs without gc.freeze() after set-up (to compare)",
    )
    parser.add_argument("--paced-only", action="store_true")
    parser.add_argument(
        "--no-realtime",
        action="store_true",
        help="paced runs with normal scheduling instead of the configured SCHED_FIFO (to compare)",
    )
    parser.add_argument(
        "--record",
        metavar="FILE.mcap",
        help="two more paced runs: the node's state messages built beside the loop, without and "
        "with recording them to FILE.mcap (what recording adds to overruns)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="histograms of tick compute and start jitter per paced run, the stack beside its "
        "machine floor",
    )
    args = parser.parse_args(argv)
    for name in ("sim_seconds", "paced_seconds"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) > 0):
            parser.error(f"--{name.replace('_', '-')} must be > 0")
    if args.config:
        rows = [
            robot_motion(None if path == BUNDLED else path, args.sim_seconds)
            for path in args.config
        ]
        if args.json:
            print(json.dumps({"robots": rows}))
        else:
            print_robots(rows)
        return 0
    report: dict = {}
    if not args.paced_only:
        report["lockstep"] = lockstep(args.sim_seconds, args.seed, args.cartesian_rate)

    def paced_run(messages: bool = False, record: str | None = None) -> dict:
        return paced(
            args.paced_seconds,
            args.seed,
            args.rate,
            freeze=not args.no_gc_freeze,
            realtime=not args.no_realtime,
            cartesian_rate=args.cartesian_rate,
            messages=messages,
            record=record,
        )

    if not args.lockstep_only:
        report["paced"] = paced_run()
        if args.record:
            report["paced_messages"] = paced_run(messages=True) | {
                "beside": "the state messages built and serialized at 100 Hz (as published)"
            }
            report["paced_recording"] = paced_run(record=args.record) | {
                "beside": "the same, and recorded to MCAP"
            }
    if not args.no_load and not args.lockstep_only:
        load = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            report["paced_loaded"] = paced_run() | {
                "load": "one other process spinning a Python busy loop (one core of two)"
            }
        finally:
            load.kill()
            load.wait()
    samples = {key: run.pop("_samples") for key, run in report.items() if "_samples" in run}
    if args.plot:
        if samples:
            plot(args.plot, report, samples)
        else:
            print("ct-bench loop: --plot needs a paced run (not --lockstep-only)", file=sys.stderr)
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
        if args.plot and samples:
            print(f"  plot: {args.plot}")
    return 0


RUN_TITLES = {
    "paced": "paced",
    "paced_messages": "paced, state messages built beside",
    "paced_recording": "paced, state messages built and recorded",
    "paced_loaded": "paced, machine loaded",
}


def plot(path: str, report: dict, samples: dict[str, dict[str, np.ndarray]]) -> None:
    """Per paced run, histograms of the ticks' compute time and start jitter [µs], the stack
    beside its machine floor (log counts), with the overrun thresholds marked, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(samples), 2, figsize=(10, 2.6 * len(samples)), squeeze=False)
    for row, (key, run) in enumerate(samples.items()):
        period = 1e6 / report[key]["rate_hz"]  # [µs]
        fraction = 0.5  # overrun_fraction's default: a start this late overruns
        for column, (what, limit) in enumerate(
            (("compute", period), ("jitter", fraction * period))
        ):
            axis = axes[row][column]
            stack, floor = run[what] * 1e6, run[f"floor_{what}"] * 1e6
            top = max(float(np.percentile(stack, 99.99)), float(floor.max()), limit) * 1.1
            bins = np.linspace(0.0, top, 80)
            axis.hist(np.clip(stack, 0, top), bins=bins, alpha=0.6, label="stack", color="C0")
            axis.hist(np.clip(floor, 0, top), bins=bins, alpha=0.6, label="floor", color="C1")
            axis.axvline(limit, color="k", linestyle="--", linewidth=1, label="overrun")
            axis.set_yscale("log")
            axis.set_xlabel(f"tick {what} [µs]")
            axis.set_ylabel("ticks")
            overruns = report[key]["overruns"]
            floor_overruns = report[key]["floor"]["overruns"]
            axis.set_title(
                f"{RUN_TITLES.get(key, key)}: overruns {overruns} (floor {floor_overruns})",
                fontsize=9,
            )
            axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def print_report(report: dict) -> None:
    """The human-readable form of a report (what ``--json`` prints as one object)."""
    print("ct-bench loop: full stack (grasp → diff IK (QP) → computed torque → limiter → MuJoCo)")
    if "lockstep" in report:
        step = report["lockstep"]
        print(
            f"  lockstep  {step['sim_seconds']:.1f} s sim at 1000 Hz in "
            f"{step['wall_seconds']:.1f} s wall ({step['trials']} grasp trials): "
            f"{step['rtf']:.1f}x real time (goal ≥ {GOAL_RTF:.0f}x); MuJoCo alone (floor): "
            f"{step['floor_rtf']:.1f}x; task + diff IK at {step['cartesian_rate_hz']:.0f} Hz"
        )
        print(
            f"  MuJoCo stepping inside the run (part of write): {step['physics_mean_us']:.1f} µs "
            "per tick on average (contacts make it dearer than the floor's free fall)"
        )
        print("  per tick [µs]   p50     p99")
        for stage, figures in step["stages"].items():
            print(f"    {stage:16s}{figures['p50_us']:7.1f} {figures['p99_us']:7.1f}")
    for key, title in (
        ("paced", "paced"),
        ("paced_messages", "paced, messages"),
        ("paced_recording", "paced, recording"),
        ("paced_loaded", "paced, loaded"),
    ):
        if key not in report:
            continue
        run = report[key]
        print(
            f"  {title:13s} {run['ticks']} ticks at {run['rate_hz']:.0f} Hz: jitter p50 "
            f"{run['jitter_p50_us']:.1f} µs, p99 {run['jitter_p99_us']:.1f} µs, max "
            f"{run['jitter_max_us']:.1f} µs; overruns {run['overruns']}; compute p50 "
            f"{run['compute_p50_us']:.0f} µs, p99 {run['compute_p99_us']:.0f} µs, task + diff IK "
            f"at {run['cartesian_rate_hz']:.0f} Hz "
            f"(goal p99 ≤ {GOAL_JITTER_P99 * 1e6:.0f} µs, "
            f"0 overruns); gc.freeze {run['gc_freeze']}: {run['gc_collections']} collections, "
            f"{run['gc_pause_total_ms']:.1f} ms in all"
        )
        print(f"                loop thread: {run['scheduling'] or 'normal scheduling'}")
        floor = run["floor"]
        print(
            f"                machine floor (after each trial and as long, a bare loop paced "
            f"alike, each tick the same fixed work: {floor['chunks']} chunks of numpy operations, "
            f"calibrated to the first trial's median compute {floor['work_us']:.0f} µs; "
            f"{floor['ticks']} ticks): overruns "
            f"{floor['overruns']}; compute p50 {floor['compute_p50_us']:.0f} µs, p99 "
            f"{floor['compute_p99_us']:.0f} µs; jitter p99 {floor['jitter_p99_us']:.1f} µs, max "
            f"{floor['jitter_max_us']:.1f} µs; longest stall inside a tick "
            f"{floor['stall_max_us']:.0f} µs ({floor['stalls_over_half_period']} over half a "
            "period)"
        )
        pairs = ", ".join(f"{seg['overruns']}/{seg['floor']}" for seg in run["segments"])
        print(f"                overruns per trial, stack/floor: {pairs}")
        start = run["goal_start"]
        print(
            f"                goal starts ({start['goals']} goals): the longest of a chain's first "
            f"{start['ticks']} ticks computes {start['compute_max_p50_us']:.0f} µs (median over "
            f"goals), {start['compute_max_max_us']:.0f} µs at most; overruns among them "
            f"{start['overruns']}"
        )
        if "load" in run:
            print(f"                load: {run['load']}")
        if "beside" in run:
            print(f"                beside the loop: {run['beside']}")
        if "recording" in run:
            recording = run["recording"]
            print(
                f"                recording: {recording['messages']} messages to "
                f"{recording['path']}, {recording['dropped']} dropped"
            )
