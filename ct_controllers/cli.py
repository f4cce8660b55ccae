"""Console entry points: ``ct-sim`` (the ``make sim`` job) and ``ct-bringup`` (the ROS stack)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ct_controllers.config import ConfigError, load_config
from ct_controllers.model.description import DescriptionError
from ct_controllers.plugins import UnknownPluginError
from ct_controllers.runtime.timing import Percentiles


def _us(p: Percentiles) -> dict[str, float]:
    return {"p50_us": p.p50 * 1e6, "p99_us": p.p99 * 1e6, "max_us": p.max * 1e6}


def sim_main(argv: list[str] | None = None) -> int:
    """Bring the stack up on MuJoCo (lockstep, headless), run the scripted motion, print a summary.
    Exit 0 when the arm ends within the stated joint error of home."""
    from ct_controllers.sim_demo import FINAL_ERROR_LIMIT, SimFault, run_scripted_motion

    parser = argparse.ArgumentParser(prog="ct-sim", description=sim_main.__doc__)
    parser.add_argument("--config", help="controllers.yaml (default: the bundled one)")
    parser.add_argument(
        "--controller",
        help="one of the configured controllers (default: the configuration's default_controller)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--record",
        metavar="FILE.mcap",
        help="record the run's joint states, controller state, diagnostics, TF and robot "
        "description to an MCAP file (sim time; Foxglove, ros2 bag)",
    )
    add_video_arguments(parser)
    args = parser.parse_args(argv)
    overrides = {"backend": "mujoco", "mujoco.mode": "lockstep"}
    if args.controller:
        overrides["default_controller"] = args.controller
    observers: list[Any] = []
    try:
        config = load_config(args.config, overrides=overrides)
        if args.record:
            from ct_controllers.ros.sim_recording import LockstepRecorder

            observers.append(LockstepRecorder(args.record, active=config.default_controller))
        if args.video:
            observers.append(video_recorder(args))
        summary = run_scripted_motion(config, observers)
    except (ConfigError, DescriptionError, UnknownPluginError, ValueError, LookupError) as exc:
        print(f"ct-sim: {exc}", file=sys.stderr)
        return 2
    except SimFault as exc:  # the stack's fault reaction ran: a finding, not a crash
        print(f"ct-sim: {exc}", file=sys.stderr)
        return 1
    finally:
        outputs = [observer.close() for observer in observers]
    timing = summary.timing
    if args.json:
        print(
            json.dumps(
                {
                    "ticks": summary.ticks,
                    "sim_time_s": summary.sim_time,
                    "wall_time_s": summary.wall_time,
                    "real_time_factor": summary.real_time_factor,
                    "tracking_error_max_rad": summary.tracking_error_max,
                    "tracking_error_rms_rad": summary.tracking_error_rms,
                    "final_error_rad": summary.final_error,
                    "final_error_limit_rad": FINAL_ERROR_LIMIT,
                    "overruns": timing.overruns,
                    "compute": _us(timing.compute),
                    "stages": {name: _us(figures) for name, figures in summary.stages.items()},
                    "ok": summary.ok,
                }
            )
        )
    else:
        print(
            f"ct-sim: MuJoCo lockstep at {config.update_rate:.0f} Hz, controller "
            f"'{config.default_controller}', {len(config.joint_names)} joints"
        )
        print(
            f"  motion     {summary.waypoints} waypoints, {summary.ticks} ticks, "
            f"sim {summary.sim_time:.3f} s in wall {summary.wall_time:.3f} s "
            f"({summary.real_time_factor:.1f}x real time)"
        )
        print(
            f"  tracking   max {summary.tracking_error_max:.4f} rad, "
            f"RMS {summary.tracking_error_rms:.4f} rad (reference − measured, arm joints)"
        )
        print(
            f"  final      {summary.final_error:.2e} rad from home "
            f"(limit {FINAL_ERROR_LIMIT:.0e} rad): {'OK' if summary.ok else 'FAILED'}"
        )
        print(f"  loop       compute {timing.compute.as_us()}; overruns {timing.overruns}")
        stages = ", ".join(
            f"{name} {figures.p50 * 1e6:.0f}/{figures.p99 * 1e6:.0f}"
            for name, figures in summary.stages.items()
        )
        print(f"  stages     p50/p99 [µs]: {stages}")
        for output in outputs:
            print(f"  output     {output.describe()}")
    return 0 if summary.ok else 1


def add_video_arguments(parser: argparse.ArgumentParser) -> None:
    """--video FILE.mp4, --fps, --size WxH (ct-sim, ct-bench grasp)."""
    parser.add_argument(
        "--video",
        metavar="FILE.mp4",
        help="render the run offscreen (MuJoCo, headless via EGL) to an MP4 video",
    )
    parser.add_argument("--fps", type=float, default=30.0, help="video frames per s of sim time")
    parser.add_argument(
        "--size", default="640x480", metavar="WxH", help="video size [px] (default 640x480)"
    )


def video_recorder(args: argparse.Namespace) -> Any:
    """The VideoRecorder that --video, --fps and --size ask for."""
    from ct_controllers.hardware.mujoco_view import VideoRecorder

    try:
        width, height = (int(v) for v in str(args.size).lower().split("x"))
    except ValueError:
        raise ValueError(f"--size must be WxH, e.g. 640x480, got {args.size!r}") from None
    return VideoRecorder(args.video, fps=args.fps, size=(width, height))


def bringup_main(argv: list[str] | None = None) -> int:
    """Start the ROS 2 control node in this process with the plan the launch files use
    (ct_controllers.launch_plan: the same parameter file, parameters and DDS environment).
    Arguments it does not know (e.g. `--ros-args -p update_rate:=500`) go to the node; a name
    or namespace given there (`-r __node:=...`, `-r __ns:=/arm2`) replaces the default."""
    from ct_controllers.launch_plan import BACKENDS, NODE_NAME, TARGETS, launch_plan
    from ct_controllers.node_names import split_user_names

    parser = argparse.ArgumentParser(prog="ct-bringup", description=bringup_main.__doc__)
    parser.add_argument("target", choices=list(TARGETS))
    parser.add_argument("--config", help="controllers.yaml (default: the installed one)")
    parser.add_argument("--backend", choices=BACKENDS, help="default: the target's")
    parser.add_argument(
        "--namespace",
        help="the node's namespace (default: /ct; as --ros-args -r __ns:=/NAMESPACE)",
    )
    parser.add_argument(
        "--clock-topic",
        help="where a simulation publishes its clock (default: /clock; a second simulated arm "
        "in the same ROS domain needs its own, e.g. /arm2/clock: docs/ros-interface.md)",
    )
    parser.add_argument(
        "--dds-network",
        action="store_true",
        help="let DDS use the network (as CT_DDS_NETWORK=1; default: loopback only)",
    )
    parser.add_argument(
        "--print-plan",
        action="store_true",
        help="print the node's fully qualified name, ROS arguments and environment changes as "
        "JSON, start nothing",
    )
    parser.add_argument(
        "--record",
        metavar="FILE.mcap",
        help="record the node's topics, TF and goals to an MCAP file (Foxglove, ros2 bag)",
    )
    parser.add_argument(
        "--viewer",
        action="store_true",
        help="open MuJoCo's passive viewer on the simulation (needs a display)",
    )
    args, ros_args = parser.parse_known_args(argv)
    try:
        # rcl applies the first remap rule that matches and the plan's come first: the user's
        # name and namespace go into the plan, or they would be silently ignored.
        given = split_user_names(ros_args, NODE_NAME)
        namespace = _one_of("namespace", args.namespace, given.namespace)
        clock_topic = _one_of("clock topic", args.clock_topic, given.clock_topic)
        plan = launch_plan(
            args.target,
            backend=args.backend or "",
            config=args.config or "",
            dds_network=True if args.dds_network else None,
            namespace=namespace or "",
            name=given.name or "",
            clock_topic=clock_topic or "",
        )
    except (ValueError, LookupError) as exc:
        print(f"ct-bringup: {exc}", file=sys.stderr)
        return 2
    rest = list(given.rest)
    if args.print_plan:
        print(
            json.dumps(
                {
                    "node": plan.node,
                    "clock": plan.clock,
                    "ros_arguments": plan.ros_arguments() + rest,
                    "environment": dict(plan.environment),
                    "dds_network": plan.dds_network,
                }
            )
        )
        return 0
    environment = plan.child_environment(os.environ)
    for name in set(os.environ) - set(environment):
        del os.environ[name]
    os.environ.update(environment)  # before rclpy starts: the DDS variables of the plan
    from ct_controllers.ros.control_node import main as node_main

    own = ["--record", args.record] if args.record else []
    own += ["--viewer"] if args.viewer else []
    return node_main(own + plan.ros_arguments() + rest)


def _one_of(what: str, option: str | None, remapped: str | None) -> str | None:
    """The value given by an option or by a remap rule; both, and different, is an error."""
    from ct_controllers.node_names import absolute_namespace

    if option is not None and remapped is not None:
        same = absolute_namespace(option) == remapped if what == "namespace" else option == remapped
        if not same:
            raise ValueError(f"the {what} is given twice: {option!r} and {remapped!r} (a remap)")
    return option if option is not None else remapped
