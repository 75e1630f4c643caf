"""The two geometry kernels (cellspec/core/kernel.py) agree where they must: on plain
parts the shapes kernel is the box kernel, and each kernel's dense matrix is its own
pairwise answer."""

from __future__ import annotations

import numpy as np
import pytest

from cellspec.core import geometry as g
from cellspec.core import relations
from cellspec.core.kernel import BoxKernel, ShapeKernel, kernel_of
from cellspec.core.shapes import shapes_u

PAIRS = [r.name for r in relations.BUILTINS.values() if r.two_parts and r.param != "axis"]


def _boxes(n: int, seed: int) -> np.ndarray:
    """n seeded integer boxes (U) on a small grid, so that many pairs touch or overlap."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 12, size=(n, 3)) * 500
    s = rng.integers(1, 4, size=(n, 3)) * 500
    out = np.empty((n, 6), dtype=np.int64)
    out[:, 0::2] = c - s
    out[:, 1::2] = c + s
    return out


class _Zone:
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


def test_kernel_of_picks_by_shapes():
    b = _boxes(4, 0)
    assert type(kernel_of(b, None)) is BoxKernel
    sh = shapes_u(b, np.zeros(4), np.zeros(4, dtype=bool))
    assert type(kernel_of(b, sh)) is ShapeKernel


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shape_kernel_on_plain_parts_is_the_box_kernel(seed):
    b = _boxes(30, seed)
    box = BoxKernel(b)
    shp = ShapeKernel(shapes_u(b, np.zeros(len(b)), np.zeros(len(b), dtype=bool)))
    i, j = g.broad_phase(b, 1000)
    assert len(i) > 20
    for rel in PAIRS:
        for d in (0, 3):
            assert np.array_equal(box.pair(rel, i, j, d), shp.pair(rel, i, j, d)), rel
            assert np.array_equal(box.dense(rel, d), shp.dense(rel, d)), rel
    for ax in "xy":
        for opening, depth in ((None, None), (4000, 1000)):
            assert np.array_equal(box.flanks(i, j, ax, opening, depth, 2),
                                  shp.flanks(i, j, ax, opening, depth, 2))
            assert np.array_equal(box.dense_flanks(ax, opening, depth, 2),
                                  shp.dense_flanks(ax, opening, depth, 2))
    zone = _Zone((0, 0, 0), (3000, 3000, 3000))
    half = g.halfspace_u((1, 0, 0), "<", g.Fraction(1, 10))
    for rel in ("inside", "intersects"):
        for z in (zone, half):
            assert np.array_equal(box.zone(rel, z, 2), shp.zone(rel, z, 2)), rel


def test_dense_matrix_is_the_pairwise_answer_on_yawed_parts_and_cylinders():
    b = _boxes(16, 7)
    rng = np.random.default_rng(7)
    yaw = np.where(rng.random(16) < 0.5, rng.uniform(-60, 60, 16), 0.0)
    cyl = rng.random(16) < 0.25
    b[cyl, 3] = b[cyl, 2] + (b[cyl, 1] - b[cyl, 0])  # a cylinder's box is square in x, y
    k = ShapeKernel(shapes_u(b, yaw, cyl))
    ii, jj = np.nonzero(~np.eye(16, dtype=bool))
    for rel in PAIRS:
        assert np.array_equal(k.dense(rel, 2)[ii, jj], k.pair(rel, ii, jj, 2)), rel
    assert np.array_equal(k.dense_flanks("x", 4000, None, 2)[ii, jj],
                          k.flanks(ii, jj, "x", 4000, None, 2))
    perm = rng.permutation(16)
    t = k.take(perm)
    assert np.array_equal(t.pair("contact", ii, jj, 2),
                          k.pair("contact", perm[ii], perm[jj], 2))


@pytest.mark.parametrize("seed", [1, 4])
def test_per_part_questions_agree_on_plain_parts(seed):
    # plain_mask, as_shapes, inner_half, extent_xy and footprint: the same answers from the
    # box kernel and from the shapes kernel of the same axis-aligned boxes
    b = _boxes(25, seed)
    box = BoxKernel(b)
    shp = ShapeKernel(shapes_u(b, np.zeros(len(b)), np.zeros(len(b), dtype=bool)))
    assert box.plain_mask().all() and shp.plain_mask().all()
    assert np.array_equal(box.inner_half(), shp.inner_half())
    assert np.array_equal(box.inner_half()[:, 0], (b[:, 1] - b[:, 0]) // 2)
    for eb, es in zip(box.extent_xy(), shp.extent_xy(), strict=True):
        assert np.array_equal(eb, es)
    i, j = g.broad_phase(b, 1000)
    assert np.array_equal(box.footprint(i, j, 2), shp.footprint(i, j, 2))
    assert np.array_equal(box.footprint(i, j, 2), g.footprint(b[i], b[j], 2))
    assert np.array_equal(box.as_shapes().box, b) and shp.as_shapes() is shp.shapes


def test_per_part_questions_on_yawed_parts_and_cylinders():
    # a box at 45 degrees: its inscribed square is smaller than its box, its world extent
    # larger; a cylinder's inscribed square has half side r / sqrt 2; neither is plain
    b = np.array([[0, 2000, 0, 2000, 0, 1000], [5000, 7000, 0, 2000, 0, 1000],
                  [10000, 12000, 0, 2000, 0, 1000]], dtype=np.int64)
    k = ShapeKernel(shapes_u(b, np.array([45.0, 0.0, 0.0]), np.array([False, False, True])))
    assert k.plain_mask().tolist() == [False, True, False]
    inner = k.inner_half()
    assert inner[1].tolist() == [1000, 1000] and inner[2].tolist() == [707, 707]
    assert inner[0, 0] < 1000
    ex, _ = k.extent_xy()
    assert ex[0] > 1000 and ex[1] == 1000 and ex[2] == 1000
