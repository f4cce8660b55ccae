"""The base of a chain: a controller whose efforts are another controller's (its ``wrapped``
one, fed the chain's references). The payload and the gains are that controller's, so they are
forwarded to it: a payload changes its efforts, not the chain's kinematics; gains are its own."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping

from ct_controllers.controllers.controller import Controller, FloatArray
from ct_controllers.model.payload import Payload


class WrappingController(Controller):
    """A controller that outputs the efforts of :attr:`wrapped`."""

    @property
    @abstractmethod
    def wrapped(self) -> Controller:
        """The controller whose efforts this one outputs."""

    @property
    def payload(self) -> Payload | None:
        """The payload the wrapped controller's model carries."""
        return self.wrapped.payload

    def stage_payload(self, payload: Payload | None) -> None:
        """Staged on the wrapped controller, whose efforts carry it."""
        self.wrapped.stage_payload(payload)

    def validate_gains(self, gains: Mapping[str, object]) -> dict[str, FloatArray]:
        return self.wrapped.validate_gains(gains)

    def apply_gains(self, gains: Mapping[str, FloatArray]) -> None:
        self.wrapped.apply_gains(gains)
