"""Contact polygons of yawed boxes and vertical cylinders for the stability analysis (issue 22).

Only layouts with a part that is not an axis-aligned box come here (``Instance.plain`` is
False); plain layouts never import this module, so their results stay byte-identical.

**Footprints.** A yawed box is its rotated rectangle (the kernel's rational rotation:
``tan(yaw/2)`` to ``2**-20``, docs/shapes.md); a plain box in such a layout is its exact
grid rectangle. A disc (a vertical cylinder) has two polygons: the **inscribed** regular
polygon of :data:`DISC_SIDES` sides, where forces may act (a subset of the disc: a smaller
support can only make the verdict stricter), and the **circumscribed** one, used only to
decide *whether* two parts touch (a superset: a part is never taken for resting on
nothing, held fixed and passed, while the kernel says it rests on something).
32 sides lose at most ``R (1 - cos(pi/32)) < 0.0049 R`` of the radius (0.12 mm on a 25 mm
can, a tenth of the default 2 mm margin) at 8x the force columns of a rectangle; 16 would
lose 0.48 mm, 64 would double the LP for 0.03 mm. Every inner polygon is also shrunk by
:data:`GUARD` and every outer one grown by it, so float rounding of rotated corners never
gives more support, or less contact, than the exact shapes.

**Contacts.** A part's bottom on a surface: its inner footprint. A part on another part's
top (z within the contact tolerance): detected when the outer footprints overlap with
positive area; it carries forces over the intersection of the two inner footprints (of
two convex polygons: convex), at that polygon's vertices. An empty intersection (a disc
on an edge by less than the polygon's loss) is a contact that carries nothing, so the
part falls rather than being held fixed. Pairs of two plain boxes keep their exact
rectangles. Side contacts of a pair with a non-plain part are left out (they only add
forces, so leaving them out can only refuse a structure that stands).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import shapely

from cellspec.core import geometry as g

DISC_SIDES = 32
GUARD = 1e-3  # U (0.05 um): inner polygons shrunk, outer grown, against float rounding
T_DEN = 1 << 20  # the kernel's rotation: tan(yaw/2) to 2^-20 (cellspec/core/shapes.py)
U = float(g.U)


@dataclass
class Footprints:
    """Per part: ``plain`` (an axis-aligned box, exact on the grid), the ``inner`` polygons
    (forces act inside them) and the ``outer`` ones (they contain the footprint)."""

    plain: np.ndarray
    inner: np.ndarray
    outer: np.ndarray


def _rotation(yaw_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cos, sin, odd quarter turn) of each yaw, reduced to [-45, 45] degrees as the kernel."""
    q = np.rint(yaw_deg / 90.0).astype(np.int64)
    a = np.rint(np.tan(np.radians(yaw_deg - 90.0 * q) / 2) * T_DEN) / T_DEN
    return (1 - a * a) / (1 + a * a), 2 * a / (1 + a * a), (q % 2) == 1


def footprints(inst) -> Footprints:  # noqa: ANN001 (Instance)
    """The footprints of every part of a non-plain instance (U)."""
    n = inst.n
    boxes = inst.boxes
    yaw = inst.yaw_deg if inst.yaw_deg is not None else np.zeros(n)
    cyl = inst.cyl if inst.cyl is not None else np.zeros(n, dtype=bool)
    res = float(g.RESOLUTION)
    cx = 2 * np.rint(inst.pos_m[:, 0] / res)  # the quantised centre and half sizes (U)
    cy = 2 * np.rint(inst.pos_m[:, 1] / res)
    hx0 = np.rint(inst.size_m[:, 0] / res)
    hy0 = np.rint(inst.size_m[:, 1] / res)
    c, s, odd = _rotation(np.where(cyl, 0.0, yaw))
    hx, hy = np.where(odd, hy0, hx0), np.where(odd, hx0, hy0)
    plain = ~cyl & (np.fmod(yaw, 90.0) == 0)
    sq = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], dtype=np.float64)  # CCW
    ang = 2 * np.pi * np.arange(DISC_SIDES) / DISC_SIDES
    ring = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    inner = np.empty(n, dtype=object)
    outer = np.empty(n, dtype=object)
    for p in range(n):
        if plain[p]:
            x0, x1, y0, y1 = boxes[p, :4].astype(np.float64)
            r = shapely.box(x0, y0, x1, y1)
            inner[p] = outer[p] = r
        elif cyl[p]:
            rad = hx[p]
            inner[p] = shapely.Polygon(ring * (rad - GUARD) + (cx[p], cy[p]))
            out_r = rad / math.cos(math.pi / DISC_SIDES) + GUARD
            outer[p] = shapely.Polygon(ring * out_r + (cx[p], cy[p]))
        else:
            ax, ay = np.array([c[p], s[p]]), np.array([-s[p], c[p]])
            for grow, dst in ((-GUARD, inner), (GUARD, outer)):
                pts = (sq[:, :1] * (hx[p] + grow) * ax + sq[:, 1:] * (hy[p] + grow) * ay
                       + (cx[p], cy[p]))
                dst[p] = shapely.Polygon(pts)
    return Footprints(plain, inner, outer)


