"""Preference scores with clingo: the violated weight of a layout (the check backend's
count), and a proof of the least violated weight a cell admits (``#minimize``).

The score (shared with ``check``): every binding of a preference rule's outer forall
variables under which its body is false costs the rule's weight; ``total`` is the weight
of every binding; ``met = total - violated``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from cellspec.core.severity import Severity
from cellspec.core.status import BackendStatus, Status
from cellspec.dsl.model import Cell, Rule
from cellspec.layout import Layout


@dataclass(frozen=True)
class Score:
    """A layout's preference score: weight met of the total, the violated bindings per rule
    (rule name -> count), or ``unknown`` with the reason when the backend hit a limit."""

    met: int
    total: int
    violated: dict[str, int]
    unknown: str | None = None


def preference_rules(cell: Cell) -> list[Rule]:
    """The cell's preference rules, in the order written."""
    return [r for r in cell.rules if r.severity == Severity.PREFERENCE]


def preference_cost(cell: Cell, layout: Layout, *, backend: str = "clingo",
                    timeout: float | None = None) -> Score:
    """The violated weight of ``layout`` (as a :class:`Score`), counted by a check backend
    (clingo by default; ``reference`` for the brute-force oracle): every violating binding,
    none capped. The one place the solver layer computes a layout's score."""
    from cellspec.solver import checkers, pref_score
    from cellspec.solver.instance import build_instance

    rules = preference_rules(cell)
    if not rules:
        return Score(0, 0, {})
    inst = build_instance(cell, layout)
    dims = (inst.n, len(inst.keepouts), len(inst.robots))
    total = pref_score.total_weight(rules, *dims)
    chk = checkers.get(backend)
    refused = chk.supported(rules)
    if refused:
        return Score(0, total, {}, unknown="; ".join(r.sentence() for r in refused))
    res = chk.violations(inst, rules, timeout)
    if res.status != BackendStatus.DONE:
        return Score(0, total, {}, unknown=res.reason or "solver limit")
    violated: dict[str, int] = {}
    for k, _binding in res.violations:
        violated[rules[k].name] = violated.get(rules[k].name, 0) + 1
    sc = pref_score.score(rules, res.violations, *dims)  # check's count: one definition
    assert sc is not None and sc.met is not None
    return Score(sc.met, total, violated)


def score_json(score: Score, optimal: bool, notes: list[str] | tuple[str, ...] = ()
               ) -> dict[str, Any]:
    """The ``"preferences"`` object of generate, design and repair: met, total, whether the
    score is proved optimal (and the notes saying why not, when there are any)."""
    out: dict[str, Any] = {"met": score.met, "total": score.total,
                           "optimal": bool(optimal and score.unknown is None)}
    why = list(notes) + ([f"the score could not be counted: {score.unknown}"]
                         if score.unknown else [])
    if why:
        out["notes"] = why
    return out


def score_line(prefs: dict[str, Any]) -> str:
    """The pretty line: ``preferences: 9 of 12 weight met (optimal)``."""
    how = "optimal" if prefs["optimal"] else "best found"
    return f"preferences: {prefs['met']} of {prefs['total']} weight met ({how})"


__all__ = ["Score", "preference_cost", "preference_rules", "score_json", "score_line"]


# --- the least violated weight a cell admits, proved by clingo (#minimize) -----------------

MAX_POSITIONS = 4000  # lattice positions per part
MAX_PAIR_GROUND = 6_000_000  # positions^2 x part pairs: the pair relations' grounding
# position pairs grounded per second (measured ~450 000/s on the loaded 2-core machine, with
# two pair relations): the proof refuses up front when grounding alone would pass its time
GROUND_RATE = 400_000
ENCODED = {"contact", "overlaps", "supports", "above", "near", "inside", "intersects", "on",
           "grounded"}


BoundStatus = Literal[Status.OPTIMAL, Status.INFEASIBLE, Status.UNKNOWN]


