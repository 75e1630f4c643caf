"""Building the typed model of a cell (cellspec/dsl/model.py) from parsed files: the
``cell`` block's items (workspace, surfaces, part types, robots, grippers, keep-outs,
friction, stability, tolerance), the rules of every loaded file and the main file's tests,
each problem collected with its file:line:col.

The second of the parser's stages (after cellspec/dsl/load.py); rule bodies are lowered
by cellspec/dsl/lower.py, tests by cases.py, twin and world items by twin.py and world.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

from textx import get_location

from cellspec.core.errors import CellspecError, DiagnosticSink
from cellspec.core.geometry import MAX_ABS_COORD_M, MAX_SIZE_M, halfspace_u
from cellspec.dsl.cases import build_test
from cellspec.dsl.load import STDLIB, SourceFile, path_key, stdlib_path
from cellspec.dsl.lower import lower_rule
from cellspec.dsl.model import (
    Box,
    BoxZone,
    Cell,
    Gripper,
    HalfSpaceZone,
    PartType,
    Robot,
    Rule,
    Source,
    Surface,
    TestCase,
    Zone,
)
from cellspec.dsl.twin import TWIN_ITEMS, build_twin
from cellspec.dsl.world import build_world

MAX_CELL_COORD_M = 10_000  # a cell's constants (workspace, zones, surfaces) stay within this
STABILITY_RULES = ("stability", "stability_stages")  # dropped by `stability off`
MAX_PART_MASS_KG = 10_000  # beyond this a mass is a typo (and makes the stability LP ill-scaled)


def halfspace_zone(half: Any, name: str, length: Any, source: Source,
                   what: str | None = None) -> HalfSpaceZone:
    """The zone of a parsed half-space ``[k] axis (+|- [k] axis)* op rhs`` (``length`` reads
    the rhs in the file's units). ValueError, with the message for the user naming ``what``,
    when it has no x, y or z term or is too fine for exact 32-bit integers."""
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

    # -- helpers -------------------------------------------------------------
    def src(self, obj: Any) -> Source:
        """Where a textX object is written, in the current file."""
        loc = get_location(obj)
        return Source(file=self.cur.shown if self.cur else "", line=loc["line"], col=loc["col"])

    def err(self, obj: Any, msg: str) -> None:
        """Report a problem at a textX object of the current file."""
        s = self.src(obj)
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

    def n(self, text: str) -> Fraction:
        """A number of the current file, lengths in metres."""
        return Fraction(text) * self.scale

    def length(self, obj: Any, text: str) -> Fraction:
        """A cell length; absurd magnitudes are an error (they would overflow the grid)."""
        v = self.n(text)
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
        self.cur = cf
        cell_parts = self.build_cell(cst)
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
        """A parsed (x, y, z) in the current file's units, as metres."""
        return (self.n(v.x), self.n(v.y), self.n(v.z))

    def gripper(self, g: Any) -> Gripper:
        """A parsed gripper, checked."""
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
        """The half-space keep-out of ``item``, or None after reporting why not."""
        try:
            return halfspace_zone(item.half, item.name, self.n, self.src(item),
                                  f"keep-out '{item.name}'")
        except ValueError as exc:
            self.err(item, str(exc))
            return None
