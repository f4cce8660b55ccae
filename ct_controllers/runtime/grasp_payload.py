"""The payload identification of a grasp's HOLD (configuration ``grasp.identify_payload``).

The phase machine holds the arm still at the lifted pose in HOLD's ``identify`` stage
(:attr:`~ct_controllers.tasks.phases.GraspTask.identifying`); the goal's thread calls
:meth:`GraspPayload.step` with each new loop snapshot: after ``settle`` [s] of the loop's clock
in the stage it averages the snapshots (position, velocity, measured effort) over ``average``
[s], identifies the object's mass from that one configuration
(:func:`~ct_controllers.model.payload_identification.identify_mass`: one configuration does not
determine the centre of mass along gravity, and the object is not turned in the hand to get it),
stages an accepted estimate on the controllers (:func:`~ct_controllers.runtime.payload.
stage_payload`: checked against the rated payload first; the loop's safe hold too, given
``loop``) and tells the task it is done, whatever the outcome. A refusal stages nothing.
:meth:`clear` (RELEASE, or the goal's end) stages the payload the grasp found back (the
node's ``payload.mass``/``payload.com``, usually none).

What is staged for a mass-only estimate: the mass with the centre of mass the holds determine
(no part along gravity in the TCP frame) — the same gravity torques as the object's own while
the tool keeps its orientation, as it does through the rest of HOLD (lift, carry, hold, put
down at a constant tool orientation).

Plain Python on the goal's thread: nothing here runs on the control thread (the controllers
take the staged model at their next tick). An exception inside is caught and reported as the
identification's outcome (``failed``), the task told it is done: the grasp goes on without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ct_controllers.controllers.controller import Controller
from ct_controllers.model.payload import Payload, PayloadError, PayloadLimits
from ct_controllers.model.payload_identification import (
    IdentificationSettings,
    PayloadEstimate,
    identify_mass,
    supporting_joints,
)
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.loop_snapshot import LoopSnapshot
from ct_controllers.runtime.payload import CarriesPayload, stage_payload
from ct_controllers.tasks.phases import GraspTask

IDENTIFIED = "identified"
REFUSED = "refused"
NOT_RUN = "not_run"
FAILED = "failed"
SETTLE = 1.0  # [s] of the loop's clock in the identify stage before averaging (MuJoCo: settled)
AVERAGE = 0.3  # [s] of snapshots averaged


@dataclass(frozen=True)
class GraspPayloadOutcome:
    """``status`` (identified | refused | not_run | failed), ``message`` (the estimate or why
    not), ``mass`` [kg], ``mass_std`` [kg], ``condition`` [-] (NaN where none)."""

    status: str
    message: str
    mass: float = math.nan
    mass_std: float = math.nan
    condition: float = math.nan


class GraspPayload:
    """One grasp goal's identification. ``restore()``: the payload to stage back at
    :meth:`clear` (asked then: the node's parameters may change meanwhile)."""

    def __init__(
        self,
        model: RobotModel,
        controllers: Mapping[str, Controller],
        limits: PayloadLimits,
        restore: Callable[[], Payload | None],
        settle: float = SETTLE,
        average: float = AVERAGE,
        settings: IdentificationSettings | None = None,
        loop: CarriesPayload | None = None,
    ) -> None:
        self.model = model  # this thread's (scratch data of its own)
        self.controllers = controllers
        self.loop = loop  # the control loop: its safe hold carries the payload too
        self.limits = limits
        self.restore = restore
        self.settle, self.average = settle, average
        self.settings = settings or IdentificationSettings()
        self.joints = supporting_joints(model)
        self._rows = model.indices(self.joints)
        self.outcome = GraspPayloadOutcome(NOT_RUN, "HOLD's identify stage not reached")
        self.staged = False
        self._entered: float | None = None  # [s] loop clock: the first snapshot in the stage
        self._sums: list[np.ndarray] = []
        self._count = 0
        self._first: float | None = None  # [s] stamp of the first averaged snapshot
        self._last_tick = -1
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def step(self, task: GraspTask, snapshot: LoopSnapshot) -> None:
        """Feed the newest snapshot; acts only while ``task`` is in its identify stage."""
        if self._done or not task.identifying or snapshot.tick == self._last_tick:
            return
        self._last_tick = snapshot.tick
        try:
            self._step(task, snapshot)
        except Exception as exc:  # a bug must not cost the grasp: report it, go on without
            self._finish(task, GraspPayloadOutcome(FAILED, f"{type(exc).__name__}: {exc}"))

    def _step(self, task: GraspTask, snapshot: LoopSnapshot) -> None:
        if self._entered is None:
            self._entered = snapshot.stamp
            effort = snapshot.measured_effort[self._rows]
            if np.any(np.isnan(effort)):
                self._finish(
                    task,
                    GraspPayloadOutcome(
                        NOT_RUN, "the backend measures no effort on the arm's joints"
                    ),
                )
            return
        if snapshot.stamp - self._entered < self.settle:
            return
        if self._first is None:
            self._first = snapshot.stamp
            self._sums = [np.zeros(self.model.nv) for _ in range(3)]
        for total, value in zip(
            self._sums,
            (snapshot.position, snapshot.velocity, snapshot.measured_effort),
            strict=True,
        ):
            total += value
        self._count += 1
        if snapshot.stamp - self._first < self.average:
            return
        q, v, effort = (total / self._count for total in self._sums)
        result = identify_mass(self.model, q, effort, v, joints=self.joints, settings=self.settings)
        if not isinstance(result, PayloadEstimate):
            self._finish(
                task,
                GraspPayloadOutcome(
                    REFUSED, f"{result.reason.value}: {result.message}", condition=result.condition
                ),
            )
            return
        mass = result.payload.mass
        try:
            stage_payload(self.controllers, result.payload, self.limits, self.loop)
        except PayloadError as exc:
            self._finish(
                task,
                GraspPayloadOutcome(
                    REFUSED,
                    f"over_rating: estimate m = {mass:.4g} kg not staged: {exc}",
                    mass,
                    result.mass_std,
                    result.condition,
                ),
            )
            return
        self.staged = True
        self._finish(
            task,
            GraspPayloadOutcome(
                IDENTIFIED,
                f"m = {mass:.4g} ± {result.mass_std:.2g} kg (mass only: one configuration), "
                f"condition {result.condition:.3g}, averaged over {self._count} snapshots; "
                "carried in the controllers' model until RELEASE",
                mass,
                result.mass_std,
                result.condition,
            ),
        )

    def _finish(self, task: GraspTask, outcome: GraspPayloadOutcome) -> None:
        self.outcome = outcome
        self._done = True
        task.identification_finished()

    def clear(self) -> bool:
        """Stage the payload from before the grasp back, if this identification staged one
        (RELEASE, the goal's end); True if it did. Idempotent."""
        if not self.staged:
            return False
        self.staged = False
        stage_payload(self.controllers, self.restore(), self.limits, self.loop)
        return True
