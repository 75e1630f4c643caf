"""Rounding analysis: which relations and attribute comparisons the rules read change their
truth between the 0.1 mm grid the backends decide on and the layout as written.

Every backend decides on integer corners (units U, :mod:`cellspec.core.geometry`). A layout
off that grid is decided as rounded; this module re-decides, for every relation and every
attribute comparison the rules read, on the exact values (positions and sizes read as the
decimals they were written as, scaled to exact integers) and names each disagreement. A
disagreement on something the rules read forbids a ``pass`` (verify answers ``unknown``).
Yawed boxes and cylinders are compared in float against the rational rotation the kernel
decides on (their corners are irrational; ties within a millionth are logged by the kernel).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir, relations, shapes
from cellspec.core.kernel import BoxKernel, ShapeKernel
from cellspec.dsl.model import Rule
from cellspec.solver.instance import BoxU, Instance
from cellspec.solver.rounding_cmp import cmp_notes

# the checks of the analysis and which relations of the rules each decides (a rule reading
# none of them cannot change its verdict because of that check): each relation names its own
# (``rounding``, cellspec/core/relations.py); a pair relation's check is named after it
CHECKS = tuple(dict.fromkeys(c for r in relations.BUILTINS.values() for c in r.rounding))


def _decided_by(check: str) -> frozenset[str]:
    """The built-in relations whose verdict the rounding check ``check`` can change."""
    return relations.names(lambda r: check in r.rounding)


ROUNDING_RELATIONS: dict[str, frozenset[str]] = {
    **{c: _decided_by(c) for c in CHECKS},
    "comparison": frozenset({"<cmp>"}),  # an attribute comparison the rules read
}
# pair checks analysed whether or not the rules name them (the stability rules read them)
ALWAYS_ANALYSED = ("contact", "overlaps", "supports")
DECIMALS = 12  # coordinates are read as decimals of at most this many digits (1e-12 m)


@dataclass(frozen=True)
class Exact:
    """The parts as written, on a grid ``scale`` times finer than U (exact integers): boxes
    (n, 6) and the cell's constants on that grid (int64, or Python ints when large)."""

    boxes: np.ndarray
    scale: int
    approx: bool  # some coordinate had more than DECIMALS digits (read to 1e-12 m)

    def s(self, v: int) -> int:
        return v * self.scale


def _decimals(x: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """(round(x * 10^K) as int64, K, approx): the fewest decimals K (<= DECIMALS) that hold
    every value exactly as written (its shortest decimal), else DECIMALS (approx)."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    need = np.full(len(flat), -1)
    for k in range(DECIMALS + 1):
        hit = (need < 0) & (np.round(flat, k) == flat)
        need[hit] = k
        if (need >= 0).all():
            break
    approx = bool((need < 0).any())
    k = DECIMALS if approx else int(need.max(initial=0))
    return np.rint(flat * 10.0**k).astype(np.int64).reshape(np.shape(x)), k, approx


def exact_boxes(pos_m: np.ndarray, size_m: np.ndarray, extra_u: Iterable[Fraction] = ()
                ) -> Exact:
    """The parts' corners as written, as exact integers in units U / scale (a scale at
    which the lengths ``extra_u``, in U, are whole numbers too)."""
    both = np.concatenate([np.asarray(pos_m, np.float64), np.asarray(size_m, np.float64)], 1)
    ints, k, approx = _decimals(both)
    k = max(k, 4)  # 1 U = 10^(k - 4) units of 10^-k / 2 m
    npos, nsize = ints[:, :3], ints[:, 3:]
    boxes = np.empty((len(ints), 6), dtype=np.int64)
    boxes[:, 0::2] = 2 * npos - nsize
    boxes[:, 1::2] = 2 * npos + nsize
    base = 10 ** (k - 4)
    scale = math.lcm(base, *(Fraction(v).denominator for v in extra_u))
    if scale > 10**6:  # corners * coefficients may pass int64: exact Python integers
        boxes = boxes.astype(object)
    if scale != base:
        boxes = boxes * (scale // base)
    return Exact(boxes, scale, approx)


def needs_analysis(inst: Instance) -> bool:
    """Whether the grid may decide differently from the layout and cell as written: a part
    off the grid, a yaw (rounded to a rational rotation), a zone or surface off the grid."""
    return (inst.off_grid or not inst.kernel().exact_on_grid
            or any(v.denominator != 1 for v in cell_lengths(inst)))


def cell_lengths(inst: Instance) -> list[Fraction]:
    """The cell's lengths as written (U) that the exact grid must hold: zones, surfaces."""
    out = [v for lo, hi in (inst.zones_u or {}).values() for v in (*lo, *hi)]
    return out + list((inst.surfaces_u or {}).values())


