"""Intent rules: what a design spec asks for, as clauses every layout is verified against.

Every statement of a ``design`` compiles to *clauses* (:func:`clauses`), each with the
source of the statement (file:line:col, or the command's words): per structure its part
type, part count, levels, columns, footprint size, position (``at``: the footprint centre
within :data:`AT_TOL` = 5 mm on x and on y; ``near``: soft, the chosen centre is
reported), ``inside`` regions, ``max height``, ``symmetric``; design-wide the total
``count``, ``max height``, ``inside``, ``keep clear`` boxes, ``apart D`` (the clear gap
between the footprints of consecutive structures, the larger of the x gap and the y gap,
within :data:`GAP_TOL` = 1 mm) and "no other parts".

A layout is read as *groups*: parts joined by contact (boxes touching or overlapping
within :data:`TOUCH` = 0.5 mm). Which group is which structure is a search: clingo
chooses the assignment (each template structure one group, of its part count when there
is one, or none; every group not chosen belongs to the packing, if any) that satisfies
the most clauses, and decides each clause (:func:`decide`). :func:`reference` decides the
same with plain Python by enumerating the assignments (the differential test's peer).
Lengths are integers of 0.01 mm in both.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import clingo
import numpy as np

from cellspec.core import geometry as g
from cellspec.dsl.design import (
    AT_TOL,
    ApartConstraint,
    BoxZone,
    CountConstraint,
    DesignSpec,
    InsideConstraint,
    KeepClearConstraint,
    MaxHeightConstraint,
    StructureSpec,
    SymmetricConstraint,
)
from cellspec.layout import Layout
from cellspec.solver.asp.clingo_log import clingo_logger
from cellspec.solver.cpsat.shapes import shape

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

Q = 100_000  # integer units per metre: 0.01 mm
GAP_TOL = Fraction(1, 1000)  # m: `apart D` holds within this
EXT_TOL = Fraction(1, 1000)  # m: a footprint's size matches its template within this
TOUCH = Fraction(5, 10000)  # m: parts this close are one group
MAX_CANDIDATES = 32  # groups a structure may be matched to (nearest its anchor first)
OPS = {"==": "eq", "<=": "le", ">=": "ge", "<": "lt", ">": "gt"}


def q(v: float | Fraction) -> int:
    """Metres to integer units of 0.01 mm (rounded)."""
    return int(round(float(v) * Q))


def m(v: int) -> float:
    """Integer units back to metres."""
    return v / Q


@dataclass(frozen=True)
class Clause:
    """One intent clause: ``kind``, the structure it is about (0-based; -1 design-wide),
    integer arguments (units of 0.01 mm), the human text and the source."""

    id: int
    kind: str
    s: int
    args: tuple[Any, ...]
    text: str
    source: str
    soft: bool = False


@dataclass(frozen=True)
class ClauseResult:
    """A clause with its verdict and what was measured."""

    clause: Clause
    holds: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"clause": self.clause.text, "holds": self.holds, "detail": self.detail,
                "source": self.clause.source, "kind": self.clause.kind,
                "soft": self.clause.soft}


@dataclass(frozen=True)
class Part:
    """A part as the clauses see it: group, type, centre and half sizes (0.01 mm),
    and its level / column keys (0.1 mm)."""

    gid: int
    type: str
    c: tuple[int, int, int]
    h: tuple[int, int, int]


@dataclass
class Facts:
    """The layout's parts (in groups) for one spec's clauses."""

    parts: list[Part]
    groups: int
    packing: tuple[int, ...]  # structures that are packings
    templates: tuple[int, ...]
    clauses: list[Clause] = field(default_factory=list)
    cands: dict[int, list[int]] = field(default_factory=dict)  # template -> its groups


def _src(s: Any, command: str | None) -> str:
    """file:line:col of the statement (the spec of ``command`` when it was translated)."""
    return f"{s.file}:{s.line}:{s.col}"


def _template(cell: Cell, st: StructureSpec) -> tuple[str, list[tuple[int, int, int]],
                                                      tuple[int, int, int]] | None:
    """(part type, part centres (0.01 mm, low corner at 0), part size) of a template."""
    tname = str(st.params.get("type") or "")
    if not tname:
        tname = "cube" if "cube" in cell.part_types else next(iter(cell.part_types), "")
    if tname not in cell.part_types:
        return None
    size = cell.part_types[tname].size
    if st.kind == "packing":
        return tname, [], tuple(q(v) for v in size)  # type: ignore[return-value]
    s = tuple(int(g.to_u(v)) for v in size)
    parts = shape(st, s, True)  # type: ignore[arg-type]
    u = float(g.U)
    return tname, [(q(p[0] * u), q(p[1] * u), q(p[2] * u)) for p in parts], \
        tuple(q(v) for v in size)  # type: ignore[return-value]


def clauses(cell: Cell, spec: DesignSpec, command: str | None = None) -> list[Clause]:
    """The intent clauses of ``spec`` in ``cell`` (see the module docstring)."""
    out: list[Clause] = []

    def add(kind: str, s: int, args: tuple[Any, ...], text: str, src: Any,
            soft: bool = False) -> None:
        out.append(Clause(len(out), kind, s, args, text, _src(src, command), soft))

    names: list[str] = []
    for k, st in enumerate(spec.structures):
        names.append(f"{st.kind} {k + 1}")
    for k, st in enumerate(spec.structures):
        name = names[k]
        t = _template(cell, st)
        if t is None:
            add("type", k, (str(st.params.get("type")),), f"{name} is made of "
                f"{st.params.get('type')} (not a part type of the cell)", st.source)
            continue
        tname, parts, size = t
        add("type", k, (tname,), f"{name} is made of {tname}", st.source)
        if st.kind == "packing":
            n = int(st.params["n"])
            add("count", k, (n,), f"{name} has {n} parts", st.source)
            if st.region:
                r = dict((a, (q(lo), q(hi))) for a, lo, hi in st.region)
                big = q(1000)
                box = (*r.get("x", (-big, big)), *r.get("y", (-big, big)), -big, big)
                add("inside", k, box, f"{name} inside its region " + " ".join(
                    f"{a} [{float(lo):g}, {float(hi):g}]" for a, lo, hi in st.region),
                    st.source)
        else:
            n = len(parts)
            levels = len({p[2] for p in parts})
            cols = len({(p[0], p[1]) for p in parts})
            w = max(p[0] for p in parts) + size[0] // 2 - min(p[0] for p in parts) + size[0] // 2
            d = max(p[1] for p in parts) + size[1] // 2 - min(p[1] for p in parts) + size[1] // 2
            add("count", k, (n,), f"{name} has {n} parts", st.source)
            add("levels", k, (levels,), f"{name} is {levels} level(s) high", st.source)
            add("columns", k, (cols,), f"{name} stands on {cols} column(s)", st.source)
            add("footprint", k, (w, d, q(EXT_TOL)), f"{name} has a {m(w):g} x {m(d):g} m "
                "footprint", st.source)
        if st.at is not None:
            x, y = st.at
            if st.soft:
                add("near", k, (2 * q(x), 2 * q(y)), f"{name} near ({float(x):g}, "
                    f"{float(y):g})", st.source, soft=True)
            else:
                add("at", k, (2 * q(x), 2 * q(y), 2 * q(AT_TOL)), f"{name} centred at "
                    f"({float(x):g}, {float(y):g}) within {float(AT_TOL) * 1000:g} mm",
                    st.source)
        for c in st.constraints:
            _constraint(c, k, name, add)
    for c in spec.constraints:
        _constraint(c, -1, "the design", add)
    gap = next((c for c in spec.constraints if isinstance(c, ApartConstraint)), None)
    if gap is not None:
        for k in range(len(spec.structures) - 1):
            add("apart", k, (k + 1, q(gap.d), q(GAP_TOL)), f"{names[k]} and {names[k + 1]} "
                f"{float(gap.d):g} m apart (clear gap between footprints)", gap.source)
    if not any(st.kind == "packing" for st in spec.structures):
        add("no_extra", -1, (), "no parts other than the structures", spec.source)
    return out


def _constraint(c: Any, k: int, name: str, add: Any) -> None:
    if isinstance(c, MaxHeightConstraint):
        add("max_top", k, (q(c.h),), f"{name} no higher than {float(c.h):g} m", c.source)
    elif isinstance(c, CountConstraint):
        add("total", k, (OPS[c.op], c.n), f"{name} has {c.op} {c.n} parts", c.source)
    elif isinstance(c, InsideConstraint):
        r = dict((a, (q(lo), q(hi))) for a, lo, hi in c.ranges)
        big = q(1000)
        box = (*r.get("x", (-big, big)), *r.get("y", (-big, big)), *r.get("z", (-big, big)))
        add("inside", k, box, f"{name} inside " + " ".join(
            f"{a} [{float(lo):g}, {float(hi):g}]" for a, lo, hi in c.ranges), c.source)
    elif isinstance(c, SymmetricConstraint):
        for ax in ([c.axis] if c.axis else ["x", "y"]):
            add("symmetric", k, (0 if ax == "x" else 1,), f"{name} mirror symmetric in {ax}",
                c.source)
    elif isinstance(c, KeepClearConstraint) and isinstance(c.zone, BoxZone):
        b = c.zone.box
        add("clear", k, (q(b.lo[0]), q(b.hi[0]), q(b.lo[1]), q(b.hi[1]), q(b.lo[2]),
                         q(b.hi[2])), f"{name} keeps clear of {c.zone.name}", c.source)


def facts(cell: Cell, layout: Layout, spec: DesignSpec, cls: list[Clause]) -> Facts:
    """The layout's parts grouped by contact (numpy), for :func:`decide` and
    :func:`reference`."""
    size = layout.resolve(cell)
    n = len(layout)
    pos = np.asarray(layout.pos, dtype=np.float64)
    half = size / 2
    yaw = np.asarray(layout.yaw, dtype=np.float64) % 180
    turned = np.isclose(yaw, 90)
    half[turned, 0], half[turned, 1] = half[turned, 1].copy(), half[turned, 0].copy()
    root = list(range(n))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    t = float(TOUCH)
    for i0 in range(0, n, 512):
        d = np.abs(pos[i0:i0 + 512, None, :] - pos[None, :, :])
        near = np.all(d <= half[i0:i0 + 512, None, :] + half[None, :, :] + t, axis=2)
        for a, b in zip(*np.nonzero(near), strict=True):
            i, j = i0 + int(a), int(b)
            if i < j:
                ri, rj = find(i), find(j)
                if ri != rj:
                    root[max(ri, rj)] = min(ri, rj)
    gids: dict[int, int] = {}
    parts = []
    for i in range(n):
        gid = gids.setdefault(find(i), len(gids))
        parts.append(Part(gid, layout.types[i], (q(pos[i, 0]), q(pos[i, 1]), q(pos[i, 2])),
                          (q(half[i, 0]), q(half[i, 1]), q(half[i, 2]))))
    pk = tuple(k for k, st in enumerate(spec.structures) if st.kind == "packing")
    tp = tuple(k for k, st in enumerate(spec.structures) if st.kind != "packing")
    return Facts(parts, len(gids), pk, tp, cls, _candidates(parts, len(gids), spec, cls, tp))


def _candidates(parts: list[Part], ngroups: int, spec: DesignSpec, cls: list[Clause],
                templates: tuple[int, ...]) -> dict[int, list[int]]:
    """The groups a template structure may be: those with its part count (when there is
    none, every group: the clauses then say how the nearest differs), at most
    :data:`MAX_CANDIDATES`, nearest its anchor first (then by group)."""
    size = [0] * ngroups
    box: list[list[int]] = [[2**62, -2**62, 2**62, -2**62] for _ in range(ngroups)]
    for p in parts:
        size[p.gid] += 1
        b = box[p.gid]
        b[0], b[1] = min(b[0], p.c[0] - p.h[0]), max(b[1], p.c[0] + p.h[0])
        b[2], b[3] = min(b[2], p.c[1] - p.h[1]), max(b[3], p.c[1] + p.h[1])
    out: dict[int, list[int]] = {}
    for s in templates:
        n = next(c.args[0] for c in cls if c.s == s and c.kind == "count") \
            if any(c.s == s and c.kind == "count" for c in cls) else None
        gs = [g for g in range(ngroups) if size[g] == n] or list(range(ngroups))
        st = spec.structures[s]
        if st.at is not None:
            ax, ay = 2 * q(st.at[0]), 2 * q(st.at[1])
            gs.sort(key=lambda g: (max(abs(box[g][0] + box[g][1] - ax),
                                       abs(box[g][2] + box[g][3] - ay)), g))
        out[s] = gs[:MAX_CANDIDATES]
    return out


# --- clingo ------------------------------------------------------------------------
PROGRAM = """
{ assign(S,G) : cand(S,G) } 1 :- template(S).
:- assign(S1,G), assign(S2,G), S1 < S2.
assigned(G) :- assign(_,G).
in(S,P) :- assign(S,G), part(P,G,_,_,_,_,_,_,_).
in(S,P) :- packing(S), part(P,G,_,_,_,_,_,_,_), not assigned(G).
in(-1,P) :- part(P,_,_,_,_,_,_,_,_).
st(S) :- template(S). st(S) :- packing(S). st(-1).
n(S,N) :- st(S), N = #count{ P : in(S,P) }.
levels(S,L) :- st(S), L = #count{ Z : in(S,P), part(P,_,_,_,_,Z,_,_,_) }.
cols(S,K) :- st(S), K = #count{ X,Y : in(S,P), part(P,_,_,X,Y,_,_,_,_) }.
lo(S,0,V) :- n(S,N), N > 0, V = #min{ X-H,P : in(S,P), part(P,_,_,X,_,_,H,_,_) }.
hi(S,0,V) :- n(S,N), N > 0, V = #max{ X+H,P : in(S,P), part(P,_,_,X,_,_,H,_,_) }.
lo(S,1,V) :- n(S,N), N > 0, V = #min{ Y-H,P : in(S,P), part(P,_,_,_,Y,_,_,H,_) }.
hi(S,1,V) :- n(S,N), N > 0, V = #max{ Y+H,P : in(S,P), part(P,_,_,_,Y,_,_,H,_) }.
lo(S,2,V) :- n(S,N), N > 0, V = #min{ Z-H,P : in(S,P), part(P,_,_,_,_,Z,_,_,H) }.
hi(S,2,V) :- n(S,N), N > 0, V = #max{ Z+H,P : in(S,P), part(P,_,_,_,_,Z,_,_,H) }.
holds(I) :- c_type(I,S,T), n(S,N), N > 0,
            #count{ P : in(S,P), part(P,_,T2,_,_,_,_,_,_), T2 != T } = 0.
