"""Simulated sensors and explicit resets for the objects of the MuJoCo scene.

On a real cell the object pose comes from perception and finger contact from tactile or F/T
sensing; in simulation these read MuJoCo directly, stamped with sim time, under the backend's
lock. ``place_object`` is an explicit reset of one free body (the only other writer of simulator
state besides the backend's own reset).
"""

from __future__ import annotations

import threading
from typing import Protocol

import mujoco
import numpy as np

from ct_controllers.hardware.interface import ObjectObservation
from ct_controllers.types import FloatArray

__all__ = [
    "ObjectObservation",
    "ObjectSensor",
    "SimulatedMujoco",
    "fingertip_depth",
    "place_object",
]


class SimulatedMujoco(Protocol):
    """What the sensor and resets use of a MuJoCo backend (``MujocoSystem``, which imports this
    module): its model and data (None until configured; a new pair after each configure) and
    the lock they are stepped under."""

    model: mujoco.MjModel | None
    data: mujoco.MjData | None
    lock: threading.Lock


# Up to this many contacts in the scene, the sensor reads them one by one in Python floats (~0.1
# µs each, ~0.25 µs on a finger); beyond, in numpy calls over all of them at once (~5 µs).
FEW_CONTACTS = 32


class ObjectSensor:
    def __init__(
        self,
        system: SimulatedMujoco,
        body: str = "cube",
        finger_bodies: tuple[str, ...] = (),
    ) -> None:
        """The sensor of ``body``'s pose and of the contact forces on it of each of
        ``finger_bodies`` (MuJoCo body names: the bodies the gripper's joints and their mimic
        followers move, ``MujocoSystem.object_sensor``; none: pose only)."""
        model = system.model
        if model is None:
            raise RuntimeError("configure the MuJoCo backend before attaching sensors")
        self.system = system
        self.finger_names = tuple(finger_bodies)  # the order of the contact forces
        self.body_id = _body_id(model, body)
        self.finger_ids = tuple(_body_id(model, name) for name in finger_bodies)
        self._force = np.zeros(6)
        self._elliptic = model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
        self._identity = np.eye(4)
        # Per pair of geoms: the index of the finger when one geom belongs to the object and the
        # other to that finger, else -1; a contact is then classified with one table look-up.
        bodies = np.asarray(model.geom_bodyid)
        self._finger_of_pair = np.full((model.ngeom, model.ngeom), -1, dtype=np.intp)
        object_geoms = np.flatnonzero(bodies == self.body_id)
        for index, finger_id in enumerate(self.finger_ids):
            finger_geoms = np.flatnonzero(bodies == finger_id)
            self._finger_of_pair[np.ix_(object_geoms, finger_geoms)] = index
            self._finger_of_pair[np.ix_(finger_geoms, object_geoms)] = index
        self._finger_table: list[list[int]] = self._finger_of_pair.tolist()  # the same, as lists
        # Views of the body's rows of data.xmat (3x3) and data.xpos, made once per MjData (its
        # arrays do not move); each access to data.xmat otherwise builds a new array.
        self._data: mujoco.MjData | None = None  # the MjData the views are of
        self._rotation = self._position = np.empty(0)

    def observe(self) -> ObjectObservation:
        """The object's pose (a new 4x4 array, base frame) and each finger's normal contact
        force on it [N] (a new array), stamped with sim time [s]."""
        data = self.system.data
        if data is not self._data and data is not None:
            self._bind(data)
        assert data is not None and self.system.model is not None
        with self.system.lock:
            pose = self._identity.copy()
            pose[:3, :3] = self._rotation
            pose[:3, 3] = self._position
            count = data.ncon
            if not count:
                forces = np.zeros(len(self.finger_ids))
            elif count <= FEW_CONTACTS:
                forces = self._forces_by_contact(data)
            else:
                forces = self._forces_at_once(data, count)
            return ObjectObservation(float(data.time), pose, forces)

    def _bind(self, data: mujoco.MjData) -> None:
        """Views of ``data``'s rows for the body (a new MjData after the backend reconfigured)."""
        self._data = data
        self._rotation = data.xmat[self.body_id].reshape(3, 3)
        self._position = data.xpos[self.body_id]

    def _forces_by_contact(self, data: mujoco.MjData) -> FloatArray:
        """Per finger, Σ |normal force| [N] over its contacts with the object, one contact at a
        time in Python floats (for a few contacts, cheaper than the numpy calls of
        :meth:`_forces_at_once`, with the same sums: in contact order, from 0)."""
        contact = data.contact
        table = self._finger_table
        forces = [0.0] * len(self.finger_ids)
        touching = [
            (i, finger)
            for i, (geom1, geom2) in enumerate(contact.geom.tolist())
            if (finger := table[geom1][geom2]) >= 0
        ]
        if touching:
            if self._elliptic:
                # A contact's first constraint row is its normal force; excluded: no row (-1).
                address = contact.efc_address.tolist()
                efc_force = data.efc_force
                for i, finger in touching:
                    if address[i] >= 0:
                        forces[finger] += abs(efc_force.item(address[i]))
            else:  # pyramidal: the normal force is decoded from the pyramid's edges
                wrench = self._force
                for i, finger in touching:
                    mujoco.mj_contactForce(self.system.model, data, i, wrench)
                    forces[finger] += abs(wrench.item(0))
        return np.array(forces)

    def _forces_at_once(self, data: mujoco.MjData, count: int) -> FloatArray:
        """:meth:`_forces_by_contact` in numpy calls over all ``count`` contacts at once (for
        many contacts)."""
        forces = np.zeros(len(self.finger_ids))
        contact = data.contact
        geoms = contact.geom[:count]  # (count, 2)
        # Per contact: the finger touching the object, -1 if it is another contact.
        finger = self._finger_of_pair[geoms[:, 0], geoms[:, 1]]
        indices = np.flatnonzero(finger >= 0)
        if indices.size:
            if self._elliptic:
                # Elliptic cones: a contact's first constraint row is its normal force
                # (what mj_contactForce copies); an excluded contact has no row (-1).
                address = contact.efc_address[indices]
                normal = np.zeros(indices.size)
                rows = address >= 0
                normal[rows] = data.efc_force[address[rows]]
            else:  # pyramidal: the normal force is decoded from the pyramid's edges
                normal = np.empty(indices.size)
                for k, i in enumerate(indices.tolist()):
                    mujoco.mj_contactForce(self.system.model, data, i, self._force)
                    normal[k] = self._force[0]
            # Summed per finger [N] (float64 with weights: asarray copies nothing).
            forces = np.asarray(
                np.bincount(finger[indices], weights=np.abs(normal), minlength=forces.size),
                dtype=np.float64,
            )
        return forces


