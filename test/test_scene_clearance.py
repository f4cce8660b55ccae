"""ct_controllers.hardware.mujoco_collision.SceneClearance: is an arm configuration clear of the
scene (the table-top plane, the scene's shapes, the free cube) by a margin? Checked on a scene
placed by hand, against distances computed in closed form here (a sphere to a box, a sphere to
a plane), not by MuJoCo.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from ct_controllers.hardware.mujoco_collision import PLANE, SceneClearance

CLEARANCE = 0.02  # [m]
RADIUS = 0.03  # [m] the tip sphere's
ARM = 0.5  # [m] from the pan axis to the tip sphere's centre
HEIGHT = 0.1  # [m] of the tip sphere's centre with the lift at 0
CUBE = np.array([0.5, 0.0, 0.025])  # [m] the cube's centre, where it starts
HALF = 0.025  # [m] the cube's half edge
POST_CENTER = np.array([0.0, 0.5, 0.1])  # [m] a post standing on the plane, off to the side
POST_HALF = np.array([0.05, 0.05, 0.1])

# A base on the plane, a link turning about z ("pan"), a tip sliding along z ("lift") that
# carries a sphere ARM out along x; the floor, a post standing on the plane and a free cube.
SCENE = f"""
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1" pos="0 0 -0.75"/>
    <geom name="post" type="box" size="{" ".join(map(str, POST_HALF))}"
          pos="{" ".join(map(str, POST_CENTER))}"/>
    <body name="base">
      <geom type="cylinder" size="0.05 0.05" pos="0 0 0.05" mass="1"/>
      <body name="link" pos="0 0 0.1">
        <joint name="pan" type="hinge" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.05" size="0.02" mass="1"/>
        <body name="tip">
          <joint name="lift" type="slide" axis="0 0 1" range="-0.2 0.2"/>
          <geom type="sphere" size="{RADIUS}" pos="{ARM} 0 0" mass="0.1"/>
        </body>
      </body>
    </body>
    <body name="cube" pos="{" ".join(map(str, CUBE))}">
      <freejoint/>
      <geom type="box" size="{HALF} {HALF} {HALF}" mass="0.1"/>
    </body>
  </worldbody>
