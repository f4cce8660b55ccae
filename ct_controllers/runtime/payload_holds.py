"""Holds for a payload identification, measured through the running stack: the loop moves the arm
to each configuration with its own joint motions (the jerk-limited references, the controller
that runs), waits for it to settle, and averages what the backend measured (its snapshots'
position, velocity and measured effort — a drive's torque actual, MuJoCo's actuator force).

The caller says how time passes (``advance``): ``loop.run_ticks`` on the same thread for a
lockstep simulation, a sleep beside a loop thread that runs on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ct_controllers.errors import CtError
from ct_controllers.runtime.control_loop import ControlLoop
from ct_controllers.types import FloatArray

SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class HoldSamples:
    """Measured at the end of each hold, averaged over its last seconds: q [rad | m], v [rad/s |
    m/s], effort [N·m | N] (NaN where the backend measures none), one row per configuration,
    model order — what :func:`~ct_controllers.model.payload_identification.identify_payload`
    takes."""

    q: FloatArray
    v: FloatArray
    effort: FloatArray


class HoldError(CtError, RuntimeError):
    """A hold could not be measured: the motion to it did not succeed, or no snapshot came."""


def measure_holds(
    loop: ControlLoop,
    configurations: Sequence[FloatArray],
    joint_names: Sequence[str],
    advance: Callable[[float], None],
    settle: float = 1.0,
    average: float = 0.2,
    timeout: float = 20.0,
    progress: Callable[[int, str], None] | None = None,
) -> HoldSamples:
    """For each of ``configurations`` (model order; the joints ``joint_names`` are moved, the
    others held by the loop as they are): a joint motion there, then ``settle`` [s] of holding,
    then the loop's snapshots over ``average`` [s] averaged. ``advance(seconds)`` lets that much
    of the loop's time pass. :class:`HoldError` when a motion of the loop is running (nothing is
    moved), or naming the hold when its motion fails or does not end within ``timeout`` [s], or
    no snapshot comes. (A goal run by a chain controller is not a loop motion: the caller
    checks its own goals.) ``progress(hold, stage)``, if given, is told each hold's stages as
    they begin (``moving``, ``settling``, ``measuring``); an exception ``advance`` or
    ``progress`` raises (a canceled goal) ends the measurement there and propagates, the arm
    left to the loop (the caller holds it)."""
    model = loop.model
    indices = model.indices(joint_names)
    latest = loop.snapshot()
    if latest is not None and latest.motion is not None and latest.motion.state == "running":
        raise HoldError(
            f"motion {latest.motion.motion_id} is running: holds for an identification would "
            "preempt it; wait for it to end"
        )
    step = loop.period * loop.snapshot_decimation  # [s] between snapshots
    rows: list[tuple[FloatArray, FloatArray, FloatArray]] = []
    for number, configuration in enumerate(configurations):
        target = np.asarray(configuration, dtype=np.float64)[indices]
        if progress is not None:
            progress(number, "moving")
        motion = loop.request_motion(list(joint_names), target)
        waited = 0.0
        while True:
            status = loop.motion_status(motion)
            if status is not None and status.state != "running":
                break
            if waited > timeout:
                raise HoldError(f"hold {number}: the motion to it did not end in {timeout} s")
            advance(step)
            waited += step
        if status.state != SUCCEEDED:
            why = f": {status.message}" if status.message else ""
            if loop.fault is not None:
                why += f" (fault latched: {loop.fault})"
            raise HoldError(f"hold {number}: the motion to it ended {status.state}{why}")
        if progress is not None:
            progress(number, "settling")
        advance(settle)
        if progress is not None:
            progress(number, "measuring")
        sums = [np.zeros(model.nv) for _ in range(3)]
        count, last, tries = 0, -1, 0
        while count * step < average:
            advance(step)
            tries += 1
            snapshot = loop.snapshot()
            if snapshot is None or tries * step > average + timeout:
                raise HoldError(f"hold {number}: the loop published no new snapshot")
            if snapshot.tick == last:
                continue
            last = snapshot.tick
            for total, value in zip(
                sums,
                (snapshot.position, snapshot.velocity, snapshot.measured_effort),
                strict=True,
            ):
                total += value
            count += 1
        rows.append((sums[0] / count, sums[1] / count, sums[2] / count))
    return HoldSamples(
        q=np.array([row[0] for row in rows]),
        v=np.array([row[1] for row in rows]),
        effort=np.array([row[2] for row in rows]),
    )
