"""ct_controllers.tasks.phases: the grasp phase machine driven by a small kinematic world (TCP and
fingers move toward their targets at bounded speed, a cube blocks the fingers and rides with the
TCP while both fingers press on it). The machine only sees stamped observations, as in the real
stack."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
import pytest

from ct_controllers.tasks.phases import (
    GraspGoal,
    GraspObservation,
    GraspParameters,
    GraspTask,
    Phase,
)

DT = 0.002  # [s]
CUBE_HALF = 0.025  # [m]
FINGER_INNER_OFFSET = 0.001  # [m] inner face from the centre line at zero opening


def top_down(x: float, y: float, z: float) -> np.ndarray:
    """TCP pose pointing down (tool z = −base z) at (x, y, z)."""
    pose = np.eye(4)
    pose[:3, :3] = np.diag([1.0, -1.0, -1.0])
    pose[:3, 3] = [x, y, z]
    return pose


@dataclass
class World:
    tcp: np.ndarray = field(default_factory=lambda: top_down(0.4, 0.1, 0.3))
    fingers: np.ndarray = field(default_factory=lambda: np.array([0.04, 0.04]))
    cube: np.ndarray = field(default_factory=lambda: top_down(0.5, 0.0, CUBE_HALF))
    cube_present: bool = True
    reachable: bool = True
    time: float = 0.0
    observing: bool = True
    last_stamp: float = 0.0
    held: bool = False
    cube_in_tcp: np.ndarray | None = None
    senses_object: bool = True  # an object sensor: the cube's pose and finger contact forces
    measures_effort: bool = True  # the backend measures finger efforts
    finger_speed_limit: float = 0.1  # [m/s] how fast a finger closes or opens

    def step(self, tcp_target: np.ndarray | None, finger_target: float, effort: float) -> None:
        self.time += DT
        if tcp_target is not None and self.reachable:
            # Move at most 0.5 m/s and 2 rad/s toward the target.
            delta = tcp_target[:3, 3] - self.tcp[:3, 3]
            distance = np.linalg.norm(delta)
            if distance > 0:
                self.tcp[:3, 3] += delta * min(1.0, 0.5 * DT / distance)
            rotation = pin.log3(tcp_target[:3, :3] @ self.tcp[:3, :3].T)
            angle = np.linalg.norm(rotation)
            if angle > 0:
                self.tcp[:3, :3] = (
                    pin.exp3(rotation * min(1.0, 2.0 * DT / angle)) @ self.tcp[:3, :3]
                )
        if not math.isnan(finger_target):
            stop = self._finger_stop()
            most = self.finger_speed_limit * DT
            step = np.clip(finger_target - self.fingers, -most, most)
            before = self.fingers
            self.fingers = np.maximum(self.fingers + step, stop)
            self.finger_speed = (self.fingers - before) / DT
        blocked = (
            self.cube_present
            and self._between_fingers()
            and np.all(self.fingers <= self._finger_stop() + 1e-9)
        )
        self.effort = np.full(2, effort if blocked else 0.0)
        if blocked and not self.held:
            self.held, self.cube_in_tcp = True, np.linalg.inv(self.tcp) @ self.cube
        if self.held and not blocked:
            self.held = False
        if self.held and self.cube_in_tcp is not None:
            self.cube = self.tcp @ self.cube_in_tcp
        if self.observing:
            self.last_stamp = self.time

    def _between_fingers(self) -> bool:
        return bool(np.linalg.norm(self.tcp[:3, 3] - self.cube[:3, 3]) < 0.01)

    def _finger_stop(self) -> float:
        if self.cube_present and self._between_fingers():
            return CUBE_HALF - FINGER_INNER_OFFSET
        return 0.0

    def observe(self) -> GraspObservation:
        blocked = self.held
        sensed = self.senses_object
        return GraspObservation(
            stamp=self.last_stamp,
            tcp_pose=self.tcp.copy(),
            finger_positions=self.fingers.copy(),
            finger_velocities=getattr(self, "finger_speed", np.zeros(2)).copy(),
            finger_efforts=(
                getattr(self, "effort", np.zeros(2)).copy() if self.measures_effort else None
            ),
            contact_forces=np.full(2, 5.0 if blocked else 0.0) if sensed else None,
            object_pose=self.cube.copy() if self.cube_present and sensed else None,
        )


def run(task: GraspTask, world: World, seconds: float, event=None) -> list:  # type: ignore[no-untyped-def]
    outputs = []
    for _ in range(round(seconds / DT)):
        output = task.update(world.time, world.observe())
        outputs.append(output)
        if event is not None:
            event(task, world)
        world.step(output.tcp_target, output.finger_target, output.finger_effort_limit)
        if task.finished:
            break
    return outputs


GOAL = GraspGoal(grasp_pose=top_down(0.5, 0.0, CUBE_HALF), lift_height=0.1, hold_duration=0.3)


def test_a_full_pick_goes_through_every_phase_in_order_with_recorded_reasons() -> None:
    """APPROACH → CLOSE → HOLD → RELEASE → DONE; each transition has its time, reason and the
    measured values that triggered it; the cube was lifted by the lift height and put back."""
    task, world = GraspTask(), World()
    task.start(GOAL)
    heights = []
    run(task, world, 12.0, event=lambda t, w: heights.append(w.cube[2, 3]))
    assert task.phase == Phase.DONE, task.failure
    path = [(t.source, t.target) for t in task.transitions]
    assert path == [
        (Phase.APPROACH, Phase.CLOSE),
        (Phase.CLOSE, Phase.HOLD),
        (Phase.HOLD, Phase.RELEASE),
        (Phase.RELEASE, Phase.DONE),
    ]
    assert all(t.reason and t.values for t in task.transitions)
    assert task.transitions[0].values["position_error"] <= 0.005
    assert max(heights) == pytest.approx(CUBE_HALF + 0.1, abs=0.006)
    assert world.cube[2, 3] == pytest.approx(CUBE_HALF, abs=0.006)
    assert set(task.phase_durations) == {Phase.APPROACH, Phase.CLOSE, Phase.HOLD, Phase.RELEASE}
    assert task.phase_durations[Phase.HOLD] >= GOAL.hold_duration


def test_approach_goes_through_the_pre_grasp_pose_above_the_cube() -> None:
    """The first target is the grasp pose moved back along the tool axis by approach_offset
    (tool z points down, so the pre-grasp is above the cube)."""
    task, world = GraspTask(), World()
    task.start(GOAL)
    output = task.update(world.time, world.observe())
    expected = GOAL.grasp_pose.copy()
    expected[2, 3] += GOAL.approach_offset
    np.testing.assert_allclose(output.tcp_target, expected)
    assert output.stage == "pre_grasp" and output.finger_target == 0.04


def test_unreachable_target_fails_in_approach_on_timeout_and_holds() -> None:
    """A TCP that never reaches the target ends FAILED in APPROACH with a timeout reason, and the
    outputs freeze into a hold (no TCP target)."""
    task, world = GraspTask(), World(reachable=False)
    task.start(GOAL)
    outputs = run(task, world, 10.0)
    assert task.phase == Phase.FAILED
    assert task.failure is not None and task.failure.source == Phase.APPROACH
    assert "timed out" in task.failure.reason
    assert outputs[-1].tcp_target is None


def test_closes_timeout_counts_beyond_the_grippers_stroke_time() -> None:
    """A gripper closing at 5 mm/s over its 4 cm (stroke_time 8 s) reaches the cube (1.6 cm
    away) 3.2 s into CLOSE: with CLOSE's 2 s timeout as given it fails there, timed out after
    2 s; told its stroke time, the same grasp closes on the cube within 2 s + 8 s and goes on to
    DONE."""
    slow = 0.005  # [m/s]
    task, world = GraspTask(), World(finger_speed_limit=slow)
    task.start(GOAL)
    run(task, world, 30.0)
    assert task.phase == Phase.FAILED and task.failure is not None
    assert task.failure.source == Phase.CLOSE and "timed out after 2.0 s" in task.failure.reason

    task = GraspTask(GraspParameters(stroke_time=0.04 / slow))
    world = World(finger_speed_limit=slow)
    task.start(GOAL)
    run(task, world, 40.0)
    assert task.phase == Phase.DONE, task.failure
    assert 3.2 < task.phase_durations[Phase.CLOSE] < 10.0


def test_cube_removed_before_closing_fails_in_close() -> None:
    """With the cube gone the fingers close on nothing: FAILED in CLOSE, saying so."""
    task, world = GraspTask(), World()
    task.start(GOAL)

    def remove_when_closing(task: GraspTask, world: World) -> None:
        if task.phase == Phase.CLOSE:
            world.cube_present = False

    run(task, world, 10.0, event=remove_when_closing)
    assert task.phase == Phase.FAILED and task.failure is not None
    assert task.failure.source == Phase.CLOSE and "closed on nothing" in task.failure.reason


def test_cube_knocked_out_during_hold_fails_with_slip() -> None:
    """The cube leaving the TCP during HOLD ends FAILED in HOLD with a slip reason and the slip
    distance measured."""
    task, world = GraspTask(), World()
    task.start(GOAL)

    def knock(task: GraspTask, world: World) -> None:
        if task.phase == Phase.HOLD and task.stage == "hold" and world.held:
            world.held = False
            world.cube_in_tcp = None
            world.cube = world.cube.copy()
            world.cube[0, 3] += 0.1

    run(task, world, 10.0, event=knock)
    assert task.phase == Phase.FAILED and task.failure is not None
    assert task.failure.source == Phase.HOLD and "slipped" in task.failure.reason
    assert task.failure.values["slip"] > 0.03


def test_observations_stopping_fail_on_staleness() -> None:
    """When observations stop (stamps freeze) for longer than stale_limit, the task fails from
    the phase it was in, saying the observations are stale."""
    task, world = GraspTask(), World()
    task.start(GOAL)

    def stop_observing(task: GraspTask, world: World) -> None:
        if task.phase == Phase.CLOSE:
            world.observing = False

    run(task, world, 10.0, event=stop_observing)
    assert task.phase == Phase.FAILED and task.failure is not None
    assert task.failure.source == Phase.CLOSE and "stale" in task.failure.reason


def test_one_bad_sample_restarts_the_dwell_window() -> None:
    """Near the grasp pose, one sample with a large TCP error restarts the window: the
    transition comes a full dwell after the bad sample, not before."""
    parameters = GraspParameters(dwell=0.1)
    task, world = GraspTask(parameters), World(tcp=top_down(0.5, 0.0, CUBE_HALF + 0.08))
    task.start(GOAL)
    world.fingers[:] = 0.04
    # Pre-grasp is where the TCP already is: the window starts at once.
    for _ in range(round(0.09 / DT)):
        task.update(world.time, world.observe())
        world.step(None, 0.04, 0.0)
    bad = world.observe()
    bad_pose = bad.tcp_pose.copy()
    bad_pose[0, 3] += 0.05
    task.update(
        world.time,
        GraspObservation(
            bad.stamp, bad_pose, bad.finger_positions, bad.finger_velocities, bad.finger_efforts
        ),
    )
    world.step(None, 0.04, 0.0)
    bad_time = world.time
    while task.stage == "pre_grasp":
        task.update(world.time, world.observe())
        world.step(None, 0.04, 0.0)
    assert world.time - bad_time >= 0.1 - 1e-9


def test_reset_after_failure_returns_a_clean_approach() -> None:
    """After FAILED (or DONE) a new run needs reset(); after reset the machine is in APPROACH with
    no goal, transitions, timers or references, and a new goal starts from the pre-grasp."""
    task, world = GraspTask(), World(reachable=False)
    task.start(GOAL)
    run(task, world, 10.0)
    assert task.phase == Phase.FAILED
    with pytest.raises(RuntimeError, match="reset"):
        task.start(GOAL)
    task.reset()
    assert task.phase == Phase.APPROACH and task.goal is None and task.transitions == []
    assert task.failure is None and task.phase_durations == {}
    with pytest.raises(RuntimeError, match="no goal"):
        task.update(0.0, World().observe())
    world = World()
    task.start(GOAL)
    output = task.update(world.time, world.observe())
    assert output.phase == Phase.APPROACH and output.stage == "pre_grasp"
    run(task, world, 12.0)
    assert task.phase == Phase.DONE


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"grasp_pose": np.full((4, 4), np.nan)}, "grasp_pose"),
        ({"grasp_pose": np.diag([2.0, 1, 1, 1])}, "rigid"),
        ({"grasp_pose": np.diag([1.0, 1, -1, 1])}, "rigid"),  # a reflection: det −1
        ({"lift_height": -0.1}, "lift_height"),
        ({"grasp_effort": 0.0}, "grasp_effort"),
        ({"place_pose": np.diag([1.0, -1, 1, 1])}, "place_pose is not a rigid"),
        ({"approach_offset": 2.0}, r"approach_offset must be within \[0, 1\] m"),
        ({"lift_height": 1e300}, r"lift_height must be within \[0, 1\] m"),
        ({"hold_duration": 1e9}, r"hold_duration must be within \[0, 3600\] s"),
        ({"hold_duration": math.nan}, "hold_duration"),
        ({"grasp_effort": math.inf}, "grasp_effort must be finite and > 0 N"),
    ],
)
def test_bad_goals_are_rejected(changes: dict, words: str) -> None:
    """Non-finite or non-rigid poses (a reflection included) and negative, zero, non-finite or
    out-of-bound amounts raise ValueError naming them (and the bound)."""
    arguments = {"grasp_pose": top_down(0.5, 0.0, CUBE_HALF)} | changes
    with pytest.raises(ValueError, match=words):
        GraspGoal(**arguments)


def test_a_goal_holds_read_only_checked_copies_and_its_pre_grasp_pose() -> None:
    """A GraspGoal keeps read-only copies of its poses (the caller changing its arrays after
    does not change the goal) and derives the pre-grasp pose once: the grasp pose with its
    origin moved by −approach_offset along its own tool z, same rotation — for a tilted tool
    too — and that array is the task's first target."""
    grasp = top_down(0.5, 0.0, CUBE_HALF)
    grasp[:3, :3] = pin.exp3(np.array([0.3, -0.2, 0.1])) @ grasp[:3, :3]
    place = top_down(0.4, 0.1, CUBE_HALF)
    goal = GraspGoal(grasp_pose=grasp, place_pose=place, approach_offset=0.05)
    expected = grasp.copy()
    expected[:3, 3] -= 0.05 * grasp[:3, 2]
    grasp[0, 3] = place[0, 3] = 9.0
    assert goal.grasp_pose[0, 3] == 0.5 and goal.place_pose is not None
    assert goal.place_pose[0, 3] == 0.4
    np.testing.assert_allclose(goal.pre_grasp_pose, expected, atol=1e-15)
    for array in (goal.grasp_pose, goal.place_pose, goal.pre_grasp_pose):
        assert not array.flags.writeable
    task = GraspTask()
    task.start(goal)
    first = task.target()
    assert first is not None
    np.testing.assert_array_equal(first, goal.pre_grasp_pose)


