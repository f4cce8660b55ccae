"""ct_controllers.controllers.gripper: a finger servo whose force saturates at the limit."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from helpers import bundled_description, new_robot_model

from ct_controllers.controllers.controller import JointReference, JointState
from ct_controllers.controllers.gripper import GripperController
from ct_controllers.references.limit_approach import FINGER_LIMIT_MARGIN

FINGERS = ("left_finger_joint", "right_finger_joint")


def _state(model, q_fingers, v_fingers=(0.0, 0.0)):  # type: ignore[no-untyped-def]
    q = np.array([0.0, 0.4, 0.0, -1.6, 0.0, 1.2, 0.0, 0.0, 0.0])
    v = np.zeros(model.nv)
    index = model.indices(FINGERS)
    q[index], v[index] = q_fingers, v_fingers
    return JointState(0.0, q, v)


def test_a_blocked_finger_pushes_with_exactly_the_force_limit() -> None:
    """A finger held at 24 mm (blocked by the object) while its servo reference runs toward
    closed pushes with exactly the limit once the reference is 7.5 mm past it (K = 2000 N/m),
    with the sign that closes it."""
    model = new_robot_model()
    gripper = GripperController(model, FINGERS, speed=0.1)
    state = _state(model, (0.024, 0.024))
    efforts = [
        gripper.compute(state, np.zeros(2), np.array([15.0, 15.0]), 0.001) for _ in range(100)
    ]
    np.testing.assert_allclose(efforts[-1], [-15.0, -15.0])
    assert abs(efforts[10][0]) < 15.0  # not yet: the reference moves at 0.1 m/s


def test_the_servo_reference_moves_at_the_set_speed() -> None:
    """The reference starts on the measured opening and moves toward the target by at most
    speed × dt per tick, so a free finger is pulled along at that speed, not slammed."""
    model = new_robot_model()
    gripper = GripperController(model, FINGERS, stiffness=2000.0, damping=0.0, speed=0.05)
    state = _state(model, (0.04, 0.04))
    gravity = new_robot_model().gravity(state.q)[model.indices(FINGERS)]
    for tick in range(1, 6):
        effort = gripper.compute(state, np.zeros(2), np.array([40.0, 40.0]), 0.002)
        np.testing.assert_allclose(effort, -2000.0 * 0.05 * 0.002 * tick + gravity)


def test_near_the_target_it_is_a_spring_damper_plus_gravity() -> None:
    """Within the force limit, once the reference has reached a nearby target, the law is
    K (q* − q) − D v + g, with g from an independent model."""
    model = new_robot_model()
    gripper = GripperController(model, FINGERS, stiffness=2000.0, damping=20.0)
    state = _state(model, (0.020, 0.021), (0.01, -0.02))
    target = np.array([0.0205, 0.0205])
    gravity = new_robot_model().gravity(state.q)[model.indices(FINGERS)]
    expected = 2000.0 * (target - np.array([0.020, 0.021])) - 20.0 * np.array([0.01, -0.02])
    for _ in range(10):  # 1 mm at 0.1 m/s: the reference is on the target
        effort = gripper.compute(state, target, np.array([40.0, 40.0]), 0.001)
    np.testing.assert_allclose(effort, expected + gravity)


def test_the_limit_is_capped_by_the_urdf_and_bad_limits_mean_zero() -> None:
    """A limit above the URDF effort is capped at it; a NaN or negative limit gives no force."""
    model = new_robot_model()
    gripper = GripperController(model, FINGERS)
    state = _state(model, (0.04, 0.04))
    for _ in range(400):  # let the reference run 4 cm past the fingers
        effort = gripper.compute(state, np.full(2, -1.0), np.array([1000.0, np.nan]), 0.001)
    assert effort[0] == pytest.approx(-model.limits.effort[model.q_index(FINGERS[0])])
    assert effort[1] == 0.0
    limited = gripper.compute(state, np.zeros(2), np.array([-5.0, -5.0]), 0.001)
    assert limited.tolist() == [0.0, 0.0]


def test_bad_gains_and_unknown_fingers_are_rejected() -> None:
    """Negative gains raise ValueError naming them; an unknown joint names itself."""
    model = new_robot_model()
    with pytest.raises(ValueError, match="stiffness"):
        GripperController(model, FINGERS, stiffness=-1.0)
    with pytest.raises(KeyError, match="thumb"):
        GripperController(model, ("thumb",))


@pytest.mark.parametrize("target", [0.0, 0.0205, 0.06, np.nan])
def test_compute_into_writes_what_compute_returns_and_fills_the_reference(target) -> None:
    """compute_into (a chain's: model-order efforts, finger values as floats) writes on the
    fingers bit for bit what compute returns, leaves the other joints as they were, and fills
    the reference as fill_reference does — tick after tick, NaN target and limit included, and
    a target outside the fingers' range taken 0.5 mm inside it."""
    model = new_robot_model()
    state = _state(model, (0.020, 0.021), (0.01, -0.02))
    mine, twin = GripperController(model, FINGERS), GripperController(model, FINGERS)
    index = model.indices(FINGERS)
    arm = np.setdiff1d(np.arange(model.nv), index)
    gravity = model.gravity(state.q)[index].tolist()
    maximum = model.limits.effort[index].tolist()
    servo = state.q[index].tolist()  # r, written out: the law with Python's min and max
    step = 0.1 * 0.001  # speed [m/s] · dt [s]
    # The target within the margin of the fingers' range (a NaN stays NaN, as in max(nan, x)).
    low, high = model.limits.lower[index] + 0.0005, model.limits.upper[index] - 0.0005
    for limit in (40.0, 5.0, np.nan, -1.0):
        effort = np.linspace(-3.0, 3.0, model.nv)
        before = effort.copy()
        reference = JointReference(
            q=np.full(model.nv, 0.5), v=np.full(model.nv, 0.25), a=np.full(model.nv, 0.125)
        )
        twin_reference = JointReference(reference.q.copy(), reference.v.copy(), reference.a.copy())
        mine.compute_into(effort, state, [target] * 2, [limit] * 2, 0.001, reference=reference)
        expected = twin.compute(state, np.full(2, target), np.full(2, limit), 0.001)
        twin.fill_reference(twin_reference)
        assert effort[index].tobytes() == expected.tobytes()
        law = []
        for i in range(2):
            goal = min(max(target, low[i]), high[i])
            servo[i] += min(max(goal - servo[i], -step), step)
            tau = 2000.0 * (servo[i] - state.q[index[i]]) - 20.0 * state.v[index[i]] + gravity[i]
            bound = min(limit if limit > 0.0 else 0.0, maximum[i])
            law.append(max(min(tau, bound), -bound))
        assert expected.tobytes() == np.array(law).tobytes()
        assert effort[arm].tobytes() == before[arm].tobytes()
        for name in ("q", "v", "a"):
            assert getattr(reference, name).tobytes() == getattr(twin_reference, name).tobytes()
        assert mine.reference.tobytes() == twin.reference.tobytes()
        assert mine.reference_velocity.tobytes() == twin.reference_velocity.tobytes()


def test_the_servo_reference_stays_inside_the_fingers_range() -> None:
    """A finger measured 24.5 mm past its upper limit (the issue's soak) and one 2 mm past its
    lower: the servo reference starts on the limits, not on the measured openings, and pushes
    both back in; targets beyond the range are taken ``FINGER_LIMIT_MARGIN`` inside it, and over
    many ticks r never leaves [lower + margin, upper − margin] once inside."""
    model = new_robot_model()
    gripper = GripperController(model, FINGERS)
    lower, upper = gripper.lower, gripper.upper
    state = _state(model, (upper[0] + 0.0245, lower[1] - 0.002))
    effort = gripper.compute(state, np.array([0.06, -0.01]), np.array([20.0, 20.0]), 0.001)
    reference = gripper.reference
    assert reference is not None
    step = gripper.speed * 0.001
    np.testing.assert_allclose(reference, [upper[0] - step, lower[1] + step])
    assert effort[0] < 0.0 < effort[1]  # both pushed back into the range
    for _ in range(100):
        gripper.compute(state, np.array([0.06, -0.01]), np.array([20.0, 20.0]), 0.001)
    np.testing.assert_allclose(
        gripper.reference, [upper[0] - FINGER_LIMIT_MARGIN, lower[1] + FINGER_LIMIT_MARGIN]
    )


def test_the_smallest_controllable_force_is_the_fingers_weight_plus_their_damping() -> None:
    """minimum_effort = m g + D · speed, with the finger's mass read from the URDF text and
    standard gravity here (2.49 N for the bundled fingers with the default gains); a slower or
    less damped servo controls smaller forces."""
    root = ElementTree.fromstring(bundled_description().urdf)
    child = {joint.get("name"): joint.find("child") for joint in root.findall("joint")}
    links = {link.get("name"): link for link in root.findall("link")}
    masses = []
    for name in FINGERS:
        element = child[name]
        assert element is not None
        inertial = links[element.get("link")].find("inertial/mass")
        assert inertial is not None
        masses.append(float(inertial.get("value", "nan")))
    model = new_robot_model()
    gripper = GripperController(model, FINGERS)
    expected = max(masses) * 9.81 + gripper.damping * gripper.speed
    assert gripper.minimum_effort == pytest.approx(expected, rel=1e-12)
    assert gripper.minimum_effort == pytest.approx(2.4905, abs=1e-4)
    slow = GripperController(model, FINGERS, damping=10.0, speed=0.05)
    assert slow.minimum_effort == pytest.approx(max(masses) * 9.81 + 0.5, rel=1e-12)


def test_a_margin_leaving_no_range_is_refused() -> None:
    """A margin of half the fingers' range or more leaves no target: ValueError naming it."""
    with pytest.raises(ValueError, match="margin"):
        GripperController(new_robot_model(), FINGERS, margin=0.02)


def _sampled_finger(stiffness: float, damping: float, mass: float, period: float) -> np.ndarray:
    """A free finger surface of ``mass`` [kg] under the servo's spring-damper toward 0, sampled
    every ``period`` [s] (the force held over the period, the motion integrated exactly in 100
    sub-steps): its speed [m/s] at each sample over 200 periods, from 1 mm out at rest."""
    x, v, speeds = 1e-3, 0.0, []
    step = period / 100
    for _ in range(200):
        force = -stiffness * x - damping * v
        for _ in range(100):
            v += force / mass * step
            x += v * step
        speeds.append(abs(v))
    return np.array(speeds)


@pytest.mark.parametrize("mass", [0.05, 0.03, 0.00323], ids=["bundled", "panda", "so101_jaw"])
def test_finger_gains_sampled_at_the_loop_rate_hold_the_finger(mass: float) -> None:
    """sampled_finger_gains keeps the servo's defaults where the finger's mass holds them at
    1 kHz (the bundled arm's 50 g, the Panda's 30 g) and lowers them for a light jaw (the
    SO-101's 3.2 g at its fingertip). Checked by simulating the sampled loop, not by the
    formula: with the gains it returns the finger settles (its speed after 200 ms below a
    thousandth of its peak); with the defaults the light jaw's motion grows instead."""
    from ct_controllers.controllers.gripper import sampled_finger_gains

    period = 0.001
    stiffness, damping = sampled_finger_gains(2000.0, 20.0, mass, period)
    speeds = _sampled_finger(stiffness, damping, mass, period)
    assert speeds[-1] < 1e-3 * speeds.max()
    if mass >= 0.03:
        assert (stiffness, damping) == (2000.0, 20.0)
    else:
        assert damping < 20.0 and stiffness <= damping**2 / (4 * mass) + 1e-9
        diverging = _sampled_finger(2000.0, 20.0, mass, period)
        assert diverging[-1] > 10 * diverging[:5].max()
