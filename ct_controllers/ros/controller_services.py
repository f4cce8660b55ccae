"""``/ct/controller_manager/list_controllers``, ``.../switch_controller`` and
``.../reset_fault`` (ct_interfaces/srv)."""

from __future__ import annotations

from typing import Any

from ct_interfaces.srv import ListControllers, ResetFault, SwitchController

from ct_controllers.ros.goals import request_qos


class ControllerServices:
    def __init__(self, node: Any, stack: Any, manager: Any, callback_group: Any) -> None:
        self.stack, self.manager = stack, manager
        self.logger = node.get_logger()
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
        strictness = request.strictness
        note = ""
        if strictness == 0:
            # As ros2_control's controller_manager: a request that leaves strictness at its
            # default (0) is served BEST_EFFORT, with a warning.
            note = (
                f"strictness 0 (unset): using BEST_EFFORT ({SwitchController.Request.BEST_EFFORT});"
                f" set STRICT ({SwitchController.Request.STRICT}) or BEST_EFFORT explicitly"
            )
            self.logger.warning(f"switch_controller: {note}")
            strictness = SwitchController.Request.BEST_EFFORT
        if strictness not in (
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
            strict=strictness == SwitchController.Request.STRICT,
        )
        response.ok = result.ok
        response.message = f"{result.message} ({note})" if note else result.message
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
