"""The controller manager's controller_manager_msgs services over real rclpy and DDS
(loopback), called exactly as Jazzy's `ros2 control` verbs and `spawner` call them
(ros2controlcli/verb/*.py, controller_manager/spawner.py and controller_manager_services.py):
the same requests, in the same order, with the same field values. One real node process for
the module; /joint_states beside /ct/joint_states."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from builtin_interfaces.msg import Duration
from controller_manager_msgs.srv import (
    CleanupController,
    ConfigureController,
    ListControllers,
    ListControllerTypes,
    ListHardwareComponents,
    ListHardwareInterfaces,
    LoadController,
    SetHardwareComponentState,
    SwitchController,
    UnloadController,
)
from ct_interfaces.action import MoveJoints
from helpers import bundled_description
from lifecycle_msgs.msg import State
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import get_parameter_value
from ros_helpers import (
    CONFIG,
    HOME,
    NODE,
    Client,
    goal,
    ros_client,
    start_node,
    stop_node,
    wait_ready,
)
from sensor_msgs.msg import JointState

from ct_controllers.plugins import CONTROLLERS, known_plugins
from ct_controllers.ros.goals import request_qos

STRICT = SwitchController.Request.STRICT
BEST_EFFORT = SwitchController.Request.BEST_EFFORT
DESCRIPTION = bundled_description(CONFIG.backend).hardware
SERVICE_NAMES = {
    LoadController: "load_controller",
    ConfigureController: "configure_controller",
    CleanupController: "cleanup_controller",
    UnloadController: "unload_controller",
}


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    process = start_node()
    try:
        with ros_client("ct_cm_services_client") as client:
            client.broadcast = []  # type: ignore[attr-defined]
            client.node.create_subscription(
                JointState,
                "/joint_states",
                client.broadcast.append,  # type: ignore[attr-defined]
                10,
            )
            yield client
    finally:
        stop_node(process)


def call(client: Client, service_type: Any, service: str, **fields: Any) -> Any:
    return client.call(service_type, f"{NODE}/{service}", service_type.Request(**fields))


def controllers(client: Client) -> dict[str, Any]:
    return {c.name: c for c in call(client, ListControllers, "list_controllers").controller}


def switch(
    client: Client,
    activate: list[str],
    deactivate: list[str],
    strictness: int = STRICT,
    asap: bool = False,
    timeout: float = 5.0,
) -> Any:
    """controller_manager_services.switch_controllers: the spawner's (STRICT, --switch-timeout
    5 s) and the verbs' request."""
    duration = Duration(sec=int(timeout), nanosec=int((timeout % 1) * 1e9))
    return call(
        client,
        SwitchController,
        "switch_controller",
        activate_controllers=activate,
        deactivate_controllers=deactivate,
        strictness=strictness,
        activate_asap=asap,
        timeout=duration,
    )


def set_controller_parameter(client: Client, controller: str, name: str, value: Any) -> Any:
    """controller_manager_services.set_controller_parameters: the value as a string, parsed as
    YAML (get_parameter_value), set through the manager's set_parameters service."""
    parameter = ParameterMsg(
        name=f"{controller}.{name}", value=get_parameter_value(string_value=str(value))
    )
    (result,) = client.call(
        SetParameters, f"{NODE}/set_parameters", SetParameters.Request(parameters=[parameter])
    ).results
    return result


def spawn(client: Client, name: str, param_files: list[str], inactive: bool = False) -> str:
    """spawner.main for one controller, call by call: 'ok' or the step that failed (where the
    spawner logs an error and exits 1)."""
    if name in controllers(client):  # is_controller_loaded: "already loaded, skipping load"
        pass
    else:
        if param_files:  # set_controller_parameters_from_param_files
            if not set_controller_parameter(client, name, "params_file", param_files).successful:
                return "set params_file"
            controller_type = yaml.safe_load(Path(param_files[0]).read_text())[name][
                "ros__parameters"
            ]["type"]
            if not set_controller_parameter(client, name, "type", controller_type).successful:
                return "set type"
        if not call(client, LoadController, "load_controller", name=name).ok:
            return "load"
    if not call(client, ConfigureController, "configure_controller", name=name).ok:
        return "configure"
    if not inactive and not switch(client, [name], [], STRICT).ok:
        return "switch"
    return "ok"


