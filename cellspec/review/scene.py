"""The 3D scene of a review: workspace, table, keep-out zones, robots and the parts.

The static cell is drawn once; the parts are one batched mesh per shape (boxes, cylinders:
one draw call each however many parts there are) whose positions, yaws, sizes and colours
are updated after every edit.
Labels are shown for every part in small layouts and only for the selected and
violating parts in large ones (HTML labels are the costly part of the page).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, SupportsFloat

import numpy as np
import numpy.typing as npt

from cellspec.dsl.model import BoxZone, Cell, HalfSpaceZone

if TYPE_CHECKING:
    import viser

    from cellspec.review.session import ReviewSession

COLOURS = {
    "valid": (67, 160, 71),
    "violating": (229, 57, 53),
    "warning": (251, 140, 0),
    "selected": (30, 136, 229),
}
REPLAY_COLOUR = (142, 36, 170)
REPAIR_COLOUR = (123, 31, 162)
GHOST_OPACITY = 0.25
ALL_LABELS_UP_TO = 60  # parts; above this only selected and violating parts get a label
MAX_LABELS = 60

# a unit cube centred at the origin (scaled per part by its size)
_CUBE_V = np.array(list(itertools.product((-0.5, 0.5), repeat=3)), dtype=np.float32)
_CUBE_F = np.array([
    [0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5],  # x- / x+
    [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],  # y- / y+
    [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3],  # z- / z+
], dtype=np.int32)


def _unit_cylinder(n: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """A unit cylinder (radius 0.5, height 1, axis z) centred at the origin: scaled per part
    by its size (2R, 2R, H), as the unit cube is by a box's."""
    a = np.arange(n) * (2 * math.pi / n)
    ring = np.stack([0.5 * np.cos(a), 0.5 * np.sin(a)], axis=1)
    v = np.vstack([np.c_[ring, np.full(n, -0.5)], np.c_[ring, np.full(n, 0.5)],
                   [[0.0, 0.0, -0.5], [0.0, 0.0, 0.5]]]).astype(np.float32)
    f = []
    for k in range(n):
        j = (k + 1) % n
        f += [[k, j, n + j], [k, n + j, n + k],  # side
              [2 * n, j, k], [2 * n + 1, n + k, n + j]]  # bottom, top
    return v, np.array(f, dtype=np.int32)


_CYL_V, _CYL_F = _unit_cylinder()
_GEOM = {"box": (_CUBE_V, _CUBE_F), "cylinder": (_CYL_V, _CYL_F)}


def shape_kinds(cell: Cell, types: Iterable[str]) -> np.ndarray:
    """Per part its drawn shape: "box" or "cylinder" (from its type; unknown types: box)."""
    return np.array([getattr(cell.part_types.get(t), "shape", "box") for t in types],
                    dtype=object)


def yaw_wxyzs(yaw_deg: npt.ArrayLike) -> np.ndarray:
    """(n, 4) quaternions (w, x, y, z) of rotations about z by ``yaw_deg`` degrees."""
    h = np.radians(np.asarray(yaw_deg, dtype=np.float64)) / 2
    z = np.zeros_like(h)
    return np.stack([np.cos(h), z, z, np.sin(h)], axis=1).astype(np.float32).reshape(-1, 4)


def _f(v: SupportsFloat) -> float:
    return float(v)


def xyz(v: Iterable[SupportsFloat]) -> tuple[float, float, float]:
    """A point as three plain floats (viser takes a position as a 3-tuple)."""
    x, y, z = (float(c) for c in v)
    return (x, y, z)


