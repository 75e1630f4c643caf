"""Contacts of a layout for the stability analysis: horizontal (a part on a surface or on
another part's top, any positive footprint overlap) and side contacts (touching vertical
faces), found by one pair search (all pairs for small layouts, the grid broad phase
otherwise). Split from :mod:`cellspec.solver.stability`, which uses them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cellspec.core import geometry as g

if TYPE_CHECKING:  # shapely is imported only for layouts with shapes
    from cellspec.solver.stability_shapes import Footprints

SMALL = 64  # parts: up to this many, contact pairs are found by testing all pairs


@dataclass
class Contacts:
    """Horizontal contacts: ``lower[k]`` carries ``upper[k]`` (lower -1: surface ``surf[k]``)
    over the rectangle ``rect[k]`` (x0, x1, y0, y1 in U) at height ``z[k]`` (U)."""

    lower: np.ndarray
    upper: np.ndarray
    rect: np.ndarray
    z: np.ndarray
    surf: list[str | None]
    # side contacts (s, 8) in U: (a, b, axis, u0, u1, z0, z1, plane): a's face at ``plane``
    # on ``axis`` (0 x, 1 y) touches b's opposite face over [u0, u1] x [z0, z1]
    sides: np.ndarray
    by_upper: _Index  # the contacts k of each upper part
    by_lower: _Index  # the contacts k of each lower part (index n: the surfaces)
    # contact polygons (layouts with yawed boxes or cylinders only, else None; ``rect`` is
    # then only their pair's enclosing-box overlap): see stability_shapes.attach
    fp: Footprints | None = None
    verts: dict[int, np.ndarray] | None = None


def _pairs(boxes: np.ndarray, eps: int, near: tuple[np.ndarray, np.ndarray] | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (i < j) of boxes within eps of each other: all pairs filtered for a small
    layout (cheaper than the grid), the broad phase otherwise, or, when given, ``near``
    filtered: every pair within some margin >= eps (each unordered pair once, any order;
    the relations' broad phase), so the same pairs in the same order as the broad phase."""
    n = len(boxes)
    if n > SMALL and near is not None:
        i, j = np.minimum(*near), np.maximum(*near)
        ok = g.contact(boxes[i], boxes[j], eps)
        i, j = i[ok], j[ok]
        srt = np.lexsort((j, i))
        return i[srt], j[srt]
    if n > SMALL:
        return g.broad_phase(boxes, eps)
    i, j = np.triu_indices(n, 1)
    a, b = boxes[i], boxes[j]
    ok = (g.olap(a, b, "x") >= -eps) & (g.olap(a, b, "y") >= -eps) & (g.olap(a, b, "z") >= -eps)
    return i[ok].astype(np.int64), j[ok].astype(np.int64)


