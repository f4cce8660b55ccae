"""The Grasp's HOLD identifying the held object (``grasp.identify_payload: true``) on the real
node process (real rclpy, loopback DDS) with the MuJoCo backend: the cube's mass, MuJoCo's
0.1 kg, is the truth. The result and /diagnostics report it; the controllers carry it until
RELEASE and not after."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import rclpy
from ct_interfaces.action import Grasp
from rclpy.action import ActionClient
from ros_helpers import Client, pose_message, start_node, stop_node

from ct_controllers.hardware.grasp_scene import CUBE_MASS


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """A node that identifies the payload in HOLD (rated payload 3 kg), and a client of it."""
    process = start_node(
        "--ros-args", "-p", "payload.rated_mass:=3.0", "-p", "grasp.identify_payload:=true"
    )
    rclpy.init()
    client = Client("ct_grasp_payload_client")
    try:
        assert client.spin_until(lambda: len(client.joint_states) > 5, 30.0), "no node"
        yield client
    finally:
        client.node.destroy_node()
        rclpy.shutdown()
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
    assert action.wait_for_server(timeout_sec=20.0)
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
