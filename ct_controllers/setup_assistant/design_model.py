"""The model the setup assistant designs on: the stack's own :class:`RobotModel` of the user's
URDF, with the configured TCP and base frames, so that inertia, gravity and the gain check are
exactly what the stack will compute.

A continuous joint is modelled as a revolute one limited to [−π, π] here: its dynamics are the
same at every angle, and a one-angle-per-joint model (nq = nv) keeps names, samples and the
stability check simple. Its home is chosen in that range.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from ct_controllers.model.robot import RobotModel
from ct_controllers.setup_assistant.chain import Chain
from ct_controllers.setup_assistant.urdf_tree import RobotTree
from ct_controllers.types import FloatArray


def one_angle_urdf(urdf: str) -> str:
    """``urdf`` with every continuous joint turned revolute, limited to [−π, π] [rad] (its
    velocity and effort limits kept)."""
    root = ET.fromstring(urdf)
    changed = False
    for joint in root.findall("joint"):
        if joint.get("type") != "continuous":
            continue
        joint.set("type", "revolute")
        limit = joint.find("limit")
        if limit is None:
            limit = ET.SubElement(joint, "limit", {"effort": "0", "velocity": "0"})
        limit.set("lower", repr(-math.pi))
        limit.set("upper", repr(math.pi))
        changed = True
    return ET.tostring(root, encoding="unicode") if changed else urdf


@dataclass(frozen=True)
class DesignModel:
    """The robot to design for: ``model`` (model order), the chain, and the joint names'
    indices. ``order``: model index of each configuration joint (``chain.joint_names`` order)."""

    model: RobotModel
    chain: Chain
    order: np.ndarray
    prismatic: np.ndarray  # per model joint: a prismatic joint (m, N) rather than revolute

    @property
    def names(self) -> tuple[str, ...]:
        """Joint names in model order."""
        names = [""] * self.model.nv
        for name in self.model.joint_names:
            names[self.model.v_index(name)] = name
        return tuple(names)

    def to_model(self, values: FloatArray) -> FloatArray:
        """A vector in ``chain.joint_names`` order → model order."""
        out = np.empty(self.model.nv)
        out[self.order] = values
        return out

    def to_config(self, values: FloatArray) -> FloatArray:
        """A vector in model order → ``chain.joint_names`` order."""
        return np.asarray(values, dtype=np.float64)[self.order]

    @property
    def arm(self) -> np.ndarray:
        """Model indices of the arm joints."""
        return self.order[: len(self.chain.arm_joints)]


def design_model(tree: RobotTree, chain: Chain) -> DesignModel:
    """The design model of ``tree`` for ``chain``: the stack's own model of the URDF
    (:class:`RobotModel`: the drives' armature added, a mimic follower carried by its master,
    whose inertia and gains therefore include the follower's) with its continuous joints made
    one-angle (:func:`one_angle_urdf`)."""
    model = RobotModel(one_angle_urdf(tree.urdf), tcp_frame=chain.tcp, base_frame=chain.base)
    order = np.array([model.v_index(name) for name in chain.joint_names], dtype=np.intp)
    prismatic = np.zeros(model.nv, dtype=bool)
    for joint in tree.movable:
        if joint.prismatic and joint.name in model.joint_names:
            prismatic[model.v_index(joint.name)] = True
    return DesignModel(model, chain, order, prismatic)
