"""Test-side ROS pieces: the real node started as a separate process, and a client node with
an action client, subscriptions and service calls, spun by hand (real rclpy, loopback DDS)."""

from __future__ import annotations

import array
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import rclpy
from builtin_interfaces.msg import Duration
from ct_interfaces.action import MoveJoints
from ct_interfaces.msg import ControllerState
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters
from rclpy.action import ActionClient
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ct_controllers.config import load_config

CONFIG = load_config()
ARM = list(CONFIG.arm_joints)
HOME = np.array(CONFIG.home_positions[: len(ARM)])
NODE = "/ct/controller_manager"


READY_POLL = 0.01  # [s] between looks at whether a service or action server is matched


def wait_ready(is_ready: Callable[[], bool], timeout: float) -> bool:
    """``is_ready()`` (a client's ``service_is_ready`` or an action client's
    ``server_is_ready``) looked at every 10 ms until it holds (True) or ``timeout`` [s] passes
    (False): rclpy's ``wait_for_service``/``wait_for_server`` do the same every 0.25 s (an
    "arbitrary" period, its comment says), so a wait for a node that is still starting ended
    up to 0.25 s after its server appeared (measured: 0.2-0.3 s less per node start)."""
    deadline = time.monotonic() + timeout
    while not is_ready():
        if time.monotonic() >= deadline:
            return False
        time.sleep(READY_POLL)
    return True


