"""The control loop survives whatever a stage raises (ct_controllers.runtime.control_loop), on the
real stack (MuJoCo lockstep, Pinocchio, joint impedance, limiter) with the loop in its own
thread, as the node runs it.

Each stage gets a real exception injected into the collaborator it calls (the backend, the
guard, the planner, the trajectory, the controller, the limiter, the snapshot's guard counters):
the fault is latched naming the stage, the fault reaction is written, the thread keeps ticking,
and once the cause is gone a reset clears the fault and a motion succeeds again. A thread that
still dies (a BaseException) says so and is restarted by the reset."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from helpers import bundled_description, lockstep_config

from ct_controllers.runtime import motion_requests as motion_requests_module
from ct_controllers.runtime.control_loop import FAILED, SUCCEEDED
from ct_controllers.runtime.stack import Stack, build_stack

CONFIG = lockstep_config()
ARM = CONFIG.arm_joints
TARGET = (0.3, 0.5, 0.1, -1.4, 0.1, 1.0, 0.2)  # reachable, away from home [rad]


class Injected(RuntimeError):
    """The exception injected into a stage."""


class Kill(BaseException):
    """Not an Exception: the one kind the loop thread does not survive."""


@pytest.fixture
def stack() -> Iterator[Stack]:
    stack = build_stack(CONFIG, bundled_description())
    stack.start()
    try:
        yield stack
    finally:
        stack.shut_down()


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.002)
    return condition()


def raising_once(target: Any, name: str, exc: BaseException) -> Callable[[], bool]:
    """Replace ``target.name`` so that its next call raises ``exc``, later calls behave; returns
    a function telling whether it has raised."""
    original = getattr(target, name)
    raised = []

    def replacement(*args: Any, **kwargs: Any) -> Any:
        if not raised:
            raised.append(True)
            raise exc
        return original(*args, **kwargs)

    setattr(target, name, replacement)
    return lambda: bool(raised)


def check_survives_and_recovers(stack: Stack, stage: str) -> None:
    """After the injected exception: a latched fault names the stage and the exception, a safe
    command was written, the thread keeps ticking; the reset clears it; a motion then succeeds."""
    loop = stack.loop
    assert wait_until(lambda: loop.fault is not None), "no fault latched"
    fault = loop.fault
    assert fault is not None and f"{stage} raised Injected" in fault, fault
    assert loop.running
    record = loop.fault_record
    assert record is not None
    assert wait_until(lambda: loop.fault_record.first_safe_command is not None)  # type: ignore[union-attr]
    ticks = loop.timing.ticks
    assert wait_until(lambda: loop.timing.ticks > ticks + 50), "the loop stopped ticking"
    snapshot = loop.wait_for_snapshot(loop.timing.ticks)
    assert snapshot is not None and np.all(np.isfinite(snapshot.commanded_effort))
    assert loop.reset_fault_and_wait(timeout=2.0) is None
    motion = loop.request_motion(ARM, TARGET, 0.5)
    assert wait_until(
        lambda: (status := loop.motion_status(motion)) is not None and status.state == SUCCEEDED,
        timeout=20.0,
    ), loop.motion_status(motion)


def test_backend_write_raising_latches_a_fault_and_the_loop_goes_on(stack):
    """A backend write that raises once: fault 'write raised Injected', reaction written on the
    next try, the thread lives, reset and a motion work."""
    raising_once(stack.hardware, "write", Injected("bus error"))
    check_survives_and_recovers(stack, "write")


def test_guard_raising_is_a_fault_not_a_dead_loop(stack):
    """The boundary guard raising on a state sample latches a fault naming 'read'/'guard'."""
    raising_once(stack.loop.guard, "admit_state", Injected("guard bug"))
    check_survives_and_recovers(stack, "read")


def test_planner_raising_is_a_fault_not_a_dead_loop(stack, monkeypatch):
    """A trajectory planner that raises something other than TrajectoryError while a motion
    request is taken: fault 'requests raised Injected'."""
    original = motion_requests_module.JerkLimitedTrajectory
    calls = []

    def planner(*args: Any, **kwargs: Any) -> Any:
        if not calls:
            calls.append(1)
            raise Injected("planner bug")
        return original(*args, **kwargs)

    monkeypatch.setattr(motion_requests_module, "JerkLimitedTrajectory", planner)
    stack.loop.request_motion(ARM, TARGET, 1.0)
    check_survives_and_recovers(stack, "requests")


def test_trajectory_sampling_raising_is_a_fault(stack):
    """A running trajectory whose sampling raises: fault 'reference raised Injected'."""
    loop = stack.loop
    motion = loop.request_motion(ARM, TARGET, 2.0)
    assert wait_until(lambda: loop._trajectory is not None and loop.motion_status(motion))
    trajectory = loop._trajectory
    assert trajectory is not None
    raising_once(trajectory, "sample", Injected("sampling bug"))
    check_survives_and_recovers(stack, "reference")
    status = loop.motion_status(motion)
    assert status is not None and status.state == FAILED


def test_controller_raising_is_a_fault(stack):
    """The controller raising (through its update) latches 'controller raised ...'."""
    raising_once(stack.loop.controller, "compute", Injected("controller bug"))
    assert wait_until(lambda: stack.loop.fault is not None)
    fault = stack.loop.fault
    assert fault is not None and "controller raised Injected" in fault
    assert stack.loop.reset_fault_and_wait(timeout=2.0) is None


def test_limiter_raising_is_a_fault(stack):
    """The limiter raising: fault 'limiter raised Injected'; the reaction goes through the
    limiter again on the next try."""
    raising_once(stack.loop.limiter, "limit", Injected("limiter bug"))
    check_survives_and_recovers(stack, "limiter")


def test_snapshot_raising_is_a_fault(stack):
    """Building the snapshot raising (the guard's counters): fault 'snapshot raised ...'."""
    raising_once(stack.loop.guard, "counts", Injected("counters bug"))
    check_survives_and_recovers(stack, "snapshot")


def test_a_stage_raising_every_tick_keeps_the_thread_alive_and_drives_stopped(stack):
    """A write that raises on every tick: the loop stays alive (ticks keep counting, with a
    back-off), the fault says so, and the reset is refused only while the cause lasts."""
    loop = stack.loop
    original = stack.hardware.write

    def always(*args: Any, **kwargs: Any) -> Any:
        raise Injected("bus gone")

    stack.hardware.write = always  # type: ignore[method-assign]
    assert wait_until(lambda: loop.fault is not None)
    time.sleep(0.1)
    assert loop.running
    ticks = loop.timing.ticks
    assert wait_until(lambda: loop.timing.ticks > ticks + 10)
    stack.hardware.write = original  # type: ignore[method-assign]
    assert loop.reset_fault_and_wait(timeout=2.0) is None
    assert loop.fault is None


def test_a_dead_loop_thread_says_so_and_the_reset_restarts_it(stack):
    """A BaseException kills the thread: running is False, the fault and stopped_reason say
    'control loop stopped', waiters wake at once (no 1 s timeout), and reset_fault_and_wait
    starts a new thread from the measured state and clears the fault; a motion then succeeds."""
    loop = stack.loop
    raising_once(loop.controller, "compute", Kill("killed"))
    assert wait_until(lambda: not loop.running)
    assert loop.stopped_reason is not None and "Kill: killed" in loop.stopped_reason
    assert loop.fault is not None and "control loop stopped" in loop.fault
    started = time.monotonic()
    snapshot = loop.wait_for_snapshot(after_tick=loop.timing.ticks + 10**6, timeout=1.0)
    assert snapshot is None or time.monotonic() - started < 1.0
    assert loop.reset_fault_and_wait(timeout=2.0) is None
    assert loop.running and loop.fault is None
    motion = loop.request_motion(ARM, TARGET, 0.5)
    assert wait_until(
        lambda: (status := loop.motion_status(motion)) is not None and status.state == SUCCEEDED,
        timeout=20.0,
    )


def test_durations_the_planner_cannot_plan_are_refused_at_the_request(stack):
    """A duration beyond MAX_DURATION (Ruckig fails above ~7,600 s with a code its enum lacks)
    is a ValueError naming the bound; nothing starts."""
    for duration in (7700.0, 1e9, 1e308):
        with pytest.raises(ValueError, match=r"duration must be within \[0, 3600\] s"):
            stack.loop.request_motion(ARM, TARGET, duration)
    assert stack.loop.fault is None and stack.loop.running


def test_too_many_names_are_refused_before_anything_scales_with_them(stack):
    """10,000 names: refused for their count, the message short, in well under a second."""
    names = [f"joint{i}" for i in range(10_000)]
    started = time.perf_counter()
    with pytest.raises(ValueError) as refused:
        stack.loop.request_motion(names, np.zeros(len(names)))
    assert time.perf_counter() - started < 0.1
    assert "10000 joint names; the robot has" in str(refused.value)
    assert len(str(refused.value)) < 200
