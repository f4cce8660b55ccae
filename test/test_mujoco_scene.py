"""ct_controllers.hardware.mujoco_scene: the MuJoCo scene built from the URDF is the same arm as
the Pinocchio model (kinematics and rigid-body dynamics), with the URDF limits."""

from __future__ import annotations

import logging
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest
from helpers import bundled_description, new_robot_model, random_configuration

from ct_controllers.bench.robots import panda_urdf_path
from ct_controllers.hardware.mujoco_scene import ServoGains, at_rest, build_scene, compile_scene
from ct_controllers.model.description import DescriptionError
from ct_controllers.model.robot import RobotModel

SAMPLES = 200
TCP = "tcp"  # the bundled arm's TCP frame (its site is named after it)


def _close(value: np.ndarray, reference: np.ndarray, rel: float = 1e-6) -> bool:
    return bool(np.linalg.norm(value - reference) <= rel * max(1.0, np.linalg.norm(reference)))


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return new_robot_model()


@pytest.fixture(scope="module")
def arm_only() -> mujoco.MjModel:
    """The arm without table, floor and cube: no contacts."""
    return build_scene(bundled_description().urdf, tcp_frame=TCP, with_objects=False).compile()


@pytest.fixture(scope="module")
def full_scene() -> mujoco.MjModel:
    return build_scene(bundled_description().urdf).compile()


@pytest.fixture(scope="module")
def dof_map(robot, arm_only) -> tuple[np.ndarray, np.ndarray]:
    """(qpos address, dof address) in MuJoCo for each Pinocchio joint, mapped by joint name."""
    qpos = np.array([arm_only.joint(n).qposadr[0] for n in robot.joint_names])
    dof = np.array([arm_only.joint(n).dofadr[0] for n in robot.joint_names])
    return qpos, dof


@pytest.fixture(scope="module")
def random_states(robot) -> list[tuple[np.ndarray, np.ndarray]]:
    """SAMPLES random (q within the limits, v within the velocity limits)."""
    rng = np.random.default_rng(7)
    return [
        (
            random_configuration(robot, rng),
            rng.uniform(-robot.limits.velocity, robot.limits.velocity),
        )
        for _ in range(SAMPLES)
    ]


def _set_state(model, data, dof_map, q, v):
    qpos_adr, dof_adr = dof_map
    data.qpos[:] = 0.0
    data.qvel[:] = 0.0
    data.qpos[qpos_adr] = q
    data.qvel[dof_adr] = v
    mujoco.mj_forward(model, data)


# --- agreement with Pinocchio ----------------------------------------------------------------
def test_scene_has_one_dof_per_urdf_joint(robot, arm_only):
    """Without objects, the scene's DOFs are exactly the URDF's movable joints."""
    assert arm_only.nq == arm_only.nv == robot.nv
    assert {arm_only.joint(i).name for i in range(arm_only.njnt)} == set(robot.joint_names)
    assert arm_only.nu == robot.nv


def test_tcp_pose_agrees_with_pinocchio(robot, arm_only, dof_map, random_states):
    """Site 'tcp' position and orientation equal RobotModel.frame_pose at random q."""
    data = mujoco.MjData(arm_only)
    site = arm_only.site(TCP).id
    for q, _ in random_states:
        _set_state(arm_only, data, dof_map, q, np.zeros_like(q))
        pose = robot.frame_pose(q)
        assert _close(data.site_xpos[site], pose[:3, 3]), q
        assert _close(data.site_xmat[site].reshape(3, 3), pose[:3, :3]), q


def test_mass_matrix_agrees_with_pinocchio(robot, arm_only, dof_map, random_states):
    """mj_fullM restricted to the joints (mapped by name) equals RobotModel.mass_matrix."""
    data = mujoco.MjData(arm_only)
    _, dof_adr = dof_map
    full = np.zeros((arm_only.nv, arm_only.nv))
    for q, _ in random_states:
        _set_state(arm_only, data, dof_map, q, np.zeros_like(q))
        mujoco.mj_fullM(arm_only, data, full)  # MuJoCo 4: (m, d, dst)
        mass = full[np.ix_(dof_adr, dof_adr)]
        assert _close(mass, robot.mass_matrix(q)), q