def test_slip_is_the_object_displacement_in_the_tcp_frame() -> None:
    """The slip measure equals ‖(T_tcp⁻¹ T_object).p − reference.p‖ computed with a general 4x4
    inverse, for random rigid TCP and object poses (second algorithm: no rigid-body shortcut)."""
    rng = np.random.default_rng(5)
    task = GraspTask()
    for _ in range(50):
        tcp, cube, reference = np.eye(4), np.eye(4), np.eye(4)
        tcp[:3, :3], cube[:3, :3] = pin.exp3(rng.normal(size=3)), pin.exp3(rng.normal(size=3))
        tcp[:3, 3], cube[:3, 3] = rng.normal(size=3), rng.normal(size=3)
        reference[:3, 3] = rng.normal(scale=0.05, size=3)
        observation = GraspObservation(
            stamp=0.0,
            tcp_pose=tcp,
            finger_positions=np.zeros(2),
            finger_velocities=np.zeros(2),
            finger_efforts=np.zeros(2),
            object_pose=cube,
        )
        expected = np.linalg.norm((np.linalg.inv(tcp) @ cube)[:3, 3] - reference[:3, 3])
        assert task._slip(observation, reference) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_an_object_that_slid_in_the_hand_is_put_down_where_it_was_picked_up() -> None:
    """The cube slides 6 mm along the tool z (away from the hand) while lifted: the put-down
    target is the grasp pose raised by those 6 mm (the TCP shifted by R (a0 − a1), a0, a1 the
    cube's position in the TCP frame when CLOSE ended and when the put-down began), so the cube,
    not the TCP, returns to where it was picked up: it ends at its picked-up height within
    0.1 mm (it would end 6 mm lower at the grasp pose), and the pick is DONE."""
    task, world = GraspTask(), World()
    task.start(GOAL)
    slide = 0.006  # [m]
    slid = []

    def slip_while_lifting(task: GraspTask, world: World) -> None:
        if task.stage == "lift" and not slid and world.cube_in_tcp is not None:
            world.cube_in_tcp = world.cube_in_tcp.copy()
            world.cube_in_tcp[2, 3] += slide  # tool z: away from the hand
            slid.append(True)

    targets: dict[str, np.ndarray] = {}

    def watch(task: GraspTask, world: World) -> None:
        slip_while_lifting(task, world)
        target = task.target()
        if task.phase == Phase.HOLD and target is not None:
            targets[task.stage] = np.array(target)

    run(task, world, 12.0, event=watch)
    assert slid and task.phase == Phase.DONE, task.failure
    expected = GOAL.grasp_pose.copy()
    expected[:3, 3] -= expected[:3, :3] @ np.array([0.0, 0.0, slide])  # a0 − a1 = −slide z
    np.testing.assert_allclose(targets["put_down"], expected, atol=1e-12)
    assert expected[2, 3] == pytest.approx(CUBE_HALF + slide)
    assert world.cube[2, 3] == pytest.approx(CUBE_HALF, abs=1e-4)


