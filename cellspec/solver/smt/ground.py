"""Ground rule IR into folded formulas over symbolic part boxes.

Each part's box is six linear expressions (U units, like the clingo backend and the
reference evaluator): constants for a fixed layout, ``corner + 2*d`` for a part
displaced by ``d`` grid steps (robust checks), ``2*X -+ size`` for a free part
(lint). Every built-in relation is written exactly as in
``cellspec/core/geometry.py``, as a conjunction of difference constraints.

Quantifiers follow the reference semantics (``cellspec/solver/reference.py``):
variables of one quantifier are distinct, the outer forall chain binds distinct
parts, a nested quantifier skips the outer parts its body mentions.

Pruning: given neighbour sets (a broad phase widened by the largest possible
displacement), a part ``q`` that is no neighbour of the already-bound parts the body
mentions is evaluated once, generically (``Far``): every pair relation between it
and those parts is false. When that generic value is decided (three-valued logic),
it stands for all such parts; otherwise they are enumerated one by one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir, relations
from cellspec.core.status import Reason, SolverLimit
from cellspec.dsl.model import Rule
from cellspec.solver.instance import BoxU, lin_to_int
from cellspec.solver.reference import free_vars
from cellspec.solver.smt import shapes as shp
from cellspec.solver.smt.formula import UNK, Builder, Lin, add, const, scale

Formula = Any  # formula.py's folded formulas: a bool, UNK or a tagged tuple
Extra = int | str | None  # a pair relation's third argument: near's distance, flanks' axis
# corner index: x0 x1 y0 y1 z0 z1
_ATTR_COL = {"top": 5, "zmax": 5, "bottom": 4, "zmin": 4, "xmin": 0, "xmax": 1, "ymin": 2,
             "ymax": 3}


class GroundingLimit(SolverLimit):
    """Grounding would exceed the binding budget (the result is ``unknown``)."""

    reason = Reason.GROUNDING_LIMIT


class NotInFragment(SolverLimit):
    """A rule uses something this backend cannot encode (names rule and feature)."""

    reason = Reason.UNSUPPORTED


@dataclass(frozen=True)
class Far:
    """A generic part that is no neighbour of any part in ``anchor``."""

    anchor: frozenset


@dataclass
class Problem:
    """What the grounder reads: symbolic boxes plus the fixed facts of the parts."""

    n: int
    corners: list  # n x 6 linear expressions (U)
    types: tuple[str, ...]
    grippers: tuple[str, ...]
    eps: int
    zones: dict
    keepouts: tuple[str, ...]
    surfaces: dict[str, int]
    opening: int | None
    depth: int | None
    before: Callable[[int, int], Any]  # (i, j) -> formula
    neighbours: list | None = None  # list of sets, or None: every part is a neighbour
    presence: bool = False  # explain: every binding guarded by ("bool", ("present", i))
    robots: tuple[str, ...] = ()  # the cell's robots (`forall r in robot`)
    reach: dict | None = None  # robot -> geometry.ReachU (reachable(p, r))
    shapes: shp.LinShapes | None = None  # yawed boxes and cylinders (None: all plain)

    def names(self, domain: str) -> tuple[str, ...]:
        """The members of a named domain: the keep-out zones or the robots."""
        return self.robots if domain == "robot" else self.keepouts


def cell_fields(src) -> dict:  # noqa: ANN001 (an Instance or a CellU)
    """The cell's constants of a Problem (eps, zones, keep-outs, surfaces, gripper sizes),
    taken from an Instance or from :func:`cellspec.solver.instance.cell_u`."""
    return {k: getattr(src, k) for k in ("eps", "zones", "keepouts", "surfaces", "opening",
                                         "depth", "robots", "reach")}


def pair_margin(rules, boxes, eps: int, opening: int | None, depth: int | None) -> int:
    """A broad-phase margin (U) beyond which no pair relation the rules use can hold."""
    near, flanks = 0, False
    for r in rules:
        for n in ir.walk(r.body):
            r = relations.BUILTINS.get(n.name) if isinstance(n, ir.Rel) else None
            if isinstance(n, ir.Rel) and r is not None:
                d = n.args[2] if r.param == "length" else None
                if isinstance(d, ir.NumArg):
                    near = max(near, int(g.to_u(d.value)))
                elif r.param == "axis":
                    flanks = True
    return g.relation_margin(boxes, eps, near, flanks, opening, depth) + 1


class Grounder:
    def __init__(self, prob: Problem, builder: Builder, max_bindings: int = 20_000_000):
        self.p = prob
        self.b = builder
        self.max_bindings = max_bindings
        self.bindings = 0
        self.domains: dict[str, str] = {}
        # the encoding of the parts' shapes, chosen once: boxes, or per pair (smt/shapes.py)
        self.enc = shp.encoding(prob.shapes)

    # attributes and relations ------------------------------------------------------
    def corner(self, i, k):
        return self.p.corners[i][k]

    def attr2u(self, i: int, a: str):
        c = self.p.corners[i]
        if a in ("x", "y", "z"):
            k = "xyz".index(a) * 2
            return add(c[k], c[k + 1])
        if a.startswith("size."):
            k = "xyz".index(a[-1]) * 2
            return scale(add(c[k + 1], c[k], -1), 2)
        return scale(c[_ATTR_COL[a]], 2)

    def olap_ge(self, i: int, j: int, ax: int, k: int):
        """min(hi) - max(lo) >= k on axis ax (0, 1, 2)."""
        b = self.b
        ci, cj = self.p.corners[i], self.p.corners[j]
        lo, hi = 2 * ax, 2 * ax + 1
        return b.and_((b.ge(ci[hi], cj[lo], k), b.ge(cj[hi], ci[lo], k),
                       b.ge(ci[hi], ci[lo], k), b.ge(cj[hi], cj[lo], k)))

    def pair_rel(self, name: str, i: int, j: int, extra: Extra = None) -> Formula:
        """A pair relation of parts i and j in the encoding of their shapes."""
        return self.enc.pair(self, name, i, j, extra)

    def box_rel(self, name: str, i: int, j: int, extra: Extra = None) -> Formula:
        """A pair relation of the (enclosing) boxes, as in cellspec/core/geometry.py: the
        relation's own ``z3`` encoding (cellspec/core/relations.py); flanks its own."""
        r = relations.get(name)
        if r.param == "axis":  # flanks(q=i, p=j, axis)
            return self.flanks(i, j, str(extra))
        d = int(extra) if r.param == "length" and extra is not None else self.p.eps
        return self.encoding(r)(BoxPair(self, i, j), d)

    def encoding(self, r: relations.Relation) -> Callable[[Any, int], Formula]:
        """The relation's own ``z3`` encoding (cellspec/core/relations.py), or a refusal
        naming it: a relation without one is never encoded as another."""
        if r.z3 is None:
            raise NotInFragment(f"relation {r.name} has no Z3 encoding")
        return r.z3

    def flanks(self, q: int, p: int, axis: str) -> Formula:
        """q blocks a parallel grip of p along ``axis`` (geometry.flanks; on shapes,
        shapes.flanks through the encoding)."""
        b, e = self.b, self.p.eps
        cq, cp = self.p.corners[q], self.p.corners[p]
        other = 1 if axis == "x" else 0
        lat = self.olap_ge(q, p, other, e + 1)
        band_lo = cp[4] if self.p.depth is None else add(cp[5], const(-self.p.depth))
        # zo = min(q.z1, p.z1) - max(q.z0, band_lo) > eps
        zo = b.and_((b.gt(cq[5], cq[4], e), b.gt(cq[5], band_lo, e), b.gt(cp[5], cq[4], e),
                     b.gt(cp[5], band_lo, e)))
        return self.enc.flanks(self, q, p, axis, lat, zo)

    def box_flanks(self, q: int, p: int, axis: str, lat: Formula, zo: Formula) -> Formula:
        """flanks of two boxes: the lateral overlap, the z band and the fingers' gap."""
        b, e = self.b, self.p.eps
        cq, cp = self.p.corners[q], self.p.corners[p]
        ax = 0 if axis == "x" else 1
        if self.p.opening is None:
            gap = self.olap_ge(q, p, ax, -e)
        else:
            # -2 * olap < opening - size_a  <=>  2*(h - l) - size_a + opening > 0, all h, l
            size_a = add(cp[2 * ax + 1], cp[2 * ax], -1)
            his = (cq[2 * ax + 1], cp[2 * ax + 1])
            los = (cq[2 * ax], cp[2 * ax])
            gap = b.and_(b.le0(add(add(scale(add(h, l_, -1), -2), size_a), const(-self.p.opening
                                                                                    + 1)))
                         for h in his for l_ in los)
        return b.and_((lat, zo, gap))

    def zone_rel(self, name: str, i: int, zone: str) -> Formula:
        """A zone relation of part i and a named zone, in the encoding of its shape."""
        return self.enc.zone(self, name, i, self.p.zones[zone])

    def box_zone_rel(self, name: str, i: int, z: Any) -> Formula:
        """A zone relation of a box (the part's, or its enclosing box): the relation's own
        ``z3`` encoding read on :class:`BoxZoneView`."""
        return self.encoding(relations.get(name))(self.box_zone(i, z), self.p.eps)

    def box_zone(self, i: int, z: Any) -> BoxZoneView:
        """Part i's (enclosing) box and zone z, as a zone relation's encoding reads them."""
        return BoxZoneView(self, i, z)

    # evaluation --------------------------------------------------------------------------
    def holds(self, node: ir.Node, env: dict):
        b = self.b
        if isinstance(node, ir.BoolConst):
            return node.value
        if isinstance(node, ir.Not):
            return b.not_(self.holds(node.operand, env))
        if isinstance(node, ir.And):
            out = []
            for o in node.ops:
                f = self.holds(o, env)
                if f is False:
                    return False
                out.append(f)
            return b.and_(out)
        if isinstance(node, ir.Or):
            out = []
            for o in node.ops:
                f = self.holds(o, env)
                if f is True:
                    return True
                out.append(f)
            return b.or_(out)
        if isinstance(node, ir.Cmp):
            terms = [(a.attr, c) for a, c in node.expr.terms]
            coefs, k0 = lin_to_int(terms, node.expr.const)
            e = const(k0)
            for (a, _), k in zip(node.expr.terms, coefs, strict=True):
                i = env[a.var]
                if isinstance(i, Far):
                    return UNK
                e = add(e, self.attr2u(i, a.attr), k)
            return b.cmp(e, node.op)
        if isinstance(node, ir.SymEq):
            i = env[node.var]
            if isinstance(i, Far):
                return UNK
            val = self.p.types[i] if node.attr == "type" else self.p.grippers[i]
            return (val == node.value) == node.equal
        if isinstance(node, ir.Rel):
            return self.rel(node, env)
        if isinstance(node, ir.Quant):
            return self.quant(node, env)
        if isinstance(node, ir.CountCmp):
            items = self.count_items(node.vars, node.domain, node.unordered, node.body, env,
                                     set(), -1)
            return b.count(items, node.op, node.n)
        raise NotInFragment(f"cannot encode {type(node).__name__}")

    def rel(self, node: ir.Rel, env: dict[str, Any]) -> Formula:
        """A relation atom at a binding, by its family (:data:`FAMILY`)."""
        name = node.name
        args = [env[a.name] if isinstance(a, ir.VarArg) else a for a in node.args]
        r = relations.BUILTINS.get(name)
        fars = [a for a in args if isinstance(a, Far)]
        if fars:
            if r is not None and r.two_parts:
                far = fars[0]
                other = args[1] if args[0] is far else args[0]
                if isinstance(other, int) and other in far.anchor:
                    return False
            return UNK
        encode = None if r is None else FAMILY.get(r.family)
        if r is None or encode is None:
            raise NotInFragment(f"relation {name} is not supported by the Z3 backend")
        return encode(self, r, args)

    def _rel_pair(self, r: relations.Relation, args: list[Any]) -> Formula:
        """pair, column: the relation of two parts (near: its distance; flanks: its axis)."""
        extra: Extra = (int(g.to_u(args[2].value)) if r.param == "length"
                        else args[2].name if r.param == "axis" else None)
        return self.pair_rel(r.name, args[0], args[1], extra)

    def _rel_zone(self, r: relations.Relation, args: list[Any]) -> Formula:
        """zone: a part and a zone (a variable's zone name, or a named one)."""
        return self.zone_rel(r.name, args[0], args[1] if isinstance(args[1], str)
                             else args[1].name)

    def _rel_surface(self, r: relations.Relation, args: list[Any]) -> Formula:
        """surface: the relation's ``z3`` on the named surface (``on(p, s)``), or on any
        (``grounded(p)``), read on :class:`BoxSurface` (shapes do not change z)."""
        enc, e = self.encoding(r), self.p.eps
        if r.arity == 2:
            return enc(BoxSurface(self, args[0], self.p.surfaces[args[1].name]), e)
        return self.b.or_(enc(BoxSurface(self, args[0], z), e) for z in self.p.surfaces.values())

    def _rel_robot(self, r: relations.Relation, args: list[Any]) -> Formula:
        """robot: the relation's grid function (the numpy kernel) of a part at a fixed
        position; a part that may move (robust, lint) is refused: the distance is not
        linear."""
        robot = args[1] if isinstance(args[1], str) else args[1].name
        c = self.p.corners[args[0]]
        if any(x[1] for x in c):
            raise NotInFragment(f"relation {r.name} needs fixed positions (its distance to "
                                "the robot's base is not linear in a displacement)")
        assert r.grid is not None, r.name
        box = np.array([[x[0] for x in c]], dtype=np.int64)
        return bool(r.grid(box, (self.p.reach or {})[robot])[0])

    def _rel_order(self, r: relations.Relation, args: list[Any]) -> Formula:
        """order: the placement order of two parts."""
        return self.p.before(args[0], args[1])

    # quantifiers ---------------------------------------------------------------------------
    def _present(self, i: int):
        return ("bool", ("present", i))

    def _tick(self, k: int = 1) -> None:
        self.bindings += k
        if self.bindings > self.max_bindings:
            raise GroundingLimit(f"grounding needs more than {self.max_bindings} bindings")

    def _candidates(self, q_domain_vars, body, env, taken: set, prev: int, unordered: bool):
        """(candidate parts to enumerate, far parts as a list or None, anchor)."""
        n = self.p.n
        used = free_vars(body)
        excl = {env[v] for v in used if v in env and self.domains.get(v) == "part"
                and isinstance(env[v], int)} | taken
        lo = prev + 1 if unordered else 0
        anchor = frozenset(excl)
        if self.p.neighbours is None or not anchor:
            return [k for k in range(lo, n) if k not in excl], [], anchor
        near: set[int] = set()
        for a in anchor:
            near |= self.p.neighbours[a]
        cand = sorted(k for k in near if k >= lo and k not in excl)
        far_count = (n - lo) - sum(1 for k in excl if k >= lo) - len(cand)
        if far_count <= 0:
            return cand, [], anchor
        return cand, None, anchor  # far: computed lazily (only when needed)

    def _far_list(self, cand: list, excl_anchor, lo: int) -> list:
        s = set(cand)
        return [k for k in range(lo, self.p.n) if k not in s and k not in excl_anchor]

    def quant(self, node: ir.Quant, env: dict):
        if node.domain in ("keepout", "robot"):
            return self._quant_zones(node, env)
        for v in node.vars:
            self.domains[v] = "part"
        return self._quant_rec(node, 0, env, set(), -1)

    def _quant_zones(self, node: ir.Quant, env: dict):
        for v in node.vars:
            self.domains[v] = node.domain
        fs = []
        for combo in itertools.product(self.p.names(node.domain), repeat=len(node.vars)):
            self._tick()
            fs.append(self.holds(node.body, {**env, **dict(zip(node.vars, combo, strict=True))}))
        return self.b.or_(fs) if node.kind == "exists" else self.b.and_(fs)

    def _quant_rec(self, node: ir.Quant, k: int, env: dict, taken: set, prev: int):
        b = self.b
        exists = node.kind == "exists"
        v = node.vars[k]
        last = k == len(node.vars) - 1
        body = node.body
        # the body as seen by this variable: the rest of the quantifier's variables too
        sub = body if last else ir.Quant(node.kind, node.vars[k + 1:], node.domain,
                                         node.unordered, body)

        def inner(e2, taken2, idx):
            if last:
                return self.holds(body, e2)
            return self._quant_rec(node, k + 1, e2, taken2, idx)

        if any(isinstance(env.get(w), Far) for w in free_vars(sub)):
            # inside a generic evaluation: this quantifier would have to skip the part the
            # generic one stands for, which it cannot know; undecided (the caller enumerates)
            return UNK
        cand, far, anchor = self._candidates(node.vars, sub, env, taken, prev, node.unordered)
        fs = []
        lo = prev + 1 if node.unordered else 0
        if far is None:
            gen = inner({**env, v: Far(anchor)}, taken, prev)
            if gen is UNK or (node.unordered and not last):
                cand = [c for c in range(lo, self.p.n) if c not in anchor]
            else:
                self._tick()
                if self.p.presence:
                    pres = [self._present(c) for c in self._far_list(cand, anchor, lo)]
                    if exists:
                        fs.append(b.and_((gen, b.or_(pres))))
                    else:
                        fs.append(b.or_((gen, b.and_(b.not_(x) for x in pres))))
                else:
                    fs.append(gen)
        for c in cand:
            self._tick()
            f = inner({**env, v: c}, taken | {c}, c)
            if self.p.presence:
                f = b.and_((self._present(c), f)) if exists else b.or_((b.not_(self._present(c)),
                                                                        f))
            if exists and f is True:
                return True
            if not exists and f is False:
                return False
            fs.append(f)
        return b.or_(fs) if exists else b.and_(fs)

    def count_items(self, vars_, domain, unordered, body, env, taken, prev) -> list:
        """(formula, weight) pairs whose weights sum to the count."""
        b = self.b
        if domain in ("keepout", "robot"):
            for v in vars_:
                self.domains[v] = domain
            out: list[tuple[Formula, int]] = []
            for combo in itertools.product(self.p.names(domain), repeat=len(vars_)):
                self._tick()
                out.append((self.holds(body, {**env, **dict(zip(vars_, combo, strict=True))}), 1))
            return out
        for v in vars_:
            self.domains[v] = "part"
        v = vars_[0]
        rest = vars_[1:]
        sub = body if not rest else ir.CountCmp(rest, domain, unordered, body, ">=", 0)
        if any(isinstance(env.get(w), Far) for w in free_vars(sub)):
            return [(UNK, 1)]  # see _quant_rec: undecided inside a generic evaluation
        lo = prev + 1 if unordered else 0
        cand, far, anchor = self._candidates(vars_, sub, env, taken, prev, unordered)
        out = []
        if far is None:
            if rest:
                cand = [c for c in range(lo, self.p.n) if c not in anchor]
            else:
                gen = self.holds(body, {**env, v: Far(anchor)})
                if gen is UNK:
                    cand = [c for c in range(lo, self.p.n) if c not in anchor]
                else:
                    self._tick()
                    fl = self._far_list(cand, anchor, lo)
                    if self.p.presence:
                        out.extend((b.and_((gen, self._present(c))), 1) for c in fl)
                    else:
                        out.append((gen, len(fl)))
        for c in cand:
            self._tick()
            e2 = {**env, v: c}
            if rest:
                items = self.count_items(rest, domain, unordered, body, e2, taken | {c}, c)
            else:
                items = [(self.holds(body, e2), 1)]
            if self.p.presence:
                items = [(b.and_((self._present(c), f)), w) for f, w in items]
            out.extend(items)
        return out

    # rule instances ---------------------------------------------------------------------------
    def instances(self, rule: Rule) -> list[tuple[tuple, object]]:
        """[(binding, formula that the rule HOLDS at that binding)] for every binding of the
        outer forall chain whose formula is not the constant True."""
        chain, body = ir.top_foralls(rule.body)
        self.domains = {}
        for q in chain:
            for v in q.vars:
                self.domains[v] = q.domain
        for n in ir.walk(rule.body):
            if isinstance(n, ir.Quant | ir.CountCmp):
                for v in n.vars:
                    self.domains.setdefault(v, n.domain)
        flat: list[tuple[str, str, bool, int]] = []  # (var, domain, unordered, group)
        for gi, q in enumerate(chain):
            for v in q.vars:
                flat.append((v, q.domain, q.unordered, gi))
        out: list[tuple[tuple, object]] = []
        order = [v for v, *_ in flat]
        b = self.b

        def rec(k: int, env: dict, prev: int):
            if k == len(flat):
                f = self.holds(body, env)
                if f is not True:
                    if self.p.presence:
                        guard = [self._present(env[v]) for v in order
                                 if self.domains[v] == "part"]
                        f = b.or_((b.not_(b.and_(guard)), f))
                        if f is True:
                            return
                    out.append((tuple(env[v] for v in order), f))
                return
            v, dom, unordered, gi = flat[k]
            if dom in ("keepout", "robot"):
                for z in self.p.names(dom):
                    self._tick()
                    rec(k + 1, {**env, v: z}, prev)
                return
            same_group = k > 0 and flat[k - 1][3] == gi and unordered
            lo = prev + 1 if same_group else 0
            taken = {env[w] for w, d, *_ in flat[:k] if d == "part"}
            rest_body = body if k == len(flat) - 1 else None
            cand = None
            if self.p.neighbours is not None and taken and rest_body is not None:
                # the last variable: parts far from every bound part, judged once
                anchor = frozenset(taken)
                c: set = set()
                for a in anchor:
                    c |= self.p.neighbours[a]
                gen = self.holds(body, {**env, v: Far(anchor)})
                if gen is True:
                    cand = sorted(x for x in c if x >= lo and x not in taken)
            if cand is None:
                cand = [x for x in range(lo, self.p.n) if x not in taken]
            for x in cand:
                self._tick()
                rec(k + 1, {**env, v: x}, x)

        rec(0, {}, -1)
        return out


