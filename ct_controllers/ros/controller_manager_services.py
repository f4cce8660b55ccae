"""The controller manager's services with ros2_control's types (``controller_manager_msgs``,
Jazzy), so that ``ros2 control`` and the spawner work on this node, and ``~/reset_fault``
(ct_interfaces): ``~/list_controllers``, ``~/list_controller_types``,
``~/list_hardware_components``, ``~/list_hardware_interfaces``, ``~/switch_controller``,
``~/load_controller``, ``~/configure_controller``, ``~/cleanup_controller``,
``~/unload_controller``, ``~/set_hardware_component_state``.

Thin: the lifecycle and switch semantics are :class:`~ct_controllers.runtime.controller_manager.
ControllerManager`'s, the claims :mod:`ct_controllers.runtime.controller_claims`'. Responses
that have no message field (load, configure, ...) are logged with the reason, as ros2_control's
controller manager logs them. Every service has a deep request queue (:func:`request_qos`): a
burst of calls is answered, not dropped.

The spawner sets ``<controller>.type`` and ``<controller>.params_file`` on this node before
``load_controller``: those names are declared when first set (as ros2_control's manager
declares ``<controller>.type`` when it loads one); every other undeclared name stays refused.
"""

from __future__ import annotations

from typing import Any

from controller_manager_msgs.msg import (
    ChainConnection,
    ControllerState,
    HardwareComponentState,
    HardwareInterface,
)
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
from ct_interfaces.srv import ResetFault
from lifecycle_msgs.msg import State
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.parameter import Parameter

from ct_controllers.config import ConfigError
from ct_controllers.hardware.interface import LifecycleState
from ct_controllers.interface_controllers import is_interface_controller
from ct_controllers.plugins import CONTROLLERS, UnknownPluginError, known_plugins, load_plugin
from ct_controllers.ros.goals import request_qos
from ct_controllers.runtime.controller_claims import controller_interfaces, hardware_interfaces
from ct_controllers.runtime.controller_manager import (
    INTERFACE,
    JOINT_LEVEL,
    ControllerManager,
    LifecycleResult,
)
from ct_controllers.runtime.spawner_parameters import (
    SPAWNER_KEYS,
    controller_entries,
    is_spawner_parameter,
)

CHAINABLE_BASE = "controller_interface::ChainableControllerInterface"
CONTROLLER_BASE = "controller_interface::ControllerInterface"
DEFAULT_SWITCH_TIMEOUT = 1.0  # [s] a zero timeout means this, as in ros2_control
DATA_TYPE = "double"
LIFECYCLE_IDS = {
    LifecycleState.UNCONFIGURED: State.PRIMARY_STATE_UNCONFIGURED,
    LifecycleState.INACTIVE: State.PRIMARY_STATE_INACTIVE,
    LifecycleState.ACTIVE: State.PRIMARY_STATE_ACTIVE,
}
STRICTNESS = SwitchController.Request


