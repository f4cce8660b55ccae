"""Collision checks of arm configurations and joint paths in the stack's scene, by MuJoCo.

The scene is the one the MuJoCo backend simulates (:func:`~ct_controllers.hardware.mujoco_scene.
build_scene`: the robot's collision shapes as MuJoCo's URDF import reads them, meshes by their
convex hulls, the floor and the table whose top is the base plane z = 0), without its free
objects (a cube to be grasped moves; touching it is the point of a grasp). It is built from the
description and the configuration alone, whatever backend drives the arm: on real drives it is
the stack's model of the cell (the arm works above its table), not a measurement.

A configuration collides when two shapes come closer than ``clearance`` [m] (MuJoCo's contact
distance with every geom's margin set to it; pairs MuJoCo never tests, a body and its parent,
are not checked) — except the pairs ``allowed``: those already that close at the configuration
the arm starts from, as long as they come no closer than there (less ``ALLOWED_SLACK``): the arm
may always leave where it is, and a robot whose meshes overlap by its own build (a UR5's base and
shoulder) is not in collision.

A path is a sequence of configurations, sampled densely enough that no joint moves more than
``resolution`` [rad | m] between two samples; it collides when one sample does.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from ct_controllers.hardware.mujoco_system import SCENE, MujocoSystem
from ct_controllers.types import FloatArray

if TYPE_CHECKING:
    from ct_controllers.config import StackConfig
    from ct_controllers.model.description import RobotDescription

DEFAULT_CLEARANCE = 0.01  # [m] how close two shapes may come along a checked path
DEFAULT_RESOLUTION = 0.05  # [rad | m] largest joint step between two checked samples of a path
# [m] how much closer than where a path starts a pair already within the clearance there may
# come (a UR5's base and shoulder meshes overlap by a few mm whatever the pan angle).
ALLOWED_SLACK = 0.005

Allowed = dict[tuple[int, int], float]  # geom pair → the distance [m] it may not come below


@dataclass(frozen=True)
class Collision:
    """Two shapes closer than the clearance: the bodies they belong to and their signed
    distance [m] (negative: penetration)."""

    body1: str
    body2: str
    distance: float

    def __str__(self) -> str:
        return f"{self.body1} and {self.body2} ({self.distance * 1e3:+.0f} mm)"


class SceneCollision:
    """Collision checks in a compiled MuJoCo scene (see the module docstring).

    model        the compiled scene (copied: its margins and the free objects' contact flags
                 are changed here); nothing of it is simulated
    joint_names  the order of every configuration given to this object (model order of the
                 stack's :class:`~ct_controllers.model.robot.RobotModel`); each must be a joint
                 of the scene
    followers    mimic followers: name → (master, multiplier, offset), set from their master
    clearance    [m] > 0, see the module docstring

    Not thread-safe (one scratch ``MjData``).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        joint_names: Sequence[str],
        followers: dict[str, tuple[str, float, float]] | None = None,
        clearance: float = DEFAULT_CLEARANCE,
    ) -> None:
        if not (np.isfinite(clearance) and clearance > 0):
            raise ValueError(f"collision clearance must be finite and > 0, got {clearance}")
        self.clearance = clearance
        m = self.model = _copy(model)
        self.data = mujoco.MjData(m)
        missing = [n for n in joint_names if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) < 0]
        if missing:
            raise ValueError(f"joints {missing} are not in the collision scene")
        self.joint_names = tuple(joint_names)
        self._qpos = np.array([m.joint(n).qposadr[0] for n in joint_names], dtype=np.intp)
        index = {n: i for i, n in enumerate(joint_names)}
        self._followers = [
            (m.joint(name).qposadr[0], index[master], multiplier, offset)
            for name, (master, multiplier, offset) in (followers or {}).items()
        ]
        # Free objects take no part; every other shape is checked at the clearance.
        free = mujoco.mjtJoint.mjJNT_FREE
        free_bodies = {int(m.jnt_bodyid[j]) for j in range(m.njnt) if m.jnt_type[j] == free}
        for g in range(m.ngeom):
            if int(m.geom_bodyid[g]) in free_bodies:
                m.geom_contype[g] = m.geom_conaffinity[g] = 0
        m.geom_margin[:] = clearance
        m.geom_gap[:] = 0.0
        self._qpos0 = m.qpos0.copy()

    def contacts(self, q: FloatArray) -> dict[tuple[int, int], float]:
        """Every pair of geoms closer than the clearance at ``q`` (``joint_names`` order):
        (geom, geom) → the smallest signed distance [m]."""
        m, d = self.model, self.data
        d.qpos[:] = self._qpos0
        d.qpos[self._qpos] = q
        for address, master, multiplier, offset in self._followers:
            d.qpos[address] = multiplier * q[master] + offset
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        found: dict[tuple[int, int], float] = {}
        for contact in d.contact[: d.ncon]:
            pair = (min(contact.geom1, contact.geom2), max(contact.geom1, contact.geom2))
            distance = float(contact.dist)
            if distance < self.clearance:
                found[pair] = min(distance, found.get(pair, np.inf))
        return found

    def allowed_at(self, q: FloatArray) -> Allowed:
        """The pairs within the clearance at ``q`` (where a path starts), each with the
        distance it may not come below from there: its distance at ``q`` less
        ``ALLOWED_SLACK``."""
        return {pair: distance - ALLOWED_SLACK for pair, distance in self.contacts(q).items()}

    def check(self, q: FloatArray, allowed: Allowed) -> Collision | None:
        """The closest pair within the clearance at ``q`` that is not ``allowed`` (or comes
        closer than it is allowed to), or None."""
        worst: tuple[tuple[int, int], float] | None = None
        for pair, distance in self.contacts(q).items():
            if distance >= allowed.get(pair, np.inf):
                continue
            if worst is None or distance < worst[1]:
                worst = (pair, distance)
        if worst is None:
            return None
        (g1, g2), distance = worst
        return Collision(self._body_of(g1), self._body_of(g2), distance)

    def check_path(
        self,
        samples: Sequence[FloatArray],
        allowed: Allowed,
    ) -> tuple[int, Collision] | None:
        """The first sample of ``samples`` that collides (its index and the collision), or
        None when all are clear."""
        for i, q in enumerate(samples):
            collision = self.check(q, allowed)
            if collision is not None:
                return i, collision
        return None

    def _body_of(self, geom: int) -> str:
        m = self.model
        body = int(m.geom_bodyid[geom])
        name = m.geom(geom).name
        return m.body(body).name + (f"/{name}" if name and body == 0 else "")