# how the grounder encodes a relation of each family (cellspec/core/relations.py FAMILIES);
# "part" (stable, placed_stable: the stability LP) is refused by name.
# tests/test_relations.py checks it covers every family of the relations Z3 encodes
FAMILY: dict[str, Callable[[Grounder, relations.Relation, list[Any]], Formula]] = {
    "pair": Grounder._rel_pair, "column": Grounder._rel_pair, "zone": Grounder._rel_zone,
    "surface": Grounder._rel_surface, "robot": Grounder._rel_robot, "order": Grounder._rel_order}


class BoxPair:
    """Two parts' (enclosing) boxes as a relation's ``z3`` encoding reads them
    (cellspec/core/relations.py): corner rows ``i`` and ``j`` and difference atoms."""

    def __init__(self, gr: Grounder, i: int, j: int):
        self.gr, self.a, self.b = gr, i, j
        self.i, self.j = gr.p.corners[i], gr.p.corners[j]

    def ge(self, x: Lin, y: Lin, k: int) -> Formula:
        """x - y >= k."""
        return self.gr.b.ge(x, y, k)

    def olap(self, ax: int, k: int) -> Formula:
        """The two boxes' overlap on axis ``ax`` (0, 1, 2) is at least k."""
        return self.gr.olap_ge(self.a, self.b, ax, k)

    def all(self, fs: Iterable[Formula]) -> Formula:
        """The conjunction."""
        return self.gr.b.and_(fs)


