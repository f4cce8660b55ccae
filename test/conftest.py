"""Test session environment: DDS pinned to loopback, a private ROS domain, logs in a temp dir.

Set before any test imports rclpy, and inherited by every process the tests start.
"""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from ct_controllers.ros.dds import loopback_environment

os.environ.update(loopback_environment())
# A domain of our own, so that parallel sessions on this machine do not see each other.
os.environ.setdefault("ROS_DOMAIN_ID", str(10 + os.getpid() % 90))
_ros_home = tempfile.mkdtemp(prefix="ct_ros_home_")
# pytest-xdist's workers ("gw0", "gw1", ...) inherit the environment this file set in the
# session's controller: each takes the next domain (and a ROS home) of its own, or one worker's
# nodes would answer the other's clients.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw"):
    _controller_domain = int(os.environ["ROS_DOMAIN_ID"])
    os.environ["ROS_DOMAIN_ID"] = str(10 + (_controller_domain - 10 + 1 + int(_worker[2:])) % 90)
    os.environ["ROS_HOME"] = _ros_home
    os.environ["ROS_LOG_DIR"] = os.path.join(_ros_home, "log")
os.environ.setdefault("ROS_HOME", _ros_home)
os.environ.setdefault("ROS_LOG_DIR", os.path.join(_ros_home, "log"))
# The nodes the tests start run alone in that domain: their start-up check for another node of
# their name (ct_controllers/ros/node_uniqueness.py) takes one look at the graph instead of
# waiting out its 1.5 s discovery window (about 1 s of every node start, tens of node starts).
# test_namespaces, which tests that check, runs its nodes with the product's window.
os.environ.setdefault("CT_DISCOVERY_WINDOW", "0")


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """For tests with real-time deadlines of 30–100 ms against threads of this process: late in
    a long pytest session a full garbage collection of everything earlier tests left can pause
    every thread for that long (seen in CI as a lost heartbeat). Freeze what exists, as the
    control node does after start-up, so collections only scan what the test allocates."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(scope="module")
def frozen_module_heap() -> Iterator[None]:
    """:func:`frozen_heap` for a module whose rigs live across its tests (module-scoped
    fixtures): frozen once, before the first rig comes up. A collection while a rig runs is
    the very pause to avoid — the function-scoped fixture collects before each test, with the
    module's rig already running (seen: 65-87 ms without a PDO on CANopen, every run)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


# Fixtures that say their test has wall-clock deadlines against threads of this process.
_DEADLINE_FIXTURES = frozenset({"frozen_heap", "frozen_module_heap"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test using :func:`frozen_heap` or :func:`frozen_module_heap` is a ``realtime`` one
    (pyproject.toml), whether or not its module says so."""
    for item in items:
        if _DEADLINE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.realtime)


# --- fixtures shared by several modules (each module gets its own instance) ------------------
@pytest.fixture(scope="module")
def robot() -> Any:
    """A RobotModel of the bundled arm, the module's own (its data is scratch: not shared)."""
    from helpers import new_robot_model

    return new_robot_model()


@pytest.fixture
def lockstep_stack() -> Iterator[Any]:
    """The bundled stack on MuJoCo in lockstep, brought up without a loop thread (the test
    drives ``loop.run_ticks``), shut down after the test."""
    from helpers import bundled_description, lockstep_config

    from ct_controllers.runtime.stack import build_stack

    stack = build_stack(lockstep_config(), bundled_description())
    stack.bring_up()
    try:
        yield stack
    finally:
        stack.shut_down()


@pytest.fixture(scope="module")
def home(robot: Any) -> Any:
    """The bundled home_positions as a configuration of ``robot`` (model order)."""
    from helpers import home_configuration

    return home_configuration(robot)


@pytest.fixture(scope="module")
def node_process() -> Iterator[Any]:
    """The real node in a process of its own, as `ct-bringup sim` starts it, for the module's
    tests; stopped (SIGINT, then waited for) after them."""
    from ros_helpers import start_node, stop_node

    process = start_node()
    yield process
    stop_node(process)
