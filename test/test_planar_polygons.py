"""ct_controllers.hardware.planar_polygons against independent computations: matplotlib's
point-in-path test and sampling for the clip and containment, exact values for a square's edge
normals and a quarter turn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.path import Path
from scipy.spatial import ConvexHull

from ct_controllers.hardware.planar_polygons import clip, contains, edge_normal, rotated


def _area(polygon: np.ndarray) -> float:
    x, y = polygon[:, 0], polygon[:, 1]
    return 0.5 * abs(float(x @ np.roll(y, -1) - y @ np.roll(x, -1)))


def _random_convex(rng: np.random.Generator) -> np.ndarray:
    points = rng.normal(scale=1.0, size=(12, 2))
    return points[ConvexHull(points).vertices]


def test_the_clip_is_the_part_of_the_polygon_inside_the_rectangle() -> None:
    """For random convex polygons and rectangles, the clipped polygon's area is the polygon's
    area inside the rectangle as sampling with matplotlib's point-in-path test counts it
    (20 000 points: within 2 % of the rectangle), and every clipped vertex lies in both."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        polygon = _random_convex(rng)
        low, high = np.sort(rng.normal(size=(2, 2)), axis=0)
        box = (float(low[0]), float(high[0]), float(low[1]), float(high[1]))
        part = clip(polygon, box)
        samples = rng.uniform(low, high, size=(20_000, 2))
        inside = Path(polygon).contains_points(samples)
        rectangle = (high[0] - low[0]) * (high[1] - low[1])
        expected = rectangle * float(inside.mean())
        measured = _area(part) if len(part) >= 3 else 0.0
        assert measured == pytest.approx(expected, abs=0.02 * rectangle)
        for vertex in part:
            assert low[0] - 1e-9 <= vertex[0] <= high[0] + 1e-9
            assert low[1] - 1e-9 <= vertex[1] <= high[1] + 1e-9


def test_containment_is_matplotlibs_for_either_orientation() -> None:
    """contains() agrees with matplotlib's point-in-path test on random points, for a convex
    polygon given counter-clockwise and clockwise."""
    rng = np.random.default_rng(4)
    polygon = _random_convex(rng)
    points = rng.normal(scale=1.5, size=(2000, 2))
    expected = Path(polygon).contains_points(points)
    for vertices in (polygon, polygon[::-1]):
        assert [contains(vertices, p) for p in points] == expected.tolist()


def test_edge_normals_and_the_turn_of_a_square() -> None:
    """A unit square's nearest edge normals point out of it (right side: +x; top: +y), and a
    quarter-turn tilt maps (u, w) = (1, 0) to (h, v) = (0, 1), (0, 1) to (1, 0)."""
    square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    np.testing.assert_allclose(edge_normal(square, np.array([1.1, 0.5])), [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(edge_normal(square, np.array([0.4, 1.2])), [0.0, 1.0], atol=1e-12)
    turned = rotated(np.array([[1.0, 0.0], [0.0, 1.0]]), math.pi / 2)
    np.testing.assert_allclose(turned, [[0.0, 1.0], [1.0, 0.0]], atol=1e-12)
