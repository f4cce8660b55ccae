"""``ct-bench NAME [options]``: dispatch to ``ct_controllers.bench.NAME.main(argv)``."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "tracking": "computed torque vs PD vs PD + gravity (seed 004 protocol, or --robot ct_arm)",
    "timing": "controller update time on the 7-DOF arm vs plain Pinocchio calls",
    "ik": "full IK success rate and time (TRAC-IK protocol)",
    "diffik": "differential IK step time, DLS and QP, vs pink",
    "faults": "time from an injected fault to the first safe command, per backend and fault",
    "grasp": "pick-and-place trials through the whole stack in MuJoCo",
    "loop": "real-time factor in lockstep and period jitter when paced, full stack",
    "gil": "paced loop overruns beside a goal thread, per GIL switch interval",
    "backends": "joint motion, Cartesian target, grasp, cancel, preempt on every backend/mode",
    "reach": "MoveToPose on random reachable poses in MuJoCo, with and without the approach",
    "soak": "the node's RSS under N mixed goals (results expired), then idle; unanswered goals",
    "cartesian": "Cartesian impedance: 10 N push vs K⁻¹F, circle vs diff IK, update time",
    "payload": "payload identification per mass in MuJoCo; computed torque without/with it/exact",
}


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if not arguments or arguments[0] in ("-h", "--help") or arguments[0] not in BENCHMARKS:
        print("usage: ct-bench NAME [options]   (ct-bench NAME --help for its options)\n")
        for name, what in BENCHMARKS.items():
            print(f"  {name:10s} {what}")
        return 0 if arguments and arguments[0] in ("-h", "--help") else 2
    try:
        module = importlib.import_module(f"ct_controllers.bench.{arguments[0]}")
    except ModuleNotFoundError as exc:
        if exc.name == f"ct_controllers.bench.{arguments[0]}":
            print(f"ct-bench: '{arguments[0]}' is not implemented yet", file=sys.stderr)
            return 2
        raise
    return int(module.main(arguments[1:]))


if __name__ == "__main__":
    sys.exit(main())
