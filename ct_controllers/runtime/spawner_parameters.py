"""A controller's parameters as ros2_control's spawner hands them over: it sets
``<controller>.params_file`` (the files that have a section for the controller) and
``<controller>.type`` on the controller manager, then calls ``load_controller``. Here: the
controller's entries read from those files, found under the keys the spawner looks for
(``<controller>``, ``<namespace>/<controller>``, ``/**/<controller>``,
``/**/<namespace>/<controller>``, each with ``ros__parameters``). Plain Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ct_controllers.config import ConfigError, flatten
from ct_controllers.parameters_yaml import load_yaml

# The parameters the spawner sets on the controller manager for a controller it loads
# (controller_manager/controller_manager_services.py, Jazzy).
SPAWNER_KEYS = ("type", "params_file", "fallback_controllers", "node_options_args")
ROS_PARAMETERS = "ros__parameters"


def is_spawner_parameter(name: str) -> bool:
    """``<controller>.type`` and the other entries the spawner sets."""
    controller, _, key = name.partition(".")
    return bool(controller) and key in SPAWNER_KEYS


def section_keys(controller: str, namespace: str) -> tuple[str, ...]:
    """The top-level keys under which a file may hold ``controller``'s section."""
    namespaced = f"/{controller}" if namespace in ("", "/") else f"{namespace}/{controller}"
    return (controller, namespaced, f"/**/{controller}", f"/**{namespaced}")


def controller_entries(files: Sequence[str], controller: str, namespace: str) -> dict[str, Any]:
    """``controller``'s entries from ``files`` (later files override earlier ones), flattened
    (``constraints.goal_time``); ``type`` and the other spawner keys left out. ConfigError
    naming the file when one cannot be read or has no section for the controller."""
    entries: dict[str, Any] = {}
    for file in files:
        try:
            document = load_yaml(Path(file).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"parameters file '{file}': {exc}") from None
        section = _section(document, controller, namespace)
        if section is None:
            raise ConfigError(
                f"parameters file '{file}' has no section for controller '{controller}' "
                f"(one of {', '.join(section_keys(controller, namespace))} with "
                f"{ROS_PARAMETERS})"
            )
        entries.update(flatten(section))
    return {k: v for k, v in entries.items() if k not in SPAWNER_KEYS}


def _section(document: Any, controller: str, namespace: str) -> Mapping[str, Any] | None:
    if not isinstance(document, Mapping):
        return None
    for key in section_keys(controller, namespace):
        node = document.get(key)
        if key.startswith("/**/") and node is None and isinstance(document.get("/**"), Mapping):
            node = document["/**"].get(key[len("/**/") :])  # nested: "/**": {controller: ...}
        if isinstance(node, Mapping) and isinstance(node.get(ROS_PARAMETERS), Mapping):
            return node[ROS_PARAMETERS]
    return None
