"""`ros2 launch ct_controllers sim.launch.py`: the stack on the MuJoCo backend (sim time on /clock).
Without launch_ros, `ct-bringup sim` starts the same node with the same plan
(ct_controllers.launch_plan). `namespace:=arm2` (default ct) and, for a second simulated arm in
the same ROS domain, `clock_topic:=/arm2/clock`: docs/ros-interface.md, "Several arms"."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import generate


def generate_launch_description():
    return generate("sim")
