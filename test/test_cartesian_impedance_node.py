"""A Cartesian impedance instance's live gains over the real node process (`ros2 param set` on
/ct/controller_manager through real rclpy and loopback DDS): a 6-vector stiffness and a scalar
nullspace stiffness are applied, judged by the same whole-state rules as joint gains; a bad
shape, an indefinite matrix, an unstable set, a negative damping ratio (the descriptor's range)
and a read-only entry are refused with a reason. The law itself: test_cartesian_impedance.py."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest
import yaml
from rcl_interfaces.srv import DescribeParameters
from rclpy.parameter import Parameter
from ros_helpers import NODE, ros_client, start_node, stop_node

from ct_controllers.plugins import CONTROLLERS, UnknownPluginError, load_plugin

TYPE = "ct_controllers/CartesianImpedance"


def _config(tmp_path: Path) -> Path:
    """The bundled configuration with a Cartesian impedance instance ``cart`` (its type's
    defaults) beside the joint laws; the joint impedance still runs."""
    document = yaml.safe_load(
        (Path(__file__).parents[1] / "config" / "controllers.yaml").read_text()
    )
    params = document["/**/controller_manager"]["ros__parameters"]
    params["controllers"] = [*params["controllers"], "cart"]
    params["cart"] = {"type": TYPE}
    path = tmp_path / "cartesian.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_cartesian_gains_are_live_and_judged_on_the_node(tmp_path: Path) -> None:
    """On the node: `cart.damping_ratio` is described with its range from 0; a 6-vector
    stiffness (0.8 × the defaults) and a scalar nullspace stiffness are applied and read back;
    7 values, an indefinite 6x6 matrix, a stiffness 10⁴ × the defaults (unstable at 1 kHz where
    the arm is), a negative damping ratio and the read-only stiffness_frame are refused, each
    with a reason naming what is wrong."""
    try:
        load_plugin(CONTROLLERS, TYPE)
    except UnknownPluginError:
        pytest.skip(f"{TYPE} is not in the installed package's entry points yet (make setup)")
    node = start_node("--ros-args", "--params-file", str(_config(tmp_path)))
    try:
        with ros_client("ct_cartesian_gains_client") as client:
            (ratio,) = client.call(
                DescribeParameters,
                f"{NODE}/describe_parameters",
                DescribeParameters.Request(names=["cart.damping_ratio"]),
            ).descriptors
            assert ratio.floating_point_range[0].from_value == 0.0
            default = list(client.get_parameter("cart.stiffness").double_array_value)
            assert len(default) == 6
            softer = [0.8 * k for k in default]
            for parameter in (
                Parameter("cart.stiffness", value=softer),
                Parameter("cart.nullspace_stiffness", value=20.0),
            ):
                (result,) = client.set_parameters(parameter)
                assert result.successful, result.reason
            assert list(client.get_parameter("cart.stiffness").double_array_value) == softer
            assert client.get_parameter("cart.nullspace_stiffness").double_value == 20.0
            indefinite = list(np.diag([1.0, 1.0, 1.0, 1.0, 1.0, -1.0]).ravel())
            for parameter, words in (
                (Parameter("cart.stiffness", value=[1.0] * 7), "expected 6 or 36 values"),
                (Parameter("cart.stiffness", value=indefinite), "not positive semi-definite"),
                (Parameter("cart.stiffness", value=[1e4 * k for k in default]), "unstable"),
                (Parameter("cart.damping_ratio", value=-1.0), "damping_ratio"),
                (Parameter("cart.stiffness_frame", value="tcp"), "stiffness_frame"),
            ):
                (result,) = client.set_parameters(parameter)
                assert not result.successful, parameter.name
                assert words in result.reason, result.reason
            assert list(client.get_parameter("cart.stiffness").double_array_value) == softer
    finally:
        node.send_signal(signal.SIGINT)
        node.communicate(timeout=15)
        stop_node(node)
