"""Complete assembly sequencing: support and contact order plus grip access, with the
grip axis chosen per part, for the gripper of each part.

The order constraints of the standard rules (``cellspec/rules/physical.cell``) on the
integer instance:

* ``support_order``: supports(p, q), or contact(p, q) with p's bottom lower, puts p
  before q: a precedence edge;
* ``grip_access``: a part placed by the parallel gripper needs one lateral axis a in
  {x, y} with no part placed before it flanking it along a; choosing a puts p before
  every part that flanks it along a (a disjunctive precedence). A vacuum-gripped part
  needs the parts it supports placed after it, which support_order already demands.

Method. Placing a part never makes another part grippable again, so a part that is
available (all its predecessors placed) but cannot be gripped is lost for good. A
fast greedy (Kahn's algorithm, lowest parts first and, among those, the parts with the
most flanking neighbours first) is tried; it is only a heuristic, so every connected
group of parts on which it gets stuck is handed to CP-SAT, which either finds an order
or proves that none exists (a cycle of precedences, or an unsatisfiable core of grip
requirements found with assumption literals). The sequence is re-verified with clingo.

The paper's Algorithm 4 (seed 000, Section III-E) is :func:`greedy_sink`: take sink nodes
of the precedence graph in layout order, add one only if it can be gripped, fail when no
grippable sink node is left.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir
from cellspec.core.severity import Severity
from cellspec.core.status import SolverLimit, Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.checkers import order_rules
from cellspec.solver.cpsat import exact
from cellspec.solver.cpsat.order_graph import order_edges
from cellspec.solver.cpsat.results import PlanResult, Step
from cellspec.solver.instance import Instance, build_instance

DEFAULT_TIME_LIMIT = 10.0
STAGE_RELATIONS = frozenset({"placed_stable"})  # every stage stands: stage_order.reorder
SEED = 1


@dataclass
class OrderProblem:
    """Precedences and grip blockers of an instance (indices into the instance)."""

    n: int
    succ: list[list[int]]  # p -> parts that must come after p
    npred: np.ndarray  # number of predecessors
    block: list[tuple[list[int], list[int]]]  # p -> (flankers along x, flankers along y)
    parallel: np.ndarray  # bool: p is placed by the parallel gripper
    bottom: np.ndarray


def order_problem(inst: Instance, support_order: bool = True,
                  grip_access: bool = True) -> OrderProblem:
    """The precedence graph and the flanking lists of the standard order rules."""
    n = inst.n
    b = inst.boxes
    i, j = g.broad_phase(b, exact.margin(inst, grip_access))
    bi, bj = b[i], b[j]
    succ: list[list[int]] = [[] for _ in range(n)]
    npred = np.zeros(n, dtype=np.int64)
    if support_order:
        con = exact.contact(inst, i, j)  # yawed boxes, cylinders: the exact kernel
        ij = exact.supports(inst, i, j) | (con & (bi[:, 4] < bj[:, 4]))
        ji = exact.supports(inst, j, i) | (con & (bj[:, 4] < bi[:, 4]))
        for a, c in zip(i[ij].tolist(), j[ij].tolist(), strict=True):
            succ[a].append(c)
        for a, c in zip(j[ji].tolist(), i[ji].tolist(), strict=True):
            succ[a].append(c)
        for lst in succ:
            for c in lst:
                npred[c] += 1
    parallel = np.array([gk == "parallel" for gk in inst.grippers], dtype=bool)
    block: list[tuple[list[int], list[int]]] = [([], []) for _ in range(n)]
    if grip_access:
        for k, ax in enumerate("xy"):
            f_ij = exact.flanks(inst, i, j, ax)  # i blocks j (along j's own axis)
            f_ji = exact.flanks(inst, j, i, ax)  # j blocks i
            for q, p in zip(i[f_ij].tolist(), j[f_ij].tolist(), strict=True):
                if parallel[p]:
                    block[p][k].append(q)
            for q, p in zip(j[f_ji].tolist(), i[f_ji].tolist(), strict=True):
                if parallel[p]:
                    block[p][k].append(q)
    return OrderProblem(n, succ, npred, block, parallel, b[:, 4].copy())


def grip_axis(op: OrderProblem, p: int, placed: np.ndarray) -> str | None:
    """The axis a parallel grip of p can use given the placed parts (x preferred), or None."""
    for k, ax in enumerate("xy"):
        if not any(placed[q] for q in op.block[p][k]):
            return ax
    return None


def _greedy(op: OrderProblem, key: list[tuple]) -> tuple[list[int], np.ndarray]:
    """Kahn's algorithm by ``key``; a popped part that cannot be gripped is dead (it never
    becomes grippable again). Returns the placed parts in order and the dead mask."""
    placed = np.zeros(op.n, dtype=bool)
    dead = np.zeros(op.n, dtype=bool)
    npred = op.npred.copy()
    heap = [(key[p], p) for p in range(op.n) if npred[p] == 0]
    heapq.heapify(heap)
    out: list[int] = []
    while heap:
        _, p = heapq.heappop(heap)
        if op.parallel[p] and grip_axis(op, p, placed) is None:
            dead[p] = True
            continue
        placed[p] = True
        out.append(p)
        for c in op.succ[p]:
            npred[c] -= 1
            if npred[c] == 0:
                heapq.heappush(heap, (key[c], c))
    return out, dead


def greedy_sink(op: OrderProblem) -> list[int] | None:
    """The paper's Algorithm 4: sink nodes in layout order, each added only if grippable;
    None when it gets stuck."""
    out, _ = _greedy(op, [(p,) for p in range(op.n)])
    return out if len(out) == op.n else None


def _components(op: OrderProblem) -> np.ndarray:
    from cellspec.solver.graph import components

    return components(op.n, *order_edges(op))


def _cycle(op: OrderProblem, part: list[int]) -> list[int] | None:
    """A precedence cycle among ``part``, if there is one."""
    sub = set(part)
    npred = {p: 0 for p in part}
    for p in part:
        for c in op.succ[p]:
            if c in sub:
                npred[c] += 1
    stack = [p for p in part if npred[p] == 0]
    seen = 0
    while stack:
        p = stack.pop()
        seen += 1
        for c in op.succ[p]:
            if c in sub:
                npred[c] -= 1
                if npred[c] == 0:
                    stack.append(c)
    if seen == len(part):
        return None
    left = {p for p in part if npred[p] > 0}
    p = min(left)
    path: list[int] = []
    pos: dict[int, int] = {}
    while p not in pos:  # every remaining part has a remaining predecessor: walk forward
        pos[p] = len(path)
        path.append(p)
        p = next(c for c in op.succ[p] if c in left)
    return path[pos[p]:]


def _cpsat(op: OrderProblem, part: list[int], time_limit: float, prefer: list[int]
           ) -> tuple[str, list[int], list[int]]:
    """Order one connected group with CP-SAT: ("found", order, []), ("infeasible", [],
    core parts) or ("unknown", [], [])."""
    from ortools.sat.python import cp_model

    def build(with_assumptions: bool):
        m = cp_model.CpModel()
        sub = set(part)
        size = len(part)
        rank = {p: m.new_int_var(0, size - 1, f"r{p}") for p in part}
        lits = {}
        for p in part:
            for c in op.succ[p]:
                if c in sub:
                    m.add(rank[p] + 1 <= rank[c])
        for p in part:
            if not op.parallel[p] or not (op.block[p][0] or op.block[p][1]):
                continue
            ax = m.new_bool_var(f"ax{p}")
            guard = []
            if with_assumptions:
                lit = m.new_bool_var(f"grip{p}")
                lits[lit.Index()] = p
                guard = [lit]
            for q in op.block[p][0]:
                m.add(rank[p] + 1 <= rank[q]).OnlyEnforceIf([ax, *guard])
            for q in op.block[p][1]:
                m.add(rank[p] + 1 <= rank[q]).OnlyEnforceIf([ax.Not(), *guard])
            if with_assumptions:
                m.add_assumptions([guard[0]])
        for p in part:
            m.add_hint(rank[p], min(prefer[p], size - 1))
        return m, rank, lits

    m, rank, _ = build(False)
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = time_limit
    s.parameters.num_workers = 1
    s.parameters.random_seed = SEED
    st = s.Solve(m)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return "found", sorted(part, key=lambda p: (s.Value(rank[p]), p)), []
    if st != cp_model.INFEASIBLE:
        return Status.UNKNOWN, [], []
    m, rank, lits = build(True)
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = time_limit
    s.parameters.num_workers = 1
    s.parameters.random_seed = SEED
    st = s.Solve(m)
    core = []
    if st == cp_model.INFEASIBLE:
        core = sorted(lits[i] for i in s.SufficientAssumptionsForInfeasibility() if i in lits)
    return Status.INFEASIBLE, [], core


def order_rule_names(cell: Cell) -> tuple[str, ...]:
    """The cell's rules that talk about the placement order (checkers.order_rules)."""
    return tuple(order_rules(cell.rules, has_order=False)[1])