@dataclass
class TableWorld(World):
    """World with a table at z = 0: a held cube cannot go below it, nor the TCP holding it."""

    def step(self, tcp_target: np.ndarray | None, finger_target: float, effort: float) -> None:
        super().step(tcp_target, finger_target, effort)
        # The cube's lowest point: its centre less its extent along z, a Σⱼ |R₂ⱼ| (a box of
        # half size a; a for a cube standing on a face).
        lowest = self.cube[2, 3] - CUBE_HALF * float(np.abs(self.cube[2, :3]).sum())
        if self.held and lowest < 0.0:
            self.tcp[2, 3] -= lowest
            self.cube[2, 3] -= lowest


@pytest.mark.parametrize("slide", [0.0, 0.006], ids=["none", "6mm"])
def test_unobserved_a_slid_object_is_down_when_the_tcp_rests_above_the_target(slide: float) -> None:
    """By the joints alone (no object pose) the put-down cannot be shifted for a slide in the
    grip: a cube slid 6 mm toward the fingertips meets the table with the TCP 6 mm above its
    target, where it rests, and the put-down ends there (within slip_tolerance above it, still
    for the dwell): DONE, the cube on the table. Without a slide the TCP reaches its target
    within position_tolerance before the put-down ends (resting is never judged on the way
    down)."""
    task, world = GraspTask(), TableWorld(senses_object=False)
    task.start(GOAL)

    def slip_while_lifting(task: GraspTask, world: World) -> None:
        cube = world.cube_in_tcp
        # Once: the cube was grasped at the TCP, 0 along its z.
        if task.stage == "lift" and cube is not None and slide and cube[2, 3] < slide:
            world.cube_in_tcp = cube.copy()
            world.cube_in_tcp[2, 3] += slide

    run(task, world, 12.0, event=slip_while_lifting)
    assert task.phase == Phase.DONE, task.failure
    placed = next(t for t in task.transitions if t.target == Phase.RELEASE)
    if slide:
        assert placed.values["position_error"] == pytest.approx(slide, abs=1e-3)
    else:
        assert placed.values["position_error"] <= GraspParameters().position_tolerance
    assert world.cube[2, 3] == pytest.approx(CUBE_HALF, abs=1e-6)


