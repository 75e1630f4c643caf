"""What the numpy kernel decides before clingo grounds (asp/pushdown.py says which
literals): pair relations' rows, selections, projections and one-part conjunctions,
evaluated on the instance's boxes in ASP part numbering and written as few facts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import relations
from cellspec.solver.asp.compile import CompiledProgram
from cellspec.solver.asp.pushdown import OPS, Projection, Selection, Unary
from cellspec.solver.instance import Instance
from cellspec.solver.reference import STABILITY


def rows_text(pred: str, arr: np.ndarray) -> str:
    """One fact per row of an integer array (the fastest pure-Python formatting measured)."""
    if len(arr) == 0:
        return ""
    fmt = pred + "(" + ",".join(["{}"] * arr.shape[1]) + ")."
    return "\n".join(map(fmt.format, *arr.T.tolist()))


def pairs_both(i: np.ndarray, j: np.ndarray, fwd: np.ndarray, back: np.ndarray) -> np.ndarray:
    """Rows (a, b) where the relation holds for (i, j) (``fwd``) or (j, i) (``back``)."""
    return np.concatenate([np.stack([i[fwd], j[fwd]], axis=1),
                           np.stack([j[back], i[back]], axis=1)])


class Kernel:
    """The instance in ASP numbering (``perm``) with its candidate pairs, and every
    relation, selection, projection and conjunction decided on them (memoised)."""

    def __init__(self, inst: Instance, perm: np.ndarray | None, boxes: np.ndarray,
                 i: np.ndarray, j: np.ndarray, cols: tuple[np.ndarray, np.ndarray] | None):
        self.inst, self.perm, self.boxes, self.i, self.j, self.cols = inst, perm, boxes, i, j, cols
        self.eps = inst.eps
        self.kern = inst.kernel() if perm is None else inst.kernel().take(perm)  # ASP numbering
        self._rows: dict[tuple, np.ndarray] = {}
        self._proj: dict[str, np.ndarray] = {}

    def mask(self, rel: str, i: np.ndarray, j: np.ndarray, dist: int | None = None
             ) -> np.ndarray:
        """``rel(i, j)`` on index arrays, decided by the instance's kernel."""
        return self.kern.pair(rel, i, j, self.eps if dist is None else dist)

    def flanks(self, q: np.ndarray, p: np.ndarray, axis: str) -> np.ndarray:
        """q blocks a parallel grip of p along ``axis`` (p's own axis for a yawed box)."""
        inst = self.inst
        return self.kern.flanks(q, p, axis, inst.opening, inst.depth, self.eps)

    def pair_rows(self, rel: str, dist: int | None) -> np.ndarray:
        """Every ordered pair (p, q) with ``rel(p, q)`` among the candidates (``above``: the
        column pairs), both orientations, as an (m, 2) array."""
        key = (rel, dist)
        if key in self._rows:
            return self._rows[key]
        r = relations.get(rel)
        if r.family == "column":
            assert self.cols is not None, f"{rel} needs the column pairs"
            i, j = self.cols
        else:
            i, j = self.i, self.j
        if r.param == "length":
            assert dist is not None, f"{rel} needs its distance"
        fwd = self.mask(rel, i, j, dist)
        out = pairs_both(i, j, fwd, fwd if r.symmetric else self.mask(rel, j, i, dist))
        self._rows[key] = out
        return out

    def selected(self, sel: Selection) -> np.ndarray:
        """The rows of a selection's relation where its absorbed literals hold."""
        return sel.keep(self.pair_rows(sel.rel, sel.dist), self.boxes)

    def projection(self, proj: Projection) -> np.ndarray:
        """The parts p with another part q such that some disjunct's relation holds."""
        if proj.name not in self._proj:
            m = np.zeros(len(self.boxes), dtype=bool)
            for sel, col in proj.disjuncts:
                rows = self.selected(sel)
                rows = rows[rows[:, 0] != rows[:, 1]]
                m[rows[:, col]] = True
            self._proj[proj.name] = m
        return self._proj[proj.name]

    def grounded(self, r: relations.Relation) -> np.ndarray:
        """A surface relation of any surface (grounded(p): on some surface within eps), by
        its grid function."""
        assert r.grid is not None, r.name
        m = np.zeros(len(self.boxes), dtype=bool)
        for z in self.inst.surfaces.values():
            m |= r.grid(self.boxes, z, self.eps)
        return m

    def zone(self, rel: str, zname: str) -> np.ndarray:
        """inside(p, zone) or intersects(p, zone) of a named zone."""
        return self.kern.zone(rel, self.inst.zones[zname], self.eps)

    def _permuted(self, values: np.ndarray) -> np.ndarray:
        return values if self.perm is None else values[self.perm]

    def atom(self, atom: tuple, projections: dict[str, Projection]) -> np.ndarray:
        """The mask of one per-part atom of a pushdown.Unary."""
        kind = atom[0]
        if kind == "cmp":
            val = np.zeros(len(self.boxes), dtype=np.int64)
            for attr, k in atom[1]:
                val += k * g.attr_2u(self.boxes, attr)
            return OPS[atom[2]](val, atom[3])
        if kind == "proj":
            return self.projection(projections[atom[1]])
        if kind == "type":
            return self._permuted(np.array([t == atom[1] for t in self.inst.types], dtype=bool))
        if kind == "gripper":
            return self._permuted(np.array([k == atom[1] for k in self.inst.grippers],
                                           dtype=bool))
        r = relations.get(atom[1])
        if r.family == "part":  # the stability LP's, per part
            return self._permuted(STABILITY[r.name](self.inst))
        if r.family == "surface" and r.arity == 1:  # on any surface
            return self.grounded(r)
        if r.family == "surface":  # on the named one
            z = self.inst.surfaces.get(atom[2])
            if z is None:
                return np.zeros(len(self.boxes), dtype=bool)
            assert r.grid is not None, r.name
            return r.grid(self.boxes, z, self.eps)
        return self.zone(r.name, atom[2])

    def unary(self, u: Unary, projections: dict[str, Projection]) -> np.ndarray:
        """The parts where every literal of the conjunction holds."""
        m = np.ones(len(self.boxes), dtype=bool)
        for positive, atom in u.terms:
            a = self.atom(atom, projections)
            m &= a if positive else ~a
        return m


def pushed_facts(k: Kernel, prog: CompiledProgram, unary: Callable[[str, np.ndarray], str]
                 ) -> list[str]:
    """The facts of every selection, shown projection and one-part conjunction."""
    out: list[str] = []
    for name, sel in sorted(prog.selections.items()):
        out.append(f"#defined {name}/2.")
        out.append(rows_text(name, k.selected(sel)))
    for name in sorted(prog.shown_projections):
        out.append(f"#defined {name}/1.")
        out.append(unary(name + "({})", k.projection(prog.projections[name])))
    for name, u in sorted(prog.unaries.items()):
        out.append(f"#defined {name}/1.")
        out.append(rows_text(name, np.nonzero(k.unary(u, prog.projections))[0][:, None]))
    return out
