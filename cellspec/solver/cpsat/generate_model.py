"""The CP-SAT model of ``cellspec generate``: where each structure stands (its footprint
corner on the 0.1 mm grid), which lattice columns a packing uses and how high, every rule
of the module doc of :mod:`cellspec.solver.cpsat.generate` as a constraint (optionally
guarded by named assumptions, to name an unsat core), the objective, and a first-fit
hint. The templates are :mod:`cellspec.solver.cpsat.shapes`; the driver that proves
the arithmetic bounds, solves and reads the layout back is ``generate``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

import numpy as np
from ortools.sat.python import cp_model

from cellspec.core import geometry as g
from cellspec.dsl.design import (
    CountConstraint,
    DesignSpec,
    InsideConstraint,
    MaxHeightConstraint,
    StructureSpec,
    SymmetricConstraint,
)
from cellspec.dsl.model import BoxZone, Source
from cellspec.solver.cpsat.shapes import Infeasible, PartT

HINT_STEP = 100  # U (5 mm): the lattice the first-fit hint scans
LIM = 20_000_000  # |coordinate| bound in U (1000 m)


def to_m(u: int | Fraction) -> float:
    """Grid units U as metres."""
    return float(Fraction(u) * g.U)


def where(src: Source) -> str:
    """file:line:col of a source location."""
    return f"{src.file}:{src.line}:{src.col}"


def cmp_op(op: str, a: int, b: int) -> bool:
    """``a op b`` for a count constraint's comparison."""
    return {"==": a == b, "<=": a <= b, ">=": a >= b, "<": a < b, ">": a > b}[op]


def constraints_of(design: DesignSpec, spec: StructureSpec) -> list[Any]:
    """The design's constraints and the structure's own."""
    return [*design.constraints, *spec.constraints]


@dataclass(frozen=True)
class Site:
    """Where the design is built, on the integer grid (U): the error rules, the surface
    height, the workspace, the zones to avoid (``extra``: the keep-clear zones by name) and
    the gap between structures."""

    rules: set[str]
    z0: int
    ws_lo: list[int]
    ws_hi: list[int]
    zones: list[Any]
    extra: dict[str, Any]
    gap: int


class Struct:
    """One structure of the design: its template parts or, for a packing, its lattice
    columns; the CP-SAT variables placing it (filled in by ``build_model``)."""

    def __init__(self, idx: int, spec: StructureSpec, ptype: str, s: tuple[int, int, int]):
        """Structure number idx of the design, of part type ptype and part size s (U)."""
        self.idx = idx
        self.spec = spec
        self.name = f"{spec.kind}{idx + 1}"
        self.ptype = ptype
        self.s = s
        self.parts: list[PartT] = []
        self.w = self.d = self.h = 0
        # packing
        self.cols: list[tuple[int, int]] = []  # column centres (U)
        self.cap: list[int] = []
        self.hvar: list[Any] = []
        self.used: list[Any] = []
        self.grid_n: tuple[int, int] = (0, 0)
        self.ax: Any = None
        self.ay: Any = None
        self.dom: tuple[int, int, int, int] = (0, 0, 0, 0)  # ax, ay bounds

    @property
    def packing(self) -> bool:
        """A packing (CP-SAT chooses its columns), not a template."""
        return self.spec.kind == "packing"


