"""``~/joint_jog`` (control_msgs/JointJog): joint velocities [rad/s | m/s] by name, checked
(``references/joint_jog.py`` ``check_jog_values``) and offered to the jog servo while the
``joint_jog`` stream is selected (``ros/streams.py``). Displacements alone are not served
(dropped, counted as ``unsupported``). JointJog is in Jazzy's control_msgs and in ours
(``third_party/control_msgs``) from this change on; where the installed control_msgs predates it,
the topic is not served and selecting the stream is refused, saying so."""

from __future__ import annotations

from typing import Any

from ct_controllers.references.joint_jog import check_jog_values
from ct_controllers.references.servo import StreamError
from ct_controllers.ros.conversions import from_time_msg

TOPIC = "~/joint_jog"
STREAM = "joint_jog"

try:
    from control_msgs.msg import JointJog
except ImportError:  # a control_msgs built before JointJog was added to ours
    JointJog = None


def joint_jog_available() -> bool:
    return JointJog is not None


class JointJogStream:
    def __init__(self, server: Any, node: Any, callback_group: Any) -> None:
        self.server = server
        self.model = server.stack.model
        self.subscription = node.create_subscription(
            JointJog, TOPIC, self._on_message, 10, callback_group=callback_group
        )

    def _on_message(self, message: Any) -> None:
        server = self.server
        if not server.accepts(STREAM):
            return
        try:
            jog, age = check_jog_values(
                self.model,
                list(message.joint_names),
                list(message.velocities),
                list(message.displacements),
                from_time_msg(message.header.stamp),
                server.now(),
                server.parameters,
            )
        except StreamError as exc:
            server.dropped(TOPIC, exc)
            return
        server.jog_servo.offer(jog, server.loop.now(), age)
        server.taken()
