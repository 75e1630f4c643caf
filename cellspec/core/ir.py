"""The typed rule IR every backend compiles: quantifiers, linear arithmetic, relations.

Lengths are exact fractions of a metre, so lowering to fixed-point integers
(clingo, CP-SAT) or to reals (Z3) never depends on float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from cellspec.core.relations import BUILTINS
from cellspec.core.relations import names as relation_names

NUMERIC_ATTRS: dict[str, str] = {
    "x": "centre x",
    "y": "centre y",
    "z": "centre z",
    "top": "top face z",
    "bottom": "bottom face z",
    "xmin": "lowest x of the box",
    "xmax": "highest x of the box",
    "ymin": "lowest y of the box",
    "ymax": "highest y of the box",
    "zmin": "lowest z of the box (= bottom)",
    "zmax": "highest z of the box (= top)",
    "size.x": "size along x",
    "size.y": "size along y",
    "size.z": "size along z",
}
SYMBOL_ATTRS: dict[str, str] = {"type": "part type name", "gripper": "vacuum or parallel"}

# Built-in relations (cellspec/core/relations.py): argument kinds. "part" is a part
# variable, "zone" a keep-out name, `workspace` or a keep-out variable, "surface_or_part" a
# surface name or a part variable, "length" a constant in metres, "axis" x or y, "robot" a
# robot name or a robot variable (`forall r in robot`, language version 2).
RELATIONS: dict[str, tuple[str, ...]] = {r.name: r.args for r in BUILTINS.values()}
RELATION_DOCS: dict[str, str] = {r.name: r.doc for r in BUILTINS.values()}
# what the quantifier domains range over (`forall v in DOMAIN`; parts without `in`)
DOMAIN_DOCS: dict[str, str] = {
    "part": "the layout's parts (`forall p:`, `forall p in TYPE:` for one part type)",
    "keepout": "the cell's keep-out zones (`forall k in keepout:`)",
    "robot": "the cell's robots (`forall r in robot:`, language version 2)",
}
PAIR_RELATIONS = relation_names(lambda r: r.family == "pair")
COLUMN_RELATIONS = relation_names(lambda r: r.family == "column")
ORDER_RELATIONS = relation_names(lambda r: r.reads_order)


@dataclass(frozen=True)
class Attr:
    """A numeric attribute of a part variable, e.g. ``p.top``."""

    var: str
    attr: str


@dataclass(frozen=True)
class Lin:
    """A linear expression sum(coef * attr) + const, in metres."""

    terms: tuple[tuple[Attr, Fraction], ...]
    const: Fraction

    @staticmethod
    def constant(value: Fraction) -> Lin:
        return Lin((), Fraction(value))

    @staticmethod
    def of(attr: Attr) -> Lin:
        return Lin(((attr, Fraction(1)),), Fraction(0))

    def scale(self, k: Fraction) -> Lin:
        return Lin(tuple((a, c * k) for a, c in self.terms if c * k != 0), self.const * k)

    def add(self, other: Lin) -> Lin:
        acc: dict[Attr, Fraction] = {}
        for a, c in self.terms + other.terms:
            acc[a] = acc.get(a, Fraction(0)) + c
        return Lin(tuple((a, c) for a, c in acc.items() if c != 0), self.const + other.const)

    @property
    def is_const(self) -> bool:
        return not self.terms


@dataclass(frozen=True)
class Node:
    """Base class of boolean IR nodes."""


@dataclass(frozen=True)
class BoolConst(Node):
    value: bool


@dataclass(frozen=True)
class Cmp(Node):
    """``expr op 0`` with op one of < <= > >= == !=."""

    op: str
    expr: Lin


@dataclass(frozen=True)
class SymEq(Node):
    """``p.type == cube`` (equal=True) or ``p.gripper != vacuum`` (equal=False)."""

    var: str
    attr: str
    value: str
    equal: bool


@dataclass(frozen=True)
class VarArg:
    name: str


@dataclass(frozen=True)
class NameArg:
    """A zone, surface or axis name, or the word ``workspace``."""

    name: str


@dataclass(frozen=True)
class NumArg:
    value: Fraction


Arg = VarArg | NameArg | NumArg


@dataclass(frozen=True)
class Rel(Node):
    name: str
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True)
class And(Node):
    ops: tuple[Node, ...]


@dataclass(frozen=True)
class Or(Node):
    ops: tuple[Node, ...]


@dataclass(frozen=True)
class Quant(Node):
    """forall/exists over parts (domain "part"), keep-out zones ("keepout") or robots
    ("robot")."""

    kind: str
    vars: tuple[str, ...]
    domain: str
    unordered: bool
    body: Node


@dataclass(frozen=True)
class CountCmp(Node):
    """``count(vars : body) op n``."""

    vars: tuple[str, ...]
    domain: str
    unordered: bool
    body: Node
    op: str
    n: int


NEGATED_OP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def walk(node: Node):
    """Yield every node of the tree, pre-order."""
    yield node
    if isinstance(node, Not):
        yield from walk(node.operand)
    elif isinstance(node, And | Or):
        for op in node.ops:
            yield from walk(op)
    elif isinstance(node, Quant | CountCmp):
        yield from walk(node.body)


def uses_relation(node: Node, names: frozenset[str] | set[str]) -> bool:
    """True if any relation in ``names`` occurs in the tree."""
    return any(isinstance(n, Rel) and n.name in names for n in walk(node))


def attrs_used(node: Node) -> set[Attr]:
    """Every numeric attribute the tree reads."""
    out: set[Attr] = set()
    for n in walk(node):
        if isinstance(n, Cmp):
            out.update(a for a, _ in n.expr.terms)
    return out


def var_domains(node: Node) -> dict[str, str]:
    """Every quantified variable of the tree (forall, exists, count) mapped to its domain;
    a name bound twice keeps the later (inner) binding's, pre-order."""
    out: dict[str, str] = {}
    for n in walk(node):
        if isinstance(n, Quant | CountCmp):
            for v in n.vars:
                out[v] = n.domain
    return out


