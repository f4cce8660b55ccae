"""ct_controllers.runtime.effort_limits: only changed limits of position joints reach the
backend (a stand-in that records set_effort_limit calls)."""

from __future__ import annotations

import numpy as np

from ct_controllers.runtime.effort_limits import EffortLimits


class Backend:
    joint_names = ("finger", "shoulder", "elbow")  # hardware order

    def __init__(self) -> None:
        self.calls: list[tuple[str, float | None]] = []

    def set_effort_limit(self, name: str, limit: float | None) -> None:
        self.calls.append((name, limit))


def limits() -> tuple[EffortLimits, Backend]:
    backend = Backend()
    # model order: shoulder, elbow, finger; only the finger is on the position interface
    handoff = EffortLimits(
        backend,  # type: ignore[arg-type]
        np.array([2, 0, 1]),
        np.array([True, False, False]),
    )
    return handoff, backend


def test_a_new_limit_is_handed_on_once_and_the_same_array_costs_nothing():
    """A limit for the position joint is set once; the same array again, or an equal one,
    sets nothing."""
    handoff, backend = limits()
    wanted = np.array([np.nan, np.nan, 5.0])
    handoff.apply(wanted)
    handoff.apply(wanted)
    handoff.apply(wanted.copy())
    assert backend.calls == [("finger", 5.0)]
    assert handoff.current[2] == 5.0


def test_effort_joints_are_skipped_and_none_restores_the_backend_default():
    """Limits asked for effort joints are not handed on; None (or NaN) hands None (the
    backend's default) for a joint that had one."""
    handoff, backend = limits()
    handoff.apply(np.array([10.0, 10.0, 5.0]))
    handoff.apply(None)
    handoff.apply(None)
    assert backend.calls == [("finger", 5.0), ("finger", None)]
    assert np.isnan(handoff.current).all()
