"""A joint trajectory given as waypoints, sampled as ros2_controllers' joint_trajectory_controller
samples it (``interpolation_method: splines``, Jazzy): each segment between two consecutive
states is a polynomial in time whose degree follows what *both* ends carry —

- positions only: linear, q(τ) = q₀ + (q₁ − q₀) τ/T (velocity constant, acceleration 0);
- positions and velocities: the cubic Hermite segment matching q and v at both ends;
- positions, velocities and accelerations: the quintic matching q, v and a at both ends.

The first segment runs from the start state (the measured state when the trajectory starts) to
the first waypoint when that one's ``time_from_start`` is later than 0; a first waypoint at 0 is
the start. Before the start the trajectory is its start state; after the last waypoint it holds
the last waypoint's position with zero velocity and acceleration (JTC holds the last point).
``interpolation_method: none`` samples each segment as its start state (a step).

Times [s] from the trajectory's start, positions [rad | m], velocities [rad/s | m/s],
accelerations [rad/s² | m/s²]; one column per joint, in the order the caller chose.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ct_controllers.types import FloatArray

SPLINES = "splines"
NONE = "none"
INTERPOLATION_METHODS = (SPLINES, NONE)


@dataclass(frozen=True)
class Waypoint:
    """One state on the trajectory: its time from the start [s] and the joint values (velocities
    and accelerations None when the waypoint does not carry them)."""

    time: float
    positions: FloatArray
    velocities: FloatArray | None = None
    accelerations: FloatArray | None = None


@dataclass(frozen=True)
class TrajectorySample:
    """The trajectory at one time: desired q, v, a, ``segment`` the index of the waypoint the
    time is heading to (0 before and on the way to the first; the last one past the end), and
    whether the time is past the last waypoint."""

    positions: FloatArray
    velocities: FloatArray
    accelerations: FloatArray
    segment: int
    after_end: bool


def _segment_coefficients(start: Waypoint, end: Waypoint) -> FloatArray:
    """Coefficients c[k] (rows k = 0..5, one column per joint) of q(τ) = Σ c_k τ^k on
    τ ∈ [0, T], T = end.time − start.time, of the degree both ends allow."""
    duration = end.time - start.time
    q0, q1 = start.positions, end.positions
    coefficients = np.zeros((6, q0.size))
    coefficients[0] = q0
    if start.velocities is None or end.velocities is None:
        coefficients[1] = (q1 - q0) / duration
        return coefficients
    v0, v1 = start.velocities, end.velocities
    if start.accelerations is None or end.accelerations is None:
        # Cubic Hermite: q(0)=q0, q'(0)=v0, q(T)=q1, q'(T)=v1.
        coefficients[1] = v0
        coefficients[2] = (3 * (q1 - q0) - (2 * v0 + v1) * duration) / duration**2
        coefficients[3] = (2 * (q0 - q1) + (v0 + v1) * duration) / duration**3
        return coefficients
    a0, a1 = start.accelerations, end.accelerations
    # Quintic: q, q', q'' given at both ends (the standard closed form).
    coefficients[1] = v0
    coefficients[2] = a0 / 2
    t = duration
    coefficients[3] = (20 * (q1 - q0) - (8 * v1 + 12 * v0) * t - (3 * a0 - a1) * t**2) / (2 * t**3)
    coefficients[4] = (30 * (q0 - q1) + (14 * v1 + 16 * v0) * t + (3 * a0 - 2 * a1) * t**2) / (
        2 * t**4
    )
    coefficients[5] = (12 * (q1 - q0) - 6 * (v1 + v0) * t + (a1 - a0) * t**2) / (2 * t**5)
    return coefficients


class SplineTrajectory:
    """Waypoints (strictly increasing times, the first ≥ 0) after a start state at time 0,
    sampled by :meth:`sample`. The waypoints are taken as valid: a goal's checks come first
    (:mod:`ct_controllers.references.trajectory_goal`)."""

    def __init__(
        self, start: Waypoint, waypoints: list[Waypoint], interpolation: str = SPLINES
    ) -> None:
        if interpolation not in INTERPOLATION_METHODS:
            raise ValueError(
                f"interpolation_method '{interpolation}' is not one of "
                f"{', '.join(INTERPOLATION_METHODS)}"
            )
        if not waypoints:
            raise ValueError("a trajectory needs at least one waypoint")
        self.interpolation = interpolation
        # A first waypoint at t = 0 replaces the start state (JTC: it is the start).
        states = list(waypoints) if waypoints[0].time <= 0.0 else [start, *waypoints]
        self.states = states
        self.times = [state.time for state in states]
        self._coefficients = [_segment_coefficients(a, b) for a, b in pairwise(states)]
        # 1 when the start state precedes the waypoints (states[i + 1] is waypoints[i]).
        self._offset = 0 if waypoints[0].time <= 0.0 else 1

    @property
    def duration(self) -> float:
        """[s] time of the last waypoint from the start."""
        return self.times[-1]

    def sample(self, time: float) -> TrajectorySample:
        """The desired state ``time`` [s] after the start."""
        last = self.states[-1]
        if time >= self.times[-1]:
            zeros = np.zeros_like(last.positions)
            return TrajectorySample(
                last.positions.copy(),
                zeros,
                zeros.copy(),
                len(self.states) - 1 - self._offset,
                True,
            )
        first = self.states[0]
        if time <= self.times[0]:
            velocities = (
                first.velocities if first.velocities is not None else np.zeros_like(first.positions)
            )
            accelerations = (
                first.accelerations
                if first.accelerations is not None
                else np.zeros_like(first.positions)
            )
            return TrajectorySample(
                first.positions.copy(), velocities.copy(), accelerations.copy(), 0, False
            )
        index = bisect_right(self.times, time) - 1  # states[index].time <= time < next
        segment = index + 1 - self._offset  # the waypoint this segment ends at
        if self.interpolation == NONE:
            state = self.states[index]
            zeros = np.zeros_like(state.positions)
            return TrajectorySample(state.positions.copy(), zeros, zeros.copy(), segment, False)
        tau = time - self.times[index]
        c = self._coefficients[index]
        powers = tau ** np.arange(6)
        positions = powers @ c
        velocities = (np.arange(1, 6) * powers[:5]) @ c[1:]
        accelerations = (np.arange(2, 6) * np.arange(1, 5) * powers[:4]) @ c[2:]
        return TrajectorySample(positions, velocities, accelerations, segment, False)
