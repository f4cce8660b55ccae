"""ct_controllers.runtime.controller_manager: ros2_control switch semantics over the real loop."""

from __future__ import annotations

import pytest
from helpers import lockstep_config

from ct_controllers.runtime.controller_manager import ControllerManager
from ct_controllers.runtime.stack import Stack

CONFIG = lockstep_config()


@pytest.fixture
def stack(lockstep_stack: Stack) -> Stack:
    return lockstep_stack


@pytest.fixture
def manager(stack: Stack) -> ControllerManager:
    types = {name: str(p["type"]) for name, p in CONFIG.controllers.items()}
    return ControllerManager(stack.loop, stack.controllers, types, CONFIG.default_controller)


def test_strict_switch_activates_one_and_the_loop_runs_it_next_tick(stack, manager) -> None:
    """A strict switch that deactivates the running controller and activates another makes the
    new one the loop's controller at the next tick."""
    result = manager.switch(["computed_torque"], ["joint_impedance"], strict=True)
    assert result.ok and result.active == "computed_torque" == manager.selected
    stack.loop.run_ticks(1)
    assert stack.loop.controller is stack.controllers["computed_torque"]


@pytest.mark.parametrize(
    ("activate", "deactivate", "words"),
    [
        (["computed_torque", "ghost"], ["joint_impedance"], "ghost"),
        (["computed_torque"], [], "deactivate it in the same request"),
        (["computed_torque", "joint_impedance"], [], "only one"),
        ([], ["joint_impedance"], "uncommanded"),
        (["joint_impedance"], ["computed_torque"], "not active"),
    ],
)
def test_strict_switch_problems_fail_whole_and_change_nothing(
    stack, manager, activate, deactivate, words
) -> None:
    """Each strict-mode problem fails with a message naming it; the running controller stays."""
    result = manager.switch(activate, deactivate, strict=True)
    assert not result.ok and words in result.message
    stack.loop.run_ticks(1)
    assert manager.active == "joint_impedance"
    assert stack.loop.controller is stack.controllers["joint_impedance"]


def test_best_effort_skips_unknown_names(manager) -> None:
    """Best effort switches what it can and names what it skipped."""
    result = manager.switch(["computed_torque", "ghost"], [], strict=False)
    assert result.ok and "ghost" in result.message and manager.active == "computed_torque"


def test_a_goal_uses_a_controller_and_releases_it_to_the_selected_one(stack, manager) -> None:
    """use() runs a controller for a goal, '' means the selected one, release() returns to the
    selected one; an unknown name is refused."""
    manager.use("computed_torque")
    assert manager.active == "computed_torque" and manager.selected == "joint_impedance"
    manager.release()
    assert manager.active == "joint_impedance"
    manager.use("")
    assert manager.active == "joint_impedance"
    with pytest.raises(ValueError, match="unknown controller 'ghost'"):
        manager.use("ghost")
