"""The GripperCommand goal checks and verdict (tasks/gripper_command.py) against independent
computations, and the chained runner a goal installs (chains/gripper_command_runner.py) on the
bundled stack in lockstep MuJoCo."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pinocchio as pin
import pytest

from ct_controllers.chains.gripper_command_runner import (
    build_gripper_runner,
    gripper_limits,
    minimum_effort,
)
from ct_controllers.controllers.controller import JointReference, JointState
from ct_controllers.model.grip_geometry import GripGeometry, gripper_geometry
from ct_controllers.tasks.gripper_command import (
    GripperGoal,
    GripperGoalError,
    GripperLimits,
    StallMonitor,
    checked_goal,
    default_effort,
    finger_targets,
    parallel_command,
)

LIMITS = GripperLimits("left_finger_joint", 0.0, 0.04, 0.2, 40.0)
FINGERS = ("left_finger_joint", "right_finger_joint")


# --- the verdict ------------------------------------------------------------------------------
def expected_outcome(
    t: np.ndarray,
    p: np.ndarray,
    v: np.ndarray,
    target: float,
    start: float,
    tolerance: float,
    threshold: float,
    timeout: float,
) -> tuple[int, str] | None:
    """The reference's check_for_success over all samples at once: (index of the sample that
    ends the goal, "reached" | "stalled"), or None. The last movement before sample i is the
    latest stamp up to i whose |v| exceeds the threshold (the start when none)."""
    reached = np.abs(target - p) < tolerance
    moving = np.abs(v) > threshold
    last_movement = np.maximum.accumulate(np.where(moving, t, start))
    stalled = ~moving & (t - last_movement > timeout)
    ends = np.flatnonzero(reached | stalled)
    if ends.size == 0:
        return None
    i = int(ends[0])
    return i, "reached" if reached[i] else "stalled"


def test_the_verdict_is_the_references_check_over_random_samples() -> None:
    """Over 300 random sample sequences (irregular stamps, a finger that moves, pauses and
    creeps, random tolerances, thresholds and timeouts), the monitor ends the goal on the same
    sample and with the same outcome as the vectorised reference check, SUCCEEDED for a
    reached goal and for a stall exactly when stalling is allowed."""
    rng = np.random.default_rng(25)
    checked = {"reached": 0, "stalled": 0, None: 0}
    for case in range(300):
        n = 200
        t = np.cumsum(rng.uniform(0.01, 0.08, n)) + 3.0
        v = rng.choice([0.0, 1e-4, 5e-3, 0.05], n, p=[0.4, 0.2, 0.2, 0.2]) * rng.choice([-1, 1], n)
        p = 0.04 - np.cumsum(np.abs(v) * np.diff(t, prepend=3.0))
        target = float(rng.uniform(-0.05, 0.02))
        tolerance = float(rng.choice([0.0, 0.002, 0.01]))
        threshold = float(rng.choice([0.0, 1e-3, 1e-2]))
        timeout = float(rng.uniform(0.0, 1.5))
        allow = bool(case % 2)
        expected = expected_outcome(t, p, v, target, 3.0, tolerance, threshold, timeout)
        monitor = StallMonitor(target, 3.0, tolerance, threshold, timeout, allow)
        ended = None
        for i in range(n):
            outcome = monitor.update(float(t[i]), float(p[i]), float(v[i]))
            if outcome is not None:
                ended = (i, outcome)
                break
        if expected is None:
            assert ended is None, case
            checked[None] += 1
            continue
        assert ended is not None, case
        index, outcome = ended
        assert index == expected[0], case
        kind = expected[1]
        checked[kind] += 1
        assert outcome.reached_goal == (kind == "reached")
        assert outcome.stalled == (kind == "stalled")
        assert outcome.succeeded == (kind == "reached" or allow)
    assert min(checked.values()) >= 10, checked  # every outcome was exercised


def test_the_goal_tolerance_and_the_stall_timeout_are_strict() -> None:
    """An error of exactly goal_tolerance is not reached; a pause of exactly stall_timeout is
    not a stall (the reference compares with < and >), one sample later it is — and it is
    SUCCEEDED, stalled, not reached, with allow_stalling."""
    monitor = StallMonitor(0.5, 0.0, 0.25, 0.001, 1.0, allow_stalling=True)
    assert monitor.update(1.0, 0.25, 0.0) is None  # |0.5 − 0.25| == 0.25; 1.0 − 0 == 1.0
    outcome = monitor.update(1.0625, 0.25, 0.0)
    assert outcome is not None and outcome.stalled and outcome.succeeded
    assert not outcome.reached_goal
    assert StallMonitor(0.5, 0.0, 0.25, 0.001, 1.0, False).update(0.1, 0.2501, 0.0) is not None


# --- goal checks --------------------------------------------------------------------------------
def test_a_goal_within_the_bounds_is_taken_as_given() -> None:
    """Position, effort and velocity inside the bounds (the bounds themselves included) come
    back unchanged."""
    assert checked_goal(LIMITS, 0.0, 40.0, 0.2, 2.5) == GripperGoal(0.0, 40.0, 0.2)
    assert checked_goal(LIMITS, 0.04, 2.5, 0.1, 2.5) == GripperGoal(0.04, 2.5, 0.1)


@pytest.mark.parametrize(
    ("position", "effort", "velocity", "words"),
    [
        (math.nan, 10.0, 0.1, "position must be a finite number"),
        (-0.001, 10.0, 0.1, "outside the range of 'left_finger_joint' [0, 0.04]"),
        (0.041, 10.0, 0.1, "outside the range"),
        (0.02, math.inf, 0.1, "max_effort must be finite"),
        (0.02, -1.0, 0.1, "max_effort must be finite and >= 0"),
        (0.02, 40.5, 0.1, "max_effort 40.5 is above 40"),
        (0.02, 2.0, 0.1, "max_effort 2 is below 2.491"),
        (0.02, 10.0, 0.0, "velocity must be finite and > 0"),
        (0.02, 10.0, 0.3, "above the URDF velocity limit 0.2"),
    ],
)
def test_bad_goals_are_refused_naming_the_field_and_bound(
    position: float, effort: float, velocity: float, words: str
) -> None:
    """Each bad value is refused with a message naming the field and the bound it broke."""
    with pytest.raises(GripperGoalError, match=None) as error:
        checked_goal(LIMITS, position, effort, velocity, 2.4901)
    assert words in str(error.value), str(error.value)


def test_a_zero_effort_is_the_entrys_then_the_joints_limit() -> None:
    """max_effort 0 in the goal means the entry's max_effort; 0 there, the URDF limit."""
    assert default_effort(0.0, 0.0, 40.0) == 40.0
    assert default_effort(0.0, 12.0, 40.0) == 12.0
    assert default_effort(5.0, 12.0, 40.0) == 5.0
    assert math.isnan(default_effort(math.nan, 12.0, 40.0))  # kept: the check names it


