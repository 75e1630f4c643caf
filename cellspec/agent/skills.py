"""The skill registry (Section III-B of seed 000): tools an LLM (or the orchestrator) calls.

Skills: ``verify`` (every rule of the cell, clingo), granular ``verify_workspace``,
``verify_no_overlap``, ``verify_gravity``, ``verify_grip_access`` (one rule each, so a
model can diagnose one failure at a time), ``sequence`` (assembly order and grips),
``task`` (pick-and-place tasks with a robot for each step), ``spec`` (the offline
Specifier: command -> DSL text), and the paper's geometric recovery skills ``shift`` (move
the whole layout rigidly: by a given offset, or the smallest one that clears the workspace,
the keep-outs and a blocked region) and ``flatten`` (lower a layout to at most N layers by
moving the parts above onto free table spots).

Each skill has a pydantic argument model; :meth:`SkillRegistry.tools` gives the OpenAI
function-tool list (strict JSON schemas generated from pydantic: every field required,
nullable rather than optional). :meth:`SkillRegistry.dispatch` takes a name and JSON
arguments and always returns a JSON object: ``{"ok": true, ...}`` or ``{"ok": false,
"error": ...}``: bad arguments never raise.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from time import perf_counter
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from cellspec.agent.base import parse_spec, strict_schema
from cellspec.agent.offline import OfflineAdapter
from cellspec.core.errors import CellspecError
from cellspec.core.status import FOUND, Status
from cellspec.dsl.model import Box, BoxZone, Source
from cellspec.layout import Layout, UnknownPartType, layout_from_obj
from cellspec.solver.cpsat.repair import with_blocked
from cellspec.solver.cpsat.sequence import plan
from cellspec.solver.verify import check

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

GRANULAR = ("workspace", "no_overlap", "gravity", "grip_access")
GRID = 0.0001  # 0.1 mm: every coordinate a skill writes is on this grid
MAX_PARTS = 1000  # a skill call is interactive: a layout this large is not a cell's
MAX_LISTED = 50  # violations listed in a result (the total is given when there are more)
MAX_OFFSET = 1000.0  # metres: |dx|, |dy| of shift, like the layout's coordinate bound


class _Args(BaseModel):
    # strict: "0.4" is not a number and true is not 1 (a model's typo must not pass)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PartIn(_Args):
    """One part: id, part type, centre of its box in metres."""

    id: str
    type: str
    pos: list[float]


class LayoutIn(_Args):
    """A layout: parts and, when known, the placement order (ids)."""

    parts: list[PartIn]
    order: list[str] | None = None


class BoxIn(_Args):
    """An axis-aligned region in metres; z null: every height."""

    x: list[float]
    y: list[float]
    z: list[float] | None = None


class LayoutArgs(_Args):
    """Arguments of verify, the granular verifiers, sequence and task."""

    layout: LayoutIn


class SpecArgs(_Args):
    """Arguments of spec: the user's command in words."""

    command: str


class ShiftArgs(_Args):
    """Arguments of shift: an offset (dx, dy in metres), or null for the smallest offset
    that clears the workspace, the keep-outs and ``avoid``."""

    layout: LayoutIn
    dx: float | None = None
    dy: float | None = None
    avoid: BoxIn | None = None


class FlattenArgs(_Args):
    """Arguments of flatten: the most layers allowed (null: 1) and the clearance in metres
    kept around a moved part (null: the cell's parallel-gripper finger room)."""

    layout: LayoutIn
    max_layers: int | None = None
    clearance: float | None = None


