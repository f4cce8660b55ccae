"""The scripted motion behind ``make sim``: the whole stack in MuJoCo lockstep, moving the arm
through a few waypoints and back home, measured as it goes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ct_controllers.config import StackConfig
from ct_controllers.runtime.control_loop import SUCCEEDED, LoopSnapshot
from ct_controllers.runtime.stack import Stack, build_stack
from ct_controllers.runtime.timing import Percentiles, TimingSummary

# Arm waypoints [rad], arm_joints order; each reached in MOVE_TIME then held for SETTLE_TIME.
WAYPOINTS = (
    (0.6, 0.7, 0.0, -1.2, 0.0, 1.1, 0.3),
    (-0.6, 0.3, 0.4, -1.9, 0.3, 1.4, -0.3),
    (0.0, 0.9, 0.0, -0.9, 0.0, 0.9, 0.0),
)
MOVE_TIME = 2.0  # [s]
SETTLE_TIME = 0.5  # [s]
FINAL_ERROR_LIMIT = 1e-3  # [rad] at the end of the last settle


class RunObserver(Protocol):
    """Looks at a lockstep run between ticks (a recorder, a video renderer): ``started`` once
    the stack is up, ``ticked`` after every batch of ticks (each snapshot). Its time is not in
    any tick's timing, nor in the run's wall time."""

    def started(self, stack: Stack) -> None: ...

    def ticked(self, stack: Stack) -> None: ...


@dataclass(frozen=True)
class SimSummary:
    ticks: int
    sim_time: float  # [s]
    wall_time: float  # [s]
    waypoints: int
    tracking_error_max: float  # [rad] max over samples of max |q_ref − q| over arm joints
    tracking_error_rms: float  # [rad] RMS over samples and arm joints
    final_error: float  # [rad] max |q_goal − q| over arm joints at the end
    final_position: tuple[float, ...]  # [rad] arm joints at the end
    timing: TimingSummary
    stages: dict[str, Percentiles]  # per-stage compute time [s]

    @property
    def real_time_factor(self) -> float:
        return self.sim_time / self.wall_time

    @property
    def ok(self) -> bool:
        return self.final_error <= FINAL_ERROR_LIMIT


def run_scripted_motion(config: StackConfig, observers: Sequence[RunObserver] = ()) -> SimSummary:
    stack = build_stack(config)
    loop = stack.loop
    arm = stack.model.indices(config.arm_joints)
    home = np.array(config.home_positions[: len(config.arm_joints)])
    goals = [np.array(w) for w in WAYPOINTS] + [home]
    errors: list[np.ndarray] = []
    ticks_per_settle = round(SETTLE_TIME / config.period)
    stack.bring_up()
    observing = 0.0  # [s] of wall time spent in the observers

    def observe(first: bool = False) -> None:
        nonlocal observing
        start = time.perf_counter()
        for observer in observers:
            if first:
                observer.started(stack)
            else:
                observer.ticked(stack)
        observing += time.perf_counter() - start

    wall_start = time.perf_counter()
    try:
        observe(first=True)
        for goal in goals:
            loop.request_motion(config.arm_joints, goal, MOVE_TIME)
            while True:
                loop.run_ticks(loop.snapshot_decimation)
                observe()
                snapshot = _latest(loop.snapshot())
                errors.append((snapshot.reference_position - snapshot.position)[arm])
                if snapshot.motion is not None and snapshot.motion.state == SUCCEEDED:
                    break
            for _ in range(ticks_per_settle // loop.snapshot_decimation):
                loop.run_ticks(loop.snapshot_decimation)
                observe()
                snapshot = _latest(loop.snapshot())
                errors.append((snapshot.reference_position - snapshot.position)[arm])
        wall = time.perf_counter() - wall_start - observing
        final = _latest(loop.snapshot())
    finally:
        stack.shut_down()
    samples = np.abs(np.array(errors))
    return SimSummary(
        ticks=loop.timing.ticks,
        sim_time=final.stamp,
        wall_time=wall,
        waypoints=len(goals),
        tracking_error_max=float(samples.max()),
        tracking_error_rms=float(np.sqrt(np.mean(samples**2))),
        final_error=float(np.max(np.abs(home - final.position[arm]))),
        final_position=tuple(float(x) for x in final.position[arm]),
        timing=loop.timing_summary(),
        stages=loop.stages.summary(),
    )


def _latest(snapshot: LoopSnapshot | None) -> LoopSnapshot:
    if snapshot is None:
        raise RuntimeError("the control loop has published no snapshot")
    if snapshot.fault:
        raise RuntimeError(f"control loop fault: {snapshot.fault}")
    return snapshot