holds(I) :- c_count(I,S,N), n(S,N).
holds(I) :- c_levels(I,S,L), levels(S,L).
holds(I) :- c_columns(I,S,K), cols(S,K).
holds(I) :- c_footprint(I,S,W,D,E), lo(S,0,X0), hi(S,0,X1), lo(S,1,Y0), hi(S,1,Y1),
            |X1-X0-W| <= E, |Y1-Y0-D| <= E.
holds(I) :- c_footprint(I,S,W,D,E), lo(S,0,X0), hi(S,0,X1), lo(S,1,Y0), hi(S,1,Y1),
            |X1-X0-D| <= E, |Y1-Y0-W| <= E.
holds(I) :- c_at(I,S,X2,Y2,T2), lo(S,0,X0), hi(S,0,X1), lo(S,1,Y0), hi(S,1,Y1),
            |X0+X1-X2| <= T2, |Y0+Y1-Y2| <= T2.
holds(I) :- c_near(I,S,_,_).
holds(I) :- c_max_top(I,S,H), n(S,0).
holds(I) :- c_max_top(I,S,H), hi(S,2,V), V <= H.
holds(I) :- c_inside(I,S,_,_,_,_,_,_), n(S,0).
holds(I) :- c_inside(I,S,A0,A1,B0,B1,C0,C1), lo(S,0,X0), hi(S,0,X1), lo(S,1,Y0),
            hi(S,1,Y1), lo(S,2,Z0), hi(S,2,Z1), A0 <= X0, X1 <= A1, B0 <= Y0, Y1 <= B1,
            C0 <= Z0, Z1 <= C1.
