"""One node per name, one server per action, one clock per simulation: the start-up check.

Two control nodes with one fully qualified name both execute every goal sent to it and
interleave their ``joint_states`` and ``/clock`` streams (issue 23): DDS lets them, rcl says
nothing. So a starting node looks at the ROS graph before it serves anything or touches its
hardware, and refuses (:class:`NameTaken`, exit code 2 from ``ct_control_node``) when it finds

- another live node with its own fully qualified name, or
- one of its action servers (``<ns>/move_joints``, ``<ns>/move_to_pose``, ``<ns>/grasp``, and
  the standard-interface controllers' ``<ns>/<controller>/follow_joint_trajectory`` and
  ``<ns>/<controller>/gripper_cmd``: :func:`standard_actions`)
  already served, by any node, or
- with a simulated backend (it publishes a clock), its clock topic already published: two
  simulations on one ``/clock`` make sim time jump back and forth.

**Discovery window.** Absence cannot be observed, only waited for: the node declares itself
unique after the window (:func:`discovery_window`) without evidence. Fast DDS (Jazzy's default
RMW) completes the discovery of a participant that already runs at that one's next periodic
announcement: with Fast DDS's defaults every 3 s — measured on this project's VM, a new node saw a
running one 0.2-2.7 s after it was created (12 trials, while a test session ran) — so the window
is :data:`DISCOVERY_WINDOW`, 3.5 s: one whole period plus the endpoint exchange that follows, with
margin for a loaded machine. The bundled loopback profile (``fastdds_loopback.xml``) announces
every 0.5 s: 0.16-0.79 s in 20 trials under the same load, so with that profile in use the
window is :data:`LOOPBACK_DISCOVERY_WINDOW`, 1.5 s. The window runs while the stack is built
(about 1 s). Evidence found earlier ends the wait at once. ``CT_DISCOVERY_WINDOW`` (seconds,
:data:`WINDOW_VARIABLE`) sets the window where the starter knows no other node can be running
(the test session sets 0, one look at the graph, for the nodes it starts outside the tests of
this check: they run alone in a ROS domain of their own).

**Live, not remembered.** A participant that was killed stays in the graphs of those that knew
it until its lease runs out (20 s by default), and a discovery server relays it. Before
refusing, the check asks: an action server is live when it answers a result request for an
unknown goal (rclpy and rclcpp answer ``STATUS_UNKNOWN`` at once; nothing changes on the
server), a clock when a message arrives. A
server or clock that stays silent for :data:`PROBE_TIMEOUT` is taken as gone, with a warning. A
node with this name that serves none of our actions (not a ct_controllers node) cannot be
probed: it is refused on the graph's word.

The check is made for a node started while another runs, the case that drove two arms with one
goal. Start-ups that overlap (each node created within the other's window) are not covered: both
may refuse, one may, or, if neither has seen the other when its window ends, both may run.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rclpy
from ct_interfaces.action import Grasp, MoveJoints, MoveToPose
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rosgraph_msgs.msg import Clock

from ct_controllers.errors import CtError
from ct_controllers.ros.dds import PROFILE, PROFILE_VARIABLES

WINDOW_VARIABLE = "CT_DISCOVERY_WINDOW"  # [s] the window, set by the starter (see above)
DISCOVERY_WINDOW = 3.5  # [s] from node creation until the node is declared unique (see above)
LOOPBACK_DISCOVERY_WINDOW = 1.5  # [s] the same with the bundled profile (0.5 s announcements)
NAME_WAIT = 1.0  # [s] for the name of a live server's node, when its endpoint came first
PROBE_TIMEOUT = 1.5  # [s] for a server found in the graph to answer, or a clock to tick
POLL_PERIOD = 0.05  # [s] between looks at the graph during the window
RESEND_PERIOD = 0.25  # [s] a probe request is re-sent (one sent before matching is lost)
# The motion actions the node serves, by the name it gives each (relative to its namespace).
MOTION_ACTIONS: tuple[tuple[str, Any], ...] = (
    ("move_joints", MoveJoints),
    ("move_to_pose", MoveToPose),
    ("grasp", Grasp),
)
CLOCK_TOPIC = "/clock"


def standard_actions(
    interface_controllers: Mapping[str, Mapping[str, Any]],
) -> tuple[tuple[str, Any], ...]:
    """The actions the configured standard-interface controllers serve (relative names)."""
    from control_msgs.action import FollowJointTrajectory, GripperCommand, ParallelGripperCommand

    from ct_controllers.interface_controllers import (
        GRIPPER,
        PARALLEL_GRIPPER,
        TRAJECTORY,
        of_kind,
    )

    found: list[tuple[str, Any]] = []
    for kind, suffix, action in (
        (TRAJECTORY, "follow_joint_trajectory", FollowJointTrajectory),
        (GRIPPER, "gripper_cmd", GripperCommand),
        (PARALLEL_GRIPPER, "gripper_cmd", ParallelGripperCommand),
    ):
        found += [(f"{name}/{suffix}", action) for name in of_kind(interface_controllers, kind)]
    return tuple(found)


REMEDY = "give this one another namespace (ct-bringup --namespace, namespace:=, -r __ns:=)"


class NameTaken(CtError, ValueError):
    """Another live node has this node's name, serves its actions or publishes its clock; the
    message (one line) names it."""


@dataclass(frozen=True)
class Evidence:
    """What the graph shows of others: nodes with our name (besides us), our action names with
    a server (each with the servers' names), the publishers of our clock topic."""

    same_name: int
    served: tuple[tuple[str, Any, tuple[str, ...]], ...]  # (action, type, server nodes)
    clock: tuple[str, ...]  # publishers of the clock topic

    def __bool__(self) -> bool:
        return bool(self.same_name or self.served or self.clock)


def discovery_window(environ: Mapping[str, str] | None = None) -> float:
    """[s] ``CT_DISCOVERY_WINDOW`` where it is set (a number >= 0, else ValueError naming it);
    otherwise :data:`LOOPBACK_DISCOVERY_WINDOW` when Fast DDS reads the bundled loopback profile
    (both profile variables name it, as :mod:`ct_controllers.ros.dds` sets them), else
    :data:`DISCOVERY_WINDOW` (Fast DDS's 3 s announcements, or a profile of the user's)."""
    environment = os.environ if environ is None else environ
    given = environment.get(WINDOW_VARIABLE, "").strip()
    if given:
        try:
            window = float(given)
        except ValueError:
            window = math.nan
        if not window >= 0.0 or math.isinf(window):
            raise ValueError(f"{WINDOW_VARIABLE}={given!r}: not a number of seconds >= 0")
        return window
    profiles = {environment.get(name, "") for name in PROFILE_VARIABLES}
    bundled = len(profiles) == 1 and Path(profiles.pop()).name == PROFILE.name
    return LOOPBACK_DISCOVERY_WINDOW if bundled else DISCOVERY_WINDOW


class UniquenessCheck:
    """Created right after the node (the discovery window starts), :meth:`verify` called before
    the node serves anything: raises :class:`NameTaken` or returns."""

    def __init__(
        self,
        node: Node,
        *,
        window: float | None = None,
        probe_timeout: float = PROBE_TIMEOUT,
        actions: tuple[tuple[str, Any], ...] = MOTION_ACTIONS,
    ) -> None:
        self._node = node
        self._started = time.monotonic()
        self._window = discovery_window() if window is None else window  # [s]
        self._probe_timeout = probe_timeout  # [s]
        self.name = node.get_fully_qualified_name()
        self._identity = (node.get_name(), node.get_namespace())
        # The names rcl gives them (namespace, remaps), as the servers will have them.
        self._actions = tuple((node.resolve_topic_name(name), kind) for name, kind in actions)
        self.clock_topic = node.resolve_topic_name(CLOCK_TOPIC)

    def add_actions(self, actions: tuple[tuple[str, Any], ...]) -> None:
        """Also look for servers of ``actions`` (names relative to the namespace): those known
        once the configuration is read (the standard-interface controllers' actions)."""
        resolved = tuple((self._node.resolve_topic_name(n), kind) for n, kind in actions)
        self._actions = self._actions + resolved

    def verify(self, publishes_clock: bool) -> None:
        """Wait out the discovery window (less if evidence appears), then refuse what is live."""
        deadline = self._started + self._window
        while True:
            evidence = self.evidence(publishes_clock)
            if evidence or time.monotonic() >= deadline:
                break
            time.sleep(POLL_PERIOD)
        if evidence:
            self._refuse_live(evidence)

    def evidence(self, publishes_clock: bool) -> Evidence:
        node = self._node
        same_name = node.get_node_names_and_namespaces().count(self._identity) - 1
        served = []
        for action, kind in self._actions:
            servers = _publishers(node, f"{action}/_action/status")
            if servers:
                served.append((action, kind, servers))
        clock = _publishers(node, self.clock_topic) if publishes_clock else ()
        return Evidence(max(0, same_name), tuple(served), clock)

    def _named_publishers(self, topic: str) -> tuple[str, ...]:
        """The publishers of ``topic`` once their nodes' names are known (an endpoint is often
        discovered before its node's name), waiting at most :data:`NAME_WAIT`."""
        deadline = time.monotonic() + NAME_WAIT
        while True:
            names = _publishers(self._node, topic)
            if all(names) or time.monotonic() >= deadline:
                return names
            time.sleep(POLL_PERIOD)

    def _refuse_live(self, evidence: Evidence) -> None:
        logger = self._node.get_logger()
        probe = rclpy.create_node(
            f"_ct_uniqueness_probe_{uuid.uuid4().hex[:12]}",  # hidden (leading underscore)
            context=self._node.context,
            start_parameter_services=False,
            enable_rosout=False,
        )
        executor = SingleThreadedExecutor(context=self._node.context)
        executor.add_node(probe)
        try:
            for action, kind, servers in evidence.served:
                if _answers(probe, executor, action, kind, self._probe_timeout):
                    servers = self._named_publishers(f"{action}/_action/status") or servers
                    who = _named(servers)
                    if self.name in servers:
                        raise NameTaken(
                            f"another node named {self.name} is already running (it serves "
                            f"{action}): refusing to start a second; {REMEDY}"
                        )
                    raise NameTaken(
                        f"{action} is already served by {who}: refusing to start a second "
                        f"server of it as {self.name}; {REMEDY}"
                    )
                logger.warning(
                    f"{action} is in the ROS graph ({_named(servers)}) but does not answer "
                    f"within {self._probe_timeout:.1f} s: taken as a node that ended without "
                    "leaving the graph (killed); starting"
                )
            if evidence.same_name and not evidence.served:
                raise NameTaken(
                    f"another node named {self.name} is already running: refusing to start a "
                    f"second; {REMEDY}"
                )
            if evidence.clock and _ticks(probe, executor, self.clock_topic, self._probe_timeout):
                clock = _publishers(self._node, self.clock_topic) or evidence.clock
                raise NameTaken(
                    f"{self.clock_topic} is already published by {_named(clock)} "
                    f"(another simulation): one clock per simulation; give this one its own "
                    f"(clock_topic:={self.name.rsplit('/', 1)[0]}/clock, ct-bringup "
                    "--clock-topic) or its own ROS_DOMAIN_ID"
                )
        finally:
            executor.remove_node(probe)
            executor.shutdown(timeout_sec=0.0)
            probe.destroy_node()


UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"  # rmw's name for an endpoint whose node is not known yet


def _publishers(node: Node, topic: str) -> tuple[str, ...]:
    """The fully qualified names of the nodes publishing ``topic`` (graph view; an endpoint
    discovered before its node's name is counted, unnamed, as ``""``)."""
    names = {
        ""
        if info.node_name == UNKNOWN_NODE
        else f"{info.node_namespace.rstrip('/')}/{info.node_name}"
        for info in node.get_publishers_info_by_topic(topic)
    }
    return tuple(sorted(names))


def _named(names: tuple[str, ...]) -> str:
    return ", ".join(name for name in names if name) or "another node"


def _answers(probe: Node, executor: Any, action: str, kind: Any, timeout: float) -> bool:
    """Whether the server of ``action`` answers a result request for a goal id nobody has."""
    service = kind.Impl.GetResultService
    client = probe.create_client(service, f"{action}/_action/get_result")
    try:
        request = service.Request()
        request.goal_id.uuid = list(uuid.uuid4().bytes)
        deadline = time.monotonic() + timeout
        futures = []
        while time.monotonic() < deadline:
            if client.service_is_ready():
                futures.append(client.call_async(request))
            resend = min(deadline, time.monotonic() + RESEND_PERIOD)
            while time.monotonic() < resend:
                executor.spin_once(timeout_sec=0.02)
                if any(future.done() for future in futures):
                    return True
        return False
    finally:
        probe.destroy_client(client)


def _ticks(probe: Node, executor: Any, topic: str, timeout: float) -> bool:
    """Whether a message arrives on the clock ``topic`` within ``timeout``."""
    received: list[Clock] = []
    subscription = probe.create_subscription(Clock, topic, received.append, 10)
    try:
        deadline = time.monotonic() + timeout
        while not received and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.02)
        return bool(received)
    finally:
        probe.destroy_subscription(subscription)
