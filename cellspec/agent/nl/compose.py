"""Frames -> one ``design`` statement (the same DSL the offline translator always wrote).

Each frame's phrases become the kind's parameters (``row`` = a wall one high, ``platform``
= a block one layer high, ``ring`` = an enclosure one course high); placements become
``at (x, y)`` targets or packing regions; relations anchor a structure beside the next
one with a gap (``D m apart``: the clear gap between footprints; default one part);
height limits become ``max height``. Contradictions (a 5-high tower under a 2-cube limit)
and numbers that cannot be counts are refused here, before any solver runs.

Sides are defined once, from the cell's workspace (lexicon.toml [sides]): front = low y,
back = high y, left = low x, right = high x. The spec prints that convention as a comment
whenever the command used a side word.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from cellspec.agent.base import TranslateError
from cellspec.agent.nl.lexer import lexicon
from cellspec.agent.nl.parser import Frame, Parsed, Phrase
from cellspec.dsl.design import KINDS, MAX_PARAM

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

LIKE = ("however you like", "any way you like", "as you like", "however you want",
        "as you want")
DESIGN_KIND = {"row": "wall", "platform": "block", "ring": "enclosure"}


def fmt(v: float | Decimal) -> str:
    """A length as the DSL writes it (at most 4 decimals, no trailing zeros)."""
    s = f"{Decimal(str(v)).quantize(Decimal('0.0001')):f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def _int(v: Any, what: str) -> int:
    if v != int(v) or v < 1:
        raise TranslateError(f"cannot translate: {what} must be a whole number of at least "
                             f"1, not {fmt(v) if v == v else v}")
    if v > MAX_PARAM:
        raise TranslateError(f"cannot translate: {what} {int(v)} is too large (at most "
                             f"{MAX_PARAM})")
    return int(v)


class CellGeometry:
    """The cell's workspace and part size as floats, and the side convention."""

    def __init__(self, cell: Cell):
        ws = cell.workspace
        self.x0, self.x1 = float(ws.lo[0]), float(ws.hi[0])
        self.y0, self.y1 = float(ws.lo[1]), float(ws.hi[1])
        types = cell.part_types
        self.types: dict[str, tuple[float, float, float]] = {
            k: (float(t.size[0]), float(t.size[1]), float(t.size[2])) for k, t in types.items()}
        self.default = "cube" if "cube" in types else next(iter(types))
        pt = types.get("cube") or next(iter(types.values()))
        self.sx, self.sy, self.sz = (float(v) for v in pt.size)
        z0 = float(cell.surfaces[0].z) if cell.surfaces else float(ws.lo[2])
        self.top = float(ws.hi[2]) - z0
        self.cx, self.cy = (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2
        self.capacity = int((self.x1 - self.x0) / self.sx + 1e-9) * \
            int((self.y1 - self.y0) / self.sy + 1e-9) * int(self.top / self.sz + 1e-9)

    def part_type(self, noun: str, word: str) -> str:
        """The cell's part type a part noun names: the type of that name, else (cube,
        part, brick, block) the cell's default type; TranslateError when it has none."""
        if noun in self.types:
            return noun
        if noun in ("cube", "part", "brick", "block"):
            return self.default
        raise TranslateError(f"cannot translate: '{word}': the cell has no part type "
                             f"'{noun}' (part types: {', '.join(self.types)})")

    def side(self, s: str) -> tuple[str, float]:
        axis, end = lexicon().sides[s]
        lo, hi = (self.x0, self.x1) if axis == "x" else (self.y0, self.y1)
        return axis, lo if end == "lo" else hi

    def convention(self) -> str:
        return ("sides: " + ", ".join(f"{s} = {'low' if e == 'lo' else 'high'} {a} "
                                      f"({a} {fmt(self.side(s)[1])})"
                                      for s, (a, e) in lexicon().sides.items()))

    def box_of(self, sides: set[str]) -> tuple[float, float, float, float]:
        """The half or quarter of the workspace named by side words."""
        x0, x1, y0, y1 = self.x0, self.x1, self.y0, self.y1
        for s in sides:
            axis, end = lexicon().sides[s]
            if axis == "x":
                x0, x1 = (x0, self.cx) if end == "lo" else (self.cx, x1)
            else:
                y0, y1 = (y0, self.cy) if end == "lo" else (self.cy, y1)
        return x0, x1, y0, y1


class DraftStructure:
    """One structure being composed."""

    def __init__(self, kind: str):
        self.kind = kind
        self.params: dict[str, Any] = {}
        self.at: tuple[float, float] | None = None
        self.region: tuple[float, float, float, float] | None = None
        self.cons: list[str] = []
        self.minimize: str | None = None
        self.tallest = False
        self.tallest_text = ""
        self.layers: float | None = None
        self.soft = False  # the anchor is a place word (near, corner, edge, ...), not numbers
        self.box: tuple[float, float, float, float] | None = None  # the place word's area
        self.size: tuple[float, float, float] = (0.05, 0.05, 0.05)  # the part's, metres

    def footprint(self, unit: tuple[float, float]) -> tuple[float, float]:
        p, k = self.params, self.kind
        along = p.get("along", "x")
        n = {"tower": 1, "wall": p.get("width", 3), "pyramid": p.get("base", 3),
             "staircase": p.get("steps", 4), "bridge": p.get("span", 1) + 2,
             "arch": p.get("span", 1) + 2}.get(k)
        if n is not None:
            w, d = (n, 1) if along == "x" else (1, n)
        elif k == "canopy":
            w, d = 3, 3
        else:
            w, d = p.get("w", 3), p.get("d", 3)
        return w * unit[0], d * unit[1]

    def height(self) -> int:
        p, k = self.params, self.kind
        return int({"tower": p.get("n", 0), "wall": p.get("height", 2),
                    "pyramid": p.get("base", 3), "staircase": p.get("steps", 4),
                    "bridge": p.get("pillar", 2) + p.get("span", 1),
                    "arch": p.get("pillar", 2) + p.get("span", 1),
                    "canopy": p.get("height", 3) + 1, "enclosure": p.get("h", 2),
                    "block": p.get("h", 2)}.get(k, 0))

    def parts(self) -> int:
        p, k = self.params, self.kind
        if k == "tower":
            return int(p.get("n", 1))
        if k == "wall":
            return int(p.get("width", 3)) * int(p.get("height", 2))
        if k in ("block",):
            return int(p.get("w", 3)) * int(p.get("d", 2)) * int(p.get("h", 2))
        if k == "enclosure":
            w, d = int(p.get("w", 3)), int(p.get("d", 3))
            return (2 * w + 2 * d - 4) * int(p.get("h", 2))
        if k in ("pyramid", "staircase"):
            b = int(p.get("base", p.get("steps", 3)))
            return b * (b + 1) // 2
        if k == "packing":
            return int(p.get("n", 0))
        return 0


def compose(parsed: Parsed, cell: Cell, command: str, notes: list[str]) -> str:
    """The spec text of a parsed command (TranslateError when it cannot be one)."""
    c = CellGeometry(cell)
    limit = _limits(parsed.limits, c)
    structs: list[DraftStructure] = []
    rels: list[str | None] = []
    gap = c.sx
    apart: float | None = None
    for p in parsed.pair:
        if p.rule == "apart":
            v, u = p.nums()[0], p.first("LUNIT")
            gap = float(v) * {"m": 1.0, "cm": 0.01, "mm": 0.001}[u.value if u else "m"]
            apart = gap
    for f in parsed.frames:
        group = [_structure(f, c, limit, notes, command) for _ in range(f.copies)]
        placed = group[0].at is not None and len(group) > 1
        if placed:  # copies of one placed structure: side by side, centred on the place
            fx, fy = group[0].footprint(group[0].size[:2])
            step = (0.0, fy + gap) if fx > fy else (fx + gap, 0.0)
            at0 = group[0].at
            assert at0 is not None  # placed
            x, y = at0
            for i, g in enumerate(group):
                t = i - (len(group) - 1) / 2
                g.at = (x + t * step[0], y + t * step[1])
            _into(group, c)
        structs += group
        rels += ["done" if placed else "pair"] * (len(group) - 1) + [f.rel]
    rels = rels[:-1]
    for s in structs:
        if s.layers is not None:
            limit = s.layers if limit is None else min(limit, s.layers)
    if parsed.pair and len(structs) < 2:
        tok = parsed.pair[0].toks[0]
        raise TranslateError(f"cannot translate: '{tok.text}' (column {tok.col}) needs two "
                             "structures (e.g. 'two walls 3 long side by side')")
    parallel = any(p.rule == "obj" for p in parsed.pair)
    if parallel:
        for s in structs:
            if "along" not in KINDS.get(s.kind, {}):
                raise TranslateError(f"cannot translate: 'parallel' needs structures with a "
                                     f"direction (walls, rows, ...), not a {s.kind}")
    _relate(structs, rels, c, gap, bool(parsed.pair))
    used_sides = any(t.cat == "SIDE" for t in parsed.toks)
    total = sum(s.parts() for s in structs)
    if total > c.capacity:
        raise TranslateError(f"cannot build: {total} parts do not fit in the workspace (it "
                             f"holds at most {c.capacity} of these parts)")
    body = [f"    // assumed: {n}" for n in notes]
    if used_sides:
        body.append(f"    // {c.convention()}")
    for s in structs:
        body.append("    " + _call(s, c))
    if limit is not None:
        body.append(f"    max height {fmt(limit)}")
    if apart is not None and len(structs) > 1:
        body.append(f"    apart {fmt(apart)}")
    return "design command {\n" + "\n".join(body) + "\n}\n"


def _limits(limits: list[Phrase], c: CellGeometry) -> float | None:
    out = None
    for p in limits:
        v = float(p.nums()[0])
        u = p.first("LUNIT")
        if p.first("UNIT") or p.first("LEVEL") or not u:  # "at most 3 high": 3 levels
            h = v * c.sz
        else:
            h = v * {"m": 1.0, "cm": 0.01, "mm": 0.001}[u.value if u else "m"]
        if h <= 0:
            raise TranslateError(f"cannot translate: a height limit of {fmt(v)} leaves no "
                                 "room for any part")
        out = h if out is None else min(out, h)
    return out


def _structure(f: Frame, c: CellGeometry, limit: float | None, notes: list[str],
               command: str) -> DraftStructure:
    """One frame of the command as a structure: its kind, part type, sizes, placement and
    objectives; every phrase must be read (an unread one is named)."""
    ph = list(f.phrases)
    counts = [p for p in ph if p.rule == "count"]
    kind = _kind(f, ph, counts, notes, command)
    s = DraftStructure(DESIGN_KIND.get(kind, kind))
    t = _Phrases(ph, kind)
    _part_type(s, t, c, kind)
    _sizes(s, t, f, c, kind, counts, notes)
    used = t.used
    _placement(s, ph, used, c, kind, notes)
    for k, q in enumerate(ph):
        if q.rule == "obj" and k not in used:
            used.add(k)
            _objective(s, q, kind, notes)
    left = [q for k, q in enumerate(ph) if k not in used]
    if left:
        q = left[0]
        words = " ".join(tk.text for tk in q.toks)
        raise TranslateError(f"cannot translate: did not understand '{words}' (column "
                             f"{q.toks[0].col}) for a {kind}")
    return _finish(s, kind, c, limit, notes)


def _kind(f: Frame, ph: list[Phrase], counts: list[Phrase], notes: list[str],
          command: str) -> str:
    """The structure kind a frame names (or implies: "4 steps", "the tallest", N parts)."""
    kind = f.kind or f.weak
    if kind is None and any(q.rule == "obj" and q.toks[0].value == "tallest" for q in ph):
        kind = "tower"
    if any(q.rule == "step" for q in ph) and f.kind is None:
        kind = "staircase"  # "4 steps": steps name a staircase (over 'stack', 'pack')
    if kind is None:
        if counts and counts[0].has("UNIT"):
            kind = "packing"
            if not any(q.rule in ("region", "half", "corner", "middle", "edge") for q in ph):
                notes.append("parts with no structure named = a packing on the workspace "
                             "floor (the solver places them)")
        else:
            raise TranslateError(f"cannot translate: '{command.strip()}' names no structure "
                                 "(tower, row, wall, platform, block, enclosure, ring, arch, "
                                 "bridge, canopy, staircase, pyramid, or pack N cubes)")
    if f.kind is None and f.weak == "packing" and f.weak_text in LIKE:
        notes.append(f"'{f.weak_text}' = the solver's choice: a packing on the workspace "
                     "floor")
    if kind == "packing" and any(q.rule in ("at", "near") for q in ph) and counts \
            and counts[0].nums() and counts[0].nums()[0] == 1:
        kind = "tower"  # "a single can at x X y Y": one part, a tower of one
        notes[:] = [n for n in notes if not n.startswith("parts with no structure named")]
    return kind


class _Phrases:
    """The phrases of one frame and which are read (each phrase is read once)."""

    def __init__(self, ph: list[Phrase], kind: str) -> None:
        self.ph, self.kind = ph, kind
        self.used: set[int] = set()

    def take(self, rule: str, pred: Callable[[Phrase], bool] | None = None) -> Phrase | None:
        """The first unread phrase of ``rule`` (meeting ``pred``), now read."""
        for k, p in enumerate(self.ph):
            if k not in self.used and p.rule == rule and (pred is None or pred(p)):
                self.used.add(k)
                return p
        return None

    def dim(self, axis: str, after_pillar: bool | None = None) -> Any:
        """The number of the first unread size phrase on ``axis`` (before or after a
        pillar phrase when asked), now read."""
        ph = self.ph
        for k, p in enumerate(ph):
            if k in self.used or p.rule != "dim":
                continue
            t = p.first("DIM") or p.must("DIMN")
            if t.value != axis:
                continue
            if after_pillar is not None:
                pil = any(q.rule == "pillar" for q in ph[:k])
                if pil != after_pillar:
                    continue
            self.used.add(k)
            return p.nums()[0]
        return None

    def one(self, *vals: Any, what: str) -> Any:
        """The one value several phrases give (None: none); two different ones: an error."""
        got = [v for v in vals if v is not None]
        if len({float(v) for v in got}) > 1:
            raise TranslateError(f"cannot translate: two different {what} for a {self.kind}: "
                                 + " and ".join(f"{float(v):g}" for v in got))
        return got[0] if got else None

    @staticmethod
    def num(p: Phrase | None) -> Any:
        """A phrase's first number (None for no phrase)."""
        return p.nums()[0] if p is not None else None


def _part_type(s: DraftStructure, t: _Phrases, c: CellGeometry, kind: str) -> None:
    """The one part type the frame's nouns name (the cell's default when none)."""
    nouns = [(tk.value, tk.text) for q in t.ph for tk in q.toks if tk.cat in ("UNIT", "PART")]
    types = {c.part_type(v, w) for v, w in nouns}
    if len(types) > 1:
        raise TranslateError(f"cannot translate: one {kind} of several part types ("
                             f"{', '.join(sorted(types))}): structures of mixed parts are not "
                             "supported yet; build one structure per part type")
    ptype = types.pop() if types else c.default
    s.size = c.types[ptype]
    if ptype != c.default:
        s.params["type"] = ptype
    for k, q in enumerate(t.ph):
        if q.rule == "part":
            t.used.add(k)


# complexity: one case per structure kind and the phrases that size it
def _sizes(s: DraftStructure, t: _Phrases, f: Frame, c: CellGeometry, kind: str,  # noqa: C901
           counts: list[Phrase], notes: list[str]) -> None:
    """The kind's size parameters from its phrases (counts, sizes, levels, steps, spans)."""
    take, dim, one, num = t.take, t.dim, t.one, t.num
    # "step" phrases name a staircase even without the noun: "4 steps"
    steps = num(take("step"))
    dims = take("dims")
    dv = dims.nums() if dims is not None else []
    along = take("along")
    if along is not None:
        s.params["along"] = along.must("AXIS").value
    p = s.params
    if kind == "tower":
        p["n"] = one(num(take("count")), dim("h"), num(take("level")), steps,
                     what="heights")
    elif kind in ("row", "wall"):
        p["width"] = one(dim("w"), dv[0] if dv else None,
                         num(take("count")) if kind == "row" else None, what="lengths")
        p["height"] = one(dim("h"), num(take("level")), dv[1] if len(dv) > 1 else None,
                          what="heights")
        if kind == "row":
            p["height"] = p["height"] or 1
    elif kind in ("platform", "block", "box"):
        p["w"] = one(dim("w"), dv[0] if dv else None, what="widths")
        p["d"] = one(dim("d"), dv[1] if len(dv) > 1 else None, what="depths")
        p["h"] = one(dim("h"), num(take("level")), dv[2] if len(dv) > 2 else None,
                     what="heights")
        if kind == "platform":
            if p["h"] not in (None, 1):
                raise TranslateError(f"cannot translate: a {kind} is one layer; for "
                                     f"{fmt(p['h'])} layers say 'block'")
            p["h"] = 1
    elif kind in ("enclosure", "ring", "square"):
        p["w"] = one(dim("w"), dv[0] if dv else None, what="widths")
        p["d"] = one(dim("d"), dv[1] if len(dv) > 1 else None, what="depths")
        p["h"] = one(dim("h"), num(take("level")), dv[2] if len(dv) > 2 else None,
                     what="heights")
        if p["h"] is None and kind in ("ring", "square"):
            p["h"] = 1
            word = f.kind_text if kind == "ring" else "walled square"
            notes.append(f"'{word}' = enclosure one course high")
    elif kind in ("arch", "bridge"):
        p["span"] = one(num(take("span")), dim("w", False), num(take("count")),
                        what="spans")
        take("pillar")
        p["pillar"] = one(dim("h"), what="pillar heights")
    elif kind == "canopy":
        pil = take("pillar")
        if pil is not None and pil.nums() and int(pil.nums()[0]) != 4:
            raise TranslateError("cannot translate: a canopy stands on four pillars (for two "
                                 "say 'arch' or 'bridge')")
        p["height"] = one(dim("h"), what="heights")
    elif kind == "staircase":
        p["steps"] = one(steps, dim("h"), num(take("level")), num(take("count")),
                         what="step counts")
    elif kind == "pyramid":
        base_at = take("base", lambda q: q.has("BASEAT"))
        p["base"] = one(num(take("base", lambda q: q.has("NUM"))), num(take("level")),
                        dim("w") if base_at is not None or True else None,
                        num(take("count", lambda q: not q.has("UNIT"))), what="bases")
    elif kind == "packing":
        p["n"] = one(*(num(take("count")) for _ in range(len(counts))), what="counts")
        lv = take("level")
        if lv is not None:  # "in one layer": a height limit of the design
            s.layers = float(lv.nums()[0]) * c.sz


def _placement(s: DraftStructure, ph: list[Phrase], used: set[int], c: CellGeometry, kind: str,
               notes: list[str]) -> None:
    for k, q in enumerate(ph):
        if k in used or q.rule not in ("at", "near", "corner", "middle", "edge", "half",
                                       "region"):
            continue
        used.add(k)
        sides = {t.value for t in q.toks if t.cat == "SIDE"}
        n = [float(v) for v in q.nums()]
        box = None
        if q.rule == "at":
            s.at = (n[0], n[1])
        elif q.rule == "near":
            s.at, s.soft = (n[0], n[1]), True
        elif q.rule == "region":
            box = (n[0], n[1], n[2], n[3])
            if box[0] >= box[1] or box[2] >= box[3]:
                raise TranslateError(f"cannot translate: the region x {fmt(n[0])} to "
                                     f"{fmt(n[1])} y {fmt(n[2])} to {fmt(n[3])} is empty")
        elif q.rule == "corner":
            if not sides and n:  # the corner nearest a point
                sides = {"right" if n[0] > c.cx else "left",
                         "back" if n[1] > c.cy else "front"}
            elif not sides:
                sides = {"front", "left"}
                notes.append("'the corner' = the front left corner")
            if len(sides & {"front", "back"}) != 1 or len(sides & {"left", "right"}) != 1:
                if len(sides & {"front", "back"}) > 1 or len(sides & {"left", "right"}) > 1:
                    raise TranslateError("cannot translate: a corner is one of front|back "
                                         "and one of left|right")
                sides |= {"front"} if not sides & {"front", "back"} else set()
                sides |= {"left"} if not sides & {"left", "right"} else set()
                notes.append(f"'the {' '.join(sorted(sides))} corner' (the side not given "
                             "is front or left)")
            box = c.box_of(sides)
            x = c.side("left" if "left" in sides else "right")[1]
            y = c.side("front" if "front" in sides else "back")[1]
            s.at = (x, y)
        elif q.rule == "middle":
            s.at = (c.cx, c.cy)
            qx, qy = (c.x1 - c.x0) / 4, (c.y1 - c.y0) / 4
            box = (c.cx - qx, c.cx + qx, c.cy - qy, c.cy + qy)
        elif q.rule == "edge":
            side = next(iter(sides))
            axis, v = c.side(side)
            s.at = (v, c.cy) if axis == "x" else (c.cx, v)
            box = c.box_of({side})
            if "along" in KINDS.get(s.kind, {}) and "along" not in s.params:
                s.params["along"] = "y" if axis == "x" else "x"
        elif q.rule == "half":
            box = c.box_of(sides)
            s.at = ((box[0] + box[1]) / 2, (box[2] + box[3]) / 2)
        if q.rule in ("corner", "middle", "edge", "half"):
            s.soft, s.box = True, box  # a place word: a wish, kept inside its area
        if s.kind == "packing":
            if q.rule in ("at", "near"):
                raise TranslateError("cannot translate: a packing is placed by its region "
                                     "(say 'in x A to B y C to D' or 'in the left half')")
            s.at, s.region = None, box
        elif q.rule == "region":
            raise TranslateError(f"cannot translate: a region 'x .. to .. y .. to ..' is for "
                                 f"a packing; place a {kind} with 'at x X y Y'")


def _objective(s: DraftStructure, q: Phrase, kind: str, notes: list[str]) -> None:
    t = q.toks[0]
    v = t.value
    if v in ("min_height", "min_footprint"):
        if s.kind != "packing":
            raise TranslateError(f"cannot translate: did not understand '{t.text}' for a "
                                 f"{kind} (only a packing can be packed tightly or low)")
        s.minimize = "height" if v == "min_height" else "footprint"
        if v == "min_footprint":
            notes.append(f"'{t.text}' = minimize footprint")
    elif v == "tallest":
        if s.kind != "tower":
            raise TranslateError(f"cannot translate: '{t.text}' for a {kind}: only a tower "
                                 "is built as tall as possible")
        s.tallest = True
        s.tallest_text = t.text
    elif v == "symmetric":
        s.cons.append("symmetric")
    elif v == "hollow":
        if s.kind not in ("enclosure", "square"):
            raise TranslateError(f"cannot translate: '{t.text}' for a {kind} (an enclosure "
                                 "or ring is hollow)")
    elif v == "big":
        sized = [k for k, x in s.params.items() if x is not None and k != "along"]
        if not sized:
            raise TranslateError(f"cannot translate: '{t.text}' gives no size: say how big "
                                 "(e.g. 'enclosure 5 by 3' or 'wall 5 wide')")
        notes.append(f"'{t.text}': the sizes given are used")


def _finish(s: DraftStructure, kind: str, c: CellGeometry, limit: float | None,
            notes: list[str]) -> DraftStructure:
    p = {k: v for k, v in s.params.items() if v is not None}
    for k, v in list(p.items()):
        if k not in ("along", "type"):
            p[k] = _int(v, f"'{k}'" if kind != "packing" else "the number of parts")
    if kind == "box":
        if not all(k in p for k in ("w", "d", "h")):
            raise TranslateError("cannot translate: a 'box' needs its sizes (e.g. 'box of "
                                 "cubes 3 by 2 by 2')")
        if min(p["w"], p["d"]) > 2:
            raise TranslateError(f"cannot translate: 'box {p['w']} by {p['d']} by {p['h']}' "
                                 "is ambiguous: a dense block or a hollow enclosure? say "
                                 "'dense block' or 'hollow box'")
        notes.append(f"'box {p['w']} by {p['d']} by {p['h']}' = dense block (every cube is "
                     "on the rim, so solid and hollow are the same)")
        s.kind = "block"
    if kind == "square":
        if p.get("w") is None or p.get("w") != p.get("d"):
            raise TranslateError("cannot translate: a walled square needs equal sides (e.g. "
                                 "'walled square 3 by 3')")
        s.kind = "enclosure"
    if s.kind == "enclosure" and (p.get("w", 3) < 3 or p.get("d", 3) < 3):
        raise TranslateError(f"cannot translate: a {kind} needs both sides at least 3 (a ring "
                             "around an open middle); for a solid one say 'block'")
    if s.kind == "packing" and "n" not in p:
        raise TranslateError("cannot translate: how many cubes to pack? (say 'pack 12 "
                             "cubes')")
    if s.kind == "tower" and "n" not in p and (limit is not None or s.tallest):
        lim = min(c.top, limit) if limit is not None else c.top
        n = int(lim / s.size[2] + 1e-9)
        if n < 1:
            raise TranslateError(f"cannot translate: no tower fits under {lim:g} m (one part "
                                 f"is {s.size[2]:g} m high)")
        p["n"] = n
        why = f"max height {fmt(limit)}" if limit is not None and limit <= c.top \
            else "the workspace height"
        who = f"'{s.tallest_text}'" if s.tallest else "a tower with no count"
        notes.append(f"{who} = the tallest tower under {why}: {n} parts")
    s.params = p
    for cons in s.cons:
        if cons.startswith("max height"):
            limit = min(limit, float(cons.split()[-1])) if limit else float(cons.split()[-1])
    if limit is not None and s.kind != "packing":
        h = s.height()
        if h * s.size[2] > limit + 1e-9:
            raise TranslateError(f"cannot translate: contradictory request: the {kind} is {h} "
                                 f"part(s) high ({fmt(h * s.size[2])} m), above the limit of "
                                 f"{fmt(limit)} m")
    # taller than the workspace: the solver says so at Design ("cannot build")
    return s


def _relate(structs: list[DraftStructure], rels: list[str | None], c: CellGeometry, gap: float,
            paired: bool) -> None:
    """Anchor structure k beside structure k+1 (relations, 'side by side', copies)."""
    for k in range(len(rels) - 1, -1, -1):
        rel = rels[k]
        if rel == "done" or (rel is None and not paired):  # "done": copies placed already
            continue
        a, b = structs[k], structs[k + 1]
        if "packing" in (a.kind, b.kind):
            raise TranslateError("cannot translate: a packing is placed by its region, not "
                                 "beside another structure")
        fa, fb = a.footprint(a.size[:2]), b.footprint(b.size[:2])
        if rel in (None, "pair", "next"):
            long_x = all(f[0] > f[1] for f in (fa, fb))
            rel = "back" if long_x else "right"
        dx = (fa[0] + fb[0]) / 2 + gap
        dy = (fa[1] + fb[1]) / 2 + gap
        off = {"right": (dx, 0.0), "left": (-dx, 0.0), "front": (0.0, -dy),
               "back": (0.0, dy)}[rel]
        if b.at is None and a.at is None and k == len(rels) - 1:
            b.at = (c.cx - off[0] / 2, c.cy - off[1] / 2)
        elif b.at is None and a.at is not None:
            b.at = (a.at[0] - off[0], a.at[1] - off[1])
        if b.at is None:
            b.at = (c.cx, c.cy)
        if a.at is None:
            a.at = (b.at[0] + off[0], b.at[1] + off[1])


def _call(s: DraftStructure, c: CellGeometry) -> str:
    if s.kind == "packing":
        x0, x1, y0, y1 = s.region or (c.x0, c.x1, c.y0, c.y1)
        call = (f"packing(n={s.params['n']}, region x [{fmt(x0)}, {fmt(x1)}] "
                f"y [{fmt(y0)}, {fmt(y1)}]"
                + (f", minimize {s.minimize}" if s.minimize else "") + ")")
    else:
        order = [*KINDS[s.kind], "type"]
        items = sorted(s.params.items(), key=lambda kv: order.index(kv[0]))
        call = f"{s.kind}(" + ", ".join(f"{'part' if k == 'type' else k}={v}"
                                        for k, v in items) + ")"
    if s.kind == "packing" and s.params.get("type"):
        call = call[:-1] + f", part={s.params['type']})" if "part=" not in call else call
    if s.at is not None:
        call += f" {'near' if s.soft else 'at'} ({fmt(s.at[0])}, {fmt(s.at[1])})"
    if s.box is not None and s.kind != "packing":
        x0, x1, y0, y1 = s.box
        s.cons.append(f"inside x [{fmt(x0)}, {fmt(x1)}] y [{fmt(y0)}, {fmt(y1)}]")
    if s.cons:
        call += " [" + ", ".join(s.cons) + "]"
    return call


def _into(group: list[DraftStructure], c: CellGeometry) -> None:
    """Shift a group of copies placed by a place word (corner, edge, half) so that their
    footprints lie inside its area: the copies keep their spacing."""
    g0 = group[0]
    if not g0.soft or g0.box is None or any(g.at is None for g in group):
        return
    x0, x1, y0, y1 = g0.box
    fx, fy = g0.footprint(g0.size[:2])
    ats = [g.at for g in group if g.at is not None]
    lo = (min(a[0] for a in ats) - fx / 2, min(a[1] for a in ats) - fy / 2)
    hi = (max(a[0] for a in ats) + fx / 2, max(a[1] for a in ats) + fy / 2)
    dx = max(0.0, x0 - lo[0]) - max(0.0, hi[0] - x1)
    dy = max(0.0, y0 - lo[1]) - max(0.0, hi[1] - y1)
    for g in group:
        assert g.at is not None
        g.at = (g.at[0] + dx, g.at[1] + dy)
