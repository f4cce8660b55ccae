"""The object between the fingers (``sim/object_contact.py``), the contact model the bridge's
plant process and the simulated CiA 402 drives share through ``motor_step``: a one-sided
spring-damper at the finger's share of the object's width on each finger (a gripper joint or
a mimic follower of one), engaged once the finger has been open around the object."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import home_by_name, new_robot_model

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.model.grip_geometry import grip_geometry
from ct_controllers.model.robot import RobotModel
from ct_controllers.sim.drives import motor_step, rotor_inertia
from ct_controllers.sim.object_contact import CONTACT_STIFFNESS, ObjectBetweenFingers

FINGERS = ("left_finger_joint", "right_finger_joint")
WIDTH = 0.05  # [m]


@pytest.fixture(scope="module")
def model():
    return new_robot_model()


def home(model) -> np.ndarray:
    q = np.zeros(model.nq)
    for name, value in home_by_name().items():
        q[model.q_index(name)] = value
    return q


def test_the_stop_engages_once_the_finger_is_open_around_the_object_and_never_pulls(model):
    """At the home opening (0.02 m, inside a 5 cm object's half width 0.025 m) the fingers feel
    nothing: the object is not yet between them. Once a finger has been at or beyond 0.025 m its
    stop is engaged: pressed 1 mm in, it is pushed back with k·1 mm (20 N at 2e4 N/m); moving
    out (q̇ > 0) inside the stop lowers the force by d·q̇, and the force is never negative (a
    finger leaving fast, or outside the stop, feels 0)."""
    contact = ObjectBetweenFingers.for_model(model, FINGERS, WIDTH, stiffness=2e4, damping=20.0)
    q, v = home(model), np.zeros(model.nv)
    contact.engage(q)
    assert not contact.engaged.any()
    inside = [model.q_index(n) for n in FINGERS]
    q[inside] = 0.024
    np.testing.assert_array_equal(contact.finger_forces(q, v), [0.0, 0.0])  # not engaged yet
    q[inside[0]] = 0.03  # the left finger opens around the object
    contact.engage(q)
    q[inside[0]] = 0.024
    np.testing.assert_allclose(contact.finger_forces(q, v), [20.0, 0.0])
    v[model.v_index(FINGERS[0])] = 0.5  # [m/s] leaving: 20 − 20·0.5 = 10 N
    np.testing.assert_allclose(contact.finger_forces(q, v), [10.0, 0.0])
    v[model.v_index(FINGERS[0])] = 5.0  # leaving fast: no pull
    np.testing.assert_array_equal(contact.finger_forces(q, v), [0.0, 0.0])
    v[:] = 0.0
    q[inside[0]] = 0.026  # outside the stop
    np.testing.assert_array_equal(contact.finger_forces(q, v), [0.0, 0.0])
    force = np.zeros(model.nv)
    q[inside[0]] = 0.0245
    contact.add_joint_forces(q, v, force)
    expected = np.zeros(model.nv)
    expected[model.v_index(FINGERS[0])] = 2e4 * 0.0005
    np.testing.assert_allclose(force, expected)


@pytest.mark.parametrize("bad", [0.0, -0.01, np.nan, np.inf])
def test_an_object_needs_a_finite_positive_width(model, bad):
    """A width that is zero, negative or not finite is refused, naming it."""
    with pytest.raises(ValueError, match="width"):
        ObjectBetweenFingers.for_model(model, FINGERS, bad)


def test_motor_step_closes_fingers_onto_the_object_and_the_motor_effort_stays_the_motors(model):
    """``motor_step`` with a constant closing force of 20 N on each finger (arm locked), from an
    opening of 0.04 m around a 5 cm object: the fingers close, hit the object and come to rest
    pressed F/k = 1 mm into it (0.024 m, within 0.05 mm); the contact force then equals the
    motor's 20 N (within 0.1 N). The efforts passed in are not changed by the contact (what a
    drive reports is its motor's force); without the object the same force closes the fingers
    fully (0 m)."""
    rotor = rotor_inertia(model)
    q, v = home(model), np.zeros(model.nv)
    fingers = [model.v_index(n) for n in FINGERS]
    q[fingers] = 0.04
    locked = np.ones(model.nv, dtype=bool)
    locked[fingers] = False
    efforts = np.zeros(model.nv)
    efforts[fingers] = -20.0
    before = efforts.copy()
    contact = ObjectBetweenFingers.for_model(model, FINGERS, WIDTH, stiffness=2e4, damping=20.0)
    held_q, held_v = q.copy(), v.copy()
    for _ in range(300):  # 3 s in 10 ms steps
        held_q, held_v = motor_step(
            model, held_q, held_v, rotor, efforts, locked, {}, 0.01, contact=contact
        )
    np.testing.assert_array_equal(efforts, before)
    np.testing.assert_allclose(held_q[fingers], 0.024, atol=5e-5)
    np.testing.assert_allclose(contact.finger_forces(held_q, held_v), 20.0, atol=0.1)
    free_q, free_v = q.copy(), v.copy()
    for _ in range(300):
        free_q, free_v = motor_step(model, free_q, free_v, rotor, efforts, locked, {}, 0.01)
    np.testing.assert_allclose(free_q[fingers], 0.0, atol=1e-9)


def test_a_mimic_follower_is_a_finger_whose_force_reaches_its_master() -> None:
    """The Panda's gripper (panda_finger_joint2 mimics panda_finger_joint1, × 1): one listed
    joint makes two fingers, each stopping at half the object's width. A constant 20 N on the
    master (arm locked) closes both on a 5 cm object, where each finger presses 10 N within
    0.1 N (the master's effort is shared through the mimic: τ = f₁ + 1·f₂), each pressed in
    f/k = 0.5 mm (the master at 0.0245 m, within 0.05 mm); the master's generalized contact
    force is the two fingers' sum."""
    model = RobotModel(example_robot_path("panda_description/urdf/panda.urdf").read_text())
    master = model.v_index("panda_finger_joint1")
    contact = ObjectBetweenFingers.for_model(model, ["panda_finger_joint1"], WIDTH)
    assert contact.fingers == ("panda_finger_joint1", "panda_finger_joint2")
    assert contact.stop == WIDTH / 2
    rotor = rotor_inertia(model)
    q, v = np.zeros(model.nq), np.zeros(model.nv)
    q[model.v_index("panda_joint4")] = -1.5  # inside its range (−3.07, −0.07)
    q[master] = 0.035  # open around the object
    locked = np.ones(model.nv, dtype=bool)
    locked[master] = False
    efforts = np.zeros(model.nv)
    efforts[master] = -20.0
    for _ in range(300):  # 3 s in 10 ms steps
        q, v = motor_step(model, q, v, rotor, efforts, locked, {}, 0.01, contact=contact)
    forces = contact.finger_forces(q, v)
    np.testing.assert_allclose(forces, 10.0, atol=0.1)
    np.testing.assert_allclose(q[master], WIDTH / 2 - 10.0 / CONTACT_STIFFNESS, atol=5e-5)
    generalized = np.zeros(model.nv)
    contact.add_joint_forces(q, v, generalized)
    np.testing.assert_allclose(generalized[master], forces.sum())
    assert np.count_nonzero(generalized) == 1


def test_a_revolute_jaw_meets_the_object_through_its_lever() -> None:
    """One revolute jaw against a fixed one (the one-jaw variant of the bundled arm: a 10 cm
    finger hinged on the hand, closed at its upper limit 0.5 rad), the object 25 mm wide, the
    width between the fingertip frames by forward kinematics: the jaw opened around the object
    and then closed with a constant 1.5 N·m (arm locked) stalls where the width measured
    between the frames is the object's less f/k (within 0.1 mm), pressing with 1.5 N·m over the
    jaw's lever there — dw/dθ by a central difference of the frames' distance, computed here —
    within 0.1 N. (The grip geometry's lever is the chord's over the whole range, 0.075 m/rad;
    at the contact the jaw's tip moves 0.099 m/rad: a linear model would stall it 4 mm short.)"""
    from test_one_jaw_gripper import JAW, one_jaw_urdf

    frames = ("left_tip", "right_tip")
    model = RobotModel(one_jaw_urdf("revolute"))
    geometry = grip_geometry(model, [JAW], frames)
    assert geometry.closed == (0.5,) and geometry.opened == (0.0,)
    contact = ObjectBetweenFingers.for_model(model, [JAW], 0.025, width_frames=frames)
    jaw = model.v_index(JAW)
    q, v = np.zeros(model.nq), np.zeros(model.nv)
    q[model.v_index("joint4")] = -1.5
    contact.engage(q)  # open (0 rad): around the object
    assert contact.engaged.all()
    locked = np.ones(model.nv, dtype=bool)
    locked[jaw] = False
    efforts = np.zeros(model.nv)
    efforts[jaw] = 1.5  # [N·m] closing: towards the upper limit
    rotor = rotor_inertia(model)
    for _ in range(300):  # 3 s in 10 ms steps
        q, v = motor_step(model, q, v, rotor, efforts, locked, {}, 0.01, contact=contact)
    force = contact.finger_forces(q, v)[0]

    def width(at: np.ndarray) -> float:
        tips = [model.frame_pose(at, name)[:3, 3] for name in frames]
        return float(np.linalg.norm(tips[0] - tips[1])) - geometry.closed_distance

    assert width(q) == pytest.approx(0.025 - force / CONTACT_STIFFNESS, abs=1e-4)
    step = np.zeros(model.nq)
    step[jaw] = 1e-6
    lever = abs(width(q + step) - width(q - step)) / 2e-6  # [m/rad]
    assert force == pytest.approx(1.5 / lever, abs=0.1)
    assert lever > 1.2 * geometry.levers[0]
