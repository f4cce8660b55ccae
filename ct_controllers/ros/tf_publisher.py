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

from collections.abc import Callable
from typing import Any

import numpy as np
import pinocchio as pin
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from numpy.typing import NDArray
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
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


class TfPublisher:
    """The publishers of /robot_description, /tf_static (both latched) and /tf, and the
    ``frames`` that build their messages; the state publishers' thread publishes them."""

    def __init__(self, node: Any, frames: TfFrames) -> None:
        self.frames = frames
        self.description = node.create_publisher(String, DESCRIPTION_TOPIC, latched_qos())
        self.static = node.create_publisher(TFMessage, TF_STATIC_TOPIC, latched_qos())
        self.dynamic = node.create_publisher(TFMessage, TF_TOPIC, tf_qos())
