"""/robot_description, /tf_static and /tf from the real node (MuJoCo, real time) over real rclpy
and loopback DDS, read by a TF consumer written here (tf2_ros is not on PyPI): it composes the
chain base → TCP from /tf_static and /tf as tf2 does, by frame names and stamps."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
from ct_interfaces.action import MoveToPose
from geometry_msgs.msg import PoseStamped, TransformStamped
from rclpy.action import ActionClient
from ros_helpers import ARM, CONFIG, Client, goal, ros_client, start_node, stop_node, wait_ready
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from ct_controllers.hardware.mujoco_scene import CUBE_HALF_SIZE
from ct_controllers.model.description import load_description
from ct_controllers.model.link_tree import LinkTree, urdf_joints
from ct_controllers.model.robot import RobotModel
from ct_controllers.ros.tf_publisher import GOAL_FRAME, OBJECT_FRAME, latched_qos, tf_qos

DESCRIPTION = load_description()
MODEL = RobotModel(DESCRIPTION.urdf, CONFIG.tcp_frame, CONFIG.base_frame)
# `ros2 topic info -v /tf` on a ROS 2 Jazzy install: ROS's own tf2_msgs/msg/TFMessage.
ROS_TF_MESSAGE_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"


def matrix(message: TransformStamped) -> np.ndarray:
    t, r = message.transform.translation, message.transform.rotation
    pose = np.eye(4)
    pose[:3, :3] = pin.Quaternion(r.w, r.x, r.y, r.z).toRotationMatrix()
    pose[:3, 3] = [t.x, t.y, t.z]
    return pose


def stamp_ns(message: Any) -> int:
    return int(message.sec) * 1_000_000_000 + int(message.nanosec)


class TfConsumer:
    """What a tf2 buffer does, for exact stamps: static edges hold at every time, dynamic
    edges at the stamp they were published with."""

    def __init__(self) -> None:
        self.static: dict[str, tuple[str, np.ndarray]] = {}  # child → (parent, pose)
        self.dynamic: dict[tuple[str, int], tuple[str, np.ndarray]] = {}  # (child, stamp)

    def add(self, message: TFMessage, static: bool) -> None:
        for transform in message.transforms:
            edge = (transform.header.frame_id, matrix(transform))
            if static:
                self.static[transform.child_frame_id] = edge
            else:
                self.dynamic[(transform.child_frame_id, stamp_ns(transform.header.stamp))] = edge

    def lookup(self, base: str, frame: str, stamp: int) -> np.ndarray:
        """Pose of ``frame`` in ``base`` at ``stamp`` [ns]; KeyError naming a missing edge."""
        pose = np.eye(4)
        while frame != base:
            edge = self.static.get(frame) or self.dynamic.get((frame, stamp))
            if edge is None:
                raise KeyError(f"no transform to '{frame}' at {stamp} ns")
            parent, transform = edge
            pose = transform @ pose
            frame = parent
        return pose


class Listener:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.tf: list[TFMessage] = []
        self.tf_static: list[TFMessage] = []
        self.descriptions: list[String] = []
        node = client.node
        self.subscriptions = [
            node.create_subscription(TFMessage, "/tf", self.tf.append, tf_qos()),
            node.create_subscription(TFMessage, "/tf_static", self.tf_static.append, latched_qos()),
            node.create_subscription(
                String, "/robot_description", self.descriptions.append, latched_qos()
            ),
        ]

    def close(self) -> None:
        for subscription in self.subscriptions:
            self.client.node.destroy_subscription(subscription)

    def consumer(self) -> TfConsumer:
        consumer = TfConsumer()
        for message in self.tf_static:
            consumer.add(message, static=True)
        for message in self.tf:
            consumer.add(message, static=False)
        return consumer


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    process: subprocess.Popen = start_node()  # type: ignore[type-arg]
    try:
        with ros_client("ct_tf_client") as client:
            client.move_to_pose = ActionClient(client.node, MoveToPose, "/ct/move_to_pose")  # type: ignore[attr-defined]
            assert wait_ready(client.move_to_pose.server_is_ready, 10.0)  # type: ignore[attr-defined]
            yield client
    finally:
        stop_node(process)


def model_q(message: Any) -> np.ndarray:
    index = {name: i for i, name in enumerate(message.name)}
    return np.array([message.position[index[name]] for name in MODEL.joint_names])


def test_link_tree_composes_to_the_pinocchio_frame_poses() -> None:
    """The transforms of every URDF joint (fixed and movable), composed from the base up, give
    every link's pose and the TCP pose that RobotModel.frame_pose computes, to 1e-12, at random
    configurations within the limits; every URDF link is in the tree."""
    tree = LinkTree(MODEL, DESCRIPTION.urdf)
    links = {j.parent for j in urdf_joints(DESCRIPTION.urdf)}
    links |= {j.child for j in urdf_joints(DESCRIPTION.urdf)}
    assert links <= tree.links and CONFIG.tcp_frame in tree.links
    rng = np.random.default_rng(0)
    lower, upper = MODEL.limits.lower, MODEL.limits.upper
    for _ in range(20):
        q = rng.uniform(lower, upper)
        edges = {t.child: t for t in tree.static_transforms() + tree.moving_transforms(q)}
        for link in links - {CONFIG.base_frame}:
            pose, frame = np.eye(4), link
            while frame != CONFIG.base_frame:
                pose = edges[frame].matrix() @ pose
                frame = edges[frame].parent
            assert np.allclose(pose, MODEL.frame_pose(q, link), atol=1e-12), link


def test_tf_bytes_from_the_template_are_rclpys_serialization_of_the_message() -> None:
    """TfFrames.serialized (the node's /tf: stamps and poses filled into a template rclpy
    serialized once) gives, byte for byte, rclpy's serialization of TfFrames.message for the
    same positions and stamp: random configurations, stamps up to 10^5 s, with and without the
    goal frame, with the object frame (the MuJoCo scene's cube)."""
    from helpers import lockstep_config
    from rclpy.serialization import serialize_message

    from ct_controllers.ros.conversions import to_time_msg
    from ct_controllers.ros.tf_publisher import TfFrames
    from ct_controllers.runtime.stack import build_stack

    stack = build_stack(lockstep_config())
    stack.bring_up()
    try:
        target: list[np.ndarray | None] = [None]
        frames = TfFrames(stack, goal_target=lambda: target[0])
        rng = np.random.default_rng(7)
        for k in range(40):
            q = rng.uniform(MODEL.limits.lower, MODEL.limits.upper)
            stamp = float(rng.uniform(0.0, 1e5))
            pose = np.eye(4)
            pose[:3, :3] = pin.exp3(rng.normal(size=3))
            pose[:3, 3] = rng.uniform(-1, 1, 3)
            target[0] = pose if k % 2 else None
            expected = serialize_message(frames.message(q, to_time_msg(stamp)))
            assert frames.serialized(q, stamp) == bytes(expected), k
        q[0] = np.nan
        assert frames.serialized(q, 1.0) is None
    finally:
        stack.shut_down()


def test_tf_gives_the_tcp_pose_pinocchio_computes_from_the_measured_state(client: Client) -> None:
    """While the arm moves, each /tf message carries the stamp of a published joint state, and
    the TCP composed from /tf_static and that /tf (a TF consumer's lookup at that stamp) is the
    pose Pinocchio computes from that joint state's positions: within 1e-6 m and 1e-6 rad."""
    listener = Listener(client)
    try:
        client.joint_states.clear()
        target = [0.4, 0.6, -0.2, -1.4, 0.3, 1.2, 0.2]
        handle = client.send(goal(ARM, target, duration=1.5))
        assert handle.accepted
        assert client.spin_until(lambda: len(listener.tf) >= 80, 10.0), "too little /tf"
        assert listener.tf_static, "no /tf_static"
        client.result(handle)
        consumer = listener.consumer()
        states = {stamp_ns(m.header.stamp): m for m in client.joint_states}
        compared = 0
        moved = []
        for message in listener.tf:
            stamp = stamp_ns(message.transforms[0].header.stamp)
            state = states.get(stamp)
            if state is None:  # its joint state came before we subscribed, or is still queued
                continue
            q = model_q(state)
            expected = MODEL.frame_pose(q)
            actual = consumer.lookup(CONFIG.base_frame, CONFIG.tcp_frame, stamp)
            assert np.linalg.norm(actual[:3, 3] - expected[:3, 3]) < 1e-6
            assert np.linalg.norm(pin.log3(actual[:3, :3].T @ expected[:3, :3])) < 1e-6
            moved.append(expected[:3, 3])
            compared += 1
        assert compared >= 50, f"only {compared} /tf messages matched a joint state"
        path = np.linalg.norm(np.diff(np.array(moved), axis=0), axis=1).sum()
        assert path > 0.05, f"the TCP moved only {path:.3f} m while compared"
    finally:
        listener.close()


def test_robot_description_and_static_transforms_reach_a_late_subscriber(client: Client) -> None:
    """/robot_description and /tf_static are transient-local: a subscriber that joins after
    they were published still gets them once. The description is the URDF the node runs
    (Pinocchio builds the same joints from it) and the tree spans every URDF link; /tf is ROS's
    tf2_msgs/msg/TFMessage (the type hash a Jazzy install has)."""
    listener = Listener(client)
    try:
        assert client.spin_until(
            lambda: bool(listener.descriptions and listener.tf_static and listener.tf), 10.0
        )
        time.sleep(0.2)
        client.spin_until(lambda: False, 0.3)
        assert len(listener.descriptions) == 1 and len(listener.tf_static) == 1
        urdf = listener.descriptions[0].data
        assert RobotModel(urdf).joint_names == MODEL.joint_names
        children = {
            t.child_frame_id for m in listener.tf_static + listener.tf for t in m.transforms
        }
        links = {j.child for j in urdf_joints(urdf)} | {j.parent for j in urdf_joints(urdf)}
        assert links - {CONFIG.base_frame} <= children
        assert CONFIG.tcp_frame in children
        publishers = client.node.get_publishers_info_by_topic("/tf")
        assert {str(p.topic_type_hash) for p in publishers} == {ROS_TF_MESSAGE_HASH}
    finally:
        listener.close()


def test_object_and_running_goal_frames(client: Client) -> None:
    """In simulation /tf carries the cube as ct_object (resting on the table: z = its half
    size); while a MoveToPose goal runs it carries the goal's target as ct_goal, equal to the
    goal's pose, and after the goal ended no ct_goal is published any more."""
    listener = Listener(client)
    try:
        client.wait_at_rest()
        q = model_q(client.joint_states[-1])
        start = MODEL.frame_pose(q)
        target = start[:3, 3] + np.array([0.03, -0.04, 0.02])
        message = PoseStamped()
        message.header.frame_id = CONFIG.base_frame
        message.pose.position.x, message.pose.position.y, message.pose.position.z = target
        x, y, z, w = pin.Quaternion(start[:3, :3]).coeffs()
        o = message.pose.orientation
        o.x, o.y, o.z, o.w = float(x), float(y), float(z), float(w)
        future = client.move_to_pose.send_goal_async(  # type: ignore[attr-defined]
            MoveToPose.Goal(target=message, timeout=10.0)
        )
        assert client.spin_until(future.done, 5.0)
        result = client.result(future.result(), 15.0)
        assert result.error_code == MoveToPose.Result.SUCCESS, result.message
        goals = [t for m in listener.tf for t in m.transforms if t.child_frame_id == GOAL_FRAME]
        assert goals, "no ct_goal while the goal ran"
        for transform in goals:
            assert transform.header.frame_id == CONFIG.base_frame
            pose = matrix(transform)
            assert np.allclose(pose[:3, 3], target, atol=1e-9)
            assert np.allclose(pose[:3, :3], start[:3, :3], atol=1e-6)
        objects = [t for m in listener.tf for t in m.transforms if t.child_frame_id == OBJECT_FRAME]
        assert objects, "no ct_object"
        assert abs(objects[-1].transform.translation.z - CUBE_HALF_SIZE) < 2e-3
        client.spin_until(lambda: False, 0.3)  # what was in flight at the goal's end
        seen = len(listener.tf)
        assert client.spin_until(lambda: len(listener.tf) >= seen + 20, 5.0)
        later = [t for m in listener.tf[seen:] for t in m.transforms]
        assert not any(t.child_frame_id == GOAL_FRAME for t in later)
    finally:
        listener.close()
