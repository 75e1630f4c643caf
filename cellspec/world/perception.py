"""What the run loop sees and believes: the noisy, possibly occluded sensor, the states
expected and observed around an action (for the commit decision and the discrepancy Δ),
entity lifecycle tracking, re-perception, and the gate on a place's reasoning trace (its
belief about the supports validated before the arm moves).

``Perception`` is a mixin of the run loop's ``_Runner`` (:mod:`cellspec.world.run`): it uses
the runner's world model (``world``), simulation (``sim``), surfaces and seeded streams
``rng`` (noise) and ``orng`` (occlusion).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cellspec.world import association as assoc
from cellspec.world.db import Entity, Transition, World, WorldRelation
from cellspec.world.discrepancy import State, derive_relations
from cellspec.world.results import RunStep
from cellspec.world.sim import PAD, Sim
from cellspec.world.trace import validate_trace


class Perception:
    """Observation, belief and the expected/observed states (a mixin of ``_Runner``)."""

    # the runner's state this mixin uses
    world: World
    sim: Sim
    rng: np.random.Generator
    orng: np.random.Generator
    noise: float
    occlusion: float
    hidden: list[tuple[np.ndarray, np.ndarray]]
    lifecycle: list[dict[str, Any]]
    surfaces: tuple[tuple[str, float], ...]
    order: tuple[str, ...]
    type: dict[str, str]
    size: dict[str, tuple[float, float, float]]
    yaw: dict[str, float]
    shape: dict[str, str]
    target: dict[str, tuple[float, float, float]]
    target_rels: list[WorldRelation] | None
    steps: list[RunStep]

    def belief(self) -> dict[str, Entity]:
        """The world model's entities by id."""
        return {e.id: e for e in self.world.entities()}

    def observe(self, keep: str | None = None) -> list[assoc.Observation]:
        """The sensor's view: every body with seeded noise, minus the ones occluded this time
        (with ``occlusion`` > 0: each body other than ``keep`` and the held part is hidden
        with that probability); the sensor reports the regions it could not see."""
        raw = self.sim.observe(self.rng, self.noise)
        self.hidden = []
        seen = []
        for o in raw:
            if (self.occlusion > 0 and o["name"] not in (keep, self.sim.held)
                    and self.orng.random() < self.occlusion):
                c = np.array(o["pos"])
                h = np.array(Entity(o["name"], o["type"], o["pos"], o["size"],
                                    yaw=o.get("yaw", 0.0), shape=o.get("shape", "box")
                                    ).extent()) / 2 + 0.01
                self.hidden.append((c - h, c + h))
                continue
            seen.append(assoc.Observation(type=o["type"], pos=o["pos"], size=o["size"],
                                          yaw=o.get("yaw", 0.0), shape=o.get("shape", "box")))
        return seen

    def _hidden(self, e: Entity) -> bool:
        """The entity lies in a region the last observation could not see."""
        c = np.array(e.pos)
        return any(bool(np.all(c >= lo) and np.all(c <= hi)) for lo, hi in self.hidden)

    def track(self, before: dict[str, Entity], label: str) -> None:
        """Record every entity lifecycle change (Active / Uncertain / Archived) of a write."""
        for e in self.world.entities():
            old = before.get(e.id)
            if old is not None and old.lifecycle != e.lifecycle:
                self.lifecycle.append({"action": label, "entity": e.id, "from": old.lifecycle,
                                       "to": e.lifecycle, "confidence": round(e.confidence, 4)})

    def grip_box(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The gripper pad's box (centre, size)."""
        return (tuple(map(float, self.sim.pad_pos())), PAD)

    def observed_state(self, upd: assoc.Update, obs: list[assoc.Observation],
                       ents: list[Entity], exp_cs: tuple[str, str | None], measures: dict
                       ) -> State:
        """The state observed after an action: associated entities (``new<k>`` for the
        unmatched), their relations and the gripper state."""
        by_obs = {j: eid for eid, j in upd.association.matches.items()}
        objs = []
        k = 0
        taken = {e.id for e in ents}
        for j, o in enumerate(obs):
            eid = by_obs.get(j)
            if eid is None:
                k += 1
                while f"new{k}" in taken:
                    k += 1
                eid = f"new{k}"
            objs.append(Entity(eid, o.type, o.pos, o.size, yaw=o.yaw, shape=o.shape))
        objs.sort(key=lambda o: o.id)
        grip = self.grip_box()
        rels = derive_relations(tuple(objs), self.surfaces, grip)
        held = [r.b for r in rels if r.rel == "holding"]
        cs: tuple[str, str | None]
        if held:
            cs = (exp_cs[0] if exp_cs[1] == held[0] and exp_cs[0] != "idle" else "holding",
                  held[0])
        else:
            cs = ("idle", None)
        return State(cs=cs, objects=tuple(objs), relations=rels, gripper=grip,
                     measures=measures)

    def expected_state(self, ents: list[Entity], cs: tuple[str, str | None], target: str,
                       path: tuple[tuple[float, ...], tuple[float, ...]] | None) -> State:
        """The state the action should leave: the predicted entities that are neither
        archived nor hidden, and their relations."""
        objs = tuple(e for e in ents if e.lifecycle != "Archived" and not self._hidden(e))
        grip = self.grip_box()
        return State(cs=cs, objects=objs, relations=derive_relations(objs, self.surfaces, grip),
                     gripper=grip, path=path, target=target)

    def perceive(self, label: str) -> None:
        """Observe and commit the observed state (a re-perception transition)."""
        before = self.belief()
        bel = list(before.values())
        obs = self.observe()
        upd = assoc.update(bel, obs, self.world.candidates())
        st = self.observed_state(upd, obs, bel, ("idle", None), {})
        rels = [r for r in st.relations if not r.a.startswith("new") and not
                r.b.startswith("new")] + [r for r in st.relations
                                          if r.a in upd.created or r.b in upd.created]
        self.world.transition(Transition(action="perceive", part="*", upserts=upd.entities,
                                         relations=rels, cs=st.cs,
                                         detail={"after": label,
                                                 "created": list(upd.created)}))
        self.world.set_candidates(upd.candidates)
        self.track(before, f"{label} (perceive)")

    def check_trace(self, pid: str) -> Any:
        """Validate the trace of placing pid: its supports stand as the layout has them."""
        if self.target_rels is None:
            at_target = tuple(Entity(p, self.type[p], self.target[p], self.size[p],
                                     yaw=self.yaw[p], shape=self.shape[p])
                              for p in self.order)
            self.target_rels = [r for r in derive_relations(at_target, self.surfaces, None)
                                if r.rel == "on"]
        sups = [r.b for r in self.target_rels if r.a == pid and r.b in self.target]
        belief = [str(r) for r in self.target_rels if r.a in sups]
        under = sups[0] if sups else next((r.b for r in self.target_rels if r.a == pid), None)
        trace = {"action": {"kind": "place", "object": pid, "target": under,
                            "at": list(self.target[pid])},
                 "belief": belief, "confidence": 1.0,
                 "assumption": (f"{', '.join(sups)} stand where the layout puts them, so "
                                f"{pid} placed at its target rests on them") if sups else
                               f"{pid} goes on a surface"}
        return validate_trace(trace, self.world, self.surfaces)

    def _gate_trace(self, label: str, pid: str) -> str | None:
        """None when the place's reasoning trace is accepted; else record the rejection (a
        step and a world record) and say why the run stops."""
        verdict = self.check_trace(pid)
        if verdict.accepted:
            return None
        self.world.record("trace", pid, "rejected", detail=verdict.to_json())
        self.steps.append(RunStep(label=label, kind="place", part=pid, outcome="rejected",
                               failed=verdict.reasons,
                               note=f"trace rejected at the {verdict.stage} stage"))
        return (f"the reasoning trace of {label} was rejected "
                f"({verdict.stage}): {'; '.join(verdict.reasons)}")
