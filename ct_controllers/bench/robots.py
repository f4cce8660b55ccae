"""The arms the IK benchmarks run on, loaded at run time: our ``ct_arm`` (the bundled xacro) and
the Franka Panda of the ``example-robot-data`` distribution (its URDF is read from the installed
package, never copied into this repository).

Both are 7-DOF arms with two prismatic fingers; the benchmarks solve over the 7 arm joints with
the fingers locked at ``FINGER_POSITION``.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

import pinocchio as pin

from ct_controllers.model.description import default_description_path, load_description
from ct_controllers.model.robot import RobotModel

ROBOTS = ("ct_arm", "panda")
FINGER_POSITION = 0.02  # [m] where the fingers are locked (mid-range of both grippers)
PANDA_URDF = "panda_description/urdf/panda.urdf"


@dataclass(frozen=True)
class BenchRobot:
    """A loaded arm: model (every joint), TCP frame, finger joints to lock, and where the URDF
    came from (``urdf_path``; for ``ct_arm`` a xacro, expanded into ``urdf_xml``)."""

    name: str
    model: RobotModel
    frame: str
    arm_joints: tuple[str, ...]
    locked: dict[str, float]
    urdf_path: str
    urdf_xml: str


def example_robot_path(suffix: str) -> Path:
    """A file of the installed ``example-robot-data`` distribution, by the end of its path
    (e.g. ``ur_description/urdf/ur5_robot.urdf``)."""
    try:
        distribution = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            f"{suffix} needs the 'example-robot-data' package (pinned in requirements.txt)"
        ) from None
    for file in distribution.files or ():
        if str(file).endswith(suffix):
            return Path(str(distribution.locate_file(file)))
    raise RuntimeError(f"example-robot-data has no {suffix}")


def panda_urdf_path() -> Path:
    """The Panda URDF inside the installed ``example-robot-data`` distribution."""
    return example_robot_path(PANDA_URDF)


def load_robot(name: str) -> BenchRobot:
    """``ct_arm`` (TCP frame ``tcp``) or ``panda`` (TCP frame ``panda_hand_tcp``, the URDF's
    tool frame 0.1034 m past the hand flange; ``panda_hand`` if a URDF lacks it)."""
    if name == "ct_arm":
        path = default_description_path()
        urdf = load_description(path).urdf
        model = RobotModel(urdf, tcp_frame="tcp", base_frame="base_link")
        fingers = ("left_finger_joint", "right_finger_joint")
        frame = "tcp"
    elif name == "panda":
        path = panda_urdf_path()
        urdf = path.read_text()
        pin_model = pin.buildModelFromXML(urdf)
        frame = "panda_hand_tcp" if pin_model.existFrame("panda_hand_tcp") else "panda_hand"
        model = RobotModel(pin_model, tcp_frame=frame, base_frame="panda_link0")
        fingers = ("panda_finger_joint1", "panda_finger_joint2")
    else:
        raise ValueError(f"unknown robot '{name}'; known: {', '.join(ROBOTS)}")
    locked = {finger: FINGER_POSITION for finger in fingers}
    arm = tuple(n for n in model.joint_names if n not in locked)
    return BenchRobot(name, model, frame, arm, locked, str(path), urdf)


def config_robot(config_path: str) -> BenchRobot:
    """The robot of a controllers.yaml (e.g. ``ct-setup``'s): its description, TCP and base
    frames, arm joints; its gripper joints locked at their home positions."""
    from ct_controllers.config import load_config

    config = load_config(config_path)
    description = load_description(
        config.robot_description or None, mappings={"backend": config.backend}
    )
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    home = dict(zip(config.joint_names, config.home_positions, strict=True))
    locked = {joint: home[joint] for joint in config.gripper_joints}
    return BenchRobot(
        config_path,
        model,
        config.tcp_frame,
        tuple(config.arm_joints),
        locked,
        str(description.source),
        description.urdf,
    )
