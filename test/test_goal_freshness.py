"""A goal's success rests on fresh measurements (issue 26, item 5): MoveToPose's success dwell
judges each loop snapshot against the loop's clock, not against the snapshot's own stamp, and
MoveJoints' and GripperCommand's successes need a fresh snapshot as well.

In process: the MoveToPose action server on a real rclpy node, over the whole stack on MuJoCo in
lockstep (the loop in its own thread), wrapped in the fault injector
(``sim/fault_injection.py``). Its "stale" fault stamps every sample 1 s in the past while the
arm keeps moving: the guard and the watchdog are configured to accept samples 2 s old (a slow
sensor within its configured tolerance), so the loop keeps ticking and publishing snapshots,
each 1 s behind the loop's clock — the state a frozen snapshot reaches one second on. Judged at
their own stamps (the old ``update(stamp, stamp, ok)``) they count, and the goal succeeded; now
they are stale and it does not. Its "stall" fault (the same sample again and again) stops the
snapshots altogether.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from control_msgs.action import GripperCommand
from ct_interfaces.action import MoveJoints, MoveToPose
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from ros_helpers import goal as joint_goal
from ros_helpers import pose_message

from ct_controllers.ros.goals import SNAPSHOT_FRESHNESS, GoalArbiter
from ct_controllers.ros.gripper_command_action import gripper_servers
from ct_controllers.ros.move_joints import GOAL_TOLERANCE, MoveJointsServer
from ct_controllers.ros.move_to_pose import MoveToPoseServer
from ct_controllers.ros.parameters import declare_all
from ct_controllers.runtime.controller_claims import interface_controller_joints
from ct_controllers.runtime.controller_manager import ControllerManager, joint_controller_factory
from ct_controllers.sim.rigs import Rig, make_rig

# Samples up to 2 s old accepted by the guard and the watchdog: the injected 1 s lag is within
# the configuration, so only the goal's own freshness judgement can refuse it.
TOLERANT = {"hardware.max_state_age": 2.0, "watchdog.state_timeout": 2.0}
STALE_LAG = 1.0  # [s] how far the "stale" fault stamps samples in the past


class Served:
    """The rig's stack with MoveToPose served by a node of this process, and a client."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        stack = rig.stack
        self.node = Node("ct_freshness_server", namespace="/ct_freshness")
        declare_all(self.node)
        config = stack.config
        manager = ControllerManager(
            stack.loop,
            stack.controllers,
            {name: str(p["type"]) for name, p in config.controllers.items()},
            config.default_controller,
            factory=joint_controller_factory(stack.model, config.joint_names),
            interface_joints=interface_controller_joints(config.interface_controllers),
        )
        arbiter, group = GoalArbiter(), ReentrantCallbackGroup()
        self.servers = (
            MoveToPoseServer(self.node, stack, manager, arbiter, group),
            MoveJointsServer(self.node, stack, manager, arbiter, group),
            gripper_servers(self.node, stack, manager, arbiter, group),
        )
        self.client_node = Node("ct_freshness_client")
        self.client = ActionClient(self.client_node, MoveToPose, "/ct_freshness/move_to_pose")
        self.joints = ActionClient(self.client_node, MoveJoints, "/ct_freshness/move_joints")
        self.gripper = ActionClient(
            self.client_node, GripperCommand, "/ct_freshness/gripper_controller/gripper_cmd"
        )
        self.executor = MultiThreadedExecutor(num_threads=3)
        self.executor.add_node(self.node)
        self.executor.add_node(self.client_node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        assert self.client.wait_for_server(timeout_sec=10.0)
        assert self.joints.wait_for_server(timeout_sec=10.0)
        assert self.gripper.wait_for_server(timeout_sec=10.0)

    def tcp(self) -> np.ndarray:
        """The measured TCP pose (4 × 4, base frame) from the latest snapshot."""
        snapshot = self.rig.stack.loop.wait_for_snapshot(-1, 5.0)
        assert snapshot is not None
        return self.rig.stack.model.frame_pose(snapshot.position)

    def move(self, offset: tuple[float, float, float], timeout: float) -> Any:
        """A MoveToPose goal ``offset`` [m] from the measured TCP, its orientation kept; the
        result."""
        start = self.tcp()
        x, y, z, w = pin.Quaternion(start[:3, :3]).coeffs().tolist()
        goal = MoveToPose.Goal(
            target=pose_message(tuple(start[:3, 3] + np.array(offset)), (x, y, z, w)),
            position_tolerance=0.002,
            orientation_tolerance=0.02,
            timeout=timeout,
        )
        return _result(self.client, goal)

    def move_joint(self, offset: float) -> Any:
        """A MoveJoints goal: the first arm joint ``offset`` [rad] from where it is, in 0.5 s;
        the result."""
        snapshot = self.rig.stack.loop.wait_for_snapshot(-1, 5.0)
        assert snapshot is not None
        name = self.rig.stack.config.arm_joints[0]
        position = float(snapshot.position[self.rig.stack.model.indices([name])[0]])
        return _result(self.joints, joint_goal([name], [position + offset], duration=0.5))

    def heal(self) -> None:
        """Healthy samples again, and no fault latched: the stale phases run the loop on 1 s
        old states — a second of delay, which can leave the arm running away (the runaway check
        then latches a fault, as it should); reset it, as an operator would, once fresh
        samples flow."""
        self.rig.injector.inject(None)
        loop = self.rig.stack.loop
        deadline = loop.now() + 3.0
        while loop.now() < deadline:
            snapshot = loop.wait_for_snapshot(-1, 1.0)
            if snapshot is not None and loop.now() - snapshot.stamp < SNAPSHOT_FRESHNESS:
                break
        assert loop.reset_fault_and_wait(2.0) is None, loop.reset_refused

    def stale(self) -> None:
        """Inject the "stale" fault and wait for the snapshots to lag: the stamps jump 1 s back,
        and the guard takes no sample until they pass the last one it took."""
        self.rig.injector.inject("stale")
        loop = self.rig.stack.loop
        deadline = loop.now() + 3.0
        while loop.now() < deadline:
            snapshot = loop.wait_for_snapshot(-1, 1.0)
            if snapshot is not None and loop.now() - snapshot.stamp > SNAPSHOT_FRESHNESS:
                return
        raise AssertionError("the snapshots do not lag")

    def close(self) -> None:
        self.executor.shutdown()
        self.thread.join(5.0)
        self.client_node.destroy_node()
        self.node.destroy_node()


def _result(client: ActionClient, goal: Any) -> Any:
    return _response(client, goal).result


def _response(client: ActionClient, goal: Any) -> Any:
    """The result response (status and result) of an accepted goal."""
    handle = _wait(client.send_goal_async(goal), 10.0)
    assert handle.accepted
    return _wait(handle.get_result_async(), 60.0)


def _wait(future: Any, timeout: float) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    assert done.wait(timeout), "no answer"
    return future.result()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    rclpy.init()
    rig = make_rig("mujoco", **TOLERANT)
    rig.stack.loop.start()
    served = None
    try:
        served = Served(rig)
        yield served
    finally:
        if served is not None:
            served.close()
        rig.close()
        rclpy.shutdown()


def test_move_to_pose_succeeds_on_fresh_snapshots(served: Served) -> None:
    """Healthy samples (the same tolerant configuration): a target 3 cm away is reached with
    SUCCESS and errors within the goal's tolerances."""
    served.heal()
    result = served.move((0.03, 0.0, 0.0), timeout=10.0)
    assert result.error_code == MoveToPose.Result.SUCCESS, result.message
    assert result.position_error <= 0.002 and result.orientation_error <= 0.02


def test_move_to_pose_does_not_succeed_on_snapshots_older_than_the_freshness(
    served: Served,
) -> None:
    """Samples stamped 1 s in the past (> SNAPSHOT_FRESHNESS) while the arm really moves: the
    arm reaches the target — the result's errors, from those very snapshots, are within the
    tolerances — yet the goal ends TIMEOUT, not SUCCESS: a snapshot 1 s behind the loop's
    clock never counts toward the dwell."""
    assert STALE_LAG > SNAPSHOT_FRESHNESS
    served.stale()
    try:
        result = served.move((-0.03, 0.0, 0.0), timeout=3.0)
    finally:
        served.rig.injector.inject(None)
    assert result.error_code == MoveToPose.Result.TIMEOUT, result.message
    assert result.position_error <= 0.002 and result.orientation_error <= 0.02, result.message


def test_move_joints_succeeds_on_fresh_snapshots_and_not_on_stale_ones(served: Served) -> None:
    """MoveJoints, 0.1 rad on one joint: SUCCESS on healthy samples; with samples 1 s old the
    trajectory ends and the error is within GOAL_TOLERANCE, yet the goal ends TIMEOUT after its
    settle time (its success needs a fresh snapshot)."""
    served.heal()
    result = served.move_joint(0.1)
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message
    served.stale()
    try:
        result = served.move_joint(-0.1)
    finally:
        served.rig.injector.inject(None)
    assert result.error_code == MoveJoints.Result.TIMEOUT, result.message
    assert max(abs(e) for e in result.final_error) <= GOAL_TOLERANCE, result.final_error


def test_gripper_command_succeeds_on_fresh_snapshots_and_not_on_stale_ones(
    served: Served,
) -> None:
    """GripperCommand (the bundled gripper_controller): to 4 cm on healthy samples SUCCEEDED,
    reached_goal; back to 1 cm with samples 1 s old the finger gets there, but no stale sample
    may call it reached: the goal ends ABORTED (no fresh measurement for stall_timeout),
    never SUCCEEDED."""
    goal = GripperCommand.Goal()
    goal.command.position = 0.04
    served.heal()
    response = _response(served.gripper, goal)
    assert response.status == GoalStatus.STATUS_SUCCEEDED
    assert response.result.reached_goal
    served.stale()
    goal.command.position = 0.01
    try:
        response = _response(served.gripper, goal)
    finally:
        served.rig.injector.inject(None)
    assert response.status == GoalStatus.STATUS_ABORTED
    assert not response.result.reached_goal
    assert abs(response.result.position - 0.01) < 0.01  # goal_tolerance: it was there


def test_move_to_pose_does_not_succeed_when_the_snapshots_freeze(served: Served) -> None:
    """The same sample again and again (a frozen sensor: the loop stops publishing snapshots)
    from the goal's start: the goal ends FAULT, never SUCCESS. (Last in the module: the
    watchdog may latch a fault after it.)"""
    served.rig.injector.inject("stall")
    try:
        result = served.move((0.0, 0.03, 0.0), timeout=5.0)
    finally:
        served.rig.injector.inject(None)
    assert result.error_code == MoveToPose.Result.FAULT, result.message
