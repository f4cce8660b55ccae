"""``ct-bench backends``: the same scenarios on every backend and command interface — MuJoCo
(effort, position; lockstep at 1 kHz), the ros2_control bridge against its plant process
(effort, position) and CANopen CiA 402 against simulated drives (torque, position), both at
100 Hz with the slow-loop gains (:mod:`ct_controllers.sim.rigs`) — one row per backend, mode and
scenario with its outcome, final error and time.

Scenarios, each from rest at the home pose, in this order on one rig per backend and mode
(the arm goes back home between them):

- ``joint_motion``: the first arm joint +0.3 rad and the fourth (joint1, joint4 on the bundled
  arm; the last one on a shorter arm) +0.3 rad, as MoveJoints plans it (duration 0:
  the reference limits); ok when the motion succeeded and every arm joint of the plant is
  within 0.01 rad of its goal (MoveJoints' tolerance) within 2 s of its end. Error: the
  largest |q − goal| [rad] of the plant's own positions then.
- ``cartesian``: a TCP target ~5 cm away (a least-squares joint step toward it, orientation kept:
  one the arm can reach), through the chain factory's chain (QP
  differential IK → the stack's joint controller, what MoveToPose runs); ok when the chain's
  error stays within 3 mm and 0.01 rad for 0.3 s within 6 s. Error: the plant's TCP (an
  independent FK of its own positions) to the target [m].
- ``grasp``: APPROACH → CLOSE → HOLD → RELEASE on a 5 cm object — MuJoCo's cube at
  x = 0.5 m (and its object sensor), the plant rigs' object between the fingers
  (:mod:`ct_controllers.sim.object_contact`) — with ``GRASP_EFFORT`` per finger and the
  stack's default joint controller, as the Grasp action runs it; ok at DONE. Error: the largest
  |contact force − grasp_effort| [N] over the fingers during the hold stage, as the plant knows
  the force. Where the fingers are on the position interface and the backend cannot limit
  their drives' effort (the bridge), the goal is refused as the Grasp action refuses it
  (INVALID_GOAL): that is the designed outcome, reported ok with the reason.
- ``cancel``: a 2 s motion of the first arm joint (+0.4 rad) stopped at 40 % of its duration as
  MoveJoints'
  cancel stops it (``loop.hold()``: a stop at bounded deceleration, then a hold where it
  ends); ok when the motion ends CANCELED, the arm comes to rest (every arm joint slower than
  0.02 rad/s) within 2 s and, 0.5 s later, the plant is within 0.01 rad of the hold. Error: that
  distance [rad]; time: from the cancel to rest.
- ``preempt``: the same 2 s motion replaced at 40 % by another (the first arm joint −0.3 rad), as
  a newer
  MoveJoints goal replaces it; ok when the first ends PREEMPTED and the second is reached as in
  ``joint_motion``. Error: the second's, [rad]; time: the whole scenario.

The 100 Hz CANopen rig runs with 100 ms state, command and PDO deadlines, as in the tests
(``sim/rigs.py``): this bench measures motions, not fault reactions (``ct-bench faults``
does), and a loaded machine stalls the pure-Python bus for longer than 60 ms now and then. Its
simulated drives run in a process of their own (:mod:`~ct_controllers.sim.drives_process`), and
the rig ticks with the loop thread's real-time scheduling (``realtime.*``, as the control node's
loop thread has it and the bus threads have it too), so the rows measure the stack, not the
drives' motor model holding our GIL or a normal-priority thread waiting behind other work.
Times are on the backend's clock (sim time for MuJoCo). A joint's step is in the other direction
where its limits leave less room that way (5 % of the range kept), at most the room there is,
and on a prismatic joint (Tiago's torso lift) 0.15 m per radian named above.

``--workers N`` runs the MuJoCo rigs (lockstep: every figure on sim time, the same whatever
else runs) in up to N spawned worker processes at once, with the same rows as in this
process. The bridge and CANopen rigs stay serial, in this process, after the workers are done:
they would not interfere by name (bridge topics carry the process id, python-can's virtual
channels are per process), but they are paced at 100 Hz against wall-clock deadlines, and a rig
beside other work on a loaded machine misses them — rows that would measure the machine, not
the backend. Rows are printed in ``--modes`` order either way.
``--json`` prints
``{"results": [{"backend", "mode", "scenario", "ok", "final_error", "unit", "seconds",
"message"}]}`` (final_error null where there is none: a refused goal).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from dataclasses import asdict, dataclass, replace

import numpy as np

from ct_controllers.bench.grasp import (
    cube_pose,
    fingertip_scene,
    robot_reach,
    robot_scene,
    top_down_grasp,
    worker_pool,
)
from ct_controllers.chains.grasp_runner import build_grasp_runner, grip_force_refusal
from ct_controllers.chains.tcp_chain_factory import tcp_target_chain
from ct_controllers.config import RealtimeSettings, StackConfig, load_config
from ct_controllers.hardware.mujoco_objects import ObjectSensor, place_object
from ct_controllers.hardware.mujoco_scene import CUBE_BODY
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.control_loop import CANCELED, PREEMPTED, RUNNING, SUCCEEDED
from ct_controllers.runtime.realtime import apply_to_current_thread
from ct_controllers.sim.rigs import MODES, Rig, make_rig
from ct_controllers.tasks.phases import Phase

SCENARIOS = ("joint_motion", "cartesian", "grasp", "cancel", "preempt")
# Rigs in lockstep on sim time: their rows do not depend on what else runs, so --workers runs
# them in processes side by side; the others are paced against wall-clock deadlines.
LOCKSTEP_BACKENDS = ("mujoco",)
GOAL_TOLERANCE = 0.01  # [rad] per joint, MoveJoints' (ros/move_joints.py)
SETTLE_TIMEOUT = 2.0  # [s] after a trajectory ends, MoveJoints'
OFFSET = np.array([0.03, -0.03, 0.0287])  # [m] base frame: the Cartesian target, 5.0 cm away
POSITION_TOLERANCE = 0.003  # [m]
ORIENTATION_TOLERANCE = 0.01  # [rad]
CARTESIAN_TIMEOUT = 6.0  # [s]
GRASP_EFFORT = 15.0  # [N] per finger: neither the task's default (20 N) nor the URDF limit (40 N)
OBJECT_WIDTH = 0.05  # [m] the plant rigs' object, as wide as MuJoCo's cube
GRASP_TIMEOUT = 30.0  # [s] the phase machine's own timeouts end it first
REST_SPEED = 0.02  # [rad/s] "at rest": the 100 Hz torque rigs' quarter gains ring at ~0.01
REST_TIMEOUT = 2.0  # [s] after a cancel
PRISMATIC_STEP = 0.15  # [m per rad of a revolute joint's step]: a prismatic joint's steps
LIMIT_MARGIN = 0.05  # [-] of a joint's range: a step's goal stays this far inside its limits


@dataclass(frozen=True)
class Row:
    backend: str
    mode: str
    scenario: str
    ok: bool
    final_error: float | None
    unit: str
    seconds: float
    message: str


def reachable_offset_target(
    model: RobotModel, arm_joints: Sequence[str], q: np.ndarray
) -> np.ndarray:
    """The Cartesian scenario's target (4x4, base frame): the TCP pose at q + J⁺ [OFFSET; 0],
    one least-squares step of the arm joints toward OFFSET with the orientation kept (within
    their limits) — OFFSET itself to first order on an arm of six joints or more, and on fewer
    (the SO-101's five) the nearest pose the arm can take, never one it cannot."""
    arm = model.indices(arm_joints)
    jacobian = model.frame_jacobian(q)[:, arm]
    step = np.linalg.pinv(jacobian) @ np.concatenate([OFFSET, np.zeros(3)])
    moved = np.array(q, dtype=float)
    moved[arm] = np.clip(q[arm] + step, model.limits.lower[arm], model.limits.upper[arm])
    return model.frame_pose(moved).copy()


class Scenarios:
    """The scenarios on one rig; each returns its row's (ok, final_error, unit, seconds,
    message)."""

    def __init__(self, rig: Rig, independent: RobotModel) -> None:
        """``independent``: a model of its own for the plant's TCP, parsed before the rig came
        up (a parse holds the interpreter for tens of ms, which a 100 Hz bus between ticks does
        not survive)."""
        self.rig = rig
        self.loop = rig.stack.loop
        self.config = rig.config
        self.model = rig.stack.model
        self.arm = self.model.indices(self.config.arm_joints)
        self.home = dict(zip(self.config.joint_names, self.config.home_positions, strict=True))
        # Ticks per look: 10 ms of the loop either way.
        self.chunk = max(1, round(0.01 / self.config.period))
        self.independent = independent

    # --- helpers ---------------------------------------------------------------------------
    def now(self) -> float:
        return self.rig.stack.hardware.now()

    def tick(self) -> None:
        self.loop.run_ticks(self.chunk)
        if self.loop.fault is not None:
            raise RuntimeError(f"control loop fault: {self.loop.fault}")

    def run_for(self, seconds: float) -> None:
        end = self.now() + seconds
        while self.now() < end:
            self.tick()

    def true_arm(self) -> np.ndarray:
        truth = self.rig.true_positions()
        return np.array([truth[n] for n in self.config.arm_joints])

    def measured_arm(self) -> np.ndarray:
        snapshot = self.loop.snapshot()
        assert snapshot is not None
        return snapshot.position[self.arm]

    def arm_speed(self) -> float:
        snapshot = self.loop.snapshot()
        assert snapshot is not None
        return float(np.abs(snapshot.velocity[self.arm]).max())

    def goal(self, **offsets: float) -> dict[str, float]:
        """The home pose with ``offsets`` [rad | m] added, arm joints by name."""
        return {n: self.home[n] + offsets.get(n, 0.0) for n in self.config.arm_joints}

    def step(self, name: str, size: float, sign: float = 1.0) -> float:
        """A step [rad | m] of joint ``name`` from home: ``size`` [rad] (a prismatic joint:
        ``size`` × PRISMATIC_STEP [m]) in the direction ``sign``, or the other way where the
        limits (less LIMIT_MARGIN of the range) leave less room that way; at most the room
        there is."""
        index = self.model.q_index(name)
        lower, upper = self.model.limits.lower[index], self.model.limits.upper[index]
        prismatic = self.model.model.joints[self.model.model.getJointId(name)].shortname()
        length = size * (PRISMATIC_STEP if prismatic.startswith("JointModelP") else 1.0)
        margin = LIMIT_MARGIN * (upper - lower) if np.isfinite(upper - lower) else 0.0
        room = {1.0: upper - margin - self.home[name], -1.0: self.home[name] - lower - margin}
        direction = sign if room[sign] >= length or room[sign] >= room[-sign] else -sign
        return direction * min(length, room[direction])

    def move(self, goal: dict[str, float], duration: float = 0.0) -> int:
        return self.loop.request_motion(list(goal), list(goal.values()), duration)

    def wait_reached(self, motion: int, goal: dict[str, float], limit: float) -> float | None:
        """Tick until ``motion`` succeeded and the measured arm is within GOAL_TOLERANCE of
        ``goal`` (at most SETTLE_TIMEOUT after the trajectory's end, ``limit`` [s] in all); the
        hardware time then, or None."""
        target = np.array(list(goal.values()))
        start, ended = self.now(), None
        while self.now() - start < limit:
            self.tick()
            status = self.loop.motion_status(motion)
            if status is None or status.state == RUNNING:
                continue
            if status.state != SUCCEEDED:
                return None
            ended = ended if ended is not None else self.now()
            if np.abs(self.measured_arm() - target).max() <= GOAL_TOLERANCE:
                return self.now()
            if self.now() - ended > SETTLE_TIMEOUT:
                return None
        return None

    def back_home(self) -> None:
        """Home and at rest, for the next scenario."""
        goal = self.goal()
        motion = self.move(goal)
        if self.wait_reached(motion, goal, 20.0) is None:
            status = self.loop.motion_status(motion)
            error = np.abs(self.measured_arm() - np.array(list(goal.values()))).max()
            raise RuntimeError(
                f"could not return home (motion {status.state if status else 'not started'}, "
                f"error {error:.4f} rad)"
            )
        self.run_for(0.2)

    # --- scenarios -------------------------------------------------------------------------
    def joint_motion(self) -> tuple[bool, float | None, str, float, str]:
        first, fourth = self.config.arm_joints[0], self.config.arm_joints[:4][-1]
        goal = self.goal(**{first: self.step(first, 0.3), fourth: self.step(fourth, 0.3)})
        start = self.now()
        reached = self.wait_reached(self.move(goal), goal, 20.0)
        error = float(np.abs(self.true_arm() - np.array(list(goal.values()))).max())
        seconds = (reached if reached is not None else self.now()) - start
        ok = reached is not None and error <= GOAL_TOLERANCE
        return ok, error, "rad", seconds, "reached" if ok else "not reached"

    def cartesian(self) -> tuple[bool, float | None, str, float, str]:
        snapshot = self.loop.snapshot()
        assert snapshot is not None
        model = self.model.with_own_data()
        target = reachable_offset_target(model, self.config.arm_joints, snapshot.position)
        chain = tcp_target_chain(
            model,
            self.rig.stack.controller,
            self.config.arm_joints,
            self.config.cartesian_divisor,
            target,
        )
        self.loop.switch_controller(chain)
        start, within, errors = self.now(), 0.0, (math.inf, math.inf)
        try:
            while self.now() - start < CARTESIAN_TIMEOUT and within < 0.3:
                before = self.now()
                self.tick()
                snapshot = self.loop.snapshot()
                assert snapshot is not None
                errors = chain.errors(snapshot.position)
                inside = errors[0] <= POSITION_TOLERANCE and errors[1] <= ORIENTATION_TOLERANCE
                within = within + (self.now() - before) if inside else 0.0
            seconds = self.now() - start
            truth = self.rig.true_positions()
            q = np.zeros(model.nq)
            for name, value in truth.items():
                q[model.q_index(name)] = value
            error = float(np.linalg.norm(self.independent.frame_pose(q)[:3, 3] - target[:3, 3]))
        finally:
            self.loop.hold()
            self.loop.switch_controller(self.rig.stack.controller)
            self.run_for(0.3)
        ok = within >= 0.3 and error <= POSITION_TOLERANCE
        message = (
            f"reached (chain {errors[0] * 1e3:.2f} mm, {errors[1]:.4f} rad)"
            if ok
            else f"not reached (chain {errors[0] * 1e3:.2f} mm, {errors[1]:.4f} rad)"
        )
        return ok, error, "m", seconds, message

    def grasp(self) -> tuple[bool, float | None, str, float, str]:
        stack = self.rig.stack
        if not self.config.gripper_joints:  # the Grasp action refuses it (INVALID_GOAL)
            return True, None, "N", 0.0, "refused as designed: the robot has no gripper"
        refusal = grip_force_refusal(stack.hardware, self.config.gripper_joints, GRASP_EFFORT)
        if refusal is not None:
            return True, None, "N", 0.0, f"refused as designed (INVALID_GOAL): {refusal}"
        plant_object = self.rig.plant is not None
        if plant_object:
            self.rig.place_object(OBJECT_WIDTH)
        runner = build_grasp_runner(stack, stack.controllers[self.config.default_controller])
        # The cube where the robot's scene puts it (MuJoCo's; the plants' is between the
        # fingers wherever they are), the grasp pose from that scene (grip offset, height:
        # in MuJoCo, high enough for the fingers' reach past the TCP to clear the table).
        scene = robot_scene(self.config)
        inner = self.rig.injector.inner
        sensor = inner.object_sensor() if isinstance(inner, MujocoSystem) else None
        if isinstance(inner, MujocoSystem) and isinstance(sensor, ObjectSensor):
            scene = fingertip_scene(self.config, inner, sensor)
        # The approach offset and lift height the arm reaches over its table (the grasp bench's
        # placement, bench/grasp_reach.py: the SO-101 reaches 6 cm above its grasps, not the
        # goal's default 8; every approach timed out), the cube at the scene's start where that
        # lies in the placement region, else at the region's centre.
        reach = robot_reach(placement_config(self.config))
        x, y = scene.cube_start
        if not (reach.x[0] <= x <= reach.x[1] and reach.y[0] <= y <= reach.y[1]):
            x, y = 0.5 * (reach.x[0] + reach.x[1]), 0.5 * (reach.y[0] + reach.y[1])
            if isinstance(inner, MujocoSystem):
                place_object(inner, CUBE_BODY, cube_pose(x, y, 0.0, scene))
        goal = reach.goal(top_down_grasp(x, y, 0.0, scene), grasp_effort=GRASP_EFFORT)
        runner.task.start(goal)
        self.loop.switch_controller(runner)
        start = self.now()
        held: list[float] = []
        sampled = -math.inf  # [s] when the contact forces were last read (every 50 ms)
        try:
            while self.now() - start < GRASP_TIMEOUT and not runner.task.finished:
                self.tick()
                task = runner.task
                holding = task.phase is Phase.HOLD and task.stage == "hold"
                if holding and self.now() - sampled >= 0.05:
                    sampled = self.now()
                    forces = self.rig.contact_forces()
                    if forces:
                        held.append(max(abs(f - GRASP_EFFORT) for f in forces.values()))
            seconds = self.now() - start
        finally:
            self.loop.hold()
            self.loop.switch_controller(stack.controller)
            if plant_object:
                self.rig.place_object(None)
            self.run_for(0.3)
        task = runner.task
        error = max(held) if held else None
        if task.phase is Phase.DONE:
            force = "" if error is None else f", grip force within {error:.2f} N of the goal"
            return True, error, "N", seconds, f"DONE ({', '.join(task.checks)}){force}"
        failure = task.failure
        why = f"{failure.source.value}: {failure.reason}" if failure else task.phase.value
        return False, error, "N", seconds, f"{task.phase.value}: {why}"

    def _interrupted(self, interrupt: Callable[[int], int | None]) -> tuple[int, int | None, float]:
        """Start a 2 s motion of the first arm joint (+0.4 rad), let ``interrupt`` act at 40 % of
        it; (first motion, what interrupt returned, hardware time of the interruption)."""
        first_joint = self.config.arm_joints[0]
        goal = self.goal(**{first_joint: self.step(first_joint, 0.4)})
        first = self.move(goal, 2.0)
        start = self.now()
        while True:
            self.tick()
            status = self.loop.motion_status(first)
            if status is not None and status.progress >= 0.4:
                break
            if self.now() - start > 10.0:
                raise RuntimeError("the motion to interrupt never got to 40 %")
        return first, interrupt(first), self.now()

    def cancel(self) -> tuple[bool, float | None, str, float, str]:
        def hold(_: int) -> None:
            self.loop.hold()
            return None

        first, _, at = self._interrupted(hold)
        rest = None
        while self.now() - at < REST_TIMEOUT:
            self.tick()
            if self.arm_speed() < REST_SPEED:
                rest = self.now()
                break
        status = self.loop.motion_status(first)
        state = status.state if status is not None else "unknown"
        if rest is None:
            message = f"{state}; not at rest within {REST_TIMEOUT:g} s"
            return False, None, "rad", self.now() - at, message
        self.run_for(0.5)
        snapshot = self.loop.snapshot()
        assert snapshot is not None
        held = snapshot.reference_position[self.arm]  # where the stop put the hold
        error = float(np.abs(self.true_arm() - held).max())
        ok = state == CANCELED and error <= GOAL_TOLERANCE
        message = f"{state}, at rest, holding {error * 1e3:.2f} mrad from the stop's end"
        return ok, error, "rad", rest - at, message

    def preempt(self) -> tuple[bool, float | None, str, float, str]:
        first_joint = self.config.arm_joints[0]
        back = -1.0 if self.step(first_joint, 0.4) > 0 else 1.0  # against the first motion
        second_goal = self.goal(**{first_joint: self.step(first_joint, 0.3, back)})
        start = self.now()
        first, second, _ = self._interrupted(lambda _: self.move(second_goal))
        assert second is not None
        reached = self.wait_reached(second, second_goal, 20.0)
        status = self.loop.motion_status(first)
        state = status.state if status is not None else "unknown"
        error = float(np.abs(self.true_arm() - np.array(list(second_goal.values()))).max())
        seconds = (reached if reached is not None else self.now()) - start
        ok = state == PREEMPTED and reached is not None and error <= GOAL_TOLERANCE
        message = f"first {state}, second {'reached' if reached is not None else 'not reached'}"
        return ok, error, "rad", seconds, message


def placement_config(config: StackConfig) -> StackConfig:
    """``config`` on MuJoCo, as the grasp bench's placement map builds it (its IK over the
    robot's MuJoCo grasp scene), whatever backend the rig runs."""
    return dataclasses.replace(config, backend="mujoco")


def run_backend(
    backend: str,
    mode: str,
    scenarios: Sequence[str] = SCENARIOS,
    report: Callable[[Row], None] | None = None,
    config_path: str | None = None,
) -> list[Row]:
    """One rig for ``backend`` in ``mode`` on the robot of ``config_path`` (None: the bundled
    arm), the scenarios in order; a scenario that raises is a failed row (the rig goes on, back
    home, if it can)."""
    config = load_config(config_path)
    description = load_description(config.robot_description or None, mappings={"backend": backend})
    independent = RobotModel(description.urdf, config.tcp_frame, config.base_frame)
    if "grasp" in scenarios and config.gripper_joints:
        # The robot's grasp scene before the rig comes up too (its first build compiles a MuJoCo
        # scene and, for one revolute jaw, analyses the jaws: seconds, which the CANopen rig's
        # 200 ms command timeout did not survive mid-run: quick stop).
        robot_scene(dataclasses.replace(config, backend=backend))
        robot_reach(placement_config(config))  # (the placement map: seconds of IK too)
    # What exists now is frozen out of the garbage collector's full passes (as the control
    # node does after start-up): a full collection of a long bench's heap stalls every thread
    # of the process for tens of ms, longer than a 100 Hz bus's deadlines.
    gc.collect()
    gc.freeze()
    canopen = backend == "canopen"
    rig = make_rig(
        backend, drives_process=canopen, config_path=config_path, **MODES[(backend, mode)]
    )
    scheduling = realtime_thread(rig.config.realtime) if canopen else contextlib.nullcontext()
    try:
        with scheduling:
            rows = _run_scenarios(rig, independent, backend, mode, scenarios, report)
    finally:
        rig.close()
        gc.unfreeze()
    return rows


def _run_scenarios(
    rig: Rig,
    independent: RobotModel,
    backend: str,
    mode: str,
    scenarios: Sequence[str],
    report: Callable[[Row], None] | None,
) -> list[Row]:
    rows: list[Row] = []
    bench = Scenarios(rig, independent)
    bench.run_for(0.2)
    for name in scenarios:
        start = bench.now()
        try:
            ok, error, unit, seconds, message = getattr(bench, name)()
        except Exception as exc:  # one scenario's failure is its row, not the bench's end
            ok, error, unit, seconds = False, None, "", bench.now() - start
            message = f"{type(exc).__name__}: {exc}"
        row = Row(backend, mode, name, ok, error, unit, round(seconds, 3), message)
        rows.append(row)
        if report is not None:
            report(row)
        if rig.stack.loop.fault is not None:
            break  # the rest would only report the same fault
        try:
            bench.back_home()
        except Exception as exc:  # the rows so far stand; the rest would not start home
            for rest in scenarios[scenarios.index(name) + 1 :]:
                row = Row(backend, mode, rest, False, None, "", 0.0, f"not run: {exc}")
                rows.append(row)
                if report is not None:
                    report(row)
            break
    return rows


@contextlib.contextmanager
def realtime_thread(settings: RealtimeSettings) -> Iterator[None]:
    """This thread scheduled as the loop's own thread would be (``realtime.*``; memory is not
    locked here), restored afterwards."""
    policy, parameters = os.sched_getscheduler(0), os.sched_getparam(0)
    cpus = os.sched_getaffinity(0)
    try:
        apply_to_current_thread(replace(settings, lock_memory=False))
        yield
    finally:
        os.sched_setscheduler(0, policy, parameters)
        os.sched_setaffinity(0, cpus)


def run_backends(
    chosen: Sequence[tuple[str, str]],
    scenarios: Sequence[str] = SCENARIOS,
    report: Callable[[Row], None] | None = None,
    workers: int = 1,
    config_path: str | None = None,
) -> list[Row]:
    """:func:`run_backend` for each (backend, mode) in ``chosen`` (the robot of
    ``config_path``; None: the bundled arm); the rows in that order.
    ``workers`` > 1: the lockstep rigs (LOCKSTEP_BACKENDS) run first, in up to ``workers``
    spawned processes at once (rows reported when all are done), then the paced rigs one at a
    time in this process, alone on the machine as far as this bench goes."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    lockstep = [m for m in chosen if m[0] in LOCKSTEP_BACKENDS] if workers > 1 else []
    done: dict[tuple[str, str], Future[list[Row]]] = {}
    if lockstep:
        with worker_pool(min(workers, len(lockstep))) as pool:
            for backend, mode in lockstep:
                done[(backend, mode)] = pool.submit(
                    run_backend, backend, mode, scenarios, None, config_path
                )
            wait(list(done.values()))
    rows: list[Row] = []
    for backend, mode in chosen:
        if (backend, mode) not in done:
            rows += run_backend(backend, mode, scenarios, report, config_path)
            continue
        for row in done[(backend, mode)].result():
            rows.append(row)
            if report is not None:
                report(row)
    return rows


def format_row(row: Row) -> str:
    error = "—" if row.final_error is None else f"{row.final_error:.4g} {row.unit}"
    return (
        f"{row.backend:20s} {row.mode:8s} {row.scenario:12s} {'ok' if row.ok else 'FAIL':4s} "
        f"{error:>14s} {row.seconds:7.2f} s  {row.message}"
    )


def plot_rows(path: str, rows: Sequence[Row]) -> None:
    """The rows as a grid (backend/mode × scenario), each cell green (ok) or red with its final
    error and time, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(dict.fromkeys((r.backend, r.mode) for r in rows))
    scenarios = list(dict.fromkeys(r.scenario for r in rows))
    figure, axes = plt.subplots(figsize=(2.0 + 2.2 * len(scenarios), 0.9 + 0.7 * len(modes)))
    for row in rows:
        x, y = scenarios.index(row.scenario), modes.index((row.backend, row.mode))
        color = "#b7e4b0" if row.ok else "#f4a6a6"
        axes.add_patch(plt.Rectangle((x, y), 1, 1, facecolor=color, edgecolor="white"))
        if row.final_error is None:
            error = "refused" if row.message.startswith("refused") else row.message[:22]
        else:
            error = f"{row.final_error:.3g} {row.unit}"
        axes.text(x + 0.5, y + 0.5, f"{error}\n{row.seconds:.2f} s", ha="center", va="center")
    axes.set_xlim(0, len(scenarios))
    axes.set_ylim(len(modes), 0)
    axes.set_xticks([i + 0.5 for i in range(len(scenarios))], scenarios)
    axes.set_yticks([i + 0.5 for i in range(len(modes))], [f"{b}\n{m}" for b, m in modes])
    axes.tick_params(length=0)
    axes.set_title("ct-bench backends: final error (plant's own) and time per scenario")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ct-bench backends",
        description="joint motion, Cartesian target, grasp, cancel and preempt on every "
        "backend and command interface",
    )
    modes = [f"{backend}:{mode}" for backend, mode in MODES]
    parser.add_argument(
        "--modes",
        default=",".join(modes),
        help=f"comma-separated backend:mode pairs (default all: {', '.join(modes)})",
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated, in this order (default all: {', '.join(SCENARIOS)})",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="run the MuJoCo (lockstep) rigs in up to N processes at once, same rows as in one "
        "(default 1: every rig in this process); the bridge and CANopen rigs always run one at "
        "a time in this process: they are paced against wall-clock deadlines that concurrent "
        "work on the machine would make them miss",
    )
    parser.add_argument("--config", metavar="FILE", help="the robot's controllers.yaml")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--plot", metavar="FILE.png", help="also save the rows as a grid")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    chosen = [tuple(m.split(":", 1)) for m in args.modes.split(",") if m]
    unknown = [":".join(m) for m in chosen if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)} (known: {', '.join(modes)})")
    scenarios = [s for s in SCENARIOS if s in args.scenarios.split(",")]
    wrong = sorted(set(args.scenarios.split(",")) - set(SCENARIOS))
    if wrong:
        parser.error(f"unknown scenario(s) {', '.join(wrong)} (known: {', '.join(SCENARIOS)})")
    out = sys.stderr if args.json else sys.stdout  # progress, row by row

    def report(row: Row) -> None:
        print(format_row(row), file=out, flush=True)

    wall = time.perf_counter()
    rows = run_backends(chosen, scenarios, report, args.workers, args.config)
    wall = time.perf_counter() - wall
    if args.plot:
        plot_rows(args.plot, rows)
    if args.json:
        print(json.dumps({"results": [asdict(r) for r in rows]}))
    else:
        print(
            f"{sum(r.ok for r in rows)}/{len(rows)} rows ok; workers {args.workers}, "
            f"wall {wall:.1f} s"
        )
    return 0 if all(r.ok for r in rows) else 1
