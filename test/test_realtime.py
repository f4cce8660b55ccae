"""ct_controllers.runtime.realtime: the control thread's scheduling — SCHED_FIFO priority and CPU
pinning applied to the calling thread only and reported as the kernel sees them; what cannot be
applied is reported, not raised; invalid settings are refused. And the control loop applies its
settings to its own thread when it keeps a period, not when it free-runs in lockstep."""

from __future__ import annotations

import os
import threading
import time

import pytest
from helpers import lockstep_config

from ct_controllers.config import ConfigError, load_config
from ct_controllers.runtime.realtime import (
    RealtimeReport,
    RealtimeSettings,
    apply_to_current_thread,
)
from ct_controllers.runtime.stack import build_stack


def _in_thread(settings: RealtimeSettings) -> tuple[RealtimeReport, int, int, set[int]]:
    """Apply ``settings`` in a new thread; return its report and what the kernel says of that
    thread (policy, priority, CPUs), read from outside while it is still alive."""
    results: dict[str, object] = {}
    applied, release = threading.Event(), threading.Event()

    def body() -> None:
        results["report"] = apply_to_current_thread(settings)
        applied.set()
        release.wait(5.0)

    thread = threading.Thread(target=body)
    thread.start()
    try:
        assert applied.wait(5.0)
        tid = thread.native_id
        assert tid is not None
        kernel = (
            os.sched_getscheduler(tid),
            os.sched_getparam(tid).sched_priority,
            os.sched_getaffinity(tid),
        )
    finally:
        release.set()
        thread.join()
    report = results["report"]
    assert isinstance(report, RealtimeReport)
    return report, *kernel


def test_fifo_priority_is_applied_to_the_calling_thread_only_or_its_refusal_reported():
    """With SCHED_FIFO 10 the thread runs FIFO at 10 (where the process may, as root here) and the
    report says so; where it may not, the report names the problem and the thread stays normal.
    The calling (main) thread is untouched either way."""
    main_policy = os.sched_getscheduler(0)
    report, policy, priority, _ = _in_thread(RealtimeSettings(priority=10))
    if report.problems:
        assert "SCHED_FIFO" in report.problems[0] and policy == os.SCHED_OTHER
        assert report.policy == "SCHED_OTHER"
    else:
        assert policy == os.SCHED_FIFO and priority == 10
        assert report.policy == "SCHED_FIFO" and report.priority == 10
    assert os.sched_getscheduler(0) == main_policy


def test_priority_zero_leaves_normal_scheduling_and_a_cpu_pins_the_thread():
    """priority 0 = normal scheduling; cpu 0 pins the thread to CPU 0 (and the report agrees)."""
    report, policy, _, cpus = _in_thread(RealtimeSettings(priority=0, cpu=0))
    assert policy == os.SCHED_OTHER and report.policy == "SCHED_OTHER"
    assert cpus == {0} and report.cpus == (0,) and not report.problems


def test_a_cpu_that_does_not_exist_is_reported_not_raised():
    """Pinning to a CPU the machine lacks fails with a report naming it; the thread runs on."""
    missing = max(os.sched_getaffinity(0)) + 1000
    report, _, _, cpus = _in_thread(RealtimeSettings(priority=0, cpu=missing))
    assert any(f"CPU {missing}" in problem for problem in report.problems)
    assert cpus == os.sched_getaffinity(0)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"realtime.priority": 100}, "realtime.priority"),
        ({"realtime.priority": -1}, "realtime.priority"),
        ({"realtime.cpu": -2}, "realtime.cpu"),
        ({"realtime.lock_memory": "yes"}, "realtime.lock_memory"),
    ],
)
def test_invalid_realtime_parameters_are_refused_by_name(overrides, named):
    """Out-of-range priority or CPU and a non-boolean lock_memory are configuration errors."""
    with pytest.raises(ConfigError, match=named):
        load_config(overrides=overrides)


def test_the_loop_thread_gets_fifo_when_paced_and_nothing_in_lockstep():
    """A paced loop's thread reports the configured FIFO priority (or why not) and the kernel
    agrees; a free-running lockstep loop thread is left at normal scheduling."""
    paced = build_stack(load_config(overrides={"mujoco.mode": "paced", "realtime.priority": 20}))
    paced.start()
    try:
        deadline = time.monotonic() + 5.0
        while paced.loop.realtime_report is None and time.monotonic() < deadline:
            time.sleep(0.01)
        report = paced.loop.realtime_report
        assert report is not None
        thread = paced.loop._thread
        assert thread is not None and thread.native_id is not None
        if not report.problems:
            assert os.sched_getscheduler(thread.native_id) == os.SCHED_FIFO
            assert report.priority == 20
        assert paced.loop.diagnostics()["loop.scheduling"] == report.describe()
    finally:
        paced.shut_down()
    lockstep = build_stack(lockstep_config())
    lockstep.start()
    try:
        time.sleep(0.1)
        assert lockstep.loop.realtime_report is None
        thread = lockstep.loop._thread
        assert thread is not None and thread.native_id is not None
        assert os.sched_getscheduler(thread.native_id) == os.SCHED_OTHER
    finally:
        lockstep.shut_down()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
def test_without_privileges_fifo_is_refused_and_reported_not_raised():
    """A process that may not use real-time scheduling (an unprivileged user with no rtprio
    limit — here a child that drops root for 'nobody') gets a report naming SCHED_FIFO and the
    missing privilege, and runs on with normal scheduling."""
    import subprocess
    import sys

    script = (
        "import os, resource\n"
        "from ct_controllers.runtime.realtime import RealtimeSettings, apply_to_current_thread\n"
        "resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "report = apply_to_current_thread(RealtimeSettings(priority=50))\n"
        "print(report.policy); print(report.problems[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    policy, problem = result.stdout.strip().splitlines()
    assert policy == "SCHED_OTHER"
    assert "could not enable SCHED_FIFO priority 50" in problem and "CAP_SYS_NICE" in problem