def solve_order(cell: Cell, inst: Instance, time_limit: float = DEFAULT_TIME_LIMIT,
                prefer: list[int] | None = None) -> tuple[str, list[Step], str, str | None,
                                                          tuple[str, ...]]:
    """(status, steps, method, reason, conflict parts) for the instance's geometry.

    ``prefer`` ranks parts (e.g. a previous order) for the greedy and as CP-SAT hints. A
    solver limit inside the search (a stage's stability LP undecided, ...) is ``unknown``
    with its reason, for every caller (plan, repair); the broad phase's density limit
    (TooDense) is raised, for the caller's own message."""
    try:
        return _solve_order(cell, inst, time_limit, prefer)
    except g.TooDense:
        raise
    except SolverLimit as exc:
        said = str(exc)
        return (Status.UNKNOWN, [], "none",
                said if said.startswith(str(exc.reason)) else f"{exc.reason}: {said}", ())


def _solve_order(cell: Cell, inst: Instance, time_limit: float,
                 prefer: list[int] | None) -> tuple[str, list[Step], str, str | None,
                                                    tuple[str, ...]]:
    """:func:`solve_order` without the limit handling."""
    t_start = time.perf_counter()
    names = {r.name for r in cell.rules}
    op = order_problem(inst, "support_order" in names, "grip_access" in names)
    key: list[tuple[int, ...]]  # the greedy's order: (bottom, -blockers, part) or (rank, part)
    if prefer is None:
        nb = [len(op.block[p][0]) + len(op.block[p][1]) for p in range(op.n)]
        key = [(int(op.bottom[p]), -nb[p], p) for p in range(op.n)]
        prefer_rank = list(range(op.n))
    else:
        key = [(prefer[p], p) for p in range(op.n)]
        prefer_rank = prefer
    out, dead = _greedy(op, key)
    method = "greedy"
    if len(out) < op.n:
        labels = _components(op)
        bad = np.unique(labels[~np.isin(np.arange(op.n), out)])
        badset = set(bad.tolist())
        out = [p for p in out if labels[p] not in badset]
        method = "greedy+cp-sat"
        deadline = time.perf_counter() + time_limit
        for comp in bad.tolist():
            part = np.nonzero(labels == comp)[0].tolist()
            cyc = _cycle(op, part)
            if cyc is not None:
                names_c = [inst.ids[p] for p in cyc]
                why = " before ".join([*names_c, names_c[0]])
                return (Status.INFEASIBLE, [], method, "the support and contact order has a "
                        f"cycle: {why}", tuple(names_c))
            local = {p: r for r, p in enumerate(sorted(part, key=lambda p: prefer_rank[p]))}
            left = max(0.1, deadline - time.perf_counter())
            st, order, core = _cpsat(op, part, left, [local.get(p, 0) for p in range(op.n)])
            if st == Status.UNKNOWN:
                return (Status.UNKNOWN, [], method, f"time limit ({time_limit:g} s) hit while "
                        f"ordering a group of {len(part)} parts", ())
            if st == Status.INFEASIBLE:
                shown = core or part
                ids = [inst.ids[p] for p in shown]
                more = f" and {len(ids) - 12} more" if len(ids) > 12 else ""
                return (Status.INFEASIBLE, [], method, "no placement order lets every part be "
                        "gripped: these parts cannot all get a free grip axis (or top) when "
                        f"placed: {', '.join(ids[:12])}{more}", tuple(ids))
            out.extend(order)
    if any(ir.uses_relation(r.body, STAGE_RELATIONS) for r in cell.rules):
        from cellspec.solver.cpsat.stage_order import reorder

        t_left = max(0.1, time_limit - (time.perf_counter() - t_start))
        st, new, reason, conflict = reorder(inst, op, out, t_left)
        if st != Status.OPTIMAL:
            return st, [], method + "+stages", reason, conflict
        if new != out:
            method, out = method + "+stages", new
    placed = np.zeros(op.n, dtype=bool)
    steps = []
    for p in out:
        if op.parallel[p]:
            ax = grip_axis(op, p, placed)
            assert ax is not None, "internal: a sequenced part cannot be gripped"
            steps.append(Step(part=inst.ids[p], gripper="parallel", axis=ax))  # type: ignore
        else:
            steps.append(Step(part=inst.ids[p], gripper="vacuum"))
        placed[p] = True
    return Status.OPTIMAL, steps, method, None, ()


