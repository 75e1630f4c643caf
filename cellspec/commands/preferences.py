"""The preference score on the command line: the ``--prove-preferences`` step check, clingo's
bound in half of a verb's remaining budget, and the pretty lines of a score (generate,
design and repair print it alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cellspec.commands.bounded import remaining
from cellspec.core.errors import CellspecError

if TYPE_CHECKING:  # a type only: the verbs load the cell model lazily (CLI start-up time)
    from cellspec.dsl.model import Cell


def add_prove_option(c: Any, parts: str, without_limit: str = "", left_out: str = "") -> None:
    """``--prove-preferences STEP`` on a verb's parser (generate, design): one help text."""
    c.add_argument("--prove-preferences", type=float, default=None, metavar="STEP",
                   help="on a cell with preference rules, also ask clingo (#minimize) for the "
                   f"most preference weight any layout of {parts} can meet with their "
                   "centres on a lattice STEP metres apart (small cells only: unknown beyond "
                   "the size limit or when it would not finish in half the time left of "
                   f"--time-limit{without_limit}); error rules clingo does not encode there "
                   f"{left_out}are left out and named")


def check_step(step: float | None) -> None:
    """``--prove-preferences STEP``: a positive, finite lattice step (CellspecError, exit 2)."""
    if step is not None and not 0 < step < float("inf"):
        raise CellspecError("--prove-preferences must be a positive lattice step in metres")


def bound(cell: Cell, layout: dict[str, Any], step: float,
          time_limit: float | None) -> dict[str, Any]:
    """clingo's bound on the weight any layout of ``layout``'s parts meets on the lattice of
    ``step``, given half of what is left of the verb's budget (60 s without one), so the
    layout is handed over either way."""
    # lazy: CLI start-up time (clingo grounds only when asked)
    from cellspec.solver.asp.prefer import least_violated

    left = remaining(time_limit)
    b = least_violated(cell, [p["type"] for p in layout["parts"]], step_m=step,
                       timeout=max(0.1, 0.5 * (left if left is not None else 60.0)))
    return b.to_json()


def lines(prefs: dict[str, Any]) -> list[str]:
    """The score line, its notes and (when asked for) the bound's line."""
    # lazy: CLI start-up time (only cells with preference rules print it)
    from cellspec.solver.asp.prefer import bound_line, score_line

    out = [score_line(prefs), *(f"note: {note}" for note in prefs.get("notes", ()))]
    if "bound" in prefs:
        out.append(bound_line(prefs["bound"], prefs["met"]))
    return out
