"""Structure specs (``design NAME { ... }`` statements): typed model and builder.

A design lists structures, each a kind with parameters (``tower(n=3)``), an optional
anchor ``at (x, y)`` (the centre of the structure's footprint; without it the solver
chooses) and optional constraints in brackets; a constraint written on its own line
applies to every structure of the design. The grammar is ``grammar/design.tx``; this
module checks kinds, parameters and constraints and reports every problem with
file:line:col, naming the valid choices. Lengths are exact metres (the file's units).
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from textx import get_location

from cellspec.core.errors import CellspecError, Diagnostic, DiagnosticSink
from cellspec.core.names import did_you_mean, unknown
from cellspec.dsl.build import halfspace_zone
from cellspec.dsl.defs import NUMBER
from cellspec.dsl.load import display_path, parse_text, path_key, read_rule_file
from cellspec.dsl.model import BoxZone, HalfSpaceZone, Source, Zone, _Frozen, axis_box

# kind -> parameter -> default (None: required). Every kind also takes ``type=NAME``.
KINDS: dict[str, dict[str, int | str | None]] = {
    "tower": {"n": 3},
    "wall": {"width": 3, "height": 2, "along": "x"},
    "pyramid": {"base": 3, "along": "x"},
    "staircase": {"steps": 4, "along": "x"},
    "bridge": {"span": 1, "pillar": 2, "along": "x"},
    "arch": {"span": 1, "pillar": 2, "along": "x"},
    "canopy": {"pillars": 4, "height": 3},
    "enclosure": {"w": 3, "d": 3, "h": 2},
    "block": {"w": 3, "d": 2, "h": 2},
    "packing": {"n": None},
}
WORD_PARAMS = {"along": ("x", "y"), "type": None}
PARAM_ALIASES = {"part": "type"}  # `tower(n=3, part=can)` = `tower(n=3, type=can)`
GOALS = ("height", "footprint")
AT_TOL = Fraction(5, 1000)  # m: `at (x, y)` holds when the footprint centre is this close
ANCHORS = {"at": "hard: the footprint centre within 5 mm of (x, y) on each axis",
           "near": "soft: as near (x, y) as the rules allow; the output says what was chosen"}
CONSTRAINTS = {"max height H": "every part's top at most H m above the table",
               "count [==|<=|>=|<|>] N": "the number of parts",
               "inside x [A, B] y [C, D] [z [E, F]]": "every part's box inside",
               "symmetric [x|y]": "mirror symmetric about the structure's centre plane",
               "keep clear of ZONE | box x [..] y [..] | : HALF-SPACE": "no part enters",
               "apart D": "design-wide: consecutive structures' footprints D m apart (the "
                          "clear gap, the larger of the x and y gaps, within 1 mm)"}
MAX_PARAM = 1000
MAX_PARTS = 5000


class CountConstraint(_Frozen):
    kind: Literal["count"] = "count"
    op: str
    n: int
    source: Source


class MaxHeightConstraint(_Frozen):
    kind: Literal["max_height"] = "max_height"
    h: Fraction
    source: Source


class InsideConstraint(_Frozen):
    """Every part's box lies inside these ranges (axes not given are free)."""

    kind: Literal["inside"] = "inside"
    ranges: tuple[tuple[str, Fraction, Fraction], ...]
    source: Source


class SymmetricConstraint(_Frozen):
    """Mirror symmetry of the structure about its own centre plane normal to ``axis``
    (None: both x and y)."""

    kind: Literal["symmetric"] = "symmetric"
    axis: Literal["x", "y"] | None = None
    source: Source


class KeepClearConstraint(_Frozen):
    """No part enters the zone (a box, a half-space, or a keep-out zone of the cell)."""

    kind: Literal["keep_clear"] = "keep_clear"
    zone: Zone | None = None
    zone_name: str | None = None
    source: Source


class ApartConstraint(_Frozen):
    """Consecutive structures of the design stand ``d`` apart: the clear gap between their
    footprints (the larger of the x gap and the y gap), design-wide only."""

    kind: Literal["apart"] = "apart"
    d: Fraction
    source: Source


