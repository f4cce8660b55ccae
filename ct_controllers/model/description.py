"""The robot description: the URDF (from xacro) and its ``<ros2_control>`` block.

One URDF is the single source of truth for the Pinocchio model, the MuJoCo scene and the
hardware configuration; this module expands it and reads the parts everybody needs.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import xacro

from ct_controllers.errors import CtError
from ct_controllers.model.locked_joints import LockError, lock_joints, with_mimics
from ct_controllers.plugins import HARDWARE, known_plugins
from ct_controllers.share import share_directory


class DescriptionError(CtError, ValueError):
    """The robot description is malformed or does not contain what the configuration names."""


@dataclass(frozen=True)
class JointInterfaces:
    """The ros2_control interfaces one joint offers."""

    name: str
    command_interfaces: tuple[str, ...]
    state_interfaces: tuple[str, ...]


@dataclass(frozen=True)
class HardwareDescription:
    """The ``<ros2_control>`` block: the hardware plugin and the joints it drives, in file order."""

    name: str
    plugin: str
    joints: tuple[JointInterfaces, ...]

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)


@dataclass(frozen=True)
class RobotDescription:
    """An expanded URDF (XML text) and the hardware block parsed from it. ``urdf`` has the
    block's locked joints fixed at their positions (:mod:`ct_controllers.model.locked_joints`):
    it is the robot every part of the stack models; ``locked_joints`` says which, name →
    position [rad | m] (their ``<mimic>`` followers included)."""

    urdf: str
    hardware: HardwareDescription
    source: str  # where it came from, for messages
    locked_joints: Mapping[str, float] = field(default_factory=dict)


def default_description_path() -> Path:
    """The bundled arm, ``urdf/ct_arm.urdf.xacro``."""
    return share_directory() / "urdf" / "ct_arm.urdf.xacro"


def load_description(
    path: str | Path | None = None, mappings: dict[str, str] | None = None
) -> RobotDescription:
    """Expand a URDF or xacro file and parse its ``<ros2_control>`` block.

    ``mappings`` are xacro arguments, e.g. ``{"backend": "mujoco"}``.
    """
    file = Path(path) if path is not None else default_description_path()
    if not file.is_file():
        raise DescriptionError(f"robot description not found: {file}")
    if file.suffix == ".xacro":
        urdf = xacro.process_file(str(file), mappings=dict(mappings or {})).toxml()
    else:
        urdf = file.read_text()
    return parse_description(urdf, source=str(file))


def joint_armature(urdf: str) -> dict[str, float]:
    """Joint name → armature [kg·m² | kg]: the reflected inertia of the joint's drive (rotor
    inertia × gear ratio²), which a geared arm's joint-space inertia adds on its diagonal.
    Standard URDF has no element for it; ct_controllers reads the attribute ``armature`` of
    ``<joint><dynamics>`` (as MJCF's joint ``armature``), and both the Pinocchio model
    (``model.armature``) and the MuJoCo scene (joint ``armature``) take it. Joints without it:
    none in the result (zero)."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise DescriptionError(f"not valid XML: {exc}") from exc
    armature: dict[str, float] = {}
    for joint in root.findall("joint"):
        dynamics = joint.find("dynamics")
        text = None if dynamics is None else dynamics.get("armature")
        if text is None:
            continue
        name = joint.get("name", "")
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= 0):
            raise DescriptionError(f"joint '{name}': armature must be a number >= 0, got {text!r}")
        armature[name] = value
    return armature


LOCKED_PREFIX = "locked."


def locked_positions(block: ET.Element, source: str) -> dict[str, float]:
    """The block's ``<hardware><param name="locked.JOINT">POSITION</param>``: joint → [rad | m].
    The stack does not drive these joints: they are fixed at that position in its model."""
    locked: dict[str, float] = {}
    for param in block.findall("hardware/param"):
        key = param.get("name", "")
        if not key.startswith(LOCKED_PREFIX):
            continue
        name, text = key[len(LOCKED_PREFIX) :], (param.text or "").strip()
        try:
            locked[name] = float(text)
        except ValueError:
            raise DescriptionError(
                f"{source}: <param name=\"{key}\">: '{text}' is not a position [rad | m]"
            ) from None
    return locked


def parse_description(urdf: str, source: str = "<string>") -> RobotDescription:
    """Parse an expanded URDF: check every ``<ros2_control>`` joint exists as a movable joint;
    fix the block's locked joints (``<hardware><param name="locked.JOINT">``) at their
    positions in the URDF the stack models."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise DescriptionError(f"{source}: not valid XML: {exc}") from exc
    blocks = root.findall("ros2_control")
    if len(blocks) > 1:
        # A vendor's URDF may bring its own block (another plugin) beside the one added for us
        # (ct-setup's xacro includes the URDF unchanged): the block of a registered hardware
        # plugin is ours.
        registered = set(known_plugins(HARDWARE))
        blocks = [b for b in blocks if b.findtext("hardware/plugin", "").strip() in registered]
    if len(blocks) != 1:
        found = len(root.findall("ros2_control"))
        raise DescriptionError(
            f"{source}: expected exactly one <ros2_control> block (or one naming a hardware "
            f"plugin of ours among several), found {found}"
        )
    block = blocks[0]
    plugin = block.findtext("hardware/plugin", default="").strip()
    if not plugin:
        raise DescriptionError(f"{source}: <ros2_control><hardware><plugin> is missing or empty")
    locked = locked_positions(block, source)
    driven_and_locked = sorted(
        e.get("name", "") for e in block.findall("joint") if e.get("name", "") in locked
    )
    if driven_and_locked:
        raise DescriptionError(
            f"{source}: joint(s) {', '.join(driven_and_locked)} both listed in <ros2_control> "
            'and locked (<param name="locked.…">): a joint is driven or locked'
        )
    if locked:
        try:
            urdf = lock_joints(urdf, locked, source)
        except LockError as exc:
            raise DescriptionError(str(exc)) from None
        locked = with_mimics(root, locked)
    movable = {
        j.get("name", ""): j.get("type", "")
        for j in ET.fromstring(urdf).findall("joint")
        if j.get("type") in ("revolute", "prismatic", "continuous")
    }
    joints: list[JointInterfaces] = []
    for element in block.findall("joint"):
        name = element.get("name", "")
        if name not in movable:
            raise DescriptionError(
                f"{source}: <ros2_control> names joint '{name}', which is not a movable joint of "
                f"the URDF (movable joints: {', '.join(sorted(movable))})"
            )
        if any(j.name == name for j in joints):
            raise DescriptionError(f"{source}: <ros2_control> lists joint '{name}' twice")
        joints.append(
            JointInterfaces(
                name=name,
                command_interfaces=tuple(
                    c.get("name", "") for c in element.findall("command_interface")
                ),
                state_interfaces=tuple(
                    s.get("name", "") for s in element.findall("state_interface")
                ),
            )
        )
    if not joints:
        raise DescriptionError(f"{source}: <ros2_control> lists no joints")
    hardware = HardwareDescription(name=block.get("name", ""), plugin=plugin, joints=tuple(joints))
    return RobotDescription(urdf=urdf, hardware=hardware, source=source, locked_joints=locked)
