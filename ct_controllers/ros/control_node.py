"""``/ct/controller_manager``: the ROS 2 face of the stack.

Thin by design: it declares parameters, validates goals at the boundary, hands requests to the
control loop and publishes snapshots. It never calls the hardware; the loop thread does.

Publishes ``/ct/joint_states`` (sensor_msgs/JointState, stamped with the measurement time) and, with
the MuJoCo backend, ``/clock`` (sim time). Serves ``/ct/move_joints`` (ct_interfaces/MoveJoints).
"""

from __future__ import annotations

import argparse
import array
import math
import sys
import threading
import time
from typing import Any

from ct_controllers.ros.dds import ensure_loopback_dds

ensure_loopback_dds()  # before rclpy creates any participant

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
import rclpy.clock  # noqa: E402
from ct_interfaces.action import MoveJoints  # noqa: E402
from rcl_interfaces.msg import SetParametersResult  # noqa: E402
from rclpy.action import ActionServer, CancelResponse, GoalResponse  # noqa: E402
from rclpy.action.server import ServerGoalHandle  # noqa: E402
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from ct_controllers.config import ConfigError, StackConfig  # noqa: E402
from ct_controllers.controllers.controller import GainError  # noqa: E402
from ct_controllers.ros.conversions import to_time_msg  # noqa: E402
from ct_controllers.ros.parameters import LIVE, declare_all  # noqa: E402
from ct_controllers.runtime.control_loop import (  # noqa: E402
    FAILED,
    PREEMPTED,
    RUNNING,
    SUCCEEDED,
    LoopSnapshot,
)
from ct_controllers.runtime.stack import Stack, build_stack, to_model_order  # noqa: E402

Result = MoveJoints.Result
FEEDBACK_PERIOD = 0.05  # [s] 20 Hz
GOAL_TOLERANCE = 0.01  # [rad] per joint, for SUCCESS after the trajectory ends
SETTLE_TIMEOUT = 2.0  # [s] after the trajectory ends, to get within tolerance


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (array.array, tuple)) else value