def test_list_verbs_show_the_controllers_their_claims_and_the_hardware(client: Client) -> None:
    """list_controllers: the configured joint-level controllers with their types, the default
    one active claiming every joint's command interface as the backend commands it, the other
    inactive claiming nothing, both chainable with q*/v*/a* references, at update_rate;
    list_controller_types: every controller entry point, joint-level ones chainable;
    list_hardware_components: the <ros2_control> block's component with its plugin, active,
    at update_rate; list_hardware_interfaces: its interfaces, claimed exactly as
    list_controllers says."""
    listed = controllers(client)
    active = listed["joint_impedance"]
    assert active.type == "ct_controllers/JointImpedance" and active.state == "active"
    assert listed["computed_torque"].state == "inactive"
    assert listed["computed_torque"].claimed_interfaces == []
    hardware = {j.name: j for j in DESCRIPTION.joints}
    assert active.claimed_interfaces == [f"{j}/effort" for j in hardware]
    assert active.required_state_interfaces[:2] == [
        f"{DESCRIPTION.joints[0].name}/position",
        f"{DESCRIPTION.joints[0].name}/velocity",
    ]
    assert active.is_chainable and f"{CONFIG.arm_joints[0]}/position" in active.reference_interfaces
    assert active.update_rate == int(CONFIG.update_rate)
    types = call(client, ListControllerTypes, "list_controller_types")
    assert sorted(types.types) == known_plugins(CONTROLLERS)
    bases = dict(zip(types.types, types.base_classes, strict=True))
    assert bases["ct_controllers/JointImpedance"].endswith("ChainableControllerInterface")
    (component,) = call(client, ListHardwareComponents, "list_hardware_components").component
    assert component.name == DESCRIPTION.name and component.plugin_name == DESCRIPTION.plugin
    assert component.state.id == State.PRIMARY_STATE_ACTIVE and component.state.label == "active"
    assert component.rw_rate == int(CONFIG.update_rate)
    interfaces = call(client, ListHardwareInterfaces, "list_hardware_interfaces")
    urdf = [f"{j.name}/{i}" for j in DESCRIPTION.joints for i in j.command_interfaces]
    assert [i.name for i in interfaces.command_interfaces] == urdf
    claimed = [i.name for i in interfaces.command_interfaces if i.is_claimed]
    assert claimed == active.claimed_interfaces
    assert [i.name for i in component.command_interfaces] == urdf
    states = [f"{j.name}/{i}" for j in DESCRIPTION.joints for i in j.state_interfaces]
    assert [i.name for i in interfaces.state_interfaces] == states
    assert all(i.is_available for i in interfaces.state_interfaces)


def test_the_spawner_on_loaded_controllers_follows_ros2_control(client: Client) -> None:
    """The spawner on a controller that is loaded already skips the load and configures it: on
    the active joint_impedance the configure fails (ros2_control cannot configure an active
    controller); on the inactive computed_torque it succeeds, and the STRICT activation alone
    fails naming the interfaces joint_impedance claims; with --inactive it succeeds and
    changes nothing. `ros2 control switch_controllers --activate ... --deactivate ... --strict`
    then switches, a goal runs with it, and switching back restores joint_impedance."""
    assert spawn(client, "joint_impedance", []) == "configure"
    assert spawn(client, "computed_torque", []) == "switch"
    refused = switch(client, ["computed_torque"], [])
    assert "currently claimed by another controller ('joint_impedance')" in refused.message
    assert spawn(client, "computed_torque", [], inactive=True) == "ok"
    assert controllers(client)["joint_impedance"].state == "active"
    done = switch(client, ["computed_torque"], ["joint_impedance"])
    assert done.ok, done.message
    listed = controllers(client)
    assert listed["computed_torque"].state == "active"
    assert listed["joint_impedance"].state == "inactive"
    count = len(client.controller_states)
    assert client.spin_until(lambda: len(client.controller_states) > count + 3, 5.0)
    assert list(client.controller_states[-1].active_controllers) == ["computed_torque"]
    result = client.result(client.send(goal(["joint1"], [HOME[0] + 0.1], 1.0)))
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message
    back = switch(client, ["joint_impedance"], ["computed_torque"], BEST_EFFORT, asap=True)
    assert back.ok, back.message
    assert client.result(client.send(goal(["joint1"], [HOME[0]], 1.0))).error_code == 0


