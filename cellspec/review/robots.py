"""The robots of a review page, drawn from the pybullet twin's own models.

Each robot is loaded in :class:`cellspec.robots.twin.Twin` (the same URDFs, base, yaw and
gripper the twin uses), put at its home pose, and every link's collision shapes are read
back from the twin's pybullet client (``getCollisionShapeData`` with the link's centre-of-
mass frame from ``getLinkState``): capsules, boxes, spheres, cylinders and meshes become
one triangle mesh per robot. :func:`robot_meshes` is also used to replay a plan (the same
shapes at other joint configurations).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.core.extras import require
from cellspec.dsl.model import Cell
from cellspec.review.scene import xyz, yaw_wxyz

if TYPE_CHECKING:
    import viser

    from cellspec.robots.twin import Twin

ROBOT_COLOUR = (120, 130, 150)

_GEOM_SPHERE, _GEOM_BOX, _GEOM_CYLINDER, _GEOM_MESH, _GEOM_CAPSULE = 2, 3, 4, 5, 7
# (file, its version: mtime ns and size, scale) -> vertices and faces: a mesh edited on disk
# while the review runs is read again
_MESH_CACHE: dict[tuple[str, int, int, tuple[float, ...]], tuple[np.ndarray, np.ndarray]] = {}
_MAX_MESHES = 256


def quat_matrix(q: Any) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w)."""
    x, y, z, w = (float(v) for v in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _primitive(kind: int, dims: Any, filename: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Vertices and faces of one collision shape in its own frame (None: not drawable)."""
    trimesh = require("trimesh", extra="review")  # the review extra; says so when missing

    d = [float(v) for v in dims]
    if kind == _GEOM_BOX:
        m = trimesh.creation.box(extents=d)
    elif kind == _GEOM_SPHERE:
        m = trimesh.creation.icosphere(subdivisions=2, radius=d[0])
    elif kind == _GEOM_CYLINDER:
        m = trimesh.creation.cylinder(radius=d[1], height=d[0], sections=20)
    elif kind == _GEOM_CAPSULE:
        m = trimesh.creation.capsule(height=d[0], radius=d[1], count=[12, 12])
    elif kind == _GEOM_MESH and filename:
        try:
            st = os.stat(filename)
        except OSError:  # a mesh we cannot read: the other links still show
            return None
        key = (filename, st.st_mtime_ns, st.st_size, tuple(d))
        if key not in _MESH_CACHE:
            try:
                loaded = trimesh.load(filename, force="mesh")
            except Exception:  # a mesh we cannot read: the other links still show
                return None
            v = np.asarray(loaded.vertices, dtype=np.float64) * np.array(d[:3])
            if len(_MESH_CACHE) >= _MAX_MESHES:
                _MESH_CACHE.clear()
            _MESH_CACHE[key] = (v, np.asarray(loaded.faces, dtype=np.int64))
        return _MESH_CACHE[key]
    else:
        return None
    return np.asarray(m.vertices, dtype=np.float64), np.asarray(m.faces, dtype=np.int64)


class RobotShapes:
    """The collision shapes of one robot body in a twin, posed at any configuration."""

    def __init__(self, twin: Twin, robot: str) -> None:
        """Read the shapes of ``robot`` from the twin's pybullet client once."""
        p = require("pybullet", extra="twin")  # the twin extra; says so when missing

        self.twin, self.robot = twin, robot
        rb = twin.robot(robot)
        self.body = rb.body
        cid = twin.client
        self.shapes: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for li in rb.geom_links:  # the links with collision shapes, sorted
            for d in p.getCollisionShapeData(self.body, li, physicsClientId=cid):
                fn = d[4].decode() if isinstance(d[4], bytes) else str(d[4])
                prim = _primitive(d[2], d[3], fn)
                if prim is None:
                    continue
                self.shapes.append((li, prim[0], prim[1], np.array(d[5], dtype=np.float64),
                                    quat_matrix(d[6])))

    def mesh(self, q: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One triangle mesh (world coordinates) of the robot at q (default: current q)."""
        p = require("pybullet", extra="twin")  # the twin extra; says so when missing

        cid = self.twin.client
        if q is not None:
            self.twin.set_q(self.robot, q)
        frames: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        verts, faces, off = [], [], 0
        for li, v, f, lpos, lrot in self.shapes:
            if li not in frames:
                if li == -1:
                    pos, orn = p.getBasePositionAndOrientation(self.body, physicsClientId=cid)
                else:
                    st = p.getLinkState(self.body, li, computeForwardKinematics=1,
                                        physicsClientId=cid)
                    pos, orn = st[0], st[1]
                frames[li] = (np.array(pos), quat_matrix(orn))
            wpos, wrot = frames[li]
            rot = wrot @ lrot
            verts.append(v @ rot.T + (wrot @ lpos + wpos))
            faces.append(f + off)
            off += len(v)
        if not verts:
            return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32)
        return (np.concatenate(verts).astype(np.float32),
                np.concatenate(faces).astype(np.int32))


def open_twin(cell: Cell) -> tuple[Twin | None, str | None]:
    """A Twin of the cell (no parts), or None and why it is not available."""
    try:
        # lazy: the twin extra (pybullet), through cellspec.robots
        from cellspec.robots.twin import Twin
    except ImportError as exc:
        return None, f"robot models not available ({exc})"
    try:
        return Twin(cell), None
    except Exception as exc:  # the page still works without robots; say why
        return None, f"robot models could not be loaded ({type(exc).__name__}: {exc})"


def draw_robots(server: viser.ViserServer, cell: Cell, twin: Twin | None = None,
                why: str | None = None) -> tuple[str, dict[str, RobotShapes], dict[str, Any]]:
    """Draw every robot at its home pose from the twin's models; without a twin, draw a
    labelled base marker and say why. Returns (a note for the panel, the shapes and the
    mesh handles per robot, for replay)."""
    shapes: dict[str, RobotShapes] = {}
    handles: dict[str, Any] = {}
    for r in cell.robots:
        base = xyz(r.base)
        if twin is not None:
            sh = RobotShapes(twin, r.name)
            v, f = sh.mesh(twin.home(r.name))
            handles[r.name] = server.scene.add_mesh_simple(
                f"/robots/{r.name}", v, f, color=ROBOT_COLOUR, flat_shading=False)
            shapes[r.name] = sh
            server.scene.add_label(f"/robots/{r.name}/label", f"{r.name} ({r.model})",
                                   position=(base[0], base[1], base[2] + 0.05),
                                   font_screen_scale=0.8)
        else:
            server.scene.add_frame(f"/robots/{r.name}", axes_length=0.15, axes_radius=0.006,
                                   position=base, wxyz=yaw_wxyz(float(r.yaw_deg)))
            server.scene.add_cylinder(f"/robots/{r.name}/base", radius=0.08, height=0.04,
                                      color=ROBOT_COLOUR, position=(0.0, 0.0, 0.02))
            server.scene.add_label(f"/robots/{r.name}/label",
                                   f"{r.name} ({r.model}): base only, no robot model",
                                   position=(0.0, 0.0, 0.08), font_screen_scale=0.8)
    if not cell.robots:
        return "", shapes, handles
    if twin is None:
        return f"Robots: base markers only: {why or 'no robot models'}.", shapes, handles
    return (f"Robots at their home pose, from the pybullet twin's models "
            f"({', '.join(r.model for r in cell.robots)}).", shapes, handles)
