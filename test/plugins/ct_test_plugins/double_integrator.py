"""``ct_test_plugins/DoubleIntegrator``: a kinematic simulator, each joint a unit inertia
(q̈ = τ / 1 [kg·m² | kg], no gravity, no limits), stepped once per write on a simulated clock."""

from __future__ import annotations

import numpy as np

from ct_controllers.config import StackConfig
from ct_controllers.hardware.interface import EFFORT, JointCommand, StateSample, SystemInterface
from ct_controllers.model.description import RobotDescription
from ct_controllers.types import FloatArray


class DoubleIntegratorSystem(SystemInterface):
    """Every joint on the effort interface; one semi-implicit Euler step of ``period`` [s] per
    write, so the loop runs in lockstep on the backend's own (simulated) clock."""

    backend_name = "ct_test_plugins/DoubleIntegrator"
    BACKEND = "double_integrator"  # the `backend:` value that selects it
    measurement_delay = 0  # the plant steps after the write: the effort acts at once
    publishes_clock = True  # simulated time: the node would publish /clock from now()

    def __init__(
        self, joint_names: tuple[str, ...], initial_positions: FloatArray, period: float
    ) -> None:
        super().__init__(joint_names=joint_names, command_interfaces=(EFFORT,) * len(joint_names))
        self.period = period  # [s]
        self.initial = np.array(initial_positions, dtype=np.float64)
        self.time = 0.0  # [s]
        self.q = self.initial.copy()
        self.v = np.zeros_like(self.q)
        self.effort = np.zeros_like(self.q)

    @classmethod
    def from_config(
        cls, description: RobotDescription, config: StackConfig
    ) -> DoubleIntegratorSystem:
        """The plugin constructor: the joints of the ``<ros2_control>`` block, starting at
        ``home_positions``, stepped by the loop's period."""
        joints = description.hardware.joint_names
        home = dict(zip(config.joint_names, config.home_positions, strict=True))
        return cls(joints, np.array([home[n] for n in joints]), config.period)

    def _on_configure(self) -> None:
        self.time, self.q, self.v = 0.0, self.initial.copy(), np.zeros_like(self.initial)

    def now(self) -> float:
        return self.time

    def _read(self) -> StateSample:
        return StateSample(
            self.time, self.joint_names, self.q.copy(), self.v.copy(), self.effort.copy()
        )

    def _write(self, command: JointCommand, values: FloatArray) -> None:
        self.effort = values.copy()
        self.v = self.v + values * self.period
        self.q = self.q + self.v * self.period
        self.time += self.period

    @property
    def loop_paced(self) -> bool:
        return False  # faster than real time: ticks back to back

    def describe(self) -> str:
        return "simulation, a double integrator per joint"
