"""The closed loop: build a layout action by action in the simulation, observe, commit or roll
back, diagnose, recover (``cellspec run``).

Each action (pick, place) is executed in :mod:`cellspec.world.sim` — the gripper pad follows
the twin's robot arm (engine ``arm``, :mod:`cellspec.world.arm`; the arm's links are not in
the physics scene) or moves on its own as a kinematic gripper body (engine ``gripper``) —
then the scene is observed (ground truth plus seeded Gaussian
noise), observations are associated with the believed entities (Hungarian), the action's
commit condition is decided by clingo over the measures, and the observed state is written
in one transaction that commits only when the condition holds. The discrepancy Δ between
the expected and the observed state is diagnosed with the cell's diagnose rules (clingo)
and the recovery of the top-ranked cause is applied; an ambiguous diagnosis is reported as
such (both causes, ranked) and the top-ranked recovery is tried.

Modes (for the benchmark): ``diagnose`` (the above), ``nodiag`` (commit/rollback, then
re-perceive and restart the part's pick and place, no diagnosis), ``blind`` (retry the
failed action as is).
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from cellspec.core import progress
from cellspec.core.errors import CellspecError
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots.tasks import part_size
from cellspec.world import association as assoc
from cellspec.world.db import Entity, Transition, World, open_world
from cellspec.world.discrepancy import State, cell_surfaces, derive_relations, diagnose
from cellspec.world.rules import commit_rule, decide_commit, force_thresholds
from cellspec.world.sim import PAD, Sim

ENGINE = "kinematic-gripper"
ENGINE_NOTE = ("actions are executed by a KINEMATIC GRIPPER BODY in a pybullet physics "
               "simulation (a force-limited pad moved along straight paths, a fixed "
               "constraint as the grasp), NOT by the robot arm of the twin")
ENGINES = ("auto", "arm", "gripper")


def arm_note(robot: str) -> str:
    """The run header for the arm engine."""
    return (f"actions are executed by the robot arm {robot} of the twin: the gripper pad in "
            "the pybullet physics simulation follows the arm's tool centre point (IK every "
            "2 cm, joint interpolation, forward kinematics); the arm's links are kinematic "
            "and not in the physics scene (only the pad and the parts make contact)")
FAULTS = ("slip", "obstacle", "moved", "support")
MODES = ("diagnose", "nodiag", "blind")
SUCCESS_M = 0.005  # a part counts as built when its true centre is this close to its target
RETRY_LIMIT = 3  # recoveries per part before giving up
GUARD_TRIES = 4  # corrections of a guarded (compliant) place before it fails
GUARD_SEATED_M = 0.002  # within this of the seated height, contact is the seating itself
GUARD_LIFT_M = 0.003  # lift before moving sideways out of a contact
GUARD_MARGIN_M = 0.0005  # clearance added to the measured overlap


@dataclass(frozen=True)
class Fault:
    """An induced fault: kind at the planned action number ``at`` (1-based)."""

    kind: str
    at: int

    def __str__(self) -> str:
        return f"{self.kind}@{self.at}"


def parse_faults(text: str | None) -> tuple[Fault, ...]:
    """'slip@3,obstacle@5,moved@7' as faults; bad input names the valid form."""
    if not text:
        return ()
    out = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*([a-z]+)@(\d+)\s*", item)
        if not m or m.group(1) not in FAULTS or int(m.group(2)) < 1:
            raise CellspecError(f"--faults: bad item {item!r}: write KIND@N with KIND one of "
                                f"{', '.join(FAULTS)} and N >= 1 (e.g. slip@3,obstacle@5)")
        out.append(Fault(m.group(1), int(m.group(2))))
    ats = [f.at for f in out]
    if len(set(ats)) != len(ats):
        raise CellspecError("--faults: at most one fault per action")
    return tuple(sorted(out, key=lambda f: f.at))


def check_faults(faults: tuple[Fault, ...], cell: Cell, layout: Layout) -> None:
    """Bad input unless every fault names a planned action (1..2n) that suits its kind:
    ``support@N`` needs a pick (odd N) whose part stands on another part of the layout."""
    n = 2 * len(layout)
    for f in faults:
        if f.at > n:
            raise CellspecError(f"--faults: {f} is beyond the last action ({n} planned "
                                f"actions for {len(layout)} parts)")
    sups = [f for f in faults if f.kind == "support"]
    if not sups:
        return
    order = list(layout.order) if layout.order else None
    if order is None:
        raise CellspecError("--faults: support@N needs a layout with an `order` (the pick "
                            "N must be known before planning)")
    stacked = _stacked(layout, _sizes(cell, layout))
    for f in sups:
        if f.at % 2 == 0:
            raise CellspecError(f"--faults: {f}: support@N displaces the support of the part "
                                "picked at action N; N must be a pick (odd)")
        pid = order[(f.at - 1) // 2]
        if pid not in stacked:
            raise CellspecError(f"--faults: {f}: the part picked at action {f.at} ({pid}) "
                                "stands on no other part")


def _stacked(layout: Layout, sizes: dict[str, tuple[float, float, float]]) -> dict[str, str]:
    """part -> the part it stands on in the layout (its first support in layout order)."""
    out: dict[str, str] = {}
    pos = np.asarray(layout.pos, float)
    size = np.array([sizes[p] for p in layout.ids], float)
    for i, a in enumerate(layout.ids):
        for j, b in enumerate(layout.ids):
            if i == j:
                continue
            bottom = pos[i][2] - size[i][2] / 2
            top = pos[j][2] + size[j][2] / 2
            if abs(bottom - top) < 0.001 and all(
                    abs(pos[i][k] - pos[j][k]) < size[j][k] / 2 for k in (0, 1)):
                out.setdefault(a, b)
    return out


def verify_layout(cell: Cell, layout: Layout) -> str | None:
    """None when the layout passes the cell's rules, else why the run refuses to build it."""
    from cellspec.solver.verify import check

    v = check(cell, layout)
    if v.verdict == "pass":
        return None
    if v.verdict == "unknown":
        return (f"refused: the layout could not be verified ({v.reason}); nothing was built "
                "(see `cellspec check`)")
    shown = "; ".join(f"{x.rule}: {x.message}" for x in v.violations[:3])
    more = f" (and {len(v.violations) - 3} more)" if len(v.violations) > 3 else ""
    return (f"refused: the layout fails its rules ({shown}{more}); nothing was built "
            "(see `cellspec check`)")


