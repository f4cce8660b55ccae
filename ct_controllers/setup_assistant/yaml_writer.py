"""``controllers.yaml`` for the user's robot: a ROS 2 parameters file in the shape of the bundled
``config/controllers.yaml``, written from the schemas that check it — the stack's own entries
(:data:`ct_controllers.stack_parameters.PARAMETERS`), each controller type's and each backend's
section (:func:`~ct_controllers.parameter_schema.section_schema`) — so that every entry the
stack reads is there, with its description and unit in a comment.

A schema's defaults are sized for the bundled arm; every per-joint entry therefore needs a value
for this robot (``values``), or :func:`render` refuses (a new per-joint parameter must be given a
value here, never the bundled arm's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ct_controllers.config import NODE_KEYS
from ct_controllers.parameter_schema import ParameterSchema, ParameterSpec

NODE = NODE_KEYS[0]  # /ct/controller_manager
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}
COMMENT_COLUMN = 44


def scalar(value: Any) -> str:
    """``value`` as a YAML flow scalar (a list as a flow sequence)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # The shortest text that reads back as the same float, in the form YAML 1.1 (PyYAML,
        # rclpy's parameter files) takes for a float: a mantissa with a point ("1.0e-07").
        text = repr(value)
        if not all(c.isdigit() or c in "+-.e" for c in text):
            raise ValueError(f"no YAML float for {value!r}")
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}e{exponent}" if exponent else mantissa
    if isinstance(value, str):
        plain = _PLAIN.fullmatch(value) and value.lower() not in _RESERVED
        return value if plain else json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    raise TypeError(f"no YAML form for {value!r}")


class Entry:
    """One line: a dotted name (within ros__parameters), its value and its comment."""

    def __init__(self, name: str, value: Any, comment: str) -> None:
        self.name, self.value, self.comment = name, value, comment


def schema_entries(
    schema: ParameterSchema,
    values: Mapping[str, Any],
    prefix: str | None = None,
    notes: Mapping[str, str] | None = None,
) -> list[Entry]:
    """One entry per spec of ``schema`` (names under ``prefix``, default the schema's section):
    the value from ``values`` (by full name) or the spec's default; a per-joint spec without a
    value is refused (its default is the bundled arm's)."""
    section = schema.section if prefix is None else prefix
    entries = []
    for spec in schema.parameters:
        name = f"{section}.{spec.name}" if section else spec.name
        entries.append(_entry(spec, name, values, (notes or {}).get(name)))
    return entries


def _entry(spec: ParameterSpec, name: str, values: Mapping[str, Any], note: str | None) -> Entry:
    if name in values:
        value = values[name]
    elif spec.per_joint:
        raise KeyError(
            f"no value for the per-joint parameter '{name}' (its default is sized for the "
            "bundled arm)"
        )
    else:
        value = spec.default
    if isinstance(value, tuple):
        value = list(value)
    comment = spec.describe() if note is None else f"{spec.describe()}; {note}"
    return Entry(name, value, comment)


def render(entries: Iterable[Entry], header: Sequence[str] = ()) -> str:
    """The parameters file: ``header`` lines as comments, then ``NODE: ros__parameters:`` and the
    entries nested by their dotted names (a section where its first entry is)."""
    tree: dict[str, Any] = {}
    for entry in entries:
        node = tree
        *sections, leaf = entry.name.split(".")
        for section in sections:
            node = node.setdefault(section, {})
        if leaf in node:
            raise ValueError(f"parameter '{entry.name}' written twice")
        node[leaf] = entry
    lines = [f"# {line}" if line else "#" for line in header]
    lines += [f"{NODE}:", "  ros__parameters:"]
    _lines(tree, 2, lines)
    return "\n".join(lines) + "\n"


def _lines(node: Mapping[str, Any], depth: int, lines: list[str]) -> None:
    indent = "  " * depth
    for key, item in node.items():
        if isinstance(item, Entry):
            text = f"{indent}{key}: {scalar(item.value)}"
            pad = max(COMMENT_COLUMN - len(text), 1)
            lines.append(f"{text}{' ' * pad}# {item.comment}" if item.comment else text)
        else:
            lines.append(f"{indent}{key}:")
            _lines(item, depth + 1, lines)