def top_foralls(node: Node) -> tuple[list[Quant], Node]:
    """The chain of directly nested outer foralls and the body beneath them.

    Their variables name a violation: ``forall p: forall k in keepout: ...``
    is violated by a pair (p, k).
    """
    chain: list[Quant] = []
    while isinstance(node, Quant) and node.kind == "forall":
        chain.append(node)
        node = node.body
    return chain, node


def top_domains(node: Node) -> dict[str, str]:
    """Outer forall variables mapped to their domain ("part", "keepout" or "robot"), in
    order."""
    chain, _ = top_foralls(node)
    return {v: q.domain for q in chain for v in q.vars}


def rename(node: Node, names: dict[str, str]) -> Node:
    """The tree with variables renamed by ``names`` (free and bound alike): a predicate's
    parameters become the arguments of its use, clashing bound variables fresh names."""
    def v(x: str) -> str:
        return names.get(x, x)

    if isinstance(node, Cmp):
        return Cmp(node.op, Lin(tuple((Attr(v(a.var), a.attr), c) for a, c in node.expr.terms),
                                node.expr.const))
    if isinstance(node, SymEq):
        return SymEq(v(node.var), node.attr, node.value, node.equal)
    if isinstance(node, Rel):
        return Rel(node.name, tuple(VarArg(v(a.name)) if isinstance(a, VarArg) else a
                                    for a in node.args))
    if isinstance(node, Not):
        return Not(rename(node.operand, names))
    if isinstance(node, And | Or):
        return type(node)(tuple(rename(o, names) for o in node.ops))
    if isinstance(node, Quant):
        return Quant(node.kind, tuple(v(x) for x in node.vars), node.domain, node.unordered,
                     rename(node.body, names))
    if isinstance(node, CountCmp):
        return CountCmp(tuple(v(x) for x in node.vars), node.domain, node.unordered,
                        rename(node.body, names), node.op, node.n)
    return node


def bound_vars(node: Node) -> set[str]:
    """Every variable a quantifier or count of the tree binds."""
    return {x for n in walk(node) if isinstance(n, Quant | CountCmp) for x in n.vars}
