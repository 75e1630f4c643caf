"""The first verified repair, always: support put back where a displaced structure held
parts up (:mod:`.repair_support`), the constructive placement (:mod:`.repair_construct`),
an assembly order (the layout's own when it still holds, else one computed), and clingo's
re-verification. What a verification names is moved next time (at most a few rounds)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core.status import Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.cpsat.moved_shapes import kept_yaw
from cellspec.solver.cpsat.repair_construct import apply, construct, instance_of, room_proof
from cellspec.solver.cpsat.repair_support import restore
from cellspec.solver.cpsat.results import Move
from cellspec.solver.cpsat.sequence import order_rule_names, solve_order
from cellspec.solver.instance import build_instance
from cellspec.solver.result import Verdict

ROUNDS = 3  # verification rounds: the parts a failed verification names move next time
RESTORE_SHARE = 0.25  # of the time to the deadline: putting support back (clingo checks)


@dataclasses.dataclass(frozen=True)
class First:
    """A verified repair (``layout`` with its order, ``verdict`` a pass) or why there is none
    (``proof``: every repair is ruled out; else ``reason``)."""

    layout: Layout | None = None
    moves: tuple[Move, ...] = ()
    reordered: bool = False
    verdict: Verdict | None = None
    reason: str | None = None
    proof: str | None = None
    verify_s: float = 0.0  # how long ordering and verifying the layout took (an estimate)

    @property
    def cost(self) -> tuple[int, float]:
        return (len(self.moves), sum(m.l1 for m in self.moves))


def _pos_m(c: tuple[int, ...]) -> tuple[float, float, float]:
    return tuple(float(Fraction(int(v), 10000)) for v in c)  # type: ignore[return-value]


def moves_of(layout: Layout, new: Layout, why: dict[str, list[str]],
             inst0: Any) -> tuple[Move, ...]:
    """The moves from ``layout`` to ``new`` (same parts, centres on the grid)."""
    c_old = np.rint(np.asarray(layout.pos, dtype=np.float64) * 10000).astype(np.int64)
    c_new = np.rint(np.asarray(new.pos, dtype=np.float64) * 10000).astype(np.int64)
    out = []
    for i in np.nonzero((c_old != c_new).any(axis=1))[0].tolist():
        pid = layout.ids[i]
        kept = kept_yaw(inst0, layout, i)
        out.append(Move(part=pid, src=_pos_m(tuple(c_old[i])), dst=_pos_m(tuple(c_new[i])),
                        how="free", why="; ".join(why.get(pid, [])) or "moved with the part "
                        "it rests on (placed anew)", yaw=kept, yaw_kept=kept is not None))
    return tuple(out)


def with_order(cell: Cell, layout: Layout, placed: Layout, left: Callable[[], float]
               ) -> tuple[Layout | None, bool, Verdict | None, str | None]:
    """``placed`` with an assembly order when ``layout`` has one: the layout's own order
    when it holds, else one computed (preferring the layout's ranks); then verified.
    (layout or None, reordered, verdict, reason)."""
    from cellspec.solver.verify import check

    if layout.order is None or not order_rule_names(cell):
        if layout.order is not None:
            placed = placed.with_order(tuple(layout.order))
        return placed, False, check(cell, placed, timeout=left()), None
    # the sequencer's greedy, ranked by the layout's order, gives that order back when it
    # still holds (one clingo check instead of two)
    rank = {pid: k for k, pid in enumerate(layout.order)}
    ost, steps, _, oreason, _ = solve_order(cell, build_instance(cell, placed), left(),
                                            [rank[pid] for pid in layout.ids])
    if ost != Status.OPTIMAL:
        kept_order = placed.with_order(tuple(layout.order))
        v = check(cell, kept_order, timeout=left())
        if v.verdict == Status.PASS:
            return kept_order, False, v, None
        return None, False, None, f"no assembly order for the placement: {oreason}"
    order = tuple(st.part for st in steps)
    out = placed.with_order(order)
    return out, order != tuple(layout.order), check(cell, out, timeout=left()), None


def first_repair(cell: Cell, layout: Layout, before: Verdict, left: Callable[[], float],
                 deadline: float, proofs: bool = True) -> First:
    """Keep what is fine, place the rest, order, verify; see the module docstring.
    ``proofs``: a room bound may prove the repair impossible (not when parts may turn)."""
    orules = set(order_rule_names(cell))
    index = {pid: i for i, pid in enumerate(layout.ids)}
    why: dict[str, list[str]] = {}
    for v in before.violations:
        for p in v.parts:
            why.setdefault(p, []).append(f"{v.rule}({', '.join(v.parts)})")
    inst0 = instance_of(cell, layout)
    proof = room_proof(inst0) if proofs else None
    if proof is not None:  # no room at all: nothing to construct
        return First(proof=proof)
    # a structure that must move anyway, put back under what it held up (support), is the
    # base the placement starts from; what is still named there is placed as usual
    now = time.perf_counter()
    back = restore(cell, layout, before, inst0, now + RESTORE_SHARE * max(0.0, deadline - now))
    base, base_v = (layout, before) if back is None else (back.layout, back.verdict)
    bad = np.zeros(len(layout), dtype=bool)
    for v in base_v.violations:
        if v.rule not in orules:
            bad[[index[p] for p in v.parts]] = True
    inst_b = inst0 if back is None else instance_of(cell, base)
    stack = True
    last = ""
    for _ in range(ROUNDS):
        if time.perf_counter() > deadline:
            break
        con = construct(inst_b, bad, stack=stack, deadline=deadline)
        for tiers, pack in ((1, False), (2, False), (2, True)):  # denser, then a packing
            if con.ok or con.reason is not None:
                break
            con = construct(inst_b, bad, stack=stack, deadline=deadline, tiers=tiers,
                            pack=pack)
        if not con.ok:
            if con.reason is not None:
                return First(reason=con.reason)
            names = ", ".join(layout.ids[i] for i in con.unplaced[:8]) + (
                " ..." if len(con.unplaced) > 8 else "")
            return First(reason=f"the constructive placement found no free position for "
                         f"{len(con.unplaced)} part(s) ({names}) with the "
                         f"{len(con.kept)} part(s) that are fine kept; no bound rules a "
                         "repair out")
        placed = apply(base, con.centres)
        t_ver = time.perf_counter()
        out, reordered, ver, oreason = with_order(cell, layout, placed, left)
        t_ver = time.perf_counter() - t_ver
        if out is None or ver is None:
            last = oreason or "no order"
            stack = False
            continue
        if ver.verdict == Status.PASS:
            return First(layout=out, moves=moves_of(layout, out, why, inst0),
                         reordered=reordered, verdict=ver, verify_s=t_ver)
        if not ver.violations:
            return First(reason=f"the constructive repair does not re-verify: {ver.reason}")
        last = "; ".join(f"{x.rule}({', '.join(x.parts)})" for x in ver.violations[:5])
        named = [index[p] for x in ver.violations if x.rule not in orules for p in x.parts]
        fresh = [i for i in named if not bad[i]]
        if fresh:
            bad[fresh] = True
        else:
            stack = False  # a placed part is named: place without stacking
        for x in ver.violations:
            for p in x.parts:
                why.setdefault(p, []).append(f"{x.rule}({', '.join(x.parts)}) once placed")
    return First(reason=f"the constructive repair does not re-verify: {last}" if last else
                 "the time limit was hit during the constructive repair")