@dataclass(frozen=True)
class Bound:
    """clingo's least violated preference weight over the layouts of the given parts with
    their centres on a lattice (``step_m`` apart, boxes inside the workspace), every error
    rule in ``rules`` holding (``relaxed``: error rules it cannot encode, left out).
    ``status``: ``optimal`` (proved), ``infeasible`` (no such layout), or ``unknown`` with
    the reason (a size or time limit)."""

    status: BoundStatus
    violated: int | None = None
    total: int = 0
    step_m: float = 0.0
    positions: int = 0
    relaxed: tuple[str, ...] = ()
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        out: dict[str, Any] = {"status": self.status, "step_m": self.step_m,
                               "positions": self.positions, "total": self.total}
        if self.violated is not None:
            out["violated"] = self.violated
            out["met"] = self.total - self.violated
        if self.relaxed:
            out["relaxed"] = list(self.relaxed)
        if self.reason:
            out["reason"] = self.reason
        return out


def _encodable(node: Any) -> str | None:
    """Why clingo cannot encode this body here (None: it can)."""
    from cellspec.core import ir

    for n_ in ir.walk(node):
        if isinstance(n_, ir.Rel):
            if n_.name not in ENCODED:
                return f"it reads {n_.name}"
            vs = [a.name for a in n_.args if isinstance(a, ir.VarArg)]
            if len(set(vs)) < len(vs):
                return f"{n_.name} relates a part to itself"
    return None


