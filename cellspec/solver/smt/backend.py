"""The Z3 backend: the same small interface as the clingo backend (lazy import,
``supported()``, declared features, a clear error for what it cannot encode).

Three ways to look at the parts' boxes (all in U = 0.05 mm, like every backend):

- ``fixed_problem``: the layout as given (constants); the solver then only decides
  presence literals (explain) or nothing at all (differential checks).
- ``displaced_problem``: every part moves by integer grid steps ``dx, dy`` in
  ``[-t, t]`` (one step = 0.1 mm, the resolution every verdict is decided at); its
  z is unchanged (see ``cellspec/solver/formal/robust.py`` for why that is the settled z).
- ``free_problem``: every part's centre is an integer variable (lint).
"""

from __future__ import annotations

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir, relations
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.status import InternalError, Reason, SolverLimit
from cellspec.dsl.model import Rule
from cellspec.solver.instance import Instance
from cellspec.solver.smt.formula import Builder, Z3Lowering, const, lin, smtlib
from cellspec.solver.smt.ground import Grounder, NotInFragment, Problem, cell_fields, pair_margin
from cellspec.solver.smt.shapes import LinShapes, NotLinear, lin_shapes

# the relations this backend encodes (geometry.py semantics); anything else, e.g. a
# relation computed by another solver such as stable(p), is refused by name
RELATIONS = relations.names(lambda r: r.smt)
FEATURES = frozenset({"forall", "exists", "count", "linear arithmetic", "type", "gripper",
                      *RELATIONS})


class Z3Unknown(SolverLimit):
    """Z3 gave up (a time limit): the verdict is ``unknown``, never ``pass``."""

    reason = Reason.TIME_LIMIT


def seed_z3() -> None:
    """Deterministic Z3: fixed seeds, no randomised restarts that depend on time."""
    import z3  # lazy: z3 (70 ms) only when Z3 is asked

    z3.set_param("smt.random_seed", 0)
    z3.set_param("sat.random_seed", 0)
    z3.set_param("nlsat.seed", 0)


def _encodes(name: str) -> bool:
    """Z3 encodes the relation (read from the table at call time, like RELATIONS)."""
    r = relations.BUILTINS.get(name)
    return r is not None and r.smt


def check_fragment(rules: tuple[Rule, ...] | list[Rule]) -> None:
    """Raise CellspecError at the rule's source for anything outside the Z3 fragment."""
    diags = []
    for r in rules:
        for n in ir.walk(r.body):
            if isinstance(n, ir.Rel) and not _encodes(n.name):
                diags.append(Diagnostic(r.source.file, r.source.line, r.source.col,
                                        f"not supported by the Z3 backend: rule '{r.name}' "
                                        f"uses relation {n.name}"))
            elif not isinstance(n, ir.BoolConst | ir.Cmp | ir.SymEq | ir.Rel | ir.Not | ir.And
                                | ir.Or | ir.Quant | ir.CountCmp):
                diags.append(Diagnostic(r.source.file, r.source.line, r.source.col,
                                        f"not supported by the Z3 backend: rule '{r.name}' "
                                        f"uses {type(n).__name__}"))
    if diags:
        raise CellspecError(diags)


def _before_fixed(inst: Instance):
    op = inst.order_pos

    def before(i: int, j: int):
        if op is None:
            raise NotInFragment("before() needs an order")
        return bool(op[i] < op[j])

    return before


def _neighbours(boxes: np.ndarray, margin: int, columns: bool) -> list[set]:
    n = len(boxes)
    nb: list[set] = [set() for _ in range(n)]
    for cols in ((False, True) if columns else (False,)):
        i, j = g.broad_phase(boxes, margin, columns=cols)
        for a, c in zip(i.tolist(), j.tolist(), strict=True):
            nb[a].add(c)
            nb[c].add(a)
    return nb


def _uses_above(rules) -> bool:
    return any(ir.uses_relation(r.body, ir.COLUMN_RELATIONS) for r in rules)


def _boxes(inst: Instance) -> np.ndarray:
    """The boxes the relations read: the parts', or the kernel's enclosing boxes of shapes."""
    return np.asarray(inst.kernel().boxes, dtype=np.int64)


def _margin(inst: Instance, rules, boxes: np.ndarray) -> int:
    """The broad-phase margin; a yawed part's own size is smaller than its enclosing box's,
    so the fingers of a grip along its own axis may reach further (shapes.flanks_margin)."""
    m = pair_margin(rules, boxes, inst.eps, inst.opening, inst.depth)
    if any(ir.uses_relation(r.body, {"flanks"}) for r in rules):
        m = max(m, inst.kernel().flanks_margin(inst.eps, inst.opening, inst.depth) + 1)
    return m


def _shapes(inst: Instance, moving: bool) -> LinShapes:
    """The parts' shapes as the encoding reads them (plain boxes at yaw 0 when every part
    is one: the kernel's ``as_shapes``), each centre moving with the part when ``moving``."""
    return lin_shapes(inst.kernel().as_shapes(), inst.ids, moving)


