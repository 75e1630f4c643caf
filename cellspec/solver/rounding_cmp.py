"""Rounding analysis of the attribute comparisons the rules read (``p.top <= 0.10``,
``p.x - q.x <= 0.2``): every binding of distinct parts whose truth differs between the
0.1 mm grid and the layout as written, through the classes of equal values of each
variable (all class combinations when few, a window on the sorted exact values for two
variables when many). Used by :mod:`cellspec.solver.rounding`.
"""

from __future__ import annotations

import bisect
import itertools
import math
from fractions import Fraction

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir
from cellspec.solver.instance import Instance, lin_to_int

MAX_COMBOS = 1_000_000  # value classes of one comparison's variables: beyond, a window
MAX_WINDOW = 5_000_000  # pairs in the windows of a two-variable comparison: beyond, unanalysed


def cmp_notes(inst: Instance, cmps: list[ir.Cmp], exact: np.ndarray, scale: int, limit: int,
               changed: list[str], flipped: list[ir.Cmp], what: str, involved: set[int]
               ) -> list[str]:
    """The attribute comparisons whose truth differs between the grid and ``exact`` (boxes
    ``scale`` times finer than U) for some binding of distinct parts."""
    out: list[str] = []
    for node in cmps:
        found = cmp_flip(inst, node, exact, scale, involved)
        if found is None:
            continue
        flipped.append(node)
        if "comparison" not in changed:
            changed.append("comparison")
        if len(out) < limit:
            if found == ():
                out.append(f"rounding was not analysed for the comparison {_show(node)}: "
                           "too many distinct values")
            else:
                names = ", ".join(f"{v}={inst.ids[p]}" for v, p in found)
                out.append(f"{what} decides the comparison {_show(node)} for {names}")
    return out


def cmp_flip(inst: Instance, node: ir.Cmp, exact: np.ndarray, scale: int, involved: set[int]
              ) -> tuple[tuple[str, int], ...] | None:
    """A binding (var, part) under which ``node`` is true on the grid and false exactly or
    the reverse; ``()`` when there are too many value classes to look; None when none.
    ``involved`` receives every part of every such binding."""
    coefs, const = lin_to_int([(a.attr, c) for a, c in node.expr.terms], node.expr.const)
    vars_ = list(dict.fromkeys(a.var for a, _ in node.expr.terms))
    n = inst.n
    classes = []  # per variable: (grid values, exact values, members) of its value classes
    for v in vars_:
        gv: np.ndarray = np.zeros(n, dtype=object)
        ev: np.ndarray = np.zeros(n, dtype=object)
        for (a, _), k in zip(node.expr.terms, coefs, strict=True):
            if a.var == v:
                gv = gv + k * g.attr_2u(inst.boxes, a.attr).astype(object)
                ev = ev + k * _as_obj(g.attr_2u(exact, a.attr))
        cls: dict[tuple, list[int]] = {}
        for p, key in enumerate(zip(gv.tolist(), ev.tolist(), strict=True)):
            cls.setdefault(key, []).append(p)
        keys = list(cls)
        classes.append((_obj([k[0] for k in keys]), _obj([k[1] for k in keys]),
                        list(cls.values())))
    if math.prod(len(c[2]) for c in classes) > MAX_COMBOS:
        if len(classes) == 2:
            return _pair_window(node, classes, const, scale, vars_, involved, n)
        involved.update(range(n))
        return ()
    gt: np.ndarray = np.full((1,) * len(classes), const, dtype=object)
    et: np.ndarray = np.full((1,) * len(classes), const * scale, dtype=object)
    for d, (gv, ev, _) in enumerate(classes):
        shape = [1] * len(classes)
        shape[d] = len(gv)
        gt = gt + gv.reshape(shape)
        et = et + ev.reshape(shape)
    flips = np.argwhere(_compare(gt, node.op) != _compare(et, node.op))
    found = None
    for idx in flips.tolist():
        parts = _distinct([classes[d][2][c] for d, c in enumerate(idx)])
        if parts is not None:
            for d, c in enumerate(idx):
                involved.update(classes[d][2][c])
            found = found or tuple(zip(vars_, parts, strict=True))
    return found


def _pair_window(node: ir.Cmp, classes: list, const: int, scale: int, vars_: list[str],
                 involved: set[int], n: int) -> tuple[tuple[str, int], ...] | None:
    """``_cmp_flip`` for two variables with many value classes: the grid total G and the
    exact one E differ by at most D (the largest rounding of each side), so their signs
    can differ only where |E| <= D; those pairs are found by a window on the sorted exact
    values of the second variable and decided exactly."""
    (ga, ea, ma), (gb, eb, mb) = classes
    d = max(abs(x * scale - y) for x, y in zip(ga.tolist(), ea.tolist(), strict=True)) + max(
        abs(x * scale - y) for x, y in zip(gb.tolist(), eb.tolist(), strict=True))
    order = sorted(range(len(eb)), key=lambda k: eb[k])
    keys = [eb[k] for k in order]
    c = const * scale
    found = None
    budget = MAX_WINDOW
    for i in range(len(ea)):
        lo = bisect.bisect_left(keys, -c - ea[i] - d)
        hi = bisect.bisect_right(keys, -c - ea[i] + d)
        budget -= hi - lo
        if budget < 0:
            involved.update(range(n))
            return ()
        for k in order[lo:hi]:
            g_ = np.array([const + ga[i] + gb[k]], dtype=object)
            e_ = np.array([c + ea[i] + eb[k]], dtype=object)
            if _compare(g_, node.op)[0] == _compare(e_, node.op)[0]:
                continue
            parts = _distinct([ma[i], mb[k]])
            if parts is not None:
                involved.update(ma[i])
                involved.update(mb[k])
                found = found or tuple(zip(vars_, parts, strict=True))
    return found


def _obj(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _show(node: ir.Cmp) -> str:
    """``node`` as the rules wrote it, near enough: ``p.top - 0.1 <= 0``."""
    terms = " + ".join(f"{'' if c == 1 else f'{float(c):g} * '}{a.var}.{a.attr}"
                       for a, c in node.expr.terms)
    const = float(node.expr.const)
    tail = f" + {const:g}" if const > 0 else f" - {-const:g}" if const < 0 else ""
    return f"{terms}{tail} {node.op} 0"


def _as_obj(a: np.ndarray) -> np.ndarray:
    """Exact values as Python numbers (floats become Fractions: no rounding in the sums)."""
    if a.dtype.kind == "f":
        out = np.empty(len(a), dtype=object)
        out[:] = [Fraction(x) for x in a.tolist()]
        return out
    return a.astype(object)


def _distinct(pools: list[list[int]]) -> tuple[int, ...] | None:
    """One part from each pool, all different (the variables bind distinct parts)."""
    short = [p[: len(pools)] for p in pools]
    for pick in itertools.product(*short):
        if len(set(pick)) == len(pick):
            return pick
    return None


def _compare(v: np.ndarray, op: str) -> np.ndarray:
    """``v op 0`` elementwise, as booleans."""
    out = {"<": v < 0, "<=": v <= 0, ">": v > 0, ">=": v >= 0, "==": v == 0, "!=": v != 0}[op]
    return np.asarray(out, dtype=bool)