def exact_zone(inst: Instance, name: str, scale: int) -> BoxU | g.HalfSpaceU:
    """Zone ``name`` as written on the exact grid (``scale`` times finer than U)."""
    z = inst.zones[name]
    if isinstance(z, BoxU):
        lo, hi = (inst.zones_u or {}).get(name, (z.lo, z.hi))
        a, b = [int(v * scale) for v in lo], [int(v * scale) for v in hi]
        return BoxU((a[0], a[1], a[2]), (b[0], b[1], b[2]))
    return replace(z, rhs=z.rhs * scale)


def exact_surface(inst: Instance, name: str, scale: int) -> int:
    """Surface ``name``'s height as written on the exact grid."""
    return int((inst.surfaces_u or {}).get(name, inst.surfaces[name]) * scale)


def _used(rules: Iterable[Rule]) -> tuple[set[str], list[ir.Cmp], set[int]]:
    """The relation names, attribute comparisons and near distances (U, floored) the rules read."""
    rels: set[str] = set()
    cmps: dict[ir.Cmp, None] = {}
    near: set[int] = set()
    for r in rules:
        for n in ir.walk(r.body):
            if isinstance(n, ir.Rel):
                rels.add(n.name)
                if n.name == "near":
                    near.add(int(g.to_u(n.args[2].value)))  # type: ignore[union-attr]
            elif isinstance(n, ir.Cmp) and n.expr.terms:
                cmps[n] = None
    return rels, list(cmps), near


@dataclass(frozen=True)
class Rounding:
    """What the rounding analysis found: notes, the decisive checks (the rules read them;
    non-empty forbids a ``pass``), and which violations the rounding may have made."""

    notes: list[str]
    decisive: list[str]
    touched: frozenset[str]  # rules reading a decisive check
    anywhere: frozenset[str]  # of those, rules where a decisive atom binds no outer part
    involved: frozenset[str]  # ids of the parts of every change

    def may_make(self, rule: str, parts: tuple[str, ...]) -> bool:
        """A violation of ``rule`` on ``parts`` may be the rounding's (not exactly one)."""
        if rule not in self.touched:
            return False
        return rule in self.anywhere or bool(self.involved.intersection(parts)) or not parts


def rounding_analysis(inst: Instance, rules: Iterable[Rule], limit: int = 5) -> Rounding:
    """The checks whose truth the rounding changes for some part and that the ``rules``
    read (``unanalysed`` when the layout was too dense to analyse), the rules reading
    them, and the parts involved."""
    rules = tuple(rules)
    used, cmps, near = _used(rules)
    used = used | ({"<cmp>"} if cmps else set())
    changed: list[str] = []
    flipped: list[ir.Cmp] = []
    involved: set[int] = set()
    notes = rounding_notes(inst, limit, changed, rules, flipped, involved)
    decisive = [name for name in changed
                if name == "unanalysed" or ROUNDING_RELATIONS[name] & used]
    rels = set().union(*(ROUNDING_RELATIONS[d] for d in decisive if d != "unanalysed"))
    touched: set[str] = set()
    anywhere: set[str] = set()
    for r in rules:
        outer = {v for v, d in ir.top_domains(r.body).items() if d == "part"}
        hits = [n for n in ir.walk(r.body)
                if (isinstance(n, ir.Rel) and n.name in rels) or n in flipped]
        if "unanalysed" in decisive or hits:
            touched.add(r.name)
        if "unanalysed" in decisive or any(not (_vars(n) & outer) for n in hits):
            anywhere.add(r.name)
    return Rounding(notes, decisive, frozenset(touched), frozenset(anywhere),
                    frozenset(inst.ids[k] for k in involved))


