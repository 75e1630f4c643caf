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

The loop lives here; its parts are modules of their own: the faults (:mod:`.faults`), the
pick and place actions (:mod:`.actions`), the sensor and the states around an action
(:mod:`.perception`), the recoveries (:mod:`.recovery`) and the results (:mod:`.results`).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.core import progress
from cellspec.core.errors import CellspecError
from cellspec.core.status import Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots.tasks import TURN_TOL_DEG, turn_error_deg
from cellspec.solver.cpsat.sequence import plan
from cellspec.solver.verify import check
from cellspec.world import association as assoc
from cellspec.world.actions import Actions, PathBox
from cellspec.world.db import Entity, Transition, World, WorldRelation, open_world, vec3
from cellspec.world.discrepancy import State, cell_surfaces, derive_relations, diagnose
from cellspec.world.faults import (
    FAULTS,
    Fault,
    FaultInjection,
    check_faults,
    parse_faults,
    part_masses,
    part_poses,
    part_sizes,
    stacked_on,
)
from cellspec.world.perception import Perception
from cellspec.world.recovery import RETRY_LIMIT, Action, Recovery
from cellspec.world.results import ENGINE, ENGINE_NOTE, RunResult, RunStep, arm_note
from cellspec.world.rules import commit_rule, decide_commit
from cellspec.world.sim import PAD, Sim

if TYPE_CHECKING:
    from cellspec.world.arm import ArmDriver

__all__ = ["ENGINE", "ENGINE_NOTE", "ENGINES", "FAULTS", "MODES", "RETRY_LIMIT", "SUCCESS_M",
           "Fault", "RunResult", "RunStep", "arm_note", "check_faults", "make_arm",
           "parse_faults", "plan_order", "run_layout", "verify_layout"]

ENGINES = ("auto", "arm", "gripper")
MODES = ("diagnose", "nodiag", "blind")
SUCCESS_M = 0.005  # a part counts as built when its true centre is this close to its target


def verify_layout(cell: Cell, layout: Layout) -> str | None:
    """None when the layout passes the cell's rules, else why the run refuses to build it."""
    v = check(cell, layout)
    if v.verdict == Status.PASS:
        return None
    if v.verdict == Status.UNKNOWN:
        return (f"refused: the layout could not be verified ({v.reason}); nothing was built "
                "(see `cellspec check`)")
    shown = "; ".join(f"{x.rule}: {x.message}" for x in v.violations[:3])
    more = f" (and {len(v.violations) - 3} more)" if len(v.violations) > 3 else ""
    return (f"refused: the layout fails its rules ({shown}{more}); nothing was built "
            "(see `cellspec check`)")


