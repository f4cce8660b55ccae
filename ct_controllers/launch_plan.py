"""What ``ros2 launch ct_controllers sim.launch.py`` / ``hardware.launch.py`` and ``ct-bringup``
start, decided in one plain function (no ``launch`` import), so that tests run exactly what the
launch files hand to launch_ros.

:func:`launch_plan` says which executable (``lib/ct_controllers/ct_control_node``, found
through the ament index as ``ros2 run`` and launch_ros's ``Node`` find it), the node's name and
namespace, the parameter file (the installed ``config/controllers.yaml`` unless another is
given), the parameters the target sets (``backend``, ``use_sim_time``, ``robot_description``) and
the environment (DDS on loopback, or not with ``dds_network``: :mod:`ct_controllers.ros.dds`).
The name and namespace default to ``/ct/controller_manager``; a user's (``namespace:=``,
``ct-bringup --namespace``, ``--ros-args -r __ns:=`` / ``-r __node:=``) replaces the default
in the plan itself, because rcl applies the first matching remap rule and the plan's come first
(:mod:`ct_controllers.node_names`). ``clock_topic`` remaps a simulation's ``/clock`` (two
simulated arms in one ROS graph: docs/ros-interface.md, "Several arms").
:meth:`LaunchPlan.command` is the command line launch_ros builds from it (checked against the
Jazzy launch_ros sources: ``Node._perform_substitutions`` and ``Node._get_parameter_rule``);
:func:`exit_message` is the one line a launch prints when the node ends.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from ct_controllers.config import TARGETS
from ct_controllers.node_names import (
    CLOCK_TOPIC,
    absolute_namespace,
    fully_qualified,
    node_name,
    resolve_topic,
    sections_for,
    topic_name,
)
from ct_controllers.parameters_yaml import load_yaml
from ct_controllers.ros.dds import dds_environment, network_requested
from ct_controllers.share import PACKAGE, share_directory

EXECUTABLE = "ct_control_node"
NODE_NAME = "controller_manager"
NAMESPACE = "ct"  # the default, relative (under a namespace pushed by an including launch)
# The prefix of the node's one-line refusal on standard error (ct_control_node's main()).
REFUSAL_PREFIX = f"{EXECUTABLE}: "


BACKENDS = ("mujoco", "ros2_control_bridge", "canopen")


@dataclass(frozen=True)
class LaunchPlan:
    """One node to start: what, with which ROS arguments, in which environment."""

    target: str
    package: str
    executable: str
    name: str
    # As given to launch_ros's Node: relative ("ct", the default, or "arm2": launch_ros puts it
    # under a namespace an including launch pushed) or absolute ("/arm2": taken as it is).
    namespace: str
    parameter_files: tuple[str, ...]
    parameters: tuple[tuple[str, str | bool], ...]  # -p overrides, in order
    environment: Mapping[str, str | None]  # None = unset in the node's environment
    dds_network: bool
    clock_topic: str = CLOCK_TOPIC  # where a simulation publishes its clock (as given)

    @property
    def node(self) -> str:
        """The node's fully qualified name (with no namespace pushed by an including launch)."""
        return fully_qualified(absolute_namespace(self.namespace), self.name)

    @property
    def clock(self) -> str:
        """The absolute topic a simulation's clock goes to (``/clock`` unless remapped)."""
        return resolve_topic(self.clock_topic, absolute_namespace(self.namespace), self.name)

    def remappings(self) -> list[tuple[str, str]]:
        """Topic remaps (launch_ros's ``remappings``): ``/clock`` when ``clock_topic`` moves it."""
        return [] if self.clock_topic == CLOCK_TOPIC else [(CLOCK_TOPIC, self.clock_topic)]

    def ros_arguments(self) -> list[str]:
        """The arguments launch_ros's ``Node`` puts after the executable for this plan: one
        ``--ros-args`` section with the name and namespace remaps, each parameter file, each
        parameter as ``-p name:=<yaml.dump(value)>`` (launch_ros writes a
        ``launch_ros.parameter_descriptions.Parameter`` so), then the topic remaps."""
        namespace = absolute_namespace(self.namespace)
        arguments = ["--ros-args", "-r", f"__node:={self.name}", "-r", f"__ns:={namespace}"]
        for path in self.parameter_files:
            arguments += ["--params-file", path]
        for name, value in self.parameters:
            arguments += ["-p", f"{name}:={yaml.dump(value)}"]
        for source, target in self.remappings():
            arguments += ["-r", f"{source}:={target}"]
        return arguments

    def executable_path(self) -> str:
        """``<prefix>/lib/<package>/<executable>`` with the prefix from the ament index: where
        ``ros2 run`` and launch_ros's ``ExecutableInPackage`` look."""
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix

        try:
            prefix = get_package_prefix(self.package)
        except (PackageNotFoundError, OSError) as exc:  # OSError: AMENT_PREFIX_PATH unset
            raise LookupError(f"package '{self.package}' is not in the ament index: {exc}") from exc
        found = shutil.which(self.executable, path=os.path.join(prefix, "lib", self.package))
        if found is None:
            raise LookupError(f"no executable '{self.executable}' in {prefix}/lib/{self.package}")
        return found

    def command(self, executable: str | None = None) -> list[str]:
        """The whole command line (``executable``: default :meth:`executable_path`)."""
        return [executable or self.executable_path(), *self.ros_arguments()]

    def child_environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with :attr:`environment` applied: the node's environment."""
        env = dict(base)
        for name, value in self.environment.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env


