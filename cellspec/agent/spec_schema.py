"""Translation constrained to the design language, for small models.

The model does not write DSL text: it fills a JSON object whose schema is built from the
design language itself (:data:`cellspec.dsl.design.KINDS`, ``WORD_PARAMS``, ``GOALS``)
and the cell's part types: one object per structure kind (``anyOf``), whose ``kind`` is
an enum, integer parameters, word parameters as enums, the part type as an enum of the
cell's types, an optional anchor, and a height limit in levels or metres. A server that
enforces the schema (llama.cpp's grammar, vLLM's guided decoding, OpenAI's strict
outputs) cannot answer outside the language. :func:`render` writes the answer as DSL
text, which the design parser parses and checks as any spec; :func:`grounding` checks
the answer against the command's own words (the lexicon of the offline parser): every
number of the command used and no number invented, the structure nouns the command names,
the part types it names, placement and limit words that the answer does not carry, open
requests the lexicon refuses. A complaint goes back to the model once (the repair round),
then to the offline parser.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cellspec.agent.nl.lexer import lexicon
from cellspec.dsl import design as _design
from cellspec.dsl.design import GOALS, KINDS, WORD_PARAMS

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

DRAFT_NAME = "SpecDraft"  # the schema's name (json_schema mode, the cassette key)
MAX_STRUCTURES = 4
NULL_NUM: dict[str, Any] = {"anyOf": [{"type": "number"}, {"type": "null"}]}
NULL_INT: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
DESIGN_KIND = {"row": "wall", "platform": "block", "ring": "enclosure", "box": "block",
               "square": "enclosure"}  # lexicon nouns that are another kind of the language


class DraftError(ValueError):
    """A model answer that does not fit the schema or the design language."""


def part_param() -> str | None:
    """The word a structure names its part type with (``part=`` when the language has that
    alias, else ``type=``; None: the language has none)."""
    names = [k for k, v in WORD_PARAMS.items() if v is None]
    aliases = getattr(_design, "PARAM_ALIASES", {})
    alias = next((a for a, t in aliases.items() if t in names), None)
    return alias or (names[0] if names else None)


def _canon_param(name: str) -> str:
    """The written name of a parsed parameter (``type`` is written ``part`` when aliased)."""
    pp = part_param()
    return pp if pp is not None and name in WORD_PARAMS and WORD_PARAMS[name] is None \
        else name


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def kind_schema(kind: str, types: list[str]) -> dict[str, Any]:
    """The schema of one structure of ``kind``: its parameters, part type and place."""
    props: dict[str, Any] = {"kind": {"type": "string", "enum": [kind]}}
    for p in KINDS[kind]:
        choices = WORD_PARAMS.get(p, ...)
        if choices is ...:
            props[p] = {"type": "integer"}
        else:
            props[p] = {"type": "string", "enum": list(choices or types)}
    pp = part_param()
    if pp is not None and len(types) > 1:
        props[pp] = {"type": "string", "enum": list(types)}
    if kind == "packing":
        for k in ("x_from", "x_to", "y_from", "y_to"):
            props[k] = {"type": "number"}
        props["minimize"] = {"type": "string", "enum": list(GOALS)}
    else:
        props["x"], props["y"] = dict(NULL_NUM), dict(NULL_NUM)
    return _obj(props)


def draft_schema(cell: Cell) -> dict[str, Any]:
    """The whole answer's schema: structures (one ``anyOf`` branch per kind of the
    language), a height limit in levels or metres, and ``cannot``."""
    types = list(cell.part_types)
    return _obj({
        "structures": {"type": "array", "maxItems": MAX_STRUCTURES,
                       "items": {"anyOf": [kind_schema(k, types) for k in KINDS]}},
        "max_levels": dict(NULL_INT), "max_height_m": dict(NULL_NUM),
        "cannot": {"anyOf": [{"type": "string"}, {"type": "null"}]}})


def _num(v: Any, what: str) -> Decimal:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise DraftError(f"{what} must be a number, not {v!r}")
    try:
        d = Decimal(repr(v)).normalize() if isinstance(v, float) else Decimal(v)
    except InvalidOperation:
        raise DraftError(f"{what} must be a finite number") from None
    if not d.is_finite() or abs(d) > 1000:
        raise DraftError(f"{what} must be a finite number within 1000")
    return d


def _fmt(d: Decimal) -> str:
    s = format(d.normalize(), "f")
    return s.rstrip("0").rstrip(".") if "." in s else s


def part_height(cell: Cell, structures: list[dict[str, Any]]) -> Decimal:
    """The height of one level: the tallest part type the structures use (their own, or
    the cell's first)."""
    pp = part_param()
    names = {s[pp] for s in structures if pp and s.get(pp) is not None} & set(cell.part_types)
    types = [cell.part_types[n] for n in names] or list(cell.part_types.values())[:1]
    return max(Decimal(repr(float(t.size[2]))) for t in types)


def render(obj: Any, cell: Cell) -> str:
    """DSL text of one ``design`` statement from a model answer (DraftError: it does not
    fit the schema); the design parser then checks it as any spec."""
    if not isinstance(obj, dict) or not isinstance(obj.get("structures"), list):
        raise DraftError("the answer has no list of structures")
    pp = part_param()
    lines = []
    for k, s in enumerate(obj["structures"][:MAX_STRUCTURES], 1):
        if not isinstance(s, dict) or s.get("kind") not in KINDS:
            raise DraftError(f"structure {k}: kind must be one of {', '.join(KINDS)}")
        kind = s["kind"]
        params = []
        for p in KINDS[kind]:
            v = s.get(p)
            if v is None:
                continue
            if p in WORD_PARAMS:
                params.append(f"{p}={v}")
            elif isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
                raise DraftError(f"structure {k}: {p} must be a whole number, not {v!r}")
            else:
                params.append(f"{p}={int(v)}")
        if pp and isinstance(s.get(pp), str) and s[pp] in cell.part_types:
            params.append(f"{pp}={s[pp]}")
        at = ""
        if kind == "packing":
            r = [_fmt(_num(s.get(f), f"structure {k}: {f}"))
                 for f in ("x_from", "x_to", "y_from", "y_to")]
            params.append(f"region x [{r[0]}, {r[1]}] y [{r[2]}, {r[3]}]")
            if s.get("minimize") in GOALS:
                params.append(f"minimize {s['minimize']}")
        elif s.get("x") is not None or s.get("y") is not None:
            if s.get("x") is None or s.get("y") is None:
                raise DraftError(f"structure {k}: give both x and y, or neither")
            word = "near" if s.get("near") is True else "at"
            at = (f" {word} ({_fmt(_num(s['x'], f'structure {k}: x'))}, "
                  f"{_fmt(_num(s['y'], f'structure {k}: y'))})")
        lines.append(f"    {kind}({', '.join(params)}){at}")
    h = max_height(obj, cell)
    if h is not None:
        lines.append(f"    max height {_fmt(h)}")
    if obj.get("apart_m") is not None:
        lines.append(f"    apart {_fmt(_num(obj['apart_m'], 'apart_m'))}")
    return "design command {\n" + "\n".join(lines) + "\n}\n"


def max_height(obj: dict[str, Any], cell: Cell) -> Decimal | None:
    """The answer's height limit in metres (levels times the part height), or None."""
    hs = []
    if obj.get("max_levels") is not None:
        n = _num(obj["max_levels"], "max_levels")
        if n != int(n) or n < 1:
            raise DraftError(f"max_levels must be a whole number of at least 1, not {n}")
        hs.append(n * part_height(cell, obj["structures"]))
    if obj.get("max_height_m") is not None:
        hs.append(_num(obj["max_height_m"], "max_height_m"))
    return min(hs) if hs else None


# --- grounding: the answer against the command's own words -----------------------------

_WORD = re.compile(r"\d+(?:\.\d+)?|\.\d+|[a-z]+(?:'[a-z]+)?")


def _norm(command: str) -> str:
    text = command.lower().replace("-", " ").replace("_", " ")
    text = re.sub(r"(\d)x(\d)", r"\1 x \2", text)
    return " " + " ".join(_WORD.findall(text)) + " "


def _has(text: str, phrase: str) -> bool:
    """Whether ``phrase`` (or its plural) occurs in the normalised ``text`` as words."""
    p = " ".join(_WORD.findall(phrase.lower().replace("-", " ")))
    return bool(p) and any(f" {p}{end} " in text for end in ("", "s", "es"))


@lru_cache(maxsize=1)
def _vocab() -> dict[str, Any]:
    raw = lexicon().raw
    units = {w for ws in raw["unit"].values() for w in ws}
    kinds = {w: DESIGN_KIND.get(k, k) for k, ws in raw["kind"].items() for w in ws
             if w not in units and DESIGN_KIND.get(k, k) in KINDS}
    weak = {w: k for k, ws in raw["weak_kind"].items() for w in ws if k in KINDS}
    weak.update({w: "staircase" for w in raw["step"]["step"]})
    place = [w for sec in ("corner", "edge", "middle", "half", "rel", "sbs")
             for ws in raw[sec].values() for w in ws]
    apart = [w for ws in raw["apart"].values() for w in ws]
    place += [w for ws in raw["side_words"].values() for w in ws]
    objective = {k: ws for k, ws in raw["objective"].items()}
    refuse = [(w, why) for _, (ws, why) in raw["refuse"].items() for w in ws]
    return {"kinds": kinds, "weak": weak, "place": place, "apart": apart,
            "limit": raw["limit"]["max_height"], "objective": objective, "refuse": refuse,
            "lunit": raw["lunit"]}


def refused_phrase(command: str) -> str | None:
    """The lexicon's refusal of an open request in ``command`` ('nice', 'several', 'over
    there'), or None: no answer to such a command can be right, so no repair round."""
    text = _norm(command)
    for phrase, why in _vocab()["refuse"]:
        if _has(text, phrase):
            return f"'{phrase}'" + ("" if why.startswith(":") else " ") + why
    return None


def command_numbers(command: str) -> set[Decimal]:
    """The numbers a command says: digits, number words (twenty one), quantities (a dozen)."""
    lx = lexicon()
    text = _norm(command)
    out: set[Decimal] = set()
    words = text.split()
    for i, w in enumerate(words):
        if w[0].isdigit() or w[0] == ".":
            out.add(Decimal(w).normalize())
        elif w in lx.tens:
            v = lx.tens[w]
            nxt = words[i + 1] if i + 1 < len(words) else ""
            out.add(Decimal(v + (lx.numbers[nxt] if 0 < lx.numbers.get(nxt, 0) < 10 else 0)))
        elif w in lx.numbers:
            out.add(Decimal(lx.numbers[w]))
        elif w == "hundred":
            out.add(Decimal(100))
    for phrase, v in lx.quantity.items():
        if _has(text, phrase):
            out.add(Decimal(v))
    return out


def _answer_numbers(obj: dict[str, Any], cell: Cell) -> tuple[set[Decimal], set[Decimal]]:
    """(every number of the answer, those that differ from the language's defaults)."""
    every: set[Decimal] = set()
    chosen: set[Decimal] = set()
    for s in obj["structures"]:
        for p, default in KINDS[s["kind"]].items():
            v = s.get(p)
            if p not in WORD_PARAMS and v is not None:
                d = _num(v, p)
                every.add(d)
                if v != default and d != 1:
                    chosen.add(d)
        for f in ("x", "y", "x_from", "x_to", "y_from", "y_to"):
            if s.get(f) is not None:
                d = _num(s[f], f).normalize()
                every.add(d)
                chosen.add(d)
    for f in ("max_levels", "max_height_m", "apart_m"):
        if obj.get(f) is not None:
            d = _num(obj[f], f).normalize()
            every.add(d)
            chosen.add(d)
    return every, chosen


def _scaled(nums: set[Decimal]) -> set[Decimal]:
    """The command's numbers and their cm/mm readings in metres."""
    return nums | {(n / 100).normalize() for n in nums} | {(n / 1000).normalize() for n in nums}


def grounding(command: str, obj: dict[str, Any], cell: Cell) -> list[str]:  # noqa: C901
    """What in the answer the command does not say, or what the command says that the
    answer does not carry (empty: the answer is grounded in the command's words)."""
    v = _vocab()
    text = _norm(command)
    out: list[str] = []
    for phrase, why in v["refuse"]:
        if _has(text, phrase):
            return [f"'{phrase}'" + ("" if why.startswith(":") else " ") + why]
    structures = obj["structures"]
    if not structures:
        return [obj.get("cannot") or "the answer names no structure"]
    kinds = {s["kind"] for s in structures}
    named = {k for w, k in v["kinds"].items() if _has(text, w)}
    weak = {k for w, k in v["weak"].items() if _has(text, w)}
    want = named or weak
    if want and kinds != want and not (not named and kinds <= want):
        out.append(f"the command names {', '.join(sorted(want))}; the answer has "
                   f"{', '.join(sorted(kinds))}")
    nums = command_numbers(command)
    every, chosen = _answer_numbers(obj, cell)
    ws = cell.workspace
    bounds = {Decimal(repr(float(b))).normalize() for b in (*ws.lo[:2], *ws.hi[:2])}
    invented = sorted(chosen - _scaled(nums) - bounds)
    if invented:
        out.append("the command does not say " + ", ".join(_fmt(d) for d in invented)
                   + " (use only its numbers; leave x, y and limits null when it gives none)")
    unused = sorted(n for n in nums if n not in every and n * 0 == 0
                    and not (every & {(n / 100).normalize(), (n / 1000).normalize()}))
    if unused:
        out.append("the answer does not use " + ", ".join(_fmt(d) for d in unused)
                   + " from the command")
    odd = unknown_part_word(command, cell)
    if odd:
        out.append(f"'{odd}' is not a part type of this cell (part types: "
                   + ", ".join(cell.part_types) + ")")
    pp = part_param()
    said = {t for t in cell.part_types if _has(text, t)}
    first = next(iter(cell.part_types), None)  # the part type a structure uses by default
    used = {s.get(pp) if s.get(pp) in cell.part_types else first for s in structures}
    if said and not said <= used and len(cell.part_types) > 1:
        out.append(f"the command asks for {', '.join(sorted(said))} parts")
    for s in structures:  # a part type the command does not name is the default
        if pp and s.get(pp) not in said:
            s.pop(pp, None)
    placed = any(s.get("x") is not None for s in structures)
    words = [w for w in v["place"] if _has(text, w)]
    if words and not placed:
        out.append(f"'{words[0]}' is not carried by the answer (give x and y, or say it "
                   "cannot be expressed)")
    gap = next((w for w in v["apart"] if _has(text, w)), None)
    if gap and obj.get("apart_m") is None:
        out.append(f"'{gap}' is not carried by the answer (apart D)")
    if any(_has(text, w) for w in v["limit"]) and max_height(obj, cell) is None:
        out.append("the command gives a height limit; the answer has none")
    for goal, ws in v["objective"].items():
        w = next((w for w in ws if _has(text, w)), None)
        if w is None:
            continue
        packed = any(s["kind"] == "packing" for s in structures)
        if not (packed and goal in ("min_height", "min_footprint")):
            out.append(f"'{w}' cannot be expressed by this answer")
    return out


def unknown_part_word(command: str, cell: Cell) -> str | None:
    """A word right after a count that is neither one of the cell's part types nor a word
    of the lexicon (``3 cans`` on a cell of cubes), or None: a model answering such a
    command with the cell's own parts would build a substitute."""
    lx = lexicon()
    words = _norm(command).split()
    firsts = {p.split()[0] for p in lx.phrases}
    for i, w in enumerate(words[:-1]):
        if not (w[0].isdigit() or w in lx.numbers or w in lx.tens):
            continue
        nxt = words[i + 1]
        forms = [nxt, nxt[:-1] if nxt.endswith("s") else nxt,
                 nxt[:-2] if nxt.endswith("es") else nxt]
        if set(forms) & set(cell.part_types):
            continue
        unit = next((lx.phrases[f] for f in forms if f in lx.phrases
                     and lx.phrases[f][0] == "UNIT"), None)
        if unit is not None:  # a part word: it must name one of this cell's types
            if unit[1] in cell.part_types or unit[1] == "cube" and len(cell.part_types) == 1:
                continue
            return nxt
        if nxt in lx.fillers or nxt in firsts or nxt[0].isdigit() or nxt in lx.numbers \
                or nxt in lx.tens or set(forms) & firsts:
            continue
        return nxt
    return None


def same_spec(a: Any, b: Any) -> bool:
    """Whether two parsed specs ask for the same thing (their sources aside)."""
    def canon(d: Any) -> Any:
        def cons(cs: Any) -> Any:
            return sorted(repr(c.model_dump(exclude={"source"})) for c in cs)
        return (sorted((s.kind, sorted(s.params.items()), s.at, s.region, s.minimize,
                        cons(s.constraints)) for s in d.structures), cons(d.constraints))
    return bool(canon(a) == canon(b))


# --- the prompt: short, the language's kinds, a few examples, the cell -----------------

PARAM_WORDS = {"n": "parts", "width": "long", "height": "levels", "base": "parts at the base",
               "steps": "steps", "span": "gap", "pillar": "levels", "pillars": "4",
               "w": "wide", "d": "deep", "h": "levels", "along": "x|y"}
EXAMPLES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("stack 4 cubes at x 0.3 y 0.2", {"structures": [{"kind": "tower", "n": 4, "x": 0.3,
                                                       "y": 0.2}]}),
    ("a row of 5 cubes along y", {"structures": [{"kind": "wall", "width": 5, "height": 1,
                                                   "along": "y"}]}),
    ("a wall 3 long and 2 high, at most 3 levels", {"structures": [
        {"kind": "wall", "width": 3, "height": 2}], "max_levels": 3}),
    ("a 3 by 2 platform", {"structures": [{"kind": "block", "w": 3, "d": 2, "h": 1}]}),
    ("pack 6 cubes in x 0.2 to 0.4 y 0.1 to 0.3", {"structures": [
        {"kind": "packing", "n": 6, "x_from": 0.2, "x_to": 0.4, "y_from": 0.1,
         "y_to": 0.3}]}),
)  # no `cannot` example: the 0.5B model copied it for 14 of 24 commands (docs/models.md)


