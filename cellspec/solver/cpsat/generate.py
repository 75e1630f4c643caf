"""Generate a layout from a design spec with CP-SAT on the integer grid.

Each structure kind is a shape (a template of parts placed by formula relative to the
structure's footprint corner, its gravity, contact and grip pattern known); CP-SAT
chooses where each structure stands, on the grid every verdict is decided on (boxes in
U = 0.05 mm, centres on the 0.1 mm grid), and, for ``packing``, which lattice columns
are used and how high. The model encodes:

* ``workspace`` and ``inside`` constraints: every box inside (exactly, no tolerance);
* ``keepout`` (the cell's zones) and ``keep clear`` zones: every box avoids them;
* structures stand apart by at least the parallel gripper's finger clearance, so no
  structure blocks another's grip and none rests on another (``no_overlap``);
* ``gravity``: each structure stands on the cell's first surface; its shape rests
  every part on the table or on parts below it;
* ``max height``, ``count``, ``symmetric``: on the shape (packing: in the model);
* the objective: each structure as near its ``at (x, y)`` anchor as the rules allow
  (L1), packings of least height or footprint first.

The order (and per part the grip axis) comes from the sequencer (:func:`..sequence.plan`);
the result is re-verified with clingo against the cell plus the keep-clear zones, and is
a success only if every error rule passes. Deterministic: one worker, a fixed seed.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from cellspec.core import geometry as g
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.design import (
    CountConstraint,
    DesignSpec,
    InsideConstraint,
    KeepClearConstraint,
    MaxHeightConstraint,
    StructureSpec,
    SymmetricConstraint,
)
from cellspec.dsl.model import BoxZone, Cell, Source
from cellspec.layout import Layout
from cellspec.solver.cpsat.results import Status, Step
from cellspec.solver.result import Verdict

DEFAULT_TIME_LIMIT = 10.0
SEED = 1
DET_TIME_FACTOR = 0.1  # CP-SAT deterministic time budget per second of --time-limit
HINT_STEP = 100  # U (5 mm): the lattice the first-fit hint scans
LIM = 20_000_000  # |coordinate| bound in U (1000 m)


class PlacedStructure(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    kind: str
    parts: int
    centre: tuple[float, float]  # footprint centre, metres
    requested: tuple[float, float] | None = None
    height: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "parts": self.parts,
                "centre": list(self.centre), "requested":
                list(self.requested) if self.requested else None, "height": self.height}


class GenerateResult(BaseModel):
    """A generated layout (re-verified: ``verdict`` passes, with an order), a proof that the
    spec cannot be built in the cell (``infeasible`` with the reason), or ``unknown``.
    ``optimal``: the placement is proved best for the objective; ``feasible``: a time
    limit stopped the proof."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    status: Status
    design: str
    layout: dict[str, Any] | None = None
    structures: tuple[PlacedStructure, ...] = ()
    steps: tuple[Step, ...] = ()
    reason: str | None = None
    conflict: tuple[str, ...] = ()
    verdict: Verdict | None = None
    seconds: float = 0.0

    @model_validator(mode="after")
    def _consistent(self) -> GenerateResult:
        if self.status in ("optimal", "feasible"):
            if self.layout is None or self.verdict is None or self.verdict.verdict != "pass":
                raise ValueError("a generated layout must carry a passing re-verification")
            if not self.layout.get("order"):
                raise ValueError("a generated layout carries its placement order")
        else:
            if self.layout is not None or self.steps:
                raise ValueError("no layout unless one was generated")
            if not self.reason:
                raise ValueError(f"status {self.status} must say why")
        return self

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "design": self.design,
                               "structures": [s.to_json() for s in self.structures],
                               "steps": [s.to_json() for s in self.steps]}
        if self.reason:
            out["reason"] = self.reason
        if self.conflict:
            out["conflict"] = list(self.conflict)
        if self.verdict is not None:
            out["verdict"] = self.verdict.verdict
        if self.layout is not None:
            out["layout"] = self.layout
        if timing:
            out["seconds"] = round(self.seconds, 4)
        return out


class _Infeasible(Exception):
    """A spec that provably cannot be built (arithmetic on the shape, no search needed)."""

    def __init__(self, reason: str, conflict: tuple[str, ...] = ()):
        super().__init__(reason)
        self.reason = reason
        self.conflict = conflict


def _even(v: float | int | Fraction) -> int:
    """Round to the nearest even integer (centres must lie on the 0.1 mm grid)."""
    return 2 * round(Fraction(v) / 2)


def _m(u: int | Fraction) -> float:
    return float(Fraction(u) * g.U)


# --- shapes ---------------------------------------------------------------------------
# A shape is a list of parts (centre offsets in U from the footprint's low corner, the
# bottom at 0; gripper or None for the cell's default). Every offset is even.

PartT = tuple[int, int, int, str | None]