def _flag(value: str | bool | None) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = value.strip().lower()
    if text in ("", "default"):
        return None
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def launch_plan(
    target: str,
    *,
    backend: str = "",
    robot_description: str = "",
    use_sim_time: str | bool | None = None,
    config: str = "",
    dds_network: str | bool | None = None,
    environ: Mapping[str, str] | None = None,
    namespace: str = "",
    name: str = "",
    clock_topic: str = "",
) -> LaunchPlan:
    """The node a launch of ``target`` (``sim`` | ``hardware``) starts. Empty arguments take the
    target's defaults (``namespace`` ``ct``, ``name`` ``controller_manager``, ``clock_topic``
    ``/clock``); ``dds_network`` None follows ``CT_DDS_NETWORK`` in ``environ`` (default: this
    process's environment). A name, namespace or topic that is not a ROS one, or a parameter
    file with no section for the node's fully qualified name, is a ValueError naming it."""
    if target not in TARGETS:
        raise ValueError(f"unknown target '{target}' (one of {', '.join(TARGETS)})")
    defaults = TARGETS[target]
    backend = backend or defaults.backend
    if backend not in BACKENDS:
        raise ValueError(f"backend '{backend}' is not one of {', '.join(BACKENDS)}")
    sim_time = _flag(use_sim_time)
    network = _flag(dds_network)
    if network is None:
        network = network_requested(environ)
    config_file = config or str(share_directory() / "config" / "controllers.yaml")
    node = node_name(name.strip()) if name.strip() else NODE_NAME
    space = namespace.strip() or NAMESPACE
    absolute_namespace(space)  # validates; kept as given (relative: under a pushed namespace)
    clock = topic_name(clock_topic.strip()) if clock_topic.strip() else CLOCK_TOPIC
    _check_sections(config_file, fully_qualified(absolute_namespace(space), node))
    parameters: list[tuple[str, str | bool]] = [
        ("backend", backend),
        ("use_sim_time", defaults.use_sim_time if sim_time is None else sim_time),
    ]
    if robot_description:
        parameters.append(("robot_description", robot_description))
    return LaunchPlan(
        target=target,
        package=PACKAGE,
        executable=EXECUTABLE,
        name=node,
        namespace=space,
        parameter_files=(str(Path(config_file).absolute()),),
        parameters=tuple(parameters),
        environment=dds_environment(network, environ),
        dds_network=network,
        clock_topic=clock,
    )


def _check_sections(config_file: str, node: str) -> None:
    """A parameter file none of whose sections applies to ``node`` would leave the node on its
    declared defaults without a word (rcl skips sections for other nodes): refuse it, naming
    the keys and the one that serves any namespace. A file that cannot be read is the node's
    to report (it names the file)."""
    try:
        document = load_yaml(Path(config_file).read_text())
    except (OSError, yaml.YAMLError):
        return
    if not isinstance(document, Mapping):
        return
    keys = [str(key) for key in document]
    if not sections_for(keys, node):
        raise ValueError(
            f"{config_file} has no parameters for {node} (its sections: {', '.join(keys)}); "
            f"key them '/**/{node.rsplit('/', 1)[1]}' to serve the node in any namespace"
        )


def exit_message(returncode: int, stderr: str = "") -> str:
    """The one line a launch prints when the node ends: its refusal (the last
    ``ct_control_node: ...`` line of its standard error) with the exit code, or how it ended."""
    refusal = ""
    for line in stderr.splitlines():
        if line.startswith(REFUSAL_PREFIX):
            refusal = line[len(REFUSAL_PREFIX) :].strip()
    if returncode == 0:
        return f"{EXECUTABLE} ended (exit code 0)"
    if returncode < 0:
        how = f"{EXECUTABLE} was killed by signal {-returncode}"
    else:
        how = f"{EXECUTABLE} exited with code {returncode}"
    return f"{how}: {refusal}" if refusal else how
