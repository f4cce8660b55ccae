"""Locked joints: movable joints of the URDF the stack does not drive, held at a position.

A mobile manipulator's wheels and head, a dual-arm robot's other arm, a legged robot's legs under
its arm: joints neither on the arm chain nor in the gripper. The stack drives every movable joint
of its model, so each of these is *locked*: the URDF is rewritten with that joint ``fixed`` at its
locked position, and everything built from the description (the Pinocchio model, the MuJoCo
scene, the link tree on ``/tf``) sees a robot whose locked links are part of their parent.

A joint fixed at position q moves its child by the joint's motion at q, after its origin:

    T_parent,child = T_origin · T_motion(q),
    T_motion(q) = Rot(axis, q)            (revolute, continuous; q [rad])
                = Trans(axis · q)         (prismatic; q [m])

so the fixed joint's ``<origin>`` is that product (``xyz`` and URDF ``rpy``: R = Rz(y)·Ry(p)·Rx(r)).
A ``<mimic>`` joint whose master is locked is locked too, at multiplier · q + offset.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping

import numpy as np
import pinocchio as pin

from ct_controllers.errors import CtError

MOVABLE = ("revolute", "continuous", "prismatic")

# Children of a movable <joint> that a fixed one does not have (URDF spec).
_MOTION_ELEMENTS = ("axis", "limit", "dynamics", "mimic", "calibration", "safety_controller")


class LockError(CtError, ValueError):
    """A locked joint that is not a movable joint of the URDF, or a position it cannot take."""


def _vector(text: str | None, default: tuple[float, float, float]) -> np.ndarray:
    if text is None:
        return np.array(default, dtype=float)
    values = [float(v) for v in text.split()]
    if len(values) != 3:
        raise ValueError(text)
    return np.array(values, dtype=float)


def _origin(joint: ET.Element) -> pin.SE3:
    origin = joint.find("origin")
    xyz = _vector(None if origin is None else origin.get("xyz"), (0.0, 0.0, 0.0))
    rpy = _vector(None if origin is None else origin.get("rpy"), (0.0, 0.0, 0.0))
    return pin.SE3(pin.rpy.rpyToMatrix(*rpy), xyz)


def _motion(joint: ET.Element, position: float) -> pin.SE3:
    axis_element = joint.find("axis")
    axis = _vector(None if axis_element is None else axis_element.get("xyz"), (1.0, 0.0, 0.0))
    norm = float(np.linalg.norm(axis))
    if norm == 0.0:
        raise ValueError("a zero <axis>")
    axis = axis / norm
    if joint.get("type") == "prismatic":
        return pin.SE3(np.eye(3), axis * position)
    return pin.SE3(pin.exp3(axis * position), np.zeros(3))


def _format(values: np.ndarray) -> str:
    return " ".join(repr(float(v)) for v in values)


def _range(joint: ET.Element) -> tuple[float, float]:
    if joint.get("type") == "continuous":
        return -math.inf, math.inf
    limit = joint.find("limit")
    lower = float(limit.get("lower", "0")) if limit is not None else 0.0
    upper = float(limit.get("upper", "0")) if limit is not None else 0.0
    return lower, upper


def with_mimics(urdf_root: ET.Element, positions: Mapping[str, float]) -> dict[str, float]:
    """``positions`` and, for every ``<mimic>`` joint whose master is among them (transitively),
    its position multiplier · q_master + offset."""
    locked = dict(positions)
    joints = urdf_root.findall("joint")
    added = True
    while added:
        added = False
        for joint in joints:
            name, mimic = joint.get("name", ""), joint.find("mimic")
            if mimic is None or name in locked or mimic.get("joint") not in locked:
                continue
            multiplier = float(mimic.get("multiplier", "1"))
            offset = float(mimic.get("offset", "0"))
            locked[name] = multiplier * locked[mimic.get("joint", "")] + offset
            added = True
    return locked


def lock_joints(urdf: str, positions: Mapping[str, float], source: str = "<string>") -> str:
    """``urdf`` (expanded XML) with every joint of ``positions`` (name → [rad | m]) and the
    ``<mimic>`` joints that follow them made ``fixed`` at those positions (module docstring).
    No joint to lock: ``urdf`` unchanged. :class:`LockError` names a joint that is not a movable
    joint of the URDF, a position that is not a finite number or lies outside the joint's
    ``<limit>``, a joint followed by another (``<mimic>``) that is itself not locked."""
    if not positions:
        return urdf
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise LockError(f"{source}: not valid XML: {exc}") from exc
    by_name = {joint.get("name", ""): joint for joint in root.findall("joint")}
    for name, value in positions.items():
        joint = by_name.get(name)
        if joint is None or joint.get("type") not in MOVABLE:
            movable = sorted(n for n, j in by_name.items() if j.get("type") in MOVABLE)
            raise LockError(
                f"{source}: locked joint '{name}' is not a movable joint of the URDF "
                f"(movable joints: {', '.join(movable)})"
            )
        if not math.isfinite(value):
            raise LockError(f"{source}: locked joint '{name}': position {value} is not finite")
        lower, upper = _range(joint)
        if not lower <= value <= upper:
            raise LockError(
                f"{source}: locked joint '{name}': position {value:g} is outside its limits "
                f"[{lower:g}, {upper:g}]"
            )
    locked = with_mimics(root, positions)
    for name, value in locked.items():
        joint = by_name[name]
        mimic = joint.find("mimic")
        if mimic is not None and mimic.get("joint") not in locked:
            raise LockError(
                f"{source}: locked joint '{name}' follows '{mimic.get('joint')}' (<mimic>): lock "
                "its master instead"
            )
        try:
            placement = _origin(joint) * _motion(joint, value)
        except ValueError as exc:
            raise LockError(
                f"{source}: joint '{name}': <origin> or <axis> is malformed: {exc}"
            ) from None
        for tag in _MOTION_ELEMENTS:
            for element in joint.findall(tag):
                joint.remove(element)
        origin = joint.find("origin")
        if origin is None:
            origin = ET.SubElement(joint, "origin")
        origin.set("xyz", _format(placement.translation))
        origin.set("rpy", _format(pin.rpy.matrixToRpy(placement.rotation)))
        joint.set("type", "fixed")
    return ET.tostring(root, encoding="unicode")
