"""Conversions between ROS messages and the stack's plain values."""

from __future__ import annotations

import math

from builtin_interfaces.msg import Time


def to_time_msg(seconds: float) -> Time:
    """[s] → builtin_interfaces/Time (non-negative, nanoseconds rounded down)."""
    nanoseconds = max(0, math.floor(seconds * 1e9))
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def from_time_msg(stamp: Time) -> float:
    """builtin_interfaces/Time → [s]."""
    return stamp.sec + stamp.nanosec * 1e-9
