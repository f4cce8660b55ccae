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

from ct_controllers.config import load_config, load_parameters
from ct_controllers.ros.parameters import live_parameters

LIVE = live_parameters(load_config().controllers)


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


def test_gains_are_live_by_the_controllers_type_whatever_its_name(tmp_path: Path) -> None:
    """A configuration naming its joint impedance instance `arm_impedance` (and leaving out the
    other backends' sections): the node declares that instance's parameters from its type's
    schema, and its gains are live through SetParameters (`ros2 param set`), the rest of it
    read-only; the bundled instance name is not declared at all."""
    document = yaml.safe_load(
        (Path(__file__).parents[1] / "config" / "controllers.yaml").read_text()
    )
    params = document["/**/controller_manager"]["ros__parameters"]  # the bundled key
    params["arm_impedance"] = params.pop("joint_impedance")
    params["controllers"] = ["arm_impedance", "computed_torque"]
    params["default_controller"] = "arm_impedance"
    del params["canopen"], params["ros2_control_bridge"]
    path = tmp_path / "renamed.yaml"
    path.write_text(yaml.safe_dump(document))
    node = start_node("--ros-args", "--params-file", str(path))
    try:
        with ros_client("ct_renamed_client") as client:
            name = "arm_impedance.stiffness"
            old = list(client.get_parameter(name).double_array_value)
            assert old == params["arm_impedance"]["stiffness"]
            new = [k * 0.9 for k in old]
            (result,) = client.set_parameters(Parameter(name, value=new))
            assert result.successful, result.reason
            assert list(client.get_parameter(name).double_array_value) == new
            (result,) = client.set_parameters(Parameter(name, value=[1.0, 2.0]))
            assert not result.successful and "expected 9 values" in result.reason
            (result,) = client.set_parameters(
                Parameter("arm_impedance.gravity_compensation", value=False)
            )
            assert not result.successful
            declared = client.all_parameters()
    finally:
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=15)
        stop_node(node)
    assert not any(n.startswith("joint_impedance.") for n in declared)
    assert declared["arm_impedance.type"] == "ct_controllers/JointImpedance"
