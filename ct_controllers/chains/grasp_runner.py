"""The grasp task on the real stack: a chained controller that runs, each tick,

    observation → grasp phase machine → the arm's chain (the chain factory's: differential IK →
                                        a joint law, or the target straight to a Cartesian one)
                                      ↘ gripper servo with the grasp force limit (fingers)

and is installed in the control loop like any controller (``loop.switch_controller``), so the
limiter stays the last step before the write. Fingers on the effort interface get the gripper
servo's effort, clipped at the grasp force; fingers on the position interface get its reference
— which closes past the object's faces, inside its width — and the grasp force as the effort
limit of their drives (``ControlOutput.effort_limit``: the loop sets it on the backend), so a
drive pressing into the object pushes with the grasp force, not with its full effort limit.
:func:`grip_force_refusal` says whether a backend can enforce that limit.

Observations: the TCP pose is FK of the measured q; finger openings, speeds and efforts come
from the measured joint state; object pose and finger contact forces from an object sensor
(simulated in MuJoCo, perception on a real cell), each with its own stamp. DONE and FAILED
freeze the arm into safe hold, τ = g(q) − D v from the measured state, and the fingers into
their servo holding where they froze, with the grasp force (position fingers: that reference,
with their drives' default effort limits); the reference held then is the measured position
clipped into the joint range (fingers that closed on nothing past their limit are not held
there, nor is anything handed on from there).

Per-stage compute times of the last tick (task, differential IK, joint controller) are in
``stage_breakdown`` for the loop's telemetry (the arm chain's stages: none of its own for a
Cartesian controller, whose time is the joint controller's).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np

from ct_controllers.chains.tcp_chain_factory import tcp_target_chain
from ct_controllers.chains.tcp_target_chain import TcpTargetChain
from ct_controllers.chains.wrapping import WrappingController
from ct_controllers.config import StackConfig
from ct_controllers.controllers.controller import (
    Controller,
    ControlOutput,
    FloatArray,
    JointReference,
    JointState,
)
from ct_controllers.controllers.gripper import GripperController
from ct_controllers.controllers.safe_hold import safe_hold_at
from ct_controllers.hardware.interface import (
    POSITION,
    ObjectObservation,
    SystemInterface,
)
from ct_controllers.model.grip_geometry import GripGeometry
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.stack import Stack, to_model_order
from ct_controllers.tasks.phases import (
    GraspObservation,
    GraspParameters,
    GraspTask,
    Phase,
    TaskOutput,
)

# What the runner reads from an object sensor: stamp [s]; pose 4x4 (base frame) or None;
# per-finger contact normal forces [N] or None — the hardware interface's own type, handed
# through unwrapped.
ObjectReading = ObjectObservation


@dataclass(frozen=True)
class TaskRecord:
    """One tick as the runner saw it (for plots and reports)."""

    time: float  # [s]
    phase: Phase
    stage: str
    tcp_error: float  # [m] TCP position error to its target (NaN when frozen)
    finger_opening: float  # [m] mean of the two fingers
    object_position: tuple[float, float, float]  # [m] base frame (NaN if unobserved)

    @property
    def object_height(self) -> float:
        return self.object_position[2]


class GraspRunner(WrappingController):
    def __init__(
        self,
        model: RobotModel,
        task: GraspTask,
        arm: TcpTargetChain,
        gripper: GripperController,
        sense_object: Callable[[], ObjectReading] | None,
        hold_damping: FloatArray,
        record: bool = False,
        task_divisor: int = 1,
        grip: GripGeometry | None = None,
    ) -> None:
        """``arm``: the chain toward the task's TCP targets (the chain factory's, of the arm
        controller; its differential IK, if any, of the same ``update_divisor`` as
        ``task_divisor``). ``grip``: the gripper's width frames and closing limits (the stack's
        :attr:`~ct_controllers.runtime.stack.Stack.grip`): the task checks the grip width
        measured between the frames, and its finger targets [0, open_width] are mapped onto
        each gripper joint's closed … open limits; None: the finger openings summed, the
        targets taken as joint positions [m].
        ``task_divisor`` K: observe and step the phase machine every K-th tick (the
        Cartesian stage's own rate, with a differential IK of the same ``update_divisor``); the
        ticks between follow its last output. 1 = every tick."""
        super().__init__()
        if isinstance(task_divisor, bool) or not isinstance(task_divisor, int) or task_divisor < 1:
            raise ValueError(f"task_divisor must be an integer ≥ 1, got {task_divisor!r}")
        self.task_divisor = task_divisor
        self._ticks = 0
        self.model = model
        self.task = task
        self.arm = arm
        self.arm_controller = arm.wrapped
        self.gripper = gripper
        # The tick's evaluation of the robot at the measured state, read by the observation,
        # the arm controller, the gripper servo and the safe hold: the arm controller's own when
        # it is of this runner's model (one evaluation per tick), else the runner's.
        shared = self.arm_controller.model_state
        self.model_state: ModelState = (
            shared if shared is not None and shared.pin_model is model.model else ModelState(model)
        )
        self._gripper_shares = gripper.model.model is model.model
        self._warm_up_state = ModelState(model)  # prepare() runs off the control thread
        self.sense_object = sense_object
        self.hold_damping = np.asarray(hold_damping, dtype=np.float64)
        self.base_frame = model.model.frames[model.base_frame_id].name
        self.fingers = gripper.indices
        if grip is not None and grip.joints != gripper.joint_names:
            raise ValueError(
                f"grip geometry of joints {grip.joints}, gripper servo of {gripper.joint_names}"
            )
        self.grip = grip
        # Finger speeds through the levers; joint effort → squeeze force on each finger [N]
        # through the force levers (None: every one 1, nothing to scale).
        levers, force_levers = gripper.levers, gripper.force_levers
        self._levers = None if np.all(levers == 1.0) else levers
        self._force_levers = None if np.all(force_levers == 1.0) else force_levers
        self._open_grip_width = None if grip is None else grip.open_width
        self.records: list[TaskRecord] | None = [] if record else None
        # The last compute's stages [s], read by the loop's telemetry (mutated in place).
        self.stage_breakdown: dict[str, float] = {
            "task": 0.0,
            "diff_ik": 0.0,
            "joint_controller": 0.0,
        }
        self.last_output: TaskOutput | None = None
        self._target: FloatArray | None = None  # the task's TCP target the arm chain has
        # The arm chain's own stage times (a differential IK's), copied into the runner's.
        self._arm_stages: dict[str, float] | None = getattr(arm, "stage_breakdown", None)
        self._finger_values = (math.nan, math.nan)  # (target [m], effort limit [N]) ...
        self._finger_lists: tuple[list[float], ...] = ()  # ... per finger, as Python floats
        self._effort_limit: FloatArray | None = None  # model order: the fingers' drives' bound
        self._frozen_reference: JointReference | None = None  # DONE/FAILED: hold where it froze

    @property
    def wrapped(self) -> Controller:
        return self.arm

    def observe(self, state: JointState, evaluated: ModelState) -> GraspObservation:
        """The task's observation from the measured state (``evaluated``: the model at it) and,
        where one exists, the object sensor (without one: no object pose, no contact forces;
        the task judges by the gripper)."""
        reading = (
            ObjectReading(state.stamp, None, None)
            if self.sense_object is None
            else self.sense_object()
        )
        return GraspObservation(
            # The joint state and the object sensor are separate sensors: the observation is
            # as old as the older of the two.
            stamp=min(state.stamp, reading.stamp),
            tcp_pose=evaluated.frame_pose(),  # read-only, this tick's
            finger_positions=state.q[self.fingers],  # copies (fancy indexing)
            finger_velocities=(
                state.v[self.fingers]  # copies (fancy indexing); [m/s] of finger surface
                if self._levers is None
                else state.v[self.fingers] * self._levers
            ),
            # Measured finger efforts when the backend reports them; else none is claimed.
            finger_efforts=_measured(state.effort, self.fingers, self._force_levers),
            contact_forces=reading.contact_forces,
            object_pose=reading.pose,
            grip_width=None if self.grip is None else self.grip.width(evaluated),
            open_grip_width=self._open_grip_width,
        )

    def prepare(self, state: JointState, dt: float) -> None:
        """Warm the observation (this runner's model; the object sensor, read once) and the
        arm chain toward the task's first target (a differential IK warms; a Cartesian
        controller takes the target; the measured TCP pose before the task has one). The task
        does not step."""
        evaluated = self._warm_up_state.at(state)
        self.observe(state, evaluated)
        target = self.task.target()
        self.arm.set_target(evaluated.frame_pose() if target is None else target)
        self._target = target
        self.arm.prepare(state, dt)

    def release_target(self) -> None:
        """The grasp ended: the arm chain lets go of its controller (:meth:`TcpTargetChain.
        release_target`)."""
        self.arm.release_target()

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        return self.compute_output(state, reference, dt).effort

    def compute_output(
        self, state: JointState, reference: JointReference, dt: float
    ) -> ControlOutput:
        """Efforts and the full joint reference of this tick: the arm chain's for the arm (a
        differential IK's, or ``reference``, the loop's, under a Cartesian controller), the
        gripper servo's reference r (and ṙ) for the fingers; frozen (DONE, FAILED), the
        measured position where it froze."""
        clock = time.perf_counter
        start = clock()
        breakdown = self.stage_breakdown
        evaluated = self.model_state.at(state)
        observation: GraspObservation | None = None
        if self._ticks % self.task_divisor == 0 or self.last_output is None:
            observation = self.observe(state, evaluated)
            output = self.task.update(state.stamp, observation)
            self.last_output = output
        else:  # between two task steps: follow its last output; no task stage this tick
            output = self.last_output
            breakdown.pop("task", None)
        self._ticks += 1
        after_task = clock()
        if output.tcp_target is None:  # DONE or FAILED: safe hold from the measured state
            tau = safe_hold_at(evaluated, self.hold_damping)
            if self._frozen_reference is None:  # once, at the freeze: inside the range
                self._freeze(state)
            joint_reference = self._frozen_reference
            assert joint_reference is not None
            after_ik = clock()
            # The fingers stopped and held by their servo where they froze (a finger closing on
            # nothing at 0.1 m/s coasts 2.5 mm in the safe hold's damping alone: past its limit).
            target, limit = self._finger_lists
            self.gripper.compute_into(
                tau,
                state,
                target,
                limit,
                dt,
                evaluated if self._gripper_shares else None,
                reference=joint_reference,
            )
            after_controller = clock()
        else:
            self._frozen_reference = None
            if self._target is not output.tcp_target:
                # The task hands out one read-only array per stage: the arm chain checks each
                # stage's target once, not every tick.
                self.arm.set_target(output.tcp_target)
                self._target = output.tcp_target
            arm = self.arm.step(state, reference, dt)
            joint_reference = arm.reference
            if not self.arm.GENERATES_REFERENCE:  # the loop's: the fingers go into a copy
                joint_reference = JointReference(
                    joint_reference.q.copy(), joint_reference.v.copy(), joint_reference.a.copy()
                )
            # A new array, this runner's (Controller.compute): the fingers are written in place.
            tau = arm.effort
            after_ik = clock()
            fingers = (output.finger_target, output.finger_effort_limit)
            if fingers != self._finger_values:
                self._finger_values = fingers
                count = len(self.fingers)
                opening, force = fingers
                if self.grip is None:
                    targets = [float(opening)] * count
                else:  # [0, open_width] onto each joint's closed … open limits
                    fraction = float(opening) / self.task.parameters.open_width
                    targets = self.grip.joint_target(min(max(fraction, 0.0), 1.0))
                self._finger_lists = (targets, [float(force)] * count)
                self._effort_limit = np.full(self.model.nv, np.nan)
                # [N·m | N] the drives' limit: the force [N] through each joint's force lever.
                self._effort_limit[self.fingers] = np.minimum(
                    np.fmax(self._finger_lists[1], 0.0) * self.gripper.force_levers,
                    self.gripper.max_effort,
                )
            finger_target, limit = self._finger_lists
            # The finger efforts into tau, and the servo's reference into the differential IK's
            # (its arrays are this tick's own), in place, in one pass over the fingers.
            self.gripper.compute_into(
                tau,
                state,
                finger_target,
                limit,
                dt,
                evaluated if self._gripper_shares else None,
                reference=joint_reference,
            )
            after_controller = clock()
        if observation is not None:
            breakdown["task"] = after_task - start
        if output.tcp_target is None:
            breakdown["diff_ik"] = after_ik - after_task
            breakdown["joint_controller"] = after_controller - after_ik
        else:  # the arm chain's IK, if it has one; the controllers' the rest
            stages = self._arm_stages
            ik = 0.0 if stages is None else stages.get("diff_ik", 0.0)
            breakdown["diff_ik"] = ik
            breakdown["joint_controller"] = after_controller - after_task - ik
        if self.records is not None and observation is not None:
            self.records.append(self._record(state.stamp, output, observation))
        # Frozen (DONE, FAILED): the drives' default limits, holding the measured position.
        drive_limits = None if output.tcp_target is None else self._effort_limit
        return ControlOutput(tau, joint_reference, drive_limits)

    def _freeze(self, state: JointState) -> None:
        """DONE or FAILED, on the tick it is entered: the reference held from now on is the
        measured position clipped into the joint range, and the fingers' servo restarts there
        (its target the same, within its margin) with the goal's grip force as its limit."""
        limits = self.model.limits
        held = np.clip(state.q, limits.lower, limits.upper)
        self._frozen_reference = JointReference.hold(held)
        goal = self.task.goal
        force = goal.grasp_effort if goal is not None else 0.0
        self._finger_values = (math.nan, math.nan)  # the running stages' values, forgotten
        self._finger_lists = (held[self.fingers].tolist(), [float(force)] * len(self.fingers))
        self.gripper.reset()

    def _record(self, now: float, output: TaskOutput, observation: GraspObservation) -> TaskRecord:
        error = (
            float("nan")
            if output.tcp_target is None
            else float(np.linalg.norm(output.tcp_target[:3, 3] - observation.tcp_pose[:3, 3]))
        )
        pose = observation.object_pose
        x, y, z = (math.nan,) * 3 if pose is None else (float(v) for v in pose[:3, 3])
        return TaskRecord(
            now,
            output.phase,
            output.stage,
            error,
            float(np.mean(observation.finger_positions)),
            (x, y, z),
        )