Constraint = (CountConstraint | MaxHeightConstraint | InsideConstraint | SymmetricConstraint
              | KeepClearConstraint | ApartConstraint)


class StructureSpec(_Frozen):
    kind: str
    params: dict[str, int | str]
    at: tuple[Fraction, Fraction] | None = None
    soft: bool = False  # `near (x, y)`: the anchor is a wish, not a rule
    region: tuple[tuple[str, Fraction, Fraction], ...] = ()
    minimize: Literal["height", "footprint"] | None = None
    constraints: tuple[Constraint, ...] = ()
    source: Source


class DesignSpec(_Frozen):
    name: str
    structures: tuple[StructureSpec, ...]
    constraints: tuple[Constraint, ...] = ()  # design-wide (count applies to the total)
    source: Source


def language(part_types: Any = ()) -> dict[str, Any]:
    """The design language as data, for prompts and JSON schemas (the model's spec is
    parsed by this module like any other): kinds with their parameters and defaults, the
    part types ``part=`` may name (the cell's), anchors and constraints."""
    return {"kinds": {k: dict(v) for k, v in KINDS.items()},
            "word_params": {"along": list(WORD_PARAMS["along"] or ()),
                            "part": sorted(part_types)},
            "param_aliases": dict(PARAM_ALIASES), "packing": ["region x [A, B] y [C, D]",
                                                              "minimize height|footprint"],
            "anchors": dict(ANCHORS), "constraints": dict(CONSTRAINTS)}


def load_designs(path: str | os.PathLike[str]) -> tuple[DesignSpec, ...]:
    """Every design statement of a .cell file (its imports are not searched); raises
    CellspecError with file:line:col for syntax errors and bad kinds or parameters."""
    p = path_key(Path(path))
    shown = display_path(p)
    if not p.exists():
        raise CellspecError(Diagnostic(shown, 0, 0, "no such file"))
    text = read_rule_file(p)
    model = parse_text(text, shown)
    scale = Fraction(1)
    for st in model.statements:
        if type(st).__name__ == "Cell":
            for item in st.items:
                if type(item).__name__ == "Units" and item.unit == "mm":
                    scale = Fraction(1, 1000)
    b = DesignBuilder(shown, scale)
    out = [b.design(st) for st in model.statements if type(st).__name__ == "Design"]
    b.sink.raise_if_any()
    names: dict[str, Source] = {}
    for d in out:
        if d.name in names:
            b.sink.add(d.source.file, d.source.line, d.source.col,
                       f"design '{d.name}' is already defined at {names[d.name]}")
        names[d.name] = d.source
    b.sink.raise_if_any()
    return tuple(out)


def pick_design(designs: tuple[DesignSpec, ...], name: str | None, shown: str) -> DesignSpec:
    """The design called ``name``, or the only one; CellspecError otherwise."""
    if not designs:
        raise CellspecError(Diagnostic(shown, 0, 0, "no design in this file: add `design NAME "
                                       "{ tower(n=3) at (0.40, 0.20) }`"))
    if name is None:
        if len(designs) > 1:
            raise CellspecError(Diagnostic(shown, 0, 0, "several designs ("
                                           + ", ".join(d.name for d in designs)
                                           + "): choose one with --design NAME"))
        return designs[0]
    for d in designs:
        if d.name == name:
            return d
    raise CellspecError(Diagnostic(shown, 0, 0, f"no design '{name}' (designs: "
                                   + ", ".join(d.name for d in designs) + ")"))