def test_gravity_agrees_with_pinocchio(robot, arm_only, dof_map, random_states):
    """qfrc_bias at zero velocity equals g(q)."""
    data = mujoco.MjData(arm_only)
    _, dof_adr = dof_map
    for q, _ in random_states:
        _set_state(arm_only, data, dof_map, q, np.zeros_like(q))
        assert _close(data.qfrc_bias[dof_adr], robot.gravity(q)), q


def test_bias_forces_agree_with_pinocchio(robot, arm_only, dof_map, random_states):
    """qfrc_bias at random (q, v) equals b(q, v) = C(q, v) v + g(q)."""
    data = mujoco.MjData(arm_only)
    _, dof_adr = dof_map
    velocity_terms = 0.0
    for q, v in random_states:
        _set_state(arm_only, data, dof_map, q, v)
        reference = robot.bias(q, v)
        assert _close(data.qfrc_bias[dof_adr], reference), (q, v)
        velocity_terms = max(velocity_terms, float(np.linalg.norm(reference - robot.gravity(q))))
    # The Coriolis/centrifugal part is not negligible, so C(q, v) v is really compared.
    assert velocity_terms > 1.0


# --- limits and actuators --------------------------------------------------------------------
def test_joint_ranges_are_the_urdf_limits_in_radians(robot, arm_only):
    """MuJoCo joint ranges equal the URDF limits (radians, not read as degrees)."""
    for i, name in enumerate(robot.joint_names):
        joint = arm_only.joint(name)
        assert joint.limited[0] == 1, name
        np.testing.assert_array_equal(
            joint.range, [robot.limits.lower[i], robot.limits.upper[i]], err_msg=name
        )
    assert arm_only.joint("joint1").range[1] == pytest.approx(2.967)  # not 2.967° = 0.0518 rad


def test_effort_actuators_are_motors_limited_to_the_urdf_effort(robot, arm_only):
    """Each joint gets a motor named after it with ctrlrange = forcerange = ±URDF effort."""
    for i, name in enumerate(robot.joint_names):
        actuator = arm_only.actuator(name)
        assert actuator.trnid[0] == arm_only.joint(name).id, name
        effort = robot.limits.effort[i]
        np.testing.assert_array_equal(actuator.ctrlrange, [-effort, effort], err_msg=name)
        np.testing.assert_array_equal(actuator.forcerange, [-effort, effort], err_msg=name)
        assert actuator.ctrllimited[0] == 1 and actuator.forcelimited[0] == 1
        assert actuator.gainprm[0] == 1.0 and not np.any(actuator.biasprm[:3]), name


def test_motor_applies_its_clamped_control_as_joint_force(robot, arm_only):
    """A motor applies ctrl clamped to ±effort directly as generalized force on its joint."""
    data = mujoco.MjData(arm_only)
    data.ctrl[:] = 1000.0  # beyond every effort limit
    data.ctrl[arm_only.actuator("joint3").id] = -7.5
    mujoco.mj_forward(arm_only, data)
    for i, name in enumerate(robot.joint_names):
        expected = -7.5 if name == "joint3" else robot.limits.effort[i]
        dof = arm_only.joint(name).dofadr[0]
        assert data.qfrc_actuator[dof] == pytest.approx(expected), name


def test_position_interface_gets_a_position_servo(robot):
    """A joint on the position interface gets a servo (kp, kv) whose ctrlrange is the joint
    range and forcerange ±effort; its force is kp (target − q) − kv v."""
    gains = ServoGains(kp=250.0, kv=12.0)
    model = build_scene(
        bundled_description().urdf,
        command_interfaces={"joint4": "position", "left_finger_joint": "position"},
        servo_gains=gains,
        with_objects=False,
    ).compile()
    for name in ("joint4", "left_finger_joint"):
        i = robot.q_index(name)
        actuator = model.actuator(name)
        np.testing.assert_array_equal(
            actuator.ctrlrange, [robot.limits.lower[i], robot.limits.upper[i]]
        )
        effort = robot.limits.effort[i]
        np.testing.assert_array_equal(actuator.forcerange, [-effort, effort])
    # The other joints keep their motors.
    np.testing.assert_array_equal(model.actuator("joint3").ctrlrange, [-110.0, 110.0])
    data = mujoco.MjData(model)
    data.qpos[model.joint("joint4").qposadr[0]] = -0.3
    data.qvel[model.joint("joint4").dofadr[0]] = 0.2
    data.ctrl[model.actuator("joint4").id] = -0.25
    mujoco.mj_forward(model, data)
    expected = gains.kp * (-0.25 - -0.3) - gains.kv * 0.2
    assert data.actuator_force[model.actuator("joint4").id] == pytest.approx(expected)
    # A target far off saturates at the URDF effort.
    data.ctrl[model.actuator("joint4").id] = 2.0
    mujoco.mj_forward(model, data)
    assert data.actuator_force[model.actuator("joint4").id] == pytest.approx(110.0)


