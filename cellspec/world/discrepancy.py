"""The discrepancy operator Δ(expected, observed) of seed 003 (VLM-DEWM).

Δ lists the interaction-state mismatch (CS = ⟨phase, object⟩), the relations expected but
not observed (missing), those observed but not expected (unexpected), the drift of every
object, objects observed but not expected (new, and those in the action's path) and
objects expected but not observed (lost), plus the force measures. Observed objects are
matched to expected ones by id when every observed object has one, else by the Hungarian
method (cellspec/world/association.py). Δ is turned into clingo facts for the diagnose rules.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.core.errors import CellspecError
from cellspec.core.io import TooLarge, read_text_bounded

# a box turned further than this (degrees) about z is a discrepancy (as for a placed part)
from cellspec.robots.tasks import TURN_TOL_DEG as TURN_TOL_DEG
from cellspec.world import relations as rel
from cellspec.world.association import (
    MAX_COORD_M,
    Observation,
    associate,
    parse_observation,
)
from cellspec.world.db import PHASES, RELATIONS, Entity, WorldRelation, vec3
from cellspec.world.rules import MEASURES, diagnose_facts

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

DRIFT_TOL_M = 0.01  # drift above this is a discrepancy
MAX_OBJECTS = 2000  # objects per state file
MAX_JSON_BYTES = 16 * 1024 * 1024  # state and trace files larger than this are refused
_REL_RE = re.compile(r"^\s*([a-z_]+)\s*\(\s*([^,()\s]+)\s*,\s*([^,()\s]+)\s*\)\s*$")


@dataclass(frozen=True)
class State:
    """A world state, expected or observed (its objects are entities: id, type, box)."""

    cs: tuple[str, str | None]
    objects: tuple[Entity, ...]
    relations: tuple[WorldRelation, ...]
    gripper: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    path: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # swept box of the action
    target: str | None = None  # the object of the current action
    measures: dict[str, float] = field(default_factory=dict)


def derive_relations(objects: tuple[Entity, ...], surfaces: tuple[tuple[str, float], ...],
                     gripper: tuple[tuple[float, ...], tuple[float, ...]] | None,
                     near_d: float = rel.NEAR_M) -> tuple[WorldRelation, ...]:
    """The relations of the objects' shapes (cellspec/world/relations.py)."""
    ids = [o.id for o in objects]
    pos = np.array([o.pos for o in objects], float).reshape(-1, 3)
    size = np.array([o.size for o in objects], float).reshape(-1, 3)
    g = (np.array(gripper[0]), np.array(gripper[1])) if gripper else None
    yaw = cyl = None
    if any(o.yaw != 0.0 or o.shape != "box" for o in objects):
        yaw = np.array([o.yaw for o in objects], float)
        cyl = np.array([o.shape == "cylinder" for o in objects], dtype=bool)
    return tuple(rel.derive(ids, pos, size, surfaces, g, near_d=near_d, yaw=yaw, cyl=cyl))


def parse_relation(text: Any, where: str) -> WorldRelation:
    """'on(c2, c1)' as a WorldRelation; unknown relation names are bad input."""
    m = _REL_RE.match(text) if isinstance(text, str) else None
    if not m:
        raise CellspecError(f"{where}: a relation is written REL(a, b), got {text!r}")
    if m.group(1) not in RELATIONS:
        raise CellspecError(f"{where}: unknown relation '{m.group(1)}' (relations: "
                            f"{', '.join(RELATIONS)})")
    return WorldRelation(m.group(1), m.group(2), m.group(3))


def _vec(v: Any, n: int, where: str) -> tuple[float, ...]:
    if not isinstance(v, (list, tuple)) or len(v) != n or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        raise CellspecError(f"{where}: expected a list of {n} numbers")
    if not all(math.isfinite(float(x)) for x in v):
        raise CellspecError(f"{where}: NaN or infinity in a pose")
    if any(abs(float(x)) > MAX_COORD_M for x in v):
        raise CellspecError(f"{where}: a coordinate beyond {MAX_COORD_M:g} m is not a pose "
                            "in a work cell")
    return tuple(float(x) for x in v)


