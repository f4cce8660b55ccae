"""The values the layers exchange: measured joint state, joint references, a controller tick's
output. A leaf: imports nothing of ours. All vectors are in the model's joint order
(``RobotModel.joint_names``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


class JointState(NamedTuple):
    """Measured state in model order: q [rad | m], v [rad/s | m/s], stamp [s] (the measurement
    time, on the hardware's clock), and the measured effort [N·m | N] — what the backend reports
    as applied on each joint, measured at the same stamp, NaN on joints it does not measure.
    The control loop always fills effort; None only in states built by hand (tests, benches).
    (A NamedTuple, immutable like a frozen dataclass: the loop builds one every tick, in a third
    of a frozen dataclass's time.)"""

    stamp: float
    q: FloatArray
    v: FloatArray
    effort: FloatArray | None = None


@dataclass(frozen=True)
class JointReference:
    """Desired position [rad | m], velocity [rad/s | m/s] and acceleration [rad/s² | m/s²],
    and an optional feed-forward effort [N·m | N], model order."""

    q: FloatArray
    v: FloatArray
    a: FloatArray
    effort: FloatArray | None = None

    @staticmethod
    def hold(q: FloatArray) -> JointReference:
        """Stand still at q."""
        zeros = np.zeros_like(q)
        return JointReference(q=np.array(q, dtype=np.float64), v=zeros, a=zeros.copy())


class ControlOutput(NamedTuple):
    """One controller tick, model order. (A NamedTuple, not a frozen dataclass: one is built
    every tick, and a NamedTuple builds in half the time.)

    effort     τ [N·m | N] for joints on the effort interface, before the limiter (which the
               loop runs last, before the write)
    reference  the full joint reference the controller tracked this tick — q* [rad | m],
               v* [rad/s | m/s], a* [rad/s² | m/s²] for every joint, fingers included — what
               joints on the position interface are sent (q*, within the joint limits). A joint
               controller tracks the reference it was given; a chain (differential IK, the
               grasp task) the one it generated.
    effort_limit  the bound [N·m | N] on the effort each position-interface joint's drive may
               apply (e.g. the grip force of fingers pressing into an object), NaN for the
               backend's default; None: the default everywhere. The loop hands a change to the
               backend (``SystemInterface.set_effort_limit``) before the write; on effort joints
               the effort above, limited, is the bound already.
    """

    effort: FloatArray
    reference: JointReference
    effort_limit: FloatArray | None = None
