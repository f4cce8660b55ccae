"""Clients that come and go: the real node's RSS while clients join, send goals and leave.

Usage: ``python tools/soak_client_cycles.py CYCLES GOALS SECONDS`` (e.g. ``8 10 30``). Starts
``ct-bringup sim --result-timeout 3`` as ``ct-bench soak`` does, then CYCLES times: a client
(:mod:`ct_controllers.bench.soak`'s) joins and waits for the action servers, sends GOALS goals
of the soak's mix and waits for their results, leaves, and the node idles SECONDS while its RSS
(VmRSS, RssAnon, RssFile [kB]) is printed whenever it changes (sampled every 1 s). Investigation
tool for docs/reliability.md's memory section (each join's cost, the transient after goals); set
a ROS_DOMAIN_ID of your own.
"""

from __future__ import annotations

import signal
import sys
import time

from ct_controllers.ros.dds import ensure_loopback_dds

ensure_loopback_dds()

import rclpy  # noqa: E402

from ct_controllers.bench.soak import _Goals, rss_split, start_node  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    cycles, goals, seconds = int(argv[0]), int(argv[1]), float(argv[2])
    process, _drain = start_node(3.0)  # the drain keeps the node's pipe from filling
    started = time.monotonic()

    def mark(what: str) -> None:
        print(f"{time.monotonic() - started:7.1f} s {what}: {rss_split(process.pid)}", flush=True)

    try:
        for cycle in range(cycles):
            rclpy.init()
            client = _Goals(cycle)
            if not client.wait_for_servers(90.0):
                raise RuntimeError("the node's action servers did not appear")
            mark(f"cycle {cycle} joined")
            if goals:
                client.send(goals)
                client.wait_all(30.0)
                client.spin(6.0)  # the results expire (3 s) and settle
            mark(f"cycle {cycle} goals done")
            client.close()
            rclpy.shutdown()
            mark(f"cycle {cycle} left")
            end, last = time.monotonic() + seconds, rss_split(process.pid)
            while time.monotonic() < end:
                time.sleep(1.0)
                if (now := rss_split(process.pid)) != last:
                    mark("  idle")
                    last = now
            mark(f"cycle {cycle} end")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(20)
    return 0 if process.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
