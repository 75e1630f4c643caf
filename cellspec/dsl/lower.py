"""Lowering rule statements to the typed IR (cellspec/core/ir.py): quantifiers over
parts, arithmetic, comparisons, counts and the built-in relations, type- and scope-checked,
with each problem reported at its file:line:col; and the checks of a rule's message.

The third of the parser's stages: every backend compiles the IR this module produces, so
the meaning of a rule is decided here once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from cellspec.core import ir
from cellspec.core.names import did_you_mean, unknown
from cellspec.core.severity import Severity
from cellspec.dsl.calls import CallLowering
from cellspec.dsl.model import Rule

if TYPE_CHECKING:  # the builder calls lower_rule: a run-time import would be a cycle
    from cellspec.dsl.build import CellBuilder

MAX_COUNT_CONST = 2**31 - 1  # clingo integers are 32-bit: a larger count constant wraps
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
MESSAGE_FUNCS = {"overlap": 2, "gap": 1, "outside": 1, "intrusion": 2, "blockers": 1,
                 "stability": 1, "stages": 1}


def unescape(s: str) -> str:
    """A quoted message of the DSL as text (``\\"`` and ``\\\\`` unescaped)."""
    return s.replace('\\"', '"').replace("\\\\", "\\")


def lower_rule(b: CellBuilder, st: Any, cell: dict[str, Any]) -> Rule | None:
    """The rule statement ``st`` with its body lowered to the IR and its message checked,
    or None after reporting its errors to ``b`` (``cell``: the built cell items)."""
    before = b.error_count()
    ctx = _ExprCtx(b, cell)
    body = ctx.boolean(st.body, {})
    if b.error_count() > before or body is None:
        return None
    top = tuple(ir.top_domains(body))
    _check_message(b, st, top, body)
    weight = _weight(b, st)
    if weight is None:
        return None
    return Rule(name=st.name, message=unescape(st.message),
                severity=Severity(st.severity or Severity.ERROR), body=body, source=b.src(st),
                weight=weight)


def _weight(b: CellBuilder, st: Any) -> int | None:
    """The rule's weight: 1 unless a preference says ``weight W`` (a positive whole number);
    None after reporting a bad one to ``b``."""
    text = getattr(st, "weight", None) or ""
    if not text:
        return 1
    if st.severity != Severity.PREFERENCE:
        b.err(st, f"rule {st.name}: `weight` applies only to `severity preference` "
                  f"(this rule is {st.severity or 'error'})")
        return None
    if not text.isdigit() or int(text) < 1:
        b.err(st, f"rule {st.name}: weight must be a positive whole number, not {text}")
        return None
    return int(text)


def _check_message(b: CellBuilder, st: Any, top: tuple[str, ...], body: ir.Node) -> None:
    """Every placeholder of the message names an outer variable or a known function."""
    msg = unescape(st.message)
    top_domains = ir.top_domains(body)
    for m in PLACEHOLDER.finditer(msg):
        inner = m.group(1).strip()
        fm = re.fullmatch(r"(\w+)\(([^()]*)\)", inner)
        if fm:
            fname, args = fm.group(1), [a.strip() for a in fm.group(2).split(",") if a.strip()]
            if fname not in MESSAGE_FUNCS:
                b.err(st, "message uses " + unknown("function", fname, sorted(MESSAGE_FUNCS)))
            elif len(args) != MESSAGE_FUNCS[fname]:
                b.err(st, f"message function '{fname}' takes {MESSAGE_FUNCS[fname]} "
                      "argument(s)")
            for a in args:
                if a not in top:
                    b.err(st, f"message refers to '{a}', which is not a variable of the "
                          f"rule's outer forall ({', '.join(top) or 'none'})")
            continue
        var, _, attr = inner.partition(".")
        if var not in top:
            b.err(st, f"message placeholder '{{{inner}}}' names no variable of the rule's "
                  f"outer forall{did_you_mean(var, top)} ({', '.join(top) or 'none'})")
        elif attr and (top_domains.get(var) != "part" or
                       (attr not in ir.NUMERIC_ATTRS and attr not in ir.SYMBOL_ATTRS)):
            b.err(st, f"message placeholder '{{{inner}}}': " + unknown(
                "attribute", attr, [*ir.NUMERIC_ATTRS, *ir.SYMBOL_ATTRS]))


@dataclass(frozen=True)
class _BoolT:
    node: ir.Node


@dataclass(frozen=True)
class _SymT:
    name: str
    obj: Any


@dataclass(frozen=True)
class _AttrSymT:
    var: str
    attr: str


@dataclass(frozen=True)
class _ConstLin(ir.Lin):
    """A const used in an expression: a length (``const``, metres) that also remembers the
    number as written (``raw``), which is what it means as a factor or a count."""

    raw: Fraction = Fraction(0)

    def scale(self, k: Fraction) -> ir.Lin:
        return _ConstLin((), self.const * k, self.raw * k)


def _plain(t: ir.Lin, unit: Fraction) -> Fraction:
    """A constant term as a plain number (a factor or a count)."""
    return t.raw if isinstance(t, _ConstLin) else t.const / unit


@dataclass(frozen=True)
class _CountT:
    vars: tuple[str, ...]
    domain: str
    unordered: bool
    body: ir.Node


class _ExprCtx(CallLowering):
    """Builds IR from textX expression objects; scope maps variables to domains."""

    def __init__(self, b: CellBuilder, cell: dict[str, Any]):
        self.b = b
        self.cell = cell
        self.zones = {z.name for z in cell["keepouts"]}
        self.surfaces = {s.name for s in cell["surfaces"]}
        self.robots = {r.name for r in cell["robots"]}
        # where each name of the cell is declared: a variable shadows only names of its own
        # file (a library's `forall k` never collides with a user's keep-out `k`)
        self.declared_in = {x.name: x.source.file for key in ("keepouts", "surfaces", "robots")
                            for x in cell[key]}
        self.consts = b.defs.consts if b.defs is not None else {}
        self.predicates = b.defs.predicates if b.defs is not None else {}
        # inside a predicate's expansion: parameters given a name (a robot, a zone, a
        # surface) rather than a variable, mapped to that name
        self.alias: dict[str, str] = {}

    def name_of(self, node: Any) -> str:
        """The name a Ref (or argument) spells, a predicate parameter's alias resolved ("" for
        an argument that is no name)."""
        name = getattr(node, "name", None)
        return self.alias.get(name, name) if isinstance(name, str) else ""

    def err(self, obj: Any, msg: str) -> None:
        self.b.err(obj, msg)

    def boolean(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        cls = type(node).__name__
        if cls == "Quant":
            return self.quant(node, scope)
        if cls == "Implies":
            left = self.boolean(node.left, scope)
            if node.right is None:
                return left
            right = self.boolean(node.right, scope)
            if left is None or right is None:
                return None
            return ir.Or((ir.Not(left), right))
        if cls in ("Or", "And"):
            ops = [self.boolean(o, scope) for o in node.ops]
            if any(o is None for o in ops):
                return None
            if len(ops) == 1:
                return ops[0]
            return (ir.Or if cls == "Or" else ir.And)(tuple(ops))  # type: ignore[arg-type]
        if cls == "NotExpr":
            inner = self.boolean(node.operand, scope)
            return None if inner is None else ir.Not(inner)
        if cls == "Cmp":
            return self.cmp(node, scope)
        self.err(node, f"expected a condition, found {cls}")
        return None

    def bind(self, node: Any, scope: dict[str, str]):
        """The variables a quantifier or count binds and its body built in their scope:
        (names, domain, unordered, type filter, body), or None after an error."""
        vs = self.qvars(node.vars, scope)
        if vs is None:
            return None
        names, domain, unordered, type_filter = vs
        inner = dict(scope)
        for v in names:
            inner[v] = domain
        body = self.boolean(node.body, inner)
        if body is None:
            return None
        return names, domain, unordered, type_filter, body

    def quant(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        bound = self.bind(node, scope)
        if bound is None:
            return None
        names, domain, unordered, type_filter, body = bound
        if type_filter is not None:
            guard = ir.And(tuple(ir.SymEq(v, "type", type_filter, True) for v in names)) \
                if len(names) > 1 else ir.SymEq(names[0], "type", type_filter, True)
            body = ir.Or((ir.Not(guard), body)) if node.kind == "forall" else ir.And((guard, body))
        return ir.Quant(node.kind, tuple(names), domain, unordered, body)

    def qvars(self, qv: Any, scope: dict[str, str]):
        names = list(qv.names)
        ok = True
        for v in names:
            if v in scope:
                self.err(qv, f"variable '{v}' is already bound by an enclosing quantifier")
                ok = False
            here = self.b.cur.shown if self.b.cur is not None else ""
            if self.declared_in.get(v) == here or v in ("workspace", "x", "y", "z"):
                self.err(qv, f"variable '{v}' shadows a name of the cell; pick another name")
                ok = False
            elif ((v in self.consts and self.consts[v].source.file == here)
                  or (v in self.predicates and self.predicates[v].source.file == here)):
                what = "const" if v in self.consts else "predicate"
                self.err(qv, f"variable '{v}' shadows the {what} {v}; pick another name")
                ok = False
        if len(set(names)) != len(names):
            self.err(qv, "a quantifier binds the same variable twice")
            ok = False
        if qv.unordered and len(names) < 2:
            self.err(qv, "{...} (unordered pairs) needs at least two variables")
            ok = False
        domain, tfilter = "part", None
        if qv.domain:
            if qv.domain in ("keepout", "robot"):
                domain = qv.domain
                if qv.unordered:
                    self.err(qv, "unordered pairs range over parts only")
                    ok = False
            elif qv.domain in self.cell["part_types"]:
                tfilter = qv.domain
            else:
                self.err(qv, unknown("domain", qv.domain,
                                     ["keepout", "robot", *sorted(self.cell["part_types"])]))
                ok = False
        return (names, domain, bool(qv.unordered), tfilter) if ok else None

    def cmp(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        left = self.term(node.left, scope)
        if node.op is None:
            if isinstance(left, _BoolT):
                return left.node
            if left is not None:
                self.err(node, "expected a condition (a comparison, a relation such as "
                         "contact(p, q), or a quantifier), found a value")
            return None
        right = self.term(node.right, scope)
        if left is None or right is None:
            return None
        op = node.op
        if isinstance(left, ir.Lin) and isinstance(right, ir.Lin):
            return ir.Cmp(op, left.add(right.scale(Fraction(-1))))
        if isinstance(right, _AttrSymT) and isinstance(left, _SymT):
            left, right = right, left
        if isinstance(left, _AttrSymT):
            if op not in ("==", "!="):
                self.err(node, f"p.{left.attr} can only be compared with == or !=")
                return None
            if not isinstance(right, _SymT):
                self.err(node, f"compare p.{left.attr} with a name such as "
                         f"{'cube' if left.attr == 'type' else 'parallel'}")
                return None
            if left.attr == "type" and right.name not in self.cell["part_types"]:
                self.err(node, unknown("part type", right.name,
                                       sorted(self.cell["part_types"])))
                return None
            if left.attr == "gripper" and right.name not in ("vacuum", "parallel"):
                self.err(node, unknown("gripper", right.name, ["vacuum", "parallel"]))
                return None
            return ir.SymEq(left.var, left.attr, right.name, op == "==")
        flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
        if isinstance(right, _CountT) and not isinstance(left, _CountT):
            left, right, op = right, left, flip[op]
        if isinstance(left, _CountT):
            raw = _plain(right, self._unit()) if isinstance(right, ir.Lin) and right.is_const \
                else None
            if raw is None or raw.denominator != 1:
                self.err(node, "count(...) can only be compared with a whole number")
                return None
            n = int(raw)
            if abs(n) > MAX_COUNT_CONST:
                self.err(node, f"count(...) is compared with {n}, which is too large: counts "
                         f"are compared exactly up to {MAX_COUNT_CONST} (32-bit integers)")
                return None
            return ir.CountCmp(left.vars, left.domain, left.unordered, left.body, op, n)
        for side, other in ((left, right), (right, left)):
            if isinstance(side, _SymT) and isinstance(other, ir.Lin):
                known = ", ".join(sorted(self.consts)) or "none defined"
                self.err(side.obj, f"'{side.name}' is not a number, a const or an attribute "
                         f"(consts: {known})")
                return None
        self.err(node, "these two sides cannot be compared (a length with a name, or a "
                 "condition with a number)")
        return None

    def term(self, node: Any, scope: dict[str, str]):
        """The value of an expression node: a linear term (ir.Lin), a condition (_BoolT),
        a name (_SymT), a symbolic attribute (_AttrSymT), a count (_CountT), or None
        after reporting why it has none."""
        cls = type(node).__name__
        if cls == "NumLit":
            return ir.Lin.constant(self.b.n(node.value))
        if cls == "BoolLit":
            return _BoolT(ir.BoolConst(node.value == "true"))
        if cls == "Call":
            r = self.call(node, scope)
            return None if r is None else _BoolT(r)
        method = self._TERMS.get(cls)
        if method is None:
            self.err(node, f"unexpected {cls}")
            return None
        return method(self, node, scope)

    def _sum(self, node: Any, scope: dict[str, str]):
        acc = None
        for i, op in enumerate(node.ops):
            t = self.term(op, scope)
            if t is None:
                return None
            if len(node.ops) == 1:
                return t
            if not isinstance(t, ir.Lin):
                self.err(op, "only lengths can be added or subtracted")
                return None
            if i > 0 and node.signs[i - 1] == "-":
                t = t.scale(Fraction(-1))
            acc = t if acc is None else acc.add(t)
        return acc

    def _prod(self, node: Any, scope: dict[str, str]):
        if len(node.ops) == 1:
            return self.term(node.ops[0], scope)
        acc: ir.Lin | None = None
        for op in node.ops:
            t = self.term(op, scope)
            if t is None:
                return None
            if not isinstance(t, ir.Lin):
                self.err(op, "only numbers and lengths can be multiplied")
                return None
            if acc is None:
                acc = t
            elif acc.is_const:
                acc = t.scale(_plain(acc, self._unit()))
            elif t.is_const:
                acc = acc.scale(_plain(t, self._unit()))
            else:
                self.err(node, "multiplication needs a constant factor (the rules stay "
                         "linear)")
                return None
        return acc

    def _unary(self, node: Any, scope: dict[str, str]):
        t = self.term(node.operand, scope)
        if node.minus:
            if not isinstance(t, ir.Lin):
                if t is not None:
                    self.err(node, "unary minus applies to numbers and lengths only")
                return None
            return t.scale(Fraction(-1))
        return t

    def _attr(self, node: Any, scope: dict[str, str]):
        if node.var not in scope:
            self.err(node, unknown("variable", node.var, sorted(scope), label="in scope"))
            return None
        if scope[node.var] != "part":
            what = "a robot" if scope[node.var] == "robot" else "a keep-out zone"
            self.err(node, f"'{node.var}' is {what}; attributes belong to parts")
            return None
        attr = ".".join(node.path)
        if attr in ir.NUMERIC_ATTRS:
            return ir.Lin.of(ir.Attr(node.var, attr))
        if attr in ir.SYMBOL_ATTRS:
            return _AttrSymT(node.var, attr)
        self.err(node, unknown("attribute", attr, [*ir.NUMERIC_ATTRS, *ir.SYMBOL_ATTRS]))
        return None

    def _ref(self, node: Any, scope: dict[str, str]):
        if node.name in scope:
            self.err(node, f"'{node.name}' is a {scope[node.name]} variable, not a value; "
                     f"use an attribute such as {node.name}.x")
            return None
        if node.name in self.consts:
            return self._const(node.name, node)
        return _SymT(node.name, node)

    def _const(self, name: str, node: Any) -> ir.Lin | None:
        """A const as a term: its length in metres, remembering the number as written."""
        assert self.b.defs is not None
        c = self.b.defs.const(name, node)
        if c is None:
            return None
        return _ConstLin((), c.metres, c.raw)

    def _paren(self, node: Any, scope: dict[str, str]):
        inner = self._unwrap(node.expr)
        if inner is not None:
            return self.term(inner, scope)
        b = self.boolean(node.expr, scope)
        return None if b is None else _BoolT(b)

    def _count(self, node: Any, scope: dict[str, str]):
        bound = self.bind(node, scope)
        if bound is None:
            return None
        names, domain, unordered, tfilter, body = bound
        if tfilter is not None:
            body = ir.And((*(ir.SymEq(v, "type", tfilter, True) for v in names), body))
        return _CountT(tuple(names), domain, unordered, body)

    _TERMS: ClassVar[dict[str, Callable[..., Any]]] = {
        "Sum": _sum, "Prod": _prod, "Unary": _unary, "Attr": _attr, "Ref": _ref,
        "Paren": _paren, "Count": _count}

    def _unit(self) -> Fraction:
        return self.b.scale

    @staticmethod
    def _unwrap(expr: Any) -> Any | None:
        """The arithmetic Sum inside a parenthesised expression, or None if boolean."""
        node = expr
        if type(node).__name__ != "Implies" or node.right is not None:
            return None
        node = node.left
        if len(node.ops) != 1:
            return None
        node = node.ops[0]
        if type(node).__name__ != "And" or len(node.ops) != 1:
            return None
        node = node.ops[0]
        if type(node).__name__ != "Cmp" or node.op is not None:
            return None
        left = node.left
        # a lone relation call stays boolean
        if (len(left.ops) == 1 and len(left.ops[0].ops) == 1 and not left.ops[0].ops[0].minus
                and type(left.ops[0].ops[0].operand).__name__ in ("Call", "Paren", "BoolLit",
                                                                   "Count")):
            return None
        return left
