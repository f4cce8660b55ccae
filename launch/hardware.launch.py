"""`ros2 launch ct_controllers hardware.launch.py backend:=ros2_control_bridge|canopen`:
the stack on real drives (system clock). Real backends refuse to start unless armed
(hardware.armed: true in the config); the launch then ends with the reason in one error line.
Without launch_ros, `ct-bringup hardware` starts the same node with the same plan
(ct_controllers.launch_plan). `namespace:=arm2` (default ct) for a second arm:
docs/ros-interface.md, "Several arms"."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import generate


def generate_launch_description():
    return generate("hardware")