def build_model(structs: list[Struct], design: DesignSpec, site: Site, assume: bool
                ) -> tuple[Any, dict[int, str]]:
    """The CP-SAT model placing the structures (module doc); with ``assume``, every rule
    is guarded by a named assumption literal (returned by index) so an infeasible model
    names its unsat core, and there is no objective."""
    m = cp_model.CpModel()
    guards: dict[str, Any] = {}
    lit_name: dict[int, str] = {}

    def guard(name: str) -> list[Any]:
        if not assume:
            return []
        if name not in guards:
            lit = m.new_bool_var(name)
            guards[name] = lit
            lit_name[lit.Index()] = name
        return [guards[name]]

    obj: list[Any] = []
    primary: list[Any] = []
    for st in structs:
        cons = constraints_of(design, st.spec)
        if not st.packing:
            _template_vars(m, st, cons, site, guard, assume, obj)
        else:
            packing_vars(m, st, cons, site, primary)
    _spacing(m, structs, site.gap, assume, guard)
    weight = 10 ** 7 if obj else 1  # packing goals before anchor distance (L1, U)
    if not assume:
        m.minimize(weight * sum(primary) + sum(obj) if primary else sum(obj))
    if assume:
        m.add_assumptions(list(guards.values()))
    return m, lit_name


