"""Plugins by name, the way pluginlib resolves ros2_control types: through package entry points.

Groups: ``ct_controllers.hardware`` (names used in the URDF ``<hardware><plugin>`` tag) and
``ct_controllers.controllers`` (the ``type`` of each controller in controllers.yaml). A third-party
package adds one by declaring an entry point in its own metadata.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from ct_controllers.errors import CtError

HARDWARE = "ct_controllers.hardware"
CONTROLLERS = "ct_controllers.controllers"


class UnknownPluginError(CtError, LookupError):
    """No plugin of that name in the group; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


def known_plugins(group: str) -> list[str]:
    return sorted(ep.name for ep in entry_points(group=group))


def load_plugin(group: str, name: str) -> Any:
    """The object registered as ``name`` in ``group``."""
    for entry_point in entry_points(group=group):
        if entry_point.name == name:
            return entry_point.load()
    raise UnknownPluginError(
        f"unknown {group.rsplit('.', 1)[-1]} plugin '{name}'; known: "
        f"{', '.join(known_plugins(group)) or '(none installed)'}"
    )
