"""What a visualizer draws the robot from: ``/robot_description``, ``/tf_static`` and ``/tf``.

- ``/robot_description`` (std_msgs/String): the expanded URDF, once, reliable and transient-local
  (depth 1) as robot_state_publisher and ros2_control publish it, so a late subscriber (RViz,
  Foxglove) still gets it.
- ``/tf_static`` (tf2_msgs/TFMessage): the URDF's fixed joints (and the TCP if it is not a link),
  once, with tf2's static-broadcaster QoS (reliable, transient-local, depth 1).
- ``/tf``: the movable joints' transforms from the *measured* joint positions, stamped with their
  measurement time; while a MoveToPose or Grasp goal runs, its target TCP pose as ``ct_goal``;
  where the backend offers an object sensor (the MuJoCo scene's cube), the object's pose as
  ``ct_object``, stamped with the sensor's own time. Every pose is a child of the base frame
  unless it is a link of the URDF tree. tf2's broadcaster QoS: reliable, volatile, depth 100.

Published by :class:`~ct_controllers.ros.state_publishers.StatePublishers` from its own thread,
with each joint state: never from the control thread, never through the executor. The
transforms come from :class:`~ct_controllers.model.link_tree.LinkTree` (Pinocchio frame
placements), so the TCP composed from /tf and /tf_static is the one Pinocchio computes.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pinocchio as pin
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from numpy.typing import NDArray
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from ct_controllers.model.link_tree import LinkTransform, LinkTree, transform_of
from ct_controllers.ros.conversions import to_time_msg

FloatArray = NDArray[np.float64]
TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"
DESCRIPTION_TOPIC = "/robot_description"
GOAL_FRAME = "ct_goal"  # the running MoveToPose/Grasp goal's TCP target
OBJECT_FRAME = "ct_object"  # the object the backend's object sensor sees


def latched_qos() -> QoSProfile:
    """Reliable, transient-local, depth 1: /robot_description and /tf_static, as ROS has them."""
    return QoSProfile(
        depth=1,
        history=HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )


def tf_qos() -> QoSProfile:
    """Reliable, volatile, depth 100: tf2_ros's dynamic broadcaster QoS."""
    return QoSProfile(
        depth=100,
        history=HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


def transform_message(transform: LinkTransform, stamp: Time) -> TransformStamped:
    message = TransformStamped()
    message.header.stamp = stamp
    message.header.frame_id = transform.parent
    message.child_frame_id = transform.child
    translation = message.transform.translation
    translation.x, translation.y, translation.z = transform.translation
    rotation = message.transform.rotation
    rotation.x, rotation.y, rotation.z, rotation.w = transform.rotation
    return message


def pose_transform(parent: str, child: str, pose: FloatArray, stamp: Time) -> TransformStamped:
    """A 4x4 pose of ``child`` in ``parent`` as a TransformStamped."""
    return transform_message(transform_of(parent, child, pin.SE3(pose)), stamp)


class TfTemplate:
    """The CDR bytes of a TFMessage with fixed frames (parent, child), whose stamps and poses
    are filled in per message. rclpy serializes the message once with a distinct sentinel in
    every stamp and pose value; where each lands in the bytes is where the values go (the
    layout, alignment included, is the serializer's own, not one written here). Each stamp is
    int32 sec + uint32 nanosec, each pose 7 consecutive float64 (translation x y z, rotation
    x y z w), little-endian as the encapsulation header says."""

    def __init__(self, frames: list[tuple[str, str]]) -> None:
        rng = np.random.default_rng(12345)
        message = TFMessage()
        sentinels = []
        for index, (parent, child) in enumerate(frames):
            transform = TransformStamped()
            transform.header.frame_id = parent
            transform.child_frame_id = child
            seconds, nanoseconds = 0x3C5A0000 + index, 0x2B690000 + index
            transform.header.stamp.sec, transform.header.stamp.nanosec = seconds, nanoseconds
            values = [float(v) for v in rng.uniform(1e3, 1e9, 7)]
            t, r = transform.transform.translation, transform.transform.rotation
            t.x, t.y, t.z, r.x, r.y, r.z, r.w = values
            message.transforms.append(transform)
            sentinels.append((seconds, nanoseconds, values))
        self.data = bytes(serialize_message(message))
        if self.data[:2] != b"\x00\x01":  # CDR little-endian
            raise RuntimeError(f"unexpected CDR encapsulation {self.data[:4].hex()}")
        self.slots: list[tuple[int, int]] = []  # (stamp offset, pose offset) per transform
        for seconds, nanoseconds, values in sentinels:
            stamp = self._find(_STAMP.pack(seconds, nanoseconds))
            pose = self._find(_POSE.pack(*values))
            self.slots.append((stamp, pose))

    def _find(self, pattern: bytes) -> int:
        offset = self.data.find(pattern)
        if offset < 0 or self.data.find(pattern, offset + 1) >= 0:
            raise RuntimeError("a TFMessage template value is not found exactly once")
        return offset

    def fill(self, entries: list[tuple[int, int, list[float]]]) -> bytes:
        """The bytes with (sec, nanosec, 7 pose values) per transform, in frame order."""
        buffer = bytearray(self.data)
        for (stamp, pose), (seconds, nanoseconds, values) in zip(self.slots, entries, strict=True):
            _STAMP.pack_into(buffer, stamp, seconds, nanoseconds)
            _POSE.pack_into(buffer, pose, *values)
        return bytes(buffer)


_STAMP = struct.Struct("<iI")
_POSE = struct.Struct("<7d")


def _stamp(seconds: float) -> tuple[int, int]:
    """[s] → (sec, nanosec) as :func:`to_time_msg` rounds them."""
    nanoseconds = max(0, math.floor(seconds * 1e9))
    return nanoseconds // 1_000_000_000, nanoseconds % 1_000_000_000


def quaternion_xyzw(rotation: FloatArray) -> list[float]:
    """A 3x3 rotation matrix as its unit quaternion x y z w (Pinocchio's conversion).

    Handed to ``pin.Quaternion`` in column-major (Fortran) order, the layout of Eigen's
    Matrix3d: a row-major array makes eigenpy (3.13) convert it into a matrix it allocates and
    never frees, 80 B a call (measured: 100,000 calls, +7.8 MB). At the state rate, for the
    ``ct_object`` frame, that was the node's whole idle growth (~8 KB/s)."""
    return pin.Quaternion(np.asfortranarray(rotation, dtype=np.float64)).coeffs().tolist()


def _pose_values(pose: FloatArray) -> list[float]:
    """A 4x4 pose as translation x y z and quaternion x y z w."""
    return [float(v) for v in pose[:3, 3]] + quaternion_xyzw(pose[:3, :3])


class TfFrames:
    """The messages: the robot description, the static transforms and the /tf message per
    measured state. Owns its own model copy: used from one thread only. No node needed (the
    lockstep recorders use it too)."""

    def __init__(
        self,
        stack: Any,
        goal_target: Callable[[], FloatArray | None] | None = None,
    ) -> None:
        self.base_frame = stack.config.base_frame
        self.urdf = stack.description.urdf
        self.tree = LinkTree(stack.model, self.urdf)
        self.goal_target = goal_target
        self.object_sensor = stack.hardware.object_sensor()
        self._moving = []  # one TransformStamped per movable joint, refilled by message()
        for parent, child in self.tree.moving_links:
            transform = TransformStamped()
            transform.header.frame_id = parent
            transform.child_frame_id = child
            self._moving.append(transform)
        self._message = TFMessage()
        self._templates: dict[tuple[str, ...], TfTemplate] = {}  # by the extra frames present

    def latched(self, stamp: Time) -> tuple[String, TFMessage]:
        """The robot description and the static transforms (stamped ``stamp``)."""
        static = TFMessage(
            transforms=[transform_message(t, stamp) for t in self.tree.static_transforms()]
        )
        return String(data=self.urdf), static

    def message(self, position: FloatArray, stamp: Time) -> TFMessage | None:
        """The /tf message for measured joint positions ``position`` [rad | m] (model order)
        measured at ``stamp``; None when a position is not finite (nothing to draw from).

        The message and its transforms are reused: each call overwrites the previous call's
        (publish or serialize it before the next call; building ten TransformStamped anew at
        the state rate cost more than the rest of the state messages together)."""
        if not np.all(np.isfinite(position)):
            return None
        transforms = self._moving
        for transform, (translation, rotation) in zip(
            transforms, self.tree.moving_poses(position), strict=True
        ):
            transform.header.stamp = stamp
            t, r = transform.transform.translation, transform.transform.rotation
            t.x, t.y, t.z = translation
            r.x, r.y, r.z, r.w = rotation
        extra = []
        target = None if self.goal_target is None else self.goal_target()
        if target is not None:
            extra.append(pose_transform(self.base_frame, GOAL_FRAME, target, stamp))
        if self.object_sensor is not None:
            observation = self.object_sensor.observe()
            if observation.pose is not None:
                extra.append(
                    pose_transform(
                        self.base_frame,
                        OBJECT_FRAME,
                        observation.pose,
                        to_time_msg(observation.stamp),
                    )
                )
        self._message.transforms = transforms + extra if extra else transforms
        return self._message

    def serialized(self, position: FloatArray, stamp: float) -> bytes | None:
        """The /tf message of :meth:`message` as its CDR bytes, for measured joint positions
        ``position`` measured at ``stamp`` [s]; None when a position is not finite. Built by
        filling the stamps and poses into a template serialized once by rclpy (see
        :class:`TfTemplate`): a third of what building and serializing the message costs, in
        the thread that shares the GIL with the control loop at the state rate."""
        if not np.all(np.isfinite(position)):
            return None
        seconds, nanoseconds = _stamp(stamp)
        entries: list[tuple[int, int, list[float]]] = [
            (seconds, nanoseconds, translation + rotation)
            for translation, rotation in self.tree.moving_poses(position)
        ]
        children: list[str] = []
        target = None if self.goal_target is None else self.goal_target()
        if target is not None:
            children.append(GOAL_FRAME)
            entries.append((seconds, nanoseconds, _pose_values(target)))
        if self.object_sensor is not None:
            observation = self.object_sensor.observe()
            if observation.pose is not None:
                children.append(OBJECT_FRAME)
                entries.append((*_stamp(observation.stamp), _pose_values(observation.pose)))
        key = tuple(children)
        template = self._templates.get(key)
        if template is None:
            extra = [(self.base_frame, child) for child in key]
            template = self._templates[key] = TfTemplate(list(self.tree.moving_links) + extra)
        return template.fill(entries)


class TfPublisher:
    """The publishers of /robot_description, /tf_static (both latched) and /tf, and the
    ``frames`` that build their messages; the state publishers' thread publishes them."""

    def __init__(self, node: Any, frames: TfFrames) -> None:
        self.frames = frames
        self.description = node.create_publisher(String, DESCRIPTION_TOPIC, latched_qos())
        self.static = node.create_publisher(TFMessage, TF_STATIC_TOPIC, latched_qos())
        self.dynamic = node.create_publisher(TFMessage, TF_TOPIC, tf_qos())
