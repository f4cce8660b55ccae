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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, SupportsFloat

from ct_controllers.errors import ConfigError, CtError
from ct_controllers.plugins import UnknownPluginError, load_plugin

PARAMETERS = "ct_controllers.parameters"


class _Required:
    """The default of a parameter that has none: the robot's own (its joints, frames, per-joint
    limits), which the configuration file must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

# A validator returns what is wrong with a value (the message after the parameter's name), or
# None when it is fine.
Validator = Callable[[Any], "str | None"]


class ParameterProblem(CtError, ValueError):
    """What is wrong with a value, without the parameter's name (the caller names it: a
    section's ``parameter 'canopen.bitrate': ...``, a controller's ``stiffness: ...``)."""


# The shapes a parameter's value has (:attr:`ParameterSpec.shape`).
SCALAR = "scalar"  # one value
PER_JOINT = "per_joint"  # one value per joint, arm_joints + gripper_joints order
FIXED = "fixed"  # a sequence of a fixed size (or one of a few): a 6-vector, a 6x6 matrix
LIST = "list"  # a sequence of any length (names, ...)


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter. ``kind``: bool | int | float | str, of the value or of each element when
    ``sequence``; ``per_joint``: a sequence of one value per joint (``arm_joints +
    gripper_joints`` order); ``size``: a sequence of exactly this many values, or of one of
    the counts of a tuple (6 or 36: a 6-vector or a 6x6 matrix row by row), whatever the
    robot; ``live``: may change at run time (``ros2 param set``), else read-only once the
    stack runs; ``unit`` as written in descriptions (``N·m | N``); ``default``
    :data:`REQUIRED`: none — what the robot is (joint names, frames, per-joint values) comes
    from the configuration file, never from a default. What is live is judged by its
    :attr:`shape` (``controllers/controller.py``, ``runtime/gain_checks.py``,
    ``ros/parameters.py``)."""

    name: str
    kind: type
    default: Any
    description: str
    unit: str = ""
    sequence: bool = False
    per_joint: bool = False
    live: bool = False
    validator: Validator | None = None
    size: int | tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.size is not None and self.per_joint:
            raise ValueError(f"{self.name}: a per-joint parameter takes no fixed size")

    def describe(self) -> str:
        return f"{self.description} [{self.unit}]" if self.unit else self.description

    @property
    def shape(self) -> str:
        """:data:`SCALAR`, :data:`PER_JOINT`, :data:`FIXED` (``size``) or :data:`LIST`."""
        if self.per_joint:
            return PER_JOINT
        if self.size is not None:
            return FIXED
        return LIST if self.sequence else SCALAR

    @property
    def sizes(self) -> tuple[int, ...]:
        """The counts a :data:`FIXED` sequence may have (empty for the other shapes)."""
        if self.size is None:
            return ()
        return self.size if isinstance(self.size, tuple) else (self.size,)

    @property
    def bounds(self) -> tuple[float, float] | None:
        """(low, high) of a number (or of each element) whose validator is a :class:`Range`:
        what the ROS descriptor's ``floating_point_range`` says; None otherwise. An open
        bound (> 0) is given closed: the descriptor describes, the validator decides."""
        if self.kind is not float or not isinstance(self.validator, Range):
            return None
        return self.validator.low, self.validator.high

    @property
    def zero_by_default(self) -> bool:
        """A per-joint entry that may be left out (or given empty): then 0 for every joint. For
        a model term most robots do not have (default ``()``), so that no file must list it."""
        return self.per_joint and self.default == ()

    @property
    def required(self) -> bool:
        """No default: the configuration must give it."""
        return self.default is REQUIRED

    def check(self, value: Any, joint_count: int | None = None) -> Any:
        """``value`` checked and as this parameter's Python value (a tuple for a sequence):
        its kind, a per-joint sequence's length (``joint_count``; None: any), then the
        validator. Raises :class:`ParameterProblem` saying what is wrong. The one check every
        plugin's parameters go through: a section's (:meth:`ParameterSchema.parse`), a
        controller's entries and its live gains (``controllers/controller.py``)."""
        if self.sequence or self.per_joint or self.size is not None:
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
                raise ParameterProblem(f"expected a list, got {value!r}")
            items = list(value)
            numbers = self.kind is float and all(_is_number(v) for v in items)
            if numbers and not all(math.isfinite(v) for v in items):
                raise ParameterProblem(f"non-finite value in {[float(v) for v in items]}")
            checked: Any = tuple(self._element(v) for v in items)
            if self.per_joint and joint_count is not None and len(checked) != joint_count:
                raise ParameterProblem(f"expected {joint_count} values, got {len(checked)}")
            sizes = self.sizes
            if sizes and len(checked) not in sizes:
                expected = " or ".join(str(n) for n in sizes)
                raise ParameterProblem(f"expected {expected} values, got {len(checked)}")
        else:
            checked = self._element(value)
        if self.validator is not None:
            problem = self.validator(checked)
            if problem:
                raise ParameterProblem(problem)
        return checked

    def _element(self, value: Any) -> Any:
        if self.kind is float:
            if not _is_number(value):
                raise ParameterProblem(f"expected a number, got {value!r}")
            if not math.isfinite(value):
                raise ParameterProblem(f"expected finite numbers, got {value}")
            return float(value)
        if self.kind is int:
            if not _is_number(value) or not math.isfinite(value) or value != int(value):
                raise ParameterProblem(f"expected an integer, got {value!r}")
            return int(value)
        if not isinstance(value, self.kind) or (isinstance(value, bool) and self.kind is not bool):
            raise ParameterProblem(f"expected {self.kind.__name__}, got {value!r}")
        return value


