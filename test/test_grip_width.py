"""Grip width measured geometrically (issue 24 item 6, in part): :func:`finger_frames` finds the
two finger links (two independent fingers; one finger and its ``<mimic>`` follower) and the
distance between their origins, by forward kinematics at the measured state, is the opening
between the fingers. Checked on the bundled arm against its URDF's geometry (the finger links'
origins coincide at q = 0 and slide along ±y: the distance is q_left + q_right) and on the
Panda of example-robot-data (the follower mirrors its master: twice the master's opening)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
from helpers import bundled_config, new_robot_model

from ct_controllers.chains.grasp_runner import finger_frames
from ct_controllers.model.robot import RobotModel

SAMPLES = 20  # random configurations per robot


def _distance(model: RobotModel, q: np.ndarray, frames: tuple[str, str]) -> float:
    a, b = (model.frame_pose(q, name)[:3, 3] for name in frames)
    return float(np.linalg.norm(a - b))


def _random_q(model: RobotModel, rng: np.random.Generator) -> np.ndarray:
    lower = np.where(np.isfinite(model.limits.lower), model.limits.lower, -np.pi)
    upper = np.where(np.isfinite(model.limits.upper), model.limits.upper, np.pi)
    return rng.uniform(lower, upper)


def test_bundled_fingers_width_is_the_summed_openings() -> None:
    """Bundled arm: the finger links are found by the finger joints (not by name), and at random
    configurations their origins' distance equals q_left + q_right within 1e-9 m."""
    config = bundled_config()
    model = new_robot_model()
    frames = finger_frames(model, config.gripper_joints)
    assert frames is not None and len(set(frames)) == 2
    fingers = model.indices(config.gripper_joints)
    rng = np.random.default_rng(1)
    for _ in range(SAMPLES):
        q = _random_q(model, rng)
        assert abs(_distance(model, q, frames) - float(np.sum(q[fingers]))) < 1e-9


def test_mimic_pair_width_is_twice_the_master_opening() -> None:
    """Panda (panda_finger_joint2 mimics panda_finger_joint1 with multiplier 1): the two finger
    links are the master's and the follower's child links, and their origins' distance is
    2 q_master within 1e-9 m at random configurations; no finger joints: None."""
    distribution = importlib.metadata.distribution("example-robot-data")
    urdf = next(
        Path(str(distribution.locate_file(f)))
        for f in distribution.files or ()
        if str(f).endswith("panda_description/urdf/panda.urdf")
    )
    model = RobotModel(urdf.read_text(), "panda_hand_tcp", "panda_link0")
    frames = finger_frames(model, ("panda_finger_joint1",))
    assert frames is not None and len(set(frames)) == 2
    assert model.mimic["panda_finger_joint2"].master == "panda_finger_joint1"
    master = model.indices(("panda_finger_joint1",))[0]
    rng = np.random.default_rng(2)
    for _ in range(SAMPLES):
        q = _random_q(model, rng)
        assert abs(_distance(model, q, frames) - 2.0 * float(q[master])) < 1e-9
    assert finger_frames(model, ()) is None
