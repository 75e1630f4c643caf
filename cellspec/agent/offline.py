"""The offline translator: deterministic controlled English -> one ``design`` statement.

No model, no network. A real parser (:mod:`cellspec.agent.nl`): the command is
normalised and tokenised against ONE lexicon (``nl/lexicon.toml``: structure words and
synonyms, dimensions, placements, relations, limits, objectives), parsed by a lark
grammar (``nl/grammar.lark``) into phrases in any order, grouped into structures and
composed into the same ``design`` DSL as before, so everything downstream (orchestrator,
solver, checks) is unchanged.

Documented defaults for vague phrases (each one is written into the spec as a
``// assumed: ...`` comment, so the user sees what was assumed): ``a few`` = 3; a tower
with no count under a height limit, or ``as tall as possible``, is the tallest that fits;
``as tightly as possible`` / ``smallest footprint`` = minimize footprint (packing); parts
with no structure named (``place 8 cubes anywhere``) = a packing on the workspace floor;
``ring``/``frame``/``walled square`` = an enclosure one course high unless a height is
given; ``fill the front strip|half with cubes`` = the most parts the solver places there,
one layer; a ``box W by D by H`` with every cube on the rim = a dense block.

Refused with the reason: places without a referent (``over there``), no stock or no
count (``whatever fits``, ``several``), matters of taste (``something nice``), references
to things the cell does not hold (``like yesterday``), contradictions (a tower 5 high no
higher than 2 cubes), counts that are not whole numbers from 1 to 1000 or do not fit the
workspace. A word it does not know is never guessed: it is named with the closest known
phrase ("did not understand 'plattform' (column 9); did you mean 'platform'?") and what
was understood.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from cellspec.agent.base import Adapter, Feedback, TranslateError, parse_spec
from cellspec.agent.nl.compose import compose
from cellspec.agent.nl.compose import fmt as _fmt
from cellspec.agent.nl.lexer import MAX_COMMAND, check_text, tokenize
from cellspec.agent.nl.parser import parse_tokens
from cellspec.core.status import FOUND
from cellspec.solver.cpsat.generate import generate

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

__all__ = ["MAX_COMMAND", "OfflineAdapter", "translate_offline"]


def translate_offline(command: str, cell: Cell) -> str:
    """The spec text of ``command`` on ``cell`` (TranslateError when it has none)."""
    check_text(command)
    notes: list[str] = []
    flat = " ".join(re.sub(r"[^\w\s.-]", " ", command.lower()).split())
    filled = _fill(flat, cell, notes)
    if filled is not None:
        return filled
    toks = tokenize(command, notes)
    return compose(parse_tokens(toks, command), cell, command, notes)


class OfflineAdapter(Adapter):
    """Deterministic controlled-English parser; proposes nothing (the solver builds)."""

    name = "offline"
    model = "offline"

    def translate(self, command: str, cell: Cell, feedback: str | None = None) -> str:
        return translate_offline(command, cell)

    def propose(self, spec: Any, cell: Cell, feedback: Feedback | None) -> dict[str, Any] | None:
        return None


def _fill(text: str, cell: Cell, notes: list[str]) -> str | None:
    """``fill the front strip|left half with cubes``: the most parts the solver places in
    that region, one layer (found by the generator, largest count first)."""
    m = re.fullmatch(r"fill (?:up )?the (front|back|left|right) (strip|half|edge)"
                     r"(?: of the (?:table|workspace))? with (?:cubes?|blocks?|parts?)", text)
    if not m:
        return None
    ws = cell.workspace
    ptype = next(iter(cell.part_types))
    sx, sy, sz = (float(v) for v in cell.part_types[ptype].size)
    x0, x1, y0, y1 = float(ws.lo[0]), float(ws.hi[0]), float(ws.lo[1]), float(ws.hi[1])
    side, what = m.group(1), m.group(2)
    if what == "half":
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        x0, x1, y0, y1 = {"front": (x0, x1, y0, my), "back": (x0, x1, my, y1),
                          "left": (x0, mx, y0, y1), "right": (mx, x1, y0, y1)}[side]
        how = f"the {side} half"
    else:
        x0, x1, y0, y1 = {"front": (x0, x1, y0, y0 + sy), "back": (x0, x1, y1 - sy, y1),
                          "left": (x0, x0 + sx, y0, y1), "right": (x1 - sx, x1, y0, y1)}[side]
        how = f"the strip one part deep along the {side} edge"
    region = f"region x [{_fmt(x0)}, {_fmt(x1)}] y [{_fmt(y0)}, {_fmt(y1)}]"
    top = int(round((x1 - x0) / sx + 1e-9)) * int(round((y1 - y0) / sy + 1e-9))

    def spec_for(n: int) -> str:
        return (f"design command {{\n    packing(n={n}, {region})\n"
                f"    max height {_fmt(sz)}\n}}\n")

    def fits(n: int) -> bool:
        return generate(cell, parse_spec(spec_for(n))).status in FOUND

    # the largest n the generator places: binary search (a packing of n that fits leaves
    # room for n - 1), each probe a real generator call
    lo, hi = 0, top
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        raise TranslateError(f"cannot translate: no part fits in {how}")
    notes.append(f"'fill the {side} {what}' = {how}, one layer, with the most parts "
                 f"the solver places there: {lo}")
    head = "".join(f"    // assumed: {x}\n" for x in notes)
    return spec_for(lo).replace("design command {\n", "design command {\n" + head, 1)


