"""cellspec lint: can the error rules of a cell be satisfied at all, and which fight?"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from cellspec.commands.bounded import LimitHit, print_stopped, remaining, run_bounded
from cellspec.commands.common import (
    EXIT_FAIL,
    EXIT_INPUT,
    EXIT_OK,
    add_shared,
    tagged,
)
from cellspec.core.errors import CellspecError
from cellspec.core.limits import check_seconds, parse_memory
from cellspec.core.status import Status


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``lint`` verb."""
    c = sub.add_parser("lint", help="prove a cell's rules consistent, or name the conflicts",
                       description="For each cell file, decide with Z3 whether any layout of "
                       "the part set satisfies every error rule; if none does, print minimal "
                       "sets of conflicting rules (file:line:col). Also warn about rules that "
                       "can never fire and error rules implied by the others. Exit 0 clean, "
                       "1 findings, 2 bad input or undecided (a time limit).")
    add_shared(c, alias=True, max_memory=True,
               time_limit=(30.0, "time limit of the whole verb in seconds (default 30; "
                           "unknown when hit; --timeout is an alias)"))
    c.add_argument("files", nargs="+", help=".cell files")
    c.add_argument("--parts", action="append", default=None, metavar="TYPE=N",
                   help="the part set, e.g. --parts cube=12 (repeatable; default: the largest "
                   "inline test layout of the file)")
    c.add_argument("--no-redundancy", action="store_true",
                   help="skip the (slower) check for rules implied by the others")
    c.add_argument("--include-stdlib", action="store_true",
                   help="also report rules of the standard library (import physical) that can "
                   "never fire or are implied, when no rule of the file is involved (by "
                   "default only the file's own rules are reported; conflicts always are)")
    c.set_defaults(func=run)


def _parse_parts(items: list[str] | None) -> dict[str, int] | None:
    if not items:
        return None
    out: dict[str, int] = {}
    for item in items:
        for piece in item.split(","):
            m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d{1,6})\s*", piece)
            if not m:
                raise CellspecError(f"--parts: expected TYPE=N (e.g. cube=12), got {piece!r}")
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def _own(cell, report, include_stdlib: bool, f: str):
    """(file, report, hidden): the report without the findings that concern only rules of
    the standard library (a rule that can never fire or is implied there is the library's
    business, not the file's), unless ``include_stdlib``; conflicts are always kept."""
    # lazy: the parser (in the worker)
    from cellspec.dsl.parser import STDLIB, stdlib_path
    from cellspec.solver.smt.result import FindingKind

    lib = {stdlib_path(n).resolve() for n in STDLIB}
    ours = {r.name for r in cell.rules if Path(r.source.file).resolve() not in lib}
    always = (FindingKind.INCONSISTENT, FindingKind.UNKNOWN)
    keep = [x for x in report.findings if include_stdlib or x.kind in always
            or any(rr.rule in ours for rr in x.rules)]
    hidden = len(report.findings) - len(keep)
    return f, (report.model_copy(update={"findings": tuple(keep)}) if hidden else report), hidden


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    check_seconds(a.time_limit, "--time-limit/--timeout")
    parts = _parse_parts(a.parts)
    a.max_memory = parse_memory(a.max_memory)

    def compute():  # in the worker
        # lazy: the parser and Z3 load in the worker, not at CLI start-up
        from cellspec.dsl.parser import load_cell
        from cellspec.solver.formal.lint import lint

        cells = [(f, load_cell(f)) for f in a.files]  # all inputs valid before any output
        return [_own(c, lint(c, parts, timeout=remaining(a.time_limit),
                             redundancy=not a.no_redundancy), a.include_stdlib, f)
                for f, c in cells]

    got = run_bounded(compute, time_limit=a.time_limit, max_memory=a.max_memory)
    if isinstance(got, LimitHit):
        return print_stopped(got, a.format, tagged("lint", {"reports": [
            {"file": f, "cell": None, "parts": parts or {}, "status": str(Status.UNKNOWN),
             "findings": [], "reason": got.reason, "seconds": round(got.seconds, 4)}
            for f in a.files]}),
            "\n".join(f"{f}: unknown ({got.seconds:.2f} s): {got.reason}" for f in a.files))
    from cellspec.solver.smt.result import FindingKind  # lazy: loaded with the reports

    reports = [(f, r) for f, r, _ in got]
    hidden = {f: n for f, _, n in got}
    if a.format == "json":
        print(json.dumps(tagged("lint", {"reports": [
            {"file": f, **r.to_json(), **({"stdlib_findings_hidden": hidden[f]}
                                          if hidden[f] else {})}
            for f, r in reports]}), indent=2))
    else:
        for f, r in reports:
            what = ", ".join(f"{t}={n}" for t, n in sorted(r.part_set.items()))
            for x in r.findings:
                where = x.rules[0].source if len(x.rules) == 1 else f
                label = {FindingKind.INCONSISTENT: "error",
                         FindingKind.UNKNOWN: "note"}.get(x.kind, "warning")
                print(f"{where}: {label}: {x.message}")
                for rr in x.rules if len(x.rules) > 1 else ():
                    print(f"    {rr.source}: rule {rr.rule}")
            print(f"{f}: {r.status} ({what}, {len(r.findings)} finding(s), {r.seconds:.2f} s)"
                  + (f": {r.reason}" if r.reason else ""))
            if hidden[f]:
                print(f"note: {f}: {hidden[f]} finding(s) about the standard library's own "
                      "rules not shown (--include-stdlib shows them)", file=sys.stderr)
    if any(r.status == Status.UNKNOWN for _, r in reports):
        return EXIT_INPUT
    return EXIT_OK if all(r.clean for _, r in reports) else EXIT_FAIL