def read_json(path: str, what: str = "file") -> Any:
    """Read a JSON file as bad-input-safe: missing, directory, binary, huge, deeply nested or
    invalid files are a CellspecError naming the file (line:col for syntax errors); NaN and
    infinity literals are read as NaN so the validators refuse them by name."""
    try:
        text = read_text_bounded(path, MAX_JSON_BYTES)
    except IsADirectoryError:
        raise CellspecError(f"{path}: is a directory, expected a {what} JSON file") from None
    except TooLarge:
        raise CellspecError(f"{path}: the {what} file is larger than "
                            f"{MAX_JSON_BYTES // (1024 * 1024)} MB") from None
    except FileNotFoundError:
        raise CellspecError(f"{path}: no such {what} file") from None
    except UnicodeDecodeError:
        raise CellspecError(f"{path}: not a {what} JSON file (not UTF-8 text)") from None
    except OSError as exc:
        raise CellspecError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not text.strip():
        raise CellspecError(f"{path}:1:1: the {what} file is empty")
    try:
        return json.loads(text, parse_constant=lambda c: float("nan"))
    except json.JSONDecodeError as exc:
        raise CellspecError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise CellspecError(f"{path}: the {what} JSON is nested too deeply") from None


# complexity: validates every field of a state file in one place, one message each
def state_from_json(obj: Any, shown: str, surfaces: tuple[tuple[str, float], ...],  # noqa: C901
                    part_sizes: dict[str, tuple[float, float, float]] | None = None,
                    part_shapes: dict[str, str] | None = None) -> State:
    """Validate a state file (see docs/world.md); relations are derived when not given.
    An object's ``yaw`` (degrees) and ``shape`` default to 0 and its part type's shape."""
    if not isinstance(obj, dict):
        raise CellspecError(f"{shown}: a state file is a JSON object")
    unknown = set(obj) - {"cs", "objects", "relations", "gripper", "path", "target",
                          "measures"}
    if unknown:
        raise CellspecError(f"{shown}: unknown keys {sorted(unknown)} (keys: cs, objects, "
                            "relations, gripper, path, target, measures)")
    cs = obj.get("cs", {"phase": "idle", "object": None})
    if not isinstance(cs, dict) or cs.get("phase") not in PHASES:
        raise CellspecError(f"{shown}: cs must be {{\"phase\": P, \"object\": O}} with P one "
                            f"of {', '.join(PHASES)}")
    objs = obj.get("objects", [])
    if not isinstance(objs, list):
        raise CellspecError(f"{shown}: objects must be a list")
    if len(objs) > MAX_OBJECTS:
        raise CellspecError(f"{shown}: {len(objs)} objects; a state holds at most "
                            f"{MAX_OBJECTS} (the association is quadratic)")
    out: list[Entity] = []
    anon = 0
    for k, o in enumerate(objs):
        where = f"{shown}: objects[{k}]"
        typ = o.get("type") if isinstance(o, dict) else None
        if isinstance(o, dict) and "size" not in o and part_sizes is not None:
            if isinstance(typ, str) and typ in part_sizes:
                o = {**o, "size": list(part_sizes[o["type"]])}
            elif isinstance(o.get("type"), str) and o["type"]:
                raise CellspecError(f"{where}: unknown part type '{o['type']}' (the cell "
                                    f"defines: {', '.join(sorted(part_sizes)) or 'none'}); "
                                    "give its 'size' for an object of another kind")
        # a type that is not a string (a list cannot be a key) is parse_observation's error
        shape = (part_shapes or {}).get(typ) if isinstance(typ, str) else None
        ob: Observation = parse_observation(o, where, shape or "box")
        if ob.label is None:
            anon += 1
        out.append(Entity(id=ob.label or f"?{k}", type=ob.type, pos=ob.pos,
                          size=ob.size, yaw=ob.yaw, shape=ob.shape))
    ids = [o.id for o in out]
    if len(set(ids)) != len(ids):
        raise CellspecError(f"{shown}: object ids must be unique")
    grip = None
    if obj.get("gripper") is not None:
        gj = obj["gripper"]
        if not isinstance(gj, dict):
            raise CellspecError(f"{shown}: gripper must be {{\"pos\": [..], \"size\": [..]}}")
        grip = (_vec(gj.get("pos"), 3, f"{shown}: gripper.pos"),
                _vec(gj.get("size", [0.03, 0.03, 0.01]), 3, f"{shown}: gripper.size"))
        if not all(x > 0 for x in grip[1]):
            raise CellspecError(f"{shown}: gripper.size must be positive on every axis (got "
                                f"{list(grip[1])})")
    path = None
    if obj.get("path") is not None:
        pj = obj["path"]
        if not isinstance(pj, dict):
            raise CellspecError(f"{shown}: path must be {{\"lo\": [..], \"hi\": [..]}}")
        path = (_vec(pj.get("lo"), 3, f"{shown}: path.lo"), _vec(pj.get("hi"), 3,
                                                                 f"{shown}: path.hi"))
    known = set(ids) | {s for s, _ in surfaces} | {"gripper"}
    if "relations" in obj:
        if anon:
            raise CellspecError(f"{shown}: relations name objects, so every object needs an id")
        rels = []
        for k, r in enumerate(obj["relations"] if isinstance(obj["relations"], list) else [0]):
            rr = parse_relation(r, f"{shown}: relations[{k}]")
            for e in (rr.a, rr.b):
                if e not in known:
                    raise CellspecError(f"{shown}: relations[{k}] names unknown entity '{e}'")
            rels.append(rr)
        relations = tuple(sorted(set(rels), key=lambda r: (r.rel, r.a, r.b)))
    else:
        relations = derive_relations(tuple(out), surfaces, grip)
    target = obj.get("target")
    if target is not None and target not in ids:
        raise CellspecError(f"{shown}: target names unknown entity '{target}'")
    csobj = cs.get("object")
    if csobj is not None and csobj not in ids and not anon:
        raise CellspecError(f"{shown}: cs names unknown entity '{csobj}'")
    meas = obj.get("measures", {})
    if not isinstance(meas, dict):
        raise CellspecError(f"{shown}: measures must be an object")
    for k, v in meas.items():
        if k not in MEASURES:
            raise CellspecError(f"{shown}: unknown measure '{k}' (measures: "
                                f"{', '.join(MEASURES)})")
        if isinstance(v, bool):
            continue
        if not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise CellspecError(f"{shown}: measure '{k}' must be a finite number")
    return State(cs=(cs["phase"], csobj), objects=tuple(out), relations=relations,
                 gripper=grip, path=path, target=target, measures=dict(meas))


