"""Preference rules in CP-SAT: each grounded body as a reified literal, weighted.

A preference rule (``severity preference weight W``) costs W for every binding of its outer
forall variables under which its body is false (the score definition shared with
``check``). Here the body is grounded over the parts, exactly as the reference evaluator
(:mod:`cellspec.solver.reference`) reads it: the same bindings (distinct parts, nested
part variables excluding the outer parts their body mentions), the same integer geometry
(boxes in U = 0.05 mm, :mod:`cellspec.core.geometry`), but with each part's box given as
CP-SAT linear expressions (the model's position variables) instead of numbers. Every
relation a preference reads becomes a Boolean literal that is *equivalent* to it (both
directions enforced), so the weight met in the model is the weight met by the layout the
model describes.

Encoded: comparisons of attributes, ``type`` / ``gripper`` tests, ``not``/``and``/``or``,
``forall``/``exists``/``count`` over parts, keep-outs and robots, and the relations
``contact``, ``overlaps``, ``supports``, ``above``, ``near``, ``on`` (a surface or a
part), ``grounded``, ``inside`` and ``intersects`` (box zones, half-spaces, the
workspace). Not encoded (the rule is named in a note and the score is not claimed
optimal): ``before`` and ``placed_stable`` (the order is chosen after placement),
``stable`` (a linear program, not linear constraints), ``flanks``, ``reachable``, and any
rule whose grounding passes :data:`MAX_LITERALS`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cellspec.core import ir
from cellspec.core.severity import Severity
from cellspec.dsl.model import Cell, Rule
from cellspec.solver import pref_score
from cellspec.solver.instance import BoxU, cell_u, lin_to_int
from cellspec.solver.reference import free_vars

MAX_LITERALS = 200_000  # reified literals per model, over every preference rule
UNENCODED_RELATIONS = {
    "before": "the placement order (chosen after placement)",
    "placed_stable": "the placement order (chosen after placement)",
    "stable": "static stability (a linear program, not linear constraints)",
    "flanks": "gripper flanks",
    "reachable": "robot reach (a distance, not linear)",
}


class Unencodable(Exception):
    """A preference body CP-SAT cannot encode here: the reason names the feature."""


def preference_rules(cell: Cell) -> list[Rule]:
    """The cell's preference rules, in the order written."""
    return [r for r in cell.rules if r.severity == Severity.PREFERENCE]


@dataclass
class PartBoxes:
    """What the reifier reads of the parts: each part's box ``[x0, x1, y0, y1, z0, z1]`` in
    U (ints or CP-SAT linear expressions), its type and gripper kind; the cell's tolerance,
    zones, surfaces, keep-out and robot names (as :func:`cell_u` gives them)."""

    box: list[list[Any]]
    types: list[str]
    grippers: list[str]
    eps: int
    zones: dict[str, Any]
    surfaces: dict[str, int]
    keepouts: tuple[str, ...]
    robots: tuple[str, ...]

    @staticmethod
    def of(cell: Cell, box: list[list[Any]], types: list[str],
           grippers: list[str | None]) -> PartBoxes:
        """The parts' boxes with the cell's zones and tolerance (grippers default to the
        cell's default gripper, as ``build_instance`` resolves them)."""
        cu = cell_u(cell)
        default = cell.default_gripper.kind
        return PartBoxes(box, list(types), [gk or default for gk in grippers], cu.eps,
                         dict(cu.zones), dict(cu.surfaces), tuple(cu.keepouts),
                         tuple(cu.robots))

    @property
    def n(self) -> int:
        return len(self.box)