def test_full_scene_has_table_and_cube_clear_of_arm_dofs(robot, full_scene):
    """The default scene adds a free cube (7 qpos) and keeps one actuator per arm joint."""
    assert full_scene.nq == robot.nq + 7
    assert full_scene.nu == robot.nv
    assert full_scene.body("cube").mass[0] == pytest.approx(0.1)
    data = mujoco.MjData(full_scene)
    mujoco.mj_forward(full_scene, data)
    cube_z = data.xpos[full_scene.body("cube").id][2]
    assert cube_z == pytest.approx(0.025)  # resting on the table top (z = 0)


# --- meshes ------------------------------------------------------------------------------------
def _with_mesh(
    filename: str, link: str = "link3", kind: str = "collision", visuals: bool = False
) -> str:
    """The bundled URDF with ``link``'s ``kind`` geometry replaced by the mesh ``filename``;
    ``visuals``: with ``<mujoco><compiler discardvisual="false"/>`` (visual geometry kept)."""
    root = ET.fromstring(bundled_description().urdf)
    (element,) = [e for e in root.findall("link") if e.get("name") == link]
    geometry = element.find(f"{kind}/geometry")
    assert geometry is not None
    geometry.clear()
    ET.SubElement(geometry, "mesh", filename=filename)
    if visuals:
        compiler = ET.SubElement(ET.SubElement(root, "mujoco"), "compiler")
        compiler.set("discardvisual", "false")
    return ET.tostring(root, encoding="unicode")


def _write_box_stl(path: Path, half: tuple[float, float, float]) -> None:
    """A binary STL of the box ±half [m] (12 triangles, outward normals)."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
    faces = [
        (0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
        (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3),
    ]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        file.write(b"\0" * 80 + struct.pack("<I", len(faces)))
        for face in faces:
            a, b, c = corners[list(face)]
            normal = np.cross(b - a, c - a)
            normal /= np.linalg.norm(normal)
            file.write(struct.pack("<12fH", *normal, *a, *b, *c, 0))


def test_mesh_is_found_beside_the_urdf_on_ros_package_path_and_by_file_uri(tmp_path, monkeypatch):
    """A collision mesh referenced relative to the URDF's folder, as package://PKG/... (PKG on
    ROS_PACKAGE_PATH) or as a file:// URI becomes a massless mesh geom on its link, with that
    file's size (bounding radius of the 0.03 × 0.04 × 0.05 half-size box)."""
    mesh = tmp_path / "my_pkg" / "meshes" / "box.stl"
    half = (0.03, 0.04, 0.05)
    _write_box_stl(mesh, half)
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path))
    for filename, folder in (
        ("my_pkg/meshes/box.stl", tmp_path),
        ("package://my_pkg/meshes/box.stl", None),
        (f"file://{mesh}", None),
    ):
        model = compile_scene(
            build_scene(_with_mesh(filename), with_objects=False, urdf_directory=folder)
        )
        (geom,) = [g for g in range(model.ngeom) if model.geom_bodyid[g] == model.body("link3").id]
        assert model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_MESH, filename
        assert model.geom_rbound[geom] == pytest.approx(np.linalg.norm(half), rel=1e-6)
        assert model.body("link3").mass[0] == pytest.approx(3.0)  # the <inertial>, not the mesh


def test_package_mesh_is_found_in_an_installed_distribution(monkeypatch):
    """The Panda of the installed example-robot-data, given as text (no URDF folder) with no
    ROS_PACKAGE_PATH: its package://example-robot-data/... meshes are found in the Python
    environment's cmeel.prefix/share; the 9 collision STLs are read, the .dae visuals not."""
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    urdf = panda_urdf_path().read_text()
    model = compile_scene(build_scene(urdf, with_objects=False))
    assert model.nmesh == 9