class ControlNode(Node):
    def __init__(self, publish_rate: float = 100.0) -> None:
        super().__init__("controller_manager", namespace="/ct")
        values = {name: _plain(v) for name, v in declare_all(self).items()}
        self.config = StackConfig.from_parameters(values)
        self.stack: Stack = build_stack(self.config)
        self.loop = self.stack.loop
        mode = self.config.mujoco_mode if self.config.backend == "mujoco" else "real drives"
        self.get_logger().warning(
            f"hardware backend: {self.stack.description.hardware.plugin} "
            f"({self.config.backend}, {mode})"
        )
        self._arm = set(self.config.arm_joints)
        self._model_names = self.stack.model.joint_names
        self._goal_lock = threading.Lock()
        self._active_goal: ServerGoalHandle | None = None
        group = ReentrantCallbackGroup()
        self.joint_state_pub = self.create_publisher(JointState, "joint_states", 10)
        self.clock_pub = (
            self.create_publisher(Clock, "/clock", 10) if self.config.backend == "mujoco" else None
        )
        self.move_joints_server = ActionServer(
            self,
            MoveJoints,
            "move_joints",
            execute_callback=self._execute_move_joints,
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=group,
        )
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.stack.start()
        # A steady clock: with use_sim_time the node's own clock follows the /clock this timer
        # publishes, and would never start.
        self.publish_timer = self.create_timer(
            1.0 / publish_rate,
            self._publish,
            callback_group=group,
            clock=rclpy.clock.Clock(clock_type=rclpy.clock.ClockType.STEADY_TIME),
        )

    # --- publishing ------------------------------------------------------------------------
    def _publish(self) -> None:
        snapshot = self.loop.snapshot()
        if snapshot is None:
            return
        stamp = to_time_msg(snapshot.stamp)
        message = JointState()
        message.header.stamp = stamp
        message.header.frame_id = self.config.base_frame
        message.name = list(snapshot.joint_names)
        message.position = snapshot.position.tolist()
        message.velocity = snapshot.velocity.tolist()
        message.effort = snapshot.measured_effort.tolist()
        self.joint_state_pub.publish(message)
        if self.clock_pub is not None:
            self.clock_pub.publish(Clock(clock=stamp))

    # --- parameters ------------------------------------------------------------------------
    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        """Validate a set as a whole; stage gains for the next tick boundary, all together."""
        gains: dict[str, Any] = {}
        for parameter in parameters:
            if parameter.name not in LIVE:
                return SetParametersResult(
                    successful=False, reason=f"'{parameter.name}' cannot be changed at run time"
                )
            gain = parameter.name.split(".", 1)[1]
            try:
                values = np.array(_plain(parameter.value), dtype=np.float64)
                gains[gain] = to_model_order(
                    self.stack.model, self.config.joint_names, values, parameter.name
                )
            except (ValueError, TypeError, ConfigError) as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        try:
            self.stack.controller.stage_gains(gains)
        except GainError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    # --- MoveJoints ------------------------------------------------------------------------
    def _validate_move_joints(self, goal: Any) -> str | None:
        names = list(goal.joint_names)
        positions = list(goal.positions)
        if not names:
            return "joint_names is empty"
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            return f"joint(s) listed twice: {', '.join(duplicates)}"
        unknown = [n for n in names if n not in self._arm]
        if unknown:
            return (
                f"unknown arm joint(s): {', '.join(unknown)}; arm joints are "
                f"{', '.join(self.config.arm_joints)}"
            )
        if len(positions) != len(names):
            return f"{len(names)} joint names but {len(positions)} positions"
        bad = [f"{n}={p}" for n, p in zip(names, positions, strict=True) if not math.isfinite(p)]
        if bad:
            return f"non-finite position(s): {', '.join(bad)}"
        if not (math.isfinite(goal.duration) and goal.duration >= 0):
            return f"duration must be finite and >= 0 s, got {goal.duration}"
        if goal.controller not in ("", self.config.default_controller):
            return (
                f"unknown controller '{goal.controller}'; loaded: "
                f"{', '.join(self.config.controllers)}"
            )
        return None

    def _execute_move_joints(self, goal_handle: ServerGoalHandle) -> Any:
        goal = goal_handle.request
        problem = self._validate_move_joints(goal)
        motion_id = None
        if problem is None:
            try:
                motion_id = self.loop.request_motion(
                    list(goal.joint_names), list(goal.positions), goal.duration
                )
            except ValueError as exc:  # e.g. outside the joint limits
                problem = str(exc)
        if motion_id is None:
            goal_handle.abort()
            return Result(error_code=Result.INVALID_GOAL, message=problem or "invalid goal")
        with self._goal_lock:
            self._active_goal = goal_handle
        indices = self.stack.model.indices(list(goal.joint_names))
        target = np.array(goal.positions)
        return self._follow_motion(goal_handle, motion_id, indices, target)

    def _follow_motion(
        self, goal_handle: ServerGoalHandle, motion_id: int, indices: np.ndarray, target: np.ndarray
    ) -> Any:
        def finish(code: int, message: str, snapshot: LoopSnapshot | None) -> Any:
            return self._finish(goal_handle, code, message, snapshot, indices, target)

        settle_deadline: float | None = None
        last_tick = -1
        while rclpy.ok():
            snapshot = self.loop.wait_for_snapshot(last_tick, timeout=1.0)
            if snapshot is None or snapshot.tick == last_tick:
                self.loop.hold()
                return finish(Result.FAULT, "no state from the control loop", snapshot)
            last_tick = snapshot.tick
            if snapshot.fault:
                self.loop.hold()
                return finish(Result.FAULT, snapshot.fault, snapshot)
            status = self.loop.motion_status(motion_id)
            newer_started = snapshot.motion is not None and snapshot.motion.motion_id > motion_id
            if (status is not None and status.state == PREEMPTED) or (
                status is None and newer_started
            ):
                return finish(Result.PREEMPTED, "preempted by a newer goal", snapshot)
            if goal_handle.is_cancel_requested:
                self.loop.hold()
                deadline = time.monotonic() + 1.0
                while time.monotonic() < deadline:
                    status = self.loop.motion_status(motion_id)
                    if status is None or status.state != RUNNING:
                        break
                    snapshot = self.loop.wait_for_snapshot(snapshot.tick, 0.2) or snapshot
                return finish(Result.CANCELED, "canceled; holding the measured position", snapshot)
            if status is None:
                continue  # the loop has not picked the request up yet
            if status.state == FAILED:
                return finish(
                    Result.UNREACHABLE, "no trajectory within the reference limits", snapshot
                )
            error = target - snapshot.position[indices]
            goal_handle.publish_feedback(
                MoveJoints.Feedback(error=error.tolist(), progress=status.progress)
            )
            if status.state == SUCCEEDED:
                if np.all(np.abs(error) <= GOAL_TOLERANCE):
                    return finish(Result.SUCCESS, "reached the goal", snapshot)
                settle_deadline = settle_deadline or snapshot.stamp + SETTLE_TIMEOUT
                if snapshot.stamp > settle_deadline:
                    return finish(
                        Result.TIMEOUT,
                        f"trajectory ended but the error {np.abs(error).max():.4f} rad stayed "
                        f"above {GOAL_TOLERANCE} rad for {SETTLE_TIMEOUT} s",
                        snapshot,
                    )
            time.sleep(FEEDBACK_PERIOD)
        return finish(Result.FAULT, "node shutting down", self.loop.snapshot())

    def _finish(
        self,
        goal_handle: ServerGoalHandle,
        code: int,
        message: str,
        snapshot: LoopSnapshot | None,
        indices: np.ndarray,
        target: np.ndarray,
    ) -> Any:
        final_error = [] if snapshot is None else (target - snapshot.position[indices]).tolist()
        with self._goal_lock:
            if self._active_goal is goal_handle:
                self._active_goal = None
        if code == Result.SUCCESS:
            goal_handle.succeed()
        elif code == Result.CANCELED:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return Result(error_code=code, message=message, final_error=final_error)

    def shutdown(self) -> None:
        """Stop the loop and deactivate the hardware; print the timing summary."""
        self.stack.shut_down()
        timing = self.loop.timing_summary()
        print(
            f"ct_control_node: {timing.ticks} ticks, overruns {timing.overruns}, compute "
            f"{timing.compute.as_us()}, jitter {timing.jitter.as_us()}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="ct_control_node")
    parser.add_argument("--target", choices=["sim", "hardware"], default=None)
    parser.add_argument("--config", help="controllers.yaml to load as parameters")
    own, ros_args = parser.parse_known_args(arguments)
    extra: list[str] = []
    if own.config:
        extra += ["--params-file", own.config]
    # The same choices as launch/sim.launch.py and launch/hardware.launch.py.
    if own.target == "sim":
        extra += ["-p", "backend:=mujoco", "-p", "use_sim_time:=true"]
    elif own.target == "hardware":
        extra += ["-p", "backend:=ros2_control_bridge", "-p", "use_sim_time:=false"]
    if extra:
        ros_args = ros_args + (["--ros-args"] if "--ros-args" not in ros_args else []) + extra
    # The control thread shares the GIL with the executor threads; the default 5 ms switch
    # interval lets one of them hold it for five control periods.
    sys.setswitchinterval(0.0005)
    rclpy.init(args=["ct_control_node", *ros_args])
    node = None
    try:
        node = ControlNode()
        executor = MultiThreadedExecutor(num_threads=4)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except (ConfigError, ValueError, LookupError) as exc:
        print(f"ct_control_node: {exc}", file=sys.stderr)
        return 2
    finally:
        if node is not None:
            node.shutdown()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
