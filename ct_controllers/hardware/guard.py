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
from typing import NamedTuple

import numpy as np

from ct_controllers.hardware.samples import JointCommand, StateSample
from ct_controllers.types import FloatArray

_FLOAT = np.dtype(np.float64)
_isfinite = math.isfinite  # bound once: the control thread calls it on every sample
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
    """The verdict on one sample or command (:meth:`BoundaryGuard.check_state`,
    :meth:`BoundaryGuard.check_command`).

    accepted  passed every check
    fresh     accepted and newer than the last accepted sample (always True for commands)
    reason    None when accepted, else one of the reason constants of this module
    message   a sentence naming the problem ("" when accepted)
    sample    the accepted state sample re-ordered to the guard's joint order, its own arrays
              (None otherwise)
    values    the accepted command's values in the guard's joint order (None otherwise)
    """

    accepted: bool
    fresh: bool
    reason: str | None
    message: str
    sample: StateSample | None = None
    values: FloatArray | None = None


class Rejection(NamedTuple):
    """Why :meth:`BoundaryGuard.admit_state` or :meth:`BoundaryGuard.admit_command` refused:
    one of this module's reason constants, and a sentence naming the problem."""

    reason: str
    message: str


# The verdicts of BoundaryGuard.admit_state on an accepted sample.
FRESH = "fresh"  # newer than the last accepted sample
REPEATED = "repeated"  # the same sample again (a reader polling faster than its source)


def _reject(reason: str, message: str) -> GuardResult:
    return GuardResult(accepted=False, fresh=False, reason=reason, message=message)


def _name_order(
    names: Sequence[str], expected: Sequence[str], sizes: Mapping[str, int]
) -> tuple[list[int] | None, Rejection | None]:
    """Indices that re-order ``names`` into ``expected``, or the rejection."""
    for what, size in sizes.items():
        if size != len(names):
            return None, Rejection(LENGTH, f"length mismatch: {len(names)} names, {size} {what}")
    if tuple(names) == tuple(expected):
        # Already in this hardware's order (``expected`` has no duplicates), so nothing is
        # unknown, missing or listed twice.
        return list(range(len(expected))), None
    position_of: dict[str, int] = {}
    duplicates = []
    for i, name in enumerate(names):
        if name in position_of:
            duplicates.append(name)
        position_of[name] = i
    if duplicates:
        return None, Rejection(
            DUPLICATE_JOINT, f"joint(s) listed twice: {', '.join(sorted(set(duplicates)))}"
        )
    known = set(expected)
    unknown = [n for n in names if n not in known]
    if unknown:
        return None, Rejection(
            UNKNOWN_JOINT,
            f"unknown joint(s): {', '.join(unknown)}; this hardware has: {', '.join(expected)}",
        )
    missing = [n for n in expected if n not in position_of]
    if missing:
        return None, Rejection(MISSING_JOINT, f"no value for joint(s): {', '.join(missing)}")
    return [position_of[n] for n in expected], None


def _float_vector(values: object) -> FloatArray:
    """``values`` as a float64 vector: itself when it already is one, else a converted copy."""
    if type(values) is np.ndarray and values.dtype == _FLOAT and values.ndim == 1:
        return values
    return np.asarray(values, dtype=np.float64).reshape(-1)


