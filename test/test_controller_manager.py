"""ct_controllers.runtime.controller_manager: ros2_control's (Jazzy) switch and lifecycle
semantics over the real loop, and what each controller claims (runtime/controller_claims.py)."""

from __future__ import annotations

import pytest
from helpers import lockstep_config

from ct_controllers.runtime.controller_claims import (
    controller_interfaces,
    hardware_interfaces,
    interface_controller_joints,
)
from ct_controllers.runtime.controller_manager import (
    ACTIVE,
    INACTIVE,
    INTERFACE,
    JOINT_LEVEL,
    UNCONFIGURED,
    ControllerManager,
    joint_controller_factory,
)
from ct_controllers.runtime.stack import Stack

CONFIG = lockstep_config()


@pytest.fixture
def stack(lockstep_stack: Stack) -> Stack:
    return lockstep_stack


@pytest.fixture
def manager(stack: Stack) -> ControllerManager:
    types = {name: str(p["type"]) for name, p in CONFIG.controllers.items()}
    factory = joint_controller_factory(stack.model, CONFIG.joint_names)
    return ControllerManager(
        stack.loop, stack.controllers, types, CONFIG.default_controller, factory=factory
    )


def states(manager: ControllerManager) -> dict[str, str]:
    return {s.name: s.state for s in manager.statuses()}


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
        (["computed_torque", "ghost"], ["joint_impedance"], "'ghost' because no controller"),
        (["computed_torque"], [], "deactivate it in the same request"),
        (["computed_torque", "joint_impedance"], [], "'joint_impedance' is already active"),
        (["computed_torque", "joint_impedance"], ["joint_impedance"], "only one joint-level"),
        ([], ["joint_impedance"], "uncommanded"),
        ([], ["computed_torque"], "'computed_torque' can not be deactivated since it is not"),
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
    """Best effort switches what it can and names what it skipped; a list naming only unknown
    controllers fails (Jazzy); activating a second joint-level controller while the running
    one stays fails whatever the strictness (its joints' interfaces are claimed)."""
    result = manager.switch(["computed_torque", "ghost"], ["joint_impedance"], strict=False)
    assert result.ok and "ghost" in result.message and manager.active == "computed_torque"
    only_unknown = manager.switch(["ghost"], [], strict=False)
    assert not only_unknown.ok and "'ghost'" in only_unknown.message
    claimed = manager.switch(["joint_impedance"], [], strict=False)
    assert not claimed.ok and "currently claimed by another controller" in claimed.message
    assert manager.active == "computed_torque"
    assert states(manager) == {"joint_impedance": INACTIVE, "computed_torque": ACTIVE}


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


def test_interface_controllers_switch_independently_of_the_joint_level_one(stack, manager):
    """A standard-interface controller is deactivated and activated on its own (its server
    then refuses / accepts goals: is_active), never changing the joint-level controller; two of
    them claiming one joint's reference cannot be active together; the joint-level controller
    switches under an active one (the chain follows it)."""
    manager.add_interface_controller(
        "arm_jtc", "ct_controllers/JointTrajectoryController", joints=("joint1", "joint2")
    )
    manager.add_interface_controller(
        "other_jtc", "ct_controllers/JointTrajectoryController", active=False, joints=("joint2",)
    )
    assert manager.is_active("arm_jtc") and not manager.is_active("other_jtc")
    off = manager.switch([], ["arm_jtc"], strict=True)
    assert off.ok, off.message
    assert not manager.is_active("arm_jtc") and manager.active == "joint_impedance"
    assert manager.switch(["arm_jtc"], [], strict=True).ok
    clash = manager.switch(["other_jtc"], [], strict=True)
    assert not clash.ok and "'joint2'" in clash.message and "'arm_jtc'" in clash.message
    assert states(manager)["other_jtc"] == INACTIVE
    swap = manager.switch(["other_jtc"], ["arm_jtc"], strict=True)
    assert swap.ok and manager.is_active("other_jtc") and not manager.is_active("arm_jtc")
    joint = manager.switch(["computed_torque"], ["joint_impedance"], strict=True)
    assert joint.ok and manager.is_active("other_jtc")
    stack.loop.run_ticks(1)
    assert stack.loop.controller is stack.controllers["computed_torque"]


def test_the_spawner_lifecycle_on_a_startup_controller(stack, manager):
    """ros2_control's lifecycle for what the spawner and `ros2 control` do: an active
    controller can neither be configured, cleaned up nor unloaded; an inactive one unloads
    (gone from the list, no goal may use it), loads again (unconfigured: activation refused
    until configured), configures (inactive) and activates. Every refusal changes nothing."""
    assert not manager.configure("joint_impedance").ok
    assert not manager.unload("joint_impedance").ok
    assert not manager.cleanup("joint_impedance").ok
    assert not manager.load("computed_torque", "ct_controllers/ComputedTorque", JOINT_LEVEL).ok
    assert manager.unload("computed_torque").ok
    assert "computed_torque" not in states(manager)
    assert "computed_torque" not in manager.controllers
    with pytest.raises(ValueError, match="computed_torque"):
        manager.use("computed_torque")
    assert manager.was_loaded("computed_torque") == "ct_controllers/ComputedTorque"
    wrong = manager.load("computed_torque", "ct_controllers/JointImpedance", JOINT_LEVEL)
    assert not wrong.ok and "ComputedTorque" in wrong.message
    assert manager.load("computed_torque", "ct_controllers/ComputedTorque", JOINT_LEVEL).ok
    assert states(manager)["computed_torque"] == UNCONFIGURED
    early = manager.switch(["computed_torque"], ["joint_impedance"], strict=True)
    assert not early.ok and "'unconfigured' state" in early.message
    assert manager.active == "joint_impedance"
    assert manager.configure("computed_torque").ok
    assert manager.configure("computed_torque").ok  # inactive: cleaned up, configured again
    assert manager.switch(["computed_torque"], ["joint_impedance"], strict=True).ok
    stack.loop.run_ticks(1)
    assert stack.loop.controller is stack.controllers["computed_torque"]
    assert manager.cleanup("joint_impedance").ok
    assert states(manager)["joint_impedance"] == UNCONFIGURED


