"""A single actuated jaw against a fixed one (issue 24 item 6), prismatic or revolute, on URDF
variants of the bundled arm written here to tmp_path (never a robot file in the repository):

- prismatic: the right finger joint made fixed where it is closed; the left finger slides as
  before (a 4 cm stroke);
- revolute: a 10 cm left finger hinged 5 cm out on the hand (0.5 rad, 2 N·m), a fingertip link
  at its end, the right finger fixed where it is closed with a fingertip link of its own.

Each goes through ``ct-setup URDF -o DIR --gripper left_finger_joint`` (it finds the width
frames: the jaw's fingertip and the fixed jaw beside it) and a grasp trial of the bench — the
real stack, MuJoCo lockstep, the object sensor — that reaches DONE, CLOSE ending on contact on
both jaws (the fixed jaw stays a body of the scene and the sensor counts it) and the grip width
held through HOLD. The scene is the robot's: a cube of 0.625 × the jaw's stroke, the TCP offset
toward the fixed jaw by half the cube, high enough for the fingertips to clear the table. Bad
input to ct-setup — a jaw joint on the arm chain, a width frame not in the URDF — is one line
naming it and exit code 2, nothing written.

Cost: two ct-setup runs (~3 s each) and two trials (~4 s sim, a few s wall each).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from helpers import bundled_description

from ct_controllers.bench import grasp
from ct_controllers.config import load_config
from ct_controllers.setup_assistant.cli import main as setup_main
from ct_controllers.tasks.phases import GraspParameters, Phase

JAW = "left_finger_joint"


def _element(urdf: str, pattern: str) -> str:
    found = re.search(pattern, urdf, re.S)
    assert found is not None, pattern
    return found.group(0)


def _joint(urdf: str, name: str) -> str:
    return _element(urdf, rf'<joint name="{name}" type="prismatic">.*?</joint>')


def _link(name: str, parent: str, z: float) -> str:
    """A geometry-less fingertip link ``z`` [m] down ``parent``, on a fixed joint."""
    return (
        f'<link name="{name}"/><joint name="{name}_joint" type="fixed"><parent link="{parent}"/>'
        f'<child link="{name}"/><origin xyz="0 0 {z}"/></joint>'
    )


# The revolute jaw's finger: a 10 cm box (0.05 kg) hanging from its hinge, its inner face on
# the hinge's y.
LONG_FINGER = (
    '<link name="left_finger"><inertial><origin xyz="0 0.006 0.05"/><mass value="0.05"/>'
    '<inertia ixx="4.2e-5" ixy="0" ixz="0" iyy="4.3e-5" iyz="0" izz="2.3e-6"/></inertial>'
    '<collision><origin xyz="0 0.006 0.05"/><geometry><box size="0.02 0.012 0.1"/></geometry>'
    "</collision></link>"
)


def one_jaw_urdf(kind: str) -> str:
    """The bundled arm (expanded, its ``<ros2_control>`` block taken out: ct-setup writes its
    own) with the right finger fixed where it is closed, and the left finger a ``kind`` jaw:
    the bundled prismatic finger (a 4 cm stroke), or a 10 cm finger hinged 5 cm out on the hand
    (0.5 rad, 2 N·m: a ~5 cm stroke at its tip)."""
    urdf = bundled_description().urdf
    fixed = (
        '<joint name="right_finger_joint" type="fixed"><parent link="hand"/>'
        '<child link="right_finger"/><origin xyz="0 0 0.06" rpy="0 0 0"/></joint>'
    )
    if kind == "revolute":
        fixed += _link("right_tip", "right_finger", 0.05)
        jaw = (
            f'<joint name="{JAW}" type="revolute"><parent link="hand"/>'
            '<child link="left_finger"/><origin xyz="0 0.05 0.01" rpy="0 0 0"/>'
            '<axis xyz="1 0 0"/><limit lower="0" upper="0.5" velocity="2" effort="2"/></joint>'
        ) + _link("left_tip", "left_finger", 0.1)
        urdf = urdf.replace(_joint(urdf, JAW), jaw)
        urdf = urdf.replace(_element(urdf, r'<link name="left_finger">.*?</link>'), LONG_FINGER)
    urdf = urdf.replace(_joint(urdf, "right_finger_joint"), fixed)
    return re.sub(r"<ros2_control.*?</ros2_control>", "", urdf, flags=re.S)


def _setup(*argv: str) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = setup_main(list(argv))
    return code, printed.getvalue()


@pytest.mark.parametrize(
    ("kind", "frames"),
    [("prismatic", ["left_finger", "right_finger"]), ("revolute", ["left_tip", "right_tip"])],
)
def test_a_grasp_with_one_jaw_against_a_fixed_one_succeeds(
    tmp_path: Path, kind: str, frames: list[str]
) -> None:
    """ct-setup configures the one-jaw gripper (one gripper joint; the width frames found:
    the jaw's fingertip and the fixed jaw), and seed 1's first trial reaches DONE: CLOSE ends
    on contact on both jaws, each pressed with at least the contact force, and the grip width
    moved less than the slip tolerance through HOLD."""
    urdf = tmp_path / f"{kind}.urdf"
    urdf.write_text(one_jaw_urdf(kind))
    out = tmp_path / "config"
    code, printed = _setup(str(urdf), "-o", str(out), "--gripper", JAW)
    assert code == 0, printed
    config = load_config(out / "controllers.yaml", overrides={"mujoco.mode": "lockstep"})
    assert config.gripper_joints == (JAW,)
    assert list(config.grip_width_frames) == frames, printed
    result, setup = grasp.run_trial(
        config, 0, grasp.trial_cube(1, 0, grasp.robot_scene(config).region)
    )
    assert result.success, result
    assert len(setup.sensor.finger_ids) == 2
    task = setup.task
    closed = next(t for t in task.transitions if t.source == Phase.CLOSE)
    assert closed.reason == "contact on both fingers", closed
    forces = [v for k, v in closed.values.items() if k.endswith("_force")]
    parameters = GraspParameters()
    assert len(forces) == 2 and min(forces) >= parameters.contact_force, closed.values
    held = next(t for t in task.transitions if t.source == Phase.HOLD)
    assert held.values["grip_width_change"] <= parameters.slip_tolerance, held.values


def test_bad_jaw_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A jaw joint on the arm chain (joint7 moves the TCP) and a width frame not in the URDF
    are each refused by ct-setup with exit code 2 and one line naming the joint or the frame;
    nothing is written."""
    urdf = tmp_path / "prismatic.urdf"
    urdf.write_text(one_jaw_urdf("prismatic"))
    cases = {
        ("--tcp", "tcp", "--gripper", f"joint7,{JAW}"): "joint7 on the arm chain",
        ("--gripper", JAW, "--width-frames", "left_finger,no_such_pad"): "'no_such_pad'",
    }
    for extra, named in cases.items():
        out = tmp_path / f"out{len(extra)}"
        code, printed = _setup(str(urdf), "-o", str(out), *extra)
        assert code == 2, printed
        assert named in printed and printed.strip().count("\n") == 0, printed
        assert not out.exists()
