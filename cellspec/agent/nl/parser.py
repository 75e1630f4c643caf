"""Parse lexicon tokens with the lark grammar (grammar.lark) into structure frames.

lark rather than textX: textX is a PEG parser over characters (ordered choice, first
match wins), which suits the DSL; here the input is a stream of lexicon categories with
free word order, and lark takes any token grammar, checks it for conflicts when it is
built (LALR(1): a conflict is a grammar bug, found at load, not at run time), parses in
well under a millisecond and reports the position and the expected categories when a
command does not parse.

A frame is one structure: its kind (canonical lexicon word), the phrases that modify it
(dimensions, counts, placement, objectives) and its relation to the next structure;
design-wide phrases (height limits) are collected apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from cellspec.agent.base import TranslateError
from cellspec.agent.nl.lexer import Tok, understood

GLOBAL = {"limit"}
STRONG_SPLIT = {"rel", "sbs", "apart"}


@dataclass
class Phrase:
    """One parsed phrase: its rule name and tokens."""

    rule: str
    toks: list[Tok]

    def nums(self) -> list[Any]:
        return [t.value for t in self.toks if t.cat == "NUM"]

    def has(self, cat: str) -> bool:
        return any(t.cat == cat for t in self.toks)

    def first(self, cat: str) -> Tok | None:
        return next((t for t in self.toks if t.cat == cat), None)

    def must(self, cat: str) -> Tok:
        """The first token of ``cat``, which every phrase of this rule has (the grammar)."""
        t = self.first(cat)
        assert t is not None, f"a {self.rule} phrase without a {cat} token"
        return t


@dataclass
class Frame:
    """One structure: kind, copies, modifying phrases, relation to the next frame."""

    kind: str | None = None
    weak: str | None = None
    weak_text: str = ""
    kind_text: str = ""
    plural: bool = False
    phrases: list[Phrase] = field(default_factory=list)
    rel: str | None = None  # relation to the NEXT frame: next|left|right|front|back
    copies: int = 1


@dataclass
class Parsed:
    """A parsed command: frames, design-wide phrases, side-by-side/apart phrases."""

    frames: list[Frame]
    limits: list[Phrase]
    pair: list[Phrase]  # sbs / apart / parallel: how the structures sit together
    toks: list[Tok]


@lru_cache(maxsize=1)
def _parser() -> Any:
    text = resources.files(__package__).joinpath("grammar.lark").read_text(encoding="utf-8")
    return Lark(text, parser="lalr", lexer="basic")


def parse_tokens(toks: list[Tok], command: str) -> Parsed:
    """The phrases of ``toks`` grouped into frames (TranslateError when they do not parse,
    naming the words and what was understood)."""
    stream, starts = [], {}
    pos = 0
    for k, t in enumerate(toks):
        starts[pos] = k
        stream.append(t.cat)
        pos += len(t.cat) + 1
    text = " ".join(stream)
    if not toks:
        raise TranslateError(f"cannot translate: '{command.strip()}' names no structure "
                             "(e.g. 'a tower of 3 cubes', 'a row of 6 cubes', 'pack 12 "
                             "cubes')")
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        at = starts.get(getattr(exc, "pos_in_stream", None) or 0)
        k = at if at is not None else max(i for p, i in starts.items()
                                          if p <= (exc.pos_in_stream or 0))
        bad = toks[k]
        lo, hi = max(0, k - 1), min(len(toks), k + 2)
        words = " ".join(t.text for t in toks[lo:hi])
        hint = _hint(toks, k)
        raise TranslateError(f"cannot translate: did not understand '{words}' (column "
                             f"{bad.col}): '{bad.text}' cannot go here{hint}; understood: "
                             f"{understood(toks[:k]) or 'nothing'}") from None
    phrases: list[Phrase] = []
    idx = 0
    for node in tree.children:
        assert isinstance(node, Tree)
        n = sum(1 for x in node.scan_values(lambda v: isinstance(v, Token)))
        phrases.append(Phrase(str(node.data), toks[idx:idx + n]))
        idx += n
    return _group(phrases, toks)


def _hint(toks: list[Tok], k: int) -> str:
    t = toks[k]
    return {"NUM": " (a number needs a word saying what it measures: 'N cubes', 'N wide', "
                   "'N high', 'N by M', 'at x X y Y')",
            "AXIS": " (coordinates are 'at x X y Y'; a region is 'x A to B y C to D')",
            "DIM": " (a size is 'N long', 'N wide', 'N high')",
            "SIDE": " (say 'in the front left corner', 'near the back edge', 'in the left "
                    "half')",
            "LUNIT": " (lengths go with 'no higher than', 'apart')"}.get(t.cat, "")


def _group(phrases: list[Phrase], toks: list[Tok]) -> Parsed:
    """Split the phrase list into frames at relations and at 'and' before a new noun."""
    merged: list[Phrase] = []
    for p in phrases:  # "four pillars": the count belongs to the pillars
        if p.rule == "pillar" and not p.has("NUM") and merged and merged[-1].rule == "count" \
                and not merged[-1].has("UNIT"):
            p = Phrase("pillar", merged.pop().toks + p.toks)
        merged.append(p)
    phrases = merged
    limits = [p for p in phrases if p.rule in GLOBAL]
    pair = [p for p in phrases if p.rule in ("sbs", "apart")
            or (p.rule == "obj" and p.toks[0].value == "parallel")]
    body = [p for p in phrases if p not in limits and p not in pair]
    segments: list[list[Phrase]] = [[]]
    rels: list[str | None] = []
    for k, p in enumerate(body):
        if p.rule == "rel":
            rels.append(p.toks[0].value)
            segments.append([])
            continue
        if p.rule == "conj":
            rest = body[k + 1:]
            nxt = []
            for q in rest:
                if q.rule in ("conj", "rel"):
                    break
                nxt.append(q)
            here_kind = any(q.rule == "kind" for q in segments[-1])
            if here_kind and any(q.rule == "kind" for q in nxt):
                rels.append(None)
                segments.append([])
            continue
        segments[-1].append(p)
    frames = []
    for seg, rel in zip(segments, [*rels, None], strict=True):
        f = Frame(rel=rel)
        for k, p in enumerate(seg):
            if p.rule == "kind":
                t = p.toks[0]
                if t.cat == "KIND":
                    if f.kind is not None and f.kind != t.value:
                        raise TranslateError(
                            f"cannot translate: '{t.text}' (column {t.col}) and "
                            f"'{f.kind}' in one structure: join two structures with 'and' "
                            "or 'next to'")
                    f.kind = t.value
                    f.kind_text = t.text
                    f.plural = f.plural or t.plural
                    # "two towers": a bare number just before a plural noun is a count of
                    # structures
                    if t.plural:
                        prev = [q for q in seg[:k] if q.rule != "obj"]
                        if prev and prev[-1].rule == "count" and not prev[-1].has("UNIT"):
                            f.copies = int(prev[-1].nums()[0])
                            seg_drop = prev[-1]
                            f.phrases = [q for q in f.phrases if q is not seg_drop]
                            if f.copies < 1 or f.copies > 4:
                                raise TranslateError(
                                    f"cannot translate: {f.copies} {t.text}: at most 4 "
                                    "copies of a structure in one command")
                else:
                    if f.weak is None:
                        f.weak, f.weak_text = t.value, t.text
                continue
            f.phrases.append(p)
        frames.append(f)
    return Parsed(frames, limits, pair, toks)
