"""The plants of ``ct-bench tracking``: one simulated robot behind the :class:`Plant` interface
(reset to a state, then step with a torque), and the seed's plant, Pinocchio's ABA with
semi-implicit Euler. Our arm in MuJoCo is :mod:`~ct_controllers.sim.mujoco_plant`."""

from __future__ import annotations

import pinocchio as pin

from ct_controllers.types import FloatArray


class Plant:
    """One simulated robot: reset to a state, then step with a torque."""

    def reset(self, q: FloatArray, v: FloatArray) -> None:
        raise NotImplementedError

    def state(self) -> tuple[FloatArray, FloatArray]:
        raise NotImplementedError

    def step(self, tau: FloatArray) -> None:
        raise NotImplementedError

    def unstable(self) -> bool:
        """The plant itself reported a numerical failure."""
        return False


class PinocchioPlant(Plant):
    """ABA forward dynamics with semi-implicit Euler (the seed's plant)."""

    def __init__(self, model: pin.Model, dt: float) -> None:
        self.model, self.data, self.dt = model, model.createData(), dt

    def reset(self, q: FloatArray, v: FloatArray) -> None:
        self.q, self.v = q.copy(), v.copy()

    def state(self) -> tuple[FloatArray, FloatArray]:
        return self.q, self.v

    def step(self, tau: FloatArray) -> None:
        a = pin.aba(self.model, self.data, self.q, self.v, tau)
        self.v = self.v + a * self.dt
        self.q = pin.integrate(self.model, self.q, self.v * self.dt)
