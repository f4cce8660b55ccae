"""``ct-setup URDF -o DIR [--tcp FRAME] [--base FRAME] [--gripper J,...] [--home q,...]
[--width-frames A,B] [--lock J=VALUE,...]``.

Writes ``DIR/controllers.yaml`` and, where the URDF has no ``<ros2_control>`` block of ours,
``DIR/<robot>.urdf.xacro`` (the URDF included unchanged, plus our block), then says in a few
lines what it chose and why. Bad input — a URDF that does not parse, a frame or joint that is not
there, a gripper joint on the arm chain, a width frame not in the URDF (or that does not measure
the gripper), a home outside the limits, of the wrong length or that starts inside the simulated
scene (the cube, the table) or another link, files already in DIR without ``--force`` — is one
line on stderr naming it, exit code 2, and nothing written. Before
writing, the files are read back the stack's way (its configuration loader, description parser,
controller plugins and gain check at ``update_rate``) in a scratch directory; a file that fails
there is a bug of ours (exit code 1), never written.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ct_controllers.controllers.gripper import (
    FINGER_GAIN_MARGIN,
    GripperController,
    sampled_finger_gains,
)
from ct_controllers.errors import CtError
from ct_controllers.model.description import DescriptionError
from ct_controllers.model.grip_geometry import (
    GripGeometry,
    GripGeometryError,
    found_width_frames,
    grip_geometry,
)
from ct_controllers.setup_assistant import friction
from ct_controllers.setup_assistant.chain import Chain, discover_chain
from ct_controllers.setup_assistant.configuration import Choices, entries
from ct_controllers.setup_assistant.design_model import DesignModel, design_model
from ct_controllers.setup_assistant.errors import SetupError
from ct_controllers.setup_assistant.gains import (
    BANDWIDTH,
    COMPUTED_TORQUE,
    DAMPING_RATIO,
    GainDesign,
    design_gains,
)
from ct_controllers.setup_assistant.home import Home, check_home, choose_home
from ct_controllers.setup_assistant.jaw_frames import (
    FixedFrame,
    JawFrames,
    jaw_tip_frames,
    with_frames,
)
from ct_controllers.setup_assistant.locks import (
    lock_argument,
    lock_positions,
    locked_tree,
    own_block_locks,
)
from ct_controllers.setup_assistant.readback import read_back
from ct_controllers.setup_assistant.scene import home_scene
from ct_controllers.setup_assistant.tool_frame import (
    MAX_ANGLE,
    approach_tool_frame,
    gripper_approach,
)
from ct_controllers.setup_assistant.urdf_tree import RobotTree, read_robot
from ct_controllers.setup_assistant.xacro_writer import hardware_plugins, wrapper_xacro
from ct_controllers.setup_assistant.yaml_writer import render

CONFIG_NAME = "controllers.yaml"
UPDATE_RATE = 1000.0  # [Hz]
DEFAULT_BACKEND = "mujoco"


@dataclass(frozen=True)
class Plan:
    """The files to write (path → text) and the summary to print."""

    files: dict[Path, str]
    summary: tuple[str, ...]


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [name.strip() for name in text.split(",") if name.strip()]


def _numbers(text: str) -> list[float]:
    values = []
    for item in text.split(","):
        try:
            values.append(float(item))
        except ValueError:
            raise SetupError(f"--home: '{item.strip()}' is not a number") from None
    return values


def _file_name(robot: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in robot) or "robot"
    return f"{safe}.urdf.xacro"


def _description(
    tree: RobotTree,
    chain: Chain,
    out: Path,
    plugins: dict[str, str],
    frames: Sequence[FixedFrame] = (),
    arguments: Mapping[str, str] | None = None,
    locked: Mapping[str, float] | None = None,
) -> tuple[Path, str | None, str, str]:
    """(robot_description path, xacro text or None, backend, why); ``frames`` added to the
    URDF and the xacro ``arguments`` it was expanded with (a xacro is written for them even
    where the URDF's own block is ours: the stack expands the description with ``backend``
    alone); ``locked`` the joints our block locks (where the block is ours to write)."""
    ours = {plugin: backend for backend, plugin in plugins.items()}
    named = [p for p in tree.plugins if p in ours]
    if named:
        if len(tree.plugins) != 1:
            raise SetupError(
                f"{tree.source} has {len(tree.plugins)} <ros2_control> blocks; the stack reads "
                "exactly one: leave ours alone in it"
            )
        backend, why = ours[named[0]], f"its own <ros2_control> block ({named[0]})"
        if not frames and not arguments:
            return tree.source, None, backend, why
    else:
        if DEFAULT_BACKEND not in plugins:
            raise SetupError(f"no hardware plugin for backend '{DEFAULT_BACKEND}' is installed")
        backend = DEFAULT_BACKEND
        if tree.plugins:
            why = f"its <ros2_control> block names {', '.join(tree.plugins)}, not a plugin of ours"
        else:
            why = "it has no <ros2_control> block"
    text = wrapper_xacro(
        tree.name,
        tree.source,
        chain.joint_names,
        chain.followers,
        plugins,
        backend,
        frames=frames,
        ros2_control=not named,  # the included URDF carries ours already
        arguments=arguments,
        locked=locked,
    )
    if frames:
        why += "; frames added (" + ", ".join(f.link for f in frames) + ")"
    if arguments:
        why += "; its xacro arguments kept"
    if locked and not named:
        why += "; the joints off the chain locked in it"
    return out / _file_name(tree.name), text, backend, why


def _locked_line(chain: Chain, locked: Mapping[str, float], shown: int = 12) -> str:
    """The summary's line on the locked joints: which, where (the first ``shown``), why."""
    items = [f"{name}={value:.3g}" for name, value in locked.items()]
    where = ", ".join(items[:shown]) + (f", … ({len(items)} set)" if len(items) > shown else "")
    followers = [name for name in chain.locked if name not in locked]
    return (
        f"locked joints ({len(chain.locked)}): {where} [rad | m]"
        + (f" ({len(followers)} more follow by <mimic>)" if followers else "")
        + ": on neither the arm chain nor the gripper, fixed there in the model and the "
        "simulation (--lock J=VALUE,... to choose; --gripper, --tcp/--base to drive them)"
    )


