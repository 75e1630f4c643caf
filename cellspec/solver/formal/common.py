"""What the formal checks (robust, explain, lint) share: their defaults, the rules they
decide, a seeded Z3 solver per query, Z3 variable names and the deletion-minimal core."""

from __future__ import annotations

import math
from typing import Any

from cellspec.core import ir, relations
from cellspec.core.errors import CellspecError
from cellspec.core.severity import Severity
from cellspec.dsl.model import Cell, Rule
from cellspec.layout import Layout
from cellspec.solver.checkers import order_rules
from cellspec.solver.smt.backend import seed_z3

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_BINDINGS = 5_000_000
# relations decided by the stability LP, which Z3 does not encode
STABILITY_RELATIONS = relations.names(lambda r: r.lp)
# relations Z3 decides for fixed positions only (robust and lint move the parts)
FIXED_ONLY_RELATIONS = relations.names(lambda r: r.smt and r.moving is not None)


def moving_refusal(rules: list[Rule], what: str) -> str | None:
    """The ``unsupported`` reason naming every rule that ``what`` (a check that moves the
    parts) cannot decide, or None when it decides them all."""
    bad = [r for r in rules if ir.uses_relation(r.body, FIXED_ONLY_RELATIONS)]
    if not bad:
        return None
    named = ", ".join(f"'{r.name}' ({r.source})" for r in bad)
    used = [rel for rel in relations.BUILTINS.values() if rel.name in FIXED_ONLY_RELATIONS
            and any(ir.uses_relation(r.body, {rel.name}) for r in bad)]
    why = "; ".join(f"{rel.name}({', '.join(_ARG_VARS[a] for a in rel.args)}), whose "
                    f"{rel.moving}" for rel in used)
    return (f"unsupported: {what} cannot decide rule {named}: it uses {why} (check the "
            "layout itself with `cellspec check`)")


# how a refusal writes a relation's arguments: reachable(p, r)
_ARG_VARS = {"part": "p", "robot": "r", "zone": "z", "surface_or_part": "s", "length": "d",
             "axis": "a"}


def timeout_ms(timeout: float | None) -> int:
    """A Z3 timeout in milliseconds (0: none); CellspecError for a non-positive one."""
    if timeout is None:
        return 0
    if not (timeout > 0) or not math.isfinite(timeout):
        raise CellspecError("timeout must be a positive number of seconds")
    return max(1, int(timeout * 1000))


def error_rules(cell: Cell, layout: Layout) -> list[Rule]:
    """The error rules the layout is decided by (the order rules only with an order)."""
    return order_rules([r for r in cell.rules if r.severity == Severity.ERROR],
                       layout.order is not None)[0]


def seeded_solver(timeout_ms: int, ctx: Any = None, logic: str | None = "QF_LIA") -> Any:
    """A seeded solver in its own context (a shared context makes results depend on what
    was built before in the same process)."""
    import z3  # lazy: z3 only when a proof runs (the check verb imports formal to validate)

    seed_z3()
    s = z3.SolverFor(logic, ctx=ctx) if logic else z3.Solver(ctx=ctx)
    s.set("random_seed", 0)
    if timeout_ms:
        s.set("timeout", timeout_ms)
    return s


def var_name(v: Any) -> str:
    """The Z3 name of a variable key (a tuple such as ('dx', 3) becomes dx_3)."""
    if isinstance(v, tuple):
        return "_".join(str(x) for x in v)
    return str(v)


def deletion_mus(solver: Any, core: list) -> tuple[list, bool]:
    """Drop each literal in turn if the rest is still unsatisfiable; (core, proved minimal)."""
    import z3  # lazy: z3 only when a proof runs

    keep = list(core)
    k = 0
    while k < len(keep):
        trial = keep[:k] + keep[k + 1:]
        r = solver.check(*trial)
        if r == z3.unsat:
            sub = {c.get_id() for c in solver.unsat_core()}
            keep = [c for c in trial if c.get_id() in sub]
        elif r == z3.sat:
            k += 1
        else:
            return keep, False  # a time limit: what we have, not proved minimal
    return keep, True

