"""Push comparisons into the numpy kernel: a conjunction's ``R(p, q)`` (a pair relation
the kernel decides) together with the comparisons and ``before`` literals that mention
only p and q becomes one selected relation, decided in numpy on R's rows, so clingo
neither reads box/7 facts nor joins them (the issue-17 "ground only what is used").

Exactness: the comparisons are the compiler's integer ones (attributes in 2U, the
coefficients of :func:`cellspec.solver.instance.lin_to_int`), evaluated in int64 on the
same boxes; ``before`` is the placement index order, as in the ASP text.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir, relations
from cellspec.solver.instance import lin_to_int

# pair relations whose rows the backend computes in numpy (both orientations)
PAIR_RELATIONS = relations.names(lambda r: r.pushdown and r.family in ("pair", "column"))


def _rel(name: str) -> relations.Relation | None:
    """The built-in relation ``name``, read from the table at call time (so a relation
    registered after import is pushed down as its entry says), or None."""
    return relations.BUILTINS.get(name)


def _pushed_pair(name: str) -> bool:
    """A pair relation numpy decides (:data:`PAIR_RELATIONS`)."""
    r = _rel(name)
    return r is not None and r.pushdown and r.two_parts


def _pushed_unary(name: str) -> bool:
    """A one-part relation numpy decides per part (:data:`UNARY_RELATIONS`)."""
    r = _rel(name)
    return r is not None and r.pushdown and not r.two_parts


def _dist(node: ir.Rel) -> int | None:
    """A pair relation's distance argument (near's), in U, or None."""
    r = _rel(node.name)
    d = node.args[2] if r is not None and r.param == "length" else None
    return int(g.to_u(d.value)) if isinstance(d, ir.NumArg) else None

OPS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne}


@dataclass(frozen=True)
class Selection:
    """Rows (a, b) of relation ``rel`` (``near``: within ``dist``) kept when every
    comparison and every order literal holds; ``vars`` names the two columns."""

    name: str
    rel: str
    dist: int | None
    vars: tuple[str, str]
    # each comparison: ((attribute, column, coefficient), ...), operator, right-hand side
    cmps: tuple[tuple[tuple[tuple[str, int, int], ...], str, int], ...]
    order: tuple[tuple[int, bool], ...]  # (column that comes first, positive)
    readable: str = ""  # the literals it replaces, as ASP text (for coverage reports)

    def text(self, first: str, second: str) -> str:
        """The atom in a rule body."""
        return f"{self.name}({first},{second})"

    def keep(self, rows: np.ndarray, boxes: np.ndarray) -> np.ndarray:
        """The rows (of R, in ASP part numbering) where every absorbed literal holds."""
        ok = np.ones(len(rows), dtype=bool)
        for terms, op, rhs in self.cmps:
            val = np.zeros(len(rows), dtype=np.int64)
            for attr, col, k in terms:
                val += k * g.attr_2u(boxes[rows[:, col]], attr)
            ok &= OPS[op](val, rhs)
        for col, positive in self.order:
            a, b = rows[:, col], rows[:, 1 - col]
            ok &= (a < b) if positive else (a > b)
        return rows[ok]


def _pair_vars(lit, domains: dict[str, str]) -> tuple[str, str] | None:
    """(p, q) of a positive kernel pair relation over two distinct part variables."""
    node = lit.node
    if lit.kind != "rel" or not lit.positive or not _pushed_pair(node.name):
        return None
    a, b = node.args[0], node.args[1]
    if not (isinstance(a, ir.VarArg) and isinstance(b, ir.VarArg)) or a.name == b.name:
        return None
    if domains.get(a.name, "part") != "part" or domains.get(b.name, "part") != "part":
        return None
    return a.name, b.name


def _cmp_vars(lit) -> set[str]:
    return {a.var for a, _ in lit.node.expr.terms}


def _order_vars(lit) -> tuple[str, str] | None:
    node = lit.node
    r = _rel(node.name) if lit.kind == "rel" else None
    if r is None or r.family != "order":
        return None
    a, b = node.args
    if not (isinstance(a, ir.VarArg) and isinstance(b, ir.VarArg)) or a.name == b.name:
        return None
    return a.name, b.name


def absorb(lits: list, domains: dict[str, str], new_name: Callable[[], str]
           ) -> tuple[list, list[tuple[Selection, list]]]:
    """Split a conjunction into the literals left for clingo and the selections (with the
    literals each replaces, the relation first) that absorb its comparisons and order
    literals. Each is absorbed by the first pair relation whose two variables cover its
    own. Nothing changes when there is nothing to absorb."""
    pairs = [(k, v) for k, lit in enumerate(lits) if (v := _pair_vars(lit, domains))]
    taken: dict[int, list[int]] = {}
    for k, lit in enumerate(lits):
        if lit.kind == "cmp":
            vs = _cmp_vars(lit)
        elif (ov := _order_vars(lit)) is not None:
            vs = set(ov)
        else:
            continue
        for r, pv in pairs:
            if vs <= set(pv):
                ks = taken.setdefault(r, [])
                if lit.kind == "cmp":
                    ks.append(k)
                break
    if not taken:
        return lits, []
    used: set[int] = set()
    sels: list[tuple[Selection, list]] = []
    for r, cmp_ks in sorted(taken.items()):
        pv = pairs[[p[0] for p in pairs].index(r)][1]
        col = {pv[0]: 0, pv[1]: 1}
        cmps = []
        for k in cmp_ks:
            c = lits[k].node
            coefs, const = lin_to_int([(a.attr, f) for a, f in c.expr.terms], c.expr.const)
            terms = tuple((a.attr, col[a.var], kk)
                          for (a, _), kk in zip(c.expr.terms, coefs, strict=True))
            cmps.append((terms, c.op, -const))
        order = []
        replaced = [lits[r]] + [lits[k] for k in cmp_ks]
        for k, lit in enumerate(lits):
            ov = _order_vars(lit)
            if ov is not None and set(ov) == set(pv) and k not in used:
                order.append((col[ov[0]], lit.positive))
                replaced.append(lit)
                used.add(k)
        node = lits[r].node
        dist = _dist(node)
        sel = Selection(new_name(), node.name, dist, pv, tuple(cmps), tuple(order))
        sels.append((sel, replaced))
        used.add(r)
        used.update(cmp_ks)
    rest = [lit for k, lit in enumerate(lits) if k not in used]
    return rest, sels


@dataclass(frozen=True)
class Projection:
    """``aux(p) :- R(q, p), q != p`` (R a kernel pair relation or a selection), one per
    disjunct: the parts some other part relates to, decided in numpy as a set."""

    name: str
    disjuncts: tuple[tuple[Selection, int], ...]  # the relation, the column of p


def projection(rest: list, sels: list[tuple[Selection, list]], q: str, p: str,
               domains: dict[str, str]) -> tuple[Selection, int] | None:
    """(relation, column of p) when a disjunct of ``exists q`` is one pair relation over
    q and the outer part p and nothing else (distinctness aside), else None."""
    if not sels and len(rest) == 1 and (pv := _pair_vars(rest[0], domains)) is not None:
        node = rest[0].node
        dist = _dist(node)
        sel = Selection("", node.name, dist, pv, (), ())
    elif not rest and len(sels) == 1:
        sel = sels[0][0]
    else:
        return None
    if set(sel.vars) != {q, p}:
        return None
    return sel, sel.vars.index(p)


# a literal of one part decided per part in numpy: (kind, ...) with kind one of
# rel (grounded, stable, placed_stable: (name,); on, inside, intersects: (name, place)),
# proj (a Projection's name), type / gripper (value), cmp ((attr, k)..., op, rhs)
UNARY_RELATIONS = relations.names(lambda r: r.pushdown and r.family not in ("pair", "column"))


@dataclass(frozen=True)
class Unary:
    """A conjunction over one part whose every literal numpy decides per part: clingo is
    handed the parts where it holds (``usel_K(p)``), one fact per such part."""

    name: str
    var: str
    terms: tuple[tuple[bool, tuple], ...]  # (positive, atom)
    readable: str = ""


def unary_atom(lit, var: str, projections: dict[str, Projection]) -> tuple | None:
    """The per-part atom of a literal on ``var`` alone, or None if numpy cannot decide it."""
    node = lit.node
    if lit.kind == "cmp":
        if _cmp_vars(lit) != {var}:
            return None
        coefs, const = lin_to_int([(a.attr, f) for a, f in node.expr.terms], node.expr.const)
        return ("cmp", tuple((a.attr, k) for (a, _), k in zip(node.expr.terms, coefs,
                                                               strict=True)), node.op, -const)
    if lit.kind == "sym":
        return (node.attr, node.value) if node.var == var else None
    if lit.kind == "aux":
        return ("proj", node) if node in projections and tuple(lit.extra) == (var,) else None
    if lit.kind != "rel" or not _pushed_unary(node.name):
        return None
    first = node.args[0]
    if not isinstance(first, ir.VarArg) or first.name != var:
        return None
    if len(node.args) == 1:  # grounded, stable, placed_stable
        return ("rel", node.name)
    place = node.args[1]
    return ("rel", node.name, place.name) if isinstance(place, ir.NameArg) else None


def decided_projection(name: str, q: ir.Quant, fv: list[str], disjuncts: list[list],
                       domains: dict[str, str]) -> Projection | None:
    """``exists q: body`` over one outer part p whose every disjunct is one pair relation
    over q and p (after absorption) as a Projection, else None."""
    if (len(q.vars) != 1 or q.domain != "part" or len(fv) != 1 or not disjuncts
            or domains.get(fv[0], "part") != "part"):
        return None
    out = []
    for d in disjuncts:
        rest, sels = absorb(d, domains, lambda: "")
        one = projection(rest, sels, q.vars[0], fv[0], domains)
        if one is None:
            return None
        out.append(one)
    return Projection(name, tuple(out))


def one_part(lits: list, used: set[str], extra: list[str], domains: dict[str, str],
             projections: dict[str, Projection], name: str, var_text: Callable[[str], str]
             ) -> Unary | None:
    """The conjunction ``lits`` as a Unary when it mentions one part only and numpy decides
    every literal of it per part, else None."""
    if extra or len(used) != 1 or not lits:
        return None
    (v,) = used
    if domains.get(v, "part") != "part":
        return None
    terms = []
    for lit in lits:
        atom = unary_atom(lit, v, projections)
        if atom is None:
            return None
        terms.append((lit.positive, atom))
    readable = ", ".join(_unary_text(pos, atom, var_text(v)) for pos, atom in terms)
    return Unary(name, v, tuple(terms), readable)


def _unary_text(positive: bool, atom: tuple, var: str) -> str:
    """A per-part atom of pushdown.Unary as readable ASP-like text (coverage reports)."""
    neg = "" if positive else "not "
    kind = atom[0]
    if kind == "rel":
        args = ",".join([var, *(f'"{a}"' for a in atom[2:])])
        return f"{neg}{atom[1]}({args})"
    if kind == "proj":
        return f"{neg}{atom[1]}({var})"
    if kind == "cmp":
        lhs = " + ".join(f"{k}*({var}.{a})" for a, k in atom[1]) or "0"
        return f"{lhs} {atom[2]} {atom[3]}"
    return f"{var}.{kind} {'==' if positive else '!='} {atom[1]}"


def plain_text(lit, var: Callable[[str], str]) -> str:
    """A pair relation or order literal as the ASP text it would have had, without
    registering anything with the program (a selection's readable form)."""
    r = lit.node
    a, b = (var(x.name) for x in r.args[:2])
    rel = _rel(r.name)
    if rel is not None and rel.family == "order":
        return f"{a} {'<' if lit.positive else '>'} {b}"
    d = _dist(r)
    if d is not None:
        return f"{r.name}({a},{b},{d})"
    return f"{r.name}({a},{b})"
