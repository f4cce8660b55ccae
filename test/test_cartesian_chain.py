"""ct_controllers.chains.cartesian_chain: differential IK → joint controller as one controller."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from helpers import new_robot_model

from ct_controllers.chains.cartesian_chain import CartesianChain
from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.references.diff_ik_qp import QpDiffIk

ARM = tuple(f"joint{i}" for i in range(1, 8))
DT = 1e-3


class CountingImpedance(JointImpedanceController):
    """Counts its computes (it stands for the joint controller the loop may be running)."""

    computes = 0

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        self.computes += 1
        return super().compute(state, reference, dt)


def test_prepare_warms_only_the_differential_ik() -> None:
    """prepare() solves the IK once and forgets it (no q*, no status) without calling the joint
    controller; the chain's first tick then computes from the measured state: the same effort
    as an unprepared chain's (to OSQP's tolerance)."""
    model = new_robot_model()
    q = pin.neutral(model.model)
    q[model.indices(ARM)] = [0.0, -0.3, 0.0, -2.0, 0.0, 1.7, 0.8]
    target = model.frame_pose(q)
    target[:3, 3] += (0.03, 0.02, -0.04)
    state = JointState(0.0, q, np.zeros(model.nv))
    stiffness, damping = np.full(model.nv, 300.0), np.full(model.nv, 20.0)

    def chain() -> tuple[CartesianChain, CountingImpedance]:
        joint = CountingImpedance(new_robot_model(), stiffness, damping)
        return CartesianChain(model, QpDiffIk(new_robot_model(), ARM), joint, target), joint

    prepared, joint = chain()
    prepared.prepare(state, DT)
    assert joint.computes == 0
    diff_ik = prepared.diff_ik
    assert isinstance(diff_ik, QpDiffIk)
    assert diff_ik.reference_q is None and diff_ik.status is None
    fresh, _ = chain()
    expected = fresh.update(state, JointReference.hold(q), DT)
    got = prepared.update(state, JointReference.hold(q), DT)
    assert joint.computes == 1
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * np.abs(expected).max())
