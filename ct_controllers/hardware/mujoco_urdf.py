"""A URDF made ready for MuJoCo's own URDF import (``mujoco.MjSpec.from_string``).

MuJoCo reads URDF itself: links become bodies at their joint origins with the URDF inertial,
fixed links (and the massless ones on fixed joints) are fused into their parent
(``fusestatic``), continuous joints become hinges without range, ``<mimic>`` becomes a joint
equality constraint (q_follower = multiplier · q_master + offset), ``<dynamics damping
friction>`` becomes joint damping and frictionloss, and compiler options come from a
``<mujoco><compiler .../></mujoco>`` element inside ``<robot>``. What it does not do is find
files the ROS way; this module does that before handing the text over (and reads the joints,
mimic relations and fixed-joint frames the scene needs from the original):

- every mesh MuJoCo will read gets an absolute path: ``package://PKG/REST`` is looked up, in
  order, in the ament index (``AMENT_PREFIX_PATH``), on ``ROS_PACKAGE_PATH`` (an entry named
  PKG, or PKG directly in an entry), beside the URDF (a folder above it named PKG, or holding
  PKG), and in installed distributions that ship ROS packages inside a Python environment
  (``site-packages/cmeel.prefix/share/PKG``, e.g. example-robot-data); ``file://`` and plain
  paths are taken relative to the URDF's folder (and its ``<compiler meshdir>``);
- a mesh that cannot be found is a :class:`DescriptionError` naming it and the places looked in;
- visual geometry: kept only if the URDF's own ``<mujoco><compiler discardvisual="false"/>``
  asks for it (MuJoCo's URDF default discards it); a kept visual mesh in a format MuJoCo cannot
  read (``.dae``, ...) is left out, all of them with one warning. A Collada (``.dae``) collision
  mesh is converted to STL as Pinocchio's collision model reads it
  (:mod:`~ct_controllers.hardware.mesh_conversion`); a collision mesh in any other format MuJoCo
  cannot read is an error (the robot would silently lose a collision shape);
- a link's ``<inertia>`` that is no physical inertia (not positive definite, or a principal
  moment above the sum of the other two — vendors ship gram-light antennas and covers like that)
  is mended to the nearest physical one with one warning naming the links: MuJoCo refuses to
  compile it, Pinocchio takes it as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

from ct_controllers.hardware.mesh_conversion import CONVERTED_SUFFIXES, stl_of
from ct_controllers.model.description import DescriptionError

LOG = logging.getLogger("ct_controllers")

# The mesh formats MuJoCo 4 decodes itself.
READABLE_MESH_SUFFIXES = (".stl", ".obj", ".msh")
MOVABLE = ("revolute", "continuous", "prismatic")


@dataclass(frozen=True)
class Mimic:
    """A URDF ``<mimic>``: q_follower = multiplier · q_master + offset [rad | m]."""

    master: str
    multiplier: float
    offset: float


@dataclass(frozen=True)
class UrdfJoint:
    """A movable URDF joint as the scene needs it: type, child link, limits (lower/upper [rad |
    m], None for a continuous joint or no ``<limit>``; effort [N·m | N], 0 when not given),
    parent link."""

    name: str
    kind: str  # revolute | continuous | prismatic
    child: str
    lower: float | None
    upper: float | None
    effort: float
    parent: str = ""  # the parent link


@dataclass(frozen=True)
class PreparedUrdf:
    """The URDF text MuJoCo's import reads, and what the scene needs from the original.

    ``fixed_parents``: link -> (parent link, joint origin xyz [m], rpy [rad]) for links hung on
    fixed joints (to place a site at a frame that fusing removes, in a scene MuJoCo did not
    build from this URDF)."""

    xml: str
    root_link: str
    joints: Mapping[str, UrdfJoint]  # movable joints, by name, in file order
    mimic: Mapping[str, Mimic]  # follower joint -> its mimic relation
    links: tuple[str, ...]
    fixed_parents: Mapping[str, tuple[str, tuple[float, ...], tuple[float, ...]]]
    skipped_visuals: tuple[str, ...]  # visual meshes left out (format MuJoCo cannot read)


def _floats(text: str | None, default: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in (text or default).split())
    except ValueError as exc:
        raise DescriptionError(f"not a list of numbers: {text!r}") from exc


def _number(element: ET.Element, attribute: str, default: float | None) -> float | None:
    text = element.get(attribute)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError as exc:
        raise DescriptionError(f"<{element.tag} {attribute}={text!r}>: not a number") from exc


_INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def _mend_inertia(inertia: ET.Element) -> bool:
    """Make a URDF ``<inertia>`` [kg·m²] one MuJoCo accepts, in place; True where it changed.

    MuJoCo requires the principal moments λ (eigenvalues of the inertia matrix I) positive and
    each at most the sum of the other two (a physical body); vendors' URDFs carry links (often
    gram-light antennas and covers) whose matrix is neither. The mended matrix keeps I's
    principal axes R: λ raised to at least 10⁻³ of the largest |λ| (and 10⁻¹²), then a moment
    above the sum of the others raises those two by half the excess (and 10⁻⁶ of it); I' =
    R diag(λ') Rᵀ. A physical inertia (within 10⁻⁹ of the largest moment) or an all-zero one
    is left alone."""
    try:
        values = {key: float(inertia.get(key, "0")) for key in _INERTIA_KEYS}
    except ValueError:
        return False  # not a number: MuJoCo's own message says which
    matrix = np.array(
        [
            [values["ixx"], values["ixy"], values["ixz"]],
            [values["ixy"], values["iyy"], values["iyz"]],
            [values["ixz"], values["iyz"], values["izz"]],
        ]
    )
    moments, axes = np.linalg.eigh(matrix)
    largest = float(np.max(np.abs(moments)))
    tolerance = 1e-9 * largest
    if largest == 0.0 or (
        moments.min() > 0.0 and moments[2] <= moments[0] + moments[1] + tolerance
    ):
        return False  # no inertia (a massless link, fused), or a physical one: kept as it is
    mended = np.maximum(moments, max(1e-3 * largest, 1e-12))
    for i in range(3):
        others = [j for j in range(3) if j != i]
        # (10⁻⁶ of it beyond equality: MuJoCo checks its own eigendecomposition of I')
        excess = mended[i] * (1.0 + 1e-6) - mended[others].sum()
        if excess > 0:
            mended[others] += 0.5 * excess
    fixed = axes @ np.diag(mended) @ axes.T
    for key, (row, column) in zip(
        _INERTIA_KEYS, ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)), strict=True
    ):
        inertia.set(key, repr(float(fixed[row, column])))
    return True


def _site_package_dirs() -> list[Path]:
    return [Path(entry) for entry in sys.path if entry.endswith("site-packages")]


def mesh_candidates(
    filename: str, urdf_directory: Path | None, relative_to: Path | None = None
) -> list[Path]:
    """Every path ``filename`` (a URDF mesh reference) may mean, in lookup order; a relative
    path is taken from ``relative_to`` (default: the URDF's folder, else the working
    directory)."""
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://") :].partition("/")
        candidates: list[Path] = []
        if os.environ.get("AMENT_PREFIX_PATH"):
            with contextlib.suppress(PackageNotFoundError, ValueError):
                candidates.append(Path(get_package_share_directory(package)) / rest)
        for entry in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep):
            if entry:
                root = Path(entry)
                candidates.append(root / rest if root.name == package else root / package / rest)
        if urdf_directory is not None:
            for folder in (urdf_directory, *urdf_directory.parents):
                candidates.append(
                    folder / rest if folder.name == package else folder / package / rest
                )
        for site in _site_package_dirs():
            candidates.append(site / "cmeel.prefix" / "share" / package / rest)
        return candidates
    path = Path(filename[len("file://") :] if filename.startswith("file://") else filename)
    if path.is_absolute():
        return [path]
    return [(relative_to or urdf_directory or Path.cwd()) / path]


def resolve_mesh(
    filename: str, urdf_directory: Path | None, relative_to: Path | None = None
) -> Path:
    """The file a URDF mesh reference names (see :func:`mesh_candidates`); DescriptionError
    naming it and every place looked in when none exists."""
    candidates = mesh_candidates(filename, urdf_directory, relative_to)
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    places = ", ".join(dict.fromkeys(str(c) for c in candidates)) or "nowhere"
    hint = "" if urdf_directory is not None else " (no URDF folder known: the URDF came as text)"
    raise DescriptionError(f"mesh '{filename}' not found; looked in: {places}{hint}")


def _compiler(root: ET.Element) -> ET.Element:
    """The ``<mujoco><compiler>`` element of the URDF, made if absent."""
    mujoco_element = root.find("mujoco")
    if mujoco_element is None:
        mujoco_element = ET.Element("mujoco")
        root.insert(0, mujoco_element)
    compiler = mujoco_element.find("compiler")
    if compiler is None:
        compiler = ET.SubElement(mujoco_element, "compiler")
    return compiler


def prepare_urdf(
    urdf: str, urdf_directory: str | Path | None = None, meshes: bool = True
) -> PreparedUrdf:
    """The URDF text for MuJoCo's import (see the module docstring) and its joints, mimic
    relations and links. ``urdf_directory``: the folder of the URDF file (where relative and
    ``package://`` mesh references are also looked for); None for a URDF given as text.
    ``meshes`` False: the geometry is left out (the kinematics and joints only, e.g. to match
    an MJCF that has its own), and no mesh is looked for."""
    folder = None if urdf_directory is None else Path(urdf_directory).resolve()
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise DescriptionError(f"the URDF is not valid XML: {exc}") from exc
    if root.tag != "robot":
        raise DescriptionError(f"not a URDF: the root element is <{root.tag}>, not <robot>")
    compiler = _compiler(root)
    keep_visual = compiler.get("discardvisual", "true").lower() == "false"
    compiler.set("strippath", "false")  # the mesh paths below are absolute: keep them whole
    meshdir = compiler.get("meshdir")
    mesh_folder = folder / meshdir if folder is not None and meshdir else folder

    links = tuple(link.get("name", "") for link in root.findall("link"))
    skipped: list[str] = []
    for link in root.findall("link"):
        for kind in ("collision", "visual"):
            for element in link.findall(kind):
                if not meshes or (kind == "visual" and not keep_visual):
                    link.remove(element)  # MuJoCo would discard it; its files are not needed
                    continue
                mesh = element.find("geometry/mesh")
                if mesh is None:
                    continue
                filename = mesh.get("filename", "")
                suffix = Path(filename).suffix.lower()
                if suffix not in READABLE_MESH_SUFFIXES:
                    if kind == "visual":
                        skipped.append(filename)
                        link.remove(element)
                        continue
                    if suffix not in CONVERTED_SUFFIXES:
                        raise DescriptionError(
                            f"link '{link.get('name')}': collision mesh '{filename}' is in a "
                            "format MuJoCo cannot read (it reads "
                            f"{', '.join(READABLE_MESH_SUFFIXES)}, and "
                            f"{', '.join(CONVERTED_SUFFIXES)} converted); convert it, e.g. to STL"
                        )
                    found = resolve_mesh(filename, folder, mesh_folder)
                    mesh.set("filename", str(stl_of(found)))  # as Pinocchio's collision reads it
                    continue
                mesh.set("filename", str(resolve_mesh(filename, folder, mesh_folder)))
    if skipped:
        LOG.warning(
            "MuJoCo scene: %d visual mesh(es) left out, in a format MuJoCo cannot read "
            "(it reads %s): %s",
            len(skipped),
            ", ".join(READABLE_MESH_SUFFIXES),
            ", ".join(sorted(set(skipped))),
        )

    mended = [
        link.get("name", "")
        for link in root.findall("link")
        if (inertia := link.find("inertial/inertia")) is not None and _mend_inertia(inertia)
    ]
    if mended:
        LOG.warning(
            "MuJoCo scene: the inertia of %s is no physical inertia (not positive definite, or "
            "a principal moment above the sum of the other two): MuJoCo refuses it, so it "
            "simulates the nearest one that is (Pinocchio keeps the URDF's)",
            ", ".join(mended),
        )

    joints: dict[str, UrdfJoint] = {}
    mimic: dict[str, Mimic] = {}
    fixed_parents: dict[str, tuple[str, tuple[float, ...], tuple[float, ...]]] = {}
    children: set[str] = set()
    for joint in root.findall("joint"):
        name, kind = joint.get("name", ""), joint.get("type", "")
        parent, child = joint.find("parent"), joint.find("child")
        if parent is None or child is None:
            raise DescriptionError(f"joint '{name}' lacks <parent> or <child>")
        child_link = child.get("link", "")
        children.add(child_link)
        if kind == "fixed":
            origin = joint.find("origin")
            fixed_parents[child_link] = (
                parent.get("link", ""),
                _floats(None if origin is None else origin.get("xyz"), "0 0 0"),
                _floats(None if origin is None else origin.get("rpy"), "0 0 0"),
            )
            continue
        if kind not in MOVABLE:
            raise DescriptionError(f"joint '{name}': type '{kind}' is not supported")
        limit = joint.find("limit")
        lower = upper = None
        effort = 0.0
        if limit is not None:
            effort = _number(limit, "effort", 0.0) or 0.0
            if kind != "continuous":  # a continuous joint has no range, whatever <limit> says
                lower, upper = _number(limit, "lower", 0.0), _number(limit, "upper", 0.0)
        joints[name] = UrdfJoint(
            name, kind, child_link, lower, upper, effort, parent.get("link", "")
        )
        coupling = joint.find("mimic")
        if coupling is not None:
            mimic[name] = Mimic(
                coupling.get("joint", ""),
                _number(coupling, "multiplier", 1.0) or 0.0,
                _number(coupling, "offset", 0.0) or 0.0,
            )
    for follower, relation in mimic.items():
        if relation.master not in joints:
            raise DescriptionError(
                f"joint '{follower}' mimics '{relation.master}', which is not a movable joint"
            )
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise DescriptionError(f"the URDF must have one root link, found: {roots}")
    return PreparedUrdf(
        xml=ET.tostring(root, encoding="unicode"),
        root_link=roots[0],
        joints=joints,
        mimic=mimic,
        links=links,
        fixed_parents=fixed_parents,
        skipped_visuals=tuple(skipped),
    )
