"""The user's robot file read as a tree of links and joints, the way the setup assistant needs
it: every joint with its type, limits and ``<mimic>``, the root link, the ``<ros2_control>``
plugins it already names. A ``.xacro`` file is expanded first (its own defaults, and
``backend`` when it declares that argument); the expansion must parse as a URDF that Pinocchio
accepts, or :class:`SetupError` says why in one line.

Units: positions [rad | m], velocities [rad/s | m/s], efforts [N·m | N], as the URDF has them.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pinocchio as pin

from ct_controllers.setup_assistant.errors import SetupError

MOVABLE = ("revolute", "continuous", "prismatic")


@dataclass(frozen=True)
class UrdfJoint:
    """One ``<joint>``. ``lower``/``upper``: the position limits (±inf for a continuous joint);
    ``mimic``: the joint it follows (``q = multiplier · q_master + offset``), or None."""

    name: str
    type: str
    parent: str
    child: str
    lower: float
    upper: float
    velocity: float
    effort: float
    mimic: str | None = None
    multiplier: float = 1.0
    offset: float = 0.0

    @property
    def movable(self) -> bool:
        return self.type in MOVABLE

    @property
    def prismatic(self) -> bool:
        return self.type == "prismatic"


@dataclass(frozen=True)
class RobotTree:
    """The link tree of one robot (``name``), joints in file order, ``urdf`` the expanded XML."""

    name: str
    root: str
    links: tuple[str, ...]
    joints: tuple[UrdfJoint, ...]
    plugins: tuple[str, ...]  # the <ros2_control><hardware><plugin> of each block, in order
    urdf: str
    source: Path

    def joint(self, name: str) -> UrdfJoint:
        for joint in self.joints:
            if joint.name == name:
                return joint
        raise KeyError(name)

    @property
    def movable(self) -> tuple[UrdfJoint, ...]:
        return tuple(j for j in self.joints if j.movable)

    def parent_joint(self, link: str) -> UrdfJoint | None:
        for joint in self.joints:
            if joint.child == link:
                return joint
        return None

    def children(self, link: str) -> tuple[UrdfJoint, ...]:
        return tuple(j for j in self.joints if j.parent == link)

    def path(self, top: str, link: str) -> tuple[UrdfJoint, ...] | None:
        """The joints from ``top`` down to ``link`` (top first), or None when ``link`` is not
        ``top`` nor below it."""
        joints: list[UrdfJoint] = []
        while link != top:
            joint = self.parent_joint(link)
            if joint is None:
                return None
            joints.append(joint)
            link = joint.parent
        return tuple(reversed(joints))

    def subtree(self, link: str) -> tuple[str, ...]:
        """``link`` and every link below it, depth first in file order."""
        found = [link]
        for joint in self.children(link):
            found.extend(self.subtree(joint.child))
        return tuple(found)

    def joints_below(self, link: str) -> tuple[UrdfJoint, ...]:
        """The joints of the subtree under ``link``, in file order."""
        links = set(self.subtree(link))
        return tuple(j for j in self.joints if j.parent in links)


def _number(element: ET.Element | None, attribute: str, default: float) -> float:
    text = None if element is None else element.get(attribute)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        return math.nan


def _expand(path: Path, arguments: Mapping[str, str]) -> str:
    if path.suffix != ".xacro":
        if arguments:
            raise SetupError(
                f"{path}: xacro arguments ({', '.join(arguments)}) given for a file that is not "
                "a .xacro"
            )
        return path.read_text()
    import xacro  # only for xacro input: it takes a while to import

    declared = "xacro:arg" in path.read_text() and 'name="backend"' in path.read_text()
    mappings = {**({"backend": "mujoco"} if declared else {}), **arguments}
    try:
        return str(xacro.process_file(str(path), mappings=mappings).toxml())
    except Exception as exc:  # xacro raises its own and many built-in kinds
        message = f"{path}: xacro cannot expand it: {exc}".splitlines()[0]
        if "Undefined substitution argument" in message:
            message += " (give xacro arguments as NAME:=VALUE after the file)"
        raise SetupError(message) from None


def read_robot(path: str | Path, arguments: Mapping[str, str] | None = None) -> RobotTree:
    """Read and check ``path`` (URDF or xacro, expanded with the xacro ``arguments``, name →
    value, as ``xacro file name:=value`` would). :class:`SetupError` names the file and the
    problem: not found, not XML, not a ``<robot>``, a joint without parent or child, a link
    named twice, no single root, a joint limit that is not a number, or what Pinocchio refuses."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise SetupError(f"URDF not found: {file}")
    return parse_robot(_expand(file, dict(arguments or {})), file)


def parse_robot(urdf: str, file: Path) -> RobotTree:
    """:func:`read_robot` of the expanded URDF text ``urdf`` read from ``file``."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise SetupError(f"{file}: the URDF does not parse (not valid XML: {exc})") from None
    if root.tag != "robot":
        raise SetupError(
            f"{file}: the URDF does not parse (root element <{root.tag}>, not <robot>)"
        )
    links = tuple(link.get("name", "") for link in root.findall("link"))
    twice = sorted({name for name in links if links.count(name) > 1})
    if twice:
        raise SetupError(f"{file}: link(s) named twice: {', '.join(twice)}")
    joints: list[UrdfJoint] = []
    for element in root.findall("joint"):
        name, kind = element.get("name", ""), element.get("type", "")
        parent, child = element.find("parent"), element.find("child")
        if parent is None or child is None:
            raise SetupError(f"{file}: joint '{name}' lacks a <parent> or <child>")
        limit, mimic = element.find("limit"), element.find("mimic")
        unbounded = kind == "continuous" or kind not in MOVABLE
        joint = UrdfJoint(
            name=name,
            type=kind,
            parent=parent.get("link", ""),
            child=child.get("link", ""),
            lower=-math.inf if unbounded else _number(limit, "lower", 0.0),
            upper=math.inf if unbounded else _number(limit, "upper", 0.0),
            velocity=_number(limit, "velocity", math.inf),
            effort=_number(limit, "effort", math.inf),
            mimic=None if mimic is None else mimic.get("joint"),
            multiplier=_number(mimic, "multiplier", 1.0),
            offset=_number(mimic, "offset", 0.0),
        )
        numbers = (joint.lower, joint.upper, joint.velocity, joint.effort)
        if joint.movable and (any(math.isnan(v) for v in numbers) or joint.lower > joint.upper):
            raise SetupError(f"{file}: joint '{name}' has a <limit> that is not a valid range")
        joints.append(joint)
    children = {j.child for j in joints}
    roots = [link for link in links if link not in children]
    if len(roots) != 1:
        raise SetupError(f"{file}: expected one root link, found {len(roots)} ({', '.join(roots)})")
    try:
        pin.buildModelFromXML(urdf)
    except Exception as exc:  # Pinocchio raises ValueError, RuntimeError, ...
        raise SetupError(f"{file}: the URDF does not parse (Pinocchio: {exc})") from None
    plugins = tuple(
        block.findtext("hardware/plugin", default="").strip()
        for block in root.findall("ros2_control")
    )
    return RobotTree(
        name=root.get("name", "") or file.stem,
        root=roots[0],
        links=links,
        joints=tuple(joints),
        plugins=plugins,
        urdf=urdf,
        source=file,
    )
