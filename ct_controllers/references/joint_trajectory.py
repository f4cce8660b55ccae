"""Jerk-limited point-to-point joint trajectories (Ruckig) that start on the measured state.

From the measured (q, v) and zero acceleration (accelerations are not measured) to (q_goal, 0, 0),
time-synchronized across joints, within per-joint velocity [rad/s | m/s], acceleration
[rad/s² | m/s²] and jerk [rad/s³ | m/s³] bounds. A requested duration is a minimum: a move the
bounds cannot do that fast takes longer, and ``duration`` says how long.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from ruckig import ControlInterface, InputParameter, Result, Ruckig, Trajectory

from ct_controllers.controllers.controller import JointReference

FloatArray = NDArray[np.float64]


class TrajectoryError(ValueError):
    """No trajectory within the bounds (e.g. an initial velocity beyond them)."""


@dataclass(frozen=True)
class JointLimits:
    """Reference limits per joint (the trajectory layer's, not the actuators')."""

    velocity: FloatArray  # [rad/s | m/s]
    acceleration: FloatArray  # [rad/s² | m/s²]
    jerk: FloatArray  # [rad/s³ | m/s³]

    def __post_init__(self) -> None:
        for name in ("velocity", "acceleration", "jerk"):
            value = np.asarray(getattr(self, name))
            if not (np.all(np.isfinite(value)) and np.all(value > 0)):
                raise ValueError(f"reference {name} limits must be finite and positive: {value}")


class JerkLimitedTrajectory:
    """A Ruckig trajectory on the hardware clock: ``sample(t)`` for t in [start, start + T],
    holding the goal after T."""

    def __init__(
        self,
        start_time: float,
        q0: FloatArray,
        v0: FloatArray,
        goal: FloatArray,
        limits: JointLimits,
        minimum_duration: float = 0.0,
        stop: bool = False,
    ) -> None:
        """``stop=True`` ignores ``goal`` and brings every joint to rest as fast as the
        acceleration and jerk limits allow (bounded deceleration); ``goal`` becomes the position
        where it ends."""
        n = len(q0)
        if not (np.isfinite(minimum_duration) and minimum_duration >= 0):
            raise TrajectoryError(f"duration must be finite and >= 0, got {minimum_duration}")
        parameters = InputParameter(n)
        parameters.current_position = np.asarray(q0, dtype=np.float64).tolist()
        # Start within the bounds: a measured velocity a hair above them (noise) is clipped.
        parameters.current_velocity = np.clip(v0, -limits.velocity, limits.velocity).tolist()
        parameters.current_acceleration = [0.0] * n
        if stop:
            parameters.control_interface = ControlInterface.Velocity
        else:
            parameters.target_position = np.asarray(goal, dtype=np.float64).tolist()
        parameters.target_velocity = [0.0] * n
        parameters.target_acceleration = [0.0] * n
        parameters.max_velocity = np.asarray(limits.velocity, dtype=np.float64).tolist()
        parameters.max_acceleration = np.asarray(limits.acceleration, dtype=np.float64).tolist()
        parameters.max_jerk = np.asarray(limits.jerk, dtype=np.float64).tolist()
        if minimum_duration > 0:
            parameters.minimum_duration = float(minimum_duration)
        self._trajectory = Trajectory(n)
        result = Ruckig(n).calculate(parameters, self._trajectory)
        if result not in (Result.Working, Result.Finished):
            raise TrajectoryError(f"no jerk-limited trajectory within the limits ({result})")
        self.start_time = float(start_time)
        self.duration = float(self._trajectory.duration)
        end = self._trajectory.at_time(self.duration)[0] if stop else goal
        self.goal = np.array(end, dtype=np.float64)

    @classmethod
    def stop(
        cls, start_time: float, q0: FloatArray, v0: FloatArray, limits: JointLimits
    ) -> JerkLimitedTrajectory:
        """Come to rest from (q0, v0) with bounded deceleration and jerk."""
        return cls(start_time, q0, v0, q0, limits, stop=True)

    def sample(self, time: float) -> JointReference:
        t = time - self.start_time
        if t >= self.duration:
            zeros = np.zeros_like(self.goal)
            return JointReference(q=self.goal.copy(), v=zeros, a=zeros.copy())
        position, velocity, acceleration = self._trajectory.at_time(max(0.0, t))
        return JointReference(q=np.array(position), v=np.array(velocity), a=np.array(acceleration))

    def progress(self, time: float) -> float:
        """Fraction of the duration elapsed, 0..1."""
        if self.duration <= 0:
            return 1.0
        return float(np.clip((time - self.start_time) / self.duration, 0.0, 1.0))
