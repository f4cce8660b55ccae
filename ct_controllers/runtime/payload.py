"""A payload set on the stack's controllers: checked against the arm's limits once, then staged
on every controller whose efforts use the model, each taking it at its next tick boundary (the
one that runs takes it at the loop's next tick; the others when they next run).

Only controllers whose efforts come from the model carry it (their ``model_state``: joint
impedance's gravity compensation, computed torque, Cartesian impedance); chains stage it on the
controller inside them. The control loop's safe hold and fault reactions carry it too (their
g(q), :meth:`~ct_controllers.runtime.control_loop.ControlLoop.stage_payload`) when the loop is
given: a fault while an object is held does not let the arm sag under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ct_controllers.controllers.controller import Controller
from ct_controllers.model.payload import Payload, PayloadLimits, check_payload
from ct_controllers.model.robot import RobotModel


def carries_payload(controller: Controller) -> bool:
    """Whether ``controller``'s efforts use a model with a TCP (so a payload changes them)."""
    model = getattr(controller, "model", None)
    return controller.model_state is not None and isinstance(model, RobotModel) and model.has_tcp


class CarriesPayload(Protocol):
    """What else carries a payload: the control loop's safe hold and fault reactions."""

    def stage_payload(self, payload: Payload | None) -> None: ...


def stage_payload(
    controllers: Mapping[str, Controller],
    payload: Payload | None,
    limits: PayloadLimits,
    loop: CarriesPayload | None = None,
) -> tuple[str, ...]:
    """Check ``payload`` against ``limits`` (:class:`~ct_controllers.model.payload.PayloadError`
    naming the field: nothing is staged) and stage it (None: clear) on each of ``controllers``
    that :func:`carries_payload`, and on ``loop`` (the stack's control loop) when given.
    Returns the controllers' names. Any thread."""
    if payload is not None:
        check_payload(payload, limits)
    staged = tuple(name for name, controller in controllers.items() if carries_payload(controller))
    for name in staged:
        controllers[name].stage_payload(payload)
    if loop is not None:
        loop.stage_payload(payload)
    return staged