def test_missing_mesh_is_rejected_naming_it_and_the_places_looked_in(tmp_path, monkeypatch):
    """A mesh found nowhere raises DescriptionError naming the reference and every place
    looked in: ROS_PACKAGE_PATH, beside the URDF, the installed distributions."""
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "ros"))
    filename = "package://ghost_pkg/meshes/link3.stl"
    with pytest.raises(DescriptionError) as info:
        build_scene(_with_mesh(filename), urdf_directory=tmp_path / "robot" / "urdf")
    message = str(info.value)
    assert f"mesh '{filename}' not found" in message
    assert str(tmp_path / "ros" / "ghost_pkg" / "meshes" / "link3.stl") in message
    assert str(tmp_path / "robot" / "urdf" / "ghost_pkg" / "meshes" / "link3.stl") in message
    assert "cmeel.prefix" in message


def test_collision_mesh_in_a_format_neither_read_nor_converted_is_rejected():
    """A collision mesh MuJoCo cannot decode and the stack does not convert (.ply) raises
    DescriptionError naming the link and the file (the robot would otherwise lose a collision
    shape silently)."""
    with pytest.raises(DescriptionError, match=r"link 'link3'.*'link3\.ply'.*cannot read"):
        build_scene(_with_mesh("link3.ply"))


def test_collada_collision_meshes_are_converted_where_pinocchio_puts_them(
    tmp_path, monkeypatch
) -> None:
    """The Kinova Jaco 2 of example-robot-data (every collision mesh Collada): the scene
    compiles, and at random configurations each link's collision mesh in MuJoCo's world spans
    the same box (its vertices' world bounds, 0.1 mm) as Pinocchio's collision model of the
    same URDF puts the same file (pin.buildGeomFromUrdfString, its own mesh reader, its own
    placements); the conversion is cached (a second build converts nothing)."""
    import pinocchio as pin

    from ct_controllers.bench.robots import example_robot_path
    from ct_controllers.hardware import mesh_conversion

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = example_robot_path("robots/kinova_description/robots/kinova.urdf")
    urdf = path.read_text()
    model = compile_scene(build_scene(urdf, urdf_directory=path.parent, with_objects=False))
    cached = sorted(mesh_conversion.cache_folder().iterdir())
    assert cached and all(file.suffix == ".stl" for file in cached)
    build_scene(urdf, urdf_directory=path.parent, with_objects=False)
    assert sorted(mesh_conversion.cache_folder().iterdir()) == cached
    robot = pin.buildModelFromXML(urdf)
    geometry = pin.buildGeomFromUrdfString(
        robot, urdf, pin.GeometryType.COLLISION, package_dirs=[str(path.parents[4])]
    )
    robot_data, geometry_data = robot.createData(), geometry.createData()
    data = mujoco.MjData(model)
    pin.seed(3)  # pin.randomConfiguration: the same draws every run
    for _ in range(3):
        q = pin.randomConfiguration(robot)
        pin.updateGeometryPlacements(robot, robot_data, geometry, geometry_data, q)
        for j in range(1, robot.njoints):  # MuJoCo's joints by name, from Pinocchio's q
            joint = robot.joints[j]
            address = model.joint(robot.names[j]).qposadr[0]
            if joint.nq == 2:  # a continuous joint: (cos θ, sin θ)
                data.qpos[address] = np.arctan2(q[joint.idx_q + 1], q[joint.idx_q])
            else:
                data.qpos[address] = q[joint.idx_q]
        mujoco.mj_kinematics(model, data)
        ours = []  # every mesh geom's vertices in the world (fused links: on their parent)
        for g in range(model.ngeom):
            if model.geom_type[g] != mujoco.mjtGeom.mjGEOM_MESH:
                continue
            mesh_id = model.geom_dataid[g]
            start, count = model.mesh_vertadr[mesh_id], model.mesh_vertnum[mesh_id]
            vertices = model.mesh_vert[start : start + count]
            ours.append(vertices @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g])
        assert len(ours) == len(geometry.geometryObjects)
        for index, item in enumerate(geometry.geometryObjects):
            placement = geometry_data.oMg[index]
            mesh = item.geometry
            local = np.array([mesh.vertex(i) for i in range(mesh.num_vertices)])
            theirs = local @ placement.rotation.T + placement.translation
            assert any(
                np.allclose(v.min(axis=0), theirs.min(axis=0), atol=1e-4)
                and np.allclose(v.max(axis=0), theirs.max(axis=0), atol=1e-4)
                for v in ours
            ), item.name