def load_state(path: str, surfaces: tuple[tuple[str, float], ...],
               part_sizes: dict[str, tuple[float, float, float]] | None = None,
               part_shapes: dict[str, str] | None = None) -> State:
    """Read and validate a state JSON file."""
    return state_from_json(read_json(path, "state"), path, surfaces, part_sizes, part_shapes)


@dataclass(frozen=True)
class Delta:
    """The discrepancy between an expected and an observed state."""

    cs_expected: tuple[str, str | None]
    cs_observed: tuple[str, str | None]
    missing: tuple[WorldRelation, ...]
    unexpected: tuple[WorldRelation, ...]
    drift: dict[str, float]
    new: tuple[str, ...]
    lost: tuple[str, ...]
    in_path: tuple[str, ...]
    target: str | None
    measures: dict[str, float]
    mapping: dict[str, str]  # observed id -> id used in Δ
    # degrees a box is turned about z (modulo its footprint's symmetry), for the objects
    # where either side has a yaw or a cylinder is involved; a cylinder's spin is not listed
    turn: dict[str, float] = field(default_factory=dict)

    @property
    def cs_mismatch(self) -> bool:
        """Whether the interaction state differs."""
        return self.cs_expected != self.cs_observed

    def significant(self, drift_tol: float = DRIFT_TOL_M, turn_tol: float = TURN_TOL_DEG
                    ) -> bool:
        """Any discrepancy beyond noise: CS, on/inside/holding relations, drift, a box's
        turn, new, lost."""
        key = [r for r in self.missing + self.unexpected if r.rel != "near"]
        return bool(self.cs_mismatch or key or self.new or self.lost
                    or any(d > drift_tol for d in self.drift.values())
                    or any(t > turn_tol for t in self.turn.values()))

    def facts(self) -> str:
        """Δ as clingo facts for the diagnose rules."""
        def q(s: str | None) -> str:
            return json.dumps(s if s is not None else "none")
        out = [f"cs({self.cs_expected[0]}, {self.cs_observed[0]})."]
        out += [f"missing({r.rel}, {q(r.a)}, {q(r.b)})." for r in self.missing]
        out += [f"unexpected({r.rel}, {q(r.a)}, {q(r.b)})." for r in self.unexpected]
        out += [f"drift({q(k)}, {int(round(v * 10_000))})." for k, v in sorted(self.drift.items())]
        out += [f"turn({q(k)}, {int(round(v * 100))})." for k, v in sorted(self.turn.items())]
        out += [f"new({q(x)})." for x in self.new]
        out += [f"lost({q(x)})." for x in self.lost]
        out += [f"in_path({q(x)})." for x in self.in_path]
        if self.target:
            out.append(f"target({q(self.target)}).")
        for k in sorted(self.measures):
            v = self.measures[k]
            out.append(f"m({k}, {int(round(float(v) * MEASURES[k][1]))}).")
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (drift in metres, 0.1 mm)."""
        return {"cs": {"expected": {"phase": self.cs_expected[0], "object": self.cs_expected[1]},
                       "observed": {"phase": self.cs_observed[0], "object": self.cs_observed[1]},
                       "mismatch": self.cs_mismatch},
                "missing": [str(r) for r in self.missing],
                "unexpected": [str(r) for r in self.unexpected],
                "drift": {k: round(v, 4) for k, v in sorted(self.drift.items())},
                **({"turn": {k: round(v, 2) for k, v in sorted(self.turn.items())}}
                   if self.turn else {}),
                "new": list(self.new), "lost": list(self.lost), "in_path": list(self.in_path),
                "target": self.target}


def turn_deg(a: Entity, b: Entity) -> float | None:
    """How far (degrees) b is turned about z from a: None when neither has a yaw and both are
    boxes (nothing to compare), 0 for a cylinder (its spin about its axis changes nothing);
    a box modulo its footprint's symmetry (180 degrees, 90 for a square footprint)."""
    if a.shape == "cylinder" or b.shape == "cylinder":
        return 0.0 if a.shape == b.shape else None
    if a.yaw == 0.0 and b.yaw == 0.0:
        return None
    period = 90.0 if abs(a.size[0] - a.size[1]) <= 1e-9 else 180.0
    d = math.fmod(abs(b.yaw - a.yaw), period)
    return min(d, period - d)


