"""cellspec explain: a minimal subset of rules and parts that alone already fails."""

from __future__ import annotations

import argparse
import json

from cellspec.commands.bounded import LimitHit, print_stopped, remaining, run_bounded
from cellspec.commands.common import (
    EXIT_FAIL,
    EXIT_INPUT,
    EXIT_OK,
    add_shared,
)
from cellspec.core.errors import CellspecError
from cellspec.core.limits import check_seconds, parse_memory
from cellspec.core.status import ExplainStatus, Status


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``explain`` verb."""
    c = sub.add_parser("explain", help="reduce a failing layout to a minimal failing core",
                       description="For a failing layout, print a minimal subset of the rules "
                       "and parts that alone already fails (a Z3 unsat core, made minimal by "
                       "deletion), each rule with its file:line:col. Exit 0 the layout passes, "
                       "1 explained, 2 bad input or unknown (a solver limit).")
    add_shared(c, cell=True, layout=True, alias=True, max_memory=True,
               time_limit=(60.0, "time limit of the whole verb in seconds (default 60; "
                           "unknown when hit; --timeout is an alias)"))
    c.add_argument("--no-minimise", action="store_true",
                   help="report Z3's unsat core as is (faster, not always minimal)")
    c.add_argument("--causes", type=int, default=1, metavar="N",
                   help="up to N independent failing cores, each using none of the earlier "
                   "cores' parts (default 1)")
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    check_seconds(a.time_limit, "--time-limit/--timeout")
    if not (1 <= a.causes <= 10_000):
        raise CellspecError("--causes must be a whole number from 1 to 10000")
    a.max_memory = parse_memory(a.max_memory)

    def compute():  # in the worker: nothing slow is imported before the clock is split
        # lazy: the parser and Z3 load in the worker, not at CLI start-up
        from cellspec.dsl.parser import load_cell
        from cellspec.layout import load_layout
        from cellspec.solver.formal.explain import explain

        left = remaining(a.time_limit)
        cell = load_cell(a.cell)
        return explain(cell, load_layout(a.layout, part_types=cell.part_types), timeout=left,
                       minimise=not a.no_minimise, max_causes=a.causes)

    e = run_bounded(compute, time_limit=a.time_limit, max_memory=a.max_memory)
    if isinstance(e, LimitHit):
        return print_stopped(e, a.format, {
            "status": str(Status.UNKNOWN), "rules": [], "parts": [], "violations": [],
            "total_violations": 0, "minimal": False, "causes": [], "reason": e.reason,
            "seconds": round(e.seconds, 4)}, f"unknown: {e.reason}")
    if a.format == "json":
        print(json.dumps(e.to_json(), indent=2))
    elif e.status == ExplainStatus.PASS:
        print("pass: nothing to explain")
    elif e.status == ExplainStatus.UNKNOWN:
        print(f"unknown: {e.reason}")
    else:
        print(f"{e.total_violations} violation(s) in the layout; {len(e.causes)} failing "
              "core(s):")
        for k, c in enumerate(e.causes, 1):
            word = "minimal" if c.minimal else "small (not proved minimal)"
            print(f"core {k} ({word}): {len(c.rules)} rule(s), parts "
                  f"{', '.join(c.parts) if c.parts else '(none)'}")
            for r in c.rules:
                print(f"  {r.source}: rule {r.rule}")
            for v in c.violations:
                print(f"  {v['source']}: {v['rule']}({', '.join(v['parts'])}): {v['message']}")
    if e.status == ExplainStatus.PASS:
        return EXIT_OK
    return EXIT_FAIL if e.status == ExplainStatus.EXPLAINED else EXIT_INPUT
