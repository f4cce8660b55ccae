"""Where an arm grasps: the grasp bench's placement region, approach offset and lift height
from where the arm's IK reaches, not from fractions of its reach alone.

The scene's region (``hardware/grasp_scene.py``: x ∈ [0.435 R, 0.58 R], y ∈ ±0.145 R,
yaw ∈ ±45°) and the grasp goal's defaults (approach 8 cm along the tool axis, lift 10 cm) are
the bundled arm's figures scaled by R. A small arm (the SO-101: 5 joints, its wrist pitch at
its limit) reaches the grasp poses of that region but not 8 cm above them: every trial would
be refused at the Grasp action's own goal check. So the bench asks the goal check's IK:

    samples  : the region's corners, edge midpoints and centre (x ∈ {x0, x̄, x1},
               y ∈ {y0, 0, y1}) × yaw ∈ {−45°, 0°, 45°}: 27 cube poses
    heights  : per sample and each of its grasps (a cube's four, turned by quarter turns about
               its vertical), the grasp pose, then the pre-grasp pose backed off t along the
               tool axis and the lifted pose t above the grasp along base z, for t in HEIGHTS
               (each seeded with the solution below it): the largest t each reaches; the
               sample reaches what its best grasp does
    verdict  : every sample reaches the defaults → the scene's region and the defaults, unchanged
               (the bundled arm, the Panda). Otherwise windows of the same size slid
               along x over the table in steps of a quarter of the region's length, and halved
               in y, are scored by the heights their samples all reach; the window that reaches
               the most wins (ties: the full width, then the nearest the scene's own), and the
               approach offset and the lift height are the defaults lowered to what it reaches.
               Below MIN_HEIGHT everywhere: the scene's region and the defaults, said so (the
               trials then end UNREACHABLE at the goal check, with its reason).

A heuristic, not a proof: the bench still runs the goal check before each trial, so a cube it
misjudges is reported UNREACHABLE, never moved to.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ct_controllers.hardware.grasp_scene import GraspScene
from ct_controllers.ik.solver import IkSolver
from ct_controllers.tasks.phases import (
    DEFAULT_APPROACH_OFFSET,
    DEFAULT_LIFT_HEIGHT,
    GraspGoal,
    lifted,
)
from ct_controllers.types import FloatArray

HEIGHTS = (0.03, 0.04, 0.05, 0.06, 0.08, 0.10)  # [m] the ladder of approach and lift heights
# [m] below this the fingertips at the pre-grasp do not clear a cube's top with margin, and a
# lift's rise is within what a slipping cube is judged by.
MIN_HEIGHT = HEIGHTS[0]
# Restarts per IK solve of the map (the goal check's own solves restart for 0.2 s): each height
# is solved from the solution below it, which converges in milliseconds where a solution
# exists; a count, not the wall clock, keeps the map the same on a loaded machine.
SOLVE_RESTARTS = 8
X_STEPS = 4  # window positions per region length
TABLE_MARGIN = 1.5  # cube edges between a window's x end and the table's edge

# (x, y, yaw) of a cube → its grasp poses (4x4 TCP poses, base frame), the preferred first: a
# cube's grasp turned by a quarter turn about its vertical axis grasps the same cube.
GraspPoses = Callable[[float, float, float], list[FloatArray]]


@dataclass(frozen=True)
class GraspReach:
    """The bench's grasp placement [m, rad] (base frame) and offsets [m]."""

    x: tuple[float, float]
    y: tuple[float, float]
    yaw: tuple[float, float]
    approach_offset: float
    lift_height: float
    derived: bool  # False: the scene's own region and the goal's defaults
    note: str = field(default="", compare=False)

    @property
    def region(self) -> dict[str, tuple[float, float]]:
        return {"x": self.x, "y": self.y, "yaw": self.yaw}

    def goal(self, grasp_pose: FloatArray, **options: float) -> GraspGoal:
        """A grasp goal for ``grasp_pose`` with this approach offset and lift height."""
        return GraspGoal(
            grasp_pose=grasp_pose,
            approach_offset=self.approach_offset,
            lift_height=self.lift_height,
            **options,  # type: ignore[arg-type]
        )


def scene_reach(scene: GraspScene) -> GraspReach:
    """The scene's own region with the goal's default offsets (nothing derived)."""
    return GraspReach(
        scene.x, scene.y, scene.yaw, DEFAULT_APPROACH_OFFSET, DEFAULT_LIFT_HEIGHT, False
    )


