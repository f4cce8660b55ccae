"""The object between the fingers (``sim/object_contact.py``), the contact model the bridge's
plant process and the simulated CiA 402 drives share through ``motor_step``: a one-sided
spring-damper at half the object's width on each finger joint, engaged once the finger has
been open around the object."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import home_by_name, new_robot_model

from ct_controllers.sim.drives import motor_step, rotor_inertia
from ct_controllers.sim.object_contact import ObjectBetweenFingers

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
