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

For a plain instance (every part an axis-aligned box) :func:`rules_of` gives
:class:`BoxRules`: the box model as before, none of the shape rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import shapes as ks
from cellspec.core.shapes import inner_half
from cellspec.layout import Layout
from cellspec.solver.cpsat import exact
from cellspec.solver.instance import BoxU, Instance


class PartRules:
    """What the placement model needs to know of the parts' shapes, chosen once per model
    by :func:`rules_of` (:class:`BoxRules` or :class:`ShapeRules`); the model asks it which
    parts need the exact shape rules and never whether the parts are plain."""

    def __init__(self, inst: Instance, odd: np.ndarray):
        self.inst = inst
        self.odd = odd  # per part: a yawed box or a cylinder (or may turn to such a yaw)
        self._sh: ks.ShapesU | None = None
        self._inner: np.ndarray | None = None

    @property
    def sh(self) -> ks.ShapesU:
        """The parts as shapes (the kernel's; computed when first asked)."""
        if self._sh is None:
            self._sh = self.inst.kernel().as_shapes()
        return self._sh

    @property
    def inner(self) -> np.ndarray:
        """(n, 2): half extents on x and y of the square inscribed in each footprint."""
        if self._inner is None:
            self._inner = inner_half(self.sh)
        return self._inner

    def any(self, *parts: int) -> bool:
        """Some of ``parts`` is a yawed box or a cylinder."""
        return any(bool(self.odd[p]) for p in parts)

    def some(self) -> bool:
        """Some part of the model is a yawed box or a cylinder."""
        return bool(self.odd.any())

    def components(self) -> np.ndarray:
        """The structures (connected components) the model's rigid shifts move."""
        raise NotImplementedError

    def inner_exprs(self) -> list[list[Any]] | None:
        """Per part, its inscribed half extents on x and y as ints the model may turn into
        expressions (:mod:`.rotate`), or None when the model supports nothing by them."""
        raise NotImplementedError

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


def box_components(boxes: np.ndarray, eps: int) -> np.ndarray:
    """Connected structures of axis-aligned boxes: parts joined by contact (on the boxes)."""
    from cellspec.solver.graph import components

    i, j = g.broad_phase(boxes, eps)
    keep = g.contact(boxes[i], boxes[j], eps)
    return components(len(boxes), i[keep], j[keep])


class BoxRules(PartRules):
    """Every part a plain box that stays one: the box model (contact tolerance included)
    decides every relation; no part needs the exact shape rules."""

    def __init__(self, inst: Instance):
        super().__init__(inst, np.zeros(inst.n, dtype=bool))

    def any(self, *parts: int) -> bool:
        """None of them (asked per pair: kept as cheap as the model's old None test)."""
        return False

    def components(self) -> np.ndarray:
        """Structures by contact of the boxes."""
        return box_components(self.inst.boxes, self.inst.eps)

    def inner_exprs(self) -> list[list[Any]] | None:
        """None: a plain box is supported by its own box."""
        return None


class ShapeRules(PartRules):
    """What the placement model needs to know about the non-plain parts of ``inst``."""

    def __init__(self, inst: Instance, extra: np.ndarray | None = None):
        """``extra``: plain parts also treated as non-plain (they may be turned to a yaw
        that is not a multiple of 90 degrees, :mod:`.rotate`); with them ``inst`` may be
        plain (its boxes are then its shapes)."""
        assert inst.shapes is not None or extra is not None
        sh = inst.kernel().as_shapes()
        odd = ~np.asarray(sh.plain, dtype=bool)
        super().__init__(inst, odd if extra is None else odd | extra)
        self._sh = sh

    def components(self) -> np.ndarray:
        """Structures by exact contact of the shapes."""
        return exact.components(self.inst)

    def inner_exprs(self) -> list[list[Any]] | None:
        """The inscribed half extents on x and y, per part."""
        return [[int(self.inner[i, a]) for a in range(2)] for i in range(self.inst.n)]


def rules_of(inst: Instance, extra: np.ndarray | None = None) -> PartRules:
    """The rules of a placement model, chosen once: :class:`ShapeRules` when some part is
    a yawed box or a cylinder, or may turn to such a yaw (``extra``), else :class:`BoxRules`
    (solver-specific: the CP-SAT model adds shape rules only when some part needs them)."""
    odd = ~np.asarray(inst.kernel().plain_mask(), dtype=bool)
    if extra is not None:
        odd = odd | extra
    return ShapeRules(inst, extra) if odd.any() else BoxRules(inst)


def kept_yaw(inst: Instance, layout: Layout, i: int) -> float | None:
    """The yaw a move of part i reports as kept: a yawed box's or a cylinder's own yaw as
    written (translated, not turned), None for a plain box or a yaw of 0."""
    if bool(inst.kernel().plain_mask()[i]) or layout.yaw is None:
        return None
    y = float(layout.yaw[i])
    return y if y != 0.0 else None


__all__ = ["BoxRules", "PartRules", "ShapeRules", "box_components", "inner_half", "kept_yaw",
           "rules_of"]