@dataclass(frozen=True)
class Skill:
    """One registered skill."""

    name: str
    description: str
    args: type[_Args]
    fn: Callable[[Any], dict[str, Any]]

    def tool(self) -> dict[str, Any]:
        """The OpenAI function-tool entry (strict)."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "strict": True,
            "parameters": strict_schema(self.args)}}


class SkillError(CellspecError):
    """A skill could not run on its arguments (reported as an error result)."""


def _r(v: float) -> float:
    return round(round(float(v) / GRID) * GRID, 4)


class SkillRegistry:
    """The skills of one cell; ``dispatch(name, args) -> result JSON``."""

    def __init__(self, cell: Cell, time_limit: float = 10.0) -> None:
        self.cell = cell
        self.time_limit = time_limit
        self.calls: list[tuple[str, bool]] = []
        d = "Check a layout against "
        skills = [
            Skill("verify", d + "every rule of the cell (clingo). Returns the verdict and the "
                  "violations (rule, parts, message).", LayoutArgs, self._verify),
            *[Skill(f"verify_{r}", d + f"the '{r}' rule only, to diagnose one failure.",
                    LayoutArgs, self._granular(r)) for r in GRANULAR],
            Skill("sequence", "An assembly order and a grip for every part of the layout, or "
                  "a proof that none exists.", LayoutArgs, self._sequence),
            Skill("task", "Pick-and-place tasks for the layout: the assembly order with the "
                  "robot that places each part (gripper kind and reach).", LayoutArgs,
                  self._task),
            Skill("spec", "Translate a command in words into a cellspec design statement "
                  "(the offline Specifier).", SpecArgs, self._spec),
            Skill("shift", "Move the whole layout rigidly by (dx, dy), or by the smallest "
                  "offset that clears the workspace, the keep-outs and a blocked region "
                  "'avoid'; returns the shifted layout and its verdict.", ShiftArgs,
                  self._shift),
            Skill("flatten", "Lower the layout to at most max_layers layers by moving the "
                  "parts above onto free table spots; returns the new layout and its "
                  "verdict.", FlattenArgs, self._flatten),
        ]
        self.skills: dict[str, Skill] = {s.name: s for s in skills}

    # --- registry --------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.skills)

    def tools(self, names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """The OpenAI function tools of the skills (all, or those named)."""
        return [self.skills[n].tool() for n in (names or self.names)]

    def dispatch(self, name: str, args: str | dict[str, Any] | None) -> dict[str, Any]:
        """Run one skill; a JSON result, ``{"ok": false, "error": ...}`` on bad input."""
        res = self._dispatch(name, args)
        self.calls.append((name, bool(res.get("ok"))))
        return res

    def _dispatch(self, name: str, args: str | dict[str, Any] | None) -> dict[str, Any]:
        skill = self.skills.get(name) if isinstance(name, str) else None
        if skill is None:
            return {"ok": False, "error": f"unknown skill '{name}' (skills: "
                    f"{', '.join(self.names)})"}
        if isinstance(args, str | bytes):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError) as exc:
                why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                return {"ok": False, "error": f"{name}: the arguments are not JSON: {why}"}
        if not isinstance(args, dict):
            return {"ok": False, "error": f"{name}: the arguments must be a JSON object"}
        try:
            parsed = skill.args.model_validate(args)
        except ValidationError as exc:
            errs = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}"
                             for e in exc.errors()[:5])
            return {"ok": False, "error": f"{name}: bad arguments: {errs}"}
        except RecursionError:
            return {"ok": False, "error": f"{name}: bad arguments: nested too deeply"}
        try:
            return {"ok": True, **skill.fn(parsed)}
        except CellspecError as exc:
            msg = "; ".join(d.message if not d.line else str(d) for d in exc.diagnostics)
            return {"ok": False, "error": f"{name}: {msg}"}
        except Exception as exc:  # noqa: BLE001 - a skill defect is a result, never a crash
            # the model (or the orchestrator) gets a result it can act on; the 'internal'
            # flag marks a bug to report, unlike the bad-argument errors above
            return {"ok": False, "internal": True,
                    "error": f"{name}: internal error (please report): "
                             f"{type(exc).__name__}: {exc}"}

    # --- helpers ---------------------------------------------------------------------
    def _layout(self, lay: LayoutIn, need_parts: bool = False) -> Layout:
        """The layout of the arguments, checked by the layout loader (ids, types, numbers)."""
        if len(lay.parts) > MAX_PARTS:
            raise SkillError(f"layout: {len(lay.parts)} parts; a skill takes at most "
                             f"{MAX_PARTS}")
        if need_parts and not lay.parts:
            raise SkillError("layout: the layout has no parts")
        obj: dict[str, Any] = {"units": "m", "parts": [p.model_dump() for p in lay.parts]}
        if lay.order is not None:
            obj["order"] = list(lay.order)
        return layout_from_obj(obj, "<skill>")

    def _verdict(self, cell: Cell, layout: Layout) -> dict[str, Any]:
        v = check(cell, layout, backend="clingo", timeout=self.time_limit)
        out: dict[str, Any] = {"verdict": v.verdict, "reason": v.reason,
                               "violations": [{"rule": x.rule, "parts": list(x.parts),
                                               "message": x.message}
                                              for x in v.violations[:MAX_LISTED]],
                               "skipped_rules": list(v.skipped_rules)}
        if len(v.violations) > MAX_LISTED:  # a model reads the result: the first ones, a count
            out["violations_total"] = len(v.violations)
        return out

    # --- skills ----------------------------------------------------------------------
    def _verify(self, a: LayoutArgs) -> dict[str, Any]:
        return self._verdict(self.cell, self._layout(a.layout))

    def _granular(self, rule: str) -> Callable[[LayoutArgs], dict[str, Any]]:
        def run(a: LayoutArgs) -> dict[str, Any]:
            rules = tuple(r for r in self.cell.rules if r.name == rule)
            if not rules:
                raise SkillError(f"the cell has no rule '{rule}' (rules: "
                                 f"{', '.join(r.name for r in self.cell.rules)})")
            layout = self._layout(a.layout)
            if rule == "grip_access" and layout.order is None:
                return {"verdict": "unknown", "rule": rule, "violations": [],
                        "reason": "grip_access needs the placement order: pass 'order' "
                        "(or call sequence)", "skipped_rules": [rule]}
            out = self._verdict(self.cell.model_copy(update={"rules": rules}), layout)
            return {"rule": rule, **out}
        return run

    def _sequence(self, a: LayoutArgs) -> dict[str, Any]:
        p = plan(self.cell, self._layout(a.layout), time_limit=self.time_limit)
        found = p.status in FOUND and bool(p.steps)
        return {"status": p.status, "reason": p.reason,
                "order": [s.part for s in p.steps] if found else None,
                "grips": [s.to_json() for s in p.steps] if found else None,
                "conflict": list(p.conflict)}

    def _task(self, a: LayoutArgs) -> dict[str, Any]:
        self._layout(a.layout, need_parts=True)
        v = self._verify(a)
        if v["verdict"] != Status.PASS:
            what = "; ".join(f"{x['rule']}({', '.join(x['parts'])})" for x in v["violations"][:5])
            raise SkillError(f"the layout does not verify ({what or v['reason']}): no tasks "
                             "for an infeasible layout")
        seq = self._sequence(a)
        if seq["order"] is None:
            raise SkillError(f"no assembly sequence, so no tasks: {seq['reason']}")
        pos = {p.id: p.pos for p in a.layout.parts}
        tasks, unreached = [], []
        for k, g in enumerate(seq["grips"], 1):
            x, y, z = pos[g["part"]]
            robot = None
            for r in self.cell.robots:
                kind = r.gripper.kind if r.gripper is not None else None
                bx, by, bz = (float(v) for v in r.base)
                dist = float(np.sqrt((x - bx) ** 2 + (y - by) ** 2 + (z - bz) ** 2))
                if kind == g["gripper"] and (r.reach is None or dist <= float(r.reach)):
                    robot = r.name
                    break
            if robot is None:
                unreached.append(g["part"])
            tasks.append({"step": k, "part": g["part"], "robot": robot, "place": [x, y, z],
                          "gripper": g["gripper"], "axis": g["axis"]})
        if unreached:
            raise SkillError(f"no robot with the needed gripper reaches "
                             f"{', '.join(unreached)}")
        return {"tasks": tasks}

    def _spec(self, a: SpecArgs) -> dict[str, Any]:
        text = OfflineAdapter().translate(a.command, self.cell)
        parse_spec(text)
        return {"spec": text}

    def _blocked_cell(self, avoid: BoxIn | None) -> Cell:
        if avoid is None:
            return self.cell
        rng = [avoid.x, avoid.y, avoid.z if avoid.z is not None else [-1000.0, 1000.0]]
        for axis, r in zip("xyz", rng, strict=True):
            if len(r) != 2 or not all(np.isfinite(r)) or r[0] >= r[1]:
                raise SkillError(f"avoid.{axis} must be [lo, hi]: two finite numbers of metres "
                                 "with lo < hi")
        (x0, x1), (y0, y1), (z0, z1) = ((Fraction(str(r[0])), Fraction(str(r[1]))) for r in rng)
        box = Box(lo=(x0, y0, z0), hi=(x1, y1, z1))
        return with_blocked(self.cell, [BoxZone(name="blocked", box=box,
                                                source=Source(file="<skill>", line=0, col=0))])

    def _moved(self, a: LayoutIn, new: dict[str, list[float]], order: bool) -> dict[str, Any]:
        return {"parts": [{"id": p.id, "type": p.type, "pos": new.get(p.id, list(p.pos))}
                          for p in a.parts],
                "order": list(a.order) if order and a.order is not None else None}

    def _shift(self, a: ShiftArgs) -> dict[str, Any]:
        cell = self._blocked_cell(a.avoid)
        base = self._layout(a.layout, need_parts=True)
        if (a.dx is None) != (a.dy is None):
            raise SkillError("give both dx and dy, or neither (the smallest clearing offset)")
        if a.dx is not None and a.dy is not None:  # both or neither (above)
            if not (np.isfinite(a.dx) and np.isfinite(a.dy)):
                raise SkillError("dx and dy must be finite numbers of metres")
            if max(abs(a.dx), abs(a.dy)) > MAX_OFFSET:
                raise SkillError(f"dx and dy must be at most {MAX_OFFSET:g} m in size")
            offsets = [(a.dx, a.dy)]
        else:
            offsets = _offsets(cell, base)
        tried, t0 = 0, perf_counter()
        for dx, dy in offsets:
            new = {p.id: [_r(p.pos[0] + dx), _r(p.pos[1] + dy), p.pos[2]]
                   for p in a.layout.parts}
            obj = self._moved(a.layout, new, order=True)
            lay = layout_from_obj({"units": "m", **{k: v for k, v in obj.items()
                                                    if v is not None}}, "<shift>")
            tried += 1
            v = self._verdict(cell, lay)
            spent = perf_counter() - t0 > self.time_limit  # the whole search is bounded
            if v["verdict"] == Status.PASS or a.dx is not None or tried >= 12 or spent:
                return {"layout": obj, "dx": _r(dx), "dy": _r(dy), **v}
        raise SkillError("no rigid shift inside the workspace clears the keep-outs and the "
                         "blocked region (try flatten, or a re-plan)")

    def _flatten(self, a: FlattenArgs) -> dict[str, Any]:
        k = 1 if a.max_layers is None else a.max_layers
        if k < 1:
            raise SkillError("max_layers must be at least 1")
        base = self._layout(a.layout, need_parts=True)
        ws = self.cell.workspace
        z0 = float(self.cell.surfaces[0].z) if self.cell.surfaces else float(ws.lo[2])
        clear = a.clearance if a.clearance is not None else _finger_room(self.cell)
        if not (np.isfinite(clear) and clear >= 0):
            raise SkillError("clearance must be a non-negative number of metres")
        pos, size = np.asarray(base.pos, float), _sizes(self.cell, base)
        bottom = pos[:, 2] - size[:, 2] / 2 - z0
        h0 = float(np.min(size[:, 2]))
        layer = np.floor(bottom / h0 + 1e-6).astype(int)  # 0 = on the table
        movers = [i for i in np.argsort(layer * 100000 + np.arange(len(layer)), kind="stable")
                  if layer[i] >= k]
        if not movers:
            v = self._verdict(self.cell, base)
            return {"layout": self._moved(a.layout, {}, order=True), "moved": [], **v}
        keep = [i for i in range(len(pos)) if layer[i] < k]
        boxes = [(pos[i] - size[i] / 2, pos[i] + size[i] / 2) for i in keep]
        cx, cy = float(np.mean(pos[:, 0])), float(np.mean(pos[:, 1]))
        new: dict[str, list[float]] = {}
        for i in movers:
            s = size[i]
            spot = _free_spot(self.cell, boxes, s, clear, z0, (cx, cy))
            if spot is None:
                raise SkillError(f"no free table spot for {base.ids[i]} (the workspace is "
                                 "full at this clearance)")
            new[base.ids[i]] = [_r(spot[0]), _r(spot[1]), _r(z0 + s[2] / 2)]
            c = np.array(new[base.ids[i]])
            boxes.append((c - s / 2, c + s / 2))
        obj = self._moved(a.layout, new, order=False)
        lay = layout_from_obj({"units": "m", "parts": obj["parts"]}, "<flatten>")
        return {"layout": obj, "moved": sorted(new), **self._verdict(self.cell, lay)}


def _sizes(cell: Cell, layout: Layout) -> np.ndarray:
    """Each part's box size in metres (a layout leaves NaN where the type gives it)."""
    try:
        return layout.resolve(cell)
    except UnknownPartType as exc:
        raise SkillError(f"part {exc.part} has no size: unknown part type '{exc.type}' (the "
                         "cell defines: " + ", ".join(cell.part_types) + ")") from None


