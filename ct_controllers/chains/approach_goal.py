"""Which IK solution a MoveToPose goal's joint-space approach goes to.

A pose has many IK solutions: the arm's branches (shoulder left or right, elbow up or down,
wrist flipped) and, on a joint whose range is wider than a turn, every whole turn of it. The
goal check's IK returns the first it converges on, from the measured configuration or from a
random restart anywhere in the range; the approach then goes straight there in joint space. Seen
on a UR5 (``ct-bench reach``): a solution a full turn round on a ±2π joint swings the upper arm
through the base; one on another branch folds the wrist into the forearm or lays the upper arm
on the table, where it stays, short of the pose, until the timeout.

So, of the solutions (:meth:`GoalSelection.select`):

1. each is moved by whole turns to the branch nearest the measured configuration
   (:meth:`~ct_controllers.ik.solver.IkSolver.nearest_branch`: the same pose);
2. the first (seeded with the measured configuration, as the goal check always was) is taken
   when its approach is clear of the scene: the jerk-limited trajectory the approach will run
   (:class:`~ct_controllers.references.joint_trajectory.JerkLimitedTrajectory`, the loop's
   reference limits) sampled no more than ``resolution`` apart in every joint, each sample and the
   goal checked (:class:`~ct_controllers.hardware.mujoco_collision.SceneCollision`: the stack's
   scene — table, floor, the robot's own links — at ``clearance``);
3. otherwise up to ``SOLUTIONS`` distinct solutions are sought (seeds alternately near the
   measured configuration and anywhere in the range), ordered by how long the approach to each
   takes (max over joints of |Δq| / the reference velocity limit), and the first whose goal and
   approach are clear is taken;
4. none clear within ``SELECTION_BUDGET``: the nearest whose goal is clear (else the first), and
   ``collision`` says what its approach hits — the goal is not refused: the scene is the stack's
   model of the cell, not a measurement.

Without a scene to check against (none given, or one MuJoCo cannot build), step 1 alone: the
first solution on its nearest branch.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from ct_controllers.hardware.mujoco_collision import (
    DEFAULT_RESOLUTION,
    Allowed,
    Collision,
    SceneCollision,
)
from ct_controllers.ik.solver import IkResult, IkSolver
from ct_controllers.references.joint_trajectory import (
    JerkLimitedTrajectory,
    JointLimits,
    TrajectoryError,
)
from ct_controllers.types import FloatArray

SELECTION_BUDGET = 1.0  # [s] wall time of the search beyond the first solution
SOLUTIONS = 12  # distinct solutions sought at most when the first one's approach is not clear
NEAR_SPREAD = 0.5  # [rad | m] standard deviation of the seeds near the measured configuration
DISTINCT = 1e-3  # [rad | m] two solutions closer than this in every joint are one


@dataclass(frozen=True)
class ApproachGoal:
    """The goal check's answer: ``candidate`` (not converged: the pose is UNREACHABLE; its q on
    the branch nearest the measured configuration), how many distinct converged solutions were
    weighed, whether the chosen one's approach was found clear (None: not checked), what it hits
    otherwise ("" when clear or not checked), and the wall time of the whole selection [s]."""

    candidate: IkResult
    solutions: int
    clear: bool | None
    collision: str
    time: float


class GoalSelection:
    """The solution an approach goes to (see the module docstring).

    ik          the goal check's solver (its options, margin and locked joints)
    limits      the approach's reference limits (model order), as the loop plans joint motions
    controlled  model-order indices of the joints the approach moves (the arm); the others stay
                where they are measured
    collision   the scene to keep clear of, or None (no check)
    resolution  [rad | m] largest joint step between two checked samples of an approach
    """

    def __init__(
        self,
        ik: IkSolver,
        limits: JointLimits,
        controlled: np.ndarray,
        collision: SceneCollision | None,
        resolution: float = DEFAULT_RESOLUTION,
        random_seed: int = 0,
    ) -> None:
        if not (math.isfinite(resolution) and resolution > 0):
            raise ValueError(f"path resolution must be finite and > 0, got {resolution}")
        self.ik = ik
        self.limits = limits
        self.controlled = np.asarray(controlled, dtype=np.intp)
        self.collision = collision
        self.resolution = resolution
        self._rng = np.random.default_rng(random_seed)
        self._velocity = np.asarray(limits.velocity, dtype=np.float64)
        # Goals are checked on the executor's threads, several at once: the collision scene
        # (one scratch MjData, used by MuJoCo outside the GIL) and the solver's scratch are
        # one selection's at a time (two at once crashed the node under a burst of goals).
        self._lock = threading.Lock()

    def select(self, pose: FloatArray, q: FloatArray) -> ApproachGoal:
        """The solution for ``pose`` (4x4, base frame) whose approach from ``q`` (measured, at
        rest, model order) to take. Any thread; one selection at a time."""
        with self._lock:
            return self._select(pose, q)

    def _select(self, pose: FloatArray, q: FloatArray) -> ApproachGoal:
        started = time.perf_counter()
        q = np.asarray(q, dtype=np.float64)
        first = self.ik.solve(pose, seed=q)
        if not first.converged:
            return ApproachGoal(first, 0, None, "", time.perf_counter() - started)
        first = self._on_nearest_branch(first, q)
        if self.collision is None:
            return ApproachGoal(first, 1, None, "", time.perf_counter() - started)
        allowed = self.collision.allowed_at(q)
        hit = self.approach_collision(q, first.q, allowed)
        if hit is None:
            return ApproachGoal(first, 1, True, "", time.perf_counter() - started)
        deadline = started + SELECTION_BUDGET
        found = [first, *self._more_solutions(pose, q, first, deadline)]
        found.sort(key=lambda c: self.approach_cost(q, c.q))
        hits: dict[int, Collision | None] = {id(first): hit}
        goal_clear = [
            c for c in found if self.collision.check(self._arrival(q, c.q), allowed) is None
        ]
        for candidate in goal_clear:
            if time.perf_counter() > deadline:
                break
            if id(candidate) not in hits:
                hits[id(candidate)] = self.approach_collision(q, candidate.q, allowed)
            if hits[id(candidate)] is None:
                return ApproachGoal(candidate, len(found), True, "", time.perf_counter() - started)
        chosen = goal_clear[0] if goal_clear else first
        if id(chosen) not in hits:  # the budget ran out before it was checked
            hits[id(chosen)] = self.approach_collision(q, chosen.q, allowed)
        hit = hits[id(chosen)]
        return ApproachGoal(
            chosen, len(found), hit is None, str(hit or ""), time.perf_counter() - started
        )

    def approach_cost(self, q: FloatArray, goal: FloatArray) -> float:
        """[s] a lower bound on the approach's duration from ``q`` to ``goal``: the longest of
        |Δqᵢ| / vᵢ over the controlled joints (vᵢ the reference velocity limit)."""
        i = self.controlled
        return float(np.max(np.abs(goal[i] - q[i]) / self._velocity[i]))

    def approach_path(self, q: FloatArray, goal: FloatArray) -> list[FloatArray]:
        """The approach's configurations from ``q`` (at rest) to ``goal``'s controlled joints:
        the jerk-limited trajectory the approach plans, sampled at equal times, at most
        ``resolution`` apart in every joint (its speed peaks at twice its mean at most), the
        planned goal last. A trajectory that cannot be planned: the straight segment."""
        target = self._arrival(q, goal)
        span = float(np.max(np.abs(target - q)))
        count = max(1, math.ceil(2.0 * span / self.resolution))
        try:
            trajectory = JerkLimitedTrajectory(0.0, q, np.zeros_like(q), target, self.limits)
        except TrajectoryError:
            return [q + (target - q) * (k / count) for k in range(1, count + 1)]
        times = np.linspace(0.0, trajectory.duration, count + 1)[1:]
        return [trajectory.sample(float(t)).q for t in times]

    def approach_collision(
        self, q: FloatArray, goal: FloatArray, allowed: Allowed
    ) -> Collision | None:
        """What the approach from ``q`` to ``goal`` (its controlled joints) hits first (the
        goal checked first: the commonest case, and one check), or None when it is clear."""
        assert self.collision is not None
        at_goal = self.collision.check(self._arrival(q, goal), allowed)
        if at_goal is not None:
            return at_goal
        hit = self.collision.check_path(self.approach_path(q, goal), allowed)
        return None if hit is None else hit[1]

    def _arrival(self, q: FloatArray, goal: FloatArray) -> FloatArray:
        """Where the approach from ``q`` to ``goal`` ends: ``goal``'s controlled joints, the
        others (a gripper's fingers, which the IK holds locked) where they are in ``q``."""
        arrival = np.array(q, dtype=np.float64)
        arrival[self.controlled] = goal[self.controlled]
        return arrival

    def _on_nearest_branch(self, candidate: IkResult, q: FloatArray) -> IkResult:
        return dataclasses.replace(candidate, q=self.ik.nearest_branch(candidate.q, q))

    def _more_solutions(
        self, pose: FloatArray, q: FloatArray, first: IkResult, deadline: float
    ) -> list[IkResult]:
        """Up to ``SOLUTIONS`` − 1 further converged solutions, distinct from ``first`` and
        from each other once on their nearest branches; seeds alternately near ``q`` (normal,
        ``NEAR_SPREAD``) and uniform in the solve's range (a continuous joint: q ± π)."""
        lower, upper = self.ik.bounds()
        lower = np.where(np.isfinite(lower), lower, q - math.pi)
        upper = np.where(np.isfinite(upper), upper, q + math.pi)
        found: list[IkResult] = []
        seen = [first.q]
        for attempt in range(2 * (SOLUTIONS - 1)):
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or len(found) >= SOLUTIONS - 1:
                break
            if attempt % 2 == 0:
                seed = q + self._rng.normal(0.0, NEAR_SPREAD, size=q.size)
            else:
                seed = self._rng.uniform(lower, upper)
            result = self.ik.solve(pose, seed=np.clip(seed, lower, upper), time_budget=remaining)
            if not result.converged:
                continue
            result = self._on_nearest_branch(result, q)
            if any(np.max(np.abs(result.q - other)) < DISTINCT for other in seen):
                continue
            seen.append(result.q)
            found.append(result)
        return found
