"""ct_controllers.model.description: xacro expansion and the <ros2_control> block."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from helpers import bundled_description

from ct_controllers.hardware.mujoco_scene import build_scene
from ct_controllers.model.description import (
    DescriptionError,
    default_description_path,
    joint_armature,
    load_description,
    parse_description,
)
from ct_controllers.model.robot import RobotModel

ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
ALL_JOINTS = (*ARM_JOINTS, "left_finger_joint", "right_finger_joint")


def _ros2_control_joint_tag(name: str) -> str:
    """The opening of a joint element inside <ros2_control> in the expanded XML (URDF joints
    carry a ``type`` attribute, these do not)."""
    return f'<joint name="{name}"><command_interface'


def test_bundled_xacro_expands_to_a_urdf():
    """The bundled xacro expands into XML with a <robot> root naming the arm."""
    description = bundled_description()
    assert default_description_path().is_file()
    root = ET.fromstring(description.urdf)
    assert root.tag == "robot"
    assert root.get("name") == "ct_arm"
    assert description.source == str(default_description_path())


def test_bundled_description_has_nine_joints_with_effort_and_position_commands():
    """The <ros2_control> block lists the 9 movable joints in file order, each with effort and
    position command interfaces and position/velocity/effort state."""
    hardware = bundled_description().hardware
    assert hardware.name == "ct_arm_system"
    assert hardware.joint_names == ALL_JOINTS
    for joint in hardware.joints:
        assert joint.command_interfaces == ("effort", "position"), joint.name
        assert joint.state_interfaces == ("position", "velocity", "effort"), joint.name


@pytest.mark.parametrize(
    ("backend", "plugin"),
    [
        ("mujoco", "ct_controllers/MujocoSystem"),
        ("ros2_control_bridge", "ct_controllers/Ros2ControlBridge"),
        ("canopen", "ct_controllers/CanopenCia402System"),
    ],
)
def test_backend_argument_selects_the_hardware_plugin(backend, plugin):
    """The xacro 'backend' argument selects exactly one <hardware><plugin>."""
    description = bundled_description(backend)
    assert description.hardware.plugin == plugin
    root = ET.fromstring(description.urdf)
    assert [p.text for p in root.iter("plugin")] == [plugin]


def test_default_backend_is_mujoco():
    """Without arguments the xacro picks the MuJoCo simulation backend."""
    assert load_description().hardware.plugin == "ct_controllers/MujocoSystem"


def test_ros2_control_joint_missing_from_urdf_is_rejected_by_name():
    """A <ros2_control> joint that is not a movable URDF joint raises DescriptionError naming it."""
    urdf = bundled_description().urdf
    tag = _ros2_control_joint_tag("joint4")
    assert urdf.count(tag) == 1
    bad = urdf.replace(tag, _ros2_control_joint_tag("wrist_ghost_joint"))
    with pytest.raises(DescriptionError, match="'wrist_ghost_joint'"):
        parse_description(bad)


def test_ros2_control_naming_a_fixed_joint_is_rejected():
    """A <ros2_control> joint that exists in the URDF but is fixed is not a movable joint."""
    urdf = bundled_description().urdf
    bad = urdf.replace(_ros2_control_joint_tag("joint7"), _ros2_control_joint_tag("hand_to_tcp"))
    with pytest.raises(DescriptionError, match="'hand_to_tcp'"):
        parse_description(bad)


def test_urdf_joint_removed_under_ros2_control_is_rejected():
    """Removing a movable joint from the URDF (but not from <ros2_control>) is caught."""
    urdf = bundled_description().urdf
    root = ET.fromstring(urdf)
    (joint,) = [j for j in root.findall("joint") if j.get("name") == "left_finger_joint"]
    root.remove(joint)
    with pytest.raises(DescriptionError, match="'left_finger_joint'"):
        parse_description(ET.tostring(root, encoding="unicode"))


def test_duplicated_ros2_control_joint_is_rejected_by_name():
    """A joint listed twice in <ros2_control> raises DescriptionError naming it."""
    urdf = bundled_description().urdf
    root = ET.fromstring(urdf)
    block = root.find("ros2_control")
    assert block is not None
    (joint3,) = [j for j in block.findall("joint") if j.get("name") == "joint3"]
    block.append(ET.fromstring(ET.tostring(joint3)))
    with pytest.raises(DescriptionError, match="'joint3' twice"):
        parse_description(ET.tostring(root, encoding="unicode"))


def test_missing_plugin_is_rejected():
    """A <ros2_control><hardware> without <plugin> raises DescriptionError mentioning plugin."""
    urdf = bundled_description().urdf
    plugin = "<plugin>ct_controllers/MujocoSystem</plugin>"
    assert urdf.count(plugin) == 1
    with pytest.raises(DescriptionError, match="plugin"):
        parse_description(urdf.replace(plugin, ""))
    with pytest.raises(DescriptionError, match="plugin"):
        parse_description(urdf.replace(plugin, "<plugin>   </plugin>"))


def test_unknown_backend_leaves_no_plugin_and_is_rejected():
    """An unknown backend argument selects no plugin, which load_description rejects."""
    with pytest.raises(DescriptionError, match="plugin"):
        load_description(mappings={"backend": "no_such_backend"})


def test_no_or_two_ros2_control_blocks_are_rejected():
    """Exactly one <ros2_control> block is required."""
    urdf = bundled_description().urdf
    root = ET.fromstring(urdf)
    block = root.find("ros2_control")
    assert block is not None
    root.append(ET.fromstring(ET.tostring(block)))
    with pytest.raises(DescriptionError, match="found 2"):
        parse_description(ET.tostring(root, encoding="unicode"))
    root.remove(block)
    root.remove(root.findall("ros2_control")[0])
    with pytest.raises(DescriptionError, match="found 0"):
        parse_description(ET.tostring(root, encoding="unicode"))


def test_invalid_xml_and_missing_file_are_description_errors(tmp_path):
    """Malformed XML and a missing file raise DescriptionError, not a parser/OS error."""
    with pytest.raises(DescriptionError, match="not valid XML"):
        parse_description("<robot><link></robot>")
    missing = tmp_path / "nope.urdf"
    with pytest.raises(DescriptionError, match=re.escape("nope.urdf")):
        load_description(missing)


def test_plain_urdf_file_loads_like_the_xacro(tmp_path):
    """An already expanded .urdf file is read as-is and gives the same hardware block."""
    file = tmp_path / "arm.urdf"
    file.write_text(bundled_description().urdf)
    description = load_description(file)
    assert description.hardware == bundled_description().hardware
    assert description.urdf == bundled_description().urdf


def test_armature_is_read_and_reaches_both_models():
    """Each arm joint of the bundled URDF carries <dynamics armature="0.1">, the fingers none;
    Pinocchio's model.armature and MuJoCo's dof_armature both hold exactly that, by joint name.
    A negative or non-numeric armature is refused naming its joint."""
    urdf = bundled_description().urdf
    armature = joint_armature(urdf)
    assert armature == {f"joint{i}": 0.1 for i in range(1, 8)}
    model = RobotModel(urdf)
    compiled = build_scene(urdf).compile()
    for name in model.joint_names:
        expected = armature.get(name, 0.0)
        assert model.model.armature[model.v_index(name)] == expected
        joint = compiled.joint(name)
        assert compiled.dof_armature[joint.dofadr[0]] == expected
    for bad in ("-0.1", "heavy"):
        broken = urdf.replace('armature="0.1"', f'armature="{bad}"', 1)
        with pytest.raises(DescriptionError, match=r"joint 'joint1': armature"):
            joint_armature(broken)
