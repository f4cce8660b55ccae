"""``~/identify_payload`` on the real node process (real rclpy, loopback DDS), MuJoCo backend whose
simulated arm carries an object the controllers' model does not know (``mujoco.payload_mass``,
``mujoco.payload_com``: the truth): the estimate is accepted, staged and shown in the payload
parameters; each refusal says its reason and changes nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ct_interfaces.action import IdentifyPayload, MoveJoints
from rclpy.action import ActionClient
from ros_helpers import (
    ARM,
    HOME,
    NODE,
    Client,
    bridge_node,
    connected_client,
    goal,
    start_node,
    stop_node,
    wait_ready,
)

MASS = 1.0  # [kg] the simulated object's
COM = [0.01, -0.015, 0.04]  # [m] TCP frame
SETTLE = 0.5  # [s] per hold (the default 1 s is for real drives; MuJoCo settles within it)
Result = IdentifyPayload.Result


class IdentifyClient(Client):
    """A client with the identification's action client too."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.identify = ActionClient(self.node, IdentifyPayload, f"{NODE}/identify_payload")

    def run(
        self,
        request: IdentifyPayload.Goal,
        feedback: list[Any] | None = None,
        timeout: float = 90.0,
    ) -> Any:
        """Send ``request`` and wait for its result."""
        # Generous: discovering an action's five endpoints took over 20 s at load 9 (2 cores).
        assert wait_ready(self.identify.server_is_ready, 45.0), "no identify_payload server"
        future = self.identify.send_goal_async(
            request, feedback_callback=(feedback.append if feedback is not None else None)
        )
        assert self.spin_until(future.done, 5.0), "goal not answered"
        return self.result(future.result(), timeout)

    def payload_parameters(self) -> tuple[float, list[float]]:
        mass = self.get_parameter("payload.mass").double_value
        return mass, list(self.get_parameter("payload.com").double_array_value)


def _connected() -> Iterator[IdentifyClient]:
    """A client of the running node (rclpy initialised for it, shut down afterwards)."""
    with connected_client("ct_identify_client", IdentifyClient) as client:
        yield client


def _client(*arguments: str) -> Iterator[IdentifyClient]:
    """A node started with ``arguments`` and a client of it, stopped afterwards."""
    process = start_node("--ros-args", *arguments)
    try:
        yield from _connected()
    finally:
        stop_node(process)


def test_refused_with_no_measured_effort_and_nothing_moves(tmp_path: Path) -> None:
    """The node on the ros2_control bridge whose joint states carry no effort (the plant
    publishes an empty effort field, as joint_state_broadcaster does for hardware without
    effort state interfaces), a rated payload configured: REFUSED (``no_effort``, naming the
    joints and the backend) before anything moves; payload.mass stays 0. (Before the module's
    node starts: one node of this name at a time.)"""
    with bridge_node(tmp_path, "ct_identify_node", **{"payload.rated_mass": 3.0}) as (_, plant):
        plant.send("no_effort")
        for client in _connected():
            client.spin_until(lambda: False, 0.3)  # states without effort have arrived
            start = client.latest_arm_positions()
            result = client.run(IdentifyPayload.Goal(), timeout=10.0)
            assert result.error_code == Result.REFUSED, result
            assert result.refusal == "no_effort", result
            assert "measures no effort on joint1" in result.message, result.message
            client.spin_until(lambda: False, 0.3)
            np.testing.assert_allclose(client.latest_arm_positions(), start, atol=2e-3)
            assert client.payload_parameters()[0] == 0.0


@pytest.fixture(scope="module")
def loaded() -> Iterator[IdentifyClient]:
    """The node with a rated payload of 3 kg, its simulated arm carrying 1 kg at ``COM``."""
    yield from _client(
        "-p",
        "payload.rated_mass:=3.0",
        "-p",
        f"mujoco.payload_mass:={MASS}",
        "-p",
        f"mujoco.payload_com:={COM}",
    )


def test_refused_without_a_rated_payload_and_nothing_moves() -> None:
    """A configuration without a rated payload (payload.rated_mass 0, the default): REFUSED
    (``no_rated_payload``, naming the parameter) before anything moves; payload.mass stays 0.
    (First in the module: its node runs alone, before the module's node starts.)"""
    for client in _client("-p", f"mujoco.payload_mass:={MASS}"):
        client.wait_at_rest()
        start = client.latest_arm_positions()
        result = client.run(IdentifyPayload.Goal(settle=SETTLE), timeout=10.0)
        assert result.error_code == Result.REFUSED, result
        assert result.refusal == "no_rated_payload" and "payload.rated_mass" in result.message
        client.spin_until(lambda: False, 0.5)
        np.testing.assert_allclose(client.latest_arm_positions(), start, atol=1e-3)
        assert client.payload_parameters()[0] == 0.0


