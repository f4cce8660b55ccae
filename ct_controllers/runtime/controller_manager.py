"""Which loaded controller runs: the ros2_control controller_manager's switch semantics, plain
Python. Every joint-level controller claims all joints, so exactly one is active at a time.

``selected`` is the controller chosen by configuration or ``switch``; a goal may run with another
one (``use``) and gives it back afterwards (``release``).

An *overlay* (:meth:`set_overlay`) wraps every controller the manager installs until it is
removed — a gripper controller that keeps commanding its last goal across the goals that follow,
as a ros2_control gripper controller stays active beside the arm's controllers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ct_controllers.controllers.controller import Controller
from ct_controllers.runtime.control_loop import ControlLoop

# What wraps each installed controller: the wrapper, or None to remove the overlay (and install
# the controller as it is: one that drives what the overlay drove, e.g. the Grasp's fingers).
Overlay = Callable[[Controller], Controller | None]


@dataclass(frozen=True)
class SwitchResult:
    ok: bool
    message: str
    active: str  # the controller active after the call


class ControllerManager:
    def __init__(
        self,
        loop: ControlLoop,
        controllers: Mapping[str, Controller],
        types: Mapping[str, str],
        active: str,
    ) -> None:
        if active not in controllers:
            raise ValueError(f"unknown controller '{active}'; loaded: {', '.join(controllers)}")
        self.loop = loop
        self.controllers = dict(controllers)
        self.types = dict(types)
        self._active = active
        self._selected = active
        self._lock = threading.Lock()
        # The standard-interface controllers (trajectory, gripper actions): name -> type, and
        # whether each is active (an inactive one's action refuses goals, as in ros2_control).
        self.interface_types: dict[str, str] = {}
        self._interface_active: dict[str, bool] = {}
        self._overlay: Overlay | None = None
        self._running: Controller = self.controllers[active]  # installed, before any overlay

    def add_interface_controller(self, name: str, type_name: str, active: bool = True) -> None:
        """Register a standard-interface controller (its server asks :meth:`is_active`)."""
        with self._lock:
            self.interface_types[name] = type_name
            self._interface_active[name] = active

    def is_active(self, name: str) -> bool:
        """Whether ``name`` runs: the active joint-level controller, or an active
        standard-interface controller."""
        with self._lock:
            return name == self._active or self._interface_active.get(name, False)

    @property
    def active(self) -> str:
        return self._active

    @property
    def selected(self) -> str:
        return self._selected

    def switch(
        self, activate: Sequence[str], deactivate: Sequence[str], strict: bool
    ) -> SwitchResult:
        """Activate at most one controller, deactivating the running one. ``strict``: any
        problem fails the whole request and changes nothing; best effort: unknown names are
        skipped. Deactivating the running controller without activating another is refused:
        the arm would be left uncommanded."""
        with self._lock:
            unknown = [n for n in (*activate, *deactivate) if n not in self.controllers]
            if unknown and strict:
                return self._result(False, f"unknown controller(s): {', '.join(unknown)}")
            to_activate = [n for n in dict.fromkeys(activate) if n in self.controllers]
            to_deactivate = [n for n in dict.fromkeys(deactivate) if n in self.controllers]
            if len(to_activate) > 1:
                return self._result(
                    False,
                    f"only one joint controller can be active, asked for {to_activate}",
                )
            inactive = [n for n in to_deactivate if n != self._active]
            if inactive and strict:
                return self._result(False, f"not active, cannot deactivate: {inactive}")
            if not to_activate:
                if self._active in to_deactivate:
                    return self._result(
                        False,
                        f"deactivating '{self._active}' with no replacement would leave the arm "
                        "uncommanded; activate another controller in the same request",
                    )
                return self._result(True, "nothing to switch" + self._skipped(unknown))
            target = to_activate[0]
            if target != self._active and self._active not in to_deactivate and strict:
                return self._result(
                    False,
                    f"'{self._active}' is active; deactivate it in the same request to activate "
                    f"'{target}'",
                )
            self._activate(target)
            self._selected = target
            return self._result(True, f"'{target}' active" + self._skipped(unknown))

    def use(self, name: str) -> None:
        """Run ``name`` (for one goal; "" = the selected controller)."""
        with self._lock:
            if name and name not in self.controllers:
                raise ValueError(
                    f"unknown controller '{name}'; loaded: {', '.join(self.controllers)}"
                )
            self._activate(name or self._selected)

    def use_chain(self, name: str, controller: Controller) -> None:
        """Run a chained controller built for one goal (e.g. differential IK → the selected
        joint controller); ``name`` is what ``active`` reports meanwhile."""
        with self._lock:
            self._install(controller)
            self._active = name

    def set_overlay(self, overlay: Overlay | None) -> None:
        """Wrap the running controller, and every one installed from now on, with ``overlay``
        (None: remove it; the running controller is re-installed as it is)."""
        with self._lock:
            self._overlay = overlay
            self._install(self._running)

    @property
    def overlay(self) -> Overlay | None:
        return self._overlay

    def release(self) -> None:
        """A goal ended: run the selected controller again."""
        with self._lock:
            self._activate(self._selected)

    def release_with(self, overlay: Overlay | None) -> None:
        """A goal ended: run the selected controller again, wrapped by ``overlay`` from the same
        tick on (:meth:`set_overlay`'s; None: none)."""
        with self._lock:
            self._overlay = overlay
            self._install(self.controllers[self._selected])
            self._active = self._selected

    def _activate(self, name: str) -> None:
        if name != self._active:
            self._install(self.controllers[name])
            self._active = name

    def _install(self, controller: Controller) -> None:
        """Run ``controller`` from the next tick, wrapped by the overlay if one is set (which
        may decline, removing itself)."""
        self._running = controller
        wrapped = None if self._overlay is None else self._overlay(controller)
        if wrapped is None:
            self._overlay = None
        self.loop.switch_controller(controller if wrapped is None else wrapped)

    def _result(self, ok: bool, message: str) -> SwitchResult:
        return SwitchResult(ok, message, self._active)

    @staticmethod
    def _skipped(unknown: list[str]) -> str:
        return f" (skipped unknown: {', '.join(unknown)})" if unknown else ""