def test_observed_a_turned_object_is_down_when_the_tcp_rests_above_the_target() -> None:
    """Observed, the put-down target's shift undoes a slide in the grip but not a turn: a cube
    turned 20° about its own x axis while lifted (about its centre: no shift) meets the table
    with an edge, its centre a (cos 20° + sin 20° − 1) = 7.0 mm above where it was picked up,
    beyond position_tolerance; the put-down ends with the TCP resting there (within
    slip_tolerance above its target, still for the dwell): DONE, the turned cube on the table."""
    task, world = GraspTask(), TableWorld()
    task.start(GOAL)
    turn = math.radians(20.0)

    def turn_while_lifting(task: GraspTask, world: World) -> None:
        cube = world.cube_in_tcp
        if task.stage == "lift" and cube is not None and cube[1, 1] > math.cos(turn) + 1e-9:
            world.cube_in_tcp = (
                cube @ pin.SE3(pin.exp3(np.array([turn, 0.0, 0.0])), np.zeros(3)).homogeneous
            )

    run(task, world, 12.0, event=turn_while_lifting)
    assert task.phase == Phase.DONE, task.failure
    placed = next(t for t in task.transitions if t.target == Phase.RELEASE)
    above = CUBE_HALF * (math.cos(turn) + math.sin(turn) - 1.0)
    assert GraspParameters().position_tolerance < above < GraspParameters().slip_tolerance
    assert placed.values["position_error"] == pytest.approx(above, abs=1e-3)
    assert world.cube[2, 3] == pytest.approx(CUBE_HALF + above, abs=1e-6)


