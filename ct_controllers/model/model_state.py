"""The robot evaluated at one configuration, each quantity at most once: the per-tick model
state that the stages of a tick share.

A tick needs, at the measured q, v: the TCP pose (the task's observation), the inverse dynamics
or M and b (the joint controller), g (the gripper servo, the safe hold); the differential IK needs
the TCP pose and Jacobian at its own reference q*. Each stage asking Pinocchio again on its own
scratch data repeats work and scatters the evaluation; a :class:`ModelState` is bound to one
configuration (:meth:`ModelState.at` / :meth:`ModelState.update`) and computes what is asked of it
lazily, once, with Pinocchio's combined algorithms (a frame's Jacobian pass also gives its
placement), into its own ``pin.Data``.

Conventions are :mod:`ct_controllers.model.robot`'s: model order (one position per joint),
4x4 poses in the base frame, 6 x nv Jacobians (linear; angular) at the frame origin with
world-aligned axes. A robot with continuous joints has its joint positions converted to
Pinocchio's configuration (cos θ, sin θ) once per binding, into a buffer of this state's own; for
one without (nq == nv) Pinocchio gets the bound q itself: nothing is converted or allocated.

The arrays returned are read-only views of this state's own buffers (the same array objects
every tick), valid until the state is bound to the next configuration — the next tick — which
overwrites them: copy what you keep. Not thread-safe: the control thread owns the model states
of the controllers and chains it runs; any other thread (goal checks, gain checks, a chain's
``prepare``) keeps its own.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ct_controllers.model.configuration import ConfigurationMap
from ct_controllers.model.robot import NoTcpError, RobotModel
from ct_controllers.types import FloatArray, JointState

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED

# What has been computed at the current configuration (bit flags).
_JOINTS = 1  # every joint placement (data.oMi)
_GRAVITY = 2
_BIAS = 4
_MASS = 8


def _read_only(array: FloatArray) -> FloatArray:
    """A read-only view of ``array`` (which its owner may still write)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _buffer(shape: tuple[int, ...]) -> tuple[FloatArray, FloatArray]:
    """A buffer this state writes and the read-only view of it that it hands out. (Arrays that
    Pinocchio returns are copied in rather than marked read-only themselves: setting the flag
    on them keeps a few bytes alive now and then, which the tick's allocation test sees.)"""
    array = np.zeros(shape)
    return array, _read_only(array)


