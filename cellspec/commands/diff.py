"""cellspec diff: what a change to a rule file changes, proved up to N parts, with witnesses."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cellspec.commands.bounded import LimitHit, print_stopped, remaining, run_bounded
from cellspec.commands.common import EXIT_FAIL, EXIT_INPUT, EXIT_OK, add_shared, tagged
from cellspec.core.errors import CellspecError
from cellspec.core.limits import check_seconds, parse_memory
from cellspec.core.severity import Severity

DEFAULT_PARTS = 3  # = cellspec.solver.formal.diff.DEFAULT_PARTS (not imported: start-up)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``diff`` verb."""
    c = sub.add_parser("diff", help="is NEW stricter, looser or equivalent to OLD (proved)",
                       description="Compare the rules of two cell files with Z3 over every "
                       "layout of 1 to N parts of their shared part types: per rule and for "
                       "the error rules as a whole, equivalent, stricter (every layout NEW "
                       "accepts OLD accepts, not the reverse), looser, incomparable or unknown; "
                       "every difference comes with a layout that passes one file and fails "
                       "the other, re-checked with clingo. Order and stability rules are not "
                       "compared (docs/diff.md). Exit 0 equivalent, 1 different, 2 bad input "
                       "or unknown.")
    add_shared(c, max_memory=True,
               time_limit=(60.0, "time limit of the whole verb in seconds (default 60; "
                           "unknown when hit)"))
    c.add_argument("files", nargs="+", metavar="FILE",
                   help="OLD.cell NEW.cell (before and after the change); with --against, "
                   "one FILE, compared with its version at GITREF")
    c.add_argument("--against", default=None, metavar="GITREF",
                   help="OLD is FILE as committed at GITREF, with the files it imports "
                   "(the standard library too, when it is in the same checkout) read from "
                   "GITREF as well")
    c.add_argument("--parts", type=int, default=DEFAULT_PARTS, metavar="N",
                   help=f"layouts of up to N parts (default {DEFAULT_PARTS}; 1 to 6)")
    c.add_argument("--rule", default=None, metavar="NAME",
                   help="compare only this rule (its relation is the verdict)")
    c.add_argument("--witness-dir", default=None, metavar="D",
                   help="also write each witness layout to D (old_only.json, new_only.json "
                   "for the error rules; RULE.old_only.json, RULE.new_only.json per rule)")
    c.set_defaults(func=run)


def _pretty(rep: Any, old: str, new: str) -> str:
    from cellspec.solver.formal.diff import (  # lazy: loaded by the worker already
        DiffRelation,
        where,
    )

    lines = []
    def shown(d: Any) -> bool:  # in detail: a difference, or a severity change
        return d.relation != DiffRelation.EQUIVALENT or len({s for s in d.severity if s}) > 1

    same = [d for d in rep.rules if not shown(d)]
    for d in [*(d for d in rep.rules if shown(d)), rep.whole]:
        label = "the error rules" if d.rule == "*" else f"rule {d.rule}"
        extra = "" if d.in_old and d.in_new else (" (only in OLD)" if d.in_old
                                                   else " (only in NEW)")
        so, sn = d.severity
        if so and sn and so != sn:
            extra += f" (severity {so} -> {sn})"
        elif Severity.PREFERENCE in (so, sn):
            extra += " (preference)"
        lines.append(f"{label}{extra}: {d.relation}"
                     + (f" ({d.reason})" if d.reason else ""))
        for side, a, b in ((d.old_only, "OLD", "NEW"), (d.new_only, "NEW", "OLD")):
            if side.witness is not None:
                lines.append(f"    {where(side.witness)} passes {a}, fails {b} "
                             f"{side.message}")
    if same:
        lines.append(f"equivalent: {', '.join(d.rule for d in same)}")
    for n in rep.notes:
        lines.append(f"note: {n}")
    lines.append(f"{new} vs {old}: {rep.relation} (layouts of 1 to {rep.parts} parts of "
                 f"{', '.join(rep.types)}; {rep.seconds:.2f} s)")
    return "\n".join(lines)


