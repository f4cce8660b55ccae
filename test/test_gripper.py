"""ct_controllers.controllers.gripper: a finger servo whose force saturates at the limit."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import new_robot_model

from ct_controllers.controllers.controller import JointState
from ct_controllers.controllers.gripper import GripperController

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
