"""A payload held at the tool point: its mass, centre of mass and (optionally) inertia, checked,
and placed on the robot's model as part of the body that carries the TCP.

Frames and units: the centre of mass c [m] and the rotational inertia I_c [kg·m²] (about the
centre of mass) are expressed in the TCP frame (the configured ``tcp_frame``), mass m [kg].
On the model the payload becomes a spatial inertia on the TCP frame's parent joint, moved there
by the TCP's placement in that joint's frame ʲX_T = (R, p): c_j = p + R c, I_j = R I_c Rᵀ
(``pin.Inertia.se3Action``); spatial inertias add, so the loaded body is Y_j + ʲX_T · Y_payload
and every algorithm (RNEA, CRBA, g(q)) sees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from ct_controllers.errors import CtError
from ct_controllers.types import FloatArray


class PayloadError(CtError, ValueError):
    """A payload refused (not finite, negative or above the rated mass, its centre of mass out of
    reach, an inertia that is no inertia); the message names the field and the value."""


def _read_only(values: object, shape: tuple[int, ...], what: str) -> FloatArray:
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise PayloadError(f"payload {what} must be numbers, got {values!r}") from None
    if array.shape != shape:
        raise PayloadError(f"payload {what} must have shape {shape}, got {array.shape}")
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class Payload:
    """A rigid payload fixed to the TCP: ``mass`` m [kg], ``com`` c [m] in the TCP frame, and
    ``inertia`` I_c [kg·m²] about the centre of mass in TCP axes (None: a point mass). The
    arrays are copied and read-only. Shapes and finiteness are checked here; the bounds of a
    given arm (rated mass, reach) by :func:`check_payload`."""

    mass: float
    com: FloatArray
    inertia: FloatArray | None = field(default=None)

    def __post_init__(self) -> None:
        try:
            mass = float(self.mass)
        except (TypeError, ValueError):
            raise PayloadError(f"payload mass must be a number, got {self.mass!r}") from None
        if not math.isfinite(mass):
            raise PayloadError(f"payload mass must be finite, got {mass}")
        object.__setattr__(self, "mass", mass)
        com = _read_only(self.com, (3,), "com")
        if not np.all(np.isfinite(com)):
            raise PayloadError(f"payload com must be finite, got {com.tolist()}")
        object.__setattr__(self, "com", com)
        if self.inertia is not None:
            inertia = _read_only(self.inertia, (3, 3), "inertia")
            if not np.all(np.isfinite(inertia)):
                raise PayloadError("payload inertia must be finite")
            object.__setattr__(self, "inertia", inertia)

    def spatial_inertia(self) -> pin.Inertia:
        """The payload's spatial inertia in the TCP frame."""
        rotational = np.zeros((3, 3)) if self.inertia is None else np.array(self.inertia)
        return pin.Inertia(self.mass, np.array(self.com), rotational)


@dataclass(frozen=True)
class PayloadLimits:
    """What an arm may carry: ``rated_mass`` [kg] (the maker's rated payload; 0: no payload may
    be set) and ``max_com_distance`` [m], how far from the TCP origin a centre of mass may be
    (a held object's, within the gripper's reach of the flange; further is a typing error, not
    an object)."""

    rated_mass: float
    max_com_distance: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rated_mass) and self.rated_mass >= 0):
            raise PayloadError(f"payload rated_mass must be finite and ≥ 0, got {self.rated_mass}")
        if not (math.isfinite(self.max_com_distance) and self.max_com_distance > 0):
            raise PayloadError(
                f"payload max_com_distance must be finite and positive, got {self.max_com_distance}"
            )


def check_payload(payload: Payload, limits: PayloadLimits) -> Payload:
    """``payload`` if an arm of ``limits`` may carry it: 0 ≤ m ≤ rated mass, ‖c‖ ≤ the maximum
    distance, the inertia symmetric positive semi-definite and physical (its principal moments
    satisfy the triangle inequality). Else :class:`PayloadError` naming the field."""
    if payload.mass < 0.0:
        raise PayloadError(f"payload mass {payload.mass:g} kg is negative")
    if payload.mass > limits.rated_mass:
        raise PayloadError(
            f"payload mass {payload.mass:g} kg is above the rated payload {limits.rated_mass:g} kg"
            + (" (payload.rated_mass is not configured)" if limits.rated_mass == 0 else "")
        )
    distance = float(np.linalg.norm(payload.com))
    if distance > limits.max_com_distance:
        raise PayloadError(
            f"payload com {np.round(payload.com, 4).tolist()} m is {distance:.3f} m from the "
            f"TCP, beyond {limits.max_com_distance:g} m"
        )
    if payload.inertia is not None:
        inertia = payload.inertia
        if not np.allclose(inertia, inertia.T, rtol=0.0, atol=1e-12):
            raise PayloadError("payload inertia is not symmetric")
        moments = np.linalg.eigvalsh(inertia)  # ascending
        tolerance = 1e-12 + 1e-9 * float(abs(moments[-1]))
        if moments[0] < -tolerance or moments[0] + moments[1] < moments[2] - tolerance:
            raise PayloadError(
                f"payload inertia has principal moments {np.round(moments, 6).tolist()} kg·m²: "
                "not a rigid body's (each ≥ 0, any two sum to at least the third)"
            )
    return payload


def tcp_parent(model: pin.Model, tcp_frame_id: int) -> tuple[int, pin.SE3]:
    """(joint id, ʲX_T): the joint that carries the TCP frame and the TCP's placement in it."""
    frame = model.frames[tcp_frame_id]
    return int(frame.parentJoint), pin.SE3(frame.placement)


def add_payload(model: pin.Model, tcp_frame_id: int, payload: Payload) -> None:
    """Add ``payload`` to ``model`` (in place): the TCP's parent joint's inertia becomes
    Y_j + ʲX_T · Y_payload. Only for a model of one's own (a copy): the same model shared with
    another owner would change under it."""
    joint, placement = tcp_parent(model, tcp_frame_id)
    model.inertias[joint] = model.inertias[joint] + placement.act(payload.spatial_inertia())