def _grid(cells: list[tuple[int, int, int]], s: tuple[int, int, int],
          grip: Any = None) -> list[PartT]:
    sx, sy, sz = s
    out = []
    for i, j, lv in cells:
        out.append((sx // 2 + i * sx, sy // 2 + j * sy, sz // 2 + lv * sz,
                    grip(i, j, lv) if grip else None))
    return out


def _swap(parts: list[PartT], along: str) -> list[PartT]:
    if along == "x":
        return parts
    return [(y, x, z, gr) for x, y, z, gr in parts]


def shape(spec: StructureSpec, s: tuple[int, int, int], has_vacuum: bool) -> list[PartT]:
    """The parts of a template structure (not packing) for part size ``s`` (U)."""
    p = spec.params
    k = spec.kind
    along = str(p.get("along", "x"))
    sx, sy, sz = s
    s_al = (sx, sy, sz) if along == "x" else (sy, sx, sz)
    if k == "tower":
        return _grid([(0, 0, lv) for lv in range(int(p["n"]))], s)
    if k == "wall":
        cells = [(i, 0, lv) for lv in range(int(p["height"])) for i in range(int(p["width"]))]
        return _swap(_grid(cells, s_al), along)
    if k == "staircase":
        n = int(p["steps"])
        cells = [(i, 0, lv) for lv in range(n) for i in range(n) if lv <= i]
        return _swap(_grid(cells, s_al), along)
    if k == "pyramid":
        b = int(p["base"])
        a = s_al[0]
        out = []
        for lv in range(b):
            for i in range(b - lv):
                out.append((a // 2 + i * a + lv * (a // 2), s_al[1] // 2, sz // 2 + lv * sz, None))
        return _swap(out, along)
    if k in ("bridge", "arch"):
        span, pillar = int(p["span"]), int(p["pillar"])
        a = s_al[0]
        # corbel step: a/4 keeps every stage and the finished arch standing with the
        # stability margin (3a/10, round 1's step, tips each half inward under the keystone
        # once forces must act a margin inside every contact edge)
        step = _even(Fraction(a, 4))
        d = a // 2 + step * span  # pier centre distance from the middle
        c = d + a // 2  # the middle, from the low corner
        y = s_al[1] // 2
        out = []
        for lv in range(pillar):
            out += [(c - d, y, sz // 2 + lv * sz, None), (c + d, y, sz // 2 + lv * sz, None)]
        for q in range(1, span + 1):
            z = sz // 2 + (pillar + q - 1) * sz
            out += [(c - d + step * q, y, z, None), (c + d - step * q, y, z, None)]
        out.append((c, y, sz // 2 + (pillar + span) * sz, None))
        return _swap(out, along)
    if k == "canopy":
        h = int(p["height"])
        px, py = _even(Fraction(4 * sx, 5)), _even(Fraction(9 * sy, 10))
        ry = _even(Fraction(13 * sy, 10))
        cx, cy = sx + sx // 2, ry + sy // 2  # the middle, from the low corner
        out = []
        for dx, dy in ((-px, -py), (px, -py), (-px, py), (px, py)):
            for lv in range(h):
                out.append((cx + dx, cy + dy, sz // 2 + lv * sz, None))
        for dy in (-ry, 0, ry):
            for dx in (-sx, 0, sx):
                out.append((cx + dx, cy + dy, sz // 2 + h * sz, None))
        return out
    if k == "enclosure":
        w, d, h = int(p["w"]), int(p["d"]), int(p["h"])
        cells = [(i, j, lv) for lv in range(h) for j in range(d) for i in range(w)
                 if i in (0, w - 1) or j in (0, d - 1)]
        return _grid(cells, s)
    if k == "block":
        w, d, h = int(p["w"]), int(p["d"]), int(p["h"])
        if w >= 2 and d >= 2 and not has_vacuum:
            raise _Infeasible(f"a dense block {w} x {d} needs a vacuum gripper for its back "
                              "rows (with a parallel gripper the last cube of every 2 x 2 "
                              "square of touching cubes is boxed in on x and y), and the cell "
                              "has none", ("grip_access",))
        cells = [(i, j, lv) for lv in range(h) for j in range(d) for i in range(w)]
        vac = w >= 2 and d >= 2
        return _grid(cells, s, lambda i, j, lv: "vacuum" if vac and j >= 1 else None)
    raise CellspecError(f"structure kind '{k}' is not implemented yet")


def _symmetric(parts: list[PartT], s: tuple[int, int, int], axis: int) -> bool:
    ext = max(p[axis] for p in parts) + s[axis] // 2
    key = {(p[0], p[1], p[2]) for p in parts}
    for p in parts:
        q = list(p[:3])
        q[axis] = ext - q[axis]
        if tuple(q) not in key:
            return False
    return True


def _cmp(op: str, a: int, b: int) -> bool:
    return {"==": a == b, "<=": a <= b, ">=": a >= b, "<": a < b, ">": a > b}[op]


# --- the model ------------------------------------------------------------------------

class _Struct:
    def __init__(self, idx: int, spec: StructureSpec, ptype: str, s: tuple[int, int, int]):
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
        return self.spec.kind == "packing"


def _constraints(design: DesignSpec, spec: StructureSpec) -> list[Any]:
    return [*design.constraints, *spec.constraints]


def _where(src: Source) -> str:
    return f"{src.file}:{src.line}:{src.col}"


def generate(cell: Cell, design: DesignSpec, *, time_limit: float = DEFAULT_TIME_LIMIT,
             workers: int = 1) -> GenerateResult:
    """Build the design in the cell: CP-SAT places the structures so every error rule of
    the cell holds, the sequencer orders them; re-verified with clingo."""
    t0 = time.perf_counter()

    def left() -> float:
        return max(0.05, time_limit - (time.perf_counter() - t0))

    def done(**kw: Any) -> GenerateResult:
        return GenerateResult(design=design.name, seconds=time.perf_counter() - t0, **kw)

    try:
        return _generate(cell, design, left, workers, done, time_limit)
    except _Infeasible as exc:
        if "spacing between structures" in exc.conflict:
            # relies on the generator's own spacing between structures: not a proof
            return done(status="unknown", conflict=exc.conflict,
                        reason=f"{exc.reason} (the generator keeps structures a finger "
                        "clearance apart; placements where they touch are not searched, so "
                        "this is not a proof)")
        return done(status="infeasible", reason=exc.reason, conflict=exc.conflict)


def _generate(cell: Cell, design: DesignSpec, left: Any, workers: int, done: Any,
              time_limit: float) -> GenerateResult:
    from ortools.sat.python import cp_model

    from cellspec.solver.cpsat.repair import with_blocked
    from cellspec.solver.cpsat.sequence import plan

    # zones: the cell's keep-outs plus keep-clear zones (added to the cell, so the
    # re-verification checks them too)
    extra: dict[str, Any] = {}
    zone_names = {z.name for z in cell.keepouts}
    for spec_c in [*design.constraints, *(c for st in design.structures
                                          for c in st.constraints)]:
        if isinstance(spec_c, KeepClearConstraint):
            if spec_c.zone is not None:
                extra[spec_c.zone.name] = spec_c.zone
            elif spec_c.zone_name not in zone_names:
                raise CellspecError(Diagnostic(
                    spec_c.source.file, spec_c.source.line, spec_c.source.col,
                    f"keep clear of '{spec_c.zone_name}': no such keep-out zone in the cell "
                    f"(zones: {', '.join(sorted(zone_names)) or 'none'})"))
    cell2 = with_blocked(cell, tuple(extra.values()))
    rules = {r.name for r in cell.rules if r.severity == "error"}
    if not cell.surfaces:
        raise CellspecError(Diagnostic(cell.source.file, cell.source.line, cell.source.col,
                                       "the cell has no surface to build on"))
    z0 = g.to_u_int(cell.surfaces[0].z)
    ws_lo = [g.to_u_int(v) for v in cell.workspace.lo]
    ws_hi = [g.to_u_int(v) for v in cell.workspace.hi]
    has_vacuum = cell.default_gripper.kind == "vacuum" or any(
        r.gripper.kind == "vacuum" for r in cell.robots)
    grip = cell.gripper_params("parallel")
    eps = int(g.to_u(cell.epsilon))

    structs: list[_Struct] = []
    for k, spec in enumerate(design.structures):
        tname = str(spec.params.get("type") or "")
        if not tname:
            tname = "cube" if "cube" in cell.part_types else next(iter(cell.part_types), "")
        if tname not in cell.part_types:
            src = spec.source
            raise CellspecError(Diagnostic(src.file, src.line, src.col, f"unknown part type "
                                           f"'{tname}' (the cell defines: "
                                           f"{', '.join(sorted(cell.part_types)) or 'none'})"))
        size = cell.part_types[tname].size
        s = tuple(int(g.to_u(v)) for v in size)
        if any(g.to_u(v).denominator != 1 or int(g.to_u(v)) % 4 for v in size):
            src = spec.source
            raise CellspecError(Diagnostic(src.file, src.line, src.col, f"part type '{tname}' "
                                           "has a size that is not a multiple of 0.2 mm; "
                                           "generation places parts on the 0.1 mm grid"))
        structs.append(_Struct(k, spec, tname, s))  # type: ignore[arg-type]

    # the gap between structures (and packing columns): at least the finger clearance
    gap = eps + 2
    if grip.opening is not None:
        gap = max(gap, _even(Fraction(g.to_u_int(grip.opening) - min(
            (min(st.s[0], st.s[1]) for st in structs), default=0), 2) + 1))
    gap += gap % 2  # even: centres stay on the 0.1 mm grid

    total = 0
    for st in structs:
        spec = st.spec
        cons = _constraints(design, spec)
        label = f"{st.name} ({spec.kind} at {_where(spec.source)})"
        if not st.packing:
            st.parts = shape(spec, st.s, has_vacuum)
            st.w = max(p[0] for p in st.parts) + st.s[0] // 2
            st.d = max(p[1] for p in st.parts) + st.s[1] // 2
            st.h = max(p[2] for p in st.parts) + st.s[2] // 2
            n = len(st.parts)
            total += n
            if "workspace" in rules and z0 + st.h > ws_hi[2]:
                raise _Infeasible(f"{label} is {_m(st.h):.4g} m tall, over the workspace top "
                                  f"(z {_m(ws_hi[2]):.4g} m)", ("workspace",))
            if "workspace" in rules and (st.w > ws_hi[0] - ws_lo[0]
                                         or st.d > ws_hi[1] - ws_lo[1]):
                raise _Infeasible(f"{label} needs a footprint of {_m(st.w):.4g} x "
                                  f"{_m(st.d):.4g} m, larger than the workspace",
                                  ("workspace",))
            for c in cons:
                if isinstance(c, MaxHeightConstraint) and z0 + st.h > g.to_u(c.h):
                    raise _Infeasible(f"{label} is {_m(z0 + st.h):.4g} m high, over its max "
                                      f"height {float(c.h):g} m ({_where(c.source)})",
                                      ("max height",))
                if isinstance(c, CountConstraint) and c in spec.constraints and not _cmp(
                        c.op, n, c.n):
                    raise _Infeasible(f"{label} has {n} parts; count {c.op} {c.n} "
                                      f"({_where(c.source)})", ("count",))
                if isinstance(c, SymmetricConstraint):
                    for a in ((0, 1) if c.axis is None else ("xy".index(c.axis),)):
                        if not _symmetric(st.parts, st.s, a):
                            raise _Infeasible(f"{label} is not symmetric about {'xy'[a]} "
                                              f"({_where(c.source)})", ("symmetric",))
        else:
            total += int(spec.params["n"])
    for c in design.constraints:
        if isinstance(c, CountConstraint) and not _cmp(c.op, total, c.n):
            raise _Infeasible(f"design {design.name} has {total} parts; count {c.op} {c.n} "
                              f"({_where(c.source)})", ("count",))

    zones = [z for z in cell2.keepouts] if "keepout" in rules else list(extra.values())
    if "workspace" in rules and len(structs) > 1:
        # a real proof first: footprints (no gap) of rigid shapes must be disjoint and lie in
        # the workspace, so they cannot need more floor, or more lattice cells, than it has
        tmpl0 = [st for st in structs if not st.packing]
        if tmpl0:
            W0, D0 = ws_hi[0] - ws_lo[0], ws_hi[1] - ws_lo[1]
            a0 = min(st.w for st in tmpl0)
            b0 = min(st.d for st in tmpl0)
            fit0 = (W0 // a0) * (D0 // b0)
            need0 = sum(st.w * st.d for st in tmpl0)
            if len(tmpl0) > fit0 or need0 > W0 * D0:
                raise _Infeasible(
                    f"too many parts for the workspace: {len(tmpl0)} structures of footprint "
                    f"at least {_m(a0):.4g} x {_m(b0):.4g} m need "
                    f"{_m(need0) * float(g.U):.4g} m2 of floor even touching each other; at "
                    f"most {fit0} fit and the workspace has {_m(W0 * D0) * float(g.U):.4g} m2",
                    ("workspace",))
        # every structure's footprint grown by the gap is disjoint from the others' and
        # lies in the workspace grown by the gap: their areas must fit
        tmpl = [st for st in structs if not st.packing]
        need = sum((st.w + gap) * (st.d + gap) for st in tmpl)
        W, D = ws_hi[0] - ws_lo[0] + gap, ws_hi[1] - ws_lo[1] + gap
        have = W * D
        if tmpl:
            # every grown footprint is at least a x b; each contains a point of the lattice
            # a Z x b Z (half-open), and two holding the same point overlap: at most
            # floor(W / a) * floor(D / b) of them fit
            a = min(st.w for st in tmpl) + gap
            b = min(st.d for st in tmpl) + gap
            if len(tmpl) > (W // a) * (D // b):
                raise _Infeasible(
                    f"too many parts for the workspace: {len(tmpl)} structures of footprint "
                    f"at least {_m(a - gap):.4g} x {_m(b - gap):.4g} m with the "
                    f"{_m(gap):.4g} m gripper gap between them; at most {(W // a) * (D // b)} "
                    f"fit ({W // a} x {D // b})", ("workspace", "spacing between structures"))
        if need > have:
            raise _Infeasible(
                f"too many parts for the workspace: the {len(structs)} structures need "
                f"{_m(need) * float(g.U):.4g} m2 of floor (footprints with the "
                f"{_m(gap):.4g} m gripper gap between them), the workspace has "
                f"{_m(have) * float(g.U):.4g} m2", ("workspace", "spacing between structures"))

    def build(assume: bool) -> tuple[Any, dict[int, str]]:
        m = cp_model.CpModel()
        guards: dict[str, Any] = {}
        lit_name: dict[int, str] = {}

        def guard(name: str) -> list[Any]:
            if not assume:
                return []
            if name not in guards:
                lit = m.NewBoolVar(name)
                guards[name] = lit
                lit_name[lit.Index()] = name
            return [guards[name]]

        obj: list[Any] = []
        primary: list[Any] = []
        for st in structs:
            spec = st.spec
            cons = _constraints(design, spec)
            if not st.packing:
                bx, by = (-LIM // 2, LIM // 2), (-LIM // 2, LIM // 2)
                if "workspace" in rules and not assume:  # the domain is the workspace
                    bx = (-((-ws_lo[0]) // 2), (ws_hi[0] - st.w) // 2)
                    by = (-((-ws_lo[1]) // 2), (ws_hi[1] - st.d) // 2)
                st.dom = (bx[0], max(bx), by[0], max(by))
                st.ax = m.NewIntVar(bx[0], max(bx), f"ax{st.idx}")
                st.ay = m.NewIntVar(by[0], max(by), f"ay{st.idx}")
                X, Y = 2 * st.ax, 2 * st.ay  # the footprint's low corner (U, even)
                if "workspace" in rules:
                    gl = guard(f"workspace ({st.name})")
                    m.Add(X >= ws_lo[0]).OnlyEnforceIf(gl)
                    m.Add(X + st.w <= ws_hi[0]).OnlyEnforceIf(gl)
                    m.Add(Y >= ws_lo[1]).OnlyEnforceIf(gl)
                    m.Add(Y + st.d <= ws_hi[1]).OnlyEnforceIf(gl)
                for c in cons:
                    if isinstance(c, InsideConstraint):
                        gl = guard(f"inside {_where(c.source)} ({st.name})")
                        for a, lo, hi in c.ranges:
                            ai = "xyz".index(a)
                            lo_u, hi_u = g.to_u(lo), g.to_u(hi)
                            if ai == 2:
                                if z0 < lo_u or z0 + st.h > hi_u:
                                    m.AddBoolOr([m.NewConstant(0)]).OnlyEnforceIf(gl)
                                continue
                            v, ext = (X, st.w) if ai == 0 else (Y, st.d)
                            m.Add(v >= int(np.ceil(float(lo_u)))).OnlyEnforceIf(gl)
                            m.Add(v + ext <= int(np.floor(float(hi_u)))).OnlyEnforceIf(gl)
                # keep-outs: per footprint column of parts
                cols: dict[tuple[int, int], list[int]] = {}
                for px, py, pz, _ in st.parts:
                    cols.setdefault((px, py), []).append(pz)
                for z in zones:
                    what = (f"keep clear {z.name} ({_where(z.source)})" if z.name in extra
                            else f"keepout {z.name}")
                    gl = guard(f"{what} ({st.name})")
                    for (px, py), zs in sorted(cols.items()):
                        zlo = z0 + min(zs) - st.s[2] // 2
                        zhi = z0 + max(zs) + st.s[2] // 2
                        lo = (X + px - st.s[0] // 2, Y + py - st.s[1] // 2, zlo)
                        hi = (X + px + st.s[0] // 2, Y + py + st.s[1] // 2, zhi)
                        _avoid(m, z, lo, hi, gl)
                if spec.at is not None:
                    tx = g.to_u_int(spec.at[0]) - st.w // 2
                    ty = g.to_u_int(spec.at[1]) - st.d // 2
                else:
                    tx = (ws_lo[0] + ws_hi[0]) // 2 - st.w // 2
                    ty = (ws_lo[1] + ws_hi[1]) // 2 - st.d // 2
                for v, t in ((X, tx), (Y, ty)):
                    dv = m.NewIntVar(0, 4 * LIM, "")
                    m.AddAbsEquality(dv, v - t)
                    obj.append(dv)
            else:
                _packing_vars(m, st, spec, cons, rules, zones, z0, ws_lo, ws_hi, gap,
                              primary)
        # structures stand apart (by the finger clearance) on x or y: boxes grown by the
        # gap must not overlap (NoOverlap2D; pairwise disjunctions when naming a core)
        if assume:
            gl = guard("spacing between structures")
            for a in range(len(structs)):
                for b in range(a + 1, len(structs)):
                    _apart(m, structs[a], structs[b], gap, gl)
        elif len(structs) > 1:
            xs, ys = [], []
            for st in structs:
                if not st.packing:
                    xs.append(m.NewFixedSizeIntervalVar(2 * st.ax, st.w + gap, ""))
                    ys.append(m.NewFixedSizeIntervalVar(2 * st.ay, st.d + gap, ""))
                    continue
                for c, (cx, cy) in enumerate(st.cols):
                    u = st.used[c]
                    xs.append(m.NewOptionalFixedSizeIntervalVar(cx - st.s[0] // 2,
                                                                st.s[0] + gap, u, ""))
                    ys.append(m.NewOptionalFixedSizeIntervalVar(cy - st.s[1] // 2,
                                                                st.s[1] + gap, u, ""))
            m.AddNoOverlap2D(xs, ys)
        weight = 10 ** 7 if obj else 1  # packing goals before anchor distance (L1, U)
        if not assume:
            m.Minimize(weight * sum(primary) + sum(obj) if primary else sum(obj))
        if assume:
            m.AddAssumptions(list(guards.values()))
        return m, lit_name

    m, _ = build(False)
    _hint(m, structs, zones, z0, ws_lo, ws_hi, gap, design)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = left()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = SEED
    # deterministic budget: the same input gives the same answer (the wall-clock limit
    # is only a safety net)
    solver.parameters.max_deterministic_time = DET_TIME_FACTOR * time_limit
    st_ = solver.Solve(m)
    if st_ == cp_model.INFEASIBLE:
        m2, names = build(True)
        s2 = cp_model.CpSolver()
        s2.parameters.max_time_in_seconds = left()
        s2.parameters.num_workers = 1
        s2.parameters.random_seed = SEED
        r2 = s2.Solve(m2)
        core: tuple[str, ...] = ()
        if r2 == cp_model.INFEASIBLE:
            core = tuple(sorted(names[k] for k in s2.SufficientAssumptionsForInfeasibility()
                                if k in names))
        if not core or "spacing between structures" in core:
            # the generator keeps structures a finger clearance apart; touching structures
            # are not searched, so this is no proof that the design cannot be built
            why = "; ".join(core) if core else "the rules together"
            return done(status="unknown", conflict=core,
                        reason="no placement found with the structures a finger clearance "
                        f"apart ({why}); placements where structures touch are not searched "
                        "by the generator, so this is not a proof")
        why = "; ".join(core)
        return done(status="infeasible", conflict=core,
                    reason=f"no placement of the design in the cell satisfies: {why}")
    if st_ not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return done(status="unknown", reason="time limit hit before a placement was found")
    status: Status = "optimal" if st_ == cp_model.OPTIMAL else "feasible"

    ids: list[str] = []
    types: list[str] = []
    pos: list[list[float]] = []
    grips: list[str | None] = []
    placed: list[PlacedStructure] = []
    for st in structs:
        k = 0
        if not st.packing:
            X, Y = 2 * solver.Value(st.ax), 2 * solver.Value(st.ay)
            items = [(X + px, Y + py, z0 + pz, gr) for px, py, pz, gr in st.parts]
            cx, cy = X + st.w // 2, Y + st.d // 2
            height = z0 + st.h
        else:
            items = []
            for c, (px, py) in enumerate(st.cols):
                for lv in range(solver.Value(st.hvar[c])):
                    items.append((px, py, z0 + st.s[2] // 2 + lv * st.s[2], None))
            xs = [p[0] for p in items] or [0]
            ys = [p[1] for p in items] or [0]
            cx, cy = (min(xs) + max(xs)) // 2, (min(ys) + max(ys)) // 2
            height = max((p[2] for p in items), default=z0) + st.s[2] // 2
        for x, y, z, gr in items:
            k += 1
            ids.append(f"{st.name}_{k}")
            types.append(st.ptype)
            pos.append([_m(x), _m(y), _m(z)])
            grips.append(gr)
        req = (float(st.spec.at[0]), float(st.spec.at[1])) if st.spec.at else None
        placed.append(PlacedStructure(name=st.name, kind=st.spec.kind, parts=k,
                                      centre=(_m(cx), _m(cy)), requested=req,
                                      height=_m(height)))
    n = len(ids)
    layout = Layout(ids=tuple(ids), types=tuple(types),
                    pos=np.array(pos, dtype=np.float64).reshape(n, 3),
                    size=np.full((n, 3), np.nan), grippers=tuple(grips), order=None,
                    path=f"<design {design.name}>")
    if n == 0:
        return done(status="infeasible", reason="the design has no parts")
    pr = plan(cell2, layout, time_limit=left())
    if pr.status == "infeasible":
        return done(status="infeasible", conflict=pr.conflict,
                    reason=f"the shapes admit no assembly order in this cell: {pr.reason}")
    if pr.status != "optimal" or pr.verdict is None:
        return done(status="unknown", reason=f"sequencing: {pr.reason}")
    if pr.verdict.verdict != "pass":
        bad = "; ".join(f"{v.rule}({', '.join(v.parts)})" for v in pr.verdict.violations[:5])
        return done(status="unknown", reason="the generated layout does not re-verify (the "
                    "generator does not encode every rule of this cell): "
                    f"{bad or pr.verdict.reason}")

    final = layout.with_order(pr.order)
    return done(status=status, layout=final.to_json(), structures=tuple(placed),
                steps=pr.steps, verdict=pr.verdict)


def _hint(m: Any, structs: list[_Struct], zones: list[Any], z0: int, ws_lo: list[int],
          ws_hi: list[int], gap: int, design: DesignSpec) -> None:
    """A first-fit placement (each structure, in order, at the free lattice position nearest
    its target) given to CP-SAT as a hint: CP-SAT's own search finds many identical
    structures hard to spread out. The answer is still CP-SAT's (at least as good)."""
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
        X, Y = np.meshgrid(xs, ys, indexing="ij")
        X, Y = X.ravel(), Y.ravel()
        ok = np.ones(len(X), dtype=bool)
        for c in _constraints(design, st.spec):
            if isinstance(c, InsideConstraint):
                for a, lo, hi in c.ranges:
                    if a == "x":
                        ok &= (X >= g.to_u(lo)) & (X + st.w <= g.to_u(hi))
                    elif a == "y":
                        ok &= (Y >= g.to_u(lo)) & (Y + st.d <= g.to_u(hi))
        cols: dict[tuple[int, int], list[int]] = {}
        for px, py, pz, _ in st.parts:
            cols.setdefault((px, py), []).append(pz)
        for z in zones:
            for (px, py), zs in cols.items():
                zlo = z0 + min(zs) - st.s[2] // 2
                zhi = z0 + max(zs) + st.s[2] // 2
                lo = (X + px - st.s[0] // 2, Y + py - st.s[1] // 2, zlo)
                hi = (X + px + st.s[0] // 2, Y + py + st.s[1] // 2, zhi)
                ok &= ~_enters_np(z, lo, hi)
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
        m.AddHint(st.ax, int(X[k]) // 2)
        m.AddHint(st.ay, int(Y[k]) // 2)
        placed.append((int(X[k]), int(Y[k]), st.w, st.d))


def _enters_np(z: Any, lo: tuple[Any, Any, int], hi: tuple[Any, Any, int]) -> np.ndarray:
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


def _avoid(m: Any, z: Any, lo: tuple[Any, Any, int], hi: tuple[Any, Any, int],
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
                lit = m.NewBoolVar("")
                if le:
                    m.Add(expr <= int(np.floor(float(bound)))).OnlyEnforceIf(lit)
                else:
                    m.Add(expr >= int(np.ceil(float(bound)))).OnlyEnforceIf(lit)
                opts.append(lit)
        m.AddBoolOr(opts).OnlyEnforceIf(gl)
        return
    h = g.halfspace_u(z.coef, z.op, z.rhs)
    # the box's extreme value of coef . p must stay on the allowed side (touching is fine)
    least, most = g.lin_extremes(h.coef, lo, hi)
    if z.op in (">", ">="):
        m.Add(most <= h.rhs).OnlyEnforceIf(gl)
    else:
        m.Add(least >= h.rhs).OnlyEnforceIf(gl)


def _packing_vars(m: Any, st: _Struct, spec: StructureSpec, cons: list[Any], rules: set[str],
                  zones: list[Any], z0: int, ws_lo: list[int], ws_hi: list[int], gap: int,
                  primary: list[Any]) -> None:
    """Lattice columns in the region, one height variable each (the solver chooses)."""
    n = int(spec.params["n"])
    sx, sy, sz = st.s
    reg = {a: (g.to_u(lo), g.to_u(hi)) for a, lo, hi in spec.region}
    for c in cons:
        if isinstance(c, InsideConstraint):
            for a, lo, hi in c.ranges:
                if a in reg:
                    reg[a] = (max(reg[a][0], g.to_u(lo)), min(reg[a][1], g.to_u(hi)))
    x_lo = int(np.ceil(float(reg["x"][0]))) if "x" in reg else ws_lo[0]
    y_lo = int(np.ceil(float(reg["y"][0]))) if "y" in reg else ws_lo[1]
    x_lo += (x_lo % 2)
    y_lo += (y_lo % 2)
    x_hi = int(np.floor(float(reg["x"][1]))) if "x" in reg else ws_hi[0]
    y_hi = int(np.floor(float(reg["y"][1]))) if "y" in reg else ws_hi[1]
    px, py = sx + gap, sy + gap
    nx = max(0, (x_hi - x_lo - sx) // px + 1)
    ny = max(0, (y_hi - y_lo - sy) // py + 1)
    top = ws_hi[2] if "workspace" in rules else LIM
    for c in cons:
        if isinstance(c, MaxHeightConstraint):
            top = min(top, int(np.floor(float(g.to_u(c.h)))))
        if isinstance(c, InsideConstraint):
            for a, _lo, hi in c.ranges:
                if a == "z":
                    top = min(top, int(np.floor(float(g.to_u(hi)))))
    levels = max(0, (top - z0) // sz)
    st.grid_n = (nx, ny)
    label = f"{st.name} (packing at {_where(spec.source)})"
    cap_total = 0
    for j in range(ny):
        for i in range(nx):
            cx = x_lo + sx // 2 + i * px
            cy = y_lo + sy // 2 + j * py
            cap = levels
            if "workspace" in rules and (cx - sx // 2 < ws_lo[0] or cx + sx // 2 > ws_hi[0]
                                         or cy - sy // 2 < ws_lo[1]
                                         or cy + sy // 2 > ws_hi[1]):
                cap = 0
            for z in zones:
                for lv in range(cap):
                    lo = (cx - sx // 2, cy - sy // 2, z0 + lv * sz)
                    hi = (cx + sx // 2, cy + sy // 2, z0 + (lv + 1) * sz)
                    if _enters(z, lo, hi):
                        cap = lv
                        break
            st.cols.append((cx, cy))
            st.cap.append(cap)
            cap_total += cap
    # a real bound: even touching, no more than this many boxes fit the region's floor
    dense = max(0, (x_hi - x_lo) // sx) * max(0, (y_hi - y_lo) // sy) * levels
    if dense < n:
        raise _Infeasible(f"{label}: even touching, the region holds at most {dense} parts "
                          f"of type {st.ptype} (up to {levels} high), fewer than n={n}",
                          ("workspace",))
    if cap_total < n:
        raise _Infeasible(f"{label}: the region holds at most {cap_total} parts of type "
                          f"{st.ptype} ({nx} x {ny} columns {_m(px):.4g} m apart so the "
                          f"gripper fits, up to {levels} high; keep-outs, the workspace and "
                          f"max height counted), fewer than n={n}",
                          ("workspace", "spacing between structures"))
    for c, cap in enumerate(st.cap):
        h = m.NewIntVar(0, cap, f"h{st.idx}_{c}")
        u = m.NewBoolVar(f"u{st.idx}_{c}")
        m.Add(h >= 1).OnlyEnforceIf(u)
        m.Add(h == 0).OnlyEnforceIf(u.Not())
        st.hvar.append(h)
        st.used.append(u)
    m.Add(sum(st.hvar) == n)
    for c in cons:
        if isinstance(c, SymmetricConstraint):
            for a in (("x", "y") if c.axis is None else (c.axis,)):
                for j in range(ny):
                    for i in range(nx):
                        i2, j2 = (nx - 1 - i, j) if a == "x" else (i, ny - 1 - j)
                        m.Add(st.hvar[j * nx + i] == st.hvar[j2 * nx + i2])
        if isinstance(c, CountConstraint) and c in spec.constraints and not _cmp(c.op, n, c.n):
            raise _Infeasible(f"{label} has n={n} parts; count {c.op} {c.n} "
                              f"({_where(c.source)})", ("count",))
    hmax = m.NewIntVar(0, max(st.cap, default=0), f"H{st.idx}")
    for h in st.hvar:
        m.Add(hmax >= h)
    nused = sum(st.used)
    ncols = len(st.cols) + 1
    if spec.minimize == "footprint":
        primary.append(nused * (max(st.cap, default=0) + 1) + hmax)
    else:
        primary.append(hmax * ncols + nused)


def _enters(z: Any, lo: tuple[int, int, int], hi: tuple[int, int, int]) -> bool:
    """Does the (constant) box enter the zone (more than touching)?"""
    return bool(_enters_np(z, ([lo[0]], [lo[1]], lo[2]), ([hi[0]], [hi[1]], hi[2]))[0])


def _apart(m: Any, a: _Struct, b: _Struct, gap: int, gl: list[Any]) -> None:
    """Structures a and b stand at least ``gap`` apart on x or y."""
    def boxes(st: _Struct) -> list[tuple[Any, Any, Any, Any, Any]]:
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
                m.AddBoolOr([c.Not() for c in cond] or [m.NewConstant(0)]).OnlyEnforceIf(gl)
                continue
            opts = []
            for lhs, rhs in ((ax1 + gap, bx0), (bx1 + gap, ax0), (ay1 + gap, by0),
                             (by1 + gap, ay0)):
                lit = m.NewBoolVar("")
                m.Add(lhs <= rhs).OnlyEnforceIf(lit)
                opts.append(lit)
            m.AddBoolOr(opts).OnlyEnforceIf([*cond, *gl])


__all__ = ["generate", "GenerateResult", "PlacedStructure", "shape"]
