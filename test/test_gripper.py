"""ct_controllers.controllers.gripper: a finger servo whose force saturates at the limit."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from helpers import bundled_description, new_robot_model

from ct_controllers.controllers.controller import JointReference, JointState
from ct_controllers.controllers.gripper import GripperController
from ct_controllers.model.grip_geometry import gripper_geometry
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


def _pressing_gripper(model, stiffness: float = 50.0):  # type: ignore[no-untyped-def]
    """A soft servo (K 50 N/m, D 2 N·s/m: its spring gives 1.2 N at 24 mm) whose fingers are
    held still at 24 mm while their reference runs to closed at 0.1 m/s, for 0.4 s (1 ms
    ticks): (gripper, state, efforts, pressing), the last two per tick."""
    gripper = GripperController(model, FINGERS, stiffness=stiffness, damping=2.0, speed=0.1)
    state = _state(model, (0.024, 0.024))
    efforts, pressing = [], []
    for _ in range(400):
        efforts.append(gripper.compute(state, np.zeros(2), np.array([15.0, 15.0]), 0.001))
        pressing.append(gripper.pressing)
    return gripper, state, efforts, pressing


def test_a_blocked_finger_presses_with_the_force_limit_whatever_its_stiffness() -> None:
    """Fingers held still at 24 mm while the reference runs to closed: a spring-damper (plus
    gravity, from an independent model), a force far below the limit with K 50 N/m, until they
    have been still and more than CONTACT_GAP short of the reference for 2 D / K (80 ms: the
    gap is passed at tick 20, so from tick 101 on); then they press: the force rises from the
    spring's by at most the limit × dt / PRESS_RISE_TIME a tick (never stepping) to exactly
    the limit, closing, and stays there."""
    from ct_controllers.controllers.gripper import CONTACT_GAP, PRESS_RISE_TIME

    model = new_robot_model()
    _, state, efforts, pressing = _pressing_gripper(model)
    gravity = new_robot_model().gravity(state.q)[model.indices(FINGERS)]
    # Tick 50: the reference is 5 mm in (0.1 m/s for 50 ms, from the measured 24 mm).
    np.testing.assert_allclose(efforts[49], 50.0 * (0.019 - 0.024) + gravity, atol=1e-9)
    assert pytest.approx(0.020) == CONTACT_GAP / 0.1  # the gap, at 0.1 m/s: 20 ticks
    first = pressing.index((True, True))
    assert 20 + 80 - 1 <= first <= 20 + 80 + 1, first
    assert not any(any(flags) for flags in pressing[:first])
    assert all(flags == (True, True) for flags in pressing[first:])
    np.testing.assert_allclose(efforts[first - 1], 50.0 * (-0.1 * first * 0.001) + gravity)
    np.testing.assert_allclose(efforts[-1], [-15.0, -15.0])
    steps = np.diff(np.array(efforts)[first - 1 :], axis=0)
    assert np.all(steps <= 1e-12)  # closing ever harder
    # A tick's rise, plus the spring's own on the tick pressing starts (K · speed · dt).
    assert np.all(steps >= -(15.0 * 0.001 / PRESS_RISE_TIME + 50.0 * 0.1 * 0.001) - 1e-9)
    assert np.count_nonzero(np.array(efforts)[:, 0] == -15.0) >= 100  # reached and held


def test_a_pressing_finger_lets_go_when_the_target_moves_or_nothing_blocks_it() -> None:
    """A pressing finger goes back to its spring-damper law when (each alone) its target
    opens again (the reference moves), it moves toward the reference faster than the servo's
    speed (the object gave way), or it comes within half CONTACT_GAP of its reference; a
    finger moving too fast, or still within CONTACT_GAP of its reached reference, does not
    start pressing."""
    from ct_controllers.controllers.gripper import CONTACT_GAP

    model = new_robot_model()
    index = model.indices(FINGERS)
    target = FINGER_LIMIT_MARGIN
    # The target opens: the reference steps 0.1 mm back up, the spring's law, from 0.0006 m.
    gripper, state, _, _ = _pressing_gripper(model)
    gravity = model.gravity(state.q)[index]
    effort = gripper.compute(state, np.full(2, 0.04), np.array([15.0, 15.0]), 0.001)
    np.testing.assert_allclose(effort, 50.0 * (target + 0.0001 - 0.024) + gravity, atol=1e-9)
    assert gripper.pressing == (False, False)
    # Finger 0 closes at 0.2 m/s (the object gave way), finger 1 at 5 mm/s (still pressing:
    # the limit less its damping, plus gravity).
    gripper, state, _, _ = _pressing_gripper(model)
    moving = _state(model, (0.024, 0.024), (-0.2, -0.005))
    effort = gripper.compute(moving, np.zeros(2), np.array([15.0, 15.0]), 0.001)
    assert gripper.pressing == (False, True)
    expected_free = 50.0 * (target - 0.024) + 2.0 * 0.2 + gravity[0]
    assert effort[0] == pytest.approx(expected_free, abs=1e-9)
    assert effort[1] == pytest.approx(-15.0 + 2.0 * 0.005 + gravity[1], abs=1e-9)
    # Within half the gap of the reference: free again.
    gripper, state, _, _ = _pressing_gripper(model)
    near = _state(model, (target + 0.4 * CONTACT_GAP, 0.024))
    gripper.compute(near, np.zeros(2), np.array([15.0, 15.0]), 0.001)
    assert gripper.pressing == (False, True)
    # A fresh servo: finger 0 still 1.5 mm short of its reached reference (within the gap),
    # finger 1 24 mm short but moving at 20 mm/s: neither presses.
    fresh = GripperController(model, FINGERS, stiffness=50.0, damping=2.0, speed=0.1)
    short = _state(model, (target + 0.75 * CONTACT_GAP, 0.024), (0.0, -0.02))
    for _ in range(300):
        fresh.compute(short, np.zeros(2), np.array([15.0, 15.0]), 0.001)
    assert fresh.pressing == (False, False)


def test_a_nan_state_gives_a_nan_effort_while_pressing() -> None:
    """A NaN position or velocity measured while a finger presses gives that finger a NaN
    effort (which the limiter refuses), not the force limit; reset() ends pressing."""
    model = new_robot_model()
    for q, v in (((np.nan, 0.024), (0.0, 0.0)), ((0.024, 0.024), (np.nan, 0.0))):
        gripper, _, _, _ = _pressing_gripper(model)
        effort = gripper.compute(_state(model, q, v), np.zeros(2), np.array([15.0, 15.0]), 0.001)
        assert np.isnan(effort[0]) and effort[1] == pytest.approx(-15.0)
    gripper.reset()
    assert gripper.pressing == (False, False)


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


def test_the_stroke_time_is_each_fingers_travel_between_its_fk_widths_at_the_speed() -> None:
    """Two prismatic fingers of the bundled arm: the stroke time is half the distance the two
    width frames (found from the finger joints) move apart between closed and open (FK), at the
    servo's speed — 0.4 s at 0.1 m/s for its 4 cm fingers; 0 without fingers."""
    model = new_robot_model()
    grip = gripper_geometry(model, FINGERS)
    assert grip is not None
    gripper = GripperController(model, FINGERS, speed=0.05, levers=grip.levers)
    assert gripper.stroke_time == pytest.approx(grip.open_width / 2 / 0.05, rel=1e-9)
    assert GripperController(model, FINGERS).stroke_time == pytest.approx(0.4, rel=1e-9)
    assert GripperController(model, ()).stroke_time == 0.0


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


