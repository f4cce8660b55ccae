"""A plugin's parameters, declared beside its code: one :class:`ParameterSpec` per parameter
(name, type, unit, description, default, live or read-only, validator), gathered in a
:class:`ParameterSchema` for the plugin's section of controllers.yaml (``canopen.*``, ...).

From a schema come the YAML defaults (:meth:`ParameterSchema.defaults`), the ROS parameter
descriptors (``ros/parameters.py`` reads :meth:`ParameterSchema.describe` and ``live``) and the
validation (:meth:`ParameterSchema.parse`, which a plugin's ``from_config`` calls on its own
section only). Plain Python: no ROS here.

Backends register their schema under the entry-point group ``ct_controllers.parameters`` with
their section's name (the ``backend:`` value), so the configuration checks a backend's section
without naming the backend (:func:`section_schema`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ct_controllers.errors import ConfigError
from ct_controllers.plugins import UnknownPluginError, load_plugin

PARAMETERS = "ct_controllers.parameters"

# A validator returns what is wrong with a value (the message after the parameter's name), or
# None when it is fine.
Validator = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter. ``kind``: bool | int | float | str, of the value or of each element when
    ``sequence``; ``per_joint``: a sequence of one value per joint (``arm_joints +
    gripper_joints`` order); ``live``: may change at run time (``ros2 param set``), else
    read-only once the stack runs; ``unit`` as written in descriptions (``N·m | N``)."""

    name: str
    kind: type
    default: Any
    description: str
    unit: str = ""
    sequence: bool = False
    per_joint: bool = False
    live: bool = False
    validator: Validator | None = None

    def describe(self) -> str:
        return f"{self.description} [{self.unit}]" if self.unit else self.description

    def check_kind(self, full_name: str, value: Any) -> Any:
        """``value`` as this parameter's Python value (tuples for sequences); ConfigError if it
        has the wrong type."""
        if self.sequence or self.per_joint:
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"parameter '{full_name}': expected a list, got {value!r}")
            return tuple(self._element(full_name, v) for v in value)
        return self._element(full_name, value)

    def _element(self, full_name: str, value: Any) -> Any:
        if self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"parameter '{full_name}': expected a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"parameter '{full_name}': expected finite numbers, got {value}")
            return float(value)
        if self.kind is int:
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or value != int(value)
            ):
                raise ConfigError(f"parameter '{full_name}': expected an integer, got {value!r}")
            return int(value)
        if not isinstance(value, self.kind) or (isinstance(value, bool) and self.kind is not bool):
            raise ConfigError(
                f"parameter '{full_name}': expected {self.kind.__name__}, got {value!r}"
            )
        return value


@dataclass(frozen=True)
class ParameterSchema:
    """A plugin's section: ``section.<name>`` for every spec; ``checks`` judge the parsed section
    as a whole (one parameter against another) and return what is wrong, or None."""

    section: str
    parameters: tuple[ParameterSpec, ...]
    checks: tuple[Callable[[Mapping[str, Any], int | None], str | None], ...] = ()

    def full_name(self, spec: ParameterSpec) -> str:
        return f"{self.section}.{spec.name}" if self.section else spec.name

    def defaults(self) -> dict[str, Any]:
        """Full parameter name -> default: what the YAML section holds unless changed."""
        return {
            self.full_name(s): list(s.default) if isinstance(s.default, tuple) else s.default
            for s in self.parameters
        }

    def describe(self) -> dict[str, tuple[str, bool]]:
        """Full parameter name -> (description with unit, live)."""
        return {self.full_name(s): (s.describe(), s.live) for s in self.parameters}

    @property
    def live(self) -> tuple[str, ...]:
        """Names (within the section) of the parameters that may change at run time."""
        return tuple(s.name for s in self.parameters if s.live)

    def parse(self, params: Mapping[str, Any], joint_count: int | None = None) -> dict[str, Any]:
        """This section of the flattened parameters, checked: name within the section -> value.
        Every parameter must be present. ``joint_count`` sizes the per-joint lists (None: any
        length, for a section present but not in use). ConfigError names the parameter."""
        values: dict[str, Any] = {}
        for spec in self.parameters:
            name = self.full_name(spec)
            if name not in params:
                raise ConfigError(f"parameter '{name}' is missing")
            value = spec.check_kind(name, params[name])
            if spec.per_joint and joint_count is not None and len(value) != joint_count:
                raise ConfigError(
                    f"parameter '{name}': expected {joint_count} values, got {len(value)}"
                )
            if spec.validator is not None:
                problem = spec.validator(value)
                if problem:
                    raise ConfigError(f"parameter '{name}': {problem}")
            values[spec.name] = value
        for check in self.checks:
            problem = check(values, joint_count)
            if problem:
                raise ConfigError(problem)
        return values


def section_schema(section: str) -> ParameterSchema | None:
    """The schema registered for ``section`` (a backend's ``backend:`` value), or None."""
    try:
        schema = load_plugin(PARAMETERS, section)
    except UnknownPluginError:
        return None
    assert isinstance(schema, ParameterSchema), f"{PARAMETERS} '{section}' is not a schema"
    return schema


# Validators shared by schemas.
def positive(value: Any) -> str | None:
    values = value if isinstance(value, tuple) else (value,)
    return None if all(v > 0 for v in values) else f"must be > 0, got {value}"


def non_negative(value: Any) -> str | None:
    values = value if isinstance(value, tuple) else (value,)
    return None if all(v >= 0 for v in values) else f"must be >= 0, got {value}"


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> str | None:
        values = value if isinstance(value, tuple) else (value,)
        wrong = [v for v in values if v not in choices]
        return f"{wrong} not one of {', '.join(choices)}" if wrong else None

    return check