def _vars(node: ir.Node) -> set[str]:
    """The variables a relation or comparison reads."""
    if isinstance(node, ir.Cmp):
        return {a.var for a, _ in node.expr.terms}
    if isinstance(node, ir.Rel):
        return {a.name for a in node.args if isinstance(a, ir.VarArg)}
    return set()


def rounding_notes(inst: Instance, limit: int = 5, changed: list[str] | None = None,
                   rules: Iterable[Rule] | None = None, flipped: list[ir.Cmp] | None = None,
                   involved: set[int] | None = None) -> list[str]:
    """Relations among nearby parts (and, given ``rules``, the attribute comparisons they
    read) whose truth changes between the grid and the layout as written: the verdict then
    depends on the rounding, and we say so. ``changed`` receives the names of the checks
    that changed (keys of :data:`ROUNDING_RELATIONS`), ``flipped`` the comparisons,
    ``involved`` the parts of every change (all of them for a yaw tie)."""
    changed = [] if changed is None else changed
    flipped = [] if flipped is None else flipped
    involved = set() if involved is None else involved
    used, cmps, near = _used(rules or ())
    on_grid = not inst.off_grid and all(v.denominator == 1 for v in cell_lengths(inst))
    kern = inst.kernel()
    if on_grid and not kern.exact_on_grid:  # on the grid: only the kernel's own (yaws) rounds
        out = _tie_notes(inst, kern.as_shapes(), limit, changed)
        if out:
            involved.update(range(inst.n))
        if cmps:  # a yawed part's enclosing box is rounded outward to whole U
            exact = np.empty_like(inst.boxes, dtype=np.float64)
            _float_shapes(inst, exact)
            out += cmp_notes(inst, cmps, exact, 1, limit, changed, flipped, "the rational "
                              "rotation of the yaws (docs/shapes.md)", involved)
        return out[: 3 * limit]
    an = _Analysis(inst, used, near, limit, changed)
    out = an.run(cmps, flipped)
    involved.update(an.involved)
    return out


