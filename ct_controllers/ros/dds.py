"""Keep DDS on loopback in every process this project starts, unless a real network is asked for.

Fast DDS's default discovery multicasts on the external interface. Before rclpy creates a
participant, :func:`apply_dds_environment` sets ``RMW_IMPLEMENTATION=rmw_fastrtps_cpp``,
``ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT`` and ``FASTRTPS_DEFAULT_PROFILES_FILE`` /
``FASTDDS_DEFAULT_PROFILES_FILE`` pointing at the bundled 127.0.0.1-only profile.
``CT_DDS_NETWORK=1`` (launch argument ``dds_network:=1``) lifts that pinning: nothing is set,
and a loopback profile inherited from the caller (the Makefile, a test session) is unset.

:func:`dds_environment` is the one place that decides; the launch plan (the launch files and
``ct-bringup``), the node and the ros2_control bridge all go through it.
No rclpy import here: this must run first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

PROFILE = Path(__file__).with_name("fastdds_loopback.xml")
NETWORK_VARIABLE = "CT_DDS_NETWORK"
PROFILE_VARIABLES = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
_TRUE = ("1", "true", "yes", "on")


def loopback_environment() -> dict[str, str]:
    """The variables that pin DDS to 127.0.0.1."""
    return {
        "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT",
        PROFILE_VARIABLES[0]: str(PROFILE),
        PROFILE_VARIABLES[1]: str(PROFILE),
    }


def network_requested(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``CT_DDS_NETWORK`` asks for a real network (1, true, yes, on)."""
    value = (os.environ if environ is None else environ).get(NETWORK_VARIABLE, "")
    return value.strip().lower() in _TRUE


def dds_environment(
    network: bool, environ: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """The DDS variables of a process we start, as changes to ``environ`` (None = unset it).

    - loopback (``network`` false): the four variables of :func:`loopback_environment` and
      ``CT_DDS_NETWORK=0``;
    - network: ``CT_DDS_NETWORK=1``, and each profile variable that names a loopback profile of
      ours (``fastdds_loopback.xml``, inherited from the Makefile, a test session or a launch
      started loopback) is unset. A profile of the user's own, ``RMW_IMPLEMENTATION`` and the
      discovery range are left as the caller has them.
    """
    if not network:
        return {**loopback_environment(), NETWORK_VARIABLE: "0"}
    current = os.environ if environ is None else environ
    changes: dict[str, str | None] = {NETWORK_VARIABLE: "1"}
    for name in PROFILE_VARIABLES:
        value = current.get(name)
        if value and Path(value).name == PROFILE.name:
            changes[name] = None
    return changes


def apply_dds_environment(environ: MutableMapping[str, str] | None = None) -> bool:
    """Apply :func:`dds_environment` for ``CT_DDS_NETWORK`` to ``environ`` (default: this
    process's, and so its children's). Returns whether the network was asked for."""
    target = os.environ if environ is None else environ
    network = network_requested(target)
    for name, value in dds_environment(network, target).items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
    return network


def ensure_loopback_dds() -> None:
    """Before rclpy starts in this process: DDS on loopback unless ``CT_DDS_NETWORK=1``
    (:func:`apply_dds_environment`)."""
    apply_dds_environment()
