"""Yawed boxes and cylinders that repair may translate (issue 22 item 3, docs/shapes.md).

A non-plain part keeps its radius, and its yaw unless ``--allow-rotate`` turns it
(:mod:`.rotate`: the two boxes below at each candidate yaw); the placement model moves its
centre on the 0.1 mm grid and sees it through two axis-aligned boxes about that centre:

* the *outer* box: its enclosing box (``Instance.boxes``, rounded outward): a superset of
  the shape, so keeping the outer box out of another part, out of a keep-out or inside
  the workspace keeps the shape so (conservative);
* the *inner* box: an axis-aligned square inscribed in the footprint (a subset), for
  support: a moved part rests on another only where the two inner boxes overlap by more
  than eps and the upper part's centre lies over the lower part's inner box (with the
  stability margin), so the exact footprints overlap and the centre is carried.

A relation involving a non-plain part gets no contact tolerance in the model (faces meet
exactly, boxes stay apart or inside exactly), except that a pair whose relative position
does not change (neither moved, or both shifted together) keeps whatever the exact kernel
decided for it in the input: the enclosing boxes of two touching shapes usually overlap,
and that must not force a move. Clingo's exact re-verification (with stability and its
stages) stays the judge of every repair: a layout is only reported when it passes.

For a plain instance (every part an axis-aligned box) nothing here runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import shapes as ks
from cellspec.core.shapes import inner_half
from cellspec.layout import Layout
from cellspec.solver.instance import BoxU, Instance


class ShapeRules:
    """What the placement model needs to know about the non-plain parts of ``inst``."""

    def __init__(self, inst: Instance, extra: np.ndarray | None = None):
        """``extra``: plain parts also treated as non-plain (they may be turned to a yaw
        that is not a multiple of 90 degrees, :mod:`.rotate`); with them ``inst`` may be
        plain (its boxes are then its shapes)."""
        assert inst.shapes is not None or extra is not None
        self.inst = inst
        self.sh = inst.kernel().as_shapes()
        self.odd = ~np.asarray(self.sh.plain, dtype=bool)
        if extra is not None:
            self.odd = self.odd | extra
        self.inner = inner_half(self.sh)

    def any(self, *parts: int) -> bool:
        """Some of ``parts`` is a yawed box or a cylinder."""
        return any(bool(self.odd[p]) for p in parts)

    def _pair(self, rel: Any, i: int, j: int) -> bool:
        return bool(rel(self.sh, np.array([i]), np.array([j]), self.inst.eps)[0])

    def apart0(self, i: int, j: int) -> bool:
        """In the input, i and j do not overlap (exact)."""
        return not self._pair(ks.overlaps, i, j)

    def supports0(self, j: int, i: int) -> bool:
        """In the input, j supports i (exact)."""
        return self._pair(ks.supports, j, i)

    def inside0(self, i: int, z: BoxU | g.HalfSpaceU) -> bool:
        """In the input, part i lies inside zone z (exact, eps allowed)."""
        idx = np.array([i])
        if isinstance(z, BoxU):
            return bool(ks.inside_box(self.sh, idx, z.lo, z.hi, self.inst.eps)[0])
        return bool(ks.inside_half(self.sh, idx, z, self.inst.eps)[0])

    def clear0(self, i: int, z: BoxU | g.HalfSpaceU) -> bool:
        """In the input, part i does not enter keep-out z (exact)."""
        idx = np.array([i])
        if isinstance(z, BoxU):
            return not bool(ks.intersects_box(self.sh, idx, z.lo, z.hi, self.inst.eps)[0])
        return not bool(ks.intersects_half(self.sh, idx, z, self.inst.eps)[0])


def kept_yaw(inst: Instance, layout: Layout, i: int) -> float | None:
    """The yaw a move of part i reports as kept: a yawed box's or a cylinder's own yaw as
    written (translated, not turned), None for a plain box or a yaw of 0."""
    if bool(inst.kernel().plain_mask()[i]) or layout.yaw is None:
        return None
    y = float(layout.yaw[i])
    return y if y != 0.0 else None


__all__ = ["ShapeRules", "inner_half", "kept_yaw"]
