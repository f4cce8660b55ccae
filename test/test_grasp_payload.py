"""The Grasp's HOLD identifying the held object (``grasp.identify_payload: true``) on the real
node process (real rclpy, loopback DDS) with the MuJoCo backend: the cube's mass, MuJoCo's
0.1 kg, is the truth. The result and /diagnostics report it; the controllers carry it until
RELEASE and not after. And GraspPayload (runtime/grasp_payload.py) on its own, in-process."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from ct_interfaces.action import Grasp
from helpers import bundled_config, home_configuration, new_robot_model
from rclpy.action import ActionClient
from ros_helpers import Client, connected_client, pose_message, start_node, stop_node, wait_ready

from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.hardware.grasp_scene import CUBE_MASS
from ct_controllers.model.payload import Payload, PayloadLimits
from ct_controllers.runtime.grasp_payload import (
    AVERAGE,
    FAILED,
    IDENTIFIED,
    NOT_RUN,
    REFUSED,
    SETTLE,
    GraspPayload,
)
from ct_controllers.runtime.loop_snapshot import LoopSnapshot
from ct_controllers.types import JointReference, JointState


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """A node that identifies the payload in HOLD (rated payload 3 kg), and a client of it."""
    process = start_node(
        "--ros-args", "-p", "payload.rated_mass:=3.0", "-p", "grasp.identify_payload:=true"
    )
    try:
        with connected_client("ct_grasp_payload_client", Client) as client:
            yield client
    finally:
        stop_node(process)


def _diagnostic(message: object, key: str) -> str | None:
    """The value of ``key`` in the control loop's diagnostic status, or None."""
    for status in message.status:  # type: ignore[attr-defined]
        if status.name.endswith("control loop"):
            for value in status.values:
                if value.key == key:
                    return str(value.value)
    return None


def test_hold_identifies_the_cube_and_release_clears_it(client: Client) -> None:
    """A Grasp of the cube ends SUCCESS (DONE) with payload_status ``identified`` and the mass
    within 5 % of MuJoCo's 0.1 kg (3σ within 25 g, condition below 50), or ``refused`` with its
    reason — never a mass off by more; while it was carried (between the identification and
    RELEASE) /diagnostics showed it as the controllers' payload_mass; after the goal the
    controllers carry none (payload_mass 0) and /diagnostics keeps the grasp's outcome."""
    action = ActionClient(client.node, Grasp, "/ct/grasp")
    assert wait_ready(action.server_is_ready, 20.0)
    client.wait_at_rest()
    goal = Grasp.Goal(
        grasp_pose=pose_message((0.5, 0.0, 0.025)),
        approach_offset=0.08,
        lift_height=0.1,
        grasp_effort=20.0,
        hold_duration=1.5,  # ≥ one /diagnostics period (1 Hz) with the cube carried
    )
    client.diagnostics.clear()
    future = action.send_goal_async(goal)
    assert client.spin_until(future.done, 5.0)
    result = client.result(future.result(), 40.0)
    assert result.error_code == Grasp.Result.SUCCESS, result.message
    print(f"grasp payload: {result.payload_status}: {result.payload_message}")  # on failure
    assert result.payload_status in ("identified", "refused"), result
    if result.payload_status == "identified":
        assert abs(result.payload_mass - CUBE_MASS) <= 0.05 * CUBE_MASS, result
        assert 3 * result.payload_mass_std <= 0.025 and result.payload_condition < 50.0, result
        carried = [_diagnostic(m, "payload_mass") for m in client.diagnostics]
        assert f"{result.payload_mass:.4g}" in carried, carried
    else:
        assert math.isnan(result.payload_mass) or result.payload_message, result
    before = len(client.diagnostics)
    assert client.spin_until(lambda: len(client.diagnostics) > before + 1, 5.0)
    latest = client.diagnostics[-1]
    assert _diagnostic(latest, "payload_mass") == "0"
    assert _diagnostic(latest, "grasp_payload_status") == result.payload_status


# --- GraspPayload on its own: a real model and controller, snapshots built from the truth ------
LIMITS = PayloadLimits(rated_mass=3.0, max_com_distance=0.3)
OBJECT = Payload(0.5, (0.0, 0.0, 0.02))  # [kg], [m] TCP frame


class _Task:
    """A grasp task in HOLD's identify stage (only what GraspPayload reads and calls)."""

    def __init__(self) -> None:
        self.identifying = True
        self.finished = 0

    def identification_finished(self) -> None:
        self.finished += 1


