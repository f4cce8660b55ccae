"""Streamed TCP targets (issue 26, item 3): what a pose stream's messages must be to be taken,
and the servo that turns the latest taken target into a commanded TCP pose every tick. Plain
Python (no ROS): the ROS side (``ros/pose_stream.py``) converts a message to numbers, checks it
here (:func:`check_pose_values`) and hands it over (:meth:`Servo.offer`); the control thread runs
:meth:`Servo.update` in the stream's chain (``chains/stream_chain.py``).

The servo (control thread, one call per tick, all in the base frame):

    commanded pose X_c, commanded twist v_c = (linear [m/s]; angular [rad/s], base axes)
    e       = (p* − p_c; log3(R* R_cᵀ))                 toward the latest fresh target
    v_des   = ê · min(√(2 a_max ‖e‖), s · v_max)        linear and angular each (sampled form)
    v_c⁺    = v_c + clip(v_des − v_c, a_max dt)            the change's norm bounded
    X_c⁺    = (p_c + v_c⁺ dt, exp3(ω_c⁺ dt) R_c)

so the commanded pose never moves more than v_max dt a tick and its speed never changes by more
than a_max dt a tick (linear and angular apart). s in [0, 1] is the singularity scale: 1 above
``singularity_slowdown`` of the manipulability ∏σᵢ of the TCP Jacobian (the differential IK's
measure, ``references/diff_ik_task.py``), falling linearly to 0 at ``singularity_stop``, 0
below it: the commanded speed is held within s · v_max at once (not through a_max's ramp: near
a stretched arm's singularity the manipulability falls faster than a_max could slow the
motion), so the commanded pose creeps up to the stop threshold and stops there.

A twist stream's target is a velocity instead (``offer_twist``: base axes, or the commanded
TCP's, turning with it): v_des = that twist, each part scaled down to s · v_max, then the same
acceleration bound and integration — a twist integrated into the commanded pose.

A target is fresh until its expiry (its arrival on the loop's clock plus what was left of
``incoming_command_timeout`` given the message's age). Without a fresh target: v_des = 0, and
when the stream goes stale the commanded pose and twist restart from the *measured* TCP pose
and twist, so the arm decelerates from where it is and how it moves (never from the last
target, never a jump to it) at a_max, and holds where the halt ends. The first tick starts the
same way, from the measured state.
"""

from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pinocchio as pin

from ct_controllers.errors import CtError
from ct_controllers.parameter_schema import ParameterSchema, ParameterSpec, Range
from ct_controllers.types import FloatArray

# A tick's step is the time since the previous one, at most this many loop periods (after a
# longer stall the commanded motion resumes where it was rather than jump): :func:`tick_step`.
MAX_STEP_PERIODS = 3
QUATERNION_TOLERANCE = 1e-3  # |‖q‖ − 1| accepted (then normalised), as for pose goals
MAX_TARGET_DISTANCE = 100.0  # [m] from the base origin: beyond it no target for an arm

# Why a message was dropped: the counters' keys on /diagnostics (``stream_dropped_<reason>``).
STALE = "stale"
FUTURE = "future"
FRAME = "frame"
NOT_FINITE = "not_finite"
QUATERNION = "quaternion"
FAR = "far"
NOT_SELECTED = "not_selected"
JOINT = "joint"  # a jog's unknown or duplicate joint name, or lengths that disagree
UNSUPPORTED = "unsupported"  # a jog's displacements without velocities: not served
DROP_REASONS = (STALE, FUTURE, FRAME, NOT_FINITE, QUATERNION, FAR, JOINT, UNSUPPORTED, NOT_SELECTED)

# ~/servo_status codes: MoveIt Servo's (moveit_msgs/ServoStatus) where the meaning is the same,
# ours above 10.
NO_WARNING = 0  # following the stream
DECELERATE_FOR_SINGULARITY = 1  # speed scaled down: manipulability below the slowdown threshold
HALT_FOR_SINGULARITY = 2  # speed 0: manipulability below the stop threshold
HALTING_NO_COMMAND = 11  # no fresh target: decelerating from the measured state / holding
INACTIVE = 12  # no stream selected (or a goal took the arm)