def _example(obj: dict[str, Any]) -> str:
    import json
    return json.dumps(obj, separators=(", ", ": "))


def _prompt_facts(cell: Cell) -> tuple[str, str, str]:
    """What both translation prompts say of the language and the cell: the kinds with their
    parameters, the lexicon's synonyms of each kind, the cell's part types with sizes."""
    raw = lexicon().raw
    kinds = "; ".join(f"{k}(" + ", ".join(f"{p}: {PARAM_WORDS.get(p, p)}" for p in ps) + ")"
                      for k, ps in KINDS.items())
    syn = "; ".join(f"{DESIGN_KIND.get(k, k)} = {', '.join(ws[:4])}"
                    for k, ws in raw["kind"].items() if DESIGN_KIND.get(k, k) in KINDS
                    and k not in DESIGN_KIND)
    types = ", ".join(f"{n} ({float(t.size[0]):g} x {float(t.size[1]):g} x "
                      f"{float(t.size[2]):g} m)" for n, t in cell.part_types.items())
    return kinds, syn, types


def translate_prompt(cell: Cell) -> str:
    """The system prompt of a translation: the kinds of the design language with their
    parameters, the lexicon's synonyms, the cell's part types and limits, a few examples."""
    kinds, syn, types = _prompt_facts(cell)
    ws = cell.workspace
    pp = part_param()
    part = (f" Part types: {types}; set {pp} only when the command names one."
            if len(cell.part_types) > 1 and pp else f" Parts: {types}.")
    ex = "\n".join(f"{c} -> {_example(o)}" for c, o in EXAMPLES)
    return (
        "Translate a robot work-cell command into JSON for the cellspec design language. "
        f"Structures: {kinds}. Words: {syn}; row = wall with height 1; platform, slab = "
        "block with h 1; ring = enclosure with h 1; stack, pile = tower. x, y: the centre "
        "in metres, only when the command gives both numbers, else null. max_levels: a "
        "height limit in levels; max_height_m: one in metres. Use only numbers the command "
        "says. When it asks for no structure, or for something these fields cannot say, "
        f"structures [] and cannot = why.\nCell: workspace x [{float(ws.lo[0]):g}, "
        f"{float(ws.hi[0]):g}] y [{float(ws.lo[1]):g}, {float(ws.hi[1]):g}], height up to "
        f"{float(ws.hi[2]):g} m.{part}\nExamples:\n{ex}")