class ControllerManagerServices:
    def __init__(
        self, node: Any, stack: Any, manager: ControllerManager, callback_group: Any
    ) -> None:
        self.node, self.stack, self.manager = node, stack, manager
        self.logger = node.get_logger()
        self.hardware = stack.hardware
        self.update_rate = min(round(stack.config.update_rate), 65535)  # uint16 [Hz]
        self._types: list[tuple[str, str]] | None = None
        for service_type, name, callback in (
            (ListControllers, "list_controllers", self._list_controllers),
            (ListControllerTypes, "list_controller_types", self._list_types),
            (ListHardwareComponents, "list_hardware_components", self._list_components),
            (ListHardwareInterfaces, "list_hardware_interfaces", self._list_interfaces),
            (SwitchController, "switch_controller", self._switch),
            (LoadController, "load_controller", self._load),
            (ConfigureController, "configure_controller", self._configure),
            (CleanupController, "cleanup_controller", self._cleanup),
            (UnloadController, "unload_controller", self._unload),
            (SetHardwareComponentState, "set_hardware_component_state", self._set_hardware),
            (ResetFault, "reset_fault", self._reset),
        ):
            node.create_service(
                service_type,
                "~/" + name,
                callback,
                qos_profile=request_qos(),
                callback_group=callback_group,
            )
        node.add_pre_set_parameters_callback(self._declare_spawner_parameters)
        node.add_on_set_parameters_callback(self._check_spawner_parameters)

    # --- the spawner's parameters ----------------------------------------------------------
    @staticmethod
    def owns(name: str) -> bool:
        """A parameter this module checks (the node's own callback leaves it alone)."""
        return is_spawner_parameter(name)

    def _declare_spawner_parameters(self, parameters: list[Parameter]) -> list[Parameter]:
        for parameter in parameters:
            if self.owns(parameter.name) and not self.node.has_parameter(parameter.name):
                self.node.declare_parameter(
                    parameter.name,
                    descriptor=ParameterDescriptor(
                        description="set by the spawner before load_controller",
                        dynamic_typing=True,
                    ),
                )
        return parameters

    def _check_spawner_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        for parameter in parameters:
            if not self.owns(parameter.name) or parameter.type_ == Parameter.Type.NOT_SET:
                continue
            key = parameter.name.partition(".")[2]
            value = parameter.value
            if key == "type" and not (isinstance(value, str) and value):
                return SetParametersResult(
                    successful=False,
                    reason=f"'{parameter.name}': expected a controller type name, got {value!r}",
                )
            if key == "params_file" and not (
                isinstance(value, str) or (isinstance(value, list) and value)
            ):
                return SetParametersResult(
                    successful=False,
                    reason=f"'{parameter.name}': expected a file or a list of files",
                )
        return SetParametersResult(successful=True)

    def _parameter(self, name: str) -> Any:
        if not self.node.has_parameter(name):
            return None
        return self.node.get_parameter(name).value

    # --- listing ---------------------------------------------------------------------------
    def _command_interfaces(self) -> dict[str, str]:
        return dict(zip(self.hardware.joint_names, self.hardware.command_interfaces, strict=True))

    def _list_controllers(self, request: Any, response: Any) -> Any:
        statuses = self.manager.statuses()
        claims = controller_interfaces(statuses, self.manager.selected, self._command_interfaces())
        for status in statuses:
            interfaces = claims[status.name]
            response.controller.append(
                ControllerState(
                    name=status.name,
                    state=status.state,
                    type=status.type,
                    is_async=False,
                    update_rate=self.update_rate,
                    claimed_interfaces=list(interfaces.claimed),
                    required_command_interfaces=list(interfaces.required_command),
                    required_state_interfaces=list(interfaces.required_state),
                    is_chainable=interfaces.is_chainable,
                    is_chained=interfaces.is_chained,
                    exported_state_interfaces=[],
                    reference_interfaces=list(interfaces.references),
                    chain_connections=[
                        ChainConnection(name=name, reference_interfaces=list(references))
                        for name, references in interfaces.chain_connections
                    ],
                )
            )
        return response

    def _controller_types(self) -> list[tuple[str, str]]:
        """(type, base class) of every controller entry point (read once: loading them costs)."""
        if self._types is None:
            types = []
            for name in known_plugins(CONTROLLERS):
                try:
                    plugin = load_plugin(CONTROLLERS, name)
                except Exception as exc:  # a broken third-party entry point: say so, go on
                    self.logger.warning(f"controller type '{name}' cannot be loaded: {exc}")
                    continue
                base = CONTROLLER_BASE if is_interface_controller(plugin) else CHAINABLE_BASE
                types.append((name, base))
            self._types = types
        return self._types

    def _list_types(self, request: Any, response: Any) -> Any:
        for name, base in self._controller_types():
            response.types.append(name)
            response.base_classes.append(base)
        return response

    def _claimed(self) -> list[str]:
        statuses = self.manager.statuses()
        claims = controller_interfaces(statuses, self.manager.selected, self._command_interfaces())
        return [name for c in claims.values() for name in c.claimed]

    def _hardware_interfaces(self) -> tuple[list[HardwareInterface], list[HardwareInterface]]:
        commands, states = hardware_interfaces(
            self.stack.description.hardware,
            self._command_interfaces(),
            self.hardware.state.value,
            self._claimed(),
        )
        return (
            [_interface(i) for i in commands],
            [_interface(i) for i in states],
        )

    def _list_components(self, request: Any, response: Any) -> Any:
        commands, states = self._hardware_interfaces()
        description = self.stack.description.hardware
        response.component.append(
            HardwareComponentState(
                name=description.name,
                type="system",
                is_async=False,
                rw_rate=self.update_rate,
                class_type="",
                plugin_name=description.plugin,
                state=self._lifecycle_state(),
                command_interfaces=commands,
                state_interfaces=states,
            )
        )
        return response

    def _list_interfaces(self, request: Any, response: Any) -> Any:
        commands, states = self._hardware_interfaces()
        response.command_interfaces = commands
        response.state_interfaces = states
        return response

    def _lifecycle_state(self) -> State:
        state = self.hardware.state
        return State(id=LIFECYCLE_IDS[state], label=state.value)

    # --- switch ----------------------------------------------------------------------------
    def _switch(self, request: Any, response: Any) -> Any:
        strict, note = self._strictness(request.strictness)
        if strict is None:
            response.ok, response.message = False, note
            return response
        timeout = request.timeout.sec + request.timeout.nanosec * 1e-9  # [s]
        if request.timeout.sec < 0 or request.timeout.nanosec >= 1_000_000_000:
            response.ok = False
            response.message = (
                f"timeout must be a duration >= 0 s (sec >= 0, nanosec < 1e9), got "
                f"sec={request.timeout.sec} nanosec={request.timeout.nanosec}"
            )
            return response
        timeout = timeout or DEFAULT_SWITCH_TIMEOUT
        before = self.manager.selected
        result = self.manager.switch(
            list(request.activate_controllers), list(request.deactivate_controllers), strict
        )
        message = result.message
        snapshot = self.stack.loop.snapshot()
        # The loop installs a new joint-level controller at its next tick boundary (with
        # activate_asap or not: there is no other point to switch at); answer once a tick
        # begun after the request has run (the one under way may have begun before it).
        switched = result.ok and self.manager.selected != before and snapshot is not None
        if switched and self.stack.loop.wait_for_snapshot(snapshot.tick + 1, timeout) is None:
            message += f" (the loop has not ticked within {timeout:g} s: it takes effect then)"
        response.ok = result.ok
        response.message = f"{message} ({note})" if note else message
        if not result.ok:
            self.logger.warning(f"switch_controller: {response.message}")
        return response

    def _strictness(self, value: int) -> tuple[bool | None, str]:
        """(strict, note): strictness 0 (unset), AUTO and FORCE_AUTO are served BEST_EFFORT
        with a warning, as Jazzy's controller manager does; anything else but STRICT and
        BEST_EFFORT is refused (strict None)."""
        if value == STRICTNESS.STRICT:
            return True, ""
        if value == STRICTNESS.BEST_EFFORT:
            return False, ""
        fallbacks = {0: "strictness 0 (unset)", STRICTNESS.AUTO: "AUTO", 4: "FORCE_AUTO"}
        if value in fallbacks:
            note = (
                f"{fallbacks[value]}: using BEST_EFFORT ({STRICTNESS.BEST_EFFORT}); set STRICT "
                f"({STRICTNESS.STRICT}) or BEST_EFFORT explicitly"
            )
            self.logger.warning(f"switch_controller: {note}")
            return False, note
        return None, (
            f"strictness must be STRICT ({STRICTNESS.STRICT}) or BEST_EFFORT "
            f"({STRICTNESS.BEST_EFFORT}) (0, AUTO and FORCE_AUTO: BEST_EFFORT), got {value}"
        )

    # --- lifecycle -------------------------------------------------------------------------
    def _load(self, request: Any, response: Any) -> Any:
        response.ok = self._report("load_controller", self._load_outcome(request.name))
        return response

    def _load_outcome(self, name: str) -> LifecycleResult:
        if not name or "." in name or "/" in name:
            return LifecycleResult(False, f"'{name}' is not a controller name")
        if self.manager.loaded(name):
            return LifecycleResult(
                False,
                f"A controller named '{name}' was already loaded inside the controller manager",
            )
        type_name = self._parameter(f"{name}.type") or self.manager.was_loaded(name)
        if not isinstance(type_name, str) or not type_name:
            return LifecycleResult(
                False,
                f"The 'type' param was not defined for '{name}' (set parameter '{name}.type', "
                "as the spawner does)",
            )
        try:
            plugin = load_plugin(CONTROLLERS, type_name)
        except UnknownPluginError as exc:
            return LifecycleResult(False, f"controller '{name}': {exc}")
        kind = INTERFACE if is_interface_controller(plugin) else JOINT_LEVEL
        return self.manager.load(name, type_name, kind)

    def _configure(self, request: Any, response: Any) -> Any:
        name = request.name
        result = self.manager.configure(name, lambda: self._entries(name))
        response.ok = self._report("configure_controller", result)
        return response

    def _entries(self, name: str) -> dict[str, Any]:
        """A controller loaded after startup: its entries from its ``params_file`` (the
        spawner's) and any ``<name>.<entry>`` parameter of this node."""
        files = self._parameter(f"{name}.params_file")
        files = [files] if isinstance(files, str) else list(files or [])
        entries = controller_entries(files, name, self.node.get_namespace())
        for key, parameter in self.node.get_parameters_by_prefix(name).items():
            if key not in SPAWNER_KEYS and parameter.type_ != Parameter.Type.NOT_SET:
                entries[key] = parameter.value
        if not entries:
            raise ConfigError(
                f"no parameters for '{name}': give its file with '{name}.params_file' (the "
                "spawner's --param-file)"
            )
        return entries

    def _cleanup(self, request: Any, response: Any) -> Any:
        response.ok = self._report("cleanup_controller", self.manager.cleanup(request.name))
        return response

    def _unload(self, request: Any, response: Any) -> Any:
        response.ok = self._report("unload_controller", self.manager.unload(request.name))
        return response

    def _report(self, service: str, result: LifecycleResult) -> bool:
        if result.ok:
            self.logger.info(f"{service}: {result.message}")
        else:
            self.logger.error(f"{service}: {result.message}")
        return result.ok

    # --- hardware --------------------------------------------------------------------------
    def _set_hardware(self, request: Any, response: Any) -> Any:
        refusal = self._hardware_refusal(request.name, request.target_state)
        response.ok = refusal is None
        response.state = self._lifecycle_state()
        if refusal is not None:
            self.logger.error(f"set_hardware_component_state: {refusal}")
        return response

    def _hardware_refusal(self, name: str, target: State) -> str | None:
        """Why the transition is not made (None: the component is in that state already).
        The control loop writes the backend every tick and has no paused mode: taking the
        backend out of 'active' under it would leave the arm uncommanded (the loop faults on
        the refused write, a real drive holds its last command until its own watchdog), so no
        backend leaves 'active' while the node runs; it is deactivated and cleaned up when
        the node stops. The control thread is also the only caller of a backend: a transition
        made here, on an executor thread, would race its reads and writes."""
        component = self.stack.description.hardware.name
        if name != component:
            return f"hardware component with name '{name}' does not exist (have: '{component}')"
        current = self.hardware.state
        labels = {v: k for k, v in LIFECYCLE_IDS.items()}
        wanted = labels.get(target.id)
        if wanted is None and target.id == 0:  # an id left unset: the label names the state
            wanted = next((s for s in LIFECYCLE_IDS if s.value == target.label), None)
        if wanted is None:
            return (
                f"'{name}': target state id {target.id} ('{target.label}') is not one of "
                "unconfigured (1), inactive (2), active (3)"
            )
        if wanted is current:
            return None
        if self.hardware.requires_arming and not self.hardware.armed:
            return (
                f"'{name}' drives real hardware and parameter 'hardware.armed' is false: no "
                "transition is made"
            )
        what = "real drives" if self.hardware.requires_arming else "the simulation"
        return (
            f"'{name}' ({what}) stays {current.value}: the control loop commands it every tick "
            f"and cannot pause, so going {wanted.value} would leave the arm uncommanded; stop "
            "the node to deactivate the hardware"
        )

    # --- faults ----------------------------------------------------------------------------
    def _reset(self, request: Any, response: Any) -> Any:
        """Clear a latched fault; the loop refuses unless fresh data is flowing, and the reply
        is the outcome of the tick that processed the request."""
        loop = self.stack.loop
        fault = loop.fault
        if fault is None:
            response.ok, response.message = True, "no fault latched"
            return response
        refusal = loop.reset_fault_and_wait(timeout=1.0)
        response.ok = refusal is None
        response.message = f"fault cleared: {fault}" if refusal is None else refusal
        return response


def _interface(status: Any) -> HardwareInterface:
    return HardwareInterface(
        name=status.name,
        data_type=DATA_TYPE,
        is_available=status.available,
        is_claimed=status.claimed,
    )
