"""Which IK solution a MoveToPose approach goes to (ct_controllers.chains.approach_goal), with its
parts: the nearest branch of a solution (ct_controllers.ik.branches) and collision checks in the
stack's scene (ct_controllers.hardware.mujoco_collision). Each against an independent
computation: enumeration of whole turns, forward kinematics, MuJoCo's pairwise geom distance
(mj_geomDistance on a fresh mj_forward) over the pairs MuJoCo's collision rules test. On the UR5
of example-robot-data (±2π joints, meshes) and the bundled arm (primitives)."""

from __future__ import annotations

import itertools
import math
import threading
from pathlib import Path

import mujoco
import numpy as np
import pytest
from helpers import new_robot_model

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.chains.approach_goal import GoalSelection
from ct_controllers.hardware.mujoco_collision import ALLOWED_SLACK, SceneCollision
from ct_controllers.hardware.mujoco_scene import build_scene, compile_scene
from ct_controllers.ik import IkOptions, IkSolver
from ct_controllers.ik.branches import TURN, nearest_branch, periodic_joints
from ct_controllers.model.description import default_description_path, load_description
from ct_controllers.model.frames import pose_error
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.joint_trajectory import JointLimits

CLEARANCE = 0.01  # [m]
UR5_HOME = np.array([2.1192, -0.6242, 1.256, -2.2348, -1.5156, 0.1842])  # ct-setup's choice


_example_robot = example_robot_path


class Robot:
    """A robot's model and its scene (the one the MuJoCo backend builds, objects included)."""

    def __init__(self, urdf_path: Path, tcp: str, base: str | None, home: np.ndarray) -> None:
        if urdf_path.suffix == ".xacro":
            description = load_description(str(urdf_path), mappings={"backend": "mujoco"})
            urdf = description.urdf
        else:
            urdf = urdf_path.read_text()
        self.model = RobotModel(urdf, tcp, base)
        self.scene = compile_scene(
            build_scene(urdf, tcp_frame=tcp, urdf_directory=urdf_path.parent)
        )
        self.home = home
        followers = {n: (j.master, j.multiplier, j.offset) for n, j in self.model.mimic.items()}
        self.collision = SceneCollision(self.scene, self.model.joint_names, followers, CLEARANCE)


@pytest.fixture(scope="module")
def ur5() -> Robot:
    return Robot(_example_robot("ur_description/urdf/ur5_robot.urdf"), "tool0", "world", UR5_HOME)


@pytest.fixture(scope="module")
def ct_arm() -> Robot:
    model = new_robot_model()
    home = np.zeros(model.nq)
    home[model.indices(["joint2", "joint4", "joint6"])] = (0.3, -1.2, 0.9)
    return Robot(default_description_path(), "tcp", "base_link", home)


# --- the nearest branch -------------------------------------------------------------------------