def test_a_parallel_command_takes_one_value_for_the_entrys_joint() -> None:
    """One position for the entry's joint, with or without its name; velocity and effort
    optional (empty or 0 = the entry's); anything else refused, naming the field."""
    joint = "left_finger_joint"
    assert parallel_command(joint, [], [0.01], [], []) == (0.01, None, None)
    assert parallel_command(joint, [joint], [0.01], [0.05], [12.0]) == (0.01, 0.05, 12.0)
    assert parallel_command(joint, [joint], [0.01], [0.0], [0.0]) == (0.01, None, None)
    for args, words in [
        (([], [], [], []), "command.position must hold 1 value"),
        (([], [0.01, 0.02], [], []), "command.position must hold 1 value"),
        (([joint, "right_finger_joint"], [0.01], [], []), "command.name must be empty"),
        ((["right_finger_joint"], [0.01], [], []), "is not this controller's joint"),
        ((["nope"], [0.01], [], []), "'nope'"),
        (([], [0.01], [0.1, 0.1], []), "command.velocity must be empty or hold 1 value"),
        (([], [0.01], [], [1.0, 2.0]), "command.effort must be empty or hold 1 value"),
    ]:
        with pytest.raises(GripperGoalError) as error:
            parallel_command(joint, *args)
        assert words in str(error.value), (args, str(error.value))


