"""Data association: observations matched to believed entities by the Hungarian method.

OR-Tools' linear sum assignment solves a square problem padded with "unmatched" nodes,
so that an observation can stay unmatched (cost = the gate) and an entity can be missed.
Pairs of different type or farther apart than the gate are never matched. An unmatched
observation becomes a candidate; after 2 observations in a row (the confirmation window)
it becomes a new entity. A missed entity's confidence decays by 0.95 per observation and it
is archived below 0.1; a later match restores it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from ortools.graph.python import linear_sum_assignment

from cellspec.core.errors import CellspecError
from cellspec.core.geometry import MAX_ABS_COORD_M as MAX_COORD_M  # the kernel's bound
from cellspec.world.db import ARCHIVE_BELOW, DECAY, MAX_YAW_DEG, SHAPES, Entity, vec3

GATE_M = 0.5  # default gate on centre distance, metres
CONFIRM = 2  # observations in a row before a new entity is created
_SCALE = 1_000_000  # integer costs in micrometres


@dataclass(frozen=True)
class Observation:
    """One perceived object: type, centre, own size, orientation (xyzw), yaw and shape."""

    type: str
    pos: tuple[float, float, float]
    size: tuple[float, float, float]
    quat: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
    label: str | None = None  # a known id (expected-state files), not used for matching
    yaw: float = 0.0  # degrees about z
    shape: str = "box"  # box | cylinder (size (2R, 2R, H))


def _yaw(obj: dict, where: str) -> float:
    """The observation's ``yaw`` (degrees, default 0): a finite number, |yaw| <= 3600."""
    v = obj.get("yaw", 0.0)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise CellspecError(f"{where}.yaw: must be a number of degrees, not {v!r}")
    if not math.isfinite(float(v)):
        raise CellspecError(f"{where}.yaw: NaN or infinity; an observation needs a finite "
                            "yaw (nothing was written)")
    if abs(float(v)) > MAX_YAW_DEG:
        raise CellspecError(f"{where}.yaw: {float(v):g} is beyond {MAX_YAW_DEG:g} degrees")
    return float(v)


def _shape(obj: dict, where: str, size: tuple[float, ...], default: str) -> str:
    """The observation's ``shape`` (box or cylinder; default the part type's)."""
    v = obj.get("shape", default)
    if v not in SHAPES:
        raise CellspecError(f"{where}.shape: must be one of {', '.join(SHAPES)}, not {v!r}")
    if v == "cylinder" and size[0] != size[1]:
        raise CellspecError(f"{where}.size: a cylinder's size is (diameter, diameter, "
                            f"height), got {list(size)}")
    return str(v)


def parse_observation(obj: Any, where: str, shape: str = "box") -> Observation:
    """Validate one observation object (JSON; ``shape``: its type's, unless it says);
    NaN or missing numbers are bad input."""
    if not isinstance(obj, dict):
        raise CellspecError(f"{where}: an observation must be an object")
    typ = obj.get("type")
    if not isinstance(typ, str) or not typ:
        raise CellspecError(f"{where}: 'type' must be a non-empty string")

    def vec(key: str, n: int, default: Any = None) -> tuple[float, ...]:
        v = obj.get(key, default)
        if not isinstance(v, (list, tuple)) or len(v) != n or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            raise CellspecError(f"{where}: '{key}' must be a list of {n} numbers")
        if not all(math.isfinite(float(x)) for x in v):
            raise CellspecError(f"{where}: '{key}' holds NaN or infinity; an observation "
                                "needs a finite pose (nothing was written)")
        if key != "quat" and any(abs(float(x)) > MAX_COORD_M for x in v):
            raise CellspecError(f"{where}: '{key}' holds a value beyond {MAX_COORD_M:g} m, "
                                "not a pose in a work cell")
        return tuple(float(x) for x in v)

    size = vec("size", 3)
    if any(s <= 0 for s in size):
        raise CellspecError(f"{where}: 'size' must be positive")
    label = obj.get("id")
    pos = vec3(vec("pos", 3))
    qx, qy, qz, qw = vec("quat", 4, [0, 0, 0, 1])
    return Observation(type=typ, pos=pos, size=vec3(size), quat=(qx, qy, qz, qw),
                       label=label if isinstance(label, str) else None,
                       yaw=_yaw(obj, where), shape=_shape(obj, where, size, shape))


