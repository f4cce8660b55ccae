"""Grip width measured geometrically (issue 24 item 6): :mod:`ct_controllers.model.grip_geometry`
finds the two width frames (two independent fingers; a finger and its ``<mimic>`` follower; one
jaw against a fixed one) and measures the width as their origins' distance less that with the
gripper closed, by forward kinematics at the measured state. Checked on the bundled arm against
its URDF's geometry (the finger links' origins coincide at q = 0 and slide along ±y: the width is
q_left + q_right), on the Panda of example-robot-data (the follower mirrors its master: twice the
master's opening) and on a one-jaw variant of the bundled arm written here (the right finger
fixed at 2 cm: the width is q_left); bad width frames are refused naming the frame."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import bundled_config, bundled_description, new_robot_model

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.config import ConfigError, load_config
from ct_controllers.model.grip_geometry import (
    GripGeometryError,
    found_width_frames,
    grip_geometry,
    gripper_geometry,
)
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel

SAMPLES = 20  # random configurations per robot


def _distance(model: RobotModel, q: np.ndarray, frames: tuple[str, str]) -> float:
    a, b = (model.frame_pose(q, name)[:3, 3] for name in frames)
    return float(np.linalg.norm(a - b))


def _random_q(model: RobotModel, rng: np.random.Generator) -> np.ndarray:
    lower = np.where(np.isfinite(model.limits.lower), model.limits.lower, -np.pi)
    upper = np.where(np.isfinite(model.limits.upper), model.limits.upper, np.pi)
    return rng.uniform(lower, upper)


def _measured(model: RobotModel, geometry: object, q: np.ndarray) -> float:
    from ct_controllers.model.grip_geometry import GripGeometry

    assert isinstance(geometry, GripGeometry)
    return geometry.width(ModelState(model).update(q))


def panda_urdf() -> Path:
    return example_robot_path("panda_description/urdf/panda.urdf")


def one_jaw_urdf(fixed_at: float = 0.02) -> str:
    """The bundled arm with its right finger joint made fixed, ``fixed_at`` [m] open (its origin
    moved along its axis, −y), and gone from the ``<ros2_control>`` block: one prismatic jaw
    against a fixed one."""
    urdf = bundled_description().urdf
    joint = re.search(r'<joint name="right_finger_joint" type="prismatic">.*?</joint>', urdf, re.S)
    assert joint is not None
    fixed = (
        '<joint name="right_finger_joint" type="fixed"><parent link="hand"/>'
        f'<child link="right_finger"/><origin xyz="0 {-fixed_at} 0.06" rpy="0 0 0"/></joint>'
    )
    urdf = urdf.replace(joint.group(0), fixed)
    block = re.search(
        r'<joint name="right_finger_joint">\s*<command_interface.*?</joint>', urdf, re.S
    )
    assert block is not None
    return urdf.replace(block.group(0), "")


def test_bundled_fingers_width_is_the_summed_openings() -> None:
    """Bundled arm: the finger links are found by the finger joints (not by name), each closes
    toward its lower limit, fully open is 8 cm, and at random configurations the measured width
    equals q_left + q_right within 1e-9 m (the frames' distance: the same)."""
    config = bundled_config()
    model = new_robot_model()
    frames = found_width_frames(model, config.gripper_joints)
    assert frames is not None and len(set(frames)) == 2
    geometry = grip_geometry(model, config.gripper_joints, frames)
    fingers = model.indices(config.gripper_joints)
    assert geometry.closed == tuple(model.limits.lower[fingers])
    assert geometry.opened == tuple(model.limits.upper[fingers])
    assert abs(geometry.open_width - float(np.sum(model.limits.upper[fingers]))) < 1e-9
    rng = np.random.default_rng(1)
    for _ in range(SAMPLES):
        q = _random_q(model, rng)
        opening = float(np.sum(q[fingers]))
        assert abs(_distance(model, q, frames) - opening) < 1e-9
        assert abs(_measured(model, geometry, q) - opening) < 1e-9


def test_mimic_pair_width_is_twice_the_master_opening() -> None:
    """Panda (panda_finger_joint2 mimics panda_finger_joint1 with multiplier 1): the two width
    frames are the master's and the follower's child links, and the width is 2 q_master within
    1e-9 m at random configurations; no finger joints: none found."""
    model = RobotModel(panda_urdf().read_text(), "panda_hand_tcp", "panda_link0")
    frames = found_width_frames(model, ("panda_finger_joint1",))
    assert frames is not None and len(set(frames)) == 2
    assert model.mimic["panda_finger_joint2"].master == "panda_finger_joint1"
    geometry = grip_geometry(model, ("panda_finger_joint1",), frames)
    master = model.indices(("panda_finger_joint1",))[0]
    rng = np.random.default_rng(2)
    for _ in range(SAMPLES):
        q = _random_q(model, rng)
        assert abs(_measured(model, geometry, q) - 2.0 * float(q[master])) < 1e-9
    assert found_width_frames(model, ()) is None


def test_one_jaw_width_is_its_opening_from_the_fixed_jaw() -> None:
    """One prismatic jaw against a fixed one (written here from the bundled URDF): the frames
    found are the jaw's link and the fixed finger's (not the hand, not the TCP); the width is
    q_jaw exactly (the fixed jaw sits 2 cm out, the closed distance is taken off)."""
    model = RobotModel(one_jaw_urdf(), "tcp", "base_link")
    jaw = ("left_finger_joint",)
    frames = found_width_frames(model, jaw)
    assert frames == ("left_finger", "right_finger")
    geometry = grip_geometry(model, jaw, frames)
    assert abs(geometry.closed_distance - 0.02) < 1e-9
    index = model.indices(jaw)[0]
    rng = np.random.default_rng(3)
    for _ in range(SAMPLES):
        q = _random_q(model, rng)
        assert abs(_measured(model, geometry, q) - float(q[index])) < 1e-9


def test_bad_width_frames_are_refused_naming_them() -> None:
    """A width frame not in the URDF, a frame named twice, and frames whose distance no gripper
    joint changes (the hand and the TCP) are each refused in one line naming the frame or the
    joint; at stack build (the node's and ct-sim's path) as a ConfigError, as is a gripper
    joint on the arm chain (it moves the TCP) and a width_frames entry of one name."""
    model = new_robot_model()
    fingers = bundled_config().gripper_joints
    cases = {
        ("left_finger", "no_such_pad"): "frame 'no_such_pad' is not in the URDF",
        ("left_finger", "left_finger"): "'left_finger' named twice",
        ("hand", "tcp"): "does not change with gripper joint 'left_finger_joint'",
    }
    for frames, message in cases.items():
        with pytest.raises(GripGeometryError) as caught:
            grip_geometry(model, fingers, frames)
        assert message in str(caught.value) and "\n" not in str(caught.value)
    config = load_config(overrides={"gripper.width_frames": ["left_finger", "no_such_pad"]})
    with pytest.raises(ConfigError, match=r"gripper\.width_frames: frame 'no_such_pad'"):
        gripper_geometry(model, config.gripper_joints, config.grip_width_frames)
    with pytest.raises(ConfigError, match="expected two frame names"):
        load_config(overrides={"gripper.width_frames": ["left_finger"]})
    on_chain = load_config(
        overrides={
            "arm_joints": [f"joint{i}" for i in range(1, 7)],
            "gripper_joints": ["joint7", "left_finger_joint", "right_finger_joint"],
        }
    )
    with pytest.raises(ConfigError, match="gripper joint 'joint7' is on the arm chain"):
        gripper_geometry(model, on_chain.gripper_joints)