BACKEND_SENSOR: Final = "backend"  # build_grasp_runner: the backend's object sensor


def build_grasp_runner(
    stack: Stack,
    arm_controller: Controller,
    task: GraspTask | None = None,
    record: bool = False,
    sense_object: Callable[[], ObjectReading] | Literal["backend"] | None = BACKEND_SENSOR,
) -> GraspRunner:
    """The grasp runner the Grasp action installs, for ``stack``: the stack's model with scratch
    data of its own (shared with ``arm_controller`` when that one's is the stack's, and so the
    per-tick model state), QP differential IK for the arm at the Cartesian rate,
    ``arm_controller`` (one of ``stack.controllers``) for the arm, the gripper servo for the
    fingers, ``task`` (None: one with :func:`grasp_parameters` of ``stack``), and
    ``sense_object``: by default the backend's object sensor where it offers one
    (else the task judges by the joint state alone); a reader of one's own, or None for
    none."""
    config = stack.config
    model = stack.model.with_own_data()
    reader: Callable[[], ObjectReading] | None
    if isinstance(sense_object, str):  # BACKEND_SENSOR
        sensor = stack.hardware.object_sensor()
        reader = None if sensor is None else sensor.observe  # its reading, as it reports it
    else:
        reader = sense_object
    return GraspRunner(
        model=model,
        task=task or GraspTask(grasp_parameters(stack)),
        # Its first target (the identity) is never tracked: prepare() replaces it with the
        # task's first one, or the measured TCP pose (a task not started).
        arm=tcp_target_chain(
            model, arm_controller, config.arm_joints, config.cartesian_divisor, np.eye(4)
        ),
        gripper=grasp_gripper(model, config, stack.grip),
        sense_object=reader,
        hold_damping=to_model_order(
            model, config.joint_names, config.safe_hold_damping, "safe_hold.damping"
        ),
        record=record,
        task_divisor=config.cartesian_divisor,
        grip=stack.grip,
    )