class BoxZoneView:
    """A part's (enclosing) box and a zone (a box or a half-space) as a zone relation's
    ``z3`` encoding reads them (cellspec/core/relations.py); smt/shapes.ShapeZone is the
    same view on a part that is not a plain box."""

    def __init__(self, gr: Grounder, i: int, z: Any):
        self.gr, self.z = gr, z
        self.c = gr.p.corners[i]

    def _extremes(self) -> tuple[Lin, Lin]:
        """A half-space's linear form's least and greatest value over the box."""
        c = self.c
        return g.lin_extremes(self.z.coef, c[0::2], c[1::2], zero=const(0), axpy=add)

    def within(self, d: int) -> Formula:
        """The box lies in the zone grown by d (geometry.inside_box, inside_half)."""
        b, c, z = self.gr.b, self.c, self.z
        if isinstance(z, BoxU):
            out = []
            for k in range(3):
                out.append(b.ge(c[2 * k], const(z.lo[k]), -d))
                out.append(b.ge(const(z.hi[k]), c[2 * k + 1], -d))
            return b.and_(out)
        lo_e, hi_e = self._extremes()
        slack = d * sum(abs(k) for k in z.coef)
        if z.op in (">", ">="):  # lo + slack >= rhs
            return b.cmp(add(lo_e, const(slack - z.rhs)), ">=")
        return b.cmp(add(hi_e, const(-slack - z.rhs)), "<=")

    def enters(self, d: int) -> Formula:
        """The box enters the zone by more than d (geometry.intersects_box, ..._half)."""
        b, c, z = self.gr.b, self.c, self.z
        if isinstance(z, BoxU):
            out: list[Formula] = []
            for k in range(3):
                lo, hi = c[2 * k], c[2 * k + 1]
                zl, zh = const(z.lo[k]), const(z.hi[k])
                out.extend((b.gt(hi, lo, d), b.gt(hi, zl, d), b.gt(zh, lo, d), b.gt(zh, zl, d)))
            return b.and_(out)
        lo_e, hi_e = self._extremes()
        slack = d * sum(abs(k) for k in z.coef)
        if z.op in (">", ">="):  # hi - slack > rhs
            return b.cmp(add(hi_e, const(-slack - z.rhs)), ">")
        return b.cmp(add(lo_e, const(slack - z.rhs)), "<")

    def all(self, fs: Iterable[Formula]) -> Formula:
        """The conjunction."""
        return self.gr.b.and_(fs)

    def not_(self, f: Formula) -> Formula:
        """The negation."""
        return self.gr.b.not_(f)


class BoxSurface:
    """A part's (enclosing) box and a surface's height as a surface relation's ``z3``
    encoding reads them (cellspec/core/relations.py): corner row ``i``, height ``z``."""

    def __init__(self, gr: Grounder, i: int, z: int):
        self.gr = gr
        self.i, self.z = gr.p.corners[i], const(z)

    def ge(self, x: Lin, y: Lin, k: int) -> Formula:
        """x - y >= k."""
        return self.gr.b.ge(x, y, k)

    def all(self, fs: Iterable[Formula]) -> Formula:
        """The conjunction."""
        return self.gr.b.and_(fs)