def test_identification_is_accepted_staged_and_shown_in_the_parameters(
    loaded: IdentifyClient,
) -> None:
    """From home, the eight planned holds identify the simulated 1 kg: SUCCESS, accepted, mass
    within 5 %, COM within 1 cm (TCP frame), standard errors positive and within the core's
    tolerances (3σ_m ≤ 25 g), condition below 50, eight holds; feedback came for each hold
    with its stages; payload.mass and payload.com now hold the estimate; the arm is back where
    it started (5 mrad)."""
    loaded.wait_at_rest()
    start = loaded.latest_arm_positions()
    feedback: list[Any] = []
    result = loaded.run(IdentifyPayload.Goal(settle=SETTLE), feedback)
    print(f"identify_payload: {result.message}")  # shown on a failure (and with -s)
    assert result.error_code == Result.SUCCESS, result.message
    assert result.accepted and result.refusal == "", result
    assert abs(result.mass - MASS) <= 0.05 * MASS, result
    assert np.linalg.norm(np.array(result.com) - COM) <= 0.01, result
    assert result.mass_std > 0.0 and 3 * result.mass_std <= 0.025, result
    assert np.all(np.array(result.com_std) > 0.0), result
    assert result.condition < 50.0 and result.samples == 8, result
    seen = {(f.feedback.hold, f.feedback.stage) for f in feedback}
    for hold in range(8):
        assert {(hold, "moving"), (hold, "measuring")} <= seen, (hold, sorted(seen))
    assert all(f.feedback.holds == 8 for f in feedback)
    mass, com = loaded.payload_parameters()
    assert mass == pytest.approx(result.mass, rel=1e-12)
    np.testing.assert_allclose(com, result.com, rtol=1e-12)
    loaded.wait_at_rest()
    np.testing.assert_allclose(loaded.latest_arm_positions(), start, atol=5e-3)


def test_holds_too_close_together_are_refused_after_measuring_and_change_nothing(
    loaded: IdentifyClient,
) -> None:
    """Holds with the wrist turned by 0.01 rad only: measured, then REFUSED by the core as
    ``uncertain`` (the COM's 3σ far above 1 cm), its message naming the COM's spread; the
    estimate fields stay NaN, the payload parameters are unchanged and the arm is back where it
    started (5 mrad)."""
    loaded.wait_at_rest()
    before = loaded.payload_parameters()
    start = loaded.latest_arm_positions()
    result = loaded.run(IdentifyPayload.Goal(amplitude=0.01, settle=SETTLE))
    assert result.error_code == Result.REFUSED and not result.accepted, result
    assert result.refusal == "uncertain" and "com ±" in result.message, result
    assert np.isnan(result.mass) and result.samples == 8, result
    assert loaded.payload_parameters() == before
    loaded.wait_at_rest()
    np.testing.assert_allclose(loaded.latest_arm_positions(), start, atol=5e-3)


def test_refused_while_a_goal_moves_the_arm_and_the_goal_goes_on(loaded: IdentifyClient) -> None:
    """While a MoveJoints goal moves the arm, an identification is REFUSED (``busy``) at once,
    naming the running goal; the MoveJoints goal is not preempted (it ends SUCCESS) and the
    payload parameters are unchanged."""
    before = loaded.payload_parameters()
    target = HOME.copy()
    target[0] += 0.3
    moving: list[Any] = []
    move = loaded.send(goal(ARM, target.tolist(), duration=2.0), moving)
    assert move.accepted
    # The goal runs (its feedback came), not merely accepted: generous, 20 s at load 9.
    assert loaded.spin_until(lambda: bool(moving), 20.0), "no feedback from MoveJoints"
    started = time.monotonic()
    result = loaded.run(IdentifyPayload.Goal(settle=SETTLE), timeout=10.0)
    assert time.monotonic() - started < 5.0
    assert result.error_code == Result.REFUSED and not result.accepted, result
    assert result.refusal == "busy" and "another goal moves the arm" in result.message, result
    assert np.isnan(result.mass)
    assert loaded.result(move).error_code == MoveJoints.Result.SUCCESS
    assert loaded.payload_parameters() == before
    back = loaded.send(goal(ARM, HOME.tolist(), duration=2.0))
    assert loaded.result(back).error_code == MoveJoints.Result.SUCCESS


def test_a_newer_goal_preempts_it_and_nothing_is_staged(loaded: IdentifyClient) -> None:
    """An identification is a motion goal: a MoveJoints goal sent while it runs preempts it
    (PREEMPTED, not accepted) and runs to SUCCESS; the payload parameters are unchanged."""
    before = loaded.payload_parameters()
    loaded.wait_at_rest()
    assert wait_ready(loaded.identify.server_is_ready, 5.0)
    feedback: list[Any] = []
    future = loaded.identify.send_goal_async(
        IdentifyPayload.Goal(settle=SETTLE), feedback_callback=feedback.append
    )
    assert loaded.spin_until(future.done, 5.0)
    # The first hold's motion under way: its feedback came (a fixed wait is not enough on a
    # loaded machine: the execute callback may not have started, and the MoveJoints goal then
    # runs first and the identification is refused as busy). Generous: 20 s at load 9.
    assert loaded.spin_until(lambda: bool(feedback), 20.0), "no feedback from the identification"
    loaded.spin_until(lambda: False, 0.3)
    move = loaded.send(goal(ARM, HOME.tolist(), duration=1.5))
    result = loaded.result(future.result(), 10.0)
    assert result.error_code == Result.PREEMPTED and not result.accepted, result
    assert loaded.result(move).error_code == MoveJoints.Result.SUCCESS
    assert loaded.payload_parameters() == before


def test_bad_goal_values_are_invalid_and_move_nothing(loaded: IdentifyClient) -> None:
    """amplitude beyond 1 rad or not finite, settle negative: INVALID_GOAL naming the field;
    the arm stays where it is."""
    loaded.wait_at_rest()
    start = loaded.latest_arm_positions()
    for request, field in (
        (IdentifyPayload.Goal(amplitude=2.0), "amplitude"),
        (IdentifyPayload.Goal(amplitude=float("nan")), "amplitude"),
        (IdentifyPayload.Goal(settle=-1.0), "settle"),
    ):
        result = loaded.run(request, timeout=5.0)
        assert result.error_code == Result.INVALID_GOAL and field in result.message, result
    loaded.spin_until(lambda: False, 0.5)
    np.testing.assert_allclose(loaded.latest_arm_positions(), start, atol=1e-3)