@dataclass
class Terms:
    """The encoded preferences: per rule its weight and one literal (or constant) per
    binding of its outer variables that holds when the body does; the rules not encoded
    (with why); the total weight of every rule's bindings."""

    lits: list[tuple[Rule, list[Any]]] = field(default_factory=list)
    refused: list[tuple[Rule, str]] = field(default_factory=list)
    total: int = 0

    def met_expr(self) -> Any:
        """The weight met, a linear expression (constants folded)."""
        out: Any = 0
        for rule, ls in self.lits:
            for lit in ls:
                out = out + (rule.weight * int(lit) if isinstance(lit, bool) else rule.weight * lit)
        return out

    def encoded_total(self) -> int:
        """The weight of the encoded rules' bindings (what ``met_expr`` can reach)."""
        return sum(r.weight * len(ls) for r, ls in self.lits)

    def met_value(self, value: Any) -> int:
        """The weight met in a solution (``value``: the solver's ``BooleanValue``)."""
        return sum(r.weight * int(lit if isinstance(lit, bool) else bool(value(lit)))
                   for r, ls in self.lits for lit in ls)

    def notes(self) -> list[str]:
        """One sentence per rule not encoded: its score is not optimised."""
        return [f"preference {r.name} ({r.source}) is not optimised by CP-SAT: {why}; "
                "the score is not claimed optimal" for r, why in self.refused]


def binding_count(rule: Rule, n: int, keepouts: int, robots: int) -> int:
    """How many bindings the rule's outer forall variables have (the score's ``total`` is
    the sum of weight x this): :func:`cellspec.solver.pref_score.bindings`, check's count."""
    return pref_score.bindings(rule, n, keepouts, robots)


def encode(m: Any, cell: Cell, pb: PartBoxes) -> Terms:
    """Every preference rule of the cell as reified literals in model ``m`` (one per outer
    binding); a rule that cannot be encoded is listed in ``refused``, never dropped
    silently."""
    out = Terms()
    budget = [MAX_LITERALS]
    for rule in preference_rules(cell):
        out.total += rule.weight * binding_count(rule, pb.n, len(pb.keepouts), len(pb.robots))
        for n_ in ir.walk(rule.body):
            if isinstance(n_, ir.Rel) and n_.name in UNENCODED_RELATIONS:
                out.refused.append((rule, f"it reads {n_.name} "
                                    f"({UNENCODED_RELATIONS[n_.name]})"))
                break
        else:
            rf = Reifier(m, pb, budget)
            try:
                out.lits.append((rule, rf.rule_literals(rule)))
            except Unencodable as exc:
                out.refused.append((rule, str(exc)))
    return out