def test_spawning_a_new_controller_from_a_parameters_file(client: Client, tmp_path: Path) -> None:
    """The spawner's sequence for a controller not loaded: set_parameters
    `<name>.params_file` and `<name>.type` (the node declares them), load (unconfigured),
    configure (built from the file's section), switch STRICT (refused: joint_impedance claims
    the joints — use --inactive and switch with a deactivation, as with ros2_control's
    effort controllers); it runs; `--unload-on-kill`'s deactivate-alone is refused (the arm
    would be left uncommanded); switched back, unload removes it. An undeclared parameter
    other than the spawner's stays refused."""
    n = len(CONFIG.joint_names)
    file = tmp_path / "soft.yaml"
    section = {
        "type": "ct_controllers/JointImpedance",
        "stiffness": [300.0] * n,
        "damping": [30.0] * n,
    }
    file.write_text(yaml.safe_dump({"soft_impedance": {"ros__parameters": section}}))
    assert spawn(client, "soft_impedance", [str(file)]) == "switch"
    listed = controllers(client)["soft_impedance"]
    assert listed.type == "ct_controllers/JointImpedance" and listed.state == "inactive"
    assert listed.required_command_interfaces == [f"{j.name}/effort" for j in DESCRIPTION.joints]
    done = switch(client, ["soft_impedance"], ["joint_impedance"])
    assert done.ok, done.message
    result = client.result(client.send(goal(["joint2"], [HOME[1] + 0.1], 1.0)))
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message
    alone = switch(client, [], ["soft_impedance"])
    assert not alone.ok and "uncommanded" in alone.message
    assert switch(client, ["joint_impedance"], ["soft_impedance"]).ok
    assert call(client, UnloadController, "unload_controller", name="soft_impedance").ok
    assert "soft_impedance" not in controllers(client)
    assert not set_controller_parameter(client, "soft_impedance", "stiffnes", [1.0]).successful
    assert client.result(client.send(goal(["joint2"], [HOME[1]], 1.0))).error_code == 0


@pytest.mark.parametrize(
    ("service", "fields"),
    [
        (LoadController, {"name": "ghost"}),  # no <ghost>.type
        (LoadController, {"name": "joint_impedance"}),  # already loaded
        (ConfigureController, {"name": "ghost"}),
        (CleanupController, {"name": "ghost"}),
        (CleanupController, {"name": "joint_impedance"}),  # active
        (UnloadController, {"name": "ghost"}),
        (UnloadController, {"name": "joint_impedance"}),  # active
    ],
)
def test_lifecycle_calls_with_bad_names_are_refused(
    client: Client, service: Any, fields: dict[str, str]
) -> None:
    """load / configure / cleanup / unload of an unknown name, of a controller already loaded,
    or of the active one: ok false, the controllers unchanged."""
    before = {n: c.state for n, c in controllers(client).items()}
    response = call(client, service, SERVICE_NAMES[service], **fields)
    assert not response.ok
    assert {n: c.state for n, c in controllers(client).items()} == before


def test_a_type_that_is_not_ours_and_bad_switch_requests_are_refused(client: Client) -> None:
    """A `<name>.type` no entry point of ours provides: load fails; a switch naming an unknown
    controller (STRICT), with strictness 7, or a negative or unnormalized timeout: ok false, a
    message naming the problem, nothing switched; the loop still publishes."""
    assert set_controller_parameter(client, "foreign", "type", "pkg/Foreign").successful
    assert not call(client, LoadController, "load_controller", name="foreign").ok
    assert "foreign" not in controllers(client)
    unknown = switch(client, ["ghost"], ["joint_impedance"])
    assert not unknown.ok and "'ghost'" in unknown.message
    bad = call(client, SwitchController, "switch_controller", strictness=7)
    assert not bad.ok and "got 7" in bad.message
    for timeout in (Duration(sec=-1), Duration(sec=0, nanosec=2_000_000_000)):
        response = call(
            client,
            SwitchController,
            "switch_controller",
            activate_controllers=["computed_torque"],
            deactivate_controllers=["joint_impedance"],
            strictness=STRICT,
            timeout=timeout,
        )
        assert not response.ok and "timeout" in response.message
    assert controllers(client)["joint_impedance"].state == "active"
    count = len(client.joint_states)
    assert client.spin_until(lambda: len(client.joint_states) > count + 5, 5.0)


