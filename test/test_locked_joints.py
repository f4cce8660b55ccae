"""Locked joints (ct_controllers.model.locked_joints): a URDF with joints fixed at a position is
the same robot as the full URDF standing at those positions."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.model.description import DescriptionError, parse_description
from ct_controllers.model.locked_joints import LockError, lock_joints

BAXTER = "baxter_description/urdf/baxter.urdf"
PANDA = "panda_description/urdf/panda.urdf"
TIAGO = "tiago_description/robots/tiago.urdf"


def _link_poses(model: pin.Model, q: np.ndarray) -> dict[str, pin.SE3]:
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    return {
        frame.name: data.oMf[i]
        for i, frame in enumerate(model.frames)
        if frame.type == pin.FrameType.BODY
    }


def _full_configuration(model: pin.Model, positions: dict[str, float]) -> np.ndarray:
    """Pinocchio's configuration of ``model`` with each named joint at its position (a
    continuous joint as cos, sin)."""
    q = pin.neutral(model)
    for name, value in positions.items():
        joint = model.joints[model.getJointId(name)]
        if joint.nq == 2:
            q[joint.idx_q : joint.idx_q + 2] = (math.cos(value), math.sin(value))
        else:
            q[joint.idx_q] = value
    return q


@pytest.mark.parametrize(
    ("robot", "locked_names"),
    [
        # the other arm and the head of a dual-arm robot (revolute)
        (BAXTER, ("head_pan", "right_s0", "right_s1", "right_e0", "right_e1", "right_w0")),
        # a mobile base's wheels (continuous) and the head; the torso lift (prismatic)
        (TIAGO, ("wheel_left_joint", "wheel_right_joint", "head_1_joint", "torso_lift_joint")),
    ],
)
def test_every_link_of_the_locked_robot_is_where_the_full_robot_puts_it(robot, locked_names):
    """For random positions of the joints left free, every link's pose in the locked URDF's
    Pinocchio model equals the full URDF's model at those positions plus the locked ones."""
    urdf = example_robot_path(robot).read_text()
    full = pin.buildModelFromXML(urdf)
    rng = np.random.default_rng(7)

    def draw(name: str) -> float:
        joint = full.joints[full.getJointId(name)]
        low = full.lowerPositionLimit[joint.idx_q]
        high = full.upperPositionLimit[joint.idx_q]
        if joint.nq == 2 or not (np.isfinite(low) and np.isfinite(high)):
            return float(rng.uniform(-math.pi, math.pi))
        return float(rng.uniform(low, high))

    locked = {name: draw(name) for name in locked_names}
    reduced = pin.buildModelFromXML(lock_joints(urdf, locked))
    assert reduced.nv == full.nv - len(locked_names)
    free = [name for name in reduced.names[1:]]
    for _ in range(5):
        free_positions = {name: draw(name) for name in free}
        expected = _link_poses(full, _full_configuration(full, {**free_positions, **locked}))
        got = _link_poses(reduced, _full_configuration(reduced, free_positions))
        assert set(got) == set(expected)
        for link, pose in got.items():
            np.testing.assert_allclose(pose.homogeneous, expected[link].homogeneous, atol=1e-9)


def test_a_locked_master_locks_its_mimic_follower_at_its_mimic_position():
    """Locking the Panda's first finger fixes the second (its <mimic> follower) too, each link
    where the full model puts it with both fingers at that opening."""
    urdf = example_robot_path(PANDA).read_text()
    full = pin.buildModelFromXML(urdf)
    locked_urdf = lock_joints(urdf, {"panda_finger_joint1": 0.03})
    reduced = pin.buildModelFromXML(locked_urdf)
    assert "panda_finger_joint2" not in list(reduced.names)
    types = {j.get("name"): j.get("type") for j in ET.fromstring(locked_urdf).iter("joint")}
    assert types["panda_finger_joint2"] == "fixed"
    q_arm = {f"panda_joint{i}": 0.1 * i for i in range(1, 8)}
    expected = _link_poses(
        full,
        _full_configuration(
            full, {**q_arm, "panda_finger_joint1": 0.03, "panda_finger_joint2": 0.03}
        ),
    )
    got = _link_poses(reduced, _full_configuration(reduced, q_arm))
    for link in ("panda_leftfinger", "panda_rightfinger", "panda_hand"):
        np.testing.assert_allclose(got[link].homogeneous, expected[link].homogeneous, atol=1e-9)


@pytest.mark.parametrize(
    ("positions", "message"),
    [
        ({"no_such_joint": 0.0}, "locked joint 'no_such_joint' is not a movable joint"),
        ({"panda_joint8": 0.0}, "locked joint 'panda_joint8' is not a movable joint"),
        ({"panda_joint4": 0.5}, "outside its limits [-3.0718, -0.0698]"),
        ({"panda_joint1": math.nan}, "position nan is not finite"),
        ({"panda_finger_joint2": 0.01}, "follows 'panda_finger_joint1' (<mimic>)"),
    ],
)
def test_a_lock_that_cannot_be_is_refused_naming_the_joint(positions, message):
    """Unknown or fixed joints, positions out of range or not finite, a mimic follower locked
    without its master: LockError naming it."""
    urdf = example_robot_path(PANDA).read_text()
    with pytest.raises(LockError, match=None) as raised:
        lock_joints(urdf, positions, source="panda.urdf")
    assert message in str(raised.value)


def _panda_with_our_block(params: str) -> str:
    """The Panda with a <ros2_control> block of ours driving its 7 arm joints, ``params`` in its
    <hardware>."""
    urdf = example_robot_path(PANDA).read_text()
    joints = "".join(
        f'<joint name="panda_joint{i}"><command_interface name="effort"/></joint>'
        for i in range(1, 8)
    )
    block = (
        '<ros2_control name="s" type="system"><hardware>'
        f"<plugin>ct_controllers/MujocoSystem</plugin>{params}"
        "</hardware>" + joints + "</ros2_control>"
    )
    return urdf.replace("</robot>", block + "</robot>")


def test_the_description_fixes_the_joints_its_block_locks():
    """A ``<param name="locked.J">`` in the hardware block: the description's URDF has J
    fixed (Pinocchio sees the driven joints only) and says what it locked, followers included."""
    urdf = _panda_with_our_block('<param name="locked.panda_finger_joint1">0.02</param>')
    description = parse_description(urdf, source="panda")
    assert dict(description.locked_joints) == {
        "panda_finger_joint1": 0.02,
        "panda_finger_joint2": 0.02,
    }
    model = pin.buildModelFromXML(description.urdf)
    assert list(model.names[1:]) == [f"panda_joint{i}" for i in range(1, 8)]


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ('<param name="locked.panda_joint7">0.1</param>', "both listed in <ros2_control> and"),
        ('<param name="locked.panda_finger_joint1">wide</param>', "'wide' is not a position"),
        ('<param name="locked.panda_finger_joint1">0.5</param>', "outside its limits"),
    ],
)
def test_a_block_locking_what_it_cannot_is_a_description_error(param, message):
    """A joint both driven and locked, a position that is no number or out of range: the
    description is refused, naming it."""
    with pytest.raises(DescriptionError) as raised:
        parse_description(_panda_with_our_block(param), source="panda")
    assert message in str(raised.value)