def test_target_is_what_the_next_update_outputs_without_stepping_the_task() -> None:
    """target() before the first update is the pre-grasp pose, the very array the first update
    then outputs (read-only); it starts no timer and records no transition; None without a goal
    and once finished."""
    task, world = GraspTask(), World()
    assert task.target() is None
    task.start(GOAL)
    first = task.target()
    assert first is not None and not first.flags.writeable
    expected = GOAL.grasp_pose.copy()
    expected[2, 3] += GOAL.approach_offset
    np.testing.assert_allclose(first, expected)
    assert task.transitions == [] and task._phase_start is None
    output = task.update(world.time, world.observe())
    assert output.tcp_target is first
    run(task, world, 30.0)
    assert task.finished and task.target() is None


def test_with_full_sensing_the_verdict_lists_the_object_checks() -> None:
    """With an object sensor and measured efforts, DONE rests on contact, the object's rise and
    steadiness in the grasp and its staying put at release, besides the gripper's checks."""
    task, world = GraspTask(), World()
    task.start(GOAL)
    run(task, world, 12.0)
    assert task.phase == Phase.DONE, task.failure
    assert task.checks == (
        "tcp_pose",
        "finger_contact",
        "aperture",
        "grip_effort",
        "object_rise",
        "object_slip",
        "fingers_open",
        "tcp_retreat",
        "object_stayed",
    )
    assert task.object_observed


