"""Where ct-setup locks the joints the stack will not drive (:attr:`Chain.locked`: a mobile
base's wheels, a head, a second arm, legs), and the robot tree with them fixed there.

A locked joint's position [rad | m] is, in this order: the one ``--lock J=VALUE`` gives; the one
the URDF's own ``<ros2_control>`` block of ours gives (``<param name="locked.J">``); else 0, or
the limit nearest to 0 where 0 is outside its range. The stack reads them from the written
block (:func:`ct_controllers.model.description.parse_description`), so the model ct-setup
designs on is the one the stack runs.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

from ct_controllers.model.description import DescriptionError, locked_positions
from ct_controllers.model.locked_joints import LockError, lock_joints
from ct_controllers.setup_assistant.chain import Chain
from ct_controllers.setup_assistant.errors import SetupError
from ct_controllers.setup_assistant.urdf_tree import RobotTree, parse_robot


def lock_argument(items: Sequence[str]) -> dict[str, float]:
    """``--lock`` items ``J=VALUE`` as joint → position; SetupError naming an item that is not
    one."""
    positions: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not sep or not name.strip() or not math.isfinite(value):
            raise SetupError(f"--lock: '{item}' is not JOINT=POSITION (a finite number)")
        positions[name.strip()] = value
    return positions


def own_block_locks(tree: RobotTree, plugins: Sequence[str]) -> dict[str, float] | None:
    """The locks of the URDF's own ``<ros2_control>`` block naming one of ``plugins`` (ours),
    or None where it has no such block."""
    root = ET.fromstring(tree.urdf)
    for block in root.findall("ros2_control"):
        if block.findtext("hardware/plugin", "").strip() in plugins:
            try:
                return locked_positions(block, str(tree.source))
            except DescriptionError as exc:
                raise SetupError(str(exc)) from None
    return None


def lock_positions(
    tree: RobotTree,
    chain: Chain,
    given: Mapping[str, float],
    own: Mapping[str, float] | None,
) -> dict[str, float]:
    """Joint → position for every joint of ``chain.locked`` (module docstring). SetupError for a
    ``--lock`` naming a joint the stack drives or that is not movable, and, where the URDF's own
    block is ours (``own`` not None), for a locked joint that block does not lock (ct-setup does
    not edit the user's file) or a ``--lock`` (that block says where)."""
    driven = set(chain.joint_names) | set(chain.followers)
    for name in given:
        if name in driven:
            raise SetupError(f"--lock {name}: the stack drives it (arm or gripper joint)")
        if name not in chain.locked:
            movable = [j.name for j in tree.movable if j.name not in driven]
            raise SetupError(
                f"--lock {name}: not a movable joint off the chain (those: "
                f"{', '.join(movable) or 'none'})"
            )
    if own is not None:
        if given:
            raise SetupError(
                "--lock given, but the URDF's own <ros2_control> block is ours: its "
                '<param name="locked.JOINT"> say where'
            )
        missing = [
            name
            for name in chain.locked
            if name not in own and tree.joint(name).mimic not in chain.locked
        ]
        if missing:
            raise SetupError(
                f"{tree.source}: its own <ros2_control> block drives neither {', '.join(missing)}"
                ' nor locks them: add <param name="locked.JOINT">POSITION</param> to its '
                "<hardware> for each (or name them with --gripper, --tcp/--base)"
            )
    # A follower of a locked master is fixed where its master puts it (lock_joints).
    followers = {name for name in chain.locked if tree.joint(name).mimic in chain.locked}
    following = sorted(followers & set(given))
    if following:
        master = tree.joint(following[0]).mimic
        raise SetupError(f"--lock {following[0]}: it follows {master} (<mimic>): lock {master}")
    positions: dict[str, float] = {}
    for name in chain.locked:
        if name in followers:
            continue
        if name in given:
            positions[name] = given[name]
        elif own is not None:
            positions[name] = own[name]
        else:
            joint = tree.joint(name)
            positions[name] = min(max(0.0, joint.lower), joint.upper)
    return positions


def locked_tree(tree: RobotTree, positions: Mapping[str, float]) -> RobotTree:
    """``tree`` with the joints of ``positions`` fixed there (its mimic followers too);
    SetupError for a position outside a joint's limits."""
    if not positions:
        return tree
    try:
        urdf = lock_joints(tree.urdf, positions, str(tree.source))
    except LockError as exc:
        raise SetupError(str(exc).replace("locked joint", "--lock: joint", 1)) from None
    return parse_robot(urdf, tree.source)
