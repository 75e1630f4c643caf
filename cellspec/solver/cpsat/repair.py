"""Minimal-change repair on the integer grid with CP-SAT: the public entry point.

A repair always starts from a verified layout built in one pass (:mod:`.repair_first`:
keep what is fine, place the rest at the nearest free position, order, verify with
clingo), usually in well under a second. The cluster pipeline (:mod:`.repair_pipeline`,
whose docstring gives the model and the objective) then improves on it while the time
limit allows, hinted with that layout; the best verified layout is returned: ``optimal``
when the pipeline proves its answer minimal and nothing found is better, else
``feasible``. ``infeasible`` is said only with a proof over the whole problem (a room
bound, or the monolithic model's core)."""

from __future__ import annotations

import time
from collections.abc import Callable

from cellspec.core.status import Status
from cellspec.dsl.model import BoxZone, Cell, HalfSpaceZone, Zone
from cellspec.layout import Layout, layout_from_obj
from cellspec.solver.cpsat.blocked import parse_blocked, with_blocked
from cellspec.solver.cpsat.repair_first import First, first_repair
from cellspec.solver.cpsat.repair_lns import improve
from cellspec.solver.cpsat.repair_pipeline import (
    DEFAULT_TIME_LIMIT,
    LOOP_RULES,
    pipeline,
)
from cellspec.solver.cpsat.results import RepairResult
from cellspec.solver.cpsat.rotate import parse_rotate
from cellspec.solver.result import Verdict

ROOM_RULES = ("workspace", "no_overlap", "gravity")
PIPELINE_SHARE = 0.6  # of the time after the constructive repair; the rest: neighbourhoods
PIPELINE_MIN_S = 1.0  # the least budget the pipeline runs with, once a repair is in hand
LNS_MIN_S = 1.0  # the least time left for neighbourhood search (its first solve may have
# to import CP-SAT, ~0.5 s with pandas, which no limit can stop)
LNS_PARTS = 300  # larger layouts: the pipeline alone improves (a verification costs ~1 s)