def _box_hits(pos: tuple[float, ...], size: tuple[float, ...],
              box: tuple[tuple[float, ...], tuple[float, ...]]) -> bool:
    return all(min(pos[k] + size[k] / 2, box[1][k]) - max(pos[k] - size[k] / 2, box[0][k])
               > 1e-4 for k in range(3))


def delta(expected: State, observed: State, gate: float = 0.5) -> Delta:
    """Δ(expected, observed): match objects, then compare CS, relations and poses."""
    exp_ids = {o.id for o in expected.objects}
    if observed.objects and all(not o.id.startswith("?") for o in observed.objects):
        mapping = {o.id: o.id for o in observed.objects}
        new = [o.id for o in observed.objects if o.id not in exp_ids]
    else:
        obs = [Observation(type=o.type, pos=o.pos, size=o.size, yaw=o.yaw, shape=o.shape)
               for o in observed.objects]
        a = associate(list(expected.objects), obs, gate)
        mapping = {observed.objects[j].id: eid for eid, j in a.matches.items()}
        new = []
        k = 1
        for j in a.new_obs:
            while f"new{k}" in exp_ids:
                k += 1
            mapping[observed.objects[j].id] = f"new{k}"
            new.append(f"new{k}")
            k += 1
    obs_by = {mapping[o.id]: o for o in observed.objects}
    drift, turn = {}, {}
    for o in expected.objects:
        if o.id in obs_by:
            drift[o.id] = float(np.linalg.norm(np.subtract(o.pos, obs_by[o.id].pos)))
            t = turn_deg(o, obs_by[o.id])
            if t is not None and o.shape == "box":
                turn[o.id] = t
    lost = sorted(i for i in exp_ids if i not in obs_by)

    def ren(x: str) -> str:
        return mapping.get(x, x)

    obs_rel = {WorldRelation(r.rel, ren(r.a), ren(r.b)) for r in observed.relations}
    exp_rel = set(expected.relations)
    in_path = []
    if expected.path is not None:
        in_path = sorted(n for n in new if _box_hits(obs_by[n].pos, obs_by[n].extent(),
                                                     expected.path))
    cso = (observed.cs[0], ren(observed.cs[1]) if observed.cs[1] else None)
    meas = dict(expected.measures)
    meas.update(observed.measures)
    key = lambda r: (r.rel, r.a, r.b)  # noqa: E731
    return Delta(cs_expected=expected.cs, cs_observed=cso,
                 missing=tuple(sorted(exp_rel - obs_rel, key=key)),
                 unexpected=tuple(sorted(obs_rel - exp_rel, key=key)),
                 drift=drift, new=tuple(sorted(new)), lost=tuple(lost),
                 in_path=tuple(in_path), target=expected.target, measures=meas,
                 mapping=mapping, turn=turn)


