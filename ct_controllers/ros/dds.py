"""Keep DDS on loopback in every process this project starts.

Fast DDS's default discovery multicasts on the external interface. Before rclpy creates a
participant we set, unless the caller already chose otherwise:
``RMW_IMPLEMENTATION=rmw_fastrtps_cpp``, ``ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT`` and
``FASTRTPS_DEFAULT_PROFILES_FILE`` / ``FASTDDS_DEFAULT_PROFILES_FILE`` pointing at the bundled
127.0.0.1-only profile. ``CT_DDS_NETWORK=1`` opts out (a real robot on a real network).
No rclpy import here: this must run first.
"""

from __future__ import annotations

import os
from pathlib import Path

PROFILE = Path(__file__).with_name("fastdds_loopback.xml")


def loopback_environment() -> dict[str, str]:
    """The variables that pin DDS to 127.0.0.1."""
    return {
        "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT",
        "FASTRTPS_DEFAULT_PROFILES_FILE": str(PROFILE),
        "FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE),
    }


def ensure_loopback_dds() -> None:
    """Set the loopback variables in this process (and so in its children)."""
    if os.environ.get("CT_DDS_NETWORK") == "1":
        return
    os.environ.update(loopback_environment())
