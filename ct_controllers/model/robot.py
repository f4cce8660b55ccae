"""Pinocchio model of the robot: name maps, forward kinematics, Jacobians and dynamics.

Conventions
- Joint positions q [rad | m] (one per joint: a continuous joint's angle, unwrapped) and
  velocities v [rad/s | m/s] are both in *model order*: Pinocchio's velocity order (``idx_v``),
  nv entries each — :attr:`RobotModel.nq` is that count too. Pinocchio's own configuration
  vector (``model.nq`` entries: a continuous joint is (cos θ, sin θ)) never leaves this layer;
  :mod:`ct_controllers.model.configuration` converts. Callers that hold values by name go through
  :meth:`RobotModel.indices` once and keep the index array.
- A ``<mimic>`` joint is a follower (θ_f = multiplier · θ_master + offset, built by Pinocchio's
  ``mimic=True``): it has no entry in q or v, is never commanded, and a name lookup of it fails
  with a message naming its master. M, b, g and the Jacobians are those of the independent
  joints (the follower's inertia is carried by its master).
- Every frame name comes from the caller (the configuration) or the URDF; nothing is assumed.
  The TCP is the configured ``tcp_frame`` (a model built without one — a plant, simulated
  drives — computes dynamics but no default-frame kinematics); the base frame is the
  configured ``base_frame``, by default the URDF's root link. Poses are 4x4 homogeneous
  transforms in the base frame, which must be the model's world (fixed to it, identity).
- Jacobians are 6 x nv, rows (linear; angular), taken at the frame origin and expressed in the
  world-aligned base frame (``LOCAL_WORLD_ALIGNED``), i.e. ``[v_p; ω] = J v``.
- ``mass_matrix`` is symmetric (``pin.crba`` fills only the upper triangle); every returned array
  is a copy, because ``pin.Data`` buffers are overwritten by the next call.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray

from ct_controllers.errors import CtError
from ct_controllers.model.configuration import ConfigurationMap
from ct_controllers.model.description import DescriptionError, joint_armature
from ct_controllers.model.payload import Payload, add_payload
from ct_controllers.types import FloatArray


class UnknownNameError(CtError, KeyError):
    """A joint or frame name the model does not have. The message names it and lists the known."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain sentence.
        return str(self.args[0])


class MimicJointError(UnknownNameError):
    """A mimic follower named where a commanded joint is expected: the message names its
    master."""


class NoTcpError(CtError, ValueError):
    """A TCP-relative request on a model built without a TCP frame."""


@dataclass(frozen=True)
class MimicJoint:
    """A ``<mimic>`` follower: θ = multiplier · θ_master + offset [rad | m]."""

    name: str
    master: str
    multiplier: float
    offset: float


@dataclass(frozen=True)
class JointLimits:
    """Limits from the URDF, in model order: position [rad | m] (−inf/+inf for a continuous
    joint: it has none), velocity [rad/s | m/s], effort [N·m | N]."""

    lower: FloatArray
    upper: FloatArray
    velocity: FloatArray
    effort: FloatArray


def _rename_shadowing_frames(model: pin.Model) -> None:
    """A URDF may name a joint like a link (the Unitree Z1's fixed joint ``gripperStator`` and
    the link it carries): Pinocchio then holds two frames of one name, and every look-up by
    name — its own ``buildReducedModel`` for the IK's locked fingers among them — fails as
    ambiguous. A name means the link: the joint's frame takes ``<name>_joint`` (in place)."""
    names = [frame.name for frame in model.frames]
    for index, frame in enumerate(model.frames):
        if frame.type == pin.FrameType.BODY or names.count(frame.name) < 2:
            continue
        renamed = f"{frame.name}_joint"
        while renamed in names:
            renamed += "_"
        names[index] = renamed
        copy = model.frames[index]
        copy.name = renamed
        model.frames[index] = copy


def _root_link(model: pin.Model) -> str:
    """The URDF's root link: the first body frame on Pinocchio's universe joint."""
    for frame in model.frames:
        if frame.type == pin.FrameType.BODY and frame.parentJoint == 0:
            return str(frame.name)
    return str(model.frames[0].name)