def _copy(model: mujoco.MjModel) -> mujoco.MjModel:
    return copy.copy(model)  # MjModel's copy is a deep one (mj_copyModel)


# Compiled scenes by what they are built from: a node's goal checks and a bench's fresh stack
# per goal compile a robot's meshes once per process, not once per goal.
_SCENES: dict[tuple[object, ...], mujoco.MjModel] = {}
_SCENES_KEPT = 4


def scene_collision(
    description: RobotDescription,
    config: StackConfig,
    joint_names: Sequence[str],
    followers: dict[str, tuple[str, float, float]] | None = None,
    clearance: float = DEFAULT_CLEARANCE,
) -> SceneCollision:
    """A :class:`SceneCollision` in the scene the MuJoCo backend would simulate for this
    description and configuration (whatever backend the configuration names). Raises
    :class:`~ct_controllers.model.description.DescriptionError` (or ``ValueError``) when that
    scene cannot be built, e.g. a collision mesh in a format MuJoCo cannot read."""
    key = (
        description.urdf,
        description.source,
        config.tcp_frame,
        str(config.parameters.get(SCENE, "")),
        tuple(config.joint_names),
    )
    model = _SCENES.get(key)
    if model is None:
        model = MujocoSystem.from_config(description, config).scene_spec().compile()
        while len(_SCENES) >= _SCENES_KEPT:
            _SCENES.pop(next(iter(_SCENES)))
        _SCENES[key] = model
    return SceneCollision(model, joint_names, followers, clearance)
