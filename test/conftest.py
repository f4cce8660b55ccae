"""Test session environment: DDS pinned to loopback, a private ROS domain, logs in a temp dir.

Set before any test imports rclpy, and inherited by every process the tests start.
"""

from __future__ import annotations

import os
import tempfile

from ct_controllers.ros.dds import loopback_environment

os.environ.update(loopback_environment())
# A domain of our own, so that parallel sessions on this machine do not see each other.
os.environ.setdefault("ROS_DOMAIN_ID", str(10 + os.getpid() % 90))
_ros_home = tempfile.mkdtemp(prefix="ct_ros_home_")
os.environ.setdefault("ROS_HOME", _ros_home)
os.environ.setdefault("ROS_LOG_DIR", os.path.join(_ros_home, "log"))
