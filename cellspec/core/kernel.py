"""One geometry interface, two kernels: every built-in relation of a layout's parts.

:class:`BoxKernel` decides on axis-aligned integer boxes, exact on the grid
(cellspec/core/geometry.py); :class:`ShapeKernel` on yawed boxes and vertical cylinders
(cellspec/core/shapes.py), which decides a pair of two plain boxes exactly as the box
kernel does and the other pairs on their footprints. A caller asks :func:`kernel_of` for
the one that fits a layout and never branches on whether its parts are plain; which
function a relation means on either kernel is the relation's own
(cellspec/core/relations.py: ``grid`` and ``shape``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import shapes as sh
from cellspec.core.relations import BUILTINS


class BoxKernel:
    """Axis-aligned boxes (n, 6) in U: every relation exact on the integer grid."""

    # The kernel's capabilities, asked by name instead of whether the parts are plain:
    #: ``boxes`` are the parts themselves (not enclosing boxes): every footprint is its box's
    #: rectangle, so a backend or analysis without a shape encoding decides them as they are
    boxes_are_parts: ClassVar[bool] = True
    #: every relation is decided on the parts' integer corners: a layout on the grid is
    #: decided exactly as written, and the exact rational re-decision of the boxes on a
    #: finer grid (solver/rounding_exact.py) applies
    exact_on_grid: ClassVar[bool] = True

    def __init__(self, boxes: np.ndarray):
        self.boxes = boxes

    def __len__(self) -> int:
        return len(self.boxes)

    def take(self, idx: np.ndarray) -> BoxKernel:
        """The parts ``idx`` in that order (a placement permutation)."""
        return BoxKernel(self.boxes[idx])

    def pair(self, rel: str, i: np.ndarray, j: np.ndarray, d: int) -> np.ndarray:
        """``rel(i, j)`` row by row (``d``: eps, or near's distance)."""
        fn = BUILTINS[rel].grid
        assert fn is not None, rel
        return fn(self.boxes[i], self.boxes[j], d)

    def flanks(self, q: np.ndarray, p: np.ndarray, axis: str, opening: int | None,
               depth: int | None, eps: int) -> np.ndarray:
        """q blocks a parallel grip of p along ``axis``, row by row."""
        return g.flanks(self.boxes[q], self.boxes[p], axis, opening, depth, eps)

    def zone(self, rel: str, zone: Any, eps: int) -> np.ndarray:
        """``inside`` or ``intersects`` of every part and one zone: a half-space
        (geometry.HalfSpaceU) or a box (anything with ``lo`` and ``hi``)."""
        r = BUILTINS[rel]
        assert r.grid is not None and r.half is not None, rel
        if isinstance(zone, g.HalfSpaceU):
            return r.half[0](self.boxes, zone, eps)
        return r.grid(self.boxes, zone.lo, zone.hi, eps)

    def dense(self, rel: str, d: int) -> np.ndarray:
        """The (n, n) matrix of ``rel(i, j)`` over every pair (the reference's)."""
        fn = BUILTINS[rel].grid
        assert fn is not None, rel
        return fn(self.boxes[:, None, :], self.boxes[None, :, :], d)

    def dense_flanks(self, axis: str, opening: int | None, depth: int | None,
                     eps: int) -> np.ndarray:
        """The (n, n) matrix of ``flanks(q, p, axis)`` over every pair."""
        return g.flanks(self.boxes[:, None, :], self.boxes[None, :, :], axis, opening,
                        depth, eps)

    def flanks_margin(self, eps: int, opening: int | None, depth: int | None) -> int:
        """The broad-phase margin (U) beyond which no ``flanks`` pair can hold."""
        return g.relation_margin(self.boxes, eps, flanks=True, opening=opening, depth=depth)

    def plain_mask(self) -> np.ndarray:
        """(n,) bool: per part, an axis-aligned box (every part, here)."""
        return np.ones(len(self.boxes), dtype=bool)

    def as_shapes(self) -> sh.ShapesU:
        """The parts as shapes (axis-aligned boxes at yaw 0, here)."""
        n = len(self.boxes)
        return sh.shapes_u(self.boxes, np.zeros(n), np.zeros(n, dtype=bool))

    def inner_half(self) -> np.ndarray:
        """(n, 2) int64: half extents (U) on x and y of an axis-aligned box about each
        part's centre inside its footprint (the box itself, here)."""
        b = self.boxes
        return np.stack([(b[:, 1] - b[:, 0]) // 2, (b[:, 3] - b[:, 2]) // 2], axis=1)

    def extent_xy(self) -> tuple[np.ndarray, np.ndarray]:
        """Half the world-axis extents (U, float64) on x and on y: the boxes' own."""
        b = self.boxes
        return ((b[:, 1] - b[:, 0]) / 2.0).astype(np.float64), \
            ((b[:, 3] - b[:, 2]) / 2.0).astype(np.float64)

    def footprint(self, i: np.ndarray, j: np.ndarray, eps: int) -> np.ndarray:
        """The footprints of i and j overlap in the plane by more than eps, row by row."""
        return g.footprint(self.boxes[i], self.boxes[j], eps)


class ShapeKernel(BoxKernel):
    """Yawed boxes and vertical cylinders (shapes.ShapesU); ``boxes`` are their enclosing
    boxes (exact for the plain parts)."""

    boxes_are_parts: ClassVar[bool] = False  # a yawed box's or a cylinder's box encloses it
    exact_on_grid: ClassVar[bool] = False  # yaws round to rational rotations (shapes.ties)

    def __init__(self, shapes: sh.ShapesU):
        super().__init__(shapes.box)
        self.shapes = shapes

    def take(self, idx: np.ndarray) -> ShapeKernel:
        """The parts ``idx`` in that order (a placement permutation)."""
        return ShapeKernel(self.shapes.take(idx))

    def pair(self, rel: str, i: np.ndarray, j: np.ndarray, d: int) -> np.ndarray:
        """``rel(i, j)`` row by row, on the shapes."""
        fn = BUILTINS[rel].shape
        assert fn is not None, rel
        return fn(self.shapes, i, j, d)

    def flanks(self, q: np.ndarray, p: np.ndarray, axis: str, opening: int | None,
               depth: int | None, eps: int) -> np.ndarray:
        """q blocks a parallel grip of p along p's own ``axis``, row by row."""
        return sh.flanks(self.shapes, q, p, axis, opening, depth, eps)

    def zone(self, rel: str, zone: Any, eps: int) -> np.ndarray:
        """``inside`` or ``intersects`` of every shape and one zone."""
        r = BUILTINS[rel]
        assert r.shape is not None and r.half is not None, rel
        idx = np.arange(len(self.boxes))
        if isinstance(zone, g.HalfSpaceU):
            return r.half[1](self.shapes, idx, zone, eps)
        return r.shape(self.shapes, idx, zone.lo, zone.hi, eps)

    def _mixed(self) -> np.ndarray:
        """(n, n): the pairs of two different parts, one of them not plain."""
        plain = self.shapes.plain
        mixed = ~(plain[:, None] & plain[None, :])
        np.fill_diagonal(mixed, False)
        return mixed

    def dense(self, rel: str, d: int) -> np.ndarray:
        """The enclosing boxes' matrix re-decided on the shapes where a part is not plain
        (only where the enclosing boxes allow the relation: it implies the exact one)."""
        m = super().dense(rel, d)
        i, j = np.nonzero(self._mixed() & m)
        out = m.copy()
        out[i, j] = self.pair(rel, i, j, d)
        return out

    def dense_flanks(self, axis: str, opening: int | None, depth: int | None,
                     eps: int) -> np.ndarray:
        """The boxes' matrix re-decided on every pair with a non-plain part within the
        fingers' reach (the enclosing boxes do not imply flanks)."""
        m = super().dense_flanks(axis, opening, depth, eps)
        reach = sh.flanks_margin(self.shapes, eps, opening, depth)
        cand = self._mixed() & g.near(self.boxes[:, None, :], self.boxes[None, :, :], reach)
        i, j = np.nonzero(cand)
        out = m.copy()
        out[i, j] = self.flanks(i, j, axis, opening, depth, eps)
        return out

    def flanks_margin(self, eps: int, opening: int | None, depth: int | None) -> int:
        """From the parts' own sizes: a yawed part's is smaller than its enclosing box's."""
        return sh.flanks_margin(self.shapes, eps, opening, depth)

    def plain_mask(self) -> np.ndarray:
        """(n,) bool: per part, an axis-aligned box."""
        return np.asarray(self.shapes.plain, dtype=bool)

    def as_shapes(self) -> sh.ShapesU:
        """The parts' shapes."""
        return self.shapes

    def inner_half(self) -> np.ndarray:
        """(n, 2) int64: half extents of a square inscribed in each footprint."""
        return sh.inner_half(self.shapes)

    def extent_xy(self) -> tuple[np.ndarray, np.ndarray]:
        """Half the world-axis extents (U, float64) of every shape."""
        return self.shapes.extent_xy()

    def footprint(self, i: np.ndarray, j: np.ndarray, eps: int) -> np.ndarray:
        """The exact footprints of i and j overlap in the plane, row by row."""
        return sh.footprint(self.shapes, i, j, eps)


def kernel_of(boxes: np.ndarray, shapes: sh.ShapesU | None) -> BoxKernel:
    """The kernel of a layout: its boxes when every part is plain (``shapes`` None), else
    its shapes."""
    # the one place a layout's kernel is chosen (Instance.kernel asks it)
    return BoxKernel(boxes) if shapes is None else ShapeKernel(shapes)