def hungarian(cost: np.ndarray, allowed: np.ndarray, unmatched: float) -> list[tuple[int, int]]:
    """Min-cost matching of rows to columns (only ``allowed`` pairs), each may stay unmatched.

    The square (n+m) problem: row i -> column j at its cost, row i -> its own dummy column,
    and dummy row j -> column j, both at ``unmatched``; dummy rows to dummy columns cost 0.
    """
    n, m = cost.shape
    if n == 0 or m == 0:
        return []
    a = linear_sum_assignment.SimpleLinearSumAssignment()
    big = int(round(unmatched * _SCALE))
    for i in range(n):
        for j in range(m):
            if allowed[i, j]:
                a.add_arc_with_cost(i, j, int(round(cost[i, j] * _SCALE)))
        a.add_arc_with_cost(i, m + i, big)
    for j in range(m):
        a.add_arc_with_cost(n + j, j, big)
        for i in range(n):
            a.add_arc_with_cost(n + j, m + i, 0)
    status = a.solve()
    if status != a.OPTIMAL:  # cannot happen: the padded problem is always feasible
        raise RuntimeError(f"assignment solver status {status}")
    out = []
    for i in range(n):
        j = a.right_mate(i)
        if j < m:
            out.append((i, j))
    return out


@dataclass(frozen=True)
class Association:
    """The result of one association step."""

    matches: dict[str, int]  # entity id -> observation index
    new_obs: tuple[int, ...]  # observation indices matched to no entity
    missed: tuple[str, ...]  # entity ids matched to no observation


def associate(entities: list[Entity], obs: list[Observation], gate: float = GATE_M
              ) -> Association:
    """Match observations to entities (type equal, centre distance within the gate)."""
    n, m = len(entities), len(obs)
    cost = np.zeros((n, m))
    allowed = np.zeros((n, m), dtype=bool)
    for i, e in enumerate(entities):
        for j, o in enumerate(obs):
            d = float(np.linalg.norm(np.subtract(e.pos, o.pos)))
            cost[i, j] = d
            allowed[i, j] = e.type == o.type and d <= gate
    pairs = hungarian(cost, allowed, gate)
    matches = {entities[i].id: j for i, j in pairs}
    matched_obs = {j for _, j in pairs}
    return Association(matches=matches,
                       new_obs=tuple(j for j in range(m) if j not in matched_obs),
                       missed=tuple(e.id for e in entities if e.id not in matches))


@dataclass(frozen=True)
class Update:
    """Entities after an observation, the candidates left, and what changed."""

    entities: list[Entity]
    candidates: list[tuple[str, tuple[float, ...], tuple[float, ...], int]]
    created: tuple[str, ...]
    archived: tuple[str, ...]
    restored: tuple[str, ...]
    association: Association


def update(entities: list[Entity], obs: list[Observation],
           candidates: list[tuple[str, tuple[float, ...], tuple[float, ...], int]],
           gate: float = GATE_M, confirm: int = CONFIRM, new_prefix: str = "new",
           noise_var: float = 1e-6) -> Update:
    """One observation step: match, update matched entities, decay missed ones, confirm new."""
    assoc = associate(entities, obs, gate)
    out: list[Entity] = []
    archived, restored = [], []
    for e in entities:
        j = assoc.matches.get(e.id)
        if j is not None:
            o = obs[j]
            if e.lifecycle == "Archived":
                restored.append(e.id)
            out.append(replace(e, pos=o.pos, quat=o.quat, size=o.size, confidence=1.0,
                               lifecycle="Active", misses=0, cov=(noise_var,) * 3,
                               yaw=o.yaw, shape=o.shape))
        else:
            conf = e.confidence * DECAY
            life = "Archived" if conf < ARCHIVE_BELOW else "Uncertain"
            if life == "Archived" and e.lifecycle != "Archived":
                archived.append(e.id)
            out.append(replace(e, confidence=conf, lifecycle=life, misses=e.misses + 1))
    # unmatched observations against the candidates of the previous step
    pending = [obs[j] for j in assoc.new_obs]
    cand_ents = [Entity(id=str(k), type=t, pos=vec3(p), size=vec3(s))
                 for k, (t, p, s, _h) in enumerate(candidates)]
    ca = associate(cand_ents, pending, gate)
    by_obs = {j: int(cid) for cid, j in ca.matches.items()}
    new_cands: list[tuple[str, tuple[float, ...], tuple[float, ...], int]] = []
    created = []
    taken = {e.id for e in out}
    k = 1
    for j, o in enumerate(pending):
        hits = candidates[by_obs[j]][3] + 1 if j in by_obs else 1
        if hits >= confirm:
            while f"{new_prefix}{k}" in taken:
                k += 1
            eid = f"{new_prefix}{k}"
            taken.add(eid)
            created.append(eid)
            out.append(Entity(id=eid, type=o.type, pos=o.pos, size=o.size, quat=o.quat,
                              kind="unknown", cov=(noise_var,) * 3, yaw=o.yaw,
                              shape=o.shape))
        else:
            new_cands.append((o.type, o.pos, o.size, hits))
    out.sort(key=lambda e: e.id)
    return Update(entities=out, candidates=new_cands, created=tuple(created),
                  archived=tuple(archived), restored=tuple(restored), association=assoc)