class _Asp:
    """IR bodies as ASP rules over chosen boxes: one predicate per node, true exactly when
    the node holds (the reference evaluator's meaning and bindings)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.k = 0
        self.domains: dict[str, str] = {}
        self.nears: set[int] = set()
        self.zuses: set[tuple[str, str]] = set()
        self.used: set[str] = set()  # the builtins.lp program parts the rules read

    def var(self, v: str) -> str:
        return "V_" + "".join(c if c.isalnum() else "_" for c in v)

    def dom(self, vs: list[str]) -> list[str]:
        kinds = {"part": "part", "keepout": "keepout", "robot": "robot"}
        return [f"{kinds[self.domains.get(v, 'part')]}({self.var(v)})" for v in vs]

    def head(self, vs: list[str]) -> str:
        self.k += 1
        name = f"h{self.k}"
        self.lines.append(f"#defined {name}/{len(vs)}.")
        return name + (f"({','.join(self.var(v) for v in vs)})" if vs else "")

    def distinct(self, new: tuple[str, ...], unordered: bool, outer: list[str],
                 domain: str) -> list[str]:
        """The quantifier's own variables distinct (``<`` when unordered) and distinct from
        the outer part variables its body mentions."""
        if domain != "part":
            return []
        out = []
        for a in range(len(new)):
            for b in range(a + 1, len(new)):
                op = "<" if unordered else "!="
                out.append(f"{self.var(new[a])} {op} {self.var(new[b])}")
            out.extend(f"{self.var(new[a])} != {self.var(u)}" for u in outer
                       if self.domains.get(u) == "part")
        return out

    def fv(self, node: Any) -> list[str]:
        from cellspec.solver.reference import free_vars

        return sorted(free_vars(node))

    # complexity: one case per IR node kind, each a rule or two
    def body(self, node: Any) -> str:  # noqa: C901
        """The atom (with the node's free variables) true exactly when ``node`` holds."""
        from cellspec.core import geometry as g
        from cellspec.core import ir
        from cellspec.solver.instance import lin_to_int

        vs = self.fv(node)
        h = self.head(vs)
        dom = self.dom(vs)

        def rule(*lits: str) -> None:
            self.lines.append(f"{h} :- {', '.join([*dom, *lits]) or '#true'}.")

        if isinstance(node, ir.BoolConst):
            if node.value:
                rule()
        elif isinstance(node, ir.Not):
            rule(f"not {self.body(node.operand)}")
        elif isinstance(node, ir.And):
            rule(*(self.body(o) for o in node.ops))
        elif isinstance(node, ir.Or):
            for o in node.ops:
                rule(self.body(o))
        elif isinstance(node, ir.SymEq):
            pred = "ptype" if node.attr == "type" else "pgrip"
            atom = f'{pred}({self.var(node.var)},"{node.value}")'
            rule(atom if node.equal else f"not {atom}")
        elif isinstance(node, ir.Cmp):
            coefs, const = lin_to_int([(a.attr, c) for a, c in node.expr.terms],
                                      node.expr.const)
            lits, terms = [], []
            for v in sorted({a.var for a, _ in node.expr.terms}):
                X = self.var(v)
                lits.append(f"box({X},{X}x0,{X}x1,{X}y0,{X}y1,{X}z0,{X}z1)")
            for (a, _), c in zip(node.expr.terms, coefs, strict=True):
                X = self.var(a.var)
                if a.attr in ("x", "y", "z"):
                    e = f"({X}{a.attr}0+{X}{a.attr}1)"
                elif a.attr.startswith("size."):
                    e = f"2*({X}{a.attr[-1]}1-{X}{a.attr[-1]}0)"
                else:
                    col = {"top": "z1", "zmax": "z1", "bottom": "z0", "zmin": "z0",
                           "xmin": "x0", "xmax": "x1", "ymin": "y0", "ymax": "y1"}[a.attr]
                    e = f"2*{X}{col}"
                terms.append(f"{c}*{e}")
            op = {"==": "=", "!=": "!="}.get(node.op, node.op)
            rule(*lits, f"{'+'.join(terms) or '0'}+({const}) {op} 0")
        elif isinstance(node, ir.Rel):
            args = [self.var(a.name) if isinstance(a, ir.VarArg) else a for a in node.args]
            name = node.name
            self.used.add({"near": "near", "inside": "zones", "intersects": "zones",
                           "grounded": "surfaces"}.get(name, name))
            if name in ("contact", "overlaps", "supports", "above"):
                rule(f"{name}({args[0]},{args[1]})")
            elif name == "near":
                dist = node.args[2]
                assert isinstance(dist, ir.NumArg)
                d = int(g.to_u(dist.value))
                self.nears.add(d)
                rule(f"near({args[0]},{args[1]},{d})")
            elif name in ("inside", "intersects"):
                z = node.args[1]
                if isinstance(z, ir.VarArg):
                    self.zuses.add((name, "*"))
                    rule(f"{name}({args[0]},{args[1]})")
                else:
                    assert isinstance(z, ir.NameArg)
                    self.zuses.add((name, z.name))
                    rule(f'{name}({args[0]},"{z.name}")')
            elif name == "on":
                if isinstance(node.args[1], ir.VarArg):
                    self.used.add("supports")
                    rule(f"supports({args[1]},{args[0]})")
                else:
                    surf = node.args[1]
                    assert isinstance(surf, ir.NameArg)
                    self.used.add("surfaces")
                    rule(f'on_surface({args[0]},"{surf.name}")')
            else:  # grounded
                rule(f"grounded({args[0]})")
        elif isinstance(node, ir.Quant | ir.CountCmp):
            outer = [u for u in self.fv(node.body) if u not in node.vars]
            inner = self.body(node.body)
            new = self.dom(list(node.vars)) + self.distinct(node.vars, node.unordered, outer,
                                                            node.domain)
            if isinstance(node, ir.CountCmp):
                op = {"==": "=", "!=": "!="}.get(node.op, node.op)
                tup = ",".join(self.var(v) for v in node.vars)
                rule(f"#count{{{tup} : {', '.join([inner, *new])}}} {op} {node.n}")
            elif node.kind == "exists":
                rule(inner, *new)
            else:
                self.k += 1
                nf = f"nf{self.k}" + (f"({','.join(self.var(v) for v in vs)})" if vs else "")
                self.lines.append(f"#defined nf{self.k}/{len(vs)}.")
                self.lines.append(f"{nf} :- {', '.join([*dom, *new, 'not ' + inner])}.")
                rule(f"not {nf}")
        else:
            raise TypeError(node)
        return h

    def rule(self, idx: int, r: Rule, hard: bool) -> None:
        """Rule ``r``'s violated bindings (``viol<idx>(outer vars)``): a constraint for an
        error rule, weighted terms of the #minimize for a preference."""
        from cellspec.core import ir

        chain, body = ir.top_foralls(r.body)
        self.domains = ir.var_domains(r.body)
        lits: list[str] = []
        seen: list[str] = []
        for q in chain:
            lits += self.dom(list(q.vars)) + self.distinct(q.vars, q.unordered, seen, q.domain)
            seen += list(q.vars)
        inner = self.body(body)
        args = ",".join(self.var(v) for v in seen)
        viol = f"viol{idx}" + (f"({args})" if seen else "")
        self.lines.append(f"#defined viol{idx}/{len(seen)}.")
        self.lines.append(f"{viol} :- {', '.join([*lits, 'not ' + inner])}.")
        if hard:
            self.lines.append(f":- {viol}.")
        else:
            tup = ",".join([str(idx), *(self.var(v) for v in seen)])
            self.lines.append(f"#minimize {{ {r.weight},{tup} : {viol} }}.")


def least_violated(cell: Cell, types: list[str], *, step_m: float, timeout: float
                   ) -> Bound:
    """The least violated preference weight over every layout of parts of ``types`` (one
    per entry) with centres on the lattice of ``step_m`` (boxes inside the workspace, bottoms
    on a surface or a lattice level above it) satisfying the cell's error rules clingo
    encodes here (the others are listed as relaxed): clingo's ``#minimize``, proved optimal
    or ``unknown`` beyond the size limits or the time."""
    from fractions import Fraction

    from cellspec.core import geometry as g
    from cellspec.solver.cpsat.prefer import binding_count
    from cellspec.solver.instance import BoxU, cell_u

    cu = cell_u(cell)
    prefs = preference_rules(cell)
    total = sum(r.weight * binding_count(r, len(types), len(cu.keepouts), len(cu.robots))
                for r in prefs)
    h = int(round(step_m / float(g.RESOLUTION)))  # 0.1 mm steps
    if h <= 0:
        return Bound(Status.UNKNOWN, total=total, reason="the lattice step must be positive")
    ws = cu.zones["workspace"]
    assert isinstance(ws, BoxU)
    cands: dict[str, list[tuple[int, ...]]] = {}
    lattice: dict[str, list[range]] = {}
    for t in sorted(set(types)):
        s = [int(g.to_u(v)) for v in cell.part_types[t].size]  # full size, U
        axes = []
        for a in range(3):
            lo = ws.lo[a] + s[a] // 2
            if a == 2:
                los = sorted(set(cu.surfaces.values()))
                lo = (min(los) if los else ws.lo[2]) + s[2] // 2
            hi = ws.hi[a] - s[a] // 2
            # centres in U, on the 0.1 mm grid (even U), h apart
            start = lo + (lo % 2)
            axes.append(range(start, hi + 1, 2 * h))
        lattice[t] = axes
    # the size limit is decided from the axes, before any position is listed (a fine step
    # would list millions of them and exhaust the memory budget first)
    npos = max((len(a[0]) * len(a[1]) * len(a[2]) for a in lattice.values()), default=0)
    pairs = len(types) * (len(types) - 1) // 2
    relaxed = tuple(r.name for r in cell.rules if r.severity == Severity.ERROR
                    and _encodable(r.body) is not None)
    base = Bound(Status.UNKNOWN, total=total, step_m=float(Fraction(h, 10000)),
                 positions=npos, relaxed=relaxed)  # what every answer below shares
    if npos > MAX_POSITIONS or npos * npos * pairs > MAX_PAIR_GROUND:
        return replace(base, reason=f"the lattice has {npos} positions per part "
                       f"({len(types)} parts): over the limit of the proof ({MAX_POSITIONS} "
                       f"positions, {MAX_PAIR_GROUND:,} position pairs); use a coarser step")
    for t, axes in lattice.items():
        s = [int(g.to_u(v)) for v in cell.part_types[t].size]
        cands[t] = [(x - s[0] // 2, x + s[0] // 2, y - s[1] // 2, y + s[1] // 2,
                     z - s[2] // 2, z + s[2] // 2)
                    for x in axes[0] for y in axes[1] for z in axes[2]]
    bad = [f"{r.name} ({why})" for r in prefs if (why := _encodable(r.body))]
    if bad:
        return replace(base, reason="clingo does not encode the preference(s) "
                       + "; ".join(bad))
    est = npos * npos * max(1, pairs) / GROUND_RATE
    if est > 0.6 * timeout:
        return replace(base, reason=f"grounding {npos} positions per part would take about "
                       f"{est:.0f} s, over the {timeout:.1f} s left for the proof (raise "
                       "--time-limit or use a coarser step)")
    status, violated, why = _minimize(cell, types, [cands[t] for t in types], relaxed,
                                      timeout, hard=True)
    if status == Status.UNKNOWN:
        return replace(base, reason=why)
    if status == Status.INFEASIBLE:
        return replace(base, status=Status.INFEASIBLE, reason="no layout of these parts on "
                       "the lattice satisfies the encoded error rules")
    return replace(base, status=Status.OPTIMAL, violated=violated)


def _minimize(cell: Cell, types: list[str], cands: list[list[tuple[int, ...]]],
              relaxed: tuple[str, ...], timeout: float, hard: bool,
              grippers: list[str] | None = None) -> tuple[BoundStatus, int | None, str | None]:
    """clingo's least violated preference weight with part i's box chosen from
    ``cands[i]`` (U corners) and, with ``hard``, every error rule not ``relaxed`` a
    constraint: (optimal | infeasible | unknown, the weight, why unknown). ``timeout``:
    grounding and solving together."""
    import time

    import clingo  # lazy: only the proof grounds

    t0 = time.perf_counter()

    from cellspec.solver.instance import BoxU, cell_u

    cu = cell_u(cell)
    asp = _Asp()
    for k, r in enumerate(cell.rules):
        if hard and r.severity == Severity.ERROR and r.name not in relaxed:
            asp.rule(k, r, hard=True)
        elif r.severity == Severity.PREFERENCE:
            asp.rule(k, r, hard=False)
    out = [f"#const eps={cu.eps}.", f"part(0..{len(types) - 1}).",
           "#defined keepout/1. #defined robot/1. #defined pgrip/2. #defined zuse/2."]
    default = cell.default_gripper.kind
    for i, t in enumerate(types):
        gk = default if grippers is None else grippers[i]
        out.append(f'ptype({i},"{t}"). pgrip({i},"{gk}").')
        # candidate positions are numbered by their box (sorted): the same number means the
        # same box for parts of one type
        out.append("\n".join(f"cpos({i},{k},{','.join(map(str, b))})."
                             for k, b in enumerate(sorted(cands[i]))))
    out.append("1 { at(I,K) : cpos(I,K,_,_,_,_,_,_) } 1 :- part(I).")
    out.append("box(I,X0,X1,Y0,Y1,Z0,Z1) :- at(I,K), cpos(I,K,X0,X1,Y0,Y1,Z0,Z1).")
    # parts of one type and gripper are interchangeable (no rule encoded here names a part or
    # reads the order): the lower-numbered part takes the lower-numbered position
    same = [(i, j) for i in range(len(types)) for j in range(i + 1, len(types))
            if types[i] == types[j] and (grippers is None or grippers[i] == grippers[j])]
    if same and len({len(c) for c in cands}) == 1 and all(
            sorted(cands[i]) == sorted(cands[j]) for i, j in same):
        out.append("\n".join(f"sym({i},{j})." for i, j in same))
        out.append(":- sym(I,J), at(I,KI), at(J,KJ), KJ < KI.")
    out.append("cand(I,J) :- part(I), part(J), I < J. col(I,J) :- cand(I,J).")
    for name, z in cu.surfaces.items():
        out.append(f'surf("{name}",{z}).')
    for name, zone in cu.zones.items():
        if isinstance(zone, BoxU):
            out.append(f'zbox("{name}",{zone.lo[0]},{zone.hi[0]},{zone.lo[1]},{zone.hi[1]},'
                       f'{zone.lo[2]},{zone.hi[2]}).')
        else:
            sense = "gt" if zone.op in (">", ">=") else "lt"
            out.append(f'zhalf("{name}",{zone.coef[0]},{zone.coef[1]},{zone.coef[2]},{sense},'
                       f'{zone.rhs}).')
    for name in cu.keepouts:
        out.append(f'keepout("{name}").')
    for name in cu.robots:
        out.append(f'robot("{name}").')
    for rel, zn in sorted(asp.zuses):
        out.append(f"zuse({rel},K) :- keepout(K)." if zn == "*" else f'zuse({rel},"{zn}").')
    ctl = clingo.Control(["--warn=none", "--opt-mode=opt", "--opt-strategy=usc"])  # core-guided
    from cellspec.solver.asp.backend import _builtins

    ctl.add("base", [], _builtins())
    ctl.add("base", [], "\n".join(out + asp.lines))
    parts: list[tuple[str, list[Any]]] = [("base", [])] + [
        (p, []) for p in ("contact", "overlaps", "supports", "above", "zones", "surfaces")
        if p in asp.used]
    parts += [("near", [clingo.Number(d)]) for d in sorted(asp.nears)]
    ctl.ground(parts)
    best: list[int] = []

    def on_model(m: Any) -> None:
        best[:] = [int(m.cost[0]) if m.cost else 0]

    with ctl.solve(on_model=on_model, async_=True) as hnd:
        left = max(0.05, timeout - (time.perf_counter() - t0))
        if not hnd.wait(left):
            hnd.cancel()
            return Status.UNKNOWN, None, (f"clingo did not prove the optimum within {timeout:g} s"
                                            + (f" (best found: {best[0]} violated)"
                                               if best else ""))
        got = hnd.get()
    if not got.satisfiable:
        return Status.INFEASIBLE, None, None
    return Status.OPTIMAL, best[0] if best else 0, None


def bound_line(bound: dict[str, Any], met: int) -> str:
    """The pretty line of ``--prove-preferences``: clingo's least violated weight on the
    lattice and how the generated layout compares."""
    if bound["status"] != Status.OPTIMAL:
        return f"preferences proof: {bound['status']}: {bound.get('reason', '')}"
    relaxed = (f"; error rules not encoded, left out: {', '.join(bound['relaxed'])}"
               if bound.get("relaxed") else "")
    best = bound["met"]
    how = ("the generated layout meets it" if met >= best else
           f"the generated layout meets {best - met} less")
    return (f"preferences proof (clingo): at most {best} of {bound['total']} weight met by "
            f"any layout of these parts on the {bound['step_m']:g} m "
            f"lattice ({bound['positions']} positions per part{relaxed}): {how}")


def fixed_violated(cell: Cell, layout: Layout, timeout: float = 60.0) -> int | None:
    """The violated preference weight of ``layout`` by the #minimize encoding with every
    part's box fixed (each has one candidate, no error rule): the differential tests
    compare it with :func:`preference_cost`."""
    from cellspec.solver.instance import build_instance

    inst = build_instance(cell, layout)
    cands = [[tuple(int(v) for v in row)] for row in inst.boxes]
    status, violated, _ = _minimize(cell, list(inst.types), cands, (), timeout, hard=False,
                                    grippers=list(inst.grippers))
    return violated if status == Status.OPTIMAL else None