hit(I) :- c_clear(I,S,A0,A1,B0,B1,C0,C1), in(S,P), part(P,_,_,X,Y,Z,HX,HY,HZ),
          X-HX < A1, A0 < X+HX, Y-HY < B1, B0 < Y+HY, Z-HZ < C1, C0 < Z+HZ.
holds(I) :- c_clear(I,_,_,_,_,_,_,_), not hit(I).
holds(I) :- c_total(I,S,eq,N), n(S,N).
holds(I) :- c_total(I,S,le,N), n(S,M), M <= N.
holds(I) :- c_total(I,S,ge,N), n(S,M), M >= N.
holds(I) :- c_total(I,S,lt,N), n(S,M), M < N.
holds(I) :- c_total(I,S,gt,N), n(S,M), M > N.
has(S,T,X,Y,Z) :- in(S,P), part(P,_,T,X,Y,Z,_,_,_).
asym(I) :- c_symmetric(I,S,0), in(S,P), part(P,_,T,X,Y,Z,_,_,_), lo(S,0,A), hi(S,0,B),
           not has(S,T,A+B-X,Y,Z).
asym(I) :- c_symmetric(I,S,1), in(S,P), part(P,_,T,X,Y,Z,_,_,_), lo(S,1,A), hi(S,1,B),
           not has(S,T,X,A+B-Y,Z).
