"""cellspec settle: the physics oracle; does the layout's structure stand in pybullet?"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellspec.commands.common import EXIT_FAIL, EXIT_OK, add_shared, atomic_write
from cellspec.core.extras import require_extra
from cellspec.core.limits import check_output


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``settle`` verb."""
    c = sub.add_parser("settle", help="drop the layout's parts in pybullet, in order, and see "
                       "what falls (the physics oracle)",
                       description="Spawn the layout's parts one by one in its order (the "
                       "parts list's order when it has none) at their poses in a pybullet "
                       "DIRECT client of its own (no robot): boxes of the resolved sizes, "
                       "masses from the part types, friction from the cell (default 0.5), "
                       "each surface a static slab. After each part is placed the world "
                       "runs at least 0.3 s and on while something moves (at most 2 s), the "
                       "finished structure at least 1 s (at most 4 s). A part fell when it "
                       "moved more than 5 mm or turned more than 5 degrees. Not part of "
                       "`check`: it is the ground truth the physics-agreement benchmark "
                       "compares check against. Exit 0 every part stands, 1 something "
                       "fell, 2 bad input.")
    add_shared(c, cell=True, layout=True, output=("FILE", "also write the JSON result here"))
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    require_extra("twin", verb="settle")
    # lazy: CLI start-up time (every verb loads for --help; loads textX, pydantic, the twin)
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.robots.settle import HZ, settle

    check_output(a.output)
    cell = load_cell(a.cell)
    layout = load_layout(a.layout)
    res = settle(cell, layout)
    obj = res.to_json()
    if a.output:
        atomic_write(Path(a.output), json.dumps(obj, indent=1) + "\n")
    if a.format == "json":
        print(json.dumps(obj, indent=2))
    else:
        for m in res.parts:
            state = (f"FELL at step {m.fell_at}" + (" (final settle)" if m.phase == "final"
                                                   else "")
                     if m.fell else "stands")
            print(f"{m.step:4d}  {m.id}  moved {m.displacement * 1000:8.2f} mm  turned "
                  f"{m.rotation_deg:7.2f} deg  {state}")
        print(f"settle: {res.verdict}: {res.message()}")
    print(f"note: settle simulated {res.steps} steps at {HZ} Hz in {res.seconds:.3f} s",
          file=sys.stderr)
    return EXIT_OK if res.verdict == "stand" else EXIT_FAIL