def _is_number(value: Any) -> bool:
    """int or float (numpy's included), not bool."""
    return isinstance(value, (int, float, SupportsFloat)) and not isinstance(value, (bool, str))


@dataclass(frozen=True)
class ParameterSchema:
    """A plugin's section: ``section.<name>`` for every spec; ``checks`` judge the parsed section
    as a whole (one parameter against another) and return what is wrong, or None.
    ``joint_lists``: for a schema that names the joints itself (the stack's), the sequence
    entries whose lengths together size its per-joint ones when :meth:`parse` is given no
    ``joint_count`` (they come first in ``parameters``)."""

    section: str
    parameters: tuple[ParameterSpec, ...]
    checks: tuple[Callable[[Mapping[str, Any], int | None], str | None], ...] = ()
    joint_lists: tuple[str, ...] = ()

    def full_name(self, spec: ParameterSpec) -> str:
        return f"{self.section}.{spec.name}" if self.section else spec.name

    def defaults(self) -> dict[str, Any]:
        """Full parameter name -> default: what the YAML section holds unless changed (the
        required parameters, which have none, are not in it: :attr:`required`; nor those
        :attr:`~ParameterSpec.zero_by_default`, which a file leaves out to mean 0)."""
        return {
            self.full_name(s): list(s.default) if isinstance(s.default, tuple) else s.default
            for s in self.parameters
            if not s.required and not s.zero_by_default
        }

    @property
    def required(self) -> tuple[str, ...]:
        """Full names of the parameters without a default (the configuration must give them)."""
        return tuple(self.full_name(s) for s in self.parameters if s.required)

    def describe(self) -> dict[str, tuple[str, bool]]:
        """Full parameter name -> (description with unit, live)."""
        return {self.full_name(s): (s.describe(), s.live) for s in self.parameters}

    @property
    def live(self) -> tuple[str, ...]:
        """Names (within the section) of the parameters that may change at run time."""
        return tuple(s.name for s in self.parameters if s.live)

    def spec(self, name: str) -> ParameterSpec:
        """The spec of ``name`` (within the section); KeyError if it has none."""
        for spec in self.parameters:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def parse(self, params: Mapping[str, Any], joint_count: int | None = None) -> dict[str, Any]:
        """This section of the flattened parameters, checked: name within the section -> value.
        Every parameter must be present. ``joint_count`` sizes the per-joint lists (None: any
        length, for a section present but not in use; or, with ``joint_lists``, the joint lists'
        total length). ConfigError names the parameter."""
        values: dict[str, Any] = {}
        for spec in self.parameters:
            name = self.full_name(spec)
            if name not in params:
                what = " (it has no default: it describes the robot)" if spec.required else ""
                raise ConfigError(f"parameter '{name}' is missing{what}")
            if spec.per_joint and joint_count is None and self.joint_lists:
                joint_count = sum(len(values[n]) for n in self.joint_lists)
            try:
                values[spec.name] = spec.check(params[name], joint_count)
            except ParameterProblem as wrong:
                raise ConfigError(f"parameter '{name}': {wrong}") from None
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


# Validators shared by schemas: what is wrong with a checked value (a tuple for a sequence).
@dataclass(frozen=True)
class Range:
    """A validator of numbers (each element of a sequence) within [low, high], or
    (low, high] with ``open_low``; its bounds are the ROS descriptor's range
    (:attr:`ParameterSpec.bounds`)."""

    low: float
    high: float = math.inf
    open_low: bool = False
    unit: str = ""  # written after the interval in the message (" Hz")

    def __call__(self, value: Any) -> str | None:
        values = value if isinstance(value, tuple) else (value,)
        low, high = self.low, self.high
        above = all(v > low for v in values) if self.open_low else all(v >= low for v in values)
        if above and all(v <= high for v in values):
            return None
        if self.open_low and high == math.inf:
            return f"must be > {low:g}{self.unit}, got {_shown(value)}"
        opening = "(" if self.open_low else "["
        if isinstance(value, tuple):
            return f"values must be in {opening}{low:g}, {high:g}]{self.unit}, got {list(value)}"
        if high == math.inf and not self.open_low:
            return f"must be >= {low:g}{self.unit}, got {value}"
        return f"must be in {opening}{low:g}, {high:g}]{self.unit}, got {value}"


positive = Range(0.0, open_low=True)
non_negative = Range(0.0)


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> str | None:
        if not isinstance(value, tuple):
            return None if value in choices else f"'{value}' is not one of {', '.join(choices)}"
        wrong = [v for v in value if v not in choices]
        return f"{wrong} not one of {', '.join(choices)}" if wrong else None

    return check


def _shown(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
