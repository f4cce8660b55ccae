"""ct_controllers.hardware.mujoco_mjcf: an MJCF scene the user already has (``mujoco.scene``) is
matched to the URDF by joint name — a matching one simulates the same robot as the scene built
from the URDF (with the stack's TCP site, actuators and objects), a perturbed one is refused
with every disagreement listed. The MJCFs are generated here from the URDFs by MuJoCo's own
import (as a user would convert one) and then perturbed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import pytest
from helpers import bundled_description

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.config import load_config
from ct_controllers.hardware.interface import JointCommand
from ct_controllers.hardware.mujoco_scene import build_scene, compile_scene
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.hardware.mujoco_urdf import prepare_urdf
from ct_controllers.model.description import DescriptionError, joint_armature

TCP = "panda_hand_tcp"
# The MJCF is written by MuJoCo's XML writer with 6 significant digits: agreement to that.
REL = 1e-4


def _panda() -> tuple[str, Path]:
    path = example_robot_path("robots/panda_description/urdf/panda.urdf")
    return path.read_text(), path.parent


def _converted(urdf: str, folder: Path | None) -> mujoco.MjSpec:
    """The URDF as MuJoCo's import reads it (fixed links fused), with the URDF's armature: the
    MJCF a user converting their URDF would have."""
    spec = mujoco.MjSpec.from_string(prepare_urdf(urdf, folder).xml)
    for name, value in joint_armature(urdf).items():
        spec.joint(name).armature = value
    spec.compile()
    return spec


def _write(spec: mujoco.MjSpec, path: Path) -> Path:
    path.write_text(spec.to_xml())
    return path


def _close(value: np.ndarray, reference: np.ndarray) -> bool:
    return bool(np.linalg.norm(value - reference) <= REL * max(1.0, np.linalg.norm(reference)))


def test_matching_mjcf_simulates_the_urdf_robot_with_the_stacks_additions(tmp_path):
    """The Panda converted to MJCF (fixed links fused: no body 'panda_hand_tcp'), with an
    actuator and a keyframe of its own: the stack's scene from it has the same actuators as the
    scene from the URDF (the MJCF's replaced, its keyframe dropped), the cube, and a TCP site
    placed through the URDF's fixed joints on the fused body; at random states its TCP pose,
    mass matrix and bias forces equal those of the URDF scene."""
    urdf, folder = _panda()
    spec = _converted(urdf, folder)
    actuator = spec.add_actuator(name="their_motor", target="panda_joint1")
    actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
    spec.add_key(name="home", qpos=np.zeros(9), ctrl=np.zeros(1))
    path = _write(spec, tmp_path / "panda.xml")
    assert mujoco.MjSpec.from_file(str(path)).body(TCP) is None  # fused away
    ours = compile_scene(build_scene(urdf, tcp_frame=TCP, scene=path))
    reference = compile_scene(build_scene(urdf, tcp_frame=TCP, urdf_directory=folder))
    assert ours.nkey == 0 and ours.body("cube").id > 0
    assert mujoco.mj_name2id(ours, mujoco.mjtObj.mjOBJ_ACTUATOR, "their_motor") < 0
    names = [reference.actuator(i).name for i in range(reference.nu)]
    assert [ours.actuator(i).name for i in range(ours.nu)] == names
    for name in names:
        np.testing.assert_allclose(
            ours.actuator(name).forcerange, reference.actuator(name).forcerange
        )
    assert ours.nq == reference.nq and ours.nv == reference.nv
    rng = np.random.default_rng(3)
    low, high = reference.jnt_range[:9, 0], reference.jnt_range[:9, 1]
    data_ours, data_ref = mujoco.MjData(ours), mujoco.MjData(reference)
    mass_ours, mass_ref = np.zeros((ours.nv, ours.nv)), np.zeros((ours.nv, ours.nv))
    for _ in range(20):
        q, v = rng.uniform(low, high), rng.uniform(-1.0, 1.0, 9)
        for model, data in ((ours, data_ours), (reference, data_ref)):
            for i in range(9):
                name = reference.joint(i).name
                data.qpos[model.joint(name).qposadr[0]] = q[i]
                data.qvel[model.joint(name).dofadr[0]] = v[i]
            mujoco.mj_forward(model, data)
        assert _close(data_ours.site(TCP).xpos, data_ref.site(TCP).xpos), q
        assert _close(data_ours.site(TCP).xmat, data_ref.site(TCP).xmat), q
        mujoco.mj_fullM(ours, data_ours, mass_ours)
        mujoco.mj_fullM(reference, data_ref, mass_ref)
        assert _close(mass_ours[:9, :9], mass_ref[:9, :9]), q
        assert _close(data_ours.qfrc_bias[:9], data_ref.qfrc_bias[:9]), (q, v)


def test_disagreeing_mjcf_is_refused_listing_every_joint_limit_and_gear(tmp_path):
    """A converted Panda perturbed five ways is refused with one DescriptionError naming each:
    a renamed joint (missing, and an unknown one), another range, another joint force range,
    an actuator with gear 2, and the mimic finger's equality removed. Nothing is built."""
    urdf, folder = _panda()
    spec = _converted(urdf, folder)
    spec.joint("panda_joint3").name = "elbow"
    spec.joint("panda_joint5").range = [-2.0, 2.0]
    spec.joint("panda_joint2").actfrcrange = [-50.0, 50.0]
    actuator = spec.add_actuator(name="geared", target="panda_joint1", gear=[2, 0, 0, 0, 0, 0])
    actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
    for equality in list(spec.equalities):
        spec.delete(equality)
    path = _write(spec, tmp_path / "panda.xml")
    with pytest.raises(DescriptionError) as info:
        build_scene(urdf, tcp_frame=TCP, scene=path)
    message = str(info.value)
    for clause in (
        "joint 'panda_joint3' is not in the MJCF",
        "joint 'elbow' is in the MJCF but no movable joint of the URDF",
        "joint 'panda_joint5' has range [-2, 2] in the MJCF, [-2.8973, 2.8973] in the URDF",
        "joint 'panda_joint2' has actuator force range [-50, 50] in the MJCF, effort limit 87",
        "actuator 'geared' on joint 'panda_joint1' has gear 2",
        "joint 'panda_finger_joint2' mimics 'panda_finger_joint1'",
    ):
        assert clause in message, (clause, message)
    assert str(path) in message


def test_missing_mjcf_is_refused_naming_it(tmp_path):
    """A scene path that is no file raises DescriptionError naming it."""
    with pytest.raises(DescriptionError, match=r"ghost\.xml"):
        build_scene(bundled_description().urdf, scene=tmp_path / "ghost.xml")


def test_backend_runs_the_mjcf_named_in_its_config_section(tmp_path):
    """``mujoco.scene`` in controllers.yaml reaches the backend: configured from the bundled arm
    converted to MJCF, it runs lockstep ticks under zero effort exactly as the backend built
    from the URDF does (to the MJCF's printed precision), TCP site included."""
    description = bundled_description()
    path = _write(_converted(description.urdf, None), tmp_path / "ct_arm.xml")
    config = load_config(overrides={"mujoco.mode": "lockstep", "mujoco.scene": str(path)})
    from_mjcf = MujocoSystem.from_config(description, config)
    assert from_mjcf.config.scene == str(path)
    from_urdf = MujocoSystem(
        description.urdf, from_mjcf.joint_names, replace(from_mjcf.config, scene=None)
    )
    samples = []
    for system in (from_mjcf, from_urdf):
        system.configure()
        system.activate()
        zero = np.zeros(len(system.joint_names))
        for sequence in range(1, 201):
            sample = system.read()
            system.write(
                JointCommand(
                    sample.stamp, sequence, system.joint_names, system.command_interfaces, zero
                )
            )
        samples.append(system.read())
        assert system.model is not None and system.model.site("tcp").id >= 0
    moved = np.abs(samples[1].position - np.array(config.home_positions)).max()
    assert moved > 1e-3  # the arm sagged: the comparison is of a motion
    np.testing.assert_allclose(samples[0].position, samples[1].position, rtol=0, atol=1e-4)


def test_an_mjcf_with_the_joints_the_description_locks_is_welded_there(tmp_path):
    """A user's MJCF of the whole Baxter (converted from its URDF: two arms, each gripper's
    second finger a <mimic> follower, a head) with the description locking all but the right
    arm and its gripper (the left arm turned, its gripper half open, the head turned): the
    locked joints are welded where the description fixes them — the scene has only the right
    arm's and gripper's joints, and its TCP pose, mass matrix and bias forces at random states
    equal those of MuJoCo's import of the locked URDF (the lock done in the URDF by
    ct_controllers.model.locked_joints, checked against Pinocchio in test_locked_joints)."""
    import xml.etree.ElementTree as ET

    from ct_controllers.model.locked_joints import lock_joints, with_mimics

    path = example_robot_path("robots/baxter_description/urdf/baxter.urdf")
    urdf = path.read_text()
    root = ET.fromstring(urdf)
    arm = ("s0", "s1", "e0", "e1", "w0", "w1", "w2")
    locks = {f"left_{j}": 0.1 * (k + 1) for k, j in enumerate(arm)}
    locks |= {"head_pan": -0.4, "l_gripper_l_finger_joint": 0.01}
    locked_urdf = lock_joints(urdf, locks)
    mjcf = _write(_converted(urdf, path.parent), tmp_path / "baxter.xml")
    tcp = "right_gripper"
    ours = compile_scene(
        build_scene(
            locked_urdf,
            tcp_frame=tcp,
            scene=mjcf,
            with_objects=False,
            locked_joints=with_mimics(root, locks),
        )
    )
    reference = compile_scene(
        build_scene(locked_urdf, tcp_frame=tcp, urdf_directory=path.parent, with_objects=False)
    )
    names = [reference.joint(i).name for i in range(reference.njnt)]
    assert sorted(names) == sorted(
        [f"right_{j}" for j in arm] + ["r_gripper_l_finger_joint", "r_gripper_r_finger_joint"]
    )
    assert sorted(ours.joint(i).name for i in range(ours.njnt)) == sorted(names)
    count = len(names)
    rng = np.random.default_rng(5)
    low, high = reference.jnt_range[:, 0], reference.jnt_range[:, 1]
    data_ours, data_ref = mujoco.MjData(ours), mujoco.MjData(reference)
    mass_ours, mass_ref = np.zeros((count, count)), np.zeros((count, count))
    dofs = [ours.joint(name).dofadr[0] for name in names]
    for _ in range(20):
        q, v = rng.uniform(low, high), rng.uniform(-1.0, 1.0, count)
        for model, data in ((ours, data_ours), (reference, data_ref)):
            for i, name in enumerate(names):
                data.qpos[model.joint(name).qposadr[0]] = q[i]
                data.qvel[model.joint(name).dofadr[0]] = v[i]
            mujoco.mj_forward(model, data)
        assert _close(data_ours.site(tcp).xpos, data_ref.site(tcp).xpos), q
        assert _close(data_ours.site(tcp).xmat, data_ref.site(tcp).xmat), q
        # where the welded left arm, gripper and head are: every shape of one scene has a
        # shape of the same kind and size at its place in the other (MuJoCo's import of the
        # locked URDF fuses them into the base, the welded MJCF keeps or fuses its own)
        for g in range(ours.ngeom):
            same = [
                h
                for h in range(reference.ngeom)
                if reference.geom_type[h] == ours.geom_type[g]
                and np.allclose(reference.geom_size[h], ours.geom_size[g], rtol=REL, atol=1e-6)
            ]
            gap = min(np.linalg.norm(data_ref.geom_xpos[h] - data_ours.geom_xpos[g]) for h in same)
            assert gap < 1e-4, (ours.body(ours.geom_bodyid[g]).name, gap)
        mujoco.mj_fullM(ours, data_ours, mass_ours)
        mujoco.mj_fullM(reference, data_ref, mass_ref)
        assert _close(mass_ours[np.ix_(dofs, dofs)], mass_ref), q
        assert _close(data_ours.qfrc_bias[dofs], data_ref.qfrc_bias), (q, v)
