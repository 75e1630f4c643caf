"""cellspec plan: a complete assembly sequence (support/contact order and grip access)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellspec.commands import common
from cellspec.commands.bounded import LimitHit, in_all, print_stopped, remaining, run_bounded
from cellspec.commands.common import EXIT_FAIL, EXIT_INPUT, EXIT_OK, atomic_write, tagged
from cellspec.core import limits
from cellspec.core.status import Status


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plan`` verb."""
    c = sub.add_parser("plan", help="find an assembly order (or prove there is none)",
                       description="Find a placement order in which every supporting or lower "
                       "touching part comes first and every part can be gripped by its gripper "
                       "(the grip axis is chosen per part), or prove that no order exists. The "
                       "order is re-verified with clingo. The layout's own order is ignored. "
                       "Exit 0 found, 1 proved impossible, 2 bad input or unknown.")
    common.add_shared(c, cell=True, layout=True, max_memory=True,
                      output=("OUT", "write the layout with the order here"),
                      time_limit=(10.0, "time limit of the whole verb in seconds (default "
                                  "10; unknown when hit)"))
    c.add_argument("--compare", action="store_true",
                   help="also run the paper's greedy sink-node sequencer (Algorithm 4)")
    c.set_defaults(func=run)


def _compute(a: argparse.Namespace):
    """The verb's work (in the bounded worker): the plan, the layout, the paper's greedy."""
    # lazy: CLI start-up time (every verb loads for --help; loads textX, pydantic, the solvers)
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.solver.cpsat.sequence import greedy_sink, order_problem, plan
    from cellspec.solver.instance import build_instance

    cell = load_cell(a.cell)
    layout = load_layout(a.layout, part_types=cell.part_types)

    # lazy: CLI start-up time (every verb loads for --help; small, but only this verb needs it)
    from cellspec.core import progress

    with progress.elapsed("plan", quiet=getattr(a, "quiet", False)):  # TTY stderr, past 1 s
        r = plan(cell, layout, time_limit=remaining(a.time_limit))
    paper = None
    if a.compare:
        op = order_problem(build_instance(cell, layout))
        got = greedy_sink(op)
        paper = {"found": got is not None,
                 "order": [layout.ids[p] for p in got] if got is not None else None}
    return r, layout, paper


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    limits.check_seconds(a.time_limit)
    limits.check_output(a.output, "-o")
    a.max_memory = limits.parse_memory(a.max_memory)
    res = run_bounded(lambda: _compute(a), time_limit=a.time_limit, max_memory=a.max_memory)
    if isinstance(res, LimitHit):
        return print_stopped(res, a.format, tagged("plan", {
            "status": "unknown", "method": "", "order": [], "steps": [], "reason": res.reason,
            "seconds": round(res.seconds, 4)}), f"unknown: {res.reason} ({res.seconds:.3f} s)")
    r, layout, paper = res
    if r.status == Status.OPTIMAL and a.output:
        atomic_write(Path(a.output), json.dumps(layout.with_order(r.order).to_json(),
                                                indent=2) + "\n")
    other = [v for v in (r.verdict.violations if r.verdict else ()) if v.rule not in
             r.order_rules]
    if a.format == "json":
        out = tagged("plan", r.to_json())
        if paper is not None:
            out["paper_greedy"] = paper
        print(json.dumps(out, indent=2))
    else:
        for k, s in enumerate(r.steps, 1):
            grip = f"{s.gripper} {s.axis}" if s.axis else s.gripper
            print(f"{k:4d}  {s.part}  {grip}")
        if r.status == Status.OPTIMAL:
            print(f"plan: {len(r.steps)} parts ordered ({r.method}), re-verified: no order "
                  f"rule violated ({in_all(r.seconds)})")
        elif r.status == Status.INFEASIBLE:
            print(f"infeasible: {r.reason} ({r.method}, {in_all(r.seconds)})")
        else:
            print(f"unknown: {r.reason} ({in_all(r.seconds)})")
        if paper is not None:
            print("paper's Algorithm 4 (greedy sink nodes): "
                  + ("found an order" if paper["found"] else "stuck, no order"))
    for v in other:
        print(f"note: the layout itself fails {v.rule}({', '.join(v.parts)}) (see "
              "`cellspec repair`)", file=sys.stderr)
    if r.status == Status.OPTIMAL:
        return EXIT_OK
    return EXIT_FAIL if r.status == Status.INFEASIBLE else EXIT_INPUT