# --- the GBNF grammar of the design language (llama.cpp servers' `grammar` field) --------

GRAMMAR_NAME = "DesignGrammar"  # the cassette key of a grammar-constrained translation
LEVELS = re.compile(r"^\s*max levels (\d+)\s*$", re.M)


def _g(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dsl_grammar(cell: Cell) -> str:
    """A GBNF grammar of the answer: up to four structure lines of the design language
    (every kind of :data:`KINDS` with its parameters, word parameters as alternatives,
    the part type as one of the cell's), then an optional height limit; or ``cannot:``
    and a short reason. Built from the language at run time, so new kinds or parameters
    are in it."""
    types = list(cell.part_types)
    pp = part_param()
    rules = ['root ::= body | "cannot: " reason',
             'body ::= line ("\\n" line)? ("\\n" line)? ("\\n" line)? limit?',
             'reason ::= [a-zA-Z0-9 ,.\'()-]+',
             'int ::= [1-9] [0-9]? [0-9]?',
             'num ::= "-"? [0-9] ("." [0-9] [0-9]? [0-9]? [0-9]?)?',
             'at ::= (" at (" | " near (") num ", " num ")"',
             'limit ::= "\\nmax height " num | "\\nmax levels " int']
    alts = []
    for kind, params in KINDS.items():
        seq: list[str] = []
        for k, (p, _) in enumerate(params.items()):
            sep = "" if k == 0 else ", "
            choices = WORD_PARAMS.get(p, ...)
            if choices is ...:
                seq.append(f'{_g(sep + p + "=")} int')
            else:
                opts = " | ".join(_g(c) for c in (choices or types))
                seq.append(f'({_g(sep + p + "=")} ({opts}))?')
        if pp is not None and len(types) > 1:
            opts = " | ".join(_g(t) for t in types)
            seq.append(f'({_g(", " + pp + "=")} ({opts}))?')
        if kind == "packing":
            goals = " | ".join(_g(g) for g in GOALS)
            seq.append('", region x [" num ", " num "] y [" num ", " num "]"')
            seq.append(f'(", minimize " ({goals}))?')
            tail = ""
        else:
            tail = " at?"
        name = f"k-{kind}"
        rules.append(f'{name} ::= {_g(kind + "(")} {" ".join(seq)} ")"{tail}')
        alts.append(name)
    if "ApartConstraint" in dir(_design):  # design-wide spacing of the structures
        k = next(i for i, r in enumerate(rules) if r.startswith("limit ::="))
        rules[k] += ' | "\\napart " num'
    rules.insert(2, "line ::= " + " | ".join(alts))
    return "\n".join(rules) + "\n"


DSL_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("stack 4 cubes at x 0.3 y 0.2", "tower(n=4) at (0.3, 0.2)"),
    ("a row of 5 cubes along y", "wall(width=5, height=1, along=y)"),
    ("a wall 3 long and 2 high, at most 3 levels", "wall(width=3, height=2)\nmax levels 3"),
    ("a 3 by 2 platform", "block(w=3, d=2, h=1)"),
    ("a pyramid with a base of 4, no higher than 0.2 m", "pyramid(base=4)\nmax height 0.2"),
    ("pack 6 cubes in x 0.2 to 0.4 y 0.1 to 0.3",
     "packing(n=6, region x [0.2, 0.4] y [0.1, 0.3])"),
)  # no `cannot:` example: the 0.5B model copied it for 14 of 24 commands (docs/models.md)