def _with_followers(name: str, chain: Chain) -> str:
    """``name``, with the mimic joints that follow it (never commanded, not listed)."""
    followers = [f for f, master in chain.followers.items() if master == name]
    return name + (f" ({', '.join(followers)} follows it: <mimic>)" if followers else "")


def _lowered_lines(gains: GainDesign, bandwidth: float) -> list[str]:
    lines = []
    for joint in gains.joints:
        if not joint.lowered_by:
            continue
        lines.append(
            f"    {joint.name} (inertia up to {joint.inertia:.3g}): joint impedance "
            f"{joint.bandwidth:.3g} rad/s ζ {joint.damping_ratio:.2f}, computed torque "
            f"{joint.ct_bandwidth:.3g} rad/s ζ {joint.ct_damping_ratio:.2f}; by "
            + "; ".join(joint.lowered_by)
        )
    held = [
        j.name
        for j in gains.joints
        if j.bandwidth < 0.5 * bandwidth and any("sampled loop" in why for why in j.lowered_by)
    ]
    if held:
        lines.append(
            f"    hint: {', '.join(held)} held low under joint impedance where the URDF's "
            "inertia is light: raise --update-rate, give the drives' <dynamics armature>, or "
            "use computed torque (it acts through M(q))"
        )
    return lines