def _finger_room(cell: Cell) -> float:
    """Room a parallel gripper's finger needs beside a part (0 with vacuum only)."""
    openings = [float(r.gripper.opening) for r in cell.robots if r.gripper is not None
                and r.gripper.kind == "parallel" and r.gripper.opening is not None]
    if not openings:
        return 0.005
    s = min(float(t.size[0]) for t in cell.part_types.values())
    return max(0.005, max(openings) - s + 0.002)


def _offsets(cell: Cell, layout: Layout) -> list[tuple[float, float]]:
    """Rigid offsets (5 mm grid) keeping the layout's footprint in the workspace, nearest
    first (L1, then dx, then dy): the candidates of the smallest clearing shift."""
    ws = cell.workspace
    pos, size = np.asarray(layout.pos, float), _sizes(cell, layout)
    lo = (pos - size / 2).min(axis=0)
    hi = (pos + size / 2).max(axis=0)
    zones = [(np.array([float(v) for v in z.box.lo]), np.array([float(v) for v in z.box.hi]))
             for z in cell.keepouts if isinstance(z, BoxZone)]
    step = 0.005
    out = []
    span = max(float(ws.hi[0] - ws.lo[0]), float(ws.hi[1] - ws.lo[1]))
    xs = np.arange(-round(span / step), round(span / step) + 1) * step
    for dx in xs:
        if lo[0] + dx < float(ws.lo[0]) - 1e-9 or hi[0] + dx > float(ws.hi[0]) + 1e-9:
            continue
        for dy in xs:
            if lo[1] + dy < float(ws.lo[1]) - 1e-9 or hi[1] + dy > float(ws.hi[1]) + 1e-9:
                continue
            d = np.array([dx, dy, 0.0])
            plo, phi = pos - size / 2 + d, pos + size / 2 + d
            if any(np.any(np.all((plo < zhi - 1e-9) & (phi > zlo + 1e-9), axis=1))
                   for zlo, zhi in zones):
                continue  # a part would enter a box keep-out or the blocked region
            out.append((round(float(dx), 4), round(float(dy), 4)))
    out.sort(key=lambda o: (round(abs(o[0]) + abs(o[1]), 4), o[0], o[1]))
    return out