def _template_vars(m: Any, st: Struct, cons: list[Any], site: Site, guard: Any,
                   assume: bool, obj: list[Any]) -> None:
    """A template structure's corner variables, its workspace, ``inside`` and zone
    constraints (each guarded by ``guard``), and its L1 distance to its anchor (in
    ``obj``)."""
    rules, z0, ws_lo, ws_hi = site.rules, site.z0, site.ws_lo, site.ws_hi
    bx, by = (-LIM // 2, LIM // 2), (-LIM // 2, LIM // 2)
    if "workspace" in rules and not assume:  # the domain is the workspace
        bx = (-((-ws_lo[0]) // 2), (ws_hi[0] - st.w) // 2)
        by = (-((-ws_lo[1]) // 2), (ws_hi[1] - st.d) // 2)
    st.dom = (bx[0], max(bx), by[0], max(by))
    st.ax = m.new_int_var(bx[0], max(bx), f"ax{st.idx}")
    st.ay = m.new_int_var(by[0], max(by), f"ay{st.idx}")
    X, Y = 2 * st.ax, 2 * st.ay  # the footprint's low corner (U, even)
    if "workspace" in rules:
        gl = guard(f"workspace ({st.name})")
        m.add(X >= ws_lo[0]).OnlyEnforceIf(gl)
        m.add(X + st.w <= ws_hi[0]).OnlyEnforceIf(gl)
        m.add(Y >= ws_lo[1]).OnlyEnforceIf(gl)
        m.add(Y + st.d <= ws_hi[1]).OnlyEnforceIf(gl)
    for c in cons:
        if isinstance(c, InsideConstraint):
            gl = guard(f"inside {where(c.source)} ({st.name})")
            for a, lo, hi in c.ranges:
                ai = "xyz".index(a)
                lo_u, hi_u = g.to_u(lo), g.to_u(hi)
                if ai == 2:
                    if z0 < lo_u or z0 + st.h > hi_u:
                        m.add_bool_or([m.new_constant(0)]).OnlyEnforceIf(gl)
                    continue
                v, ext = (X, st.w) if ai == 0 else (Y, st.d)
                m.add(v >= int(np.ceil(float(lo_u)))).OnlyEnforceIf(gl)
                m.add(v + ext <= int(np.floor(float(hi_u)))).OnlyEnforceIf(gl)
    # keep-outs: per footprint column of parts
    cols: dict[tuple[int, int], list[int]] = {}
    for px, py, pz, _ in st.parts:
        cols.setdefault((px, py), []).append(pz)
    for z in site.zones:
        what = (f"keep clear {z.name} ({where(z.source)})" if z.name in site.extra
                else f"keepout {z.name}")
        gl = guard(f"{what} ({st.name})")
        for (px, py), zs in sorted(cols.items()):
            zlo = z0 + min(zs) - st.s[2] // 2
            zhi = z0 + max(zs) + st.s[2] // 2
            blo = (X + px - st.s[0] // 2, Y + py - st.s[1] // 2, zlo)
            bhi = (X + px + st.s[0] // 2, Y + py + st.s[1] // 2, zhi)
            avoid(m, z, blo, bhi, gl)
    if st.spec.at is not None:
        tx = g.to_u_int(st.spec.at[0]) - st.w // 2
        ty = g.to_u_int(st.spec.at[1]) - st.d // 2
    else:
        tx = (ws_lo[0] + ws_hi[0]) // 2 - st.w // 2
        ty = (ws_lo[1] + ws_hi[1]) // 2 - st.d // 2
    for v, t in ((X, tx), (Y, ty)):
        dv = m.new_int_var(0, 4 * LIM, "")
        m.add_abs_equality(dv, v - t)
        obj.append(dv)


def _spacing(m: Any, structs: list[Struct], gap: int, assume: bool, guard: Any) -> None:
    """Structures stand apart (by the finger clearance) on x or y: boxes grown by the gap
    must not overlap (NoOverlap2D; pairwise disjunctions when naming a core)."""
    if assume:
        gl = guard("spacing between structures")
        for a in range(len(structs)):
            for b in range(a + 1, len(structs)):
                apart(m, structs[a], structs[b], gap, gl)
    elif len(structs) > 1:
        xs, ys = [], []
        for st in structs:
            if not st.packing:
                xs.append(m.new_fixed_size_interval_var(2 * st.ax, st.w + gap, ""))
                ys.append(m.new_fixed_size_interval_var(2 * st.ay, st.d + gap, ""))
                continue
            for c, (cx, cy) in enumerate(st.cols):
                u = st.used[c]
                xs.append(m.new_optional_fixed_size_interval_var(cx - st.s[0] // 2,
                                                            st.s[0] + gap, u, ""))
                ys.append(m.new_optional_fixed_size_interval_var(cy - st.s[1] // 2,
                                                            st.s[1] + gap, u, ""))
        m.add_no_overlap_2d(xs, ys)


def hint(m: Any, structs: list[Struct], site: Site, design: DesignSpec) -> None:
    """A first-fit placement (each structure, in order, at the free lattice position nearest
    its target) given to CP-SAT as a hint: CP-SAT's own search finds many identical
    structures hard to spread out. The answer is still CP-SAT's (at least as good)."""
    zones, z0, ws_lo, ws_hi, gap = site.zones, site.z0, site.ws_lo, site.ws_hi, site.gap
    placed: list[tuple[int, int, int, int]] = []
    for st in structs:
        if st.packing:
            continue
        dx = st.dom[:2]
        dy = st.dom[2:]
        xs = np.arange(2 * dx[0], 2 * dx[-1] + 1, HINT_STEP, dtype=np.int64)
        ys = np.arange(2 * dy[0], 2 * dy[-1] + 1, HINT_STEP, dtype=np.int64)
        if len(xs) == 0 or len(ys) == 0 or len(xs) * len(ys) > 4_000_000:
            continue
        gx, gy = np.meshgrid(xs, ys, indexing="ij")
        X, Y = gx.ravel(), gy.ravel()
        ok = np.ones(len(X), dtype=bool)
        for c in constraints_of(design, st.spec):
            if isinstance(c, InsideConstraint):
                for a, lo, hi in c.ranges:
                    # cast: numpy's stubs do not type an int array compared with a
                    # Fraction (compared exactly, element by element, at run time)
                    lo_u, hi_u = cast(Any, g.to_u(lo)), cast(Any, g.to_u(hi))
                    if a == "x":
                        ok &= (X >= lo_u) & (X + st.w <= hi_u)
                    elif a == "y":
                        ok &= (Y >= lo_u) & (Y + st.d <= hi_u)
        cols: dict[tuple[int, int], list[int]] = {}
        for px, py, pz, _ in st.parts:
            cols.setdefault((px, py), []).append(pz)
        for z in zones:
            for (px, py), zs in cols.items():
                zlo = z0 + min(zs) - st.s[2] // 2
                zhi = z0 + max(zs) + st.s[2] // 2
                blo = (X + px - st.s[0] // 2, Y + py - st.s[1] // 2, zlo)
                bhi = (X + px + st.s[0] // 2, Y + py + st.s[1] // 2, zhi)
                ok &= ~enters_np(z, blo, bhi)
        for ax0, ay0, w, d in placed:
            ok &= ~((X < ax0 + w + gap) & (ax0 < X + st.w + gap)
                    & (Y < ay0 + d + gap) & (ay0 < Y + st.d + gap))
        if not ok.any():
            continue
        if st.spec.at is not None:
            tx = g.to_u_int(st.spec.at[0]) - st.w // 2
            ty = g.to_u_int(st.spec.at[1]) - st.d // 2
        else:
            tx = (ws_lo[0] + ws_hi[0]) // 2 - st.w // 2
            ty = (ws_lo[1] + ws_hi[1]) // 2 - st.d // 2
        cost = np.where(ok, np.abs(X - tx) + np.abs(Y - ty), np.iinfo(np.int64).max)
        k = int(np.argmin(cost))
        m.add_hint(st.ax, int(X[k]) // 2)
        m.add_hint(st.ay, int(Y[k]) // 2)
        placed.append((int(X[k]), int(Y[k]), st.w, st.d))


def enters_np(z: Any, lo: tuple[Any, Any, int], hi: tuple[Any, Any, int]) -> np.ndarray:
    """Does each candidate box (x, y arrays, z constant) enter the zone by more than
    touching? The kernel's intersects relation with zero tolerance."""
    k = len(lo[0])
    boxes = np.empty((k, 6), dtype=np.int64)  # candidate corners are whole units U
    for a in range(3):
        boxes[:, 2 * a] = lo[a]
        boxes[:, 2 * a + 1] = hi[a]
    if isinstance(z, BoxZone):
        zl = tuple(float(g.to_u(v)) for v in z.box.lo)
        zh = tuple(float(g.to_u(v)) for v in z.box.hi)
        return g.intersects_box(boxes, zl, zh, 0)  # type: ignore[arg-type]
    return g.intersects_half(boxes, g.halfspace_u(z.coef, z.op, z.rhs), 0)


def avoid(m: Any, z: Any, lo: tuple[Any, Any, int], hi: tuple[Any, Any, int],
           gl: list[Any]) -> None:
    """The box [lo, hi] (x, y linear, z constant) does not enter zone ``z`` (exactly)."""
    if isinstance(z, BoxZone):
        zl = [g.to_u(v) for v in z.box.lo]
        zh = [g.to_u(v) for v in z.box.hi]
        if hi[2] <= zl[2] or lo[2] >= zh[2]:
            return
        opts = []
        for a in range(2):
            for expr, bound, le in ((hi[a], zl[a], True), (lo[a], zh[a], False)):
                lit = m.new_bool_var("")
                if le:
                    m.add(expr <= int(np.floor(float(bound)))).OnlyEnforceIf(lit)
                else:
                    m.add(expr >= int(np.ceil(float(bound)))).OnlyEnforceIf(lit)
                opts.append(lit)
        m.add_bool_or(opts).OnlyEnforceIf(gl)
        return
    h = g.halfspace_u(z.coef, z.op, z.rhs)
    # the box's extreme value of coef . p must stay on the allowed side (touching is fine)
    least, most = g.lin_extremes(h.coef, lo, hi)
    if z.op in (">", ">="):
        m.add(most <= h.rhs).OnlyEnforceIf(gl)
    else:
        m.add(least >= h.rhs).OnlyEnforceIf(gl)


def _region(st: Struct, cons: list[Any], site: Site) -> tuple[int, int, int, int, int]:
    """The packing's region on the grid (x_lo, y_lo even; x_hi, y_hi) and how many levels
    fit under the workspace top, its max height and its ``inside`` z bound."""
    reg = {a: (g.to_u(lo), g.to_u(hi)) for a, lo, hi in st.spec.region}
    for c in cons:
        if isinstance(c, InsideConstraint):
            for a, lo, hi in c.ranges:
                if a in reg:
                    reg[a] = (max(reg[a][0], g.to_u(lo)), min(reg[a][1], g.to_u(hi)))
    x_lo = int(np.ceil(float(reg["x"][0]))) if "x" in reg else site.ws_lo[0]
    y_lo = int(np.ceil(float(reg["y"][0]))) if "y" in reg else site.ws_lo[1]
    x_lo += (x_lo % 2)
    y_lo += (y_lo % 2)
    x_hi = int(np.floor(float(reg["x"][1]))) if "x" in reg else site.ws_hi[0]
    y_hi = int(np.floor(float(reg["y"][1]))) if "y" in reg else site.ws_hi[1]
    top = site.ws_hi[2] if "workspace" in site.rules else LIM
    for c in cons:
        if isinstance(c, MaxHeightConstraint):
            top = min(top, int(np.floor(float(g.to_u(c.h)))))
        if isinstance(c, InsideConstraint):
            for a, _lo, hi in c.ranges:
                if a == "z":
                    top = min(top, int(np.floor(float(g.to_u(hi)))))
    return x_lo, y_lo, x_hi, y_hi, max(0, (top - site.z0) // st.s[2])


def _columns(st: Struct, site: Site, x_lo: int, y_lo: int, nx: int, ny: int, levels: int
             ) -> int:
    """The packing's nx x ny lattice columns (in ``st.cols``) and the levels each can hold
    (``st.cap``: none outside the workspace, none from the first level entering a zone);
    returns their total."""
    sx, sy, sz = st.s
    px, py = sx + site.gap, sy + site.gap
    ws_lo, ws_hi, z0 = site.ws_lo, site.ws_hi, site.z0
    cap_total = 0
    for j in range(ny):
        for i in range(nx):
            cx = x_lo + sx // 2 + i * px
            cy = y_lo + sy // 2 + j * py
            cap = levels
            if "workspace" in site.rules and (cx - sx // 2 < ws_lo[0] or cx + sx // 2 > ws_hi[0]
                                              or cy - sy // 2 < ws_lo[1]
                                              or cy + sy // 2 > ws_hi[1]):
                cap = 0
            for z in site.zones:
                for lv in range(cap):
                    lo = (cx - sx // 2, cy - sy // 2, z0 + lv * sz)
                    hi = (cx + sx // 2, cy + sy // 2, z0 + (lv + 1) * sz)
                    if enters(z, lo, hi):
                        cap = lv
                        break
            st.cols.append((cx, cy))
            st.cap.append(cap)
            cap_total += cap
    return cap_total


def packing_vars(m: Any, st: Struct, cons: list[Any], site: Site, primary: list[Any]) -> None:
    """Lattice columns in the region, one height variable each (the solver chooses).
    Each model gets its own: a second model (the guarded one, for the unsat core) must
    not reuse the first model's columns and variables."""
    st.cols, st.cap, st.hvar, st.used = [], [], [], []
    spec = st.spec
    n = int(spec.params["n"])
    sx, sy, _ = st.s
    x_lo, y_lo, x_hi, y_hi, levels = _region(st, cons, site)
    px, py = sx + site.gap, sy + site.gap
    nx = max(0, (x_hi - x_lo - sx) // px + 1)
    ny = max(0, (y_hi - y_lo - sy) // py + 1)
    st.grid_n = (nx, ny)
    label = f"{st.name} (packing at {where(spec.source)})"
    cap_total = _columns(st, site, x_lo, y_lo, nx, ny, levels)
    # a real bound: even touching, no more than this many boxes fit the region's floor
    dense = max(0, (x_hi - x_lo) // sx) * max(0, (y_hi - y_lo) // sy) * levels
    if dense < n:
        raise Infeasible(f"{label}: even touching, the region holds at most {dense} parts "
                         f"of type {st.ptype} (up to {levels} high), fewer than n={n}",
                         ("workspace",), squares=True)
    if cap_total < n:
        raise Infeasible(f"{label}: the region holds at most {cap_total} parts of type "
                         f"{st.ptype} ({nx} x {ny} columns {to_m(px):.4g} m apart so the "
                         f"gripper fits, up to {levels} high; keep-outs, the workspace and "
                         f"max height counted), fewer than n={n}",
                         ("workspace", "spacing between structures"))
    for c, cap in enumerate(st.cap):
        h = m.new_int_var(0, cap, f"h{st.idx}_{c}")
        u = m.new_bool_var(f"u{st.idx}_{c}")
        m.add(h >= 1).OnlyEnforceIf(u)
        m.add(h == 0).OnlyEnforceIf(u.Not())
        st.hvar.append(h)
        st.used.append(u)
    m.add(sum(st.hvar) == n)
    for c in cons:
        if isinstance(c, SymmetricConstraint):
            for a in (("x", "y") if c.axis is None else (c.axis,)):
                for j in range(ny):
                    for i in range(nx):
                        i2, j2 = (nx - 1 - i, j) if a == "x" else (i, ny - 1 - j)
                        m.add(st.hvar[j * nx + i] == st.hvar[j2 * nx + i2])
        if isinstance(c, CountConstraint) and c in spec.constraints and not cmp_op(c.op, n, c.n):
            raise Infeasible(f"{label} has n={n} parts; count {c.op} {c.n} "
                             f"({where(c.source)})", ("count",))
    hmax = m.new_int_var(0, max(st.cap, default=0), f"H{st.idx}")
    for h in st.hvar:
        m.add(hmax >= h)
    nused = sum(st.used)
    ncols = len(st.cols) + 1
    if spec.minimize == "footprint":
        primary.append(nused * (max(st.cap, default=0) + 1) + hmax)
    else:
        primary.append(hmax * ncols + nused)


def enters(z: Any, lo: tuple[int, int, int], hi: tuple[int, int, int]) -> bool:
    """Does the (constant) box enter the zone (more than touching)?"""
    return bool(enters_np(z, ([lo[0]], [lo[1]], lo[2]), ([hi[0]], [hi[1]], hi[2]))[0])


def apart(m: Any, a: Struct, b: Struct, gap: int, gl: list[Any]) -> None:
    """Structures a and b stand at least ``gap`` apart on x or y."""
    def boxes(st: Struct) -> list[tuple[Any, Any, Any, Any, Any]]:
        if not st.packing:
            X, Y = 2 * st.ax, 2 * st.ay
            return [(X, X + st.w, Y, Y + st.d, None)]
        sx, sy = st.s[0], st.s[1]
        return [(cx - sx // 2, cx + sx // 2, cy - sy // 2, cy + sy // 2, st.used[c])
                for c, (cx, cy) in enumerate(st.cols)]

    for ax0, ax1, ay0, ay1, ua in boxes(a):
        for bx0, bx1, by0, by1, ub in boxes(b):
            cond = [x for x in (ua, ub) if x is not None]
            consts = all(isinstance(v, int) for v in (ax0, ax1, ay0, ay1, bx0, bx1, by0, by1))
            if consts:
                if (ax1 + gap <= bx0 or bx1 + gap <= ax0 or ay1 + gap <= by0
                        or by1 + gap <= ay0):
                    continue
                m.add_bool_or([c.Not() for c in cond] or [m.new_constant(0)]).OnlyEnforceIf(gl)
                continue
            opts = []
            for lhs, rhs in ((ax1 + gap, bx0), (bx1 + gap, ax0), (ay1 + gap, by0),
                             (by1 + gap, ay0)):
                lit = m.new_bool_var("")
                m.add(lhs <= rhs).OnlyEnforceIf(lit)
                opts.append(lit)
            m.add_bool_or(opts).OnlyEnforceIf([*cond, *gl])
