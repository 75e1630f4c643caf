"""Normalise a command and turn it into lexicon tokens (category, value, words, column).

Case and punctuation are dropped, plurals found (``towers`` -> ``tower``), number words
up to a hundred read (``twenty-one``), quantities read (``a couple`` = 2, ``a dozen`` = 12,
``a few`` = 3 with a visible assumption), ``3x2x2`` split into ``3 by 2 by 2``; then the
longest phrase of lexicon.toml at each position becomes one token. Words the lexicon does
not know are refused by name with the closest known phrase (rapidfuzz); open requests
(``over there``, ``whatever fits``) are refused with the lexicon's reason.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from importlib import resources
from typing import Any

from rapidfuzz import fuzz, process

from cellspec.agent.base import TranslateError

MAX_COMMAND = 2000  # characters: a command in words, not a document
DEFINITE = ("the", "that", "this", "my", "those", "these")
MODAL_NEXT = ("you", "i", "we", "u")  # "can you ...": "can" is the modal verb
VAGUE_SIZE = ("small", "little", "short", "tiny")  # fillers shown as `// assumed:` lines
MAX_PHRASE = 6  # words in the longest lexicon phrase
PUNCT = set("()[]{},;:!?.=\"'`/\\&+*#~|<>^%$@")
# section -> grammar terminal
CATS = {"kind": "KIND", "weak_kind": "WEAK", "unit": "UNIT", "dim": "DIM", "dim_noun": "DIMN",
        "level": "LEVEL", "step": "STEP", "span": "SPAN", "pillar": "PILLAR", "at": "AT",
        "axis": "AXIS", "by": "BY", "to": "TO", "from": "FROM", "corner": "CORNER",
        "edge": "EDGE", "middle": "MIDDLE", "near": "NEAR", "along": "ALONG",
        "region": "REGION", "and": "AND", "rel": "REL", "sbs": "SBS", "apart": "APART",
        "lunit": "LUNIT", "limit": "LIMIT", "objective": "OBJ", "side_words": "SIDE",
        "somewhere": "SOMEWHERE"}


@dataclass(frozen=True)
class Tok:
    """One token: grammar category, canonical value, the words it covers, 1-based column."""

    cat: str
    value: Any
    text: str
    col: int
    plural: bool = False


@dataclass(frozen=True)
class Lexicon:
    """lexicon.toml as lookup tables."""

    phrases: dict[str, tuple[str, Any]]  # surface phrase -> (category, canonical value)
    fillers: frozenset[str]
    refuse: dict[str, str]  # phrase -> reason
    quantity: dict[str, int]
    assumed: dict[str, str]
    numbers: dict[str, int]
    tens: dict[str, int]
    hundred: frozenset[str]
    sides: dict[str, tuple[str, str]]
    canonical: dict[str, list[str]]  # category section -> canonical forms (for prompts)
    vocabulary: tuple[str, ...]  # every known word and phrase (for suggestions)
    raw: dict[str, Any]


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    """The lexicon, loaded once from lexicon.toml (a duplicate phrase is a bug: it raises)."""
    data = tomllib.loads(resources.files(__package__).joinpath("lexicon.toml")
                         .read_text(encoding="utf-8"))
    phrases: dict[str, tuple[str, Any]] = {}
    both = {"block", "brick"}  # a kind and a part word: read by context (lexer below)
    for sec, cat in CATS.items():
        for canon, forms in data[sec].items():
            for f in forms:
                if f in phrases and not (f in both and {phrases[f][0], cat} <= {"KIND",
                                                                                "UNIT"}):
                    raise ValueError(f"lexicon.toml: '{f}' is in [{sec}] and as "
                                     f"{phrases[f][0]}")
                if f in phrases and cat == "UNIT":
                    continue  # keep the KIND entry; context decides
                phrases[f] = (cat, canon)
    for canon, forms in data["base"].items():
        for f in forms:
            phrases[f] = ("BASE" if canon == "base" else "BASEAT", canon)
    for canon, forms in data["half"].items():
        for f in forms:
            phrases[f] = ("HALF" if canon == "half" else "AREA", canon)
    for canon, forms in data["step"].items():
        for f in forms:
            phrases[f] = ("STEP", canon)
    refuse = {p: why for _, (ps, why) in data["refuse"].items() for p in ps}
    units = data["numbers"]["units"]
    vocab = sorted({*phrases, *refuse, *data["quantity"], *units, *data["numbers"]["tens"]})
    canonical = {sec: sorted(data[sec]) for sec in (*CATS, "base", "half")}
    return Lexicon(phrases=phrases, fillers=frozenset(data["filler"]["words"]), refuse=refuse,
                   quantity={k: int(v) for k, v in data["quantity"].items()},
                   assumed=dict(data["assumed"]),
                   numbers={w: i for i, w in enumerate(units)},
                   tens={w: 20 + 10 * i for i, w in enumerate(data["numbers"]["tens"])},
                   hundred=frozenset(data["numbers"]["hundred"]),
                   sides={k: (v[0], v[1]) for k, v in data["sides"].items()},
                   canonical=canonical, vocabulary=tuple(vocab), raw=data)


_RAW = re.compile(r"(?P<num>(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?:[x×]\d+(?:\.\d+)?)*)"
                  r"|(?P<word>[^\W\d_]+(?:['’][^\W\d_]+)?)|(?P<other>\S)")


def check_text(command: Any) -> str:
    """The command as text, or TranslateError for empty, oversized or control characters."""
    if not isinstance(command, str) or not command.strip():
        raise TranslateError("cannot translate: the command is empty")
    if len(command) > MAX_COMMAND:
        raise TranslateError(f"cannot translate: the command is {len(command)} characters "
                             f"long; a command is at most {MAX_COMMAND}")
    for k, ch in enumerate(command, 1):
        if unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs") and ch not in "\t\n\r":
            raise TranslateError(f"cannot translate: column {k}: control character "
                                 f"U+{ord(ch):04X} in the command")
    return command


def _words(command: str) -> list[tuple[str, str, int]]:
    """(kind, text, column) of each raw word: kind num|word|dash|other."""
    out = []
    for m in _RAW.finditer(command.lower()):
        col = m.start() + 1
        if m.group("num"):
            s = m.group("num")
            parts = re.split(r"[x×]", s)
            for i, p in enumerate(parts):
                if i:
                    out.append(("word", "by", col))
                out.append(("num", p, col))
        elif m.group("word"):
            out.append(("word", m.group("word").replace("’", "'"), col))
        else:
            ch = m.group("other")
            if ch in "-–":
                out.append(("dash", ch, col))
            elif ch not in PUNCT:
                out.append(("other", ch, col))
    return out


def _number(text: str, col: int) -> Decimal:
    try:
        v = Decimal(text)
    except InvalidOperation:
        raise TranslateError(f"cannot translate: column {col}: '{text}' is not a number"
                             ) from None
    if not v.is_finite():
        raise TranslateError(f"cannot translate: column {col}: '{text}' is not a number")
    return v


def _singular(w: str, known: Any) -> str | None:
    for cut, add in (("ies", "y"), ("es", ""), ("s", "")):
        if w.endswith(cut) and len(w) > len(cut) + 1 and w[:-len(cut)] + add in known:
            return w[:-len(cut)] + add
    return None


def tokenize(command: str, notes: list[str]) -> list[Tok]:
    """Lexicon tokens of ``command`` (see the module docstring); ``notes`` gets the
    visible assumptions. TranslateError names an unknown word with a suggestion."""
    lx = lexicon()
    items = _number_words(_words(check_text(command)), lx)
    toks: list[Tok] = []
    unknown: list[tuple[str, int]] = []
    i = 0
    while i < len(items):
        kind, text, col = items[i]
        if kind == "num":
            v = _number(text, col)
            if v < 0:
                raise TranslateError(f"cannot translate: column {col}: '{text}': a count or "
                                     "size is a positive number")
            toks.append(Tok("NUM", v, text, col))
            i += 1
            continue
        if kind == "other":
            unknown.append((text, col))
            i += 1
            continue
        if text == "can" and (i == 0 or (i + 1 < len(items)
                                         and items[i + 1][1] in MODAL_NEXT)):
            i += 1  # "can you build ...": the modal verb, not a can
            continue
        hit = _phrase(items, i, lx, notes)
        if hit is None:
            unknown.append((text, col))
            i += 1
            continue
        n, tok = hit
        if tok is None and text in DEFINITE and toks and toks[-1].cat == "REL":
            ref = next((w for w in items[i + 1:i + 4] if w[1] in lx.phrases
                        and lx.phrases[w[1]][0] == "KIND"), None)
            if ref is not None:
                raise TranslateError(
                    f"cannot translate: did not understand '{text} {ref[1]}' (column {col}): "
                    f"the cell names no such thing; describe the structure to build beside "
                    f"it (e.g. '{toks[-1].text} a {ref[1]} 3 wide') or give 'at x X y Y'")
        if tok is not None:
            toks.append(tok)
        i += n
    if unknown:
        raise TranslateError(unknown_message(unknown, toks, len(items)))
    return _resolve(toks)




def _number_words(raw: list[tuple[str, str, int]], lx: Lexicon) -> list[tuple[str, str, int]]:
    """Number words (twenty-one, a hundred) as digits; dashes between words dropped (they
    are spaces)."""
    items: list[tuple[str, str, int]] = []
    i = 0
    while i < len(raw):
        kind, text, col = raw[i]
        if kind == "word" and (text in lx.numbers or text in lx.tens):
            v = lx.numbers.get(text, lx.tens.get(text, 0))
            j = i + 1
            if text in lx.tens:
                k = j + 1 if j < len(raw) and raw[j][0] == "dash" else j
                if k < len(raw) and raw[k][1] in lx.numbers and 0 < lx.numbers[raw[k][1]] < 10:
                    v += lx.numbers[raw[k][1]]
                    j = k + 1
            if j < len(raw) and raw[j][1] == "hundred" and v < 10:
                v, j = v * 100, j + 1
            items.append(("num", str(v), col))
            i = j
            continue
        if kind == "word" and text == "hundred":
            items.append(("num", "100", col))
            i += 1
            continue
        if kind == "dash":
            i += 1
            continue
        items.append((kind, text, col))
        i += 1
    return items


def _phrase(items: list[tuple[str, str, int]], i: int, lx: Lexicon,
            notes: list[str]) -> tuple[int, Tok | None] | None:
    """The longest lexicon phrase (or its singular) at word ``i``: (its word count, its
    token, None for a filler), or None; a refused phrase raises TranslateError."""
    col = items[i][2]
    hit: tuple[int, Tok | None] | None = None
    for n in range(min(MAX_PHRASE, len(items) - i), 0, -1):
        ws = items[i:i + n]
        if any(w[0] != "word" for w in ws):
            continue
        words = [w[1] for w in ws]
        cands = [(" ".join(words), False)]
        sing = _singular(words[-1], lx.phrases.keys() | lx.fillers)
        if sing:
            cands.append((" ".join([*words[:-1], sing]), True))
        for phrase, plural in cands:
            if phrase in lx.refuse:
                why = lx.refuse[phrase]
                raise TranslateError(f"cannot translate: '{phrase}'"
                                     + ("" if why.startswith(":") else " ") + why)
            if phrase in lx.quantity:
                hit = (n, Tok("NUM", Decimal(lx.quantity[phrase]), phrase, col))
                if phrase in lx.assumed and lx.assumed[phrase] not in notes:
                    notes.append(lx.assumed[phrase])
            elif phrase in lx.phrases:
                cat, val = lx.phrases[phrase]
                hit = (n, Tok(cat, val, phrase, col, plural))
            elif phrase in lx.fillers:
                hit = (n, None)
                vague = f"'{phrase}' gives no size: the sizes said (or the defaults) are used"
                if phrase in VAGUE_SIZE and vague not in notes:
                    notes.append(vague)  # used visibly, never silently dropped
            if hit:
                break
        if hit:
            break
    return hit


def _resolve(toks: list[Tok]) -> list[Tok]:
    """Context: ``block`` after a number before a structure/size word is a part word;
    ``x`` between two numbers is ``by``."""
    out = _somewhere(list(toks))
    for k, t in enumerate(out):
        prev = out[k - 1] if k else None
        nxt = out[k + 1] if k + 1 < len(out) else None
        if t.cat == "KIND" and t.text in ("block", "brick") and (
                t.plural or (prev is not None and prev.cat == "NUM" and nxt is not None
                             and nxt.cat in ("KIND", "WEAK", "DIM", "LEVEL"))):
            out[k] = Tok("UNIT", "block" if t.text == "block" else "cube", t.text, t.col,
                         t.plural)
        if t.cat == "STEP" and (prev is None or prev.cat != "NUM"):
            out[k] = Tok("KIND", "staircase", t.text, t.col, t.plural)
        if t.cat == "AXIS" and t.text == "x" and prev is not None and nxt is not None \
                and prev.cat == "NUM" and nxt.cat == "NUM":
            out[k] = Tok("BY", "by", t.text, t.col)
    # a part word with no number before it ("a tower of cans", "a box of cubes") counts
    # nothing: it names the part type (a PART phrase)
    return [Tok("PART", t.value, t.text, t.col, t.plural)
            if t.cat == "UNIT" and (k == 0 or out[k - 1].cat != "NUM") else t
            for k, t in enumerate(out)]


def _somewhere(toks: list[Tok]) -> list[Tok]:
    """"somewhere left" (side words with no corner, edge or half after them): that half of
    the workspace, a soft place (the spec says what was chosen); otherwise "somewhere"
    adds nothing to the place words around it."""
    out: list[Tok] = []
    k = 0
    while k < len(toks):
        t = toks[k]
        if t.cat != "SOMEWHERE":
            out.append(t)
            k += 1
            continue
        j = k + 1
        while j < len(toks) and toks[j].cat == "SIDE":
            j += 1
        out += toks[k + 1:j]
        if j > k + 1 and (j == len(toks) or toks[j].cat not in ("CORNER", "EDGE", "HALF",
                                                                   "AREA")):
            out.append(Tok("HALF", "half", t.text, t.col))
        k = j
    return out


def understood(toks: list[Tok]) -> str:
    """What was understood, in the lexicon's canonical words."""
    return " ".join(str(t.value) if t.cat != "NUM" else f"{t.value:f}".rstrip("0").rstrip(".")
                    if "." in f"{t.value:f}" else f"{t.value:f}" for t in toks)


def unknown_message(unknown: list[tuple[str, int]], toks: list[Tok], nwords: int) -> str:
    """'did not understand X (column C); did you mean Y?' for each unknown word."""
    lx = lexicon()
    bits = []
    for w, col in unknown[:5]:
        best = process.extractOne(w, lx.vocabulary, scorer=fuzz.ratio, score_cutoff=75)
        hint = f"; did you mean '{best[0]}'?" if best else ""
        bits.append(f"'{w}' (column {col}){hint}")
    more = f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else ""
    msg = "cannot translate: did not understand " + ", ".join(bits) + more
    if len(unknown) * 2 > max(nwords, 1) and nwords >= 2:
        msg += ("; most of the command is unknown: only controlled English is understood "
                "(e.g. 'build a 3-cube tower at x 0.4 y 0.2')")
    if toks:
        msg += f"; understood: {understood(toks)}"
    return msg