def _mixed(fp: Footprints, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Which pairs involve a non-plain part."""
    return ~(fp.plain[i] & fp.plain[j])


def overlap(fp: Footprints, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The pairs' footprints overlap with positive area (outer polygons; True for two plain
    boxes, which the caller decides on their rectangles)."""
    out = np.ones(len(i), dtype=bool)
    m = np.nonzero(_mixed(fp, i, j))[0]
    if len(m):
        out[m] = shapely.area(shapely.intersection(fp.outer[i[m]], fp.outer[j[m]])) > 0
    return out


def wide(fp: Footprints, lo: np.ndarray, hi: np.ndarray, eps: int) -> np.ndarray:
    """The kernel's footprint overlap for pairs with a non-plain part: every shift of at
    most eps on x and on y leaves the footprints' interiors intersecting (by convexity:
    the four corner shifts); True for two plain boxes (decided by the caller)."""
    out = np.ones(len(lo), dtype=bool)
    m = np.nonzero(_mixed(fp, lo, hi))[0]
    for dx, dy in ((eps, eps), (eps, -eps), (-eps, eps), (-eps, -eps)):
        if not len(m):
            break
        moved = shapely.transform(fp.outer[hi[m]], lambda xy, d=(dx, dy): xy + d)
        ok = shapely.area(shapely.intersection(fp.outer[lo[m]], moved)) > 0
        out[m[~ok]] = False
        m = m[ok]
    return out


def attach(con, fp: Footprints) -> None:  # noqa: ANN001 (Contacts)
    """Give every contact its polygon: ``con.poly`` (k, V, 2) vertices in U, counter-
    clockwise, padded by repeating the first; ``con.nv`` vertex counts (0: carries
    nothing); ``con.nrm`` (k, V, 2) outward unit edge normals and ``con.off`` (k, V)
    their offsets (padded and zero-length edges: normal 0, offset +inf)."""
    k = len(con.lower)
    lo, up = con.lower, con.upper
    geoms = np.empty(k, dtype=object)
    rect = (lo < 0) & fp.plain[up]
    rect |= (lo >= 0) & fp.plain[np.maximum(lo, 0)] & fp.plain[up]
    r = con.rect.astype(np.float64)
    geoms[rect] = shapely.box(r[rect, 0], r[rect, 2], r[rect, 1], r[rect, 3])
    surf = (lo < 0) & ~rect
    geoms[surf] = fp.inner[up[surf]]
    pair = (lo >= 0) & ~rect
    if pair.any():
        geoms[pair] = shapely.intersection(fp.inner[lo[pair]], fp.inner[up[pair]])
    rings: list[np.ndarray] = []
    for gm in geoms.tolist():
        if gm.is_empty or gm.geom_type != "Polygon" or gm.area <= 0:
            rings.append(np.zeros((0, 2)))
            continue
        xy = np.asarray(gm.exterior.coords)[:-1]
        x, y = xy[:, 0], xy[:, 1]
        if np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y) < 0:
            xy = xy[::-1]
        rings.append(xy)
    nv = np.array([len(q) for q in rings], dtype=np.int64)
    v = max(int(nv.max()) if k else 0, 1)
    poly = np.zeros((k, v, 2))
    for t, q in enumerate(rings):
        if len(q):
            poly[t, :len(q)] = q
            poly[t, len(q):] = q[0]
    nxt = np.roll(poly, -1, axis=1)
    last = np.clip(nv - 1, 0, v - 1)
    nxt[np.arange(k), last] = poly[:, 0]  # the closing edge of each ring
    d = nxt - poly
    length = np.hypot(d[..., 0], d[..., 1])
    real = (np.arange(v)[None, :] < nv[:, None]) & (length > 1e-9)
    with np.errstate(invalid="ignore", divide="ignore"):
        nrm = np.where(real[..., None], np.stack([d[..., 1], -d[..., 0]], -1)
                       / length[..., None], 0.0)
    off = np.where(real, (nrm * poly).sum(-1), np.inf)
    con.poly, con.nv, con.nrm, con.off = poly, nv, nrm, off