holds(I) :- c_symmetric(I,S,_), n(S,N), N > 0, not asym(I).
gx(I,V) :- c_apart(I,S1,S2,_,_), lo(S1,0,A0), hi(S1,0,A1), lo(S2,0,B0), hi(S2,0,B1),
           V = #max{ A0-B1 ; B0-A1 }.
gy(I,V) :- c_apart(I,S1,S2,_,_), lo(S1,1,A0), hi(S1,1,A1), lo(S2,1,B0), hi(S2,1,B1),
           V = #max{ A0-B1 ; B0-A1 }.
holds(I) :- c_apart(I,_,_,G,E), gx(I,X), gy(I,Y), X >= Y, |X-G| <= E.
holds(I) :- c_apart(I,_,_,G,E), gx(I,X), gy(I,Y), Y > X, |Y-G| <= E.
holds(I) :- c_no_extra(I,_), #count{ G : group(G), not assigned(G) } = 0.
#maximize { 1,I : holds(I) }.
#show holds/1. #show assign/2.
"""


def _asp_facts(f: Facts) -> str:
    lines = [f"group({k})." for k in range(f.groups)]
    lines += [f"template({k})." for k in f.templates]
    lines += [f"packing({k})." for k in f.packing]
    lines += [f"cand({s},{g})." for s, gs in f.cands.items() for g in gs]
    for i, p in enumerate(f.parts):
        lines.append(f'part({i},{p.gid},"{p.type}",{p.c[0]},{p.c[1]},{p.c[2]},'
                     f"{p.h[0]},{p.h[1]},{p.h[2]}).")
    for c in f.clauses:
        args = ",".join(f'"{a}"' if isinstance(a, str) and c.kind == "type" else str(a)
                        for a in c.args)
        lines.append(f"c_{c.kind}({c.id},{c.s}" + (f",{args}" if args else "") + ").")
    return "\n".join(lines)


def decide(f: Facts) -> tuple[set[int], dict[int, int]]:
    """clingo's optimum: the clauses that hold and the assignment (structure -> group)."""
    ctl = clingo.Control(["--opt-mode=opt", "-t", "1"], logger=clingo_logger)
    ctl.add("base", [], PROGRAM + _asp_facts(f))
    ctl.ground([("base", [])])
    best: list[clingo.Symbol] = []

    def on_model(mdl: clingo.Model) -> None:
        best[:] = mdl.symbols(shown=True)

    res = ctl.solve(on_model=on_model)
    if not res.satisfiable:
        raise RuntimeError("intent program unsatisfiable (a bug: every assignment may be empty)")
    held = {s.arguments[0].number for s in best if s.name == "holds"}
    assign = {s.arguments[0].number: s.arguments[1].number for s in best if s.name == "assign"}
    return held, assign