def test_without_an_object_sensor_the_pick_completes_on_the_gripper_alone_and_says_so() -> None:
    """No object pose, no contact forces: CLOSE ends on the measured stall (effort), HOLD on the
    aperture and grip effort, and DONE lists only those checks (object_observed False); the
    cube was still lifted by the lift height in the world."""
    task, world = GraspTask(), World(senses_object=False)
    task.start(GOAL)
    heights = []
    run(task, world, 12.0, event=lambda t, w: heights.append(w.cube[2, 3]))
    assert task.phase == Phase.DONE, task.failure
    assert task.checks == (
        "tcp_pose",
        "finger_stall_effort",
        "aperture",
        "grip_effort",
        "fingers_open",
        "tcp_retreat",
    )
    assert not task.object_observed
    assert max(heights) == pytest.approx(CUBE_HALF + 0.1, abs=0.006)


def test_without_effort_measurement_the_stall_is_judged_by_position() -> None:
    """No effort measured and no object sensor: fingers blocked short of their closed target
    count as the stall (finger_stall_position); no grip_effort check is claimed."""
    task, world = GraspTask(), World(senses_object=False, measures_effort=False)
    task.start(GOAL)
    run(task, world, 12.0)
    assert task.phase == Phase.DONE, task.failure
    assert "finger_stall_position" in task.checks and "grip_effort" not in task.checks


def test_without_an_object_sensor_a_lost_cube_fails_hold_by_the_aperture() -> None:
    """The cube taken out of the closed fingers during HOLD, with no object sensor: the fingers
    close to nothing and HOLD fails 'object lost', measured by the gripper alone."""
    task, world = GraspTask(), World(senses_object=False)
    task.start(GOAL)

    def take(task: GraspTask, world: World) -> None:
        if task.phase == Phase.HOLD and task.stage == "hold":
            world.cube_present = False

    run(task, world, 10.0, event=take)
    assert task.phase == Phase.FAILED and task.failure is not None
    assert task.failure.source == Phase.HOLD and "object lost" in task.failure.reason


