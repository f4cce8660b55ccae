"""Collision checks of arm configurations and joint paths in the stack's scene, by MuJoCo.

The scene is the one the MuJoCo backend simulates (:func:`~ct_controllers.hardware.mujoco_scene.
build_scene`: the robot's collision shapes as MuJoCo's URDF import reads them, meshes by their
convex hulls, the floor and the table whose top is the base plane z = 0 or where the arm
reaches down to, ``hardware/grasp_scene.py``), without its free
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

:class:`SceneClearance` is the stricter check of a pose the arm is to rest at or pass through
without touching anything — a home (``ct-setup``), the scripted waypoints of ``ct-sim``, the
poses a bench samples: the free objects (the cube) count too, and every robot shape must keep
``clearance`` from the scene, not only from contact (see the class).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from ct_controllers.hardware.mujoco_scene import FLOOR_GEOM, TABLE_GEOM
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
SCENE_CLEARANCE = 0.02  # [m] SceneClearance's default: of every robot shape from the scene
REFERENCE_SLACK = 1e-3  # [m] how much closer than at the reference a shape already near may come
PLANE = "the table-top plane z = 0"  # what a shape below it is said to hit


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
        return _body_of(self.model, geom)


def _body_of(model: mujoco.MjModel, geom: int) -> str:
    """The body a geom belongs to, by name (a world geom: "world/<geom name>")."""
    body = int(model.geom_bodyid[geom])
    name = model.geom(geom).name
    return model.body(body).name + (f"/{name}" if name and body == 0 else "")


def _copy(model: mujoco.MjModel) -> mujoco.MjModel:
    return copy.copy(model)  # MjModel's copy is a deep one (mj_copyModel)


class SceneClearance:
    """Is the arm at a configuration clear of the scene by ``clearance`` [m]? The scene is a
    compiled MuJoCo one (the backend's, :func:`scene_clearance`): the robot, the floor, the table
    whose top is the plane z = 0 and the free objects (the cube) where they start. Clear when

    - every robot shape but the base body's lies ≥ ``clearance`` above the plane z = 0 (its
      lowest point: a mesh's lowest vertex, a primitive's in closed form), unless ``plane`` is
      False (then only the scene's shapes count: the table, not the plane beyond it);
    - every robot shape is ≥ ``clearance`` from every shape of the scene (floor, table, free
      objects; MuJoCo's ``mj_geomDistance``, signed: negative inside);
    - no two robot shapes are in contact (MuJoCo's collision; a body and its parent are not
      tested).

    At ``reference`` (the configuration the arm starts from: a home; joint name → position, the
    other joints at the scene's ``qpos0``) a shape already nearer the plane, the floor or the
    table than ``clearance`` may come no nearer than it is there (less ``REFERENCE_SLACK``), and
    two robot shapes in contact there are not a collision: the robot's own build (a UR5's
    shoulder mesh reaches below its base plane), not a pose. A free object gets no such
    allowance: an arm that starts inside the cube is not clear of it. Mimic followers are set
    from their masters by the scene's joint equalities.

    ``base``: the base link (a name the scene may have fused into the world: then the world).
    The scene's shapes are the world's and the free objects'; where the base is the world itself
    (a URDF whose root link is named "world", or fused into it), the world's shapes other than
    the floor, the table (by the names the scene builder gives them) and planes are the robot's
    base, as a base body's are. Not thread-safe (one scratch ``MjData``).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        base: str,
        reference: Mapping[str, float] | None = None,
        clearance: float = SCENE_CLEARANCE,
        plane: bool = True,
    ) -> None:
        if not (np.isfinite(clearance) and clearance >= 0):
            raise ValueError(f"scene clearance must be finite and ≥ 0, got {clearance}")
        self.clearance = clearance
        self.model = m = model  # read only: nothing of it is changed here
        self.data = mujoco.MjData(m)
        free = mujoco.mjtJoint.mjJNT_FREE
        self._free_bodies = {int(m.jnt_bodyid[j]) for j in range(m.njnt) if m.jnt_type[j] == free}
        self._qpos = {
            m.joint(j).name: int(m.jnt_qposadr[j])
            for j in range(m.njnt)
            if int(m.jnt_type[j]) in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
        }
        self._followers = [
            (int(m.jnt_qposadr[m.eq_obj1id[e]]), int(m.jnt_qposadr[m.eq_obj2id[e]]), e)
            for e in range(m.neq)
            if int(m.eq_type[e]) == mujoco.mjtEq.mjEQ_JOINT
            and m.eq_active0[e]
            and m.eq_obj2id[e] >= 0
        ]
        self._reference = dict(reference or {})
        unknown = sorted(set(self._reference) - set(self._qpos))
        if unknown:
            raise ValueError(f"joints {unknown} are not in the scene")
        base_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, base)
        base_id = max(base_id, 0)  # fused into the world

        def of_the_scene(g: int) -> bool:
            body = int(m.geom_bodyid[g])
            if body != 0 or base_id != 0:
                return body == 0 or body in self._free_bodies
            flat = int(m.geom_type[g]) == mujoco.mjtGeom.mjGEOM_PLANE
            return flat or m.geom(g).name in (FLOOR_GEOM, TABLE_GEOM)

        robot = [g for g in range(m.ngeom) if not of_the_scene(g)]
        self._robot = set(robot)
        self._above = [g for g in robot if m.geom_bodyid[g] != base_id] if plane else []
        self._vertices: dict[int, np.ndarray] = {}  # mesh geom → its vertices, geom frame [m]
        for g in self._above:
            mesh = int(m.geom_dataid[g])
            if int(m.geom_type[g]) == mujoco.mjtGeom.mjGEOM_MESH and mesh >= 0:
                start, count = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
                self._vertices[g] = np.asarray(m.mesh_vert[start : start + count], dtype=float)
        scenery = [g for g in range(m.ngeom) if g not in self._robot]
        self._pairs = [(r, s) for r in robot for s in scenery]
        self._fromto = np.zeros(6)
        self._pose({})
        lowest, distances = self._lowest(), self._distances()
        self._floor = np.where(lowest < clearance, lowest - REFERENCE_SLACK, clearance)
        movable = np.array(
            [int(m.geom_bodyid[s]) in self._free_bodies for _, s in self._pairs], dtype=bool
        )
        self._gap = np.where(
            (distances < clearance) & ~movable, distances - REFERENCE_SLACK, clearance
        )
        self._touching_at_reference = self._self_contacts()

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The scene's hinge and slide joints (those a configuration may name)."""
        return tuple(self._qpos)

    def _pose(self, positions: Mapping[str, float]) -> None:
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        for name, value in {**self._reference, **positions}.items():
            d.qpos[self._qpos[name]] = value
        for follower, master, e in self._followers:
            coefficients = m.eq_data[e, :5]
            x = d.qpos[master] - m.qpos0[master]
            d.qpos[follower] = m.qpos0[follower] + sum(c * x**k for k, c in enumerate(coefficients))
        mujoco.mj_forward(m, d)

    def _lowest(self) -> np.ndarray:
        """Each of ``_above``'s lowest point [m] (world z): a mesh's lowest vertex (its convex
        hull's, the shape MuJoCo collides), a sphere's, capsule's or cylinder's in closed form,
        another shape's bounding box's (exact for a box)."""
        m, d = self.model, self.data
        lowest = np.empty(len(self._above))
        for i, g in enumerate(self._above):
            rotation = d.geom_xmat[g].reshape(3, 3)
            z = float(d.geom_xpos[g][2])
            kind, size = int(m.geom_type[g]), m.geom_size[g]
            vertices = self._vertices.get(g)
            if vertices is not None:
                lowest[i] = z + float(np.min(vertices @ rotation[2]))
            elif kind == mujoco.mjtGeom.mjGEOM_SPHERE:
                lowest[i] = z - size[0]
            elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
                lowest[i] = z - abs(rotation[2, 2]) * size[1] - size[0]
            elif kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
                tilt = math.sqrt(max(0.0, 1.0 - rotation[2, 2] ** 2))
                lowest[i] = z - abs(rotation[2, 2]) * size[1] - size[0] * tilt
            else:
                center, half = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
                lowest[i] = z + rotation[2] @ center - np.abs(rotation[2]) @ half
        return lowest

    def _distance(self, robot: int, scenery: int) -> float:
        distmax = max(self.clearance, 1e-3)  # beyond it MuJoCo answers distmax
        return mujoco.mj_geomDistance(self.model, self.data, robot, scenery, distmax, self._fromto)

    def _distances(self) -> np.ndarray:
        return np.array(
            [self._distance(robot, scenery) for robot, scenery in self._pairs], dtype=float
        )

    def _self_contacts(self) -> dict[tuple[int, int], float]:
        d = self.data
        return {
            (min(c.geom1, c.geom2), max(c.geom1, c.geom2)): float(c.dist)
            for c in d.contact[: d.ncon]
            if c.geom1 in self._robot and c.geom2 in self._robot
        }

    def check(self, positions: Mapping[str, float]) -> Collision | None:
        """What the arm at ``positions`` (joint name → [rad | m]; the joints not named at the
        reference) is too near (the class docstring), or None when it is clear: of the scene's
        shapes, the one it is nearest to (the robot's body first); else two robot shapes in
        contact; else a robot shape too near the plane."""
        unknown = sorted(set(positions) - set(self._qpos))
        if unknown:
            raise ValueError(f"joints {unknown} are not in the scene")
        self._pose(positions)
        m = self.model
        worst: tuple[float, int, int] | None = None
        for (robot, scenery), gap in zip(self._pairs, self._gap, strict=True):
            distance = self._distance(robot, scenery)
            if distance < gap and (worst is None or distance < worst[0]):
                worst = (distance, robot, scenery)
        if worst is not None:
            distance, robot, scenery = worst
            return Collision(_body_of(m, robot), _body_of(m, scenery), distance)
        for pair, distance in self._self_contacts().items():
            if pair not in self._touching_at_reference:
                return Collision(_body_of(m, pair[0]), _body_of(m, pair[1]), distance)
        lowest = self._lowest()
        below = np.flatnonzero(lowest < self._floor)
        if below.size:
            g = self._above[int(below[0])]
            return Collision(_body_of(m, g), PLANE, float(lowest[below[0]]))
        return None

    def clear(self, positions: Mapping[str, float]) -> bool:
        """:meth:`check` found nothing."""
        return self.check(positions) is None


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
    return SceneCollision(scene_model(description, config), joint_names, followers, clearance)