def box_edges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The 12 edges of an axis-aligned box as line segments, shape (12, 2, 3)."""
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    segs = []
    for a, b in itertools.combinations(range(8), 2):
        if np.count_nonzero(corners[a] != corners[b]) == 1:
            segs.append((corners[a], corners[b]))
    return np.array(segs, dtype=np.float32)


def plane_in_box(coef: np.ndarray, rhs: float, lo: np.ndarray,
                 hi: np.ndarray) -> np.ndarray | None:
    """The polygon where the plane coef . p = rhs cuts the box [lo, hi] (ordered vertices),
    or None when it misses the box; used to draw half-space keep-outs."""
    pts = []
    for a, b in box_edges(lo, hi):
        da, db = float(coef @ a) - rhs, float(coef @ b) - rhs
        if da == 0:
            pts.append(a)
        if da * db < 0:
            pts.append(a + (b - a) * (da / (da - db)))
    if len(pts) < 3:
        return None
    pts_a = np.unique(np.round(np.array(pts, dtype=np.float64), 9), axis=0)
    if len(pts_a) < 3:
        return None
    c = pts_a.mean(axis=0)
    n = coef / np.linalg.norm(coef)
    u = np.cross(n, [0.0, 0.0, 1.0] if abs(n[2]) < 0.9 else [1.0, 0.0, 0.0])
    u /= np.linalg.norm(u)
    w = np.cross(n, u)
    ang = np.arctan2((pts_a - c) @ w, (pts_a - c) @ u)
    return pts_a[np.argsort(ang)]


def yaw_wxyz(yaw_deg: float) -> tuple[float, float, float, float]:
    """Quaternion (w, x, y, z) of a rotation about z."""
    h = math.radians(yaw_deg) / 2
    return (math.cos(h), 0.0, 0.0, math.sin(h))


def scene_bounds(cell: Cell) -> tuple[np.ndarray, np.ndarray]:
    """A box around the workspace and every robot base (for the table and the camera)."""
    ws = cell.workspace
    lo = np.array([_f(v) for v in ws.lo])
    hi = np.array([_f(v) for v in ws.hi])
    for r in cell.robots:
        b = np.array([_f(v) for v in r.base])
        lo, hi = np.minimum(lo, b), np.maximum(hi, b)
    return lo, hi


def draw_cell(server: viser.ViserServer, cell: Cell) -> None:
    """Workspace (wireframe), table (the surfaces), keep-out zones (translucent)."""
    ws = cell.workspace
    lo = np.array([_f(v) for v in ws.lo])
    hi = np.array([_f(v) for v in ws.hi])
    server.scene.add_line_segments("/cell/workspace", box_edges(lo, hi), (40, 40, 40),
                                   thickness=2.0, thickness_units="screen")
    server.scene.add_label("/cell/workspace_label", "workspace", position=tuple(hi),
                           font_screen_scale=0.8)
    blo, bhi = scene_bounds(cell)
    margin = 0.15
    for s in cell.surfaces:
        z = _f(s.z)
        thick = 0.02
        server.scene.add_box(
            f"/cell/surface/{s.name}", color=(200, 190, 170),
            dimensions=(bhi[0] - blo[0] + 2 * margin, bhi[1] - blo[1] + 2 * margin, thick),
            position=((blo[0] + bhi[0]) / 2, (blo[1] + bhi[1]) / 2, z - thick / 2 - 1e-4),
            receive_shadow=True, cast_shadow=False)
    for zone in cell.keepouts:
        if isinstance(zone, BoxZone):
            klo = np.maximum(np.array([_f(v) for v in zone.box.lo]), lo - 1.0)
            khi = np.minimum(np.array([_f(v) for v in zone.box.hi]), hi + 1.0)
            server.scene.add_box(f"/cell/keepout/{zone.name}", color=(211, 47, 47),
                                 dimensions=tuple(khi - klo), position=tuple((klo + khi) / 2),
                                 opacity=0.3, cast_shadow=False, receive_shadow=False)
            server.scene.add_line_segments(f"/cell/keepout_edges/{zone.name}",
                                           box_edges(klo, khi), (211, 47, 47), thickness=1.5,
                                           thickness_units="screen")
            server.scene.add_label(f"/cell/keepout_labels/{zone.name}", f"keep-out {zone.name}",
                                   position=tuple(khi), font_screen_scale=0.7)
        elif isinstance(zone, HalfSpaceZone):
            coef = np.array([_f(v) for v in zone.coef])
            poly = plane_in_box(coef, _f(zone.rhs), lo, hi)
            if poly is None:
                continue
            faces = np.array([[0, k, k + 1] for k in range(1, len(poly) - 1)], dtype=np.int32)
            server.scene.add_mesh_simple(f"/cell/keepout/{zone.name}", poly.astype(np.float32),
                                         faces, color=(211, 47, 47), opacity=0.3,
                                         side="double", cast_shadow=False,
                                         receive_shadow=False)
            ops = {"<": "<", "<=": "≤", ">": ">", ">=": "≥"}
            terms = " + ".join(f"{c:g}{a}" if c != 1 else a
                               for c, a in zip(coef, "xyz", strict=True) if c)
            server.scene.add_label(f"/cell/keepout_labels/{zone.name}",
                                   f"keep-out {zone.name}: {terms} {ops.get(zone.op, zone.op)} "
                                   f"{_f(zone.rhs):g}", position=tuple(poly.mean(axis=0)),
                                   font_screen_scale=0.7)


class PartsView:
    """The parts as one batched mesh, their labels and the move gizmo of the selection."""

    def __init__(self, server: viser.ViserServer) -> None:
        """Create an empty view; :meth:`update` draws the session's parts."""
        self.server = server
        self.meshes: dict[str, viser.BatchedMeshHandle] = {}  # "box" | "cylinder" -> its mesh
        self.counts: dict[str, int] = {}
        self.labels: dict[str, viser.LabelHandle] = {}
        self.gizmo: viser.TransformControlsHandle | None = None
        self.ids: tuple[str, ...] = ()
        # float32 once drawn (what viser sends), float64 while empty
        self.pos: npt.NDArray[np.floating[Any]] = np.zeros((0, 3))
        self.size: npt.NDArray[np.floating[Any]] = np.zeros((0, 3))
        self.yaw = np.zeros(0)  # degrees about z
        self.kind = np.zeros(0, dtype=object)  # "box" | "cylinder"
        self.ghost: set[str] = set()  # replay: parts not yet placed, drawn translucent
        self.extra: dict[str, np.ndarray] = {}  # replay: parts at the supply or carried
        self.extra_mesh: dict[str, viser.BatchedMeshHandle] | None = None
        self.moves_mesh: viser.ArrowsHandle | None = None
        self.moves_key: tuple = ()

    def update(self, s: ReviewSession) -> None:
        """Redraw the parts of session ``s`` (positions, sizes, colours, labels)."""
        status = s.status()
        n = len(s.ids)
        pos = s.pos.astype(np.float32).reshape(n, 3)
        size = s.sizes().astype(np.float32).reshape(n, 3)
        colours = np.array([COLOURS[status[p]] for p in s.ids], dtype=np.uint8).reshape(n, 3)
        opac = np.array([GHOST_OPACITY if p in self.ghost else 1.0 for p in s.ids],
                        dtype=np.float32)
        self.ids, self.pos, self.size = tuple(s.ids), pos, size
        self.yaw = np.asarray(s.yaw, dtype=np.float64).reshape(n)
        self.kind = shape_kinds(s.cell, s.types)
        wxyz = yaw_wxyzs(self.yaw)
        with self.server.atomic():
            for kind in _GEOM:  # boxes at "/parts" (as before shapes), cylinders beside
                rows = self.kind == kind
                self._batch(kind, "/parts" if kind == "box" else f"/parts_{kind}",
                            int(rows.sum()), wxyz[rows], pos[rows], size[rows], colours[rows],
                            opac[rows])
            self._extra(s)
            self._moves(s)
            self._labels(s, status)
            self._gizmo(s)

    def _batch(self, kind: str, name: str, n: int, wxyz: np.ndarray, pos: np.ndarray,
               size: np.ndarray, colours: np.ndarray, opac: np.ndarray) -> None:
        """Draw the ``n`` parts of one shape as one batched mesh (recreated when the count
        changes, else updated in place; removed when there are none)."""
        mesh = self.meshes.get(kind)
        if n == 0:
            if mesh is not None:
                self.meshes.pop(kind).remove()
            self.counts[kind] = 0
            return
        if mesh is None or n != self.counts.get(kind):
            if mesh is not None:
                mesh.remove()
            v, f = _GEOM[kind]
            mesh = self.server.scene.add_batched_meshes_simple(
                name, v, f, batched_wxyzs=wxyz, batched_positions=pos, batched_scales=size,
                batched_colors=colours, batched_opacities=opac, flat_shading=True, lod="off")
            mesh.on_click(self._clicked)
            self.meshes[kind] = mesh
        else:
            mesh.batched_wxyzs = wxyz
            mesh.batched_positions = pos
            mesh.batched_scales = size
            mesh.batched_colors = colours
            mesh.batched_opacities = opac
        self.counts[kind] = n

    def _moves(self, s: ReviewSession) -> None:
        """After a repair: an arrow from where each moved part was to where it is now."""
        r = s.last_repair
        moves = [m for m in (r.moves if r is not None and r.applied else ())
                 if m.distance > 1e-9]
        key = tuple((m.part, m.src, m.dst) for m in moves)
        if key == self.moves_key:
            return
        self.moves_key = key
        if self.moves_mesh is not None:
            self.moves_mesh.remove()
            self.moves_mesh = None
        if moves:
            pts = np.array([[m.src, m.dst] for m in moves], dtype=np.float32)
            self.moves_mesh = self.server.scene.add_arrows(
                "/repair/moves", pts, REPAIR_COLOUR, shaft_radius=0.003, head_radius=0.008,
                head_length=0.015)

    def _extra(self, s: ReviewSession) -> None:
        """Replay: the parts at their supply or in a gripper (a batched mesh per shape, each
        part at its own yaw: the feeder presents it turned as it will be placed)."""
        for h in (self.extra_mesh or {}).values():
            h.remove()
        self.extra_mesh = None
        if not self.extra:
            return
        sizes = s.sizes()
        idx = {p: i for i, p in enumerate(s.ids)}
        kinds = shape_kinds(s.cell, s.types)
        self.extra_mesh = {}
        for kind, (v, f) in _GEOM.items():
            ids = [p for p in self.extra if (kinds[idx[p]] if p in idx else "box") == kind]
            if not ids:
                continue
            pos = np.array([self.extra[p] for p in ids], dtype=np.float32).reshape(-1, 3)
            size = np.array([sizes[idx[p]] if p in idx else (0.05, 0.05, 0.05) for p in ids],
                            dtype=np.float32).reshape(-1, 3)
            wxyz = yaw_wxyzs([s.yaw[idx[p]] if p in idx else 0.0 for p in ids])
            self.extra_mesh[kind] = self.server.scene.add_batched_meshes_simple(
                f"/replay/parts_{kind}" if kind != "box" else "/replay/parts", v, f,
                batched_wxyzs=wxyz, batched_positions=pos, batched_scales=size,
                batched_colors=REPLAY_COLOUR, flat_shading=True, lod="off")

    def _labels(self, s: ReviewSession, status: dict[str, str]) -> None:
        if len(s.ids) <= ALL_LABELS_UP_TO:
            want = list(s.ids)
        else:
            want = [p for p in s.ids if status[p] == "selected"]
            want += [p for p in s.ids if status[p] == "violating"]
            want = list(dict.fromkeys(want))[:MAX_LABELS]
        idx = {p: i for i, p in enumerate(s.ids)}
        for pid in list(self.labels):
            if pid not in want:
                self.labels.pop(pid).remove()
        for pid in want:
            i = idx[pid]
            top = self.pos[i] + np.array([0.0, 0.0, self.size[i][2] / 2 + 0.005])
            h = self.labels.get(pid)
            if h is None:
                self.labels[pid] = self.server.scene.add_label(
                    f"/labels/{pid}", pid, position=xyz(top),
                    font_screen_scale=0.8, anchor="bottom-center")
            else:
                h.position = xyz(top)

    def _gizmo(self, s: ReviewSession) -> None:
        if self.gizmo is None:
            return
        if len(s.selected) == 1 and s.selected[0] in s.ids:
            i = s.ids.index(s.selected[0])
            self.gizmo.position = xyz(s.pos[i])
            w, x, y, z = (float(v) for v in yaw_wxyzs([s.yaw[i]])[0])
            self.gizmo.wxyz = (w, x, y, z)
            self.gizmo.visible = True
        else:
            self.gizmo.visible = False

    def pick(self, origin: tuple[float, float, float],
             direction: tuple[float, float, float]) -> str | None:
        """The part a click ray hits first (slab test against every part's box in its own
        frame, turned by its yaw; a cylinder's enclosing box), or None."""
        if not self.ids:
            return None
        n = len(self.ids)
        yaw = np.radians(self.yaw) if len(self.yaw) == n else np.zeros(n)
        c, s_ = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
        o0 = np.asarray(origin, dtype=np.float64)[None, :] - self.pos
        d0 = np.broadcast_to(np.asarray(direction, dtype=np.float64), (n, 3))
        # the ray in each part's frame: turned by -yaw about the part's centre
        o = np.stack([c[:, 0] * o0[:, 0] + s_[:, 0] * o0[:, 1],
                      -s_[:, 0] * o0[:, 0] + c[:, 0] * o0[:, 1], o0[:, 2]], axis=1)
        d = np.stack([c[:, 0] * d0[:, 0] + s_[:, 0] * d0[:, 1],
                      -s_[:, 0] * d0[:, 0] + c[:, 0] * d0[:, 1], d0[:, 2]], axis=1)
        d = np.where(np.abs(d) < 1e-12, 1e-12, d)
        lo = -self.size / 2
        hi = self.size / 2
        t1, t2 = (lo - o) / d, (hi - o) / d
        tmin = np.minimum(t1, t2).max(axis=1)
        tmax = np.maximum(t1, t2).min(axis=1)
        hit = (tmax >= np.maximum(tmin, 0))
        if not hit.any():
            return None
        k = int(np.argmin(np.where(hit, tmin, np.inf)))
        return self.ids[k]

    on_pick: Any = None  # set by the app: called with the picked part id

    def _clicked(self, event: Any) -> None:
        pid = self.pick(event.ray_origin, event.ray_direction)
        if pid is not None and self.on_pick is not None:
            self.on_pick(pid)