def test_visual_meshes_mujoco_cannot_read_are_skipped_with_one_warning(tmp_path, caplog):
    """With visual geometry kept (discardvisual="false"), .dae visual meshes are left out with
    one warning naming them, a readable visual STL is kept as a non-colliding geom, and the
    scene compiles."""
    _write_box_stl(tmp_path / "box.stl", (0.01, 0.01, 0.01))
    root = ET.fromstring(_with_mesh("link3.dae", kind="visual", visuals=True))
    for name, filename in (("link4", "link4.dae"), ("link5", "box.stl")):
        (link,) = [e for e in root.findall("link") if e.get("name") == name]
        geometry = link.find("visual/geometry")
        assert geometry is not None
        geometry.clear()
        ET.SubElement(geometry, "mesh", filename=filename)
    with caplog.at_level(logging.WARNING, logger="ct_controllers"):
        model = compile_scene(
            build_scene(ET.tostring(root, encoding="unicode"), urdf_directory=tmp_path)
        )
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "link3.dae" in record.getMessage() and "link4.dae" in record.getMessage()
    (mesh_geom,) = [
        g for g in range(model.ngeom) if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH
    ]
    assert model.geom_bodyid[mesh_geom] == model.body("link5").id
    assert model.geom_contype[mesh_geom] == 0 and model.geom_conaffinity[mesh_geom] == 0


def test_an_inertia_mujoco_refuses_is_mended_to_a_physical_one_with_one_warning(caplog):
    """A link whose URDF inertia is not positive definite (Tiago's antennas: |ixy| above the
    diagonal) or breaks the triangle inequality (A + B < C): the scene compiles, with one warning
    naming both links; MuJoCo's principal moments of each are positive and each at most the sum
    of the other two; a link whose inertia was physical keeps it exactly (MuJoCo's moments of
    the bundled arm's other links are those of the unmended scene)."""
    root = ET.fromstring(bundled_description().urdf)
    inertias = {
        "link5": {"ixx": "2e-8", "iyy": "3e-8", "izz": "4e-8", "ixy": "6e-8"},
        "link6": {"ixx": "1e-4", "iyy": "1e-4", "izz": "5e-4", "ixy": "0"},
    }
    for link in root.findall("link"):
        if link.get("name") in inertias:
            inertia = link.find("inertial/inertia")
            assert inertia is not None
            for key, value in inertias[link.get("name", "")].items():
                inertia.set(key, value)
    with caplog.at_level(logging.WARNING, logger="ct_controllers"):
        model = compile_scene(build_scene(ET.tostring(root, encoding="unicode")))
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "link5, link6" in record.getMessage()
    for name in inertias:
        moments = np.sort(model.body(name).inertia)
        assert moments[0] > 0 and moments[2] <= moments[0] + moments[1] * (1 + 1e-9), name
    plain = compile_scene(build_scene(bundled_description().urdf))
    for body in range(1, model.nbody):
        if model.body(body).name not in inertias:
            np.testing.assert_array_equal(model.body_inertia[body], plain.body_inertia[body])


# --- rejected descriptions -------------------------------------------------------------------
def test_massless_moving_link_is_rejected_naming_it():
    """A link on a movable joint with zero mass and inertia (MuJoCo cannot simulate it; fused
    massless links on fixed joints are fine) raises DescriptionError naming the link, on one
    line."""
    root = ET.fromstring(bundled_description().urdf)
    (finger,) = [e for e in root.findall("link") if e.get("name") == "left_finger"]
    inertial = finger.find("inertial")
    assert inertial is not None
    inertial.find("mass").set("value", "0")  # type: ignore[union-attr]
    for key in ("ixx", "iyy", "izz"):
        inertial.find("inertia").set(key, "0")  # type: ignore[union-attr]
    with pytest.raises(DescriptionError, match=r"moving bodies.*'left_finger'") as info:
        compile_scene(build_scene(ET.tostring(root, encoding="unicode")))
    assert "\n" not in str(info.value)


