"""A controller process for ``test_canopen_heartbeat``: the whole stack (``build_stack``, backend
canopen, its loop in its own thread) in a process of its own, on a python-can virtual channel
joined to the test's channel through an inherited socket
(:class:`~ct_controllers.sim.can_link.VirtualChannelLink`).

``python test/canopen_master_process.py --fd N --overrides JSON``

Prints ``commanding <pid>`` once the loop has run a motion for a while without a fault (or
``failed <reason>`` and exits 1), then runs until it is killed. It never exits by itself: the
test ends it with SIGKILL, as a crash or the OOM killer would.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

from helpers import bundled_description

from ct_controllers.config import load_config
from ct_controllers.runtime.stack import build_stack
from ct_controllers.sim.can_link import VirtualChannelLink

MOTION = (["joint1", "joint4"], [0.4, -1.2], 3.0)  # joints, targets [rad], duration [s]
SETTLE = 0.4  # [s] of motion before saying "commanding"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True, help="connected socket, inherited")
    parser.add_argument("--overrides", required=True, help="configuration overrides, JSON")
    args = parser.parse_args()
    config = load_config(overrides=json.loads(args.overrides))
    link = VirtualChannelLink(config.section("canopen")["channel"], socket.socket(fileno=args.fd))
    stack = build_stack(config, bundled_description("canopen"))
    try:
        stack.bring_up()
        loop = stack.loop
        loop.start()
        loop.request_motion(*MOTION)
        time.sleep(SETTLE)
        if loop.fault is not None:
            raise RuntimeError(loop.fault)
    except Exception as exc:
        print(f"failed {type(exc).__name__}: {exc}", flush=True)
        link.close()
        return 1
    print(f"commanding {os.getpid()}", flush=True)
    while True:
        time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main())
