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
q = 0)): the arm starts above the table it stands on. Gripper joints start at mid-range (a mimic
follower is not a joint of the configuration: it follows its master).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ct_controllers.setup_assistant.design_model import DesignModel
from ct_controllers.setup_assistant.errors import SetupError
from ct_controllers.setup_assistant.urdf_tree import RobotTree
from ct_controllers.types import FloatArray

CANDIDATES = 600
REFINE = 300
CENTRAL = 0.8  # [-] of each joint range sampled
STEP = 0.05  # [-] of the range: the refinement's perturbation (standard deviation)
FLOOR = 0.05  # [m] a link above this height (base frame) at q = 0 must stay above it
TOLERANCE = 1e-9  # [rad | m] on the limits of a given home


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
        """s(q), or −1 where a link is below the base plane."""
        if np.any(self._heights(q) < self.floor):
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


def _gripper_positions(design: DesignModel, q: FloatArray) -> None:
    """Gripper joints to mid-range (in place, model order)."""
    model = design.model
    for name in design.chain.gripper_joints:
        i = model.v_index(name)
        q[i] = 0.5 * (model.limits.lower[i] + model.limits.upper[i])


def choose_home(tree: RobotTree, design: DesignModel) -> Home:
    """The chosen home (module docstring)."""
    scorer = _Scorer(design)
    model = design.model
    arm = design.arm
    low, high = _sample_range(model.limits.lower[arm], model.limits.upper[arm])
    rng = np.random.default_rng(0)
    q = np.array(pin.neutral(model.model))
    _gripper_positions(design, q)
    best_q, best = q.copy(), -math.inf
    candidates = [0.5 * (low + high)] + [rng.uniform(low, high) for _ in range(CANDIDATES)]
    for arm_q in candidates:
        q[arm] = arm_q
        value = scorer.score(q)
        if value > best:
            best, best_q = value, q.copy()
    scale = STEP * (high - low)
    for _ in range(REFINE):
        q = best_q.copy()
        q[arm] = np.clip(q[arm] + rng.normal(0.0, 1.0, arm.size) * scale, low, high)
        value = scorer.score(q)
        if value > best:
            best, best_q = value, q
    if best <= 0.0:
        raise SetupError(
            "no home pose found with every link above the base plane and the TCP off a "
            "singularity: give one with --home"
        )
    fraction = (best_q[arm] - model.limits.lower[arm]) / (
        model.limits.upper[arm] - model.limits.lower[arm]
    )
    margin = float(np.min(np.minimum(fraction, 1.0 - fraction)))
    note = (
        f"chosen: manipulability {best:.3g} (score), every arm joint ≥ {100 * margin:.0f} % of "
        "its range from a limit, every link above the base plane"
    )
    return Home(tuple(design.to_config(best_q).tolist()), note)


def check_home(tree: RobotTree, design: DesignModel, values: list[float]) -> Home:
    """A given home: ``len(arm_joints)`` values (the gripper then starts at mid-range) or one per
    joint (arm then gripper), each within its URDF limits. :class:`SetupError` names the joint,
    value and limits."""
    chain, model = design.chain, design.model
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
    q = np.array(pin.neutral(model.model))
    _gripper_positions(design, q)
    q[design.order[: len(values)]] = values
    for name, value in zip(chain.joint_names, design.to_config(q), strict=True):
        joint = tree.joint(name)
        lower, upper = joint.lower, joint.upper
        if not lower - TOLERANCE <= value <= upper + TOLERANCE:
            raise SetupError(
                f"--home puts joint '{name}' at {value:g}, outside its limits "
                f"[{lower:g}, {upper:g}] {'m' if joint.prismatic else 'rad'}"
            )
    return Home(tuple(design.to_config(q).tolist()), "as given")
