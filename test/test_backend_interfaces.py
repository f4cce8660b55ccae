"""Every backend, every interface (issue 15, items 1 and 2), on the project's own rigs: MuJoCo
(lockstep, effort and position), the ros2_control bridge against its plant process over loopback
DDS (effort and position) and CANopen CiA 402 against simulated drives on a virtual bus (torque
and position); the real backends at 100 Hz with the slow-loop gains of ``sim/gains.py``.

- A chain's joint reference reaches position-interface joints: a Cartesian target 5 cm away is
  reached through the chain factory's chain (what MoveToPose runs) on every backend and mode,
  checked on the plant's true joint positions.
- The measured effort reaches ``JointState`` — what the controllers, chains and the grasp task
  get — and the loop's snapshots, in model order, under the sample's stamp; the grasp task
  judges its stall by it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from backends import MODES as RIG_MODES
from backends import Rig, make_rig
from helpers import new_robot_model

from ct_controllers.bench.grasp import run_trial
from ct_controllers.chains.tcp_chain_factory import tcp_target_chain
from ct_controllers.config import load_config
from ct_controllers.controllers.controller import (
    Controller,
    ControlOutput,
    JointReference,
    JointState,
)
from ct_controllers.hardware.canopen.system import CanopenCia402System
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.spline_trajectory import Waypoint
from ct_controllers.runtime.trajectory_motion import ToleranceArrays, TrajectoryPlan

pytestmark = pytest.mark.realtime  # plant rigs in this process (pyproject.toml)

# (backend, mode, configuration overrides): every backend and interface of the rigs.
MODES: list[tuple[str, str, dict[str, Any]]] = [(b, m, o) for (b, m), o in RIG_MODES.items()]
OFFSET = np.array([0.03, -0.03, 0.0287])  # [m] base frame: the target, 5.0 cm from the TCP
POSITION_TOLERANCE = 0.003  # [m]
ORIENTATION_TOLERANCE = 0.01  # [rad]


@pytest.fixture(scope="module", params=MODES, ids=[f"{b}-{m}" for b, m, _ in MODES])
def rig(request: pytest.FixtureRequest, frozen_module_heap: None) -> Iterator[Rig]:
    """One rig per backend and mode for the module; each test leaves it holding, healthy.
    Real-time deadlines of 100-200 ms against threads of this process: the heap is frozen before
    the first rig (conftest.frozen_module_heap)."""
    backend, mode, overrides = request.param
    rig = make_rig(backend, **overrides)
    rig.extra["mode"] = mode
    try:
        yield rig
    finally:
        rig.close()


def run(rig: Rig, seconds: float) -> None:
    rig.stack.loop.run_ticks(max(1, round(seconds / rig.config.period)))


def inner(rig: Rig) -> Any:
    return rig.injector.inner


def plant_efforts(rig: Rig) -> dict[str, float]:
    """Joint → the effort [N·m | N] the plant's motors apply now, as the plant itself knows it
    (MuJoCo's qfrc_actuator, the bridge plant's motor efforts, the simulated drives' torque)."""
    if rig.backend == "mujoco":
        system = inner(rig)
        assert isinstance(system, MujocoSystem)
        assert system.model is not None and system.data is not None
        return {
            n: float(system.data.qfrc_actuator[system.model.joint(n).dofadr[0]])
            for n in system.joint_names
        }
    if rig.backend == "ros2_control_bridge":
        return dict(rig.plant.report()["effort"])
    return {drive.joint: float(drive.applied_effort) for drive in rig.plant.drives}


def effort_quantum(rig: Rig, name: str) -> float:
    """[N·m | N] the resolution of the measured effort: CANopen's torque actual is in per-mille
    of the rated torque; the others are floating point."""
    if rig.backend != "canopen":
        return 0.0
    system = inner(rig)
    assert isinstance(system, CanopenCia402System)
    scaling = {d.joint: d.scaling for d in system.drives}[name]
    return float(scaling.rated_effort) / 1000.0


class Recording(Controller):
    """The stack's own joint controller, recording every state it is given and, on MuJoCo,
    the simulator's actuator force at that instant (lockstep: nothing moves between the read and
    the controller)."""

    def __init__(self, inner: Controller, rig: Rig) -> None:
        super().__init__()
        self.inner = inner
        self.rig = rig
        self.states: list[JointState] = []
        self.plant: list[dict[str, float]] = []

    def compute(self, state: JointState, reference: JointReference, dt: float) -> Any:
        return self.compute_output(state, reference, dt).effort

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        self.states.append(state)
        if self.rig.backend == "mujoco":
            self.plant.append(plant_efforts(self.rig))
        return self.inner.step(state, reference, dt)


def test_a_cartesian_target_5_cm_away_is_reached(rig: Rig) -> None:
    """A TCP target 5 cm from the TCP, orientation kept, run through the factory's chain (QP
    differential IK → the stack's joint controller, as MoveToPose builds it) is reached on every
    backend and interface within 6 s: the chain's error stays ≤ 3 mm and 0.01 rad for 0.3 s,
    and the plant's true joint positions then put the TCP within 3 mm of the target (an
    independent model's FK). Position joints move because the loop sends them the chain's
    reference (before: they got the loop's hold reference, and the arm never moved)."""
    loop, config = rig.stack.loop, rig.config
    expected = {"effort": "effort", "torque": "effort", "position": "position"}[rig.extra["mode"]]
    assert set(rig.stack.hardware.command_interfaces) == {expected}
    run(rig, 0.1)
    snapshot = loop.snapshot()
    assert snapshot is not None
    model = RobotModel(rig.stack.model.model, config.tcp_frame, config.base_frame)
    target = model.frame_pose(snapshot.position).copy()
    target[:3, 3] += OFFSET
    chain = tcp_target_chain(
        model, rig.stack.controller, config.arm_joints, config.cartesian_divisor, target
    )
    loop.switch_controller(chain)
    errors = (np.inf, np.inf)
    within = 0.0  # [s] for how long the errors have been within tolerance
    try:
        for _ in range(round(6.0 / config.period / 10)):  # 10 ticks at a time, 6 s at most
            loop.run_ticks(10)
            snapshot = loop.snapshot()
            assert snapshot is not None and snapshot.fault is None, snapshot
            errors = chain.errors(snapshot.position)
            ok = errors[0] <= POSITION_TOLERANCE and errors[1] <= ORIENTATION_TOLERANCE
            within = within + 10 * config.period if ok else 0.0
            if within >= 0.3:  # settled there, not passing through
                break
        truth = rig.true_positions()  # the plant's own, not the state path
        independent = new_robot_model()
        q = np.zeros(independent.nq)
        for name, value in truth.items():
            q[independent.q_index(name)] = value
        true_error = float(np.linalg.norm(independent.frame_pose(q)[:3, 3] - target[:3, 3]))
        rig.extra["cartesian"] = (errors, true_error)
        print(f"{rig.backend}/{rig.extra['mode']}: chain {errors}, plant TCP {true_error:.2e} m")
        assert within >= 0.3, errors
        assert true_error <= POSITION_TOLERANCE
    finally:
        loop.hold()
        loop.switch_controller(rig.stack.controller)
        run(rig, 0.3)
    assert loop.fault is None


def test_measured_effort_reaches_the_joint_state(rig: Rig) -> None:
    """Holding still, every JointState a controller gets carries the measured effort in model
    order, equal to the plant's own effort by joint name (MuJoCo: exactly, qfrc_actuator at that
    instant; bridge plant and drives: within 0.3 N·m plus CANopen's per-mille resolution, as
    they are read a few ms apart) and about g(q) of an independent model (the arm holds still
    against gravity: joint2 carries −34 N·m, joint4 +17 N·m); the loop's snapshot of the same
    tick carries the same effort under the same stamp."""
    loop = rig.stack.loop
    recording = Recording(rig.stack.controller, rig)
    loop.switch_controller(recording)
    loop.snapshot_decimation = 1
    try:
        run(rig, 0.5)
        recording.states.clear()
        recording.plant.clear()
        run(rig, 0.1)
        own = plant_efforts(rig)
        snapshot = loop.snapshot()
    finally:
        loop.switch_controller(rig.stack.controller)
        loop.snapshot_decimation = 10
    assert snapshot is not None
    state = recording.states[-1]
    assert state.effort is not None
    names = loop.model.joint_names
    measured = dict(zip(names, state.effort.tolist(), strict=True))
    # Consumers downstream: the snapshot of that tick.
    assert snapshot.stamp == state.stamp
    np.testing.assert_array_equal(snapshot.measured_effort, state.effort)
    if rig.backend == "mujoco":  # the simulator at the instant of each state, exactly
        for recorded, plant in zip(recording.states, recording.plant, strict=True):
            assert recorded.effort is not None
            for name, value in zip(names, recorded.effort, strict=True):
                assert value == plant[name], name
    for name in names:
        tolerance = 0.3 + effort_quantum(rig, name)
        assert abs(measured[name] - own[name]) <= tolerance, (name, measured[name], own[name])
    gravity = new_robot_model().gravity(state.q)
    for name, value in zip(names, gravity, strict=True):
        assert abs(measured[name] - value) <= 1.0 + effort_quantum(rig, name), name
    assert measured["joint2"] < -30.0 and measured["joint4"] > 15.0
    rig.extra["effort"] = {n: (measured[n], own[n]) for n in ("joint2", "joint4")}
    print(f"{rig.backend}/{rig.extra['mode']}: effort (JointState, plant) {rig.extra['effort']}")


def moveit_shaped_plan(
    model: RobotModel, start: np.ndarray, offsets: dict[str, float], duration: float
) -> TrajectoryPlan:
    """What MoveIt's time parameterization sends, as a plan: the arm's joints from ``start``
    (the first point, at t = 0) to ``start + offsets`` along a quintic in time sampled at 25
    points with positions, velocities and accelerations; JTC's default tolerances of the
    bundled entry (path 0.2 rad, goal 0.01 rad and 0.01 rad/s) and 2 s of goal time."""
    joints = tuple(f"joint{i}" for i in range(1, 8))
    indices = np.array(model.indices(list(joints)))
    delta = np.array([offsets.get(j, 0.0) for j in joints])
    q0 = start[indices]
    waypoints = []
    for t in np.linspace(0.0, duration, 25):
        s = t / duration
        shape = 10 * s**3 - 15 * s**4 + 6 * s**5
        rate = (30 * s**2 - 60 * s**3 + 30 * s**4) / duration
        curvature = (60 * s - 180 * s**2 + 120 * s**3) / duration**2
        waypoints.append(Waypoint(float(t), q0 + delta * shape, delta * rate, delta * curvature))
    n = len(joints)
    return TrajectoryPlan(
        joints,
        indices,
        tuple(waypoints),
        0.0,
        "splines",
        ToleranceArrays(np.full(n, 0.2), np.zeros(n)),
        ToleranceArrays(np.full(n, 0.01), np.full(n, 0.01)),
        2.0,
    )


def test_a_moveit_shaped_trajectory_ends_at_its_goal(rig: Rig) -> None:
    """A FollowJointTrajectory goal as MoveIt sends it (the start state at t = 0, quintic
    points, 1.5 s), as the loop follows it: it succeeds — every joint within 0.01 rad of the
    last point and slower than 0.01 rad/s, judged on the measured state — within the 2 s of
    goal time on every backend and interface, and the plant's own positions are there too."""
    loop = rig.stack.loop
    run(rig, 0.1)
    snapshot = loop.snapshot()
    assert snapshot is not None
    offsets = {"joint1": 0.25, "joint2": -0.1, "joint4": 0.2, "joint6": -0.15}
    plan = moveit_shaped_plan(loop.model, snapshot.position, offsets, 1.5)
    motion = loop.request_trajectory(plan)
    status = None
    for _ in range(40):
        run(rig, 0.1)
        status = loop.motion_status(motion)
        assert loop.fault is None, loop.fault
        if status is not None and status.state != "running":
            break
    assert status is not None and status.state == "succeeded", status
    true = rig.true_positions()
    goal = plan.waypoints[-1].positions
    for name, value in zip(plan.joint_names, goal, strict=True):
        assert abs(true[name] - value) < 0.012, (name, true[name], value)


def test_the_grasp_task_judges_the_stall_by_the_measured_finger_effort() -> None:
    """MuJoCo without the object sensor (the task sees the joint state only): the measured
    finger efforts reach the grasp task's observation, so CLOSE ends on a stall judged by them
    (check ``finger_stall_effort``, |effort| ≥ 0.8 grasp_effort on both fingers) and the grasp
    reaches DONE. (Before, the loop's JointState had no effort and the task saw none.)"""
    config = load_config(overrides={"mujoco.mode": "lockstep"})
    result, setup = run_trial(config, 0, (0.52, -0.05, math.radians(20)), sensing="joints")
    assert result.success, result.reason
    assert "finger_stall_effort" in setup.task.checks
