"""payload.mass and payload.com on the real node process (`ros2 param set` through real rclpy and
loopback DDS): a payload set by hand enters the running controller's model, bad values are
refused naming the parameter and change nothing, mass 0 clears it."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import new_robot_model
from rclpy.parameter import Parameter
from ros_helpers import ARM, CONFIG, Client, connected_client, start_node, stop_node

from ct_controllers.model.payload import Payload

COM = [0.01, -0.015, 0.04]  # [m] TCP frame


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """A node whose configuration states a rated payload of 3 kg, and a client of it."""
    process = start_node("--ros-args", "-p", "payload.rated_mass:=3.0")
    try:
        with connected_client("ct_payload_client", Client) as client:
            yield client
    finally:
        stop_node(process)


def _settled_positions(client: Client) -> np.ndarray:
    """The arm's positions [rad] once they have stopped changing: two readings 0.3 s of wall
    time apart within 0.02 mrad (a velocity threshold alone can pass on one quiet sample)."""
    deadline = time.monotonic() + 15.0
    previous = client.latest_arm_positions()
    while time.monotonic() < deadline:
        count = len(client.joint_states)
        client.spin_until(lambda: False, 0.3)
        assert len(client.joint_states) > count, "no joint states"
        current = client.latest_arm_positions()
        if np.max(np.abs(current - previous)) < 2e-5:
            return current
        previous = current
    raise AssertionError("the arm did not settle")


def _set(client: Client, *parameters: Parameter) -> tuple[bool, str]:
    """Set ``parameters`` in one request (rclpy's set_parameters takes them one by one, each
    answered): (successful, reason), the same for each here."""
    results = client.set_parameters(*parameters)
    assert len({r.successful for r in results}) == 1
    return results[0].successful, results[0].reason


def test_a_payload_over_the_rating_at_launch_is_refused_naming_it() -> None:
    """A node launched with payload.mass above payload.rated_mass exits with code 2 and one
    line naming payload.mass and the rating; nothing runs. (First in the module: no other node
    of the same name runs yet.)"""
    process = start_node("--ros-args", "-p", "payload.rated_mass:=3.0", "-p", "payload.mass:=5.0")
    try:
        output, _ = process.communicate(timeout=60)
    finally:
        stop_node(process)
    assert process.returncode == 2, output
    assert "payload.mass" in output and "rated payload 3 kg" in output, output


def test_a_payload_set_by_hand_enters_the_model_and_bad_values_change_nothing(
    client: Client,
) -> None:
    """The default joint impedance holds home with gravity compensation from its model. With
    payload.mass 1 kg at payload.com set, it compensates a weight the simulated arm does not
    carry: each arm joint moves by K⁻¹ Δg (Δg the payload's gravity torque from Pinocchio,
    K the configured stiffness) within 25 % or 0.5 mrad. A negative mass, one above the rated
    3 kg, NaN, a 2-element com and a com 1 m away are each refused naming the parameter, the
    values and the arm unchanged; mass 0 puts the arm back where it was."""
    start = _settled_positions(client)
    ok, reason = _set(
        client, Parameter("payload.mass", value=1.0), Parameter("payload.com", value=COM)
    )
    assert ok, reason
    loaded = _settled_positions(client)
    model = new_robot_model()
    q = model.neutral()
    q[model.indices(CONFIG.joint_names)] = CONFIG.home_positions
    arm = model.indices(ARM)
    extra = (model.with_payload(Payload(1.0, COM)).gravity(q) - model.gravity(q))[arm]
    stiffness = np.array(CONFIG.controllers["joint_impedance"]["stiffness"])[: len(ARM)]
    expected = extra / stiffness  # [rad] K δq = Δg: the spring carries the phantom weight
    moved = loaded - start
    assert np.max(np.abs(expected)) > 5e-3  # a visible effect
    np.testing.assert_allclose(moved, expected, rtol=0.25, atol=5e-4)
    for parameter, named in (
        (Parameter("payload.mass", value=-1.0), "payload.mass"),
        (Parameter("payload.mass", value=5.0), "rated payload 3 kg"),
        (Parameter("payload.mass", value=math.nan), "payload.mass"),
        (Parameter("payload.com", value=[0.0, 0.0]), "payload.com"),
        (Parameter("payload.com", value=[0.0, 0.0, 1.0]), "payload.com"),
    ):
        ok, reason = _set(client, parameter)
        assert not ok and named in reason, (parameter.name, reason)
    assert client.get_parameter("payload.mass").double_value == 1.0
    assert list(client.get_parameter("payload.com").double_array_value) == COM
    np.testing.assert_allclose(_settled_positions(client), loaded, atol=2e-4)
    ok, reason = _set(client, Parameter("payload.mass", value=0.0))
    assert ok, reason
    np.testing.assert_allclose(_settled_positions(client), start, atol=5e-4)