@dataclass(frozen=True)
class Diagnosis:
    """Δ with every cause the rules derive, ranked; ambiguous when one object gets two causes."""

    delta: Delta
    findings: tuple[Any, ...]  # rules.Finding, ranked best first
    ambiguous: tuple[str, ...]  # objects with more than one distinct cause

    @property
    def status(self) -> str:
        """none | diagnosed | ambiguous | undiagnosed."""
        if self.ambiguous:
            return "ambiguous"
        if self.findings:
            return "diagnosed"
        return "undiagnosed" if self.delta.significant() else "none"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"status": self.status, "discrepancy": self.delta.to_json(),
                "significant": self.delta.significant(),
                "causes": [f.to_json() for f in self.findings],
                "ambiguous": list(self.ambiguous)}


def diagnose(cell: Cell, expected: State, observed: State) -> Diagnosis:
    """Δ(expected, observed) and the causes the cell's diagnose rules derive (clingo)."""

    d = delta(expected, observed)
    found = diagnose_facts(cell, d.facts()) if d.significant() or d.measures else []
    causes: dict[str, set[str]] = {}
    for f in found:
        for a in f.args:
            causes.setdefault(a, set()).add(f.cause)
    amb = tuple(sorted(o for o, cs in causes.items() if len(cs) > 1))
    return Diagnosis(delta=d, findings=tuple(found), ambiguous=amb)


def cell_surfaces(cell: Cell) -> tuple[tuple[str, float], ...]:
    """The cell's surfaces as (name, z) in metres (a table at z 0 when it names none)."""
    s = tuple((x.name, float(x.z)) for x in cell.surfaces)
    return s or (("table", 0.0),)


def cell_part_shapes(cell: Cell) -> dict[str, str]:
    """Part type shapes (box or cylinder)."""
    return {n: getattr(t, "shape", "box") for n, t in cell.part_types.items()}


def cell_part_sizes(cell: Cell) -> dict[str, tuple[float, float, float]]:
    """Part type sizes in metres."""
    return {n: vec3(t.size) for n, t in cell.part_types.items()}