# --- the other fingers --------------------------------------------------------------------------
def test_the_other_finger_follows_to_the_same_opening(robot: Any) -> None:
    """Bundled gripper (two prismatic fingers, width frames found): for a goal position p of
    left_finger_joint every finger goes to the same fraction of its closed → open way, so the
    width between the frames (Pinocchio's forward kinematics, computed here) is that fraction of
    the full opening; without a geometry every finger gets p."""
    grip = gripper_geometry(robot, FINGERS)
    assert grip is not None
    indices = robot.indices(FINGERS)
    pin_model, data = robot.model, robot.model.createData()
    q = np.array(robot.limits.lower + robot.limits.upper) / 2.0
    q[~np.isfinite(q)] = 0.0

    def distance(targets: list[float]) -> float:
        q[indices] = targets
        pin.framesForwardKinematics(pin_model, data, robot.pinocchio_configuration(q))
        a, b = (data.oMf[pin_model.getFrameId(f)].translation for f in grip.frames)
        return float(np.linalg.norm(a - b))

    closed = distance([0.0, 0.0])
    opened = distance([0.04, 0.04])
    for p in (0.0, 0.013, 0.04):
        targets = finger_targets(grip, FINGERS, "left_finger_joint", p)
        assert targets[0] == p
        fraction = p / 0.04
        assert distance(targets) - closed == pytest.approx(fraction * (opened - closed), abs=1e-9)
    assert finger_targets(None, FINGERS, "left_finger_joint", 0.013) == [0.013, 0.013]


def test_a_mirrored_finger_closes_the_other_way() -> None:
    """A finger whose closed limit is its upper one (0.04) goes to 0.04 − p while the entry's
    joint goes to p over [0, 0.04]: the same fraction of the way to open."""
    grip = GripGeometry(
        frames=("a", "b"),
        joints=FINGERS,
        closed=(0.0, 0.04),
        opened=(0.04, 0.0),
        closed_distance=0.0,
        open_width=0.08,
        frame_ids=(0, 0),
        levers=(1.0, 1.0),
    )
    for p in (0.0, 0.01, 0.03):
        targets = finger_targets(grip, FINGERS, "left_finger_joint", p)
        assert targets == pytest.approx([p, 0.04 - p], abs=1e-12)
    assert finger_targets(grip, FINGERS, "right_finger_joint", 0.01) == pytest.approx(
        [0.03, 0.01], abs=1e-12
    )


# --- the runner ---------------------------------------------------------------------------------
def test_the_bounds_are_the_stacks(lockstep_stack: Any) -> None:
    """The limits of the bundled fingers: URDF range [0, 0.04] m, 0.2 m/s, 40 N; the smallest
    controllable effort at the servo's 0.1 m/s is the finger's weight plus its damping at that
    speed (0.05 kg · 9.81 m/s² + 20 N·s/m · 0.1 m/s), and it grows with the speed."""
    limits = gripper_limits(lockstep_stack, "left_finger_joint")
    assert limits == GripperLimits("left_finger_joint", 0.0, 0.04, 0.2, 40.0)
    smallest = minimum_effort(lockstep_stack, "left_finger_joint", 0.1)
    assert smallest == pytest.approx(0.05 * 9.81 + 20.0 * 0.1, abs=1e-3)
    assert minimum_effort(lockstep_stack, "left_finger_joint", 0.2) == pytest.approx(
        smallest + 20.0 * 0.1, abs=1e-9
    )