def _friction_lines(gains: GainDesign) -> list[str]:
    """What the URDF's joint friction and damping made the design do (none: no lines)."""
    rubbing = [j for j in gains.joints if j.friction > 0.0]
    if not rubbing:
        return []
    default = gains.default_controller
    left = [j.ct_stall if default == COMPUTED_TORQUE else j.stall for j in rubbing]
    worst = max(range(len(rubbing)), key=lambda i: left[i] / rubbing[i].allowed_stall)
    return [
        f"  friction (<dynamics friction> on {len(rubbing)} joints, up to "
        f"{max(j.friction for j in rubbing):.3g} N·m | N): compensated, clip(K_f e, −f, f), "
        f"K_f stable ×2 at {gains.update_rate:g} Hz; stall under {default} within the "
        f"{friction.DISTANCE * 1000:g} mm / {friction.ANGLE:g} rad TCP tolerance per joint"
        + (
            ""
            if all(s <= j.allowed_stall * (1 + 1e-6) for s, j in zip(left, rubbing, strict=True))
            else f", but {rubbing[worst].name}: {left[worst]:.2g} (allowed "
            f"{rubbing[worst].allowed_stall:.2g}) [rad | m]"
        )
        + "; <dynamics damping> paid as D_p v* on the reference velocity"
    ]


def _xacro_arguments(items: Sequence[str]) -> dict[str, str]:
    """``NAME:=VALUE`` items as a mapping; SetupError naming an item that is not one."""
    arguments: dict[str, str] = {}
    for item in items:
        name, separator, value = item.partition(":=")
        if not separator or not name or not name.replace("_", "").isalnum():
            raise SetupError(f"'{item}' is not a xacro argument NAME:=VALUE")
        arguments[name] = value
    return arguments


def _check_driven_limits(tree: RobotTree, chain: Chain) -> None:
    """Every joint the stack drives has a range, an effort and a velocity limit to drive it
    with: a ``<limit>`` of lower = upper, effort 0 or velocity 0 (the double pendulum of
    example-robot-data has all three) is a SetupError naming the joint and the value."""
    for name in chain.joint_names:
        joint = tree.joint(name)
        unit = "m" if joint.prismatic else "rad"
        if joint.type != "continuous" and not joint.upper > joint.lower:
            raise SetupError(
                f"joint '{name}' has no range to move in: <limit lower=\"{joint.lower:g}\" "
                f'upper="{joint.upper:g}"> [{unit}]'
            )
        for what, value in (("effort", joint.effort), ("velocity", joint.velocity)):
            if not value > 0:
                raise SetupError(
                    f"joint '{name}' has <limit {what}=\"{value:g}\">: the stack cannot drive "
                    f"it (give its drive's {what} limit)"
                )


def _jaw_frames(
    tree: RobotTree, chain: Chain, design: DesignModel, given: Sequence[str] | None
) -> JawFrames | None:
    """Fingertip frames to add (:mod:`~ct_controllers.setup_assistant.jaw_frames`) for a lone
    jaw that no frame of the URDF measures; None when width frames are given, the gripper is
    not one jaw, or the URDF's own frames measure it."""
    fingers = chain.gripper_joints
    if given is not None or len(fingers) != 1 or chain.followers:
        return None
    found = found_width_frames(design.model, fingers)
    if found is not None:
        try:
            grip_geometry(design.model, fingers, found)
            return None
        except GripGeometryError:
            pass
    try:
        return jaw_tip_frames(tree, chain, design.model, tree.source.parent)
    except DescriptionError:  # MuJoCo cannot build it: no frames (the home's note says why)
        return None


def _tool_frame(
    tree: RobotTree, chain: Chain, design: DesignModel, grip: GripGeometry | None, given: bool
) -> tuple[FixedFrame | None, str | None]:
    """The frame to take as the TCP where the gripper's approach is off the TCP's z axis
    (:mod:`~ct_controllers.setup_assistant.tool_frame`), and the line saying so; a TCP the user
    named is kept (the line then warns). (None, None) without a gripper geometry or where the
    TCP's z is the approach."""
    if grip is None:
        return None, None
    approach = gripper_approach(design.model, grip)
    if approach is None or approach.angle <= MAX_ANGLE:
        return None, None
    degrees = math.degrees(approach.angle)
    if given:
        return None, (
            f"TCP frame {chain.tcp}: its z axis is {degrees:.0f}° off the gripper's approach "
            "(the Grasp approaches along the TCP's z): leave --tcp out to have a frame added"
        )
    tool = approach_tool_frame(tree, chain.tcp, approach)
    return tool, (
        f"TCP frame {tool.link}: added in the xacro on {chain.tcp}, z along the gripper's "
        f"approach ({chain.tcp}'s z is {degrees:.0f}° off it), y across its fingers"
    )