def test_hardware_component_state_is_refused_unless_already_there(client: Client) -> None:
    """`ros2 control set_hardware_component_state`: an unknown component and a transition away
    from 'active' are refused (the loop cannot pause: the arm would be left uncommanded), the
    reply carrying the unchanged state; the current state is reported ok; the loop runs on."""

    def set_state(name: str, state_id: int, label: str) -> Any:
        return call(
            client,
            SetHardwareComponentState,
            "set_hardware_component_state",
            name=name,
            target_state=State(id=state_id, label=label),
        )

    assert not set_state("ghost", State.PRIMARY_STATE_ACTIVE, "active").ok
    refused = set_state(DESCRIPTION.name, State.PRIMARY_STATE_INACTIVE, "inactive")
    assert not refused.ok and refused.state.id == State.PRIMARY_STATE_ACTIVE
    assert not set_state(DESCRIPTION.name, State.PRIMARY_STATE_UNCONFIGURED, "unconfigured").ok
    same = set_state(DESCRIPTION.name, State.PRIMARY_STATE_ACTIVE, "active")
    assert same.ok and same.state.label == "active"
    count = len(client.joint_states)
    assert client.spin_until(lambda: len(client.joint_states) > count + 5, 5.0)


def test_joint_states_on_slash_joint_states_equal_the_node_s_own(client: Client) -> None:
    """The node in /ct publishes /joint_states too (joint_states_topic: auto), the same
    messages as /ct/joint_states: every joint by name, the same stamps, the same values."""
    assert client.spin_until(
        lambda: len(client.broadcast) > 20 and len(client.joint_states) > 20,  # type: ignore[attr-defined]
        5.0,
    )
    own = {(m.header.stamp.sec, m.header.stamp.nanosec): m for m in client.joint_states}
    broadcast = client.broadcast  # type: ignore[attr-defined]
    matched = [m for m in broadcast if (m.header.stamp.sec, m.header.stamp.nanosec) in own]
    assert len(matched) >= len(broadcast) - 2  # the newest may not have arrived on both yet
    for message in matched:
        twin = own[(message.header.stamp.sec, message.header.stamp.nanosec)]
        assert list(message.name) == list(twin.name)
        assert list(message.position) == list(twin.position)
    assert set(matched[-1].name) == set(CONFIG.joint_names)


def test_a_burst_of_lifecycle_and_switch_calls_is_all_answered(client: Client) -> None:
    """300 calls at once (switch, configure and list_controllers, 100 each, on clients with
    the node's deep request queue): every one answered, the refused ones refused, the
    controllers as before."""
    before = {n: c.state for n, c in controllers(client).items()}
    services = {
        kind: client.node.create_client(kind, f"{NODE}/{name}", qos_profile=request_qos())
        for kind, name in (
            (SwitchController, "switch_controller"),
            (ConfigureController, "configure_controller"),
            (ListControllers, "list_controllers"),
        )
    }
    try:
        assert all(wait_ready(s.service_is_ready, 10.0) for s in services.values())
        requests = {
            SwitchController: SwitchController.Request(
                activate_controllers=["computed_torque"], strictness=STRICT
            ),
            ConfigureController: ConfigureController.Request(name="joint_impedance"),
            ListControllers: ListControllers.Request(),
        }
        futures = [
            (kind, services[kind].call_async(request))
            for _ in range(100)
            for kind, request in requests.items()
        ]
        assert client.spin_until(lambda: all(f.done() for _, f in futures), 60.0), sum(
            f.done() for _, f in futures
        )
        for kind, future in futures:
            response = future.result()
            if kind is ListControllers:
                assert {c.name for c in response.controller} == set(before)
            else:
                assert not response.ok
    finally:
        for service in services.values():
            client.node.destroy_client(service)
    assert {n: c.state for n, c in controllers(client).items()} == before
