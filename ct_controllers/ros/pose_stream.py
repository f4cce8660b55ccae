"""``~/target_pose`` (geometry_msgs/PoseStamped): a TCP pose target [m] in the base frame or
the TCP frame (relative to the measured TCP), checked (``references/servo.py``
``check_pose_values``) and offered to the servo while the pose stream is selected
(``ros/streams.py``)."""

from __future__ import annotations

from typing import Any

from geometry_msgs.msg import PoseStamped

from ct_controllers.references.servo import StreamError, check_pose_values
from ct_controllers.ros.conversions import from_time_msg

TOPIC = "~/target_pose"
STREAM = "pose"


class PoseStream:
    def __init__(self, server: Any, node: Any, callback_group: Any) -> None:
        self.server = server
        self.subscription = node.create_subscription(
            PoseStamped, TOPIC, self._on_message, 10, callback_group=callback_group
        )

    def _on_message(self, message: PoseStamped) -> None:
        server = self.server
        if not server.accepts(STREAM):
            return
        p, o = message.pose.position, message.pose.orientation
        frame = message.header.frame_id
        try:
            pose, age = check_pose_values(
                frame,
                from_time_msg(message.header.stamp),
                (p.x, p.y, p.z),
                (o.x, o.y, o.z, o.w),
                server.now(),
                server.config.base_frame,
                server.tcp_frame,
                server.measured_tcp() if frame == server.tcp_frame else None,
                server.parameters,
            )
        except StreamError as exc:
            server.dropped(TOPIC, exc)
            return
        server.servo.offer(pose, server.loop.now(), age)
        server.taken()
