"""Pinocchio model of the robot: name maps, forward kinematics, Jacobians and dynamics.

Conventions
- q [rad | m] and v [rad/s | m/s] are in *model order* (Pinocchio's joint order). Callers that
  hold values by name go through :meth:`RobotModel.indices` once and keep the index array.
- Poses are 4x4 homogeneous transforms of a frame expressed in the base (world) frame.
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
from ct_controllers.model.description import joint_armature
from ct_controllers.types import FloatArray


class UnknownNameError(CtError, KeyError):
    """A joint or frame name the model does not have. The message names it and lists the known."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain sentence.
        return str(self.args[0])


@dataclass(frozen=True)
class JointLimits:
    """Limits from the URDF, in model order: position [rad | m], velocity [rad/s | m/s],
    effort [N·m | N]."""

    lower: FloatArray
    upper: FloatArray
    velocity: FloatArray
    effort: FloatArray


class RobotModel:
    """A fixed-base robot from its URDF, with one scratch ``pin.Data`` owned by this object.

    Not thread-safe: each thread (control loop, ROS side) owns its own ``RobotModel``.
    """

    def __init__(
        self, urdf: str | pin.Model, tcp_frame: str = "tcp", base_frame: str = "base_link"
    ):
        """``urdf``: URDF text, or an already built ``pin.Model`` (copied)."""
        if isinstance(urdf, pin.Model):
            self.model = pin.Model(urdf)
        else:
            self.model = pin.buildModelFromXML(urdf)
            # The drives' reflected inertia (<dynamics armature>): crba, rnea and aba add it.
            for name, value in joint_armature(urdf).items():
                if self.model.existJointName(name):
                    index = self.model.joints[self.model.getJointId(name)].idx_v
                    self.model.armature[index] = value
        self.data = self.model.createData()
        # Movable joints only (index 0 is Pinocchio's 'universe').
        self.joint_names: tuple[str, ...] = tuple(self.model.names[1:])
        for joint_id in range(1, self.model.njoints):
            if self.model.joints[joint_id].nq != 1 or self.model.joints[joint_id].nv != 1:
                raise ValueError(
                    f"joint '{self.model.names[joint_id]}' has nq/nv "
                    f"{self.model.joints[joint_id].nq}/{self.model.joints[joint_id].nv}; only "
                    "1-DOF revolute and prismatic joints are supported"
                )
        self._q_index = {
            name: self.model.joints[self.model.getJointId(name)].idx_q for name in self.joint_names
        }
        self._v_index = {
            name: self.model.joints[self.model.getJointId(name)].idx_v for name in self.joint_names
        }
        self.nq = self.model.nq
        self.nv = self.model.nv
        self.tcp_frame = tcp_frame
        self.base_frame = base_frame
        self.tcp_frame_id = self.frame_id(tcp_frame)
        self.base_frame_id = self.frame_id(base_frame)
        self.limits = JointLimits(
            lower=self.model.lowerPositionLimit.copy(),
            upper=self.model.upperPositionLimit.copy(),
            velocity=self.model.velocityLimit.copy(),
            effort=self.model.effortLimit.copy(),
        )

    # --- names -----------------------------------------------------------------------------
    def q_index(self, joint_name: str) -> int:
        """Index of a joint in q. Raises :class:`UnknownNameError` naming it."""
        try:
            return self._q_index[joint_name]
        except KeyError:
            raise UnknownNameError(
                f"unknown joint '{joint_name}'; the model has: {', '.join(self.joint_names)}"
            ) from None

    def v_index(self, joint_name: str) -> int:
        """Index of a joint in v. Raises :class:`UnknownNameError` naming it."""
        try:
            return self._v_index[joint_name]
        except KeyError:
            raise UnknownNameError(
                f"unknown joint '{joint_name}'; the model has: {', '.join(self.joint_names)}"
            ) from None

    def indices(self, joint_names: Sequence[str]) -> NDArray[np.intp]:
        """q indices for a list of names (no duplicates allowed): ``q[idx]`` is in list order."""
        seen: set[str] = set()
        for name in joint_names:
            if name in seen:
                raise ValueError(f"joint '{name}' is listed twice")
            seen.add(name)
        return np.array([self.q_index(n) for n in joint_names], dtype=np.intp)

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
        pin.framesForwardKinematics(self.model, self.data, q)
        return np.array(self.data.oMf[fid].homogeneous)

    def frame_jacobian(self, q: FloatArray, frame_name: str | None = None) -> FloatArray:
        """6 x nv Jacobian of a frame (default: the TCP) at its origin, world-aligned axes."""
        fid = self.tcp_frame_id if frame_name is None else self.frame_id(frame_name)
        return np.array(
            pin.computeFrameJacobian(
                self.model, self.data, q, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
            )
        )

    # --- dynamics --------------------------------------------------------------------------
    def mass_matrix(self, q: FloatArray) -> FloatArray:
        """Joint-space inertia M(q), symmetric, nv x nv [kg·m² | kg]."""
        upper = pin.crba(self.model, self.data, q)
        return np.triu(upper) + np.triu(upper, 1).T

    def bias(self, q: FloatArray, v: FloatArray) -> FloatArray:
        """b(q, v) = C(q, v) v + g(q): Coriolis, centrifugal and gravity torques [N·m | N]."""
        return np.array(pin.nonLinearEffects(self.model, self.data, q, v))

    def gravity(self, q: FloatArray) -> FloatArray:
        """g(q): gravity torques [N·m | N]."""
        return np.array(pin.computeGeneralizedGravity(self.model, self.data, q))

    def inverse_dynamics(self, q: FloatArray, v: FloatArray, a: FloatArray) -> FloatArray:
        """τ = M(q) a + b(q, v) by RNEA [N·m | N]."""
        return np.array(pin.rnea(self.model, self.data, q, v, a))

    def with_own_data(self) -> RobotModel:
        """The same robot — the same ``pin.Model``, shared and never modified — with scratch data
        of its own: for another thread, or another owner on the same thread, without parsing
        or copying the model. Model states built on either (:class:`~ct_controllers.model.
        model_state.ModelState`) are of the same model (``pin_model`` identical)."""
        clone = copy.copy(self)
        clone.data = self.model.createData()
        return clone

    def with_mass_scale(self, scale: float) -> RobotModel:
        """A copy whose every link mass is multiplied by ``scale``, each link's rotational inertia
        about its own centre of mass unchanged (a model-error experiment, or an honest
        admission that real link masses are not the catalogue's)."""
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"mass scale must be finite and positive, got {scale}")
        scaled = pin.Model(self.model)
        for joint_id in range(1, scaled.njoints):
            inertia = scaled.inertias[joint_id]
            scaled.inertias[joint_id] = pin.Inertia(
                inertia.mass * scale, inertia.lever.copy(), inertia.inertia.copy()
            )
        tcp = self.model.frames[self.tcp_frame_id].name
        base = self.model.frames[self.base_frame_id].name
        return RobotModel(scaled, tcp_frame=tcp, base_frame=base)

    def neutral(self) -> FloatArray:
        """Pinocchio's neutral configuration (all zeros for revolute/prismatic joints)."""
        return np.array(pin.neutral(self.model))
