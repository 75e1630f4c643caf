"""Small formulas over integer linear atoms, folded as they are built.

The Z3 Python API costs about 0.1 ms per term, so cellspec first builds a plain
Python formula in which every atom is ``const + sum(coef * var) <= 0`` over integer
variables with known bounds; an atom whose value the bounds already decide is folded
to ``True``/``False`` on the spot, and only what is left is handed to Z3.

Formulas: ``True``, ``False``, ``UNK`` (three-valued: "not decided without knowing
one part", used by the grounder), or tuples
``("le", const, terms)`` (``terms`` a sorted tuple of ``(var, coef)``),
``("and", ops)``, ``("or", ops)``, ``("not", f)``, ``("bool", name)``,
``("count", ((f, weight), ...), op, n)``.
"""

from __future__ import annotations

from collections.abc import Iterable


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNK"


UNK = _Unknown()

# a linear expression: (const, ((var, coef), ...)) with vars sorted, coefs non-zero
Lin = tuple


def lin(const: int, *terms: tuple) -> Lin:
    acc: dict = {}
    for v, c in terms:
        acc[v] = acc.get(v, 0) + c
    return (const, tuple(sorted((v, c) for v, c in acc.items() if c)))


def const(k: int) -> Lin:
    return (k, ())


def add(a: Lin, b: Lin, k: int = 1) -> Lin:
    """a + k*b."""
    if not b[1]:
        return (a[0] + k * b[0], a[1])
    if not a[1]:
        return (a[0] + k * b[0], tuple((v, k * c) for v, c in b[1]))
    acc = dict(a[1])
    for v, c in b[1]:
        acc[v] = acc.get(v, 0) + k * c
    return (a[0] + k * b[0], tuple(sorted((v, c) for v, c in acc.items() if c)))


def scale(a: Lin, k: int) -> Lin:
    return (a[0] * k, tuple((v, c * k) for v, c in a[1]) if k else ())


class Builder:
    """Smart constructors with folding against variable bounds (``None``: unbounded)."""

    def __init__(self, bounds: dict | None = None):
        self.bounds = bounds if bounds is not None else {}
        self.atoms = 0  # atoms left after folding
        self.folded = 0

    def le0(self, e: Lin):
        """The atom e <= 0, folded when the bounds decide it."""
        c, terms = e
        lo = hi = c
        for v, k in terms:
            b = self.bounds.get(v)
            if b is None:
                lo = hi = None
                break
            if k > 0:
                lo += k * b[0]
                hi += k * b[1]
            else:
                lo += k * b[1]
                hi += k * b[0]
        if lo is not None:
            if hi <= 0:
                self.folded += 1
                return True
            if lo > 0:
                self.folded += 1
                return False
        self.atoms += 1
        return ("le", c, terms)

    # comparisons of linear expressions ------------------------------------------------
    def cmp(self, e: Lin, op: str):
        """``e op 0`` for op in < <= > >= == != (integers)."""
        if op == "<=":
            return self.le0(e)
        if op == "<":
            return self.le0(add(e, const(1)))
        if op == ">=":
            return self.le0(scale(e, -1))
        if op == ">":
            return self.le0(add(scale(e, -1), const(1)))
        if op == "==":
            return self.and_((self.cmp(e, "<="), self.cmp(e, ">=")))
        if op == "!=":
            return self.or_((self.cmp(e, "<"), self.cmp(e, ">")))
        raise ValueError(op)

    def ge(self, a: Lin, b: Lin, k: int):
        """a - b >= k."""
        return self.le0(add(add(b, a, -1), const(k)))

    def gt(self, a: Lin, b: Lin, k: int):
        """a - b > k."""
        return self.le0(add(add(b, a, -1), const(k + 1)))

    # connectives -----------------------------------------------------------------------
    @staticmethod
    def not_(f):
        if f is True:
            return False
        if f is False:
            return True
        if f is UNK:
            return UNK
        if f[0] == "not":
            return f[1]
        if f[0] == "le":  # not (e <= 0)  ==  -e + 1 <= 0
            return ("le", 1 - f[1], tuple((v, -c) for v, c in f[2]))
        return ("not", f)

    @staticmethod
    def _fold(ops: Iterable, tag: str, absorbing: bool):
        """Fold a conjunction (tag "and", absorbing False) or a disjunction ("or", True):
        constants simplify, nested same-tag nodes flatten, UNK is contagious."""
        out = []
        unk = False
        for f in ops:
            if f is absorbing:
                return absorbing
            if f is (not absorbing):
                continue
            if f is UNK:
                unk = True
            elif f[0] == tag:
                out.extend(f[1])
            else:
                out.append(f)
        if unk:
            return UNK
        if not out:
            return not absorbing
        return out[0] if len(out) == 1 else (tag, tuple(out))

    @staticmethod
    def and_(ops: Iterable):
        return Builder._fold(ops, "and", False)

    @staticmethod
    def or_(ops: Iterable):
        return Builder._fold(ops, "or", True)

    @staticmethod
    def count(items: list[tuple[object, int]], op: str, n: int):
        """sum(weight for (f, weight) if f) op n."""
        if any(f is UNK for f, _ in items):
            return UNK
        fixed = sum(w for f, w in items if f is True)
        rest = tuple((f, w) for f, w in items if f is not True and f is not False and w)
        if not rest:
            return _compare(fixed, op, n)
        lo, hi = fixed, fixed + sum(w for _, w in rest)
        if op in (">=", ">"):
            m = n if op == ">=" else n + 1
            if lo >= m:
                return True
            if hi < m:
                return False
        elif op in ("<=", "<"):
            m = n if op == "<=" else n - 1
            if hi <= m:
                return True
            if lo > m:
                return False
        return ("count", rest, op, n - fixed)


