"""Convex polygons in a plane [m]: turning a frame, clipping to a rectangle, containment and
the outward normal of the nearest edge (:mod:`~ct_controllers.hardware.jaw_grasp`'s cube
against its jaws' outlines)."""

from __future__ import annotations

import math

import numpy as np

from ct_controllers.types import FloatArray


def rotated(polygon: FloatArray, tilt: float) -> FloatArray:
    """(u, w) → (h, v): h across (toward the moving jaw), v up, in the frame of the grasp
    tilted by ``tilt`` about the hinge axis (tilt 0: v = −w)."""
    c, s = math.cos(tilt), math.sin(tilt)
    h = c * polygon[:, 0] + s * polygon[:, 1]
    v = s * polygon[:, 0] - c * polygon[:, 1]
    return np.column_stack([h, v])


def clip(polygon: FloatArray, box: tuple[float, float, float, float]) -> FloatArray:
    """``polygon`` (h, v) clipped to the rectangle h ∈ [box[0], box[1]], v ∈ [box[2], box[3]]
    (Sutherland-Hodgman)."""
    points = polygon
    for axis, bound, below in ((0, box[1], True), (0, box[0], False), (1, box[3], True)):
        if len(points) == 0:
            break
        kept = []
        for i in range(len(points)):
            a, b = points[i], points[(i + 1) % len(points)]
            inside_a = a[axis] <= bound if below else a[axis] >= bound
            inside_b = b[axis] <= bound if below else b[axis] >= bound
            if inside_a:
                kept.append(a)
            if inside_a != inside_b:
                kept.append(a + (bound - a[axis]) / (b[axis] - a[axis]) * (b - a))
        points = np.array(kept)
    bottom = box[2]
    if len(points) == 0:
        return points
    kept = []
    for i in range(len(points)):
        a, b = points[i], points[(i + 1) % len(points)]
        if a[1] >= bottom:
            kept.append(a)
        if (a[1] >= bottom) != (b[1] >= bottom):
            kept.append(a + (bottom - a[1]) / (b[1] - a[1]) * (b - a))
    return np.array(kept)


def contains(polygon: FloatArray, point: FloatArray) -> bool:
    """Whether the convex ``polygon`` (either orientation) holds ``point``."""
    edges = np.roll(polygon, -1, axis=0) - polygon
    offsets = point - polygon
    cross = edges[:, 0] * offsets[:, 1] - edges[:, 1] * offsets[:, 0]
    return bool((cross >= 0).all() or (cross <= 0).all())


def edge_normal(polygon: FloatArray, point: FloatArray) -> FloatArray:
    """The outward unit normal of the edge of the convex ``polygon`` nearest ``point``."""
    centre = polygon.mean(axis=0)
    best, normal = math.inf, np.zeros(2)
    for a, b in zip(polygon, np.roll(polygon, -1, axis=0), strict=True):
        edge = b - a
        length = float(np.linalg.norm(edge))
        if length < 1e-12:
            continue
        t = min(max(float((point - a) @ edge) / length**2, 0.0), 1.0)
        distance = float(np.linalg.norm(a + t * edge - point))
        if distance < best:
            outward = np.array([edge[1], -edge[0]]) / length
            if float((a - centre) @ outward) < 0:
                outward = -outward
            best, normal = distance, outward
    return normal
