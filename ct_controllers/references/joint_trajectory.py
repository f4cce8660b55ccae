"""Point-to-point joint trajectories that start on the measured state.

Quintic polynomial per joint from (q0, v0, a0 = 0) at t = 0 to (q1, 0, 0) at t = T: smooth in
position, velocity and acceleration, bounded jerk. With v0 = 0 it is the minimum-jerk profile,
whose peak velocity is 1.875 |Δq| / T and peak acceleration 5.774 |Δq| / T².
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ct_controllers.controllers.controller import JointReference

FloatArray = NDArray[np.float64]

MIN_DURATION = 0.2  # [s]


def minimum_duration(
    q0: FloatArray, q1: FloatArray, max_velocity: FloatArray, max_acceleration: FloatArray
) -> float:
    """Shortest T for which a minimum-jerk move q0 → q1 stays within the velocity [rad/s] and
    acceleration [rad/s²] bounds on every joint."""
    distance = np.abs(np.asarray(q1) - np.asarray(q0))
    by_velocity = np.max(1.875 * distance / max_velocity)
    by_acceleration = np.max(np.sqrt(5.774 * distance / max_acceleration))
    return float(max(by_velocity, by_acceleration, MIN_DURATION))


@dataclass(frozen=True)
class QuinticTrajectory:
    """q(t) = Σ c_k t^k on [0, T]; holds q1 after T. Vectors in one fixed joint order."""

    start_time: float  # [s] clock time of t = 0
    duration: float  # [s]
    coefficients: FloatArray  # 6 x n

    @staticmethod
    def between(
        start_time: float, q0: FloatArray, v0: FloatArray, q1: FloatArray, duration: float
    ) -> QuinticTrajectory:
        if not (np.isfinite(duration) and duration > 0):
            raise ValueError(f"trajectory duration must be positive and finite, got {duration}")
        q0, v0, q1 = (np.asarray(x, dtype=np.float64) for x in (q0, v0, q1))
        T = duration
        # Boundary conditions q(0)=q0, q'(0)=v0, q''(0)=0, q(T)=q1, q'(T)=0, q''(T)=0.
        c3 = (20 * (q1 - q0) - 12 * v0 * T) / (2 * T**3)
        c4 = (30 * (q0 - q1) + 16 * v0 * T) / (2 * T**4)
        c5 = (12 * (q1 - q0) - 6 * v0 * T) / (2 * T**5)
        coefficients = np.vstack([q0, v0, np.zeros_like(q0), c3, c4, c5])
        return QuinticTrajectory(start_time=start_time, duration=T, coefficients=coefficients)

    @property
    def goal(self) -> FloatArray:
        return self.sample(self.start_time + self.duration).q

    def sample(self, time: float) -> JointReference:
        t = float(np.clip(time - self.start_time, 0.0, self.duration))
        c = self.coefficients
        q = c[0] + t * (c[1] + t * (c[2] + t * (c[3] + t * (c[4] + t * c[5]))))
        v = c[1] + t * (2 * c[2] + t * (3 * c[3] + t * (4 * c[4] + t * 5 * c[5])))
        a = 2 * c[2] + t * (6 * c[3] + t * (12 * c[4] + t * 20 * c[5]))
        if time - self.start_time >= self.duration:
            v = np.zeros_like(v)
            a = np.zeros_like(a)
        return JointReference(q=q, v=v, a=a)

    def progress(self, time: float) -> float:
        """Fraction of the duration elapsed, 0..1."""
        return float(np.clip((time - self.start_time) / self.duration, 0.0, 1.0))
