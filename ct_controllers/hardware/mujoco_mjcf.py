"""An MJCF scene the user already has (``mujoco.scene``, e.g. a MuJoCo Menagerie model), matched
to the URDF by joint name.

The controllers' model is the URDF (Pinocchio); the simulated robot is then the MJCF's. They
must be the same robot, so every disagreement the scene can show by name is reported at once,
one clause each, and nothing is built:

- a movable URDF joint missing from the MJCF, or of another kind (revolute and continuous are
  hinges, prismatic is a slide); a hinge or slide of the MJCF that is no movable URDF joint;
- limits: a continuous URDF joint limited in the MJCF, a limited one whose MJCF range differs
  (beyond 1e-6 rad | m) or is missing; a joint force range (``actuatorfrcrange``) other than ±
  the URDF effort limit;
- actuators on the URDF's joints: a gear other than 1 (the stack commands joint effort and
  position directly) or a force range × gear other than ± the URDF effort limit;
- a URDF ``<mimic>`` without a joint equality in the MJCF coupling the same two joints with the
  same multiplier and offset.

What the stack then changes: the MJCF's actuators on the URDF's joints are replaced by the
stack's own (:mod:`~ct_controllers.hardware.mujoco_scene`, same semantics as a scene built from
the URDF), its keyframes are dropped (their qpos and ctrl sizes no longer fit once the stack's
objects and actuators are added; the stack sets the initial state itself), and the physics
timestep and integrator are the configuration's. Everything else (bodies, geoms, meshes,
armature, damping, contact options) is the file's.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from ct_controllers.hardware.mujoco_urdf import PreparedUrdf
from ct_controllers.model.description import DescriptionError

RANGE_TOLERANCE = 1e-6  # [rad | m]
FORCE_TOLERANCE = 1e-6  # [N·m | N]
_KIND = {
    "revolute": mujoco.mjtJoint.mjJNT_HINGE,
    "continuous": mujoco.mjtJoint.mjJNT_HINGE,
    "prismatic": mujoco.mjtJoint.mjJNT_SLIDE,
}


def load_matching_mjcf(path: Path, prepared: PreparedUrdf) -> mujoco.MjSpec:
    """The MJCF at ``path`` as a spec ready for the stack's additions, after checking it against
    the URDF (module docstring); DescriptionError listing every disagreement."""
    if not path.is_file():
        raise DescriptionError(f"MJCF scene not found: {path}")
    try:
        spec = mujoco.MjSpec.from_file(str(path))
        model = spec.compile()
    except ValueError as exc:
        raise DescriptionError(f"MJCF scene {path}: MuJoCo cannot load it: {exc}") from exc
    problems = disagreements(model, prepared)
    if problems:
        raise DescriptionError(f"MJCF scene {path} does not match the URDF: " + "; ".join(problems))
    for actuator in list(spec.actuators):
        if actuator.target in prepared.joints:
            spec.delete(actuator)
    for key in list(spec.keys):
        spec.delete(key)
    spec.nkey = 0  # a <size nkey> of the file would make empty keyframes again
    return spec


def disagreements(model: mujoco.MjModel, prepared: PreparedUrdf) -> list[str]:
    """Every way the compiled MJCF ``model`` disagrees with the URDF by joint name, one clause
    each (empty: they agree)."""
    problems: list[str] = []
    for name, joint in prepared.joints.items():
        index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if index < 0:
            problems.append(f"joint '{name}' is not in the MJCF")
            continue
        kind = mujoco.mjtJoint(int(model.jnt_type[index]))
        if kind != _KIND[joint.kind]:
            problems.append(f"joint '{name}' is {joint.kind} in the URDF, {kind.name} in the MJCF")
            continue
        limited, (low, high) = bool(model.jnt_limited[index]), model.jnt_range[index]
        if joint.lower is None or joint.upper is None:
            if limited and joint.kind == "continuous":
                problems.append(
                    f"joint '{name}' is continuous in the URDF, limited to [{low:g}, {high:g}] "
                    "in the MJCF"
                )
        elif not limited:
            problems.append(
                f"joint '{name}' has range [{joint.lower:g}, {joint.upper:g}] in the URDF, none "
                "in the MJCF"
            )
        elif max(abs(low - joint.lower), abs(high - joint.upper)) > RANGE_TOLERANCE:
            problems.append(
                f"joint '{name}' has range [{low:g}, {high:g}] in the MJCF, "
                f"[{joint.lower:g}, {joint.upper:g}] in the URDF"
            )
        if model.jnt_actfrclimited[index] and joint.effort > 0:
            low, high = model.jnt_actfrcrange[index]
            if max(abs(low + joint.effort), abs(high - joint.effort)) > FORCE_TOLERANCE:
                problems.append(
                    f"joint '{name}' has actuator force range [{low:g}, {high:g}] in the MJCF, "
                    f"effort limit {joint.effort:g} in the URDF"
                )
    urdf_joint_ids = {
        mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name): name for name in prepared.joints
    }
    movable = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    for index in range(model.njnt):
        name = model.joint(index).name
        if int(model.jnt_type[index]) in movable and index not in urdf_joint_ids:
            problems.append(f"joint '{name}' is in the MJCF but no movable joint of the URDF")
    for index in range(model.nu):
        if int(model.actuator_trntype[index]) != int(mujoco.mjtTrn.mjTRN_JOINT):
            continue
        joint_name = urdf_joint_ids.get(int(model.actuator_trnid[index, 0]))
        if joint_name is None:
            continue
        label = f"actuator '{model.actuator(index).name}' on joint '{joint_name}'"
        gear = model.actuator_gear[index]
        if abs(gear[0] - 1.0) > 1e-12 or np.any(gear[1:]):
            problems.append(
                f"{label} has gear {gear[0]:g} in the MJCF; the stack commands the joint "
                "directly (gear 1)"
            )
        effort = prepared.joints[joint_name].effort
        if model.actuator_forcelimited[index] and effort > 0:
            low, high = model.actuator_forcerange[index] * gear[0]
            if max(abs(low + effort), abs(high - effort)) > FORCE_TOLERANCE:
                problems.append(
                    f"{label} has force range [{low:g}, {high:g}] in the MJCF, effort limit "
                    f"{effort:g} in the URDF"
                )
    for follower, mimic in prepared.mimic.items():
        # MuJoCo's joint equality: q(obj1) = polycoef(q(obj2)), polycoef = (offset, multiplier,
        # 0, 0, 0) for a URDF mimic (obj1 the follower).
        ids = tuple(
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in (follower, mimic.master)
        )
        coupled = any(
            int(model.eq_type[i]) == int(mujoco.mjtEq.mjEQ_JOINT)
            and (int(model.eq_obj1id[i]), int(model.eq_obj2id[i])) == ids
            and np.allclose(model.eq_data[i, :5], [mimic.offset, mimic.multiplier, 0, 0, 0])
            for i in range(model.neq)
        )
        if not coupled:
            problems.append(
                f"joint '{follower}' mimics '{mimic.master}' (× {mimic.multiplier:g} "
                f"+ {mimic.offset:g}) in the URDF; no joint equality of the MJCF couples them so"
            )
    return problems
