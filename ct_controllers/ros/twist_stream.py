"""``~/target_twist`` (geometry_msgs/TwistStamped): a TCP velocity (linear [m/s]; angular
[rad/s] of the TCP origin) in the base frame's axes or the TCP's (``header.frame_id``), checked
(``references/servo.py`` ``check_twist_values``) and offered to the servo, which integrates it
into the commanded pose within its speed and acceleration bounds, while the twist stream is
selected (``ros/streams.py``)."""

from __future__ import annotations

from typing import Any

from geometry_msgs.msg import TwistStamped

from ct_controllers.references.servo import StreamError, check_twist_values
from ct_controllers.ros.conversions import from_time_msg

TOPIC = "~/target_twist"
STREAM = "twist"


class TwistStream:
    def __init__(self, server: Any, node: Any, callback_group: Any) -> None:
        self.server = server
        self.subscription = node.create_subscription(
            TwistStamped, TOPIC, self._on_message, 10, callback_group=callback_group
        )

    def _on_message(self, message: TwistStamped) -> None:
        server = self.server
        if not server.accepts(STREAM):
            return
        v, w = message.twist.linear, message.twist.angular
        try:
            twist, tcp_axes, age = check_twist_values(
                message.header.frame_id,
                from_time_msg(message.header.stamp),
                (v.x, v.y, v.z),
                (w.x, w.y, w.z),
                server.now(),
                server.config.base_frame,
                server.tcp_frame,
                server.parameters,
            )
        except StreamError as exc:
            server.dropped(TOPIC, exc)
            return
        server.servo.offer_twist(twist, tcp_axes, server.loop.now(), age)
        server.taken()
