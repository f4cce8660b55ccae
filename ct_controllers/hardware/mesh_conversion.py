"""Collision meshes in formats MuJoCo does not decode (Collada ``.dae``, as the Kinova arms ship
all of theirs), converted to binary STL for MuJoCo's URDF import.

The mesh is read the way Pinocchio's own collision model reads it: coal's ``MeshLoader``
(assimp underneath, with the file's units and node transforms applied), so MuJoCo collides with
the triangles Pinocchio's geometry model has. The STL goes to a cache folder
(``$XDG_CACHE_HOME/ct_controllers/meshes``, else ``~/.cache/...``), named by a hash of the
source file's bytes: converted once, found again on the next start, never stale.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ct_controllers.model.description import DescriptionError

CONVERTED_SUFFIXES = (".dae",)  # what coal's assimp reads that MuJoCo does not (besides its own)


def cache_folder() -> Path:
    """Where converted meshes are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ct_controllers" / "meshes"


def stl_of(source: Path) -> Path:
    """A binary STL of ``source`` (a mesh file coal can read), converted on first use.
    DescriptionError naming the file if it cannot be read or has no triangles."""
    data = source.read_bytes()
    target = cache_folder() / f"{source.stem}-{hashlib.sha256(data).hexdigest()[:16]}.stl"
    if target.is_file():
        return target
    vertices, triangles = _triangles(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.part")  # written whole, then renamed
    partial.write_bytes(_binary_stl(vertices, triangles))
    partial.replace(target)
    return target


def _triangles(source: Path) -> tuple[np.ndarray, np.ndarray]:
    """(vertices n×3 [the file's length unit, scaled to metres by assimp], triangles m×3)."""
    import coal  # Pinocchio's collision library: imported only when a mesh needs it

    try:
        mesh = coal.MeshLoader().load(str(source), np.ones(3))
    except Exception as exc:  # assimp's errors come as RuntimeError or ValueError
        raise DescriptionError(f"mesh '{source}': cannot be read: {exc}") from None
    vertices = np.array([mesh.vertex(i) for i in range(mesh.num_vertices)], dtype=np.float64)
    triangles = np.array(
        [[t[0], t[1], t[2]] for t in (mesh.tri_indices(i) for i in range(mesh.num_tris))],
        dtype=np.int64,
    )
    if triangles.size == 0:
        raise DescriptionError(f"mesh '{source}': no triangles")
    return vertices, triangles


def _binary_stl(vertices: np.ndarray, triangles: np.ndarray) -> bytes:
    """Binary STL: an 80-byte header, the triangle count (uint32), then per triangle its unit
    normal and three vertices (12 float32) and a zero attribute (uint16), little-endian."""
    corners = vertices[triangles]  # m×3×3
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    lengths = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, lengths, out=np.zeros_like(normals), where=lengths > 0.0)
    record = np.dtype([("values", "<f4", (12,)), ("attribute", "<u2")])
    rows = np.zeros(len(triangles), dtype=record)
    rows["values"] = np.hstack((normals, corners.reshape(-1, 9)))
    header = b"ct_controllers: converted with coal's MeshLoader".ljust(80, b" ")
    return header + np.uint32(len(triangles)).tobytes() + rows.tobytes()
