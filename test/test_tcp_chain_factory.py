"""The chain factory (``chains/tcp_chain_factory.py``), without ROS: what it builds for a joint
law and for Cartesian impedance, and how the Cartesian chain hands its target over and back."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from helpers import new_robot_model

from ct_controllers.chains.cartesian_chain import CartesianChain
from ct_controllers.chains.cartesian_controller_chain import CartesianControllerChain
from ct_controllers.chains.tcp_chain_factory import tcp_target_chain
from ct_controllers.controllers.cartesian_impedance import CartesianImpedanceController
from ct_controllers.controllers.controller import JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.references.diff_ik_base import DifferentialIkBase
from ct_controllers.references.diff_ik_qp import QpDiffIk
from ct_controllers.references.joint_approach import JointSpaceApproach
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.references.reference_generator import TargetError

ARM = tuple(f"joint{i}" for i in range(1, 8))
DT = 1e-3


def _start() -> tuple[np.ndarray, np.ndarray]:
    """(q, the TCP pose there): the bundled arm bent, away from singularities."""
    model = new_robot_model()
    q = pin.neutral(model.model)
    q[model.indices(ARM)] = [0.0, -0.3, 0.0, -2.0, 0.0, 1.7, 0.8]
    return q, model.frame_pose(q)


def _holds_a_diff_ik(chain: object) -> bool:
    """Whether any attribute of ``chain`` (or of its wrapped controller) is a differential IK,
    bare or behind the joint-space approach."""
    parts = [*vars(chain).values(), *vars(getattr(chain, "wrapped", object())).values()]
    return any(isinstance(p, (DifferentialIkBase, JointSpaceApproach)) for p in parts)


def test_a_joint_law_gets_the_differential_ik_and_cartesian_impedance_the_target() -> None:
    """Joint impedance (ACCEPTS joint): a CartesianChain whose generator is the QP differential
    IK, behind the joint-space approach when the goal's IK solution and the reference limits are
    given; Cartesian impedance (ACCEPTS cartesian): a CartesianControllerChain around the very
    controller, with no differential IK anywhere in it, even given a solution (ignored)."""
    model = new_robot_model()
    q, pose = _start()
    nv = model.nv
    joint = JointImpedanceController(model.with_own_data(), np.full(nv, 300.0), np.full(nv, 20.0))
    alone = tcp_target_chain(model, joint, ARM, 4, pose)
    assert isinstance(alone, CartesianChain) and isinstance(alone.diff_ik, QpDiffIk)
    assert alone.wrapped is joint
    limits = JointLimits(np.full(nv, 2.0), np.full(nv, 10.0), np.full(nv, 100.0))
    approach = tcp_target_chain(model, joint, ARM, 4, pose, solution=q, reference_limits=limits)
    assert isinstance(approach, CartesianChain)
    assert isinstance(approach.diff_ik, JointSpaceApproach)
    cartesian = CartesianImpedanceController(model.with_own_data())
    direct = tcp_target_chain(model, cartesian, ARM, 4, pose, solution=q, reference_limits=limits)
    assert isinstance(direct, CartesianControllerChain)
    assert direct.wrapped is cartesian
    assert _holds_a_diff_ik(alone) and not _holds_a_diff_ik(direct)
    np.testing.assert_array_equal(direct.target, pose)


def test_the_cartesian_chain_hands_its_target_on_installation_and_clears_only_its_own() -> None:
    """Built, the chain hands nothing to the controller (a goal the arbiter refuses moves
    nothing); installed (prepare), the controller tracks the chain's target from its next tick,
    and a new target from the one after; released, the controller follows its joint reference's
    FK again — but a release after a newer chain handed its own target clears nothing."""
    model = new_robot_model()
    q, pose = _start()
    state = JointState(0.0, q, np.zeros(model.nv))
    hold = JointReference.hold(q)
    controller = CartesianImpedanceController(model.with_own_data())
    target = pose.copy()
    target[:3, 3] += (0.02, 0.0, -0.01)
    chain = tcp_target_chain(model, controller, ARM, 1, target)
    controller.update(state, hold, DT)
    assert controller.target is None
    chain.prepare(state, DT)
    chain.step(state._replace(stamp=DT), hold, DT)
    assert controller.target is not None
    np.testing.assert_array_equal(controller.target.pose, target)
    moved = target.copy()
    moved[:3, 3] += (0.0, 0.01, 0.0)
    chain.set_target(moved, twist=np.zeros(6), wrench=np.array([1.0, 0, 0, 0, 0, 0]))
    chain.step(state._replace(stamp=2 * DT), hold, DT)
    np.testing.assert_array_equal(controller.target.pose, moved)
    np.testing.assert_array_equal(controller.target.wrench, [1.0, 0, 0, 0, 0, 0])
    newer = tcp_target_chain(model, controller, ARM, 1, pose)
    newer.prepare(state, DT)
    chain.release_target()  # the older chain ends after the newer one took over
    controller.update(state._replace(stamp=3 * DT), hold, DT)
    assert controller.target is not None
    np.testing.assert_array_equal(controller.target.pose, pose)
    newer.release_target()
    controller.update(state._replace(stamp=4 * DT), hold, DT)
    assert controller.target is None


def test_a_target_is_checked_at_the_chain() -> None:
    """A non-rigid pose is refused by either chain's set_target (TargetError; the target
    stays); a wrench by the joint law's (a joint reference carries none)."""
    model = new_robot_model()
    _, pose = _start()
    nv = model.nv
    joint = JointImpedanceController(model.with_own_data(), np.full(nv, 300.0), np.full(nv, 20.0))
    for controller in (joint, CartesianImpedanceController(model.with_own_data())):
        chain = tcp_target_chain(model, controller, ARM, 1, pose)
        bad = pose.copy()
        bad[:3, :3] *= 2.0
        with pytest.raises(TargetError):
            chain.set_target(bad)
        np.testing.assert_array_equal(chain.target, pose)
    with pytest.raises(TargetError, match="wrench"):
        tcp_target_chain(model, joint, ARM, 1, pose).set_target(pose, wrench=np.zeros(6))
