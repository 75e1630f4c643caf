"""cellspec repair: the nearest layout that satisfies every error rule of the cell."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from cellspec.commands import common, preferences
from cellspec.commands.bounded import (
    LimitHit,
    anytime_grace,
    in_all,
    print_unknown,
    remaining,
    run_bounded,
)
from cellspec.commands.common import EXIT_FAIL, EXIT_INPUT, EXIT_OK, atomic_write, tagged
from cellspec.core import limits
from cellspec.core.errors import CellspecError
from cellspec.core.status import FOUND, Status

MAX_WORKERS = 64
MAX_SECONDS = 3600.0
PROGRESS_AFTER = 0.5  # seconds: progress lines on a terminal only past this


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``repair`` verb."""
    c = sub.add_parser("repair", help="repair a layout with minimal change",
                       description="Find the nearest layout that satisfies every error rule: "
                       "fewest parts moved, then fewest free (non-rigid) moves, then least L1 "
                       "displacement, on the 0.1 mm grid with CP-SAT; the placement order is "
                       "kept or re-sequenced. Only the structures named by a violation move, "
                       "each within a move bound (widened when needed), in independent "
                       "clusters; a first verified repair comes fast and is improved while "
                       "--time-limit allows (then 'feasible': not proved minimal). The result "
                       "is re-verified with clingo. Exit 0 repaired or already valid, 1 proved "
                       "impossible, 2 bad input or unknown.")
    common.add_shared(c, cell=True, layout=True,
                      output=("OUT", "write the repaired layout JSON here"),
                      max_memory=True,
                      time_limit=(10.0, "time limit of the whole verb in seconds (default 10); "
                                  "at the limit the best verified repair so far is returned"))
    c.add_argument("--block", action="append", default=[], metavar="REGION",
                   help="add a blocked region as a keep-out, in metres: 'x > 0.6', "
                   "'x + y > 0.7' or 'box x [0.3, 0.4] y [0.1, 0.2]' (repeatable)")
    c.add_argument("--keep-shape", action="store_true",
                   help="prefer moving whole structures rigidly over moving fewer parts "
                   "(blocked-region recovery: shift and flatten only where needed)")
    c.add_argument("--allow-rotate", default=None, metavar="DEG",
                   help="a moved box (axis-aligned or yawed) may also turn to an allowed yaw, "
                   "when that helps: one angle A for every multiple of A (90: any quarter "
                   "turn; 45; 30) or comma-separated yaws in degrees (e.g. 0,45,90); at most "
                   "24 distinct yaws. Cylinders never turn; each turn costs a little in the "
                   "objective")
    c.add_argument("--prefer", action="store_true",
                   help="rank the cell's preference rules before minimal change (default: "
                   "fewest parts moved, then least L1, and the weight of preferences met "
                   "only breaks ties)")
    c.add_argument("--workers", type=int, default=1, metavar="N",
                   help=f"clusters solved in parallel, or CP-SAT workers (interleaved search) "
                   f"for a single cluster; 1 to {MAX_WORKERS}, default 1. Deterministic for "
                   "a given N: two runs give the same repair")
    c.set_defaults(func=run)


def _p(v: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{x:.4f}" for x in v) + ")"


def _progress():
    """A progress printer for stderr when it is a terminal, silent for the first
    PROGRESS_AFTER seconds (a fast repair prints nothing); None otherwise."""
    if not sys.stderr.isatty():
        return None
    t0 = time.perf_counter()

    def show(msg: str) -> None:
        if time.perf_counter() - t0 >= PROGRESS_AFTER:
            print(msg, file=sys.stderr, flush=True)

    return show


def _compute(a: argparse.Namespace) -> Any:
    """The verb's work (in the bounded worker): load and repair within what is left of the
    verb's budget (the parent writes the output, so a stopped worker writes nothing)."""
    # lazy: CLI start-up time (every verb loads for --help; loads textX, pydantic, the solvers)
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.solver.cpsat.prefer_repair import repair_preferring
    from cellspec.solver.cpsat.repair import parse_blocked

    cell = load_cell(a.cell)
    layout = load_layout(a.layout, part_types=cell.part_types)
    blocked = [parse_blocked(spec, f"blocked_{k + 1}") for k, spec in enumerate(a.block)]
    # without preference rules in the cell: exactly repair() (and no "preferences" output)
    return repair_preferring(cell, layout, prefer=a.prefer, time_limit=remaining(a.time_limit),
                             blocked=blocked, keep_shape=a.keep_shape, workers=a.workers,
                             progress=_progress(), allow_rotate=a.rotate)


