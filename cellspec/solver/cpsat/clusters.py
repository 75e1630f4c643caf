"""Decomposition of a repair into independent clusters (issue 17).

Only the structures named by a violation move (the *movable* parts); each moves by at most
a *move bound* per axis (``MOVE_BOUND`` plus however far it sticks out of the workspace),
so its *reach* is its box grown by that bound. Movable parts of one structure, or whose
reaches come within the relation margin of each other, are joined (union-find) into one
cluster; a cluster's *context* is every other part that comes within that margin of one
of its reaches (fixed there: an obstacle or a support). No constraint of the placement
model joins two clusters, so each is a separate CP-SAT problem, and the sum of their
optima is the optimum of the whole bounded problem. Deterministic: clusters are numbered
by their smallest part index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cellspec.core import geometry as g
from cellspec.solver.cpsat import exact
from cellspec.solver.graph import components
from cellspec.solver.instance import BoxU, Instance

MOVE_BOUND = 500  # 0.05 m, in 0.1 mm centre steps: how far a part may move, per axis
# (repair widens it, x3, for a cluster with no repair within it)
BIG_STRUCTURE = 40  # in a larger structure only violating parts and their neighbours move


@dataclass(frozen=True)
class Cluster:
    """One independent repair problem: ``parts`` (indices into the layout, sorted), the
    ``movable`` subset, per-part ``reach`` (0.1 mm per axis, rows of ``parts``) and the
    context parts whose support is guaranteed by parts outside (``anchored``)."""

    parts: tuple[int, ...]
    movable: tuple[int, ...]
    reach: np.ndarray  # (len(parts), 3) int64, 0 for fixed parts
    anchored: tuple[int, ...]

    @property
    def key(self) -> tuple:
        """What the cluster's answer depends on (besides must-move groups and options)."""
        return (self.parts, self.movable, self.reach.tobytes())


def structures(inst: Instance) -> np.ndarray:
    """Connected structures: the component label of each part under contact (exact for
    yawed boxes and cylinders)."""
    return exact.components(inst)


def movable_parts(inst: Instance, comp: np.ndarray, involved: np.ndarray) -> np.ndarray:
    """The parts that may move: every structure with an involved part, except that in a
    structure of more than BIG_STRUCTURE parts only the involved parts and what touches
    them move."""
    n = inst.n
    out = np.zeros(n, dtype=bool)
    if not involved.any():
        return out
    labels, counts = np.unique(comp, return_counts=True)
    size = dict(zip(labels.tolist(), counts.tolist(), strict=True))
    bad = np.unique(comp[involved])
    small = [c for c in bad.tolist() if size[c] <= BIG_STRUCTURE]
    out |= np.isin(comp, small)
    big = [c for c in bad.tolist() if size[c] > BIG_STRUCTURE]
    if big:
        seeds = involved & np.isin(comp, big)
        out |= seeds
        i, j = g.broad_phase(inst.boxes, inst.eps)
        keep = g.contact(inst.boxes[i], inst.boxes[j], inst.eps)
        i, j = i[keep], j[keep]
        out[j[seeds[i]]] = True
        out[i[seeds[j]]] = True
    return out


def reach_of(inst: Instance, movable: np.ndarray, bound: int | np.ndarray = MOVE_BOUND,
             unbounded: np.ndarray | None = None) -> np.ndarray:
    """Per-part move bound per axis (0.1 mm): ``bound`` (one for all, or one per part)
    plus the distance the part sticks out of the workspace; ``unbounded`` parts (e.g.
    inside a keep-out) may cross the whole workspace. Fixed parts: 0."""
    ws = inst.zones["workspace"]
    assert isinstance(ws, BoxU)
    b = inst.boxes
    lo = np.asarray(ws.lo, dtype=np.int64)
    hi = np.asarray(ws.hi, dtype=np.int64)
    out_lo = np.maximum(0, lo[None, :] - b[:, 0::2])
    out_hi = np.maximum(0, b[:, 1::2] - hi[None, :])
    bnd = np.asarray(bound, dtype=np.int64)
    r = (bnd[:, None] if bnd.ndim else bnd) + (np.maximum(out_lo, out_hi) + 1) // 2
    if unbounded is not None and unbounded.any():
        span = (hi - lo + 1) // 2 + 1
        r[unbounded] = np.maximum(r[unbounded], span[None, :] + r[unbounded])
    r[~movable] = 0
    return r.astype(np.int64)


