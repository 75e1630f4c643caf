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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cellspec.core import geometry as g
from cellspec.world.db import Relation

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
           eps: float = EPS_M, near_d: float = NEAR_M) -> list[Relation]:
    """Every relation among the boxes (ids with centres and sizes), sorted."""
    out: set[Relation] = set()
    n = len(ids)
    if n == 0:
        return []
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
        out.add(Relation("on", ids[i], ids[j]))
    for name, z in surfaces:
        zu = _u(z)
        for i in np.nonzero(g.on_surface(b, zu, e))[0]:
            out.add(Relation("on", ids[i], name))
            resting[i] = True
    # [i, j]: box i lies in box j (the corners of j broadcast along the last axis)
    ins = g.inside_box(np.broadcast_to(a_, (n, n, 6)), tuple(b[:, 0::2].T), tuple(b[:, 1::2].T), e)
    vol = np.prod(b[:, 1::2] - b[:, 0::2], axis=1)
    ins &= vol[:, None] < vol[None, :]  # strictly smaller: equal boxes are not inside each other
    for i, j in zip(*np.nonzero(ins), strict=True):
        out.add(Relation("inside", ids[i], ids[j]))
    nr = g.near(a_, c_, nd)
    for i, j in zip(*np.nonzero(nr), strict=True):
        if ids[i] < ids[j]:
            out.add(Relation("near", ids[i], ids[j]))
    if gripper is not None:
        gb = boxes(np.asarray([gripper[0]]), np.asarray([gripper[1]]))[0]
        touch = g.supports(b, gb[None, :], e)  # the pad rests on the part's top
        for i in np.nonzero(touch & ~resting)[0]:
            out.add(Relation("holding", "gripper", ids[i]))
    return sorted(out, key=lambda r: (r.rel, r.a, r.b))