def _sampled_finger(
    stiffness: float,
    damping: float,
    mass: float,
    period: float,
    delay: int,
    periods: int = 400,
    contact: tuple[float, float] = (0.0, 0.0),
) -> np.ndarray:
    """A finger surface of ``mass`` [kg] under the servo's spring-damper toward 0, sampled
    every ``period`` [s] and applied ``delay`` periods later (the force held over the period,
    the motion integrated in 50 semi-implicit sub-steps), ``contact`` (stiffness [N/m], damping
    [N·s/m]) a spring-damper on it acting continuously (an object it presses; 0: free): its
    speed [m/s] at each sample over ``periods`` periods, from 1 mm out at rest."""
    x, v, speeds = 1e-3, 0.0, []
    samples = [(x, v)] * (delay + 1)
    step = period / 50
    for _ in range(periods):
        measured_x, measured_v = samples[0]
        force = -stiffness * measured_x - damping * measured_v
        for _ in range(50):
            v += (force - contact[0] * x - contact[1] * v) / mass * step
            x += v * step
        samples = [*samples[1:], (x, v)]
        speeds.append(abs(v))
    return np.array(speeds)


def _grows(speeds: np.ndarray) -> bool:
    """The motion grew: ten times its first five periods' peak, or past what floats hold."""
    return bool(not np.all(np.isfinite(speeds)) or speeds[-1] > 10 * speeds[:5].max())


