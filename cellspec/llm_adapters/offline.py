"""The offline translator: deterministic controlled English -> one ``design`` statement.

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
  without numbers (``small``, ``little``, ``short``) keep the kind's defaults; ``big``,
  ``tightly``, ``over there`` and the like are refused.

A word it does not understand is never guessed: :class:`TranslateError` names it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from cellspec.dsl.design import KINDS
from cellspec.llm_adapters.base import Adapter, Feedback, TranslateError

WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
KIND_WORDS = {"tower": "tower", "wall": "wall", "pyramid": "pyramid", "staircase": "staircase",
              "stairs": "staircase", "bridge": "bridge", "arch": "arch", "canopy": "canopy",
              "enclosure": "enclosure", "pen": "enclosure", "block": "block", "pack": "packing",
              "packing": "packing"}
FILLER = set("a an the please build make create put place stack with of and cubes cube "
             "blocks parts part me i want dense solid one single closed up some somewhere "
             "small little short".split())  # size words without numbers: the kind's defaults
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


class OfflineAdapter(Adapter):
    """Deterministic controlled-English translator; proposes nothing (the solver builds)."""

    name = "offline"
    model = "offline"

    def translate(self, command: str, cell: Any, feedback: str | None = None) -> str:
        if not isinstance(command, str) or not command.strip():
            raise TranslateError("cannot translate: the command is empty")
        text = _normalise(command)
        ws = cell.workspace
        unit = float(_cube_height(cell))
        design_cons: list[str] = []
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
        lines = [self._structure(c, cell, command) for c in chunks]
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
        return "design command {\n" + "\n".join(body) + "\n}\n"

    def _structure(self, text: str, cell: Any, command: str) -> list[Any]:
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
            if "along" in KINDS[kind]:
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
                  "packing": {"count": "n"}}[kind]
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
                    f"y [{_fmt(y0)}, {_fmt(y1)}])")
        else:
            order = list(KINDS[kind])
            items = sorted(params.items(), key=lambda kv: order.index(kv[0]))
            call = f"{kind}(" + ", ".join(f"{k}={v}" for k, v in items) + ")"
        return [call, at, cons]

    def propose(self, spec: Any, cell: Any, feedback: Feedback | None) -> dict[str, Any] | None:
        return None


def _cube_height(cell: Any) -> Any:
    types = cell.part_types
    pt = types.get("cube") if isinstance(types, dict) else None
    if pt is None:
        pt = next(iter(types.values())) if isinstance(types, dict) else types[0]
    return pt.size[2]
