"""What every chain toward a TCP target exposes, whatever runs inside it (the chain factory,
``chains/tcp_chain_factory.py``, picks which): the target (a pose in the base frame with an
optional feed-forward twist and wrench), replaceable from any thread and checked once, here, as a
:class:`~ct_controllers.references.reference_generator.CartesianTarget`; the TCP's error to it
at a configuration, for the goal's thread; and the end of the chain's use
(:meth:`TcpTargetChain.release_target`)."""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np

from ct_controllers.chains.wrapping import WrappingController
from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.model.frames import pose_error_norms
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.reference_generator import CartesianTarget


class TcpTargetChain(WrappingController):
    """A controller the loop runs that takes the TCP toward :attr:`target`. ``model``: the
    chain's own (scratch data of its own, the control thread's)."""

    # Whether the joint reference of the chain's output is its own (a differential IK's, which
    # position-interface joints follow), or the loop's, passed through (a Cartesian law's).
    GENERATES_REFERENCE: ClassVar[bool]

    def __init__(self, model: RobotModel, pose: FloatArray) -> None:
        super().__init__()
        self.model = model
        self.base_frame = model.model.frames[model.base_frame_id].name
        # A second model for errors() on the goal's thread (Pinocchio scratch data is not
        # thread-safe; the control thread uses ``model``).
        self._error_model = model.with_own_data()
        self._target = self.checked(pose)

    def checked(
        self,
        pose: FloatArray,
        twist: FloatArray | None = None,
        wrench: FloatArray | None = None,
    ) -> CartesianTarget:
        """``pose`` (4x4 [m], base frame), ``twist`` (6,: linear [m/s]; angular [rad/s], base
        axes; None: a fixed target) and ``wrench`` (6,: force [N]; torque [N·m] at the TCP,
        base axes; None: none) as a checked target of arrays of its own, or
        :class:`~ct_controllers.references.reference_generator.TargetError` naming what is
        wrong. The one check of a target on its way down."""
        return CartesianTarget(
            pose=np.array(pose, dtype=np.float64),
            frame=self.base_frame,
            twist=None if twist is None else np.array(twist, dtype=np.float64),
            wrench=None if wrench is None else np.array(wrench, dtype=np.float64),
        ).validated(self.base_frame)

    @abstractmethod
    def set_target(
        self,
        pose: FloatArray,
        twist: FloatArray | None = None,
        wrench: FloatArray | None = None,
    ) -> None:
        """Replace the TCP target (:meth:`checked`; nothing changes if it raises), used from
        the next tick; any thread."""

    @property
    def target(self) -> FloatArray:
        """The TCP target pose (4x4 [m], base frame), a copy."""
        return self._target.pose.copy()

    def errors(self, q: FloatArray) -> tuple[float, float]:
        """(position [m], orientation [rad]) error of the TCP at ``q`` to the target; for one
        thread other than the control thread."""
        return pose_error_norms(self._error_model.frame_pose(q), self._target.pose)

    def release_target(self) -> None:
        """The chain is no longer run (its goal or stream ended): let go of what it handed the
        wrapped controller, which may run on without the chain. Default: nothing handed."""

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return self.compute_output(state, reference, dt).effort