def dsl_prompt(cell: Cell) -> str:
    """The system prompt of a grammar-constrained translation: the kinds with their
    parameters, the lexicon's synonyms, the cell, examples written in the language."""
    kinds, syn, types = _prompt_facts(cell)
    ws = cell.workspace
    pp = part_param()
    part = (f" Part types: {types}; write {pp}=NAME only when the command names one."
            if len(cell.part_types) > 1 and pp else f" Parts: {types}.")
    ex = "\n".join(f"{c} =>\n{o}" for c, o in DSL_EXAMPLES)
    return (
        "Translate a robot work-cell command into lines of the cellspec design language. "
        f"Structures: {kinds}. Words: {syn}; row = wall with height 1; platform, slab = "
        "block with h 1; ring = enclosure with h 1; stack, pile = tower. `at (x, y)`: the "
        "centre in metres, only when the command gives both numbers. `max levels N` or "
        "`max height H` (metres): a height limit; `near (x, y)` a soft place; `apart D`: "
        "structures D metres apart. Use only numbers the command says. When "
        "it asks for no structure, or for something these lines cannot say, answer "
        f"`cannot: why`.\nCell: workspace x [{float(ws.lo[0]):g}, {float(ws.hi[0]):g}] y "
        f"[{float(ws.lo[1]):g}, {float(ws.hi[1]):g}], height up to {float(ws.hi[2]):g} m."
        f"{part}\nExamples:\n{ex}")