def _free_spot(cell: Cell, boxes: list[tuple[np.ndarray, np.ndarray]], s: np.ndarray,
               clear: float, z0: float, centre: tuple[float, float]
               ) -> tuple[float, float] | None:
    """The free table spot (2.5 mm grid) nearest ``centre`` for a part of size ``s`` whose
    box grown by ``clear`` touches no other box and lies in the workspace."""
    ws = cell.workspace
    step = 0.0025
    xs = np.arange(float(ws.lo[0]) + s[0] / 2, float(ws.hi[0]) - s[0] / 2 + 1e-9, step)
    ys = np.arange(float(ws.lo[1]) + s[1] / 2, float(ws.hi[1]) - s[1] / 2 + 1e-9, step)
    if len(xs) == 0 or len(ys) == 0:
        return None
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    ok = np.ones(gx.shape, bool)
    zones = [(np.array([float(v) for v in z.box.lo]), np.array([float(v) for v in z.box.hi]))
             for z in cell.keepouts if isinstance(z, BoxZone)]
    lo_z, hi_z = z0, z0 + s[2]
    for blo, bhi in [*boxes, *zones]:
        if bhi[2] <= lo_z + 1e-9 or blo[2] >= hi_z - 1e-9:
            continue
        ok &= ~((gx - s[0] / 2 - clear < bhi[0] - 1e-9) & (gx + s[0] / 2 + clear > blo[0] + 1e-9)
                & (gy - s[1] / 2 - clear < bhi[1] - 1e-9)
                & (gy + s[1] / 2 + clear > blo[1] + 1e-9))
    if not ok.any():
        return None
    d = np.abs(gx - centre[0]) + np.abs(gy - centre[1])
    d = np.where(ok, d, np.inf)
    i = np.unravel_index(int(np.argmin(d)), d.shape)  # first minimum: deterministic
    return float(gx[i]), float(gy[i])
