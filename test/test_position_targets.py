"""ct_controllers.runtime.position_targets: what each joint is sent, on a stand-in model of three
joints (hardware order differs from model order)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ct_controllers.runtime.position_targets import PositionTargets

PERIOD = 0.01
MODEL = SimpleNamespace(
    nv=3,
    limits=SimpleNamespace(
        lower=np.array([-1.0, -1.0, 0.0]),
        upper=np.array([1.0, 1.0, 0.04]),
        velocity=np.array([2.0, 2.0, 0.5]),
    ),
)
MODEL_INDEX = np.array([2, 0, 1])  # hardware joint i is model joint MODEL_INDEX[i]


def targets(interfaces: tuple[str, ...]) -> PositionTargets:
    return PositionTargets(MODEL, interfaces, MODEL_INDEX, PERIOD)  # type: ignore[arg-type]


def test_effort_joints_get_the_effort_in_hardware_order():
    """All joints on the effort interface: the effort re-ordered to hardware order, nothing
    step limited."""
    command = targets(("effort", "effort", "effort"))
    values = command.values(np.array([1.0, 2.0, 3.0]), np.full(3, np.nan), np.zeros(3), True)
    assert values.tolist() == [3.0, 1.0, 2.0]
    assert not command.any and not command.step_limited.any()


def test_an_unknown_interface_is_refused():
    """A command interface other than effort or position is a ValueError naming them."""
    with pytest.raises(ValueError, match="unsupported command interfaces"):
        targets(("velocity", "effort", "effort"))


def test_position_joints_get_the_reference_within_the_joint_limits():
    """A position joint (the gripper, model joint 2) is sent q* clipped to its range; effort
    joints keep their effort."""
    command = targets(("position", "effort", "effort"))
    values = command.values(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5, 0.09]), np.zeros(3))
    assert values.tolist() == [0.04, 1.0, 2.0]
    assert command.joints.tolist() == [False, False, True]


def test_a_jumping_reference_is_followed_at_the_joint_top_speed_and_reported():
    """With limit_steps, a target moves at most velocity × period from the last one written,
    and the joint is flagged as step limited; without, it goes at once."""
    command = targets(("position", "effort", "effort"))
    effort = np.zeros(3)
    command.values(effort, np.zeros(3), np.zeros(3), limit_steps=True)  # the first: no limit
    values = command.values(effort, np.array([0.0, 0.0, 0.04]), np.zeros(3), limit_steps=True)
    assert values[0] == pytest.approx(0.5 * PERIOD)
    assert command.step_limited.tolist() == [False, False, True]
    values = command.values(effort, np.array([0.0, 0.0, 0.04]), np.zeros(3), limit_steps=False)
    assert values[0] == 0.04 and not command.step_limited.any()


def test_a_non_finite_reference_keeps_the_last_target_or_the_measured_position():
    """A NaN q* on a position joint keeps the last target written (the measured position
    before any) and is reported."""
    command = targets(("position", "effort", "effort"))
    measured = np.array([0.0, 0.0, 0.02])
    values = command.values(np.zeros(3), np.array([0.0, 0.0, np.nan]), measured)
    assert values[0] == 0.02 and command.step_limited.tolist() == [False, False, True]
    command.values(np.zeros(3), np.array([0.0, 0.0, 0.03]), measured)
    values = command.values(np.zeros(3), np.array([0.0, 0.0, np.nan]), measured)
    assert values[0] == 0.03


def test_saturation_is_the_limiter_on_effort_joints_and_the_step_limit_on_position_joints():
    """saturated(): the limiter's flags where an effort is written, the step limit where a
    position target is."""
    command = targets(("position", "effort", "effort"))
    command.values(np.zeros(3), np.zeros(3), np.zeros(3), True)
    command.values(np.zeros(3), np.array([0.0, 0.0, 0.04]), np.zeros(3), True)
    flags = command.saturated(np.array([True, False, False]))
    assert flags.tolist() == [True, False, True]
    assert command.saturated(np.array([False, False, True]))[2]  # the step limit, not effort
    command.values(np.zeros(3), np.array([0.0, 0.0, 0.005]), np.zeros(3), True)
    assert not command.saturated(np.array([False, False, True]))[2]  # the limiter's ignored
