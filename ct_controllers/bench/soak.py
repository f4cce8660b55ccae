"""``ct-bench soak``: the real node's resident memory under many mixed goals, then idle.

The node is started as ``ct-bringup sim`` starts it (a separate process, real DDS on loopback),
with a short ``--result-timeout`` so that rclpy forgets each finished goal's result within the
run. Then, in order:

1. warm-up: ``warmup`` goals of the same mix (first use of every path allocates once);
2. ``goals`` goals, mixed MoveJoints / MoveToPose / Grasp, each sent while the previous one
   may still run (it is then preempted), some canceled, some waited for to the end; every
   goal must get an answer and a result (``unanswered`` counts those that did not);
3. RSS once the results expired (``result_timeout`` and a margin) after the warm-up, after
   half the goals and after all: what the second half adds is what each goal leaves behind;
4. the client leaves; once RSS has settled (unchanged for ``QUIET``),
   ``idle`` seconds with nothing connected (this process only sleeps): RSS sampled through it,
   split into anonymous memory (heaps, stacks: where a leak shows) and mapped files. With
   ``client_stays`` (``--client-stays``) the window runs before the client leaves, the client
   silent (RSS settles first either way); with ``idle_first`` (``--idle-first``) it runs
   before the warm-up instead, the client there and silent.

RSS is the node process's ``VmRSS`` (``/proc/<pid>/status``). :func:`run_soak` returns a
:class:`SoakReport`; ``test/test_node_memory.py`` bounds its figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

ACTIONS = ("move_joints", "move_to_pose", "grasp")
SETTLE = 3.0  # [s] after the results' expiry before RSS is read (the expiry is checked lazily)
# Before the idle window RSS must have settled: not moved for QUIET, or QUIET_BOUND passed
# whatever it does (a node that keeps growing is then measured as it grows). What this guards
# against was measured: until the timing summaries' fix (runtime/timing.py) the node grew
# ~15 kB/s for its first ~77 s, goals or not, and the window used to start inside that; a
# client's departure or a goal still winding down would do the same.
QUIET = 8.0  # [s]
QUIET_BOUND = 45.0  # [s]
NODE_LOG_TAIL = 20  # lines of the node's output kept in the report
START_BOUND = 90.0  # [s] for the node's action servers to appear (a loaded machine)


@dataclass(frozen=True)
class SoakReport:
    """One soak run's figures. RSS values in kB (``VmRSS`` of the node process)."""

    goals: int  # sent after the warm-up
    per_action: dict[str, int]  # goals sent per action
    outcomes: dict[str, int]  # final goal status name -> count (SUCCEEDED, ABORTED, CANCELED)
    unanswered: int  # goals without a response or a result within the bound
    goal_seconds: float  # [s] from the first goal to the last result
    rss_after_warmup: int  # [kB] warm-up done, its results expired
    rss_after_half: int  # [kB] the first half of the goals done, their results expired
    rss_after_goals: int  # [kB] all the goals done, their results expired
    rss_idle_start: int  # [kB]
    rss_idle_end: int  # [kB] after ``idle_seconds`` with nothing connected
    idle_seconds: float  # [s]
    # [s] waited for RSS to settle (QUIET) before the idle window: from the client's departure,
    # with ``client_stays`` from the goals' results' expiry, with ``idle_first`` from the
    # client's discovery of the node's action servers
    settle_seconds: float
    client_stays: bool  # the idle window ran after the goals with the client there, silent
    idle_first: bool  # the idle window ran before the warm-up, the client there, silent
    exit_code: int | None  # the node's, after SIGINT
    # (t [s] into the idle window, VmRSS, RssAnon, RssFile [kB]) every ``sample_period``, the
    # first at t = 0: RssAnon is the heaps, stacks and anonymous maps (where a leak shows),
    # RssFile the mapped files (libraries' pages, faulted in again after the kernel dropped them)
    idle_samples: tuple[tuple[float, int, int, int], ...] = ()
    node_log_tail: tuple[str, ...] = ()  # the node's last output lines before the SIGINT

    @property
    def goal_growth(self) -> int:
        """[kB] RSS after the goals (results expired) − after the warm-up."""
        return self.rss_after_goals - self.rss_after_warmup

    @property
    def second_half_growth(self) -> int:
        """[kB] RSS after all the goals − after the first half (results expired each time):
        what each goal leaves, without the allocators' first high-water marks."""
        return self.rss_after_goals - self.rss_after_half

    @property
    def idle_growth(self) -> int:
        """[kB] RSS at the end of the idle window − at its start."""
        return self.rss_idle_end - self.rss_idle_start

    @property
    def idle_anon_growth(self) -> int:
        """[kB] RssAnon at the end of the idle window − at its start (0 without samples)."""
        return self.idle_samples[-1][2] - self.idle_samples[0][2] if self.idle_samples else 0

    @property
    def idle_file_growth(self) -> int:
        """[kB] RssFile at the end of the idle window − at its start (0 without samples)."""
        return self.idle_samples[-1][3] - self.idle_samples[0][3] if self.idle_samples else 0

    def describe(self) -> str:
        rate = self.idle_growth / self.idle_seconds if self.idle_seconds else float("nan")
        where = (
            "before any goal, the client there, silent"
            if self.idle_first
            else "the client there, silent"
            if self.client_stays
            else "the client gone"
        )
        return (
            f"{self.goals} goals ({', '.join(f'{a} {n}' for a, n in self.per_action.items())}) "
            f"in {self.goal_seconds:.1f} s: {dict(self.outcomes)}, unanswered "
            f"{self.unanswered}\n"
            f"RSS (results expired) after the warm-up {self.rss_after_warmup} kB, half the "
            f"goals {self.rss_after_half} kB, all {self.rss_after_goals} kB: "
            f"{self.goal_growth:+d} kB, the second half {self.second_half_growth:+d} kB\n"
            f"idle {self.idle_seconds:.0f} s ({where}, after {self.settle_seconds:.1f} s for RSS "
            f"to settle): {self.rss_idle_start} -> {self.rss_idle_end} kB, "
            f"{self.idle_growth:+d} kB ({rate:+.2f} kB/s; anonymous {self.idle_anon_growth:+d} kB, "
            f"files {self.idle_file_growth:+d} kB)\n"
            f"node exit code {self.exit_code}"
        )


