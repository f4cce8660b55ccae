"""Sensor-side fault injection around any backend, for tests and ``ct-bench faults``.

:class:`InjectingSystem` wraps a real backend (MuJoCo, the bridge, CANopen) and passes every call
through, except that :meth:`InjectingSystem.inject` corrupts what ``read()`` returns from then on,
as a broken sensor or link would: the plant keeps running on whatever was last written. The code
under test (guard, watchdog, loop, fault reaction) sees the corrupted samples through the normal
interface; nothing of it is replaced.

Fault classes (``FAULTS``):
- ``stall``: the same sample again and again (a frozen sensor or a dead link);
- ``nan``: one joint's position is NaN;
- ``inf``: one joint's velocity is +inf;
- ``stale``: stamps 1 s in the past;
- ``future``: stamps 1 s in the future;
- ``unknown_joint``: one joint renamed;
- ``read_error``: ``read()`` raises (a bus or driver error).
"""

from __future__ import annotations

import threading

import numpy as np

from ct_controllers.hardware.interface import (
    ActuationReport,
    FloatArray,
    JointCommand,
    ObjectSensing,
    StateSample,
    SystemInterface,
)

FAULTS = ("stall", "nan", "inf", "stale", "future", "unknown_joint", "read_error")


class InjectingSystem(SystemInterface):
    """``inner`` with injectable sensor faults; the lifecycle runs on both."""

    def __init__(self, inner: SystemInterface) -> None:
        super().__init__(
            joint_names=inner.joint_names,
            command_interfaces=inner.command_interfaces,
            armed=inner.armed,  # as the inner backend was built
        )
        self.inner = inner
        self.backend_name = f"{inner.backend_name} (fault injection)"
        self.fault_reactions = inner.fault_reactions
        self.requires_arming = inner.requires_arming
        # Capabilities are the inner backend's.
        self.paced_by_read = inner.paced_by_read
        self.measurement_delay = inner.measurement_delay
        self.publishes_clock = inner.publishes_clock
        self._lock = threading.Lock()
        self._fault: str | None = None
        self._frozen: StateSample | None = None
        self.injected_at: float | None = None  # [s] hardware clock

    def inject(self, fault: str | None) -> None:
        """Corrupt every read from now on (None = healthy again)."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault '{fault}' (known: {', '.join(FAULTS)})")
        with self._lock:
            self._fault = fault
            self._frozen = None
            self.injected_at = self.inner.now() if fault is not None else None

    @property
    def loop_paced(self) -> bool:
        return self.inner.loop_paced

    def describe(self) -> str:
        return f"{self.inner.describe()}, with fault injection"

    def object_sensor(self) -> ObjectSensing | None:
        return self.inner.object_sensor()

    def effort_limit_range(self, joint: str) -> tuple[float, float] | None:
        return self.inner.effort_limit_range(joint)

    def _set_effort_limit(self, joint: str, limit: float | None) -> None:
        self.inner.set_effort_limit(joint, limit)

    # --- lifecycle: both objects move together ---------------------------------------------
    def _on_configure(self) -> None:
        self.inner.configure()  # a bus master checks its arming already here

    def _on_activate(self) -> None:
        self.inner.activate()

    def _on_deactivate(self) -> None:
        self.inner.deactivate()

    def _on_cleanup(self) -> None:
        self.inner.cleanup()

    # --- cyclic ----------------------------------------------------------------------------
    def _read(self) -> StateSample:
        sample = self.inner.read()
        with self._lock:
            fault = self._fault
            if fault == "stall":
                if self._frozen is None:
                    self._frozen = sample
                return self._frozen
        if fault is None:
            return sample
        if fault == "read_error":
            raise OSError("injected read error")
        position = np.array(sample.position, dtype=np.float64)
        velocity = np.array(sample.velocity, dtype=np.float64)
        names = list(sample.joint_names)
        if fault == "nan":
            position[1] = np.nan
        elif fault == "inf":
            velocity[0] = np.inf
        elif fault == "unknown_joint":
            names[2] = "ghost_joint"
        stamp = sample.stamp
        if fault == "stale":
            stamp -= 1.0
        elif fault == "future":
            stamp += 1.0
        return sample._replace(
            stamp=stamp, joint_names=tuple(names), position=position, velocity=velocity
        )

    def _write(self, command: JointCommand, values: FloatArray) -> None:
        self.inner.write(command)

    def now(self) -> float:
        return self.inner.now()

    def actuation_report(self) -> ActuationReport | None:
        return self.inner.actuation_report()

    def fault(self) -> str | None:
        return self.inner.fault()

    def reset_fault(self) -> None:
        self.inner.reset_fault()

    def apply_fault_reaction(self, reaction: str) -> None:
        self.inner.apply_fault_reaction(reaction)

    def diagnostics(self) -> dict[str, object]:
        return self.inner.diagnostics()
