"""Simulated CiA 402 drives in a process of their own (:class:`DrivesProcess`), joined to this
process's python-can virtual channel by a :class:`~ct_controllers.sim.can_link.VirtualChannelLink`
over a socket pair: the CANopen master here and the drives there share no interpreter, so a
bench measures the master's reaction, not the time the drives' motor model (Pinocchio, in
sub-steps of 0.5 ms) held the GIL — as the ros2_control bridge's plant already runs apart
(:mod:`~ct_controllers.sim.ros2_control_plant`).

:class:`DrivesProcess` offers what the rigs and ``ct-bench faults`` use of
:class:`~ct_controllers.sim.drives.SimulatedDrives` under the same names (fault injection, true
positions, the object between the fingers, what the drives took in), each a request answered
over the child's standard input and output (one JSON line each way). An injection answers
with the time.monotonic [s] just before the child applied it (``injected_at``): the fault's
onset (CLOCK_MONOTONIC is one clock for every process of the machine).

The child: ``python -m ct_controllers.sim.drives_process --fd N``, N a connected socket it
inherits; its first line on standard input is the drives' specification (URDF, joints, node
ids, unit conversion, channel, initial positions), answered ``{"ok": true, "value": "ready"}``
once the drives are on the bus. It exits when its standard input closes (``quit`` or the parent
gone).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ct_controllers.errors import CtError
from ct_controllers.hardware.canopen.scheduling import run_this_thread_with, threads_started_with
from ct_controllers.hardware.cia402 import DriveState, JointScaling
from ct_controllers.model.robot import RobotModel
from ct_controllers.sim.can_link import VirtualChannelLink
from ct_controllers.sim.drives import DRIVES_PRIORITY, SimulatedDrives
from ct_controllers.sim.object_contact import CONTACT_DAMPING, CONTACT_STIFFNESS

if TYPE_CHECKING:
    from ct_controllers.hardware.canopen.system import CanopenCia402System

# What the parent may ask: the SimulatedDrives methods served, and which are injections (the
# answer carries their onset).
INJECTIONS = ("stop_heartbeat", "enter_fault", "stop_pdos", "send_error_frame", "heal")
QUERIES = (
    "drop_sdo_responses",
    "sdo_responses_dropped",
    "positions",
    "velocities",
    "place_object",
    "contact_forces",
    "states",
    "applied_efforts",
    "master_lost_at",
    "consumers",
    "last_target_torques",
    "peak_target_torques",
    "max_torques",
    "syncs",
    "sync_timing",
)
START_TIMEOUT = 60.0  # [s] the child imports Pinocchio and parses the URDF: slow when loaded
CALL_TIMEOUT = 10.0  # [s] an answer to one request


class DrivesProcessError(CtError, RuntimeError):
    """The drives' process did not answer, or refused a request (its message says why)."""