def rss_split(pid: int) -> tuple[int, int, int]:
    """``VmRSS``, ``RssAnon`` and ``RssFile`` of process ``pid`` [kB] (``/proc/<pid>/status``)."""
    values: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                values[key] = int(line.split()[1])
    if len(values) != 3:
        raise LookupError(f"no VmRSS, RssAnon and RssFile for process {pid}")
    return values["VmRSS"], values["RssAnon"], values["RssFile"]


def rss_kb(pid: int) -> int:
    """``VmRSS`` of process ``pid`` [kB]."""
    return rss_split(pid)[0]


def node_command(result_timeout: float) -> list[str]:
    """``ct-bringup sim --result-timeout T`` (the venv's console script beside this Python)."""
    bringup = os.path.join(os.path.dirname(sys.executable), "ct-bringup")
    return [bringup, "sim", "--result-timeout", f"{result_timeout:g}"]


class _Drain(threading.Thread):
    """Reads the node's output as it comes (a full pipe would block its logging)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.lines: list[str] = []

    def run(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)


class _Goals:
    """The soak's client: one action client per action (service queues as deep as the
    server's), goals of a seeded mix, each goal's response and result tracked."""

    def __init__(self, seed: int) -> None:
        import rclpy
        from ct_interfaces.action import Grasp, MoveJoints, MoveToPose
        from rclpy.action import ActionClient

        from ct_controllers.config import load_config
        from ct_controllers.ros.goals import request_qos

        self.rclpy = rclpy
        self.node = rclpy.create_node("ct_soak_client")
        depth = {
            "goal_service_qos_profile": request_qos(),
            "result_service_qos_profile": request_qos(),
            "cancel_service_qos_profile": request_qos(),
        }
        self.types = {"move_joints": MoveJoints, "move_to_pose": MoveToPose, "grasp": Grasp}
        self.clients = {
            name: ActionClient(self.node, action, f"/ct/{name}", **depth)
            for name, action in self.types.items()
        }
        config = load_config()
        self.arm = list(config.arm_joints)
        self.home = np.array(config.home_positions[: len(self.arm)])
        self.rng = np.random.default_rng(seed)
        self.sent: list[tuple[str, Any]] = []  # (action, goal future)
        self.results: list[Any] = []  # result futures
        self.per_action: Counter[str] = Counter()

    def wait_for_servers(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(
            client.wait_for_server(timeout_sec=max(0.0, deadline - time.monotonic()))
            for client in self.clients.values()
        )

    def spin(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            self._take_responses()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.rclpy.spin_once(self.node, timeout_sec=min(left, 0.01))

    def _take_responses(self) -> None:
        """Ask for the result of each goal answered since (in the order sent)."""
        while len(self.results) < len(self.sent) and self.sent[len(self.results)][1].done():
            handle = self.sent[len(self.results)][1].result()
            self.results.append(handle.get_result_async() if handle.accepted else None)

    def _pose(self, position: tuple[float, float, float]) -> Any:
        from geometry_msgs.msg import PoseStamped

        message = PoseStamped()
        message.header.frame_id = "base_link"
        message.pose.position.x, message.pose.position.y, message.pose.position.z = position
        message.pose.orientation.x = 1.0  # x y z w = 1 0 0 0: the tool points down
        message.pose.orientation.w = 0.0
        return message

    def make(self, action: str) -> Any:
        rng = self.rng
        goal_type = self.types[action].Goal
        if action == "move_joints":
            offsets = rng.uniform(-0.3, 0.3, len(self.arm))
            return goal_type(
                joint_names=self.arm,
                positions=(self.home + offsets).tolist(),
                duration=float(rng.uniform(0.2, 1.0)),
            )
        if action == "move_to_pose":
            y = float(rng.uniform(-0.2, 0.2))
            z = float(rng.uniform(0.25, 0.35))
            return goal_type(target=self._pose((0.45, y, z)), timeout=10.0)
        return goal_type(
            grasp_pose=self._pose((0.5, 0.0, 0.025)),
            approach_offset=0.08,
            lift_height=0.1,
            grasp_effort=20.0,
            hold_duration=0.2,
        )

    def send(self, count: int) -> None:
        """``count`` goals in a seeded mix: each action in turn at random; after each, a dwell
        of 0–0.1 s (the next goal preempts it), every 10th canceled, every 25th (a MoveJoints)
        waited for."""
        for index in range(count):
            action = ACTIONS[int(self.rng.integers(len(ACTIONS)))]
            if index % 25 == 24:
                action = "move_joints"  # waited for: a short one (a grasp takes seconds)
            self.per_action[action] += 1
            future = self.clients[action].send_goal_async(self.make(action))
            self.sent.append((action, future))
            self.spin(float(self.rng.uniform(0.0, 0.1)))
            if index % 10 == 9 and future.done() and future.result().accepted:
                future.result().cancel_goal_async()
                self.spin(0.05)
            if index % 25 == 24:
                self.wait_all(20.0)

    def wait_all(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.spin(0.02)
            if len(self.results) == len(self.sent) and all(
                r is None or r.done() for r in self.results
            ):
                return True
        return False

    def unanswered(self) -> int:
        answered = sum(
            1
            for index, (_, future) in enumerate(self.sent)
            if future.done()
            and index < len(self.results)
            and (self.results[index] is None or self.results[index].done())
        )
        return len(self.sent) - answered

    def outcomes(self) -> dict[str, int]:
        from action_msgs.msg import GoalStatus

        names = {
            value: name[len("STATUS_") :]
            for name, value in vars(GoalStatus).items()
            if name.startswith("STATUS_") and isinstance(value, int)
        }
        counts: Counter[str] = Counter()
        for result in self.results:
            if result is None:
                counts["REJECTED"] += 1
            elif result.done():
                counts[names.get(result.result().status, str(result.result().status))] += 1
        return dict(sorted(counts.items()))

    def reset(self) -> None:
        self.sent.clear()
        self.results.clear()
        self.per_action.clear()

    def close(self) -> None:
        self.node.destroy_node()


def start_node(result_timeout: float) -> tuple[subprocess.Popen[str], _Drain]:
    """The node (:func:`node_command`) in a session of its own, its output drained (kept)."""
    process = subprocess.Popen(
        node_command(result_timeout),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    drain = _Drain(process)
    drain.start()
    return process, drain


def run_soak(
    goals: int = 300,
    warmup: int = 30,
    result_timeout: float = 3.0,
    idle: float = 120.0,
    seed: int = 0,
    log: Any = None,
    sample_period: float = 10.0,
    client_stays: bool = False,
    idle_first: bool = False,
) -> SoakReport:
    """The soak of the module docstring; ``log``: a callable for progress lines (or None);
    ``sample_period`` [s]: how often RSS is sampled in the idle window; ``client_stays``: the
    idle window runs with the client still there, silent (no goal, no spin: its DDS
    participant only), and it leaves after it — the node's own idle rate without the
    client's departure (RSS settles first either way, see ``QUIET``); ``idle_first``: the
    idle window runs before the warm-up instead, the client there and silent (the node never
    had a goal; not the goals' aftermath). Raises ValueError for both."""
    import rclpy

    if client_stays and idle_first:
        raise ValueError("the idle window runs after the goals (client_stays) or before them")

    say = log or (lambda _line: None)
    process, drain = start_node(result_timeout)
    try:
        rclpy.init()
        client = _Goals(seed)
        try:
            if not client.wait_for_servers(START_BOUND):
                raise RuntimeError(
                    "the node's action servers did not appear:\n" + "".join(drain.lines)
                )
            if idle_first:
                settled = _wait_until_quiet(process.pid, QUIET, QUIET_BOUND)
                say(f"idle {idle:.0f} s before any goal (RSS {rss_kb(process.pid)} kB)")
                samples = _sample_rss(process.pid, idle, sample_period)  # nothing spins here
            say(f"warm-up: {warmup} goals")
            client.send(warmup)
            client.wait_all(30.0)
            client.spin(result_timeout + SETTLE)
            after_warmup = rss_kb(process.pid)
            client.reset()
            say(f"{goals} goals (RSS {after_warmup} kB)")
            started = time.monotonic()
            client.send(goals // 2)
            client.wait_all(60.0)
            goal_seconds = time.monotonic() - started
            client.spin(result_timeout + SETTLE)
            after_half = rss_kb(process.pid)
            say(f"half of them done (RSS {after_half} kB)")
            started = time.monotonic()
            client.send(goals - goals // 2)
            client.wait_all(60.0)
            goal_seconds += time.monotonic() - started
            client.spin(result_timeout + SETTLE)
            after_goals = rss_kb(process.pid)
            unanswered = client.unanswered()
            outcomes = client.outcomes()
            per_action = dict(sorted(client.per_action.items()))
            if client_stays:
                settled = _wait_until_quiet(process.pid, QUIET, QUIET_BOUND)
                say(f"idle {idle:.0f} s, the client silent (RSS {rss_kb(process.pid)} kB)")
                samples = _sample_rss(process.pid, idle, sample_period)  # nothing spins here
        finally:
            client.close()
            rclpy.shutdown()  # the client leaves the DDS graph
        if not (client_stays or idle_first):
            settled = _wait_until_quiet(process.pid, QUIET, QUIET_BOUND)
            say(f"idle {idle:.0f} s (RSS {rss_kb(process.pid)} kB)")
            samples = _sample_rss(process.pid, idle, sample_period)  # nothing else runs here
        process.send_signal(signal.SIGINT)
        process.wait(20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
    drain.join(5)
    return SoakReport(
        goals=goals,
        per_action=per_action,
        outcomes=outcomes,
        unanswered=unanswered,
        goal_seconds=goal_seconds,
        rss_after_warmup=after_warmup,
        rss_after_half=after_half,
        rss_after_goals=after_goals,
        rss_idle_start=samples[0][1],
        rss_idle_end=samples[-1][1],
        idle_seconds=idle,
        settle_seconds=settled,
        client_stays=client_stays,
        idle_first=idle_first,
        exit_code=process.returncode,
        idle_samples=tuple(samples),
        node_log_tail=tuple(line.rstrip("\n") for line in drain.lines[-NODE_LOG_TAIL:]),
    )


def _wait_until_quiet(pid: int, quiet: float, bound: float, period: float = 0.5) -> float:
    """Wait until ``pid``'s RSS has not changed for ``quiet`` s, or ``bound`` s passed; the
    time waited [s]."""
    started = changed = time.monotonic()
    last = rss_kb(pid)
    while (now := time.monotonic()) - changed < quiet and now - started < bound:
        time.sleep(period)
        if (rss := rss_kb(pid)) != last:
            last, changed = rss, time.monotonic()
    return time.monotonic() - started


def _sample_rss(pid: int, seconds: float, period: float) -> list[tuple[float, int, int, int]]:
    """:func:`rss_split` of ``pid`` at once, then every ``period`` s for ``seconds`` (the last
    sample at ``seconds``), each with its time [s] from the first."""
    started = time.monotonic()
    samples = [(0.0, *rss_split(pid))]
    while (elapsed := time.monotonic() - started) < seconds:
        time.sleep(min(period - elapsed % period, seconds - elapsed))
        samples.append((round(time.monotonic() - started, 1), *rss_split(pid)))
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ct-bench soak", description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=300, help="goals after the warm-up")
    parser.add_argument("--warmup", type=int, default=30, help="warm-up goals")
    parser.add_argument(
        "--result-timeout", type=float, default=3.0, help="the node's result expiry [s]"
    )
    parser.add_argument("--idle", type=float, default=120.0, help="idle window [s]")
    parser.add_argument(
        "--sample-period", type=float, default=10.0, help="RSS sampling in the idle window [s]"
    )
    parser.add_argument(
        "--client-stays",
        action="store_true",
        help="idle window with the client still there, silent (it leaves after it)",
    )
    parser.add_argument(
        "--idle-first",
        action="store_true",
        help="idle window before the warm-up, the client there, silent",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if (
        args.goals < 1
        or args.warmup < 0
        or not args.result_timeout > 0
        or not args.idle >= 0
        or not args.sample_period > 0
        or (args.client_stays and args.idle_first)
    ):
        parser.error(
            "--goals ≥ 1, --warmup ≥ 0, --result-timeout > 0, --idle ≥ 0, --sample-period > 0; "
            "--client-stays or --idle-first, not both"
        )
    from ct_controllers.ros.dds import ensure_loopback_dds

    ensure_loopback_dds()  # this process's client and the node it starts
    report = run_soak(
        args.goals,
        args.warmup,
        args.result_timeout,
        args.idle,
        args.seed,
        log=lambda line: print(f"ct-bench soak: {line}", flush=True),
        sample_period=args.sample_period,
        client_stays=args.client_stays,
        idle_first=args.idle_first,
    )
    if args.json:
        print(
            json.dumps(
                {
                    **asdict(report),
                    "goal_growth": report.goal_growth,
                    "idle_growth": report.idle_growth,
                    "idle_anon_growth": report.idle_anon_growth,
                    "idle_file_growth": report.idle_file_growth,
                }
            )
        )
    else:
        print(report.describe())
    return 0 if report.unanswered == 0 and report.exit_code == 0 else 1
