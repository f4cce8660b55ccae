"""The rigs' gains: what the stack runs with on the plants that close their loop at 100 Hz (the
ros2_control bridge's plant process, the simulated CiA 402 drives), for tests and benches."""

from __future__ import annotations

from typing import Any

from ct_controllers.config import StackConfig

# Gains for the 100 Hz backends. The bundled ones are tuned for 1 kHz; at 100 Hz with a period
# of delay from measurement to applied effort (a bus cycle, a DDS round trip) the impedance's
# and the safe hold's sampled loops grow (spectral radius 1.94 and 1.19: start-up warns). A
# quarter of the impedance gains and half the hold damping keep both at or below 1.
SLOW_LOOP_GAINS = {
    "joint_impedance.stiffness": [150.0, 150.0, 75.0, 75.0, 25.0, 25.0, 12.5, 25.0, 25.0],
    "joint_impedance.damping": [12.5, 12.5, 6.25, 6.25, 1.5, 1.5, 0.75, 1.0, 1.0],
    "safe_hold.damping": [10.0, 10.0, 5.0, 5.0, 2.0, 2.0, 1.0, 2.0, 2.0],
}

IMPEDANCE_SCALE = 0.25  # [-] of a user configuration's joint impedance gains at 100 Hz
HOLD_SCALE = 0.5  # [-] of its safe hold damping


def slow_loop_gains(config: StackConfig, bundled: bool) -> dict[str, Any]:
    """The 100 Hz rigs' gain overrides for ``config``: :data:`SLOW_LOOP_GAINS` on the bundled
    arm (``bundled``), else the configuration's own joint impedance gains × IMPEDANCE_SCALE and
    safe hold damping × HOLD_SCALE (the same reasoning, per joint of the user's robot)."""
    if bundled:
        return dict(SLOW_LOOP_GAINS)
    impedance = config.controllers.get("joint_impedance", {})
    found: dict[str, Any] = {
        "safe_hold.damping": [HOLD_SCALE * d for d in config.safe_hold_damping],
    }
    for name in ("stiffness", "damping"):
        if name in impedance:
            found[f"joint_impedance.{name}"] = [IMPEDANCE_SCALE * g for g in impedance[name]]
    return found
