"""An MJCF scene the user already has (``mujoco.scene``, e.g. a MuJoCo Menagerie model), matched
to the URDF by joint name.

The controllers' model is the URDF (Pinocchio); the simulated robot is then the MJCF's. They
must be the same robot, so every disagreement the scene can show by name is reported at once,
one clause each, and nothing is built:

- a movable URDF joint missing from the MJCF, or of another kind (revolute and continuous are
  hinges, prismatic is a slide); a hinge or slide of the MJCF that is no movable URDF joint;
- limits: a continuous URDF joint limited in the MJCF, a limited one whose MJCF range differs
  (beyond 1e-5 of the value: MuJoCo's XML writer keeps 6 digits) or is missing; a joint force
  range (``actuatorfrcrange``) other than ± the URDF effort limit (to 1e-5 of it);
- actuators on the URDF's joints: a gear other than 1 (the stack commands joint effort and
  position directly) or a force range × gear other than ± the URDF effort limit;
- a URDF ``<mimic>`` without a joint equality in the MJCF coupling the same two joints with the
  same multiplier and offset.

Joints the description locks (:mod:`~ct_controllers.model.locked_joints`: the URDF the stack
models has them fixed) are welded in the MJCF first: each one's body is turned (hinge) or moved
(slide) by the joint's motion at its locked position, about the joint's anchor and axis, and the
joint is removed with the actuators, joint equalities and sensors that name it; its body must
carry that one joint (a ball or free joint, or two joints on one body: refused).

What the stack then changes: the MJCF's actuators on the URDF's joints are replaced by the
stack's own (:mod:`~ct_controllers.hardware.mujoco_scene`, same semantics as a scene built from
the URDF), its keyframes are dropped (their qpos and ctrl sizes no longer fit once the stack's
objects and actuators are added; the stack sets the initial state itself), and the physics
timestep and integrator are the configuration's. Everything else (bodies, geoms, meshes,
armature, damping, contact options) is the file's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import mujoco
import numpy as np

from ct_controllers.hardware.mujoco_urdf import PreparedUrdf
from ct_controllers.model.description import DescriptionError

# [-] relative (to the value, at least 1 rad | m | N·m | N): MuJoCo's XML writer keeps 6
# significant digits, so an MJCF it wrote from the URDF has 2.0944 for 2.094395 (Baxter's wrist).
RANGE_TOLERANCE = 1e-5
FORCE_TOLERANCE = 1e-5


def _differ(mjcf: float, urdf: float, tolerance: float) -> bool:
    return abs(mjcf - urdf) > tolerance * max(1.0, abs(urdf))


_KIND = {
    "revolute": mujoco.mjtJoint.mjJNT_HINGE,
    "continuous": mujoco.mjtJoint.mjJNT_HINGE,
    "prismatic": mujoco.mjtJoint.mjJNT_SLIDE,
}


def load_matching_mjcf(
    path: Path, prepared: PreparedUrdf, locked: Mapping[str, float] | None = None
) -> mujoco.MjSpec:
    """The MJCF at ``path`` as a spec ready for the stack's additions, its ``locked`` joints
    (name → [rad | m]) welded there, after checking it against the URDF (module docstring);
    DescriptionError listing every disagreement."""
    if not path.is_file():
        raise DescriptionError(f"MJCF scene not found: {path}")
    try:
        spec = mujoco.MjSpec.from_file(str(path))
        if locked:
            weld_joints(spec, spec.compile(), locked, path)
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


def weld_joints(
    spec: mujoco.MjSpec, model: mujoco.MjModel, locked: Mapping[str, float], path: Path
) -> None:
    """Weld each joint of ``locked`` that ``spec`` has (``model``: ``spec`` compiled, for the
    joints' anchor p and unit axis a in their body's frame, ``jnt_pos/axis``) at its position
    (module docstring): the body's pose P in the file (in its parent or frame) becomes
    P · T(p) · R(a, q − ref) · T(−p) for a hinge, P · T(a (q − ref)) for a slide (qpos = ref is
    the pose the file describes)."""
    for name, position in locked.items():
        index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if index < 0:
            continue
        kind = int(model.jnt_type[index])
        body = int(model.jnt_bodyid[index])
        if kind not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)) or (
            model.body_jntnum[body] != 1
        ):
            raise DescriptionError(
                f"MJCF scene {path}: locked joint '{name}' cannot be welded (it is not the one "
                "hinge or slide of its body)"
            )
        angle = position - float(model.qpos0[model.jnt_qposadr[index]])
        anchor, axis = np.array(model.jnt_pos[index]), np.array(model.jnt_axis[index])
        rotation = np.zeros(4)
        if kind == int(mujoco.mjtJoint.mjJNT_HINGE):
            mujoco.mju_axisAngle2Quat(rotation, axis, angle)
            turned = np.zeros(3)
            mujoco.mju_rotVecQuat(turned, -anchor, rotation)
            offset = anchor + turned  # T(p) R T(−p): rotation about the anchor
        else:
            rotation[0] = 1.0
            offset = axis * angle
        # The weld multiplies the body's pose in the file on the right, whatever frames hold it:
        # pos' = pos + R offset, quat' = quat ⊗ rotation.
        element = spec.body(model.body(body).name)
        local = _local_quat(spec, element, path, name)
        moved = np.zeros(3)
        mujoco.mju_rotVecQuat(moved, offset, local)
        quat = np.zeros(4)
        mujoco.mju_mulQuat(quat, local, rotation)
        element.pos = np.array(element.pos) + moved
        element.quat = quat
        element.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
        joint = spec.joint(name)
        for actuator in list(spec.actuators):
            if actuator.target == name:
                spec.delete(actuator)
        for equality in list(spec.equalities):
            if equality.type == mujoco.mjtEq.mjEQ_JOINT and name in (
                equality.name1,
                equality.name2,
            ):
                spec.delete(equality)
        for sensor in list(spec.sensors):
            if sensor.objname == name:
                spec.delete(sensor)
        spec.delete(joint)


def _local_quat(spec: mujoco.MjSpec, body: mujoco.MjsBody, path: Path, joint: str) -> np.ndarray:
    """The unit quaternion of ``body``'s orientation as the file gives it (quat, euler or
    axisangle); DescriptionError for another form."""
    quat = np.zeros(4)
    kind = body.alt.type
    if kind == mujoco.mjtOrientation.mjORIENTATION_QUAT:
        quat[:] = body.quat
        mujoco.mju_normalize4(quat)
        return quat
    scale = np.pi / 180.0 if spec.compiler.degree else 1.0
    if kind == mujoco.mjtOrientation.mjORIENTATION_EULER:
        sequence = "".join(str(c) for c in spec.compiler.eulerseq)
        mujoco.mju_euler2Quat(quat, np.array(body.alt.euler) * scale, sequence)
        return quat
    if kind == mujoco.mjtOrientation.mjORIENTATION_AXISANGLE:
        axis = np.array(body.alt.axisangle[:3], dtype=float)
        mujoco.mju_axisAngle2Quat(quat, axis / np.linalg.norm(axis), body.alt.axisangle[3] * scale)
        return quat
    raise DescriptionError(
        f"MJCF scene {path}: the body of locked joint '{joint}' gives its orientation as "
        f"{kind.name}: write it as quat, euler or axisangle to have it welded"
    )


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
        elif _differ(low, joint.lower, RANGE_TOLERANCE) or _differ(
            high, joint.upper, RANGE_TOLERANCE
        ):
            problems.append(
                f"joint '{name}' has range [{low:g}, {high:g}] in the MJCF, "
                f"[{joint.lower:g}, {joint.upper:g}] in the URDF"
            )
        if model.jnt_actfrclimited[index] and joint.effort > 0:
            low, high = model.jnt_actfrcrange[index]
            if _differ(-low, joint.effort, FORCE_TOLERANCE) or _differ(
                high, joint.effort, FORCE_TOLERANCE
            ):
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
            if _differ(-low, effort, FORCE_TOLERANCE) or _differ(high, effort, FORCE_TOLERANCE):
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
