"""Parse .cell files with textX, resolve imports and build the typed model and rule IR.

Every syntax and semantic problem becomes a diagnostic with file:line:col;
semantic errors are collected (capped) so one run reports all of them.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

from textx import get_location
from textx.exceptions import TextXError, TextXSyntaxError

from cellspec.core import ir
from cellspec.core.errors import CellspecError, Diagnostic, DiagnosticSink, line_col
from cellspec.core.geometry import MAX_ABS_COORD_M, MAX_SIZE_M
from cellspec.dsl.language import get_metamodel
from cellspec.dsl.model import (
    Box,
    BoxZone,
    Cell,
    Expectation,
    Gripper,
    HalfSpaceZone,
    InlinePart,
    PartType,
    Robot,
    Rule,
    Source,
    Surface,
    TestCase,
    Zone,
)
from cellspec.dsl.twin import PLAN_CHECKS, TWIN_ITEMS, build_twin
from cellspec.dsl.world import build_world

# textX parses a few hundred to 1 000 one-line rules a second (linear, but ~3 000 Python
# calls a rule; `fmt` parses three times): a 1 MB file took minutes to load or format, so a
# file beyond this (about 1 000 one-line rules) is refused up front, naming the cap
MAX_RULE_FILE_BYTES = 64 * 1024
MAX_COUNT_CONST = 2**31 - 1  # clingo integers are 32-bit: a larger count constant wraps
MAX_CELL_COORD_M = 10_000  # a cell's constants (workspace, zones, surfaces) stay within this
STDLIB = ("physical", "stability", "diagnosis")
STABILITY_RULES = ("stability", "stability_stages")  # dropped by `stability off`
MAX_PART_MASS_KG = 10_000  # beyond this a mass is a typo (and makes the stability LP ill-scaled)
_PKG_ROOT = Path(__file__).resolve().parent.parent  # .../cellspec
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
MESSAGE_FUNCS = {"overlap": 2, "gap": 1, "outside": 1, "intrusion": 2, "blockers": 1,
                 "stability": 1, "stages": 1}


def display_path(path: str | os.PathLike[str]) -> str:
    """Path as shown to users: package files as ``cellspec/...``, others relative to cwd."""
    p = Path(path).resolve()
    try:
        return str(Path("cellspec") / p.relative_to(_PKG_ROOT))
    except ValueError:
        pass
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return str(p) if rel.startswith("..") else rel


def stdlib_path(name: str) -> Path:
    """Filesystem path of a standard-library rule file shipped in the package."""
    return Path(str(resources.files("cellspec.rules").joinpath(f"{name}.cell")))


def read_rule_file(path: Path) -> str:
    """Read a rule file as UTF-8 text, turning I/O problems into diagnostics."""
    from cellspec.core.io import TooLarge, read_text_bounded

    shown = display_path(path)
    try:
        return read_text_bounded(path, MAX_RULE_FILE_BYTES)
    except IsADirectoryError:
        raise CellspecError(Diagnostic(shown, 0, 0, "is a directory, expected a .cell file")) \
            from None
    except TooLarge as exc:
        raise CellspecError(Diagnostic(shown, 0, 0, f"rule file is {exc} (about 1 000 "
                                       "one-line rules); split it into files that import "
                                       "each other")) from None
    except UnicodeDecodeError as exc:
        raise CellspecError(Diagnostic(shown, 0, 0, f"not UTF-8 text (byte {exc.start})")) \
            from None
    except OSError as exc:
        raise CellspecError(Diagnostic(shown, 0, 0, f"cannot read rule file: {exc.strerror}")) \
            from None


_STATEMENT_START = re.compile(r"^(import|cell|rule|test|design|commit|diagnose)\b", re.M)


def parse_text(text: str, shown: str) -> Any:
    """Parse one file's text; on syntax errors report every broken top-level statement."""
    mm = get_metamodel()
    if not text.strip():
        raise CellspecError(Diagnostic(shown, 1, 1, "empty rule file: expected import, cell, "
                                       "rule or test"))
    gc_was = gc.isenabled()
    gc.disable()  # the parse allocates ~50 objects a rule and frees none: the cycle collector
    try:          # would only re-scan them (measured: parsing takes twice as long with it)
        model = mm.model_from_str(text, file_name=shown)
        if not hasattr(model, "statements"):  # only comments: textX gives ''
            return _Empty()
        return model
    except TextXSyntaxError as first:
        diags = [_syntax_diag(first, shown, text)]
        # Recovery: parse each top-level statement on its own to find further errors.
        starts = [m.start() for m in _STATEMENT_START.finditer(text)] + [len(text)]
        for a, b in zip(starts, starts[1:], strict=False):
            line0, _ = line_col(text, a)
            if (line0, 1) < (first.line or 0, first.col or 0):
                continue
            chunk = "\n" * (line0 - 1) + text[a:b]
            try:
                mm.model_from_str(chunk, file_name=shown)
            except TextXSyntaxError as exc:
                if (exc.line, exc.col) != (first.line, first.col):
                    diags.append(_syntax_diag(exc, shown, text))
            except TextXError:
                pass
            if len(diags) >= 20:
                break
        raise CellspecError(diags) from None
    except TextXError as exc:
        raise CellspecError(Diagnostic(shown, exc.line or 0, exc.col or 0, str(exc))) from None
    except RecursionError:
        raise CellspecError(Diagnostic(shown, 0, 0, "expression nested too deeply")) from None
    finally:
        if gc_was:
            gc.enable()


