"""ct_controllers.chains.grasp_runner on the real stack in MuJoCo (lockstep): phase machine →
differential IK → computed torque + gripper servo → limiter → MuJoCo, with failures injected in
the simulated world. Each failure must end FAILED with the right phase and reason and the arm in
safe hold."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from helpers import new_robot_model

from ct_controllers.bench.grasp import (
    UNREACHABLE,
    GraspSetup,
    grasp_setup,
    run_trial,
    top_down_grasp,
)
from ct_controllers.chains.grasp_goal import unreachable_pose
from ct_controllers.chains.grasp_runner import ObjectReading
from ct_controllers.chains.pose_goal import goal_ik
from ct_controllers.config import load_config
from ct_controllers.hardware.mujoco_objects import ObjectSensor, place_object
from ct_controllers.runtime.stack import to_model_order
from ct_controllers.tasks.phases import GraspGoal, Phase

CONFIG = load_config(overrides={"mujoco.mode": "lockstep"})
CUBE = (0.52, -0.05, math.radians(20))


def _run(
    setup: GraspSetup, seconds: float, event: Callable[[GraspSetup], None] | None = None
) -> None:
    loop = setup.stack.loop
    for _ in range(round(seconds / CONFIG.period / 10)):
        loop.run_ticks(10)
        if event is not None:
            event(setup)
        if setup.task.finished:
            break


def _assert_safe_hold(setup: GraspSetup) -> None:
    """The loop now writes g(q) − D v from the measured state (an independent model) to the
    arm; the fingers are held by their servo (K = 2000 N/m, D = 20 N·s/m) on a reference
    inside their range — clip(K (r − q) − D v + g, ±grasp_effort) with r the held reference —
    so that a finger closing on nothing is stopped, not left to coast past its limit."""
    loop = setup.stack.loop
    loop.snapshot_decimation = 1
    reference = new_robot_model()
    damping = to_model_order(
        reference, CONFIG.joint_names, CONFIG.safe_hold_damping, "safe_hold.damping"
    )
    fingers = reference.indices(CONFIG.gripper_joints)
    arm = reference.indices(CONFIG.arm_joints)
    goal = setup.task.goal
    assert goal is not None
    for _ in range(20):
        loop.run_ticks(1)
        snapshot = loop.snapshot()
        assert snapshot is not None
        q, v = snapshot.position, snapshot.velocity
        gravity = reference.gravity(q)
        expected = gravity - damping * v
        np.testing.assert_allclose(snapshot.commanded_effort[arm], expected[arm], atol=1e-6)
        r = snapshot.reference_position[fingers]
        assert (r >= reference.limits.lower[fingers]).all()
        assert (r <= reference.limits.upper[fingers]).all()
        servo = 2000.0 * (r - q[fingers]) - 20.0 * v[fingers] + gravity[fingers]
        bound = goal.grasp_effort
        np.testing.assert_allclose(
            snapshot.commanded_effort[fingers], np.clip(servo, -bound, bound), atol=1e-6
        )


@pytest.mark.parametrize("cartesian_rate", [0.0, 250.0])
def test_a_pick_and_place_succeeds_through_the_whole_stack(cartesian_rate: float) -> None:
    """The cube is picked, lifted at least 8 cm, held, put back within 2 cm of where it was (it
    shifts about 1 cm in the fingers as it is lifted) and
    released: DONE in under 10 s of sim time, every phase in order. The same with the task and
    the differential IK at 250 Hz under the 1 kHz joint loop, where the task observes (and
    records) on every 4th tick only."""
    config = load_config(
        overrides={"mujoco.mode": "lockstep", "cartesian.update_rate": cartesian_rate}
    )
    result, setup = run_trial(config, 0, CUBE, record=True)
    ticks = setup.stack.loop.timing.ticks
    divisor = config.cartesian_divisor
    assert len(setup.runner.records or []) in range(ticks // divisor - 2, ticks // divisor + 2)
    assert result.success, result.reason
    assert result.sim_time < 10.0
    assert [t.target for t in setup.task.transitions] == [
        Phase.CLOSE,
        Phase.HOLD,
        Phase.RELEASE,
        Phase.DONE,
    ]
    records = setup.runner.records or []
    heights = [r.object_height for r in records]
    assert max(heights) - heights[0] > 0.08
    final = np.array(records[-1].object_position)
    assert np.linalg.norm(final[:2] - np.array(CUBE[:2])) < 0.02


def test_an_unreachable_cube_fails_in_approach_and_holds() -> None:
    """A cube far beyond the arm's reach: FAILED in APPROACH (timeout), then safe hold."""
    setup = grasp_setup(CONFIG, (0.55, 0.0, 0.0))
    try:
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(1.8, 0.0, 0.0)))
        _run(setup, 8.0)
        assert setup.task.phase == Phase.FAILED and setup.task.failure is not None
        assert setup.task.failure.source == Phase.APPROACH
        assert "timed out" in setup.task.failure.reason
        _assert_safe_hold(setup)
    finally:
        setup.stack.shut_down()


