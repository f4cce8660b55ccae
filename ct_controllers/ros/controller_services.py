"""``/ct/controller_manager/list_controllers``, ``.../switch_controller`` and
``.../reset_fault`` (ct_interfaces/srv)."""

from __future__ import annotations

from typing import Any

from ct_interfaces.srv import ListControllers, ResetFault, SwitchController

from ct_controllers.ros.goals import request_qos


class ControllerServices:
    def __init__(self, node: Any, stack: Any, manager: Any, callback_group: Any) -> None:
        self.stack, self.manager = stack, manager
        prefix = "~/"
        # Deep request queues: a burst of calls is answered, not dropped (see ros/goals.py).
        node.create_service(
            ListControllers,
            prefix + "list_controllers",
            self._list,
            qos_profile=request_qos(),
            callback_group=callback_group,
        )
        node.create_service(
            SwitchController,
            prefix + "switch_controller",
            self._switch,
            qos_profile=request_qos(),
            callback_group=callback_group,
        )
        node.create_service(
            ResetFault,
            prefix + "reset_fault",
            self._reset,
            qos_profile=request_qos(),
            callback_group=callback_group,
        )

    def _list(self, request: Any, response: Any) -> Any:
        names = list(self.manager.controllers)
        response.names = names
        response.types = [self.manager.types[n] for n in names]
        response.states = ["active" if n == self.manager.active else "inactive" for n in names]
        return response

    def _switch(self, request: Any, response: Any) -> Any:
        if request.strictness not in (
            SwitchController.Request.STRICT,
            SwitchController.Request.BEST_EFFORT,
        ):
            response.ok = False
            response.message = (
                f"strictness must be STRICT ({SwitchController.Request.STRICT}) or BEST_EFFORT "
                f"({SwitchController.Request.BEST_EFFORT}), got {request.strictness}"
            )
            return response
        result = self.manager.switch(
            list(request.activate_controllers),
            list(request.deactivate_controllers),
            strict=request.strictness == SwitchController.Request.STRICT,
        )
        response.ok, response.message = result.ok, result.message
        return response

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