def _import_results() -> None:
    """What reading the worker's answer needs (the result models: pydantic), imported in
    the parent while the worker works rather than after it has answered."""
    import cellspec.solver.cpsat.results  # noqa: F401  # lazy: CLI start-up time


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code. The whole verb (loading, repair, re-verification,
    output) is bounded by ``--time-limit`` (plus :func:`anytime_grace` to hand over the best
    repair found at the limit) and ``--max-memory``."""
    limits.check_seconds(a.time_limit, most=MAX_SECONDS)
    limits.check_output(a.output, "-o")
    if not 1 <= a.workers <= MAX_WORKERS:
        raise CellspecError(f"--workers must be between 1 and {MAX_WORKERS} (got {a.workers})")
    a.max_memory = limits.parse_memory(a.max_memory)
    a.rotate = ()
    if a.allow_rotate is not None:
        from cellspec.solver.cpsat.repair import parse_rotate  # lazy: as in _compute

        a.rotate = parse_rotate(a.allow_rotate)
    got = run_bounded(lambda: _compute(a), time_limit=a.time_limit + anytime_grace(a.time_limit),
                      max_memory=a.max_memory, meanwhile=_import_results)
    if isinstance(got, LimitHit):  # printed from plain data: no solver import after the limit
        return print_unknown(got, a.format, {
            "format": "cellspec.repair/1", "already_valid": False, "parts_moved": 0,
            "displacement_m": 0, "reordered": False, "moves": []}, handed="repair")
    r, prefs = got
    if r.layout is not None and a.output:
        atomic_write(Path(a.output), json.dumps(r.layout, indent=2) + "\n")
    if a.format == "json":
        out = r.to_json()
        if prefs is not None:
            out["preferences"] = prefs
        print(json.dumps(tagged("repair", out), indent=2))
    else:
        bad = r.before.violations if r.before is not None else ()
        if r.already_valid:
            print(f"already valid: nothing to repair ({in_all(r.seconds)})")
        else:
            print(f"before: {len(bad)} violation(s): "
                  + ", ".join(f"{v.rule}({', '.join(v.parts)})" for v in bad[:12])
                  + (" ..." if len(bad) > 12 else ""))
        for m in r.moves:
            turn = "" if m.yaw is None else (f"  yaw {m.yaw:g} kept" if m.yaw_kept else
                                             f"  turned to yaw {m.yaw:g}")
            print(f"moved {m.part}: {_p(m.src)} -> {_p(m.dst)}  {m.how}{turn}  [{m.why}]")
        if r.status in FOUND and not r.already_valid:
            if r.reordered and r.layout is not None:
                order = r.layout["order"]
                print("order re-sequenced: " + " ".join(order[:40])
                      + (f" ... ({len(order)} parts; the full order is in -o / --format json)"
                         if len(order) > 40 else ""))
            proof = ("minimal" if r.status == Status.OPTIMAL else
                     r.reason or "not proved minimal within the limits")
            if r.clusters:
                proof += (f"; {sum(c.proved for c in r.clusters)}/{len(r.clusters)} "
                          "cluster(s) proved" + (" in that model" if r.reason else ""))
            print(f"repaired: {r.parts_moved} part(s) moved, L1 {r.displacement:.4f} m, "
                  f"re-verified pass, {proof} ({in_all(r.seconds)})"
                  + (f"; written to {a.output}" if a.output else ""))
        if prefs is not None:
            for line in preferences.lines(prefs):
                print(line)
        if r.status == Status.INFEASIBLE:
            print(f"impossible: {r.reason} ({in_all(r.seconds)})")
        elif r.status == Status.UNKNOWN:
            print(f"unknown: {r.reason} ({in_all(r.seconds)})")
    if r.status in FOUND:
        return EXIT_OK
    return EXIT_FAIL if r.status == Status.INFEASIBLE else EXIT_INPUT