def test_a_controller_loaded_later_is_built_from_its_parameters_when_configured(stack, manager):
    """A new joint-level controller: loaded unconfigured, built at configure from the entries
    given (its type's schema checks them: a bad entry fails the configure and it stays
    unconfigured), then it runs when switched in; cleaned up, its instance is dropped."""
    assert manager.load("soft", "ct_controllers/JointImpedance", JOINT_LEVEL).ok
    n = len(CONFIG.joint_names)
    gains = {"stiffness": [50.0] * n, "damping": [5.0] * n}
    bad = manager.configure("soft", lambda: {**gains, "damping": [-1.0] * n})
    assert not bad.ok and "damping" in bad.message
    assert states(manager)["soft"] == UNCONFIGURED
    assert manager.configure("soft", lambda: gains).ok
    soft = manager.controllers["soft"]
    assert list(soft.stiffness) == [50.0] * n
    assert stack.controllers["soft"] is soft  # where the pose and grasp chains look it up
    assert manager.switch(["soft"], ["joint_impedance"], strict=True).ok
    stack.loop.run_ticks(1)
    assert stack.loop.controller is soft
    assert manager.switch(["joint_impedance"], ["soft"], strict=True).ok
    assert manager.cleanup("soft").ok and "soft" not in manager.controllers
    assert "soft" not in stack.controllers
    assert manager.unload("soft").ok and manager.was_loaded("soft") is None
    refused = manager.load("jtc2", "ct_controllers/JointTrajectoryController", INTERFACE)
    assert not refused.ok and "startup" in refused.message


def test_claims_follow_ros2_control_conventions(stack, manager):
    """The active joint-level controller claims each joint's command interface as the backend
    commands it and exports q*/v*/a* references; an active trajectory controller claims that
    controller's references of its joints and names it in its chain connection; inactive ones
    claim nothing; the hardware interfaces are claimed exactly where the controllers claim."""
    manager.add_interface_controller(
        "jtc", "ct_controllers/JointTrajectoryController", joints=("joint1", "joint3")
    )
    hardware = stack.hardware
    commands = dict(zip(hardware.joint_names, hardware.command_interfaces, strict=True))
    claims = controller_interfaces(manager.statuses(), manager.selected, commands)
    active = claims["joint_impedance"]
    assert active.claimed == tuple(f"{j}/{i}" for j, i in commands.items())
    assert set(active.claimed) == {f"{j}/effort" for j in CONFIG.joint_names}
    assert "joint2/acceleration" in active.references and active.is_chained
    assert claims["computed_torque"].claimed == () and not claims["computed_torque"].is_chained
    jtc = claims["jtc"]
    assert jtc.claimed == tuple(
        f"joint_impedance/{j}/{r}"
        for j in ("joint1", "joint3")
        for r in ("position", "velocity", "acceleration")
    )
    assert jtc.chain_connections == (
        ("joint_impedance", tuple(c.split("/", 1)[1] for c in jtc.claimed)),
    )
    everything = [name for c in claims.values() for name in c.claimed]
    command_status, state_status = hardware_interfaces(
        stack.description.hardware, commands, hardware.state.value, everything
    )
    urdf = {
        f"{j.name}/{i}" for j in stack.description.hardware.joints for i in j.command_interfaces
    }
    assert {s.name for s in command_status} == urdf
    assert {s.name for s in command_status if s.claimed} == set(active.claimed)
    assert all(s.available == (s.name in active.claimed) for s in command_status)
    assert all(s.available and not s.claimed for s in state_status)


def test_interface_controllers_claim_their_configured_joints(stack) -> None:
    """A standard-interface controller registered without joints (as its server does) claims
    the joints its configuration entry gives (a trajectory controller's ``joints``, a gripper
    controller's ``joint``)."""
    types = {name: str(p["type"]) for name, p in CONFIG.controllers.items()}
    entries = {
        "jtc": {"type": "ct_controllers/JointTrajectoryController", "joints": ["joint1", "joint2"]},
        "grip": {"type": "ct_controllers/GripperActionController", "joint": "left_finger_joint"},
    }
    manager = ControllerManager(
        stack.loop,
        stack.controllers,
        types,
        CONFIG.default_controller,
        interface_joints=interface_controller_joints(entries),
    )
    manager.add_interface_controller("jtc", entries["jtc"]["type"])
    manager.add_interface_controller("grip", entries["grip"]["type"])
    joints = {s.name: s.joints for s in manager.statuses()}
    assert joints["jtc"] == ("joint1", "joint2") and joints["grip"] == ("left_finger_joint",)