def test_the_bench_reports_a_goal_the_action_refuses_as_unreachable() -> None:
    """A bench trial whose grasp pose has no IK solution (a cube 1.8 m out) ends UNREACHABLE,
    with the reason the Grasp action's goal check gives, at sim time 0: nothing moved; a
    reachable one gets past the check (the same check on its poses says nothing)."""
    far = (1.8, 0.0, 0.0)
    result, setup = run_trial(CONFIG, 0, far, goal=GraspGoal(grasp_pose=top_down_grasp(*far)))
    assert not result.success and result.final_phase == UNREACHABLE
    assert result.reason.startswith("grasp_pose: no IK solution within the joint limits")
    assert result.sim_time == 0.0 and result.phase_durations == {}
    assert setup.task.phase == Phase.APPROACH and not setup.task.transitions
    near = GraspGoal(grasp_pose=top_down_grasp(*CUBE))
    home = to_model_order(
        setup.stack.model, CONFIG.joint_names, CONFIG.home_positions, "home_positions"
    )
    assert unreachable_pose(goal_ik(setup.stack), near, home) is None


def test_a_cube_removed_before_closing_fails_in_close() -> None:
    """The cube taken away as the fingers start to close: FAILED in CLOSE, fingers closed on
    nothing, then safe hold."""
    setup = grasp_setup(CONFIG, CUBE)

    def remove(setup: GraspSetup) -> None:
        if setup.task.phase == Phase.CLOSE:
            pose = np.eye(4)
            pose[:3, 3] = [0.9, 0.4, 0.025]
            place_object(setup.stack.hardware, "cube", pose)  # type: ignore[arg-type]

    try:
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*CUBE)))
        _run(setup, 6.0, remove)
        failure = setup.task.failure
        assert failure is not None and failure.source == Phase.CLOSE
        assert "closed on nothing" in failure.reason
        _assert_safe_hold(setup)
    finally:
        setup.stack.shut_down()


def test_a_cube_knocked_out_during_hold_fails_with_slip() -> None:
    """The cube knocked out of the grasp while held in the air: FAILED in HOLD, slipped."""
    setup = grasp_setup(CONFIG, CUBE)

    def knock(setup: GraspSetup) -> None:
        if setup.task.phase == Phase.HOLD and setup.task.stage == "hold":
            pose = np.eye(4)
            pose[:3, 3] = [0.3, 0.3, 0.025]
            place_object(setup.stack.hardware, "cube", pose)  # type: ignore[arg-type]

    try:
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*CUBE)))
        _run(setup, 8.0, knock)
        failure = setup.task.failure
        assert failure is not None and failure.source == Phase.HOLD
        assert "slipped" in failure.reason and failure.values["slip"] > 0.03
        _assert_safe_hold(setup)
    finally:
        setup.stack.shut_down()


def test_stopped_observations_fail_on_staleness() -> None:
    """The object sensor stops updating during HOLD (its stamp freezes): FAILED from HOLD on
    stale observations, then safe hold."""
    frozen: list[ObjectReading] = []

    def sense(sensor: ObjectSensor) -> ObjectReading:
        if frozen:
            return frozen[0]
        observation = sensor.observe()
        return ObjectReading(observation.stamp, observation.pose, observation.contact_forces)

    setup = grasp_setup(CONFIG, CUBE, sense=sense)

    def stop(setup: GraspSetup) -> None:
        if setup.task.phase == Phase.HOLD and not frozen:
            observation = setup.sensor.observe()
            frozen.append(
                ObjectReading(observation.stamp, observation.pose, observation.contact_forces)
            )

    try:
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*CUBE)))
        _run(setup, 8.0, stop)
        failure = setup.task.failure
        assert failure is not None and failure.source == Phase.HOLD
        assert "stale" in failure.reason
        _assert_safe_hold(setup)
    finally:
        setup.stack.shut_down()