# --- the plain-Python reference --------------------------------------------------------
def _members(f: Facts, assign: dict[int, int]) -> dict[int, list[Part]]:
    used = set(assign.values())
    out: dict[int, list[Part]] = {-1: list(f.parts)}
    for s in f.templates:
        out[s] = [p for p in f.parts if s in assign and p.gid == assign[s]]
    for s in f.packing:
        out[s] = [p for p in f.parts if p.gid not in used]
    return out


def _box(ps: list[Part]) -> list[int] | None:
    if not ps:
        return None
    return [min(p.c[0] - p.h[0] for p in ps), max(p.c[0] + p.h[0] for p in ps),
            min(p.c[1] - p.h[1] for p in ps), max(p.c[1] + p.h[1] for p in ps),
            min(p.c[2] - p.h[2] for p in ps), max(p.c[2] + p.h[2] for p in ps)]


# complexity: one case per clause kind
def _holds(c: Clause, mem: dict[int, list[Part]], f: Facts,  # noqa: C901
           assign: dict[int, int]) -> bool:
    ps = mem.get(c.s, [])
    b = _box(ps)
    a = c.args
    if c.kind == "type":
        return bool(ps) and all(p.type == a[0] for p in ps)
    if c.kind == "count":
        return len(ps) == a[0]
    if c.kind == "levels":
        return len({p.c[2] for p in ps}) == a[0]
    if c.kind == "columns":
        return len({(p.c[0], p.c[1]) for p in ps}) == a[0]
    if c.kind == "footprint":
        if b is None:
            return False
        w, d = b[1] - b[0], b[3] - b[2]
        return (abs(w - a[0]) <= a[2] and abs(d - a[1]) <= a[2]) or \
            (abs(w - a[1]) <= a[2] and abs(d - a[0]) <= a[2])
    if c.kind == "at":
        return b is not None and abs(b[0] + b[1] - a[0]) <= a[2] and \
            abs(b[2] + b[3] - a[1]) <= a[2]
    if c.kind == "near":
        return True
    if c.kind == "max_top":
        return b is None or b[5] <= a[0]
    if c.kind == "inside":
        return b is None or (a[0] <= b[0] and b[1] <= a[1] and a[2] <= b[2] and b[3] <= a[3]
                             and a[4] <= b[4] and b[5] <= a[5])
    if c.kind == "clear":
        return not any(p.c[0] - p.h[0] < a[1] and a[0] < p.c[0] + p.h[0]
                       and p.c[1] - p.h[1] < a[3] and a[2] < p.c[1] + p.h[1]
                       and p.c[2] - p.h[2] < a[5] and a[4] < p.c[2] + p.h[2] for p in ps)
    if c.kind == "total":
        n = len(ps)
        return {"eq": n == a[1], "le": n <= a[1], "ge": n >= a[1], "lt": n < a[1],
                "gt": n > a[1]}[a[0]]
    if c.kind == "symmetric":
        if b is None:
            return False
        key = {(p.type, *p.c) for p in ps}
        ax = a[0]
        lo, hi = b[2 * ax], b[2 * ax + 1]
        return all((p.type, *[lo + hi - v if k == ax else v for k, v in enumerate(p.c)])
                   in key for p in ps)
    if c.kind == "apart":
        b1, b2 = _box(mem.get(c.s, [])), _box(mem.get(a[0], []))
        if b1 is None or b2 is None:
            return False
        gx = max(b1[0] - b2[1], b2[0] - b1[1])
        gy = max(b1[2] - b2[3], b2[2] - b1[3])
        return abs(max(gx, gy) - a[1]) <= a[2]
    if c.kind == "no_extra":
        return set(range(f.groups)) <= set(assign.values())
    raise AssertionError(f"clause kind {c.kind}")