def _depth(con, ks: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """Per contact and edge: how far (U) the points (U) lie inside the edge's line."""
    return con.off[ks] - (con.nrm[ks, :, 0] * x[:, None] + con.nrm[ks, :, 1] * y[:, None])


def edge_distance(con, ks: np.ndarray, cx: np.ndarray, cy: np.ndarray  # noqa: ANN001
                  ) -> tuple[np.ndarray, np.ndarray]:
    """For centres of mass (m) over contacts ``ks``: (the largest shift t such that every
    shift by (+-t, +-t) stays in the polygon: the margin's test, < 0 beyond it; the signed
    distance to the nearest edge line, from the polygon: the message's), both in m. A
    contact that carries nothing gives -inf for both."""
    d = _depth(con, ks, cx / U, cy / U)
    l1 = np.abs(con.nrm[ks, :, 0]) + np.abs(con.nrm[ks, :, 1])
    t = np.min(d / np.where(l1 > 0, l1, 1.0), axis=1) * U
    e = np.min(d, axis=1) * U
    none = con.nv[ks] == 0
    t[none] = e[none] = -np.inf
    return t, e


def rect_inside(con, ks: np.ndarray, x0: np.ndarray, x1: np.ndarray,  # noqa: ANN001
                y0: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """Whether the rectangles (m) lie inside the contacts' polygons (their four corners do:
    the polygons are convex)."""
    ok = con.nv[ks] > 0
    for x, y in ((x0, y0), (x1, y0), (x0, y1), (x1, y1)):
        ok &= np.min(_depth(con, ks, x / U, y / U), axis=1) >= 0
    return ok


def with_polygons(grp, con, ks: np.ndarray):  # noqa: ANN001, ANN201 (lp.Group)
    """An LP group whose horizontal rows are the contacts ``ks`` in order: forces at the
    polygons' vertices (``px``, ``py``, m), the friction force at the mean of the vertices
    (inside the convex polygon: its rectangle columns collapse onto that point); rows of
    contacts that carry nothing are dropped (their parts stay balanced: they must stand
    on their other contacts)."""
    keep = con.nv[ks] > 0
    kk = ks[keep]
    hz = grp.hz[keep].copy()
    v = max(int(con.nv[kk].max()) if len(kk) else 1, 1)
    pts = con.poly[kk, :v] * U
    w = np.arange(v)[None, :] < con.nv[kk][:, None]
    mx = (pts[..., 0] * w).sum(1) / np.maximum(w.sum(1), 1)
    my = (pts[..., 1] * w).sum(1) / np.maximum(w.sum(1), 1)
    hz[:, 2], hz[:, 3], hz[:, 4], hz[:, 5] = mx, mx, my, my
    grp.hz = hz
    grp.px, grp.py = pts[..., 0], pts[..., 1]
    return grp


def forest_text(name: str, carry: str, on: str, shift: float, edge: float,
                margin: float) -> str:
    """The forest's sentence on a contact polygon: the edge distance from the polygon, and
    the four shifts' reach when a slanted edge makes it smaller."""
    if shift < -0.0005:
        return (f"{name} topples off {on}: its centre of mass{carry} is {-edge:.3f} m beyond "
                "the edge")
    e, t = f"{max(edge, 0):.4f}", f"{max(shift, 0):.4f}"
    slant = "" if e == t else f", which a shift of {t} m along x and y reaches (a slanted edge)"
    return (f"{name} stands with its centre of mass{carry} {e} m inside the edge of {on}{slant}; "
            f"the cell asks for {margin:.3f} m along x and y")
