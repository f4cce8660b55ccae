"""ct_controllers.runtime.trajectory_motion and its place in Motions (no loop, no backend): the
start from the measured state, the stop before a future start, the lone waypoint, and the
path/goal tolerance judgement of joint_trajectory_controller."""

from __future__ import annotations

import numpy as np
from helpers import new_robot_model

from ct_controllers.controllers.controller import JointState
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.references.spline_trajectory import Waypoint
from ct_controllers.runtime.motion_requests import (
    PREEMPTED,
    RUNNING,
    SUCCEEDED,
    MotionRequest,
    Motions,
    TrajectoryRequest,
)
from ct_controllers.runtime.trajectory_motion import (
    GOAL_TOLERANCE_VIOLATED,
    PATH_TOLERANCE_VIOLATED,
    ToleranceArrays,
    TrajectoryMotion,
    TrajectoryPlan,
)

MODEL = new_robot_model()
NV = MODEL.nv
LIMITS = JointLimits(
    velocity=np.full(NV, 1.0), acceleration=np.full(NV, 3.0), jerk=np.full(NV, 30.0)
)
JOINTS = ("joint1", "joint2")
INDICES = np.array(MODEL.indices(list(JOINTS)))


def state(stamp: float, q: np.ndarray | None = None, v: np.ndarray | None = None) -> JointState:
    q = np.zeros(NV) if q is None else q
    v = np.zeros(NV) if v is None else v
    return JointState(stamp=stamp, q=q, v=v, effort=np.zeros(NV))


def tolerances(position: float = 0.0, velocity: float = 0.0) -> ToleranceArrays:
    return ToleranceArrays(np.full(2, position), np.full(2, velocity))


def plan(
    waypoints: list[Waypoint],
    delay: float = 0.0,
    path: ToleranceArrays | None = None,
    goal: ToleranceArrays | None = None,
    goal_time: float = 0.0,
) -> TrajectoryPlan:
    return TrajectoryPlan(
        JOINTS,
        INDICES,
        tuple(waypoints),
        delay,
        "splines",
        path or tolerances(),
        goal or tolerances(),
        goal_time,
    )


def point(time: float, q: list[float], v: list[float] | None = None) -> Waypoint:
    return Waypoint(time, np.array(q), None if v is None else np.array(v), None)


def test_a_moveit_trajectory_starts_at_the_measured_state_and_passes_its_waypoints():
    """A trajectory whose first point is the start state at t = 0 (MoveIt's) starts exactly at
    the measured positions — not at the point's, 3 mrad off — and passes every later waypoint
    at its time with its positions and velocities; joints it does not name hold the base."""
    measured = np.zeros(NV)
    measured[INDICES] = [0.003, -0.002]
    base = np.full(NV, 0.01)
    waypoints = [
        point(0.0, [0.0, 0.0], [0.0, 0.0]),
        point(0.5, [0.2, -0.1], [0.5, -0.2]),
        point(1.0, [0.4, -0.2], [0.0, 0.0]),
    ]
    motion = TrajectoryMotion(plan(waypoints), state(10.0, measured), base, LIMITS)
    start = motion.sample(state(10.0, measured))
    assert np.allclose(start.q[INDICES], measured[INDICES], atol=1e-12)
    for waypoint in waypoints[1:]:
        sample = motion.sample(state(10.0 + waypoint.time))
        assert np.allclose(sample.q[INDICES], waypoint.positions, atol=1e-9)
        assert waypoint.velocities is not None
        assert np.allclose(sample.v[INDICES], waypoint.velocities, atol=1e-9)
    others = [i for i in range(NV) if i not in INDICES]
    assert np.allclose(sample.q[others], 0.01)


def test_a_trajectory_preempting_a_moving_arm_starts_at_its_velocity_with_bounded_acceleration():
    """From a measured velocity of 0.6 rad/s, positions-only waypoints (JTC would step the
    velocity to the first segment's slope): the reference starts at the measured position and
    velocity, its velocity is the derivative of its position (central differences), and its
    acceleration stays finite and within 10 rad/s² on the first segment."""
    v = np.zeros(NV)
    v[INDICES] = [0.6, -0.3]
    waypoints = [point(0.4, [0.1, -0.1]), point(0.8, [0.2, -0.1])]
    motion = TrajectoryMotion(plan(waypoints), state(0.0, v=v), np.zeros(NV), LIMITS)
    first = motion.sample(state(0.0))
    assert np.allclose(first.v[INDICES], v[INDICES], atol=1e-12)
    h = 1e-5
    for t in np.linspace(0.01, 0.39, 20):
        ahead, behind = motion.sample(state(t + h)), motion.sample(state(t - h))
        here = motion.sample(state(t))
        derivative = (ahead.q - behind.q) / (2 * h)
        assert np.allclose(derivative[INDICES], here.v[INDICES], atol=1e-6)
        assert np.all(np.abs(here.a[INDICES]) < 10.0)


def test_at_rest_positions_only_waypoints_are_linear_as_jtc_samples_them():
    """At rest, positions-only waypoints keep JTC's linear segments: the velocity on the first
    segment is (q1 - q0) / t1 throughout."""
    waypoints = [point(0.5, [0.1, -0.05]), point(1.0, [0.2, 0.0])]
    motion = TrajectoryMotion(plan(waypoints), state(0.0), np.zeros(NV), LIMITS)
    for t in (0.05, 0.25, 0.45):
        sample = motion.sample(state(t))
        assert np.allclose(sample.v[INDICES], [0.2, -0.1], atol=1e-12)


