"""The two actions of a closed-loop run, pick and place, executed in the simulation with the
measures their commit conditions need; the place is guarded (compliant): a contact above
the cell's threshold before the part is seated makes it back off and lower again.

``Actions`` is a mixin of the run loop's ``_Runner`` (:mod:`cellspec.world.run`): it uses the
runner's simulation (``sim``), the parts' targets and sizes, the keep-outs, the transport
height ``z_safe``, the supports at the targets and its seeded noise stream ``rng``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from cellspec.dsl.model import Cell
from cellspec.world.db import Entity, WorldRelation, vec3
from cellspec.world.rules import force_thresholds
from cellspec.world.sim import PAD, Motion, Sim

# the box a carried part sweeps, (lo, hi) corners in metres
PathBox = tuple[tuple[float, ...], tuple[float, ...]]

GUARD_TRIES = 4  # corrections of a guarded (compliant) place before it fails
GUARD_SEATED_M = 0.002  # within this of the seated height, contact is the seating itself
GUARD_LIFT_M = 0.003  # lift before moving sideways out of a contact
GUARD_MARGIN_M = 0.0005  # clearance added to the measured overlap


class Actions:
    """Pick, place and the motion helpers they share (a mixin of ``_Runner``)."""

    # the runner's state this mixin uses
    cell: Cell
    sim: Sim
    rng: np.random.Generator
    noise: float
    size: dict[str, tuple[float, float, float]]
    target: dict[str, tuple[float, float, float]]
    target_rels: list[WorldRelation] | None
    keepouts: list[tuple[np.ndarray, np.ndarray]]
    table_z: float
    z_safe: float
    corrections: int
    obstacle_spawned: bool

    if TYPE_CHECKING:  # from FaultInjection
        def spawn_obstacle(self, a: np.ndarray, b: np.ndarray, z: float) -> bool: ...

    def transport_z(self) -> float:
        """The transport height: above every part's target and every keep-out."""
        z = self.z_safe
        for _lo, hi in self.keepouts:
            hmax = max(s[2] for s in self.size.values())
            z = max(z, float(hi[2]) + hmax + PAD[2] + 0.03)
        return z

    def hold_offset(self, pid: str) -> np.ndarray:
        """The held part's centre relative to the pad."""
        return np.array([0.0, 0.0, PAD[2] / 2 + self.size[pid][2] / 2])

    def path_box(self, a: np.ndarray, b: np.ndarray, pid: str, z: float
                 ) -> PathBox:
        """The box swept by the part carried from a to b at height z (down to the table)."""
        h = np.array(self.sim.extent(pid)) / 2 + 0.01
        lo = np.minimum(a, b) - h
        hi = np.maximum(a, b) + h
        lo[2] = self.table_z
        hi[2] = z + PAD[2]
        return (tuple(map(float, lo)), tuple(map(float, hi)))

    def do_pick(self, pid: str, bel: Entity, slip: bool, obstacle: bool
                ) -> tuple[dict, tuple[str, str | None], PathBox, list[Entity]]:
        """Pick pid (believed at ``bel``): its measures, the expected gripper state, the path
        box and the predicted entity."""
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
        exp_pos = vec3(sim.pad_pos() - self.hold_offset(pid))
        return measures, ("holding", pid), path, [replace(bel, pos=exp_pos)]

    def do_place(self, pid: str, bel: Entity, slip: bool, obstacle: bool
                 ) -> tuple[dict, tuple[str, str | None], PathBox, list[Entity], bool]:
        """Carry pid to its target and place it (guarded): measures, expected gripper state,
        path box, predicted entity and whether the part was released."""
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
        legs: list[list[float] | np.ndarray] = [[start[0], start[1], z], above]
        for k, goal in enumerate(legs):
            m = sim.move(goal, slip_at=0.3 if slip and k == 1 else None)
            ok &= m.reached
            ext = max(ext, m.ext_force)
            if not m.reached:
                break
        held = sim.held == pid
        if not ok or not held:  # transport failed: stop here, the place cannot commit
            exp = vec3(sim.pad_pos() - self.hold_offset(pid))
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
            exp = vec3(sim.pad_pos() - self.hold_offset(pid))
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
        return measures, ("idle", None), path, [replace(bel, pos=vec3(tgt))], True

    def guarded_descent(self, pid: str, down: np.ndarray) -> Motion:
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
        h = np.array(self.sim.extent(pid)) / 2  # a turned part: its enclosing box
        total = np.zeros(2)
        for n in who:
            oc = self.sim.pose(n) + noise()
            oh = np.array(self.sim.extent(n)) / 2
            over = (h + oh)[:2] - np.abs(c - oc)[:2]  # overlap per axis (>0: overlapping)
            if np.any(over <= -0.002):
                continue
            ax = int(np.argmin(over))
            d = np.zeros(2)
            d[ax] = np.sign(c[ax] - oc[ax]) or 1.0
            total += d * (max(over[ax], 0.0) + GUARD_MARGIN_M)
        return total if np.any(total) else None

    def _contact_threshold(self) -> float:
        """The cell's contact force threshold (N)."""
        return float(force_thresholds(self.cell)["contact"][0])
