"""Which controllers are loaded, in which lifecycle state, and which one runs: the ros2_control
controller_manager's semantics (Jazzy), plain Python.

Two kinds of controller, as :mod:`ct_controllers.interface_controllers` tells them apart:

- **joint-level** (the effort laws: joint impedance, computed torque): each claims the command
  interface of every joint, so exactly one is active at a time, and the active one is never
  deactivated without a replacement in the same request (the arm would be left uncommanded);
- **standard-interface** (the trajectory and gripper action controllers): chained in front of
  the active joint-level one, whose reference interfaces they claim; activated and deactivated
  independently of it (an inactive one's action refuses goals: its server asks
  :meth:`ControllerManager.is_active`). Their servers register them
  (:meth:`ControllerManager.add_interface_controller`).

Lifecycle, as ros2_control's: ``load`` → unconfigured, ``configure`` → inactive (from inactive:
cleaned up and configured again), ``switch`` → active / inactive, ``cleanup`` → unconfigured,
``unload`` (not while active) → gone. A controller configured at startup keeps its instance
through cleanup and unload (its gains are the node's live parameters); one loaded later from a
``type`` and a parameters file is built when it is configured and dropped when cleaned up.

``selected`` is the joint-level controller the configuration or ``switch`` made active; a goal
may run with another one (``use``) and gives it back afterwards (``release``): lifecycle states
report the selected one as active.

An *overlay* (:meth:`set_overlay`) wraps every controller the manager installs until it is
removed — a gripper controller that keeps commanding its last goal across the goals that follow,
as a ros2_control gripper controller stays active beside the arm's controllers; deactivating its
owner (``switch``) removes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ct_controllers.controllers.controller import Controller
from ct_controllers.runtime.control_loop import ControlLoop

UNCONFIGURED = "unconfigured"
INACTIVE = "inactive"
ACTIVE = "active"
JOINT_LEVEL = "joint"  # an effort law: claims every joint's command interface
INTERFACE = "interface"  # a standard-interface controller chained in front of it

# Builds a joint-level controller of a type (its entry-point name) from its entries
# (``stiffness``, ...): the stack's factory for controllers loaded after startup.
ControllerFactory = Callable[[str, Mapping[str, Any]], Controller]
# What wraps each installed controller: the wrapper, or None to remove the overlay (and install
# the controller as it is: one that drives what the overlay drove, e.g. the Grasp's fingers).
Overlay = Callable[[Controller], Controller | None]


@dataclass(frozen=True)
class SwitchResult:
    ok: bool
    message: str
    active: str  # the controller active after the call


@dataclass(frozen=True)
class LifecycleResult:
    """The outcome of load / configure / cleanup / unload: ``message`` says what happened or
    why nothing did (the ROS responses carry only ``ok``; the node logs the message)."""

    ok: bool
    message: str


@dataclass(frozen=True)
class ControllerStatus:
    """One loaded controller as ``list_controllers`` shows it. ``joints``: those it moves (a
    standard-interface controller's; every joint for a joint-level one: ())."""

    name: str
    type: str
    kind: str  # JOINT_LEVEL | INTERFACE
    state: str  # UNCONFIGURED | INACTIVE | ACTIVE
    joints: tuple[str, ...] = ()


@dataclass
class _Entry:
    type: str
    kind: str
    state: str
    joints: tuple[str, ...] = ()
    controller: Controller | None = None  # joint-level, once configured
    from_startup: bool = True  # built from the configuration (kept through cleanup)


class ControllerManager:
    def __init__(
        self,
        loop: ControlLoop,
        controllers: Mapping[str, Controller],
        types: Mapping[str, str],
        active: str,
        factory: ControllerFactory | None = None,
        interface_joints: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """``controllers``: the joint-level controllers built at startup (all configured:
        inactive, but ``active``), ``types``: their type names. ``factory``: builds a
        joint-level controller loaded later (None: only startup ones can be loaded again);
        while configured, such a controller is in ``controllers`` too (when it is a dict: the
        stack's, where the pose and grasp chains look the selected controller up).
        ``interface_joints``: the configured standard-interface controllers' joints (what each
        claims), for those registered without."""
        if active not in controllers:
            raise ValueError(f"unknown controller '{active}'; loaded: {', '.join(controllers)}")
        self.loop = loop
        self.factory = factory
        self._registry = controllers if isinstance(controllers, dict) else None
        self._interface_joints = {k: tuple(v) for k, v in (interface_joints or {}).items()}
        self._entries: dict[str, _Entry] = {
            name: _Entry(
                type=types[name],
                kind=JOINT_LEVEL,
                state=ACTIVE if name == active else INACTIVE,
                controller=controller,
            )
            for name, controller in controllers.items()
        }
        self._unloaded: dict[str, _Entry] = {}  # startup controllers unloaded, to load again
        self._active = active  # what the loop runs (a goal's chain label meanwhile)
        self._selected = active
        # RLock: the ROS services hold it across a check and a change (several calls).
        self._lock = threading.RLock()
        self._overlay: Overlay | None = None
        self._overlay_owner = ""  # the standard-interface controller whose overlay it is
        self._running: Controller = controllers[active]  # installed, before any overlay

    # --- registration and queries -----------------------------------------------------------
    def add_interface_controller(
        self, name: str, type_name: str, active: bool = True, joints: Sequence[str] = ()
    ) -> None:
        """Register a standard-interface controller (its server asks :meth:`is_active`);
        ``joints``: those its references are for (what it claims)."""
        with self._lock:
            if name in self._entries and self._entries[name].kind == JOINT_LEVEL:
                raise ValueError(f"'{name}' is already a joint-level controller")
            self._entries[name] = _Entry(
                type=type_name,
                kind=INTERFACE,
                state=ACTIVE if active else INACTIVE,
                joints=tuple(joints) or self._interface_joints.get(name, ()),
            )

    def is_active(self, name: str) -> bool:
        """Whether ``name`` runs: the active joint-level controller, or an active
        standard-interface controller."""
        with self._lock:
            if name == self._active:
                return True
            entry = self._entries.get(name)
            return entry is not None and entry.kind == INTERFACE and entry.state == ACTIVE

    @property
    def controllers(self) -> dict[str, Controller]:
        """The configured joint-level controllers (inactive or active), by name: those a goal
        may run with."""
        with self._lock:
            return {
                n: e.controller
                for n, e in self._entries.items()
                if e.kind == JOINT_LEVEL and e.controller is not None and e.state != UNCONFIGURED
            }

    @property
    def types(self) -> dict[str, str]:
        """Every loaded joint-level controller's type name."""
        with self._lock:
            return {n: e.type for n, e in self._entries.items() if e.kind == JOINT_LEVEL}

    @property
    def interface_types(self) -> dict[str, str]:
        with self._lock:
            return {n: e.type for n, e in self._entries.items() if e.kind == INTERFACE}

    def statuses(self) -> list[ControllerStatus]:
        """Every loaded controller, joint-level first, each in load order."""
        with self._lock:
            rows = [
                ControllerStatus(n, e.type, e.kind, e.state, e.joints)
                for n, e in self._entries.items()
            ]
        return sorted(rows, key=lambda row: row.kind != JOINT_LEVEL)

    def loaded(self, name: str) -> bool:
        with self._lock:
            return name in self._entries

    def was_loaded(self, name: str) -> str | None:
        """The type of a startup controller that was unloaded (it can be loaded again)."""
        with self._lock:
            entry = self._unloaded.get(name)
            return None if entry is None else entry.type

    @property
    def active(self) -> str:
        return self._active

    @property
    def selected(self) -> str:
        return self._selected

    # --- switch ----------------------------------------------------------------------------
    def switch(
        self, activate: Sequence[str], deactivate: Sequence[str], strict: bool
    ) -> SwitchResult:
        """Jazzy's ``switch_controller``. Names: ``strict`` fails the whole request on the
        first unknown one; best effort skips unknown names (and fails when a list names only
        unknown ones). Per controller: activating one that is unconfigured, or active and not
        being deactivated, or deactivating one that is not active, fails strict and is dropped
        best effort. Then, whatever the strictness, the result must be possible: one
        joint-level controller active (activating a second while one runs claims its joints'
        command interfaces: deactivate the running one in the same request; deactivating it
        without a replacement would leave the arm uncommanded), and no two active
        standard-interface controllers claiming one joint's reference."""
        with self._lock:
            notes: list[str] = []
            lists: list[list[str]] = []
            for names, action in ((deactivate, "deactivate"), (activate, "activate")):
                unknown = [n for n in dict.fromkeys(names) if n not in self._entries]
                known = [n for n in dict.fromkeys(names) if n in self._entries]
                for name in unknown:
                    message = (
                        f"Could not {action} controller with name '{name}' because no "
                        "controller with this name exists"
                    )
                    if strict or not known:
                        return self._result(False, message)
                    notes.append(f"skipped unknown '{name}'")
                lists.append(known)
            to_deactivate, to_activate = lists
            for name in list(to_activate):
                problem = self._activation_problem(name, to_deactivate)
                if problem is not None:
                    if strict:
                        return self._result(False, problem)
                    notes.append(problem)
                    to_activate.remove(name)
            for name in list(to_deactivate):
                if self._entries[name].state != ACTIVE:
                    problem = (
                        f"Controller with name '{name}' can not be deactivated since it is "
                        "not active."
                    )
                    if strict:
                        return self._result(False, problem)
                    notes.append(problem)
                    to_deactivate.remove(name)
            if not to_activate and not to_deactivate:
                return self._result(
                    True,
                    "After checking the controllers, no controllers need to be activated or "
                    "deactivated." + _notes(notes),
                )
            problem = self._interfaces_problem(to_activate, to_deactivate)
            if problem is not None:
                return self._result(False, problem)
            for name in to_deactivate:
                self._entries[name].state = INACTIVE
                if self._overlay is not None and name == self._overlay_owner:
                    self._overlay = None  # its command ends with it
                    self._install(self._running)
            for name in to_activate:
                entry = self._entries[name]
                entry.state = ACTIVE
                if entry.kind == JOINT_LEVEL:
                    self._selected = name
                    self._activate(name)
            done = [f"activated {to_activate}"] if to_activate else []
            done += [f"deactivated {to_deactivate}"] if to_deactivate else []
            return self._result(True, "; ".join(done) + _notes(notes))

    def _activation_problem(self, name: str, to_deactivate: list[str]) -> str | None:
        state = self._entries[name].state
        if state == UNCONFIGURED:
            return (
                f"Controller with name '{name}' is in 'unconfigured' state. The controller needs "
                "to be configured to be in 'inactive' state before it can be checked and "
                "activated."
            )
        if state == ACTIVE and name not in to_deactivate:
            return f"Controller with name '{name}' is already active."
        return None

    def _interfaces_problem(self, to_activate: list[str], to_deactivate: list[str]) -> str | None:
        """What makes the switch impossible, whatever the strictness (ros2_control's interface
        availability check, and ours: the arm is never left uncommanded)."""
        joint_level = [n for n in to_activate if self._entries[n].kind == JOINT_LEVEL]
        if len(joint_level) > 1:
            return (
                f"Unable to activate controller '{joint_level[1]}' since the command interfaces "
                f"of every joint will be used by another controller that is being activated "
                f"('{joint_level[0]}'): only one joint-level controller can be active"
            )
        running = self._selected
        if joint_level and joint_level[0] != running and running not in to_deactivate:
            return (
                f"Unable to activate controller '{joint_level[0]}' since the command interfaces "
                f"of every joint are currently claimed by another controller ('{running}'); "
                f"deactivate it in the same request"
            )
        if running in to_deactivate and not joint_level:
            return (
                f"deactivating '{running}' with no replacement would leave the arm "
                "uncommanded; activate another joint-level controller in the same request"
            )
        # Standard-interface controllers: the reference of one joint is claimed by one.
        owners: dict[str, list[str]] = {}
        for name, entry in self._entries.items():
            stays = entry.state == ACTIVE and name not in to_deactivate
            if entry.kind == INTERFACE and (stays or name in to_activate):
                for joint in entry.joints:
                    owners.setdefault(joint, []).append(name)
        for joint, names in owners.items():
            new = [n for n in names if n in to_activate]
            if len(names) > 1 and new:
                other = next(n for n in names if n != new[0])
                return (
                    f"Unable to activate controller '{new[0]}' since the reference interface "
                    f"of joint '{joint}' is claimed by '{other}'"
                )
        return None

    # --- lifecycle -------------------------------------------------------------------------
    def load(self, name: str, type_name: str, kind: str) -> LifecycleResult:
        """Load ``name`` of ``type_name`` (an entry point of ours, of ``kind``): unconfigured."""
        with self._lock:
            if name in self._entries:
                return LifecycleResult(
                    False,
                    f"A controller named '{name}' was already loaded inside the controller manager",
                )
            if kind not in (JOINT_LEVEL, INTERFACE):
                raise ValueError(f"unknown controller kind '{kind}'")
            before = self._unloaded.get(name)
            if kind == INTERFACE and before is None:
                return LifecycleResult(
                    False,
                    f"'{name}' ({type_name}) serves an action of its own, which the node creates "
                    "at startup: list it in the configuration's 'controllers' instead",
                )
            if before is not None and before.type != type_name:
                return LifecycleResult(
                    False,
                    f"'{name}' was loaded at startup as {before.type}; it cannot come back as "
                    f"{type_name} (its parameters are that type's): choose another name",
                )
            if before is not None:
                del self._unloaded[name]
                before.state = UNCONFIGURED
                self._entries[name] = before
            else:
                if self.factory is None:
                    return LifecycleResult(False, "this manager cannot build new controllers")
                self._entries[name] = _Entry(
                    type=type_name, kind=kind, state=UNCONFIGURED, from_startup=False
                )
            return LifecycleResult(True, f"loaded '{name}' ({type_name}): unconfigured")

    def configure(
        self, name: str, entries: Callable[[], Mapping[str, Any]] | None = None
    ) -> LifecycleResult:
        """unconfigured → inactive; inactive → cleaned up and configured again. A controller
        loaded after startup is built here from ``entries()`` (its parameters, read now)."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                return LifecycleResult(
                    False,
                    f"Could not configure controller with name '{name}' because no controller "
                    "with this name exists",
                )
            if entry.state == ACTIVE:
                return LifecycleResult(
                    False, f"Controller '{name}' can not be configured from 'active' state."
                )
            if entry.state == INACTIVE:
                self._cleanup(entry)
            if entry.kind == JOINT_LEVEL and entry.controller is None:
                assert self.factory is not None  # load() refuses a new one without it
                try:
                    entry.controller = self.factory(entry.type, entries() if entries else {})
                except Exception as exc:  # bad gains, a missing entry: it stays unconfigured
                    return LifecycleResult(
                        False, f"Configuring '{name}' ({entry.type}) failed: {exc}"
                    )
                if self._registry is not None:
                    self._registry[name] = entry.controller
            entry.state = INACTIVE
            return LifecycleResult(True, f"configured '{name}': inactive")

    def cleanup(self, name: str) -> LifecycleResult:
        """inactive → unconfigured (unconfigured: nothing to do)."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                return LifecycleResult(
                    False,
                    f"Could not cleanup controller with name '{name}' because no controller "
                    "with this name exists",
                )
            if entry.state == ACTIVE:
                return LifecycleResult(
                    False, f"Controller '{name}' is active; deactivate it before cleaning up"
                )
            self._cleanup(entry)
            return LifecycleResult(True, f"cleaned up '{name}': unconfigured")

    def unload(self, name: str) -> LifecycleResult:
        """Remove a controller that is not active (cleaned up first)."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                return LifecycleResult(
                    False,
                    f"Could not unload controller with name '{name}' because no controller with "
                    "this name exists",
                )
            if entry.state == ACTIVE:
                return LifecycleResult(
                    False,
                    f"Could not unload controller with name '{name}' because it is still active",
                )
            self._cleanup(entry)
            del self._entries[name]
            if entry.from_startup:
                self._unloaded[name] = entry
            return LifecycleResult(True, f"unloaded '{name}'")

    def _cleanup(self, entry: _Entry) -> None:
        entry.state = UNCONFIGURED
        if not entry.from_startup:
            if self._registry is not None and entry.controller is not None:
                for name, controller in list(self._registry.items()):
                    if controller is entry.controller:
                        del self._registry[name]
            entry.controller = None

    # --- goals -----------------------------------------------------------------------------
    def use(self, name: str) -> None:
        """Run ``name`` (for one goal; "" = the selected controller)."""
        with self._lock:
            configured = self.controllers
            if name and name not in configured:
                raise ValueError(
                    f"unknown controller '{name}'; loaded and configured: {', '.join(configured)}"
                )
            self._activate(name or self._selected)

    def use_chain(self, name: str, controller: Controller) -> None:
        """Run a chained controller built for one goal (e.g. differential IK → the selected
        joint controller); ``name`` is what ``active`` reports meanwhile."""
        with self._lock:
            self._install(controller)
            self._active = name

    def release(self) -> None:
        """A goal ended: run the selected controller again."""
        with self._lock:
            self._activate(self._selected)

    def release_with(self, overlay: Overlay | None, owner: str = "") -> None:
        """A goal ended: run the selected controller again, wrapped by ``overlay`` (of the
        standard-interface controller ``owner``) from the same tick on (:meth:`set_overlay`)."""
        with self._lock:
            self._overlay, self._overlay_owner = overlay, owner
            controller = self._entries[self._selected].controller
            assert controller is not None  # the selected one is configured
            self._install(controller)
            self._active = self._selected

    def set_overlay(self, overlay: Overlay | None, owner: str = "") -> None:
        """Wrap the running controller, and every one installed from now on, with ``overlay``
        of the standard-interface controller ``owner`` (None: remove it; the running
        controller is re-installed as it is)."""
        with self._lock:
            self._overlay, self._overlay_owner = overlay, owner
            self._install(self._running)

    @property
    def overlay(self) -> Overlay | None:
        return self._overlay

    def _activate(self, name: str) -> None:
        if name != self._active:
            controller = self._entries[name].controller
            assert controller is not None  # configured: checked by the callers
            self._install(controller)
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


def _notes(notes: list[str]) -> str:
    return f" ({'; '.join(notes)})" if notes else ""


def joint_controller_factory(model: Any, joint_names: tuple[str, ...]) -> ControllerFactory:
    """Builds a joint-level controller as the stack builds those of the configuration: its
    type's ``from_parameters`` on a model with data of its own (``entries`` checked by the
    type's schema; per-joint vectors in ``joint_names`` order)."""
    from ct_controllers.plugins import CONTROLLERS, load_plugin

    def build(type_name: str, entries: Mapping[str, Any]) -> Controller:
        controller_type = load_plugin(CONTROLLERS, type_name)
        params = {**entries, "type": type_name}
        controller: Controller = controller_type.from_parameters(
            model.with_own_data(), joint_names, params
        )
        return controller

    return build
