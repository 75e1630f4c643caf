"""The built-in relations of the rule language, one :class:`Relation` each, in one table.

A relation carries everything the rest of the package asks about it: its argument kinds
and its sentence for the docs and the language server, its meaning on the grid (a
function of cellspec/core/geometry.py on integer boxes) and on shapes (the same function
of cellspec/core/shapes.py on yawed boxes and cylinders), the builtins.lp program part
that defines it in ASP, whether Z3 encodes it, which rounding checks can change its truth,
whether the checks that move parts decide it, and whether the numpy kernel decides it
before clingo grounds. Every backend's list of what it supports, the IR's arity table and
the rounding analysis read this table; adding a relation is one entry here (plus the
functions and encodings it names, and its tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cellspec.core import geometry as g
from cellspec.core import shapes as sh

# what two parts of a relation have to do with each other, which says how every backend
# enumerates it: "pair" (candidate pairs of the broad phase, within the relation margin),
# "column" (pairs whose footprints come close, at any height), "zone" (a part and a zone),
# "surface" (a part and the cell's surfaces), "part" (one part), "robot" (a part and a
# robot), "order" (the placement order)
FAMILIES = ("pair", "column", "zone", "surface", "part", "robot", "order")


@dataclass(frozen=True)
class Relation:
    """One built-in relation and what each part of the package needs to know about it."""

    name: str
    args: tuple[str, ...]  # argument kinds (core/ir.py: part, zone, surface_or_part, ...)
    doc: str  # one sentence: docs/language.md, the language server's hover
    family: str  # one of FAMILIES
    # meaning on the grid (integer boxes, geometry.py) and on shapes (shapes.py); a zone
    # relation's functions take a box zone, ``half`` the pair for a half-space zone
    grid: Callable[..., Any] | None = None
    shape: Callable[..., Any] | None = None
    half: tuple[Callable[..., Any], Callable[..., Any]] | None = None
    # the builtins.lp program part that defines it ("" for none: its atoms come from the
    # numpy kernel or another solver); tests/test_relations.py checks the file against it
    asp: str = ""
    # that part's text when the entry carries it (a relation defined outside builtins.lp,
    # e.g. registered by a test): the clingo backend adds it to builtins.lp's parts
    asp_text: str = ""
    # the numpy kernel decides it before clingo grounds (asp/pushdown.py): a pair
    # relation's rows become selections, a one-part relation's atoms per-part facts
    pushdown: bool = False
    smt: bool = True  # Z3 encodes it (solver/smt/ground.py); False: refused by name
    # a pair relation's Z3 encoding on two (enclosing) boxes, ``z3(E, d)`` with ``d`` eps or
    # near's distance, written against solver/smt/ground.py's BoxPair: ``E.i``, ``E.j`` the
    # corner rows (x0 x1 y0 y1 z0 z1), ``E.ge(a, b, k)`` a - b >= k, ``E.olap(axis, k)``
    # the overlap on an axis >= k, ``E.all(fs)`` the conjunction (flanks: its own encoding)
    # a zone relation's ``z3(Z, d)`` is written against solver/smt's zone views, the same
    # function on boxes (smt/ground.BoxZoneView) and on shapes (smt/shapes.ShapeZone):
    # ``Z.within(d)`` the part lies in the zone grown by d, ``Z.enters(d)`` it enters the
    # zone by more than d, ``Z.all(fs)``, ``Z.not_(f)``; a surface relation's ``z3(S, d)``
    # against smt/ground.BoxSurface: ``S.i`` the part's corner row, ``S.z`` the surface's
    # height, ``S.ge(a, b, k)``, ``S.all(fs)`` (a robot relation has none: Z3 decides it by
    # ``grid`` at fixed positions and refuses a part that may move)
    z3: Callable[[Any, int], Any] | None = None
    # a pair relation's exact footprint test for a part that is not a plain box
    # (solver/smt/shapes.py): "meets" (closed: within the distance), "covers" (open: by
    # more than it), None (the enclosing boxes decide it exactly)
    footprint: str | None = None
    # the clingo backend hands clingo the relation's exceptions under this predicate (its
    # atoms are true of nearly every part): a literal reads ``not complement(..)``; a
    # part relation's always, a zone relation's for a named zone ("": its own atoms)
    complement: str = ""
    # the ASP predicate of its atoms when it is not the relation's name (on(p, s) is
    # on_surface/2 in builtins.lp)
    asp_atom: str = ""
    lp: bool = False  # decided by the stability LP (solver/stability.py)
    symmetric: bool = False  # a pair relation with r(p, q) = r(q, p): one orientation decides
    reads_order: bool = False  # needs the layout's placement order
    # why the checks that move parts (robust, lint, diff) cannot decide it ("whose ..."),
    # None: they do
    moving: str | None = None
    # the rounding checks (solver/rounding.py) whose change can change its truth
    rounding: tuple[str, ...] = ()

    @property
    def arity(self) -> int:
        """The number of arguments."""
        return len(self.args)

    @property
    def param(self) -> str | None:
        """A pair relation's third argument kind: "length" (near's distance replaces eps),
        "axis" (flanks' grip axis), or None."""
        return self.args[2] if self.family in ("pair", "column") and self.arity == 3 else None

    @property
    def two_parts(self) -> bool:
        """A pair or column relation: decided on two parts by the kernels' ``pair``."""
        return self.family in ("pair", "column")


_STAB = ("supports", "footprint", "on")  # what a stability verdict reads of the grid


def _z3_within(E: Any, d: int) -> Any:
    """contact, near: on every axis the gap is at most d (geometry.contact / near)."""
    return E.all(E.olap(a, -d) for a in range(3))


def _z3_overlaps(E: Any, d: int) -> Any:
    """overlaps: the interiors intersect by more than d on every axis (geometry.overlaps)."""
    return E.all(E.olap(a, d + 1) for a in range(3))


def _z3_fp(E: Any, d: int) -> Any:
    """The footprints overlap in the plane by more than d (geometry.footprint)."""
    return E.all((E.olap(0, d + 1), E.olap(1, d + 1)))


def _z3_supports(E: Any, d: int) -> Any:
    """supports(i, j): |j.z0 - i.z1| <= d and the footprints overlap (geometry.supports)."""
    return E.all((E.ge(E.j[4], E.i[5], -d), E.ge(E.i[5], E.j[4], -d), _z3_fp(E, d)))


def _z3_above(E: Any, d: int) -> Any:
    """above(i, j): i.z0 >= j.z1 - d and the footprints overlap (geometry.above)."""
    return E.all((E.ge(E.i[4], E.j[5], -d), _z3_fp(E, d)))

def _z3_inside(Z: Any, d: int) -> Any:
    """inside: the part lies in the zone grown by d (geometry.inside_box, inside_half)."""
    return Z.within(d)


def _z3_intersects(Z: Any, d: int) -> Any:
    """intersects: the part enters the zone by more than d (geometry.intersects_box, ...)."""
    return Z.enters(d)


def _z3_on_surface(S: Any, d: int) -> Any:
    """on, grounded: the part's bottom within d of the surface (geometry.on_surface)."""
    return S.all((S.ge(S.i[4], S.z, -d), S.ge(S.z, S.i[4], -d)))


BUILTINS: dict[str, Relation] = {r.name: r for r in (
    Relation("contact", ("part", "part"),
             "boxes touch or overlap: on every axis the gap is at most eps",
             "pair", g.contact, sh.contact, asp="contact", pushdown=True,
             symmetric=True, rounding=("contact",), z3=_z3_within, footprint="meets"),
    Relation("overlaps", ("part", "part"),
             "interiors intersect by more than eps on every axis",
             "pair", g.overlaps, sh.overlaps, asp="overlaps", pushdown=True,
             symmetric=True, rounding=("overlaps",), z3=_z3_overlaps, footprint="covers"),
    Relation("supports", ("part", "part"),
             "supports(p, q): p's top meets q's bottom within eps, footprints overlap > eps",
             "pair", g.supports, sh.supports, asp="supports", pushdown=True,
             rounding=("supports", "footprint"), z3=_z3_supports, footprint="covers"),
    Relation("above", ("part", "part"),
             "above(p, q): p's bottom is at or above q's top (within eps), "
             "footprints overlap > eps",
             "column", g.above, sh.above, asp="above", pushdown=True,
             rounding=("footprint", "above"), z3=_z3_above, footprint="covers"),
    Relation("on", ("part", "surface_or_part"),
             "on(p, s): p's bottom is within eps of surface s; on(p, q) is supports(q, p)",
             "surface", g.on_surface, sh.on_surface, asp="surfaces", pushdown=True,
             rounding=_STAB, z3=_z3_on_surface, asp_atom="on_surface"),
    Relation("near", ("part", "part", "length"),
             "near(p, q, d): on every axis the gap between the boxes is at most d",
             "pair", g.near, sh.near, asp="near", pushdown=True, symmetric=True,
             rounding=("near",), z3=_z3_within, footprint="meets"),
    Relation("inside", ("part", "zone"),
             "inside(p, z): p's box lies in zone z (or the workspace), eps allowed",
             "zone", g.inside_box, sh.inside_box, (g.inside_half, sh.inside_half),
             asp="zones", pushdown=True, rounding=("workspace", "inside"), z3=_z3_inside,
             complement="outside"),
    Relation("intersects", ("part", "zone"),
             "intersects(p, z): p's box enters zone z by more than eps",
             "zone", g.intersects_box, sh.intersects_box,
             (g.intersects_half, sh.intersects_half), asp="zones", pushdown=True,
             rounding=("intersects",), z3=_z3_intersects),
    Relation("before", ("part", "part"),
             "before(p, q): p comes before q in the layout's order",
             "order", reads_order=True),
    Relation("flanks", ("part", "part", "axis"),
             "flanks(q, p, a): q stands beside p along axis a, within the parallel "
             "gripper's finger clearance, at p's grasp height; q blocks a grip of p along a",
             "pair", g.flanks, sh.flanks, asp="flanks", rounding=("flanks",)),
    Relation("grounded", ("part",),
             "grounded(p): p rests on one of the cell's surfaces",
             "surface", g.on_surface, sh.on_surface, asp="surfaces", pushdown=True,
             rounding=("on",), z3=_z3_on_surface),
    Relation("stable", ("part",),
             "stable(p): p does not topple or slide off what carries it: contact forces, "
             "pushing only and within the cell's friction, balance the weight of p's "
             "structure with every centre of mass moved by the cell's stability margin in "
             "any horizontal direction; touching side faces push without friction (they "
             "never clamp); a part resting on nothing is gravity's to report "
             "(cellspec/solver/stability.py)",
             "part", pushdown=True, smt=False, lp=True, rounding=_STAB,
             complement="not_stable"),
    Relation("placed_stable", ("part",),
             "placed_stable(p): when p is placed (the layout's order), the structure it "
             "joins stands as stable() defines, with the margin: every stage of construction",
             "part", pushdown=True, smt=False, lp=True, reads_order=True, rounding=_STAB,
             complement="not_placed_stable"),
    Relation("reachable", ("part", "robot"),
             "reachable(p, r): p's grasp point (the centre of its top face) is within "
             "robot r's declared reach of its base (straight-line distance) and inside r's "
             "`reachable` box when the cell declares one; a robot with neither reaches "
             "everywhere",
             "robot", g.reachable,
             moving="distance to the robot's base is not linear in the parts' positions",
             rounding=("reachable",)),
)}


def names(keep: Callable[[Relation], bool]) -> frozenset[str]:
    """The names of the built-in relations ``keep`` accepts (a backend's declaration)."""
    return frozenset(r.name for r in BUILTINS.values() if keep(r))


@contextmanager
def registered(rel: Relation) -> Iterator[Relation]:
    """``rel`` in the table while the block runs (a relation defined outside the package,
    as tests/test_relations.py's): every backend that reads the table at run time decides
    it; the names derived at import time (the IR's tables, the language server) do not."""
    if rel.name in BUILTINS:
        raise ValueError(f"relation {rel.name} is built in already")
    BUILTINS[rel.name] = rel
    try:
        yield rel
    finally:
        del BUILTINS[rel.name]


def get(name: str) -> Relation:
    """The built-in relation called ``name`` (KeyError for an unknown one)."""
    return BUILTINS[name]
