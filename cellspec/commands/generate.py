"""cellspec generate: build a layout from a design spec (NOT IMPLEMENTED YET, issue 4 item 2).

The verb exists so the command line names the gap honestly: it exits 2 with a clear
"not implemented yet" message instead of a half-working generator.
"""

from __future__ import annotations

import argparse

from cellspec.dsl.errors import CellspecError

NOT_IMPLEMENTED = ("cellspec generate is not implemented yet: design specs (`design d { tower(n=3) "
                   "at (0.40, 0.20) }`) need a grammar extension and a CP-SAT generator that "
                   "have not been written; build the layout by hand and use `cellspec repair` "
                   "and `cellspec plan`")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``generate`` verb."""
    c = sub.add_parser("generate", help="(not implemented yet) build a layout from a spec",
                       description=NOT_IMPLEMENTED)
    c.add_argument("cell", help="the .cell file")
    c.add_argument("spec", help="the design spec")
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Always refuses: not implemented yet (exit 2)."""
    raise CellspecError(NOT_IMPLEMENTED)