def test_the_runner_drives_the_fingers_with_the_bound_and_holds_the_arm(
    lockstep_stack: Any,
) -> None:
    """One tick of the runner at home: the arm's efforts are the joint controller's own on the
    loop's reference (computed separately here); the fingers' are within ±bound; the reference
    it hands on is a copy (the loop's unchanged) whose fingers are the servo's; the position
    fingers' drives get the bound. Run in the loop (lockstep MuJoCo) until the servo stops,
    closing on nothing, the fingers end at the goal and the arm where it was."""
    stack = lockstep_stack
    loop, model = stack.loop, stack.model
    loop.run_ticks(50)
    snapshot = loop.snapshot()
    assert snapshot is not None
    arm_controller = stack.controllers[stack.config.default_controller]
    goal = GripperGoal(position=0.005, effort=6.0, velocity=0.1)
    runner = build_gripper_runner(stack, arm_controller, "left_finger_joint", goal)
    fingers = model.indices(FINGERS)
    state = JointState(snapshot.stamp, snapshot.position.copy(), snapshot.velocity.copy())
    reference = JointReference.hold(snapshot.reference_position)
    before = reference.q.copy()
    expected = arm_controller.compute(state, reference, loop.period)
    output = runner.compute_output(state, reference, loop.period)
    arm = np.setdiff1d(np.arange(model.nv), fingers)
    np.testing.assert_allclose(output.effort[arm], expected[arm], rtol=0, atol=1e-12)
    assert np.all(np.abs(output.effort[fingers]) <= 6.0 + 1e-12)
    np.testing.assert_array_equal(reference.q, before)
    assert output.reference is not reference
    np.testing.assert_allclose(output.reference.q[fingers], runner.gripper.reference)
    assert output.effort_limit is not None
    np.testing.assert_allclose(output.effort_limit[fingers], 6.0)
    assert np.all(np.isnan(output.effort_limit[arm]))
    arm_before = snapshot.position[arm].copy()
    loop.switch_controller(runner)
    loop.run_ticks(round(1.0 / loop.period))  # 0.015 m at 0.1 m/s: well within 1 s
    after = loop.snapshot()
    assert after is not None and loop.fault is None
    np.testing.assert_allclose(after.position[fingers], 0.005, atol=1.5e-3)
    assert np.all(np.abs(after.commanded_effort[fingers]) <= 6.0 + 1e-9)
    np.testing.assert_allclose(after.position[arm], arm_before, atol=2e-3)


def test_the_command_stays_on_the_fingers_around_what_runs_next(lockstep_stack: Any) -> None:
    """After a gripper goal its command is the controller manager's overlay: a controller the
    manager installs next (another joint controller, for a MoveJoints goal or a switch) runs
    wrapped — its arm efforts, the fingers' the servo's, still bounded by the goal's force —
    until a controller that drives the fingers itself is installed (a new gripper goal's
    runner): then the overlay is gone and a plain controller runs plain again."""
    from ct_controllers.chains.gripper_command_runner import (
        GripperCommandRunner,
        finger_hold,
    )
    from ct_controllers.runtime.controller_manager import ControllerManager

    stack = lockstep_stack
    loop = stack.loop
    loop.run_ticks(10)
    names = {n: str(p["type"]) for n, p in stack.config.controllers.items()}
    manager = ControllerManager(loop, stack.controllers, names, stack.config.default_controller)
    inner = stack.controllers["joint_impedance"]
    runner = build_gripper_runner(
        stack, inner, "left_finger_joint", GripperGoal(position=0.0, effort=5.0, velocity=0.1)
    )
    manager.use_chain("gripper_controller → joint_impedance", runner)
    loop.run_ticks(1)
    assert loop.controller is runner and manager.overlay is None  # it drives the fingers
    manager.release_with(finger_hold(runner))
    loop.run_ticks(1)
    wrapped = loop.controller
    assert isinstance(wrapped, GripperCommandRunner) and wrapped.inner is inner
    manager.use("computed_torque")
    loop.run_ticks(round(0.5 / loop.period))
    wrapped = loop.controller
    assert isinstance(wrapped, GripperCommandRunner)
    assert wrapped.inner is stack.controllers["computed_torque"]
    snapshot = loop.snapshot()
    assert snapshot is not None
    fingers = stack.model.indices(FINGERS)
    assert np.all(np.abs(snapshot.commanded_effort[fingers]) <= 5.0 + 1e-9)
    np.testing.assert_allclose(snapshot.position[fingers], 0.0005, atol=2e-3)  # closed
    other = build_gripper_runner(
        stack, inner, "left_finger_joint", GripperGoal(position=0.04, effort=5.0, velocity=0.1)
    )
    manager.use_chain("gripper_controller → joint_impedance", other)
    loop.run_ticks(1)
    assert loop.controller is other and manager.overlay is None
    manager.release()
    loop.run_ticks(1)
    assert loop.controller is stack.controllers[stack.config.default_controller]