@pytest.mark.parametrize("phase", [Phase.DONE, Phase.FAILED])
def test_reset_after_the_end_returns_a_clean_approach(phase: Phase) -> None:
    """After DONE or FAILED, reset() gives an APPROACH with no leftover timers, references or
    transitions, and a new goal runs from the arm's current state."""
    cube = CUBE if phase == Phase.DONE else (0.55, 0.0, 0.0)
    goal = GraspGoal(grasp_pose=top_down_grasp(*(CUBE if phase == Phase.DONE else (1.8, 0, 0))))
    setup = grasp_setup(CONFIG, cube)
    try:
        setup.task.start(goal)
        _run(setup, 10.0)
        assert setup.task.phase == phase
        setup.task.reset()
        assert setup.task.phase == Phase.APPROACH and setup.task.transitions == []
        setup.runner.arm.diff_ik.reset()  # type: ignore[attr-defined]
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(0.5, 0.1, 0.0)))
        _run(setup, 0.5)
        assert setup.task.phase == Phase.APPROACH and setup.task.failure is None
    finally:
        setup.stack.shut_down()


def test_a_runner_switched_into_a_running_loop_is_prepared_and_still_picks() -> None:
    """As a Grasp goal does: the loop runs its default controller, then the started task's
    runner is switched in. The switch prepares it without stepping anything — the task has no
    transition and no timer, the differential IK no q* (the first tick starts from the measured
    state), the runner's target is the task's first — and the pick then succeeds as usual."""
    setup = grasp_setup(CONFIG, CUBE, install=False)
    try:
        loop = setup.stack.loop
        loop.run_ticks(50)
        default = loop.controller
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*CUBE)))
        loop.switch_controller(setup.runner)
        assert loop.controller is default  # prepared here, installed at the next tick
        assert setup.task.transitions == [] and setup.task._phase_start is None
        assert setup.runner.arm.diff_ik.reference_q is None  # type: ignore[attr-defined]
        target = setup.runner._target
        assert target is not None and target is setup.task.target()
        np.testing.assert_array_equal(setup.runner.arm.target, target)
        _run(setup, 10.0)
        assert loop.controller is setup.runner
        assert setup.task.phase == Phase.DONE, setup.task.failure
    finally:
        setup.stack.shut_down()


def test_with_cartesian_impedance_the_arm_takes_the_targets_directly_and_picks() -> None:
    """The grasp runner of a Cartesian impedance arm controller (the chain factory's direct
    chain: no differential IK) switched into the running loop, as a Grasp goal does: the pick
    of the 5 cm cube goes APPROACH → CLOSE → HOLD → RELEASE → DONE in MuJoCo (lockstep), with
    no fault."""
    from ct_controllers.chains.cartesian_controller_chain import CartesianControllerChain
    from ct_controllers.chains.grasp_runner import build_grasp_runner
    from ct_controllers.controllers.cartesian_impedance import CartesianImpedanceController
    from ct_controllers.tasks.phases import GraspTask

    setup = grasp_setup(CONFIG, CUBE, install=False)
    try:
        stack, task = setup.stack, GraspTask()
        law = CartesianImpedanceController(stack.model.with_own_data())
        runner = build_grasp_runner(stack, law, task, sense_object=setup.sensor.observe)
        assert isinstance(runner.arm, CartesianControllerChain) and runner.arm.wrapped is law
        loop = stack.loop
        loop.run_ticks(50)
        task.start(GraspGoal(grasp_pose=top_down_grasp(*CUBE, setup.scene)))
        loop.switch_controller(runner)
        for _ in range(round(10.0 / CONFIG.period / 10)):
            loop.run_ticks(10)
            if task.finished or loop.fault is not None:
                break
        assert loop.fault is None
        assert task.phase == Phase.DONE, task.failure
        assert [t.target for t in task.transitions] == [
            Phase.CLOSE,
            Phase.HOLD,
            Phase.RELEASE,
            Phase.DONE,
        ]
    finally:
        setup.stack.shut_down()
