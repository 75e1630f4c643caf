"""cellspec check: verify a layout against a cell's rules."""

from __future__ import annotations

import argparse
import json
import sys

from cellspec.commands.common import EXIT_FAIL, EXIT_INPUT, EXIT_OK
from cellspec.dsl.errors import CellspecError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``check`` verb."""
    c = sub.add_parser("check", help="check a layout against a cell's rules",
                       description="Print pass, or every violated rule with its parts, an "
                       "explanation and the file:line:col of the rule. Exit 0 pass, "
                       "1 violations, 2 bad input (and for unknown: a solver limit).")
    c.add_argument("cell", help="the .cell file")
    c.add_argument("layout", help="the layout JSON file")
    c.add_argument("--format", choices=("pretty", "json"), default="pretty")
    c.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="solver time limit in seconds (verdict unknown when hit)")
    c.add_argument("--backend", choices=("clingo", "reference"), default="clingo",
                   help="clingo (default) or the brute-force reference evaluator")
    c.add_argument("--max-bytes", type=int, default=None, metavar="N",
                   help="largest layout file accepted (default 32 MiB)")

    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import MAX_LAYOUT_BYTES, load_layout
    from cellspec.solver.verify import check

    if a.timeout is not None and not (a.timeout > 0):
        raise CellspecError("--timeout must be a positive number of seconds")
    cell = load_cell(a.cell)
    layout = load_layout(a.layout, max_bytes=a.max_bytes or MAX_LAYOUT_BYTES)
    v = check(cell, layout, backend=a.backend, timeout=a.timeout)
    if a.format == "json":
        print(json.dumps(v.to_json(), indent=2))
    else:
        for x in v.violations:
            print(f"{x.source}: {x.rule}({', '.join(x.parts)}): {x.message}")
        for x in v.warnings:
            print(f"{x.source}: warning: {x.rule}({', '.join(x.parts)}): {x.message}")
        for n in v.notes:
            print(f"note: {n}", file=sys.stderr)
        summary = f"({v.parts} parts, {v.seconds:.3f} s)"
        if v.verdict == "pass":
            extra = f", {len(v.warnings)} warning(s)" if v.warnings else ""
            print(f"pass{extra} {summary}")
        elif v.verdict == "fail":
            print(f"fail: {len(v.violations)} violation(s) {summary}")
        else:
            print(f"unknown: {v.reason} {summary}")
    if v.verdict == "pass":
        return EXIT_OK
    return EXIT_FAIL if v.verdict == "fail" else EXIT_INPUT
