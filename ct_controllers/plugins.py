"""Plugins by name, the way pluginlib resolves ros2_control types: through package entry points.

Groups: ``ct_controllers.hardware`` (names used in the URDF ``<hardware><plugin>`` tag) and
``ct_controllers.controllers`` (the ``type`` of each controller in controllers.yaml). A third-party
package adds one by declaring an entry point in its own metadata.
"""

from __future__ import annotations

import os
import sys
import threading
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ct_controllers.errors import CtError

HARDWARE = "ct_controllers.hardware"
CONTROLLERS = "ct_controllers.controllers"


class UnknownPluginError(CtError, LookupError):
    """No plugin of that name in the group; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


_scanned: dict[str, tuple[tuple[tuple[str, int | None], ...], tuple[EntryPoint, ...]]] = {}
_scanning = threading.Lock()


def _search_path() -> tuple[tuple[str, int | None], ...]:
    """Each ``sys.path`` entry with its modification time [ns] (None: no such folder)."""
    stamped: list[tuple[str, int | None]] = []
    for entry in sys.path:
        try:
            stamped.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            stamped.append((entry, None))
    return tuple(stamped)


def plugin_entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``group``, as ``importlib.metadata.entry_points(group=...)`` gives
    them. That call reads the metadata of every installed distribution (about 250 in the venv:
    20-60 ms), and loading one configuration asked it 8 times (a bridge rig's stack 27
    times): the scan is kept per group and made again only when the search path has changed —
    an entry added to or removed from ``sys.path``, or a folder on it modified (a package
    installed there adds its ``.dist-info``)."""
    key = _search_path()
    with _scanning:
        found = _scanned.get(group)
        if found is None or found[0] != key:
            found = (key, tuple(entry_points(group=group)))
            _scanned[group] = found
    return found[1]


def known_plugins(group: str) -> list[str]:
    return sorted(ep.name for ep in plugin_entry_points(group))


def load_plugin(group: str, name: str) -> Any:
    """The object registered as ``name`` in ``group``."""
    for entry_point in plugin_entry_points(group):
        if entry_point.name == name:
            return entry_point.load()
    raise UnknownPluginError(
        f"unknown {group.rsplit('.', 1)[-1]} plugin '{name}'; known: "
        f"{', '.join(known_plugins(group)) or '(none installed)'}"
    )