RIG_OBJECT = (2.0e4, 20.0)  # the plant rigs' object contact: [N/m], [N·s/m] per finger


@pytest.mark.parametrize(
    ("mass", "period", "friction"),
    [
        (0.05, 0.001, 0.0),
        (0.03, 0.001, 0.0),
        (0.00323, 0.001, 0.0),
        (0.1326, 0.01, 0.66),
        (1.05, 0.01, 0.5),
    ],
    ids=["bundled", "panda", "so101_jaw", "so101_jaw_on_rig", "bundled_on_rig"],
)
def test_finger_gains_sampled_at_the_loop_rate_hold_the_finger(
    mass: float, period: float, friction: float
) -> None:
    """sampled_finger_gains keeps the servo's defaults where they hold the finger (the bundled
    arm's 50 g fingers at 1 kHz) and lowers them, critically damped, for lighter fingers or a
    slower loop (the Panda's 30 g, the SO-101's jaw: 3.2 g at its fingertip at 1 kHz, 133 g
    with a drive's rotor at 100 Hz; the bundled fingers with theirs, 1.05 kg). Checked by
    simulating the sampled loop, not by the formula: with the gains it returns the finger
    settles — free, with and without a period of delay, and pressing the rigs' object
    (2·10⁴ N/m, 20 N·s/m) with one (its speed after 1000 periods below a thousandth of its
    peak); where lowered, the defaults grow, free × 2 or pressing the object, with a delay."""
    from ct_controllers.controllers.gripper import sampled_finger_gains

    stiffness, damping = sampled_finger_gains(2000.0, 20.0, mass, period, friction)
    for delay, (contact, contact_damping) in ((0, (0.0, 0.0)), (1, (0.0, 0.0)), (1, RIG_OBJECT)):
        plant = (contact, contact_damping + friction)
        speeds = _sampled_finger(stiffness, damping, mass, period, delay, 1000, plant)
        assert speeds[-1] < 1e-3 * speeds.max(), (delay, contact)
    if (mass, period) == (0.05, 0.001):
        assert (stiffness, damping) == (2000.0, 20.0)
        return
    assert stiffness < 2000.0
    assert damping == pytest.approx(2.0 * np.sqrt(stiffness * mass), rel=1e-9)
    free = _sampled_finger(4000.0, 40.0, mass, period, 1, 1000, (0.0, friction))
    pressing = _sampled_finger(
        2000.0, 20.0, mass, period, 1, 1000, (RIG_OBJECT[0], RIG_OBJECT[1] + friction)
    )
    assert _grows(free) or _grows(pressing)


