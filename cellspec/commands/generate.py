"""cellspec generate: build a layout from a design spec (CP-SAT placement, sequenced,
re-verified with clingo)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from cellspec.core.status import FOUND, Status

if TYPE_CHECKING:  # a type only: the solver loads in the verb's worker (CLI start-up time)
    from cellspec.solver.cpsat.generate import GenerateResult

DEFAULT_TIME_LIMIT = 10.0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``generate`` verb."""
    c = sub.add_parser("generate", help="build a layout from a design spec",
                       description="Build the layout of a design (`design d { tower(n=3) at "
                       "(0.40, 0.20) }` in a .cell file) with CP-SAT so that every error rule "
                       "of the cell holds, with an assembly order; the result is re-verified "
                       "with clingo. Exit 0 built, 1 proved impossible (the reason is "
                       "printed), 2 bad input or unknown.")
    common.add_shared(c, cell=True, output=("OUT", "write the layout JSON here"),
                      max_memory=True,
                      time_limit=(DEFAULT_TIME_LIMIT, f"time limit of the whole verb in seconds "
                                  f"(default {DEFAULT_TIME_LIMIT:g}; unknown when hit without a "
                                  "layout)"))
    c.add_argument("spec", help="the .cell file holding the design(s) (may be CELL itself)")
    c.add_argument("--design", metavar="NAME", help="the design to build (needed when the "
                   "file holds several)")
    preferences.add_prove_option(c, "the generated parts",
                                 left_out="(order, stability, grip) ")
    c.set_defaults(func=run)


def _compute(a: argparse.Namespace) -> dict[str, Any]:
    """The verb's work (in the bounded worker): load, generate within what is left of the
    verb's budget, re-verify independently (a failure here is a bug, never success)."""
    # lazy: CLI start-up time (every verb loads for --help; loads textX, pydantic, the solvers)
    from cellspec.dsl.design import load_designs, pick_design
    from cellspec.dsl.parser import display_path, load_cell
    from cellspec.layout import layout_from_obj
    from cellspec.solver.cpsat.generate import generate
    from cellspec.solver.verify import check

    cell = load_cell(a.cell)
    designs = load_designs(a.spec)
    design = pick_design(designs, a.design, display_path(a.spec))

    # lazy: CLI start-up time (every verb loads for --help; small, but only this verb needs it)
    from cellspec.core import progress

    with progress.elapsed("generate", quiet=getattr(a, "quiet", False)):  # TTY stderr
        r = generate(cell, design, time_limit=remaining(a.time_limit))
    if r.layout is not None:
        left = remaining(a.time_limit + anytime_grace(a.time_limit))
        v = check(cell, layout_from_obj(r.layout), timeout=left)
        if v.verdict != Status.PASS:
            detail = v.reason or "; ".join(f"{x.rule}({', '.join(x.parts)})"
                                           for x in v.violations[:5])
            r = type(r)(status=Status.UNKNOWN, design=r.design, seconds=r.seconds,
                        reason=f"internal error: the generated layout fails the check: {detail}")
    if (a.prove_preferences is not None and r.layout is not None
            and r.preferences is not None):
        prefs = dict(r.preferences, bound=preferences.bound(cell, r.layout, a.prove_preferences,
                                                            a.time_limit))
        r = r.model_copy(update={"preferences": prefs})
    # plain data for the parent: unpickling the result model would import the solvers there
    return {"status": str(r.status), "layout": r.layout, "json": r.to_json(),
            "pretty": _pretty(a, r) if a.format != "json" else None}


def _pretty(a: argparse.Namespace, r: GenerateResult) -> str:
    """The pretty report of a generate run: the structures, the steps, the verdict line."""
    lines: list[str] = []
    say = lines.append
    for s in r.structures:
        req = (f" (asked ({s.requested[0]:.4f}, {s.requested[1]:.4f}))"
               if s.requested else "")
        say(f"{s.name}: {s.kind}, {s.parts} parts, centre ({s.centre[0]:.4f}, "
            f"{s.centre[1]:.4f}){req}, top {s.height:.4f} m")
    if r.layout is not None:
        pos = {p["id"]: p["pos"] for p in r.layout["parts"]}
        for k, st in enumerate(r.steps, 1):
            grip = f"{st.gripper} {st.axis}" if st.axis else st.gripper
            p = pos[st.part]
            say(f"{k:4d}  {st.part}  ({p[0]:.4f}, {p[1]:.4f}, {p[2]:.4f})  {grip}")
        proof = "placement optimal" if r.status == Status.OPTIMAL else \
            (r.reason or "placement not proved optimal within the search budget")
        say(f"generated: design {r.design}, {len(r.steps)} parts, re-verified pass, "
            f"{proof} ({in_all(r.seconds)})" + (f"; written to {a.output}" if a.output else ""))
        if r.preferences is not None:
            for line in preferences.lines(r.preferences):
                say(line)
    elif r.status == Status.INFEASIBLE:
        say(f"infeasible: {r.reason} ({in_all(r.seconds)})")
    else:
        say(f"unknown: {r.reason} ({in_all(r.seconds)})")
    return "".join(x + "\n" for x in lines)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code. The whole verb (loading, placement, sequencing,
    re-verification) is bounded by ``--time-limit`` (plus :func:`anytime_grace` to hand
    over a layout found at the limit) and ``--max-memory``."""
    limits.check_seconds(a.time_limit)
    limits.check_output(a.output, "-o")
    preferences.check_step(a.prove_preferences)
    a.max_memory = limits.parse_memory(a.max_memory)
    got = run_bounded(lambda: _compute(a), time_limit=a.time_limit + anytime_grace(a.time_limit),
                      max_memory=a.max_memory)
    if isinstance(got, LimitHit):  # printed from plain data: no solver import after the limit
        return print_unknown(got, a.format, {
            "format": "cellspec.generate/1", "design": a.design or "", "structures": [],
            "steps": []}, handed="layout")
    if got["layout"] is not None and a.output:
        atomic_write(Path(a.output), json.dumps(got["layout"], indent=2) + "\n")
    if a.format == "json":
        print(json.dumps(tagged("generate", got["json"]), indent=2))
    else:
        print(got["pretty"], end="")
    if got["status"] in FOUND:
        return EXIT_OK
    return EXIT_FAIL if got["status"] == Status.INFEASIBLE else EXIT_INPUT