def test_interface_for_unknown_joint_is_rejected_naming_it():
    """A command interface for a joint the URDF lacks raises DescriptionError naming it."""
    with pytest.raises(DescriptionError, match="elbow_ghost"):
        build_scene(bundled_description().urdf, command_interfaces={"elbow_ghost": "effort"})


def test_unknown_interface_kind_is_rejected_naming_it():
    """An interface other than effort/position raises DescriptionError naming joint and kind."""
    with pytest.raises(DescriptionError, match=r"'joint2'.*'velocity'"):
        build_scene(bundled_description().urdf, command_interfaces={"joint2": "velocity"})


def test_missing_tcp_link_is_rejected():
    """A TCP link that is not in the URDF raises DescriptionError naming it."""
    with pytest.raises(DescriptionError, match="tool_ghost"):
        build_scene(bundled_description().urdf, tcp_frame="tool_ghost")


def test_urdf_that_does_not_parse_or_mimics_a_ghost_is_rejected():
    """Text that is not XML, and a <mimic> naming no movable joint, raise DescriptionError
    saying so (the second naming both joints)."""
    with pytest.raises(DescriptionError, match="not valid XML"):
        build_scene("<robot><link name='a'></robot>")
    urdf = bundled_description().urdf.replace(
        '<joint name="right_finger_joint" type="prismatic">',
        '<joint name="right_finger_joint" type="prismatic"><mimic joint="thumb_joint"/>',
    )
    assert "thumb_joint" in urdf
    with pytest.raises(DescriptionError, match=r"'right_finger_joint' mimics 'thumb_joint'"):
        build_scene(urdf)


def test_the_root_and_the_links_moving_on_it_do_not_collide() -> None:
    """The Kinova's base and shoulder meshes touch at their joint (MuJoCo's own distance
    between them ≤ 0.1 mm), and MuJoCo does not filter a body against a world-welded parent:
    the scene excludes that pair, so at rest no contact joins them (it held the first joint)."""
    from ct_controllers.bench.robots import example_robot_path

    path = example_robot_path("robots/kinova_description/robots/kinova.urdf")
    model = compile_scene(build_scene(path.read_text(), urdf_directory=path.parent))
    data = mujoco.MjData(model)
    data.qpos[model.joint("j2s6s200_joint_1").qposadr[0]] = -0.68  # where it touched
    mujoco.mj_forward(model, data)
    base, shoulder = model.body("base").id, model.body("j2s6s200_link_1").id
    geoms = [
        [g for g in range(model.ngeom) if model.geom_bodyid[g] == body] for body in (base, shoulder)
    ]
    distance = min(
        mujoco.mj_geomDistance(model, data, a, b, 0.01, None) for a in geoms[0] for b in geoms[1]
    )
    assert distance <= 1e-4, distance
    pairs = {
        frozenset((model.geom_bodyid[c.geom1], model.geom_bodyid[c.geom2]))
        for c in data.contact[: data.ncon]
    }
    assert frozenset((base, shoulder)) not in pairs


def test_links_moving_on_a_base_fused_into_a_root_named_world_do_not_collide() -> None:
    """The UR3 with its gripper (example-robot-data): the root link is ``world`` (MuJoCo's world
    body), the base is fused into it, and the shoulder's mesh overlaps the base's. The pair is
    excluded as for any other root: at home no contact joins them, and the shoulder turns
    under a small torque (it stood still, held by that contact, before)."""
    from ct_controllers.bench.robots import example_robot_path

    path = example_robot_path("robots/ur_description/urdf/ur3_gripper.urdf")
    model = compile_scene(
        build_scene(path.read_text(), urdf_directory=path.parent, with_objects=False)
    )
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    shoulder = model.body("shoulder_link").id
    touching = [
        c
        for c in data.contact[: data.ncon]
        if shoulder in (model.geom_bodyid[c.geom1], model.geom_bodyid[c.geom2])
    ]
    assert not touching
    geoms = [
        [g for g in range(model.ngeom) if model.geom_bodyid[g] == body] for body in (0, shoulder)
    ]
    distance = min(
        mujoco.mj_geomDistance(model, data, a, b, 0.01, None) for a in geoms[0] for b in geoms[1]
    )
    assert distance < 0, distance  # the meshes do overlap: only the exclusion keeps them apart


