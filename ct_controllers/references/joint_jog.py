"""Streamed joint jogs (``~/joint_jog``, control_msgs/JointJog velocities): the message check
and the jog servo that turns the latest taken jog into the loop's joint reference every tick.
Plain Python; the ROS side is ``ros/joint_jog_stream.py``, the chain ``chains/jog_chain.py``.

Per tick and joint (model order), from the reference q*, v*:

    v_des = the jog's velocity (0 for a joint it does not name, or with no fresh jog), clipped
            to the reference velocity limit, and toward an end of the joint range to what
            stops the limit approach's margin inside it at the reference acceleration
            (√(2 a d), sampled form)
    v*⁺ = v* + clip(v_des − v*, a dt)      q*⁺ = q* + v*⁺ dt      a* = (v*⁺ − v*) / dt

with dt the time since the previous tick's state (``references/servo.py`` ``tick_step``): a loop
that skipped ticks still jogs at the commanded speed in time.

The jog starts from the loop's reference (bumpless); when it goes stale, the joints it named
restart from their *measured* position and velocity and decelerate at the reference
acceleration to rest — never a jump. Staleness and stamps as the Cartesian streams
(``references/servo.py``): ``incoming_command_timeout``, ``future_tolerance``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ct_controllers.model.robot import RobotModel, UnknownNameError
from ct_controllers.references.joint_trajectory import JointLimits
from ct_controllers.references.servo import (
    HALTING_NO_COMMAND,
    JOINT,
    NO_WARNING,
    NOT_FINITE,
    UNSUPPORTED,
    ServoParameters,
    StatusLog,
    StreamError,
    checked_age,
    tick_step,
)
from ct_controllers.types import FloatArray, JointReference, JointState

JOINT_BOUND = 5  # MoveIt Servo's code: braking at a joint's limit


class JointJog(NamedTuple):
    """A checked jog: the joints at model ``indices`` at ``velocities`` [rad/s | m/s]."""

    indices: np.ndarray
    velocities: FloatArray


def check_jog_values(
    model: RobotModel,
    names: Sequence[str],
    velocities: Sequence[float],
    displacements: Sequence[float],
    stamp: float,
    now: float,
    parameters: ServoParameters,
) -> tuple[JointJog, float]:
    """A JointJog's fields checked into (:class:`JointJog`, age [s]), or :class:`StreamError`
    with the reason: a stale or future stamp, displacements without velocities (not served),
    unknown or duplicate joint names or lengths that disagree, non-finite velocities."""
    age = checked_age(stamp, now, parameters)
    if not velocities and displacements:
        raise StreamError(UNSUPPORTED, "displacements are not served: jog with velocities")
    names = list(names)
    if len(names) > model.nv:
        raise StreamError(JOINT, f"{len(names)} joint names; the robot has {model.nv} joints")
    if len(names) != len(velocities):
        raise StreamError(JOINT, f"{len(names)} joint names but {len(velocities)} velocities")
    try:
        indices = model.indices(names)
    except (UnknownNameError, ValueError) as exc:  # unknown; listed twice
        raise StreamError(JOINT, str(exc)) from None
    values = np.array(velocities, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise StreamError(NOT_FINITE, f"non-finite velocity in {values.tolist()}")
    return JointJog(np.asarray(indices), values), age


class _Jog(NamedTuple):
    jog: JointJog
    expires: float  # [s] loop clock


class JogServo(StatusLog):
    """See the module docstring. :meth:`offer` from any thread, :meth:`update` on the control
    thread. ``limits``: the loop's reference limits (velocity, acceleration, the joint range of
    their approach)."""

    def __init__(self, parameters: ServoParameters, limits: JointLimits) -> None:
        super().__init__()
        self.parameters = parameters
        self.limits = limits
        self._lock = threading.Lock()
        self._offered: _Jog | None = None
        self._q: FloatArray | None = None
        self._v: FloatArray | None = None
        self._fresh = False
        self._named: np.ndarray | None = None  # the joints the last fresh jog named
        self._stamp: float | None = None  # [s] the state stamp of the last update

    def offer(self, jog: JointJog, arrival: float, age: float) -> None:
        """A checked jog received at ``arrival`` [s, loop clock], ``age`` [s] old then."""
        expires = arrival + self.parameters.incoming_command_timeout - max(age, 0.0)
        with self._lock:
            self._offered = _Jog(jog, expires)

    def drop_jog(self) -> None:
        """No jog from now on: the next tick halts from the measured state. Any thread."""
        with self._lock:
            self._offered = None

    def restart(self) -> None:
        """Start again from the loop's reference at the next tick (control thread, or before
        the chain runs)."""
        with self._lock:
            self._offered = None
        self._q = None
        self._stamp = None

    @property
    def moving(self) -> bool:
        v = self._v
        return v is not None and bool(np.any(v != 0.0))

    def update(self, state: JointState, reference: JointReference, dt: float) -> JointReference:
        """The joint reference at ``state.stamp`` (new arrays)."""
        with self._lock:
            offered = self._offered
        now = float(state.stamp)
        fresh = offered is not None and now <= offered.expires
        # A period from a state just taken (the start, or the halt's restart from the measured
        # one); else the time since the last update (tick_step).
        last, self._stamp = self._stamp, now
        if self._q is None or self._v is None:  # bumpless from the loop's reference
            self._q = self.limits.inside(reference.q)
            self._v = np.array(reference.v, dtype=np.float64)
        elif self._fresh and not fresh and self._named is not None:
            named = self._named  # stale: the jogged joints from the measured state
            self._q[named] = self.limits.inside(state.q)[named]
            self._v[named] = state.v[named]
        else:
            dt = tick_step(last, now, dt)
        self._fresh = fresh
        q, v = self._q, self._v
        limit = np.asarray(self.limits.velocity, dtype=np.float64)
        acceleration = np.asarray(self.limits.acceleration, dtype=np.float64)
        desired = np.zeros_like(v)
        bound = False
        if fresh and offered is not None:
            jog = offered.jog
            self._named = jog.indices
            desired[jog.indices] = np.clip(jog.velocities, -limit[jog.indices], limit[jog.indices])
            approach = self.limits.approach
            if approach is not None:  # stop the margin inside the range, at the acceleration
                step = acceleration * dt
                room_up = np.maximum(approach.upper - approach.margin - q, 0.0)
                room_down = np.maximum(q - approach.lower - approach.margin, 0.0)
                up = step * (np.sqrt(2.25 + 2.0 * room_up / (step * dt)) - 1.5)
                down = step * (np.sqrt(2.25 + 2.0 * room_down / (step * dt)) - 1.5)
                clipped = np.clip(desired, -np.maximum(down, 0.0), np.maximum(up, 0.0))
                bound = bool(np.any(np.abs(clipped - desired) > 1e-12))
                desired = clipped
        change = np.clip(desired - v, -acceleration * dt, acceleration * dt)
        v += change
        q += v * dt
        self._report(fresh, bound)
        return JointReference(q=q.copy(), v=v.copy(), a=change / dt)

    def _report(self, fresh: bool, bound: bool) -> None:
        if not fresh:
            self.set_status(
                HALTING_NO_COMMAND,
                f"no fresh jog for {self.parameters.incoming_command_timeout} s: "
                + ("halting" if self.moving else "holding"),
            )
        elif bound:
            self.set_status(JOINT_BOUND, "braking at a joint limit")
        else:
            self.set_status(NO_WARNING, "following the jog")
