"""Differential IK by damped least squares (DLS): a chained controller that turns a TCP target
into joint references for the joint-level controller of the same tick.

    u  = J_wᵀ (J_w J_wᵀ + λ² I)⁻¹ e_w  +  w_p N_λ (q_post − q*)          [rad | m]
    v* = B u  +  J_wᵀ (J_w J_wᵀ + λ² I)⁻¹ W ẋ_ff                        [rad/s | m/s]
    N_λ = I − J_wᵀ (J_w J_wᵀ + λ² I)⁻¹ J_w  (the damped nullspace projector)

with J_w, e_w, λ and the rate limiting as in :mod:`ct_controllers.references.diff_ik_base`,
B = diag(bandwidth) [1/s] and w_p = ``posture_weight``. For B = b I the task error decays as
ė ≈ −b e away from singularities (b is the Cartesian bandwidth). The (m x m) system is solved,
never inverted. The posture term only moves within the (damped) nullspace, so the task's steady
state is unchanged: at rest u = 0, hence J_w⁺e_w = 0 and e_w = 0 where J_w has full row rank.

Joint velocity limits (URDF × ``velocity_scale``) are met by scaling v* by one factor, which keeps
its direction. Joint *position* limits are not enforced here — clipping q* would make the arm jump
between branches; :mod:`ct_controllers.references.diff_ik_qp` keeps them as constraints.
"""

from __future__ import annotations

import numpy as np

from ct_controllers.references.diff_ik_base import DifferentialIkBase
from ct_controllers.references.diff_ik_task import TaskView
from ct_controllers.types import FloatArray


class DlsDiffIk(DifferentialIkBase):
    """Damped-least-squares differential IK (see the module docstring)."""

    solver_name = "dls"

    def _solve(self, task: TaskView, dt: float) -> tuple[FloatArray, bool, str]:
        parameters = self.parameters
        assert task.nullspace_posture is not None  # projects_posture
        velocity = (
            parameters.bandwidth
            * (task.task_step + parameters.posture_weight * task.nullspace_posture)
            + task.feedforward
        )
        ratio = float((np.abs(velocity) / task.velocity_limit).max())
        limited = ratio > 1.0
        if limited:
            velocity /= ratio
        return velocity, limited, self.solver_name