def test_robot_bodies_in_contact_at_rest_are_excluded_and_no_others() -> None:
    """Baxter's right arm (the rest locked): its shoulder and elbow meshes overlap in every
    configuration (its contact flung the simulated arm at 3.9 rad/s). At rest (every joint at 0
    or its nearest limit) the scene has no contact left between robot bodies; every pair of
    robot bodies whose shapes MuJoCo's own distance puts inside each other at rest, the body and
    its parent aside (MuJoCo filters those), is excluded; and no pair apart from those and the
    root's (world ↔ root, root ↔ the links moving on it) is."""
    from ct_controllers.bench.robots import example_robot_path
    from ct_controllers.model.locked_joints import lock_joints

    path = example_robot_path("robots/baxter_description/urdf/baxter.urdf")
    urdf = path.read_text()
    root = ET.fromstring(urdf)
    others = {
        j.get("name", ""): 0.0
        for j in root.findall("joint")
        if j.get("type") != "fixed"
        and not j.get("name", "").startswith(("right_", "r_gripper"))
        and j.find("mimic") is None
    }
    spec = build_scene(lock_joints(urdf, others), urdf_directory=path.parent, with_objects=False)
    model = compile_scene(spec)
    data = at_rest(model)
    assert data.ncon == 0, [
        (model.body(model.geom_bodyid[c.geom1]).name, model.body(model.geom_bodyid[c.geom2]).name)
        for c in data.contact[: data.ncon]
    ]
    excluded = {frozenset((e.bodyname1, e.bodyname2)) for e in spec.excludes}
    overlapping = set()
    for a in range(model.ngeom):
        for b in range(a + 1, model.ngeom):
            first, second = int(model.geom_bodyid[a]), int(model.geom_bodyid[b])
            if first == second or 0 in (first, second):
                continue
            if (
                first in (model.body_parentid[second], second)
                or second == model.body_parentid[first]
            ):
                continue
            if mujoco.mj_geomDistance(model, data, a, b, 0.01, None) < 0:
                overlapping.add(frozenset((model.body(first).name, model.body(second).name)))
    assert frozenset(("right_lower_shoulder", "right_lower_elbow")) in overlapping
    assert overlapping <= excluded
    moving_on_root = {
        frozenset(("base", model.body(b).name))
        for b in range(1, model.nbody)
        if model.body_parentid[b] == model.body("base").id
    }
    assert excluded - overlapping - moving_on_root == {frozenset(("world", "base"))}


def test_a_mimic_follower_whose_own_range_disagrees_with_its_master_stays_on_it() -> None:
    """The PR2's gripper: a fingertip follows the finger with multiplier −1 but its URDF range
    is [0, 0.548] rad, so on its master's range it lies outside its own. The follower's range
    is not simulated (its master's bounds it): from the master at 0.274 rad and every follower
    on its equality, 25 steps without gravity or effort leave the master still (it flew off at
    2.8 rad/s when the follower's limit fought the equality) and each follower on its map."""
    from ct_controllers.bench.robots import example_robot_path

    path = example_robot_path("robots/pr2_description/urdf/pr2.urdf")
    urdf = path.read_text()
    model = compile_scene(build_scene(urdf, urdf_directory=path.parent, with_objects=False))
    model.opt.gravity[:] = 0.0
    data = mujoco.MjData(model)
    master = "r_gripper_l_finger_joint"
    maps = {
        j.get("name", ""): float(j.find("mimic").get("multiplier", "1"))  # type: ignore[union-attr]
        for j in ET.fromstring(urdf).findall("joint")
        if j.find("mimic") is not None and j.find("mimic").get("joint") == master  # type: ignore[union-attr]
    }
    assert -1.0 in maps.values()  # the fingertip whose range disagrees
    data.qpos[model.joint(master).qposadr[0]] = 0.274
    for follower, multiplier in maps.items():
        data.qpos[model.joint(follower).qposadr[0]] = multiplier * 0.274
    for _ in range(25):
        mujoco.mj_step(model, data)
    assert abs(data.qvel[model.joint(master).dofadr[0]]) < 0.05
    for follower, multiplier in maps.items():
        assert data.qpos[model.joint(follower).qposadr[0]] == pytest.approx(
            multiplier * data.qpos[model.joint(master).qposadr[0]], abs=1e-3
        )
