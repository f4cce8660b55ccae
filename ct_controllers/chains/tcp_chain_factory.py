"""The chain factory: the one place a chain toward a TCP target is built — for MoveToPose
(``chains/pose_goal.py``), the pose and twist streams (``chains/stream_chain.py``), the benches
and the tests — from what the controller takes (:attr:`Controller.ACCEPTS`):

- a Cartesian target (Cartesian impedance): straight to it
  (:class:`~ct_controllers.chains.cartesian_controller_chain.CartesianControllerChain`);
- joint references (joint impedance, computed torque): through a differential IK (the QP,
  joint limits as constraints) of the chain's own, with the goal check's joint-space approach
  in front when a goal gives its IK solution
  (:class:`~ct_controllers.chains.cartesian_chain.CartesianChain`).

A controller taking both gets the target directly. Either way the chain is a
:class:`~ct_controllers.chains.tcp_target_chain.TcpTargetChain`: ``set_target(pose, twist)``,
``target``, ``errors(q)``, ``release_target()``, and what the loop runs (``prepare``,
``compute_output``)."""

from __future__ import annotations

from ct_controllers.chains.cartesian_chain import CartesianChain
from ct_controllers.chains.cartesian_controller_chain import CartesianControllerChain
from ct_controllers.chains.tcp_target_chain import TcpTargetChain
from ct_controllers.controllers.controller import CARTESIAN, Controller, FloatArray
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.diff_ik_qp import QpDiffIk
from ct_controllers.references.joint_approach import JointSpaceApproach
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.references.reference_generator import ReferenceGenerator


def takes_cartesian_targets(controller: Controller) -> bool:
    """Whether the factory hands ``controller`` the TCP target directly."""
    return CARTESIAN in controller.ACCEPTS


def tcp_target_chain(
    model: RobotModel,
    controller: Controller,
    arm_joints: tuple[str, ...],
    cartesian_divisor: int,
    pose: FloatArray,
    solution: FloatArray | None = None,
    reference_limits: JointLimits | None = None,
) -> TcpTargetChain:
    """The chain toward ``pose`` (4x4 [m], the TCP in the base frame; a stream's start: the
    measured TCP pose) run by ``controller`` (one of the stack's). ``model``: the stack's; the
    chain gets scratch data of its own (a copy of the data, not a parse of the URDF: this runs
    on a goal's thread, which shares the GIL with the loop). For a joint-space controller:
    a differential IK of ``arm_joints`` updated every ``cartesian_divisor``-th tick, behind a
    joint-space approach to ``solution`` (the goal check's IK solution, model order [rad | m])
    within ``reference_limits`` when both are given. A Cartesian controller ignores them."""
    own = model.with_own_data()
    if takes_cartesian_targets(controller):
        return CartesianControllerChain(own, controller, pose)
    diff_ik = QpDiffIk(own, arm_joints, update_divisor=cartesian_divisor)
    generator: ReferenceGenerator = diff_ik
    if solution is not None:
        if reference_limits is None:
            raise ValueError("a joint-space approach to a solution needs the reference limits")
        generator = JointSpaceApproach(diff_ik, solution, reference_limits, pose)
    return CartesianChain(own, generator, controller, pose)
