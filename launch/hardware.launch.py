"""`ros2 launch ct_controllers hardware.launch.py backend:=ros2_control_bridge|canopen`:
the stack on real drives (system clock). Real backends refuse to activate unless armed.
Without launch_ros, `ct-bringup hardware` starts the same node with the same configuration."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import generate


def generate_launch_description():
    return generate(backend="ros2_control_bridge", use_sim_time=False)