class Reifier:
    """Grounds IR nodes on :class:`PartBoxes` into CP-SAT literals equivalent to them
    (Python booleans where the answer does not depend on the variables)."""

    def __init__(self, m: Any, pb: PartBoxes, budget: list[int]):
        """Literals go into model ``m``; ``budget`` (shared, decremented) bounds how many."""
        self.m = m
        self.pb = pb
        self.budget = budget
        self.domains: dict[str, str] = {}

    # literal building -------------------------------------------------------------
    def _new(self) -> Any:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise Unencodable(f"its grounding needs more than {MAX_LITERALS} literals")
        return self.m.new_bool_var("")

    def le(self, expr: Any, k: int) -> Any:
        """A literal equivalent to ``expr <= k`` (integers)."""
        if isinstance(expr, int):
            return expr <= k
        b = self._new()
        self.m.add(expr <= k).OnlyEnforceIf(b)
        self.m.add(expr >= k + 1).OnlyEnforceIf(b.Not())
        return b

    def ge(self, expr: Any, k: int) -> Any:
        """A literal equivalent to ``expr >= k``."""
        return self.le(-expr, -k) if not isinstance(expr, int) else expr >= k

    def eq(self, expr: Any, k: int) -> Any:
        """A literal equivalent to ``expr == k``."""
        if isinstance(expr, int):
            return expr == k
        return self.all_of([self.le(expr, k), self.ge(expr, k)])

    def neg(self, lit: Any) -> Any:
        return (not lit) if isinstance(lit, bool) else lit.Not()

    def all_of(self, lits: list[Any]) -> Any:
        """A literal equivalent to the conjunction (constants folded)."""
        rest = []
        for lit in lits:
            if isinstance(lit, bool):
                if not lit:
                    return False
                continue
            rest.append(lit)
        if not rest:
            return True
        if len(rest) == 1:
            return rest[0]
        b = self._new()
        for lit in rest:
            self.m.add_implication(b, lit)
        self.m.add_bool_or([b, *(lit.Not() for lit in rest)])
        return b

    def any_of(self, lits: list[Any]) -> Any:
        """A literal equivalent to the disjunction."""
        return self.neg(self.all_of([self.neg(lit) for lit in lits]))

    # the grounded rule --------------------------------------------------------------
    def rule_literals(self, rule: Rule) -> list[Any]:
        """One literal per binding of the outer forall chain (the reference evaluator's
        order), true when the body holds."""
        chain, body = ir.top_foralls(rule.body)
        self.domains = ir.var_domains(rule.body)
        out: list[Any] = []

        def rec(k: int, env: dict[str, Any]) -> None:
            if k == len(chain):
                out.append(self.holds(body, env))
                return
            q = chain[k]
            used = {v for v, d in self.domains.items() if d == "part" and v in env}
            for b in self.bindings(q.vars, q.domain, q.unordered, used, env):
                rec(k + 1, {**env, **b})

        rec(0, {})
        return out

    def bindings(self, vars_: tuple[str, ...], domain: str, unordered: bool, used: set[str],
                 env: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The bindings of a quantifier's variables: :meth:`ReferenceEvaluator.bindings`."""
        if domain in ("keepout", "robot"):
            names = self.pb.keepouts if domain == "keepout" else self.pb.robots
            for combo in itertools.product(names, repeat=len(vars_)):
                yield dict(zip(vars_, combo, strict=True))
            return
        exclude = {env[v] for v in used if v in env and self.domains.get(v) == "part"}
        pool = [i for i in range(self.pb.n) if i not in exclude]
        combos = (itertools.combinations(pool, len(vars_)) if unordered
                  else itertools.permutations(pool, len(vars_)))
        for picked in combos:
            yield dict(zip(vars_, picked, strict=True))

    def holds(self, node: ir.Node, env: dict[str, Any]) -> Any:
        """A literal (or bool) equivalent to ``node`` under ``env``."""
        if isinstance(node, ir.BoolConst):
            return node.value
        if isinstance(node, ir.Not):
            return self.neg(self.holds(node.operand, env))
        if isinstance(node, ir.And):
            return self.all_of([self.holds(o, env) for o in node.ops])
        if isinstance(node, ir.Or):
            return self.any_of([self.holds(o, env) for o in node.ops])
        if isinstance(node, ir.Cmp):
            return self.cmp(node, env)
        if isinstance(node, ir.SymEq):
            i = env[node.var]
            val = self.pb.types[i] if node.attr == "type" else self.pb.grippers[i]
            return (val == node.value) == node.equal
        if isinstance(node, ir.Rel):
            return self.rel(node, env)
        if isinstance(node, ir.Quant):
            lits = [self.holds(node.body, {**env, **b})
                    for b in self.bindings(node.vars, node.domain, node.unordered,
                                           free_vars(node.body), env)]
            return self.any_of(lits) if node.kind == "exists" else self.all_of(lits)
        if isinstance(node, ir.CountCmp):
            lits = [self.holds(node.body, {**env, **b})
                    for b in self.bindings(node.vars, node.domain, node.unordered,
                                           free_vars(node.body), env)]
            return self.count(lits, node.op, node.n)
        raise Unencodable(f"it uses {type(node).__name__}, which CP-SAT does not encode here")

    def count(self, lits: list[Any], op: str, n: int) -> Any:
        """A literal equivalent to ``(number of true lits) op n``."""
        fixed = sum(1 for x in lits if x is True)
        var = [x for x in lits if not isinstance(x, bool)]
        expr: Any = sum(var) + fixed if var else fixed
        if op == "<":
            return self.le(expr, n - 1)
        if op == "<=":
            return self.le(expr, n)
        if op == ">":
            return self.ge(expr, n + 1)
        if op == ">=":
            return self.ge(expr, n)
        if op == "==":
            return self.eq(expr, n)
        return self.neg(self.eq(expr, n))

    def attr(self, i: int, a: str) -> Any:
        """Twice an attribute's value in U (:func:`cellspec.core.geometry.attr_2u`)."""
        b = self.pb.box[i]
        if a in ("x", "y", "z"):
            k = "xyz".index(a)
            return b[2 * k] + b[2 * k + 1]
        if a.startswith("size."):
            k = "xyz".index(a[-1])
            return 2 * (b[2 * k + 1] - b[2 * k])
        col = {"top": 5, "zmax": 5, "bottom": 4, "zmin": 4, "xmin": 0, "xmax": 1, "ymin": 2,
               "ymax": 3}[a]
        return 2 * b[col]

    def cmp(self, node: ir.Cmp, env: dict[str, Any]) -> Any:
        """``expr op 0`` on the integer attributes (:meth:`Reference.cmp`)."""
        coefs, const = lin_to_int([(a.attr, c) for a, c in node.expr.terms], node.expr.const)
        total: Any = const
        for (a, _), k in zip(node.expr.terms, coefs, strict=True):
            total = total + k * self.attr(env[a.var], a.attr)
        op = node.op
        if op == "<":
            return self.le(total, -1)
        if op == "<=":
            return self.le(total, 0)
        if op == ">":
            return self.ge(total, 1)
        if op == ">=":
            return self.ge(total, 0)
        if op == "==":
            return self.eq(total, 0)
        return self.neg(self.eq(total, 0))

    # relations (cellspec/core/geometry.py, row by row) --------------------------------
    def _olap_ge(self, a: list[Any], b: list[Any], ax: int, t: int) -> Any:
        """olap(a, b) on axis ``ax`` >= t: min(hi) - max(lo) >= t, four inequalities."""
        lo, hi = 2 * ax, 2 * ax + 1
        return self.all_of([self.ge(a[hi] - b[lo], t), self.ge(b[hi] - a[lo], t),
                            self.ge(a[hi] - a[lo], t), self.ge(b[hi] - b[lo], t)])

    def rel(self, node: ir.Rel, env: dict[str, Any]) -> Any:
        """A built-in relation on the grounded parts (zones by name)."""
        name = node.name
        args: list[Any] = [env[a.name] if isinstance(a, ir.VarArg) else a for a in node.args]
        e = self.pb.eps
        box = self.pb.box
        if name in ("contact", "overlaps", "supports", "above", "near"):
            a, b = box[args[0]], box[args[1]]
            if name == "contact":
                return self.all_of([self._olap_ge(a, b, k, -e) for k in range(3)])
            if name == "near":
                from cellspec.core import geometry as g

                d = int(g.to_u(args[2].value))
                return self.all_of([self._olap_ge(a, b, k, -d) for k in range(3)])
            if name == "overlaps":
                return self.all_of([self._olap_ge(a, b, k, e + 1) for k in range(3)])
            foot = [self._olap_ge(a, b, k, e + 1) for k in range(2)]
            if name == "supports":
                return self.all_of([self.le(b[4] - a[5], e), self.ge(b[4] - a[5], -e), *foot])
            return self.all_of([self.ge(a[4] - b[5], -e), *foot])  # above
        if name in ("inside", "intersects"):
            z = args[1] if isinstance(args[1], str) else args[1].name
            return self.zone(name, box[args[0]], self.pb.zones[z])
        if name == "on":
            if isinstance(node.args[1], ir.VarArg):  # on(p, q): q supports p
                return self.rel(ir.Rel("supports", (node.args[1], node.args[0])), env)
            zs = self.pb.surfaces[args[1].name]
            return self.eq_within(box[args[0]][4], zs, e)
        if name == "grounded":
            return self.any_of([self.eq_within(box[args[0]][4], zs, e)
                                for zs in self.pb.surfaces.values()])
        raise Unencodable(f"it reads {name}, which CP-SAT does not encode here")

    def eq_within(self, expr: Any, z: int, e: int) -> Any:
        """|expr - z| <= e."""
        return self.all_of([self.le(expr - z, e), self.ge(expr - z, -e)])

    def zone(self, name: str, b: list[Any], z: Any) -> Any:
        """inside / intersects of one box and a zone (geometry.inside_box, intersects_box,
        inside_half, intersects_half)."""
        from cellspec.core import geometry as g

        e = self.pb.eps
        if isinstance(z, BoxU):
            if name == "inside":
                return self.all_of([x for k in range(3) for x in (
                    self.ge(b[2 * k] - z.lo[k], -e), self.le(b[2 * k + 1] - z.hi[k], e))])
            return self.all_of([x for k in range(3) for x in (
                self.ge(b[2 * k + 1] - z.lo[k], e + 1), self.ge(z.hi[k] - b[2 * k], e + 1),
                self.ge(b[2 * k + 1] - b[2 * k], e + 1), z.hi[k] - z.lo[k] > e)])
        lo, hi = g.lin_extremes(z.coef, [b[0], b[2], b[4]], [b[1], b[3], b[5]])
        slack = e * sum(abs(c) for c in z.coef)
        if name == "intersects":
            if z.op in (">", ">="):
                return self.ge(hi - slack - z.rhs, 1)
            return self.le(lo + slack - z.rhs, -1)
        if z.op in (">", ">="):
            return self.ge(lo + slack - z.rhs, 0)
        return self.le(hi - slack - z.rhs, 0)


def fixed_boxes(cell: Cell, inst: Any, m: Any = None) -> PartBoxes:
    """The boxes of a concrete instance: constants, or with a model ``m`` CP-SAT variables
    fixed to them (so every relation is reified by the solver, not folded here: the
    differential tests compare that score with the check backend's count)."""
    box = [[int(v) if m is None else m.new_int_var(int(v), int(v), "") for v in row]
           for row in inst.boxes]
    return PartBoxes.of(cell, box, list(inst.types), list(inst.grippers))


def objective_of(m: Any) -> Any:
    """The model's own objective (minimised) as a linear expression, read back from its
    proto (so the model builders need not hand it over); 0 when there is none."""
    obj = m.Proto().objective
    expr: Any = int(obj.offset)
    for v, c in zip(obj.vars, obj.coeffs, strict=True):
        at = m.get_int_var_from_proto_index
        var = at(v) if v >= 0 else at(-v - 1).Not()
        expr = expr + int(c) * var
    if obj.scaling_factor not in (0, 1):  # a maximisation stored negated
        expr = -expr
    return expr


@dataclass
class LexResult:
    """A lexicographic solve: the CP-SAT status of the last stage that found a solution
    (``status``), the solver holding that solution, each stage's value and whether each
    stage was proved optimal (a later stage runs only under the earlier one's value)."""

    status: Any  # a CP-SAT status
    solver: Any
    values: list[int]
    proved: list[bool]


def lex_solve(m: Any, stages: list[tuple[Any, str]], make_solver: Any) -> LexResult:
    """Optimise ``stages`` ((expression, "min" | "max"), most important first) one after
    the other: each stage fixes its value (as a bound) before the next runs, hinted with
    the previous solution. ``make_solver(k, stages)`` gives stage k's CpSolver (its time
    share). A stage that finds nothing leaves the previous stage's solution as the answer
    (not proved for the stages after it)."""
    from ortools.sat.python import cp_model

    ok = (cp_model.OPTIMAL, cp_model.FEASIBLE)
    best: LexResult | None = None
    for k, (expr, sense) in enumerate(stages):
        m.clear_objective()
        if sense == "min":
            m.minimize(expr)
        else:
            m.maximize(expr)
        s = make_solver(k, len(stages))
        st = s.Solve(m)
        if st not in ok:
            if best is None:
                return LexResult(st, s, [], [])
            best.proved.extend([False] * (len(stages) - k))
            best.status = cp_model.FEASIBLE
            return best
        val = int(round(s.ObjectiveValue()))
        values = ([] if best is None else best.values) + [val]
        proved = ([] if best is None else best.proved) + [st == cp_model.OPTIMAL]
        best = LexResult(st if best is None or best.status == cp_model.OPTIMAL
                         else cp_model.FEASIBLE, s, values, proved)
        if k + 1 < len(stages):
            m.add(expr <= val if sense == "min" else expr >= val)
            m.clear_hints()
            for i in range(len(m.Proto().variables)):
                var = m.get_int_var_from_proto_index(i)
                m.add_hint(var, s.Value(var))
    assert best is not None
    if not all(best.proved):
        best.status = cp_model.FEASIBLE
    return best


__all__ = ["PartBoxes", "Reifier", "Terms", "Unencodable", "binding_count", "encode",
           "fixed_boxes", "lex_solve", "objective_of", "preference_rules", "MAX_LITERALS"]