def looks_like_lines(text: str) -> bool:
    """Whether an answer has the grammar's shape (a server that ignores the ``grammar``
    field answers in free text: then the JSON schema modes are used instead)."""
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return bool(lines) and (lines[0].startswith("cannot:") or all(
        x.startswith(("max height ", "max levels ", "apart ")) or x.split("(", 1)[0] in KINDS
        for x in lines))


def from_lines(text: str, cell: Cell) -> tuple[str | None, str | None, dict[str, Any] | None]:
    """(DSL text, None, the answer as a draft for :func:`grounding`) of a grammar answer,
    or (None, the model's reason, None) for ``cannot:``; the draft is read back from the
    parsed spec (DraftError or CellspecError when it does not parse)."""
    from cellspec.agent.base import parse_spec

    s = text.strip()
    if s.startswith("cannot:"):
        return None, s[len("cannot:"):].strip() or "the model gave no reason", None
    levels = [int(m) for m in LEVELS.findall(s)]
    body = LEVELS.sub("", s).strip()
    spec = parse_spec("design command {\n" + "\n".join(
        "    " + x.strip() for x in body.splitlines() if x.strip()) + "\n}\n")
    obj: dict[str, Any] = {"structures": [], "max_levels": min(levels) if levels else None,
                           "max_height_m": None}
    for st in spec.structures:
        d: dict[str, Any] = {"kind": st.kind,
                             **{_canon_param(k): v for k, v in st.params.items()}}
        if st.at is not None:
            d["x"], d["y"] = float(st.at[0]), float(st.at[1])
            if getattr(st, "soft", False):
                d["near"] = True
        for axis, lo, hi in st.region:
            d[f"{axis}_from"], d[f"{axis}_to"] = float(lo), float(hi)
        if st.kind == "packing" and st.minimize and "minimize" in body:
            d["minimize"] = st.minimize
        obj["structures"].append(d)
    hs = [float(c.h) for c in spec.constraints if c.kind == "max_height"]
    if hs:
        obj["max_height_m"] = min(hs)
    gaps = [float(getattr(c, "d", 0)) for c in spec.constraints if c.kind == "apart"]
    if gaps:
        obj["apart_m"] = gaps[0]
    return render(obj, cell), None, obj


def strip_invented(command: str, obj: dict[str, Any], cell: Cell) -> list[str]:
    """Take out of the answer what only adds a number the command does not say: an anchor
    whose x or y is invented, an invented height limit or spacing (small models copy the
    prompt's examples). Nothing is added or changed, so the answer only loses meaning the
    command never gave; the grounding then runs again. Returns what was dropped."""
    allowed = _scaled(command_numbers(command))
    ws = cell.workspace
    allowed |= {Decimal(repr(float(b))).normalize() for b in (*ws.lo[:2], *ws.hi[:2])}

    def invented(v: Any) -> bool:
        try:
            return _num(v, "value").normalize() not in allowed
        except DraftError:
            return False
    dropped = []
    for k, s in enumerate(obj.get("structures") or [], 1):
        if s.get("kind") == "packing" or s.get("x") is None:
            continue
        if invented(s.get("x")) or invented(s.get("y")):
            dropped.append(f"structure {k}'s position ({s['x']}, {s['y']})")
            s["x"] = s["y"] = None
            s.pop("near", None)
    for f in ("max_levels", "max_height_m", "apart_m"):
        if obj.get(f) is not None and invented(obj[f]):
            dropped.append(f"{f} {obj[f]}")
            obj[f] = None
    return dropped