class ModelState:
    """One configuration of ``model`` (q [rad | m], v [rad/s | m/s], model order) and what has
    been evaluated there. ``model`` supplies the kinematic tree, the frame names and the TCP;
    the state has its own ``pin.Data`` (``model``'s scratch data is untouched)."""

    def __init__(self, model: RobotModel) -> None:
        self.robot = model
        self.pin_model = model.model
        self.data = model.model.createData()
        # The frame placements Pinocchio writes (a live view of ``data.oMf``, looked up once:
        # the lookup through ``data`` costs more than the indexing).
        self._placements = self.data.oMf
        # The TCP's frame id, None on a model without a TCP (then a frame must be named).
        self.tcp_frame_id: int | None = model.tcp_frame_id if model.has_tcp else None
        nv = model.nv
        self._zeros = _read_only(np.zeros(nv))
        self.q: FloatArray = model.neutral()
        # Pinocchio's configuration for q: q itself (nq == nv) or this buffer, converted into.
        # (A conversion of its own when there is one: its scratch is not shared across threads.)
        self._convert = None if model.configuration.identity else ConfigurationMap(model.model)
        self._pin_buffer = np.array(model.pinocchio_configuration(self.q))
        self._pin_q: FloatArray = self._pin_buffer
        self.v: FloatArray = self._zeros
        self._state: JointState | None = None
        self._done = 0
        # Per frame id: (buffer, read-only view), made on the first request; and the frames
        # evaluated at the current configuration.
        self._jacobians: dict[int, tuple[FloatArray, FloatArray]] = {}
        self._poses: dict[int, tuple[FloatArray, FloatArray]] = {}
        self._jacobian_done: set[int] = set()
        self._placed: set[int] = set()  # frames whose ``data.oMf`` is this configuration's
        self._posed: set[int] = set()  # ... and whose 4x4 buffer holds it
        # Per frame id: read-only views of its rotation and translation in ``data.oMf`` (the
        # placement object kept with them: the views point into it).
        self._placement_views: dict[int, tuple[pin.SE3, FloatArray, FloatArray]] = {}
        # Own buffers, written in place; handed out as read-only views.
        self._gravity = np.zeros(nv)
        self._bias = np.zeros(nv)
        self._mass = np.zeros((nv, nv))
        self._gravity_view = _read_only(self._gravity)
        self._bias_view = _read_only(self._bias)
        self._mass_view = _read_only(self._mass)
        self._strict_lower = np.tril_indices(nv, -1)

    # --- binding ---------------------------------------------------------------------------
    def at(self, state: JointState) -> ModelState:
        """Bound to the measured ``state`` (its q and v): nothing is recomputed while the same
        state object is asked again (a JointState's arrays never change after it is built)."""
        if state is not self._state:  # :meth:`update`, inlined: this runs on every tick
            self.q, self.v, self._state, self._done = state.q, state.v, state, 0
            if self._convert is None:
                self._pin_q = state.q
            else:
                self._pin_q = self._convert.to_pinocchio_into(state.q, self._pin_buffer)
            if self._placed:
                self._placed.clear()
                self._posed.clear()
            if self._jacobian_done:
                self._jacobian_done.clear()
        return self

    def update(self, q: FloatArray, v: FloatArray | None = None) -> ModelState:
        """Bound to ``q`` (and ``v``; zeros when None): everything is recomputed on demand.
        The arrays are used as given, not copied: they must not change until the next
        update."""
        self.q = q
        self.v = self._zeros if v is None else v
        if self._convert is None:
            self._pin_q = q
        else:
            self._pin_q = self._convert.to_pinocchio_into(q, self._pin_buffer)
        self._state = None
        self._done = 0
        self._jacobian_done.clear()
        self._placed.clear()
        self._posed.clear()
        return self

    # --- kinematics ------------------------------------------------------------------------
    def frame_pose(self, frame_id: int | None = None) -> FloatArray:
        """4x4 pose of a frame (default: the TCP) in the base frame."""
        fid = self.tcp_frame_id if frame_id is None else frame_id
        if fid is None:
            raise NoTcpError("this model state's robot has no TCP frame: name a frame")
        if fid not in self._posed:
            if fid not in self._placed:
                self._place(fid)
            self._store_pose(fid)
        return self._poses[fid][1]

    def frame_placement(self, frame_id: int | None = None) -> tuple[FloatArray, FloatArray]:
        """(R 3x3, p (3,) [m]) of a frame (default: the TCP) in the base frame: read-only views
        into this state's Pinocchio data, the same two arrays on every call, which change as the
        state is bound and evaluated again (unlike :meth:`frame_pose`'s buffer, whose contents
        change only when it is asked again). Cheaper than the 4x4 pose: nothing is copied."""
        fid = self.tcp_frame_id if frame_id is None else frame_id
        if fid is None:
            raise NoTcpError("this model state's robot has no TCP frame: name a frame")
        if fid not in self._placed:
            self._place(fid)
        views = self._placement_views.get(fid)
        if views is None:
            placement = self._placements[fid]
            views = (placement, _read_only(placement.rotation), _read_only(placement.translation))
            self._placement_views[fid] = views
        return views[1], views[2]

    def _place(self, fid: int) -> None:
        """Compute the frame's placement in ``data.oMf`` at this configuration."""
        if not self._done & _JOINTS:
            pin.forwardKinematics(self.pin_model, self.data, self._pin_q)
            self._done |= _JOINTS
        pin.updateFramePlacement(self.pin_model, self.data, fid)
        self._placed.add(fid)

    def frame_jacobian(self, frame_id: int | None = None) -> FloatArray:
        """6 x nv Jacobian of a frame (default: the TCP) at its origin, world-aligned axes.
        Its placement comes with it (one pass over the frame's support): :meth:`frame_pose` and
        :meth:`frame_placement` then compute nothing."""
        fid = self.tcp_frame_id if frame_id is None else frame_id
        if fid is None:
            raise NoTcpError("this model state's robot has no TCP frame: name a frame")
        buffers = self._jacobians.get(fid)
        if buffers is None:
            buffers = self._jacobians[fid] = _buffer((6, self.robot.nv))
        if fid not in self._jacobian_done:
            np.copyto(
                buffers[0],
                pin.computeFrameJacobian(self.pin_model, self.data, self._pin_q, fid, _LWA),
            )
            self._jacobian_done.add(fid)
            self._placed.add(fid)  # the pass placed this frame (only the joints it needs)
        return buffers[1]

    def _store_pose(self, fid: int) -> None:
        """Copy the frame's placement (computed at this configuration) into its buffer."""
        buffers = self._poses.get(fid)
        if buffers is None:
            buffers = self._poses[fid] = _buffer((4, 4))
        np.copyto(buffers[0], self._placements[fid].homogeneous)
        self._posed.add(fid)

    # --- dynamics --------------------------------------------------------------------------
    def gravity(self) -> FloatArray:
        """g(q) [N·m | N]."""
        if not self._done & _GRAVITY:
            np.copyto(
                self._gravity, pin.computeGeneralizedGravity(self.pin_model, self.data, self._pin_q)
            )
            self._done |= _GRAVITY
        return self._gravity_view

    def bias(self) -> FloatArray:
        """b(q, v) = C(q, v) v + g(q) [N·m | N]."""
        if not self._done & _BIAS:
            np.copyto(
                self._bias, pin.nonLinearEffects(self.pin_model, self.data, self._pin_q, self.v)
            )
            self._done |= _BIAS
        return self._bias_view

    def mass_matrix(self) -> FloatArray:
        """M(q), symmetric [kg·m² | kg] (``pin.crba`` fills the upper triangle only)."""
        if not self._done & _MASS:
            mass = self._mass
            np.copyto(mass, pin.crba(self.pin_model, self.data, self._pin_q))
            lower = self._strict_lower
            mass[lower] = mass.T[lower]
            self._done |= _MASS
        return self._mass_view

    def inverse_dynamics(self, a: FloatArray) -> FloatArray:
        """τ = M(q) a + b(q, v) by RNEA [N·m | N] (a new array: it depends on ``a``)."""
        return np.array(pin.rnea(self.pin_model, self.data, self._pin_q, self.v, a))