def plan(cell: Cell, layout: Layout, *, time_limit: float = DEFAULT_TIME_LIMIT,
         verify: bool = True) -> PlanResult:
    """A complete assembly sequence for the layout, or a proof that none exists.

    The layout's own ``order`` (if any) is ignored. A found sequence is re-verified with
    clingo (``verify=False`` skips that, for benchmarks only, and then no verdict exists:
    the result is ``unknown``)."""
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    inst = build_instance(cell, layout)
    orules = order_rule_names(cell)
    try:
        st, steps, method, reason, conflict = solve_order(cell, inst, time_limit)
    except g.TooDense as exc:  # a size limit, like check's: unknown, never an internal error
        return PlanResult(status=Status.UNKNOWN, method="none", order_rules=orules,
                          reason=f"the layout has more than {exc.limit} pairs of parts in "
                          "contact range: far denser than a buildable cell (many parts at "
                          "the same place?)", seconds=time.perf_counter() - t0)
    if st != Status.OPTIMAL:
        return PlanResult(status=st, method=method, reason=reason, conflict=conflict,  # type: ignore[arg-type]
                          order_rules=orules, seconds=time.perf_counter() - t0)
    if not verify:
        return PlanResult(status=Status.UNKNOWN, method=method, order_rules=orules,
                          reason="found but not re-verified (verify=False)",
                          seconds=time.perf_counter() - t0)
    v = check(cell, layout.with_order(tuple(s.part for s in steps)), timeout=time_limit)
    if v.verdict == Status.UNKNOWN:
        return PlanResult(status=Status.UNKNOWN, method=method, order_rules=orules,
                          reason=f"re-verification hit a limit: {v.reason}",
                          seconds=time.perf_counter() - t0)
    stand = {r.name for r in cell.rules if r.severity == Severity.ERROR
             and ir.uses_relation(r.body, frozenset({"stable"}))}
    fallen = [x for x in v.violations if x.rule in stand]
    if fallen:  # the last stage of every order is the whole layout: no order stands
        shown = ", ".join(f"{x.rule}({', '.join(x.parts)})" for x in fallen[:8])
        more = f" and {len(fallen) - 8} more" if len(fallen) > 8 else ""
        why = (f"the finished layout cannot stand ({shown}{more}): the last stage of every "
               "order is the whole layout, so no order stands; see `cellspec repair`")
        return PlanResult(status=Status.INFEASIBLE, method=method,
                          order_rules=orules, reason=why,
                          conflict=tuple(dict.fromkeys(p for x in fallen for p in x.parts)),
                          unstable=True, seconds=time.perf_counter() - t0)
    bad = sorted({x.rule for x in v.violations if x.rule in orules})
    if bad:
        return PlanResult(status=Status.UNKNOWN, method=method, order_rules=orules,
                          reason="the order satisfies support_order and grip_access but the "
                          f"cell's order rule(s) {', '.join(bad)} still fail: the sequencer "
                          "does not encode them", seconds=time.perf_counter() - t0)
    return PlanResult(status=Status.OPTIMAL, steps=tuple(steps), method=method, verdict=v,
                      order_rules=orules, seconds=time.perf_counter() - t0)