def _setup() -> tuple[Any, dict[str, Any], Any, Any]:
    model = new_robot_model()
    config = bundled_config()
    controller = JointImpedanceController.from_parameters(
        model.with_own_data(), config.joint_names, config.controllers["joint_impedance"]
    )
    q = home_configuration(model)
    state = JointState(0.0, q, np.zeros(model.nv))
    hold = JointReference(q, np.zeros(model.nv), np.zeros(model.nv))
    return model, {"joint_impedance": controller}, state, hold


class _Loop:
    """What the control loop offers GraspPayload: its safe hold's payload, recorded."""

    def __init__(self) -> None:
        self.staged: list[Payload | None] = []

    def stage_payload(self, payload: Payload | None) -> None:
        self.staged.append(payload)


def _snapshots(model: Any, effort: np.ndarray, seconds: float) -> Iterator[LoopSnapshot]:
    """Loop snapshots at 100 Hz of the arm held still at home measuring ``effort``."""
    q = home_configuration(model)
    for tick in range(round(seconds * 100) + 1):
        yield LoopSnapshot(
            tick=tick,
            stamp=tick * 0.01,
            joint_names=tuple(model.joint_names),
            position=q,
            velocity=np.zeros(model.nv),
            measured_effort=effort,
            reference_position=q,
            commanded_effort=effort,
            saturated=np.zeros(model.nv, dtype=bool),
            motion=None,
            fault=None,
        )


def test_the_identified_mass_is_staged_until_cleared_and_the_task_told_once() -> None:
    """Torques of the arm holding 0.5 kg (Pinocchio's gravity of the loaded model) at one
    configuration: after the settle time and the averaging window GraspPayload identifies
    0.5 kg (1e-6), stages it on the controller (taken at its next tick) and on the loop given
    (its safe hold), tells the task once; clear() stages the payload from before (none here)
    back on both, once."""
    model, controllers, state, hold = _setup()
    q = home_configuration(model)
    effort = model.with_payload(OBJECT).gravity(q)
    loop = _Loop()
    identification = GraspPayload(
        model.with_own_data(), controllers, LIMITS, lambda: None, loop=loop
    )
    task = _Task()
    for snapshot in _snapshots(model, effort, SETTLE + AVERAGE + 0.1):
        identification.step(task, snapshot)  # type: ignore[arg-type]
    outcome = identification.outcome
    assert outcome.status == IDENTIFIED and task.finished == 1, outcome
    assert abs(outcome.mass - OBJECT.mass) < 1e-6
    controller = controllers["joint_impedance"]
    controller.update(state, hold, 1e-3)
    assert controller.payload is not None and abs(controller.payload.mass - OBJECT.mass) < 1e-6
    assert identification.clear() and not identification.clear()
    controller.update(state, hold, 1e-3)
    assert controller.payload is None
    assert [None if p is None else round(p.mass, 6) for p in loop.staged] == [OBJECT.mass, None]


def test_no_effort_a_refusal_or_an_error_stage_nothing_and_the_task_goes_on() -> None:
    """No measured effort (NaN): ``not_run`` at once; the empty arm's torques: ``refused``
    (no mass); a controller that raises when staged (a bug): ``failed`` naming the error. Each
    time the task is told it is done and nothing is staged (clear() has nothing to undo)."""
    model, controllers, state, hold = _setup()
    q = home_configuration(model)
    for effort, status, words in (
        (np.full(model.nv, np.nan), NOT_RUN, "no effort"),
        (model.gravity(q), REFUSED, "no_mass"),
    ):
        identification = GraspPayload(model.with_own_data(), controllers, LIMITS, lambda: None)
        task = _Task()
        for snapshot in _snapshots(model, effort, SETTLE + AVERAGE + 0.1):
            identification.step(task, snapshot)  # type: ignore[arg-type]
        assert identification.outcome.status == status, identification.outcome
        assert words in identification.outcome.message and task.finished == 1
        assert not identification.clear()

    class Broken(dict):  # type: ignore[type-arg]
        def items(self) -> Any:
            raise RuntimeError("broken controller map")

    identification = GraspPayload(model.with_own_data(), Broken(controllers), LIMITS, lambda: None)
    task = _Task()
    for snapshot in _snapshots(model, model.with_payload(OBJECT).gravity(q), 1.5):
        identification.step(task, snapshot)  # type: ignore[arg-type]
    assert identification.outcome.status == FAILED and task.finished == 1
    assert "broken controller map" in identification.outcome.message
    controllers["joint_impedance"].update(state, hold, 1e-3)
    assert controllers["joint_impedance"].payload is None