def _compare(a: int, op: str, b: int) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
            "!=": a != b}[op]


def size(f) -> int:
    """Number of nodes (atoms and connectives) of a formula."""
    if f is True or f is False or f is UNK:
        return 1
    if f[0] in ("and", "or"):
        return 1 + sum(size(o) for o in f[1])
    if f[0] == "not":
        return 1 + size(f[1])
    if f[0] == "count":
        return 1 + sum(size(o) for o, _ in f[1])
    return 1


def variables(f, out: set | None = None) -> set:
    """Every variable an atom of the formula mentions (``bool`` names included)."""
    out = set() if out is None else out
    if f is True or f is False or f is UNK:
        return out
    tag = f[0]
    if tag == "le":
        out.update(v for v, _ in f[2])
    elif tag in ("and", "or"):
        for o in f[1]:
            variables(o, out)
    elif tag == "not":
        variables(f[1], out)
    elif tag == "count":
        for o, _ in f[1]:
            variables(o, out)
    elif tag == "bool":
        out.add(f[1])
    return out


class Z3Lowering:
    """Formulas to Z3 terms (memoised); integer variables are created on first use."""

    def __init__(self, name_of=str, ctx=None):
        import z3  # lazy: z3 (70 ms) only when Z3 is asked

        self.z3 = z3
        self.ctx = ctx
        self.vars: dict = {}
        self.bools: dict = {}
        self.name_of = name_of
        self._memo: dict = {}

    def var(self, v):
        t = self.vars.get(v)
        if t is None:
            t = self.z3.Int(self.name_of(v), self.ctx)
            self.vars[v] = t
        return t

    def boolean(self, name):
        t = self.bools.get(name)
        if t is None:
            t = self.z3.Bool(self.name_of(name), self.ctx)
            self.bools[name] = t
        return t

    def term(self, f):
        z3 = self.z3
        if f is True:
            return z3.BoolVal(True, self.ctx)
        if f is False:
            return z3.BoolVal(False, self.ctx)
        if f is UNK:
            raise ValueError("an undecided grounding placeholder reached the solver")
        key = id(f)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is f:
            return hit[1]
        tag = f[0]
        if tag == "le":
            c, terms = f[1], f[2]
            parts = [self.var(v) if k == 1 else self.var(v) * k for v, k in terms]
            if not parts:
                lhs = z3.IntVal(0, self.ctx)
            else:
                lhs = parts[0] if len(parts) == 1 else z3.Sum(parts)
            t = lhs <= -c
        elif tag == "and":
            t = z3.And([self.term(o) for o in f[1]])
        elif tag == "or":
            t = z3.Or([self.term(o) for o in f[1]])
        elif tag == "not":
            t = z3.Not(self.term(f[1]))
        elif tag == "bool":
            t = self.boolean(f[1])
        elif tag == "count":
            zero = z3.IntVal(0, self.ctx)
            s = z3.Sum([z3.If(self.term(o), z3.IntVal(w, self.ctx), zero) for o, w in f[1]])
            t = {"<": s < f[3], "<=": s <= f[3], ">": s > f[3], ">=": s >= f[3],
                 "==": s == f[3], "!=": s != f[3]}[f[2]]
        else:
            raise ValueError(tag)
        self._memo[key] = (f, t)
        return t


def smtlib(f, name_of=str, out: list | None = None) -> str:
    """The formula as an SMT-LIB term (for the text encoding: build a string, parse once)."""
    buf: list[str] = [] if out is None else out
    _smt(f, name_of, buf)
    return "".join(buf) if out is None else ""


def smt_num(k: int) -> str:
    return str(k) if k >= 0 else f"(- {-k})"


def _smt(f, name_of, buf: list[str]) -> None:
    if f is True:
        buf.append("true")
        return
    if f is False:
        buf.append("false")
        return
    tag = f[0]
    if tag == "le":
        c, terms = f[1], f[2]
        ts = [name_of(v) if k == 1 else f"(* {smt_num(k)} {name_of(v)})" for v, k in terms]
        lhs = "0" if not ts else ts[0] if len(ts) == 1 else "(+ " + " ".join(ts) + ")"
        buf.append(f"(<= {lhs} {smt_num(-c)})")
    elif tag in ("and", "or"):
        buf.append(f"({tag}")
        for o in f[1]:
            buf.append(" ")
            _smt(o, name_of, buf)
        buf.append(")")
    elif tag == "not":
        buf.append("(not ")
        _smt(f[1], name_of, buf)
        buf.append(")")
    elif tag == "bool":
        buf.append(name_of(f[1]))
    elif tag == "count":
        buf.append("(" + {"==": "=", "!=": "distinct"}.get(f[2], f[2]) + " (+ 0")
        for o, w in f[1]:
            buf.append(" (ite ")
            _smt(o, name_of, buf)
            buf.append(f" {w} 0)")
        buf.append(f") {smt_num(f[3])})")
    else:
        raise ValueError(tag)