def reference(f: Facts) -> tuple[set[int], dict[int, int]]:
    """The same optimum as :func:`decide`, by enumerating every assignment (plain Python;
    exponential in the number of structures: the differential test's peer)."""
    best: tuple[int, set[int], dict[int, int]] | None = None
    choices = [[None, *f.cands.get(s, [])] for s in f.templates]
    for combo in itertools.product(*choices):
        used = [x for x in combo if x is not None]
        if len(used) != len(set(used)):
            continue
        assign = {s: x for s, x in zip(f.templates, combo, strict=True) if x is not None}
        mem = _members(f, assign)
        held = {c.id for c in f.clauses if _holds(c, mem, f, assign)}
        if best is None or len(held) > best[0]:
            best = (len(held), held, assign)
    assert best is not None
    return best[1], best[2]


# --- the report ----------------------------------------------------------------------
def _detail(c: Clause, mem: dict[int, list[Part]], holds: bool) -> str:
    ps = mem.get(c.s, [])
    b = _box(ps)
    a = c.args
    if c.kind in ("type", "count", "levels", "columns") and not ps:
        return "no group of parts matches this structure"
    if c.kind == "type":
        return "types: " + ", ".join(sorted({p.type for p in ps}))
    if c.kind in ("count", "total"):
        return f"{len(ps)} parts"
    if c.kind == "levels":
        return f"{len({p.c[2] for p in ps})} level(s)"
    if c.kind == "columns":
        return f"{len({(p.c[0], p.c[1]) for p in ps})} column(s)"
    if b is None:
        return "no parts"
    cx, cy = m(b[0] + b[1]) / 2, m(b[2] + b[3]) / 2
    if c.kind == "footprint":
        return f"{m(b[1] - b[0]):.4g} x {m(b[3] - b[2]):.4g} m"
    if c.kind in ("at", "near"):
        dx, dy = abs(cx - m(a[0]) / 2), abs(cy - m(a[1]) / 2)
        what = "chosen" if c.kind == "near" else "centre"
        return f"{what} ({cx:.4f}, {cy:.4f}), {max(dx, dy) * 1000:.1f} mm off"
    if c.kind == "max_top":
        return f"top at {m(b[5]):.4f} m"
    if c.kind == "inside":
        return f"footprint x [{m(b[0]):.4f}, {m(b[1]):.4f}] y [{m(b[2]):.4f}, {m(b[3]):.4f}]" \
            f" z [{m(b[4]):.4f}, {m(b[5]):.4f}]"
    if c.kind == "apart":
        b2 = _box(mem.get(a[0], []))
        if b2 is None:
            return "the other structure has no parts"
        gap = max(b[0] - b2[1], b2[0] - b[1], b[2] - b2[3], b2[2] - b[3])
        return f"clear gap {m(gap):.4f} m"
    return "holds" if holds else "does not hold"


