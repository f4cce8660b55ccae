"""ROS 2 parameter files read as ROS reads them.

ROS 2's parameter parser (rcl_yaml_param_parser) takes a scalar that reads as a floating-point
number as a double, ``6.0e5`` and ``1e-3`` included; PyYAML's safe loader follows YAML 1.1,
where a float needs a dot and a signed exponent, and leaves those two strings (the stack then
refused ``1e-3`` as "expected a number"). :func:`load_yaml` is the safe loader with YAML 1.2's
exponent forms resolved as floats too; integers stay integers.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class _RosYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, plus floats written with an unsigned or dotless exponent."""


_RosYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?([0-9][0-9_]*(\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_yaml(text: str) -> Any:
    """The YAML document ``text`` as ROS 2 reads a parameter file's scalars (module docstring);
    ``yaml.YAMLError`` where it is no YAML."""
    return yaml.load(text, Loader=_RosYamlLoader)