def fixed_problem(inst: Instance, rules, prune: bool = True, presence: bool = False) -> Problem:
    boxes = _boxes(inst)
    corners = [[const(int(v)) for v in row] for row in boxes.tolist()]
    nb = None
    if prune and inst.n:
        nb = _neighbours(boxes, _margin(inst, rules, boxes), _uses_above(rules))
    return Problem(n=inst.n, corners=corners, types=inst.types, grippers=inst.grippers,
                   before=_before_fixed(inst), neighbours=nb, presence=presence,
                   shapes=_shapes(inst, False), **cell_fields(inst))


def displaced_problem(inst: Instance, rules, steps: int, prune: bool = True
                      ) -> tuple[Problem, dict]:
    """Parts displaced by ``dx, dy`` in [-steps, steps] grid steps (2 U each); bounds dict."""
    corners = []
    bounds: dict = {}
    boxes = _boxes(inst)
    for i, row in enumerate(boxes.tolist()):
        dx, dy = ("dx", i), ("dy", i)
        bounds[dx] = (-steps, steps)
        bounds[dy] = (-steps, steps)
        corners.append([lin(row[0], (dx, 2)), lin(row[1], (dx, 2)), lin(row[2], (dy, 2)),
                        lin(row[3], (dy, 2)), const(row[4]), const(row[5])])
    nb = None
    if prune and inst.n:
        # a pair's overlap on x or y changes by at most 4 * steps U (shapes move rigidly)
        m = _margin(inst, rules, boxes) + 4 * steps
        nb = _neighbours(boxes, m, _uses_above(rules))
    prob = Problem(n=inst.n, corners=corners, types=inst.types, grippers=inst.grippers,
                   before=_before_fixed(inst), neighbours=nb, shapes=_shapes(inst, True),
                   **cell_fields(inst))
    return prob, bounds


class Unsupported(SolverLimit):
    """A rule this encoding cannot decide for these shapes (a cylinder that may move): the
    answer is ``unknown`` (``unsupported``), naming the rule, never a silent pass."""

    reason = Reason.UNSUPPORTED


def ground_rules(prob: Problem, rules, builder: Builder, max_bindings: int
                 ) -> list[list[tuple[tuple, object]]]:
    """For each rule, its [(binding, holds-formula)] (constant-True instances dropped)."""
    gr = Grounder(prob, builder, max_bindings)
    out = []
    for r in rules:
        try:
            out.append(gr.instances(r))
        except NotLinear as exc:
            raise Unsupported(f"unsupported: rule '{r.name}' ({r.source}): {exc}") from None
        except NotInFragment as exc:
            raise CellspecError(Diagnostic(r.source.file, r.source.line, r.source.col,
                                           f"not supported by the Z3 backend: rule "
                                           f"'{r.name}': {exc}")) from None
    return out


def smt_violations(inst: Instance, rules, prune: bool = True, max_bindings: int = 20_000_000,
                   encoding: str = "smtlib", timeout: float | None = None
                   ) -> list[tuple[int, tuple]]:
    """The violation set of a fixed layout decided by Z3 (the differential-test entry).

    Each rule instance's formula gets a Boolean ``h_k`` with ``h_k = formula`` asserted;
    the model gives every instance's truth value. With ``prune=False`` nothing is
    decided in Python (no folding, every binding enumerated): Z3 evaluates every
    relation atom. ``encoding``: ``smtlib`` (one text, parsed once) or ``api``. Z3 giving up
    within ``timeout`` seconds raises :class:`Z3Unknown`."""
    import z3  # lazy: z3 (70 ms) only when Z3 is asked

    seed_z3()
    rules = tuple(rules)
    check_fragment(rules)
    prob = fixed_problem(inst, rules, prune=prune)
    builder = Builder({}) if prune else NoFold()
    inst_f = ground_rules(prob, rules, builder, max_bindings)
    flat = [(k, b, f) for k, lst in enumerate(inst_f) for b, f in lst]
    ctx = z3.Context()
    solver = z3.Solver(ctx=ctx)
    if timeout is not None:
        solver.set("timeout", max(1, int(timeout * 1000)))
    if encoding == "api":
        low = Z3Lowering(str, ctx)
        hs = [z3.Bool(f"h_{n}", ctx) for n in range(len(flat))]
        for h, (_, _, f) in zip(hs, flat, strict=True):
            solver.add(h == low.term(f))
    else:
        buf: list[str] = []
        for n, (_, _, f) in enumerate(flat):
            buf.append(f"(declare-const h_{n} Bool)\n(assert (= h_{n} ")
            smtlib(f, str, buf)
            buf.append("))\n")
        solver.from_string("".join(buf))
        hs = [z3.Bool(f"h_{n}", ctx) for n in range(len(flat))]
    res = solver.check()
    if res == z3.unknown:
        raise Z3Unknown(f"z3 gave up: {solver.reason_unknown()} (time limit {timeout} s)")
    if res != z3.sat:  # pragma: no cover - definitions only: always sat
        raise InternalError("z3: instance definitions not satisfiable (internal error)")
    m = solver.model()
    out = [(k, b) for h, (k, b, _) in zip(hs, flat, strict=True)
           if z3.is_false(m.eval(h, model_completion=True))]
    return sorted(out)


class NoFold(Builder):
    """The naive encoding: no atom is decided in Python (constants stay symbolic)."""

    def le0(self, e):
        self.atoms += 1
        return ("le", e[0], e[1])
