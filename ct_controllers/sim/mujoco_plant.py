"""Our arm in MuJoCo as a benchmark plant: the real backend (lockstep, no objects) behind the
:class:`~ct_controllers.sim.plants.Plant` interface of the tracking benchmark, with the command
limiter before every write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ct_controllers.controllers.controller import FloatArray
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.controllers.safe_hold import safe_hold_effort
from ct_controllers.hardware.interface import JointCommand
from ct_controllers.hardware.mujoco_system import MujocoConfig, MujocoSystem
from ct_controllers.model.description import RobotDescription
from ct_controllers.model.robot import RobotModel
from ct_controllers.sim.plants import Plant


class MujocoPlant(Plant):
    """Vectors in the controller model's joint order; the backend is addressed by name."""

    def __init__(
        self, description: RobotDescription, robot: RobotModel, dt: float, mass_scale: float
    ) -> None:
        self.description, self.robot, self.dt, self.mass_scale = description, robot, dt, mass_scale
        self.names = robot.joint_names
        self.hardware: MujocoSystem | None = None
        self.sequence = 0

    def reset(self, q: FloatArray, v: FloatArray) -> None:
        """A fresh backend started on (q, v): configure → activate, as the stack does."""
        source = Path(self.description.source)  # its folder: where relative meshes are
        self.hardware = MujocoSystem(
            self.description.urdf,
            self.names,
            MujocoConfig(
                timestep=self.dt,
                control_period=self.dt,
                initial_positions=dict(zip(self.names, q.tolist(), strict=True)),
                initial_velocities=dict(zip(self.names, v.tolist(), strict=True)),
                with_objects=False,
                mass_scale=self.mass_scale,
                urdf_directory=str(source.parent) if source.is_file() else None,
            ),
        )
        self.hardware.configure()
        self.hardware.activate()

    def state(self) -> tuple[FloatArray, FloatArray]:
        assert self.hardware is not None
        sample = self.hardware.read()
        return sample.position, sample.velocity

    def step(self, tau: FloatArray) -> None:
        assert self.hardware is not None
        self.sequence += 1
        self.hardware.write(
            JointCommand(
                self.hardware.now(),
                self.sequence,
                self.names,
                self.hardware.command_interfaces,
                tau,
            )
        )

    def unstable(self) -> bool:
        assert self.hardware is not None
        return self.hardware.unstable


def limiter_for(
    robot: RobotModel, dt: float
) -> Callable[[FloatArray, FloatArray, FloatArray], FloatArray]:
    """The stack's limiter (URDF effort clamp, 1000 N·m/s rate limit, safe-hold fallback)."""
    limiter = CommandLimiter(robot.limits.effort)
    damping = np.full(robot.nv, 5.0)

    def limit(tau: FloatArray, q: FloatArray, v: FloatArray) -> FloatArray:
        return limiter.limit(tau, lambda: safe_hold_effort(robot, q, v, damping), dt).effort

    return limit
