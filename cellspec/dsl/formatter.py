"""Canonical formatter for ``.cell`` files (``cellspec fmt``), token based and comment preserving.

The formatter never changes meaning: it re-parses its own output and compares the
model with the original's (:func:`check_roundtrip`) before handing text back.

Canonical style
---------------
* Top-level statements (``import``, ``cell``, ``rule``, ``test``, and in language
  version 2 ``const`` and ``predicate``) start at column 1 and are separated by exactly
  one blank line; consecutive imports, and consecutive consts, have none.
  ``const NAME = VALUE`` has a space either side of ``=``; a predicate is laid out like a
  rule (``predicate NAME(p, q) : EXPR``).
* A comment on its own line stays on its own line, a comment after code stays after
  that code (one space before it). Comments are copied verbatim (only trailing
  whitespace is dropped). A top-level comment block gets one blank line before it
  (none between imports); it stays attached to the next statement unless the input
  had a blank line between them.
* Indentation is 4 spaces per ``{ }`` block. In ``cell { }`` each item (``units``,
  ``workspace``, ``surface``, ``part``, ``robot``, ``default``, ``keepout``,
  ``tolerance``) gets its own line; in ``test { }`` each of ``layout``, ``order``,
  ``expect``, ``robust`` (or ``not robust``), ``only``; in an inline ``layout { }``
  each part (``ID TYPE at (...)``).
  A blank line between two items is kept (at most one); none after ``{`` or
  before ``}``. An empty block is written ``{}``. Items are joined onto one line.
* ``rule NAME "msg" [severity X] :`` is one line. Line breaks the user wrote inside
  the body (including one right after the header colon) are kept, continuation
  lines are indented by 4 spaces, blank lines inside a body are dropped; long lines
  are never wrapped. An indented own-line comment directly under the last body line
  stays in the body; a comment at column 1 or after a blank line is top-level.
* Spacing: one space around binary operators (``<= >= == != < > + - *``), after
  ``,`` and ``:``, none before ``,`` and ``:``, none inside ``( )``, ``[ ]`` and
  quantifier braces ``{p, q}``. Two colons are statement-level and get a space on
  both sides: the rule header colon and the ``keepout NAME : half-space`` colon.
  ``p.x`` has no spaces; a call ``f(a, b)`` (including ``count(...)``, which reads as
  an aggregate function) has none before ``(``; any other keyword before ``(`` gets
  one (``order (c1, c2)``, ``size (...)``, ``at (...)``, ``base (...)``, ``not (...)``).
  A unary sign stays attached to its operand (``-0.5``, ``-p.x``).
* Numbers and strings are written exactly as the user wrote them.
* Trailing whitespace is removed, CRLF becomes LF, the file ends with exactly one
  newline (an empty file stays empty).

A ``//`` comment always ends its line, so a token after one starts a new line
(indented as a continuation) even where the style would otherwise join lines.
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from textx.exceptions import TextXError

from cellspec.dsl.language import get_metamodel
from cellspec.dsl.load import read_rule_file

__all__ = ["FormatError", "check_roundtrip", "format_file", "format_source"]

INDENT = "    "

KEYWORDS = frozenset(
    "import cell rule test forall exists in and or not implies severity expect pass fail "
    "only layout order at size true false count design".split()
)
_TOP = frozenset({"import", "cell", "rule", "test", "design", "commit", "diagnose", "const",
                  "predicate"})
# statements with a header, a colon and an expression body (world.tx adds commit, diagnose)
_RULE_LIKE = frozenset({"rule", "commit", "diagnose", "predicate"})
# statements written one per line with no blank line between neighbours of the same kind
_GROUPED = frozenset({"import", "const"})
_CELL_ITEMS = frozenset(
    {"units", "workspace", "surface", "part", "robot", "default", "keepout", "tolerance",
     "friction", "supply", "trajectory", "home", "shared", "reachable", "panel", "object",
     "force"}
)
# Cell keywords whose next word is a user-chosen name (which may spell an item keyword).
_NAME_SLOTS = frozenset({"surface", "part", "robot", "model", "keepout", "supply", "home",
                         "reachable", "panel", "object", "on", "goal"})
_TEST_ITEMS = frozenset({"layout", "order", "expect", "robust", "only", "plan"})
_BLOCKS = frozenset({"cell", "test", "layout", "design"})
# words that start a design-level constraint item
_DESIGN_ITEMS = frozenset({"count", "max", "inside", "symmetric", "keep", "apart"})

_TOKEN_RE = re.compile(
    r"""
     (?P<nl>\n)
    |(?P<ws>[ \t\r\f\v]+)
    |(?P<comment>//[^\n]*|/\*[\s\S]*?\*/)
    |(?P<str>"(?:\\"|[^"])*"|'(?:\\'|[^'])*')
    |(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op><=|>=|==|!=|=|<|>|\+|-|\*)
    |(?P<punct>[:,.()\[\]{}])
    """,
    re.VERBOSE,
)


class FormatError(ValueError):
    """A file could not be formatted safely: syntax error, or the output would change meaning."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        col: int | None = None,
        filename: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col
        self.filename = filename


@dataclass(frozen=True)
class Token:
    """One lexeme with the number of newlines before it, so line breaks can be kept or dropped."""

    kind: str  # name, num, str, op, punct, comment
    text: str
    nl: int
    line: int
    col: int


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into grammar lexemes and comments; whitespace survives only as ``nl``."""
    tokens: list[Token] = []
    pos, line, line_start, nl = 0, 1, 0, 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            col = pos - line_start + 1
            raise FormatError(
                f"{line}:{col}: unexpected character {text[pos]!r}", line=line, col=col
            )
        kind = m.lastgroup or ""
        value = m.group()
        if kind == "nl":
            nl += 1
        elif kind != "ws":
            tokens.append(Token(kind, value, nl, line, pos - line_start + 1))
            nl = 0
        newlines = value.count("\n")
        if newlines:
            line += newlines
            line_start = pos + value.rindex("\n") + 1
        pos = m.end()
    return tokens


class _Emitter:
    """Walks the token stream once, tracking just enough grammar context to place breaks."""

    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.lines: list[str] = []
        self.cur: str | None = None  # the line being built, indentation included
        self.line_empty = True  # nothing but indentation on ``cur`` yet
        self.glue = False  # the next token attaches without a space
        self.force = False  # a // comment ended the line: the next token breaks
        self.last_sig: Token | None = None
        self.stmt: str | None = None
        self.prev_stmt: str | None = None
        self.after_top_comment = False
        self.stack: list[str] = []
        self.depth = 0  # nesting of ( and [ (design items start only outside them)
        self.rule_body = False
        self.cell_item: str | None = None
        self.halfspace = False
        self.block_fresh = False
        self.empty_block = False

    # -- output primitives -------------------------------------------------------------
    def _flush(self) -> None:
        if self.cur is not None:
            self.lines.append(self.cur)
            self.cur = None

    def _newline(self, indent: int, blank: int = 0) -> None:
        started = self.cur is not None or bool(self.lines)
        self._flush()
        if started:
            self.lines.extend([""] * blank)
        self.cur = INDENT * indent
        self.line_empty = True
        self.glue = False

    def _put(self, text: str, glue_before: bool = False) -> None:
        if self.cur is None:
            self._newline(0)
        assert self.cur is not None
        if not self.line_empty and not (glue_before or self.glue):
            self.cur += " "
        self.cur += text
        self.line_empty = False
        self.glue = False

    # -- lookahead helpers -------------------------------------------------------------
    def _next_sig(self, i: int) -> int | None:
        for j in range(i + 1, len(self.toks)):
            if self.toks[j].kind != "comment":
                return j
        return None

    def _level(self) -> int:
        return sum(1 for kind in self.stack if kind != "inline")

    def _item_start(self, i: int, ctx: str) -> bool:
        t = self.toks[i]
        if t.kind != "name":
            return False
        if ctx == "cell":
            prev = self.last_sig.text if self.last_sig else ""
            return t.text in _CELL_ITEMS and prev not in _NAME_SLOTS
        if ctx == "test":
            if t.text == "not":  # `not robust T` is one item
                j = self._next_sig(i)
                return j is not None and self.toks[j].text == "robust"
            prev = self.last_sig.text if self.last_sig else ""
            return t.text in _TEST_ITEMS and not (t.text == "robust" and prev == "not")
        if ctx == "design":
            if self.depth:
                return False  # inside a structure's ( ) or [ ]
            j1 = self._next_sig(i)
            nxt = self.toks[j1].text if j1 is not None else ""
            return t.text in _DESIGN_ITEMS or (nxt == "(" and t.text not in KEYWORDS
                                               and t.text != "near")  # `near (x, y)`
        if ctx == "layout" and t.text not in KEYWORDS:
            j1 = self._next_sig(i)
            j2 = self._next_sig(j1) if j1 is not None else None
            return (
                j1 is not None
                and j2 is not None
                and self.toks[j1].kind == "name"
                and self.toks[j1].text not in KEYWORDS
                and self.toks[j2].text == "at"
            )
        return False

    # -- main loop ---------------------------------------------------------------------
    def run(self) -> str:
        for i, t in enumerate(self.toks):
            if t.kind == "comment":
                self._comment(i, t)
            else:
                self._token(i, t)
        self._flush()
        out = [ln.rstrip() for ln in "\n".join(self.lines).split("\n")]
        while out and not out[-1]:
            out.pop()
        while out and not out[0]:
            out.pop(0)
        return "\n".join(out) + "\n" if out else ""

    def _comment(self, i: int, t: Token) -> None:
        if t.nl == 0 and self.cur is not None and not self.line_empty:
            self.glue = False
            self._put(t.text)
        else:
            j = self._next_sig(i)
            nt = self.toks[j] if j is not None else None
            top_next = nt is None or (nt.kind == "name" and nt.text in _TOP)
            # an indented comment right under a rule body (no blank line) still belongs to it
            body_tail = self.stmt in _RULE_LIKE and self.rule_body and t.nl == 1 and t.col > 1
            if not self.stack and top_next and not body_tail:
                if self.cur is None and not self.lines:
                    blank = 0
                elif self.after_top_comment:
                    blank = 1 if t.nl >= 2 else 0
                else:
                    next_stmt = nt.text if nt is not None else None
                    blank = 0 if self.prev_stmt == next_stmt in _GROUPED else 1
                self._newline(0, blank)
                self.stmt = None
                self._put(t.text)
                self.after_top_comment = True
            else:
                ctx = self.stack[-1] if self.stack else None
                at_item = (
                    ctx in _BLOCKS
                    and nt is not None
                    and j is not None
                    and (nt.text == "}" or self._item_start(j, ctx))
                )
                if at_item:
                    blank = 1 if t.nl >= 2 and not self.block_fresh else 0
                    self._newline(self._level(), blank)
                else:
                    self._newline(self._level() + 1)
                self._put(t.text)
        self.force = t.text.startswith("//")
        self.block_fresh = False
        self.empty_block = False

    def _token(self, i: int, t: Token) -> None:
        """One significant token: a top-level statement's keyword, or the line break
        before it (if any), its spacing, and the block it opens or closes."""
        text = t.text
        if not self.stack and t.kind == "name" and text in _TOP:
            self._top(t)
            return
        ctx = self.stack[-1] if self.stack else None
        self._break(i, t, ctx)
        glue_before, glue_after = self._glue(t, ctx)
        self._put(text, glue_before)
        self.glue = glue_after
        if text == "{":
            self._open(ctx)
            self._done(t)
            if self.stack[-1] == "inline":
                self.glue = True
            else:
                self.block_fresh = True
                nxt = self.toks[i + 1] if i + 1 < len(self.toks) else None
                self.empty_block = nxt is not None and nxt.text == "}"
                self.glue = self.empty_block
            return
        if text == "}" and self.stack:
            self.stack.pop()
            self.empty_block = False
        self._done(t)

    def _top(self, t: Token) -> None:
        """A top-level statement's keyword, on a line of its own after the blank line its
        group asks for."""
        text = t.text
        if self.cur is None and not self.lines:
            blank = 0
        elif self.after_top_comment:
            blank = 1 if t.nl >= 2 else 0
        else:
            blank = 0 if self.prev_stmt == text in _GROUPED else 1
        self._newline(0, blank)
        self.stmt = self.prev_stmt = text
        self.after_top_comment = False
        self.rule_body = False
        self._put(text)
        self._done(t)

    def _break(self, i: int, t: Token, ctx: str | None) -> None:
        """The line break (with its indent and blank line) the token starts, if any."""
        text = t.text
        brk, indent, blank = False, self._level() + 1, 0
        closing_block = text == "}" and ctx in _BLOCKS
        if closing_block:
            if not self.empty_block:
                brk, indent = True, self._level() - 1
        elif ctx in _BLOCKS and self._item_start(i, ctx):
            brk, indent = True, self._level()
            blank = 1 if t.nl >= 2 and not self.block_fresh else 0
            if ctx == "cell":
                self.cell_item, self.halfspace = text, False
            if ctx == "test":
                self.test_item = text
        elif (ctx == "test" and getattr(self, "test_item", None) == "expect" and t.nl > 0
              and t.kind == "name" and t.text not in ("pass", "fail")  # keywords: `expect pass`
              and (nxt := self._next_sig(i)) is not None
              and self.toks[nxt].text == "("):
            # a long `expect fail` list keeps the author's line breaks, one level deeper
            brk, indent = True, self._level() + 1
        elif ctx in _BLOCKS and self.block_fresh:
            brk, indent = True, self._level()
        raw_indent = 0
        if self.stmt in _RULE_LIKE and self.rule_body and t.nl > 0 and not closing_block:
            brk = True
            # keep a deeper continuation indent the author chose (nesting reads better)
            deeper = (t.col - 1) // len(INDENT) * len(INDENT)
            raw_indent = deeper if deeper > len(INDENT) * indent else 0
        if self.force:
            brk = True
        if brk:
            self._newline(indent, blank)
            if raw_indent:
                self.cur = " " * raw_indent


    def _glue(self, t: Token, ctx: str | None) -> tuple[bool, bool]:
        """Whether the token sticks to the one before and to the one after; tracks the
        nesting depth, the rule body and the half-space that a ':' starts."""
        text = t.text
        spaced = text == "=" and self.stmt == "const"  # `const W = 0.05`
        glue_before = text in (",", ")", "]", ".", "=") and not spaced
        glue_after = text in ("(", "[", ".", "=") and not spaced
        if text in ("(", "["):
            self.depth += 1
        elif text in (")", "]"):
            self.depth = max(0, self.depth - 1)
        if text == ":":
            header = (self.stmt in _RULE_LIKE and not self.rule_body and not self.stack) or (
                ctx == "cell" and self.cell_item == "keepout"
            ) or (self.stmt == "design" and self.last_sig is not None
                  and self.last_sig.text in ("clear", "of"))
            glue_before = not header
            if self.stmt in _RULE_LIKE and not self.stack:
                self.rule_body = True
            if ctx == "cell" and self.cell_item == "keepout":
                self.halfspace = True
        elif text == "}":
            glue_before = ctx == "inline" or self.empty_block
        elif text == "(":
            prev = self.last_sig
            glue_before = (
                prev is not None
                and prev.kind == "name"
                and (prev.text not in KEYWORDS or prev.text == "count")
                and self.stmt != "cell"
                and not (self.stmt == "design" and prev.text == "near")  # near (x, y)
            )
        elif text in ("+", "-"):
            glue_after = not self._binary_sign(ctx)

        return glue_before, glue_after

    def _open(self, ctx: str | None) -> None:
        """The kind of block a '{' opens (cell, test, design, layout or inline)."""
        if self.stmt in ("cell", "test", "design") and not self.stack:
            kind = self.stmt
        elif ctx == "test" and self.last_sig is not None and self.last_sig.text == "layout":
            kind = "layout"
        else:
            kind = "inline"
        self.stack.append(kind)

    def _done(self, t: Token) -> None:
        self.last_sig = t
        self.force = False
        self.block_fresh = False

    def _binary_sign(self, ctx: str | None) -> bool:
        in_expr = ((self.stmt in _RULE_LIKE and self.rule_body)
                   or (ctx == "cell" and self.halfspace) or self.stmt == "design")
        p = self.last_sig
        if not in_expr or p is None:
            return False
        if p.kind == "num" or p.text in (")", "]"):
            return True
        return p.kind == "name" and (p.text not in KEYWORDS or p.text in ("true", "false"))


def _parse(text: str, what: str) -> Any:
    """Parse ``text`` with the cellspec metamodel, turning textX errors into FormatError."""
    try:
        return get_metamodel().model_from_str(text)
    except TextXError as exc:
        message = getattr(exc, "message", None) or str(exc)
        line, col = getattr(exc, "line", None), getattr(exc, "col", None)
        where = f"{line}:{col}: " if line is not None else ""
        raise FormatError(f"{where}{what}: {message}", line=line, col=col) from exc


def _dump(obj: Any) -> Any:
    """Structural view of a textX model: class names and grammar attributes, no positions."""
    if isinstance(obj, list):
        return [_dump(item) for item in obj]
    attrs = getattr(type(obj), "_tx_attrs", None)
    if attrs is None:
        return obj
    return (type(obj).__name__, tuple((name, _dump(getattr(obj, name))) for name in attrs))


def _first_diff(a: Any, b: Any, path: str) -> str:
    """Describe where two dumps first differ, for an error a human can act on."""
    if isinstance(a, list) and isinstance(b, list):
        for k, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_diff(x, y, f"{path}[{k}]")
        return f"{path}: {len(a)} items became {len(b)}"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0]:
        for (name, x), (_, y) in zip(a[1], b[1], strict=False):
            if x != y:
                return _first_diff(x, y, f"{path}.{name}")
    return f"{path}: {a!r} became {b!r}"


def check_roundtrip(original: str, formatted: str, before_model: Any = None) -> None:
    """Raise FormatError unless both texts parse to the same model: formatting must keep meaning.
    ``before_model``: the original's model when already parsed (each parse is the slow part)."""
    if formatted == original:
        return
    before = _dump(before_model if before_model is not None else
                   _parse(original, "syntax error"))
    after = _dump(_parse(formatted, "formatter output does not parse (formatter bug)"))
    if before != after:
        raise FormatError(
            "formatting would change the meaning of the file (formatter bug), at "
            + _first_diff(before, after, "file")
        )


def format_source(text: str) -> str:
    """Rewrite ``.cell`` source in the canonical style, keeping every comment and the meaning."""
    text = text.replace("\r\n", "\n")
    was = gc.isenabled()
    gc.disable()  # parsing allocates and keeps every node: the cycle collector only re-scans
    try:
        model = _parse(text, "syntax error")
        formatted = _Emitter(tokenize(text)).run()
        check_roundtrip(text, formatted, model)  # parses once more only if the text changed
    finally:
        if was:
            gc.enable()
    return formatted


def format_file(path: str | PathLike[str]) -> tuple[str, bool]:
    """Format one file without writing it; returns the new text and whether it differs."""
    p = Path(path)
    original = read_rule_file(p)  # bounded, and every I/O problem is a diagnostic
    try:
        formatted = format_source(original)
    except FormatError as exc:
        where = f"{p}:{exc.line}:{exc.col}" if exc.line is not None else str(p)
        message = exc.message
        if exc.line is not None:
            message = message.removeprefix(f"{exc.line}:{exc.col}: ")
        raise FormatError(f"{where}: {message}", exc.line, exc.col, str(p)) from exc
    return formatted, formatted != original