def test_hold_needs_the_grip_effort_to_hold() -> None:
    """Measured finger effort dropping below grip_effort_fraction of grasp_effort during HOLD
    (the drive lost its force) keeps HOLD from completing: it times out FAILED."""
    parameters = GraspParameters(
        timeouts={Phase.APPROACH: 6.0, Phase.CLOSE: 2.0, Phase.HOLD: 3.0, Phase.RELEASE: 4.0}
    )
    task, world = GraspTask(parameters), World(senses_object=False)
    task.start(GOAL)
    original = world.observe

    def weak() -> GraspObservation:
        observation = original()
        if task.phase == Phase.HOLD and observation.finger_efforts is not None:
            observation.finger_efforts[:] = 0.2 * GOAL.grasp_effort
        return observation

    world.observe = weak  # type: ignore[method-assign]
    run(task, world, 12.0)
    assert task.phase == Phase.FAILED and task.failure is not None
    assert task.failure.source == Phase.HOLD and "timed out" in task.failure.reason


def test_a_measured_grip_width_is_what_hold_judges() -> None:
    """With ``grip_width`` in the observation (the geometric width between the finger frames)
    the task judges the grip by it, not by the finger openings: the same pick whose openings
    stay put fails HOLD 'the grip width changed' once the measured width moves by more than
    slip_failure, and completes while the width follows the summed openings."""

    class WidthWorld(World):
        widen = 0.0  # [m] added to the measured width

        def observe(self) -> GraspObservation:
            seen = super().observe()
            return seen._replace(grip_width=float(np.sum(seen.finger_positions)) + self.widen)

    steady_task, steady = GraspTask(), WidthWorld()
    steady_task.start(GOAL)
    run(steady_task, steady, 10.0)
    assert steady_task.phase == Phase.DONE, steady_task.failure

    task, world = GraspTask(), WidthWorld()
    task.start(GOAL)
    drift = GraspParameters().slip_failure + 0.005

    def widen(task: GraspTask, world: World) -> None:
        if task.phase == Phase.HOLD and task.stage == "hold":
            world.widen = drift  # type: ignore[attr-defined]

    run(task, world, 10.0, event=widen)
    assert task.phase == Phase.FAILED and task.failure is not None
    assert task.failure.source == Phase.HOLD and "grip width changed" in task.failure.reason
    assert task.failure.values["grip_width_change"] >= drift - 1e-9


@pytest.mark.parametrize("finish_after", [0.4, None])
def test_the_identify_stage_holds_the_lifted_pose_until_the_identification_is_done(
    finish_after: float | None,
) -> None:
    """With identify_payload, HOLD goes lift → identify → hold → put_down; the identify stage
    outputs the lifted pose (the hold stage's) and does not end before the outside calls
    identification_finished (``finish_after`` [s] into the stage), or, without it, before
    identify_timeout (then ``identification_timed_out``); the pick still ends DONE."""
    parameters = GraspParameters(identify_payload=True, identify_timeout=1.0)
    task, world = GraspTask(parameters), World()
    task.start(GOAL)
    entered: list[float] = []
    stages: list[str] = []

    def watch(task: GraspTask, world: World) -> None:
        if task.phase == Phase.HOLD and (not stages or stages[-1] != task.stage):
            stages.append(task.stage)
        if task.identifying:
            if not entered:
                entered.append(world.time)
            if finish_after is not None and world.time - entered[0] >= finish_after:
                task.identification_finished()

    outputs = run(task, world, 15.0, event=watch)
    assert task.phase == Phase.DONE, task.failure
    assert stages == ["lift", "identify", "hold", "put_down"]
    identify = [o for o in outputs if o.stage == "identify"]
    lifted = [o for o in outputs if o.stage == "lift"][-1].tcp_target
    np.testing.assert_allclose(identify[0].tcp_target, lifted)
    least = finish_after if finish_after is not None else parameters.identify_timeout
    assert len(identify) * DT >= least
    assert task.identification_timed_out == (finish_after is None)
