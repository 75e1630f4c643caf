"""Orders in which every stage of construction stands (the rule ``stability_stages``).

The sequencer first finds an order that satisfies support order and grip access. When
some stage of it falls (a part placed overhanging before what balances it), each group
of parts whose order matters together (a structure plus everything tied to it by
precedence or grip blocking) is re-ordered by a depth-first search over the placed
sets: a part can be placed when its predecessors are down, it can be gripped, and the
structure it joins stands with the cell's margin (``stability.stands``). Dead placed-sets
are memoised, so the search is complete for the groups it finishes: it either finds an
order or proves that none exists, naming the parts that cannot be placed at the deepest
dead end and why. A node or time limit yields ``unknown``.
"""

from __future__ import annotations

import time

import numpy as np

from cellspec.core.status import Status
from cellspec.solver import stability as stab
from cellspec.solver.cpsat.order_graph import order_edges
from cellspec.solver.graph import components

NODE_LIMIT = 200_000


def _groups(op, con: stab.Contacts, parts: list[int]) -> dict[int, list[int]]:  # noqa: ANN001
    """Parts joined by precedence, grip blocking or contact: each a separate search."""
    rows, cols = order_edges(op)
    keep = con.lower >= 0
    rows += con.lower[keep].tolist()
    cols += con.upper[keep].tolist()
    lab = components(op.n, rows, cols)
    out: dict[int, list[int]] = {}
    for p in parts:
        out.setdefault(int(lab[p]), [])
    for p in range(op.n):
        if int(lab[p]) in out:
            out[int(lab[p])].append(p)
    return out


def reorder(inst, op, order: list[int], time_limit: float  # noqa: ANN001
            ) -> tuple[Status, list[int], str | None, tuple[str, ...]]:
    """(status, order, reason, conflict ids): ``order`` re-arranged so that every stage
    stands; "infeasible" when no order can, "unknown" at a limit."""
    st = stab.structure_of(inst)
    n = inst.n
    final, trivial = stab.final_structures(st)
    fin = stab.failures(st, np.arange(n), stab.active_contacts(st.con, None))
    finished_bad = {int(final[f.part]) for f in fin}
    bad = stab.stages(st, order, finished_bad, final, trivial)
    if not bad:
        return Status.OPTIMAL, order, None, ()
    groups = _groups(op, st.con, [f.placed for f in bad])
    inside = {p for g in groups.values() for p in g}
    out = [p for p in order if p not in inside]
    deadline = time.perf_counter() + time_limit
    size = {int(c): int(k) for c, k in zip(*np.unique(final, return_counts=True), strict=True)}
    for _, members in sorted(groups.items()):
        res = _search(st, op, members, final, finished_bad, size, order, deadline, inst.ids)
        if res[0] != Status.OPTIMAL:
            return res
        out.extend(res[1])
    return Status.OPTIMAL, out, None, ()


def _search(st, op, members, final, finished_bad, size, prefer, deadline, ids):  # noqa: ANN001
    rank = {p: k for k, p in enumerate(prefer)}
    mem = sorted(members, key=lambda p: (int(op.bottom[p]), rank.get(p, 0), p))
    mset = set(mem)
    preds: dict[int, list[int]] = {p: [] for p in mem}
    for p in mem:
        for c in op.succ[p]:
            if c in mset:
                preds[c].append(p)
    placed = np.zeros(op.n, dtype=bool)
    count: dict[int, int] = {}
    dead: set[frozenset[int]] = set()
    seq: list[int] = []
    best: list = [-1, [], []]  # depth, placed ids, [(part, why)]
    nodes = [0]

    def can_grip(p: int) -> bool:
        if not op.parallel[p]:
            return True
        return any(not any(placed[q] for q in op.block[p][k]) for k in (0, 1))

    def dfs() -> bool | None:
        if len(seq) == len(mem):
            return True
        key = frozenset(seq)
        if key in dead:
            return False
        nodes[0] += 1
        if nodes[0] > NODE_LIMIT or time.perf_counter() > deadline:
            return None
        blocked = []
        for p in mem:
            if placed[p] or any(not placed[q] for q in preds[p]):
                continue
            if not can_grip(p):
                blocked.append((p, "cannot be gripped"))
                continue
            placed[p] = True
            fc = int(final[p])
            count[fc] = count.get(fc, 0) + 1
            fail = None
            if not (count[fc] == size[fc] and fc in finished_bad):
                fail = stab.stands(st, placed, p)
            if fail is None:
                seq.append(p)
                r = dfs()
                if r is None or r:
                    return r
                seq.pop()
            else:
                blocked.append((p, fail.text(ids)))
            placed[p] = False
            count[fc] -= 1
        if len(seq) > best[0]:
            best[0], best[1], best[2] = len(seq), [ids[q] for q in seq], blocked
        dead.add(key)
        return False

    r = dfs()
    if r is None:
        return (Status.UNKNOWN, [], f"the search for an order in which every stage stands hit its "
                f"limit ({NODE_LIMIT} states or the time limit) on a group of {len(mem)} parts",
                ())
    if not r:
        done = ", ".join(best[1][:8]) + (" ..." if len(best[1]) > 8 else "")
        why = "; ".join(f"{ids[p]}: {w}" for p, w in best[2][:6]) or "no part is available"
        after = f"after {done}" if best[1] else "at the start"
        return (Status.INFEASIBLE, [], "no placement order keeps every stage of construction "
                f"standing: {after}, no remaining part can be placed next ({why})",
                tuple(ids[p] for p, _ in best[2]))
    return Status.OPTIMAL, list(seq), None, ()
