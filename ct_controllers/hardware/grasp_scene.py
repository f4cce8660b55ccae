"""The grasp scene derived from the robot: table, cube and where the cube may be placed, from the
arm's reach and the gripper's opening (no fixed numbers of one arm).

    R      = max over sampled configurations of the TCP's horizontal distance from the base's
             z axis [m] (4096 configurations, uniform within the joint limits, a fixed seed:
             the same R every time; the bundled ct_arm: 1.04 m, the Panda: 0.94 m)
    table  : top at the base plane z = 0 (the arm stands on it), or, where the arm cannot
             point its tool down that low over the region (a mobile base's root link on the
             floor: the PR2), at h = the 5th percentile of the TCP's height over the samples
             whose tool z is within 30° of straight down and whose horizontal distance is in
             the region's band (every arm tried: −0.2 to −0.6 m, so 0; the PR2 +0.25 m);
             centre x = 0.58 R, half sizes 0.34 R × 0.48 R × 0.02 m
    region : x ∈ [0.435 R, 0.58 R], y ∈ [−0.145 R, 0.145 R], yaw ∈ ±45° (a band of the table
             the arm reaches top-down with margin); the cube starts at (0.4837 R, 0)
    cube   : edge s = min(5 cm, 0.625 w_open) [m], w_open the gripper's full opening between
             its width frames (:class:`~ct_controllers.model.grip_geometry.GripGeometry`); 5 cm
             without a gripper geometry; 800 kg/m³ (wood: the 5 cm cube 0.1 kg, a 35 mm one
             34 g — a small gripper's cube is lighter, not denser); gripped with
             :func:`grip_effort` per finger (20 N for 0.1 kg). One revolute jaw whose
             top-down grasp of that cube would squeeze it out
             (:mod:`~ct_controllers.hardware.jaw_grasp`): the largest cube its tilted grasp
             holds, and ``tcp_in_cube`` that grasp

The fractions are the bundled arm's figures over its R (region x ∈ [0.45, 0.60] m,
y ∈ ±0.15 m, the cube starting at x = 0.5 m, a 5 cm cube in its 8 cm opening), so that arm's
scene stays what it was.
``grip_offset`` [m, tool frame]: from the TCP to the grip's centre (the midpoint of the width
frames with the gripper opened JAW_CLEARANCE wider than the cube on each side, along the line
between them across the approach): 0 for symmetric fingers, half the cube plus the clearance for
one jaw closing on a fixed one; a top-down grasp puts the TCP there so that the cube's centre
lies between the jaws. ``tcp_in_cube`` [m], where set, replaces it: the TCP's whole pose in the
cube's frame (the grasp tilted about the jaw's hinge axis, the height clearing the table).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin

from ct_controllers.model.grip_geometry import GripGeometry
from ct_controllers.model.robot import RobotModel

if TYPE_CHECKING:
    from ct_controllers.hardware.jaw_grasp import JawGrasp

REACH_SAMPLES = 4096
REACH_SEED = 0
CUBE_MAX_SIZE = 0.05  # [m] edge
CUBE_OPENING_FRACTION = 0.625  # edge over the gripper's full opening
CUBE_MASS = 0.1  # [kg] the 5 cm cube's
GRASP_EFFORT = 20.0  # [N] per finger: the 5 cm cube's grip (the Grasp goal's default)
CUBE_DENSITY = CUBE_MASS / CUBE_MAX_SIZE**3  # [kg/m³] 800 (wood): every cube's, whatever its size
JAW_CLEARANCE = 0.010  # [m] between the cube and each jaw as the gripper comes down on it
TABLE_THICKNESS = 0.02  # [m] half
REGION_X = (0.435, 0.58)  # of R
REGION_Y = 0.145  # of R, each side
TABLE_X = 0.58  # of R: centre
CUBE_START_X = 0.4837  # of R: where the cube starts (x; y = 0), the bundled arm's 0.5 m
TABLE_HALF = (0.34, 0.48)  # of R
YAW = math.pi / 4  # [rad] each side


@dataclass(frozen=True)
class GraspScene:
    """Where things are [m], base frame (module docstring)."""

    reach: float
    cube_half_size: float
    table_center: tuple[float, float, float]
    table_half_size: tuple[float, float, float]
    x: tuple[float, float]
    y: tuple[float, float]
    yaw: tuple[float, float]  # [rad]
    grip_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)  # tool frame
    cube_mass: float = CUBE_MASS
    grasp_effort: float = GRASP_EFFORT  # [N] per finger: the grip for this cube (grip_effort)
    table_height: float = 0.0  # [m] the table's top, base frame z (module docstring)
    # [m] the TCP's height at the grasp: the cube's centre, or higher where the fingers reach
    # further below the TCP than that (:func:`fingertip_depth`), so that they clear the table.
    grasp_height: float | None = None
    cube_start: tuple[float, float] = (0.5, 0.0)  # [m] the cube's place in the scene as built
    # One revolute jaw whose top-down grasp would not hold the cube (hardware/jaw_grasp.py):
    # the TCP's pose in the cube's frame (centre, z up), row by row (16 numbers; None: the
    # top-down grasp at grip_offset and grasp_height).
    tcp_in_cube: tuple[float, ...] | None = None

    @property
    def tcp_height(self) -> float:
        """[m] base frame z of the TCP at the grasp (``grasp_height`` above the table's top,
        else the cube's centre)."""
        above = self.cube_half_size if self.grasp_height is None else self.grasp_height
        return self.table_height + above

    @property
    def tcp_in_cube_pose(self) -> np.ndarray | None:
        """``tcp_in_cube`` as a 4x4 transform [m] (a new array), or None."""
        if self.tcp_in_cube is None:
            return None
        return np.array(self.tcp_in_cube, dtype=np.float64).reshape(4, 4)

    @property
    def region(self) -> dict[str, tuple[float, float]]:
        return {"x": self.x, "y": self.y, "yaw": self.yaw}


def grasp_scene(
    model: RobotModel, grip: GripGeometry | None, jaw: JawGrasp | None = None
) -> GraspScene:
    """The scene for ``model`` (with its TCP) and its gripper's geometry (None: none known);
    ``jaw``: one revolute jaw's grasp (:func:`cube_size` the largest cube it was sized from),
    which sets the cube's edge and the TCP's pose on it."""
    reach = tcp_reach(model)
    height = table_height(model)
    size = cube_size(grip) if jaw is None else jaw.size
    mass = CUBE_DENSITY * size**3
    # The cube's centre where the jaws' midpoint is with them opened CLEARANCE wider than it on
    # each side: symmetric fingers keep their midpoint whatever the width; one jaw against a
    # fixed one puts the cube CLEARANCE off the fixed jaw (its face is not exactly where the
    # moving tip closes: measured, the Z1's stator sat on the cube's edge without it).
    offset = (
        (0.0, 0.0, 0.0)
        if grip is None
        else grip_offset(model, grip, min(size + 2 * JAW_CLEARANCE, grip.open_width))
    )
    return GraspScene(
        reach=reach,
        cube_half_size=size / 2,
        table_center=(TABLE_X * reach, 0.0, height - TABLE_THICKNESS),
        table_half_size=(TABLE_HALF[0] * reach, TABLE_HALF[1] * reach, TABLE_THICKNESS),
        x=(REGION_X[0] * reach, REGION_X[1] * reach),
        y=(-REGION_Y * reach, REGION_Y * reach),
        yaw=(-YAW, YAW),
        grip_offset=offset,
        cube_mass=mass,
        grasp_effort=grip_effort(model, grip, mass),
        table_height=height,
        cube_start=(CUBE_START_X * reach, 0.0),
        tcp_in_cube=None if jaw is None else tuple(float(v) for v in jaw.tcp_in_cube.ravel()),
    )


def grip_effort(model: RobotModel, grip: GripGeometry | None, mass: float) -> float:
    """[N] per finger: the grip for a cube of ``mass`` [kg] — the 5 cm cube's GRASP_EFFORT
    scaled by the mass (20 N for 0.1 kg: 20 times its weight over two fingers at μ = 1), plus
    twice the squeeze a finger's own dry friction f takes (the URDF's ``<dynamics friction>``
    over the joint's force lever, the largest over the gripper joints): static friction holds
    back up to f of the push once the jaw is still, and the grip's checks judge the effort the
    servo gives, not the squeeze. Measured: 20 N on the SO-101's light cube in its slanted jaws
    kept it turning at 2 mm/s at the jaw (the jaw never stalled; the put-down never rested);
    the Z1's jaw (1 N·m of friction on a 9 cm lever, f = 11 N: its grip 24.6 N) closed and held
    its 12.5 g cube at 20 and 22.5 N, not at 12.5-16 N."""
    friction = 0.0
    if grip is not None:
        for name, lever in zip(grip.joints, grip.force_levers, strict=True):
            friction = max(friction, float(model.joint_friction[model.v_index(name)]) / lever)
    return GRASP_EFFORT * mass / CUBE_MASS + 2.0 * friction


def cube_size(grip: GripGeometry | None) -> float:
    """[m] the cube's edge for a gripper of this geometry (module docstring)."""
    if grip is None:
        return CUBE_MAX_SIZE
    return min(CUBE_MAX_SIZE, CUBE_OPENING_FRACTION * grip.open_width)


DOWN_CONE = math.radians(30.0)  # [rad] a sample's tool z this near straight down points down
TABLE_PERCENTILE = 5.0  # [%] of the downward samples' TCP heights in the band: the table's top


@dataclass(frozen=True)
class _ReachSamples:
    """The TCP over the reach samples: horizontal distance from the base's z axis [m], height
    [m] and whether its tool z points down (within DOWN_CONE), base frame."""

    distance: np.ndarray
    height: np.ndarray
    down: np.ndarray


# Per robot: (model name, joint names and placements, limits, TCP, base) → its samples. Each
# grasp trial of a bench builds its stack anew; the robot is sampled once per process.
_SAMPLES: dict[tuple[object, ...], _ReachSamples] = {}


def _reach_samples(model: RobotModel) -> _ReachSamples:
    limits = model.limits
    key = (
        model.model.name,
        tuple(model.model.names),
        tuple(float(v) for p in model.model.jointPlacements for v in p.translation),
        tuple(float(v) for v in model.model.frames[model.tcp_frame_id].placement.translation),
        tuple(limits.lower.tolist()),
        tuple(limits.upper.tolist()),
        model.tcp_frame_id,
        model.base_frame_id,
    )
    if key not in _SAMPLES:
        lower = np.where(np.isfinite(limits.lower), limits.lower, -math.pi)
        upper = np.where(np.isfinite(limits.upper), limits.upper, math.pi)
        rng = np.random.default_rng(REACH_SEED)
        fid = model.tcp_frame_id
        data = model.model.createData()
        distance, height, down = [], [], []
        for q in rng.uniform(lower, upper, size=(REACH_SAMPLES, lower.size)):
            pin.framesForwardKinematics(model.model, data, model.pinocchio_configuration(q))
            pose = data.oMf[fid]
            x, y, z = (float(v) for v in pose.translation)
            distance.append(math.hypot(x, y))
            height.append(z)
            down.append(float(pose.rotation[2, 2]) <= -math.cos(DOWN_CONE))
        _SAMPLES[key] = _ReachSamples(np.array(distance), np.array(height), np.array(down))
    return _SAMPLES[key]


def tcp_reach(model: RobotModel) -> float:
    """R [m] (module docstring), sampled once per robot and process."""
    return float(np.max(_reach_samples(model).distance))


def table_height(model: RobotModel) -> float:
    """h [m], the table's top (module docstring): 0 unless the arm's tool cannot point down
    that low over the region's band."""
    samples = _reach_samples(model)
    reach = tcp_reach(model)
    band = (samples.distance >= REGION_X[0] * reach) & (samples.distance <= REGION_X[1] * reach)
    heights = samples.height[band & samples.down]
    if heights.size == 0:
        return 0.0
    return max(0.0, float(np.percentile(heights, TABLE_PERCENTILE)))


def grip_offset(model: RobotModel, grip: GripGeometry, width: float) -> tuple[float, float, float]:
    """[m] tool frame: from the TCP to the midpoint of the width frames with the gripper
    opened to ``width`` (joints interpolated between closed and open), along the line between
    the frames made orthogonal to the approach (tool z: the component along the approach is
    not the grip's business; a revolute jaw's chord leans back along it)."""
    fraction = min(max(width / grip.open_width, 0.0), 1.0) if grip.open_width > 0 else 1.0
    q = model.neutral()
    for name, value in zip(grip.joints, grip.joint_target(fraction), strict=True):
        q[model.q_index(name)] = value
    data = model.model.createData()
    pin.framesForwardKinematics(model.model, data, model.pinocchio_configuration(q))
    a = np.array(data.oMf[grip.frame_ids[0]].translation)
    b = np.array(data.oMf[grip.frame_ids[1]].translation)
    tcp = data.oMf[model.tcp_frame_id]
    rotation = np.array(tcp.rotation)
    direction = rotation.T @ (a - b)
    direction[2] = 0.0
    norm = float(np.linalg.norm(direction))
    if norm < 1e-9:
        return (0.0, 0.0, 0.0)
    direction /= norm
    centre = rotation.T @ (0.5 * (a + b) - np.array(tcp.translation))
    along = float(centre @ direction) * direction
    return (float(along[0]), float(along[1]), float(along[2]))


TABLE_CLEARANCE = 0.005  # [m] between the fingertips and the table at the grasp


def with_fingertips(scene: GraspScene, depth: float) -> GraspScene:
    """``scene`` with its grasp height for fingers reaching ``depth`` [m] below the TCP along
    the approach (tool z): the cube's centre, or depth + TABLE_CLEARANCE where that is higher
    (the bundled arm: its fingertips 2 cm past the TCP, a 5 cm cube: its centre). A scene
    with ``tcp_in_cube`` is returned as it is (its grasp clears the table already)."""
    if scene.tcp_in_cube is not None:
        return scene
    height = max(scene.cube_half_size, depth + TABLE_CLEARANCE)
    return dataclasses.replace(scene, grasp_height=height)
