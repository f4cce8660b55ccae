"""The node's ROS names as a user gives them: validation, the remap rules that carry them, and
which sections of a parameters file apply to a node. Plain Python (no rclpy): the launch plan,
``ct-bringup --print-plan`` and the launch files use it before any ROS context exists.

The rules are rcl's (Jazzy ``rcl/remap.c``, ``rcl_yaml_param_parser``, ``rmw_validate_*``):

- a node name is one token ``[A-Za-z_][A-Za-z0-9_]*``; a namespace is ``/`` or ``/token/...``
  (absolute: rcl refuses ``__ns:=arm2``, so a relative namespace given to ``ct-bringup`` is made
  absolute, as launch_ros makes a ``Node``'s);
- among remap rules, the first that matches wins (``-r __ns:=/ct ... -r __ns:=/arm2`` leaves the
  node in ``/ct``: issue 23's bug), so the user's name and namespace go into the plan itself;
- a parameters file's section applies to a node when its key, made absolute, matches the node's
  fully qualified name token by token, ``*`` matching one token and ``**`` any number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

TOKEN = r"[A-Za-z_][A-Za-z0-9_]*"
_NODE_NAME = re.compile(rf"^{TOKEN}$")
_NAMESPACE = re.compile(rf"^(/|(/{TOKEN})+)$")
_TOPIC = re.compile(rf"^(/|~/)?{TOKEN}(/{TOKEN})*$")
MAX_NAME_LENGTH = 255  # [characters] rmw's limit on a node name (and on a whole topic name)
CLOCK_TOPIC = "/clock"

# Flags of a --ros-args section that take a value (rcl arguments.c): their value is never read
# as a flag of its own.
_VALUE_FLAGS = frozenset(
    (
        "-r",
        "--remap",
        "-p",
        "--param",
        "--params-file",
        "-e",
        "--enclave",
        "--log-level",
        "--log-config-file",
        "--log-file-name",
    )
)
_REMAP_FLAGS = ("-r", "--remap")


def node_name(value: str) -> str:
    """``value`` if it is a valid ROS node name, else ValueError naming the rule it breaks."""
    if not _NODE_NAME.match(value) or len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"node name {value!r} is not a ROS node name (letters, digits and underscores, "
            f"not starting with a digit, at most {MAX_NAME_LENGTH} characters)"
        )
    return value


def absolute_namespace(value: str) -> str:
    """``value`` as an absolute ROS namespace (``arm2`` → ``/arm2``; ``/`` stays the root),
    else ValueError naming the rule it breaks."""
    absolute = value if value.startswith("/") else f"/{value}"
    if not _NAMESPACE.match(absolute) or len(absolute) > MAX_NAME_LENGTH:
        raise ValueError(
            f"namespace {value!r} is not a ROS namespace ('/'-separated tokens of letters, "
            "digits and underscores, none starting with a digit, no empty token, no trailing '/')"
        )
    return absolute


def topic_name(value: str) -> str:
    """``value`` if it is a valid ROS topic name (absolute, relative or ``~/``-private), else
    ValueError."""
    if not _TOPIC.match(value) or len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"topic {value!r} is not a ROS topic name ('/'-separated tokens of letters, digits "
            "and underscores, none starting with a digit)"
        )
    return value


def fully_qualified(namespace: str, name: str) -> str:
    """``/ns/name`` (``/name`` in the root namespace); ``namespace`` absolute."""
    return f"{namespace.rstrip('/')}/{name}"


def resolve_topic(topic: str, namespace: str, name: str) -> str:
    """The absolute name rcl gives ``topic`` in a node ``namespace``/``name`` (no remapping)."""
    if topic.startswith("/"):
        return topic
    if topic.startswith("~/"):
        return f"{fully_qualified(namespace, name)}/{topic[2:]}"
    return f"{namespace.rstrip('/')}/{topic}"


@dataclass(frozen=True)
class UserNames:
    """The name, namespace and clock topic a user's ROS arguments give the node (None: not
    given), and the arguments without those rules."""

    name: str | None
    namespace: str | None
    clock_topic: str | None
    rest: tuple[str, ...]


def split_user_names(arguments: Sequence[str], node: str) -> UserNames:
    """Take the rules that rename node ``node`` out of ``arguments`` (a command line's
    arguments after the program's own): ``-r``/``--remap`` ``__node:=``/``__name:=``,
    ``__ns:=`` and ``/clock:=`` inside ``--ros-args`` sections (up to a ``--``), also in their
    node-targeted form ``node:__ns:=...``. As in rcl the first rule of each kind wins; the
    ones after it are dropped too (they could never apply). Rules targeted at another node stay
    in ``rest``. The values are validated (ValueError)."""
    found: dict[str, str] = {}
    rest: list[str] = []
    in_ros_args = False
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument == "--ros-args":
            in_ros_args = True
        elif argument == "--" and in_ros_args:
            in_ros_args = False
        elif in_ros_args and argument in _VALUE_FLAGS and index + 1 < len(arguments):
            value = arguments[index + 1]
            kind = _renaming_rule(value, node) if argument in _REMAP_FLAGS else None
            if kind is None:
                rest += [argument, value]
            else:
                found.setdefault(kind, value.split(":=", 1)[1])
            index += 2
            continue
        rest.append(argument)
        index += 1
    name = found.get("__node")
    namespace = found.get("__ns")
    clock = found.get(CLOCK_TOPIC)
    return UserNames(
        name=None if name is None else node_name(name),
        namespace=None if namespace is None else absolute_namespace(namespace),
        clock_topic=None if clock is None else topic_name(clock),
        rest=tuple(_without_empty_sections(rest)),
    )


def _renaming_rule(rule: str, node: str) -> str | None:
    """``__node``, ``__ns`` or ``/clock`` if ``rule`` (``[node:]match:=replacement``) is one
    of those for ``node`` (or for every node), else None."""
    if ":=" not in rule:
        return None
    match = rule.split(":=", 1)[0]
    target, _, bare = match.rpartition(":")
    if target and target != node:
        return None
    if bare in ("__node", "__name"):
        return "__node"
    if bare in ("__ns", CLOCK_TOPIC):
        return bare
    return None


def _without_empty_sections(arguments: list[str]) -> list[str]:
    """Drop a ``--ros-args`` section left empty (``--ros-args --``, or one at the end)."""
    kept: list[str] = []
    index = 0
    while index < len(arguments):
        following = arguments[index + 1] if index + 1 < len(arguments) else None
        if arguments[index] == "--ros-args" and following in (None, "--", "--ros-args"):
            index += 2 if following == "--" else 1
            continue
        kept.append(arguments[index])
        index += 1
    return kept


def _key_tokens(key: str) -> list[str]:
    return [token for token in (key if key.startswith("/") else f"/{key}").split("/") if token]


def key_matches(key: str, node: str) -> bool:
    """Whether a parameters file's section ``key`` applies to the node ``node`` (fully
    qualified): rcl's matching, ``*`` one token, ``**`` any number of tokens."""
    pattern = "".join(
        "(/[^/]+)*" if token == "**" else "/[^/]+" if token == "*" else "/" + re.escape(token)
        for token in _key_tokens(key)
    )
    return re.fullmatch(pattern, node) is not None


def sections_for(keys: Iterable[str], node: str) -> list[str]:
    """The keys of ``keys`` whose sections apply to ``node``, in order."""
    return [key for key in keys if key_matches(key, node)]
