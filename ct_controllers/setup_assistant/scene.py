"""The scene a chosen home must be clear of: the one the stack will simulate for the written
configuration, built as the MuJoCo backend builds it
(:meth:`~ct_controllers.hardware.mujoco_system.MujocoSystem.from_config`): the URDF by MuJoCo's
import (meshes looked for from its folder), the TCP site, the width frames kept as bodies, and
the table and cube placed from the arm's reach and its gripper's opening
(:func:`~ct_controllers.hardware.grasp_scene.grasp_scene`). The check itself is the stack's
(:class:`~ct_controllers.hardware.mujoco_collision.SceneClearance`), from the arm at its zeros
with the gripper at mid-range (the reference the home's link heights are judged from too).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from ct_controllers.errors import CtError
from ct_controllers.hardware.grasp_scene import cube_size, grasp_scene
from ct_controllers.hardware.jaw_grasp import robot_jaw_grasp
from ct_controllers.hardware.mujoco_collision import SCENE_CLEARANCE, SceneClearance
from ct_controllers.hardware.mujoco_scene import build_scene, compile_scene
from ct_controllers.model.grip_geometry import gripper_geometry
from ct_controllers.setup_assistant.design_model import DesignModel
from ct_controllers.setup_assistant.urdf_tree import RobotTree
from ct_controllers.types import FloatArray


def configuration(design: DesignModel, q: FloatArray) -> dict[str, float]:
    """Joint name → position of the configuration's joints (arm, gripper) at ``q`` (model
    order), as the scene takes them."""
    model = design.model
    return {name: float(q[model.v_index(name)]) for name in design.chain.joint_names}


def reference(design: DesignModel) -> FloatArray:
    """The arm at its zeros, the gripper at mid-range (model order)."""
    model = design.model
    q = np.array(pin.neutral(model.model))
    for name in design.chain.gripper_joints:
        i = model.v_index(name)
        q[i] = 0.5 * (model.limits.lower[i] + model.limits.upper[i])
    return q


def home_scene(
    tree: RobotTree,
    design: DesignModel,
    width_frames: Sequence[str],
    clearance: float = SCENE_CLEARANCE,
    plane: bool = True,
) -> tuple[SceneClearance | None, str]:
    """The clearance check in the scene the stack will simulate (module docstring; ``plane``:
    SceneClearance's), and ""; or None and why, where MuJoCo cannot build that scene (a mesh it
    cannot find or read)."""
    chain, model = design.chain, design.model
    try:
        grip = gripper_geometry(model, chain.gripper_joints, width_frames)
        directory = tree.source.parent
        jaw = robot_jaw_grasp(
            tree.urdf, directory, chain.tcp, grip, cube_size(grip), len(chain.arm_joints)
        )
        spec = build_scene(
            tree.urdf,
            tcp_frame=chain.tcp,
            urdf_directory=directory,
            kept_links=width_frames,
            objects=grasp_scene(model, grip, jaw),
        )
        scene = compile_scene(spec)
        check = SceneClearance(
            scene, chain.base, configuration(design, reference(design)), clearance, plane
        )
    except (CtError, ValueError) as exc:
        return None, str(exc)
    return check, ""