class StreamError(CtError, ValueError):
    """A streamed message dropped: ``reason`` (one of :data:`DROP_REASONS`) and a message
    naming what is wrong."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _positive(value: float) -> str | None:
    return None if value > 0 else f"must be > 0, got {value}"


STREAM_PARAMETERS = ParameterSchema(
    "stream",
    (
        ParameterSpec(
            "incoming_command_timeout",
            float,
            0.1,
            "A streamed target older than this is dropped; none fresher for this long: a "
            "smooth halt (MoveIt Servo's default)",
            "s",
            validator=Range(1e-3, 10.0),
        ),
        ParameterSpec(
            "future_tolerance",
            float,
            0.02,
            "How far in the future a streamed target's stamp may be",
            "s",
            validator=Range(0.0, 1.0),
        ),
        ParameterSpec(
            "max_linear_speed",
            float,
            0.25,
            "The commanded TCP's top speed",
            "m/s",
            validator=Range(1e-6, 2.0),
        ),
        ParameterSpec(
            "max_angular_speed",
            float,
            1.0,
            "The commanded TCP's top angular speed",
            "rad/s",
            validator=Range(1e-6, 10.0),
        ),
        ParameterSpec(
            "max_linear_acceleration",
            float,
            1.0,
            "The commanded TCP's acceleration and deceleration bound (the halt's too)",
            "m/s²",
            validator=Range(1e-3, 20.0),
        ),
        ParameterSpec(
            "max_angular_acceleration",
            float,
            4.0,
            "The commanded TCP's angular acceleration and deceleration bound",
            "rad/s²",
            validator=Range(1e-3, 100.0),
        ),
        ParameterSpec(
            "singularity_slowdown",
            float,
            0.04,
            "Manipulability ∏σᵢ of the TCP Jacobian below which the streamed speed is scaled "
            "down (linearly to 0 at singularity_stop)",
            "m³",
            validator=Range(0.0, math.inf),
        ),
        ParameterSpec(
            "singularity_stop",
            float,
            0.015,
            "Manipulability below which the stream's motion stops (< singularity_slowdown)",
            "m³",
            validator=Range(0.0, math.inf),
        ),
    ),
    checks=(
        lambda values, _joints: (
            None
            if values["stream.singularity_stop"] < values["stream.singularity_slowdown"]
            else (
                f"stream.singularity_stop ({values['stream.singularity_stop']}) must be below "
                f"stream.singularity_slowdown ({values['stream.singularity_slowdown']})"
            )
        ),
    ),
)


@dataclass(frozen=True)
class ServoParameters:
    """The ``stream.*`` parameters (:data:`STREAM_PARAMETERS`, units there), checked."""

    incoming_command_timeout: float = 0.1  # [s]
    future_tolerance: float = 0.02  # [s]
    max_linear_speed: float = 0.25  # [m/s]
    max_angular_speed: float = 1.0  # [rad/s]
    max_linear_acceleration: float = 1.0  # [m/s²]
    max_angular_acceleration: float = 4.0  # [rad/s²]
    singularity_slowdown: float = 0.04  # [m³]
    singularity_stop: float = 0.015  # [m³]

    def __post_init__(self) -> None:
        values = {f"stream.{k}": v for k, v in self.__dict__.items()}
        for spec in STREAM_PARAMETERS.parameters:
            name = STREAM_PARAMETERS.full_name(spec)
            try:
                spec.check(values[name])
            except ValueError as exc:
                raise ValueError(f"parameter '{name}': {exc}") from None
        for check in STREAM_PARAMETERS.checks:
            whole = check(values, None)
            if whole:
                raise ValueError(whole)

    @classmethod
    def from_values(cls, values: dict[str, float]) -> ServoParameters:
        """From ``stream.<name>`` → value (the node's parameters); ValueError naming one."""
        names = {s.name for s in STREAM_PARAMETERS.parameters}
        return cls(**{k.split(".", 1)[1]: float(v) for k, v in values.items() if k[7:] in names})


def singularity_scale(manipulability: float, parameters: ServoParameters) -> float:
    """The speed scale in [0, 1]: 1 at or above ``singularity_slowdown``, linear down to 0 at
    ``singularity_stop``, 0 below it (NaN: 0, as a singular arm)."""
    slow, stop = parameters.singularity_slowdown, parameters.singularity_stop
    if not manipulability >= stop:  # NaN too
        return 0.0
    if manipulability >= slow:
        return 1.0
    return (manipulability - stop) / (slow - stop)


def manipulability(jacobian: FloatArray) -> float:
    """∏σᵢ of a 6-row Jacobian = √det(J Jᵀ) [m³ for the bundled arm's TCP]: the differential
    IK's measure (``references/diff_ik_task.py``, there from a Cholesky factor)."""
    determinant = float(np.linalg.det(jacobian.dot(jacobian.T)))
    return math.sqrt(determinant) if determinant > 0 else 0.0


def check_pose_values(
    frame: str,
    stamp: float,
    position: tuple[float, float, float],
    quaternion: tuple[float, float, float, float],
    now: float,
    base_frame: str,
    tcp_frame: str,
    tcp_pose: FloatArray | None,
    parameters: ServoParameters,
) -> tuple[FloatArray, float]:
    """A streamed pose (``frame``, ``stamp`` [s] on the node's clock, 0 = now; position [m];
    quaternion x, y, z, w) checked into (4x4 TCP pose in the base frame, age [s]), or
    :class:`StreamError` with the reason. ``frame`` is the base frame or the TCP frame (then
    the pose is relative to the measured TCP pose ``tcp_pose``, base frame; None: refused).
    Order of the checks: frame, stamp (older than ``incoming_command_timeout``, or further in
    the future than ``future_tolerance``), finite, distance, unit quaternion."""
    if frame not in (base_frame, tcp_frame):
        raise StreamError(
            FRAME, f"frame {frame!r}: streamed targets are in '{base_frame}' or '{tcp_frame}'"
        )
    age = checked_age(stamp, now, parameters)
    values = (*position, *quaternion)
    if not all(math.isfinite(v) for v in values):
        raise StreamError(NOT_FINITE, f"non-finite value in {list(values)}")
    distance = math.hypot(*position)
    if distance > MAX_TARGET_DISTANCE:
        raise StreamError(FAR, f"position {distance:.3g} m from the frame's origin")
    norm = math.hypot(*quaternion)
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        raise StreamError(QUATERNION, f"not a unit quaternion (norm {norm:.6f})")
    x, y, z, w = (v / norm for v in quaternion)
    pose = np.eye(4)
    pose[:3, :3] = pin.Quaternion(w, x, y, z).toRotationMatrix()
    pose[:3, 3] = position
    if frame == tcp_frame:
        if tcp_pose is None:
            raise StreamError(FRAME, f"frame {frame!r}: no measured TCP pose yet")
        pose = tcp_pose.dot(pose)
    return pose, age


def check_twist_values(
    frame: str,
    stamp: float,
    linear: tuple[float, float, float],
    angular: tuple[float, float, float],
    now: float,
    base_frame: str,
    tcp_frame: str,
    parameters: ServoParameters,
) -> tuple[FloatArray, bool, float]:
    """A streamed twist (``frame`` whose axes it is in, ``stamp`` [s] on the node's clock, 0 =
    now; linear [m/s]; angular [rad/s]) checked into (twist (6,), in TCP axes?, age [s]), or
    :class:`StreamError` with the reason: a frame other than the base or the TCP, a stale or
    future stamp (as :func:`check_pose_values`), a non-finite value. A speed beyond the
    servo's bounds is not refused: it is scaled down to them, as MoveIt Servo does."""
    if frame not in (base_frame, tcp_frame):
        raise StreamError(
            FRAME, f"frame {frame!r}: streamed twists are in '{base_frame}' or '{tcp_frame}'"
        )
    age = checked_age(stamp, now, parameters)
    values = (*linear, *angular)
    if not all(math.isfinite(v) for v in values):
        raise StreamError(NOT_FINITE, f"non-finite value in {list(values)}")
    return np.array(values, dtype=np.float64), frame == tcp_frame, age


def checked_age(stamp: float, now: float, parameters: ServoParameters) -> float:
    """A streamed message's age [s] (stamp 0: now), or StreamError: stale or from the future."""
    age = 0.0 if stamp == 0.0 else now - stamp
    if age > parameters.incoming_command_timeout:
        raise StreamError(
            STALE,
            f"stamped {age:.3f} s ago (incoming_command_timeout "
            f"{parameters.incoming_command_timeout} s)",
        )
    if age < -parameters.future_tolerance:
        raise StreamError(
            FUTURE,
            f"stamped {-age:.3f} s in the future (tolerance {parameters.future_tolerance} s)",
        )
    return age


class ServoStatus(NamedTuple):
    """What the servo does: a code (this module's constants) and why, in words."""

    code: int
    message: str


class ServoOutput(NamedTuple):
    """One tick's commanded TCP pose (4x4, base frame) and twist (6: linear [m/s]; angular
    [rad/s], base axes), and the singularity scale that bounded it."""

    pose: FloatArray
    twist: FloatArray
    scale: float


class _Target(NamedTuple):
    pose: FloatArray | None  # 4x4, base frame (a pose stream's)
    expires: float  # [s] loop clock
    twist: FloatArray | None = None  # (6,) a twist stream's, in base or TCP axes
    tcp_axes: bool = False  # the twist's axes: the commanded TCP's (else the base's)


STATUS_HISTORY = 64  # status changes kept for the publisher between two of its reads


class StatusLog:
    """A stream's status (control thread) and its changes, queued for the publisher."""

    def __init__(self) -> None:
        self._status_lock = threading.Lock()
        self.status = ServoStatus(INACTIVE, "no stream selected")
        self._changes: collections.deque[ServoStatus] = collections.deque(maxlen=STATUS_HISTORY)
        self._changes.append(self.status)

    def set_status(self, code: int, message: str) -> None:
        """Record a status (kept if it differs from the current one)."""
        status = ServoStatus(code, message)
        if status != self.status:
            self.status = status
            with self._status_lock:
                self._changes.append(status)

    def take_statuses(self) -> list[ServoStatus]:
        """Every status change since the last call, oldest first. Any thread."""
        with self._status_lock:
            changes = list(self._changes)
            self._changes.clear()
        return changes


def tick_step(last: float | None, now: float, period: float) -> float:
    """A stream's step [s] at ``now``: the time since the previous tick at ``last`` (None:
    none yet), at most ``MAX_STEP_PERIODS`` × ``period`` — so a loop that skipped ticks on a
    loaded machine still moves at the commanded speed in time — or ``period`` when no time is
    known to have passed."""
    if last is None or now <= last:
        return period
    return min(now - last, MAX_STEP_PERIODS * period)


class Servo(StatusLog):
    """See the module docstring. :meth:`offer` from any thread; :meth:`update` and
    :meth:`restart` on the control thread; :meth:`take_statuses` from the publisher's."""

    def __init__(self, parameters: ServoParameters) -> None:
        super().__init__()
        self.parameters = parameters
        self._lock = threading.Lock()
        self._offered: _Target | None = None
        self._pose: FloatArray | None = None  # commanded, 4x4
        self._twist = np.zeros(6)  # commanded
        self._fresh = False
        self._stamp: float | None = None  # [s] ``now`` of the last update

    def offer(self, pose: FloatArray, arrival: float, age: float) -> None:
        """A checked target (4x4, base frame; :func:`check_pose_values`) received at ``arrival``
        [s, the loop's clock], ``age`` [s] old then: fresh until the timeout runs out. Any
        thread; the newest offer wins."""
        expires = arrival + self.parameters.incoming_command_timeout - max(age, 0.0)
        target = _Target(np.array(pose, dtype=np.float64), expires)
        with self._lock:
            self._offered = target

    def offer_twist(self, twist: FloatArray, tcp_axes: bool, arrival: float, age: float) -> None:
        """A checked twist (:func:`check_twist_values`: linear [m/s]; angular [rad/s] of the TCP
        origin, in the base's axes or, ``tcp_axes``, the commanded TCP's) received at
        ``arrival`` [s, loop clock], ``age`` [s] old: the commanded pose moves at it (within the
        speed and acceleration bounds) while it is fresh. Any thread; the newest offer wins."""
        expires = arrival + self.parameters.incoming_command_timeout - max(age, 0.0)
        target = _Target(None, expires, np.array(twist, dtype=np.float64), tcp_axes)
        with self._lock:
            self._offered = target

    def drop_target(self) -> None:
        """No target from now on: the next tick halts from the measured state. Any thread."""
        with self._lock:
            self._offered = None

    def restart(self) -> None:
        """Forget the commanded pose and any target: the next :meth:`update` starts from the
        measured state (a stream (re)selected)."""
        with self._lock:
            self._offered = None
        self._pose = None
        self._stamp = None

    @property
    def moving(self) -> bool:
        """Whether the commanded twist is not zero (control thread's; any thread may read)."""
        return bool(np.any(self._twist != 0.0))

    @property
    def commanded_pose(self) -> FloatArray | None:
        pose = self._pose
        return None if pose is None else pose.copy()

    def update(
        self,
        now: float,
        measured_pose: FloatArray,
        measured_twist: FloatArray,
        measure: float,
        dt: float,
    ) -> ServoOutput:
        """One tick at ``now`` [s, loop clock]: ``measured_pose`` (4x4) and ``measured_twist``
        (6) of the TCP in the base frame, ``measure`` the manipulability of its Jacobian,
        ``dt`` [s]. Returns the commanded pose and twist (new arrays)."""
        p = self.parameters
        with self._lock:
            target = self._offered
        fresh = target is not None and now <= target.expires
        last, self._stamp = self._stamp, now
        if self._pose is None or (self._fresh and not fresh):
            # Start, or the stream went stale: from the measured state, never the last target
            # (a period from it).
            self._pose = np.array(measured_pose, dtype=np.float64)
            self._twist = np.array(measured_twist, dtype=np.float64)
        else:
            dt = tick_step(last, now, dt)
        self._fresh = fresh
        scale = singularity_scale(measure, p)
        pose = self._pose
        desired = np.zeros(6)
        if fresh and target is not None and target.twist is not None and scale > 0.0:
            desired[:] = target.twist
            if target.tcp_axes:  # the commanded TCP's axes, as they turn
                desired[:3] = pose[:3, :3].dot(desired[:3])
                desired[3:] = pose[:3, :3].dot(desired[3:])
            desired[:3] = _clipped(desired[:3], scale * p.max_linear_speed)
            desired[3:] = _clipped(desired[3:], scale * p.max_angular_speed)
        elif fresh and target is not None and target.pose is not None and scale > 0.0:
            linear = target.pose[:3, 3] - pose[:3, 3]
            angular = pin.log3(target.pose[:3, :3].dot(pose[:3, :3].T))
            desired[:3] = _toward(linear, p.max_linear_acceleration, scale * p.max_linear_speed, dt)
            desired[3:] = _toward(
                angular, p.max_angular_acceleration, scale * p.max_angular_speed, dt
            )
        twist = self._twist
        twist[:3] += _clipped(desired[:3] - twist[:3], p.max_linear_acceleration * dt)
        twist[3:] += _clipped(desired[3:] - twist[3:], p.max_angular_acceleration * dt)
        if scale < 1.0:
            # Near a singularity the scaled bound holds at once, not after a_max's ramp: the
            # manipulability falls fast near a stretched arm's singularity (0.08 to 0 m³ in
            # 0.2 s at 0.25 m/s, measured), faster than a_max could bring the speed down, and
            # the arm ended inside the stop band. This deceleration is the singularity's.
            twist[:3] = _clipped(twist[:3], scale * p.max_linear_speed)
            twist[3:] = _clipped(twist[3:], scale * p.max_angular_speed)
        moved = np.empty((4, 4))
        moved[3] = (0.0, 0.0, 0.0, 1.0)
        moved[:3, 3] = pose[:3, 3] + twist[:3] * dt
        moved[:3, :3] = pin.exp3(twist[3:] * dt).dot(pose[:3, :3])
        self._pose = moved
        self._report(fresh, scale, measure)
        return ServoOutput(moved.copy(), twist.copy(), scale)

    def _report(self, fresh: bool, scale: float, measure: float) -> None:
        if not fresh:
            moving = bool(np.any(self._twist != 0.0))
            self.set_status(
                HALTING_NO_COMMAND,
                f"no fresh target for {self.parameters.incoming_command_timeout} s: "
                + ("halting" if moving else "holding"),
            )
        elif scale <= 0.0:
            self.set_status(
                HALT_FOR_SINGULARITY,
                f"near a singularity (manipulability below {self.parameters.singularity_stop} "
                "m³): stopped",
            )
        elif scale < 1.0:
            # The scale in tenths: a status per change, not per tick.
            self.set_status(
                DECELERATE_FOR_SINGULARITY,
                f"near a singularity (manipulability below "
                f"{self.parameters.singularity_slowdown} m³): speed scaled to "
                f"{math.floor(scale * 10) * 10} %",
            )
        else:
            self.set_status(NO_WARNING, "following the stream")


def _toward(error: FloatArray, acceleration: float, top: float, dt: float) -> FloatArray:
    """The velocity toward ``error`` away, along e: the fastest that still stops within ‖e‖
    at ``acceleration`` in steps of ``dt`` — v with v dt + v²/(2a) + v dt/2 = ‖e‖, the sampled
    form of √(2 a ‖e‖), which arrives without overshoot — at most ``top``."""
    x, y, z = error.tolist()
    distance = math.sqrt(x * x + y * y + z * z)
    if distance <= 0.0:
        return np.zeros(3)
    step = acceleration * dt
    braking = step * (math.sqrt(2.25 + 2.0 * distance / (step * dt)) - 1.5)
    speed = min(max(braking, 0.0), top)
    return error * (speed / distance)


def _clipped(change: FloatArray, bound: float) -> FloatArray:
    """``change`` scaled to a norm of at most ``bound``."""
    x, y, z = change.tolist()
    norm = math.sqrt(x * x + y * y + z * z)
    return change if norm <= bound else change * (bound / norm)
