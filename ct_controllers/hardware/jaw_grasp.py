"""Where a single revolute jaw closing on a fixed one can hold a cube, from the collision
geometry MuJoCo simulates (each mesh's convex hull, each primitive's bounding box).

Two jaws pinching a cube hold it only if the line between their contacts lies inside both
friction cones. A pair of parallel fingers presses on two faces, horizontally. One jaw hinged
against a fixed one is a wedge: each jaw meets the cube at one of its top edges, and its contact
force leans downward, out of the wedge, by the angle α of the jaw's surface there (the Unitree
Z1 in MuJoCo: its 15 cm fixed jaw's face slants 21.5° from the approach, and the convex hull of
its fork-shaped moving jaw, a solid paddle, meets a 5 cm cube's top edge at 62°, 53° measured
in MuJoCo's contact as the cube tipped: it was squeezed out in HOLD, 0/6). With the contacts at
one height and Coulomb friction μ, both angles must stay below atan μ.

So, in the plane normal to the hinge axis (everything projected on it, tool frame):

- the grasp is tilted by φ about the hinge axis from the top-down pose (tool z down), φ the
  tilt that makes the larger of the two contact angles the smallest (``COARSE_TILT_STEP``,
  then ``TILT_STEP`` around the best): the one angle falls as the other rises, and they come
  out about equal, a wedge held symmetric about the vertical;
- the cube's edge s is the largest, from the scene's cube down by ``SIZE_STEP``, whose angles
  are both at most atan μ − ``FRICTION_MARGIN`` (μ: the jaws' geoms' smallest sliding
  friction; MuJoCo takes the larger of a contact's two, so this is a floor). The margin is
  measured: in a prototype of this grasp on the Z1 a 3 cm cube pinched at about 31° crept in
  the grip (18/20 picks; two put-downs stalled), the 2.5 cm one it picks at 28° held (20/20).

For a cube of edge s at tilt φ: the table is ``TABLE_CLEARANCE`` below the lowest point of the
gripper (either jaw, open or closed); the cube stands on it with its face ``FIXED_JAW_GAP`` off
the fixed jaw (the farthest the fixed jaw's geometry reaches across within the cube's height);
the moving jaw closes onto the cube pushed flush against the fixed jaw. Each contact is a corner
of the cube's cross-section inside a jaw's polygon (the angle of that polygon's edge) or a
vertex of a jaw inside the cube (through a side: 0; through its top: 90°).

The result is the TCP's pose in the cube's frame (centre; z up; y across the jaws, toward the
moving one; x along the hinge axis), the cube's edge and the angles; None where no cube down to
``MIN_SIZE`` is held. :func:`robot_jaw_grasp` keeps the scene's top-down grasp (None) where it
already holds the scene's cube (both angles within the limit at tilt 0), and runs this once per
robot and process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from ct_controllers.hardware.grasp_scene import TABLE_CLEARANCE
from ct_controllers.hardware.jaw_outline import JawOutline
from ct_controllers.hardware.mujoco_scene import build_scene, compile_scene
from ct_controllers.hardware.planar_polygons import clip, edge_normal, rotated
from ct_controllers.model.grip_geometry import GripGeometry
from ct_controllers.types import FloatArray

FIXED_JAW_GAP = 0.005  # [m] from the fixed jaw to the cube as the gripper comes down on it
FRICTION_MARGIN = math.radians(15.0)  # [rad] kept from the friction cone's half-angle
SIZE_STEP = 0.005  # [m] the cube's edge is tried in these steps
MIN_SIZE = 0.015  # [m] the smallest cube tried
TILT_LIMIT = math.radians(40.0)  # [rad] the tilts tried, each side
COARSE_TILT_STEP = math.radians(5.0)  # [rad] the tilts tried first
TILT_STEP = math.radians(1.0)  # [rad] then around the best of them
JAW_SAMPLES = 24  # jaw angles sampled for the gripper's lowest point
BISECTIONS = 24  # of the jaw angle at first contact


@dataclass(frozen=True)
class JawGrasp:
    """A cube grasp by one revolute jaw (module docstring). ``tcp_in_cube``: the TCP pose in
    the cube's frame (4x4, [m]); ``size`` [m] the cube's edge; ``tilt`` [rad] about the hinge
    axis from the top-down pose; ``angles`` [rad] the fixed jaw's and the moving jaw's contact
    angles below horizontal at that tilt; ``limit`` [rad] the largest angle allowed;
    ``closing`` [rad] the jaw angle at which it meets the cube pushed flush against the fixed
    jaw (the cube stands ``FIXED_JAW_GAP`` off it until the jaw pushes it there)."""

    tcp_in_cube: FloatArray
    size: float
    tilt: float
    angles: tuple[float, float]
    limit: float
    closing: float  # [rad] the jaw's angle when it meets the cube pushed against the fixed jaw


@dataclass(frozen=True)
class _Contact:
    """A contact on the cube's cross-section: ``angle`` [rad] of the force on the cube below
    horizontal (positive: pushing it down, out of the wedge)."""

    angle: float


def _angle(force: FloatArray, toward: float) -> float:
    """[rad] the angle of ``force`` (h, v) on the cube below horizontal, the horizontal being
    ``toward`` (±1) h."""
    return math.atan2(-float(force[1]), toward * float(force[0]))


@dataclass(frozen=True)
class _Pinch:
    """One cube of edge ``size`` at one tilt: where it stands ((h, v) of its centre, [m]) and
    its two contacts; None contacts where a jaw does not meet it."""

    centre: tuple[float, float]
    fixed: _Contact | None
    moving: _Contact | None
    closing: float = math.nan  # [rad] the jaw angle at which it meets the cube

    @property
    def worst(self) -> float:
        if self.fixed is None or self.moving is None:
            return math.inf
        return max(self.fixed.angle, self.moving.angle)


EDGE = 1e-7  # [m] a contact point this near a side of the cube's section is on it


def _contact(
    region: FloatArray, polygon: FloatArray, side: float, top: float, toward: float
) -> _Contact:
    """The contact where the jaw ``polygon`` (h, v) just overlaps the cube's section in
    ``region`` (the overlap), the cube's side facing that jaw at h = ``side``, its top at v =
    ``top``; ``toward`` (±1): the horizontal direction in which the jaw pushes. A corner of the
    section in the jaw: the force is the jaw edge's normal there; a jaw vertex through the side:
    horizontal (0); through the top: straight down (90°)."""
    on_side = bool((np.abs(region[:, 0] - side) < EDGE).any())
    on_top = bool((np.abs(region[:, 1] - top) < EDGE).any())
    if on_side and on_top:
        return _Contact(_angle(edge_normal(polygon, np.array([side, top])), toward))
    if on_top:
        return _Contact(math.pi / 2)
    return _Contact(0.0)


def _pinch(gripper: JawOutline, size: float, tilt: float, lowest: float) -> _Pinch:
    """The cube of edge ``size`` at ``tilt`` (module docstring); ``lowest`` [m] the gripper's
    lowest v at this tilt."""
    bottom = lowest - TABLE_CLEARANCE
    top = bottom + size
    face, fixed = -math.inf, None
    for polygon in (rotated(p, tilt) for p in gripper.holder_polygons):
        part = clip(polygon, (-math.inf, math.inf, bottom, top))
        if len(part) < 3 or float(part[:, 0].max()) <= face:
            continue
        face = float(part[:, 0].max())
        # The fixed jaw's farthest reach within the cube's height: where it touches the cube
        # pushed flush against it (the same contact rule, seen from the cube's near side).
        touching = part[part[:, 0] > face - EDGE]
        fixed = _contact(touching, polygon, face, top, 1.0)
    if fixed is None:
        return _Pinch((0.0, 0.0), None, None)
    box = (face, face + size, bottom, top)
    centre = (face + FIXED_JAW_GAP + 0.5 * size, bottom + 0.5 * size)

    def overlaps(q: float) -> list[tuple[FloatArray, FloatArray]]:
        found = []
        for polygon in gripper.jaw_polygons(q):
            turned = rotated(polygon, tilt)
            region = clip(turned, box)
            if len(region) >= 3:
                found.append((region, turned))
        return found

    if overlaps(gripper.opened) or not overlaps(gripper.closed):
        return _Pinch(centre, fixed, None)
    free, blocked = gripper.opened, gripper.closed
    for _ in range(BISECTIONS):
        middle = 0.5 * (free + blocked)
        free, blocked = (free, middle) if overlaps(middle) else (middle, blocked)
    region, polygon = overlaps(blocked)[0]
    return _Pinch(centre, fixed, _contact(region, polygon, box[1], top, -1.0), blocked)


def jaw_grasp(
    model: mujoco.MjModel,
    joint: str,
    tcp_site: str,
    closed: float,
    opened: float,
    largest: float,
    friction: float,
    tilt: bool = True,
) -> JawGrasp | None:
    """The grasp (module docstring) of the revolute jaw ``joint`` (its closing and opening
    limits ``closed``, ``opened`` [rad]) in ``model`` (the robot's MuJoCo scene, whose site
    ``tcp_site`` is the TCP), for cubes of edge at most ``largest`` [m] and friction
    coefficient ``friction``; None where none is held. ``tilt`` False: top-down only (tilt 0;
    an arm of fewer than 6 joints cannot tilt the tool about an arbitrary horizontal axis)."""
    gripper = JawOutline(model, joint, tcp_site, closed, opened)
    limit = math.atan(friction) - FRICTION_MARGIN
    swept = [p for q in np.linspace(closed, opened, JAW_SAMPLES) for p in gripper.jaw_polygons(q)]
    outlines = swept + gripper.holder_polygons

    def pinch(size: float, tilt: float) -> _Pinch:
        lowest = min(float(rotated(p, tilt)[:, 1].min()) for p in outlines)
        return _pinch(gripper, size, tilt, lowest)

    size = largest
    while size >= MIN_SIZE - 1e-9:
        # Coarse tilts, then the finest step around the best: the worst angle falls with the
        # tilt on one jaw and rises on the other.
        angle = 0.0
        if tilt:
            coarse = np.arange(-TILT_LIMIT, TILT_LIMIT + 1e-9, COARSE_TILT_STEP)
            angle = min(coarse, key=lambda t: pinch(size, float(t)).worst)
            fine = np.arange(angle - COARSE_TILT_STEP, angle + COARSE_TILT_STEP + 1e-9, TILT_STEP)
            angle = float(min(fine, key=lambda t: pinch(size, float(t)).worst))
        best = pinch(size, angle)
        if best.worst <= limit and best.fixed is not None and best.moving is not None:
            return JawGrasp(
                _tcp_in_cube(gripper, angle, best.centre),
                size,
                angle,
                (best.fixed.angle, best.moving.angle),
                limit,
                best.closing,
            )
        size -= SIZE_STEP
    return None


def _tcp_in_cube(gripper: JawOutline, tilt: float, centre: tuple[float, float]) -> FloatArray:
    """The TCP's pose in the frame of the cube centred at ``centre`` ((h, v) [m]) at ``tilt``:
    cube y = h, z = v, x = y × z (along the hinge axis)."""
    c, s = math.cos(tilt), math.sin(tilt)
    h = c * gripper.across + s * gripper.down
    v = s * gripper.across - c * gripper.down
    x = np.cross(h, v)  # = ±the hinge axis
    cube_in_tcp = np.eye(4)
    cube_in_tcp[:3, :3] = np.column_stack([x, h, v])
    cube_in_tcp[:3, 3] = centre[0] * h + centre[1] * v + gripper.axis_centre * gripper.axis
    return np.asarray(np.linalg.inv(cube_in_tcp), dtype=np.float64)


# The grasp per robot and process: (URDF text, its folder, TCP, jaw, closed, opened, largest)
# → JawGrasp | None. Every stack of a bench builds its scene anew; the analysis takes ~1 s.
_GRASPS: dict[tuple[object, ...], JawGrasp | None] = {}


def robot_jaw_grasp(
    urdf: str,
    urdf_directory: str | Path | None,
    tcp_frame: str,
    grip: GripGeometry | None,
    largest: float,
    arm_joints: int = 6,
) -> JawGrasp | None:
    """The grasp of the robot's one revolute jaw (``grip``: its gripper's geometry) in the
    scene MuJoCo builds from ``urdf`` (links on fixed joints fused: a fixed jaw is part of the
    body the moving jaw hangs on), for cubes of edge at most ``largest`` [m]; None where the
    scene's top-down grasp is kept: not one revolute jaw, no collision geometry, the top-down
    grasp of the ``largest`` cube holds as it is (both contact angles within the limit), or no
    cube is held at any tilt. An arm of fewer than 6 joints (``arm_joints``) keeps the grasp
    top-down, with the largest cube that holds there: it cannot tilt the tool about the hinge
    axis wherever the cube lies (the SO-101's 5 joints reached no tilted grasp of the derived
    scene, and the top-down grasp of a 30 mm cube holds). Once per robot and process."""
    if grip is None or len(grip.joints) != 1 or any(n != 1 for n in grip.couplings):
        return None
    tilt = arm_joints >= 6
    key = (urdf, str(urdf_directory), tcp_frame, grip.joints, grip.closed, grip.opened, largest)
    if (*key, tilt) not in _GRASPS:
        _GRASPS[(*key, tilt)] = _robot_jaw_grasp(
            urdf, urdf_directory, tcp_frame, grip, largest, tilt
        )
    return _GRASPS[(*key, tilt)]


def _robot_jaw_grasp(
    urdf: str,
    urdf_directory: str | Path | None,
    tcp_frame: str,
    grip: GripGeometry,
    largest: float,
    tilt: bool,
) -> JawGrasp | None:
    model = compile_scene(
        build_scene(urdf, tcp_frame=tcp_frame, urdf_directory=urdf_directory, with_objects=False)
    )
    joint = model.joint(grip.joints[0])
    if joint.type[0] != mujoco.mjtJoint.mjJNT_HINGE:
        return None
    jaw = int(joint.bodyid[0])
    bodies = (jaw, int(model.body_parentid[jaw]))
    geoms = [
        g
        for g in range(model.ngeom)
        if model.geom_bodyid[g] in bodies and (model.geom_contype[g] or model.geom_conaffinity[g])
    ]
    if not any(model.geom_bodyid[g] == jaw for g in geoms) or all(
        model.geom_bodyid[g] == jaw for g in geoms
    ):
        return None
    # MuJoCo takes the larger friction of a contact's two geoms: the jaws' smaller is a floor.
    friction = float(min(model.geom_friction[g, 0] for g in geoms))
    closed, opened = grip.closed[0], grip.opened[0]
    plain = top_down_angles(model, grip.joints[0], tcp_frame, closed, opened, largest)
    limit = math.atan(friction) - FRICTION_MARGIN
    if plain is not None and max(plain) <= limit:
        return None
    return jaw_grasp(model, grip.joints[0], tcp_frame, closed, opened, largest, friction, tilt)


def top_down_angles(
    model: mujoco.MjModel, joint: str, tcp_site: str, closed: float, opened: float, size: float
) -> tuple[float, float] | None:
    """[rad] the fixed and the moving jaw's contact angles on a cube of edge ``size`` [m]
    grasped top-down (tilt 0), or None where a jaw does not meet it."""
    gripper = JawOutline(model, joint, tcp_site, closed, opened)
    swept = [p for q in np.linspace(closed, opened, JAW_SAMPLES) for p in gripper.jaw_polygons(q)]
    lowest = min(float(rotated(p, 0.0)[:, 1].min()) for p in swept + gripper.holder_polygons)
    pinch = _pinch(gripper, size, 0.0, lowest)
    if pinch.fixed is None or pinch.moving is None:
        return None
    return (pinch.fixed.angle, pinch.moving.angle)