def _finger_servo(
    design: DesignModel, chain: Chain, grip: GripGeometry | None, update_rate: float
) -> tuple[tuple[float, float] | None, str | None]:
    """The finger servo's (stiffness [N/m], damping [N·s/m]) at the finger surface: its
    defaults, lowered where the lightest finger (its mass M_ii / lever²) sampled at
    ``update_rate`` needs it (:func:`sampled_finger_gains`: stable × 2 with and without a
    period of delay, its URDF damping counted); and the line saying so. (None, None) without
    a gripper."""
    fingers = chain.gripper_joints
    if not fingers:
        return None, None
    servo = GripperController(design.model, fingers, levers=None if grip is None else grip.levers)
    # The URDF's <dynamics damping> counted (MuJoCo simulates it).
    mass, friction = servo.lightest_finger(design.model.joint_damping)
    gains = sampled_finger_gains(servo.stiffness, servo.damping, mass, 1.0 / update_rate, friction)
    if gains == (servo.stiffness, servo.damping):
        return gains, None
    return gains, (
        f"finger servo: {gains[0]:.3g} N/m, {gains[1]:.3g} N·s/m at the finger surface "
        f"(lowered from {servo.stiffness:g}, {servo.damping:g}: the lightest finger carries "
        f"{mass * 1000:.3g} g: critically damped, stable ×{FINGER_GAIN_MARGIN:g} at "
        f"{update_rate:g} Hz with a period of delay, and pressing a stiff object; the grip's "
        "force is its force mode's)"
    )


def _width_frames(
    design: DesignModel, chain: Chain, given: Sequence[str] | None, added: bool = False
) -> tuple[tuple[str, ...], GripGeometry | None, str | None]:
    """The grip width frames to write (``given``, else found from the gripper joints; () for
    none), the gripper's geometry between them (None: none) and the line saying so (``added``:
    the frames ct-setup added to a lone jaw). SetupError naming a frame that is not in the URDF
    or does not measure the gripper."""
    fingers = chain.gripper_joints
    if given is not None and not fingers:
        raise SetupError("--width-frames given, but the robot has no gripper joints")
    if not fingers:
        return (), None, None
    frames = tuple(given) if given is not None else found_width_frames(design.model, fingers)
    if frames is None:
        return (
            (),
            None,
            (
                "grip width: no width frames found (the finger openings are summed instead): "
                "--width-frames A,B to name the fingertip frames"
            ),
        )
    try:
        geometry = grip_geometry(design.model, fingers, frames)
    except GripGeometryError as exc:
        raise SetupError(str(exc).replace("gripper.width_frames", "--width-frames", 1)) from None
    how = (
        "added in the xacro: the jaw's fingertip, the point of its collision geometry farthest "
        "from its axis, and where that fingertip closes"
        if added
        else "as given"
        if given is not None
        else "found: the gripper joints' child links / jaws"
    )
    return (
        frames,
        geometry,
        (
            f"grip width between {frames[0]} and {frames[1]} ({how}): "
            f"{geometry.open_width * 1000:.1f} mm fully open, 0 closed"
        ),
    )


