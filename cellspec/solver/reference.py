"""The reference evaluator: the meaning of a rule, by brute force over every binding.

It is the oracle the clingo backend is tested against (and the "all-pairs" peer of
the benchmark at small sizes). Quadratic or worse by design; no broad phase.

Quantifier semantics shared with every backend: the variables of one quantifier
range over distinct parts (``{p, q}`` over unordered pairs); the outer forall chain
binds distinct parts; a nested quantifier's part variable ranges over all parts
except the outer parts its body mentions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from cellspec.core import geometry as g
from cellspec.core import ir, relations
from cellspec.dsl.model import Rule
from cellspec.solver import stability
from cellspec.solver.instance import Instance, lin_to_int

ViolationKey = tuple[str, tuple[str, ...]]
BoolArray = npt.NDArray[np.bool_]
MAX_PARTS = 2000  # dense n x n relation matrices: keep them small


def free_vars(node: ir.Node) -> set[str]:
    """Variables a node reads that it does not bind."""
    if isinstance(node, ir.Cmp):
        return {a.var for a, _ in node.expr.terms}
    if isinstance(node, ir.SymEq):
        return {node.var}
    if isinstance(node, ir.Rel):
        return {a.name for a in node.args if isinstance(a, ir.VarArg)}
    if isinstance(node, ir.Not):
        return free_vars(node.operand)
    if isinstance(node, ir.And | ir.Or):
        out: set[str] = set()
        for o in node.ops:
            out |= free_vars(o)
        return out
    if isinstance(node, ir.Quant | ir.CountCmp):
        return free_vars(node.body) - set(node.vars)
    return set()


class ReferenceEvaluator:
    """Evaluates rules on one instance with dense numpy relation matrices."""

    def __init__(self, inst: Instance):
        self.inst = inst
        self.B = inst.boxes
        self.kern = inst.kernel()
        self._pair: dict[tuple, np.ndarray] = {}
        self._zone: dict[tuple, np.ndarray] = {}
        self._attr: dict[str, np.ndarray] = {}
        self.domains: dict[str, str] = {}

    # relation matrices ---------------------------------------------------------
    def pair(self, name: str, extra: tuple = ()) -> np.ndarray:
        key = (name, *extra)
        m = self._pair.get(key)
        if m is None:
            e = self.inst.eps
            r = relations.get(name)
            if r.param == "axis":
                m = self.kern.dense_flanks(extra[0], self.inst.opening, self.inst.depth, e)
            elif r.two_parts:
                m = self.kern.dense(name, extra[0] if r.param == "length" else e)
            else:
                raise KeyError(name)
            self._pair[key] = m
        return m

    def zone(self, name: str, zone: str) -> np.ndarray:
        key = (name, zone)
        m = self._zone.get(key)
        if m is None:
            m = self.kern.zone(name, self.inst.zones[zone], self.inst.eps)
            self._zone[key] = m
        return m

    def robot(self, name: str, robot: str) -> np.ndarray:
        """A robot relation (reachable) of every part and one robot: the relation's grid
        function (the numpy kernel, cellspec/core/geometry.py)."""
        key = (name, robot)
        m = self._zone.get(key)
        if m is None:
            fn = relations.get(name).grid
            assert fn is not None, name
            m = fn(self.B, (self.inst.reach or {})[robot])
            self._zone[key] = m
        return m

    def attr(self, a: str) -> np.ndarray:
        v = self._attr.get(a)
        if v is None:
            v = g.attr_2u(self.B, a)
            self._attr[a] = v
        return v

    # evaluation ------------------------------------------------------------------
    def holds(self, node: ir.Node, env: dict[str, object]) -> bool:
        if isinstance(node, ir.BoolConst):
            return node.value
        if isinstance(node, ir.Not):
            return not self.holds(node.operand, env)
        if isinstance(node, ir.And):
            return all(self.holds(o, env) for o in node.ops)
        if isinstance(node, ir.Or):
            return any(self.holds(o, env) for o in node.ops)
        if isinstance(node, ir.Cmp):
            return self.cmp(node, env)
        if isinstance(node, ir.SymEq):
            i = _part(env[node.var])
            val = self.inst.types[i] if node.attr == "type" else self.inst.grippers[i]
            return (val == node.value) == node.equal
        if isinstance(node, ir.Rel):
            return self.rel(node, env)
        if isinstance(node, ir.Quant):
            results = (self.holds(node.body, {**env, **b})
                       for b in self.bindings(node.vars, node.domain, node.unordered,
                                              free_vars(node.body), env))
            return any(results) if node.kind == "exists" else all(results)
        if isinstance(node, ir.CountCmp):
            c = sum(1 for b in self.bindings(node.vars, node.domain, node.unordered,
                                             free_vars(node.body), env)
                    if self.holds(node.body, {**env, **b}))
            return _compare(c, node.op, node.n)
        raise TypeError(node)

    def bindings(self, vars_: tuple[str, ...], domain: str, unordered: bool, used: set[str],
                 env: dict[str, object]) -> Iterator[dict[str, object]]:
        if domain in ("keepout", "robot"):
            names = self.inst.keepouts if domain == "keepout" else self.inst.robots
            for combo in itertools.product(names, repeat=len(vars_)):
                yield dict(zip(vars_, combo, strict=True))
            return
        exclude = {env[v] for v in used if v in env and self.domains.get(v) == "part"}
        pool = [i for i in range(self.inst.n) if i not in exclude]
        combos = (itertools.combinations(pool, len(vars_)) if unordered
                  else itertools.permutations(pool, len(vars_)))
        for parts in combos:
            yield dict(zip(vars_, parts, strict=True))

    def cmp(self, node: ir.Cmp, env: dict[str, object]) -> bool:
        coefs, const = lin_to_int([(a.attr, c) for a, c in node.expr.terms], node.expr.const)
        total = const
        for (a, _), k in zip(node.expr.terms, coefs, strict=True):
            total += k * int(self.attr(a.attr)[_part(env[a.var])])
        return _compare(total, node.op, 0)

    def rel(self, node: ir.Rel, env: dict[str, object]) -> bool:
        """A relation atom at a binding, by its family (:data:`FAMILY`)."""
        args: list[Any] = [env[a.name] if isinstance(a, ir.VarArg) else a for a in node.args]
        r = relations.get(node.name)
        decide = FAMILY.get(r.family)
        if decide is None:
            raise KeyError(node.name)
        return decide(self, r, args)

    def _rel_pair(self, r: relations.Relation, args: list[Any]) -> bool:
        """pair, column: the dense matrix of two parts (near: its distance; flanks: axis)."""
        if r.param == "length":
            d = int(g.to_u(args[2].value))  # floor: gaps are whole units
            return bool(self.pair(r.name, (d,))[args[0], args[1]])
        if r.param == "axis":
            return bool(self.pair(r.name, (args[2].name,))[args[0], args[1]])
        return bool(self.pair(r.name)[args[0], args[1]])

    def _rel_zone(self, r: relations.Relation, args: list[Any]) -> bool:
        """zone: a part and a zone (a variable's zone name, or a named one)."""
        z = args[1] if isinstance(args[1], str) else args[1].name
        return bool(self.zone(r.name, z)[args[0]])

    def _rel_surface(self, r: relations.Relation, args: list[Any]) -> bool:
        """surface: on the named surface (``on(p, s)``), or on any (``grounded(p)``)."""
        assert r.grid is not None, r.name
        zs = ([self.inst.surfaces[args[1].name]] if r.arity == 2
              else self.inst.surfaces.values())
        return any(bool(r.grid(self.B[args[0]], z, self.inst.eps)) for z in zs)

    def _rel_robot(self, r: relations.Relation, args: list[Any]) -> bool:
        """robot: a part and a robot (a variable's robot name, or a named one)."""
        robot = args[1] if isinstance(args[1], str) else args[1].name
        return bool(self.robot(r.name, robot)[args[0]])

    def _rel_order(self, r: relations.Relation, args: list[Any]) -> bool:
        """order: the layout's placement order."""
        op = self.inst.order_pos
        assert op is not None, "before() needs an order"
        return bool(op[args[0]] < op[args[1]])

    def _rel_part(self, r: relations.Relation, args: list[Any]) -> bool:
        """part: a one-part relation the stability LP decides (:data:`STABILITY`)."""
        return bool(STABILITY[r.name](self.inst)[args[0]])

    def violations(self, rule: Rule) -> list[tuple[object, ...]]:
        """Every binding of the rule's outer forall variables under which the body fails."""
        chain, body = ir.top_foralls(rule.body)
        self.domains = {}
        for q in chain:
            for v in q.vars:
                self.domains[v] = q.domain
        out: list[tuple[object, ...]] = []

        def rec(k: int, env: dict[str, object]) -> None:
            if k == len(chain):
                if not self.holds(body, env):
                    out.append(tuple(env[v] for q in chain for v in q.vars))
                return
            q = chain[k]
            used = {v for v, d in self.domains.items() if d == "part" and v in env}
            for b in self.bindings(q.vars, q.domain, q.unordered, used, env):
                rec(k + 1, {**env, **b})

        self._mark_domains(rule.body)
        rec(0, {})
        return out

    def _mark_domains(self, node: ir.Node) -> None:
        self.domains.update(ir.var_domains(node))


def _part(x: object) -> int:
    """A part variable's binding: the part's index."""
    assert isinstance(x, int), x
    return x


def _compare(a: int | Fraction, op: str, b: int | Fraction) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
            "!=": a != b}[op]


# how the reference decides a relation of each family (cellspec/core/relations.py
# FAMILIES); tests/test_relations.py checks every family is here
FAMILY: dict[str, Callable[[ReferenceEvaluator, relations.Relation, list[Any]], bool]] = {
    "pair": ReferenceEvaluator._rel_pair, "column": ReferenceEvaluator._rel_pair,
    "zone": ReferenceEvaluator._rel_zone, "surface": ReferenceEvaluator._rel_surface,
    "robot": ReferenceEvaluator._rel_robot, "order": ReferenceEvaluator._rel_order,
    "part": ReferenceEvaluator._rel_part}

# the one-part relations of the stability LP (relations ``lp``), per part: the one table
# keyed by name of the part family (the LP lives in the solver layer, which the entries in
# cellspec/core cannot name). In the order the clingo backend computes them: placed_stable
# first, its report (stages too) is cached on the instance and answers stable as well
STABILITY: dict[str, Callable[[Instance], BoolArray]] = {
    "placed_stable": stability.instance_placed_stable, "stable": stability.instance_stable}
