"""Generate a layout from a design spec with CP-SAT on the integer grid.

Each structure kind is a shape (a template of parts placed by formula relative to the
structure's footprint corner, its gravity, contact and grip pattern known); CP-SAT
chooses where each structure stands, on the grid every verdict is decided on (boxes in
U = 0.05 mm, centres on the 0.1 mm grid), and, for ``packing``, which lattice columns
are used and how high. The model encodes:

* ``workspace`` and ``inside`` constraints: every box inside (exactly, no tolerance);
* ``keepout`` (the cell's zones) and ``keep clear`` zones: every box avoids them;
* structures stand apart by at least the parallel gripper's finger clearance, so no
  structure blocks another's grip and none rests on another (``no_overlap``);
* ``gravity``: each structure stands on the cell's first surface; its shape rests
  every part on the table or on parts below it;
* ``max height``, ``count``, ``symmetric``: on the shape (packing: in the model);
* the objective: each structure as near its ``at (x, y)`` anchor as the rules allow
  (L1), packings of least height or footprint first.

The order (and per part the grip axis) comes from the sequencer (:func:`..sequence.plan`);
the result is re-verified with clingo against the cell plus the keep-clear zones, and is
a success only if every error rule passes. Deterministic: one worker, a fixed seed.

This module is the driver (structures and their sizes, the arithmetic proofs that need no
search, solving, the unsat core, reading the layout back, sequencing); the templates are
:mod:`cellspec.solver.cpsat.shapes` and the CP-SAT model
:mod:`cellspec.solver.cpsat.generate_model`.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import numpy as np
from ortools.sat.python import cp_model
from pydantic import BaseModel, ConfigDict, model_validator

from cellspec.core import geometry as g
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.severity import Severity
from cellspec.core.status import Status
from cellspec.dsl.design import (
    CountConstraint,
    DesignSpec,
    KeepClearConstraint,
    MaxHeightConstraint,
    SymmetricConstraint,
)
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.cpsat.generate_model import (
    Site,
    Struct,
    build_model,
    cmp_op,
    constraints_of,
    hint,
    to_m,
    where,
)
from cellspec.solver.cpsat.repair import with_blocked
from cellspec.solver.cpsat.results import SolveStatus as GenStatus
from cellspec.solver.cpsat.results import Step
from cellspec.solver.cpsat.sequence import plan
from cellspec.solver.cpsat.shapes import Infeasible, even, shape, symmetric
from cellspec.solver.result import Verdict

DEFAULT_TIME_LIMIT = 10.0
SEED = 1
DET_TIME_FACTOR = 0.1  # CP-SAT deterministic time budget per second of --time-limit


class PlacedStructure(BaseModel):
    """Where a structure of the design stands: its footprint centre and its height."""

    model_config = ConfigDict(frozen=True)
    name: str
    kind: str
    parts: int
    centre: tuple[float, float]  # footprint centre, metres
    requested: tuple[float, float] | None = None
    height: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"name": self.name, "kind": self.kind, "parts": self.parts,
                "centre": list(self.centre), "requested":
                list(self.requested) if self.requested else None, "height": self.height}


class GenerateResult(BaseModel):
    """A generated layout (re-verified: ``verdict`` passes, with an order), a proof that the
    spec cannot be built in the cell (``infeasible`` with the reason), or ``unknown``.
    ``optimal``: the placement is proved best for the objective; ``feasible``: a time
    limit stopped the proof."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    status: GenStatus
    design: str
    layout: dict[str, Any] | None = None
    structures: tuple[PlacedStructure, ...] = ()
    steps: tuple[Step, ...] = ()
    reason: str | None = None
    conflict: tuple[str, ...] = ()
    verdict: Verdict | None = None
    seconds: float = 0.0
    # the preference score (cells with preference rules only): met, total, optimal, notes
    preferences: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> GenerateResult:
        if self.status in (Status.OPTIMAL, Status.FEASIBLE):
            if self.layout is None or self.verdict is None or self.verdict.verdict != Status.PASS:
                raise ValueError("a generated layout must carry a passing re-verification")
            if not self.layout.get("order"):
                raise ValueError("a generated layout carries its placement order")
        else:
            if self.layout is not None or self.steps:
                raise ValueError("no layout unless one was generated")
            if not self.reason:
                raise ValueError(f"status {self.status} must say why")
        return self

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        """Plain JSON (``timing``: with the seconds, which vary between runs)."""
        out: dict[str, Any] = {"status": self.status, "design": self.design,
                               "structures": [s.to_json() for s in self.structures],
                               "steps": [s.to_json() for s in self.steps]}
        if self.reason:
            out["reason"] = self.reason
        if self.conflict:
            out["conflict"] = list(self.conflict)
        if self.verdict is not None:
            out["verdict"] = self.verdict.verdict
        if self.layout is not None:
            out["layout"] = self.layout
        if self.preferences is not None:
            out["preferences"] = self.preferences
        if timing:
            out["seconds"] = round(self.seconds, 4)
        return out