def test_nearest_branch_is_the_nearest_whole_turn_inside_the_bounds() -> None:
    """For random q inside random bounds (some ±inf, some joints not periodic), each periodic
    joint's result is, of q + 2πk for k in −5..5 inside the bounds, the one nearest the
    reference (enumerated); a non-periodic joint is unchanged."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = 6
        lower = rng.uniform(-14.0, 0.0, n)
        upper = rng.uniform(0.0, 14.0, n)
        lower[rng.random(n) < 0.2] = -np.inf
        upper[rng.random(n) < 0.2] = np.inf
        q = rng.uniform(np.maximum(lower, -14.0), np.minimum(upper, 14.0))
        reference = rng.uniform(-14.0, 14.0, n)
        periodic = rng.random(n) < 0.8
        found = nearest_branch(q, reference, lower, upper, periodic)
        for i in range(n):
            if not periodic[i]:
                assert found[i] == q[i]
                continue
            options = [
                q[i] + TURN * k for k in range(-5, 6) if lower[i] <= q[i] + TURN * k <= upper[i]
            ]
            best = min(abs(x - reference[i]) for x in options)
            assert abs(found[i] - reference[i]) == pytest.approx(best, abs=1e-12)
            assert lower[i] <= found[i] <= upper[i]


def test_nearest_branch_refuses_mismatched_shapes() -> None:
    """Arrays of different lengths are an error naming the function, not a broadcast."""
    with pytest.raises(ValueError, match="nearest_branch"):
        nearest_branch(np.zeros(3), np.zeros(2), np.zeros(3), np.zeros(3), np.ones(3, bool))


def test_periodic_joints_are_the_revolute_and_continuous_ones(ct_arm: Robot) -> None:
    """The bundled arm: its seven revolute joints (one of them on an unaligned axis) are
    periodic, its two prismatic fingers are not."""
    model = ct_arm.model
    expected = [not name.endswith("finger_joint") for name in model.joint_names]
    assert periodic_joints(model).tolist() == expected


def test_the_solver_moves_a_ur5_solution_to_its_nearest_branch_keeping_the_pose(
    ur5: Robot,
) -> None:
    """On the UR5 (±2π joints), a solution shifted by whole turns onto the branch nearest a
    reference keeps its TCP pose (forward kinematics, 1e-9) and no single joint could come
    nearer the reference by another whole turn inside the limits."""
    model = ur5.model
    solver = IkSolver(model, options=IkOptions(time_budget=0.2))
    lower, upper = model.limits.lower, model.limits.upper
    rng = np.random.default_rng(4)
    for _ in range(50):
        q = rng.uniform(lower, upper)
        reference = rng.uniform(lower, upper)
        moved = solver.nearest_branch(q, reference)
        assert np.abs(pose_error(model.frame_pose(moved), model.frame_pose(q))).max() < 1e-9
        for i in range(model.nq):
            for k in (-1, 1):
                other = moved[i] + TURN * k
                if lower[i] <= other <= upper[i]:
                    assert abs(other - reference[i]) >= abs(moved[i] - reference[i]) - 1e-12


# --- collision checks ---------------------------------------------------------------------------


def _tested_pairs(m: mujoco.MjModel) -> list[tuple[int, int]]:
    """The geom pairs MuJoCo's collision tests, by its documented rules: compatible contype /
    conaffinity, different weld bodies, not a body and its parent unless one is the world,
    not a pair of bodies the model excludes (``<exclude>``: the scene's root and the links
    moving on it), no free object (the checker leaves those out)."""
    free = {int(m.jnt_bodyid[j]) for j in range(m.njnt) if m.jnt_type[j] == 0}
    excluded = {int(signature) for signature in m.exclude_signature}  # (b1 << 16) + b2
    pairs = []
    for g1, g2 in itertools.combinations(range(m.ngeom), 2):
        b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
        if b1 in free or b2 in free:
            continue
        low, high = min(b1, b2), max(b1, b2)
        if (low << 16) + high in excluded:
            continue
        type1, type2 = m.geom_contype, m.geom_conaffinity
        if not (type1[g1] & type2[g2] or type1[g2] & type2[g1]):
            continue
        w1, w2 = int(m.body_weldid[b1]), int(m.body_weldid[b2])
        if w1 == w2:
            continue
        p1, p2 = int(m.body_weldid[m.body_parentid[w1]]), int(m.body_weldid[m.body_parentid[w2]])
        if w1 != 0 and w2 != 0 and (p1 == w2 or p2 == w1):
            continue
        pairs.append((g1, g2))
    return pairs


def _forward(robot: Robot, q: np.ndarray) -> mujoco.MjData:
    """A fresh MjData of the scene as compiled at q (mj_forward)."""
    m = robot.scene
    d = mujoco.MjData(m)
    for name, value in zip(robot.model.joint_names, q, strict=True):
        d.qpos[m.joint(name).qposadr[0]] = value
    for name, value in robot.model.follower_positions(q).items():
        d.qpos[m.joint(name).qposadr[0]] = value
    mujoco.mj_forward(m, d)
    return d


def _distances(robot: Robot, q: np.ndarray) -> dict[tuple[int, int], float]:
    """Every tested pair's distance [m] at q (capped at 0.1 m), on a fresh MjData of the
    scene as compiled, by mj_forward and mj_geomDistance."""
    m = robot.scene
    d = _forward(robot, q)
    fromto = np.zeros(6)
    return {
        pair: mujoco.mj_geomDistance(m, d, pair[0], pair[1], 0.1, fromto)
        for pair in _tested_pairs(m)
    }


@pytest.mark.parametrize("name", ["ur5", "ct_arm"])
def test_contacts_are_the_pairs_closer_than_the_clearance(name: str, request) -> None:
    """At random configurations, the pairs the checker reports are exactly those whose
    distance (mj_geomDistance) is below the clearance — pairs within 2 mm of it either way
    are not judged (two algorithms, two roundings) — and each reported distance agrees with
    it to 2 mm where they touch."""
    robot: Robot = request.getfixturevalue(name)
    model = robot.model
    arm = [i for i, n in enumerate(model.joint_names) if "finger" not in n]
    lower = np.maximum(model.limits.lower, -math.pi)
    upper = np.minimum(model.limits.upper, math.pi)
    rng = np.random.default_rng(5)
    judged = 0
    for _ in range(30):
        q = robot.home.copy()
        q[arm] = rng.uniform(lower[arm], upper[arm])
        reported = robot.collision.contacts(q)
        for pair, distance in _distances(robot, q).items():
            if abs(distance - CLEARANCE) < 0.002:
                continue
            judged += 1
            assert (pair in reported) == (distance < CLEARANCE), (pair, distance, reported)
            if pair in reported and distance > 0:
                assert reported[pair] == pytest.approx(distance, abs=0.002)
    assert judged > 100


def test_a_pair_overlapping_by_build_is_allowed_but_not_any_deeper(ur5: Robot) -> None:
    """The UR5's base and shoulder meshes overlap at home (its own build). The stack's scene
    excludes that pair (a root and the links moving on it); rebuilt here without the
    exclusion, the checker meets the overlap: allowed from there at every pan angle; the upper
    arm laid on the base (shoulder lift turned down) is a collision naming the two links."""
    path = _example_robot("ur_description/urdf/ur5_robot.urdf")
    spec = build_scene(path.read_text(), tcp_frame="tool0", urdf_directory=path.parent)
    excluded = [e for e in spec.excludes if "shoulder_link" in (e.bodyname1, e.bodyname2)]
    assert excluded, "the stack's scene excludes the base-shoulder pair"
    for exclude in excluded:
        spec.delete(exclude)
    model = ur5.model
    followers = {n: (j.master, j.multiplier, j.offset) for n, j in model.mimic.items()}
    check = SceneCollision(compile_scene(spec), model.joint_names, followers, CLEARANCE)
    assert not ur5.collision.allowed_at(UR5_HOME)  # the stack's own: nothing to allow
    allowed = check.allowed_at(UR5_HOME)
    assert allowed, "the UR5's base and shoulder touch at home"
    for pan in np.linspace(-6.0, 6.0, 7):
        q = UR5_HOME.copy()
        q[0] = pan
        assert check.check(q, allowed) is None
    folded = UR5_HOME.copy()
    folded[1] = 1.2  # the upper arm swung down through the base plane
    hit = check.check(folded, allowed)
    assert hit is not None and hit.distance < CLEARANCE
    assert "upper_arm_link" in (hit.body1, hit.body2) or "forearm_link" in (hit.body1, hit.body2)
    for pair, floor in allowed.items():
        assert floor == pytest.approx(check.contacts(UR5_HOME)[pair] - ALLOWED_SLACK)


def test_the_checker_refuses_a_joint_the_scene_lacks(ct_arm: Robot) -> None:
    """A joint name the scene does not have is an error naming it."""
    with pytest.raises(ValueError, match="no_such_joint"):
        SceneCollision(ct_arm.scene, ("joint1", "no_such_joint"))


# --- the selection ------------------------------------------------------------------------------


def _clear_samples(robot: Robot, count: int, seed: int) -> list[np.ndarray]:
    """Random arm configurations above the table plane, as ``ct-bench reach`` samples them:
    every link origin 2 cm above z = 0, every tested pair ≥ 2 cm apart (independently, by
    mj_geomDistance) but those already that close at home."""
    model = robot.model
    home_close = {p for p, d in _distances(robot, robot.home).items() if d < 0.02}
    lower = np.maximum(model.limits.lower, -2 * math.pi)
    upper = np.minimum(model.limits.upper, 2 * math.pi)
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        q = rng.uniform(lower, upper)
        if np.any(_forward(robot, q).xpos[2:, 2] < 0.02):  # bodies 0, 1: the world, the base
            continue
        if all(d >= 0.02 or p in home_close for p, d in _distances(robot, q).items()):
            found.append(q)
    return found


def test_the_chosen_solution_reaches_the_pose_on_a_clear_approach(ur5: Robot) -> None:
    """On the UR5 from home, for poses of random clear configurations: the chosen solution
    converges (pose re-computed by FK within the IK tolerance), lies inside the limits, is on
    the branch nearest home joint by joint, and its approach — every sample of the path the
    selection plans, and the goal — keeps every pair not touching at home ≥ the clearance
    (mj_geomDistance, 1 mm of rounding). At least one of these poses needs more than the
    first solution (the case the selection exists for)."""
    model = ur5.model
    ik = IkSolver(model, options=IkOptions(time_budget=0.2, limit_margin=0.005))
    velocity = 0.5 * model.limits.velocity
    limits = JointLimits(velocity, np.full(6, 10.0), np.full(6, 100.0))
    selection = GoalSelection(ik, limits, np.arange(6), ur5.collision)
    home_close = {p for p, d in _distances(ur5, UR5_HOME).items() if d < CLEARANCE}
    lower, upper = ik.bounds()
    searched = 0
    for q_sample in _clear_samples(ur5, 6, seed=7):
        pose = model.frame_pose(q_sample)
        chosen = selection.select(pose, UR5_HOME)
        assert chosen.candidate.converged and chosen.clear is True, chosen
        q = chosen.candidate.q
        assert np.abs(pose_error(model.frame_pose(q), pose)).max() <= 1e-5
        assert np.all(q >= lower) and np.all(q <= upper)
        for i in range(6):
            for k in (-1, 1):
                if lower[i] <= q[i] + TURN * k <= upper[i]:
                    assert abs(q[i] + TURN * k - UR5_HOME[i]) >= abs(q[i] - UR5_HOME[i])
        for sample in [*selection.approach_path(UR5_HOME, q), q]:
            close = {
                p: d
                for p, d in _distances(ur5, sample).items()
                if d < CLEARANCE - 0.001 and p not in home_close
            }
            assert not close, (sample, close)
        searched += chosen.solutions > 1
    assert searched >= 1


def test_selections_from_several_threads_at_once_each_reach_their_pose(ur5: Robot) -> None:
    """The node checks goals on several executor threads at once: four threads selecting on
    one GoalSelection (one collision scene, one solver) each get a converged solution whose FK
    pose is theirs, clear of the scene (two selections at once used one MjData, outside the
    GIL, and crashed the node under a burst of MoveToPose goals)."""
    model = ur5.model
    ik = IkSolver(model, options=IkOptions(time_budget=0.2, limit_margin=0.005))
    limits = JointLimits(0.5 * model.limits.velocity, np.full(6, 10.0), np.full(6, 100.0))
    selection = GoalSelection(ik, limits, np.arange(6), ur5.collision)
    poses = [model.frame_pose(q) for q in _clear_samples(ur5, 4, seed=11)]
    results: dict[int, list] = {i: [] for i in range(len(poses))}

    def select(i: int) -> None:
        for _ in range(3):
            results[i].append(selection.select(poses[i], UR5_HOME))

    threads = [threading.Thread(target=select, args=(i,)) for i in range(len(poses))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60.0)
    for i, chosen in results.items():
        assert len(chosen) == 3
        for answer in chosen:
            assert answer.candidate.converged and answer.clear is True, answer
            error = pose_error(model.frame_pose(answer.candidate.q), poses[i])
            assert np.abs(error).max() <= 1e-5


def test_an_unreachable_pose_is_not_converged_and_nothing_is_searched(ur5: Robot) -> None:
    """A pose 3 m away: the answer is the first, unconverged, candidate; no search."""
    ik = IkSolver(ur5.model, options=IkOptions(time_budget=0.05))
    limits = JointLimits(np.ones(6), np.full(6, 10.0), np.full(6, 100.0))
    selection = GoalSelection(ik, limits, np.arange(6), ur5.collision)
    pose = np.eye(4)
    pose[:3, 3] = (3.0, 0.0, 0.5)
    chosen = selection.select(pose, UR5_HOME)
    assert not chosen.candidate.converged and chosen.solutions == 0 and chosen.clear is None


def test_the_fingers_the_ik_locks_are_checked_where_they_are(ct_arm: Robot) -> None:
    """The goal check's IK holds the fingers locked (at 0, closed: touching each other); the
    approach leaves them where they are measured (open), and that is where they are checked:
    an approach between two clear configurations of the bundled arm is clear."""
    model = ct_arm.model
    fingers = model.indices(["left_finger_joint", "right_finger_joint"])
    arm = model.indices([f"joint{i}" for i in range(1, 8)])
    closed = ct_arm.home.copy()
    closed[fingers] = 0.0
    home = ct_arm.home.copy()
    home[fingers] = 0.03
    allowed = ct_arm.collision.allowed_at(home)
    assert ct_arm.collision.check(closed, allowed) is not None, "closed fingers touch"
    ik = IkSolver(
        model,
        locked={"left_finger_joint": 0.0, "right_finger_joint": 0.0},
        options=IkOptions(time_budget=0.2, limit_margin=0.005),
    )
    limits = JointLimits(np.ones(model.nq), np.full(model.nq, 10.0), np.full(model.nq, 100.0))
    selection = GoalSelection(ik, limits, arm, ct_arm.collision)
    target = home.copy()
    target[arm] += 0.3
    chosen = selection.select(model.frame_pose(target), home)
    assert chosen.candidate.converged and chosen.clear is True and chosen.solutions == 1, chosen


def test_bad_budgets_and_resolutions_are_refused_naming_them(ur5: Robot) -> None:
    """A non-positive IK time budget per solve and a non-positive path resolution are errors
    naming the parameter; a per-solve budget above the options' is capped by them (the solve
    reports no more time than the options allow, plus its last iteration)."""
    ik = IkSolver(ur5.model, options=IkOptions(time_budget=0.01))
    far = np.eye(4)
    far[:3, 3] = (3.0, 0.0, 0.5)
    with pytest.raises(ValueError, match="time_budget"):
        ik.solve(far, time_budget=0.0)
    assert ik.solve(far, time_budget=5.0).time < 0.5
    limits = JointLimits(np.ones(6), np.full(6, 10.0), np.full(6, 100.0))
    with pytest.raises(ValueError, match="resolution"):
        GoalSelection(ik, limits, np.arange(6), None, resolution=0.0)