class _Empty:
    """The model of a file holding only comments."""

    statements: list[Any] = []


def _syntax_diag(exc: TextXSyntaxError, shown: str, text: str = "") -> Diagnostic:
    msg = str(getattr(exc, "message", None) or exc)
    msg = re.sub(r"^\S*:\d+:\d+:\s*", "", msg)
    expected = re.search(r"Expected (.*?)(?: at position| =>|$)", msg, re.S)
    if expected:
        pretty: list[str] = []
        for it in (e.strip() for e in expected.group(1).split(" or ")):
            it = it.strip("'")
            if it == "Not":  # textX's rendering of a keyword exclusion, not a token
                continue
            if it.startswith("[A-Za-z_]") or it == "Name":
                it = "a name"
            elif it.startswith("[-+]?") or it == "Num":
                it = "a number"
            elif it.startswith("(") and it.endswith("\\b"):
                it = " or ".join(f"'{w}'" for w in it[1:-3].split("|"))
            elif it.startswith('"') or it == "STRING":
                it = "a string"
            elif it.startswith("\\/"):
                it = "a comment"
            else:
                it = f"'{it}'"
            if it not in pretty:
                pretty.append(it)
        msg = f"syntax error: expected {', '.join(pretty[:10])}"
    else:
        msg = "syntax error: " + msg
    line, col = exc.line or 0, exc.col or 0
    if text and line:
        rows = text.split("\n")
        if line <= len(rows):
            found = rows[line - 1][max(col - 1, 0):].strip()
            msg += f", found '{found[:30]}'" if found else ", found the end of the line"
        else:
            msg += ", found the end of the file"
    return Diagnostic(shown, line, col, msg)


@dataclass
class _File:
    path: Path
    shown: str
    text: str
    model: Any
    scale: Fraction = Fraction(1)
    imports: list[Path] = field(default_factory=list)


def load_cell(path: str | os.PathLike[str], parsed: tuple[str, Any] | None = None) -> Cell:
    """Load a .cell file with everything it imports; raise CellspecError on any problem.
    ``parsed``: the file's text and :func:`parse_text` model when the caller has them
    already (the file is then not read and parsed again)."""
    main = Path(path)
    files: dict[Path, _File] = {}
    order: list[Path] = []
    sink = DiagnosticSink()
    _load_recursive(_key(main), files, order, sink, [], None, parsed)
    sink.raise_if_any()
    return _Builder(files, order, files[order[-1]] if order else None, sink).build(
        main_key=_key(main)
    )


def load_cell_text(text: str, shown: str = "<text>") -> Cell:
    """Build a cell from source text, not a file (e.g. a region given on the command line),
    with the checks and messages of :func:`load_cell`; ``shown`` names it in diagnostics.
    Imports need a file and are refused."""
    model = parse_text(text, shown)
    for st in model.statements:
        if type(st).__name__ == "Import":
            loc = get_location(st)
            raise CellspecError(Diagnostic(shown, loc["line"], loc["col"],
                                           "import needs a file: use load_cell"))
    key = Path(shown)
    f = _File(key, shown, text, model, _scale(model))
    return _Builder({key: f}, [key], f, DiagnosticSink()).build(main_key=key)


def _scale(model: Any) -> Fraction:
    """The length scale of a parsed file: 1/1000 when its cell says ``units mm``."""
    for st in model.statements:
        if type(st).__name__ == "Cell":
            for item in st.items:
                if type(item).__name__ == "Units" and item.unit == "mm":
                    return Fraction(1, 1000)
    return Fraction(1)


def _key(p: Path) -> Path:
    return p.resolve() if p.exists() else p


def _load_recursive(path: Path, files: dict[Path, _File], order: list[Path],
                    sink: DiagnosticSink, stack: list[Path],
                    at: Diagnostic | None, parsed: tuple[str, Any] | None = None) -> None:
    key = _key(path)
    if key in files:
        return
    if key in stack:
        cycle = " -> ".join(display_path(p) for p in stack + [key])
        d = at or Diagnostic(display_path(key), 0, 0, "")
        sink.add(d.file, d.line, d.col, f"import cycle: {cycle}")
        return
    shown = display_path(key)
    if not key.exists():
        if at is not None:
            sink.add(at.file, at.line, at.col, f"imported file not found: {shown}")
        else:
            sink.add(shown, 0, 0, "no such file")
        return
    try:
        text, model = parsed or (None, None)
        if model is None:
            text = read_rule_file(key)
            model = parse_text(text, shown)
    except CellspecError as exc:
        for d in exc.diagnostics:
            sink.add(d.file, d.line, d.col, d.message)
        return
    f = _File(key, shown, text, model, _scale(model))
    for st in model.statements:
        if type(st).__name__ != "Import":
            continue
        loc = get_location(st)
        here = Diagnostic(shown, loc["line"], loc["col"], "")
        if st.name:
            if st.name not in STDLIB:
                sink.add(shown, loc["line"], loc["col"],
                         f"unknown standard library '{st.name}' (known: {', '.join(STDLIB)}); "
                         "import a file with a quoted path")
                continue
            target = stdlib_path(st.name)
        else:
            target = (key.parent / st.path)
        f.imports.append(_key(target))
        _load_recursive(target, files, order, sink, stack + [key], here)
    files[key] = f
    order.append(key)