def generate(cell: Cell, design: DesignSpec, *, time_limit: float = DEFAULT_TIME_LIMIT,
             workers: int = 1) -> GenerateResult:
    """Build the design in the cell: CP-SAT places the structures so every error rule of
    the cell holds, the sequencer orders them; re-verified with clingo."""
    t0 = time.perf_counter()

    def left() -> float:
        return max(0.05, time_limit - (time.perf_counter() - t0))

    def done(**kw: Any) -> GenerateResult:
        return GenerateResult(design=design.name, seconds=time.perf_counter() - t0, **kw)

    from cellspec.solver.cpsat.generate_scale import scale_packing  # issue 29.4

    big_ = scale_packing(cell, design, time_limit)
    if big_ is not None:
        assert isinstance(big_, GenerateResult)
        big = big_
        if big.layout is not None and any(r.severity == Severity.PREFERENCE for r in cell.rules):
            from cellspec.layout import layout_from_obj
            from cellspec.solver.cpsat.prefer_generate import final_score

            prefs = final_score(cell, layout_from_obj(big.layout), {"notes": [
                "preferences are not optimised by the large-packing generator; the score "
                "is not claimed optimal"]}, max(0.05, time_limit))
            big = big.model_copy(update={"preferences": prefs})
        return big
    try:
        return _generate(cell, design, left, workers, done, time_limit)
    except Infeasible as exc:
        if exc.squares and _discs(cell, design):
            # a lattice or area bound on bounding squares: discs pack tighter
            return done(status=Status.UNKNOWN, conflict=exc.conflict,
                        reason=f"{exc.reason} ({SQUARES}: discs pack tighter than their "
                        "squares, so this is not a proof)")
        if "spacing between structures" in exc.conflict:
            # relies on the generator's own spacing between structures: not a proof
            return done(status=Status.UNKNOWN, conflict=exc.conflict,
                        reason=f"{exc.reason} (the generator keeps structures a finger "
                        "clearance apart; placements where they touch are not searched, so "
                        "this is not a proof)")
        return done(status=Status.INFEASIBLE, reason=exc.reason, conflict=exc.conflict)


SQUARES = "the generator sees cylinders through their bounding squares (conservative)"


def _discs(cell: Cell, design: DesignSpec) -> bool:
    """Does the design build with a cylinder part type (which the generator places as
    its bounding square: its infeasibility and optimality are then no proof)?"""
    return any(cell.part_types[st.ptype].shape == "cylinder"
               for st in _structures(cell, design))