def test_a_future_start_stops_the_arm_first_and_starts_from_the_state_measured_then():
    """With a start 0.5 s ahead, a moving arm is brought to rest within the reference
    acceleration (the stop), and the spline starts at the start tick from the state measured
    then; before that the motion has no spline (duration 0)."""
    v = np.zeros(NV)
    v[INDICES] = [0.5, 0.0]
    motion = TrajectoryMotion(
        plan([point(0.5, [0.3, 0.0])], delay=0.5), state(2.0, v=v), np.zeros(NV), LIMITS
    )
    speeds = [motion.sample(state(2.0 + t)).v[INDICES[0]] for t in np.arange(0.0, 0.45, 0.01)]
    assert motion.spline is None and motion.duration == 0.0
    steps = np.abs(np.diff(speeds)) / 0.01
    assert speeds[0] > 0.45 and abs(speeds[-1]) < 1e-9 and steps.max() <= 3.0 + 1e-6
    there = np.zeros(NV)
    there[INDICES] = [0.04, 0.0]
    begun = motion.sample(state(2.5, there))
    assert motion.spline is not None and motion.start_time == 2.5
    assert np.allclose(begun.q[INDICES], [0.04, 0.0], atol=1e-12)


def test_a_lone_waypoint_now_is_reached_within_the_speed_limit():
    """A single point at t = 0 (JTC steps to it) is reached over a time within which the
    sampled speed stays below the reference limit (1 rad/s), ending at the point."""
    motion = TrajectoryMotion(plan([point(0.0, [0.8, -0.4])]), state(0.0), np.zeros(NV), LIMITS)
    assert motion.duration > 0.8  # at least the distance over the speed limit
    speeds = [
        np.abs(motion.sample(state(t)).v[INDICES]).max()
        for t in np.linspace(0, motion.duration, 200)
    ]
    assert max(speeds) <= 1.0 + 1e-9
    end = motion.sample(state(motion.duration + 0.1))
    assert np.allclose(end.q[INDICES], [0.8, -0.4])


def test_path_and_goal_tolerances_are_judged_as_jtc_judges_them():
    """Before the end a position error beyond the path tolerance is a path violation naming the
    joint; after the end, within the goal tolerances is success, outside them it keeps running
    until goal_time has passed (then a goal violation), and with goal_time 0 it never fails."""
    waypoints = [point(1.0, [0.2, 0.1], [0.0, 0.0])]
    strict = plan(waypoints, path=tolerances(0.05), goal=tolerances(0.01, 0.02), goal_time=0.5)
    motion = TrajectoryMotion(strict, state(0.0), np.zeros(NV), LIMITS)
    q = np.zeros(NV)
    q[INDICES] = [0.1, 0.05]  # the reference is at 0.1, 0.05 halfway: error 0
    halfway = state(0.5, q)
    assert motion.judge(halfway, motion.sample(halfway)).state is None
    lagging = state(0.5)  # 0.1 rad behind on joint1
    verdict = motion.judge(lagging, motion.sample(lagging))
    assert verdict.state == PATH_TOLERANCE_VIOLATED and "joint1 position" in verdict.message
    arrived = np.zeros(NV)
    arrived[INDICES] = [0.195, 0.1]
    there = state(1.1, arrived)
    assert motion.judge(there, motion.sample(there)).state == "succeeded"
    moving = np.zeros(NV)
    moving[INDICES] = [0.05, 0.0]  # above the 0.02 rad/s goal velocity tolerance
    still_moving = state(1.1, arrived, moving)
    assert motion.judge(still_moving, motion.sample(still_moving)).state is None
    short = state(1.4, np.zeros(NV))
    assert motion.judge(short, motion.sample(short)).state is None
    late = state(1.6, np.zeros(NV))
    verdict = motion.judge(late, motion.sample(late))
    assert verdict.state == GOAL_TOLERANCE_VIOLATED and "goal_time 0.5" in verdict.message
    patient = TrajectoryMotion(
        plan(waypoints, goal=tolerances(0.01)), state(0.0), np.zeros(NV), LIMITS
    )
    never = state(100.0, np.zeros(NV))
    assert patient.judge(never, patient.sample(never)).state is None


def test_motions_follow_a_trajectory_to_success_and_hold_the_measured_position_on_violation():
    """In Motions: a trajectory preempts a running joint motion (PREEMPTED), runs, succeeds at
    its end within tolerance and holds its last point; a second one that violates its path
    tolerance ends PATH_TOLERANCE_VIOLATED with the message and holds the measured position."""
    motions = Motions(LIMITS)
    motions.reference(state(0.0))
    motions.start(MotionRequest(1, np.array([0]), np.array([0.5]), 1.0), state(0.0))
    motions.reference(state(0.1))
    waypoints = [point(0.5, [0.1, 0.0], [0.0, 0.0])]
    motions.start_trajectory(TrajectoryRequest(2, plan(waypoints)), state(0.1))
    assert motions.status(1).state == PREEMPTED
    assert motions.status(2).state == RUNNING
    q = np.zeros(NV)
    q[INDICES] = [0.1, 0.0]
    reference = motions.reference(state(0.7, q))
    assert motions.status(2).state == SUCCEEDED
    assert np.allclose(reference.q[INDICES], [0.1, 0.0])
    assert np.allclose(motions.reference(state(0.8, q)).q[INDICES], [0.1, 0.0])
    tight = plan([point(0.5, [0.3, 0.0], [0.0, 0.0])], path=tolerances(1e-3))
    motions.start_trajectory(TrajectoryRequest(3, tight), state(0.8, q))
    measured = q.copy()
    measured[INDICES[1]] = 0.02  # joint2 pushed 20 mrad off
    motions.reference(state(0.9, measured))
    status = motions.status(3)
    assert status.state == PATH_TOLERANCE_VIOLATED and "joint2 position" in status.message
    held = motions.reference(state(1.0, measured))
    assert np.allclose(held.q[INDICES], measured[INDICES]) and not held.v.any()