@dataclass
class Step:
    """One executed action: what it was, whether it committed, and what was diagnosed."""

    label: str
    kind: str
    part: str
    outcome: str  # committed | rolled_back
    failed: tuple[str, ...] = ()
    causes: list[dict[str, Any]] = field(default_factory=list)
    ambiguous: bool = False
    recovery: str | None = None
    fault: str | None = None
    note: str | None = None
    sim_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"action": self.label, "kind": self.kind, "part": self.part,
                "outcome": self.outcome, "failed": list(self.failed), "causes": self.causes,
                "ambiguous": self.ambiguous, "recovery": self.recovery, "fault": self.fault,
                "note": self.note, "sim_seconds": round(self.sim_s, 3)}


@dataclass
class RunResult:
    """A whole run: the steps, the outcome and the figures the benchmark needs."""

    steps: list[Step]
    success: bool
    reason: str
    mode: str
    faults: tuple[Fault, ...]
    planned: int
    sim_seconds: float
    wall_seconds: float
    max_error: float
    first_diagnosis: dict[str, str | None]  # fault -> first cause diagnosed after it
    recovery_times: list[float]  # sim seconds from detection to the recovered commit
    skipped_faults: list[str]
    engine: str = ENGINE
    note: str = ENGINE_NOTE
    refused: bool = False  # the layout failed verification: nothing was built or written
    lifecycle: list[dict[str, Any]] = field(default_factory=list)  # entity state changes
    place_corrections: int = 0  # back-offs of the guarded place

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (wall time excluded so the output is byte-identical across runs)."""
        rolled = sum(1 for s in self.steps if s.outcome == "rolled_back")
        return {"engine": self.engine, "note": self.note, "mode": self.mode,
                "faults": [str(f) for f in self.faults],
                "skipped_faults": self.skipped_faults,
                "steps": [s.to_json() for s in self.steps],
                "lifecycle": self.lifecycle,
                "summary": {"success": self.success, "reason": self.reason,
                            "refused": self.refused,
                            "place_corrections": self.place_corrections,
                            "actions": len(self.steps), "planned": self.planned,
                            "rolled_back": rolled,
                            "max_error_m": (round(self.max_error, 4)
                                            if math.isfinite(self.max_error) else None),
                            "sim_seconds": round(self.sim_seconds, 3),
                            "diagnosed": self.first_diagnosis,
                            "recovery_sim_seconds": [round(t, 3) for t in self.recovery_times]}}


# -- helpers -------------------------------------------------------------------------------
def _sizes(cell: Cell, layout: Layout) -> dict[str, tuple[float, float, float]]:
    return {pid: part_size(cell, layout, i) for i, pid in enumerate(layout.ids)}


def _masses(cell: Cell, layout: Layout) -> dict[str, float]:
    out = {}
    for i, pid in enumerate(layout.ids):
        m = cell.part_types[layout.types[i]].mass
        out[pid] = float(m) if m is not None else 0.1
    return out


def _overlap(lo1: np.ndarray, hi1: np.ndarray, lo2: np.ndarray, hi2: np.ndarray,
             margin: float) -> bool:
    return bool(np.all(np.minimum(hi1, hi2) - np.maximum(lo1, lo2) > -margin))


class _Runner:
    def __init__(self, cell: Cell, layout: Layout, world: World, faults: tuple[Fault, ...],
                 seed: int, noise: float, mode: str, order: tuple[str, ...],
                 occlusion: float = 0.0):
        self.cell, self.layout, self.world = cell, layout, world
        self.faults = {f.at: f for f in faults}
        self.mode, self.noise = mode, noise
        self.rng = np.random.default_rng(seed)
        self.frng = np.random.default_rng(seed + 7919)
        self.occlusion = occlusion
        self.orng = np.random.default_rng(seed + 104729)  # its own stream: 0 changes nothing
        self.hidden: list[tuple[np.ndarray, np.ndarray]] = []  # regions the sensor cannot see
        self.lifecycle: list[dict[str, Any]] = []
        self.corrections = 0  # guarded-place back-offs
        self.order = order
        self.size = _sizes(cell, layout)
        self.type = dict(zip(layout.ids, layout.types, strict=True))
        self.target = {pid: tuple(float(v) for v in layout.pos[i])
                       for i, pid in enumerate(layout.ids)}
        self.surfaces = cell_surfaces(cell)
        self.table_z = min(z for _, z in self.surfaces)
        self.sim = Sim(self.table_z, seed)
        try:
            self._setup(cell, layout, order)
        except BaseException:  # never leak the physics client
            self.sim.close()
            raise

    def _setup(self, cell: Cell, layout: Layout, order: tuple[str, ...]) -> None:
        self.keepouts: list[tuple[np.ndarray, np.ndarray]] = []
        self.steps: list[Step] = []
        self.placed: set[str] = set()
        self.first_diag: dict[str, str | None] = {}
        self.pending_detect: dict[str, float] = {}
        self.recovery_times: list[float] = []
        self.skipped: list[str] = []
        self.retries: dict[str, int] = {}
        self.last_observed: dict[str, Entity] = {}
        self.target_rels: list[Any] | None = None
        # feeder: parts wait in rows in front of the table (y < workspace)
        ws = cell.workspace
        x0, y0 = float(ws.lo[0]) + 0.05, float(ws.lo[1]) - 0.1
        self.start: dict[str, tuple[float, float, float]] = {}
        for k, pid in enumerate(order):
            sx, sy, sz = self.size[pid]
            self.start[pid] = (x0 + (k % 6) * 0.08, y0 - (k // 6) * 0.08,
                               self.table_z + sz / 2)
        masses = _masses(cell, layout)
        for pid in order:
            self.sim.add_box(pid, self.type[pid], self.size[pid], self.start[pid], masses[pid])
        self.sim.step(48)
        tops = [self.target[p][2] + self.size[p][2] / 2 for p in order]
        hmax = max(self.size[p][2] for p in order)
        self.z_safe = max(tops) + hmax + PAD[2] + 0.04

    # -- world --------------------------------------------------------------------------
    def init_world(self) -> None:
        ents = [Entity(id=pid, type=self.type[pid], pos=tuple(map(float, self.sim.pose(pid))),
                       size=self.size[pid]) for pid in self.order]
        rels = list(derive_relations(tuple(ents), self.surfaces, None))
        nodes = []
        for pid in self.order:
            nodes.append({"node": f"pick:{pid}", "action": "pick", "part": pid,
                          "target": "", "deps": [n["node"] for n in nodes[-1:]]})
            nodes.append({"node": f"place:{pid}", "action": "place", "part": pid,
                          "target": ",".join(f"{v:.4f}" for v in self.target[pid]),
                          "deps": [f"pick:{pid}"]})
        self.world.set_tasks(nodes)
        self.world.transition(Transition(action="init", part="*", upserts=ents,
                                         relations=rels, cs=("idle", None),
                                         detail={"parts": len(ents)}))

    def belief(self) -> dict[str, Entity]:
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
                c, h = np.array(o["pos"]), np.array(o["size"]) / 2 + 0.01
                self.hidden.append((c - h, c + h))
                continue
            seen.append(assoc.Observation(type=o["type"], pos=o["pos"], size=o["size"]))
        return seen

    def _hidden(self, e: Entity) -> bool:
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
        return (tuple(map(float, self.sim.pad_pos())), PAD)

    def observed_state(self, upd: assoc.Update, obs: list[assoc.Observation],
                       ents: list[Entity], exp_cs: tuple[str, str | None], measures: dict
                       ) -> State:
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
            objs.append(Entity(eid, o.type, o.pos, o.size))
        objs.sort(key=lambda o: o.id)
        grip = self.grip_box()
        rels = derive_relations(tuple(objs), self.surfaces, grip)
        held = [r.b for r in rels if r.rel == "holding"]
        if held:
            cs = (exp_cs[0] if exp_cs[1] == held[0] and exp_cs[0] != "idle" else "holding",
                  held[0])
        else:
            cs = ("idle", None)
        return State(cs=cs, objects=tuple(objs), relations=rels, gripper=grip,
                     measures=measures)

    def expected_state(self, ents: list[Entity], cs: tuple[str, str | None], target: str,
                       path: tuple[tuple[float, ...], tuple[float, ...]] | None) -> State:
        objs = tuple(e for e in ents if e.lifecycle != "Archived" and not self._hidden(e))
        grip = self.grip_box()
        return State(cs=cs, objects=objs, relations=derive_relations(objs, self.surfaces, grip),
                     gripper=grip, path=path, target=target)

    # -- motion helpers -------------------------------------------------------------------
    def transport_z(self) -> float:
        z = self.z_safe
        for _lo, hi in self.keepouts:
            hmax = max(s[2] for s in self.size.values())
            z = max(z, float(hi[2]) + hmax + PAD[2] + 0.03)
        return z

    def hold_offset(self, pid: str) -> np.ndarray:
        return np.array([0.0, 0.0, PAD[2] / 2 + self.size[pid][2] / 2])

    def path_box(self, a: np.ndarray, b: np.ndarray, pid: str, z: float
                 ) -> tuple[tuple[float, ...], tuple[float, ...]]:
        h = np.array(self.size[pid]) / 2 + 0.01
        lo = np.minimum(a, b) - h
        hi = np.maximum(a, b) + h
        lo[2] = self.table_z
        hi[2] = z + PAD[2]
        return (tuple(map(float, lo)), tuple(map(float, hi)))

    # -- faults ---------------------------------------------------------------------------
    def _clash(self, lo: np.ndarray, hi: np.ndarray, skip: str | None = None) -> bool:
        """The box comes within 1.5 cm of a body (other than ``skip``) or of a part's target."""
        if any(_overlap(lo, hi, l2, h2, 0.015) for n, l2, h2 in self.sim.boxes() if n != skip):
            return True
        return any(_overlap(lo, hi, np.array(self.target[q]) - np.array(self.size[q]) / 2,
                            np.array(self.target[q]) + np.array(self.size[q]) / 2, 0.015)
                   for q in self.order if q != skip)

    def spawn_obstacle(self, a: np.ndarray, b: np.ndarray, z: float) -> bool:
        for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.35, 0.65):
            c = a + (b - a) * t
            if np.linalg.norm((c - a)[:2]) < 0.06 or np.linalg.norm((c - b)[:2]) < 0.06:
                continue
            size = np.array([0.04, 0.04, z + 0.01 - self.table_z])
            pos = np.array([c[0], c[1], self.table_z + size[2] / 2])
            if not self._clash(pos - size / 2, pos + size / 2):
                n = sum(1 for k in self.sim.kind.values() if k == "obstacle") + 1
                self.sim.add_box(f"obstacle{n}", "obstacle", tuple(size), tuple(pos), 0.0,
                                 kind="obstacle")
                return True
        return False

    def apply_moved(self, part: str | None = None) -> str | None:
        """Displace a placed part nothing stands on (``part``: that one, whatever stands on
        it: the `support` fault); returns its id, or None when no part qualifies."""
        remaining = [p for p in self.order if p not in self.placed]
        cands = []
        if part is not None:
            return self._displace(part) if part in self.placed else None
        for p in sorted(self.placed):
            top = self.sim.pose(p)[2] + self.size[p][2] / 2
            lo = self.sim.pose(p) - np.array(self.size[p]) / 2
            hi = self.sim.pose(p) + np.array(self.size[p]) / 2
            above = False
            for q in self.order:
                if q == p:
                    continue
                qt = np.array(self.target[q]) if q in remaining else self.sim.pose(q)
                qlo = qt - np.array(self.size[q]) / 2
                if abs(qlo[2] - top) < 0.005 and _overlap(lo[:2], hi[:2], qlo[:2],
                                                         (qt + np.array(self.size[q]) / 2)[:2],
                                                         -0.001):
                    above = True
            if not above:
                cands.append(p)
        if not cands:
            return None
        return self._displace(cands[int(self.frng.integers(len(cands)))])

    def _displace(self, p: str) -> str | None:
        base = self.sim.pose(p)
        offs = [(0, 0.09), (0.09, 0), (0, -0.09), (-0.09, 0), (0.09, 0.09), (-0.09, 0.09),
                (0.09, -0.09), (-0.09, -0.09), (0, 0.15), (0.15, 0), (-0.15, 0)]
        ws = self.cell.workspace
        for dx, dy in offs:
            pos = np.array([base[0] + dx, base[1] + dy, self.table_z + self.size[p][2] / 2])
            if not (float(ws.lo[0]) <= pos[0] <= float(ws.hi[0])
                    and float(ws.lo[1]) <= pos[1] <= float(ws.hi[1])):
                continue
            s = np.array(self.size[p]) / 2
            if not self._clash(pos - s, pos + s, p):
                self.sim.teleport(p, tuple(pos))
                self.sim.step(24)
                return p
        return None

    # -- actions ----------------------------------------------------------------------------
    def do_pick(self, pid: str, bel: Entity, slip: bool, obstacle: bool
                ) -> tuple[dict, tuple[str, str | None], Any, list[Entity]]:
        sim = self.sim
        z = self.transport_z()
        start = sim.goal.copy()
        above = np.array([bel.pos[0], bel.pos[1], z])
        if obstacle:
            self.obstacle_spawned = self.spawn_obstacle(np.array([start[0], start[1], z]),
                                                        above, z)
        ok = True
        ext = 0.0
        for goal in ([start[0], start[1], z], above):
            m = sim.move(goal)
            ok &= m.reached
            ext = max(ext, m.ext_force)
            if not m.reached:
                break
        path = self.path_box(np.array([start[0], start[1], z]), above, pid, z)
        measures: dict[str, float | bool] = {}
        if not ok:  # the approach stalled: nothing was grasped
            return ({"controller_ok": False, "ext_force": ext}, ("approaching", pid), path,
                    [bel])
        if ok:
            top = bel.pos[2] + bel.size[2] / 2
            m = sim.move([bel.pos[0], bel.pos[1], top + PAD[2] / 2 + 0.001])
            ok &= m.reached
            grasp_force, _, _ = sim.press(pid, 0.004, 20.0, 0.2)
            attached = sim.attach(pid)
            measures["grasp_force"] = grasp_force if attached else 0.0
            m = sim.move(above, slip_at=0.5 if slip else None)
            ok &= m.reached
            ext = max(ext, m.ext_force)
        measures.update({"controller_ok": bool(ok), "ext_force": ext})
        exp_pos = tuple(map(float, sim.pad_pos() - self.hold_offset(pid)))
        return measures, ("holding", pid), path, [replace(bel, pos=exp_pos)]

    def do_place(self, pid: str, bel: Entity, slip: bool, obstacle: bool
                 ) -> tuple[dict, tuple[str, str | None], Any, list[Entity], bool]:
        sim = self.sim
        z = self.transport_z()
        tgt = np.array(self.target[pid])
        start = sim.goal.copy()
        above = np.array([tgt[0], tgt[1], z])
        if obstacle:
            self.obstacle_spawned = self.spawn_obstacle(np.array([start[0], start[1], z]),
                                                        above, z)
        path = self.path_box(np.array([start[0], start[1], z]), above, pid, z)
        ok, ext = True, 0.0
        legs = [[start[0], start[1], z], above]
        for k, goal in enumerate(legs):
            m = sim.move(goal, slip_at=0.3 if slip and k == 1 else None)
            ok &= m.reached
            ext = max(ext, m.ext_force)
            if not m.reached:
                break
        held = sim.held == pid
        if not ok or not held:  # transport failed: stop here, the place cannot commit
            exp = tuple(map(float, sim.pad_pos() - self.hold_offset(pid)))
            return ({"controller_ok": bool(ok and held), "ext_force": ext},
                    ("transporting", pid), path, [replace(bel, pos=exp)], False)
        # in-hand pose: observe the carried part and aim the pad so that the part, not the
        # pad, arrives at the target (the grasp is never exactly centred)
        seen = sim.pose(pid) + (self.rng.normal(0.0, self.noise, 3) if self.noise > 0 else 0.0)
        rel = seen - sim.pad_pos()
        m = sim.move([tgt[0] - rel[0], tgt[1] - rel[1], z])
        ok &= m.reached
        down = np.array([tgt[0] - rel[0], tgt[1] - rel[1], tgt[2] - rel[2] + 0.001])
        m = self.guarded_descent(pid, down)
        ok &= m.reached
        if not ok:  # stopped on the way down (a protective stop): keep the part, give up here
            exp = tuple(map(float, sim.pad_pos() - self.hold_offset(pid)))
            return ({"controller_ok": False, "ext_force": ext},  # transport force only
                    ("placing", pid), path, [replace(bel, pos=exp)], False)
        thr = self._contact_threshold()
        _, fpeak, ftime = sim.press(pid, 0.004, 20.0, 0.6, threshold=thr)
        sim.release()
        m = sim.move([tgt[0], tgt[1], sim.goal[2] + 0.04])
        ok &= m.reached
        sim.step(48)
        measures = {"controller_ok": bool(ok), "ext_force": ext, "contact_force": fpeak,
                    "contact_time": ftime, "speed": sim.speed(pid)}
        return measures, ("idle", None), path, [replace(bel, pos=tuple(map(float, tgt)))], True

    def guarded_descent(self, pid: str, down: np.ndarray) -> Any:
        """Lower the held part to ``down`` under the cell's contact threshold (compliant
        place): when a body other than its supports pushes on it above the threshold before
        it is seated, halt, perceive the part and what it touches, back off along the
        contact normal by the measured overlap (plus a margin), and lower it again; at most
        GUARD_TRIES corrections (then the place fails with the part still in hand)."""
        sim = self.sim
        thr = self._contact_threshold()
        sups = tuple(r.b for r in (self.target_rels or []) if r.a == pid)
        seat_z = float(down[2]) + GUARD_SEATED_M

        def blocked() -> bool:
            return (float(sim.pad_pos()[2]) > seat_z
                    and sim.touching(pid, sups)[0] > thr)

        m = sim.move(down, stop=False, guard=blocked)
        for _ in range(GUARD_TRIES):
            if m.reached:
                break
            _, who = sim.touching(pid, sups)
            shift = self._backoff(pid, who)
            if shift is None:
                break
            g = sim.goal.copy()
            sim.move([g[0], g[1], g[2] + GUARD_LIFT_M], stop=False)
            down[:2] += shift
            sim.move([down[0], down[1], g[2] + GUARD_LIFT_M], stop=False)
            self.corrections += 1
            m = sim.move(down, stop=False, guard=blocked)
        return m

    def _backoff(self, pid: str, who: list[str]) -> np.ndarray | None:
        """The xy shift that takes the held part (perceived) out of the perceived boxes it
        touches: along the axis of least overlap, by that overlap plus a margin."""
        if not who:
            return None
        noise = (lambda: self.rng.normal(0.0, self.noise, 3)) if self.noise > 0 else \
            (lambda: np.zeros(3))
        c = self.sim.pose(pid) + noise()
        h = np.array(self.size[pid]) / 2
        total = np.zeros(2)
        for n in who:
            oc = self.sim.pose(n) + noise()
            oh = np.array(self.sim.sizes[n]) / 2
            over = (h + oh)[:2] - np.abs(c - oc)[:2]  # overlap per axis (>0: overlapping)
            if np.any(over <= -0.002):
                continue
            ax = int(np.argmin(over))
            d = np.zeros(2)
            d[ax] = np.sign(c[ax] - oc[ax]) or 1.0
            total += d * (max(over[ax], 0.0) + GUARD_MARGIN_M)
        return total if np.any(total) else None

    def _contact_threshold(self) -> float:
        return float(force_thresholds(self.cell)["contact"][0])

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> tuple[bool, str]:
        queue: list[tuple[str, str, str, int | None]] = []
        for n, pid in enumerate(self.order):
            queue.append((str(2 * n + 1), "pick", pid, 2 * n + 1))
            queue.append((str(2 * n + 2), "place", pid, 2 * n + 2))
        budget = 6 * len(queue) + 12
        sub: dict[str, int] = {}
        while queue:
            if len(self.steps) >= budget:
                return False, "gave up: too many actions"
            label, kind, pid, nominal = queue.pop(0)
            progress.tick("run", len(self.steps), None, f"action {label}: {kind} {pid}")
            fault = self.faults.get(nominal) if nominal is not None else None
            note = None
            if fault is not None and fault.kind == "moved":
                moved = self.apply_moved()
                if moved is None:
                    self.skipped.append(str(fault))
                    note = f"{fault}: no placed part can be moved yet (skipped)"
                    fault = None
                else:
                    note = f"{fault}: {moved} displaced"
            elif fault is not None and fault.kind == "support":
                sup = _stacked(self.layout, self.size).get(pid)
                moved = self.apply_moved(sup) if sup is not None else None
                if moved is None:
                    self.skipped.append(str(fault))
                    note = f"{fault}: the support of {pid} is not placed or cannot move (skipped)"
                    fault = None
                else:
                    note = f"{fault}: {moved}, the support of {pid}, displaced"
            slip = fault is not None and fault.kind == "slip"
            obst = fault is not None and fault.kind == "obstacle"
            self.obstacle_spawned = False
            bel = self.belief()
            t0 = self.sim.time
            if kind == "place":  # the action's reasoning trace, validated before it moves
                verdict = self.check_trace(pid)
                if not verdict.accepted:
                    self.world.record("trace", pid, "rejected", detail=verdict.to_json())
                    self.steps.append(Step(label=label, kind=kind, part=pid,
                                           outcome="rejected", failed=verdict.reasons,
                                           note=f"trace rejected at the {verdict.stage} stage"))
                    return False, (f"the reasoning trace of {label} was rejected "
                                   f"({verdict.stage}): {'; '.join(verdict.reasons)}")
            if kind == "pick":
                measures, exp_cs, path, pred = self.do_pick(pid, bel[pid], slip, obst)
            else:
                measures, exp_cs, path, pred, _done = self.do_place(pid, bel[pid], slip, obst)
            if obst and not self.obstacle_spawned:
                self.skipped.append(str(fault))
                note = f"{fault}: no free spot on the path (skipped)"
                fault = None
            # observe, associate, decide, write atomically
            obs = self.observe(keep=pid)
            predicted = [e for e in bel.values() if e.id != pid] + pred
            predicted.sort(key=lambda e: e.id)
            cands = self.world.candidates()
            upd = assoc.update(predicted, obs, cands)
            observed = self.observed_state(upd, obs, predicted, exp_cs, {})
            track = None
            if kind == "pick":
                o = next((x for x in observed.objects if x.id == pid), None)
                want = self.sim.pad_pos() - self.hold_offset(pid)
                track = float(np.linalg.norm(np.subtract(o.pos, want))) if o else 1.0
                measures["track_error"] = track
            else:
                o = next((x for x in observed.objects if x.id == pid), None)
                if "contact_force" in measures:
                    measures["target_error"] = (float(np.linalg.norm(
                        np.subtract(o.pos, self.target[pid]))) if o else 1.0)
            decision = decide_commit(self.cell, kind, measures)
            expected = self.expected_state(predicted, exp_cs, pid, path)
            observed = replace(observed, measures={k: v for k, v in measures.items()
                                                   if not isinstance(v, bool)})
            rels = [r for r in observed.relations if not r.a.startswith("new")
                    and not r.b.startswith("new")] + \
                   [r for r in observed.relations if r.a in upd.created or r.b in upd.created]
            node = f"{kind}:{pid}"
            detail = {"measures": {k: (round(v, 4) if isinstance(v, float) else v)
                                   for k, v in sorted(measures.items())},
                      "failed": list(decision.failed)}
            t = Transition(action=kind, part=pid, upserts=upd.entities, relations=rels,
                           cs=observed.cs, task_status=(node, "done"), detail=detail)
            committed = self.world.transition(t, lambda d=decision: d.ok)
            if committed:
                self.track(bel, label)
            step = Step(label=label, kind=kind, part=pid,
                        outcome="committed" if committed else "rolled_back",
                        failed=decision.failed, fault=str(fault) if fault else None, note=note)
            self.world.set_candidates(upd.candidates)  # observation memory, not an effect
            self.last_observed = {o.id: o for o in observed.objects}
            if committed:
                if kind == "place":
                    self.placed.add(pid)
                    self.retries.pop(pid, None)
                for f, t_det in list(self.pending_detect.items()):
                    if f == pid:
                        if kind == "place":
                            self.recovery_times.append(self.sim.time - t_det)
                            del self.pending_detect[f]
            # diagnosis; a recovery is the actions to queue, or why the run gives up (str)
            res: list[tuple[str, str, str, int | None]] | str = []
            if self.mode == "diagnose":
                dg = diagnose(self.cell, expected, observed)
                if not committed or dg.delta.significant():
                    step.causes = [f.to_json() for f in dg.findings]
                    step.ambiguous = dg.status == "ambiguous"
                    if fault is not None and str(fault) not in self.first_diag:
                        self.first_diag[str(fault)] = dg.findings[0].cause if dg.findings \
                            else None
                    self.world.record("diagnosis", pid, dg.status,
                                      cause=(f"{dg.findings[0].cause}"
                                             f"({', '.join(dg.findings[0].args)})"
                                             if dg.findings else None),
                                      recovery=dg.findings[0].recovery if dg.findings else None,
                                      detail={"delta": dg.delta.to_json(),
                                              "causes": step.causes})
                    if dg.findings:
                        top = dg.findings[0]
                        step.recovery = top.recovery
                        res = self.recover(top.recovery, top.args, kind, pid, label, sub,
                                           committed)
                    elif not committed:
                        step.recovery = "retry"
                        res = self.generic(kind, pid, label, sub, perceive=True)
                    if not committed:
                        self.pending_detect.setdefault(pid, t0)
            elif not committed:
                step.recovery = "restart" if self.mode == "nodiag" else "retry as is"
                self.pending_detect.setdefault(pid, t0)
                if self.mode == "nodiag":
                    res = self.generic(kind, pid, label, sub, perceive=True, restart=True)
                else:
                    res = self.generic(kind, pid, label, sub, perceive=False)
            step.sim_s = self.sim.time - t0
            self.steps.append(step)
            if isinstance(res, str):
                return False, res
            redo = {a[2] for a in res if a[1] == "place"}
            queue = [a for a in queue if a[2] not in redo]
            held = self.sim.held
            if held is not None and committed and kind == "pick" and held not in redo:
                # finish the sub-task in hand first: the recovery goes after its place
                k = next((i for i, a in enumerate(queue) if a[1] == "place" and a[2] == held),
                         -1)
                queue[k + 1:k + 1] = res
            else:
                queue[:0] = res
        return True, "every action committed"

    def check_trace(self, pid: str) -> Any:
        """Validate the trace of placing pid: its supports stand as the layout has them."""
        from cellspec.world.trace import validate_trace

        if self.target_rels is None:
            at_target = tuple(Entity(p, self.type[p], self.target[p], self.size[p])
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

    def _sub(self, sub: dict[str, int], label: str) -> str:
        base = label.split(".")[0]
        sub[base] = sub.get(base, 0) + 1
        return f"{base}.{sub[base]}"

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

    def _bump(self, pid: str) -> bool:
        self.retries[pid] = self.retries.get(pid, 0) + 1
        return self.retries[pid] <= RETRY_LIMIT

    def _pick_place(self, sub: dict[str, int], label: str, pid: str
                    ) -> list[tuple[str, str, str, int | None]]:
        return [(self._sub(sub, label), "pick", pid, None),
                (self._sub(sub, label), "place", pid, None)]

    def generic(self, kind: str, pid: str, label: str, sub: dict[str, int], perceive: bool,
                restart: bool = False) -> list | str:
        if not self._bump(pid):
            return f"gave up on {pid} after {RETRY_LIMIT} retries"
        if perceive:
            self.perceive(label)
        if restart or (kind == "place" and self.sim.held != pid and perceive):
            if self.sim.held is not None:
                self.sim.release()
            return self._pick_place(sub, label, pid)
        return [(self._sub(sub, label), kind, pid, None)]

    def recover(self, recovery: str, args: tuple[str, ...], kind: str, pid: str, label: str,
                sub: dict[str, int], committed: bool) -> list | str:
        obj = args[0] if args else pid
        if recovery == "stop":
            return f"stopped: recovery 'stop' for {obj}"
        if not self._bump(obj if obj in self.target else pid):
            return f"gave up on {obj} after {RETRY_LIMIT} recoveries"
        self.perceive(label)
        out: list[tuple[str, str, str, int | None]] = []
        if recovery in ("regrasp", "regrasp_other_axis"):
            if self.sim.held is not None:
                self.sim.release()
            out = self._pick_place(sub, label, obj)
        elif recovery == "retarget":
            if obj in self.placed:
                self.placed.discard(obj)
                self.pending_detect.setdefault(obj, self.sim.time)
                out = self._pick_place(sub, label, obj)
        elif recovery == "replan_keepout":
            e = self.world.entity(obj) or self.last_observed.get(obj)
            if e is not None:
                c, s = np.array(e.pos), np.array(e.size) / 2 + 0.01
                self.keepouts.append((c - s, c + s))
            if not committed:
                if kind == "pick":
                    out = [(self._sub(sub, label), "pick", pid, None)]
                elif self.sim.held == pid:
                    # lift straight up over the keep-out, then place again
                    self.sim.hold_here()
                    g = self.sim.goal
                    self.sim.move([g[0], g[1], self.transport_z()])
                    out = [(self._sub(sub, label), "place", pid, None)]
                else:
                    out = self._pick_place(sub, label, pid)
        elif not committed:  # reperceive: then try the action again
            out = [(self._sub(sub, label), kind, pid, None)]
        return out

    def final(self) -> float:
        err = 0.0
        for p in self.order:
            err = max(err, float(np.linalg.norm(self.sim.pose(p) - np.array(self.target[p]))))
        return err


def plan_order(cell: Cell, layout: Layout) -> tuple[str, ...]:
    """The placement order: the layout's own, else the CP-SAT sequencer's (re-verified)."""
    if layout.order:
        return tuple(layout.order)
    from cellspec.solver.cpsat.sequence import plan

    r = plan(cell, layout)
    if r.status != "optimal":
        raise CellspecError(f"{layout.path}: no assembly order: {r.reason or r.status} "
                            "(see `cellspec plan`)")
    return tuple(s.part for s in r.steps)


def make_arm(cell: Cell, engine: str) -> Any:
    """The arm driver for engine arm/auto, or None (gripper; auto when the twin is missing)."""
    if engine == "gripper":
        return None
    if engine not in ENGINES:
        raise CellspecError(f"unknown engine '{engine}' (engines: {', '.join(ENGINES)})")
    try:
        from cellspec.world.arm import ArmDriver

        return ArmDriver(cell, PAD[2] / 2)
    except ImportError:
        if engine == "arm":
            raise CellspecError("engine arm: the twin (cellspec.robots) is not available") \
                from None
        return None


def run_layout(cell: Cell, layout: Layout, world_path: str | Path | None = None, *,
               faults: tuple[Fault, ...] = (), seed: int = 0, noise: float = 0.0005,
               mode: str = "diagnose", order: tuple[str, ...] | None = None,
               engine: str = "auto", arm: Any = None, occlusion: float = 0.0,
               verify: bool = True) -> RunResult:
    """Build the layout in the simulation with the world model in the loop (see module doc).

    ``engine``: ``arm`` (the twin's robot arm drives the gripper pad), ``gripper`` (a
    kinematic gripper body on straight paths) or ``auto`` (arm when the twin is available).
    ``arm``: an ArmDriver to reuse (benchmarks), else one is made and closed here.
    ``occlusion``: the seeded probability that an object other than the action's part and
    the held one is hidden from an observation. ``verify``: check the layout against the
    cell's rules first and refuse (a result with ``refused``, nothing built, no database
    written) unless the verdict is pass."""
    if mode not in MODES:
        raise CellspecError(f"unknown mode '{mode}' (modes: {', '.join(MODES)})")
    if not (math.isfinite(noise) and 0 <= noise <= 0.01):
        raise CellspecError("--noise must be between 0 and 0.01 m")
    for k in ("pick", "place"):
        commit_rule(cell, k)
    if not cell.world.diagnoses and mode == "diagnose":
        raise CellspecError(f"{cell.path}: the cell has no diagnose rules: `import diagnosis`")
    if not (math.isfinite(occlusion) and 0 <= occlusion <= 0.9):
        raise CellspecError("--occlusion must be a probability between 0 and 0.9")
    if len(layout) == 0:
        raise CellspecError(f"{layout.path}: the layout has no parts")
    check_faults(faults, cell, layout)
    if verify:
        refusal = verify_layout(cell, layout)
        if refusal is not None:
            return RunResult(steps=[], success=False, reason=refusal, mode=mode,
                             faults=faults, planned=2 * len(layout), sim_seconds=0.0,
                             wall_seconds=0.0, max_error=float("nan"), first_diagnosis={},
                             recovery_times=[], skipped_faults=[], refused=True)
    order = order or plan_order(cell, layout)
    t_wall = time.perf_counter()
    own_arm = arm is None
    if own_arm:  # before the database: a cell the arm engine cannot drive creates nothing
        arm = make_arm(cell, engine)
    tmp = None
    created = False
    try:
        if world_path is None:
            tmp = tempfile.TemporaryDirectory(prefix="cellspec-world-")
            world_path = Path(tmp.name) / "world.db"
        if Path(world_path).exists() and Path(world_path).stat().st_size > 0:
            w = open_world(world_path)
            try:
                owner = w.meta("cell")
                if owner and owner != cell.name:
                    raise CellspecError(f"{world_path}: the world database belongs to cell "
                                        f"'{owner}', not '{cell.name}'; give a new file "
                                        "(nothing was changed)")
                if w.history():
                    raise CellspecError(f"{world_path}: the world database already holds a "
                                        "run; give a new file (nothing was changed)")
                w.check_writable()
            except BaseException:
                w.close()
                raise
        else:
            w = open_world(world_path, create=True, cell=cell.name)
            created = True
    except BaseException:
        if own_arm and arm is not None:
            arm.close()
        if tmp is not None:
            tmp.cleanup()
        raise
    try:
        r = _Runner(cell, layout, w, faults, seed, noise, mode, order, occlusion)
    except BaseException:
        w.close()
        if own_arm and arm is not None:
            arm.close()
        if created:  # nothing ran: leave no half-made database behind
            for suffix in ("", "-wal", "-shm"):
                Path(str(world_path) + suffix).unlink(missing_ok=True)
        if tmp is not None:
            tmp.cleanup()
        raise
    if arm is not None:
        arm.q = arm.twin.home(arm.robot)
        arm.reset(r.sim.goal)
        r.sim.driver = arm
    try:
        r.init_world()
        ok, reason = r.run()
        err = r.final()
        if ok and err > SUCCESS_M:
            ok, reason = False, f"a part is {err * 1000:.1f} mm off its target"
        w.record("end", "*", "success" if ok else "failure", detail={"reason": reason})
    finally:
        r.sim.close()
        w.close()
        if own_arm and arm is not None:
            arm.close()
        if tmp is not None:
            tmp.cleanup()
    eng, note = (ENGINE, ENGINE_NOTE) if arm is None else ("arm", arm_note(arm.robot))
    return RunResult(engine=eng, note=note, steps=r.steps, success=ok, reason=reason,
                     mode=mode, faults=faults,
                     planned=2 * len(order), sim_seconds=r.sim.time,
                     wall_seconds=time.perf_counter() - t_wall, max_error=err,
                     first_diagnosis=r.first_diag, recovery_times=r.recovery_times,
                     skipped_faults=r.skipped, lifecycle=r.lifecycle,
                     place_corrections=r.corrections)
