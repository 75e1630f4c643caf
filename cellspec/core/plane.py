"""Planar predicates on convex footprints (rotated rectangles and discs), written once over
numpy arrays of any number type: float64 for the fast path, object arrays of Fractions
for the exact re-decision (cellspec/core/shapes.py decides which).

Every predicate returns a *margin* whose sign is the verdict (``> 0`` for the strict ones,
``>= 0`` for the closed ones), divided by a positive scale of the lengths involved so a
float margin is dimensionless and its rounding error is far below :data:`TOL`.

Notation: footprints A and B, a shift set E (a rectangle centred at the origin: the square
[-eps, eps]^2 or a segment), d = centre(B) - centre(A).

* :func:`covers`: E lies in the interior of B - A (every shift in E leaves the interiors
  of A + shift and B intersecting): ``overlaps``, footprint overlap, ``intersects``, ``flanks``.
* :func:`meets`: (B - A) meets E (some shift in E makes the footprints touch): ``contact``,
  ``near``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

TOL = 1e-9  # a float margin within TOL of 0 is re-decided exactly


@dataclass(frozen=True)
class Geo:
    """Footprints as arrays: centre (cx, cy), unit axis (c, s), half extents (hx, hy) along
    (c, s) and (-s, c); a disc has radius hx (its axis is ignored)."""

    cx: Any
    cy: Any
    c: Any
    s: Any
    hx: Any
    hy: Any
    disc: np.ndarray

    def take(self, k: np.ndarray) -> Geo:
        """The rows ``k``."""
        return Geo(self.cx[k], self.cy[k], self.c[k], self.s[k], self.hx[k], self.hy[k],
                   self.disc[k])


def _abs(x: Any) -> Any:
    return np.abs(x)


def support(X: Geo, nx: Any, ny: Any) -> Any:
    """Half the width of X projected on the unit direction (nx, ny)."""
    rect = X.hx * _abs(nx * X.c + ny * X.s) + X.hy * _abs(ny * X.c - nx * X.s)
    return np.where(X.disc, X.hx, rect)


def _normals(X: Geo) -> list[tuple[Any, Any]]:
    return [(X.c, X.s), (-X.s, X.c)]


def _scale(A: Geo, B: Geo, E: Geo, dx: Any, dy: Any) -> Any:
    """A positive bound on every length in the pair (1 + the sum of their sizes)."""
    return 1 + _abs(dx) + _abs(dy) + A.hx + A.hy + B.hx + B.hy + E.hx + E.hy


def _sat(A: Geo, B: Geo, E: Geo, dx: Any, dy: Any, axes: list[Geo], sign_e: int) -> Any:
    """min over the normals of ``axes`` of sA + sB + sign_e * sE - |n . d| (rectangles)."""
    out = None
    for X in axes:
        for nx, ny in _normals(X):
            m = (support(A, nx, ny) + support(B, nx, ny) + sign_e * support(E, nx, ny)
                 - _abs(nx * dx + ny * dy))
            out = m if out is None else np.minimum(out, m)
    return out


def _corners(X: Geo) -> list[tuple[Any, Any]]:
    """The four corners of rectangle X (relative to its centre)."""
    out = []
    for a in (1, -1):
        for b in (1, -1):
            out.append((a * X.hx * X.c - b * X.hy * X.s, a * X.hx * X.s + b * X.hy * X.c))
    return out


def _dist2_rect(px: Any, py: Any, X: Geo) -> Any:
    """Squared distance from the points (px, py) (relative to X's centre) to rectangle X."""
    u = _abs(px * X.c + py * X.s) - X.hx
    v = _abs(py * X.c - px * X.s) - X.hy
    zero = u * 0
    u = np.maximum(u, zero)
    v = np.maximum(v, zero)
    return u * u + v * v


def _min_dist2(E: Geo, B: Geo, dx: Any, dy: Any) -> Any:
    """Squared distance between the disjoint rectangles E (at 0) and B (at d): the least
    vertex-to-rectangle distance either way (exact for convex polygons that do not meet)."""
    ms = [_dist2_rect(px - dx, py - dy, B) for px, py in _corners(E)]
    ms += [_dist2_rect(px + dx, py + dy, E) for px, py in _corners(B)]
    out = ms[0]
    for m in ms[1:]:
        out = np.minimum(out, m)
    return out


def _order(A: Geo, B: Geo, dx: Any, dy: Any) -> tuple[Geo, Geo, Any, Any]:
    """Swap each row so that a disc, if any, is A (both predicates are symmetric in A, B
    because E = -E; d changes sign)."""
    sw = B.disc & ~A.disc
    if not sw.any():
        return A, B, dx, dy

    def pick(X: Geo, Y: Geo, disc: np.ndarray) -> Geo:
        """X's rows where not swapped, Y's where swapped; ``disc`` as given."""
        return Geo(np.where(sw, Y.cx, X.cx), np.where(sw, Y.cy, X.cy),
                   np.where(sw, Y.c, X.c), np.where(sw, Y.s, X.s),
                   np.where(sw, Y.hx, X.hx), np.where(sw, Y.hy, X.hy), disc)

    A2 = pick(A, B, A.disc | B.disc)
    B2 = pick(B, A, A.disc & B.disc)
    return A2, B2, np.where(sw, -dx, dx), np.where(sw, -dy, dy)


def _split(A: Geo, B: Geo, E: Geo, fns: tuple) -> Any:
    """Order the rows (a disc first), then evaluate ``fns`` (rectangles, a disc and a
    rectangle, two discs) each on its own rows only."""
    dx, dy = B.cx - A.cx, B.cy - A.cy
    A, B, dx, dy = _order(A, B, dx, dy)
    L = _scale(A, B, E, dx, dy)
    out = np.empty(len(A.disc), dtype=np.asarray(dx).dtype)
    for fn, rows in zip(fns, (~A.disc, A.disc & ~B.disc, A.disc & B.disc), strict=True):
        k = np.nonzero(rows)[0]
        if len(k) == len(rows):
            return fn(A, B, E, dx, dy, L)
        if len(k):
            out[k] = fn(A.take(k), B.take(k), E.take(k), dx[k], dy[k], L[k])
    return out


def _covers_rr(A: Geo, B: Geo, E: Geo, dx: Any, dy: Any, L: Any) -> Any:
    # rectangles: E inside the polygon B - A, whose normals are A's and B's
    return _sat(A, B, E, dx, dy, [A, B], -1) / L


def _covers_dr(A: Geo, B: Geo, E: Geo, dx: Any, dy: Any, L: Any) -> Any:
    # a disc A: every corner of E within A's radius of B (centred at d)
    dr = None
    for px, py in _corners(E):
        m = A.hx * A.hx - _dist2_rect(px - dx, py - dy, B)
        dr = m if dr is None else np.minimum(dr, m)
    return dr / (L * L)


def _covers_dd(A: Geo, B: Geo, E: Geo, dx: Any, dy: Any, L: Any) -> Any:
    # two discs: every corner of E within ra + rb of d
    R = A.hx + B.hx
    dd = None
    for px, py in _corners(E):
        ex, ey = px - dx, py - dy
        m = R * R - (ex * ex + ey * ey)
        dd = m if dd is None else np.minimum(dd, m)
    return dd / (L * L)


def covers(A: Geo, B: Geo, E: Geo) -> Any:
    """Strict: E lies in the interior of B - A. Margin > 0 means true."""
    return _split(A, B, E, (_covers_rr, _covers_dr, _covers_dd))


def _meets_rr(A: Geo, B: Geo, E: Geo, dx: Any, dy: Any, L: Any) -> Any:
    # rectangles: A + E (an octagon: normals of A and E) meets B
    return _sat(A, B, E, dx, dy, [A, B, E], 1) / L


def _meets_dr(A: Geo, B: Geo, E: Geo, dx: Any, dy: Any, L: Any) -> Any:
    # a disc A: the distance between E and B (at d) is at most A's radius
    inter = _sat(_point(A), B, E, dx, dy, [B, E], 1) / L
    return np.maximum(inter, (A.hx * A.hx - _min_dist2(E, B, dx, dy)) / (L * L))


def _meets_dd(A: Geo, B: Geo, E: Geo, dx: Any, dy: Any, L: Any) -> Any:
    # two discs: the distance from d to E is at most ra + rb
    R = A.hx + B.hx
    return (R * R - _dist2_rect(dx, dy, E)) / (L * L)


def meets(A: Geo, B: Geo, E: Geo) -> Any:
    """Closed: B - A meets E. Margin >= 0 means true."""
    return _split(A, B, E, (_meets_rr, _meets_dr, _meets_dd))


def _point(A: Geo) -> Geo:
    """A's centre as a degenerate rectangle (the disc's radius moved out of the SAT)."""
    z = A.hx * 0
    return Geo(A.cx, A.cy, A.c * 0 + 1, z, z, z, np.zeros(len(A.disc), dtype=bool))
