"""The joint jog servo without ROS (``references/joint_jog.py``): message checks, bounded
acceleration, braking before the joint range's ends, the halt from the measured state."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import home_configuration, new_robot_model

from ct_controllers.references.joint_jog import (
    JOINT_BOUND,
    JogServo,
    check_jog_values,
)
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.references.limit_approach import LimitApproach
from ct_controllers.references.servo import (
    FUTURE,
    HALTING_NO_COMMAND,
    JOINT,
    NO_WARNING,
    NOT_FINITE,
    STALE,
    UNSUPPORTED,
    ServoParameters,
    StreamError,
)
from ct_controllers.types import JointReference, JointState

DT = 0.001  # [s]
PARAMS = ServoParameters()
MODEL = new_robot_model()
HOME = home_configuration(MODEL)
J1 = MODEL.q_index("joint1")
J4 = MODEL.q_index("joint4")


def limits() -> JointLimits:
    n = MODEL.nv
    approach = LimitApproach(
        MODEL.limits.lower, MODEL.limits.upper, np.full(n, 0.005), np.full(n, math.inf)
    )
    return JointLimits(np.full(n, 1.0), np.full(n, 2.0), np.full(n, 50.0), approach)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"names": ["joint1", "nope"], "velocities": [0.1, 0.1]}, JOINT),
        ({"names": ["joint1", "joint1"], "velocities": [0.1, 0.1]}, JOINT),
        ({"names": ["joint1"], "velocities": [0.1, 0.2]}, JOINT),
        ({"names": ["joint1"], "velocities": [math.nan]}, NOT_FINITE),
        ({"names": ["joint1"], "velocities": [], "displacements": [0.1]}, UNSUPPORTED),
        ({"stamp": 9.5}, STALE),
        ({"stamp": 10.5}, FUTURE),
    ],
)
def test_each_kind_of_bad_jog_is_refused_with_its_reason(fields, reason) -> None:
    """Unknown or duplicate names, lengths that disagree, NaN, displacements alone (not
    served), a stale or future stamp: each refused with its reason."""
    given = {"names": ["joint1"], "velocities": [0.1], "displacements": [], "stamp": 0.0}
    given.update(fields)
    with pytest.raises(StreamError) as refused:
        check_jog_values(
            MODEL,
            given["names"],
            given["velocities"],
            given["displacements"],
            given["stamp"],
            10.0,
            PARAMS,
        )
    assert refused.value.reason == reason


def run(servo, ticks, t0, q=HOME, v=None, reference=None):
    v = np.zeros(MODEL.nv) if v is None else v
    reference = JointReference.hold(HOME) if reference is None else reference
    return [servo.update(JointState(t0 + i * DT, q, v), reference, DT) for i in range(ticks)]


def test_a_jog_ramps_within_the_limits_and_its_end_halts_from_the_measured_state() -> None:
    """joint1 jogged at 3 rad/s: its reference velocity ramps at the reference acceleration
    (2 rad/s²) to the velocity limit (1 rad/s), the other joints hold; when the jog goes stale
    joint1 restarts from its measured position and velocity and decelerates at no more than
    the reference acceleration to rest."""
    servo = JogServo(PARAMS, limits())
    jog, _ = check_jog_values(MODEL, ["joint1"], [3.0], [], 0.0, 0.0, PARAMS)
    out = []
    for k in range(12):  # 0.6 s fresh
        servo.offer(jog, k * 0.05, 0.0)
        out += run(servo, 50, k * 0.05)
    v1 = np.array([r.v[J1] for r in out])
    assert v1.max() == pytest.approx(1.0)
    assert np.abs(np.diff(v1)).max() <= 2.0 * DT + 1e-12
    assert all(np.allclose(r.q[J4], HOME[J4]) for r in out)
    assert servo.status.code == NO_WARNING
    measured = HOME.copy()
    measured[J1] += 0.3
    moving = np.zeros(MODEL.nv)
    moving[J1] = 0.8
    halt = run(servo, 600, 0.7, q=measured, v=moving)
    assert halt[0].q[J1] == pytest.approx(measured[J1] + (0.8 - 2.0 * DT) * DT)
    speeds = np.array([r.v[J1] for r in halt])
    assert np.abs(np.diff(speeds)).max() <= 2.0 * DT + 1e-12
    assert speeds[-1] == 0.0
    assert servo.status.code == HALTING_NO_COMMAND


def test_a_loop_that_skips_ticks_still_jogs_at_the_commanded_speed_in_time() -> None:
    """joint1 jogged at 0.3 rad/s, updated with states 2 periods apart (a loop that skipped
    every other tick): its reference advances 0.3 rad/s × the time elapsed (0.3 · 0.4 s after
    0.5 s of ramp and cruise, to 1e-9), not 0.3 × ticks × period (half that); after a stall of
    50 periods a tick advances it by no more than 3 periods' worth."""
    servo = JogServo(PARAMS, limits())
    jog, _ = check_jog_values(MODEL, ["joint1"], [0.3], [], 0.0, 0.0, PARAMS)
    hold = JointReference.hold(HOME)
    zero = np.zeros(MODEL.nv)
    q = {}
    for i in range(501):  # t = 0 .. 1.0 s, every 2 ms
        t = 2 * i * DT
        servo.offer(jog, t, 0.0)
        q[round(t, 6)] = servo.update(JointState(t, HOME, zero), hold, DT).q[J1]
    assert q[1.0] - q[0.6] == pytest.approx(0.3 * 0.4, abs=1e-9)
    servo.offer(jog, 1.05, 0.0)
    after = servo.update(JointState(1.05, HOME, zero), hold, DT).q[J1]
    assert after - q[1.0] == pytest.approx(0.3 * 3 * DT, abs=1e-9)


def test_a_jog_toward_a_limit_stops_the_margin_inside_it() -> None:
    """joint4 jogged toward its upper limit: the reference stops at the limit less the 5 mrad
    margin (never past it), decelerating within the reference acceleration, and the status says
    it is braking at a joint limit."""
    servo = JogServo(PARAMS, limits())
    jog, _ = check_jog_values(MODEL, ["joint4"], [1.0], [], 0.0, 0.0, PARAMS)
    upper = MODEL.limits.upper[J4]
    out = []
    codes = set()
    for k in range(100):  # 5 s: more than enough to reach it
        servo.offer(jog, k * 0.05, 0.0)
        out += run(servo, 50, k * 0.05)
        codes.add(servo.status.code)
    q4 = np.array([r.q[J4] for r in out])
    assert q4.max() <= upper - 0.005 + 1e-9
    assert q4[-1] == pytest.approx(upper - 0.005, abs=1e-3)
    assert np.abs(np.diff([r.v[J4] for r in out])).max() <= 2.0 * DT + 1e-12
    assert JOINT_BOUND in codes
