"""The task-relevant subgraph of the world model for one action, serialised for a prompt
(seed 003, VLM-DEWM, Section 3.3.2 and Appendix C.1: "instead of feeding the entire world
state, ... extract the minimal set of objects and relations required for the current
decision").

The two stages of Appendix C.1, made deterministic:

1. **Zone filtering.** The action's zone is where it acts: the column of the part's
   believed box (``part``), of the place target's box (``target``), both (``action``) or
   none (``none``), reaching :data:`ZONE_MARGIN_M` below and above; every entity whose box
   meets the zone is kept (the support under the target, an object in the spot).
2. **Relevance.** From the action's objects (its part, and the gripper) the relation graph
   is walked breadth-first up to ``hops`` relations: what supports the part, what it
   supports, what touches it, and so on. Surfaces (``table``) and the gripper are hubs: a
   relation to them is kept, but the walk does not pass through them (everything stands on
   the table).

The subgraph is the kept entities and every relation between them (or to a hub). With
``supports`` (the default) it also holds every support relation between two parts,
``on(a, b)``, as a relation line only (no entity line): the structure believed built so
far, which a diagnosis of a part moved elsewhere in the cell reads. A
relation's confidence is the lower of its ends' (hubs count 1.0) and its lifecycle the
worse (Active < Uncertain < Archived). Text output is one line per entity and per
relation, in a stable order, so the same database gives byte-identical context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from cellspec.core.errors import CellspecError
from cellspec.world.db import LIFECYCLE, Entity, World, WorldRelation, open_world

ZONES = ("action", "part", "target", "none")
DEFAULT_ZONE = "action"  # chosen by bench/world_context.py (docs/world.md)
DEFAULT_HOPS = 1  # chosen by bench/world_context.py (docs/world.md)
DEFAULT_SUPPORTS = True  # chosen by bench/world_context.py (docs/world.md)
MAX_HOPS = 50
ZONE_MARGIN_M = 0.005  # the zone reaches this far beyond the part's and the target's boxes
HUB = "gripper"


def count_tokens(text: str) -> int:
    """Prompt tokens of a text, estimated as ceil(characters / 4) (OpenAI's rule of thumb
    for English and code; tiktoken is not a dependency, so every figure uses this one
    method and is reproducible)."""
    return math.ceil(len(text) / 4)


TOKEN_METHOD = "chars/4 (ceil(len(text) / 4); tiktoken is not installed or used)"


@dataclass(frozen=True)
class Action:
    """One task node of the world's task memory: ``pick:c1`` or ``place:c1``."""

    node: str
    kind: str
    part: str
    target: tuple[float, float, float] | None
    status: str