def repair(cell: Cell, layout: Layout, *,
           time_limit: float = DEFAULT_TIME_LIMIT,
           blocked: tuple[Zone, ...] | list[Zone] = (), workers: int = 1,
           keep_shape: bool = False, decompose: bool = True,
           progress: Callable[[str], None] | None = None,
           checked: Verdict | None = None,
           allow_rotate: tuple[float, ...] = ()) -> RepairResult:
    """The nearest layout that satisfies every error rule (fewest parts moved, then fewest
    free moves, then least L1; see :func:`.repair_pipeline.pipeline` for the options):
    the constructive first repair, then the pipeline's improvement within ``time_limit``
    (the whole call); the better verified layout is returned."""
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    cell = with_blocked(cell, blocked)
    before = checked if checked is not None and not blocked else \
        check(cell, layout, timeout=time_limit)
    kw = dict(workers=workers, keep_shape=keep_shape, decompose=decompose,
              progress=progress, allow_rotate=allow_rotate)
    if before.verdict != Status.FAIL:  # valid already, or unknown: the pipeline says so
        r0 = pipeline(cell, layout, time_limit=time_limit, checked=before, **kw)  # type: ignore
        return r0.model_copy(update={"seconds": time.perf_counter() - t0})
    reserve = min(0.2, 0.15 * time_limit)

    def left() -> float:
        return max(0.05, time_limit - reserve - (time.perf_counter() - t0))

    # the first verified repair is worth more than the limit's last half second: it may
    # run to min(2 x limit, limit + 0.5 s) (the CLI's start-up leaves a short limit here)
    first_end = t0 + max(time_limit - reserve, min(2 * time_limit, time_limit + 0.5))
    first = first_repair(cell, layout, before,
                         lambda: max(0.05, first_end - time.perf_counter()), first_end,
                         proofs=not allow_rotate)
    t_first = time.perf_counter() - t0
    if progress is not None:
        progress(f"repair {t_first:6.2f} s: constructive repair: " + (
            f"{len(first.moves)} part(s) moved, verified" if first.layout is not None else
            (first.proof or first.reason or "none")))
    if first.proof is not None:
        return RepairResult(status=Status.INFEASIBLE, before=before, seconds=t_first,
                            conflict=ROOM_RULES, reason="no placement of these parts "
                            f"satisfies the rules together: {first.proof}")
    hint = None
    if first.layout is not None and decompose:  # the monolithic model: small, no hint
        at = {pid: i for i, pid in enumerate(layout.ids)}
        hint = {at[m.part]: tuple(int(round(v * 10000)) for v in m.dst) for m in first.moves}
    spent = time.perf_counter() - t0
    r: RepairResult | None = None
    lns = (first.layout is not None and not keep_shape and not allow_rotate
           and len(layout) <= LNS_PARTS)
    budget = (PIPELINE_SHARE if lns else 1.0) * (time_limit - spent)
    # building the pipeline's models is not bounded by its limit (a 4-part cluster took
    # 0.4 s past a 0.3 s budget on the loaded machine): with a constructive repair in hand,
    # it runs only when it has a second and twice what the constructive repair took
    if budget > reserve + 0.05 and (first.layout is None
                                    or budget >= max(PIPELINE_MIN_S, 2 * t_first)):
        r = pipeline(cell, layout, time_limit=budget, checked=before, start_hint=hint,
                     **kw)  # type: ignore[arg-type]
    res = _better(first, r, before, t_first, time.perf_counter() - t0, keep_shape)
    if not lns or res.status != Status.FEASIBLE or res.layout is None or left() < LNS_MIN_S:
        return res
    cur = first if res.moves == first.moves else First(
        layout=layout_from_obj(res.layout), moves=res.moves, reordered=res.reordered,
        verdict=res.verdict, verify_s=first.verify_s)
    why: dict[str, list[str]] = {}
    for v in before.violations:
        for p in v.parts:
            why.setdefault(p, []).append(f"{v.rule}({', '.join(v.parts)})")
    got = improve(cell, layout, cur, why, t0 + time_limit - reserve, left, workers)
    if got is cur:
        return res.model_copy(update={"seconds": time.perf_counter() - t0})
    if progress is not None:
        progress(f"repair {time.perf_counter() - t0:6.2f} s: improved by neighbourhoods: "
                 f"{len(got.moves)} part(s) moved")
    assert got.layout is not None
    return RepairResult(status=Status.FEASIBLE, before=before,
                        seconds=time.perf_counter() - t0, layout=got.layout.to_json(),
                        moves=got.moves, reordered=got.reordered, verdict=got.verdict,
                        first_seconds=res.first_seconds)




def _better(first: First, r: RepairResult | None, before: Verdict, t_first: float,
            seconds: float, keep_shape: bool) -> RepairResult:
    """The pipeline's answer when it is at least as good as the constructive one (the
    pipeline's objective: parts moved, free moves, L1; keep_shape: free moves first), else
    the constructive one (``feasible``)."""
    ok = r is not None and r.status in (Status.OPTIMAL, Status.FEASIBLE)
    if first.layout is None:
        if r is None:
            return RepairResult(status=Status.UNKNOWN, before=before, seconds=seconds,
                                reason=first.reason or "no time left to repair")
        if not ok and r.status == Status.UNKNOWN:
            return r.model_copy(update={"seconds": seconds, "reason": f"{r.reason}; "
                                        f"constructive repair: {first.reason}"})
        return r.model_copy(update={"seconds": seconds})
    assert first.verdict is not None
    def key(moves: tuple, keep_shape: bool) -> tuple[int, int, float]:
        free = sum(m.how == "free" for m in moves)
        n, l1 = len(moves), round(sum(m.l1 for m in moves), 6)
        return (free, n, l1) if keep_shape else (n, free, l1)

    if ok and r is not None and key(r.moves, keep_shape) <= key(first.moves, keep_shape):
        return r.model_copy(update={"seconds": seconds,
                                    "first_seconds": min(t_first, r.first_seconds or seconds)})
    return RepairResult(status=Status.FEASIBLE, before=before, seconds=seconds,
                        layout=first.layout.to_json(), moves=first.moves,
                        reordered=first.reordered, verdict=first.verdict,
                        first_seconds=t_first)


__all__ = ["repair", "with_blocked", "parse_blocked", "parse_rotate", "BoxZone",
           "HalfSpaceZone", "DEFAULT_TIME_LIMIT", "LOOP_RULES"]
