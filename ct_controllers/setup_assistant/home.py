"""The home pose: the one given (checked: length, limits), or a well-conditioned one
chosen from the model, deterministically.

Chosen home (arm joints): the best of ``CANDIDATES`` seeded samples inside the middle
``CENTRAL`` of each joint's range (a range wider than 2π is taken as [−π, π] about its middle),
refined by ``REFINE`` seeded local perturbations of the best, by the score

    s(q) = μ(q) · c(q) · (1 + a(q)) / 2

with μ = √det(J Jᵀ) the TCP's manipulability (J: the 6 × n arm Jacobian in the base frame; for
n < 6 √det(Jᵀ J)), c = (∏ᵢ 4 xᵢ (1 − xᵢ))^(1/n) the joints' clearance from their limits (xᵢ the
position's fraction of the range: 1 in the middle, 0 at a limit) and a ∈ [−1, 1] how much the
tool's z axis points down (a grasp approach). A candidate is refused when a link origin or the
TCP dips below the base plane (z in the base frame below min(0.05 m, the link's height at
q = 0)): the arm starts above the table it stands on; and where a joint's gravity torque exceeds
``HOLD_FRACTION`` of its effort limit: the arm holds its home with effort to spare (an arm whose
URDF limits do not hold it everywhere, Baxter's, starts where they do). Gripper joints start at
mid-range (a mimic follower is not a joint of the configuration: it follows its master).

The home is also clear of the scene the stack will simulate (``scene.py``: the table, the floor
and the cube placed from the arm's reach), by the stack's own check
(:class:`~ct_controllers.hardware.mujoco_collision.SceneClearance`, ``SCENE_CLEARANCE`` = 2 cm
from q = 0 with the gripper at mid-range): the candidates are checked in score order until one
is clear (the rest are never checked: a few MuJoCo distance queries each), and the refinement
takes only clear improvements. A given home is refused where a robot shape is inside a shape of
the scene (the cube, the table, the floor) or in another link, beyond what it is at q = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ct_controllers.hardware.mujoco_collision import PLANE, Collision, SceneClearance
from ct_controllers.setup_assistant.design_model import DesignModel
from ct_controllers.setup_assistant.errors import SetupError
from ct_controllers.setup_assistant.scene import configuration, reference
from ct_controllers.setup_assistant.urdf_tree import RobotTree
from ct_controllers.types import FloatArray

CANDIDATES = 600
REFINE = 300
CENTRAL = 0.8  # [-] of each joint range sampled
STEP = 0.05  # [-] of the range: the refinement's perturbation (standard deviation)
FLOOR = 0.05  # [m] a link above this height (base frame) at q = 0 must stay above it
TOLERANCE = 1e-9  # [rad | m] on the limits of a given home
HOLD_FRACTION = 0.8  # [-] of each effort limit that gravity may take at a chosen home


@dataclass(frozen=True)
class Home:
    """``positions`` [rad | m] in ``arm_joints + gripper_joints`` order; ``note``: how it was
    chosen, one line."""

    positions: tuple[float, ...]
    note: str


def _sample_range(lower: FloatArray, upper: FloatArray) -> tuple[FloatArray, FloatArray]:
    middle = np.where(np.isfinite(lower + upper), 0.5 * (lower + upper), 0.0)
    half = np.minimum(0.5 * (upper - lower), math.pi)
    return middle - CENTRAL * half, middle + CENTRAL * half


class _Scorer:
    def __init__(self, design: DesignModel) -> None:
        self.design = design
        model = design.model
        self.pin_model, self.data = model.model, model.model.createData()
        self.lower, self.upper = model.limits.lower, model.limits.upper
        self.base_id, self.tcp_id = model.base_frame_id, model.tcp_frame_id
        self.hold = HOLD_FRACTION * model.limits.effort
        base_links = {design.chain.base}
        self.frames = [
            f
            for f, frame in enumerate(self.pin_model.frames)
            if frame.type == pin.FrameType.BODY and frame.name not in base_links
        ]
        zero = pin.neutral(self.pin_model)
        heights = self._heights(zero)
        self.floor = np.minimum(heights, FLOOR) - 1e-6

    def _heights(self, q: FloatArray) -> FloatArray:
        pin.framesForwardKinematics(self.pin_model, self.data, q)
        base_inverse = self.data.oMf[self.base_id].inverse()
        return np.array([(base_inverse * self.data.oMf[f]).translation[2] for f in self.frames])

    def score(self, q: FloatArray) -> float:
        """s(q), or −1 where a link is below the base plane or gravity takes more than
        ``HOLD_FRACTION`` of an effort limit."""
        if np.any(self._heights(q) < self.floor):
            return -1.0
        gravity = pin.computeGeneralizedGravity(self.pin_model, self.data, q)
        if np.any(np.abs(gravity) > self.hold):
            return -1.0
        base = self.data.oMf[self.base_id].rotation
        tool = base.T @ self.data.oMf[self.tcp_id].rotation
        jacobian = pin.computeFrameJacobian(
            self.pin_model, self.data, q, self.tcp_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        )[:, self.design.arm]
        rotate = np.kron(np.eye(2), base.T)  # world-aligned → base-aligned (both rows)
        jacobian = rotate @ jacobian
        square = jacobian @ jacobian.T if jacobian.shape[1] >= 6 else jacobian.T @ jacobian
        manipulability = math.sqrt(max(np.linalg.det(square), 0.0))
        arm = self.design.arm
        fraction = (q[arm] - self.lower[arm]) / (self.upper[arm] - self.lower[arm])
        fraction = np.where(np.isfinite(fraction), fraction, 0.5)
        clearance = float(np.prod(4.0 * fraction * (1.0 - fraction)) ** (1.0 / arm.size))
        down = -float(tool[2, 2])
        return manipulability * clearance * (1.0 + down) / 2.0


def _inside(collision: Collision) -> str:
    """A collision in words: "upper_arm_link 33 mm inside cube", "... 2 mm above the plane"."""
    depth = f"{abs(collision.distance) * 1e3:.0f} mm"
    if collision.body2 == PLANE:
        return f"{collision.body1} {depth} {'below' if collision.distance < 0 else 'above'} {PLANE}"
    return f"{collision.body1} {depth} {'inside' if collision.distance < 0 else 'from'} " + (
        collision.body2
    )


def choose_home(
    tree: RobotTree, design: DesignModel, scene: SceneClearance | None = None, why: str = ""
) -> Home:
    """The chosen home (module docstring); ``scene`` None: not checked against a scene
    (``why``: MuJoCo could not build it)."""
    scorer = _Scorer(design)
    model = design.model
    arm = design.arm
    low, high = _sample_range(model.limits.lower[arm], model.limits.upper[arm])
    rng = np.random.default_rng(0)
    q = reference(design)
    candidates = [0.5 * (low + high)] + [rng.uniform(low, high) for _ in range(CANDIDATES)]
    scored = []
    for arm_q in candidates:
        q[arm] = arm_q
        scored.append((scorer.score(q), q.copy()))
    refused: list[Collision] = []

    def clear(candidate: FloatArray) -> bool:
        if scene is None:
            return True
        collision = scene.check(configuration(design, candidate))
        if collision is not None:
            refused.append(collision)
        return collision is None

    best_q, best = q.copy(), -math.inf
    # In score order (the first of equals first), until one is clear.
    for index in sorted(range(len(scored)), key=lambda i: -scored[i][0]):
        value, candidate = scored[index]
        if value <= 0.0:
            break
        if clear(candidate):
            best, best_q = value, candidate
            break
    if best <= 0.0:
        raise SetupError(
            "no home pose found with every link above the base plane, the TCP off a "
            + f"singularity and gravity under {HOLD_FRACTION:g} of every effort limit"
            + (
                f", clear of the scene by {scene.clearance * 100:g} cm ({len(refused)} refused, "
                f"e.g. {_inside(refused[0])})"
                if scene is not None and refused
                else ""
            )
            + ": give one with --home"
        )
    scale = STEP * (high - low)
    for _ in range(REFINE):
        q = best_q.copy()
        q[arm] = np.clip(q[arm] + rng.normal(0.0, 1.0, arm.size) * scale, low, high)
        value = scorer.score(q)
        if value > best and clear(q):
            best, best_q = value, q
    fraction = (best_q[arm] - model.limits.lower[arm]) / (
        model.limits.upper[arm] - model.limits.lower[arm]
    )
    margin = float(np.min(np.minimum(fraction, 1.0 - fraction)))
    if scene is None:
        where = f"; not checked against the simulated scene (MuJoCo cannot build it: {why})"
    else:
        where = (
            f", clear of the simulated table, floor and cube by {scene.clearance * 100:g} cm"
            + (
                f" ({len(refused)} better-scored pose(s) refused, e.g. {_inside(refused[0])})"
                if refused
                else ""
            )
        )
    note = (
        f"chosen: manipulability {best:.3g} (score), every arm joint ≥ {100 * margin:.0f} % of "
        f"its range from a limit, every link above the base plane, gravity under "
        f"{HOLD_FRACTION:g} of every effort limit{where}"
    )
    return Home(tuple(design.to_config(best_q).tolist()), note)


def check_home(
    tree: RobotTree, design: DesignModel, values: list[float], scene: SceneClearance | None = None
) -> Home:
    """A given home: ``len(arm_joints)`` values (the gripper then starts at mid-range) or one per
    joint (arm then gripper), each within its URDF limits, and no robot shape inside the scene or
    another link (``scene``: the check at clearance 0 without the plane rule, so neither touching
    nor a link below the plane where the scene has nothing is refused; None: not checked).
    :class:`SetupError` names the joint, value and limits, or the bodies."""
    chain = design.chain
    arm_count, count = len(chain.arm_joints), len(chain.joint_names)
    if not all(math.isfinite(v) for v in values):
        raise SetupError(f"--home has a value that is not a finite number: {values}")
    if len(values) not in (arm_count, count):
        wanted = f"{arm_count}" + (
            "" if arm_count == count else f" (arm) or {count} (arm, gripper)"
        )
        raise SetupError(
            f"--home has {len(values)} value(s); expected {wanted}, in the order "
            f"{', '.join(chain.joint_names)}"
        )
    q = reference(design)
    q[design.order[: len(values)]] = values
    for name, value in zip(chain.joint_names, design.to_config(q), strict=True):
        joint = tree.joint(name)
        lower, upper = joint.lower, joint.upper
        if not lower - TOLERANCE <= value <= upper + TOLERANCE:
            raise SetupError(
                f"--home puts joint '{name}' at {value:g}, outside its limits "
                f"[{lower:g}, {upper:g}] {'m' if joint.prismatic else 'rad'}"
            )
    collision = None if scene is None else scene.check(configuration(design, q))
    if collision is not None:
        raise SetupError(
            f"--home puts {_inside(collision)}: the simulated arm would start in collision "
            "(give another home)"
        )
    note = "as given" + ("" if scene is not None else "; not checked against the simulated scene")
    return Home(tuple(design.to_config(q).tolist()), note)