class DrivesProcess:
    """``joint_names`` driven by simulated CiA 402 drives at ``node_ids`` (``scalings``: their
    unit conversion), on python-can virtual ``channel`` of this process, the drives in a child
    process; ``urdf``: the arm's model; ``initial_positions`` [rad | m] by joint name."""

    def __init__(
        self,
        urdf: str,
        joint_names: Sequence[str],
        node_ids: Sequence[int],
        scalings: Sequence[JointScaling],
        channel: str,
        initial_positions: Mapping[str, float] | None = None,
    ) -> None:
        self.joint_names = tuple(joint_names)
        self.channel = channel
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ct_controllers.sim.drives_process",
                "--fd",
                str(theirs.fileno()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(theirs.fileno(),),
            bufsize=0,  # unbuffered: answers are read with select, not by a thread per request
        )
        self._pending = b""  # what the child wrote after the last whole answer
        theirs.close()
        with threads_started_with(DRIVES_PRIORITY) as scheduling:
            self.link = VirtualChannelLink(channel, ours)
        self.scheduling = scheduling  # what the link's threads here got
        self._lock = threading.Lock()
        spec = {
            "urdf": urdf,
            "joint_names": list(joint_names),
            "node_ids": list(node_ids),
            "scalings": [[s.name, s.counts_per_unit, s.offset, s.rated_effort] for s in scalings],
            "channel": channel,
            "initial_positions": dict(initial_positions or {}),
        }
        try:
            if self._request(spec, START_TIMEOUT) != "ready":
                raise DrivesProcessError("the drives' process did not say ready")
        except Exception:
            self.close()
            raise

    # --- the pipe --------------------------------------------------------------------------
    def _request(self, message: Mapping[str, Any], timeout: float = CALL_TIMEOUT) -> Any:
        """Send one request line, wait for its answer line; its value (DrivesProcessError when
        the child refused it or said nothing within ``timeout`` [s])."""
        assert self.process.stdin is not None and self.process.stdout is not None
        with self._lock:
            try:
                self.process.stdin.write(json.dumps(message).encode() + b"\n")
            except (BrokenPipeError, ValueError) as exc:
                raise DrivesProcessError(f"the drives' process is gone: {exc}") from exc
            line = self._answer_line(time.monotonic() + timeout)
            if line is None:
                raise DrivesProcessError(
                    f"no answer from the drives' process to '{message.get('op', 'start')}' "
                    f"within {timeout} s (exit code {self.process.poll()})"
                )
        reply = json.loads(line)
        if not reply["ok"]:
            raise DrivesProcessError(reply["error"])
        self.last_injected_at = reply.get("at")
        return reply["value"]

    def _answer_line(self, deadline: float) -> bytes | None:
        """The child's next answer line, or None if none is whole by ``deadline`` [s,
        time.monotonic] (or the child closed its end)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line

    def call(self, op: str, *args: Any) -> Any:
        """The child's ``SimulatedDrives.op(*args)``'s value (JSON: tuples become lists)."""
        return self._request({"op": op, "args": list(args)})

    # --- fault injection: each returns its onset, time.monotonic [s] ------------------------
    def stop_heartbeat(self, joint: str) -> float:
        self.call("stop_heartbeat", joint)
        return float(self.last_injected_at)

    def enter_fault(self, joint: str) -> float:
        self.call("enter_fault", joint)
        return float(self.last_injected_at)

    def stop_pdos(self, joint: str) -> float:
        self.call("stop_pdos", joint)
        return float(self.last_injected_at)

    def send_error_frame(self) -> float:
        self.call("send_error_frame")
        return float(self.last_injected_at)

    def heal(self) -> None:
        self.call("heal")

    def drop_sdo_responses(self, joint: str, count: int = -1) -> None:
        self.call("drop_sdo_responses", joint, count)

    # --- for checks (as SimulatedDrives names them) ----------------------------------------
    def sdo_responses_dropped(self) -> dict[str, int]:
        return dict(self.call("sdo_responses_dropped"))

    def positions(self) -> dict[str, float]:
        return dict(self.call("positions"))

    def velocities(self) -> dict[str, float]:
        return dict(self.call("velocities"))

    def place_object(
        self,
        width: float | None,
        fingers: Sequence[str],
        stiffness: float = CONTACT_STIFFNESS,
        damping: float = CONTACT_DAMPING,
        width_frames: Sequence[str] = (),
    ) -> None:
        self.call("place_object", width, list(fingers), stiffness, damping, list(width_frames))

    def contact_forces(self) -> dict[str, float]:
        return dict(self.call("contact_forces"))

    def states(self) -> dict[str, DriveState]:
        return {joint: DriveState(value) for joint, value in self.call("states").items()}

    def applied_efforts(self) -> dict[str, float]:
        return dict(self.call("applied_efforts"))

    def master_lost_at(self) -> dict[str, float | None]:
        return dict(self.call("master_lost_at"))

    def consumers(self) -> dict[str, tuple[int, float] | None]:
        return {j: None if c is None else (c[0], c[1]) for j, c in self.call("consumers").items()}

    def last_target_torques(self) -> dict[str, int]:
        return dict(self.call("last_target_torques"))

    def peak_target_torques(self) -> dict[str, int]:
        return dict(self.call("peak_target_torques"))

    def max_torques(self) -> dict[str, int]:
        return dict(self.call("max_torques"))

    def sync_timing(self) -> dict[str, float]:
        """[ms] how long the drives took to answer a SYNC: p50, p99, max, count."""
        return dict(self.call("sync_timing"))

    @property
    def syncs(self) -> int:
        """SYNCs the drives have answered."""
        return int(self.call("syncs"))

    def close(self) -> None:
        """Stop the child (its stdin closed, then killed if it lingers) and the link."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5.0)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.link.close()


def drives_process_for(
    system: CanopenCia402System, urdf: str, initial_positions: Mapping[str, float] | None = None
) -> DrivesProcess:
    """Simulated drives in a process of their own matching a (not yet configured) CANopen
    backend on a virtual channel: the same joints, node ids, unit conversion and channel."""
    if system.config.interface != "virtual":
        raise ValueError(
            f"drives in a process of their own join a python-can virtual channel; the backend "
            f"is on interface '{system.config.interface}'"
        )
    return DrivesProcess(
        urdf,
        system.joint_names,
        [d.node_id for d in system.drives],
        [d.scaling for d in system.drives],
        system.config.channel,
        initial_positions,
    )


def _serve(fd: int) -> int:
    """The child: drives on a virtual channel joined to the parent's through socket ``fd``;
    requests on stdin, answers on stdout, until stdin closes."""

    def answer(**reply: Any) -> None:
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()

    # Every thread started from here on (link, receive, heartbeats, the drives' timer) inherits
    # it; a short switch interval, as the master has, so none holds the GIL for a SYNC period.
    run_this_thread_with(DRIVES_PRIORITY)
    sys.setswitchinterval(0.0005)
    spec = json.loads(sys.stdin.readline())
    link = VirtualChannelLink(spec["channel"], socket.socket(fileno=fd))
    drives = SimulatedDrives(
        RobotModel(spec["urdf"]),
        spec["joint_names"],
        spec["node_ids"],
        [JointScaling(*fields) for fields in spec["scalings"]],
        channel=spec["channel"],
        initial_positions=spec["initial_positions"],
        priority=DRIVES_PRIORITY,
    )
    # What exists now stays out of the collector's full passes: one over the model's and the
    # stack's objects stalls the drives for tens of ms, past a 100 Hz bus's PDO deadline.
    gc.collect()
    gc.freeze()
    answer(ok=True, value="ready")
    try:
        for line in sys.stdin:
            request = json.loads(line)
            op, args = request["op"], request.get("args", [])
            if op not in INJECTIONS + QUERIES:
                answer(ok=False, error=f"unknown request '{op}'")
                continue
            try:
                at = time.monotonic()
                value = getattr(drives, op)
                value = value(*args) if callable(value) else value
            except Exception as exc:  # the parent gets the reason; the drives go on
                answer(ok=False, error=f"{op}: {type(exc).__name__}: {exc}")
                continue
            if op == "states":
                value = {joint: state.value for joint, state in value.items()}
            answer(ok=True, value=value, at=at)
    finally:
        drives.close()
        link.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="simulated CiA 402 drives, a child process")
    parser.add_argument("--fd", type=int, required=True, help="connected socket, inherited")
    return _serve(parser.parse_args(argv).fd)


if __name__ == "__main__":
    sys.exit(main())