@pytest.mark.parametrize(
    ("stiffness", "damping", "mass", "period", "plant"),
    [
        (4000.0, 40.0, 0.03, 0.001, (0.0, 0.0)),  # the Panda's defaults × 2: grows
        (3246.0, 27.9, 0.03, 0.001, (0.0, 0.0)),  # its design × 2: on the edge
        (567.0, 48.8, 1.05, 0.01, (2.0e4, 20.5)),  # critically damped, pressing: grows
        (150.0, 25.1, 1.05, 0.01, (2.0e4, 20.5)),  # the design pressing: decays
        (4000.0, 35.4, 1.6, 0.01, (0.0, 130.0)),  # a jaw's friction holding it: decays
        (4000.0, 35.4, 1.6, 0.01, (0.0, 0.0)),  # and without: grows
    ],
)
def test_the_finger_loop_radius_says_what_the_simulated_loop_does(
    stiffness: float, damping: float, mass: float, period: float, plant: tuple[float, float]
) -> None:
    """finger_loop_radius (one period of delay; a contact spring and damping acting
    continuously) against the loop simulated by sub-steps: a radius above 1.01 and the motion
    grows over 1000 periods by more than the radius⁵⁰⁰ would leave of it; below 0.99 and it
    decays below a thousandth of its peak; the edge in between, neither far."""
    from ct_controllers.controllers.gripper import finger_loop_radius

    radius = finger_loop_radius(stiffness, damping, mass, period, plant[1], plant[0], (1,))
    speeds = _sampled_finger(stiffness, damping, mass, period, 1, 1000, plant)
    if radius > 1.01:
        assert _grows(speeds), radius
    elif radius < 0.99:
        assert speeds[-1] < 1e-3 * speeds.max(), radius
    else:
        assert 1e-3 * speeds.max() < speeds[-1] < 1e3 * speeds.max(), radius


@pytest.mark.parametrize(
    ("mass", "period", "friction"), [(0.03, 0.001, 0.0), (1.05, 0.01, 0.5), (0.1326, 0.01, 0.66)]
)
def test_designed_finger_gains_are_the_largest_the_checks_allow(
    mass: float, period: float, friction: float
) -> None:
    """Critically damped at 1 % more bandwidth than sampled_finger_gains found, one of its two
    checks fails (the free loop × 2, or pressing an object): it did not stop short."""
    from ct_controllers.controllers.gripper import (
        finger_loop_radius,
        pressed_loop_radius,
        sampled_finger_gains,
    )

    stiffness, _ = sampled_finger_gains(2000.0, 20.0, mass, period, friction)
    omega = 1.01 * np.sqrt(stiffness / mass)
    k, d = mass * omega**2, 2.0 * mass * omega
    free = finger_loop_radius(2 * k, 2 * d, mass, period, friction)
    pressed = pressed_loop_radius(k, d, mass, period, friction)
    assert max(free, pressed) > 1.0


def test_a_finger_with_its_own_friction_keeps_gains_a_bare_one_could_not() -> None:
    """A heavy jaw (1.6 kg at its tip, 100 Hz: the Z1's on a drive rig) whose drive has
    130 N·s/m of viscous friction at the tip keeps the given 2000 N/m, 17.7 N·s/m: simulated
    with that friction acting continuously, twice them settle with a period of delay, and so
    do they pressing the rigs' object; without
    the friction they grow, and sampled_finger_gains, told none, lowers them."""
    from ct_controllers.controllers.gripper import sampled_finger_gains

    mass, period, friction = 1.6, 0.01, 130.0
    assert sampled_finger_gains(2000.0, 17.7, mass, period, friction) == (2000.0, 17.7)
    held = _sampled_finger(4000.0, 35.4, mass, period, 1, 1000, (0.0, friction))
    assert held[-1] < 1e-3 * held.max()
    pressing = _sampled_finger(2000.0, 17.7, mass, period, 1, 1000, (2.0e4, 20.0 + friction))
    assert pressing[-1] < 1e-3 * pressing.max()
    assert _grows(_sampled_finger(4000.0, 35.4, mass, period, 1))
    assert sampled_finger_gains(2000.0, 17.7, mass, period)[0] < 2000.0
