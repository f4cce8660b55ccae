"""The plants of ``ct-bench tracking``: one simulated robot behind the :class:`Plant` interface
(reset to a state, then step with a torque), and the seed's plant, Pinocchio's ABA with
semi-implicit Euler. Our arm in MuJoCo is :mod:`~ct_controllers.sim.mujoco_plant`."""

from __future__ import annotations

import pinocchio as pin

from ct_controllers.model.robot import RobotModel
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
    """ABA forward dynamics with semi-implicit Euler (the seed's plant). Its state is the
    stack's: one position per joint [rad | m] (a continuous joint's angle, unwrapped), model
    order; Pinocchio's configuration (cos, sin for a continuous joint) only inside a step."""

    def __init__(self, robot: RobotModel, dt: float) -> None:
        self.robot, self.dt = robot, dt
        self.model, self.data = robot.model, robot.model.createData()

    def reset(self, q: FloatArray, v: FloatArray) -> None:
        self.q, self.v = q.copy(), v.copy()

    def state(self) -> tuple[FloatArray, FloatArray]:
        return self.q, self.v

    def step(self, tau: FloatArray) -> None:
        configuration = self.robot.pinocchio_configuration(self.q)
        a = pin.aba(self.model, self.data, configuration, self.v, tau)
        self.v = self.v + a * self.dt
        configuration = pin.integrate(self.model, configuration, self.v * self.dt)
        self.q = self.robot.joint_positions(configuration, near=self.q)