def _num(text: str, scale: Fraction = Fraction(1)) -> Fraction:
    return Fraction(text) * scale


def halfspace_zone(half: Any, name: str, length: Any, source: Source,
                   what: str | None = None) -> HalfSpaceZone:
    """The zone of a parsed half-space ``[k] axis (+|- [k] axis)* op rhs`` (``length`` reads
    the rhs in the file's units). ValueError, with the message for the user naming ``what``,
    when it has no x, y or z term or is too fine for exact 32-bit integers."""
    from cellspec.core.geometry import halfspace_u

    coef = {"x": Fraction(0), "y": Fraction(0), "z": Fraction(0)}
    for sign, t in zip(["+", *half.signs], half.terms, strict=True):
        k = Fraction(t.coef) if t.coef else Fraction(1)
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


class _Builder:
    """Turns parsed textX models into the typed model, collecting semantic errors."""

    def __init__(self, files: dict[Path, _File], order: list[Path], main: _File | None,
                 sink: DiagnosticSink):
        self.files = files
        self.order = order
        self.sink = sink
        self.cur: _File | None = None

    # -- helpers -------------------------------------------------------------
    def src(self, obj: Any) -> Source:
        loc = get_location(obj)
        return Source(file=self.cur.shown if self.cur else "", line=loc["line"], col=loc["col"])

    def err(self, obj: Any, msg: str) -> None:
        s = self.src(obj)
        self.sink.add(s.file, s.line, s.col, msg)

    def err_at(self, line: int, col: int, msg: str) -> None:
        """Report a problem at line:col of the current file."""
        self.sink.add(self.cur.shown if self.cur else "", line, col, msg)

    def loaded(self) -> list[_File]:
        """The loaded files in load order (imports before their importer)."""
        return [self.files[key] for key in self.order]

    @contextmanager
    def in_file(self, f: _File) -> Iterator[None]:
        """Locate the diagnostics reported inside the block in ``f``."""
        was, self.cur = self.cur, f
        try:
            yield
        finally:
            self.cur = was

    def n(self, text: str) -> Fraction:
        return _num(text, self.cur.scale if self.cur else Fraction(1))

    def length(self, obj: Any, text: str) -> Fraction:
        """A cell length; absurd magnitudes are an error (they would overflow the grid)."""
        v = self.n(text)
        if abs(v) > MAX_CELL_COORD_M:
            self.err(obj, f"{text} is absurd for a cell (at most {MAX_CELL_COORD_M} m)")
        return v

    # -- top level -----------------------------------------------------------
    def build(self, main_key: Path) -> Cell:
        cells: list[tuple[_File, Any]] = []
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
        self.cur = cf
        cell_parts = self.build_cell(cst)
        rules: list[Rule] = []
        seen: dict[str, Rule] = {}
        stdlib_files = {_key(stdlib_path(name)) for name in STDLIB}
        for key in self.order:
            self.cur = self.files[key]
            for st in self.cur.model.statements:
                if type(st).__name__ != "Rule":
                    continue
                rule = self.build_rule(st, cell_parts)
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
            t = self.build_test(st, cell_parts, seen)
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
        ws: dict[str, tuple[Fraction, Fraction]] = {}
        ws_seen = None
        surfaces: list[Surface] = []
        ptypes: dict[str, PartType] = {}
        robots: list[Robot] = []
        keepouts: list[Zone] = []
        default: Gripper | None = None
        eps: Fraction | None = None
        friction: Fraction | None = None
        stab_seen = False
        stability_on = True
        margin: Fraction | None = None
        stab_item: tuple[Any, Fraction] | None = None
        names: dict[str, str] = {}
        twin_items: list[Any] = []

        def claim(obj: Any, name: str, what: str) -> bool:
            if name in names:
                self.err(obj, f"{what} '{name}' clashes with the {names[name]} of the same name")
                return False
            if name in ("workspace", "x", "y", "z", "vacuum", "parallel"):
                self.err(obj, f"'{name}' is reserved and cannot name a {what}")
                return False
            names[name] = what
            return True

        for item in st.items:
            kind = type(item).__name__
            if kind == "Units":
                continue
            if kind in TWIN_ITEMS:
                twin_items.append(item)
                continue
            if kind == "Workspace":
                if ws_seen is not None:
                    self.err(item, "workspace is given twice")
                    continue
                ws_seen = item
                for r in item.ranges:
                    lo, hi = self.length(r, r.lo), self.length(r, r.hi)
                    if r.axis in ws:
                        self.err(r, f"workspace axis {r.axis} is given twice")
                    elif lo >= hi:
                        self.err(r, f"workspace {r.axis} range is empty: {r.lo} >= {r.hi}")
                    ws[r.axis] = (lo, hi)
            elif kind == "Surface":
                if claim(item, item.name, "surface"):
                    surfaces.append(Surface(name=item.name, z=self.length(item, item.z),
                                            source=self.src(item)))
            elif kind == "PartType":
                size = self.vec(item.size)
                if any(s <= 0 for s in size):
                    self.err(item, f"part type '{item.name}' needs a positive size on every axis")
                    continue
                mass = Fraction(item.mass) if item.mass else None
                if mass is not None and mass <= 0:
                    self.err(item, f"part type '{item.name}' needs a positive mass")
                elif mass is not None and mass > MAX_PART_MASS_KG:
                    self.err(item, f"part type '{item.name}': mass {item.mass} kg is absurd for "
                             f"a part a robot places (at most {MAX_PART_MASS_KG} kg)")
                if claim(item, item.name, "part type"):
                    ptypes[item.name] = PartType(name=item.name, size=size, mass=mass,
                                                 source=self.src(item))
            elif kind == "Robot":
                g = self.gripper(item.gripper)
                reach = self.n(item.reach) if item.reach else None
                if reach is not None and reach <= 0:
                    self.err(item, f"robot '{item.name}' needs a positive reach")
                if claim(item, item.name, "robot"):
                    robots.append(Robot(name=item.name, model=item.model, base=self.vec(item.base),
                                        yaw_deg=Fraction(item.yaw) if item.yaw else Fraction(0),
                                        reach=reach, gripper=g, source=self.src(item)))
            elif kind == "DefaultGripper":
                if default is not None:
                    self.err(item, "default gripper is given twice")
                default = self.gripper(item.gripper)
            elif kind == "Keepout":
                if not claim(item, item.name, "keep-out zone"):
                    continue
                if item.half is not None:
                    z = self.halfspace(item)
                    if z is not None:
                        keepouts.append(z)
                else:
                    rs: dict[str, tuple[Fraction, Fraction]] = {}
                    for r in item.ranges:
                        lo, hi = self.length(r, r.lo), self.length(r, r.hi)
                        if r.axis in rs:
                            self.err(r, f"keep-out axis {r.axis} is given twice")
                        if lo >= hi:
                            self.err(r, f"keep-out {r.axis} range is empty: {r.lo} >= {r.hi}")
                        rs[r.axis] = (lo, hi)
                    # an omitted axis is unbounded: beyond any part a layout may hold, and
                    # small enough for clingo's 32-bit integers
                    big = Fraction(int(MAX_ABS_COORD_M + MAX_SIZE_M) + 1)
                    lo3 = tuple(rs.get(a, (-big, big))[0] for a in "xyz")
                    hi3 = tuple(rs.get(a, (-big, big))[1] for a in "xyz")
                    keepouts.append(BoxZone(name=item.name, box=Box(lo=lo3, hi=hi3),
                                            source=self.src(item)))
            elif kind == "Friction":
                if friction is not None:
                    self.err(item, "friction is given twice")
                friction = Fraction(item.mu)
                if friction <= 0:
                    self.err(item, "friction must be positive: with frictionless contacts "
                             "nothing resists the smallest sideways push (e.g. friction 0.3)")
                elif friction > 10:
                    self.err(item, f"friction {item.mu} is absurd: Coulomb coefficients of "
                             "real materials are below about 1.5 (at most 10 is accepted)")
            elif kind == "Stability":
                if stab_seen:
                    self.err(item, "stability is given twice")
                stab_seen = True
                if item.off:
                    stability_on = False
                else:
                    margin = self.length(item, item.margin)
                    if margin < 0:
                        self.err(item, "stability margin must not be negative")
                    else:
                        stab_item = (item, margin)
            elif kind == "Tolerance":
                if eps is not None:
                    self.err(item, "tolerance contact is given twice")
                eps = self.n(item.eps)
                if eps < 0:
                    self.err(item, "tolerance contact must not be negative")
        missing = [a for a in "xyz" if a not in ws]
        if ws_seen is None:
            self.err(st, f"cell '{st.name}' has no workspace: add `workspace x [..] y [..] z [..]`")
        elif missing:
            self.err(ws_seen, f"workspace lacks the {', '.join(missing)} range")
        lo = tuple(ws.get(a, (Fraction(0), Fraction(1)))[0] for a in "xyz")
        hi = tuple(ws.get(a, (Fraction(0), Fraction(1)))[1] for a in "xyz")
        if default is None:
            default = robots[0].gripper if robots else Gripper(kind="parallel")
        if stab_item is not None and ptypes:
            item, m = stab_item
            narrow = min(ptypes.values(), key=lambda t: min(t.size[0], t.size[1]))
            half = min(narrow.size[0], narrow.size[1]) / 2
            if m >= half:
                self.err(item, f"stability margin {float(m):g} m leaves no room: part type "
                         f"'{narrow.name}' is {float(2 * half):g} m wide, so no contact of it "
                         f"could carry a load (the margin must be below {float(half):g} m)")
        return dict(
            workspace=Box(lo=lo, hi=hi),
            surfaces=tuple(surfaces),
            part_types=ptypes,
            robots=tuple(robots),
            default_gripper=default,
            keepouts=tuple(keepouts),
            epsilon=eps if eps is not None else Fraction(1, 1000),
            friction=friction,
            stability_margin=margin,
            stability=stability_on,
            twin=build_twin(self, twin_items, tuple(r.name for r in robots), ptypes, claim),
        )

    def vec(self, v: Any) -> tuple[Fraction, Fraction, Fraction]:
        return (self.n(v.x), self.n(v.y), self.n(v.z))

    def gripper(self, g: Any) -> Gripper:
        opening = self.n(g.opening) if g.opening else None
        depth = self.n(g.depth) if g.depth else None
        if g.kind == "vacuum" and (opening is not None or depth is not None):
            self.err(g, "a vacuum gripper has no opening or finger depth")
        if opening is not None and opening <= 0:
            self.err(g, "gripper opening must be positive")
        if depth is not None and depth <= 0:
            self.err(g, "finger depth must be positive")
        return Gripper(kind=g.kind, opening=opening, depth=depth)

    def halfspace(self, item: Any) -> HalfSpaceZone | None:
        try:
            return halfspace_zone(item.half, item.name, self.n, self.src(item),
                                  f"keep-out '{item.name}'")
        except ValueError as exc:
            self.err(item, str(exc))
            return None

    # -- rules -------------------------------------------------------------------
    def build_rule(self, st: Any, cell: dict[str, Any]) -> Rule | None:
        before = len(self.sink.items)
        ctx = _ExprCtx(self, cell)
        body = ctx.boolean(st.body, {})
        if len(self.sink.items) > before or body is None:
            return None
        top = tuple(ir.top_domains(body))
        self.check_message(st, top, body)
        return Rule(name=st.name, message=_unescape(st.message), severity=st.severity or "error",
                    body=body, source=self.src(st))

    def check_message(self, st: Any, top: tuple[str, ...], body: ir.Node) -> None:
        msg = _unescape(st.message)
        top_domains = _top_domains(body)
        for m in PLACEHOLDER.finditer(msg):
            inner = m.group(1).strip()
            fm = re.fullmatch(r"(\w+)\(([^()]*)\)", inner)
            if fm:
                fname, args = fm.group(1), [a.strip() for a in fm.group(2).split(",") if a.strip()]
                if fname not in MESSAGE_FUNCS:
                    self.err(st, f"message uses unknown function '{fname}' (known: "
                             f"{', '.join(sorted(MESSAGE_FUNCS))})")
                elif len(args) != MESSAGE_FUNCS[fname]:
                    self.err(st, f"message function '{fname}' takes {MESSAGE_FUNCS[fname]} "
                             "argument(s)")
                for a in args:
                    if a not in top:
                        self.err(st, f"message refers to '{a}', which is not a variable of the "
                                 f"rule's outer forall ({', '.join(top) or 'none'})")
                continue
            var, _, attr = inner.partition(".")
            if var not in top:
                self.err(st, f"message placeholder '{{{inner}}}' names no variable of the rule's "
                         f"outer forall ({', '.join(top) or 'none'})")
            elif attr and (top_domains.get(var) != "part" or
                           (attr not in ir.NUMERIC_ATTRS and attr not in ir.SYMBOL_ATTRS)):
                self.err(st, f"message placeholder '{{{inner}}}': unknown attribute '{attr}'")

    # -- tests -------------------------------------------------------------------
    def build_test(self, st: Any, cell: dict[str, Any], rules: dict[str, Rule]) -> TestCase | None:
        before = len(self.sink.items)
        parts: list[InlinePart] | None = None
        layout_path: str | None = None
        order = None
        expect = None
        expected: list[Expectation] = []
        only = False
        robust: Fraction | None = None
        robust_expected = True
        layouts = 0
        plan_path: str | None = None
        is_plan = any(type(i).__name__ == "PlanFile" for i in st.items)
        for item in st.items:
            kind = type(item).__name__
            if kind == "PlanFile":
                if plan_path is not None:
                    self.err(item, f"test '{st.name}' has more than one plan")
                p = (self.cur.path.parent / item.path)
                if not p.exists():
                    self.err(item, f"plan file not found: {display_path(p)}")
                plan_path = str(p)
                continue
            if kind in ("InlineLayout", "FileLayout"):
                layouts += 1
                if layouts > 1:
                    self.err(item, f"test '{st.name}' has more than one layout")
                    continue
                if kind == "FileLayout":
                    p = (self.cur.path.parent / item.path)
                    if not p.exists():
                        self.err(item, f"layout file not found: {display_path(p)}")
                    layout_path = str(p)
                else:
                    parts = []
                    ids: set[str] = set()
                    for ip in item.parts:
                        if ip.id in ids:
                            self.err(ip, f"duplicate part id '{ip.id}'")
                        ids.add(ip.id)
                        if ip.type not in cell["part_types"]:
                            known = ", ".join(sorted(cell["part_types"])) or "none"
                            self.err(ip, f"unknown part type '{ip.type}' (known: {known})")
                            continue
                        size = self.vec(ip.size) if ip.size else None
                        if size is not None and any(s <= 0 for s in size):
                            self.err(ip, "part size must be positive on every axis")
                        parts.append(InlinePart(id=ip.id, type=ip.type, pos=self.vec(ip.pos),
                                                size=size, gripper=ip.gripper or None))
            elif kind == "Order":
                if order is not None:
                    self.err(item, "order is given twice")
                order = tuple(item.ids)
            elif kind == "Expect":
                if expect is not None:
                    self.err(item, "expect is given twice")
                expect = item.verdict
                for e in item.items:
                    if is_plan:  # a plan test names the first failed check (RoCo's order)
                        if e.rule not in PLAN_CHECKS:
                            self.err(e, f"unknown plan check '{e.rule}' (checks: "
                                     f"{', '.join(PLAN_CHECKS)})")
                        expected.append(Expectation(rule=e.rule, parts=tuple(e.parts),
                                                    source=self.src(e)))
                        continue
                    rule = rules.get(e.rule)
                    if rule is None:
                        self.err(e, f"expected violation of unknown rule '{e.rule}'")
                        continue
                    nparts = len([v for v, d in _top_domains(rule.body).items() if d == "part"])
                    if len(e.parts) != nparts:
                        self.err(e, f"rule '{e.rule}' names {nparts} part(s) per violation, "
                                 f"here {len(e.parts)} are given")
                    expected.append(Expectation(rule=e.rule, parts=tuple(e.parts),
                                                source=self.src(e)))
            elif kind == "Robust":
                if robust is not None:
                    self.err(item, "robust is given twice")
                robust = self.n(item.tol)
                robust_expected = not item.negated
                if robust < 0 or robust > Fraction(1, 10):
                    self.err(item, "robust tolerance must be between 0 and 0.1 m")
            elif kind == "Only":
                only = True
        if is_plan and (layouts or order is not None or robust is not None):
            self.err(st, f"test '{st.name}': a plan test takes no layout, order or robust")
        if layouts == 0 and not is_plan:
            self.err(st, f"test '{st.name}' has no layout")
        if expect is None:
            self.err(st, f"test '{st.name}' has no `expect pass` or `expect fail ...`")
        if parts is not None:
            ids = {p.id for p in parts}
            for e in expected:
                for pid in e.parts:
                    if pid not in ids:
                        self.sink.add(e.source.file, e.source.line, e.source.col,
                                      f"expected violation names part '{pid}', which is not in "
                                      "the test's layout")
            if order is not None:
                for pid in order:
                    if pid not in ids:
                        self.err(st, f"order names part '{pid}', which is not in the layout")
        if len(self.sink.items) > before:
            return None
        return TestCase(name=st.name, parts=tuple(parts) if parts is not None else None,
                        layout_path=layout_path, order=order, expect=expect or "pass",
                        expected=tuple(expected), only=only, robust=robust,
                        robust_expected=robust_expected, plan_path=plan_path,
                        source=self.src(st))