class DesignBuilder:
    def __init__(self, shown: str, scale: Fraction):
        self.shown = shown
        self.scale = scale
        self.sink = DiagnosticSink()
        self.nclear = 0
        self.design_name = ""

    def src(self, obj: Any) -> Source:
        loc = get_location(obj)
        return Source(file=self.shown, line=loc["line"], col=loc["col"])

    def err(self, obj: Any, msg: str) -> None:
        s = self.src(obj)
        self.sink.add(s.file, s.line, s.col, msg)

    def n(self, text: str, obj: Any = None) -> Fraction:
        if not NUMBER.fullmatch(text):  # the shared Range reads a const name; designs do not
            self.err(obj, f"'{text}': a design takes numbers, not consts (constants of "
                     "language version 2 are usable in rules, cells and tests)")
            return Fraction(0)
        return Fraction(text) * self.scale

    def design(self, st: Any) -> DesignSpec:
        self.design_name = st.name
        self.nclear = 0
        structures: list[StructureSpec] = []
        constraints: list[Constraint] = []
        for item in st.items:
            if type(item).__name__ == "Structure":
                s = self.structure(item)
                if s is not None:
                    structures.append(s)
            else:
                c = self.constraint(item)
                if c is not None:
                    constraints.append(c)
        if not st.items or not any(type(i).__name__ == "Structure" for i in st.items):
            self.err(st, f"design '{st.name}' has no structure (kinds: {', '.join(KINDS)})")
        return DesignSpec(name=st.name, structures=tuple(structures),
                          constraints=tuple(constraints), source=self.src(st))

    def ranges(self, rs: Any) -> tuple[tuple[str, Fraction, Fraction], ...]:
        out: dict[str, tuple[Fraction, Fraction]] = {}
        for r in rs:
            lo, hi = self.n(r.lo, r), self.n(r.hi, r)
            if r.axis in out:
                self.err(r, f"axis {r.axis} is given twice")
            elif lo >= hi:
                self.err(r, f"{r.axis} range is empty: {r.lo} >= {r.hi}")
            out[r.axis] = (lo, hi)
        return tuple((a, lo, hi) for a, (lo, hi) in sorted(out.items()))

    # complexity: one branch per structure kind and its parameters
    def structure(self, item: Any) -> StructureSpec | None:  # noqa: C901
        before = len(self.sink.items)
        kind = item.kind
        if kind not in KINDS:
            self.err(item, unknown("structure", kind, KINDS))
            return None
        allowed = KINDS[kind]
        params: dict[str, int | str] = {}
        region: tuple[tuple[str, Fraction, Fraction], ...] = ()
        minimize = None
        for p in item.params:
            cls = type(p).__name__
            if cls in ("RegionParam", "MinimizeParam") and kind != "packing":
                self.err(p, f"{kind} takes no {'region' if cls == 'RegionParam' else 'minimize'}"
                         f" (parameters: {', '.join([*allowed, 'type'])})")
                continue
            if cls == "RegionParam":
                if region:
                    self.err(p, "region is given twice")
                region = self.ranges(p.ranges)
                if any(a == "z" for a, _, _ in region):
                    self.err(p, "a packing region is given in x and y only")
                continue
            if cls == "MinimizeParam":
                if p.goal not in GOALS:
                    self.err(p, f"unknown goal '{p.goal}'{did_you_mean(p.goal, GOALS)} "
                             f"(minimize {' or '.join(GOALS)})")
                    continue
                minimize = p.goal
                continue
            name = PARAM_ALIASES.get(p.name, p.name)
            if name not in allowed and name != "type":
                extra = ["region", "minimize"] if kind == "packing" else []
                self.err(p, f"unknown parameter '{name}' of {kind}"
                         f"{did_you_mean(name, [*allowed, *extra, 'type'])} (parameters: "
                         f"{', '.join([*allowed, *extra, 'type'])})")
                continue
            if name in params:
                self.err(p, f"parameter '{name}' is given twice")
                continue
            v = p.value
            if name in WORD_PARAMS:
                choices = WORD_PARAMS[name]
                if v.word is None:
                    self.err(p, f"{name} takes a name"
                             + (f" ({' or '.join(choices)})" if choices else " (a part type)"))
                    continue
                if choices and v.word not in choices:
                    self.err(p, f"{name} must be {' or '.join(choices)}, not '{v.word}'")
                    continue
                params[name] = v.word
                continue
            if v.num is None:
                self.err(p, f"{name} takes a whole number, not '{v.word}'")
                continue
            f = Fraction(v.num)
            if f.denominator != 1 or f < 1 or f > MAX_PARAM:
                self.err(p, f"{name} must be a whole number from 1 to {MAX_PARAM}, not {v.num}")
                continue
            params[name] = int(f)
        for name, default in allowed.items():
            if name not in params:
                if default is None:
                    self.err(item, f"{kind} needs {name}=...")
                else:
                    params[name] = default
        if kind == "packing":
            if not region:
                self.err(item, "packing needs a region: packing(n=12, region x [a, b] y [c, d])")
            minimize = minimize or "height"
        if kind == "canopy" and params.get("pillars") != 4:
            self.err(item, "canopy supports pillars=4 (a 3 x 3 roof on four pillars); "
                     "for two pillars use arch(span=..., pillar=...)")
        if kind == "enclosure" and (int(params.get("w", 3)) < 3 or int(params.get("d", 3)) < 3):
            self.err(item, "an enclosure needs w >= 3 and d >= 3 (a ring around an open "
                     "middle); for a solid one use block(w=..., d=..., h=...)")
        at = None
        soft = getattr(item, "anchor", "at") == "near"
        if item.at is not None:
            at = (self.n(item.at.x), self.n(item.at.y))
            if kind == "packing":
                self.err(item.at, "packing is placed by its region, not `at`")
        cons = []
        for c in item.constraints:
            if type(c).__name__ == "ApartConstraint":
                self.err(c, "apart is design-wide: write it on its own line of the design")
                continue
            cc = self.constraint(c)
            if cc is not None:
                cons.append(cc)
        if len(self.sink.items) > before:
            return None
        return StructureSpec(kind=kind, params=params, at=at, soft=soft, region=region,
                             minimize=minimize, constraints=tuple(cons), source=self.src(item))

    def constraint(self, c: Any) -> Constraint | None:
        cls = type(c).__name__
        s = self.src(c)
        if cls == "CountConstraint":
            f = Fraction(c.n)
            if f.denominator != 1 or f < 0:
                self.err(c, f"count takes a whole number, not {c.n}")
                return None
            return CountConstraint(op=c.op or "==", n=int(f), source=s)
        if cls == "MaxHeightConstraint":
            h = self.n(c.h)
            return MaxHeightConstraint(h=h, source=s)
        if cls == "InsideConstraint":
            return InsideConstraint(ranges=self.ranges(c.ranges), source=s)
        if cls == "ApartConstraint":
            d = self.n(c.d)
            if d < 0:
                self.err(c, f"apart takes a gap of at least 0, not {c.d}")
                return None
            return ApartConstraint(d=d, source=s)
        if cls == "SymmetricConstraint":
            if c.axis == "z":
                self.err(c, "symmetric takes x or y (a structure stands on the table)")
                return None
            return SymmetricConstraint(axis=c.axis or None, source=s)
        if cls == "KeepClearConstraint":
            self.nclear += 1
            name = f"clear_{self.design_name}_{self.nclear}"
            if c.zone:
                return KeepClearConstraint(zone_name=c.zone, source=s)
            if c.half is not None:
                z = self.halfspace(c, name, s)
                return None if z is None else KeepClearConstraint(zone=z, source=s)
            rs = dict((a, (lo, hi)) for a, lo, hi in self.ranges(c.ranges))
            big = Fraction(1000)
            return KeepClearConstraint(zone=BoxZone(name=name, box=axis_box(rs, (-big, big)),
                                                    source=s), source=s)
        self.err(c, f"unexpected {cls}")
        return None

    def halfspace(self, c: Any, name: str, s: Source) -> HalfSpaceZone | None:
        try:
            return halfspace_zone(c.half, name, lambda t: self.n(t, c), s,
                                  number=lambda t: self.n(t, c) / self.scale)
        except ValueError as exc:
            self.err(c, str(exc))
            return None