def grasp_reach(
    scene: GraspScene, ik: IkSolver, start: FloatArray, grasp_poses: GraspPoses
) -> GraspReach:
    """The placement and offsets (module docstring) for the arm of ``ik`` (the goal check's
    solver, its restarts bounded: ``SOLVE_RESTARTS``) starting at ``start`` (full model order
    [rad | m]); ``grasp_poses(x, y, yaw)``: the TCP's grasp poses for a cube there; a sample
    reaches what the best of them reaches."""
    heights: dict[tuple[float, float, float], tuple[float, float]] = {}

    def reached(x: float, y: float, yaw: float) -> tuple[float, float]:
        key = (round(x, 6), round(y, 6), round(yaw, 6))
        if key not in heights:
            best = (-1.0, -1.0)
            for pose in grasp_poses(x, y, yaw):  # the first that reaches the defaults ends it
                candidate = _heights(ik, start, pose)
                if _score(*candidate) > _score(*best):
                    best = candidate
                if _score(*best) >= 2.0:
                    break
            heights[key] = best
        return heights[key]

    def window(
        x0: float, x1: float, half_y: float, floor: float = -math.inf
    ) -> tuple[float, float]:
        """(approach, lift) [m] every sample of the window reaches; evaluation stops once
        they score below ``floor`` (the window cannot win then)."""
        approach = lift = math.inf
        middle = 0.5 * (x0 + x1)
        yaws = (0.5 * (scene.yaw[0] + scene.yaw[1]), scene.yaw[0], scene.yaw[1])
        for x in (middle, x0, x1):
            for y in (0.0, -half_y, half_y):
                for yaw in yaws:
                    a, raised = reached(x, y, yaw)
                    approach, lift = min(approach, a), min(lift, raised)
                    if min(approach, lift) < MIN_HEIGHT or _score(approach, lift) < floor:
                        return approach, lift
        return approach, lift

    own = scene_reach(scene)
    approach, lift = window(scene.x[0], scene.x[1], scene.y[1])
    if _score(approach, lift) >= 2.0:
        return own
    length = scene.x[1] - scene.x[0]
    step = length / X_STEPS
    margin = TABLE_MARGIN * 2 * scene.cube_half_size
    low = scene.table_center[0] - scene.table_half_size[0] + margin
    high = scene.table_center[0] + scene.table_half_size[0] - margin - length
    starts = [low + k * step for k in range(int((high - low) / step) + 1)]
    # The most promising first (the window's centre sample), so that the bound prunes early.
    starts.sort(key=lambda x0: -_score(*reached(x0 + 0.5 * length, 0.0, 0.0)))
    best: tuple[tuple[float, ...], GraspReach] | None = None
    for half_y in (scene.y[1], 0.5 * scene.y[1]):
        for x0 in starts:
            floor = -math.inf if best is None else best[0][0]
            a, raised = window(x0, x0 + length, half_y, floor)
            if min(a, raised) < MIN_HEIGHT:
                continue
            a, raised = min(a, DEFAULT_APPROACH_OFFSET), min(raised, DEFAULT_LIFT_HEIGHT)
            score = (_score(a, raised), half_y, -abs(x0 - scene.x[0]))
            if best is None or score > best[0]:
                reach = GraspReach((x0, x0 + length), (-half_y, half_y), scene.yaw, a, raised, True)
                best = (score, reach)
    if best is None:
        note = (
            f"no region of the table where the arm reaches {MIN_HEIGHT * 100:.0f} cm above "
            "its top-down grasps at every sample: the scene's own region and the defaults"
        )
        return dataclasses.replace(own, note=note)
    reach = best[1]
    note = (
        f"not every sample of the scene's region (x ∈ [{scene.x[0]:.3f}, {scene.x[1]:.3f}] m) "
        f"reaches the approach {DEFAULT_APPROACH_OFFSET * 100:.0f} cm and the lift "
        f"{DEFAULT_LIFT_HEIGHT * 100:.0f} cm: placed at x ∈ "
        f"[{reach.x[0]:.3f}, {reach.x[1]:.3f}] m, y ± {reach.y[1]:.3f} m, approach "
        f"{reach.approach_offset * 100:.0f} cm, lift {reach.lift_height * 100:.0f} cm"
    )
    return dataclasses.replace(reach, note=note)


def _score(approach: float, lift: float) -> float:
    """How much of the default approach and lift (each capped at 1) a sample reaches: 2 all."""
    return min(approach / DEFAULT_APPROACH_OFFSET, 1.0) + min(lift / DEFAULT_LIFT_HEIGHT, 1.0)


def _heights(ik: IkSolver, start: FloatArray, grasp_pose: FloatArray) -> tuple[float, float]:
    """(approach, lift) [m]: the largest HEIGHTS the pre-grasp and the lifted pose reach from
    this grasp pose (each independently, each step seeded with the one below); −1 when the
    grasp pose itself has no solution (0 when no height does)."""
    solved = ik.solve(grasp_pose, seed=start)
    if not solved.converged:
        return -1.0, -1.0

    def ladder(pose_at: Callable[[float], FloatArray]) -> float:
        seed, reached = solved.q, 0.0
        for height in HEIGHTS:
            result = ik.solve(pose_at(height), seed=seed)
            if not result.converged:
                break
            seed, reached = result.q, height
        return reached

    def pre_grasp(height: float) -> FloatArray:
        return np.array(GraspGoal(grasp_pose=grasp_pose, approach_offset=height).pre_grasp_pose)

    return ladder(pre_grasp), ladder(lambda height: lifted(grasp_pose, height))