def evaluate(cell: Cell, layout: Layout, spec: DesignSpec, command: str | None = None,
             backend: str = "clingo") -> list[ClauseResult]:
    """Every intent clause of ``spec`` decided on ``layout`` (clingo, or ``reference``)."""
    cls = clauses(cell, spec, command)
    f = facts(cell, layout, spec, cls)
    held, assign = decide(f) if backend == "clingo" else reference(f)
    mem = _members(f, assign)
    out = []
    for c in cls:
        h = c.id in held
        det = _detail(c, mem, h)
        if c.kind == "no_extra" and not h:
            det = f"{f.groups - len(set(assign.values()))} group(s) of parts belong to no " \
                "structure"
        out.append(ClauseResult(c, h, det))
    return out


def failing(results: list[ClauseResult]) -> list[ClauseResult]:
    """The clauses that do not hold."""
    return [r for r in results if not r.holds]


def _fmt(v: float) -> str:
    return f"{v:.4f}".rstrip("0").rstrip(".")


def why_not(cell: Cell, spec: DesignSpec, results: list[ClauseResult],
            placed: tuple[Any, ...] = ()) -> str:
    """Why the solver's build breaks the spec, in the user's numbers: a position outside
    the workspace or inside a keep-out with the nearest position the solver found
    (``placed``: its :class:`~cellspec.solver.cpsat.generate.PlacedStructure` list), else
    the clauses that fail."""
    bad = failing(results)
    ws = cell.workspace
    msgs: list[str] = []
    for r in bad:
        c = r.clause
        if c.kind != "at":
            continue
        st = spec.structures[c.s]
        assert st.at is not None
        x, y = float(st.at[0]), float(st.at[1])
        near = placed[c.s].centre if c.s < len(placed) else None
        where = ""
        for ax, v, lo, hi in (("x", x, ws.lo[0], ws.hi[0]), ("y", y, ws.lo[1], ws.hi[1])):
            if not float(lo) <= v <= float(hi):
                where = (f"{ax} {_fmt(v)} is outside the workspace {ax} [{float(lo):.2f}, "
                         f"{float(hi):.2f}]")
                if near is not None:
                    i = 0 if ax == "x" else 1
                    where += f"; the nearest {st.kind} position is {ax} {_fmt(near[i])}"
                break
        if not where:
            for z in cell.keepouts:
                box = getattr(z, "box", None)
                if box is not None and float(box.lo[0]) <= x <= float(box.hi[0]) and \
                        float(box.lo[1]) <= y <= float(box.hi[1]):
                    where = f"({_fmt(x)}, {_fmt(y)}) is inside keep-out {z.name}"
                    break
            if not where:
                where = f"no {st.kind} fits at ({_fmt(x)}, {_fmt(y)}) ({r.detail})"
            if near is not None:
                where += f"; the nearest {st.kind} position is ({_fmt(near[0])}, " \
                    f"{_fmt(near[1])})"
        msgs.append(f"{st.kind} {c.s + 1} at ({_fmt(x)}, {_fmt(y)}) ({c.source}): {where}")
    if not msgs:
        msgs = [f"{r.clause.text} ({r.clause.source}): {r.detail}" for r in bad]
    return "cannot build as asked: " + "; ".join(msgs)
