"""ct_controllers.parameters_yaml: a parameter file's scalars read as ROS 2 reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ct_controllers.config import load_config
from ct_controllers.parameters_yaml import load_yaml
from ct_controllers.share import share_directory


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("6.0e5", 6.0e5),
        ("1e-3", 1e-3),
        ("-2E+2", -200.0),
        (".5e1", 5.0),
        ("1.0e+5", 1.0e5),  # YAML 1.1's own form, as before
        ("0.25", 0.25),
    ],
)
def test_exponent_forms_are_floats_as_ros_reads_them(text: str, value: float) -> None:
    """A scalar with an exponent, signed or not, with or without a dot, is a float (strtod's
    reading, as rcl_yaml_param_parser's), equal to Python's float() of it."""
    loaded = load_yaml(f"x: {text}")["x"]
    assert isinstance(loaded, float) and loaded == pytest.approx(value) == float(text)


@pytest.mark.parametrize(
    ("text", "value"), [("5", 5), ("-3", -3), ("e5", "e5"), ("1e", "1e"), ("'1e-3'", "1e-3")]
)
def test_integers_and_strings_stay_what_they_are(text: str, value: object) -> None:
    """Integers stay ints; what is no number (or is quoted) stays a string."""
    loaded = load_yaml(f"x: {text}")["x"]
    assert loaded == value and type(loaded) is type(value)


def test_a_configuration_with_exponent_gains_loads(tmp_path: Path) -> None:
    """The bundled controllers.yaml with its joint impedance stiffness written 6.0e2, 3e2, ...:
    the stack loads it with the same numbers (it refused "expected a number, got '6.0e2'")."""
    text = (share_directory() / "config" / "controllers.yaml").read_text()
    old = "stiffness: [600.0, 600.0, 300.0, 300.0, 100.0, 100.0, 50.0, 100.0, 100.0]"
    new = "stiffness: [6.0e2, 6e2, 3e2, 3.0e2, 1e2, 1e2, 5e1, 1e2, 1e2]"
    assert old in text
    path = tmp_path / "controllers.yaml"
    path.write_text(text.replace(old, new, 1))
    stiffness = load_config(path).controllers["joint_impedance"]["stiffness"]
    assert list(stiffness) == [600.0, 600.0, 300.0, 300.0, 100.0, 100.0, 50.0, 100.0, 100.0]