def _generate(cell: Cell, design: DesignSpec, left: Any, workers: int, done: Any,
              time_limit: float) -> GenerateResult:
    """The phases of ``generate``: structures and bounds, the model, the layout, its order."""
    # zones: the cell's keep-outs plus keep-clear zones (added to the cell, so the
    # re-verification checks them too)
    extra = _keep_clear(cell, design)
    cell2 = with_blocked(cell, tuple(extra.values()))
    rules = {r.name for r in cell.rules if r.severity == Severity.ERROR}
    if not cell.surfaces:
        raise CellspecError(Diagnostic(cell.source.file, cell.source.line, cell.source.col,
                                       "the cell has no surface to build on"))
    z0 = g.to_u_int(cell.surfaces[0].z)
    ws_lo = [g.to_u_int(v) for v in cell.workspace.lo]
    ws_hi = [g.to_u_int(v) for v in cell.workspace.hi]
    has_vacuum = cell.default_gripper.kind == "vacuum" or any(
        r.gripper.kind == "vacuum" for r in cell.robots)
    grip = cell.gripper_params("parallel")
    eps = int(g.to_u(cell.epsilon))
    structs = _structures(cell, design)
    # the gap between structures (and packing columns): at least the finger clearance
    gap = eps + 2
    if grip.opening is not None:
        gap = max(gap, even(Fraction(g.to_u_int(grip.opening) - min(
            (min(st.s[0], st.s[1]) for st in structs), default=0), 2) + 1))
    gap += gap % 2  # even: centres stay on the 0.1 mm grid
    zones = [z for z in cell2.keepouts] if "keepout" in rules else list(extra.values())
    site = Site(rules=rules, z0=z0, ws_lo=ws_lo, ws_hi=ws_hi, zones=zones, extra=extra,
                gap=gap)
    _shape_bounds(design, structs, site, has_vacuum)
    if "workspace" in rules and len(structs) > 1:
        _floor_bounds(structs, site)
    pref: dict[str, Any] = {}
    solved = _solve(structs, design, site, left, workers, time_limit, done, cell, pref)
    if isinstance(solved, GenerateResult):
        return solved
    solver, status = solved
    layout, placed = _read_layout(solver, structs, z0, design)
    if len(layout) == 0:
        return done(status=Status.INFEASIBLE, reason="the design has no parts")
    pr = plan(cell2, layout, time_limit=left())
    if pr.unstable:  # this placement does not stand: no proof about the design
        return done(status=Status.UNKNOWN, reason="the generated layout does not stand: "
                    f"{pr.reason}")
    if pr.status == Status.INFEASIBLE:
        return done(status=Status.INFEASIBLE, conflict=pr.conflict,
                    reason=f"the shapes admit no assembly order in this cell: {pr.reason}")
    if pr.status != Status.OPTIMAL or pr.verdict is None:
        return done(status=Status.UNKNOWN, reason=f"sequencing: {pr.reason}")
    if pr.verdict.verdict != Status.PASS:
        bad = "; ".join(f"{v.rule}({', '.join(v.parts)})" for v in pr.verdict.violations[:5])
        return done(status=Status.UNKNOWN, reason="the generated layout does not re-verify (the "
                    "generator does not encode every rule of this cell): "
                    f"{bad or pr.verdict.reason}")

    final = layout.with_order(pr.order)
    prefs = None
    if pref:  # the cell has preferences: the score of the layout, counted by clingo
        from cellspec.solver.cpsat.prefer_generate import final_score

        prefs = final_score(cell, final, pref, left())
    reason = None
    if status == Status.OPTIMAL and _discs(cell, design):  # optimal in the model only
        status, reason = Status.FEASIBLE, (f"{SQUARES}: best among the placements it sees, "
                                           "not proved optimal")
    return done(status=status, layout=final.to_json(), structures=tuple(placed),
                steps=pr.steps, verdict=pr.verdict, preferences=prefs, reason=reason)


def _keep_clear(cell: Cell, design: DesignSpec) -> dict[str, Any]:
    """The design's keep-clear zones given inline, by name; bad input when one names a
    keep-out zone the cell does not have."""
    extra: dict[str, Any] = {}
    zone_names = {z.name for z in cell.keepouts}
    for spec_c in [*design.constraints, *(c for st in design.structures
                                          for c in st.constraints)]:
        if isinstance(spec_c, KeepClearConstraint):
            if spec_c.zone is not None:
                extra[spec_c.zone.name] = spec_c.zone
            elif spec_c.zone_name not in zone_names:
                raise CellspecError(Diagnostic(
                    spec_c.source.file, spec_c.source.line, spec_c.source.col,
                    f"keep clear of '{spec_c.zone_name}': no such keep-out zone in the cell "
                    f"(zones: {', '.join(sorted(zone_names)) or 'none'})"))
    return extra


