"""The streamed-target servo without ROS (``references/servo.py``): message checks, staleness,
the halt's bounded deceleration from the measured state, singularity scaling, bounded steps."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from ct_controllers.references.servo import (
    DECELERATE_FOR_SINGULARITY,
    FAR,
    FRAME,
    FUTURE,
    HALT_FOR_SINGULARITY,
    HALTING_NO_COMMAND,
    NO_WARNING,
    NOT_FINITE,
    QUATERNION,
    STALE,
    Servo,
    ServoParameters,
    StreamError,
    check_pose_values,
    check_twist_values,
    manipulability,
    singularity_scale,
)

DT = 0.001  # [s]
PARAMS = ServoParameters()
START = np.eye(4)
START[:3, 3] = (0.5, 0.0, 0.4)
ALIGNED = (0.0, 0.0, 0.0, 1.0)  # x y z w


def check(frame="base_link", stamp=0.0, position=(0.5, 0.0, 0.4), quaternion=ALIGNED, now=10.0):
    return check_pose_values(
        frame, stamp, position, quaternion, now, "base_link", "tcp", START, PARAMS
    )


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"frame": "world"}, FRAME),
        ({"frame": ""}, FRAME),
        ({"stamp": 9.85}, STALE),  # 0.15 s old > 0.1 s
        ({"stamp": 10.05}, FUTURE),  # 0.05 s ahead > 0.02 s
        ({"position": (math.nan, 0.0, 0.4)}, NOT_FINITE),
        ({"quaternion": (0.0, 0.0, math.inf, 1.0)}, NOT_FINITE),
        ({"position": (1e3, 0.0, 0.0)}, FAR),
        ({"quaternion": (0.0, 0.0, 0.0, 0.9)}, QUATERNION),
        ({"quaternion": (0.0, 0.0, 0.0, 0.0)}, QUATERNION),
    ],
)
def test_each_kind_of_bad_message_is_refused_with_its_reason(kwargs, reason) -> None:
    """A wrong frame, a stamp older than incoming_command_timeout or beyond the future
    tolerance, a non-finite value, a position out of reach and a non-unit quaternion are each
    refused with their own reason (the key they are counted under)."""
    with pytest.raises(StreamError) as refused:
        check(**kwargs)
    assert refused.value.reason == reason


def test_good_messages_become_base_frame_poses() -> None:
    """A fresh base-frame message is its pose (age from its stamp; stamp 0 is now, age 0); a
    TCP-frame one is relative to the measured TCP pose."""
    pose, age = check(stamp=9.95)
    assert age == pytest.approx(0.05)
    np.testing.assert_allclose(pose, START)
    assert check(stamp=0.0)[1] == 0.0
    half_turn = (0.0, 0.0, math.sin(0.25), math.cos(0.25))  # 0.5 rad about z
    pose, _ = check(frame="tcp", position=(0.0, 0.1, 0.0), quaternion=half_turn)
    np.testing.assert_allclose(pose[:3, 3], START[:3, 3] + (0.0, 0.1, 0.0))
    np.testing.assert_allclose(pose[:3, :3], pin.rpy.rpyToMatrix(0.0, 0.0, 0.5), atol=1e-12)


def run(servo, ticks, t0, pose=START, twist=None, measure=1.0):
    """``ticks`` servo updates from ``t0`` [s] at a fixed measured state; the outputs."""
    twist = np.zeros(6) if twist is None else twist
    return [servo.update(t0 + i * DT, pose, twist, measure, DT) for i in range(ticks)]


def test_a_fresh_target_is_approached_at_bounded_speed_and_acceleration() -> None:
    """A target 10 cm away: the commanded pose moves toward it, its speed never above
    max_linear_speed nor changing faster than max_linear_acceleration, each step at most
    v_max · dt, and it arrives without overshoot."""
    servo = Servo(PARAMS)
    target = START.copy()
    target[:3, 3] += (0.1, 0.0, 0.0)
    outputs = []
    t = 0.0
    for _ in range(20):  # a target refreshed every 50 ms for 1 s
        servo.offer(target, t, 0.0)
        outputs += run(servo, 50, t)
        t += 0.05
    speeds = np.array([np.linalg.norm(o.twist[:3]) for o in outputs])
    positions = np.array([o.pose[0, 3] for o in outputs])
    assert speeds.max() <= PARAMS.max_linear_speed + 1e-12
    assert np.abs(np.diff(speeds)).max() <= PARAMS.max_linear_acceleration * DT + 1e-12
    assert np.abs(np.diff(positions)).max() <= PARAMS.max_linear_speed * DT + 1e-12
    assert positions.max() <= target[0, 3] + 1e-9
    assert positions[-1] == pytest.approx(target[0, 3], abs=1e-4)
    assert servo.status.code == NO_WARNING


def test_no_fresh_target_halts_from_the_measured_state_with_bounded_deceleration() -> None:
    """When the stream goes quiet the commanded pose restarts from the measured TCP pose and
    twist (not the last target, not the commanded pose) and decelerates at no more than
    max_linear_acceleration to rest, then holds; the status says so."""
    servo = Servo(PARAMS)
    far = START.copy()
    far[:3, 3] += (1.0, 0.0, 0.0)
    servo.offer(far, 0.0, 0.0)
    run(servo, 100, 0.0)  # fresh for 0.1 s: moving toward a target 1 m away
    measured = START.copy()
    measured[:3, 3] += (0.002, 0.0, 0.0)
    moving = np.array([0.2, 0.0, 0.0, 0.0, 0.0, 0.0])  # [m/s] the measured TCP velocity
    halt = run(servo, 400, 0.1001, pose=measured, twist=moving)
    first = halt[0]
    braked = moving[:3] * (1.0 - PARAMS.max_linear_acceleration * DT / 0.2)  # one tick's
    assert np.linalg.norm(first.pose[:3, 3] - (measured[:3, 3] + braked * DT)) < 1e-12
    speeds = np.array([np.linalg.norm(o.twist[:3]) for o in halt])
    assert np.all(np.diff(speeds) <= 1e-12)  # never speeds up
    assert np.abs(np.diff(speeds)).max() <= PARAMS.max_linear_acceleration * DT + 1e-12
    stop_time = 0.2 / PARAMS.max_linear_acceleration
    at_rest = int(np.argmax(speeds == 0.0))
    assert speeds[-1] == 0.0 and at_rest * DT == pytest.approx(stop_time, abs=2 * DT)
    travel = halt[-1].pose[0, 3] - measured[0, 3]
    assert travel == pytest.approx(0.2**2 / (2 * PARAMS.max_linear_acceleration), rel=0.02)
    assert servo.status.code == HALTING_NO_COMMAND and "holding" in servo.status.message
    codes = [s.code for s in servo.take_statuses()]
    assert codes[-2:] == [HALTING_NO_COMMAND, HALTING_NO_COMMAND]  # halting, then holding


def test_a_message_aged_on_arrival_expires_sooner() -> None:
    """A target that arrives 0.08 s old is fresh for the 0.02 s left of the timeout only."""
    servo = Servo(PARAMS)
    target = START.copy()
    target[:3, 3] += (0.05, 0.0, 0.0)
    servo.offer(target, 1.0, 0.08)
    run(servo, 1, 1.0)
    assert servo.status.code == NO_WARNING
    run(servo, 1, 1.019)
    assert servo.status.code == NO_WARNING
    run(servo, 1, 1.021)
    assert servo.status.code == HALTING_NO_COMMAND


def test_near_a_singularity_the_speed_is_scaled_then_stopped() -> None:
    """The scale is 1 above the slowdown threshold, linear between the thresholds, 0 below the
    stop threshold; the commanded speed is bounded by scale · v_max at every tick (0 below the
    stop threshold, at once), and the status names the reason."""
    assert singularity_scale(0.05, PARAMS) == 1.0
    middle = (PARAMS.singularity_slowdown + PARAMS.singularity_stop) / 2
    assert singularity_scale(middle, PARAMS) == pytest.approx(0.5)
    assert singularity_scale(PARAMS.singularity_stop * 0.9, PARAMS) == 0.0
    assert singularity_scale(math.nan, PARAMS) == 0.0
    target = START.copy()
    target[:3, 3] += (0.5, 0.0, 0.0)
    servo = Servo(PARAMS)
    servo.offer(target, 0.0, 0.0)
    out = run(servo, 90, 0.0, measure=middle)
    assert max(np.linalg.norm(o.twist[:3]) for o in out) <= 0.5 * PARAMS.max_linear_speed + 1e-12
    assert servo.status.code == DECELERATE_FOR_SINGULARITY
    servo.offer(target, 0.09, 0.0)  # fresh on: the stop is the singularity's, not staleness
    out = run(servo, 90, 0.09, measure=PARAMS.singularity_stop / 2)
    assert all(not o.twist.any() for o in out)  # at once: the singularity's bound, not a_max's
    assert servo.status.code == HALT_FOR_SINGULARITY


def test_manipulability_is_the_product_of_singular_values() -> None:
    """√det(J Jᵀ) = ∏σᵢ, and (to rounding) 0 for a rank-deficient Jacobian."""
    rng = np.random.default_rng(3)
    jacobian = rng.normal(size=(6, 7))
    assert manipulability(jacobian) == pytest.approx(np.prod(np.linalg.svd(jacobian)[1]))
    jacobian[5] = jacobian[4]
    assert manipulability(jacobian) == pytest.approx(0.0, abs=1e-5)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("incoming_command_timeout", 0.0, "incoming_command_timeout"),
        ("max_linear_speed", -1.0, "max_linear_speed"),
        ("singularity_stop", 0.05, "must be below"),
    ],
)
def test_bad_parameters_are_refused_naming_them(field, value, words) -> None:
    """A parameter out of its range, or thresholds in the wrong order, is a ValueError naming
    it."""
    with pytest.raises(ValueError, match=words):
        ServoParameters(**{field: value})


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"frame": "world"}, FRAME),
        ({"stamp": 9.8}, STALE),
        ({"stamp": 10.5}, FUTURE),
        ({"linear": (math.nan, 0.0, 0.0)}, NOT_FINITE),
        ({"angular": (0.0, math.inf, 0.0)}, NOT_FINITE),
    ],
)
def test_each_kind_of_bad_twist_is_refused_with_its_reason(kwargs, reason) -> None:
    """A twist in another frame, stale, from the future or non-finite is refused with its
    reason."""
    given = {"frame": "base_link", "stamp": 0.0, "linear": (0.1, 0.0, 0.0)}
    given.update(kwargs)
    with pytest.raises(StreamError) as refused:
        check_twist_values(
            given["frame"],
            given["stamp"],
            given["linear"],
            given.get("angular", (0.0, 0.0, 0.0)),
            10.0,
            "base_link",
            "tcp",
            PARAMS,
        )
    assert refused.value.reason == reason


def test_a_twist_is_integrated_within_the_bounds_in_base_or_tcp_axes() -> None:
    """A fresh twist of 0.1 m/s along x moves the commanded pose at that speed once the
    acceleration bound lets it (0.1 s at 1 m/s²); a twist faster than max_linear_speed is
    scaled down to it; in TCP axes it is turned by the commanded TCP's rotation (a TCP turned
    90° about z moves along base y for a TCP-x twist)."""
    servo = Servo(PARAMS)
    twist, tcp_axes, _ = check_twist_values(
        "base_link", 0.0, (0.1, 0.0, 0.0), (0.0, 0.0, 0.0), 10.0, "base_link", "tcp", PARAMS
    )
    out = []
    for k in range(5):
        servo.offer_twist(twist, tcp_axes, k * 0.05, 0.0)
        out += run(servo, 50, k * 0.05)
    assert out[-1].twist[:3] == pytest.approx([0.1, 0.0, 0.0])
    steps = np.abs(np.diff([o.twist[0] for o in out]))
    assert steps.max() <= PARAMS.max_linear_acceleration * DT + 1e-12
    travelled = out[-1].pose[0, 3] - START[0, 3]
    assert travelled == pytest.approx(0.1 * 0.25 - 0.1**2 / 2, abs=2e-4)  # ramp, then cruise

    fast = Servo(PARAMS)
    for k in range(20):
        fast.offer_twist(np.array([3.0, 4.0, 0.0, 0.0, 0.0, 0.0]), False, k * 0.05, 0.0)
        final = run(fast, 50, k * 0.05)[-1]
    assert np.linalg.norm(final.twist[:3]) == pytest.approx(PARAMS.max_linear_speed)

    turned = START.copy()
    turned[:3, :3] = pin.rpy.rpyToMatrix(0.0, 0.0, math.pi / 2)
    servo = Servo(PARAMS)
    for k in range(4):
        servo.offer_twist(np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0]), True, k * 0.05, 0.0)
        last = run(servo, 50, k * 0.05, pose=turned)[-1]
    assert last.twist[:3] == pytest.approx([0.0, 0.1, 0.0], abs=1e-12)


def test_a_loop_that_skips_ticks_still_moves_the_pose_at_the_twist_in_time() -> None:
    """A 0.05 m/s twist along x, updated at states 2 periods apart (a loop that skipped every
    other tick): once at speed the commanded pose advances 0.05 m/s × the time elapsed (over
    0.4 s, to 1e-9), not × ticks × period (half that)."""
    servo = Servo(PARAMS)
    x = {}
    for i in range(501):  # t = 0 .. 1.0 s, every 2 ms
        t = 2 * i * DT
        servo.offer_twist(np.array([0.05, 0.0, 0.0, 0.0, 0.0, 0.0]), False, t, 0.0)
        x[round(t, 6)] = servo.update(t, START, np.zeros(6), 1.0, DT).pose[0, 3]
    assert x[1.0] - x[0.6] == pytest.approx(0.05 * 0.4, abs=1e-9)