def spin_until(node: Node, condition: Callable[[], bool], timeout: float) -> bool:
    """Spin ``node`` until ``condition()`` holds (True) or ``timeout`` [s] passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.02)
        if condition():
            return True
    return False


class Client:
    """A test-side node with an action client and subscriptions, spun by hand."""

    def __init__(self, name: str = "ct_test_client") -> None:
        self.node = Node(name)
        self.move_joints = ActionClient(self.node, MoveJoints, "/ct/move_joints")
        self.joint_states: list[JointState] = []
        self.clock: list[Clock] = []
        self.controller_states: list[ControllerState] = []
        self.diagnostics: list[DiagnosticArray] = []
        self.node.create_subscription(JointState, "/ct/joint_states", self.joint_states.append, 10)
        self.node.create_subscription(Clock, "/clock", self.clock.append, 10)
        self.node.create_subscription(
            ControllerState, "/ct/controller_state", self.controller_states.append, 10
        )
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)

    def spin_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        return spin_until(self.node, condition, timeout)

    def send(self, goal: MoveJoints.Goal, feedback: list | None = None) -> Any:  # type: ignore[type-arg]
        future = self.move_joints.send_goal_async(
            goal, feedback_callback=(feedback.append if feedback is not None else None)
        )
        assert self.spin_until(future.done, 5.0), "goal not answered"
        return future.result()

    def result(self, handle: Any, timeout: float = 15.0) -> Any:
        future = handle.get_result_async()
        assert self.spin_until(future.done, timeout), "no result"
        return future.result().result

    def send_to(self, action: Any, goal: Any, timeout: float = 20.0) -> Any:
        """``goal`` sent on the action client ``action``: its result, or None when refused."""
        future = action.send_goal_async(goal)
        assert self.spin_until(future.done, 5.0), "goal not answered"
        handle = future.result()
        if not handle.accepted:
            return None
        return self.result(handle, timeout)

    def call(self, service_type: Any, name: str, request: Any, timeout: float = 5.0) -> Any:
        client = self.node.create_client(service_type, name)
        try:
            assert wait_ready(client.service_is_ready, timeout), f"{name} never appeared"
            future = client.call_async(request)
            assert self.spin_until(future.done, timeout), f"{name} did not answer"
            return future.result()
        finally:
            self.node.destroy_client(client)

    def set_parameters(self, *parameters: Parameter) -> list:  # type: ignore[type-arg]
        request = SetParameters.Request(parameters=[p.to_parameter_msg() for p in parameters])
        return list(self.call(SetParameters, f"{NODE}/set_parameters", request).results)

    def get_parameter(self, name: str) -> ParameterMsg:
        request = GetParameters.Request(names=[name])
        return self.call(GetParameters, f"{NODE}/get_parameters", request).values[0]

    def all_parameters(self) -> dict[str, Any]:
        """Every parameter of the node, name → Python value."""
        names = list(
            self.call(
                ListParameters, f"{NODE}/list_parameters", ListParameters.Request()
            ).result.names
        )
        values = self.call(
            GetParameters, f"{NODE}/get_parameters", GetParameters.Request(names=names)
        ).values
        plain = {}
        for name, value in zip(names, values, strict=True):
            python = Parameter.from_parameter_msg(ParameterMsg(name=name, value=value)).value
            plain[name] = list(python) if isinstance(python, (array.array, tuple)) else python
        return plain

    def latest_arm_positions(self) -> np.ndarray:
        message = self.joint_states[-1]
        index = {n: i for i, n in enumerate(message.name)}
        return np.array([message.position[index[n]] for n in ARM])

    def wait_at_rest(self, timeout: float = 10.0) -> None:
        assert self.spin_until(
            lambda: (
                bool(self.joint_states) and np.max(np.abs(self.joint_states[-1].velocity)) < 1e-3
            ),
            timeout,
        ), "the arm did not come to rest"


class NodeProcess(subprocess.Popen):  # type: ignore[type-arg]
    """A node process whose output (stdout and stderr) is read as it comes, by a thread of its
    own: a pipe nobody reads fills at 64 KiB and then blocks the node's logging, and with it
    every thread that logs (seen: goals stalled for seconds in a burst test). ``communicate``
    waits for the exit and returns everything printed."""

    def __init__(self, command: list[str], **kwargs: Any) -> None:
        super().__init__(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(os.environ),
            **kwargs,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.stdout is not None
        for line in self.stdout:
            self.lines.append(line)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[str, None]:
        self.wait(timeout)
        self._reader.join(timeout)
        return "".join(self.lines), None


def start_node(*arguments: str, **kwargs: Any) -> NodeProcess:
    """The real node, started as `ct-bringup sim` starts it (plus ``arguments``)."""
    return NodeProcess(
        [sys.executable, "-m", "ct_controllers.ros.control_node", "--target", "sim", *arguments],
        **kwargs,
    )


def stop_node(process: subprocess.Popen) -> None:  # type: ignore[type-arg]
    if process.poll() is None:
        process.kill()
        process.wait(5)


ClientType = TypeVar("ClientType", bound="Client")


@contextmanager
def connected_client(name: str, kind: type[ClientType]) -> Iterator[ClientType]:
    """rclpy initialised in this process and a ``kind`` client that has seen the running node's
    joint states (within 30 s); the client destroyed and rclpy shut down afterwards."""
    rclpy.init()
    client = kind(name)
    try:
        assert client.spin_until(lambda: len(client.joint_states) > 5, 30.0), "no node"
        yield client
    finally:
        client.node.destroy_node()
        rclpy.shutdown()


@contextmanager
def ros_client(name: str = "ct_test_client") -> Iterator[Client]:
    """rclpy initialised in this process, a Client connected to a running node."""
    rclpy.init()
    client = Client(name)
    try:
        assert wait_ready(client.move_joints.server_is_ready, 20.0), "no action server"
        assert client.spin_until(lambda: len(client.joint_states) > 0, 10.0), "no joint states"
        yield client
    finally:
        client.node.destroy_node()
        rclpy.shutdown()


def goal(
    names: list[str], positions: list[float], duration: float = 1.0, controller: str = ""
) -> MoveJoints.Goal:
    return MoveJoints.Goal(
        joint_names=names, positions=positions, duration=duration, controller=controller
    )


def pose_message(
    position: tuple[float, float, float],
    quaternion: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0),  # x y z w: tool down
    frame: str = "base_link",
    stamp: tuple[int, int] = (0, 0),
) -> PoseStamped:
    """A PoseStamped goal pose: position [m], orientation quaternion (x, y, z, w; the default
    points the tool down), frame, stamp (sec, nanosec; 0 = now)."""
    message = PoseStamped()
    message.header.frame_id = frame
    message.header.stamp.sec, message.header.stamp.nanosec = stamp
    message.pose.position.x, message.pose.position.y, message.pose.position.z = position
    o = message.pose.orientation
    o.x, o.y, o.z, o.w = quaternion
    return message


def duration(seconds: float) -> Duration:
    whole = math.floor(seconds)
    return Duration(sec=int(whole), nanosec=round((seconds - whole) * 1e9))


def moveit_trajectory(
    start: np.ndarray,
    goal: np.ndarray,
    seconds: float,
    count: int = 20,
    names: tuple[str, ...] | list[str] | None = None,
) -> JointTrajectory:
    """What moveit_simple_controller_manager sends: stamp 0, the start state as the first point
    at t = 0, then time-parameterized points with positions, velocities and accelerations (a
    quintic in time here), ending at rest."""
    trajectory = JointTrajectory(joint_names=list(ARM if names is None else names))
    for t in np.linspace(0.0, seconds, count):
        s = t / seconds
        shape = 10 * s**3 - 15 * s**4 + 6 * s**5
        rate = (30 * s**2 - 60 * s**3 + 30 * s**4) / seconds
        curvature = (60 * s - 180 * s**2 + 120 * s**3) / seconds**2
        delta = goal - start
        trajectory.points.append(
            JointTrajectoryPoint(
                positions=(start + delta * shape).tolist(),
                velocities=(delta * rate).tolist(),
                accelerations=(delta * curvature).tolist(),
                time_from_start=duration(float(t)),
            )
        )
    return trajectory


@contextmanager
def bridge_node(
    tmp_path: Any, name: str, plant_options: dict[str, Any] | None = None, **parameters: Any
) -> Iterator[tuple[NodeProcess, Any]]:
    """The real node on the ros2_control bridge backend (100 Hz, the slow-loop gains, armed,
    200 ms deadlines; ``parameters`` on top) against a plant process on topics of its own
    (``name`` and this process's id), both stopped afterwards: (node, plant). The bundled
    parameters file first and these overrides on top, as launch_plan passes them; the node's
    output is printed once it has stopped."""
    import yaml

    from ct_controllers.config import default_config_path
    from ct_controllers.sim.gains import SLOW_LOOP_GAINS
    from ct_controllers.sim.ros2_control_plant import PlantProcess

    topics = f"/{name}_{os.getpid()}"
    values: dict[str, Any] = {
        "hardware.armed": True,
        "update_rate": 100,
        "ros2_control_bridge.joint_states_topic": f"{topics}/joint_states",
        "ros2_control_bridge.command_topic": f"{topics}/commands",
        "watchdog.state_timeout": 0.2,
        "watchdog.command_timeout": 0.2,
        **SLOW_LOOP_GAINS,
        **parameters,
    }
    overrides = tmp_path / f"{name}.yaml"
    overrides.write_text(yaml.safe_dump({"/**": {"ros__parameters": values}}))
    plant = PlantProcess(
        f"{topics}/joint_states",
        f"{topics}/commands",
        list(CONFIG.joint_names),
        **(plant_options or {}),
    )
    command = [sys.executable, "-m", "ct_controllers.ros.control_node", "--target", "hardware"]
    bundled = str(default_config_path())
    node = NodeProcess(
        [*command, "--ros-args", "--params-file", bundled, "--params-file", str(overrides)]
    )
    try:
        yield node, plant
    finally:
        stop_node(node)
        plant.stop()
        print(node.communicate(timeout=5)[0][-3000:])  # the node's log, shown on a failure
