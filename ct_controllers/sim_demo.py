"""The scripted motion behind ``make sim``: the whole stack in MuJoCo lockstep, moving the arm
through a few waypoints and back home, measured as it goes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pinocchio as pin

from ct_controllers.config import StackConfig
from ct_controllers.errors import CtError
from ct_controllers.hardware.mujoco_collision import SceneClearance, scene_clearance
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.control_loop import SUCCEEDED, LoopSnapshot
from ct_controllers.runtime.stack import Stack, build_stack
from ct_controllers.runtime.timing import Percentiles, TimingSummary

# The scripted motion comes from the robot: three waypoints about its home, each arm joint moved
# by AMPLITUDE (capped at FRACTION of its room to the limit on that side) with the signs of one
# of PATTERNS, then home again. A waypoint (or the straight joint-space path to it) that takes
# a link below the floor, or a robot shape into the simulated scene (the table, the cube: the
# stack's SceneClearance from home), is shrunk (halved, up to SHRINK times; home itself is
# always allowed).
AMPLITUDE = (0.5, 0.05)  # [rad, m] revolute (or continuous), prismatic arm joints
FRACTION = 0.5  # [-] of the distance from home to the limit on the side moved towards
PATTERNS = ("alternate", "opposite", "half")  # +−+−…, −+−+…, all + at half the amplitude
SHRINK = 6
FLOOR = 0.05  # [m] a link above this height (base frame) at home must stay above it
PATH_SAMPLES = 8  # points checked on the straight path between two waypoints
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
    tick_compute: np.ndarray  # [s] every tick's compute time, in order (benches pool them)
    stage_compute: dict[str, np.ndarray]  # [s] every tick's compute time per stage

    @property
    def real_time_factor(self) -> float:
        return self.sim_time / self.wall_time

    @property
    def ok(self) -> bool:
        return self.final_error <= FINAL_ERROR_LIMIT


def _heights(model: RobotModel, q: np.ndarray, frames: list[int]) -> np.ndarray:
    """Each body frame's height [m] in the base frame at joint positions ``q`` (model order)."""
    data = model.model.createData()
    pin.framesForwardKinematics(model.model, data, model.pinocchio_configuration(q))
    base = data.oMf[model.base_frame_id].inverse()
    return np.array([(base * data.oMf[f]).translation[2] for f in frames])


def _prismatic(model: RobotModel, joint_names: Sequence[str]) -> np.ndarray:
    kinds = []
    for name in joint_names:
        joint = model.model.joints[model.model.getJointId(name)]
        kinds.append(joint.shortname().startswith("JointModelP"))  # PX/PY/PZ, PrismaticUnaligned
    return np.array(kinds, dtype=bool)


def scripted_waypoints(
    model: RobotModel, config: StackConfig, scene: SceneClearance | None = None
) -> list[np.ndarray]:
    """The arm's waypoints [rad | m] (``arm_joints`` order), home last, from the robot's home and
    limits (see AMPLITUDE): every one inside the joint limits, no link (or the path to it,
    PATH_SAMPLES points) below ``min(FLOOR, the link's height at home)`` in the base frame, and
    none of those points where ``scene`` (built from home: the other joints stay there) finds the
    arm too near the scene (None: not checked)."""
    arm = model.indices(config.arm_joints)
    full_home = np.array(model.neutral())
    full_home[model.indices(config.joint_names)] = config.home_positions
    home = full_home[arm]
    lower, upper = model.limits.lower[arm], model.limits.upper[arm]
    amplitude = np.where(_prismatic(model, config.arm_joints), AMPLITUDE[1], AMPLITUDE[0])
    up = np.minimum(amplitude, FRACTION * (upper - home))  # inf - home: a continuous joint
    down = np.minimum(amplitude, FRACTION * (home - lower))
    signs = np.where(np.arange(len(arm)) % 2 == 0, 1.0, -1.0)
    frames = [
        f
        for f, frame in enumerate(model.model.frames)
        if frame.type == pin.FrameType.BODY and f != model.base_frame_id
    ]
    floor = np.minimum(_heights(model, full_home, frames), FLOOR) - 1e-6

    def clear(start: np.ndarray, end: np.ndarray) -> bool:
        q = full_home.copy()
        for s in np.linspace(0.0, 1.0, PATH_SAMPLES + 1)[1:]:
            q[arm] = start + s * (end - start)
            if np.any(_heights(model, q, frames) < floor):
                return False
            if scene is not None and not scene.clear(
                dict(zip(config.arm_joints, q[arm].tolist(), strict=True))
            ):
                return False
        return True

    waypoints: list[np.ndarray] = []
    previous = home
    for pattern in PATTERNS:
        direction = {"alternate": signs, "opposite": -signs, "half": np.ones(len(arm))}[pattern]
        step = np.where(direction > 0, up, -down) * (0.5 if pattern == "half" else 1.0)
        for shrink in range(SHRINK + 1):
            goal = home + step * 0.5**shrink
            if clear(previous, goal):
                break
        else:
            goal = home
        waypoints.append(np.clip(goal, lower, upper))
        previous = waypoints[-1]
    return [*waypoints, home]


def run_scripted_motion(config: StackConfig, observers: Sequence[RunObserver] = ()) -> SimSummary:
    """ct-sim's run: the stack of ``config`` through :func:`scripted_waypoints`, kept clear of
    the MuJoCo scene of this description and configuration, and back home."""
    stack = build_stack(config)
    loop = stack.loop
    arm = stack.model.indices(config.arm_joints)
    goals = scripted_waypoints(stack.model, config, scene_clearance(stack.description, config))
    home = goals[-1]
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
        tick_compute=loop.timing._compute[: min(loop.timing.ticks, loop.timing.capacity)].copy(),
        stage_compute={stage: loop.stages.samples(stage) for stage in loop.stages.stages},
    )


class SimFault(CtError, RuntimeError):
    """The control loop faulted during the scripted motion (the stack then holds the arm)."""


def _latest(snapshot: LoopSnapshot | None) -> LoopSnapshot:
    if snapshot is None:
        raise RuntimeError("the control loop has published no snapshot")
    if snapshot.fault:
        raise SimFault(f"control loop fault: {snapshot.fault}")
    return snapshot
