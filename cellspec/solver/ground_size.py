"""The ground size of the clingo program, estimated before grounding: a layout whose rules
would ground to more than the memory budget is refused with ``unknown`` (reason:
grounding limit) instead of being ground until the process (or the machine) runs out.

Grounding cannot be interrupted inside the process, so the CLI runs it in a worker under
``RLIMIT_AS`` (``cellspec.commands.bounded``); a caller of the Python API
(:func:`cellspec.solver.verify.check`) has no worker, and this estimate is its guard.

A rule's part variables are bound by pair relations over the broad-phase candidates
(``solver/asp/compile.py``): a rule whose quantifiers nest ``k`` part variables, connected
by relations, grounds at most about ``sum over parts v of deg(v) ** (k - 1)`` bindings,
where ``deg(v)`` is v's number of candidate pairs (k = 2: twice the pairs; k = 3: every
path of two pairs, through its middle part). Rules of one or two parts are bounded by the
broad phase's own density limit (:data:`cellspec.core.geometry.MAX_CANDIDATES` pairs); the
estimate is computed when a rule relates three parts or more and the layout is large
enough for it to matter (``n ** k`` bindings would not fit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir
from cellspec.dsl.model import Rule
from cellspec.solver.asp.compile import CompiledProgram
from cellspec.solver.instance import Instance

# clingo's memory per kept binding of a 3-part rule, measured on dense piles of 300-1 000
# cubes (a chain rule contact(p, q) and contact(q, r), every binding violated: 264-381 B);
# the estimate assumes every binding is kept (the worst case: none is simplified away)
BYTES_PER_BINDING = 256


@dataclass(frozen=True)
class GroundEstimate:
    """The estimated ground size: bindings of the largest rule, of all rules, in bytes."""

    rule: str
    source: str
    parts: int  # part variables nested in that rule
    bindings: float  # of that rule
    total: float  # bindings of every estimated rule
    pairs: int  # broad-phase candidate pairs
    bytes: float
    held: int  # bytes the process holds already (counted against the budget)

    def reason(self, budget: int) -> str:
        """The sentence of the ``unknown`` verdict (reason: grounding limit)."""
        return (f"grounding limit: rule '{self.rule}' ({self.source}) relates {self.parts} "
                f"parts through the layout's {self.pairs} candidate pairs: about "
                f"{self.bindings:.3g} bindings ({self.total:.3g} for every rule), an "
                f"estimated {self.bytes / 1024**2:.0f} MiB, more than the memory budget of "
                f"{budget / 1024**2:.0f} MiB (max_memory, --max-memory) allows beside the "
                f"{self.held / 1024**2:.0f} MiB the process holds; not ground")


def nested_parts(node: ir.Node) -> int:
    """The most part variables in scope at once in ``node`` (quantifiers and counts nested
    in each other; siblings are ground separately)."""
    if isinstance(node, ir.Quant | ir.CountCmp):
        own = len(node.vars) if node.domain == "part" else 0
        return own + nested_parts(node.body)
    if isinstance(node, ir.Not):
        return nested_parts(node.operand)
    if isinstance(node, ir.And | ir.Or):
        return max((nested_parts(x) for x in node.ops), default=0)
    return 0


def _resident() -> int:
    """This process's resident memory in bytes (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def estimate(inst: Instance, prog: CompiledProgram, rules: tuple[Rule, ...] | list[Rule],
             budget: int) -> GroundEstimate | None:
    """The ground size of ``rules`` on ``inst`` when it may not fit ``budget`` bytes beside
    what the process holds already (as ``RLIMIT_AS`` counts for the CLI's worker) (None:
    it fits, or only the density limit applies: no rule relates three parts, the layout is
    too small to matter, or the broad phase itself is too dense and clingo's run says so)."""
    n = inst.n
    held = _resident()
    free = budget - held
    arity = [(r, k) for r, c, k in ((r, c, nested_parts(r.body))
                                    for r, c in zip(rules, prog.rules, strict=True))
             if k >= 3 and c.cost < 2]  # cost >= 2: refused by clingo's run, by name
    if not arity or sum(float(n) ** k for _, k in arity) * BYTES_PER_BINDING <= free:
        return None
    try:
        i, j = g.broad_phase(inst.boxes, prog.margin_for(inst.boxes, inst.eps, inst.opening,
                                                         inst.depth))
    except g.TooDense:
        return None  # the density limit of clingo's run answers, naming the pair count
    deg = np.bincount(np.concatenate([i, j]), minlength=n).astype(np.float64)
    per = [(r, k, float(np.sum(deg ** (k - 1)))) for r, k in arity]
    total = sum(b for _, _, b in per)
    rule, k, most = max(per, key=lambda x: x[2])
    est = GroundEstimate(rule=rule.name, source=str(rule.source), parts=k, bindings=most,
                         total=total, pairs=len(i), bytes=total * BYTES_PER_BINDING,
                         held=held)
    return est if est.bytes > free else None