def side_contacts(boxes: np.ndarray, eps: int,
                  pairs: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Vertical faces of two parts that touch (within eps) over an area wider than eps."""
    out = np.zeros((0, 8), dtype=np.int64)
    if len(boxes) < 2:
        return out
    i, j = pairs if pairs is not None else _pairs(boxes, eps)
    if not len(i):
        return out
    rows = []
    for axis, (lo, hi), other in ((0, (0, 1), (2, 3)), (1, (2, 3), (0, 1))):
        for a, b in ((i, j), (j, i)):
            ba, bb = boxes[a], boxes[b]
            touch = np.abs(ba[:, hi] - bb[:, lo]) <= eps
            u0 = np.maximum(ba[:, other[0]], bb[:, other[0]])
            u1 = np.minimum(ba[:, other[1]], bb[:, other[1]])
            z0 = np.maximum(ba[:, 4], bb[:, 4])
            z1 = np.minimum(ba[:, 5], bb[:, 5])
            ok = touch & (u1 - u0 > eps) & (z1 - z0 > eps)
            if ok.any():
                plane = (ba[ok, hi] + bb[ok, lo]) // 2
                rows.append(np.column_stack([a[ok], b[ok], np.full(int(ok.sum()), axis),
                                             u0[ok], u1[ok], z0[ok], z1[ok], plane]))
    if rows:
        out = np.concatenate(rows).astype(np.int64)
        out = out[np.lexsort((out[:, 2], out[:, 1], out[:, 0]))]
    return out


class _Index:
    """Contacts of a part, as compressed rows: ``index[p]`` lists contact numbers."""

    def __init__(self, keys: np.ndarray, n: int):
        self.perm = np.argsort(keys, kind="stable")
        self.ptr = np.searchsorted(keys[self.perm], np.arange(n + 1))
        self.identity = bool(np.array_equal(self.perm, np.arange(len(keys))))

    def __getitem__(self, p: int) -> list[int]:
        a, b = int(self.ptr[p]), int(self.ptr[p + 1])
        return list(range(a, b)) if self.identity else self.perm[a:b].tolist()


def _rests_on(a: np.ndarray, b: np.ndarray, eps: int) -> np.ndarray:
    """b's bottom meets a's top within eps over a footprint overlap of any positive width:
    a sliver narrower than the contact tolerance still carries (issue 14), for a part that
    also rests on something wider (see :func:`contacts`)."""
    return ((np.abs(b[..., 4] - a[..., 5]) <= eps) & (g.olap(a, b, "x") > 0)
            & (g.olap(a, b, "y") > 0))


def contacts(boxes: np.ndarray, eps: int, surfaces: dict[str, int],
             fp: Footprints | None = None,
             near: tuple[np.ndarray, np.ndarray] | None = None) -> Contacts:
    """Every surface and part-on-part contact of the layout, and its side contacts. With
    footprints ``fp`` (a layout with yawed boxes or cylinders; ``boxes`` enclose them) the
    pairs with a non-plain part are decided on the footprints and every contact gets its
    polygon (cellspec/solver/stability_shapes.py). ``near``: pairs already known to hold
    every pair within eps (see :func:`_pairs`)."""
    if fp is not None:
        from cellspec.solver import stability_shapes as shp
    n = len(boxes)
    low, up, rects, zs = [], [], [], []
    surf: list[str | None] = []
    seen: set[int] = set()
    for name, z in sorted(surfaces.items(), key=lambda kv: (kv[1], kv[0])):
        on = np.nonzero(np.abs(boxes[:, 4] - z) <= eps)[0]
        for p in on.tolist():
            if p in seen:  # grounded on two surfaces within eps: one contact
                continue
            seen.add(p)
            low.append(-1)
            up.append(p)
            rects.append(boxes[p, :4])
            zs.append(z)
            surf.append(name)
    lower = np.array(low, dtype=np.int64)
    upper = np.array(up, dtype=np.int64)
    rect = np.array(rects, dtype=np.int64).reshape(-1, 4)
    zz = np.array(zs, dtype=np.int64)
    pairs = _pairs(boxes, eps, near) if n > 1 else None
    if pairs is not None:
        i, j = pairs
        bi, bj = boxes[i], boxes[j]
        s_ij = _rests_on(bi, bj, eps)
        s_ji = _rests_on(bj, bi, eps)
        if fp is not None:  # enclosing boxes overlap: do the footprints?
            fo = shp.overlap(fp, i, j)
            s_ij &= fo
            s_ji &= fo
        lo = np.concatenate([i[s_ij], j[s_ji]])
        hi = np.concatenate([j[s_ij], i[s_ji]])
        # a part with no support wider than eps rests on nothing (gravity's to report):
        # its slivers are dropped, so it is held fixed here and reported once
        a, b = boxes[lo], boxes[hi]
        wide = g.footprint(a, b, eps)
        if fp is not None:
            wide &= shp.wide(fp, lo, hi, eps)
        held = np.zeros(n, dtype=bool)
        held[hi[wide]] = True
        held[upper] = True  # on a surface
        keep = held[hi]
        lo, hi = lo[keep], hi[keep]
        order = np.lexsort((lo, hi))
        lo, hi = lo[order], hi[order]
        a, b = boxes[lo], boxes[hi]
        r = np.stack([np.maximum(a[:, 0], b[:, 0]), np.minimum(a[:, 1], b[:, 1]),
                      np.maximum(a[:, 2], b[:, 2]), np.minimum(a[:, 3], b[:, 3])], axis=1)
        lower = np.concatenate([lower, lo])
        upper = np.concatenate([upper, hi])
        rect = np.concatenate([rect, r])
        zz = np.concatenate([zz, b[:, 4]])
        surf = surf + [None] * len(lo)
    srt = np.lexsort((lower, upper))  # by upper part, then lower (surfaces first)
    lower, upper, rect, zz = lower[srt], upper[srt], rect[srt], zz[srt]
    surf = [surf[k] for k in srt.tolist()]
    sides = side_contacts(boxes, eps, pairs)
    if fp is not None:  # yawed faces: no side contacts (they only add forces: conservative)
        sides = sides[fp.plain[sides[:, 0]] & fp.plain[sides[:, 1]]]
    c = Contacts(lower, upper, rect, zz, surf, sides, _Index(upper, n),
                 _Index(np.where(lower >= 0, lower, n), n))
    if fp is not None:
        shp.attach(c, fp)
    return c
