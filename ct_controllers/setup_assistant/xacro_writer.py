"""``<robot>.urdf.xacro``: the user's URDF included unchanged (``xacro:include`` of its path) plus
a ``<ros2_control>`` block of ours, whose ``<hardware><plugin>`` the ``backend`` argument picks
among the installed hardware plugins (each says which ``backend:`` value selects it: its
``BACKEND``), as the bundled ``urdf/ct_arm.urdf.xacro`` does.

Every joint the stack drives offers effort and position commands and position, velocity and
effort state. A mimic follower is not in the block (it is never commanded; the stack and the
MuJoCo scene refuse it there): it follows its master, written as a comment beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol
from xml.sax.saxutils import quoteattr

from ct_controllers.plugins import HARDWARE, plugin_entry_points

COMMANDS = ("effort", "position")


class AddedFrame(Protocol):
    """A fixed link the xacro adds: its URDF text and a comment saying what it is."""

    @property
    def comment(self) -> str: ...

    def urdf(self) -> str: ...


STATES = ("position", "velocity", "effort")


def hardware_plugins() -> dict[str, str]:
    """``backend:`` value → hardware plugin name, for every installed hardware plugin that
    names its backend (one that cannot be imported here is left out)."""
    plugins: dict[str, str] = {}
    for entry_point in sorted(plugin_entry_points(HARDWARE), key=lambda e: e.name):
        try:
            backend = getattr(entry_point.load(), "BACKEND", None)
        except ImportError:
            continue
        if isinstance(backend, str) and backend not in plugins:
            plugins[backend] = entry_point.name
    return plugins


def wrapper_xacro(
    robot: str,
    urdf: Path,
    joints: Sequence[str],
    followers: Mapping[str, str],
    plugins: Mapping[str, str],
    default_backend: str,
    frames: Sequence[AddedFrame] = (),
    ros2_control: bool = True,
    arguments: Mapping[str, str] | None = None,
    locked: Mapping[str, float] | None = None,
) -> str:
    """The xacro text (module docstring); ``joints`` in configuration order; ``frames`` fixed
    links added (a lone jaw's fingertip frames); ``ros2_control`` False where the included URDF
    carries our block already (the xacro then only adds ``frames``); ``arguments`` the xacro
    arguments the user's file was expanded with, declared here with those values as defaults
    (declared first, they are what the included file sees); ``locked`` joint → position
    [rad | m] of the joints the stack does not drive, as ``<param name="locked.JOINT">`` of the
    block's ``<hardware>``."""
    lines = [
        '<?xml version="1.0"?>',
        "<!--",
        f"  Written by ct-setup for {robot}: {urdf} included unchanged, and a <ros2_control> block",
        "  for ct_controllers. Argument backend: "
        + " | ".join(plugins)
        + " (the <hardware><plugin>).",
        "-->",
        f'<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name={quoteattr(robot)}>',
        f'  <xacro:arg name="backend" default={quoteattr(default_backend)}/>',
        *(
            f"  <xacro:arg name={quoteattr(name)} default={quoteattr(value)}/>"
            for name, value in (arguments or {}).items()
        ),
        f"  <xacro:include filename={quoteattr(str(urdf))}/>",
    ]
    for frame in frames:
        lines += [
            f"  <!-- {frame.comment} -->",
            f"  {frame.urdf()}",
        ]
    if not ros2_control:
        return "\n".join([*lines, "</robot>", ""])
    lines += [
        f'  <ros2_control name={quoteattr(robot + "_system")} type="system">',
        "    <hardware>",
    ]
    for backend, plugin in plugins.items():
        lines += [
            f"      <xacro:if value=\"${{'$(arg backend)' == '{backend}'}}\">",
            f"        <plugin>{plugin}</plugin>",
            "      </xacro:if>",
        ]
    if locked:
        lines.append("      <!-- not driven by the stack: fixed here [rad | m] in its model -->")
    lines += [
        f'      <param name="locked.{name}">{float(value)!r}</param>'
        for name, value in (locked or {}).items()
    ]
    lines.append("    </hardware>")
    for name in joints:
        lines.append(f"    <joint name={quoteattr(name)}>")
        lines += [f'      <command_interface name="{c}"/>' for c in COMMANDS]
        lines += [f'      <state_interface name="{s}"/>' for s in STATES]
        lines.append("    </joint>")
        lines += [
            f"    <!-- {follower} follows {name} (<mimic>): not commanded, not listed -->"
            for follower, master in followers.items()
            if master == name
        ]
    lines += ["  </ros2_control>", "</robot>", ""]
    return "\n".join(lines)
