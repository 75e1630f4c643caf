"""Relations derived from geometry: on, inside, near, holding (the world model's graph G).

The tests are those of the geometry kernel (``cellspec/core/geometry.py``) on the same
0.1 mm integer grid, with a perception tolerance ``eps`` instead of the cell's contact
tolerance (observed poses are noisy):

* on(a, b): a's bottom is within eps of b's top and a's centroid lies over b's footprint
  (the support's face meets a's face); on(a, S) for a surface S: a's bottom within eps of S.
* inside(a, b): a's box lies in b's box (eps allowed).
* near(a, b): the gap between the boxes is at most ``near_d`` on every axis (a < b by id).
* holding(gripper, a): the gripper's pad touches a's top, footprints overlap, and a rests
  on nothing.

Parts at an angle and vertical cylinders (docs/shapes.md): when some part is not an
axis-aligned box, every relation is decided on the exact shapes of
``cellspec/core/shapes.py`` (supports, near: the kernel's pair relations; surfaces: the
exact bottom), never on the enclosing boxes; the two tests the kernel has no pair relation
for are decided here on the same footprints, in float64 at the perception tolerance (the
observed poses are noisy by far more than a float's error): a's centroid over b's footprint
grown by the square [-eps, eps]^2 (``plane.meets`` with a point), and inside(a, b) = a's
footprint within b's grown by eps along b's own axes (a disc: radially) and a's z interval
within b's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import plane
from cellspec.core import shapes as shp
from cellspec.world.db import WorldRelation

EPS_M = 0.003  # perception tolerance for contact, metres
NEAR_M = 0.01


def _u(m: float) -> int:
    return int(round(m * g.U_PER_M))


def boxes(pos: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Integer boxes (n, 6) on the kernel's grid."""
    if len(pos) == 0:
        return np.zeros((0, 6), dtype=np.int64)
    return g.quantise(np.asarray(pos, float), np.asarray(size, float)).boxes


def derive(ids: Sequence[str], pos: np.ndarray, size: np.ndarray,
           surfaces: Sequence[tuple[str, float]] = (("table", 0.0),),
           gripper: tuple[np.ndarray, np.ndarray] | None = None,
           eps: float = EPS_M, near_d: float = NEAR_M, yaw: np.ndarray | None = None,
           cyl: np.ndarray | None = None) -> list[WorldRelation]:
    """Every relation among the parts (ids with centres and own sizes; ``yaw`` in degrees and
    ``cyl`` per part, docs/shapes.md), sorted."""
    out: set[WorldRelation] = set()
    n = len(ids)
    if n == 0:
        return []
    if yaw is not None or cyl is not None:
        yv = np.zeros(n) if yaw is None else np.asarray(yaw, dtype=np.float64)
        cv = np.zeros(n, dtype=bool) if cyl is None else np.asarray(cyl, dtype=bool)
        if bool(np.any(cv) or np.any(np.fmod(yv, 90.0) != 0)):
            return _derive_shapes(ids, pos, size, surfaces, gripper, eps, near_d, yv, cv)
        size = _swapped(np.asarray(size, float), yv)
    b = boxes(pos, size)
    e, nd = _u(eps), _u(near_d)
    a_ = b[:, None, :]
    c_ = b[None, :, :]
    cx = (b[:, 0] + b[:, 1]) / 2
    cy = (b[:, 2] + b[:, 3]) / 2
    # on(i, j): j supports i, and i's centroid is over j's footprint
    sup = g.supports(c_, a_, e)  # [i, j]: j's top meets i's bottom, footprints overlap
    over = ((cx[:, None] >= b[None, :, 0] - e) & (cx[:, None] <= b[None, :, 1] + e)
            & (cy[:, None] >= b[None, :, 2] - e) & (cy[:, None] <= b[None, :, 3] + e))
    on = sup & over
    np.fill_diagonal(on, False)
    resting = on.any(axis=1)
    for i, j in zip(*np.nonzero(on), strict=True):
        out.add(WorldRelation("on", ids[i], ids[j]))
    for name, z in surfaces:
        zu = _u(z)
        for i in np.nonzero(g.on_surface(b, zu, e))[0].tolist():
            out.add(WorldRelation("on", ids[i], name))
            resting[i] = True
    # [i, j]: box i lies in box j (the corners of j broadcast along the last axis)
    ins = g.inside_box(np.broadcast_to(a_, (n, n, 6)), tuple(b[:, 0::2].T), tuple(b[:, 1::2].T), e)
    vol = np.prod(b[:, 1::2] - b[:, 0::2], axis=1)
    ins &= vol[:, None] < vol[None, :]  # strictly smaller: equal boxes are not inside each other
    for i, j in zip(*np.nonzero(ins), strict=True):
        out.add(WorldRelation("inside", ids[i], ids[j]))
    nr = g.near(a_, c_, nd)
    for i, j in zip(*np.nonzero(nr), strict=True):
        if ids[i] < ids[j]:
            out.add(WorldRelation("near", ids[i], ids[j]))
    if gripper is not None:
        gb = boxes(np.asarray([gripper[0]]), np.asarray([gripper[1]]))[0]
        touch = g.supports(b, gb[None, :], e)  # the pad rests on the part's top
        for i in np.nonzero(touch & ~resting)[0].tolist():
            out.add(WorldRelation("holding", "gripper", ids[i]))
    return sorted(out, key=lambda r: (r.rel, r.a, r.b))


