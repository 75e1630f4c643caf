"""Pair relations for sequencing and repair, decided exactly for yawed boxes and cylinders.

Each is decided by the instance's geometry kernel (cellspec/core/kernel.py): a plain
instance (every part an axis-aligned box) on its boxes, otherwise on the exact shapes,
which decides plain pairs the same way and the others on the shapes, never on their
enclosing boxes. ``flanks`` is along the gripped part's own axes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cellspec.core import geometry as g
from cellspec.solver.instance import Instance


def contact(inst: Instance, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """contact(i, j) row by row."""
    return inst.kernel().pair("contact", i, j, inst.eps)


def supports(inst: Instance, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """supports(i, j): i carries j, row by row."""
    return inst.kernel().pair("supports", i, j, inst.eps)


def supports_one(inst: Instance) -> Callable[[int, int], bool]:
    """supports(j, k) of one pair at a time, by the instance's kernel."""
    kern, eps = inst.kernel(), inst.eps
    return lambda j, k: bool(kern.pair("supports", np.array([j]), np.array([k]), eps)[0])


def flanks(inst: Instance, q: np.ndarray, p: np.ndarray, axis: str) -> np.ndarray:
    """q blocks a parallel grip of p along p's own ``axis``, row by row."""
    return inst.kernel().flanks(q, p, axis, inst.opening, inst.depth, inst.eps)


def margin(inst: Instance, flanks: bool) -> int:
    """The broad-phase margin (U) beyond which none of these relations holds."""
    m = g.relation_margin(inst.boxes, inst.eps, flanks=flanks, opening=inst.opening,
                          depth=inst.depth)
    if flanks:
        m = max(m, inst.kernel().flanks_margin(inst.eps, inst.opening, inst.depth))
    return m


def components(inst: Instance) -> np.ndarray:
    """Connected structures: parts joined by contact."""
    from cellspec.solver.graph import components as comps

    i, j = g.broad_phase(inst.boxes, inst.eps)
    keep = contact(inst, i, j)
    return comps(inst.n, i[keep], j[keep])
