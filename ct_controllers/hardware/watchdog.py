"""The watchdog: deadlines on state freshness and command freshness, on the hardware clock.

- state: ``now − t_state > state_timeout``, where ``t_state`` [s] is the hardware-clock time at
  which the last *fresh* state sample (accepted by the guard and newer than the one before) was
  taken in;
- command: ``now − t_command > command_timeout``, where ``t_command`` [s] is when the last command
  was written.

Both deadlines start when the watchdog is armed (:meth:`start`), so a source that never delivers
expires too. The watchdog only measures; who reacts (the control loop, or a backend's own cycle
thread) latches the fault and applies the fault reaction. Deadlines allow ``SLACK`` (1 ns) for
clocks that are sums of floating-point periods. Pure Python, no threads, thread-safe.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

STATE = "state"
COMMAND = "command"
SLACK = 1e-9  # [s] a deadline expires when the silence exceeds the timeout by more than this


@dataclass(frozen=True)
class WatchdogConfig:
    """state_timeout [s], command_timeout [s]; enabled=False turns both deadlines off.
    ``speed_limit_factor`` [-]: the control loop's runaway check (a joint measured faster than
    this × its URDF velocity limit, :mod:`~ct_controllers.runtime.speed_limit`); 0 = off."""

    state_timeout: float = 0.003
    command_timeout: float = 0.003
    enabled: bool = True
    speed_limit_factor: float = 2.0

    def __post_init__(self) -> None:
        for name in ("state_timeout", "command_timeout"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"watchdog.{name} must be finite and > 0 s, got {value}")
        factor = self.speed_limit_factor
        if not (math.isfinite(factor) and (factor == 0.0 or factor >= 1.0)):
            raise ValueError(f"watchdog.speed_limit_factor must be 0 (off) or >= 1, got {factor}")

    @staticmethod
    def for_period(
        period: float,
        state_timeout: float = 0.0,
        command_timeout: float = 0.0,
        enabled: bool = True,
        periods: int = 3,
    ) -> WatchdogConfig:
        """Timeouts [s] as given, or ``periods`` control periods where given as 0."""
        default = periods * period
        return WatchdogConfig(
            state_timeout=state_timeout or default,
            command_timeout=command_timeout or default,
            enabled=enabled,
        )


@dataclass(frozen=True)
class Expiry:
    """Which deadline expired (``state`` | ``command``), when its last fresh event was
    (``since`` [s], hardware clock) and how long ago (``silence`` [s])."""

    deadline: str
    since: float
    silence: float
    timeout: float

    @property
    def message(self) -> str:
        what = "state" if self.deadline == STATE else "command"
        return (
            f"watchdog: no fresh {what} for {self.silence * 1e3:.3f} ms "
            f"({what}_timeout {self.timeout * 1e3:.3f} ms)"
        )


class Watchdog:
    def __init__(self, config: WatchdogConfig | None = None) -> None:
        self.config = config or WatchdogConfig()
        # The deadlines' bounds [s] (timeout + SLACK), taken from the config once: checked a tick.
        self._state_limit = self.config.state_timeout + SLACK
        self._command_limit = self.config.command_timeout + SLACK
        self._lock = threading.Lock()
        self._state_at = -math.inf
        self._command_at = -math.inf
        self.expiries = {STATE: 0, COMMAND: 0}  # how often each deadline was found expired

    def start(self, now: float) -> None:
        """Arm both deadlines from ``now`` [s]."""
        with self._lock:
            self._state_at = now
            self._command_at = now

    # The control thread's calls, every tick: the lock taken by hand, not by ``with`` (about
    # two thirds of the cost).
    def state_fresh(self, now: float) -> None:
        """A fresh state sample was taken in at ``now`` [s]."""
        lock = self._lock
        lock.acquire()
        try:
            if now > self._state_at:
                self._state_at = now
        finally:
            lock.release()

    def command_written(self, now: float) -> None:
        """A command was written at ``now`` [s]."""
        lock = self._lock
        lock.acquire()
        try:
            if now > self._command_at:
                self._command_at = now
        finally:
            lock.release()

    def state_silence(self, now: float) -> float:
        """[s] since the last fresh state."""
        with self._lock:
            return now - self._state_at

    def command_silence(self, now: float) -> float:
        """[s] since the last written command."""
        with self._lock:
            return now - self._command_at

    def state_deadline(self) -> float:
        """[s] the time at which the state deadline expires unless fresh state comes first
        (inf when the watchdog is off)."""
        if not self.config.enabled:
            return math.inf
        with self._lock:
            return self._state_at + self.config.state_timeout + SLACK

    def check(self, now: float, check_command: bool = True) -> Expiry | None:
        """The first expired deadline at ``now`` [s] (state before command), or None."""
        if not self.config.enabled:
            return None
        lock = self._lock
        lock.acquire()
        state_at, command_at = self._state_at, self._command_at
        lock.release()
        if now - state_at > self._state_limit:
            self.expiries[STATE] += 1
            return Expiry(STATE, state_at, now - state_at, self.config.state_timeout)
        if check_command and now - command_at > self._command_limit:
            self.expiries[COMMAND] += 1
            return Expiry(COMMAND, command_at, now - command_at, self.config.command_timeout)
        return None

    def state_is_fresh(self, now: float) -> bool:
        """Fresh state within ``state_timeout`` (the condition to reset a fault)."""
        return now - self._state_at <= self.config.state_timeout + SLACK
