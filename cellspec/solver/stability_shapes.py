"""Contact polygons of yawed boxes and vertical cylinders for the stability analysis (issue 22).

Only layouts with a part that is not an axis-aligned box come here (their kernel's
``boxes_are_parts`` is False); plain layouts never import this module, so their results
stay byte-identical.

**Footprints.** A yawed box is its rotated rectangle (the kernel's rational rotation:
``tan(yaw/2)`` to ``2**-20``, docs/shapes.md); a plain box in such a layout is its exact
grid rectangle. A disc (a vertical cylinder) has two polygons: the **inscribed** regular
polygon of :data:`DISC_SIDES` sides, where forces may act (a subset of the disc: a smaller
support can only make the verdict stricter), and the **circumscribed** one, used only to
decide *whether* two parts touch (a superset: a part is never taken for resting on
nothing, held fixed and passed, while the kernel says it rests on something); that
test is done on the exact disc (grown by :data:`GUARD`), the 32-gon only bounds it.
32 sides lose at most ``R (1 - cos(pi/32)) < 0.0049 R`` of the radius (0.12 mm on a 25 mm
can, an eighth of the default 1 mm margin) at 8x the force columns of a rectangle; 16 would
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

**Speed.** Whether parts touch is decided in numpy (separating axes for rectangles, the
distance to a rectangle or a centre for discs). A contact polygon is held as the
half-planes of its two footprints (their intersection), which is all the forest test and
the stage shortcut need; a footprint's half-planes are built only when a contact asks for
them (4 for a rectangle, 32 for a disc: no part pays for the discs), and not at all where
the parts' inscribed circles already decide (a pair whose circles overlap touches; a centre
of mass deep inside both circles is inside the polygon): the same answers, since those
circles lie inside the polygons (bounds in real arithmetic, less SLACK). Vertices (shapely)
are computed only for the contacts of structures that need an LP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cellspec.core import geometry as g

if TYPE_CHECKING:  # types only: this module is imported lazily (with shapely), for shapes
    from cellspec.solver.instance import Instance
    from cellspec.solver.stability_contacts import Contacts
    from cellspec.solver.stability_lp import Group

DISC_SIDES = 32
GUARD = 1e-3  # U (0.05 um): inner polygons shrunk, outer shapes grown, against float rounding
T_DEN = 1 << 20  # the kernel's rotation: tan(yaw/2) to 2^-20 (cellspec/core/shapes.py)
U = float(g.U)
# The shortcuts below decide a pair or a contact from the parts' inscribed circles alone
# when that leaves no doubt, and fall back to the polygons otherwise; their answers are the
# polygons' (a bound in real arithmetic, less SLACK, far above float rounding: ~1e-10 U).
SLACK = 1e-2  # U (0.5 um)
SQRT2_UP = 1.4142136  # > sqrt(2): the largest |nx| + |ny| of a unit normal
# A contact with a cylinder on either side (a can on the table, a box on a can, a can on a
# box) carries forces only inside a cylinder's rim by RIM and inside a box's edges by
# RIM_EDGE (issue 28): the rims as rounded. pybullet's are (its 1 mm collision margin
# rounds a cylinder's rim and, in GJK, the other shape's edges; measured in ``cellspec
# settle`` on a fixed support: a part whose centre is 1.5 mm inside a can's rim falls, 2.0
# mm stands; a can 0.5-1.2 mm inside a box's edge falls, 1.0-1.5 mm stands: docs/shapes.md),
# and so are real cans (a rolled rim). Box-on-box contacts are unchanged (pybullet's
# box-box contacts are exact).
RIM = 0.001 / U  # U (1 mm): a cylinder's own edge
RIM_EDGE = 0.0005 / U  # U (0.5 mm): a box's edge against a cylinder


SQUARE = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], dtype=np.float64)  # CCW corners


@dataclass
class Footprints:
    """Per part (U): ``plain`` (an axis-aligned box, exact), ``cyl``, centre (cx, cy), own x
    axis (c, s), half extents (hx, hy; a disc: radius) and ``shrink`` (GUARD, 0 for a plain
    box: its inner polygon is exact). The inner polygons (a rectangle's 4 edges, a disc's
    :data:`DISC_SIDES`) are built only for the parts that ask for them (:meth:`edges`,
    :meth:`ring`), each once."""

    plain: np.ndarray
    cyl: np.ndarray
    cx: np.ndarray
    cy: np.ndarray
    c: np.ndarray
    s: np.ndarray
    hx: np.ndarray
    hy: np.ndarray
    shrink: np.ndarray
    _nrm: np.ndarray | None = None  # (n, 4, 2) rectangles' outward unit edge normals
    _off: np.ndarray | None = None  # (n, 4) their offsets (a degenerate edge: 0, +inf)
    _dnrm: np.ndarray | None = None  # the same for discs, (n, DISC_SIDES, 2)
    _doff: np.ndarray | None = None
    _have: np.ndarray | None = None  # (n,) edges built

    def rin(self, p: np.ndarray) -> np.ndarray:
        """Radii (U) of circles about the centres inside the footprints of parts p: the
        shapes themselves (a rectangle's smaller half extent, a disc's radius)."""
        return np.where(self.cyl[p], self.hx[p], np.minimum(self.hx[p], self.hy[p]))

    def inner(self, parts: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """A lower bound (U, real arithmetic) on the depth of the points (x, y) (U) in the
        inner polygons of ``parts`` along every edge normal: the polygon's inscribed radius
        (a rectangle's smaller half extent less the shrink; a disc's 32-gon's apothem)
        less the distance to its centre; +inf for a part -1 (a surface: no edges)."""
        ok = parts >= 0
        p = np.where(ok, parts, 0)
        r = np.where(self.cyl[p], (self.hx[p] - GUARD) * np.cos(np.pi / DISC_SIDES),
                     np.minimum(self.hx[p], self.hy[p]) - self.shrink[p])
        return np.where(ok, r - np.hypot(x - self.cx[p], y - self.cy[p]), np.inf)

    def _rect_verts(self, p: np.ndarray) -> np.ndarray:
        """The inner rectangles of parts p (m, 4, 2), counter-clockwise."""
        ex, ey = self.hx[p] - self.shrink[p], self.hy[p] - self.shrink[p]
        rx = SQUARE[None, :, 0] * ex[:, None]
        ry = SQUARE[None, :, 1] * ey[:, None]
        c, s = self.c[p][:, None], self.s[p][:, None]
        v = np.empty((len(p), 4, 2))
        v[:, :, 0] = self.cx[p][:, None] + rx * c - ry * s
        v[:, :, 1] = self.cy[p][:, None] + rx * s + ry * c
        return v

    def _disc_verts(self, p: np.ndarray) -> np.ndarray:
        """The inscribed :data:`DISC_SIDES`-gons of discs p (m, DISC_SIDES, 2)."""
        ang = 2 * np.pi * np.arange(DISC_SIDES) / DISC_SIDES
        r = (self.hx[p] - GUARD)[:, None]
        v = np.empty((len(p), DISC_SIDES, 2))
        v[:, :, 0] = self.cx[p][:, None] + r * np.cos(ang)
        v[:, :, 1] = self.cy[p][:, None] + r * np.sin(ang)
        return v

    def ring(self, p: int) -> np.ndarray:
        """Part p's inner polygon (U), counter-clockwise."""
        q = np.array([p], dtype=np.int64)
        return (self._disc_verts(q) if self.cyl[p] else self._rect_verts(q))[0]

    def _build(self, parts: np.ndarray) -> None:
        """Build the edges of those of ``parts`` (>= 0) that have none yet."""
        n = len(self.cx)
        if self._have is None or self._nrm is None or self._off is None:  # all three at once
            self._have = np.zeros(n, dtype=bool)
            self._nrm, self._off = np.zeros((n, 4, 2)), np.zeros((n, 4))
        new = np.unique(parts[~self._have[parts]])
        if not len(new):
            return
        self._have[new] = True
        rect, disc = new[~self.cyl[new]], new[self.cyl[new]]
        if len(rect):
            self._nrm[rect], self._off[rect] = _halfspaces(self._rect_verts(rect),
                                                           np.full(len(rect), 4))
        if len(disc):
            if self._dnrm is None or self._doff is None:  # both at once
                self._dnrm, self._doff = np.zeros((n, DISC_SIDES, 2)), np.zeros((n, DISC_SIDES))
            self._dnrm[disc], self._doff[disc] = _halfspaces(self._disc_verts(disc),
                                                             np.full(len(disc), DISC_SIDES))

    def edges(self, parts: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The half-planes of ``parts`` (-1: none, a surface) grouped by their number:
        (positions in ``parts``, normals (m, W, 2), offsets (m, W)) for the rectangles and
        for the discs."""
        ok = parts >= 0
        self._build(parts[ok])
        p = np.where(ok, parts, 0)
        dsc = ok & self.cyl[p]
        out = []
        r = np.nonzero(ok & ~dsc)[0]
        if len(r):
            assert self._nrm is not None and self._off is not None  # _build made them
            out.append((r, self._nrm[p[r]], self._off[p[r]]))
        d = np.nonzero(dsc)[0]
        if len(d):
            assert self._dnrm is not None and self._doff is not None  # _build made them
            out.append((d, self._dnrm[p[d]], self._doff[p[d]]))
        return out


def _rotation(yaw_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cos, sin, odd quarter turn) of each yaw, reduced to [-45, 45] degrees as the kernel."""
    q = np.rint(yaw_deg / 90.0).astype(np.int64)
    a = np.rint(np.tan(np.radians(yaw_deg - 90.0 * q) / 2) * T_DEN) / T_DEN
    return (1 - a * a) / (1 + a * a), 2 * a / (1 + a * a), (q % 2) == 1


def _halfspaces(verts: np.ndarray, nv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Outward unit normals and offsets of counter-clockwise rings (padded edges: 0, inf)."""
    k, v = verts.shape[:2]
    nxt = np.roll(verts, -1, axis=1)
    nxt[np.arange(k), np.clip(nv - 1, 0, v - 1)] = verts[:, 0]  # each ring's closing edge
    d = nxt - verts
    length = np.hypot(d[..., 0], d[..., 1])
    real = (np.arange(v)[None, :] < nv[:, None]) & (length > 1e-9)
    with np.errstate(invalid="ignore", divide="ignore"):
        nrm = np.where(real[..., None], np.stack([d[..., 1], -d[..., 0]], -1)
                       / length[..., None], 0.0)
    return nrm, np.where(real, (nrm * verts).sum(-1), np.inf)


def footprints(inst: Instance) -> Footprints:
    """The footprints of every part of a non-plain instance (U)."""
    n = inst.n
    b = inst.boxes.astype(np.float64)
    yaw = inst.yaw_deg if inst.yaw_deg is not None else np.zeros(n)
    cyl = inst.cyl if inst.cyl is not None else np.zeros(n, dtype=bool)
    plain = ~cyl & (np.fmod(yaw, 90.0) == 0)
    res = float(g.RESOLUTION)
    c, s, odd = _rotation(np.where(cyl | plain, 0.0, yaw))
    hx0 = np.rint(inst.size_m[:, 0] / res)  # the quantised centre and half sizes (U)
    hy0 = np.rint(inst.size_m[:, 1] / res)
    hx, hy = np.where(odd, hy0, hx0), np.where(odd, hx0, hy0)
    cx = np.where(plain, (b[:, 0] + b[:, 1]) / 2, 2 * np.rint(inst.pos_m[:, 0] / res))
    cy = np.where(plain, (b[:, 2] + b[:, 3]) / 2, 2 * np.rint(inst.pos_m[:, 1] / res))
    hx = np.where(plain, (b[:, 1] - b[:, 0]) / 2, hx)  # a plain box: exactly its grid box
    hy = np.where(plain, (b[:, 3] - b[:, 2]) / 2, hy)
    c, s = np.where(plain, 1.0, c), np.where(plain, 0.0, s)
    return Footprints(plain, cyl, cx, cy, c, s, hx, hy, np.where(plain, 0.0, GUARD))


def _meet(fp: Footprints, i: np.ndarray, j: np.ndarray, ex: float, ey: float) -> np.ndarray:
    """The interiors of footprints i and j (j moved by (ex, ey)), each grown by GUARD,
    intersect: separating axes for two rectangles, the distance for a disc."""
    dx = fp.cx[j] + ex - fp.cx[i]
    dy = fp.cy[j] + ey - fp.cy[i]
    hxi, hyi = fp.hx[i] + GUARD, fp.hy[i] + GUARD
    hxj, hyj = fp.hx[j] + GUARD, fp.hy[j] + GUARD
    ci, si, cj, sj = fp.c[i], fp.s[i], fp.c[j], fp.s[j]
    out = np.ones(len(i), dtype=bool)
    for nx, ny in ((ci, si), (-si, ci), (cj, sj), (-sj, cj)):  # rectangles: 4 axes
        sa = hxi * np.abs(nx * ci + ny * si) + hyi * np.abs(ny * ci - nx * si)
        sb = hxj * np.abs(nx * cj + ny * sj) + hyj * np.abs(ny * cj - nx * sj)
        out &= np.abs(nx * dx + ny * dy) < sa + sb
    di, dj = fp.cyl[i], fp.cyl[j]
    both = di & dj
    out[both] = np.hypot(dx[both], dy[both]) < hxi[both] + hxj[both]
    for disc, sign in ((dj & ~di, 1.0), (di & ~dj, -1.0)):  # disc vs rectangle
        if not disc.any():
            continue
        rc, rs = (ci, si) if sign > 0 else (cj, sj)
        hx, hy = (hxi, hyi) if sign > 0 else (hxj, hyj)
        rad = hxj if sign > 0 else hxi
        qx = sign * (dx * rc + dy * rs)  # the disc's centre in the rectangle's frame
        qy = sign * (-dx * rs + dy * rc)
        gap = np.hypot(np.maximum(np.abs(qx) - hx, 0), np.maximum(np.abs(qy) - hy, 0))
        out[disc] = (gap < rad)[disc]
    return out


def _mixed(fp: Footprints, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Which pairs involve a non-plain part."""
    return ~(fp.plain[i] & fp.plain[j])


def _sure_meet(fp: Footprints, i: np.ndarray, j: np.ndarray, reach: float) -> np.ndarray:
    """Pairs whose footprints' inscribed circles still overlap (by SLACK) after any shift
    of length ``reach``: :func:`_meet` says True for every such shift (the circles lie in
    the shapes, and the shapes in their GUARD-grown selves), so it need not run."""
    d = np.hypot(fp.cx[j] - fp.cx[i], fp.cy[j] - fp.cy[i])
    return d + reach < fp.rin(i) + fp.rin(j) - SLACK


def overlap(fp: Footprints, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The pairs' footprints overlap with positive area (True for two plain boxes, which
    the caller decides on their rectangles)."""
    out = np.ones(len(i), dtype=bool)
    m = np.nonzero(_mixed(fp, i, j))[0]
    m = m[~_sure_meet(fp, i[m], j[m], 0.0)]
    out[m] = _meet(fp, i[m], j[m], 0.0, 0.0)
    return out


def wide(fp: Footprints, lo: np.ndarray, hi: np.ndarray, eps: int) -> np.ndarray:
    """The kernel's footprint overlap for pairs with a non-plain part: every shift of at
    most eps on x and on y leaves the footprints' interiors intersecting (by convexity:
    the four corner shifts); True for two plain boxes (decided by the caller)."""
    out = np.ones(len(lo), dtype=bool)
    m = np.nonzero(_mixed(fp, lo, hi))[0]
    m = m[~_sure_meet(fp, lo[m], hi[m], eps * SQRT2_UP)]
    for ex, ey in ((eps, eps), (eps, -eps), (-eps, eps), (-eps, -eps)):
        out[m] &= _meet(fp, lo[m], hi[m], float(ex), float(ey))
    return out


def attach(con: Contacts, fp: Footprints) -> None:
    """Give the contacts their polygons: ``con.fp``. A contact's polygon is the
    intersection of the inner footprints of its two parts (of the upper part alone on a
    surface; a plain pair's is its exact rectangle), used as the half-planes of both
    (:meth:`Footprints.edges`); vertices come later, for LP structures only
    (:func:`with_polygons`)."""
    con.fp, con.verts = fp, {}


def _polygons(con: Contacts) -> tuple[Footprints, dict[int, np.ndarray]]:
    """The contacts' footprints and polygon cache (set by :func:`attach`: this module's
    functions are asked only about contacts with shapes)."""
    assert con.fp is not None and con.verts is not None, "contacts without footprints"
    return con.fp, con.verts


def vertices(con: Contacts, k: int) -> np.ndarray:
    """Contact k's polygon (U): the vertices of the intersection of the inner footprints
    (convex), (0, 2) when it has no area (it carries nothing); cached."""
    fp, verts = _polygons(con)
    got = verts.get(k)
    if got is not None:
        return got
    up, lo = int(con.upper[k]), int(con.lower[k])
    pair = np.array([up, lo])
    rim = edge_allowance(con, pair, pair[::-1])
    gm = _shrunk(fp.ring(up), float(rim[0]))
    if lo >= 0:
        gm = gm.intersection(_shrunk(fp.ring(lo), float(rim[1])))
    xy = np.zeros((0, 2))
    if not gm.is_empty and gm.geom_type == "Polygon" and gm.area > 0:
        xy = np.asarray(gm.exterior.coords)[:-1]
    verts[k] = xy
    return xy


def _shrunk(ring: np.ndarray, by: float):  # noqa: ANN202 (a shapely Polygon)
    """A convex ring (U) as a shapely polygon, every edge moved ``by`` (U) inwards."""
    import shapely

    gm = shapely.Polygon(ring)
    return gm.buffer(-by, join_style="mitre") if by > 0 else gm


def edge_allowance(con: Contacts, parts: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per contact, how far (U) inside the edges of ``parts``' footprint it carries, the
    other side being ``other`` (-1: a surface, no edges): RIM on a cylinder, RIM_EDGE on a
    box against a cylinder, else 0."""
    cyl = _polygons(con)[0].cyl
    own = (parts >= 0) & cyl[np.maximum(parts, 0)]
    opp = (other >= 0) & cyl[np.maximum(other, 0)]
    return np.where(own, RIM, np.where(opp, RIM_EDGE, 0.0))


def rim_of(con: Contacts, up: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Per contact (upper, lower parts): the largest allowance of its two sides (U), for
    the inscribed-circle bounds."""
    return np.maximum(edge_allowance(con, up, lo), edge_allowance(con, lo, up))


def _depth(nrm: np.ndarray, off: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row and edge: how far (U) the points (U) lie inside the edge's line."""
    return off - (nrm[..., 0] * x[:, None] + nrm[..., 1] * y[:, None])


def edge_distance(con: Contacts, ks: np.ndarray, cx: np.ndarray, cy: np.ndarray,
                  at_least: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For centres of mass (m) over contacts ``ks``: (the largest shift t such that every
    shift by (+-t, +-t) stays in the polygon with its edges moved in by their allowance
    (:func:`edge_allowance`): the margin's test, < 0 beyond it; the signed distance to the
    nearest edge line of the shapes themselves: the message's), both in m. Inside the polygon the
    distance is to its boundary; outside, how far beyond the most violated edge line of
    the two footprints (negative either way). Minima over the edges of both parts.

    With ``at_least`` (m) only the contacts whose t may be below it are computed; the others
    (t provably >= at_least from the inscribed circles: t >= depth / sqrt 2) are +inf in
    both arrays."""
    fp = _polygons(con)[0]
    x, y = cx / U, cy / U
    t = np.full(len(ks), np.inf)
    e = np.full(len(ks), np.inf)
    up, lo = con.upper[ks], con.lower[ks]
    todo = None
    if at_least is not None:
        lb = np.minimum(fp.inner(up, x, y), fp.inner(lo, x, y)) - rim_of(con, up, lo)
        bound = np.where(lb >= 0, lb / SQRT2_UP, lb) - SLACK
        todo = np.nonzero(~(bound * U >= at_least))[0]
        up, lo, x, y = up[todo], lo[todo], x[todo], y[todo]
    tt, ee = np.full(len(up), np.inf), np.full(len(up), np.inf)
    for parts, other in ((up, lo), (lo, up)):
        rim = edge_allowance(con, parts, other)
        for sel, nrm, off in fp.edges(parts):
            d = _depth(nrm, off, x[sel], y[sel])
            l1 = np.abs(nrm[..., 0]) + np.abs(nrm[..., 1])
            tt[sel] = np.minimum(tt[sel], np.min((d - rim[sel, None])
                                                 / np.where(l1 > 0, l1, 1.0), axis=1))
            ee[sel] = np.minimum(ee[sel], np.min(d, axis=1))
    if todo is None:
        return tt * U, ee * U
    t[todo], e[todo] = tt * U, ee * U
    return t, e


def rect_inside(con: Contacts, ks: np.ndarray, x0: np.ndarray, x1: np.ndarray,
                y0: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """Whether the rectangles (m) lie inside the contacts' polygons (their four corners do:
    the polygons are convex; an empty polygon holds none). One pass: an edge's deepest
    corner is the centre's depth less the rectangle's support |nx| hx + |ny| hy."""
    fp = _polygons(con)[0]
    hx, hy = (x1 - x0) / (2 * U), (y1 - y0) / (2 * U)
    x, y = (x0 + x1) / (2 * U), (y0 + y1) / (2 * U)
    up, lo = con.upper[ks], con.lower[ks]
    # sure: the centre's depth bound less the rectangle's reach (|nx| hx + |ny| hy is at
    # most hypot(hx, hy)) is >= 0 on both parts' edges; the others are computed
    sure = (np.minimum(fp.inner(up, x, y), fp.inner(lo, x, y)) - rim_of(con, up, lo)
            - np.hypot(hx, hy) - SLACK >= 0)
    todo = np.nonzero(~sure)[0]
    x, y, hx, hy = x[todo], y[todo], hx[todo], hy[todo]
    worst = np.full(len(todo), np.inf)
    for parts, other in ((up[todo], lo[todo]), (lo[todo], up[todo])):
        rim = edge_allowance(con, parts, other)
        for sel, nrm, off in fp.edges(parts):
            d = _depth(nrm, off, x[sel], y[sel]) - rim[sel, None]
            d = d - (np.abs(nrm[..., 0]) * hx[sel, None] + np.abs(nrm[..., 1]) * hy[sel, None])
            worst[sel] = np.minimum(worst[sel], np.min(d, axis=1))
    sure[todo] = worst >= 0
    return sure


def with_polygons(grp: Group, con: Contacts, ks: np.ndarray) -> Group:
    """An LP group whose horizontal rows are the contacts ``ks`` in order: forces at the
    polygons' vertices (``px``, ``py``, m, padded by repeats), the friction force at the
    mean of the vertices (inside the convex polygon: the row's rectangle collapses onto
    that point); rows of contacts that carry nothing are dropped (their parts stay
    balanced: they must stand on their other contacts)."""
    rings = [vertices(con, int(k)) for k in ks.tolist()]
    keep = np.array([len(r) > 0 for r in rings], dtype=bool)
    rings = [r for r in rings if len(r)]
    hz = grp.hz[keep].copy()
    v = max([len(r) for r in rings] + [1])
    pts = np.zeros((len(rings), v, 2))
    for t, r in enumerate(rings):
        pts[t, :len(r)], pts[t, len(r):] = r, r[0]
        hz[t, 2:4], hz[t, 4:6] = r[:, 0].mean() * U, r[:, 1].mean() * U
    grp.hz = hz
    grp.px, grp.py = pts[..., 0] * U, pts[..., 1] * U
    return grp


def forest_text(name: str, carry: str, on: str, shift: float, edge: float,
                margin: float, rim: float = 0.0) -> str:
    """The forest's sentence on a contact polygon (to 0.1 mm, as for boxes): the edge
    distance from the polygon, the four shifts' reach when a slanted edge or a cylinder's
    rim allowance (``rim``, m) makes it smaller."""
    why = (f" (a contact with a cylinder carries {rim * 1000:.1f} mm inside its rim, "
           f"{RIM_EDGE * U * 1000:.1f} mm inside a box's edge)" if rim > 0 else "")
    if shift < -0.00005 and edge < -0.00005:
        return (f"{name} topples off {on}: its centre of mass{carry} is {-edge:.4f} m beyond "
                "the edge")
    if shift < -0.00005:
        return (f"{name} topples off {on}: its centre of mass{carry} is {max(edge, 0):.4f} m "
                f"inside the edge, {-shift:.4f} m beyond where it carries{why}")
    e, t = f"{max(edge, 0):.4f}", f"{max(shift, 0):.4f}"
    kind = "a slanted edge" if not why else why.strip(" ()")
    slant = "" if e == t else f", which a shift of {t} m along x and y reaches ({kind})"
    return (f"{name} stands with its centre of mass{carry} {e} m inside the edge of {on}{slant}; "
            f"the cell asks for {margin:.4f} m along x and y")
