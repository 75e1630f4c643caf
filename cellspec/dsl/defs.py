"""The definitions of language version 2: ``const NAME = NUMBER`` and
``predicate NAME(p, q) : EXPR``, collected from every loaded file and checked once.

Visibility (as for rules, which every loaded file contributes): a definition is visible
in the file that writes it, after it, and in every file that imports that file, directly
or through other imports. Names are global: the same name defined twice anywhere in the
loaded files is an error. A const is a number in the units of the file that defines it:
used as a length it is that many metres (or millimetres, with ``units mm``) wherever it
is used; used as a plain number (a factor, a count, a mass, an angle) it is the number as
written. Predicates are expanded at their use by cellspec/dsl/lower.py; recursion, direct
or mutual, is refused here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textx import get_children_of_type, get_location

from cellspec.core import ir
from cellspec.dsl.load import SourceFile
from cellspec.dsl.model import Source

if TYPE_CHECKING:  # the builder owns the definitions: a run-time import would be a cycle
    from cellspec.dsl.build import CellBuilder

LANGUAGE_VERSION = 2
# words a const or predicate may not be called: the grammar's keywords, the words that
# start a statement or a cell or test item (a const may stand where an item reads a number,
# so `opening depth` would be ambiguous), the quantifier domains, the axes, the workspace
RESERVED = frozenset(
    "import cell rule test forall exists in and or not implies severity expect pass fail "
    "only layout order at size true false count design commit diagnose const predicate "
    "robot keepout workspace x y z units surface part model base yaw reach gripper opening "
    "depth default box tolerance friction stability margin off supply trajectory epsilon "
    "home shared zone reachable panel object on goal force mass robust plan vacuum parallel "
    "mm m".split())
NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


@dataclass(frozen=True)
class Const:
    """``const NAME = VALUE``: the number as written and the length scale of its file."""

    name: str
    raw: Fraction
    scale: Fraction
    file: Path
    source: Source

    @property
    def metres(self) -> Fraction:
        """The value read as a length, in metres."""
        return self.raw * self.scale


@dataclass(frozen=True)
class Predicate:
    """``predicate NAME(params) : EXPR``: the parsed body, expanded at every use."""

    name: str
    params: tuple[str, ...]
    body: Any  # the textX expression
    file: Path
    source: Source


class Definitions:
    """Every const and predicate of the loaded files, with the import closure that decides
    where each is visible."""

    def __init__(self, b: CellBuilder):
        self.b = b
        self.consts: dict[str, Const] = {}
        self.predicates: dict[str, Predicate] = {}
        self._sees: dict[Path, set[Path]] = {}
        self.refused: set[str] = set()
        self._reported: set[tuple[str, int, int, str]] = set()
        for key in b.order:
            self._collect(b.files[key])
        self._refuse_recursion()

    # -- collection ------------------------------------------------------------------
    def _collect(self, f: SourceFile) -> None:
        b = self.b
        with b.in_file(f):
            for st in f.model.statements:
                kind = type(st).__name__
                if kind not in ("Const", "Predicate"):
                    continue
                what = "const" if kind == "Const" else "predicate"
                if not self._name_ok(st, st.name, what):
                    continue
                src = b.src(st)
                if kind == "Const":
                    self.consts[st.name] = Const(st.name, Fraction(st.value), f.scale, f.path,
                                                 src)
                else:
                    self._params_ok(st)
                    self.predicates[st.name] = Predicate(st.name, tuple(st.params), st.body,
                                                         f.path, src)

    def _name_ok(self, st: Any, name: str, what: str) -> bool:
        b = self.b
        if name in RESERVED:
            b.err(st, f"{what} '{name}' is a keyword of the language; pick another name")
            return False
        if name in ir.RELATIONS:
            b.err(st, f"{what} '{name}' shadows the built-in relation {name}(); pick "
                  "another name")
            return False
        other = self.consts.get(name) or self.predicates.get(name)
        if other is not None:
            kind = "const" if name in self.consts else "predicate"
            b.err(st, f"{what} '{name}' is already defined (as a {kind}) at {other.source}")
            return False
        return True

    def _params_ok(self, st: Any) -> None:
        if len(set(st.params)) != len(st.params):
            self.b.err(st, f"predicate '{st.name}' names a parameter twice")

    def _refuse_recursion(self) -> None:
        """A predicate that calls itself, directly or through others, is an error."""
        calls = {name: [c.name for c in get_children_of_type("Call", p.body)
                        if c.name in self.predicates]
                 for name, p in self.predicates.items()}
        bad: set[str] = set()
        for start in sorted(calls):
            path = self._cycle(start, calls)
            if path and start not in bad:
                bad.update(path[:-1])
                p = self.predicates[start]
                self.b.sink.add(p.source.file, p.source.line, p.source.col,
                                f"predicate '{start}' is recursive ({' -> '.join(path)}): "
                                "predicates are expanded at their use, so none may call "
                                "itself, directly or through another")
        for name in bad:
            del self.predicates[name]
        self.refused = bad  # their uses are not expanded (the definition is the error)

    @staticmethod
    def _cycle(start: str, calls: dict[str, list[str]]) -> list[str] | None:
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        seen: set[str] = set()
        while stack:
            name, path = stack.pop()
            for nxt in calls.get(name, ()):
                if nxt == start:
                    return [*path, start]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
        return None

    # -- visibility --------------------------------------------------------------------
    def _imports(self, key: Path) -> set[Path]:
        """The files ``key`` imports, directly or through other imports."""
        out = self._sees.get(key)
        if out is None:
            out, todo = set(), list(self.b.files[key].imports) if key in self.b.files else []
            while todo:
                k = todo.pop()
                if k not in out:
                    out.add(k)
                    if k in self.b.files:
                        todo.extend(self.b.files[k].imports)
            self._sees[key] = out
        return out

    def visible(self, d: Const | Predicate, obj: Any) -> bool:
        """True when ``d`` may be used at ``obj`` of the current file; else reports why."""
        b = self.b
        cur = b.cur
        what = "const" if isinstance(d, Const) else "predicate"
        if cur is None or d.file in self._imports(cur.path):
            return True
        if d.file == cur.path:
            loc = get_location(obj)
            if (loc["line"], loc["col"]) > (d.source.line, d.source.col):
                return True
            b.err(obj, f"{what} '{d.name}' is used before its definition at {d.source}")
            return False
        b.err(obj, f"{what} '{d.name}' is defined at {d.source}, in a file this one does not "
              "import")
        return False

    # -- numbers -----------------------------------------------------------------------
    def const(self, name: str, obj: Any) -> Const | None:
        """The const ``name`` as seen from ``obj`` (None after reporting why not)."""
        c = self.consts.get(name)
        src = self.b.src(obj)
        key = (src.file, src.line, src.col, name)
        if key in self._reported:  # e.g. the three coordinates of one (x, y, z)
            return None
        if c is None:
            self._reported.add(key)
            known = ", ".join(sorted(self.consts)) or "none defined"
            self.b.err(obj, f"'{name}' is not a number or a known const (consts: {known})")
            return None
        if not self.visible(c, obj):
            self._reported.add(key)
            return None
        return c

    def length(self, text: str, obj: Any) -> Fraction:
        """A number of the current file read as a length in metres (0 after an error)."""
        if NUMBER.fullmatch(text):
            return Fraction(text) * self.b.scale
        c = self.const(text, obj)
        return c.metres if c is not None else Fraction(0)

    def number(self, text: str, obj: Any) -> Fraction:
        """A plain number (a factor, a mass, an angle): a literal or a const as written."""
        if NUMBER.fullmatch(text):
            return Fraction(text)
        c = self.const(text, obj)
        return c.raw if c is not None else Fraction(0)

    def check_cell_names(self, names: set[str]) -> None:
        """A definition named like a zone, surface, robot or part type of the cell is an
        error (``inside(p, NAME)`` or ``p.type == NAME`` would be ambiguous)."""
        defs: list[Const | Predicate] = [*self.consts.values(), *self.predicates.values()]
        for d in defs:
            if d.name in names:
                what = "const" if isinstance(d, Const) else "predicate"
                self.b.sink.add(d.source.file, d.source.line, d.source.col,
                                f"{what} '{d.name}' shadows a name of the cell (a zone, "
                                "surface, robot or part type); pick another name")