@dataclass(frozen=True)
class Context:
    """The task-relevant subgraph: entities with their hop distance, relations, and text."""

    action: Action
    zone: str
    hops: int
    supports: bool
    cs: tuple[str, str | None]
    entities: tuple[tuple[Entity, int], ...]  # (entity, hops from the action; -1 zone only)
    relations: tuple[tuple[WorldRelation, float, str], ...]  # (relation, confidence, lifecycle)
    dropped: int = 0  # lines left out to fit max_tokens

    def ids(self) -> set[str]:
        """The ids of the entities the context names (entity lines and relation ends)."""
        return {e.id for e, _ in self.entities} | {x for r, _, _ in self.relations
                                                   for x in (r.a, r.b)}

    def text(self) -> str:
        """The prompt text (one line per entity and relation)."""
        return serialise(self)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (rounded as the world database's own JSON)."""
        a = self.action
        return {"action": {"node": a.node, "kind": a.kind, "part": a.part,
                           "target": list(a.target) if a.target else None,
                           "status": a.status},
                "zone": self.zone, "hops": self.hops, "supports": self.supports,
                "cs": {"phase": self.cs[0], "object": self.cs[1]},
                "entities": [{**e.to_json(), "hop": h} for e, h in self.entities],
                "relations": [{"rel": r.rel, "a": r.a, "b": r.b,
                               "confidence": round(c, 4), "lifecycle": lc}
                              for r, c, lc in self.relations],
                "dropped_lines": self.dropped,
                "tokens": count_tokens(self.text()), "token_method": TOKEN_METHOD}


def actions(world: World) -> list[Action]:
    """Every task node of the world, in task order."""
    out = []
    for n in world.tasks():
        tgt = None
        if n["target"]:
            try:
                x, y, z = (float(v) for v in n["target"].split(","))
                tgt = (x, y, z)
            except ValueError:
                raise CellspecError(f"{world.path}: task {n['node']} has a malformed target "
                                    f"{n['target']!r} (expected x,y,z)") from None
        out.append(Action(n["node"], n["action"], n["part"], tgt, n["status"]))
    return out


def find_action(world: World, node: str | None) -> Action:
    """The task node named (``pick:c1``), or the current one when ``node`` is None."""
    acts = actions(world)
    if not acts:
        raise CellspecError(f"{world.path}: the world database has no tasks (cellspec run "
                            "writes them)")
    if node is None:
        node = world.current_task()
        if node is None:
            raise CellspecError(f"{world.path}: every task is done; name an action (one of "
                                f"{_some(acts)})")
    for a in acts:
        if a.node == node:
            return a
    raise CellspecError(f"{world.path}: no action '{node}' in the world's tasks (actions: "
                        f"{_some(acts)})")


def _some(acts: list[Action]) -> str:
    names = [a.node for a in acts]
    return ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")


def shape_note(e: dict[str, Any]) -> str:
    """' yaw 30.0' for a turned box, ' cylinder' for a cylinder (an entity's JSON), else ''."""
    if e.get("shape", "box") != "box":
        return f" {e['shape']}"
    y = round(float(e.get("yaw") or 0.0), 1)
    return f" yaw {y:.1f}" if y != 0.0 else ""


def _box(pos: tuple[float, ...], size: tuple[float, ...], grow: tuple[float, ...]
         ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return (tuple(p - s / 2 - g for p, s, g in zip(pos, size, grow, strict=True)),
            tuple(p + s / 2 + g for p, s, g in zip(pos, size, grow, strict=True)))


def _meets(e: Entity, box: tuple[tuple[float, ...], tuple[float, ...]]) -> bool:
    lo, hi = _box(e.pos, e.extent(), (0.0, 0.0, 0.0))  # a turned part: its enclosing box
    return all(lo[k] <= box[1][k] and hi[k] >= box[0][k] for k in range(3))


def zone_boxes(action: Action, part: Entity | None, zone: str
               ) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    """The boxes of the action's zone (see the module doc): the column of the part's and of
    the target's footprint (shrunk by 1 mm, so side neighbours that only touch stay out),
    reaching :data:`ZONE_MARGIN_M` below and above (what it stands on, what stands on it
    or in the spot)."""
    if zone not in ZONES:
        raise CellspecError(f"unknown zone '{zone}' (zones: {', '.join(ZONES)})")
    grow = (-0.001, -0.001, ZONE_MARGIN_M)
    out = []
    if zone in ("action", "part") and part is not None:
        out.append(_box(part.pos, part.extent(), grow))
    if zone in ("action", "target") and action.target is not None:
        size = part.extent() if part is not None else (0.002, 0.002, 0.0)
        out.append(_box(action.target, size, grow))
    return out


def _worse(a: str, b: str) -> str:
    return a if LIFECYCLE.index(a) >= LIFECYCLE.index(b) else b


def extract(world: World, action: Action, *, zone: str = DEFAULT_ZONE,
            hops: int = DEFAULT_HOPS, supports: bool = DEFAULT_SUPPORTS,
            max_tokens: int | None = None) -> Context:
    """The task-relevant subgraph of ``action`` (two stages: zone, then relation hops)."""
    if isinstance(hops, bool) or not isinstance(hops, int) or not 0 <= hops <= MAX_HOPS:
        raise CellspecError(f"--hops must be a whole number from 0 to {MAX_HOPS} (got {hops})")
    if max_tokens is not None and max_tokens < 1:
        raise CellspecError(f"--max-tokens must be at least 1 (got {max_tokens})")
    ents = {e.id: e for e in world.entities()}
    rels = world.relations()
    part = ents.get(action.part)
    # stage 2 seeds: the action's objects
    dist: dict[str, int] = {}
    if part is not None:
        dist[part.id] = 0
    adj: dict[str, list[str]] = {}
    for r in rels:
        adj.setdefault(r.a, []).append(r.b)
        adj.setdefault(r.b, []).append(r.a)
    if part is not None:
        frontier = [part.id]
        for h in range(1, hops + 1):
            nxt = []
            for n in frontier:
                for m in sorted(adj.get(n, [])):
                    if m in ents and m not in dist:
                        dist[m] = h
                        nxt.append(m)
            frontier = nxt
    # stage 1: the zone
    for box in zone_boxes(action, part, zone):
        for e in ents.values():
            if e.id not in dist and _meets(e, box):
                dist[e.id] = -1
    kept = sorted(((ents[i], h) for i, h in dist.items()), key=lambda x: x[0].id)
    keep = set(dist)
    sub = []
    for r in rels:
        ends = [x for x in (r.a, r.b) if x in ents]
        if not ends or not all(x in keep for x in ends):
            continue  # a relation between hubs only, or to an entity left out
        conf = min(ents[x].confidence for x in ends)
        lc = ents[ends[0]].lifecycle if len(ends) == 1 else _worse(ents[r.a].lifecycle,
                                                                   ents[r.b].lifecycle)
        sub.append((r, conf, lc))
    if supports:
        have = {r for r, _, _ in sub}
        for r in rels:
            if r.rel == "on" and r.a in ents and r.b in ents and r not in have:
                sub.append((r, min(ents[r.a].confidence, ents[r.b].confidence),
                            _worse(ents[r.a].lifecycle, ents[r.b].lifecycle)))
        sub.sort(key=lambda x: (x[0].rel, x[0].a, x[0].b))
    ctx = Context(action=action, zone=zone, hops=hops, supports=supports, cs=world.cs(),
                  entities=tuple(kept), relations=tuple(sub))
    if max_tokens is not None:
        ctx = _fit(ctx, max_tokens)
    return ctx


def whole(world: World, action: Action) -> Context:
    """The whole graph in the same form (every entity, every relation): the baseline."""
    ents = {e.id: e for e in world.entities()}
    sub = []
    for r in world.relations():
        ends = [x for x in (r.a, r.b) if x in ents]
        conf = min((ents[x].confidence for x in ends), default=1.0)
        lc = "Active"
        for x in ends:
            lc = _worse(lc, ents[x].lifecycle)
        sub.append((r, conf, lc))
    return Context(action=action, zone="all", hops=-1, supports=True, cs=world.cs(),
                   entities=tuple((e, 0) for e in sorted(ents.values(), key=lambda e: e.id)),
                   relations=tuple(sub))


def _rank(h: int) -> int:
    return MAX_HOPS + 1 if h < 0 else h


def _fit(ctx: Context, max_tokens: int) -> Context:
    """Drop the least relevant lines until the text fits ``max_tokens``: entities found only
    by the zone first, then the farthest hop (by id), each with its relations; then the
    support lines that do not touch the part, last first. The part and its own relations
    stay (the header says how many lines were cut)."""
    hop = {e.id: h for e, h in ctx.entities}
    part = ctx.action.part
    while count_tokens(serialise(ctx)) > max_tokens:
        worst = max((e for e in ctx.entities if hop[e[0].id] != 0),
                    key=lambda e: (_rank(e[1]), e[0].id), default=None)
        if worst is None:
            rest = [x for x in ctx.relations if part not in (x[0].a, x[0].b)]
            if not rest:
                break
            ctx = replace(ctx, relations=tuple(x for x in ctx.relations if x is not rest[-1]),
                          dropped=ctx.dropped + 1)
            continue
        rels = [x for x in ctx.relations if worst[0].id not in (x[0].a, x[0].b)]
        ctx = replace(ctx, entities=tuple(e for e in ctx.entities if e is not worst),
                      relations=tuple(rels),
                      dropped=ctx.dropped + 1 + len(ctx.relations) - len(rels))
    return ctx


def _pos(p: tuple[float, ...]) -> str:
    return ",".join(f"{v:.3f}" for v in p)


def serialise(ctx: Context) -> str:
    """One header line, then one line per entity and per relation (sorted)."""
    a = ctx.action
    where = f" -> {_pos(a.target)}" if a.target else ""
    # the extraction's parameters are in the JSON, not in the prompt
    head = f"# {a.node}{where} ({a.status}) | cs {ctx.cs[0]} {ctx.cs[1] or '-'}"
    if ctx.dropped:
        head += f" | {ctx.dropped} line(s) dropped to fit"
    lines = [head]
    for e, _ in ctx.entities:
        lines.append(f"{e.id} {e.type} {_pos(e.pos)}{shape_note(e.to_json())} conf "
                     f"{e.confidence:.2f} {e.lifecycle}")
    for r, c, lc in ctx.relations:
        lines.append(f"{r} conf {c:.2f} {lc}")
    return "\n".join(lines) + "\n"


def prompt_context(db: str, node: str | None = None) -> tuple[str, dict[str, Any]]:
    """The default context of an action of a world database, for an LLM prompt, and its
    record (database, action, tokens of the context and of the whole graph); the current
    task when ``node`` is None. Bad input (CellspecError) as ``cellspec world context``."""
    with open_world(db) as w:
        act = find_action(w, node)
        ctx = extract(w, act)
        text = ctx.text()
        rec = {"db": str(db), "cell": w.meta("cell"), "action": act.node,
               "tokens": count_tokens(text),
               "whole_graph_tokens": count_tokens(whole(w, act).text()),
               "token_method": TOKEN_METHOD}
    return text, rec