def scene_model(description: RobotDescription, config: StackConfig) -> mujoco.MjModel:
    """The compiled scene the MuJoCo backend would simulate for this description and
    configuration (whatever backend the configuration names), compiled once per process and
    kept (shared: never change it). DescriptionError (or ``ValueError``) when it cannot be
    built."""
    key = (
        description.urdf,
        description.source,
        config.tcp_frame,
        str(config.parameters.get(SCENE, "")),
        tuple(config.joint_names),
        tuple(config.gripper_joints),
        tuple(config.grip_width_frames),
    )
    model = _SCENES.get(key)
    if model is None:
        model = MujocoSystem.from_config(description, config).scene_spec().compile()
        while len(_SCENES) >= _SCENES_KEPT:
            _SCENES.pop(next(iter(_SCENES)))
        _SCENES[key] = model
    return model


def scene_clearance(
    description: RobotDescription, config: StackConfig, clearance: float = SCENE_CLEARANCE
) -> SceneClearance:
    """A :class:`SceneClearance` in the scene the MuJoCo backend would simulate for this
    description and configuration (:func:`scene_model`), from the configured home."""
    return SceneClearance(
        scene_model(description, config),
        config.base_frame,
        dict(zip(config.joint_names, config.home_positions, strict=True)),
        clearance,
    )
