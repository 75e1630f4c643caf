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