</mujoco>
"""


def _box_distance(point: np.ndarray, center: np.ndarray, half: np.ndarray) -> float:
    """Signed distance [m] from ``point`` to an axis-aligned box (negative inside)."""
    offset = np.abs(point - center) - half
    outside = float(np.linalg.norm(np.maximum(offset, 0.0)))
    return outside + min(float(np.max(offset)), 0.0)


def _tip(pan: float, lift: float) -> np.ndarray:
    return np.array([ARM * math.cos(pan), ARM * math.sin(pan), HEIGHT + lift])


def _expected(pan: float, lift: float) -> tuple[str, float] | None:
    """What the tip sphere is nearer than CLEARANCE to, by closed form, in the check's order
    (the nearest of the scene's shapes, else the plane), or None."""
    tip = _tip(pan, lift)
    near = [
        (_box_distance(tip, center, half) - RADIUS, name)
        for name, center, half in (
            ("world/post", POST_CENTER, POST_HALF),
            ("cube", CUBE, np.full(3, HALF)),
        )
    ]
    distance, name = min(near)
    if distance < CLEARANCE:
        return name, distance
    if tip[2] - RADIUS < CLEARANCE:
        return PLANE, tip[2] - RADIUS
    return None


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(SCENE)


def test_clear_exactly_where_the_closed_form_distances_say(model: mujoco.MjModel) -> None:
    """Over a grid of pan angles and lifts (from a reference far from everything), the check
    finds the tip too near something exactly where the closed-form distance of the sphere to the
    plane z = 0, the cube or the post is below CLEARANCE (configurations within 1 mm of that
    boundary left out), names what it is near, and reports its distance within 1 mm (MuJoCo's
    box-sphere distance; the plane by the sphere's bounding box: exact for a sphere)."""
    check = SceneClearance(model, "base", {"pan": math.pi, "lift": 0.1}, CLEARANCE)
    compared = near = 0
    names: set[str] = set()
    for pan in np.linspace(-0.6, 2.2, 141):
        for lift in np.linspace(-0.09, 0.05, 29):
            expected = _expected(pan, lift)
            tip = _tip(pan, lift)
            margins = [tip[2] - RADIUS] + [
                _box_distance(tip, c, h) - RADIUS
                for c, h in ((CUBE, np.full(3, HALF)), (POST_CENTER, POST_HALF))
            ]
            if min(abs(m - CLEARANCE) for m in margins) < 1e-3:
                continue
            found = check.check({"pan": float(pan), "lift": float(lift)})
            compared += 1
            if expected is None:
                assert found is None, (pan, lift, found)
                continue
            near += 1
            assert found is not None, (pan, lift, expected)
            names.add(found.body2)
            assert found.body1 == "tip"
            assert found.body2 == expected[0], (pan, lift, found, expected)
            assert found.distance == pytest.approx(expected[1], abs=1e-3)
    assert compared > 3000 and 100 < near < compared - 100  # both verdicts really exercised
    assert {"cube", "world/post", PLANE} <= names


def test_the_cube_gets_no_allowance_but_the_plane_does(model: mujoco.MjModel) -> None:
    """From a reference with the tip inside the cube, the reference itself is not clear (the
    cube, at the closed-form distance); from one with the tip 5 mm above the plane, off the
    cube, the tip may stay as low as it is there, at any pan angle clear of the rest (less
    1 mm), but not go lower."""
    inside = SceneClearance(model, "base", {"pan": 0.0, "lift": -0.07}, CLEARANCE)
    found = inside.check({})
    assert found is not None and found.body2 == "cube"
    tip = _tip(0.0, -0.07)
    assert found.distance == pytest.approx(_box_distance(tip, CUBE, np.full(3, HALF)) - RADIUS)
    low = SceneClearance(model, "base", {"pan": math.pi, "lift": -0.065}, CLEARANCE)
    assert low.clear({}) and low.clear({"pan": -math.pi / 2})
    assert low.clear({"lift": -0.0655})  # 0.5 mm lower: within the allowance
    lower = low.check({"lift": -0.067})  # 2 mm lower
    assert lower is not None and lower.body2 == PLANE
    assert lower.distance == pytest.approx(_tip(0, -0.067)[2] - RADIUS, abs=1e-9)


def test_unknown_joint_names_are_refused(model: mujoco.MjModel) -> None:
    """A configuration naming a joint the scene does not have is a ValueError naming it, never
    ignored."""
    check = SceneClearance(model, "base", {}, CLEARANCE)
    with pytest.raises(ValueError, match="elbow"):
        check.check({"elbow": 0.0})
    with pytest.raises(ValueError, match="elbow"):
        SceneClearance(model, "base", {"elbow": 0.0}, CLEARANCE)


def test_without_the_plane_rule_only_the_scenes_shapes_count(model: mujoco.MjModel) -> None:
    """plane=False at clearance 0 (how ct-setup checks a given home): the tip 4 cm below the
    plane where the scene has nothing is clear, the tip inside the post or the cube is not,
    named with its closed-form distance."""
    check = SceneClearance(model, "base", {"pan": math.pi}, 0.0, plane=False)
    assert check.clear({"lift": -0.17})  # tip centre at z = −0.07: lowest −0.1 m
    inside = check.check({"pan": math.pi / 2, "lift": 0.0})
    assert inside is not None and inside.body2 == "world/post"
    expected = _box_distance(_tip(math.pi / 2, 0.0), POST_CENTER, POST_HALF) - RADIUS
    assert inside.distance == pytest.approx(expected, abs=1e-6)
    cube = check.check({"pan": 0.0, "lift": -0.07})
    assert cube is not None and cube.body2 == "cube"


# A mesh of scattered points on an arm tilting about y at 0.3 m: its lowest point is a vertex's.
MESH_POINTS = np.random.default_rng(7).uniform(-0.05, 0.05, (20, 3)) + np.array([0.25, 0, 0])
MESH_SCENE = f"""
<mujoco>
  <asset>
    <mesh name="points" vertex="{" ".join(f"{v:.6f}" for v in MESH_POINTS.ravel())}"/>
  </asset>
  <worldbody>
    <body name="base">
      <geom type="box" size="0.05 0.05 0.05" pos="-0.3 0 0.05" mass="1"/>
      <body name="arm" pos="0 0 0.3">
        <joint name="tilt" type="hinge" axis="0 1 0"/>
        <geom type="mesh" mesh="points" mass="0.1"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_a_mesh_is_as_low_as_its_lowest_vertex() -> None:
    """A mesh's height above the plane is its lowest vertex's (not its bounding box's): over
    tilts that bring it near the plane, the check is clear exactly where the lowest of the
    points the mesh was made of (placed here by the hinge's rotation, not by MuJoCo) is at least
    CLEARANCE up, and otherwise reports that height within float32 rounding."""
    model = mujoco.MjModel.from_xml_string(MESH_SCENE)
    check = SceneClearance(model, "base", {"tilt": 0.0}, CLEARANCE)
    verdicts = set()
    for tilt in np.linspace(0.5, 1.6, 111):
        rotation_z = np.array([-math.sin(tilt), 0.0, math.cos(tilt)])  # R_y(tilt)'s z row
        lowest = 0.3 + float(np.min(MESH_POINTS @ rotation_z))
        if abs(lowest - CLEARANCE) < 1e-5:
            continue
        found = check.check({"tilt": float(tilt)})
        verdicts.add(found is None)
        if lowest >= CLEARANCE:
            assert found is None, (tilt, lowest, found)
        else:
            assert found is not None and found.body1 == "arm" and found.body2 == PLANE
            assert found.distance == pytest.approx(lowest, abs=1e-6)
    assert verdicts == {True, False}
