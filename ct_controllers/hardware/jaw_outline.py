"""A single revolute jaw and the body it hangs on (the fixed jaw, links on fixed joints fused
into it), as convex polygons in the plane normal to the hinge axis: MuJoCo's collision geometry
(each mesh's convex hull, each primitive's bounding box) projected on that plane, in the TCP's
frame. What :mod:`~ct_controllers.hardware.jaw_grasp` reasons about.

Coordinates (u, w) [m]: u along ``across`` (normal to the axis and to the tool z; the moving jaw
opens toward +u), w along ``down`` (the tool z projected normal to the axis). The hinge axis is
normal to the plane, so the moving jaw's polygons turn rigidly about the hinge's point.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
from scipy.spatial import ConvexHull, QhullError

from ct_controllers.types import FloatArray


class JawOutline:
    """The two jaws' convex polygons (module docstring) of the revolute jaw ``joint`` in
    ``model`` (its closing and opening limits ``closed``, ``opened`` [rad]), in the frame of the
    site ``tcp_site``: ``holder_polygons`` (the body it hangs on), :meth:`jaw_polygons` at a
    jaw angle; ``axis`` = across × down (± the hinge axis) and ``axis_centre`` [m] the middle
    of the moving jaw's extent along it."""

    def __init__(
        self, model: mujoco.MjModel, joint: str, tcp_site: str, closed: float, opened: float
    ) -> None:
        data = mujoco.MjData(model)
        index = model.joint(joint).id
        jaw = int(model.jnt_bodyid[index])
        data.qpos[model.jnt_qposadr[index]] = closed
        mujoco.mj_kinematics(model, data)
        site = model.site(tcp_site).id
        rotation, origin = data.site_xmat[site].reshape(3, 3).copy(), data.site_xpos[site].copy()
        joint_axis = rotation.T @ data.xaxis[index]
        joint_axis /= np.linalg.norm(joint_axis)
        down = np.array([0.0, 0.0, 1.0]) - joint_axis * joint_axis[2]
        down /= np.linalg.norm(down)
        across = np.cross(down, joint_axis)
        anchor = (data.xanchor[index] - origin) @ rotation
        jaw_points = _points(model, data, jaw, rotation, origin)
        relative = np.concatenate(jaw_points) - anchor
        radial = relative - np.outer(relative @ joint_axis, joint_axis)
        tip = radial[int(np.argmax(np.linalg.norm(radial, axis=1)))]
        # q grows turning about joint_axis: the tip moves along joint_axis × tip, opening if
        # the open limit is above the closed one.
        opening = np.cross(joint_axis, tip) * math.copysign(1.0, opened - closed)
        if float(opening @ across) < 0:  # the moving jaw opens toward +u
            across = -across
        # A turn of q about joint_axis is a turn of q · sense from u toward w in the plane.
        self.sense = float(np.sign(joint_axis @ np.cross(across, down)))
        self.across, self.down = across, down
        self.axis = np.cross(across, down)
        self.hinge = np.array([anchor @ across, anchor @ down])
        self.closed, self.opened = closed, opened
        self.holder_polygons = _polygons(
            _points(model, data, int(model.body_parentid[jaw]), rotation, origin), across, down
        )
        self._jaw_polygons = _polygons(jaw_points, across, down)
        along = np.concatenate(jaw_points) @ self.axis
        self.axis_centre = float(0.5 * (along.min() + along.max()))

    def jaw_polygons(self, q: float) -> list[FloatArray]:
        """The moving jaw's polygons at jaw angle ``q``."""
        turn = self.sense * (q - self.closed)
        c, s = math.cos(turn), math.sin(turn)
        turned = []
        for polygon in self._jaw_polygons:
            relative = polygon - self.hinge
            turned.append(
                self.hinge
                + np.column_stack(
                    [
                        c * relative[:, 0] - s * relative[:, 1],
                        s * relative[:, 0] + c * relative[:, 1],
                    ]
                )
            )
        return turned


def _points(
    model: mujoco.MjModel, data: mujoco.MjData, body: int, rotation: FloatArray, origin: FloatArray
) -> list[FloatArray]:
    """Per colliding geom of ``body``: its points in the tool frame (``rotation``, ``origin``:
    the TCP's in the world) [m]: a mesh's vertices, a primitive's bounding-box corners."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    found = []
    for geom in range(model.ngeom):
        if model.geom_bodyid[geom] != body or not (
            model.geom_contype[geom] or model.geom_conaffinity[geom]
        ):
            continue
        if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_MESH:
            mesh = model.geom_dataid[geom]
            start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
            local = np.asarray(model.mesh_vert[start : start + count], float)
        else:
            local = model.geom_aabb[geom, :3] + corners * model.geom_aabb[geom, 3:]
        world = data.geom_xpos[geom] + local @ data.geom_xmat[geom].reshape(3, 3).T
        found.append((world - origin) @ rotation)
    return found


SIMPLIFY = 5e-5  # [m] a hull vertex nearer than this to its neighbours' chord is dropped


def _polygons(points: list[FloatArray], across: FloatArray, down: FloatArray) -> list[FloatArray]:
    """Each geom's convex polygon (counter-clockwise (u, w) vertices), its vertices thinned
    where they lie within ``SIMPLIFY`` of a straight edge (a rounded hull's many)."""
    polygons = []
    for geom in points:
        plane = np.column_stack([geom @ across, geom @ down])
        try:
            hull = ConvexHull(plane)
        except QhullError:  # a flat geom seen edge-on: no area in this plane
            continue
        vertices = plane[hull.vertices]
        kept = [vertices[0]]
        for i in range(1, len(vertices)):
            following = vertices[(i + 1) % len(vertices)]
            chord = following - kept[-1]
            length = float(np.linalg.norm(chord))
            offset = vertices[i] - kept[-1]
            if length < 1e-12 or abs(chord[0] * offset[1] - chord[1] * offset[0]) / length > (
                SIMPLIFY
            ):
                kept.append(vertices[i])
        if len(kept) >= 3:
            polygons.append(np.array(kept))
    return polygons
