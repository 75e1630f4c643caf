"""Building the typed model of a cell (cellspec/dsl/model.py) from parsed files: the
``cell`` block's items (workspace, surfaces, part types, robots, grippers, keep-outs,
friction, stability, tolerance), the rules of every loaded file and the main file's tests,
each problem collected with its file:line:col.

The second of the parser's stages (after cellspec/dsl/load.py); the cell block's items are
read by cellspec/dsl/cellblock.py, rule bodies lowered by lower.py, tests built by
cases.py, twin and world items by twin.py and world.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

from textx import get_location

from cellspec.core.errors import CellspecError, DiagnosticSink
from cellspec.core.geometry import halfspace_u
from cellspec.dsl.cases import build_test
from cellspec.dsl.cellblock import CellItems
from cellspec.dsl.defs import Definitions
from cellspec.dsl.load import STDLIB, SourceFile, path_key, stdlib_path
from cellspec.dsl.lower import lower_rule
from cellspec.dsl.model import Cell, Gripper, HalfSpaceZone, Rule, Source, TestCase
from cellspec.dsl.world import build_world

MAX_CELL_COORD_M = 10_000  # a cell's constants (workspace, zones, surfaces) stay within this
STABILITY_RULES = ("stability", "stability_stages")  # dropped by `stability off`


def halfspace_zone(half: Any, name: str, length: Callable[[str], Fraction], source: Source,
                   what: str | None = None,
                   number: Callable[[str], Fraction] = Fraction) -> HalfSpaceZone:
    """The zone of a parsed half-space ``[k] axis (+|- [k] axis)* op rhs`` (``length`` reads
    the rhs in the file's units, ``number`` a coefficient). ValueError, with the message for
    the user naming ``what``, when it has no x, y or z term or is too fine for exact 32-bit
    integers."""
    coef = {"x": Fraction(0), "y": Fraction(0), "z": Fraction(0)}
    for sign, t in zip(["+", *half.signs], half.terms, strict=True):
        k = number(t.coef) if t.coef else Fraction(1)
        coef[t.axis] += -k if sign == "-" else k
    if all(k == 0 for k in coef.values()):
        raise ValueError(f"{what or 'the zone'} has no x, y or z term")
    zone = HalfSpaceZone(name=name, coef=(coef["x"], coef["y"], coef["z"]), op=half.op,
                         rhs=length(half.rhs), source=source)
    try:
        halfspace_u(zone.coef, zone.op, zone.rhs)
    except ValueError as exc:
        raise ValueError(f"{what + ': ' if what else ''}{exc}; use coarser decimals") from None
    return zone


class CellBuilder:
    """Turns parsed textX models into the typed model, collecting semantic errors.

    Its public state, for the item builders (cellspec/dsl/{twin,world,lower,cases}.py):
    ``files`` and ``order`` (the loaded files, imports first), ``sink`` (the diagnostics)
    and ``cur`` (the file being built: locations and the length scale come from it)."""

    def __init__(self, files: dict[Path, SourceFile], order: list[Path], sink: DiagnosticSink):
        self.files = files
        self.order = order
        self.sink = sink
        self.cur: SourceFile | None = None
        self.defs: Definitions | None = None  # consts and predicates (language version 2)
        # predicate expansions under way, innermost last: (name, defined at, used at)
        self.expanding: list[tuple[str, Source, Source]] = []

    # -- helpers -------------------------------------------------------------
    def src(self, obj: Any) -> Source:
        """Where a textX object is written, in the current file."""
        loc = get_location(obj)
        return Source(file=self.cur.shown if self.cur else "", line=loc["line"], col=loc["col"])

    def err(self, obj: Any, msg: str) -> None:
        """Report a problem at a textX object of the current file (inside a predicate's
        expansion: at the definition, naming the use)."""
        s = self.src(obj)
        for name, defined, used in reversed(self.expanding):
            msg = f"in predicate '{name}' defined at {defined}, used at {used}: {msg}"
        self.sink.add(s.file, s.line, s.col, msg)

    def error_count(self) -> int:
        """How many problems are reported so far (to tell whether a step added one)."""
        return len(self.sink.items)

    def err_at(self, line: int, col: int, msg: str) -> None:
        """Report a problem at line:col of the current file."""
        self.sink.add(self.cur.shown if self.cur else "", line, col, msg)

    def loaded(self) -> list[SourceFile]:
        """The loaded files in load order (imports before their importer)."""
        return [self.files[key] for key in self.order]

    @contextmanager
    def in_file(self, f: SourceFile) -> Iterator[None]:
        """Locate the diagnostics reported inside the block in ``f``."""
        was, self.cur = self.cur, f
        try:
            yield
        finally:
            self.cur = was

    @property
    def scale(self) -> Fraction:
        """The length scale of the current file (1/1000 for `units mm`)."""
        return self.cur.scale if self.cur else Fraction(1)

    def n(self, text: str, obj: Any = None) -> Fraction:
        """A number of the current file (a literal or a const, written at ``obj``) read as
        a length, in metres."""
        if self.defs is None:
            return Fraction(text) * self.scale
        return self.defs.length(text, obj)

    def num(self, text: str, obj: Any = None) -> Fraction:
        """A plain number of the current file (a factor, mass or angle), const resolved."""
        if self.defs is None:
            return Fraction(text)
        return self.defs.number(text, obj)

    def length(self, obj: Any, text: str) -> Fraction:
        """A cell length; absurd magnitudes are an error (they would overflow the grid)."""
        v = self.n(text, obj)
        if abs(v) > MAX_CELL_COORD_M:
            self.err(obj, f"{text} is absurd for a cell (at most {MAX_CELL_COORD_M} m)")
        return v

    # -- top level -----------------------------------------------------------
    def build(self, main_key: Path) -> Cell:
        """The cell of the main file with the rules of every loaded file and the main
        file's tests; CellspecError with every problem found."""
        cells: list[tuple[SourceFile, Any]] = []
        for key in self.order:
            f = self.files[key]
            for st in f.model.statements:
                if type(st).__name__ == "Cell":
                    cells.append((f, st))
        main = self.files.get(main_key)
        if main is None:
            self.sink.raise_if_any()
            raise CellspecError(f"cannot load {main_key}")
        if not cells:
            self.sink.add(main.shown, 1, 1, "no cell defined: this file and its imports need "
                          "one `cell NAME { ... }` block")
            self.sink.raise_if_any()
        own = [c for c in cells if c[0] is main]
        if len(cells) > 1:
            for f, st in cells[1:]:
                self.cur = f
                first = cells[0]
                loc = get_location(first[1])
                self.err(st, f"a second cell '{st.name}': '{first[1].name}' is already defined "
                         f"at {first[0].shown}:{loc['line']}:{loc['col']}")
        cf, cst = own[0] if own else cells[0]
        self.defs = Definitions(self)
        self.cur = cf
        cell_parts = self.build_cell(cst)
        self.defs.check_cell_names({*(z.name for z in cell_parts["keepouts"]),
                                    *(s.name for s in cell_parts["surfaces"]),
                                    *(r.name for r in cell_parts["robots"]),
                                    *cell_parts["part_types"]})
        rules: list[Rule] = []
        seen: dict[str, Rule] = {}
        stdlib_files = {path_key(stdlib_path(name)) for name in STDLIB}
        for key in self.order:
            self.cur = self.files[key]
            for st in self.cur.model.statements:
                if type(st).__name__ != "Rule":
                    continue
                rule = lower_rule(self, st, cell_parts)
                if rule is None:
                    continue
                if (not cell_parts["stability"] and key in stdlib_files
                        and rule.name in STABILITY_RULES):
                    continue  # `stability off` in the cell
                if rule.name in seen:
                    self.err(st, f"rule '{rule.name}' is already defined at "
                             f"{seen[rule.name].source}")
                    continue
                seen[rule.name] = rule
                rules.append(rule)
        self.cur = main
        tests: list[TestCase] = []
        tnames: dict[str, Source] = {}
        for st in main.model.statements:
            if type(st).__name__ != "Test":
                continue
            t = build_test(self, st, cell_parts, seen)
            if t is None:
                continue
            if t.name in tnames:
                self.err(st, f"test '{t.name}' is already defined at {tnames[t.name]}")
                continue
            tnames[t.name] = t.source
            tests.append(t)
        world = build_world(self, cf, cst)  # force thresholds, commit and diagnose rules
        self.sink.raise_if_any()
        self.cur = cf
        return Cell(
            name=cst.name,
            world=world,
            path=main.shown,
            rules=tuple(rules),
            tests=tuple(tests),
            source=self.src(cst),
            **cell_parts,
        )

    # -- cell ------------------------------------------------------------------
    def build_cell(self, st: Any) -> dict[str, Any]:
        """The fields of :class:`Cell` that the ``cell`` block gives (items checked)."""
        items = CellItems(self)
        for item in st.items:
            items.add(item)
        return items.fields(st)

    def vec(self, v: Any) -> tuple[Fraction, Fraction, Fraction]:
        """A parsed (x, y, z) in the current file's units, as metres."""
        return (self.n(v.x, v), self.n(v.y, v), self.n(v.z, v))

    def gripper(self, g: Any) -> Gripper:
        """A parsed gripper, checked."""
        opening = self.n(g.opening, g) if g.opening else None
        depth = self.n(g.depth, g) if g.depth else None
        if g.kind == "vacuum" and (opening is not None or depth is not None):
            self.err(g, "a vacuum gripper has no opening or finger depth")
        if opening is not None and opening <= 0:
            self.err(g, "gripper opening must be positive")
        if depth is not None and depth <= 0:
            self.err(g, "finger depth must be positive")
        return Gripper(kind=g.kind, opening=opening, depth=depth)

    def halfspace(self, item: Any) -> HalfSpaceZone | None:
        """The half-space keep-out of ``item``, or None after reporting why not."""
        try:
            return halfspace_zone(item.half, item.name, lambda t: self.n(t, item.half),
                                  self.src(item), f"keep-out '{item.name}'",
                                  lambda t: self.num(t, item.half))
        except ValueError as exc:
            self.err(item, str(exc))
            return None
