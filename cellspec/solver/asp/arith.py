"""Comparisons as exact ASP integer arithmetic: attributes are read twice over (2U, so
centres stay integers) from box/7 variables, coefficients scaled to integers
(:func:`cellspec.solver.instance.lin_to_int`), and clingo's 32-bit range checked."""

from __future__ import annotations

from collections.abc import Callable

from cellspec.core import geometry as g
from cellspec.core import ir
from cellspec.core.status import Reason, SolverLimit
from cellspec.solver.instance import lin_to_int


class TooWide(SolverLimit):
    """A comparison whose integer form could leave clingo's 32-bit range (says why)."""

    reason = Reason.UNSUPPORTED


def cmp_text(c: ir.Cmp, var: Callable[[str], str]) -> str:
    """``sum k*attr op rhs`` over the box/7 variables of ``var(name)``."""
    coefs, const = lin_to_int([(a.attr, k) for a, k in c.expr.terms], c.expr.const)
    # clingo integers are 32-bit: every attribute (2U) is at most 4*MAX_ABS_COORD/U
    bound = sum(abs(k) for k in coefs) * 4 * int(g.MAX_ABS_COORD_M * g.U_PER_M) + abs(const)
    if bound >= 2**31:
        ks = [abs(k) for _, k in c.expr.terms]
        if abs(c.expr.const) > g.MAX_ABS_COORD_M * max(1, sum(ks)) or max(ks, default=0) \
                > 10_000:  # a huge number, not a fine decimal: say so
            raise TooWide("the comparison's constants are too large for exact 32-bit integer "
                          "arithmetic on the 0.05 mm grid (coordinates stay within "
                          f"{g.MAX_ABS_COORD_M:g} m)")
        raise TooWide("the comparison's constants are too fine for exact 32-bit integer "
                      "arithmetic on the 0.05 mm grid (use coarser decimals, e.g. 0.5 rather "
                      "than 0.333333)")
    terms = []
    for (a, _), k in zip(c.expr.terms, coefs, strict=True):
        terms.append(f"{k}*({attr_text(a, var)})")
    lhs = " + ".join(terms) if terms else "0"
    op = {"==": "=", "!=": "!="}.get(c.op, c.op)
    return f"{lhs} {op} {-const}"


def attr_text(a: ir.Attr, var: Callable[[str], str]) -> str:
    """An attribute (2U) as an expression over its part's box/7 variables."""
    V = var(a.var)
    at = a.attr
    if at in ("x", "y", "z"):
        A = at.upper()
        return f"{V}_{A}0+{V}_{A}1"
    if at.startswith("size."):
        A = at[-1].upper()
        return f"2*({V}_{A}1-{V}_{A}0)"
    col = {"top": "Z1", "zmax": "Z1", "bottom": "Z0", "zmin": "Z0", "xmin": "X0",
           "xmax": "X1", "ymin": "Y0", "ymax": "Y1"}[at]
    return f"2*{V}_{col}"