def plan(
    urdf: str,
    out: Path,
    tcp: str | None = None,
    base: str | None = None,
    gripper: Sequence[str] | None = None,
    home: Sequence[float] | None = None,
    width_frames: Sequence[str] | None = None,
    update_rate: float = UPDATE_RATE,
    bandwidth: float = BANDWIDTH,
    damping_ratio: float = DAMPING_RATIO,
    force: bool = False,
    xacro_arguments: Mapping[str, str] | None = None,
    lock: Mapping[str, float] | None = None,
) -> Plan:
    """Everything ``ct-setup`` would write and print, checked, without writing; files already
    in ``out`` are refused before the design's cost unless ``force``."""
    for value, name in (
        (update_rate, "--update-rate"),
        (bandwidth, "--bandwidth"),
        (damping_ratio, "--damping-ratio"),
    ):
        if not (math.isfinite(value) and value > 0):
            raise SetupError(f"{name} must be a positive number, got {value}")
    arguments = dict(xacro_arguments or {})
    tree = read_robot(urdf, arguments)
    chain = discover_chain(tree, tcp=tcp, base=base, gripper=gripper)
    plugins = hardware_plugins()
    locked = lock_positions(
        tree, chain, dict(lock or {}), own_block_locks(tree, list(plugins.values()))
    )
    tree = locked_tree(tree, locked)
    _check_driven_limits(tree, chain)
    design = design_model(tree, chain)
    added: list[FixedFrame] = []  # frames the xacro adds to the URDF, and the design carries
    jaw = _jaw_frames(tree, chain, design, width_frames)
    if jaw is not None:
        added += jaw.frames
        tree = with_frames(tree, jaw.frames)
        design = design_model(tree, chain)
    frames, grip, width_note = _width_frames(
        design, chain, width_frames if jaw is None else jaw.width_frames, added=jaw is not None
    )
    tool, tool_note = _tool_frame(tree, chain, design, grip, given=tcp is not None)
    if tool is not None and tool_note is not None:
        added.append(tool)
        tree = with_frames(tree, (tool,))
        chain = dataclasses.replace(chain, tcp=tool.link, notes=(*chain.notes, tool_note))
        design = design_model(tree, chain)
    # (the grip's levers are the same on the design that carries the added tool frame)
    finger_servo, servo_note = _finger_servo(design, chain, grip, update_rate)
    if home is not None:
        # A given home is the user's: refused only where it starts inside something.
        scene, _ = home_scene(tree, design, frames, clearance=0.0, plane=False)
        chosen: Home = check_home(tree, design, list(home), scene)
    else:
        scene, unchecked = home_scene(tree, design, frames)
        chosen = choose_home(tree, design, scene, unchecked)
    description, xacro, backend, why = _description(
        tree, chain, out.resolve(), plugins, tuple(added), arguments, locked
    )
    targets = [out.resolve() / CONFIG_NAME] + ([description] if xacro is not None else [])
    there = [str(path) for path in targets if path.exists()]
    if there and not force:
        raise SetupError(f"{', '.join(there)} already exist(s): --force to replace")
    gains = design_gains(
        design, design.to_model(np.array(chosen.positions)), update_rate, bandwidth, damping_ratio
    )
    choices = Choices(
        chain=chain,
        design=design,
        home=chosen.positions,
        gains=gains,
        robot_description=str(description),
        backend=backend,
        backends=tuple(plugins),
        width_frames=frames,
        finger_servo=finger_servo,
    )
    summary = [
        f"ct-setup: {tree.name} from {tree.source}",
        *(f"  {note}" for note in chain.notes),
        f"  arm joints ({len(chain.arm_joints)}): {', '.join(chain.arm_joints)}",
        f"  gripper joints ({len(chain.gripper_joints)}): "
        + (", ".join(_with_followers(n, chain) for n in chain.gripper_joints) or "none"),
        *([f"  {_locked_line(chain, locked)}"] if chain.locked else []),
        *([f"  {width_note}"] if width_note else []),
        *([f"  {servo_note}"] if servo_note else []),
        *([f"  {tool_note}"] if tool_note and tool is None else []),
        f"  home [rad | m]: [{', '.join(f'{v:.3f}' for v in chosen.positions)}] ({chosen.note})",
        f"  gains: {bandwidth:g} rad/s, damping ratio {damping_ratio:g} on the worst-case "
        f"inertia M(q)ᵢᵢ + armature over sampled configurations; stable at {update_rate:g} Hz "
        "with every gain ×2 (0 and 1 period of delay); lowered:",
        *_lowered_lines(gains, bandwidth),
        *_friction_lines(gains),
        f"  default controller: {gains.default_controller}",
        f"  robot_description: {description}" + ("" if xacro is None else f" (written: {why})"),
    ]
    header = [
        f"ct_controllers configuration for {tree.name}, written by ct-setup from {tree.source}.",
        "Gains designed from the model (ct_controllers/setup_assistant/gains.py); what it chose:",
        *(line.strip() for line in summary[1:]),
    ]
    files: dict[Path, str] = {}
    if xacro is not None:
        files[description] = xacro
    files[out.resolve() / CONFIG_NAME] = render(entries(choices), header)
    return Plan(files, tuple(summary))


