"""A GripperCommand goal on the real stack: a chained controller that runs, each tick,

    inner controller → its efforts and reference (the arm: held, or a later goal's)
                     ↘ fingers' replaced by the gripper servo's, with the goal's effort bound

installed in the control loop like any controller (``loop.switch_controller``, through the
controller manager), so the limiter stays the last step before the write. During the goal the
inner controller is the selected joint controller on the loop's reference (the arm holds where
it is); after it, :func:`finger_hold` wraps whatever runs next with the same command (the
controller manager's overlay), as a ros2_control gripper controller goes on commanding its last
goal beside the arm's controllers. The fingers are
driven as the Grasp drives them (:mod:`ct_controllers.chains.grasp_runner`, the same servo and
the same limits): on the effort interface with the servo's effort clipped at the bound, on the
position interface with the servo's reference and the bound as their drives' effort limit
(``ControlOutput.effort_limit``), so a finger blocked by an object pushes with the bound, not
with its full effort limit. The goal's position is for one gripper joint; the others follow it
(:func:`~ct_controllers.tasks.gripper_command.finger_targets`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ct_controllers.chains.grasp_runner import GraspRunner, finger_force_limit
from ct_controllers.chains.wrapping import WrappingController
from ct_controllers.controllers.controller import (
    Controller,
    ControlOutput,
    FloatArray,
    JointReference,
    JointState,
)
from ct_controllers.controllers.gripper import GripperController
from ct_controllers.model.model_state import ModelState
from ct_controllers.runtime.stack import Stack
from ct_controllers.tasks.gripper_command import GripperGoal, GripperLimits, finger_targets

DEFAULT_SPEED = 0.1  # [m/s] of finger surface: the Grasp's servo speed (GripperController)


class GripperCommandRunner(WrappingController):
    def __init__(
        self,
        inner: Controller,
        gripper: GripperController,
        targets: list[float],
        force: float,
    ) -> None:
        """``inner``: the controller whose output the fingers' servo completes (the selected
        joint controller during a goal; afterwards whatever runs, :meth:`around`); ``targets``
        [m | rad] per gripper joint (the servo's ``joint_names`` order); ``force`` [N] of finger
        surface, the bound every finger grips with (a joint's effort bound is it times the
        joint's force lever: lever × the fingers it moves)."""
        super().__init__()
        self.inner = inner
        self.gripper = gripper
        self.model = gripper.model
        shared = inner.model_state
        self.model_state: ModelState = (
            shared
            if shared is not None and shared.pin_model is gripper.model.model
            else ModelState(gripper.model)
        )
        self.fingers = gripper.indices
        self.targets = [float(t) for t in targets]
        self.force = float(force)
        self._limits = [self.force] * len(self.targets)
        nv = self.model.nv
        # [N·m | N] the position fingers' drives' bound: the force through each joint's lever.
        self._finger_limit = np.minimum(
            max(self.force, 0.0) * gripper.force_levers, gripper.max_effort
        )
        self._effort_limit = np.full(nv, np.nan)
        self._effort = np.zeros(nv)
        self._reference = JointReference(np.zeros(nv), np.zeros(nv), np.zeros(nv))
        self.stage_breakdown = getattr(inner, "stage_breakdown", None)  # a chain's, read live

    def around(self, inner: Controller) -> GripperCommandRunner:
        """The same command (the same servo, going on from where it is) around ``inner``."""
        return GripperCommandRunner(inner, self.gripper, self.targets, self.force)

    def holding(self, positions: Sequence[float], force: float) -> GripperCommandRunner:
        """Hold the fingers at ``positions`` [m | rad] (``joint_names`` order) with ``force`` [N]
        around the same inner controller; the servo's reference goes there from where it is, at
        its speed (no jump)."""
        return GripperCommandRunner(self.inner, self.gripper, list(positions), force)

    @property
    def wrapped(self) -> Controller:
        return self.inner

    def prepare(self, state: JointState, dt: float) -> None:
        self.inner.prepare(state, dt)

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return self.compute_output(state, reference, dt).effort.copy()

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        """The inner controller's output (on the loop's ``reference``: a joint controller holds
        the arm or follows a goal's trajectory; a chain makes its own) with the fingers' efforts,
        reference r, ṙ and drive effort limits replaced by the servo's (in arrays of this
        runner's: neither the inner's nor the loop's are changed)."""
        output = self.inner.step(state, reference, dt)
        tau, own = self._effort, self._reference
        np.copyto(tau, output.effort)
        np.copyto(own.q, output.reference.q)
        np.copyto(own.v, output.reference.v)
        np.copyto(own.a, output.reference.a)
        self.gripper.compute_into(
            tau,
            state,
            self.targets,
            self._limits,
            dt,
            self.model_state.at(state),
            reference=own,
        )
        limit = self._effort_limit
        if output.effort_limit is None:
            limit.fill(np.nan)
        else:
            np.copyto(limit, output.effort_limit)
        limit[self.fingers] = self._finger_limit
        return ControlOutput(tau, own, limit)


def finger_hold(runner: GripperCommandRunner) -> Callable[[Controller], Controller | None]:
    """The controller manager's overlay (:meth:`ControllerManager.set_overlay`) that keeps
    ``runner``'s command on the fingers around whatever runs next — as a ros2_control gripper
    controller keeps commanding its last goal beside the arm's — until a controller that drives
    the fingers itself is installed (a gripper goal, a Grasp): then it removes itself."""

    def overlay(controller: Controller) -> Controller | None:
        if isinstance(controller, GripperCommandRunner | GraspRunner):
            return None
        return runner.around(controller)

    return overlay


def gripper_servo(stack: Stack, speed: float = DEFAULT_SPEED) -> GripperController:
    """The Grasp's finger servo (its gains, levers and margin) at ``speed`` [m/s of finger
    surface], for the stack's gripper joints."""
    model = stack.model.with_own_data()
    grip = stack.grip
    levers = None if grip is None else grip.levers
    force_levers = None if grip is None else grip.force_levers
    return GripperController(
        model,
        stack.config.gripper_joints,
        stiffness=stack.config.gripper_stiffness,
        damping=stack.config.gripper_damping,
        speed=speed,
        levers=levers,
        force_levers=force_levers,
    )


def joint_lever(stack: Stack, joint: str) -> float:
    """[m/rad | m/m] how far a finger surface moves per unit of gripper ``joint``."""
    grip = stack.grip
    if grip is None:
        return 1.0
    return float(grip.levers[list(grip.joints).index(joint)])


def joint_force_lever(stack: Stack, joint: str) -> float:
    """[m/rad | m/m] the effort of gripper ``joint`` per newton of squeeze on each finger it
    moves (its lever times the fingers it moves: GripGeometry.force_levers)."""
    grip = stack.grip
    if grip is None:
        return 1.0
    return float(grip.force_levers[list(grip.joints).index(joint)])


def gripper_limits(stack: Stack, joint: str) -> GripperLimits:
    """The bounds a goal for ``joint`` is checked against (its URDF range and velocity limit,
    and the effort every finger's drive gives, in the joint's units)."""
    index = int(stack.model.indices([joint])[0])
    limits = stack.model.limits
    return GripperLimits(
        joint=joint,
        lower=float(limits.lower[index]),
        upper=float(limits.upper[index]),
        max_velocity=float(limits.velocity[index]),
        max_effort=finger_force_limit(stack) * joint_force_lever(stack, joint),
    )


def minimum_effort(stack: Stack, joint: str, velocity: float) -> float:
    """[N | N·m of ``joint``] the smallest effort bound the servo controls at ``velocity``
    [m/s | rad/s of ``joint``] (:attr:`GripperController.minimum_effort`, through the lever)."""
    lever = joint_lever(stack, joint)
    return gripper_servo(stack, velocity * lever).minimum_effort * joint_force_lever(stack, joint)


def build_gripper_runner(
    stack: Stack, arm_controller: Controller, joint: str, goal: GripperGoal
) -> GripperCommandRunner:
    """The runner of a checked ``goal`` for gripper ``joint``, with ``arm_controller`` (one of
    ``stack.controllers``) for every joint but the fingers."""
    lever = joint_lever(stack, joint)
    servo = gripper_servo(stack, goal.velocity * lever)
    fingers = stack.config.gripper_joints
    targets = finger_targets(stack.grip, fingers, joint, goal.position)
    force = goal.effort / joint_force_lever(stack, joint)
    return GripperCommandRunner(arm_controller, servo, targets, force)