def _near(a_lo: np.ndarray, a_hi: np.ndarray, b_lo: np.ndarray, b_hi: np.ndarray,
          margin: int) -> np.ndarray:
    """Dense (len(a), len(b)) mask: boxes within ``margin`` on every axis."""
    ok = np.ones((len(a_lo), len(b_lo)), dtype=bool)
    for k in range(3):
        ok &= (a_lo[:, None, k] - b_hi[None, :, k] <= margin)
        ok &= (b_lo[None, :, k] - a_hi[:, None, k] <= margin)
    return ok


def decompose(inst: Instance, comp: np.ndarray, movable: np.ndarray, reach: np.ndarray,
              margin: int, grow: np.ndarray | None = None) -> list[Cluster]:
    """Independent clusters of the movable parts, each with its fixed context. ``grow``
    (n, 3) U: how much farther a part reaches once turned (``--allow-rotate``)."""
    idx = np.nonzero(movable)[0]
    if not len(idx):
        return []
    b = inst.boxes
    lo_all, hi_all = b[:, 0::2], b[:, 1::2]
    r2 = 2 * reach[idx]  # a centre step of 0.1 mm moves the box by 2 U
    if grow is not None:
        r2 = r2 + grow[idx]
    s_lo, s_hi = lo_all[idx] - r2, hi_all[idx] + r2
    ei: list[int] = []
    ej: list[int] = []
    chunk = 512
    for s in range(0, len(idx), chunk):  # reaches that meet
        m = _near(s_lo[s:s + chunk], s_hi[s:s + chunk], s_lo, s_hi, margin)
        a, c = np.nonzero(m)
        ei.extend((a + s).tolist())
        ej.extend(c.tolist())
    pos = {int(p): k for k, p in enumerate(idx)}
    cm = comp[idx]
    order = np.argsort(cm, kind="stable")
    for k in range(1, len(order)):  # one structure, one cluster (its shift is shared)
        if cm[order[k]] == cm[order[k - 1]]:
            ei.append(int(order[k]))
            ej.append(int(order[k - 1]))
    lab = components(len(idx), ei, ej)
    # context: the parts any reach of a cluster comes near, by a sweep along x
    xs = np.argsort(lo_all[:, 0], kind="stable")
    x_lo = lo_all[xs, 0]
    wmax = int((hi_all[:, 0] - lo_all[:, 0]).max()) if len(b) else 0
    near: dict[int, set[int]] = {}
    for k, p in enumerate(idx.tolist()):
        a = np.searchsorted(x_lo, s_lo[k, 0] - margin - wmax, side="left")
        z = np.searchsorted(x_lo, s_hi[k, 0] + margin, side="right")
        cand = xs[a:z]
        ok = np.ones(len(cand), dtype=bool)
        for ax in range(3):
            ok &= lo_all[cand, ax] - s_hi[k, ax] <= margin
            ok &= s_lo[k, ax] - hi_all[cand, ax] <= margin
        near.setdefault(int(lab[k]), set()).update(cand[ok].tolist())
        near[int(lab[k])].add(p)
    sup_fixed = _supported_by_fixed(inst, movable)
    out = []
    for cl in range(int(lab.max()) + 1):
        mv = tuple(int(p) for p in idx[lab == cl])
        parts = tuple(sorted(near[cl]))
        rows = np.zeros((len(parts), 3), dtype=np.int64)
        where = {p: k for k, p in enumerate(parts)}
        for p in mv:
            rows[where[p]] = reach[p]
        anchored = tuple(p for p in parts if not movable[p] and sup_fixed[p])
        out.append(Cluster(parts=parts, movable=mv, reach=rows, anchored=anchored))
    del pos
    return out


def _supported_by_fixed(inst: Instance, movable: np.ndarray) -> np.ndarray:
    """Parts grounded on a surface or resting on a part that does not move: their support
    holds whatever the movable parts do."""
    b, eps = inst.boxes, inst.eps
    out = np.zeros(inst.n, dtype=bool)
    for z in set(inst.surfaces.values()):
        out |= g.on_surface(b, z, eps)
    i, j = g.broad_phase(b, eps)
    for sup, top in ((i, j), (j, i)):
        ok = exact.supports(inst, sup, top) & ~movable[sup]
        out[top[ok]] = True
    return out


__all__ = ["Cluster", "MOVE_BOUND", "decompose", "movable_parts", "reach_of",
           "structures"]
