"""Pair relations for sequencing and repair, decided exactly for yawed boxes and cylinders.

A plain instance (every part an axis-aligned box) is decided on its boxes by
cellspec/core/geometry.py exactly as before; otherwise by the exact kernel
(cellspec/core/shapes.py), which decides plain pairs the same way and the others on the
shapes, never on their enclosing boxes. ``flanks`` is along the gripped part's own axes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import shapes as ks
from cellspec.solver.instance import Instance


def contact(inst: Instance, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """contact(i, j) row by row."""
    if inst.shapes is None:
        return g.contact(inst.boxes[i], inst.boxes[j], inst.eps)
    return ks.contact(inst.shapes, i, j, inst.eps)


def supports(inst: Instance, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """supports(i, j): i carries j, row by row."""
    if inst.shapes is None:
        return g.supports(inst.boxes[i], inst.boxes[j], inst.eps)
    return ks.supports(inst.shapes, i, j, inst.eps)


def supports_one(inst: Instance) -> Callable[[int, int], bool]:
    """supports(j, k) of one pair at a time: on the boxes (plain), else by the kernel."""
    b, eps = inst.boxes, inst.eps
    if inst.shapes is None:
        return lambda j, k: bool(g.supports(b[j], b[k], eps))
    sh = inst.shapes
    return lambda j, k: bool(ks.supports(sh, np.array([j]), np.array([k]), eps)[0])


def flanks(inst: Instance, q: np.ndarray, p: np.ndarray, axis: str) -> np.ndarray:
    """q blocks a parallel grip of p along p's own ``axis``, row by row."""
    if inst.shapes is None:
        return g.flanks(inst.boxes[q], inst.boxes[p], axis, inst.opening, inst.depth, inst.eps)
    return ks.flanks(inst.shapes, q, p, axis, inst.opening, inst.depth, inst.eps)


def margin(inst: Instance, flanks: bool) -> int:
    """The broad-phase margin (U) beyond which none of these relations holds."""
    m = g.relation_margin(inst.boxes, inst.eps, flanks=flanks, opening=inst.opening,
                          depth=inst.depth)
    if flanks and inst.shapes is not None:
        m = max(m, ks.flanks_margin(inst.shapes, inst.eps, inst.opening, inst.depth))
    return m


def components(inst: Instance) -> np.ndarray:
    """Connected structures: parts joined by contact."""
    from cellspec.solver.graph import components as comps

    i, j = g.broad_phase(inst.boxes, inst.eps)
    keep = contact(inst, i, j)
    return comps(inst.n, i[keep], j[keep])