def grasp_gripper(
    model: RobotModel, config: StackConfig, grip: GripGeometry | None = None
) -> GripperController:
    """The gripper servo a grasp runs (the configured gains, ``gripper.stiffness`` and
    ``gripper.damping``, and its default speed, in finger-surface units), for the configured
    gripper joints, through their levers where the gripper's geometry is known."""
    return GripperController(
        model,
        config.gripper_joints,
        stiffness=config.gripper_stiffness,
        damping=config.gripper_damping,
        levers=None if grip is None else grip.levers,
        force_levers=None if grip is None else grip.force_levers,
    )


def grasp_parameters(stack: Stack, **fields: Any) -> GraspParameters:
    """The phase machine's parameters for this stack's gripper: ``fields`` as given
    (:class:`GraspParameters`' own names), ``stroke_time`` the grasp's finger servo's
    (:attr:`GripperController.stroke_time`), so that CLOSE's timeout counts beyond the
    fingers' travel over the gripper's whole stroke."""
    gripper = grasp_gripper(stack.model, stack.config, stack.grip)
    return GraspParameters(**{"stroke_time": gripper.stroke_time, **fields})


def finger_force_limit(stack: Stack) -> float:
    """[N] the largest grasp_effort every finger's drive can give: its URDF effort limit
    through its lever (a revolute jaw's N·m over its length)."""
    fingers = stack.config.gripper_joints
    effort = stack.model.limits.effort[stack.model.indices(fingers)]
    levers = np.ones(len(fingers)) if stack.grip is None else np.array(stack.grip.force_levers)
    return float(np.min(effort / levers))


