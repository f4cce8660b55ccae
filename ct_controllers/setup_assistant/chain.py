"""Which frames and joints the configuration names: the base, the TCP, the arm chain between
them and the gripper, from the URDF's tree and what the user gave (``--base``, ``--tcp``,
``--gripper``).

Defaults, each reported with its reason (:attr:`Chain.notes`):

- base: the URDF's root link;
- gripper, when not given: a gripper hangs at the arm's tip, where the tree branches into two or
  more subtrees with movable joints (two fingers); its joints are every movable joint there.
  Without such a branch, a single jaw against a fixed one (the SO-100's ``gripper``, the Unitree
  Z1's ``jointGripper``) is the longest chain's last movable joint, a leaf of the movable tree,
  whose name or whose link's name says gripper (:data:`JAW_NAMES`): that joint;
- TCP: the tip of the longest chain below the base (most movable joints; the gripper's subtrees
  left out; a gripper found there keeps it on that arm: the tip is below the gripper's link),
  and there, among the links fixed to the arm's last moving link, a tool-like frame
  (``tcp``, then ``tool``, ``ee``/``eef``/``end_effector``, ``flange``), else the deepest one;
- the arm joints: the movable joints on the path from the base to the TCP, base first.

A mimic joint among the gripper joints is taken as the follower it is: the gripper's joints are
closed over ``<mimic>`` (a master brings its followers, a follower its master), and then the
followers leave the lists. One rule, kept by the setup assistant, the stack
(:func:`~ct_controllers.runtime.stack.build_stack`) and the MuJoCo scene alike: a follower is
never commanded, so it is in neither joint list, nor the bridge's ``command_joints``, nor the
``<ros2_control>`` block; it follows its master (Pinocchio's mimic joint, MuJoCo's joint
equality) and is reported in :attr:`Chain.followers`. The stack drives every other movable
joint of its model: a movable joint on neither list (a mobile base's wheels, a head, another
arm, legs) is *locked* (:attr:`Chain.locked`; fixed at a position in the model,
:mod:`ct_controllers.model.locked_joints`). A gripper joint on the arm chain, a frame that is not
there, or a joint on neither list that follows a driven one (it could be neither driven nor
locked) is a :class:`SetupError` naming it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ct_controllers.setup_assistant.errors import SetupError
from ct_controllers.setup_assistant.urdf_tree import RobotTree, UrdfJoint

# Tool-like link names, best first (matched on word boundaries of the lower-cased name).
TOOL_NAMES = (r"tcp", r"tool\d*", r"(ee|eef|end[_-]?effector)\d*", r"flange")
# A jaw's joint or link, by name (lower-cased, anywhere in it: ``jointGripper``, ``moving_jaw``).
JAW_NAMES = re.compile(r"grip|jaw|finger|claw|pincer")


@dataclass(frozen=True)
class Chain:
    """The frames and joint lists of the configuration (mimic followers in neither list).
    ``followers``: mimic joint → the gripper joint it follows; ``locked``: the movable joints
    the stack does not drive (on neither list, no follower of a driven joint), in file order;
    ``notes``: how each was chosen, one line each."""

    base: str
    tcp: str
    arm_joints: tuple[str, ...]
    gripper_joints: tuple[str, ...]
    followers: dict[str, str]
    notes: tuple[str, ...]
    locked: tuple[str, ...] = ()

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.arm_joints + self.gripper_joints


def _tool_rank(link: str) -> int | None:
    """The rank in :data:`TOOL_NAMES` of the best name ``link`` has as a whole word (bounded by
    the name's ends or non-alphanumerics: ``panda_hand_tcp``, ``j2s6s200_end_effector``), or
    None when none is tool-like."""
    name = link.lower()
    ranks = [
        rank
        for rank, pattern in enumerate(TOOL_NAMES)
        if re.search(rf"(?:^|[^a-z0-9])(?:{pattern})(?:$|[^a-z0-9])", name)
    ]
    return min(ranks) if ranks else None


def _listing(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "")


def _check_link(tree: RobotTree, link: str, what: str) -> None:
    if link not in tree.links:
        raise SetupError(
            f"{what} '{link}' is not a link of the URDF (links: {_listing(tree.links)})"
        )


def _mimic_closure(tree: RobotTree, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """``names`` with every joint related to one of them by ``<mimic>``, in file order; and the
    joints added."""
    chosen = set(names)
    changed = True
    while changed:
        changed = False
        for joint in tree.movable:
            related = joint.mimic is not None and (joint.name in chosen) != (joint.mimic in chosen)
            if related:
                assert joint.mimic is not None
                chosen |= {joint.name, joint.mimic}
                changed = True
    ordered = [j.name for j in tree.movable if j.name in chosen]
    return ordered, [n for n in ordered if n not in names]


def _gripper_given(tree: RobotTree, gripper: Sequence[str]) -> list[str]:
    movable = [j.name for j in tree.movable]
    for name in gripper:
        if name not in movable:
            kind = "a fixed joint" if name in [j.name for j in tree.joints] else "not a joint"
            raise SetupError(
                f"gripper joint '{name}' is {kind} of the URDF (movable joints: "
                f"{_listing(movable)})"
            )
    twice = sorted({n for n in gripper if list(gripper).count(n) > 1})
    if twice:
        raise SetupError(f"gripper joint(s) listed twice: {', '.join(twice)}")
    return list(gripper)


def _movable_count(joints: Sequence[UrdfJoint]) -> int:
    return sum(1 for j in joints if j.movable)


def _driven_depth(tree: RobotTree, joint: UrdfJoint) -> int:
    """The most movable joints that follow none (<mimic>) on one path from ``joint`` down."""
    own = 1 if joint.movable and joint.mimic is None else 0
    below = [_driven_depth(tree, child) for child in tree.children(joint.child)]
    return own + max(below, default=0)


def _branch_gripper(tree: RobotTree, base: str, tip: str) -> tuple[str, list[str]] | None:
    """The deepest link on the path base → ``tip`` (below at least one movable joint) whose
    tree branches into two or more subtrees that hold movable joints, each a finger (fewer
    joints in series that follow none than the arm above it: a humanoid's chest, whose branches
    are arms longer than its torso, is no gripper), and those joints — where no joint above it
    follows or leads them by
    ``<mimic>`` (a finger that branches again, as Talos's, whose tips mimic the finger's root:
    the gripper branches higher up)."""
    path = tree.path(base, tip) or ()
    for depth in range(len(path) - 1, 0, -1):
        link = path[depth - 1].child
        if _movable_count(path[:depth]) == 0:
            break
        branches = [
            j
            for j in tree.children(link)
            if j.movable or _movable_count(tree.joints_below(j.child))
        ]
        arm = sum(1 for j in path[:depth] if j.movable and j.mimic is None)
        if len(branches) < 2 or max(_driven_depth(tree, j) for j in branches) >= arm:
            continue
        found = [j.name for j in tree.joints_below(link) if j.movable]
        closed, _ = _mimic_closure(tree, found)
        if not set(closed) & {j.name for j in path[:depth]}:
            return link, found
    return None


def _tip_jaw(tree: RobotTree, base: str, tip: str) -> UrdfJoint | None:
    """The last movable joint on the path base → ``tip`` when it is a lone jaw: no movable joint
    below it, at least one movable (arm) joint above it, and its or its link's name gripper-like
    (:data:`JAW_NAMES`) where the name of the joint before it is not."""
    moving = [j for j in tree.path(base, tip) or () if j.movable]
    if len(moving) < 2:
        return None
    last, before = moving[-1], moving[-2]
    if _movable_count(tree.joints_below(last.child)) or last.mimic is not None:
        return None

    named = JAW_NAMES.search(last.name.lower()) or JAW_NAMES.search(last.child.lower())
    # The name must set it apart: a finger robot's joints are all "finger_..." (TriFinger's);
    # the wrist before a jaw may carry the "gripper" link (the SO-100's), not such a name.
    return last if named and not JAW_NAMES.search(before.name.lower()) else None


def _longest_tip(tree: RobotTree, base: str, excluded: set[str]) -> str:
    """The leaf below ``base`` with the most movable joints above it (``excluded`` subtrees
    left out); ties: a tool-like name, then the deeper link, then file order."""
    best: tuple[int, int, int, int] | None = None
    found = base
    for order, link in enumerate(tree.subtree(base)):
        path = tree.path(base, link) or ()
        if any(j.name in excluded for j in path):
            continue
        leaf = not [j for j in tree.children(link) if j.name not in excluded]
        if not leaf:
            continue
        rank = _tool_rank(link)
        key = (
            _movable_count(path),
            -(rank if rank is not None else len(TOOL_NAMES)),
            len(path),
            -order,
        )
        if best is None or key > best:
            best, found = key, link
    return found


def _tool_frame(tree: RobotTree, tip_link: str, excluded: set[str]) -> tuple[str, str]:
    """Among the links fixed to ``tip_link`` (itself included, ``excluded`` subtrees left out):
    the best tool-like name, else the deepest; and why."""
    candidates: list[tuple[str, int]] = []

    def walk(link: str, depth: int) -> None:
        candidates.append((link, depth))
        for joint in tree.children(link):
            if joint.type == "fixed" and joint.name not in excluded:
                walk(joint.child, depth + 1)

    walk(tip_link, 0)
    ranked = [
        (rank, -depth, link) for link, depth in candidates if (rank := _tool_rank(link)) is not None
    ]
    if ranked:
        link = min(ranked)[2]
        return link, f"the tool-like frame fixed to the arm's last moving link {tip_link}"
    link = max(candidates, key=lambda item: item[1])[0]
    return link, f"the deepest link fixed to the arm's last moving link {tip_link}"


def discover_chain(
    tree: RobotTree,
    tcp: str | None = None,
    base: str | None = None,
    gripper: Sequence[str] | None = None,
) -> Chain:
    """The configuration's frames and joint lists (see the module's docstring)."""
    notes: list[str] = []
    if base is None:
        base = tree.root
        notes.append(f"base frame {base}: the URDF's root link")
    else:
        _check_link(tree, base, "base frame")
        notes.append(f"base frame {base}: as given")
    gripper_names = None if gripper is None else _gripper_given(tree, gripper)
    # Where a found gripper hangs: the TCP is looked for there, on that arm (a dual-arm robot's
    # longest chain without this gripper would be the other arm).
    anchor = base
    if tcp is not None:
        _check_link(tree, tcp, "TCP frame")
        if tree.path(base, tcp) is None:
            raise SetupError(f"TCP frame '{tcp}' is not below the base frame '{base}' in the URDF")
        tip = tcp
    else:
        excluded = set(gripper_names or ())
        tip = _longest_tip(tree, base, excluded)
    if gripper_names is None:
        branch = _branch_gripper(tree, base, tip)
        if branch is not None:
            link, found = branch
            on_path = {j.name for j in tree.path(base, tip) or ()}
            if tcp is None or not (set(found) & on_path):
                gripper_names, anchor = found, link
                notes.append(
                    f"gripper: the movable joints where the tree branches at {link} "
                    "(--gripper to name others, --gripper '' for none)"
                )
        jaw = _tip_jaw(tree, base, tip) if gripper_names is None and tcp is None else None
        if jaw is not None:
            gripper_names, anchor = [jaw.name], jaw.parent
            notes.append(
                f"gripper: {jaw.name}, a lone jaw: the arm's last movable joint, named like a "
                "gripper, nothing movable below it (--gripper to name others, --gripper '' for "
                "none)"
            )
        if gripper_names is None:
            gripper_names = []
    else:
        notes.append("gripper: as given" if gripper_names else "gripper: none (as given)")
    gripper_names, added = _mimic_closure(tree, gripper_names)
    if added:
        notes.append(f"gripper: {', '.join(added)} added, related by <mimic>")
    for name in gripper_names:
        # A gripper joint carries only gripper joints: one with other movable joints below it
        # is a joint of the arm.
        below = [j.name for j in tree.joints_below(tree.joint(name).child) if j.movable]
        arm_below = [n for n in below if n not in gripper_names]
        if arm_below:
            raise SetupError(
                f"gripper joint '{name}' is on the arm chain: the arm's joint(s) "
                f"{_listing(arm_below)} hang below it"
            )
    if tcp is None:
        excluded = set(gripper_names)
        tip = _longest_tip(tree, anchor, excluded)
        path = tree.path(base, tip) or ()
        moving = [j for j in path if j.movable]
        last_link = moving[-1].child if moving else base
        tcp, why = _tool_frame(tree, last_link, excluded)
        notes.append(f"TCP frame {tcp}: {why} (the tip of the longest chain)")
    else:
        notes.append(f"TCP frame {tcp}: as given")
    chain_path = tree.path(base, tcp)
    assert chain_path is not None
    arm = [j.name for j in chain_path if j.movable]
    if not arm:
        raise SetupError(f"no movable joint between the base frame '{base}' and the TCP '{tcp}'")
    on_arm = [name for name in gripper_names if name in arm]
    if on_arm:
        raise SetupError(
            f"gripper joint(s) {', '.join(on_arm)} on the arm chain {base} → {tcp}: a gripper "
            "joint must hang off the chain"
        )
    mimic_on_arm = [j.name for j in chain_path if j.movable and j.mimic is not None]
    if mimic_on_arm:
        raise SetupError(
            f"arm joint(s) {', '.join(mimic_on_arm)} follow another joint (<mimic>): the arm "
            "chain must be driven joint by joint"
        )
    followers = {
        j.name: j.mimic for j in tree.movable if j.name in gripper_names and j.mimic is not None
    }
    gripper_names = [name for name in gripper_names if name not in followers]
    if followers:
        notes.append(
            "gripper: "
            + ", ".join(f"{f} follows {m}" for f, m in followers.items())
            + " (<mimic>): not listed, never commanded"
        )
    listed = set(arm) | set(gripper_names) | set(followers)
    left = [j for j in tree.movable if j.name not in listed]
    tied = [f"{j.name} (follows {j.mimic})" for j in left if j.mimic in listed]
    if tied:
        raise SetupError(
            f"joint(s) {_listing(tied)}: on neither the arm chain {base} → {tcp} nor the "
            "gripper, and following a joint the stack drives, they can be neither driven nor "
            "locked: name them with --gripper, or choose another --tcp/--base"
        )
    locked = tuple(j.name for j in left)
    return Chain(
        base=base,
        tcp=tcp,
        arm_joints=tuple(arm),
        gripper_joints=tuple(gripper_names),
        followers=followers,
        notes=tuple(notes),
        locked=locked,
    )
