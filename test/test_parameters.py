"""ct_controllers.ros.parameters over the real node: every configuration entry is a declared
parameter with a description, and a `ros2 param dump` of the node loads back unchanged."""

from __future__ import annotations

import array
import signal
from pathlib import Path

import yaml
from rcl_interfaces.srv import DescribeParameters
from rclpy.parameter import Parameter
from ros_helpers import NODE, ros_client, start_node, stop_node

from ct_controllers.config import load_parameters
from ct_controllers.ros.parameters import LIVE


def _dump(values: dict, path: Path) -> None:
    """The file `ros2 param dump /ct/controller_manager` writes: nested by dots."""
    tree: dict = {}
    for name, value in sorted(values.items()):
        *parents, leaf = name.split(".")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = list(value) if isinstance(value, (list, tuple, array.array)) else value
    path.write_text(yaml.safe_dump({NODE: {"ros__parameters": tree}}))


def test_dumped_parameters_load_back_unchanged(tmp_path: Path) -> None:
    """Dump every parameter of a running node with changed gains, start a fresh node from that
    file: it reports exactly the same values. And every configuration entry is declared with a
    description of its own, and only the gains are writable."""
    first = start_node()
    try:
        with ros_client("ct_dump_client") as client:
            stiffness = list(client.get_parameter("joint_impedance.stiffness").double_array_value)
            changed = [k * 0.9 for k in stiffness]
            (result,) = client.set_parameters(Parameter("joint_impedance.stiffness", value=changed))
            assert result.successful, result.reason
            before = client.all_parameters()
            names = sorted(load_parameters())
            described = client.call(
                DescribeParameters,
                f"{NODE}/describe_parameters",
                DescribeParameters.Request(names=names),
            ).descriptors
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=15)
    finally:
        stop_node(first)
    assert set(load_parameters()) <= set(before)
    dump = tmp_path / "dump.yaml"
    _dump(before, dump)
    second = start_node("--ros-args", "--params-file", str(dump))
    try:
        with ros_client("ct_load_client") as client:
            after = client.all_parameters()
    finally:
        second.send_signal(signal.SIGINT)
        second.communicate(timeout=15)
        stop_node(second)
    assert after == before
    assert after["joint_impedance.stiffness"] == changed
    undescribed = [d.name for d in described if not d.description or d.description == d.name]
    assert not undescribed, f"parameters without a description: {undescribed}"
    assert all(d.read_only == (d.name not in LIVE) for d in described)
