"""The URDF's link tree as transforms, the way robot_state_publisher publishes it on /tf.

Every URDF joint gives one parent-link → child-link transform: a fixed joint's never changes
(``/tf_static``), a movable joint's follows the joint's position (``/tf``). Both are taken from
Pinocchio's frame placements, so a TF consumer that composes them from the base up gets exactly
the poses :meth:`RobotModel.frame_pose` computes:

    T_parent,child(q) = (⁰T_parent(q))⁻¹ ⁰T_child(q)

A frame the stack relies on that is not a URDF link (the TCP, when it is a Pinocchio frame of its
own) is added as a fixed child of the link it is attached to.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray

from ct_controllers.model.description import DescriptionError
from ct_controllers.model.robot import RobotModel

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class UrdfJoint:
    """One ``<joint>`` of a URDF: its name, type and the links it connects."""

    name: str
    type: str  # fixed, revolute, continuous, prismatic, ...
    parent: str
    child: str


@dataclass(frozen=True)
class LinkTransform:
    """The pose of ``child`` in ``parent``: translation [m] and unit quaternion (x, y, z, w)."""

    parent: str
    child: str
    translation: tuple[float, float, float]
    rotation: tuple[float, float, float, float]

    def matrix(self) -> FloatArray:
        """The same pose as a 4x4 homogeneous transform."""
        x, y, z, w = self.rotation
        pose = np.eye(4)
        pose[:3, :3] = pin.Quaternion(w, x, y, z).toRotationMatrix()
        pose[:3, 3] = self.translation
        return pose


def urdf_joints(urdf: str) -> tuple[UrdfJoint, ...]:
    """Every joint of an expanded URDF, in file order."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise DescriptionError(f"not valid XML: {exc}") from exc
    joints = []
    for element in root.findall("joint"):
        parent, child = element.find("parent"), element.find("child")
        if parent is None or child is None:
            raise DescriptionError(f"joint '{element.get('name', '')}' lacks a parent or child")
        joints.append(
            UrdfJoint(
                name=element.get("name", ""),
                type=element.get("type", ""),
                parent=parent.get("link", ""),
                child=child.get("link", ""),
            )
        )
    return tuple(joints)


def transform_of(parent: str, child: str, placement: pin.SE3) -> LinkTransform:
    """A :class:`LinkTransform` from a Pinocchio placement of ``child`` in ``parent``."""
    x, y, z, w = pin.Quaternion(placement.rotation).coeffs().tolist()
    tx, ty, tz = placement.translation.tolist()
    return LinkTransform(parent, child, (tx, ty, tz), (x, y, z, w))


class LinkTree:
    """Parent → child transforms of every URDF joint (and of the TCP frame if it is no link),
    from its own copy of the model: one instance per thread (Pinocchio data is scratch)."""

    def __init__(self, model: RobotModel, urdf: str) -> None:
        self.model = RobotModel(model.model, model.tcp_frame, model.base_frame)
        pinocchio = self.model.model
        self._q = pin.neutral(pinocchio)  # Pinocchio's configuration (fixed joints only)
        fixed: list[tuple[str, str, int, int]] = []
        moving: list[tuple[str, str, int, int]] = []
        links: set[str] = set()
        for joint in urdf_joints(urdf):
            ids = (self._body(joint.parent), self._body(joint.child))
            (fixed if joint.type == "fixed" else moving).append((joint.parent, joint.child, *ids))
            links.update((joint.parent, joint.child))
        if self.model.has_tcp:
            tcp = self.model.model.frames[self.model.tcp_frame_id]
            if tcp.name not in links:  # a Pinocchio frame of its own: fixed on its parent frame
                parent = pinocchio.frames[tcp.parentFrame].name
                fixed.append((parent, tcp.name, int(tcp.parentFrame), self.model.tcp_frame_id))
            links.add(tcp.name)
        self._fixed = tuple(fixed)
        self._moving = tuple(moving)
        self.links = frozenset(links)

    def _body(self, link: str) -> int:
        pinocchio = self.model.model
        if not pinocchio.existFrame(link, pin.BODY):
            raise DescriptionError(f"link '{link}' is not a body frame of the Pinocchio model")
        return int(pinocchio.getFrameId(link, pin.BODY))

    def static_transforms(self) -> list[LinkTransform]:
        """The fixed joints' transforms (they do not depend on q)."""
        return self._transforms(self._fixed, self._q)

    @property
    def moving_links(self) -> tuple[tuple[str, str], ...]:
        """(parent, child) of each movable joint, in the order of :meth:`moving_poses`."""
        return tuple((parent, child) for parent, child, _, _ in self._moving)

    def moving_poses(self, q: FloatArray) -> list[tuple[list[float], list[float]]]:
        """The movable joints' transforms at ``q`` as (translation [m], quaternion x y z w),
        in the order of :attr:`moving_links`: :meth:`moving_transforms` without the names, for
        publishing at the state rate. A mimic follower's transform follows its master."""
        pin.framesForwardKinematics(
            self.model.model, self.model.data, self.model.pinocchio_configuration(q)
        )
        placements = self.model.data.oMf
        poses = []
        for _, _, p, c in self._moving:
            relative = placements[p].actInv(placements[c])
            poses.append(
                (
                    relative.translation.tolist(),
                    pin.Quaternion(relative.rotation).coeffs().tolist(),
                )
            )
        return poses

    def moving_transforms(self, q: FloatArray) -> list[LinkTransform]:
        """The movable joints' transforms at joint positions ``q`` [rad | m] (model order, one
        per joint)."""
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (self.model.nq,):
            raise ValueError(f"q must have {self.model.nq} entries, got shape {q.shape}")
        return self._transforms(self._moving, self.model.pinocchio_configuration(q))

    def _transforms(
        self, pairs: tuple[tuple[str, str, int, int], ...], configuration: FloatArray
    ) -> list[LinkTransform]:
        """The transforms at Pinocchio's ``configuration`` (nq)."""
        pin.framesForwardKinematics(self.model.model, self.model.data, configuration)
        placements = self.model.data.oMf
        return [
            transform_of(parent, child, placements[p].actInv(placements[c]))
            for parent, child, p, c in pairs
        ]
