"""Integrating the differential-IK solution into joint references (step 6 of
:mod:`ct_controllers.references.diff_ik_base`), single- and multi-rate.

Integration: q*ₖ₊₁ = q*ₖ + dt·v on the controlled joints (the others hold where they were),
v* = v, a* = 0 or (vₖ − vₖ₋₁)/dt.

Multi-rate (``update_divisor`` K ≥ 1): a solve over dt_K = K·dt gives v and
q*_end = q*_start + dt_K·v; the K ticks it covers hand out the points of that segment,
q*_j = q*_start + j·dt·v (j = 1..K), v* = v — the references a 1/dt-rate generator would give if
v stayed constant over the K ticks.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ct_controllers.types import FloatArray, JointReference


class ReferenceIntegrator:
    """q* (model order) and the segment being followed between two solves. ``q_sel`` and
    ``v_sel`` select the controlled joints in q and v."""

    def __init__(
        self,
        nv: int,
        q_sel: slice | NDArray[np.intp],
        v_sel: slice | NDArray[np.intp],
        n_joints: int,
        update_divisor: int,
    ) -> None:
        self.nv = nv
        self.q_sel = q_sel
        self.v_sel = v_sel
        self.n_joints = n_joints
        self.update_divisor = update_divisor
        self.q_ref: FloatArray | None = None  # q* [rad | m], model order
        self.v_previous = np.zeros(n_joints)  # the last v of the controlled joints
        # The segment being followed between two solves: q*_start (model order), v and a
        # (model order), and the ticks of it handed out so far.
        self._segment: tuple[FloatArray, FloatArray, FloatArray] | None = None
        self._segment_ticks = 0

    def reset(self) -> None:
        """Forget q*, the segment and the last velocity."""
        self.q_ref = None
        self._segment = None
        self.v_previous = np.zeros(self.n_joints)

    def forget_velocity(self) -> None:
        self.v_previous = np.zeros(self.n_joints)

    def segment_point(self, dt: float) -> JointReference | None:
        """Between two solves: the next point of the last solution's segment; None when a
        solve is due."""
        segment = self._segment
        if segment is None or self._segment_ticks >= self.update_divisor:
            return None
        self._segment_ticks += 1
        q_start, v_full, a_full = segment
        return JointReference(
            q=q_start + (self._segment_ticks * dt) * v_full, v=v_full.copy(), a=a_full.copy()
        )

    def start_segment(self, end: JointReference, dt: float) -> JointReference:
        """After a solve over K·dt that ended at ``end``: its segment's first point."""
        q_start = end.q - (dt * self.update_divisor) * end.v  # q* where this solve started
        self._segment = (q_start, end.v, end.a)
        self._segment_ticks = 1
        return JointReference(q=q_start + dt * end.v, v=end.v.copy(), a=end.a.copy())

    def integrate(
        self, q: FloatArray, velocity: FloatArray, dt: float, finite_difference: bool
    ) -> JointReference:
        """q* of the controlled joints ← ``q`` + ``dt``·``velocity``; the reference at the end
        of the step (a* by finite difference when ``finite_difference``)."""
        assert self.q_ref is not None
        q_ref = self.q_ref
        q_ref[self.q_sel] = q + dt * velocity
        v_full = np.zeros(self.nv)
        v_full[self.v_sel] = velocity
        a_full = np.zeros(self.nv)
        if finite_difference:
            a_full[self.v_sel] = (velocity - self.v_previous) / dt
        self.v_previous = velocity
        return JointReference(q=q_ref.copy(), v=v_full, a=a_full)