class RobotModel:
    """A fixed-base robot from its URDF, with one scratch ``pin.Data`` owned by this object.

    Not thread-safe: each thread (control loop, ROS side) owns its own ``RobotModel``.
    """

    def __init__(
        self,
        urdf: str | pin.Model,
        tcp_frame: str | None = None,
        base_frame: str | None = None,
    ):
        """``urdf``: URDF text, or an already built ``pin.Model`` (copied). ``tcp_frame``: the
        tool point (None: no TCP; :meth:`frame_pose` and :meth:`frame_jacobian` then need a
        frame name). ``base_frame``: the frame poses are expressed in (None: the URDF's root
        link); it must be fixed to the model's world with the identity placement."""
        if isinstance(urdf, pin.Model):
            self.model = pin.Model(urdf)
        else:
            try:
                self.model = pin.buildModelFromXML(urdf, mimic=True)
            except (RuntimeError, ValueError) as exc:
                hint = (
                    " (Pinocchio builds a <mimic> joint only after the joint it follows, in its"
                    " depth-first reading of the tree: lock such a gripper, or reorder its links)"
                    if "mimic" in str(exc)
                    else ""
                )
                raise DescriptionError(f"the URDF does not parse: {exc}{hint}") from exc
            # The drives' reflected inertia (<dynamics armature>): crba, rnea and aba add it.
            # (A mimic follower has no coordinate of its own: its drive, if any, is not ours.)
            for name, value in joint_armature(urdf).items():
                if self.model.existJointName(name):
                    joint = self.model.joints[self.model.getJointId(name)]
                    if joint.nv == 1:
                        self.model.armature[joint.idx_v] = value
        _rename_shadowing_frames(self.model)
        self.data = self.model.createData()
        # The payload this model carries at the TCP (:meth:`with_payload`), and the model
        # without it (the same object when there is none; shared read-only by the copies).
        self.payload: Payload | None = None
        self.unloaded_model: pin.Model = self.model
        self.configuration = ConfigurationMap(self.model)  # refuses floating/planar joints
        self._to_pinocchio = self.configuration.to_pinocchio
        self.mimic: dict[str, MimicJoint] = {}
        for follower_id, master_id in zip(
            self.model.mimicking_joints, self.model.mimicked_joints, strict=True
        ):
            joint = self.model.joints[follower_id].extract()
            name = str(self.model.names[follower_id])
            self.mimic[name] = MimicJoint(
                name, str(self.model.names[master_id]), float(joint.scaling), float(joint.offset)
            )
        # Movable, independent joints in model (velocity) order; index 0 is 'universe'.
        movable = [
            (self.model.joints[j].idx_v, str(self.model.names[j]))
            for j in range(1, self.model.njoints)
            if self.model.joints[j].nv == 1
        ]
        self.joint_names: tuple[str, ...] = tuple(name for _, name in sorted(movable))
        self._index = {name: index for index, name in movable}
        self.continuous_joints = self.configuration.continuous_joints
        self.nq = self.model.nv  # joint positions: one per joint (not Pinocchio's model.nq)
        self.nv = self.model.nv
        self.tcp_frame = tcp_frame
        self._tcp_frame_id = None if tcp_frame is None else self.frame_id(tcp_frame)
        self.base_frame = base_frame if base_frame is not None else _root_link(self.model)
        self.base_frame_id = self.frame_id(self.base_frame)
        self._check_base()
        lower = np.full(self.nv, -np.inf)
        upper = np.full(self.nv, np.inf)
        for name, index in self._index.items():
            joint = self.model.joints[self.model.getJointId(name)]
            if joint.nq == 1:  # a continuous joint (nq 2) has no position limit
                lower[index] = self.model.lowerPositionLimit[joint.idx_q]
                upper[index] = self.model.upperPositionLimit[joint.idx_q]
        self.limits = JointLimits(
            lower=lower,
            upper=upper,
            velocity=self.model.velocityLimit.copy(),
            effort=self.model.effortLimit.copy(),
        )
        # The joints' own viscous damping [N·m·s/rad | N·s/m] and dry friction [N·m | N], model
        # order: the URDF's <dynamics damping friction> (Pinocchio reads them; rnea, crba and
        # aba ignore them). MuJoCo's import simulates them; the gain check and the gain design
        # take them into account (runtime/gain_stability.py, setup_assistant/gains.py).
        self.joint_damping = self.model.damping.copy()
        self.joint_friction = self.model.friction.copy()

    def _check_base(self) -> None:
        """The base frame must be the model's world: on the universe joint, at the identity
        (Pinocchio's placements, and so every pose here, are in the world)."""
        frame = self.model.frames[self.base_frame_id]
        offset = frame.placement
        if frame.parentJoint != 0 or not np.allclose(
            offset.homogeneous, np.eye(4), rtol=0.0, atol=1e-9
        ):
            raise DescriptionError(
                f"base frame '{self.base_frame}' is not the model's world frame (it "
                + (
                    "moves with a joint"
                    if frame.parentJoint != 0
                    else f"is offset by {np.round(offset.translation, 6).tolist()} m"
                )
                + f"); poses are expressed in the world: choose the URDF's root link "
                f"'{_root_link(self.model)}' or a frame fixed to it at the identity"
            )

    @property
    def tcp_frame_id(self) -> int:
        """Pinocchio frame id of the TCP. Raises :class:`NoTcpError` on a model without one."""
        if self._tcp_frame_id is None:
            raise NoTcpError("this robot model was built without a TCP frame (tcp_frame)")
        return self._tcp_frame_id

    @property
    def has_tcp(self) -> bool:
        return self._tcp_frame_id is not None

    def pinocchio_configuration(self, q: FloatArray) -> FloatArray:
        """Pinocchio's configuration (nq) for joint positions ``q`` (model order, nv): ``q``
        itself when the robot has no continuous joint."""
        return self._to_pinocchio(q)

    def joint_positions(
        self, configuration: FloatArray, near: FloatArray | None = None
    ) -> FloatArray:
        """Joint positions (model order) from Pinocchio's ``configuration``; a continuous
        joint's angle within π of ``near``'s (unwrapped) when given."""
        return self.configuration.from_pinocchio(configuration, near)

    # --- names -----------------------------------------------------------------------------
    def _unknown_joint(self, joint_name: str) -> UnknownNameError:
        follower = self.mimic.get(joint_name)
        if follower is not None:
            return MimicJointError(
                f"joint '{joint_name}' is a mimic joint: it follows '{follower.master}' "
                f"(× {follower.multiplier:g} + {follower.offset:g}) and is never commanded; "
                f"name '{follower.master}' instead"
            )
        return UnknownNameError(
            f"unknown joint '{joint_name}'; the model has: {', '.join(self.joint_names)}"
        )

    def q_index(self, joint_name: str) -> int:
        """Index of a joint in a joint-position vector q (model order; the same as its index in
        v). Raises :class:`UnknownNameError` naming it (:class:`MimicJointError`, naming the
        master, for a mimic follower)."""
        try:
            return self._index[joint_name]
        except KeyError:
            raise self._unknown_joint(joint_name) from None

    def v_index(self, joint_name: str) -> int:
        """Index of a joint in v. Raises :class:`UnknownNameError` naming it."""
        return self.q_index(joint_name)

    def indices(self, joint_names: Sequence[str]) -> NDArray[np.intp]:
        """q indices for a list of names (no duplicates allowed): ``q[idx]`` is in list order."""
        seen: set[str] = set()
        for name in joint_names:
            if name in seen:
                raise ValueError(f"joint '{name}' is listed twice")
            seen.add(name)
        return np.array([self.q_index(n) for n in joint_names], dtype=np.intp)

    def follower_positions(self, q: FloatArray) -> dict[str, float]:
        """Each mimic follower's position [rad | m] at joint positions ``q`` (model order):
        multiplier · q_master + offset (what /joint_states reports for it)."""
        return {
            name: joint.multiplier * float(q[self._index[joint.master]]) + joint.offset
            for name, joint in self.mimic.items()
        }

    def frame_id(self, frame_name: str) -> int:
        """Pinocchio frame id. Raises :class:`UnknownNameError` naming it."""
        if not self.model.existFrame(frame_name):
            known = ", ".join(f.name for f in self.model.frames)
            raise UnknownNameError(f"unknown frame '{frame_name}'; the model has: {known}")
        return int(self.model.getFrameId(frame_name))

    # --- kinematics ------------------------------------------------------------------------
    def frame_pose(self, q: FloatArray, frame_name: str | None = None) -> FloatArray:
        """4x4 pose of a frame (default: the TCP) in the base frame."""
        fid = self.tcp_frame_id if frame_name is None else self.frame_id(frame_name)
        pin.framesForwardKinematics(self.model, self.data, self._to_pinocchio(q))
        return np.array(self.data.oMf[fid].homogeneous)

    def frame_jacobian(self, q: FloatArray, frame_name: str | None = None) -> FloatArray:
        """6 x nv Jacobian of a frame (default: the TCP) at its origin, world-aligned axes."""
        fid = self.tcp_frame_id if frame_name is None else self.frame_id(frame_name)
        return np.array(
            pin.computeFrameJacobian(
                self.model,
                self.data,
                self._to_pinocchio(q),
                fid,
                pin.ReferenceFrame.LOCAL_WORLD_ALIGNED,
            )
        )

    # --- dynamics --------------------------------------------------------------------------
    def mass_matrix(self, q: FloatArray) -> FloatArray:
        """Joint-space inertia M(q), symmetric, nv x nv [kg·m² | kg]."""
        upper = pin.crba(self.model, self.data, self._to_pinocchio(q))
        return np.triu(upper) + np.triu(upper, 1).T

    def bias(self, q: FloatArray, v: FloatArray) -> FloatArray:
        """b(q, v) = C(q, v) v + g(q): Coriolis, centrifugal and gravity torques [N·m | N]."""
        return np.array(pin.nonLinearEffects(self.model, self.data, self._to_pinocchio(q), v))

    def gravity(self, q: FloatArray) -> FloatArray:
        """g(q): gravity torques [N·m | N]."""
        return np.array(pin.computeGeneralizedGravity(self.model, self.data, self._to_pinocchio(q)))

    def inverse_dynamics(self, q: FloatArray, v: FloatArray, a: FloatArray) -> FloatArray:
        """τ = M(q) a + b(q, v) by RNEA [N·m | N]."""
        return np.array(pin.rnea(self.model, self.data, self._to_pinocchio(q), v, a))

    def with_own_data(self) -> RobotModel:
        """The same robot — the same ``pin.Model``, shared and never modified — with scratch data
        of its own: for another thread, or another owner on the same thread, without parsing
        or copying the model. Model states built on either (:class:`~ct_controllers.model.
        model_state.ModelState`) are of the same model (``pin_model`` identical)."""
        clone = copy.copy(self)
        clone.data = self.model.createData()
        clone.configuration = ConfigurationMap(self.model)  # its scratch is per owner too
        clone._to_pinocchio = clone.configuration.to_pinocchio
        return clone

    def with_mass_scale(self, scale: float) -> RobotModel:
        """A copy whose every link mass is multiplied by ``scale``, each link's rotational inertia
        about its own centre of mass unchanged (a model-error experiment, or an honest
        admission that real link masses are not the catalogue's)."""
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"mass scale must be finite and positive, got {scale}")
        scaled = pin.Model(self.unloaded_model)  # the arm's links, not the payload
        for joint_id in range(1, scaled.njoints):
            inertia = scaled.inertias[joint_id]
            scaled.inertias[joint_id] = pin.Inertia(
                inertia.mass * scale, inertia.lever.copy(), inertia.inertia.copy()
            )
        return RobotModel(
            scaled, tcp_frame=self.tcp_frame, base_frame=self.base_frame
        ).with_payload(self.payload)

    def with_payload(self, payload: Payload | None) -> RobotModel:
        """A copy of this robot carrying ``payload`` at the TCP (None: carrying nothing),
        whatever this one carries: the unloaded model's TCP-parent inertia plus the payload's
        (:func:`~ct_controllers.model.payload.add_payload`), on a new ``pin.Model`` of its own
        (None: the unloaded ``pin.Model`` itself, shared read-only as :meth:`with_own_data`
        shares it), with new scratch data; this model is unchanged. Bounds (rated mass, reach)
        are the caller's to check (:func:`~ct_controllers.model.payload.check_payload`)."""
        if payload is None:
            if self.payload is None:
                return self.with_own_data()
            loaded = self.unloaded_model
        else:
            loaded = pin.Model(self.unloaded_model)
            add_payload(loaded, self.tcp_frame_id, payload)
        robot = RobotModel(loaded, tcp_frame=self.tcp_frame, base_frame=self.base_frame)
        if payload is None:  # the unloaded model itself, shared read-only as before
            robot.model = robot.unloaded_model = self.unloaded_model
            robot.data = self.unloaded_model.createData()
            robot.configuration = ConfigurationMap(robot.model)
            robot._to_pinocchio = robot.configuration.to_pinocchio
        else:
            robot.unloaded_model = self.unloaded_model
        robot.payload = payload
        return robot

    def neutral(self) -> FloatArray:
        """Every joint at zero (Pinocchio's neutral configuration), model order."""
        return np.zeros(self.nq)
