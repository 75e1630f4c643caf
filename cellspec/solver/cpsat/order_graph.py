"""The graph of an order problem: the pairs of parts whose placement order matters together
(shared by the sequencer and the stage-order search, so neither imports the other)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cellspec.solver.cpsat.sequence import OrderProblem


def order_edges(op: OrderProblem) -> tuple[list[int], list[int]]:
    """The pairs tied by precedence or grip blocking: parts whose order matters together."""
    rows, cols = [], []
    for p in range(op.n):
        for c in op.succ[p]:
            rows.append(p)
            cols.append(c)
        for lst in op.block[p]:
            for q in lst:
                rows.append(p)
                cols.append(q)
    return rows, cols
