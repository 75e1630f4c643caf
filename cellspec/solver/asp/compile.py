"""Lower rule IR to ASP: one ``violation(R, (Args))`` rule per disjunct of the
negated rule body, with auxiliary predicates for nested quantifiers.

Grounding stays near-linear because part variables are bound by derived relation
atoms (themselves grounded over broad-phase candidate pairs), not by ``part/1``;
a disjunct that leaves k part variables unconnected grounds n^k bindings, which
the compiler reports (``cost``) so the verifier can refuse honestly (``unknown``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction

from cellspec.core import geometry as g
from cellspec.core import ir, relations
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.status import Reason, SolverLimit
from cellspec.dsl.model import Rule
from cellspec.solver.asp import arith
from cellspec.solver.asp import pushdown as pd
from cellspec.solver.asp.pushdown import Selection, absorb
from cellspec.solver.graph import components
from cellspec.solver.instance import lin_to_int
from cellspec.solver.reference import free_vars

MAX_DISJUNCTS = 256

# unary relations true of nearly every part in a real cell (the entries' ``complement``):
# the backend hands clingo their complement (the exceptions), and a literal reads it
# (``stable(p)`` is ``not not_stable(p)``), so clingo never grounds one atom per part for
# them. The part family's, read from the table (the compiler reads the entry itself)
COMPLEMENT = {r.name: r.complement for r in relations.BUILTINS.values()
              if r.family == "part" and r.complement}

# the program part a family's relations share, whose facts the backend writes for all of
# them (asp/backend.PART_FACTS); a surface relation's part is its own name
FAMILY_PART = {"zone": "zones", "robot": "reach"}

# a literal as ASP text: (text, variables it binds, variables needing box/7, extra)
LitText = tuple[str, set[str], set[str], list[str]]


class CompileError(SolverLimit):
    """A rule this backend cannot lower (names the rule and the feature)."""

    reason = Reason.UNSUPPORTED


@dataclass(frozen=True)
class CompiledRule:
    name: str
    index: int
    text: str
    top_vars: tuple[str, ...]
    top_domains: tuple[str, ...]
    needs_order: bool
    cost: int  # grounding exponent: n ** cost bindings in the worst disjunct
    unordered: tuple[tuple[int, ...], ...] = ()  # argument positions of each {p, q} group


@dataclass
class CompiledProgram:
    rules: list[CompiledRule]
    # program parts to ground (name, args): a relation's, or "zones", "reach"
    parts: set[tuple[str | int, ...]] = field(default_factory=set)
    margin: int = 0  # broad-phase margin, U
    columns: bool = False
    needs_types: bool = False
    needs_grippers: bool = False
    default_gripper: str = "parallel"
    flanks: bool = False
    zone_uses: set[str] = field(default_factory=set)  # zuse/2 rules: which zone relations
    # the stability LP's relations the rules use (stable, placed_stable: every stage of
    # the order): the backend adds their facts
    lp: set[str] = field(default_factory=set)
    needs_box: bool = False  # some rule body joins box/7 (a comparison left to clingo)
    # (relation, zone) whose complement facts are read (inside's outside/2, a named zone)
    outside: set[tuple[str, str]] = field(default_factory=set)
    selections: dict[str, Selection] = field(default_factory=dict)  # pushdown.Selection
    projections: dict[str, pd.Projection] = field(default_factory=dict)  # decided aux sets
    shown_projections: set[str] = field(default_factory=set)  # read by some rule's text
    unaries: dict[str, pd.Unary] = field(default_factory=dict)  # one-part conjunctions

    def margin_for(self, boxes, eps: int, opening: int | None, depth: int | None = None) -> int:
        """Broad-phase margin (U) for the relations these rules use (geometry.relation_margin)."""
        return g.relation_margin(boxes, eps, self.margin, self.flanks, opening, depth)


@dataclass(frozen=True)
class Lit:
    """A literal of a conjunction (kind: rel, cmp, sym, aux, count, bool)."""

    kind: str
    positive: bool
    # rel, cmp, sym, count, bool: the IR node; aux: the predicate's name; sel: the
    # pushdown.Selection; usel: the pushdown.Unary
    node: ir.Node | str | Selection | pd.Unary
    extra: tuple[str, ...] | str | None = None  # aux: its arguments; count: the operator


def _lit_key(lit: Lit) -> tuple:
    return (lit.kind, lit.positive, repr(lit.node), repr(lit.extra))


class _Compiler:
    def __init__(self, rule: Rule, index: int, prog: CompiledProgram, opening: int | None):
        self.rule = rule
        self.index = index
        self.prog = prog
        self.lines: list[str] = []
        self.domains: dict[str, str] = {}
        self.aux_count = 0
        self.cost = 0
        self.uid = itertools.count()
        self.opening = opening

    def var(self, name: str) -> str:
        return {"part": "P_", "robot": "R_"}.get(self.domains.get(name, "part"), "K_") + name

    # NNF/DNF -----------------------------------------------------------------
    def dnf(self, node: ir.Node, positive: bool, scope: tuple[str, ...]) -> list[list[Lit]]:
        """Disjunctive normal form of node (or of its negation when not positive)."""
        if isinstance(node, ir.BoolConst):
            return [[]] if node.value == positive else []
        if isinstance(node, ir.Not):
            return self.dnf(node.operand, not positive, scope)
        if isinstance(node, ir.And | ir.Or):
            conj = isinstance(node, ir.And) == positive
            parts = [self.dnf(o, positive, scope) for o in node.ops]
            if not conj:
                out = [d for p in parts for d in p]
            else:
                out = [[]]
                for p in parts:
                    out = [a + b for a in out for b in p]
                    if len(out) > MAX_DISJUNCTS:
                        raise CompileError(f"rule '{self.rule.name}' expands to more than "
                                           f"{MAX_DISJUNCTS} cases; split it into simpler rules")
            return _dedup(out)
        if isinstance(node, ir.Cmp):
            fv = {a.var for a, _ in node.expr.terms}
            if not fv:
                coefs, const = lin_to_int([], node.expr.const)
                val = {"<": const < 0, "<=": const <= 0, ">": const > 0, ">=": const >= 0,
                       "==": const == 0, "!=": const != 0}[node.op]
                return [[]] if val == positive else []
            op = node.op if positive else ir.NEGATED_OP[node.op]
            return [[Lit("cmp", True, ir.Cmp(op, node.expr))]]
        if isinstance(node, ir.SymEq):
            return [[Lit("sym", positive == node.equal, node)]]
        if isinstance(node, ir.Rel):
            return [[Lit("rel", positive, node)]]
        if isinstance(node, ir.CountCmp):
            op = node.op if positive else ir.NEGATED_OP[node.op]
            return [[Lit("count", True, node, op)]]
        if isinstance(node, ir.Quant):
            for v in node.vars:
                self.domains[v] = node.domain
            if node.kind == "exists":
                name, args = self.aux(node, node.body, scope)
                return [[Lit("aux", positive, name, args)]]
            # forall v: body  ==  not exists v: not body
            name, args = self.aux(node, ir.Not(node.body), scope)
            return [[Lit("aux", not positive, name, args)]]
        raise CompileError(f"rule '{self.rule.name}': cannot compile {type(node).__name__}")

    # auxiliary predicates for exists --------------------------------------------
    def aux(self, q: ir.Quant, body: ir.Node, scope: tuple[str, ...]) -> tuple[str, tuple]:
        self.aux_count += 1
        name = f"aux_{self.index}_{self.aux_count}"
        fv = sorted(free_vars(body) - set(q.vars))
        inner_scope = scope + q.vars
        disjuncts = self.dnf(body, True, inner_scope)
        head_args = tuple(fv)
        proj = self.projection(name, q, fv, disjuncts)
        if proj is not None:  # decided in numpy: no rule text
            self.prog.projections[name] = proj
            return name, head_args
        for d in disjuncts:
            extra = self.distinct(q, fv)
            body_txt = self.body(d, set(q.vars) | set(fv), extra)
            args = ",".join(self.var(v) for v in head_args)
            head = f"{name}({args})" if args else name
            self.lines.append(f"{head} :- {body_txt}.")
        return name, head_args

    def projection(self, name: str, q: ir.Quant, fv: list[str], disjuncts: list[list[Lit]]
                   ) -> pd.Projection | None:
        """``exists q: R(q, p)`` as a set numpy decides (pushdown.Projection), or None."""
        for d in disjuncts:
            for lit in d:
                if isinstance(lit.node, ir.Cmp):
                    self.cmp_text(lit.node)  # the 32-bit bound is checked
        proj = pd.decided_projection(name, q, fv, disjuncts, self.domains)
        for sel, _ in proj.disjuncts if proj is not None else ():
            self.needs(sel)
        return proj

    def unary(self, lits: list[Lit], used: set[str], extra: list[str]) -> pd.Unary | None:
        """A conjunction over one part that numpy decides per part (pushdown.Unary)."""
        u = pd.one_part(lits, used, extra, self.domains, self.prog.projections,
                        f"usel_{self.index}_{next(self.uid)}", self.var)
        for _, atom in u.terms if u is not None else ():
            if atom[0] == "rel" and relations.get(atom[1]).lp:
                self.prog.lp.add(atom[1])  # the backend computes the report
        return u

    def distinct(self, q: ir.Quant | ir.CountCmp, outer: list[str] | tuple[str, ...]) -> list[str]:
        """Distinctness of a quantifier's part variables (among themselves and from the
        outer parts its body mentions)."""
        if q.domain != "part":
            return []
        out = []
        for a, b in itertools.combinations(q.vars, 2):
            out.append(f"{self.var(a)} {'<' if q.unordered else '!='} {self.var(b)}")
        for v in q.vars:
            for o in outer:
                if self.domains.get(o, "part") == "part":
                    out.append(f"{self.var(v)} != {self.var(o)}")
        return out

    # literals to ASP text ----------------------------------------------------------
    def body(self, lits: list[Lit], need: set[str], extra: list[str]) -> str:
        """A rule body binding every variable in ``need``; records the grounding cost."""
        atoms: list[str] = []
        bound: set[str] = set()
        links: list[set[str]] = []
        box_needed: set[str] = set()
        tail: list[str] = []
        for lit in lits:
            if isinstance(lit.node, ir.Cmp):
                self.cmp_text(lit.node)  # the 32-bit bound is checked, absorbed or not
        used0 = set(need)
        for lit in lits:
            used0 |= self.lit_vars(lit)
        u = self.unary(lits, used0, extra)
        if u is not None:  # every literal decided per part in numpy
            self.prog.unaries[u.name] = u
            lits = [Lit("usel", True, u)]
        lits, sels = absorb(lits, self.domains, lambda: f"sel_{self.index}_{next(self.uid)}")
        for sel, replaced in sels:
            sel = replace(sel, readable=", ".join(self.plain_text(x) for x in replaced))
            self.select(sel)
            lits = [Lit("sel", True, sel)] + lits
        for lit in lits:
            txt, binds, box_vars, post = self.lit(lit)
            atoms.append(txt) if binds else tail.append(txt)
            if binds:
                bound |= binds
                links.append(set(binds))
            box_needed |= box_vars
            tail.extend(post)
        # every variable used anywhere must be bound
        used = set(need) | box_needed
        for lit in lits:
            used |= self.lit_vars(lit)
        dom: list[str] = []
        for v in sorted(used):
            if self.domains.get(v, "part") == "robot":
                dom.append(f"robot({self.var(v)})")
            elif self.domains.get(v, "part") != "part":
                dom.append(f"keepout({self.var(v)})")  # always: zones include the workspace
            elif v not in bound:
                dom.append(f"part({self.var(v)})")
                links.append({v})
        boxes = [self.box_atom(v) for v in sorted(box_needed)]
        # cost: connected components among part variables
        parts = {v for v in used if self.domains.get(v, "part") == "part"}
        comps = _components(parts, [s & parts for s in links])
        self.cost = max(self.cost, comps)
        items = atoms + dom + boxes + tail + extra
        return ", ".join(items) if items else "#true"

    def plain_text(self, lit: Lit) -> str:
        """A literal a selection absorbs, as ASP text (pushdown.plain_text)."""
        return (self.cmp_text(lit.node) if isinstance(lit.node, ir.Cmp)
                else pd.plain_text(lit, self.var))

    def select(self, sel: Selection) -> None:
        """Register a selection (pushdown.py) and what its relation needs of the backend."""
        self.prog.selections[sel.name] = sel
        self.needs(sel)

    def needs(self, sel: Selection) -> None:
        """The broad-phase margin (a distance's, near's) and column pairs (a column
        relation's, above's) a selection's relation needs."""
        r = relations.get(sel.rel)
        if r.param == "length" and sel.dist is not None:
            self.prog.margin = max(self.prog.margin, sel.dist)
        if r.family == "column":
            self.prog.columns = True

    def box_atom(self, v: str) -> str:
        self.prog.needs_box = True
        V = self.var(v)
        return f"box({V},{V}_X0,{V}_X1,{V}_Y0,{V}_Y1,{V}_Z0,{V}_Z1)"

    def lit_vars(self, lit: Lit) -> set[str]:
        """The variables a literal mentions."""
        node = lit.node
        if isinstance(node, str):  # aux
            return set(_aux_args(lit))
        if isinstance(node, Selection):
            return set(node.vars)
        if isinstance(node, pd.Unary):
            return {node.var}
        return free_vars(node)

    def lit(self, lit: Lit) -> LitText:
        """(text, variables it binds, variables needing box/7, extra)."""
        neg = "" if lit.positive else "not "
        node = lit.node
        if isinstance(node, Selection):
            a, b = node.vars
            return node.text(self.var(a), self.var(b)), {a, b}, set(), []
        if isinstance(node, pd.Unary):
            return f"{node.name}({self.var(node.var)})", {node.var}, set(), []
        if isinstance(node, str):  # aux
            if node in self.prog.projections:
                self.prog.shown_projections.add(node)
            aux_args = _aux_args(lit)
            args = ",".join(self.var(v) for v in aux_args)
            return (f"{neg}{node}({args})" if args else f"{neg}{node}",
                    set(aux_args) if lit.positive else set(), set(), [])
        if isinstance(node, ir.SymEq):
            n = node
            if n.attr == "type":
                self.prog.needs_types = True
                return (f'{neg}ptype({self.var(n.var)},"{n.value}")',
                        {n.var} if lit.positive else set(), set(), [])
            # only parts whose gripper differs from the cell's default get a grip/2 fact
            self.prog.needs_grippers = True
            V = self.var(n.var)
            if n.value == self.prog.default_gripper:
                if lit.positive:
                    return f"not other_grip({V})", set(), set(), []
                return f"other_grip({V})", {n.var}, set(), []
            return f"{neg}grip({V},{n.value})", {n.var} if lit.positive else set(), set(), []
        if isinstance(node, ir.Cmp):
            return self.cmp_text(node), set(), {a.var for a, _ in node.expr.terms}, []
        if isinstance(node, ir.CountCmp):
            assert isinstance(lit.extra, str), lit
            return self.count_text(node, lit.extra), set(), set(), []
        if isinstance(node, ir.Rel):
            return self.rel_text(node, lit.positive)
        raise CompileError(lit.kind)

    def cmp_text(self, c: ir.Cmp) -> str:
        """A comparison as exact 32-bit ASP arithmetic over box/7 variables (asp/arith.py)."""
        try:
            return arith.cmp_text(c, self.var)
        except arith.TooWide as exc:
            raise CompileError(f"rule '{self.rule.name}': {exc}") from None

    def rel_text(self, r: ir.Rel, positive: bool) -> LitText:
        """A relation literal as ASP text, by its family (:data:`FAMILY`)."""
        rel = relations.BUILTINS.get(r.name)
        text = None if rel is None else FAMILY.get(rel.family)
        if rel is None or text is None:
            raise CompileError(f"rule '{self.rule.name}': relation {r.name} is not supported "
                               "by the clingo backend")
        vs = [self.var(a.name) if isinstance(a, ir.VarArg) else "" for a in r.args]
        # a negative literal binds nothing (a complement's negative binds: see below)
        names = {a.name for a in r.args if isinstance(a, ir.VarArg)} if positive else set()
        return text(self, rel, r, vs, "" if positive else "not ", names)

    def _text_pair(self, rel: relations.Relation, r: ir.Rel, vs: list[str], neg: str,
                   names: set[str]) -> LitText:
        """pair, column: the relation's atoms, decided in numpy (near: with its distance,
        which widens the broad phase; flanks: with its axis)."""
        a, b = vs[0], vs[1]
        if rel.param == "length":
            d = int(g.to_u(_num(r.args[2])))
            self.prog.parts.add((rel.name, d))
            self.prog.margin = max(self.prog.margin, d)
            return f"{neg}{rel.name}({a},{b},{d})", names, set(), []
        if rel.param == "axis":
            self.prog.parts.add((rel.name,))
            return f"{neg}{rel.name}({a},{b},{_name(r.args[2])})", names, set(), []
        self.prog.parts.add((rel.name,))
        if rel.family == "column":
            self.prog.columns = True
        return f"{neg}{rel.name}({a},{b})", names, set(), []

    def _text_order(self, rel: relations.Relation, r: ir.Rel, vs: list[str], neg: str,
                    names: set[str]) -> LitText:
        """order: the backend numbers parts in placement order, so before is index order."""
        return f"{vs[0]} {'>' if neg else '<'} {vs[1]}", set(), set(), []

    def _text_zone(self, rel: relations.Relation, r: ir.Rel, vs: list[str], neg: str,
                   names: set[str]) -> LitText:
        """zone: a zone variable's atoms for every keep-out; a named zone's, or the few
        facts of its complement (the entry's ``complement``)."""
        self.prog.parts.add((FAMILY_PART[rel.family],))
        z = r.args[1]
        if isinstance(z, ir.VarArg):
            zt = vs[1]
            self.prog.zone_uses.add(f"zuse({rel.name},K) :- keepout(K).")
        elif rel.complement:  # a named zone: its few complement facts instead
            zt = f'"{_name(z)}"'
            self.prog.outside.add((rel.name, _name(z)))
            return _complement(rel.complement, f"{vs[0]},{zt}", not neg, r.args[0])
        else:
            zt = f'"{_name(z)}"'
            self.prog.zone_uses.add(f"zuse({rel.name},{zt}).")
        return f"{neg}{rel.name}({vs[0]},{zt})", names, set(), []

    def _text_surface(self, rel: relations.Relation, r: ir.Rel, vs: list[str], neg: str,
                      names: set[str]) -> LitText:
        """surface: on a named surface (/2), or on any (/1); the predicate is the entry's
        ``asp_atom`` or its name (on(p, s) is on_surface/2)."""
        self.prog.parts.add((rel.name,))
        pred = rel.asp_atom or rel.name
        if rel.arity == 2:
            return f'{neg}{pred}({vs[0]},"{_name(r.args[1])}")', names, set(), []
        return f"{neg}{pred}({vs[0]})", names, set(), []

    def _text_robot(self, rel: relations.Relation, r: ir.Rel, vs: list[str], neg: str,
                    names: set[str]) -> LitText:
        """robot: facts decided by the numpy kernel (geometry.reachable)."""
        self.prog.parts.add((FAMILY_PART[rel.family],))
        rob = r.args[1]
        rt = vs[1] if isinstance(rob, ir.VarArg) else f'"{_name(rob)}"'
        return f"{neg}{rel.name}({vs[0]},{rt})", names, set(), []

    def _text_part(self, rel: relations.Relation, r: ir.Rel, vs: list[str], neg: str,
                   names: set[str]) -> LitText:
        """part: facts computed by cellspec/solver/stability.py, read through their
        complement (the entry's ``complement``); the backend computes the report."""
        if not rel.complement:
            raise CompileError(f"rule '{self.rule.name}': relation {rel.name} names no "
                               "complement predicate (Relation.complement)")
        self.prog.lp.add(rel.name)
        return _complement(rel.complement, vs[0], not neg, r.args[0])

    def count_text(self, c: ir.CountCmp, op: str) -> str:
        for v in c.vars:
            self.domains[v] = c.domain
        fv = sorted(free_vars(c.body) - set(c.vars))
        disjuncts = self.dnf(c.body, True, tuple(fv))
        elems = []
        key = ",".join(self.var(v) for v in c.vars)
        for d in disjuncts:
            saved = self.cost
            b = self.body(d, set(c.vars), self.distinct(c, fv))
            self.cost = max(saved, self.cost)
            elems.append(f"{key} : {b}")
        aop = {"==": "=", "!=": "!="}.get(op, op)
        inner = "; ".join(elems)
        return f"#count{{ {inner} }} {aop} {c.n}"

    # top level ----------------------------------------------------------------------
    def compile(self) -> CompiledRule:
        chain, body = ir.top_foralls(self.rule.body)
        top: list[str] = []
        for q in chain:
            for v in q.vars:
                self.domains[v] = q.domain
            top.extend(q.vars)
        for n in ir.walk(self.rule.body):
            if isinstance(n, ir.Quant | ir.CountCmp):
                for v in n.vars:
                    self.domains.setdefault(v, n.domain)
        extra: list[str] = []
        seen_parts: list[str] = []
        for q in chain:
            if q.domain == "part":
                for a, b in itertools.combinations(q.vars, 2):
                    extra.append(f"{self.var(a)} {'<' if q.unordered else '!='} {self.var(b)}")
                for v in q.vars:
                    for o in seen_parts:
                        extra.append(f"{self.var(v)} != {self.var(o)}")
                seen_parts.extend(q.vars)
        disjuncts = self.dnf(body, False, tuple(top))
        args = ",".join(self.var(v) for v in top)
        for d in disjuncts:
            b = self.body(d, set(top), list(extra))
            self.lines.append(f"violation({self.index},({args},)) :- {b}.")
        needs_order = ir.uses_relation(self.rule.body, ir.ORDER_RELATIONS)
        groups, pos = [], 0
        for q in chain:
            if q.unordered:
                groups.append(tuple(range(pos, pos + len(q.vars))))
            pos += len(q.vars)
        header = f"% rule {self.rule.name} ({self.rule.source})"
        return CompiledRule(
            name=self.rule.name,
            index=self.index,
            text="\n".join([header, *self.lines]),
            top_vars=tuple(top),
            top_domains=tuple(self.domains[v] for v in top),
            needs_order=needs_order,
            cost=self.cost,
            unordered=tuple(groups),
        )


