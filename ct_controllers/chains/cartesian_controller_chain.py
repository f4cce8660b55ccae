"""The chain of a controller that takes Cartesian targets (:attr:`Controller.ACCEPTS`:
Cartesian impedance): the TCP target handed straight to it, no differential IK. Built by the
chain factory (``chains/tcp_chain_factory.py``).

The target is checked once, here (:meth:`TcpTargetChain.checked`), and handed to the controller
when the loop installs the chain (:meth:`prepare`) and on every change after: not before, so
building a chain for a goal that the arbiter then refuses never moves a controller the loop is
running. When the chain's use ends (:meth:`release_target`) the controller's target is cleared:
run on its own again, it follows its joint reference's forward kinematics.

The joint reference of the output is the loop's, passed through (what the controller tracks in
its nullspace and on the fingers): joints on the position interface hold it. A Cartesian law
writes efforts; arm joints on the position interface need the differential IK's chain (a joint
law) instead — MoveToPose refuses that pairing at its boundary."""

from __future__ import annotations

from typing import Protocol

from ct_controllers.chains.tcp_target_chain import TcpTargetChain
from ct_controllers.controllers.controller import (
    CARTESIAN,
    Controller,
    ControlOutput,
    FloatArray,
    JointReference,
    JointState,
)
from ct_controllers.model.robot import RobotModel
from ct_controllers.references.reference_generator import CartesianTarget


class TakesCartesianTargets(Protocol):
    """What a controller accepting Cartesian targets offers (``CARTESIAN in ACCEPTS``)."""

    def set_target(self, target: CartesianTarget, checked: bool = False) -> None: ...

    def clear_target(self, only: CartesianTarget | None = None) -> None: ...


class CartesianControllerChain(TcpTargetChain):
    """The TCP target → ``controller`` (one whose :attr:`~Controller.ACCEPTS` has CARTESIAN)."""

    GENERATES_REFERENCE = False

    def __init__(self, model: RobotModel, controller: Controller, target: FloatArray) -> None:
        if CARTESIAN not in controller.ACCEPTS:
            raise TypeError(f"{type(controller).__name__} does not take Cartesian targets")
        super().__init__(model, target)
        self.controller = controller
        self._taker: TakesCartesianTargets = controller  # type: ignore[assignment]
        self._handed_over = False  # whether the controller has been given the target

    @property
    def wrapped(self) -> Controller:
        return self.controller

    def set_target(
        self,
        pose: FloatArray,
        twist: FloatArray | None = None,
        wrench: FloatArray | None = None,
    ) -> None:
        """Replace the TCP target (4x4, base frame) and its optional feed-forward twist (6,:
        linear [m/s]; angular [rad/s]) and wrench (6,: [N; N·m] at the TCP), base axes: checked
        here, the controller's from its next tick (once the chain is installed)."""
        target = self.checked(pose, twist, wrench)
        self._target = target
        if self._handed_over:
            self._taker.set_target(target, checked=True)

    def prepare(self, state: JointState, dt: float) -> None:
        """On installation: the controller restarts its commanded pose from the measured TCP
        pose at its first tick and takes the chain's target from then on."""
        self.controller.prepare(state, dt)
        self._taker.set_target(self._target, checked=True)
        self._handed_over = True

    def release_target(self) -> None:
        """The controller follows its joint reference's forward kinematics again — unless a
        newer chain has handed it a target of its own meanwhile (a goal that took the arm)."""
        self._handed_over = False
        self._taker.clear_target(only=self._target)

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        """The controller's tick (its staged gains applied): its efforts toward the target,
        and ``reference`` (the loop's) as the joint reference tracked."""
        return self.controller.step(state, reference, dt)
