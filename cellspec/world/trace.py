"""Reasoning traces (ERT, seed 003): schema and three-stage validation before anything moves.

A trace states the action, the world belief it rests on (relations), the causal assumption
and a confidence in [0, 1]. It is validated in three stages and rejected at the first that
fails, with the reason:

1. syntax: the pydantic schema (unknown keys, wrong types, confidence outside [0, 1],
   relations not written ``REL(a, b)``);
2. semantics: every named entity exists in the world model (entities, surfaces, the
   gripper) and the action's object is a part the model knows;
3. physics: every believed relation agrees with the geometry the model holds: on(a, b) =
   a's centroid over b's footprint with the faces in contact; inside(a, b) = a's box in b's;
   near(a, b) = the gap below d on every axis; holding(gripper, a) = the CS holds a.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cellspec.core.errors import CellspecError
from cellspec.world import relations as rel
from cellspec.world.association import MAX_COORD_M
from cellspec.world.db import RELATIONS, World, WorldRelation
from cellspec.world.discrepancy import derive_relations, parse_relation, read_json


class TraceAction(BaseModel):
    """The action the trace argues for."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["pick", "place", "insert", "regrasp", "retarget", "replan"]
    object: str = Field(min_length=1)
    target: str | None = None
    at: tuple[float, float, float] | None = None  # where a place puts the object's centre

    @field_validator("at")
    @classmethod
    def _at(cls, v: tuple[float, float, float] | None) -> tuple[float, float, float] | None:
        if v is not None and not all(np.isfinite(x) and abs(x) <= MAX_COORD_M for x in v):
            raise ValueError("'at' must be three finite coordinates (metres, at most 1000)")
        return v


class Trace(BaseModel):
    """An explicit reasoning trace: action, world belief, causal assumption, confidence."""

    model_config = ConfigDict(extra="forbid")
    action: TraceAction
    belief: list[str]
    assumption: str = Field(min_length=1)
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)

    @field_validator("belief")
    @classmethod
    def _rels(cls, v: list[str]) -> list[str]:
        for k, r in enumerate(v):
            parse_relation(r, f"belief[{k}]")
        return v


@dataclass(frozen=True)
class TraceVerdict:
    """accepted, or rejected at a stage (syntax, semantics, physics) with the reasons."""

    accepted: bool
    stage: str | None
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"accepted": self.accepted, "stage": self.stage, "reasons": list(self.reasons)}


def validate_trace(obj: Any, world: World, surfaces: tuple[tuple[str, float], ...] = (
        ("table", 0.0),), near_d: float = rel.NEAR_M) -> TraceVerdict:
    """Validate a trace (parsed JSON) against the world model in three stages."""
    try:
        tr = Trace.model_validate(obj)
    except ValidationError as exc:
        reasons = tuple(f"{'.'.join(str(x) for x in e['loc']) or 'trace'}: {e['msg']}"
                        for e in exc.errors())
        return TraceVerdict(False, "syntax", reasons)
    except CellspecError as exc:
        return TraceVerdict(False, "syntax", tuple(d.message for d in exc.diagnostics))
    ents = {e.id: e for e in world.entities(include_archived=False)}
    known = set(ents) | {s for s, _ in surfaces} | {"gripper"}
    beliefs = [parse_relation(r, f"belief[{k}]") for k, r in enumerate(tr.belief)]
    bad = []
    if tr.action.object not in ents:
        bad.append(f"action object '{tr.action.object}' is not an entity of the world model")
    if tr.action.target is not None and tr.action.target not in known:
        bad.append(f"action target '{tr.action.target}' is not an entity of the world model")
    for r in beliefs:
        for e in (r.a, r.b):
            if e not in known:
                bad.append(f"{r} names unknown entity '{e}'")
    if bad:
        return TraceVerdict(False, "semantics", tuple(bad))
    ids = sorted(ents)
    geo = set(derive_relations(tuple(ents[i] for i in ids), surfaces, None, near_d))
    phase, held = world.cs()
    wrong = []
    for r in beliefs:
        if r.rel == "holding":
            if not (r.a == "gripper" and held == r.b and phase != "idle"):
                wrong.append(f"{r}: the interaction state is ⟨{phase}, {held or '-'}⟩")
        elif r.rel == "near" and (r.a > r.b):
            if WorldRelation("near", r.b, r.a) not in geo:
                wrong.append(f"{r}: the gap exceeds {near_d} m")
        elif r not in geo:
            why = {"on": "the centroid is not over the support or the faces do not meet",
                   "inside": "the box is not contained", "near": f"the gap exceeds {near_d} m"}
            wrong.append(f"{r}: {why.get(r.rel, 'not in the geometry')}")
    a = tr.action
    if a.at is not None and a.target is not None and a.kind in ("place", "insert"):
        # the causal assumption of a place: the object put at `at` rests on its target
        obj = ents[a.object]
        moved = tuple(ents[i] for i in ids if i != a.object) + (replace(obj, pos=a.at),)
        after = set(derive_relations(moved, surfaces, None, near_d))
        want = WorldRelation("inside" if a.kind == "insert" else "on", a.object, a.target)
        if want not in after:
            where = ", ".join(f"{v:.3f}" for v in a.at)
            sup = ents.get(a.target)
            seen = (f"; the model has {a.target} at "
                    f"({', '.join(f'{v:.3f}' for v in sup.pos)})" if sup else "")
            cause = (f"{obj.id}'s box would not lie in {a.target}'s" if a.kind == "insert" else
                     f"{obj.id}'s bottom does not meet {a.target}'s top over its footprint")
            wrong.append(f"{a.kind} {a.object} at ({where}) would not give {want}: "
                         f"{cause}{seen}")
    if wrong:
        return TraceVerdict(False, "physics", tuple(wrong))
    return TraceVerdict(True, None, ())


def load_trace(path: str) -> Any:
    """Read a trace JSON file (NaN and infinity are refused)."""
    return read_json(path, "trace")


__all__ = ["RELATIONS", "Trace", "TraceVerdict", "load_trace", "validate_trace"]
