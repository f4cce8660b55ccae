"""ct_controllers.runtime.motion_requests on its own (no loop, no backend): the request check,
the statuses a motion goes through, the bounded history, and the reference the motions give."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import new_robot_model

from ct_controllers.controllers.controller import JointState
from ct_controllers.references.joint_trajectory import (
    MAX_DURATION,
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)
from ct_controllers.references.limit_approach import LimitApproach
from ct_controllers.runtime import motion_requests
from ct_controllers.runtime.motion_requests import (
    CANCELED,
    FAILED,
    PREEMPTED,
    RUNNING,
    SUCCEEDED,
    MotionHistory,
    MotionRequest,
    Motions,
    MotionStatus,
    checked_motion,
)

MODEL = new_robot_model()
NV = MODEL.nv
LIMITS = JointLimits(
    velocity=np.full(NV, 1.0), acceleration=np.full(NV, 3.0), jerk=np.full(NV, 30.0)
)


def state(stamp: float, q: np.ndarray | None = None) -> JointState:
    q = np.zeros(NV) if q is None else q
    return JointState(stamp=stamp, q=q, v=np.zeros(NV), effort=np.zeros(NV))


def request(motion_id: int, position: float = 0.2, duration: float = 0.5) -> MotionRequest:
    return MotionRequest(motion_id, np.array([0]), np.array([position]), duration)


def test_checked_motion_maps_names_to_model_indices():
    """A valid request comes back as model indices, float positions and the duration."""
    names = list(MODEL.joint_names[:2])
    indices, positions, duration = checked_motion(MODEL, names, [0.1, -0.1], 1)
    assert list(indices) == list(MODEL.indices(names))
    assert positions.dtype == np.float64 and positions.tolist() == [0.1, -0.1]
    assert duration == 1.0 and isinstance(duration, float)


@pytest.mark.parametrize(
    ("names", "positions", "duration", "words"),
    [
        (["no_such_joint"], [0.0], 0.0, "no_such_joint"),
        ([0, 0], [0.0, 0.0], 0.0, "listed twice"),
        ([0], [0.0, 0.1], 0.0, "1 joint names but 2 positions"),
        ([0], [float("nan")], 0.0, "non-finite"),
        ([0], [100.0], 0.0, "outside the joint limits"),
        ([0], [0.0], -1.0, "duration"),
        ([0], [0.0], MAX_DURATION * 2, "duration"),
    ],
)
def test_checked_motion_refuses_with_a_message_naming_the_problem(
    names, positions, duration, words
):
    """Unknown or duplicate names, a length mismatch, non-finite or out-of-limit positions and
    a duration outside [0, MAX_DURATION] raise ValueError saying which."""
    names = [MODEL.joint_names[n] if isinstance(n, int) else n for n in names]
    with pytest.raises(ValueError, match=words):
        checked_motion(MODEL, names, positions, duration)


def test_more_names_than_joints_is_refused_before_anything_scales_with_it():
    """A request naming more joints than the robot has is refused on its length alone."""
    with pytest.raises(ValueError, match="joint names; the robot has"):
        checked_motion(MODEL, ["x"] * (NV + 1), [0.0] * (NV + 1), 0.0)


def test_a_status_moved_on_reports_its_progress_within_0_and_1():
    """progress = elapsed / duration clamped to [0, 1]; 1 for a motion without duration."""
    status = MotionStatus(7, RUNNING, 10.0, 2.0, 0.0)
    assert status.moved_to(RUNNING, 11.0).progress == pytest.approx(0.5)
    assert status.moved_to(SUCCEEDED, 13.0).progress == 1.0
    assert status.moved_to(RUNNING, 9.0).progress == 0.0
    assert MotionStatus(8, RUNNING, 0.0, 0.0, 0.0).moved_to(SUCCEEDED, 0.0).progress == 1.0
    moved = status.moved_to(PREEMPTED, 11.0)
    assert (moved.motion_id, moved.state, moved.start_time, moved.duration) == (
        7,
        PREEMPTED,
        10.0,
        2.0,
    )


def test_the_history_keeps_the_latest_status_of_the_last_motions_only():
    """A newer status of a motion replaces its older one; beyond ``size`` motions the oldest
    is forgotten first."""
    history = MotionHistory(size=3)
    for motion_id in range(1, 5):
        history.record(MotionStatus(motion_id, RUNNING, 0.0, 1.0, 0.0))
    history.record(MotionStatus(2, SUCCEEDED, 0.0, 1.0, 1.0))
    assert history.get(1) is None
    status = history.get(2)
    assert status is not None and status.state == SUCCEEDED
    assert history.get(4) is not None


def test_the_history_is_read_safely_while_written():
    """Readers on other threads never see an error while the control thread records."""
    history = MotionHistory(size=4)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(20000):
                history.get(3)
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    for motion_id in range(20000):
        history.record(MotionStatus(motion_id, RUNNING, 0.0, 1.0, 0.0))
    reader.join()
    assert errors == []


def test_before_any_motion_the_first_measured_position_is_held():
    """The reference holds the first measured q (and keeps it for later states)."""
    motions = Motions(LIMITS)
    first = np.linspace(-0.1, 0.1, NV)
    held = motions.reference(state(0.0, first))
    assert np.array_equal(held.q, first) and not held.v.any()
    assert np.array_equal(motions.reference(state(0.1)).q, first)
    assert motions.current is None and motions.trajectory is None


def test_a_motion_runs_then_succeeds_and_its_goal_is_held():
    """A started motion is RUNNING with the planned duration, SUCCEEDED at its end, and the
    goal (the named joint moved, the others kept) is held afterwards."""
    motions = Motions(LIMITS)
    motions.start(request(1, 0.2), state(0.0))
    status = motions.current
    assert status is not None and status.state == RUNNING and status.duration >= 0.5
    assert motions.trajectory is not None
    middle = motions.status(1)
    assert middle is not None and middle.state == RUNNING
    motions.reference(state(status.duration / 2))
    assert 0.0 < motions.current.progress < 1.0  # type: ignore[union-attr]
    end = motions.reference(state(status.duration + 0.01))
    assert motions.status(1).state == SUCCEEDED  # type: ignore[union-attr]
    assert motions.trajectory is None
    goal = np.zeros(NV)
    goal[0] = 0.2
    assert np.allclose(end.q, goal)
    assert np.allclose(motions.reference(state(5.0)).q, goal)


def test_a_newer_motion_preempts_and_a_stop_cancels():
    """start() while a motion runs ends it PREEMPTED; stop() ends the new one CANCELED and
    holds where the stop ends."""
    motions = Motions(LIMITS)
    motions.start(request(1, 0.2), state(0.0))
    motions.start(request(2, -0.2), state(0.1))
    assert motions.status(1).state == PREEMPTED  # type: ignore[union-attr]
    assert motions.status(2).state == RUNNING  # type: ignore[union-attr]
    motions.stop(state(0.2))
    assert motions.status(2).state == CANCELED  # type: ignore[union-attr]
    assert motions.trajectory is not None  # at rest already: a stop of no length
    rest = motions.reference(state(10.0))
    assert np.allclose(rest.q, 0.0)


def test_no_trajectory_within_the_limits_fails_the_motion_and_holds_the_measured_position(
    monkeypatch,
):
    """A planner raising TrajectoryError: the motion is FAILED with its message and the
    measured q is held; any other exception from the planner propagates."""

    def refusing(*args: object, **kwargs: object) -> JerkLimitedTrajectory:
        raise TrajectoryError("too far for the limits")

    motions = Motions(LIMITS)
    measured = np.full(NV, 0.05)
    monkeypatch.setattr(motion_requests, "JerkLimitedTrajectory", refusing)
    motions.start(request(3), state(1.0, measured))
    status = motions.status(3)
    assert status is not None and status.state == FAILED
    assert status.message == "too far for the limits"
    assert motions.trajectory is None
    assert np.array_equal(motions.reference(state(2.0)).q, measured)

    def buggy(*args: object, **kwargs: object) -> JerkLimitedTrajectory:
        raise RuntimeError("planner bug")

    monkeypatch.setattr(motion_requests, "JerkLimitedTrajectory", buggy)
    with pytest.raises(RuntimeError, match="planner bug"):
        motions.start(request(4), state(3.0))


def test_a_refused_request_and_an_aborted_motion_are_failed():
    """refuse() (requested while faulted) records FAILED; abort() (a fault latched) ends a
    running motion FAILED, drops the trajectory and holds the given position."""
    motions = Motions(LIMITS)
    motions.refuse(request(5), 1.0)
    assert motions.status(5) == MotionStatus(5, FAILED, 1.0, 0.0, 0.0)
    motions.start(request(6), state(2.0))
    hold = np.full(NV, 0.01)
    motions.abort(2.1, hold)
    assert motions.status(6).state == FAILED  # type: ignore[union-attr]
    assert motions.trajectory is None
    assert np.array_equal(motions.reference(state(3.0)).q, hold)


# --- references inside the joint range whatever the measured state (issue 23) -----------------
RANGED = JointLimits(
    velocity=np.full(NV, 1.0),
    acceleration=np.full(NV, 3.0),
    jerk=np.full(NV, 30.0),
    approach=LimitApproach.for_joints(MODEL.limits.lower, MODEL.limits.upper, np.ones(NV, bool)),
)
LOWER, UPPER = MODEL.limits.lower, MODEL.limits.upper


def past_the_limits(stamp: float) -> JointState:
    """Every joint 3 mrad (3 mm) past its lower limit, moving further out at 0.5 rad/s."""
    return JointState(stamp, LOWER - 0.003, np.full(NV, -0.5), np.zeros(NV))


def sampled_references(motions: Motions, start: float, seconds: float) -> np.ndarray:
    state = past_the_limits(start)
    return np.array(
        [
            motions.reference(JointState(t, state.q, state.v, state.effort)).q
            for t in start + np.arange(0.0, seconds, 0.002)
        ]
    )


def test_a_state_past_the_limits_is_held_and_stopped_inside_them():
    """From a measured state past every lower limit and moving further out: the first hold is
    the state clipped onto the limits; a stop brakes inside the range and holds the approach's
    margin inside it; so does a motion's failure hold and an explicit hold of such a
    position."""
    motions = Motions(RANGED)
    first = motions.reference(past_the_limits(0.0))
    np.testing.assert_array_equal(first.q, LOWER)
    motions.stop(past_the_limits(0.1))
    references = sampled_references(motions, 0.1, 3.0)
    assert (references >= LOWER).all() and (references <= UPPER).all()
    np.testing.assert_allclose(references[-1], LOWER + RANGED.approach.margin, atol=1e-7)  # type: ignore[union-attr]
    motions.hold(LOWER - 1.0)
    np.testing.assert_array_equal(motions.reference(past_the_limits(4.0)).q, LOWER)


def test_a_motion_preempting_from_past_a_limit_stays_inside_it():
    """A motion that starts from the measured state past the limits, moving out, towards a
    goal inside: its reference starts on the limits and never leaves the range; the joints it
    does not name go to their held reference, inside too."""
    motions = Motions(RANGED)
    motions.reference(past_the_limits(0.0))
    motions.start(
        MotionRequest(1, np.array([0, 7]), np.array([0.3, 0.02]), 0.0), past_the_limits(0.0)
    )
    assert motions.current is not None and motions.current.state == RUNNING
    references = sampled_references(motions, 0.0, motions.current.duration + 0.5)
    np.testing.assert_allclose(references[0], LOWER, atol=1e-12)
    assert (references >= LOWER).all() and (references <= UPPER).all()
    np.testing.assert_allclose(references[-1][[0, 7]], [0.3, 0.02], atol=1e-9)