def _json(rep: Any) -> dict:
    return tagged("diff", {"relation": rep.relation, "parts": rep.parts,
                           "types": list(rep.types),
                           "rules": [d.to_json() for d in rep.rules],
                           "witnesses": {"old_only": rep.whole.old_only.witness,
                                         "new_only": rep.whole.new_only.witness},
                           "whole": rep.whole.to_json(), "notes": rep.notes,
                           "seconds": round(rep.seconds, 4)})


def _write_witnesses(rep: Any, folder: Path) -> None:
    """Each witness as a layout file (checkable with `cellspec check CELL FILE`)."""
    from cellspec.core.io import atomic_write  # lazy: only with --witness-dir

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CellspecError(f"--witness-dir: cannot create {folder}: {exc.strerror}") from None
    for d in [rep.whole, *rep.rules]:
        for side in ("old_only", "new_only"):
            w = getattr(d, side).witness
            if w is not None:
                name = f"{side}.json" if d.rule == "*" else f"{d.rule}.{side}.json"
                atomic_write(folder / name, json.dumps(w, indent=2) + "\n")


def _inputs(a: argparse.Namespace) -> None:
    """Set ``a.old``, ``a.new`` (paths, as shown) from the positionals and --against."""
    if a.against is not None:
        if len(a.files) != 1:
            raise CellspecError("diff --against GITREF takes one FILE")
        a.new = a.files[0]
        a.old = f"{a.files[0]}@{a.against}"
    else:
        if len(a.files) != 2:
            raise CellspecError("diff takes OLD.cell NEW.cell (or --against GITREF FILE)")
        a.old, a.new = a.files


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    check_seconds(a.time_limit, "--time-limit")
    _inputs(a)
    a.max_memory = parse_memory(a.max_memory)

    def compute():  # in the worker
        # lazy: the parser and Z3 load in the worker, not at CLI start-up
        from cellspec.dsl.parser import load_cell
        from cellspec.solver.formal.diff import diff

        outside: list[str] = []
        if a.against is not None:  # OLD and its imports from git, as if they stood here
            from cellspec.dsl.gitref import GitTree, load_cell_at

            if not Path(a.new).is_file():
                raise CellspecError(f"{a.new}: no such file")
            tree = GitTree(a.against, Path(a.new))
            old = load_cell_at(a.new, tree)
            outside = tree.outside
        else:
            old = load_cell(a.old)
        new = load_cell(a.new)  # both valid before any output
        rep = diff(old, new, a.parts, rule=a.rule, timeout=remaining(a.time_limit))
        if outside:
            rep.notes.append(f"outside the git checkout, read from the disk for OLD too: "
                             f"{', '.join(outside)}")
        return rep

    got = run_bounded(compute, time_limit=a.time_limit, max_memory=a.max_memory)
    if isinstance(got, LimitHit):
        return print_stopped(got, a.format, tagged("diff", {
            # DiffRelation.UNKNOWN's word: the diff module (and Z3) is not loaded on this path
            "relation": "unknown", "parts": a.parts, "types": [], "rules": [],
            "witnesses": {"old_only": None, "new_only": None}, "notes": [got.reason],
            "seconds": round(got.seconds, 4)}),
            f"{a.new} vs {a.old}: unknown ({got.seconds:.2f} s): {got.reason}")
    if a.witness_dir:
        _write_witnesses(got, Path(a.witness_dir))
    print(json.dumps(_json(got), indent=2) if a.format == "json" else _pretty(got, a.old, a.new))
    from cellspec.solver.formal.diff import DiffRelation  # lazy: loaded with the report already

    if got.relation == DiffRelation.UNKNOWN:
        return EXIT_INPUT
    return EXIT_OK if got.relation == DiffRelation.EQUIVALENT else EXIT_FAIL