class _Analysis:
    """The off-grid analysis: the grid against the layout as written, check by check, each
    decided by two geometry kernels (cellspec/core/kernel.py): ``grid`` (the instance's)
    and ``written`` (the parts as written: float shapes at the positions and yaws as given,
    or the boxes on a grid ``scale`` times finer)."""

    def __init__(self, inst: Instance, used: set[str], near: set[int], limit: int,
                 changed: list[str]):
        self.inst, self.used, self.near, self.limit, self.changed = (inst, used, near, limit,
                                                                     changed)
        self.out: list[str] = []
        self.involved: set[int] = set()
        self.grid = inst.kernel()
        self.written: BoxKernel
        # the written kernel: float shapes where the grid's rounds the yaws, else the boxes
        # on a finer grid (exact)
        if not self.grid.exact_on_grid:  # float shapes at the positions and yaws as given
            self.exact = np.empty_like(inst.boxes, dtype=np.float64)
            self.written = ShapeKernel(_float_shapes(inst, self.exact))
            self.scale, self.ex = 1, None
            self.what = "rounding to the 0.1 mm grid (and of the yaws to rational rotations)"
            # the zones, surfaces and robots the float shapes are decided against: the grid's
            self.zone_as_written: Callable[[str], Any] = inst.zones.__getitem__
            self.surface_as_written: Callable[[str], int] = inst.surfaces.__getitem__
            self.reach_as_written: Callable[[g.ReachU], tuple[np.ndarray, g.ReachU]] = \
                lambda r: (self.exact, r)
        else:
            self.ex = exact_boxes(inst.pos_m, _kernel_size(inst), cell_lengths(inst))
            self.exact, self.scale = self.ex.boxes, self.ex.scale
            self.written = BoxKernel(self.exact)
            self.what = "rounding to the 0.1 mm grid"
            s = self.scale
            self.zone_as_written = lambda zn: exact_zone(inst, zn, s)
            self.surface_as_written = lambda sn: exact_surface(inst, sn, s)
            self.reach_as_written = lambda r: (self.exact.astype(object),  # long squares
                                               _scaled_reach(r, s))

    def note(self, name: str, diff: np.ndarray, text: Callable[..., str],
             *cols: np.ndarray) -> None:
        """Record the rows ``diff`` that changed: their parts (rows of ``cols``, the part
        indices of each argument; the rows themselves when none) and up to limit notes."""
        if len(diff) and name not in self.changed:
            self.changed.append(name)
        for c in cols or (np.arange(self.inst.n),):
            self.involved.update(np.asarray(c)[diff].tolist())
        for k in diff[: self.limit]:
            self.out.append(f"{self.what} decides {text(int(k))}")

    def run(self, cmps: list[ir.Cmp], flipped: list[ir.Cmp]) -> list[str]:
        inst = self.inst
        if self.ex is not None and self.ex.approx:
            self.out.append(f"a coordinate has more than {DECIMALS} decimals: the rounding "
                            f"analysis reads it to 1e-{DECIMALS} m")
        if not self._pairs():
            return self.out
        self._zones()
        self._surfaces()
        for robot, reach in sorted((inst.reach or {}).items()):
            a = g.reachable(inst.boxes, reach)
            b = g.reachable(*self.reach_as_written(reach))
            self.note("reachable", np.nonzero(a != b)[0],
                      lambda k, r=robot: f"reachable({inst.ids[k]}, {r})")
        self.out += cmp_notes(inst, cmps, self.exact, self.scale, self.limit, self.changed,
                               flipped, self.what, self.involved)
        return self.out[: 3 * self.limit]

    def _pairs(self) -> bool:
        inst, s, e = self.inst, self.scale, self.inst.eps
        margin = g.relation_margin(inst.boxes, e, max(self.near, default=0),
                                   "flanks" in self.used, inst.opening, inst.depth)
        try:
            i0, j0 = g.broad_phase(inst.boxes, margin + 4)
        except g.TooDense:
            self.changed.append("unanalysed")
            self.involved.update(range(inst.n))
            self.out.append("rounding to the 0.1 mm grid was not analysed: the layout is too "
                            "dense")
            return False
        i, j = np.concatenate([i0, j0]), np.concatenate([j0, i0])  # both orders
        checks: list[tuple[relations.Relation, tuple]] = []
        for r in relations.BUILTINS.values():  # the pair relations, each with its parameters
            if r.param == "length":
                checks += [(r, (d,)) for d in sorted(self.near)]
            elif r.param == "axis":
                checks += [(r, (ax, inst.opening, inst.depth, e)) for ax in "xy"]
            elif r.two_parts:
                checks.append((r, (e,)))
        for r, args in checks:
            name = r.name
            if name not in ALWAYS_ANALYSED and not ROUNDING_RELATIONS[name] & self.used:
                continue  # the rules read nothing it decides
            ii, jj = (i0, j0) if r.symmetric else (i, j)  # symmetric: one order suffices
            if r.param == "axis":
                a = self.grid.flanks(ii, jj, *args)
                b = self.written.flanks(ii, jj, *_scaled(args, s))
            else:
                a = self.grid.pair(name, ii, jj, *args)
                b = self.written.pair(name, ii, jj, *_scaled(args, s))
            label = name if r.param != "axis" else f"{name} along {args[0]}"
            self.note(name, np.nonzero(np.asarray(a != b, dtype=bool))[0],
                      lambda k, a=a, b=b, ii=ii, jj=jj, lb=label:
                      f"{lb}({inst.ids[ii[k]]}, {inst.ids[jj[k]]}): it is {bool(a[k])} on "
                      f"the grid, {bool(b[k])} exactly", ii, jj)
        return True

    def _zones(self) -> None:
        inst, s, e = self.inst, self.scale, self.inst.eps
        for zname, z in inst.zones.items():
            for rel in ("inside", "intersects"):
                if rel not in self.used and not (zname == "workspace" and rel == "inside"):
                    continue
                a = self.grid.zone(rel, z, e)
                b = self.written.zone(rel, self.zone_as_written(zname), e * s)
                name = "workspace" if zname == "workspace" and rel == "inside" else rel
                self.note(name, np.nonzero(np.asarray(a != b, dtype=bool))[0],
                          lambda k, a=a, b=b, r=rel, zn=zname:
                          f"{r}({inst.ids[k]}, {zn}): it is {bool(a[k])} on the grid, "
                          f"{bool(b[k])} exactly")

    def _surfaces(self) -> None:
        inst, s, e = self.inst, self.scale, self.inst.eps
        for sname, z in inst.surfaces.items():
            a = g.on_surface(inst.boxes, z, e)
            b = g.on_surface(self.exact, self.surface_as_written(sname), e * s)
            self.note("on", np.nonzero(np.asarray(a != b, dtype=bool))[0],
                      lambda k, a=a, b=b, sn=sname:
                      f"on({inst.ids[k]}, {sn}): it is {bool(a[k])} on the grid, "
                      f"{bool(b[k])} exactly")