def _unescape(s: str) -> str:
    return s.replace('\\"', '"').replace("\\\\", "\\")


def _top_domains(body: ir.Node) -> dict[str, str]:
    return ir.top_domains(body)


# --- expressions -------------------------------------------------------------------

@dataclass(frozen=True)
class _BoolT:
    node: ir.Node


@dataclass(frozen=True)
class _SymT:
    name: str
    obj: Any


@dataclass(frozen=True)
class _AttrSymT:
    var: str
    attr: str


@dataclass(frozen=True)
class _CountT:
    vars: tuple[str, ...]
    domain: str
    unordered: bool
    body: ir.Node


class _ExprCtx:
    """Builds IR from textX expression objects; scope maps variables to domains."""

    def __init__(self, b: _Builder, cell: dict[str, Any]):
        self.b = b
        self.cell = cell
        self.zones = {z.name for z in cell["keepouts"]}
        self.surfaces = {s.name for s in cell["surfaces"]}

    def err(self, obj: Any, msg: str) -> None:
        self.b.err(obj, msg)

    def boolean(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        cls = type(node).__name__
        if cls == "Quant":
            return self.quant(node, scope)
        if cls == "Implies":
            left = self.boolean(node.left, scope)
            if node.right is None:
                return left
            right = self.boolean(node.right, scope)
            if left is None or right is None:
                return None
            return ir.Or((ir.Not(left), right))
        if cls in ("Or", "And"):
            ops = [self.boolean(o, scope) for o in node.ops]
            if any(o is None for o in ops):
                return None
            if len(ops) == 1:
                return ops[0]
            return (ir.Or if cls == "Or" else ir.And)(tuple(ops))  # type: ignore[arg-type]
        if cls == "NotExpr":
            inner = self.boolean(node.operand, scope)
            return None if inner is None else ir.Not(inner)
        if cls == "Cmp":
            return self.cmp(node, scope)
        self.err(node, f"expected a condition, found {cls}")
        return None

    def bind(self, node: Any, scope: dict[str, str]):
        """The variables a quantifier or count binds and its body built in their scope:
        (names, domain, unordered, type filter, body), or None after an error."""
        vs = self.qvars(node.vars, scope)
        if vs is None:
            return None
        names, domain, unordered, type_filter = vs
        inner = dict(scope)
        for v in names:
            inner[v] = domain
        body = self.boolean(node.body, inner)
        if body is None:
            return None
        return names, domain, unordered, type_filter, body

    def quant(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        bound = self.bind(node, scope)
        if bound is None:
            return None
        names, domain, unordered, type_filter, body = bound
        if type_filter is not None:
            guard = ir.And(tuple(ir.SymEq(v, "type", type_filter, True) for v in names)) \
                if len(names) > 1 else ir.SymEq(names[0], "type", type_filter, True)
            body = ir.Or((ir.Not(guard), body)) if node.kind == "forall" else ir.And((guard, body))
        return ir.Quant(node.kind, tuple(names), domain, unordered, body)

    def qvars(self, qv: Any, scope: dict[str, str]):
        names = list(qv.names)
        ok = True
        for v in names:
            if v in scope:
                self.err(qv, f"variable '{v}' is already bound by an enclosing quantifier")
                ok = False
            if v in self.zones or v in self.surfaces or v in ("workspace", "x", "y", "z"):
                self.err(qv, f"variable '{v}' shadows a name of the cell; pick another name")
                ok = False
        if len(set(names)) != len(names):
            self.err(qv, "a quantifier binds the same variable twice")
            ok = False
        if qv.unordered and len(names) < 2:
            self.err(qv, "{...} (unordered pairs) needs at least two variables")
            ok = False
        domain, tfilter = "part", None
        if qv.domain:
            if qv.domain == "keepout":
                domain = "keepout"
                if qv.unordered:
                    self.err(qv, "unordered pairs range over parts only")
                    ok = False
            elif qv.domain in self.cell["part_types"]:
                tfilter = qv.domain
            else:
                known = ", ".join(["keepout", *sorted(self.cell["part_types"])])
                self.err(qv, f"unknown domain '{qv.domain}' (known: {known})")
                ok = False
        return (names, domain, bool(qv.unordered), tfilter) if ok else None

    def cmp(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        left = self.term(node.left, scope)
        if node.op is None:
            if isinstance(left, _BoolT):
                return left.node
            if left is not None:
                self.err(node, "expected a condition (a comparison, a relation such as "
                         "contact(p, q), or a quantifier), found a value")
            return None
        right = self.term(node.right, scope)
        if left is None or right is None:
            return None
        op = node.op
        if isinstance(left, ir.Lin) and isinstance(right, ir.Lin):
            return ir.Cmp(op, left.add(right.scale(Fraction(-1))))
        if isinstance(right, _AttrSymT) and isinstance(left, _SymT):
            left, right = right, left
        if isinstance(left, _AttrSymT):
            if op not in ("==", "!="):
                self.err(node, f"p.{left.attr} can only be compared with == or !=")
                return None
            if not isinstance(right, _SymT):
                self.err(node, f"compare p.{left.attr} with a name such as "
                         f"{'cube' if left.attr == 'type' else 'parallel'}")
                return None
            if left.attr == "type" and right.name not in self.cell["part_types"]:
                self.err(node, f"unknown part type '{right.name}'")
                return None
            if left.attr == "gripper" and right.name not in ("vacuum", "parallel"):
                self.err(node, f"unknown gripper '{right.name}' (vacuum or parallel)")
                return None
            return ir.SymEq(left.var, left.attr, right.name, op == "==")
        flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
        if isinstance(right, _CountT) and not isinstance(left, _CountT):
            left, right, op = right, left, flip[op]
        if isinstance(left, _CountT):
            raw = right.const / self._unit() if isinstance(right, ir.Lin) and right.is_const \
                else None
            if raw is None or raw.denominator != 1:
                self.err(node, "count(...) can only be compared with a whole number")
                return None
            n = int(raw)
            if abs(n) > MAX_COUNT_CONST:
                self.err(node, f"count(...) is compared with {n}, which is too large: counts "
                         f"are compared exactly up to {MAX_COUNT_CONST} (32-bit integers)")
                return None
            return ir.CountCmp(left.vars, left.domain, left.unordered, left.body, op, n)
        self.err(node, "these two sides cannot be compared (a length with a name, or a "
                 "condition with a number)")
        return None

    def term(self, node: Any, scope: dict[str, str]):
        cls = type(node).__name__
        if cls == "Sum":
            acc = None
            for i, op in enumerate(node.ops):
                t = self.term(op, scope)
                if t is None:
                    return None
                if len(node.ops) == 1:
                    return t
                if not isinstance(t, ir.Lin):
                    self.err(op, "only lengths can be added or subtracted")
                    return None
                if i > 0 and node.signs[i - 1] == "-":
                    t = t.scale(Fraction(-1))
                acc = t if acc is None else acc.add(t)
            return acc
        if cls == "Prod":
            if len(node.ops) == 1:
                return self.term(node.ops[0], scope)
            acc: ir.Lin | None = None
            for op in node.ops:
                t = self.term(op, scope)
                if t is None:
                    return None
                if not isinstance(t, ir.Lin):
                    self.err(op, "only numbers and lengths can be multiplied")
                    return None
                if acc is None:
                    acc = t
                elif acc.is_const:
                    acc = t.scale(acc.const / self._unit())
                elif t.is_const:
                    acc = acc.scale(t.const / self._unit())
                else:
                    self.err(node, "multiplication needs a constant factor (the rules stay "
                             "linear)")
                    return None
            return acc
        if cls == "Unary":
            t = self.term(node.operand, scope)
            if node.minus:
                if not isinstance(t, ir.Lin):
                    if t is not None:
                        self.err(node, "unary minus applies to numbers and lengths only")
                    return None
                return t.scale(Fraction(-1))
            return t
        if cls == "NumLit":
            return ir.Lin.constant(self.b.n(node.value))
        if cls == "BoolLit":
            return _BoolT(ir.BoolConst(node.value == "true"))
        if cls == "Attr":
            if node.var not in scope:
                self.err(node, f"unknown variable '{node.var}'")
                return None
            if scope[node.var] != "part":
                self.err(node, f"'{node.var}' is a keep-out zone; attributes belong to parts")
                return None
            attr = ".".join(node.path)
            if attr in ir.NUMERIC_ATTRS:
                return ir.Lin.of(ir.Attr(node.var, attr))
            if attr in ir.SYMBOL_ATTRS:
                return _AttrSymT(node.var, attr)
            known = ", ".join(list(ir.NUMERIC_ATTRS) + list(ir.SYMBOL_ATTRS))
            self.err(node, f"unknown attribute '{attr}' (known: {known})")
            return None
        if cls == "Ref":
            if node.name in scope:
                self.err(node, f"'{node.name}' is a {scope[node.name]} variable, not a value; "
                         f"use an attribute such as {node.name}.x")
                return None
            return _SymT(node.name, node)
        if cls == "Paren":
            inner = self._unwrap(node.expr)
            if inner is not None:
                return self.term(inner, scope)
            b = self.boolean(node.expr, scope)
            return None if b is None else _BoolT(b)
        if cls == "Count":
            bound = self.bind(node, scope)
            if bound is None:
                return None
            names, domain, unordered, tfilter, body = bound
            if tfilter is not None:
                body = ir.And((*(ir.SymEq(v, "type", tfilter, True) for v in names), body))
            return _CountT(tuple(names), domain, unordered, body)
        if cls == "Call":
            r = self.call(node, scope)
            return None if r is None else _BoolT(r)
        self.err(node, f"unexpected {cls}")
        return None

    def _unit(self) -> Fraction:
        return self.b.cur.scale if self.b.cur else Fraction(1)

    @staticmethod
    def _unwrap(expr: Any) -> Any | None:
        """The arithmetic Sum inside a parenthesised expression, or None if boolean."""
        node = expr
        if type(node).__name__ != "Implies" or node.right is not None:
            return None
        node = node.left
        if len(node.ops) != 1:
            return None
        node = node.ops[0]
        if type(node).__name__ != "And" or len(node.ops) != 1:
            return None
        node = node.ops[0]
        if type(node).__name__ != "Cmp" or node.op is not None:
            return None
        left = node.left
        # a lone relation call stays boolean
        if (len(left.ops) == 1 and len(left.ops[0].ops) == 1 and not left.ops[0].ops[0].minus
                and type(left.ops[0].ops[0].operand).__name__ in ("Call", "Paren", "BoolLit",
                                                                   "Count")):
            return None
        return left

    def call(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        name = node.name
        if name not in ir.RELATIONS:
            known = ", ".join(sorted(ir.RELATIONS))
            self.err(node, f"unknown relation '{name}' (built-in relations: {known})")
            return None
        sig = ir.RELATIONS[name]
        if len(node.args) != len(sig):
            self.err(node, f"{name} takes {len(sig)} argument(s), got {len(node.args)}")
            return None
        args: list[ir.Arg] = []
        for kind, a in zip(sig, node.args, strict=True):
            acls = type(a).__name__
            aname = getattr(a, "name", None)
            if kind == "part":
                if acls != "Ref" or scope.get(aname) != "part":
                    self.err(a, f"argument of {name} must be a part variable")
                    return None
                args.append(ir.VarArg(aname))
            elif kind == "surface_or_part":
                if acls == "Ref" and scope.get(aname) == "part":
                    # on(p, q) means q supports p
                    return ir.Rel("supports", (ir.VarArg(aname), args[0]))
                if acls == "Ref" and aname in self.surfaces:
                    args.append(ir.NameArg(aname))
                else:
                    known = ", ".join(sorted(self.surfaces)) or "none defined"
                    self.err(a, f"second argument of on must be a part variable or a surface "
                             f"(surfaces: {known})")
                    return None
            elif kind == "zone":
                if acls == "Ref" and scope.get(aname) == "keepout":
                    args.append(ir.VarArg(aname))
                elif acls == "Ref" and (aname in self.zones or aname == "workspace"):
                    args.append(ir.NameArg(aname))
                else:
                    known = ", ".join(["workspace", *sorted(self.zones)])
                    self.err(a, f"argument of {name} must be a zone ({known}) or a keep-out "
                             "variable")
                    return None
            elif kind == "length":
                if acls != "NumLit":
                    self.err(a, f"the distance of {name} must be a number")
                    return None
                d = self.b.n(a.value)
                if d < 0:
                    self.err(a, f"the distance of {name} must not be negative")
                    return None
                args.append(ir.NumArg(d))
            elif kind == "axis":
                if acls != "Ref" or aname not in ("x", "y"):
                    self.err(a, f"the axis of {name} must be x or y")
                    return None
                args.append(ir.NameArg(aname))
        return ir.Rel(name, tuple(args))
