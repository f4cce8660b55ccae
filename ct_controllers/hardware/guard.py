"""The boundary guard: every state sample and command crossing the hardware boundary is checked
here, whatever the backend, and every rejection is counted by reason.

A state sample is accepted when
- its stamp is present (finite) and in this process's clock domain: ``|now − stamp|`` below
  ``CLOCK_DOMAIN_GAP`` (a sim-time stamp against the system clock, or the other way round, is off
  by years, not milliseconds);
- it is not older than ``max_state_age`` [s]: ``now − stamp ≤ max_state_age``;
- it is not in the future beyond ``future_tolerance`` [s]: ``stamp − now ≤ future_tolerance``;
- its stamp (and its sequence number, if the backend gives one) does not go backwards: an older
  sample than the last accepted one is rejected; the *same* sample again is accepted but not
  fresh (a reader polling faster than the producer publishes);
- every position and velocity is finite (efforts may be unmeasured: NaN effort is allowed, ±inf
  is not);
- its joints match by name: no unknown, missing or duplicate names, values re-ordered by name;
- its frame id, where the source carries one and an expected frame is configured, matches.

A command is accepted when its names, interfaces, lengths, values (finite), stamp (finite, not in
the future beyond the tolerance) and sequence (strictly increasing) are valid.

The guard changes nothing it rejects and never raises for bad data: it returns a
:class:`GuardResult` saying why. Counters are per reason (``state.stale``, ``command.sequence``,
...), for ``/diagnostics``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ct_controllers.hardware.interface import FloatArray, JointCommand, StateSample

_FLOAT = np.dtype(np.float64)
CLOCK_DOMAIN_GAP = 1.0e6  # [s] (11.6 days): an offset this large is another clock, not latency

# State rejection reasons.
NO_STAMP = "no_stamp"
CLOCK_DOMAIN = "clock_domain"
STALE = "stale"
FUTURE = "future"
SEQUENCE = "sequence"
NON_FINITE = "non_finite"
UNKNOWN_JOINT = "unknown_joint"
MISSING_JOINT = "missing_joint"
DUPLICATE_JOINT = "duplicate_joint"
LENGTH = "length"
FRAME = "frame"
READ_ERROR = "read_error"
# Command-only reasons.
INTERFACE = "interface"

STATE_REASONS = (
    NO_STAMP,
    CLOCK_DOMAIN,
    STALE,
    FUTURE,
    SEQUENCE,
    NON_FINITE,
    UNKNOWN_JOINT,
    MISSING_JOINT,
    DUPLICATE_JOINT,
    LENGTH,
    FRAME,
    READ_ERROR,
)
COMMAND_REASONS = (
    NO_STAMP,
    FUTURE,
    SEQUENCE,
    NON_FINITE,
    UNKNOWN_JOINT,
    MISSING_JOINT,
    DUPLICATE_JOINT,
    LENGTH,
    INTERFACE,
)


@dataclass(frozen=True)
class GuardLimits:
    """max_state_age [s]: oldest acceptable state sample (now − stamp);
    future_tolerance [s]: how far a stamp may lie ahead of this process's clock;
    expected_frame: the frame id state messages must carry ("" = not checked)."""

    max_state_age: float = 0.01
    future_tolerance: float = 0.001
    expected_frame: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_state_age) and self.max_state_age > 0):
            raise ValueError(f"max_state_age must be finite and > 0 s, got {self.max_state_age}")
        if not (math.isfinite(self.future_tolerance) and self.future_tolerance >= 0):
            raise ValueError(
                f"future_tolerance must be finite and >= 0 s, got {self.future_tolerance}"
            )


@dataclass(frozen=True)
class GuardResult:
    """The verdict on one sample or command.

    accepted  passed every check
    fresh     accepted and newer than the last accepted sample (always True for commands)
    reason    None when accepted, else one of the reason constants of this module
    message   a sentence naming the problem ("" when accepted)
    sample    the accepted state sample re-ordered to the guard's joint order (None otherwise)
    values    the accepted command's values in the guard's joint order (None otherwise)
    """

    accepted: bool
    fresh: bool
    reason: str | None
    message: str
    sample: StateSample | None = None
    values: FloatArray | None = None


def _reject(reason: str, message: str) -> GuardResult:
    return GuardResult(accepted=False, fresh=False, reason=reason, message=message)


def _name_order(
    names: Sequence[str], expected: Sequence[str], sizes: Mapping[str, int]
) -> tuple[list[int] | None, GuardResult | None]:
    """Indices that re-order ``names`` into ``expected``, or the rejection."""
    for what, size in sizes.items():
        if size != len(names):
            return None, _reject(LENGTH, f"length mismatch: {len(names)} names, {size} {what}")
    if tuple(names) == tuple(expected):
        # The common case, every tick: already in this hardware's order (``expected`` has no
        # duplicates), so nothing is unknown, missing or listed twice.
        return list(range(len(expected))), None
    position_of: dict[str, int] = {}
    duplicates = []
    for i, name in enumerate(names):
        if name in position_of:
            duplicates.append(name)
        position_of[name] = i
    if duplicates:
        return None, _reject(
            DUPLICATE_JOINT, f"joint(s) listed twice: {', '.join(sorted(set(duplicates)))}"
        )
    known = set(expected)
    unknown = [n for n in names if n not in known]
    if unknown:
        return None, _reject(
            UNKNOWN_JOINT,
            f"unknown joint(s): {', '.join(unknown)}; this hardware has: {', '.join(expected)}",
        )
    missing = [n for n in expected if n not in position_of]
    if missing:
        return None, _reject(MISSING_JOINT, f"no value for joint(s): {', '.join(missing)}")
    return [position_of[n] for n in expected], None


class BoundaryGuard:
    """Checks state samples and commands for one hardware's ``joint_names``; thread-safe
    counters per reason (``state.<reason>``, ``command.<reason>``)."""

    def __init__(self, joint_names: Sequence[str], limits: GuardLimits | None = None) -> None:
        self.joint_names = tuple(joint_names)
        self.limits = limits or GuardLimits()
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._accepted = {"state": 0, "command": 0}
        self._last_stamp = -math.inf  # [s] of the last accepted state sample
        self._last_sequence: int | None = None  # of the last accepted state sample
        self.last_rejection: str = ""
        # The command interface tuple last verified, and the claim it was verified against.
        self._verified_interfaces: tuple[object, dict[str, str]] = (None, {})

    def reset(self) -> None:
        """Forget the last accepted sample (a backend restart may start its stamps over)."""
        with self._lock:
            self._last_stamp = -math.inf
            self._last_sequence = None

    # --- counters --------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Rejections so far by ``kind.reason`` (only reasons that happened), a copy."""
        with self._lock:
            return dict(self._counts)

    def accepted_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._accepted)

    def _count(self, kind: str, result: GuardResult) -> GuardResult:
        with self._lock:
            if result.accepted:
                self._accepted[kind] += 1
            else:
                key = f"{kind}.{result.reason}"
                self._counts[key] = self._counts.get(key, 0) + 1
                self.last_rejection = f"{kind}: {result.message}"
        return result

    # --- state -----------------------------------------------------------------------------
    def read_failed(self, message: str) -> GuardResult:
        """A read that raised (bus or driver error): counted as ``state.read_error``."""
        return self._count("state", _reject(READ_ERROR, message))

    def check_state(self, sample: StateSample, now: float) -> GuardResult:
        """Check ``sample`` against this process's clock ``now`` [s]."""
        return self._count("state", self._check_state(sample, now))

    def _check_state(self, sample: StateSample, now: float) -> GuardResult:
        stamp = sample.stamp
        if stamp is None or not math.isfinite(stamp):
            return _reject(NO_STAMP, f"state sample without a valid stamp ({stamp})")
        age = now - stamp
        if abs(age) > CLOCK_DOMAIN_GAP:
            return _reject(
                CLOCK_DOMAIN,
                f"stamp {stamp:.6f} s is {age:+.3g} s from this process's clock ({now:.6f} s): "
                "another clock domain",
            )
        if age > self.limits.max_state_age:
            return _reject(
                STALE,
                f"state sample is {age * 1e3:.3f} ms old (max_state_age "
                f"{self.limits.max_state_age * 1e3:.3f} ms)",
            )
        if -age > self.limits.future_tolerance:
            return _reject(
                FUTURE,
                f"state sample stamped {-age * 1e3:.3f} ms in the future (future_tolerance "
                f"{self.limits.future_tolerance * 1e3:.3f} ms)",
            )
        expected = self.limits.expected_frame
        if expected and sample.frame_id is not None and sample.frame_id != expected:
            return _reject(FRAME, f"frame id '{sample.frame_id}', expected '{expected}'")
        values = self._in_order_and_finite(sample)
        if values is not None:  # the common case, every tick: checked in a few vector operations
            position, velocity, effort = values
        else:
            checked = self._checked_values(sample)
            if isinstance(checked, GuardResult):
                return checked
            position, velocity, effort = checked
        with self._lock:
            last_stamp, last_sequence = self._last_stamp, self._last_sequence
            if stamp < last_stamp or (
                sample.sequence is not None
                and last_sequence is not None
                and sample.sequence < last_sequence
            ):
                return _reject(
                    SEQUENCE,
                    f"state sample goes backwards: stamp {stamp:.6f} s (seq {sample.sequence}) "
                    f"after {last_stamp:.6f} s (seq {last_sequence})",
                )
            fresh = stamp > last_stamp or (
                sample.sequence is not None
                and last_sequence is not None
                and sample.sequence > last_sequence
            )
            if sample.sequence is not None and last_sequence == sample.sequence:
                fresh = False  # the same sample again, whatever its stamp says
            if fresh:
                self._last_stamp = stamp
                self._last_sequence = sample.sequence
        return GuardResult(
            accepted=True,
            fresh=fresh,
            reason=None,
            message="",
            sample=StateSample(
                stamp=stamp,
                joint_names=self.joint_names,
                position=position.copy(),
                velocity=velocity.copy(),
                effort=effort.copy(),
                sequence=sample.sequence,
                frame_id=sample.frame_id,
            ),
        )

    def _in_order_and_finite(
        self, sample: StateSample
    ) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        """(position, velocity, effort) when the sample is already in this hardware's joint
        order, as float64 vectors of the right length, every value finite: what every tick of a
        healthy backend sends, checked in a few vector operations. None: the full check
        decides (and names what is wrong). A sum of squares is finite exactly when every term
        is (or overflows past 1e154, which the full check then accepts)."""
        names = sample.joint_names
        if names is not self.joint_names and tuple(names) != self.joint_names:
            return None
        position, velocity, effort = sample.position, sample.velocity, sample.effort
        shape = (len(self.joint_names),)
        for values in (position, velocity, effort):
            if type(values) is not np.ndarray or values.shape != shape or values.dtype != _FLOAT:
                return None
        if not math.isfinite(position.dot(position) + velocity.dot(velocity) + effort.dot(effort)):
            return None
        return position, velocity, effort

    def _checked_values(
        self, sample: StateSample
    ) -> tuple[FloatArray, FloatArray, FloatArray] | GuardResult:
        """(position, velocity, effort) re-ordered by name to this hardware's order, or the
        rejection naming the unknown, missing or duplicate joint, the length or the non-finite
        value."""
        arrays = {
            "positions": np.asarray(sample.position, dtype=np.float64).reshape(-1),
            "velocities": np.asarray(sample.velocity, dtype=np.float64).reshape(-1),
            "efforts": np.asarray(sample.effort, dtype=np.float64).reshape(-1),
        }
        order, rejection = _name_order(
            sample.joint_names, self.joint_names, {k: v.size for k, v in arrays.items()}
        )
        if rejection is not None:
            return rejection
        assert order is not None
        position = arrays["positions"][order]
        velocity = arrays["velocities"][order]
        effort = arrays["efforts"][order]
        for what, values in (("position", position), ("velocity", velocity)):
            bad = ~np.isfinite(values)
            if bad.any():
                return _reject(
                    NON_FINITE,
                    f"non-finite {what} for joint(s) "
                    + ", ".join(
                        f"{n}={v}"
                        for n, v, b in zip(self.joint_names, values, bad, strict=True)
                        if b
                    ),
                )
        if np.isinf(effort).any():
            names = [n for n, e in zip(self.joint_names, effort, strict=True) if np.isinf(e)]
            return _reject(NON_FINITE, f"infinite effort for joint(s) {', '.join(names)}")
        return position, velocity, effort

    # --- commands --------------------------------------------------------------------------
    def check_command(
        self,
        command: JointCommand,
        interfaces: Mapping[str, str],
        last_sequence: int,
        now: float,
    ) -> GuardResult:
        """Check ``command`` against the claimed ``interfaces`` (joint → interface), the last
        accepted ``last_sequence`` and the hardware clock ``now`` [s]."""
        return self._count("command", self._check_command(command, interfaces, last_sequence, now))

    def _check_command(
        self,
        command: JointCommand,
        interfaces: Mapping[str, str],
        last_sequence: int,
        now: float,
    ) -> GuardResult:
        values = self._command_in_order_and_finite(command, interfaces)
        if values is None:
            checked = self._checked_command_values(command, interfaces)
            if isinstance(checked, GuardResult):
                return checked
            values = checked
        if command.stamp is None or not math.isfinite(command.stamp):
            return _reject(NO_STAMP, f"non-finite stamp {command.stamp}")
        if command.stamp - now > self.limits.future_tolerance:
            return _reject(
                FUTURE,
                f"command stamp {command.stamp:.6f} s is "
                f"{(command.stamp - now) * 1e3:.3f} ms in the future",
            )
        if command.sequence <= last_sequence:
            return _reject(
                SEQUENCE,
                f"sequence {command.sequence} is not after the last one ({last_sequence})",
            )
        return GuardResult(accepted=True, fresh=True, reason=None, message="", values=values)

    def _command_in_order_and_finite(
        self, command: JointCommand, interfaces: Mapping[str, str]
    ) -> FloatArray | None:
        """A float64 copy of the values when the command names this hardware's joints in its
        order, through the claimed interfaces, every value finite — the control loop's every
        tick. The interface tuple is compared element by element once and then recognised by
        identity while the claim is unchanged. None: the full check decides."""
        if command.joint_names is not self.joint_names and (
            tuple(command.joint_names) != self.joint_names
        ):
            return None
        given = command.interfaces
        verified_tuple, verified_claim = self._verified_interfaces
        if given is not verified_tuple or interfaces != verified_claim:
            if type(given) is not tuple or given != tuple(
                interfaces.get(name) for name in self.joint_names
            ):
                return None
            self._verified_interfaces = (given, dict(interfaces))
        values = np.array(command.values, dtype=np.float64)
        if values.shape != (len(self.joint_names),) or not math.isfinite(values.dot(values)):
            return None
        return values

    def _checked_command_values(
        self, command: JointCommand, interfaces: Mapping[str, str]
    ) -> FloatArray | GuardResult:
        """The values re-ordered by name to this hardware's order, or the rejection naming the
        joint, interface, length or non-finite value."""
        sizes = {"interfaces": len(command.interfaces), "values": len(command.values)}
        order, rejection = _name_order(command.joint_names, self.joint_names, sizes)
        if rejection is not None:
            return rejection
        assert order is not None
        values = np.asarray(command.values, dtype=np.float64)[order]
        for name, i, value in zip(self.joint_names, order, values, strict=True):
            if command.interfaces[i] != interfaces[name]:
                return _reject(
                    INTERFACE,
                    f"joint '{name}' is commanded through '{interfaces[name]}', "
                    f"got '{command.interfaces[i]}'",
                )
            if not math.isfinite(float(value)):
                return _reject(NON_FINITE, f"joint '{name}': non-finite value {value}")
        return values
