"""``/ct/controller_manager/identify_payload`` (ct_interfaces/action/IdentifyPayload): identify
the payload held at the TCP by holding the arm still where it stands and in the configurations
around it that :func:`~ct_controllers.model.payload_identification.plan_holds` plans (the last
three joints that move the TCP turned by up to ``amplitude``, inside their limits), measuring
the joint torques there (:func:`~ct_controllers.runtime.payload_holds.measure_holds`: the
loop's own joint motions, the selected controller), returning to the start and identifying
(:func:`~ct_controllers.model.payload_identification.identify_payload`).

An accepted estimate is set as the parameters ``payload.mass`` / ``payload.com`` in one atomic
set: the node's parameter callback checks it against the rated payload and stages it on the
controllers at a tick boundary, exactly as a hand-set payload (so the parameters show it). A
refusal changes nothing: neither the controllers' model nor the parameters.

A motion goal (it moves the arm): refused — REFUSED, ``refusal`` ``busy``, nothing moves — while
another goal of any action runs or a motion of the loop runs, never preempting it; a newer goal
of any action preempts it (PREEMPTED, nothing staged). Also refused before anything moves:
no rated payload configured (``no_rated_payload``: nothing could be staged), a backend that
measures no effort on a joint the identification needs (``no_effort``), a robot model without a
TCP (``no_tcp``), and a hold plan that cannot determine the payload (``unexcited``, from the
plan's condition). Bad goal values (``amplitude``, ``settle``) are INVALID_GOAL.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from ct_interfaces.action import IdentifyPayload
from rclpy.parameter import Parameter

from ct_controllers.errors import CtError
from ct_controllers.model.payload_identification import (
    IdentificationSettings,
    PayloadEstimate,
    PayloadResult,
    identify_payload,
    plan_holds,
    supporting_joints,
)
from ct_controllers.ros.goals import SHUTTING_DOWN, motion_action_server
from ct_controllers.ros.parameters import PAYLOAD_COM, PAYLOAD_MASS
from ct_controllers.runtime.payload_holds import HoldError, measure_holds

Result = IdentifyPayload.Result
DEFAULT_AMPLITUDE = 0.6  # [rad] plan_holds' default: κ ≈ 2.9 at the bundled arm's home
MAX_AMPLITUDE = 1.0  # [rad] a wrist turn larger than this is not a small motion with an object
DEFAULT_SETTLE = 1.0  # [s] measured: the default joint impedance settles within it (MuJoCo)
MAX_SETTLE = 10.0  # [s]
AVERAGE = 0.2  # [s] of snapshots averaged per hold
HOLD_TIMEOUT = 20.0  # [s] for a motion to a hold to end
POLL = 0.005  # [s] wall time between looks at the loop's clock while waiting


class Interrupted(CtError, RuntimeError):
    """The goal must end now: ``code`` (CANCELED, PREEMPTED, FAULT) and why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class IdentifyPayloadServer:
    def __init__(
        self,
        node: Any,
        stack: Any,
        manager: Any,
        arbiter: Any,
        callback_group: Any,
        settings: IdentificationSettings | None = None,
    ) -> None:
        """``settings``: the identification's limits (default: the core's, torque noise
        0.01 N·m)."""
        self.node, self.stack, self.manager, self.arbiter = node, stack, manager, arbiter
        self.config = stack.config
        self.loop = stack.loop
        self.model = stack.model.with_own_data()  # this goal thread's scratch data
        self.settings = settings or IdentificationSettings()
        self.server = motion_action_server(
            node,
            IdentifyPayload,
            "~/identify_payload",
            self._execute,
            callback_group,
            arbiter=arbiter,
            summary=lambda goal: f"amplitude {goal.amplitude:g} rad, settle {goal.settle:g} s",
        )

    # --- before anything moves -------------------------------------------------------------
    def refusal(self, snapshot: Any) -> tuple[str, str] | None:
        """(reason, message) why an identification cannot run now, or None. Checks what does
        not depend on the goal: a TCP, a rated payload, measured effort on the joints used."""
        if not self.model.has_tcp:
            return "no_tcp", "the robot model has no TCP frame: nothing to identify a payload at"
        if self.config.payload_limits.rated_mass <= 0.0:
            return (
                "no_rated_payload",
                "payload.rated_mass is 0 in the configuration: no payload may be set until the "
                "arm's rated payload is stated, so none is identified",
            )
        joints = supporting_joints(self.model)
        effort = snapshot.measured_effort[self.model.indices(joints)]
        unmeasured = [name for name, value in zip(joints, effort, strict=True) if math.isnan(value)]
        if unmeasured:
            return (
                "no_effort",
                f"the {self.stack.hardware.backend_name} backend measures no effort on "
                f"{', '.join(unmeasured)}: the identification needs the joint torques",
            )
        return None

    def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        amplitude = DEFAULT_AMPLITUDE if goal.amplitude == 0.0 else goal.amplitude
        settle = DEFAULT_SETTLE if goal.settle == 0.0 else goal.settle
        if not (math.isfinite(amplitude) and 0.0 < amplitude <= MAX_AMPLITUDE):
            return self._end(
                goal_handle,
                Result.INVALID_GOAL,
                f"amplitude must be within (0, {MAX_AMPLITUDE:g}] rad (0 = "
                f"{DEFAULT_AMPLITUDE:g}), got {goal.amplitude}",
            )
        if not (math.isfinite(settle) and 0.0 < settle <= MAX_SETTLE):
            return self._end(
                goal_handle,
                Result.INVALID_GOAL,
                f"settle must be within (0, {MAX_SETTLE:g}] s (0 = {DEFAULT_SETTLE:g}), "
                f"got {goal.settle}",
            )
        snapshot = self.loop.snapshot()
        if snapshot is None or not self.loop.running:
            message = self.loop.stopped_reason or "no state from the control loop"
            return self._end(goal_handle, Result.FAULT, message)
        if snapshot.fault:
            return self._end(goal_handle, Result.FAULT, snapshot.fault)
        refusal = self.refusal(snapshot)
        if refusal is not None:
            return self._refuse(goal_handle, *refusal)
        start = snapshot.position.copy()
        plan = plan_holds(self.model, start, amplitude=amplitude)
        if not plan.condition <= self.settings.max_condition:
            return self._refuse(
                goal_handle,
                "unexcited",
                f"the holds around this configuration cannot determine the payload: regressor "
                f"condition {plan.condition:.3g} (limit {self.settings.max_condition:g}); move "
                "the wrist away from its limits or a singularity, or turn it further",
                condition=plan.condition,
            )
        joints = supporting_joints(self.model)

        def take_over() -> None:
            # Under the arbiter's lock: no goal is current. A motion of the loop may still run
            # (one a goal left behind): then nothing is started.
            motion = self.loop.snapshot().motion
            if motion is not None and motion.state == "running":
                raise HoldError(f"motion {motion.motion_id} of the loop is running")
            self.manager.use("")  # the selected controller holds the arm through the holds

        try:
            started = self.arbiter.start_if_idle(take_over)
        except HoldError as exc:
            return self._refuse(goal_handle, "busy", f"the arm is moving: {exc}; wait for it")
        if started is None:
            return self._refuse(
                goal_handle,
                "busy",
                "another goal moves the arm: an identification never preempts it; wait for it "
                "to end",
            )
        token, _ = started
        try:
            return self._run(goal_handle, token, plan.configurations, joints, start, settle)
        finally:
            if self.arbiter.is_current(token):
                self.manager.release()
            self.arbiter.finish(token)

    # --- the holds ---------------------------------------------------------------------------
    def _run(
        self,
        goal_handle: Any,
        token: int,
        configurations: tuple[np.ndarray, ...],
        joints: tuple[str, ...],
        start: np.ndarray,
        settle: float,
    ) -> Any:
        count = len(configurations)

        def check() -> None:
            if self.arbiter.stopping.is_set():
                raise Interrupted(Result.FAULT, SHUTTING_DOWN)
            if not self.arbiter.is_current(token):
                raise Interrupted(Result.PREEMPTED, "preempted by a newer goal")
            if goal_handle.is_cancel_requested:
                raise Interrupted(Result.CANCELED, "canceled; stopping and holding")
            if not self.loop.running:
                raise Interrupted(Result.FAULT, self.loop.stopped_reason or "the loop stopped")
            fault = self.loop.fault
            if fault is not None:
                raise Interrupted(Result.FAULT, fault)

        def advance(seconds: float) -> None:
            """Let ``seconds`` of the loop's clock pass (sim time in simulation: a loaded
            machine slows both alike), checking the goal meanwhile."""
            until = self.loop.now() + seconds
            while self.loop.now() < until:
                check()
                time.sleep(POLL)

        def progress(hold: int, stage: str) -> None:
            check()
            goal_handle.publish_feedback(
                IdentifyPayload.Feedback(hold=hold, holds=count, stage=stage)
            )

        try:
            holds = measure_holds(
                self.loop,
                configurations,
                joints,
                advance,
                settle=settle,
                average=AVERAGE,
                timeout=HOLD_TIMEOUT,
                progress=progress,
            )
            progress(count - 1, "returning")
            self._return_to(start, joints, advance)
        except Interrupted as stop:
            if stop.code != Result.PREEMPTED:
                self.loop.hold()  # a newer goal's motion is not ours to stop
            return self._end(goal_handle, stop.code, str(stop))
        except HoldError as exc:
            if not self.arbiter.is_current(token):
                return self._end(goal_handle, Result.PREEMPTED, "preempted by a newer goal")
            self.loop.hold()
            code = Result.FAULT if self.loop.fault is not None else Result.REFUSED
            return self._refuse(goal_handle, "hold", str(exc), code=code)
        result = identify_payload(self.model, holds.q, holds.effort, holds.v, joints=joints)
        if not isinstance(result, PayloadEstimate):
            return self._refuse(
                goal_handle,
                result.reason.value,
                result.message,
                condition=result.condition,
                samples=result.samples,
            )
        outcome = self.node.set_parameters_atomically(
            [
                Parameter(PAYLOAD_MASS, value=float(result.payload.mass)),
                Parameter(PAYLOAD_COM, value=[float(x) for x in result.payload.com]),
            ]
        )
        if not outcome.successful:  # above the rated payload, the COM out of reach
            return self._refuse(
                goal_handle, "over_rating", f"estimate not staged: {outcome.reason}", result
            )
        goal_handle.succeed()
        return _filled(
            Result(error_code=Result.SUCCESS, message=_describe(result), accepted=True), result
        )

    def _return_to(
        self, start: np.ndarray, joints: tuple[str, ...], advance: Callable[[float], None]
    ) -> None:
        """Back to the configuration the identification started from (the moved joints)."""
        indices = self.model.indices(joints)
        motion = self.loop.request_motion(list(joints), start[indices])
        waited = 0.0
        while True:
            status = self.loop.motion_status(motion)
            if status is not None and status.state != "running":
                break
            if waited > HOLD_TIMEOUT:
                raise HoldError(f"the return to the start did not end in {HOLD_TIMEOUT} s")
            advance(0.02)
            waited += 0.02
        if status.state != "succeeded":
            raise HoldError(f"the return to the start ended {status.state}: {status.message}")

    # --- results -----------------------------------------------------------------------------
    def _refuse(
        self,
        goal_handle: Any,
        reason: str,
        message: str,
        estimate: PayloadEstimate | None = None,
        condition: float = math.nan,
        samples: int = 0,
        code: int = Result.REFUSED,
    ) -> Any:
        goal_handle.abort()
        result = Result(error_code=code, message=message, accepted=False, refusal=reason)
        if estimate is not None:
            return _filled(result, estimate)
        _no_estimate(result)
        result.condition = float(condition)
        result.samples = int(samples)
        return result

    @staticmethod
    def _end(goal_handle: Any, code: int, message: str) -> Any:
        if code == Result.CANCELED:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        result = Result(error_code=code, message=message, accepted=False)
        _no_estimate(result)
        return result


def _no_estimate(result: Any) -> None:
    nan3 = [math.nan] * 3
    result.mass = result.mass_std = result.condition = result.residual_rms = math.nan
    result.com, result.com_std = nan3, nan3


def _filled(result: Any, estimate: PayloadEstimate) -> Any:
    result.mass = float(estimate.payload.mass)
    result.com = [float(x) for x in estimate.payload.com]
    result.mass_std = float(estimate.mass_std)
    result.com_std = [float(x) for x in estimate.com_std]
    result.condition = float(estimate.condition)
    result.residual_rms = float(estimate.residual_rms)
    result.samples = int(estimate.samples)
    return result


def _describe(estimate: PayloadResult) -> str:
    if not isinstance(estimate, PayloadEstimate):
        return estimate.message
    c = estimate.payload.com
    s = estimate.com_std
    return (
        f"payload identified and staged: m = {estimate.payload.mass:.4g} ± "
        f"{estimate.mass_std:.2g} kg, c = ({c[0]:.4f}, {c[1]:.4f}, {c[2]:.4f}) ± "
        f"({s[0]:.1e}, {s[1]:.1e}, {s[2]:.1e}) m (TCP frame), condition "
        f"{estimate.condition:.3g}, {estimate.samples} holds"
    )
