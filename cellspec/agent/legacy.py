"""The LEGACY phrase-matching translator (before issue 18), kept only as the peer of
bench/paraphrase.py; cellspec uses :mod:`cellspec.agent.offline`.

Deterministic controlled English -> one ``design`` statement.

No model, no network. Numbers are digits or words (one..twenty). Vocabulary:

* structures: ``N-cube tower`` / ``tower of N cubes``; ``wall W wide H high along x|y``;
  ``pyramid with base N``; ``staircase of N steps``; ``bridge|arch with a span of N``;
  ``canopy [H high]``; ``enclosure W by D [H high]``; ``dense block WxDxH``;
  ``pack N cubes [in x A to B y C to D]`` (default region: the workspace floor);
* placement: ``at x X y Y`` / ``at (X, Y)``; ``in the [front|back] [left|right] corner``;
  ``A next to|left of|right of|in front of|behind B`` (A is anchored beside B);
* ``in the middle|centre [of the table]``; ``along the front|back|left|right edge`` (at
  the middle of that workspace edge, and along it for kinds that have ``along``);
* packing regions: ``in the left|right|front|back half``, ``in the front|back left|right
  area|quarter``; ``put|place|store N cubes in|into <region>`` means ``pack N cubes``;
* ``no higher than H [m|cm|mm|cubes]`` / ``in N layers`` -> ``max height``;
* ``stack N cubes into a tower``, ``pen`` (enclosure), ``with walls H high``; size words
  without numbers (``small``, ``little``, ``short``) keep the kind's defaults.

Documented defaults for vague phrases (each one is written into the spec as a
``// assumed: ...`` comment, so the user sees what was assumed):

* a tower without a count under a height limit is the tallest that fits (``max height``
  or the workspace); ``something tall`` is such a tower;
* ``a few`` is 3;
* ``as tightly|densely|compactly as possible`` is ``minimize footprint`` (packing);
* ``fill the front|back|left|right strip|half with cubes``: the strip one part deep along
  that workspace edge (or the half), one layer, with the most parts the solver places;
* ``arrange N cubes however you like``: a packing of N on the workspace floor;
* ``box W by D by H``: a dense block when every cube is on the rim (W or D at most 2:
  solid and hollow coincide); otherwise refused (solid block or hollow enclosure?);
* ``walled square W by W [with nothing inside]``: an enclosure W by W, one course high
  unless a height is given;
* ``big``/``large``/``huge`` are accepted only next to explicit sizes (the numbers win).

Refused (no sensible default): places without a referent (``over there``, ``here``),
``all the cubes`` / ``whatever fits`` (the cell gives no stock of parts), a size word with
no numbers. A word it does not understand is never guessed: :class:`TranslateError`
names it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from cellspec.agent.base import Adapter, Feedback, TranslateError, parse_spec
from cellspec.dsl.design import KINDS
from cellspec.solver.cpsat.generate import generate

WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
KIND_WORDS = {"tower": "tower", "wall": "wall", "pyramid": "pyramid", "staircase": "staircase",
              "stairs": "staircase", "bridge": "bridge", "arch": "arch", "canopy": "canopy",
              "enclosure": "enclosure", "pen": "enclosure", "block": "block", "pack": "packing",
              "packing": "packing", "box": "box", "walledsquare": "square"}
FILLER = set("a an the please build make create put place stack with of and cubes cube "
             "blocks parts part me i want dense solid one single closed up some somewhere "
             "small little short but".split())  # size words without numbers: the kind's defaults
RELATIONS = {"next to": "next", "beside": "next", "to the left of": "left", "left of": "left",
             "to the right of": "right", "right of": "right", "in front of": "front",
             "front of": "front", "behind": "back", "in back of": "back", "back of": "back"}
NUM = r"(\d+(?:\.\d+)?)"
INT = r"(\d+)"


def _fmt(v: float | Decimal) -> str:
    s = f"{Decimal(str(v)).quantize(Decimal('0.0001')):f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def _normalise(command: str) -> str:
    t = command.lower().strip()
    t = re.sub(r"(\d)\s*[x×]\s*(?=\d)", r"\1 by ", t)  # 3x2x2 -> 3 by 2 by 2
    t = re.sub(r"(\d)-(?=[a-z])", r"\1 ", t)  # 3-cube -> 3 cube
    t = re.sub(r"[(),;:!?]|\.(?!\d)", " ", t)
    # put|place|store N cubes in|into <a region> -> pack N cubes in <the region>
    t = re.sub(r"\b(?:put|place|store) (\d+) (?:cubes?|blocks?|parts?) in(?:to)? "
               r"(?=(?:the|x) )", r"pack \1 cubes in ", t)
    t = re.sub(r"\binto (?:a |an )?", "", t)  # stack 4 cubes into a tower
    t = re.sub(r"\b(" + "|".join(WORDS) + r")\b", lambda m: str(WORDS[m.group(1)]), t)
    return " ".join(t.split())


class _Chunk:
    """One structure phrase; patterns consume their words, leftovers are errors."""

    def __init__(self, text: str):
        self.text = f" {text} "

    def take(self, pattern: str) -> re.Match[str] | None:
        m = re.search(r"(?<= )" + pattern + r"(?= )", self.text)
        if m:
            self.text = self.text[:m.start()] + " " * (m.end() - m.start()) + self.text[m.end():]
        return m

    def leftover(self) -> list[str]:
        return [w for w in self.text.split() if w not in FILLER]


MAX_COMMAND = 2000  # characters: a command in words, not a document


class LegacyAdapter(Adapter):
    """The phrase matcher of before issue 18 (benchmark peer); proposes nothing."""

    name = "legacy"
    model = "legacy"

    def translate(self, command: str, cell: Any, feedback: str | None = None) -> str:
        if not isinstance(command, str) or not command.strip():
            raise TranslateError("cannot translate: the command is empty")
        if len(command) > MAX_COMMAND:
            raise TranslateError(f"cannot translate: the command is {len(command)} characters "
                                 f"long; a command is at most {MAX_COMMAND}")
        text = _normalise(command)
        ws = cell.workspace
        unit = float(_cube_height(cell))
        design_cons: list[str] = []
        notes: list[str] = []
        _refuse_vague(text)
        text, tallest = _phrase_defaults(text, notes)
        filled = _fill(text, cell, notes)
        if filled is not None:
            return filled
        # design-wide: no higher than H [unit]
        m = re.search(r"\b(?:no higher than|at most|not higher than|max(?:imum)? height(?: of)?) "
                      + NUM + r"(?: (m|metres|meters|cm|mm|cubes?|parts?|blocks?|layers?))?"
                      r"(?: high| tall)?\b", text)
        if m:
            v, u = Decimal(m.group(1)), (m.group(2) or "m")
            if u.startswith(("cube", "part", "block", "layer")):
                h = float(v) * unit
            else:
                h = float(v * {"cm": Decimal("0.01"), "mm": Decimal("0.001")}.get(u, 1))
            design_cons.append(f"max height {_fmt(h)}")
            text = (text[:m.start()] + text[m.end():]).strip()
        m = re.search(r"\bin " + INT + r" layers?\b", text)  # pack 9 cubes in one layer
        if m:
            design_cons.append(f"max height {_fmt(int(m.group(1)) * unit)}")
            text = (text[:m.start()] + text[m.end():]).strip()
        # split on relations: "A next to B"
        pattern = r"\b(" + "|".join(sorted(RELATIONS, key=len, reverse=True)) + r")\b"
        pieces = re.split(pattern, text)
        chunks, rels = pieces[0::2], [RELATIONS[p] for p in pieces[1::2]]
        for k in range(len(rels)):
            target = chunks[k + 1].strip()
            if re.fullmatch(r"(?:the|that|this) \w+", target):
                raise TranslateError(f"cannot translate: did not understand '{target}': the "
                                     "cell names no such thing; describe the structure to "
                                     f"build beside it (e.g. '{pieces[2 * k + 1]} a wall 3 "
                                     "wide') or give 'at x X y Y'")
        if len(chunks) == 1:  # "A and B": two structures side by side, each placed freely
            chunks = re.split(r"\band (?=(?:a |an |the )?(?:\d+ )?(?:\w+ )?(?:"
                              + "|".join(KIND_WORDS) + r")\b)", chunks[0])
        max_h = min((float(d.split()[-1]) for d in design_cons), default=None)
        lines = [self._structure(c, cell, command, notes, max_h, tallest) for c in chunks]
        if not lines:
            raise TranslateError(f"cannot translate: did not understand '{command}'")
        # relations: anchor structure k beside structure k+1
        if rels:
            cx = float(ws.lo[0] + ws.hi[0]) / 2
            cy = float(ws.lo[1] + ws.hi[1]) / 2
            for k in range(len(rels) - 1, -1, -1):
                b = lines[k + 1]
                if b[1] is None:
                    b[1] = (cx, cy)
                bx, by = b[1]
                gap = 3 * unit
                dx, dy = {"next": (gap, 0), "right": (gap, 0), "left": (-gap, 0),
                          "front": (0, -gap), "back": (0, gap)}[rels[k]]
                if lines[k][1] is None:
                    lines[k][1] = (bx + dx, by + dy)
        body = []
        for call, at, cons in lines:
            s = "    " + call
            if at is not None:
                s += f" at ({_fmt(at[0])}, {_fmt(at[1])})"
            if cons:
                s += " [" + ", ".join(cons) + "]"
            body.append(s)
        body += ["    " + c for c in design_cons]
        body = [f"    // assumed: {n}" for n in notes] + body
        return "design command {\n" + "\n".join(body) + "\n}\n"

    # complexity: the legacy regex translator, frozen as the comparison baseline
    def _structure(self, text: str, cell: Any, command: str, notes: list[str],  # noqa: C901
                   max_h: float | None = None, tallest: bool = False) -> list[Any]:
        c = _Chunk(text)
        found = [(m.start(), KIND_WORDS[m.group(1)]) for m in
                 re.finditer(r"(?<= )(" + "|".join(KIND_WORDS) + r")(?= )", c.text)]
        if not found:
            words = " ".join(c.leftover()) or text.strip()
            raise TranslateError(f"cannot translate: did not understand '{words}' (structures: "
                                 "tower, wall, pyramid, staircase, bridge, arch, canopy, "
                                 "enclosure, dense block, pack N cubes)")
        if len(found) > 1:
            raise TranslateError(f"cannot translate: did not understand '{text.strip()}' "
                                 "(several structures: join them with 'and' or 'next to')")
        kind = found[0][1]
        ws = cell.workspace
        at: tuple[float, float] | None = None
        cons: list[str] = []
        attrs: dict[str, Any] = {}
        m = c.take(r"at x " + NUM + r" (?:and )?y " + NUM) or c.take(r"at " + NUM + " " + NUM)
        if m:
            at = (float(m.group(1)), float(m.group(2)))
        m = c.take(r"in the (?:(front|back) )?(?:(left|right) )?corner")
        if m:
            x = ws.hi[0] if m.group(2) == "right" else ws.lo[0]
            y = ws.hi[1] if m.group(1) == "back" else ws.lo[1]
            at = (float(x), float(y))
        m = c.take(r"in the (?:middle|centre|center)(?: of the (?:table|workspace))?")
        if m:
            at = (float(ws.lo[0] + ws.hi[0]) / 2, float(ws.lo[1] + ws.hi[1]) / 2)
        m = c.take(r"along the (front|back|left|right) edge(?: of the (?:table|workspace))?")
        if m:
            cx, cy = float(ws.lo[0] + ws.hi[0]) / 2, float(ws.lo[1] + ws.hi[1]) / 2
            at = {"front": (cx, float(ws.lo[1])), "back": (cx, float(ws.hi[1])),
                  "left": (float(ws.lo[0]), cy), "right": (float(ws.hi[0]), cy)}[m.group(1)]
            if "along" in KINDS.get(kind, {}):
                attrs["along"] = "x" if m.group(1) in ("front", "back") else "y"
        m = c.take(r"in (?:the )?(?:region )?x (?:from )?" + NUM + r" (?:to )?" + NUM
                   + r" (?:and )?y (?:from )?" + NUM + r" (?:to )?" + NUM)
        region = None
        if m:
            region = tuple(float(m.group(i)) for i in range(1, 5))
        m = c.take(r"in the (?:(left|right|front|back) half|(front|back) (left|right) "
                   r"(?:area|quarter))(?: of the (?:table|workspace))?")
        if m:
            x0, x1, y0, y1 = (float(ws.lo[0]), float(ws.hi[0]), float(ws.lo[1]),
                              float(ws.hi[1]))
            mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            sides = {m.group(1), m.group(2), m.group(3)}
            x0, x1 = (x0, mx) if "left" in sides else (mx, x1) if "right" in sides else (x0, x1)
            y0, y1 = (y0, my) if "front" in sides else (my, y1) if "back" in sides else (y0, y1)
            region = (x0, x1, y0, y1)
        m = c.take(r"along (?:the )?(x|y)(?: axis)?")
        if m:
            attrs["along"] = m.group(1)
        for key, pat in (("base", r"(?:with )?(?:a )?base (?:of )?" + INT),
                         ("span", r"(?:with )?(?:a )?span (?:of )?" + INT),
                         ("dims", INT + r" by " + INT + r"(?: by " + INT + r")?"),
                         ("wide", INT + r" (?:cubes? )?wide"),
                         ("wide", r"(?:a )?width (?:of )?" + INT),
                         ("high", r"with walls " + INT + r" (?:cubes? )?(?:high|tall)"),
                         ("high", INT + r" (?:cubes? |layers? |courses? )?(?:high|tall)"),
                         ("high", r"(?:a )?height (?:of )?" + INT),
                         ("steps", r"(?:of |with )?" + INT + r" steps?"),
                         ("count", INT + r" (?:cubes?|blocks?|parts?)(?= (?:"
                          + "|".join(KIND_WORDS) + r") )"),
                         ("count", r"(?:of |with )" + INT + r" (?:cubes?|blocks?|parts?)"),
                         ("count", INT + r"(?= (?:" + "|".join(KIND_WORDS) + r") )"),
                         ("count", r"(?<=pack )" + INT)):
            if key in attrs:
                continue
            m = c.take(pat)
            if m:
                attrs[key] = tuple(int(g) for g in m.groups() if g) if key == "dims" \
                    else int(m.group(1))
        c.take(r"(?:" + "|".join(KIND_WORDS) + r")")
        m = c.take(r"(?:as (?:tightly|densely|compactly) as possible|tightly|densely)")
        if m:
            if kind != "packing":
                raise TranslateError(f"cannot translate: did not understand '{m.group(0)}' for "
                                     f"a {kind} (only a packing can be packed tightly)")
            attrs["minimize"] = "footprint"
            notes.append(f"'{m.group(0)}' = minimize footprint")
        m = c.take(r"(?:big|large|huge)")
        if m:
            sized = [k for k in attrs if k in ("dims", "wide", "high", "base", "span", "steps",
                                                 "count")]
            if not sized:
                raise TranslateError(f"cannot translate: '{m.group(0)}' gives no size: say how "
                                     f"big (e.g. 'enclosure 5 by 3' or 'wall 5 wide')")
            notes.append(f"'{m.group(0)}': the sizes given are used")
        if kind == "square":
            c.take(r"with nothing inside|empty|hollow")
        left = c.leftover()
        if left:
            raise TranslateError(f"cannot translate: did not understand '{' '.join(left)}'"
                                 f" in '{command.strip()}'")
        params: dict[str, Any] = {}
        usable = {"tower": {"count": "n", "high": "n"},
                  "wall": {"wide": "width", "high": "height", "along": "along"},
                  "pyramid": {"base": "base", "along": "along"},
                  "staircase": {"steps": "steps", "count": "steps", "along": "along"},
                  "bridge": {"span": "span", "along": "along", "high": "pillar"},
                  "arch": {"span": "span", "along": "along", "high": "pillar"},
                  "canopy": {"high": "height"},
                  "enclosure": {"dims": ("w", "d", "h"), "high": "h"},
                  "block": {"dims": ("w", "d", "h")},
                  "packing": {"count": "n", "minimize": "minimize"},
                  "box": {"dims": ("w", "d", "h")},
                  "square": {"dims": ("w", "d"), "high": "h"}}[kind]
        for key, v in attrs.items():
            if key not in usable:
                word = {"dims": "A by B", "count": "a count of cubes"}.get(key, key)
                raise TranslateError(f"cannot translate: did not understand '{word}' for a "
                                     f"{kind} in '{command.strip()}'")
            target = usable[key]
            if isinstance(target, tuple):
                if len(v) > len(target) or (kind == "block" and len(v) != 3):
                    raise TranslateError(f"cannot translate: did not understand the sizes "
                                         f"{' by '.join(map(str, v))} for a {kind}")
                for t, x in zip(target, v, strict=False):
                    params[t] = x
            else:
                params.setdefault(target, v)
        if kind == "box":
            if len(attrs.get("dims", ())) != 3:
                raise TranslateError("cannot translate: a 'box' needs its sizes (e.g. 'box of "
                                     "cubes 3 by 2 by 2')")
            w, d, h = attrs["dims"]
            if min(w, d) > 2:
                raise TranslateError(f"cannot translate: 'box {w} by {d} by {h}' is ambiguous: "
                                     "a dense block or a hollow enclosure? say 'dense block' "
                                     "or 'enclosure'")
            notes.append(f"'box {w} by {d} by {h}' = dense block (every cube is on the rim, "
                         "so solid and hollow are the same)")
            kind = "block"
        if kind == "square":
            dims = attrs.get("dims", ())
            if len(dims) != 2 or dims[0] != dims[1]:
                raise TranslateError("cannot translate: a walled square needs equal sides "
                                     "(e.g. 'walled square 3 by 3')")
            if "h" not in params:
                params["h"] = 1
                notes.append("'walled square' = enclosure one course high")
            kind = "enclosure"
        if kind == "tower" and "n" not in params and (max_h is not None or tallest):
            top = float(cell.workspace.hi[2]) - _surface_z(cell)
            lim = min(top, max_h) if max_h is not None else top
            unit = float(_cube_height(cell))
            n = int(lim / unit + 1e-9)
            if n < 1:
                raise TranslateError(f"cannot translate: no tower fits under {lim:g} m "
                                     f"(one part is {unit:g} m high)")
            params["n"] = n
            why = f"max height {_fmt(max_h)}" if max_h is not None and max_h <= top \
                else "the workspace height"
            who = "'something tall'" if tallest else "a tower with no count"
            notes.append(f"{who} = the tallest tower under {why}: {n} parts")
        if region is not None and kind != "packing":
            raise TranslateError(f"cannot translate: did not understand 'in x .. y ..' for a "
                                 f"{kind} (say 'at x X y Y')")
        if kind == "packing":
            if "n" not in params:
                raise TranslateError("cannot translate: how many cubes to pack? "
                                     "(say 'pack 12 cubes')")
            if at is not None:
                raise TranslateError("cannot translate: a packing is placed by its region "
                                     "(say 'in x A to B y C to D')")
            x0, x1, y0, y1 = region or (float(ws.lo[0]), float(ws.hi[0]),
                                        float(ws.lo[1]), float(ws.hi[1]))
            call = (f"packing(n={params['n']}, region x [{_fmt(x0)}, {_fmt(x1)}] "
                    f"y [{_fmt(y0)}, {_fmt(y1)}]"
                    + (f", minimize {params['minimize']}" if "minimize" in params else "")
                    + ")")
        else:
            order = list(KINDS[kind])
            items = sorted(params.items(), key=lambda kv: order.index(kv[0]))
            call = f"{kind}(" + ", ".join(f"{k}={v}" for k, v in items) + ")"
        return [call, at, cons]

    def propose(self, spec: Any, cell: Any, feedback: Feedback | None) -> dict[str, Any] | None:
        return None


def _refuse_vague(text: str) -> None:
    """Vague phrases with no sensible default: refuse them by name."""
    m = re.search(r"\b(over there|over here|there|here)\b", text)
    if m:
        raise TranslateError(f"cannot translate: '{m.group(1)}' names no place in the cell; "
                             "say 'at x X y Y', 'in the back left corner' or 'in the middle'")
    m = re.search(r"\b(all (?:the|of the|my) (?:cubes|blocks|parts)|whatever fits|"
                  r"as many as (?:fit|possible)|anything)\b", text)
    if m:
        raise TranslateError(f"cannot translate: '{m.group(1)}': the cell gives no stock of "
                             "parts and no structure; say how many and what (e.g. 'pack 12 "
                             "cubes' or 'build a 4-cube tower')")


def _phrase_defaults(text: str, notes: list[str]) -> tuple[str, bool]:
    """Rewrite documented vague phrases to controlled English; note each assumption."""
    if re.search(r"\ba few\b", text):
        text = re.sub(r"\ba few\b", "3", text)
        notes.append("'a few' = 3")
    tallest = False
    if re.search(r"\bsomething (?:tall|high)\b", text):
        text = re.sub(r"\bsomething (?:tall|high)\b", "tower", text)
        tallest = True
    text = re.sub(r"\bwalled square\b", "walledsquare", text)
    m = re.fullmatch(r"(?:arrange|place|put|lay out) (\d+) (cubes?|blocks?|parts?) "
                     r"(?:however|any way|anyway|as) you (?:like|want|wish)", text)
    if m:
        text = f"pack {m.group(1)} cubes"
        notes.append("'however you like' = the solver's choice: a packing on the workspace "
                     "floor")
    return text, tallest


def _fill(text: str, cell: Any, notes: list[str]) -> str | None:
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
        return generate(cell, parse_spec(spec_for(n))).status in ("optimal", "feasible")

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


def _surface_z(cell: Any) -> float:
    return float(cell.surfaces[0].z) if cell.surfaces else float(cell.workspace.lo[2])


def _cube_height(cell: Any) -> Any:
    types = cell.part_types
    pt = types.get("cube") if isinstance(types, dict) else None
    if pt is None:
        pt = next(iter(types.values())) if isinstance(types, dict) else types[0]
    return pt.size[2]