def main(argv: list[str] | None = None) -> int:
    """Write a configuration for your own arm from its URDF."""
    parser = argparse.ArgumentParser(
        prog="ct-setup",
        description="Write controllers.yaml (and, where needed, a <ros2_control> xacro) for "
        "your own arm from its URDF, with gains designed from the model.",
    )
    parser.add_argument("urdf", metavar="URDF", help="the arm's URDF (or xacro) file")
    parser.add_argument(
        "xacro_arguments",
        nargs="*",
        metavar="NAME:=VALUE",
        help="xacro arguments for a .xacro URDF, as `xacro FILE NAME:=VALUE` takes them "
        "(kept in the xacro written)",
    )
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="where to write")
    parser.add_argument(
        "--tcp", metavar="FRAME", help="tool frame (default: tip of the longest chain)"
    )
    parser.add_argument("--base", metavar="FRAME", help="base frame (default: the root link)")
    parser.add_argument(
        "--gripper",
        metavar="J,...",
        help="the gripper's joints as the URDF names them ('' for none; default: found)",
    )
    parser.add_argument("--home", metavar="q,...", help="home [rad | m], arm (then gripper)")
    parser.add_argument(
        "--lock",
        metavar="J=VALUE,...",
        help="where to hold joints the stack does not drive (off the arm chain and the "
        "gripper: wheels, a head, another arm) [rad | m] (default: 0, or the limit nearest it)",
    )
    parser.add_argument(
        "--width-frames",
        metavar="A,B",
        help="the two frames the grip width is measured between (default: found from the "
        "gripper joints: their child links, or a jaw's fingertip and the fixed jaw)",
    )
    parser.add_argument("--update-rate", type=float, default=UPDATE_RATE, help="[Hz] (1000)")
    parser.add_argument("--bandwidth", type=float, default=BANDWIDTH, help="[rad/s] (20)")
    parser.add_argument("--damping-ratio", type=float, default=DAMPING_RATIO, help="[-] (1.0)")
    parser.add_argument("--force", action="store_true", help="replace files already in DIR")
    args = parser.parse_intermixed_args(argv)  # NAME:=VALUE may follow the options
    out = Path(args.output).expanduser()
    try:
        if out.exists() and not out.is_dir():
            raise SetupError(f"-o {out}: exists and is not a directory")
        result = plan(
            args.urdf,
            out,
            tcp=args.tcp,
            base=args.base,
            gripper=_names(args.gripper),
            home=None if args.home is None else _numbers(args.home),
            width_frames=_names(args.width_frames),
            update_rate=args.update_rate,
            bandwidth=args.bandwidth,
            damping_ratio=args.damping_ratio,
            force=args.force,
            xacro_arguments=_xacro_arguments(args.xacro_arguments),
            lock=lock_argument(_names(args.lock) or []),
        )
    except (SetupError, DescriptionError) as exc:  # the user's robot, not our files
        print(f"ct-setup: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ct-setup-") as scratch:
        try:
            verdict = read_back(result.files, Path(scratch))
        except CtError as exc:  # ours to fix, not the user's input
            print(f"ct-setup: internal error, nothing written: {exc}", file=sys.stderr)
            return 1
    out.mkdir(parents=True, exist_ok=True)
    for path, text in result.files.items():
        path.write_text(text)
    print("\n".join(result.summary))
    print(f"  read back as the stack reads it: {verdict}")
    print(f"  wrote {', '.join(str(p) for p in result.files)}")
    print(f"  next: ct-sim --config {out.resolve() / CONFIG_NAME}")
    return 0
