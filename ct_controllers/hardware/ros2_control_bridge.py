"""A bridge to a running ros2_control stack (plugin ``ct_controllers/Ros2ControlBridge``): for
robots whose drivers already run under ros2_control, this backend reads its joint_state_broadcaster
and writes to a forward_command_controller.

- state: ``sensor_msgs/JointState`` on ``joint_states_topic``; each message becomes a
  :class:`StateSample` with the header stamp (a zero stamp = missing), the names *as sent* (the
  boundary guard matches them by name and rejects unknown, missing or duplicate ones), the
  frame id, and NaN efforts when the message carries none;
- commands: ``std_msgs/Float64MultiArray`` on ``command_topic``, values in ``command_joints``
  order (the forward_command_controller's ``joints`` parameter), which must name exactly the
  hardware's joints, checked at configure time; the interface (effort | position) is the
  controller's.

The bridge is the one module under ``hardware/`` that speaks rclpy: it owns an rclpy context, a
node and an executor thread of its own, so it works the same inside the ROS node process and
stand-alone (tests, benches); its context ignores the process's command line (``--ros-args``
meant for the control node), so its node keeps its own name and parameters. DDS stays on
loopback unless ``CT_DDS_NETWORK=1``. Its clock is the system clock (ROS time without sim
time), in which the ros2_control side stamps its messages.
It drives real hardware: :meth:`activate` refuses unless ``hardware.armed``, then waits for the
first JointState.

A forward_command_controller holds its last command forever. So the bridge watches the command
deadline itself, from its executor thread: when the control loop has written nothing for
``command_timeout`` (it stalled or died), the bridge publishes a hold computed from the latest
measured state — τ = g(q) − D v with the robot model and ``safe_hold.damping`` for effort
joints, the measured position for position joints — every check period until commands come
back, and latches a fault (:meth:`fault`) until :meth:`reset_fault` with commands flowing.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ct_controllers.hardware.interface import (
    EFFORT,
    POSITION,
    FloatArray,
    JointCommand,
    LifecycleError,
    StateSample,
    SystemInterface,
)
from ct_controllers.hardware.ros2_control_bridge_parameters import PARAMETERS
from ct_controllers.model.description import RobotDescription
from ct_controllers.model.robot import RobotModel
from ct_controllers.ros.dds import ensure_loopback_dds

ensure_loopback_dds()  # before rclpy creates any participant

import rclpy  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

if TYPE_CHECKING:
    from ct_controllers.config import StackConfig


@dataclass(frozen=True)
class BridgeConfig:
    """Topics, the forward controller's joint order and interface; ``first_state_timeout`` [s]
    to wait for the first JointState at activation."""

    joint_states_topic: str = "/joint_states"
    command_topic: str = "/effort_controller/commands"
    command_interface: str = EFFORT
    command_joints: tuple[str, ...] = ()
    node_name: str = "ct_ros2_control_bridge"
    first_state_timeout: float = 5.0
    command_timeout: float = 0.03  # [s] no write for this long: the bridge holds by itself
    check_period: float = 0.01  # [s] how often its executor checks that deadline

    def __post_init__(self) -> None:
        if self.command_interface not in (EFFORT, POSITION):
            raise ValueError(
                f"ros2_control_bridge.command_interface '{self.command_interface}' is not one of "
                f"{EFFORT}, {POSITION}"
            )


def _stamp_seconds(message: JointState) -> float:
    stamp = message.header.stamp
    if stamp.sec == 0 and stamp.nanosec == 0:
        return math.nan  # not stamped
    return stamp.sec + stamp.nanosec * 1e-9


class Ros2ControlBridge(SystemInterface):
    """See the module docstring."""

    BACKEND = "ros2_control_bridge"  # the `backend:` value that selects it
    PARAMETERS = PARAMETERS  # its section of controllers.yaml

    requires_arming = True
    backend_name = "ct_controllers/Ros2ControlBridge"

    def __init__(
        self,
        joint_names: Sequence[str],
        config: BridgeConfig,
        hold: Callable[[dict[str, float], dict[str, float]], FloatArray] | None = None,
        *,
        armed: bool = False,
    ) -> None:
        """``hold(q, v)``: the hold effort [N·m | N] in hardware order from measured positions
        and velocities by joint name (None: the bridge cannot hold effort joints by itself and
        only reports the missed deadline); ``armed``: ``hardware.armed``, without which it
        refuses to activate."""
        super().__init__(
            joint_names=tuple(joint_names),
            command_interfaces=(config.command_interface,) * len(joint_names),
            armed=armed,
        )
        order = config.command_joints or self.joint_names
        twice = sorted({n for n in order if list(order).count(n) > 1})
        unknown = [n for n in order if n not in self.joint_names]
        missing = [n for n in self.joint_names if n not in order]
        if twice or unknown or missing:
            raise ValueError(
                "ros2_control_bridge.command_joints must name each hardware joint once: "
                + "; ".join(
                    f"{what} {', '.join(names)}"
                    for what, names in (
                        ("twice:", twice),
                        ("unknown:", unknown),
                        ("missing:", missing),
                    )
                    if names
                )
            )
        self.config = config
        self._hold = hold
        self._command_order = [self.joint_names.index(n) for n in order]
        self._last_write = -math.inf  # [s] time.time of the loop's last command
        self._fault: str | None = None
        self.holds_published = 0
        self._lock = threading.Lock()
        self._received = threading.Condition(self._lock)
        self._sample: StateSample | None = None
        self.messages = 0  # JointState messages received
        self.published = 0  # commands published
        self._context: Context | None = None
        self._node: rclpy.node.Node | None = None
        self._executor: SingleThreadedExecutor | None = None
        self._spinner: threading.Thread | None = None
        self._stop_spinning = threading.Event()

    @classmethod
    def from_config(cls, description: RobotDescription, config: StackConfig) -> Ros2ControlBridge:
        """The plugin constructor: joints from ``<ros2_control>``, the rest from
        ``ros2_control_bridge.*`` (checked by its schema, :data:`PARAMETERS`, once, when the
        configuration was loaded), armed as ``hardware.armed`` says."""
        params = config.section(PARAMETERS.section)
        joints = description.hardware.joint_names
        # Dynamics only (the safe hold's gravity): no frame is needed, none is assumed.
        model = RobotModel(description.urdf)
        damping = dict(zip(config.joint_names, config.safe_hold_damping, strict=True))
        hardware_index = model.indices(joints)
        damping_model = np.zeros(model.nv)
        for name, value in damping.items():
            damping_model[model.v_index(name)] = value

        def hold(q: dict[str, float], v: dict[str, float]) -> FloatArray:
            """g(q) − D v [N·m | N], hardware order."""
            position, velocity = np.zeros(model.nq), np.zeros(model.nv)
            for name in model.joint_names:
                position[model.q_index(name)] = q[name]
                velocity[model.v_index(name)] = v[name]
            return (model.gravity(position) - damping_model * velocity)[hardware_index]

        return cls(
            joints,
            BridgeConfig(
                joint_states_topic=params["joint_states_topic"],
                command_topic=params["command_topic"],
                command_interface=params["command_interface"],
                command_joints=params["command_joints"],
                command_timeout=config.effective_command_timeout,
                check_period=config.period,
            ),
            hold,
            armed=config.armed,
        )

    # --- lifecycle -------------------------------------------------------------------------
    def _on_configure(self) -> None:
        # The executor thread shares the GIL with the control loop: the default 5 ms switch
        # interval would let either hold it for half a control period or more.
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))
        context = Context()
        # A context and node of its own, blind to the process's command line: inside the
        # control node (started as `ct_control_node --ros-args -r __node:=controller_manager
        # -r __ns:=/ct --params-file ...`) the process's global ROS arguments would rename this
        # node to the control node's name and hand it the control node's parameters.
        rclpy.init(args=[self.config.node_name], context=context)
        node = rclpy.create_node(self.config.node_name, context=context, use_global_arguments=False)
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(JointState, self.config.joint_states_topic, self._on_state, qos)
        self._publisher = node.create_publisher(Float64MultiArray, self.config.command_topic, qos)
        node.create_timer(self.config.check_period, self._check_command_deadline)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        self._context, self._node, self._executor = context, node, executor
        self._stop_spinning.clear()
        self._spinner = threading.Thread(target=self._spin, name="ct-bridge-spin", daemon=True)
        self._spinner.start()

    def _spin(self) -> None:
        assert self._executor is not None and self._context is not None
        try:
            while not self._stop_spinning.is_set() and self._context.ok():
                self._executor.spin_once(timeout_sec=0.05)
        except (ExternalShutdownException, rclpy.executors.ShutdownException):
            pass

    def _on_activate(self) -> None:
        with self._lock:
            self._last_write = -math.inf  # the deadline starts at the first command
            self._fault = None
        deadline = time.monotonic() + self.config.first_state_timeout
        with self._received:
            self._received.wait_for(
                lambda: self._sample is not None, max(0.0, deadline - time.monotonic())
            )
            if self._sample is None:
                raise LifecycleError(
                    f"ros2_control_bridge: no JointState on '{self.config.joint_states_topic}' "
                    f"within {self.config.first_state_timeout} s"
                )

    def _on_deactivate(self) -> None:
        with self._lock:
            self._last_write = -math.inf  # inactive: no deadline

    def _on_cleanup(self) -> None:
        # The spinner stops first: a context shut down under a running spin_once makes it
        # raise (RCLError creating its wait timer) in the spinner thread.
        self._stop_spinning.set()
        if self._spinner is not None:
            self._spinner.join(2.0)
        if self._context is not None:
            self._context.try_shutdown()
        if self._node is not None:
            self._node.destroy_node()
        self._context = self._node = self._executor = self._spinner = None
        with self._lock:
            self._sample = None

    # --- the executor thread ---------------------------------------------------------------
    def _on_state(self, message: JointState) -> None:
        names = tuple(message.name)
        n = len(names)

        def values(field: Sequence[float], required: bool) -> FloatArray:
            array = np.array(field, dtype=np.float64)
            if array.size == 0 and not required:
                return np.full(n, np.nan)  # not measured
            return array

        sample = StateSample(
            stamp=_stamp_seconds(message),
            joint_names=names,
            position=values(message.position, True),
            velocity=values(message.velocity, True),
            effort=values(message.effort, False),
            frame_id=message.header.frame_id or None,
        )
        with self._received:
            self._sample = sample
            self.messages += 1
            self._received.notify_all()

    # --- cyclic ----------------------------------------------------------------------------
    def now(self) -> float:
        return time.time()

    def _read(self) -> StateSample:
        with self._lock:
            if self._sample is None:
                raise LifecycleError(
                    f"ros2_control_bridge: no JointState received on "
                    f"'{self.config.joint_states_topic}' yet"
                )
            return self._sample

    def _write(self, command: JointCommand, values: FloatArray) -> None:
        self._publish(values)
        with self._lock:
            self._last_write = time.time()

    def _publish(self, values: FloatArray) -> None:
        message = Float64MultiArray()
        message.data = [float(values[i]) for i in self._command_order]
        self._publisher.publish(message)
        self.published += 1

    # --- the bridge's own command deadline (executor thread) -------------------------------
    def _check_command_deadline(self) -> None:
        now = time.time()
        with self._lock:
            silence = now - self._last_write
            sample = self._sample
        if not math.isfinite(silence) or silence <= self.config.command_timeout:
            return
        if self._fault is None:
            self._fault = (
                f"ros2_control_bridge: no command for {silence * 1e3:.1f} ms (command_timeout "
                f"{self.config.command_timeout * 1e3:.1f} ms): holding from the measured state"
            )
        values = self._hold_values(sample)
        if values is not None:
            self._publish(values)
            self.holds_published += 1

    def _hold_values(self, sample: StateSample | None) -> FloatArray | None:
        """The hold in hardware order from ``sample``, or None when it cannot be computed
        (no sample, names or values unusable): then nothing is published."""
        if sample is None:
            return None
        q = dict(zip(sample.joint_names, np.asarray(sample.position, dtype=float), strict=False))
        v = dict(zip(sample.joint_names, np.asarray(sample.velocity, dtype=float), strict=False))
        if any(n not in q or n not in v for n in self.joint_names):
            return None
        if self.config.command_interface == POSITION:
            values = np.array([q[n] for n in self.joint_names])
        elif self._hold is not None:
            values = np.asarray(self._hold(q, v), dtype=np.float64)
        else:
            return None
        return values if np.all(np.isfinite(values)) else None

    def fault(self) -> str | None:
        return self._fault

    def reset_fault(self) -> None:
        """Clear the missed-deadline fault once the loop writes again (the loop writes before
        it processes a reset)."""
        with self._lock:
            silence = time.time() - self._last_write
        if silence > self.config.command_timeout:
            raise LifecycleError(
                f"ros2_control_bridge: no command for {silence * 1e3:.1f} ms; reset needs "
                "commands flowing"
            )
        self._fault = None

    def diagnostics(self) -> dict[str, object]:
        return {
            "joint_states_received": self.messages,
            "commands_published": self.published,
            "holds_published": self.holds_published,
            "fault": self._fault or "",
        }
