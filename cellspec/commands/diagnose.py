"""cellspec diagnose: the discrepancy between an expected and an observed state, and its cause."""

from __future__ import annotations

import argparse
import json
import sys

from cellspec.commands.common import EXIT_FAIL, EXIT_INPUT, EXIT_OK, add_shared


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``diagnose`` verb."""
    c = sub.add_parser("diagnose", help="diagnose the discrepancy between two world states",
                       description="Compute Δ(expected, observed): CS mismatch, missing and "
                       "unexpected relations, drift per object, new and lost objects; then "
                       "derive the cause and its recovery with the cell's diagnose rules "
                       "(clingo). Two causes for one object are both reported, ranked, and "
                       "the rules are flagged as ambiguous. Exit 0 no discrepancy, 1 a "
                       "discrepancy (diagnosed or not), 2 bad input or ambiguous rules.")
    add_shared(c, cell="the .cell file (its diagnose rules; `import diagnosis`)")
    c.add_argument("expected", help="expected state JSON")
    c.add_argument("observed", help="observed state JSON")
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    # lazy: CLI start-up time (every verb loads for --help; loads textX, the world model)
    from cellspec.dsl.parser import load_cell
    from cellspec.world.discrepancy import (
        cell_part_shapes,
        cell_part_sizes,
        cell_surfaces,
        diagnose,
        load_state,
    )

    cell = load_cell(a.cell)
    surf, sizes = cell_surfaces(cell), cell_part_sizes(cell)
    shapes = cell_part_shapes(cell)
    exp = load_state(a.expected, surf, sizes, shapes)
    obs = load_state(a.observed, surf, sizes, shapes)
    dg = diagnose(cell, exp, obs)
    if a.format == "json":
        print(json.dumps(dg.to_json(), indent=2))
    else:
        for line in render(dg):
            print(line)
    if dg.status == "ambiguous":
        for o in dg.ambiguous:
            names = [f.cause for f in dg.findings if o in f.args]
            print(f"{a.cell}: error: the diagnose rules derive {len(names)} causes for "
                  f"{o} ({', '.join(names)}); ranked above, none picked: make the patterns "
                  "exclusive or override one", file=sys.stderr)
        return EXIT_INPUT
    return EXIT_OK if dg.status == "none" else EXIT_FAIL


def render(dg: object) -> list[str]:
    """The human report of a Diagnosis."""
    d = dg.delta  # type: ignore[attr-defined]
    out = []

    def cs(c: tuple[str, str | None]) -> str:
        return f"⟨{c[0]}, {c[1] or '-'}⟩"

    if d.cs_mismatch:
        out.append(f"CS mismatch: expected {cs(d.cs_expected)}, observed {cs(d.cs_observed)}")
    else:
        out.append(f"CS: {cs(d.cs_expected)} as expected")
    out.append("missing relations: " + (", ".join(map(str, d.missing)) or "none"))
    out.append("unexpected relations: " + (", ".join(map(str, d.unexpected)) or "none"))
    drift = ", ".join(f"{k} {v:.4f} m" for k, v in sorted(d.drift.items()) if v >= 0.0005)
    out.append("drift: " + (drift or "none above 0.5 mm"))
    if d.turn:  # only where a part is turned or round (docs/shapes.md)
        turn = ", ".join(f"{k} {v:.1f} deg" for k, v in sorted(d.turn.items()) if v >= 0.05)
        out.append("turn: " + (turn or "none above 0.05 deg"))
    if d.new:
        out.append("new objects: " + ", ".join(d.new)
                   + (f" (in the path: {', '.join(d.in_path)})" if d.in_path else ""))
    if d.lost:
        out.append("lost objects: " + ", ".join(d.lost))
    st = dg.status  # type: ignore[attr-defined]
    if not dg.findings:  # type: ignore[attr-defined]
        out.append("no discrepancy" if st == "none" else
                   "cause: unknown (no diagnose rule matches this discrepancy)")
    for k, f in enumerate(dg.findings, 1):  # type: ignore[attr-defined]
        out.append(f"cause {k}: {f.cause}({', '.join(f.args)}): {f.message} -> recover "
                   f"{f.recovery} (priority {f.priority}, {f.source})")
    if st == "ambiguous":
        out.append("AMBIGUOUS: more than one cause for " + ", ".join(dg.ambiguous)  # type: ignore
                   + "; ranked by priority, none picked")
    return out
