"""The gripper's geometry: the grip width, measured between two named frames, the same on every
gripper (two independent fingers, a finger and its ``<mimic>`` follower, one jaw against a fixed
one, prismatic or revolute).

    w(q) = ‖p_a(q) − p_b(q)‖ − ‖p_a(q_closed) − p_b(q_closed)‖                [m]

p_a, p_b are the origins of the two width frames (``gripper.width_frames``: fingertip, pad or
finger links; forward kinematics of the measured state, a mimic follower placed by its master),
q_closed the gripper joints at their closing limits. So w is the opening between the frames,
0 with the gripper closed, whatever the frames' offset at closure; a 5 cm cube held between
pads whose frames sit at the finger surfaces reads ~5 cm. Each gripper joint's closing limit is
the one of its two URDF limits at which the distance is the smaller (the others at mid-range):
nothing assumes that closing is toward lower q, or that positions are in metres.

:func:`found_width_frames` finds the frames when the configuration names none (ct-setup writes
what it found): the child links of the gripper joints and of their mimic followers when there are
two; for one jaw, its fingertip (the leaf its child link carries through fixed joints, else the
child link) and the fixed jaw, the link rigidly attached beside the jaw nearest to that fingertip
with the jaw closed (not the TCP frame). Plain Python: Pinocchio only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ct_controllers.errors import ConfigError, CtError
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel

# A width that changes less than this [m] over a joint's whole range does not measure that joint.
MIN_WIDTH_CHANGE = 1e-3


class GripGeometryError(CtError, ValueError):
    """Width frames that cannot measure the gripper: the message names the frame or joint."""


@dataclass(frozen=True)
class GripGeometry:
    """Width frames and what the gripper joints do to their distance.

    ``closed`` and ``opened`` [rad | m] per gripper joint (``joints`` order): the URDF limit at
    which the width is the smaller, and the other; ``closed_distance`` [m] the frames' distance
    with every joint at ``closed``; ``open_width`` [m] the width w (module docstring) with
    every joint at ``opened``. ``levers`` [m/rad | m/m] per joint: how far one finger surface
    moves per unit of the joint, the width's change over the joint's range divided by that range
    and by the fingers it moves (itself and its mimic followers): 1 for a prismatic finger of
    the bundled arm or the Panda, ~ the jaw's length for a revolute one. The gripper servo works
    in finger-surface units through it. ``couplings`` per joint: the fingers it moves (1, or 2
    for a master and its ``<mimic>`` follower): a squeeze force F [N] on every finger takes the
    joint effort F · lever · coupling (virtual work: τ δq = Σ F δx over the fingers it moves;
    :attr:`force_levers`)."""

    frames: tuple[str, str]
    joints: tuple[str, ...]
    closed: tuple[float, ...]
    opened: tuple[float, ...]
    closed_distance: float
    open_width: float
    frame_ids: tuple[int, int]
    levers: tuple[float, ...]
    couplings: tuple[int, ...] = ()

    @property
    def force_levers(self) -> tuple[float, ...]:
        """[m/rad | m/m] per joint: the joint effort per newton of squeeze on each finger it
        moves, lever · coupling (the Panda's master: 2, both fingers pressing F)."""
        couplings = self.couplings or (1,) * len(self.levers)
        return tuple(lever * n for lever, n in zip(self.levers, couplings, strict=True))

    def width(self, evaluated: ModelState) -> float:
        """w [m] at ``evaluated`` (the model at the measured state): the frames' distance less
        the closed distance."""
        a = evaluated.frame_placement(self.frame_ids[0])[1]
        b = evaluated.frame_placement(self.frame_ids[1])[1]
        dx, dy, dz = float(a[0] - b[0]), float(a[1] - b[1]), float(a[2] - b[2])
        return math.sqrt(dx * dx + dy * dy + dz * dz) - self.closed_distance

    def joint_target(self, fraction: float) -> list[float]:
        """Per gripper joint [rad | m]: ``fraction`` of the way from closed (0) to open (1)."""
        return [c + fraction * (o - c) for c, o in zip(self.closed, self.opened, strict=True)]


def grip_geometry(model: RobotModel, joints: Sequence[str], frames: Sequence[str]) -> GripGeometry:
    """The geometry of the gripper ``joints`` measured between ``frames`` (two frame names of
    the model). GripGeometryError when a frame is not in the URDF, the two are one, or a
    joint leaves their distance unchanged (frames that do not measure it: name fingertip or
    pad frames)."""
    if len(frames) != 2:
        raise GripGeometryError(f"gripper.width_frames: expected two frame names, got {frames!r}")
    pin_model = model.model
    for name in frames:
        if not pin_model.existFrame(name):
            raise GripGeometryError(f"gripper.width_frames: frame '{name}' is not in the URDF")
    if frames[0] == frames[1]:
        raise GripGeometryError(f"gripper.width_frames: '{frames[0]}' named twice")
    ids = (model.frame_id(frames[0]), model.frame_id(frames[1]))
    if not joints:
        raise GripGeometryError("gripper.width_frames given, but gripper_joints is empty")
    indices = model.indices(joints)
    lower, upper = model.limits.lower[indices], model.limits.upper[indices]
    middle = _middle(model)
    middle[indices] = 0.5 * (lower + upper)
    closed: list[float] = []
    opened: list[float] = []
    levers: list[float] = []
    couplings: list[int] = []
    for k, name in enumerate(joints):
        distances = []
        for limit in (lower[k], upper[k]):
            q = middle.copy()
            q[indices[k]] = limit
            distances.append(_distance(model, q, ids))
        if abs(distances[1] - distances[0]) < MIN_WIDTH_CHANGE:
            raise GripGeometryError(
                f"gripper.width_frames {frames[0]}, {frames[1]}: their distance does not change "
                f"with gripper joint '{name}' over its range (name frames on the fingertips)"
            )
        low_closes = distances[0] < distances[1]
        fingers = 1 + sum(1 for m in model.mimic.values() if m.master == name)
        span = float(upper[k] - lower[k])
        levers.append(abs(distances[1] - distances[0]) / span / fingers)
        couplings.append(fingers)
        closed.append(float(lower[k] if low_closes else upper[k]))
        opened.append(float(upper[k] if low_closes else lower[k]))
    q = middle.copy()
    q[indices] = closed
    closed_distance = _distance(model, q, ids)
    q[indices] = opened
    return GripGeometry(
        frames=(frames[0], frames[1]),
        joints=tuple(joints),
        closed=tuple(closed),
        opened=tuple(opened),
        closed_distance=closed_distance,
        open_width=_distance(model, q, ids) - closed_distance,
        frame_ids=ids,
        levers=tuple(levers),
        couplings=tuple(couplings),
    )


def gripper_geometry(
    model: RobotModel, fingers: Sequence[str], width_frames: Sequence[str] = ()
) -> GripGeometry | None:
    """The configured gripper's geometry (``gripper_joints`` ``fingers``; ``gripper.width_frames``
    as configured, else found from the joints), or None without a gripper or where none are
    found (the task then sums the finger openings). ConfigError, one line naming it, for a
    gripper joint on the arm chain (it moves the TCP) or configured width frames that cannot
    measure the gripper."""
    if not fingers:
        if width_frames:
            raise ConfigError("parameter 'gripper.width_frames': gripper_joints is empty")
        return None
    if model.has_tcp:
        chain = set(model.model.supports[model.model.frames[model.tcp_frame_id].parentJoint])
        on_chain = [n for n in fingers if model.model.getJointId(n) in chain]
        if on_chain:
            tcp = model.model.frames[model.tcp_frame_id].name
            raise ConfigError(
                f"gripper joint '{on_chain[0]}' is on the arm chain: it moves the TCP frame "
                f"'{tcp}' (list it in arm_joints, or pick another gripper joint)"
            )
    frames = tuple(width_frames) or found_width_frames(model, fingers)
    if frames is None:
        return None
    try:
        return grip_geometry(model, fingers, frames)
    except GripGeometryError as exc:
        if not width_frames:  # found, not asked for: the openings are summed instead
            return None
        raise ConfigError(f"parameter {exc}") from None


def found_width_frames(model: RobotModel, joints: Sequence[str]) -> tuple[str, str] | None:
    """The width frames found from the gripper ``joints`` (module docstring), or None when
    none are found (no gripper; more than two fingers; a lone jaw with no fixed jaw beside
    it)."""
    followers = [m.name for m in model.mimic.values() if m.master in joints]
    moving = list(joints) + followers
    pin_model = model.model
    if len(moving) == 2:
        links = [_child_link(pin_model, name) for name in moving]
        if links[0] is None or links[1] is None:
            return None
        return (links[0], links[1])
    if len(joints) != 1 or followers:
        return None
    jaw = _fingertip(pin_model, joints[0])
    if jaw is None:
        return None
    parent_joint = int(pin_model.parents[pin_model.getJointId(joints[0])])
    own = _link_of_joint(pin_model, parent_joint)  # the body the jaw is hung on
    tcp = pin_model.frames[model.tcp_frame_id].name if model.has_tcp else None
    # The fixed jaw: a link hung by a fixed joint on the jaw's parent body (not that body's own
    # link, not the TCP), nearest the moving fingertip with the jaw closed.
    candidates = sorted(
        str(f.name)
        for f in pin_model.frames
        if f.type == pin.FrameType.BODY
        and f.parentJoint == parent_joint
        and f.name not in (own, tcp)
        and pin_model.frames[f.parentFrame].type == pin.FrameType.FIXED_JOINT
    )
    if not candidates:
        return None
    index = int(model.indices(joints)[0])
    q = _middle(model)
    tip = model.frame_id(jaw)
    limits = (float(model.limits.lower[index]), float(model.limits.upper[index]))

    def closed_distance(name: str) -> float:
        other = model.frame_id(name)
        return min(_distance(model, _with(q, index, limit), (tip, other)) for limit in limits)

    return (jaw, min(candidates, key=closed_distance))


def _with(q: np.ndarray, index: int, value: float) -> np.ndarray:
    moved = q.copy()
    moved[index] = value
    return moved


def _middle(model: RobotModel) -> np.ndarray:
    """Every joint at mid-range (a continuous joint at 0) [rad | m], model order."""
    lower, upper = model.limits.lower, model.limits.upper
    finite = np.isfinite(lower) & np.isfinite(upper)
    return np.where(finite, 0.5 * (np.where(finite, lower, 0) + np.where(finite, upper, 0)), 0.0)


def _distance(model: RobotModel, q: np.ndarray, ids: tuple[int, int]) -> float:
    pin.framesForwardKinematics(model.model, model.data, model.pinocchio_configuration(q))
    a = model.data.oMf[ids[0]].translation
    b = model.data.oMf[ids[1]].translation
    return float(np.linalg.norm(a - b))


def _child_link(pin_model: pin.Model, joint: str) -> str | None:
    """The link a joint moves (its BODY frame), or None."""
    return _link_of_joint(pin_model, int(pin_model.getJointId(joint)))


def _link_of_joint(pin_model: pin.Model, joint_id: int) -> str | None:
    """The link joint ``joint_id`` moves: the BODY frame hung directly on its joint frame."""
    for frame in pin_model.frames:
        if frame.parentJoint == joint_id and frame.type == pin.FrameType.BODY:
            parent = pin_model.frames[frame.parentFrame]
            if parent.type == pin.FrameType.JOINT:
                return str(frame.name)
    return None


def _fingertip(pin_model: pin.Model, joint: str) -> str | None:
    """The jaw's fingertip: the farthest leaf link its child link carries through fixed
    joints (a revolute jaw's child link sits on its axis, which the jaw does not move), else
    the child link."""
    link = _child_link(pin_model, joint)
    if link is None:
        return None
    joint_id = pin_model.getJointId(joint)
    on_jaw = [
        f
        for f in pin_model.frames
        if f.parentJoint == joint_id and f.type == pin.FrameType.BODY and f.name != link
    ]
    if not on_jaw:
        return link
    farthest = max(on_jaw, key=lambda f: float(np.linalg.norm(f.placement.translation)))
    return str(farthest.name)
