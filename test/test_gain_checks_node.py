"""Live gain sets judged as a whole state, over the real node process (`ros2 param set` on
/ct/controller_manager through real rclpy and loopback DDS): joints left without feedback, the
way back to the configured gains in either order, gains far above them. The rules themselves
are tested in plain Python in test_gain_checks.py."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import rclpy
from rclpy.parameter import Parameter
from ros_helpers import CONFIG, Client, start_node, stop_node

STIFFNESS = "joint_impedance.stiffness"
DAMPING = "joint_impedance.damping"
CONFIGURED = {
    STIFFNESS: [float(v) for v in CONFIG.controllers["joint_impedance"]["stiffness"]],
    DAMPING: [float(v) for v in CONFIG.controllers["joint_impedance"]["damping"]],
}
ZEROS = [0.0] * len(CONFIG.joint_names)


@dataclass
class RunningNode:
    process: subprocess.Popen[str]
    output: str = ""  # everything it printed (logs included), once it has stopped


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """One client for the whole module; the tests start and stop their own nodes."""
    rclpy.init()
    client = Client("ct_gain_checks_client")
    try:
        yield client
    finally:
        client.node.destroy_node()
        rclpy.shutdown()


@contextmanager
def running_node(client: Client, *arguments: str) -> Iterator[RunningNode]:
    """A fresh node (``arguments`` as for ct_control_node), stopped with SIGINT on exit; its
    output is in the yielded object's ``output`` afterwards."""
    node = RunningNode(start_node(*arguments))
    try:
        count = len(client.joint_states)
        assert client.spin_until(lambda: len(client.joint_states) > count + 5, 30.0), "no node"
        yield node
    finally:
        if node.process.poll() is None:
            node.process.send_signal(signal.SIGINT)
        try:
            node.output, _ = node.process.communicate(timeout=15)
        finally:
            stop_node(node.process)


def _set(client: Client, name: str, value: list[float]) -> tuple[bool, str]:
    (result,) = client.set_parameters(Parameter(name, value=value))
    return result.successful, result.reason


def _value(client: Client, name: str) -> list[float]:
    return list(client.get_parameter(name).double_array_value)


def test_a_free_joint_is_refused_and_the_defaults_come_back_in_either_order(
    client: Client,
) -> None:
    """Default node (allow_free_joints false). Stiffness 0 everywhere is applied (the damping
    still holds every joint); then damping 0 on joint7 is refused naming joint7 (the whole
    state would leave it without feedback) and damping 0 everywhere is refused naming every
    joint, the values unchanged. From stiffness 0 the configured gains come back with damping
    first or stiffness first. A uniform stiffness of 5143 N·m/rad (wrist configured 50) is
    applied, and the node logs a warning naming joint7 and its factor (103×)."""
    with running_node(client) as node:
        assert _set(client, STIFFNESS, ZEROS)[0]
        joint7 = list(CONFIGURED[DAMPING])
        joint7[CONFIG.joint_names.index("joint7")] = 0.0
        ok, reason = _set(client, DAMPING, joint7)
        assert not ok and "no feedback at all" in reason and "joint joint7 " in reason
        assert "joint6" not in reason and "allow_free_joints" in reason
        ok, reason = _set(client, DAMPING, ZEROS)
        assert not ok and all(joint in reason for joint in CONFIG.joint_names)
        assert _value(client, DAMPING) == CONFIGURED[DAMPING]
        assert _value(client, STIFFNESS) == ZEROS

        for first, second in ((DAMPING, STIFFNESS), (STIFFNESS, DAMPING)):
            assert _set(client, STIFFNESS, ZEROS)[0]
            for name in (first, second):
                ok, reason = _set(client, name, CONFIGURED[name])
                assert ok, f"restoring {name} ({first} first): {reason}"
            assert _value(client, STIFFNESS) == CONFIGURED[STIFFNESS]
            assert _value(client, DAMPING) == CONFIGURED[DAMPING]

        large = [5143.0] * len(CONFIG.joint_names)
        ok, reason = _set(client, STIFFNESS, large)
        assert ok, reason
        assert _value(client, STIFFNESS) == large
        assert _set(client, STIFFNESS, CONFIGURED[STIFFNESS])[0]
    assert "stiffness above 10× the configured gains on" in node.output
    assert "joint7 (103×)" in node.output


def test_with_free_joints_allowed_the_defaults_come_back_from_no_feedback_in_either_order(
    client: Client,
) -> None:
    """Node with allow_free_joints:=true. Stiffness 0 then damping 0 is applied (every joint
    free); the configured gains then come back stiffness first (through the undamped
    configured stiffness, radius just above 1: refused before, the measured defect) and, after
    zeroing again, damping first. The marginal step is logged as a step back."""
    with running_node(client, "--ros-args", "-p", "allow_free_joints:=true") as node:
        for first, second in ((STIFFNESS, DAMPING), (DAMPING, STIFFNESS)):
            for name in (STIFFNESS, DAMPING):
                ok, reason = _set(client, name, ZEROS)
                assert ok, f"zeroing {name}: {reason}"
            for name in (first, second):
                ok, reason = _set(client, name, CONFIGURED[name])
                assert ok, f"restoring {name} ({first} first): {reason}"
            assert _value(client, STIFFNESS) == CONFIGURED[STIFFNESS]
            assert _value(client, DAMPING) == CONFIGURED[DAMPING]
    assert "without any feedback (allow_free_joints is true)" in node.output
    assert "a step back toward the configured gains through a marginal state" in node.output