def _swapped(size: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Own sizes as the kernel sees them: x and y swapped for an odd multiple of 90 degrees."""
    odd = (np.fmod(yaw, 90.0) == 0) & (np.fmod(np.abs(yaw), 180.0) == 90.0)
    if not odd.any():
        return size
    size = size.copy()
    size[odd, 0], size[odd, 1] = size[odd, 1].copy(), size[odd, 0].copy()
    return size


def shapes_of(pos: np.ndarray, size: np.ndarray, yaw: np.ndarray, cyl: np.ndarray
              ) -> shp.ShapesU:
    """The exact shapes (cellspec/core/shapes.py) of parts on the kernel's grid."""
    size = _swapped(np.asarray(size, float).reshape(-1, 3), yaw)
    q = g.quantise(np.asarray(pos, float).reshape(-1, 3), size)
    return shp.shapes_u(q.boxes, yaw, cyl)


def _over(sh: shp.ShapesU, i: np.ndarray, j: np.ndarray, e: int) -> np.ndarray:
    """i's centroid lies over j's footprint grown by the square [-e, e]^2 (float64)."""
    if not len(i):
        return np.zeros(0, dtype=bool)
    B = sh.geo(j)
    A = sh.geo(i)
    zero = A.hx * 0.0
    P = plane.Geo(A.cx, A.cy, zero + 1.0, zero, zero, zero, np.zeros(len(i), dtype=bool))
    E = plane.Geo(zero, zero, zero + 1.0, zero, zero + e, zero + e,
                  np.zeros(len(i), dtype=bool))
    return plane.meets(P, B, E) >= 0


def _inside(sh: shp.ShapesU, i: np.ndarray, j: np.ndarray, e: int) -> np.ndarray:
    """i's shape lies in j's grown by e (along j's axes; radially for a disc), float64."""
    A, B = sh.geo(i), sh.geo(j)
    dx, dy = A.cx - B.cx, A.cy - B.cy
    ux, uy, vx, vy = B.c, B.s, -B.s, B.c  # B a rectangle: A within both of its slabs
    grow_u = e * (np.abs(ux) + np.abs(uy))  # the square [-e, e]^2 projected on B's axes
    grow_v = e * (np.abs(vx) + np.abs(vy))
    rect = ((np.abs(dx * ux + dy * uy) + plane.support(A, ux, uy) <= B.hx + grow_u)
            & (np.abs(dx * vx + dy * vy) + plane.support(A, vx, vy) <= B.hy + grow_v))
    # B a disc: every point of A within its radius (+ e) of B's centre
    corners = [(a * A.hx * A.c - b * A.hy * A.s, a * A.hx * A.s + b * A.hy * A.c)
               for a in (1, -1) for b in (1, -1)]
    corner = np.max(np.stack([np.hypot(dx + px, dy + py) for px, py in corners]), axis=0)
    far = np.where(A.disc, np.hypot(dx, dy) + A.hx, corner)
    ok = np.where(B.disc, far <= B.hx + e, rect)
    bi, bj = sh.box[i], sh.box[j]
    return ok & (bi[:, 4] >= bj[:, 4] - e) & (bi[:, 5] <= bj[:, 5] + e)


# complexity: the four relations and the gripper, as for boxes, on the exact shapes
def _derive_shapes(ids: Sequence[str], pos: np.ndarray, size: np.ndarray,  # noqa: C901
                   surfaces: Sequence[tuple[str, float]],
                   gripper: tuple[np.ndarray, np.ndarray] | None, eps: float, near_d: float,
                   yaw: np.ndarray, cyl: np.ndarray) -> list[WorldRelation]:
    """The relations when some part is turned or a cylinder (see the module doc)."""
    n = len(ids)
    P = np.asarray(pos, float).reshape(n, 3)
    S = np.asarray(size, float).reshape(n, 3)
    if gripper is not None:  # the pad: one more row, an axis-aligned box
        P = np.vstack([P, np.asarray(gripper[0], float).reshape(1, 3)])
        S = np.vstack([S, np.asarray(gripper[1], float).reshape(1, 3)])
        yaw, cyl = np.append(yaw, 0.0), np.append(cyl, False)
    sh = shapes_of(P, S, yaw, cyl)
    e, nd = _u(eps), _u(near_d)
    out: set[WorldRelation] = set()
    ii, jj = np.nonzero(~np.eye(n, dtype=bool))
    # on(i, j): j supports i, and i's centroid is over j's footprint
    sup = shp.supports(sh, jj, ii, e)
    k = np.nonzero(sup)[0]
    on = np.zeros(len(ii), dtype=bool)
    on[k] = _over(sh, ii[k], jj[k], e)
    resting = np.zeros(n, dtype=bool)
    for a, b in zip(ii[on], jj[on], strict=True):
        out.add(WorldRelation("on", ids[a], ids[b]))
        resting[a] = True
    idx = np.arange(n)
    for name, z in surfaces:
        for a in idx[shp.on_surface(sh, idx, _u(z), e)]:
            out.add(WorldRelation("on", ids[a], name))
            resting[a] = True
    # inside(i, j): strictly smaller (own volume), within j; the enclosing boxes filter first
    vol = np.prod(S[:n], axis=1) * np.where(cyl[:n], np.pi / 4, 1.0)
    cand = (vol[ii] < vol[jj]) & g.inside_box(sh.box[ii], tuple(sh.box[jj, 0::2].T),
                                              tuple(sh.box[jj, 1::2].T), e + 2)
    k = np.nonzero(cand)[0]
    if len(k):
        ins = _inside(sh, ii[k], jj[k], e)
        for a, b in zip(ii[k][ins], jj[k][ins], strict=True):
            out.add(WorldRelation("inside", ids[a], ids[b]))
    lt = np.array([ids[a] < ids[b] for a, b in zip(ii.tolist(), jj.tolist(), strict=True)],
                  dtype=np.bool_)
    k = np.nonzero(lt)[0]
    nr = shp.near(sh, ii[k], jj[k], nd)
    for a, b in zip(ii[k][nr], jj[k][nr], strict=True):
        out.add(WorldRelation("near", ids[a], ids[b]))
    if gripper is not None:
        pad = np.full(n, n)
        touch = shp.supports(sh, idx, pad, e)  # the pad rests on the part's top
        for a in np.nonzero(touch & ~resting)[0].tolist():
            out.add(WorldRelation("holding", "gripper", ids[a]))
    return sorted(out, key=lambda r: (r.rel, r.a, r.b))