def _structures(cell: Cell, design: DesignSpec) -> list[Struct]:
    """The design's structures with their part type and size (U); bad input for an
    unknown type or a size off the 0.2 mm grid."""
    structs: list[Struct] = []
    for k, spec in enumerate(design.structures):
        tname = str(spec.params.get("type") or "")
        if not tname:
            tname = "cube" if "cube" in cell.part_types else next(iter(cell.part_types), "")
        if tname not in cell.part_types:
            src = spec.source
            raise CellspecError(Diagnostic(src.file, src.line, src.col, f"unknown part type "
                                           f"'{tname}' (the cell defines: "
                                           f"{', '.join(sorted(cell.part_types)) or 'none'})"))
        size = cell.part_types[tname].size
        s = tuple(int(g.to_u(v)) for v in size)
        if any(g.to_u(v).denominator != 1 or int(g.to_u(v)) % 4 for v in size):
            src = spec.source
            raise CellspecError(Diagnostic(src.file, src.line, src.col, f"part type '{tname}' "
                                           "has a size that is not a multiple of 0.2 mm; "
                                           "generation places parts on the 0.1 mm grid"))
        structs.append(Struct(k, spec, tname, s))  # type: ignore[arg-type]
    return structs


def _shape_bounds(design: DesignSpec, structs: list[Struct], site: Site,
                  has_vacuum: bool) -> None:
    """Each template's parts and extent, and what its arithmetic proves without search:
    too tall or too wide for the workspace, over its max height, off its count, not
    symmetric; then the design's own count (Infeasible, with the rule in conflict)."""
    rules, z0, ws_lo, ws_hi = site.rules, site.z0, site.ws_lo, site.ws_hi
    total = 0
    for st in structs:
        spec = st.spec
        if st.packing:
            total += int(spec.params["n"])
            continue
        label = f"{st.name} ({spec.kind} at {where(spec.source)})"
        st.parts = shape(spec, st.s, has_vacuum)
        st.w = max(p[0] for p in st.parts) + st.s[0] // 2
        st.d = max(p[1] for p in st.parts) + st.s[1] // 2
        st.h = max(p[2] for p in st.parts) + st.s[2] // 2
        n = len(st.parts)
        total += n
        if "workspace" in rules and z0 + st.h > ws_hi[2]:
            fit = (ws_hi[2] - z0) // st.s[2]
            more = f"; at most {fit} {st.ptype} level(s) fit" if spec.kind == "tower" else ""
            raise Infeasible(f"{label} is {to_m(st.h):.4g} m tall, over the workspace top "
                             f"(z {to_m(ws_hi[2]):.4g} m){more}", ("workspace",))
        if "workspace" in rules and (st.w > ws_hi[0] - ws_lo[0]
                                     or st.d > ws_hi[1] - ws_lo[1]):
            raise Infeasible(f"{label} needs a footprint of {to_m(st.w):.4g} x "
                             f"{to_m(st.d):.4g} m, larger than the workspace",
                             ("workspace",))
        for c in constraints_of(design, spec):
            if isinstance(c, MaxHeightConstraint) and z0 + st.h > g.to_u(c.h):
                raise Infeasible(f"{label} is {to_m(z0 + st.h):.4g} m high, over its max "
                                 f"height {float(c.h):g} m ({where(c.source)})",
                                 ("max height",))
            if isinstance(c, CountConstraint) and c in spec.constraints and not cmp_op(
                    c.op, n, c.n):
                raise Infeasible(f"{label} has {n} parts; count {c.op} {c.n} "
                                 f"({where(c.source)})", ("count",))
            if isinstance(c, SymmetricConstraint):
                for a in ((0, 1) if c.axis is None else ("xy".index(c.axis),)):
                    if not symmetric(st.parts, st.s, a):
                        raise Infeasible(f"{label} is not symmetric about {'xy'[a]} "
                                         f"({where(c.source)})", ("symmetric",))
    for c in design.constraints:
        if isinstance(c, CountConstraint) and not cmp_op(c.op, total, c.n):
            raise Infeasible(f"design {design.name} has {total} parts; count {c.op} {c.n} "
                             f"({where(c.source)})", ("count",))