def minimum_grasp_effort(stack: Stack) -> float:
    """[N] per finger: the smallest grasp_effort the grasp's finger servo can control
    (:attr:`GripperController.minimum_effort`: the finger's weight plus its damping at the
    servo's speed)."""
    return grasp_gripper(stack.model, stack.config, stack.grip).minimum_effort


def grip_force_refusal(
    hardware: SystemInterface,
    fingers: Sequence[str],
    grasp_effort: float,
    field: str = "grasp_effort",
) -> str | None:
    """Why ``hardware`` cannot enforce a grip force of ``grasp_effort`` [N] per finger, or
    None when it can. Fingers on the effort interface: the gripper servo's effort is clipped at
    it (the URDF limit is checked with the goal). Fingers on the position interface push with
    what their drive's own loop applies: enforceable only where the backend can set the drive's
    effort limit to it (:meth:`SystemInterface.effort_limit_range`). ``field``: the goal's
    field named in the message."""
    interfaces = dict(zip(hardware.joint_names, hardware.command_interfaces, strict=True))
    for name in fingers:
        if interfaces.get(name) != POSITION:
            continue
        span = hardware.effort_limit_range(name)
        if span is None:
            return (
                f"{field} {grasp_effort:g} N cannot be enforced: finger joint '{name}' is "
                f"on the position interface and {hardware.backend_name} cannot limit its "
                "drive's effort (put the fingers on the effort interface, or use drives with a "
                "settable effort limit)"
            )
        if not span[0] <= grasp_effort <= span[1]:
            return (
                f"{field} {grasp_effort:g} N cannot be enforced on finger joint '{name}' "
                f"(position interface): {hardware.backend_name} limits its drive's effort "
                f"within [{span[0]:g}, {span[1]:g}] N"
            )
    return None


def _measured(
    effort: FloatArray | None, fingers: np.ndarray, levers: FloatArray | None = None
) -> FloatArray | None:
    """|effort| [N] of the fingers when the backend measures it (finite), else None; a joint's
    effort divided by its lever (a revolute jaw's torque as the force at its finger)."""
    if effort is None:
        return None
    values = effort[fingers]  # a copy (fancy indexing)
    if levers is not None:
        values /= levers
    # The sum of a few values is finite exactly when each is (no sensor reports 1e308); summed
    # in Python floats, cheaper than numpy's sum on a few.
    return np.abs(values, out=values) if math.isfinite(sum(values.tolist())) else None