def _complement(pred: str, args: str, positive: bool, part: ir.Arg
                ) -> tuple[str, set[str], set[str], list[str]]:
    """A unary relation read through its complement ``pred``: the positive literal is
    ``not pred(..)`` (binds nothing), the negative one ``pred(..)`` (binds the part)."""
    binds = {part.name} if isinstance(part, ir.VarArg) and not positive else set()
    return (f"not {pred}({args})" if positive else f"{pred}({args})"), binds, set(), []


def _aux_args(lit: Lit) -> tuple[str, ...]:
    """An aux literal's arguments (its free variables)."""
    assert isinstance(lit.extra, tuple), lit
    return lit.extra


def _num(a: ir.Arg) -> Fraction:
    """A number argument's value (near's distance, metres)."""
    assert isinstance(a, ir.NumArg), a
    return a.value


def _name(a: ir.Arg) -> str:
    """A name argument (a zone, surface, robot or axis)."""
    assert isinstance(a, ir.NameArg), a
    return a.name


def _dedup(disjuncts: list[list[Lit]]) -> list[list[Lit]]:
    out, seen = [], set()
    for d in disjuncts:
        uniq, keys = [], set()
        for lit in d:
            k = _lit_key(lit)
            if k not in keys:
                keys.add(k)
                uniq.append(lit)
        # drop contradictory conjunctions (l and not l)
        if any((k[0], not k[1], *k[2:]) in keys for k in keys if k[0] in ("rel", "sym", "aux")):
            continue
        sig = tuple(sorted(keys))
        if sig not in seen:
            seen.add(sig)
            out.append(uniq)
    return out