class BoundaryGuard:
    """Checks state samples and commands for one hardware's ``joint_names``; thread-safe
    counters per reason (``state.<reason>``, ``command.<reason>``).

    The joint order of a source is mapped once: the index array that takes a sample's values
    into this hardware's order is computed for the first sample that names its joints in that
    order (the hardware's own order needs none: an identity index built here) and reused while
    the source keeps its order; a sample is checked where it lies, never re-sorted.

    The limits are set when the guard is built, or once by the stack at bring-up from the
    configuration (:meth:`configure`); :attr:`limits` is read-only.

    The control thread's calls, :meth:`admit_state` and :meth:`admit_command`, keep nothing they
    create on healthy data (the finiteness test's floats live for the call): a verdict constant,
    the sample's own arrays (:attr:`position`, :attr:`velocity`, :attr:`effort` and
    :attr:`order`), the command's own values. :meth:`check_state` and
    :meth:`check_command` give the same verdicts as a :class:`GuardResult` carrying copies.
    State samples are checked by one thread at a time (the control thread): the arrays of the
    last accepted one are left on the guard for it.
    """

    def __init__(self, joint_names: Sequence[str], limits: GuardLimits | None = None) -> None:
        self.joint_names = tuple(joint_names)
        self._shape = (len(self.joint_names),)
        # This hardware's order: the identity index (read-only, shared by every sample in it).
        self._in_order = np.arange(len(self.joint_names))
        self._in_order.setflags(write=False)
        # The last source order seen (its names, as given) and its index into hardware order.
        self._source_names: tuple[str, ...] = self.joint_names
        self._source_order: np.ndarray = self._in_order
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._accepted_states = 0
        self._accepted_commands = 0
        self._last_stamp = -math.inf  # [s] of the last accepted state sample
        self._last_sequence: int | None = None  # of the last accepted state sample
        self.last_rejection: str = ""
        # The command interface tuple last verified, and the claim it was verified against.
        self._verified_interfaces: tuple[object, dict[str, str]] = (None, {})
        # The last accepted sample's arrays (its own, float64, in its source's order) and the
        # index that takes them into this hardware's order: joint i is position[order[i]].
        empty = np.full(self._shape, np.nan)
        self.position: FloatArray = empty
        self.velocity: FloatArray = empty
        self.effort: FloatArray = empty
        self.order: np.ndarray = self._in_order
        self.configure(limits or GuardLimits())

    def configure(self, limits: GuardLimits) -> None:
        """Check against ``limits`` from now on (the stack calls this once at bring-up, from the
        configuration: ``max_state_age``, ``future_tolerance``, ``frame_id``)."""
        with self._lock:
            self._limits = limits
            self._max_state_age = limits.max_state_age  # [s]
            self._future_tolerance = limits.future_tolerance  # [s]
            self._expected_frame = limits.expected_frame

    @property
    def limits(self) -> GuardLimits:
        """The limits checked against (set by the constructor or :meth:`configure`)."""
        return self._limits

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
            return {"state": self._accepted_states, "command": self._accepted_commands}

    def _refused(self, kind: str, rejection: Rejection) -> Rejection:
        """Count ``rejection`` under ``kind.reason``."""
        with self._lock:
            key = f"{kind}.{rejection.reason}"
            self._counts[key] = self._counts.get(key, 0) + 1
            self.last_rejection = f"{kind}: {rejection.message}"
        return rejection

    # --- state -----------------------------------------------------------------------------
    def read_failed(self, message: str) -> GuardResult:
        """A read that raised (bus or driver error): counted as ``state.read_error``."""
        return _reject(READ_ERROR, self._refused("state", Rejection(READ_ERROR, message)).message)

    def check_state(self, sample: StateSample, now: float) -> GuardResult:
        """Check ``sample`` against this process's clock ``now`` [s] (:meth:`admit_state`); an
        accepted sample comes back in this hardware's joint order, in arrays of its own."""
        verdict = self.admit_state(sample, now)
        if isinstance(verdict, Rejection):
            return _reject(verdict.reason, verdict.message)
        order = self.order
        return GuardResult(
            accepted=True,
            fresh=verdict is FRESH,
            reason=None,
            message="",
            sample=StateSample(
                stamp=sample.stamp,
                joint_names=self.joint_names,
                position=self.position[order],
                velocity=self.velocity[order],
                effort=self.effort[order],
                sequence=sample.sequence,
                frame_id=sample.frame_id,
            ),
        )

    def admit_state(self, sample: StateSample, now: float) -> str | Rejection:
        """Check ``sample`` against this process's clock ``now`` [s]: :data:`FRESH`,
        :data:`REPEATED` (accepted, the same sample again), or the :class:`Rejection` (counted).

        Accepted, its arrays are left in :attr:`position`, :attr:`velocity` and :attr:`effort`
        (float64 vectors: the sample's own when they already are, converted copies otherwise;
        in the sample's order) and :attr:`order`, the index that takes them into this
        hardware's order: joint ``joint_names[i]`` has ``position[order[i]]``. They are the
        caller's to copy, not to change; the next check replaces them."""
        stamp = sample.stamp
        if stamp is None or not _isfinite(stamp):
            return self._refused_state(NO_STAMP, f"state sample without a valid stamp ({stamp})")
        age = now - stamp
        if abs(age) > CLOCK_DOMAIN_GAP:
            return self._refused_state(
                CLOCK_DOMAIN,
                f"stamp {stamp:.6f} s is {age:+.3g} s from this process's clock ({now:.6f} s): "
                "another clock domain",
            )
        if age > self._max_state_age:
            return self._refused_state(
                STALE,
                f"state sample is {age * 1e3:.3f} ms old (max_state_age "
                f"{self._max_state_age * 1e3:.3f} ms)",
            )
        if -age > self._future_tolerance:
            return self._refused_state(
                FUTURE,
                f"state sample stamped {-age * 1e3:.3f} ms in the future (future_tolerance "
                f"{self._future_tolerance * 1e3:.3f} ms)",
            )
        expected = self._expected_frame
        if expected and sample.frame_id is not None and sample.frame_id != expected:
            return self._refused_state(
                FRAME, f"frame id '{sample.frame_id}', expected '{expected}'"
            )
        position, velocity, effort = sample.position, sample.velocity, sample.effort
        names = sample.joint_names
        # The common case, every tick: names in the order seen before (the hardware's own, or
        # the source's mapped once), float64 vectors of the right length, every value finite —
        # a few comparisons and one finiteness test. A sum is finite only when every term is
        # (inf, -inf and NaN each make it non-finite); one that overflows goes to the full
        # check, which accepts it. Summed as Python floats: for a few joints, cheaper than a
        # vector call (``dot``) per array. A float64 dtype is numpy's one instance: compared by
        # identity (any other falls to the full check, which converts).
        shape = self._shape
        if (
            (names is self._source_names or names == self._source_names)
            and type(position) is np.ndarray
            and type(velocity) is np.ndarray
            and type(effort) is np.ndarray
            and position.shape == shape
            and velocity.shape == shape
            and effort.shape == shape
            and position.dtype is _FLOAT
            and velocity.dtype is _FLOAT
            and effort.dtype is _FLOAT
            and _isfinite(sum(position.tolist()) + sum(velocity.tolist()) + sum(effort.tolist()))
        ):
            order = self._source_order
        else:
            checked = self._checked_values(sample)
            if isinstance(checked, Rejection):
                return self._refused("state", checked)
            position, velocity, effort, order = checked
        sequence = sample.sequence
        lock = self._lock
        lock.acquire()  # not ``with``: two thirds of its cost, every tick
        try:
            last_stamp, last_sequence = self._last_stamp, self._last_sequence
            backwards = stamp < last_stamp or (
                sequence is not None and last_sequence is not None and sequence < last_sequence
            )
            if not backwards:
                if sequence is not None and last_sequence == sequence:
                    fresh = False  # the same sample again, whatever its stamp says
                else:
                    fresh = stamp > last_stamp or (
                        sequence is not None
                        and last_sequence is not None
                        and sequence > last_sequence
                    )
                if fresh:
                    self._last_stamp = stamp
                    self._last_sequence = sequence
                self._accepted_states += 1
        finally:
            lock.release()
        if backwards:
            return self._refused_state(
                SEQUENCE,
                f"state sample goes backwards: stamp {stamp:.6f} s (seq {sequence}) "
                f"after {last_stamp:.6f} s (seq {last_sequence})",
            )
        self.position, self.velocity, self.effort, self.order = position, velocity, effort, order
        return FRESH if fresh else REPEATED

    def _refused_state(self, reason: str, message: str) -> Rejection:
        """Count a rejected state sample (``state.<reason>``)."""
        return self._refused("state", Rejection(reason, message))

    def _checked_values(
        self, sample: StateSample
    ) -> tuple[FloatArray, FloatArray, FloatArray, np.ndarray] | Rejection:
        """(position, velocity, effort) as float64 vectors in the sample's order and the index
        into this hardware's order (remembered for the next samples in that order), or the
        rejection naming the unknown, missing or duplicate joint, the length or the non-finite
        value."""
        position = _float_vector(sample.position)
        velocity = _float_vector(sample.velocity)
        effort = _float_vector(sample.effort)
        names = sample.joint_names
        sizes = {"positions": position.size, "velocities": velocity.size, "efforts": effort.size}
        order_list, rejection = _name_order(names, self.joint_names, sizes)
        if rejection is not None:
            return rejection
        assert order_list is not None
        if names == self._source_names:
            order = self._source_order
        elif names == self.joint_names:
            order = self._in_order
        else:
            order = np.array(order_list, dtype=np.intp)
            order.setflags(write=False)
        for what, values in (("position", position), ("velocity", velocity)):
            bad = ~np.isfinite(values[order])
            if bad.any():
                return Rejection(
                    NON_FINITE,
                    f"non-finite {what} for joint(s) "
                    + ", ".join(
                        f"{n}={v}"
                        for n, v, b in zip(self.joint_names, values[order], bad, strict=True)
                        if b
                    ),
                )
        infinite = np.isinf(effort[order])
        if infinite.any():
            named = [n for n, b in zip(self.joint_names, infinite, strict=True) if b]
            return Rejection(NON_FINITE, f"infinite effort for joint(s) {', '.join(named)}")
        self._source_names, self._source_order = tuple(names), order
        return position, velocity, effort, order

    # --- commands --------------------------------------------------------------------------
    def check_command(
        self,
        command: JointCommand,
        interfaces: Mapping[str, str],
        last_sequence: int,
        now: float,
    ) -> GuardResult:
        """Check ``command`` against the claimed ``interfaces`` (joint → interface), the last
        accepted ``last_sequence`` and the hardware clock ``now`` [s] (:meth:`admit_command`)."""
        verdict = self.admit_command(command, interfaces, last_sequence, now)
        if isinstance(verdict, Rejection):
            return _reject(verdict.reason, verdict.message)
        return GuardResult(accepted=True, fresh=True, reason=None, message="", values=verdict)

    def admit_command(
        self,
        command: JointCommand,
        interfaces: Mapping[str, str],
        last_sequence: int,
        now: float,
    ) -> FloatArray | Rejection:
        """The command's values in this hardware's joint order — the command's own array when it
        names this hardware's joints in order as a float64 vector (the control loop's every
        tick; a backend copies what it keeps), else a re-ordered copy — or the
        :class:`Rejection` (counted)."""
        verdict = self._admit_command(command, interfaces, last_sequence, now)
        if isinstance(verdict, Rejection):
            return self._refused("command", verdict)
        lock = self._lock
        lock.acquire()  # not ``with``: two thirds of its cost, every tick
        self._accepted_commands += 1  # (cannot raise: no try needed)
        lock.release()
        return verdict

    def _admit_command(
        self,
        command: JointCommand,
        interfaces: Mapping[str, str],
        last_sequence: int,
        now: float,
    ) -> FloatArray | Rejection:
        values = self._command_in_order_and_finite(command, interfaces)
        if values is None:
            checked = self._checked_command_values(command, interfaces)
            if isinstance(checked, Rejection):
                return checked
            values = checked
        stamp = command.stamp
        if stamp is None or not math.isfinite(stamp):
            return Rejection(NO_STAMP, f"non-finite stamp {stamp}")
        if stamp - now > self._future_tolerance:
            return Rejection(
                FUTURE,
                f"command stamp {stamp:.6f} s is {(stamp - now) * 1e3:.3f} ms in the future",
            )
        if command.sequence <= last_sequence:
            return Rejection(
                SEQUENCE,
                f"sequence {command.sequence} is not after the last one ({last_sequence})",
            )
        return values

    def _command_in_order_and_finite(
        self, command: JointCommand, interfaces: Mapping[str, str]
    ) -> FloatArray | None:
        """The values when the command names this hardware's joints in its order, through the
        claimed interfaces, as a float64 vector, every value finite — the control loop's every
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
        values = command.values
        # A float64 dtype is numpy's one instance (any other falls to the full check, which
        # converts); a sum of Python floats is finite only when every value is (cheaper than a
        # vector call for a few joints; one that overflows goes to the full check).
        if (
            type(values) is not np.ndarray
            or values.dtype is not _FLOAT
            or values.shape != self._shape
            or not _isfinite(sum(values.tolist()))
        ):
            return None
        return values

    def _checked_command_values(
        self, command: JointCommand, interfaces: Mapping[str, str]
    ) -> FloatArray | Rejection:
        """The values re-ordered by name to this hardware's order (a copy), or the rejection
        naming the joint, interface, length or non-finite value."""
        sizes = {"interfaces": len(command.interfaces), "values": len(command.values)}
        order, rejection = _name_order(command.joint_names, self.joint_names, sizes)
        if rejection is not None:
            return rejection
        assert order is not None
        values = np.asarray(command.values, dtype=np.float64)[order]
        for name, i, value in zip(self.joint_names, order, values, strict=True):
            if command.interfaces[i] != interfaces[name]:
                return Rejection(
                    INTERFACE,
                    f"joint '{name}' is commanded through '{interfaces[name]}', "
                    f"got '{command.interfaces[i]}'",
                )
            if not math.isfinite(float(value)):
                return Rejection(NON_FINITE, f"joint '{name}': non-finite value {value}")
        return values