def place_object(system: SimulatedMujoco, body: str, pose: FloatArray) -> None:
    """Explicit reset: put a free body at ``pose`` (4x4, world frame) at rest."""
    model, data = system.model, system.data
    if model is None or data is None:
        raise RuntimeError("configure the MuJoCo backend before placing objects")
    body_id = _body_id(model, body)
    joint = model.body_jntadr[body_id]
    if joint < 0 or model.jnt_type[joint] != mujoco.mjtJoint.mjJNT_FREE:
        raise ValueError(f"body '{body}' has no free joint; only free bodies can be placed")
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.asarray(pose)[:3, :3].ravel())
    with system.lock:
        address, dof = model.jnt_qposadr[joint], model.jnt_dofadr[joint]
        data.qpos[address : address + 3] = np.asarray(pose)[:3, 3]
        data.qpos[address + 3 : address + 7] = quat
        data.qvel[dof : dof + 6] = 0.0
        mujoco.mj_forward(model, data)


def fingertip_depth(system: SimulatedMujoco, bodies: tuple[int, ...], site: str) -> float:
    """[m] how far the collision geometry of ``bodies`` (the finger bodies) reaches past the
    site ``site`` (the TCP) along its z axis (the approach), at the current state: the largest
    projection of the corners of each geom's bounding box (``geom_aabb``, its own frame)."""
    model, data = system.model, system.data
    if model is None or data is None:
        raise RuntimeError("configure the MuJoCo backend first")
    with system.lock:
        site_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, site)
        if site_id < 0:
            raise KeyError(f"no site '{site}' in the MuJoCo scene")
        origin = np.array(data.site_xpos[site_id])
        axis = np.array(data.site_xmat[site_id]).reshape(3, 3)[:, 2]
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        depth = 0.0
        for geom in range(model.ngeom):
            if int(model.geom_bodyid[geom]) not in bodies:
                continue
            centre, half = model.geom_aabb[geom, :3], model.geom_aabb[geom, 3:]
            corners = (centre + signs * half) @ np.array(data.geom_xmat[geom]).reshape(3, 3).T
            reach = (corners + data.geom_xpos[geom] - origin) @ axis
            depth = max(depth, float(reach.max()))
    return depth


def _body_id(model: mujoco.MjModel, name: str) -> int:
    body_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    if body_id < 0:
        raise KeyError(f"no body '{name}' in the MuJoCo scene")
    return int(body_id)