def _components(nodes: set[str], links: list[set[str]]) -> int:
    """How many groups the variables form when each link joins its members."""
    index = {v: k for k, v in enumerate(sorted(nodes))}
    i, j = [], []
    for link in links:
        members = [index[v] for v in link if v in index]
        i.extend(members[:-1])
        j.extend(members[1:])
    return len(set(components(len(index), i, j).tolist()))


def compile_rules(rules: list[Rule] | tuple[Rule, ...], eps: int,
                  opening: int | None, default_gripper: str = "parallel") -> CompiledProgram:
    """Compile rules into one program (rule i reports ``violation(i, (Args))``).

    A rule this backend cannot lower is reported as bad input at the rule's source."""
    prog = CompiledProgram(rules=[], default_gripper=default_gripper)
    prog.margin = max(prog.margin, eps)
    diags = []
    for i, r in enumerate(rules):
        try:
            prog.rules.append(_Compiler(r, i, prog, opening).compile())
        except CompileError as exc:
            diags.append(Diagnostic(r.source.file, r.source.line, r.source.col,
                                    f"not supported by the clingo backend: {exc}"))
    if diags:
        raise CellspecError(diags)
    prog.flanks = ("flanks",) in prog.parts
    return prog


# how the compiler writes a relation of each family (cellspec/core/relations.py FAMILIES)
# as ASP text; tests/test_relations.py checks every family is here
FAMILY: dict[str, Callable[[_Compiler, relations.Relation, ir.Rel, list[str], str, set[str]],
                           LitText]] = {
    "pair": _Compiler._text_pair, "column": _Compiler._text_pair,
    "order": _Compiler._text_order, "zone": _Compiler._text_zone,
    "surface": _Compiler._text_surface, "robot": _Compiler._text_robot,
    "part": _Compiler._text_part}


__all__ = ["CompileError", "CompiledProgram", "CompiledRule", "compile_rules", "Fraction"]
