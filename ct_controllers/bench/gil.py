"""``ct-bench gil``: what another Python thread of the process costs the paced control loop.

A goal arrives on a thread of its own (an action server's), builds its chain — a copy of the
robot model and a QP differential IK — and prepares it while the control loop runs; every such
thread shares the GIL with the control thread. This runs the stack's loop paced at 1 kHz (the
default controller holding the arm, MuJoCo paced, SCHED_FIFO as configured) for ``--seconds``
each:

- alone (the baseline: no other Python thread doing work);
- beside a thread that builds a goal's chain every ``--every`` seconds, once per GIL switch
  interval given (``sys.setswitchinterval``, default 0.5 ms and the project's
  ``GIL_SWITCH_INTERVAL``).

and prints the loop's overruns and jitter for each, side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time

from ct_controllers.config import load_config
from ct_controllers.references.diff_ik_qp import QpDiffIk
from ct_controllers.runtime.realtime import GIL_SWITCH_INTERVAL
from ct_controllers.runtime.stack import build_stack


def run(seconds: float, switch_interval: float, every: float | None) -> dict:
    """One paced run of ``seconds`` [s] at ``switch_interval`` [s]; with ``every`` [s], a
    second thread builds a goal's chain at that interval meanwhile."""
    config = load_config(overrides={"mujoco.mode": "paced"})
    stop = threading.Event()
    builds = 0

    def goals() -> None:
        nonlocal builds
        assert every is not None
        while not stop.wait(every):
            model = stack.model.with_own_data()
            QpDiffIk(model, config.arm_joints)
            builds += 1

    builder = threading.Thread(target=goals, name="ct-bench-goals", daemon=True)
    stack = build_stack(config)
    previous = sys.getswitchinterval()
    try:
        sys.setswitchinterval(switch_interval)
        stack.bring_up()
        stack.loop.start()
        if every is not None:
            builder.start()
        time.sleep(seconds)
        stop.set()
        if every is not None:
            builder.join()
    finally:
        stack.shut_down()
        sys.setswitchinterval(previous)
    summary = stack.loop.timing_summary()
    return {
        "switch_interval_ms": switch_interval * 1e3,
        "builder_every_s": every,
        "builds": builds,
        "ticks": summary.ticks,
        "overruns": summary.overruns,
        "jitter_p99_us": summary.jitter.p99 * 1e6,
        "jitter_max_us": summary.jitter.max * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ct-bench gil", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="[s] per run")
    parser.add_argument("--every", type=float, default=0.05, help="[s] between two goal builds")
    parser.add_argument(
        "--switch-intervals",
        type=float,
        nargs="+",
        default=[0.5, GIL_SWITCH_INTERVAL * 1e3],
        help="[ms] GIL switch intervals to compare",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.seconds) and args.seconds > 0):
        parser.error("--seconds must be > 0")
    if not (math.isfinite(args.every) and args.every > 0):
        parser.error("--every must be > 0")
    if not all(math.isfinite(ms) and ms > 0 for ms in args.switch_intervals):
        parser.error("--switch-intervals must be > 0 ms")
    runs = [run(args.seconds, GIL_SWITCH_INTERVAL, None)]
    runs += [run(args.seconds, ms * 1e-3, args.every) for ms in args.switch_intervals]
    if args.json:
        print(json.dumps({"runs": runs}))
        return 0
    print(f"ct-bench gil: paced 1 kHz loop, {args.seconds:g} s per run")
    for entry in runs:
        beside = (
            f"beside a goal's chain built every {entry['builder_every_s']:g} s "
            f"({entry['builds']} builds)"
            if entry["builder_every_s"] is not None
            else "alone (baseline)"
        )
        print(
            f"  switch interval {entry['switch_interval_ms']:.1f} ms, {beside}: "
            f"{entry['ticks']} ticks, overruns {entry['overruns']}, jitter p99 "
            f"{entry['jitter_p99_us']:.0f} µs, max {entry['jitter_max_us']:.0f} µs"
        )
    return 0