def _floor_bounds(structs: list[Struct], site: Site) -> None:
    """Too many structures for the workspace floor (Infeasible): first a real proof (the
    footprints touching), then the bound with the generator's gap between them."""
    ws_lo, ws_hi, gap = site.ws_lo, site.ws_hi, site.gap
    # a real proof first: footprints (no gap) of rigid shapes must be disjoint and lie in
    # the workspace, so they cannot need more floor, or more lattice cells, than it has
    tmpl0 = [st for st in structs if not st.packing]
    if tmpl0:
        W0, D0 = ws_hi[0] - ws_lo[0], ws_hi[1] - ws_lo[1]
        a0 = min(st.w for st in tmpl0)
        b0 = min(st.d for st in tmpl0)
        fit0 = (W0 // a0) * (D0 // b0)
        need0 = sum(st.w * st.d for st in tmpl0)
        if len(tmpl0) > fit0 or need0 > W0 * D0:
            raise Infeasible(
                f"too many parts for the workspace: {len(tmpl0)} structures of footprint "
                f"at least {to_m(a0):.4g} x {to_m(b0):.4g} m need "
                f"{to_m(need0) * float(g.U):.4g} m2 of floor even touching each other; at "
                f"most {fit0} fit and the workspace has {to_m(W0 * D0) * float(g.U):.4g} m2",
                ("workspace",), squares=True)
    # every structure's footprint grown by the gap is disjoint from the others' and
    # lies in the workspace grown by the gap: their areas must fit
    tmpl = [st for st in structs if not st.packing]
    need = sum((st.w + gap) * (st.d + gap) for st in tmpl)
    W, D = ws_hi[0] - ws_lo[0] + gap, ws_hi[1] - ws_lo[1] + gap
    have = W * D
    if tmpl:
        # every grown footprint is at least a x b; each contains a point of the lattice
        # a Z x b Z (half-open), and two holding the same point overlap: at most
        # floor(W / a) * floor(D / b) of them fit
        a = min(st.w for st in tmpl) + gap
        b = min(st.d for st in tmpl) + gap
        if len(tmpl) > (W // a) * (D // b):
            raise Infeasible(
                f"too many parts for the workspace: {len(tmpl)} structures of footprint "
                f"at least {to_m(a - gap):.4g} x {to_m(b - gap):.4g} m with the "
                f"{to_m(gap):.4g} m gripper gap between them; at most {(W // a) * (D // b)} "
                f"fit ({W // a} x {D // b})", ("workspace", "spacing between structures"))
    if need > have:
        raise Infeasible(
            f"too many parts for the workspace: the {len(structs)} structures need "
            f"{to_m(need) * float(g.U):.4g} m2 of floor (footprints with the "
            f"{to_m(gap):.4g} m gripper gap between them), the workspace has "
            f"{to_m(have) * float(g.U):.4g} m2", ("workspace", "spacing between structures"))


def _solve(structs: list[Struct], design: DesignSpec, site: Site, left: Any, workers: int,
           time_limit: float, done: Any, cell: Cell | None = None,
           pref: dict[str, Any] | None = None) -> tuple[Any, Status] | GenerateResult:
    """Solve the model (with the first-fit hint): (the solver, optimal or feasible), or the
    result when there is no placement (named by its unsat core) or the time ran out. With
    ``cell`` holding preference rules: the weight met first, then the model's own
    objective (:func:`.prefer_generate.generate_solve`; ``pref`` receives what it achieved)."""
    m, _ = build_model(structs, design, site, False)
    hint(m, structs, site, design)

    def make(k: int = 0, of: int = 1) -> Any:
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(0.05, left() / (of - k))
        solver.parameters.num_workers = workers
        solver.parameters.random_seed = SEED
        # deterministic budget: the same input gives the same answer (the wall-clock limit
        # is only a safety net)
        solver.parameters.max_deterministic_time = DET_TIME_FACTOR * time_limit / of
        return solver

    from cellspec.solver.cpsat.prefer import preference_rules
    from cellspec.solver.cpsat.prefer_generate import generate_solve

    if cell is not None and pref is not None and preference_rules(cell):
        st_, solver = generate_solve(m, cell, structs, site.z0, make, pref)
    else:
        solver = make()
        st_ = solver.Solve(m)
    if st_ == cp_model.INFEASIBLE:
        return _core(structs, design, site, left, done,
                     cell is not None and _discs(cell, design))
    if st_ not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return done(status=Status.UNKNOWN, reason="time limit hit before a placement was found")
    return solver, (Status.OPTIMAL if st_ == cp_model.OPTIMAL else Status.FEASIBLE)


def _core(structs: list[Struct], design: DesignSpec, site: Site, left: Any, done: Any,
          discs: bool = False) -> GenerateResult:
    """No placement: the rules that conflict (the unsat core of the guarded model); not a
    proof when the generator's own spacing is among them, nor (``discs``: the design has
    cylinders, seen through their bounding squares) when anything but the workspace and
    ``inside`` boxes is (a square in a box is exact, a square near a zone or another
    part is not)."""
    m2, names = build_model(structs, design, site, True)
    s2 = cp_model.CpSolver()
    s2.parameters.max_time_in_seconds = left()
    s2.parameters.num_workers = 1
    s2.parameters.random_seed = SEED
    r2 = s2.Solve(m2)
    core: tuple[str, ...] = ()
    if r2 == cp_model.INFEASIBLE:
        core = tuple(sorted(names[k] for k in s2.SufficientAssumptionsForInfeasibility()
                            if k in names))
    if not core or "spacing between structures" in core:
        # the generator keeps structures a finger clearance apart; touching structures
        # are not searched, so this is no proof that the design cannot be built
        why = "; ".join(core) if core else "the rules together"
        return done(status=Status.UNKNOWN, conflict=core,
                    reason="no placement found with the structures a finger clearance "
                    f"apart ({why}); placements where structures touch are not searched "
                    "by the generator, so this is not a proof")
    why = "; ".join(core)
    if discs and not all(c.startswith(("workspace (", "inside ")) for c in core):
        return done(status=Status.UNKNOWN, conflict=core,
                    reason=f"no placement found that satisfies: {why} ({SQUARES}, and a "
                    "disc may fit where its square does not, so this is not a proof)")
    return done(status=Status.INFEASIBLE, conflict=core,
                reason=f"no placement of the design in the cell satisfies: {why}")


def _read_layout(solver: Any, structs: list[Struct], z0: int, design: DesignSpec
                 ) -> tuple[Layout, list[PlacedStructure]]:
    """The solved placement as a layout (no order yet) and each structure's placement."""
    ids: list[str] = []
    types: list[str] = []
    pos: list[list[float]] = []
    grips: list[str | None] = []
    placed: list[PlacedStructure] = []
    for st in structs:
        k = 0
        if not st.packing:
            X, Y = 2 * solver.Value(st.ax), 2 * solver.Value(st.ay)
            items = [(X + px, Y + py, z0 + pz, gr) for px, py, pz, gr in st.parts]
            cx, cy = X + st.w // 2, Y + st.d // 2
            height = z0 + st.h
        else:
            items = []
            for c, (px, py) in enumerate(st.cols):
                for lv in range(solver.Value(st.hvar[c])):
                    items.append((px, py, z0 + st.s[2] // 2 + lv * st.s[2], None))
            xs = [p[0] for p in items] or [0]
            ys = [p[1] for p in items] or [0]
            cx, cy = (min(xs) + max(xs)) // 2, (min(ys) + max(ys)) // 2
            height = max((p[2] for p in items), default=z0) + st.s[2] // 2
        for x, y, z, gr in items:
            k += 1
            ids.append(f"{st.name}_{k}")
            types.append(st.ptype)
            pos.append([to_m(x), to_m(y), to_m(z)])
            grips.append(gr)
        req = (float(st.spec.at[0]), float(st.spec.at[1])) if st.spec.at else None
        placed.append(PlacedStructure(name=st.name, kind=st.spec.kind, parts=k,
                                      centre=(to_m(cx), to_m(cy)), requested=req,
                                      height=to_m(height)))
    n = len(ids)
    layout = Layout(ids=tuple(ids), types=tuple(types),
                    pos=np.array(pos, dtype=np.float64).reshape(n, 3),
                    size=np.full((n, 3), np.nan), grippers=tuple(grips), order=None,
                    path=f"<design {design.name}>")
    return layout, placed


__all__ = ["generate", "GenerateResult", "PlacedStructure", "shape"]