def test_deactivating_the_gripper_controller_ends_its_command(lockstep_stack: Any) -> None:
    """switch_controller deactivating the gripper controller whose command is the overlay
    removes it: the joint controller runs plain again; deactivating another leaves it."""
    from ct_controllers.chains.gripper_command_runner import (
        GripperCommandRunner,
        finger_hold,
    )
    from ct_controllers.runtime.controller_manager import ControllerManager

    stack = lockstep_stack
    loop = stack.loop
    loop.run_ticks(10)
    names = {n: str(p["type"]) for n, p in stack.config.controllers.items()}
    manager = ControllerManager(loop, stack.controllers, names, stack.config.default_controller)
    for name in ("gripper_controller", "other_gripper"):
        manager.add_interface_controller(name, "ct_controllers/GripperActionController")
    inner = stack.controllers[stack.config.default_controller]
    runner = build_gripper_runner(
        stack, inner, "left_finger_joint", GripperGoal(position=0.0, effort=5.0, velocity=0.1)
    )
    manager.set_overlay(finger_hold(runner), owner="gripper_controller")
    loop.run_ticks(1)
    assert isinstance(loop.controller, GripperCommandRunner)
    assert manager.switch([], ["other_gripper"], strict=True).ok
    loop.run_ticks(1)
    assert isinstance(loop.controller, GripperCommandRunner)
    assert manager.switch([], ["gripper_controller"], strict=True).ok
    loop.run_ticks(1)
    assert loop.controller is inner and manager.overlay is None
    assert not manager.is_active("gripper_controller")


def test_a_mimic_finger_follows_through_the_model() -> None:
    """The Panda as ct-setup configures it (gripper_joints [panda_finger_joint1], its
    panda_finger_joint2 a <mimic> follower): a goal position p is the one target (the follower is
    never commanded), and the follower's finger goes with it — the distance between the two
    finger links (Pinocchio's forward kinematics of the model's configuration, in which the
    follower is placed from its master) opens by 2 p."""
    from ct_controllers.bench.robots import example_robot_path
    from ct_controllers.model.robot import RobotModel

    urdf = example_robot_path("panda_description/urdf/panda.urdf").read_text()
    model = RobotModel(urdf, "panda_hand_tcp", "panda_link0")
    fingers = ("panda_finger_joint1",)
    grip = gripper_geometry(model, fingers)
    assert grip is not None and "panda_finger_joint2" in model.mimic
    data = model.model.createData()
    index = int(model.indices(fingers)[0])

    def distance(p: float) -> float:
        q = np.zeros(model.nv)
        q[index] = p
        pin.framesForwardKinematics(model.model, data, model.pinocchio_configuration(q))
        a, b = (data.oMf[model.model.getFrameId(f)].translation for f in grip.frames)
        return float(np.linalg.norm(a - b))

    for p in (0.0, 0.01, 0.04):
        assert finger_targets(grip, fingers, "panda_finger_joint1", p) == [p]
        assert distance(p) - distance(0.0) == pytest.approx(2 * p, abs=1e-9)