class _Runner(FaultInjection, Actions, Perception, Recovery):
    """One run: the simulation, the world model and the loop's bookkeeping; the faults,
    actions, perception and recoveries are mixins (modules of their own)."""

    def __init__(self, cell: Cell, layout: Layout, world: World, faults: tuple[Fault, ...],
                 seed: int, noise: float, mode: str, order: tuple[str, ...],
                 occlusion: float = 0.0, observer: Any = None):
        """The simulation with the parts at the feeder; seeded streams for the sensor noise
        (``rng``), the faults (``frng``) and the occlusions (``orng``)."""
        self.cell, self.layout, self.world = cell, layout, world
        self.observer = observer
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
        self.size = part_sizes(cell, layout)
        self.type = dict(zip(layout.ids, layout.types, strict=True))
        self.yaw, self.shape = part_poses(cell, layout)  # docs/shapes.md
        self.target = {pid: vec3(layout.pos[i])
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
        """The loop's bookkeeping, and the parts in rows at the feeder in front of the table."""
        self.keepouts: list[tuple[np.ndarray, np.ndarray]] = []
        self.steps: list[RunStep] = []
        self.placed: set[str] = set()
        self.first_diag: dict[str, str | None] = {}
        self.pending_detect: dict[str, float] = {}
        self.recovery_times: list[float] = []
        self.skipped: list[str] = []
        self.retries: dict[str, int] = {}
        self.last_observed: dict[str, Entity] = {}
        self.target_rels: list[WorldRelation] | None = None
        # feeder: parts wait in rows in front of the table (y < workspace)
        ws = cell.workspace
        x0, y0 = float(ws.lo[0]) + 0.05, float(ws.lo[1]) - 0.1
        self.start: dict[str, tuple[float, float, float]] = {}
        for k, pid in enumerate(order):
            sx, sy, sz = self.size[pid]
            self.start[pid] = (x0 + (k % 6) * 0.08, y0 - (k // 6) * 0.08,
                               self.table_z + sz / 2)
        masses = part_masses(cell, layout)
        for pid in order:
            self.sim.add_box(pid, self.type[pid], self.size[pid], self.start[pid], masses[pid],
                             yaw=self.yaw[pid], shape=self.shape[pid])  # at its target yaw
        self.sim.step(48)
        tops = [self.target[p][2] + self.size[p][2] / 2 for p in order]
        hmax = max(self.size[p][2] for p in order)
        self.z_safe = max(tops) + hmax + PAD[2] + 0.04

    def init_world(self) -> None:
        """The first transition: the parts as spawned, and the task graph (pick, place)."""
        ents = [Entity(id=pid, type=self.type[pid], pos=vec3(self.sim.pose(pid)),
                       size=self.size[pid], yaw=self.yaw[pid], shape=self.shape[pid])
                for pid in self.order]
        rels = list(derive_relations(tuple(ents), self.surfaces, None))
        nodes: list[dict[str, Any]] = []
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

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> tuple[bool, str]:
        """Execute the planned actions, each observed, committed or rolled back, diagnosed
        and recovered; (every action committed?, why)."""
        queue: list[Action] = []
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
            if self.observer is not None:
                self.observer.before(label, kind, pid, self.world)
            fault, note = self._inject(self.faults.get(nominal) if nominal is not None
                                       else None, pid)
            slip = fault is not None and fault.kind == "slip"
            obst = fault is not None and fault.kind == "obstacle"
            self.obstacle_spawned = False
            bel = self.belief()
            t0 = self.sim.time
            if kind == "place":  # the action's reasoning trace, validated before it moves
                rejected = self._gate_trace(label, pid)
                if rejected is not None:
                    return False, rejected
            if kind == "pick":
                measures, exp_cs, path, pred = self.do_pick(pid, bel[pid], slip, obst)
            else:
                measures, exp_cs, path, pred, _done = self.do_place(pid, bel[pid], slip, obst)
            if obst and not self.obstacle_spawned:
                self.skipped.append(str(fault))
                note = f"{fault}: no free spot on the path (skipped)"
                fault = None
            step, expected, observed = self._observe_and_commit(
                label, kind, pid, bel, measures, exp_cs, path, pred, fault, note)
            committed = step.outcome == "committed"
            res = self._respond(step, expected, observed, fault, label, sub, t0)
            step.sim_s = self.sim.time - t0
            self.steps.append(step)
            if isinstance(res, str):
                return False, res
            queue = self._requeue(queue, res, committed, kind)
        return True, "every action committed"

    def _inject(self, fault: Fault | None, pid: str) -> tuple[Fault | None, str | None]:
        """Apply a ``moved`` or ``support`` fault before the action; (the fault still in
        effect, or None when it was skipped; the step's note)."""
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
            sup = stacked_on(self.layout, self.size).get(pid)
            moved = self.apply_moved(sup) if sup is not None else None
            if moved is None:
                self.skipped.append(str(fault))
                note = f"{fault}: the support of {pid} is not placed or cannot move (skipped)"
                fault = None
            else:
                note = f"{fault}: {moved}, the support of {pid}, displaced"
        return fault, note

    def _observe_and_commit(self, label: str, kind: str, pid: str, bel: dict[str, Entity],
                            measures: dict, exp_cs: tuple[str, str | None], path: PathBox,
                            pred: list[Entity], fault: Fault | None, note: str | None
                            ) -> tuple[RunStep, State, State]:
        """Observe, associate, decide the commit condition and write the observed state in
        one transaction that commits only when it holds; (the step, expected, observed)."""
        obs = self.observe(keep=pid)
        predicted = [e for e in bel.values() if e.id != pid] + pred
        predicted.sort(key=lambda e: e.id)
        cands = self.world.candidates()
        upd = assoc.update(predicted, obs, cands)
        observed = self.observed_state(upd, obs, predicted, exp_cs, {})
        o = next((x for x in observed.objects if x.id == pid), None)
        if kind == "pick":
            want = self.sim.pad_pos() - self.hold_offset(pid)
            measures["track_error"] = float(np.linalg.norm(np.subtract(o.pos, want))) \
                if o else 1.0
        elif "contact_force" in measures:
            measures["target_error"] = (float(np.linalg.norm(
                np.subtract(o.pos, self.target[pid]))) if o else 1.0)
        decision = decide_commit(self.cell, kind, measures)
        expected = self.expected_state(predicted, exp_cs, pid, path)
        observed = replace(observed, measures={k: v for k, v in measures.items()
                                               if not isinstance(v, bool)})
        rels = [r for r in observed.relations if not r.a.startswith("new")
                and not r.b.startswith("new")] + \
               [r for r in observed.relations if r.a in upd.created or r.b in upd.created]
        detail = {"measures": {k: (round(v, 4) if isinstance(v, float) else v)
                               for k, v in sorted(measures.items())},
                  "failed": list(decision.failed)}
        t = Transition(action=kind, part=pid, upserts=upd.entities, relations=rels,
                       cs=observed.cs, task_status=(f"{kind}:{pid}", "done"), detail=detail)
        committed = self.world.transition(t, lambda: decision.ok)
        if committed:
            self.track(bel, label)
        step = RunStep(label=label, kind=kind, part=pid,
                    outcome="committed" if committed else "rolled_back",
                    failed=decision.failed, fault=str(fault) if fault else None, note=note)
        self.world.set_candidates(upd.candidates)  # observation memory, not an effect
        self.last_observed = {o.id: o for o in observed.objects}
        if committed:
            if kind == "place":
                self.placed.add(pid)
                self.retries.pop(pid, None)
            if kind == "place" and pid in self.pending_detect:
                self.recovery_times.append(self.sim.time - self.pending_detect.pop(pid))
        return step, expected, observed

    def _respond(self, step: RunStep, expected: State, observed: State, fault: Fault | None,
                 label: str, sub: dict[str, int], t0: float) -> list[Action] | str:
        """After the commit decision: the actions to queue (a recovery), or why the run
        gives up. ``diagnose`` diagnoses Δ with the cell's rules; the other modes only
        restart (``nodiag``) or retry as is (``blind``) an action that rolled back."""
        kind, pid = step.kind, step.part
        committed = step.outcome == "committed"
        if self.mode == "diagnose":
            return self._diagnose(step, expected, observed, fault, label, sub, t0)
        if committed:
            return []
        step.recovery = "restart" if self.mode == "nodiag" else "retry as is"
        self.pending_detect.setdefault(pid, t0)
        if self.mode == "nodiag":
            return self.generic(kind, pid, label, sub, perceive=True, restart=True)
        return self.generic(kind, pid, label, sub, perceive=False)

    def _diagnose(self, step: RunStep, expected: State, observed: State, fault: Fault | None,
                  label: str, sub: dict[str, int], t0: float) -> list[Action] | str:
        """Diagnose Δ (when the action rolled back or Δ is significant), record the
        diagnosis and apply the top-ranked cause's recovery."""
        kind, pid = step.kind, step.part
        committed = step.outcome == "committed"
        dg = diagnose(self.cell, expected, observed)
        if self.observer is not None:
            self.observer.diagnosed(label, kind, pid, dg)
        if committed and not dg.delta.significant():
            return []
        step.causes = [f.to_json() for f in dg.findings]
        step.ambiguous = dg.status == "ambiguous"
        top = dg.findings[0] if dg.findings else None
        if fault is not None and str(fault) not in self.first_diag:
            self.first_diag[str(fault)] = top.cause if top else None
        self.world.record("diagnosis", pid, dg.status,
                          cause=f"{top.cause}({', '.join(top.args)})" if top else None,
                          recovery=top.recovery if top else None,
                          detail={"delta": dg.delta.to_json(), "causes": step.causes})
        res: list[Action] | str = []
        if top is not None:
            step.recovery = top.recovery
            res = self.recover(top.recovery, top.args, kind, pid, label, sub, committed)
        elif not committed:
            step.recovery = "retry"
            res = self.generic(kind, pid, label, sub, perceive=True)
        if not committed:
            self.pending_detect.setdefault(pid, t0)
        return res

    def _requeue(self, queue: list[Action], res: list[Action], committed: bool, kind: str
                 ) -> list[Action]:
        """The queue with the recovery's actions: a part to place again leaves the queue
        and re-enters with them, after the sub-task in hand when a pick just committed."""
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
        return queue

    def final(self) -> float:
        """The largest distance of a part's true centre from its target (m); ``turn_err``:
        the largest turn (degrees) of a turned or round part from its planned pose."""
        err = 0.0
        for p in self.order:
            err = max(err, float(np.linalg.norm(self.sim.pose(p) - np.array(self.target[p]))))
        self.turn_err = max([turn_error_deg(self.sim.quat(p), self.yaw[p], self.shape[p])
                             for p in self.order if self.yaw[p] or self.shape[p] != "box"] or [0])
        return err


def plan_order(cell: Cell, layout: Layout) -> tuple[str, ...]:
    """The placement order: the layout's own, else the CP-SAT sequencer's (re-verified)."""
    if layout.order:
        return tuple(layout.order)
    r = plan(cell, layout)
    if r.status != Status.OPTIMAL:
        raise CellspecError(f"{layout.path}: no assembly order: {r.reason or r.status} "
                            "(see `cellspec plan`)")
    return tuple(s.part for s in r.steps)


def make_arm(cell: Cell, engine: str) -> ArmDriver | None:
    """The arm driver for engine arm/auto, or None (gripper; auto when the twin is missing)."""
    if engine == "gripper":
        return None
    if engine not in ENGINES:
        raise CellspecError(f"unknown engine '{engine}' (engines: {', '.join(ENGINES)})")
    try:
        from cellspec.world.arm import ArmDriver  # lazy: the twin is optional (auto falls back)

        return ArmDriver(cell, PAD[2] / 2)
    except ImportError:
        if engine == "arm":
            raise CellspecError("engine arm: the twin (cellspec.robots) is not available") \
                from None
        return None


def _validate(cell: Cell, layout: Layout, faults: tuple[Fault, ...], mode: str, noise: float,
              occlusion: float) -> None:
    """Bad input (CellspecError) unless the run's arguments, the cell and the layout fit."""
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


def _open_world(cell: Cell, world_path: str | Path | None
                ) -> tuple[World, bool, Any, str | Path]:
    """The world database to run in: (world, created here?, the temporary directory or
    None, its path). An existing one must be this cell's, empty of runs and writable."""
    tmp = None
    token = f"{os.getpid()}-{uuid.uuid4().hex}"
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
                w.claim_run(token)  # atomic: of two runs on one database, one wins
            except BaseException:
                w.close()
                raise
            return w, False, tmp, world_path
        return (open_world(world_path, create=True, cell=cell.name, run=token), True, tmp,
                world_path)
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise


def run_layout(cell: Cell, layout: Layout, world_path: str | Path | None = None, *,
               faults: tuple[Fault, ...] = (), seed: int = 0, noise: float = 0.0005,
               mode: str = "diagnose", order: tuple[str, ...] | None = None,
               engine: str = "auto", arm: ArmDriver | None = None, occlusion: float = 0.0,
               verify: bool = True, observer: Any = None) -> RunResult:
    """Build the layout in the simulation with the world model in the loop (see module doc).

    ``engine``: ``arm`` (the twin's robot arm drives the gripper pad), ``gripper`` (a
    kinematic gripper body on straight paths) or ``auto`` (arm when the twin is available).
    ``arm``: an ArmDriver to reuse (benchmarks), else one is made and closed here.
    ``occlusion``: the seeded probability that an object other than the action's part and
    the held one is hidden from an observation. ``verify``: check the layout against the
    cell's rules first and refuse (a result with ``refused``, nothing built, no database
    written) unless the verdict is pass. ``observer`` (benchmarks): an object whose
    ``before(label, kind, part, world)`` is called before each action and
    ``diagnosed(label, kind, part, diagnosis)`` after each diagnosis; it must not write."""
    _validate(cell, layout, faults, mode, noise, occlusion)
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

    def close_arm() -> None:
        if own_arm and arm is not None:
            arm.close()

    try:
        w, created, tmp, world_path = _open_world(cell, world_path)
    except BaseException:
        close_arm()
        raise
    try:
        r = _Runner(cell, layout, w, faults, seed, noise, mode, order, occlusion, observer)
    except BaseException:
        if not created:  # nothing ran: the database may be run into again
            with contextlib.suppress(sqlite3.Error, CellspecError):
                w.release_run()
        w.close()
        close_arm()
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
        elif ok and r.turn_err > TURN_TOL_DEG:
            ok, reason = False, f"a part is turned {r.turn_err:.1f} degrees from its target"
        w.record("end", "*", "success" if ok else "failure", detail={"reason": reason})
    finally:
        r.sim.close()
        w.close()
        close_arm()
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