def _scaled_reach(reach: g.ReachU, s: int) -> g.ReachU:
    """A robot's reach on the exact grid ``s`` times finer than U."""
    r2 = None if reach.reach2 is None else reach.reach2 * s * s
    lo = None if reach.lo is None else tuple(v * s for v in reach.lo)
    hi = None if reach.hi is None else tuple(v * s for v in reach.hi)
    return g.ReachU(tuple(v * s for v in reach.base), r2, lo, hi)  # type: ignore[arg-type]


def _scaled(args: tuple, s: int) -> tuple:
    """A relation's integer parameters (U) on the exact grid (strings and None unchanged)."""
    return tuple(a * s if isinstance(a, int) and not isinstance(a, bool) else a for a in args)


def _kernel_size(inst: Instance) -> np.ndarray:
    """The sizes the kernel sees (x and y swapped for a box turned by an odd quarter turn)."""
    return inst.size_m if inst.ksize_m is None else inst.ksize_m


def _tie_notes(inst: Instance, sh: shapes.ShapesU, limit: int, changed: list[str]
               ) -> list[str]:
    """The decisions the kernel logged within YAW_BAND of their threshold on a part whose
    yaw was rounded to a rational rotation (each moves a corner by < 1e-6 of its size)."""
    out: list[str] = []
    for rel, a, b in dict.fromkeys(sh.ties):
        if rel not in changed:
            changed.append(rel)
        if len(out) < 3 * limit:
            parts = inst.ids[a] + ("" if b < 0 else f", {inst.ids[b]}")
            out.append(f"the rational rotation of the yaws (docs/shapes.md) decides {rel}("
                       f"{parts}): it lies within a millionth of its threshold")
    return out


def _float_shapes(inst: Instance, exact: np.ndarray) -> shapes.ShapesU:
    """The shapes at the positions, sizes and yaws as given (float, unrounded); ``exact``
    (the float boxes, filled in here) become their enclosing boxes."""
    assert inst.yaw_deg is not None and inst.cyl is not None
    yaw, cyl = inst.yaw_deg, inst.cyl
    pos_u = inst.pos_m / float(g.U)
    half_u = inst.size_m / (2 * float(g.U))
    exact[:, 0::2] = pos_u - half_u
    exact[:, 1::2] = pos_u + half_u
    plain = ~cyl & shapes.axis_aligned(yaw)
    odd = plain & (shapes.quarter_turns(yaw) % 2 == 1)  # plain quarter turns: sizes swap
    for k in (0, 1):
        exact[odd, 2 * k] = pos_u[odd, k] - half_u[odd, 1 - k]
        exact[odd, 2 * k + 1] = pos_u[odd, k] + half_u[odd, 1 - k]
    fs = shapes.shapes_float(pos_u, half_u, yaw, cyl, exact)
    ex, ey = fs.extent_xy()
    turn = ~plain
    exact[turn, 0], exact[turn, 1] = pos_u[turn, 0] - ex[turn], pos_u[turn, 0] + ex[turn]
    exact[turn, 2], exact[turn, 3] = pos_u[turn, 1] - ey[turn], pos_u[turn, 1] + ey[turn]
    return fs
