"""Recoveries of the run loop: what to queue after a failed or diagnosed action (the
recovery of the top-ranked cause, or a generic retry or restart when there is no
diagnosis), with a retry budget per part.

``Recovery`` is a mixin of the run loop's ``_Runner`` (:mod:`cellspec.world.run`): it uses
the runner's simulation, world model, keep-outs, placed set and ``perceive``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cellspec.world.db import Entity, World
from cellspec.world.sim import Sim

RETRY_LIMIT = 3  # recoveries per part before giving up

Action = tuple[str, str, str, int | None]  # (label, kind, part, nominal action number)


class Recovery:
    """Turn a recovery name into the actions to queue, or why the run gives up."""

    # the runner's state this mixin uses
    world: World
    sim: Sim
    placed: set[str]
    target: dict[str, tuple[float, float, float]]
    keepouts: list[tuple[np.ndarray, np.ndarray]]
    last_observed: dict[str, Entity]
    pending_detect: dict[str, float]
    retries: dict[str, int]

    if TYPE_CHECKING:  # from Perception and Actions
        def perceive(self, label: str) -> None: ...
        def transport_z(self) -> float: ...

    def _sub(self, sub: dict[str, int], label: str) -> str:
        base = label.split(".")[0]
        sub[base] = sub.get(base, 0) + 1
        return f"{base}.{sub[base]}"

    def _bump(self, pid: str) -> bool:
        self.retries[pid] = self.retries.get(pid, 0) + 1
        return self.retries[pid] <= RETRY_LIMIT

    def _pick_place(self, sub: dict[str, int], label: str, pid: str
                    ) -> list[Action]:
        return [(self._sub(sub, label), "pick", pid, None),
                (self._sub(sub, label), "place", pid, None)]

    def generic(self, kind: str, pid: str, label: str, sub: dict[str, int], perceive: bool,
                restart: bool = False) -> list[Action] | str:
        """No diagnosis: retry the action (after a re-perception when ``perceive``), or
        restart the part's pick and place; why the run gives up past the retry budget."""
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
                sub: dict[str, int], committed: bool) -> list[Action] | str:
        """The actions that apply the diagnosed ``recovery`` to its object, or why the run
        gives up (a ``stop`` recovery, or the retry budget spent)."""
        obj = args[0] if args else pid
        if recovery == "stop":
            return f"stopped: recovery 'stop' for {obj}"
        if not self._bump(obj if obj in self.target else pid):
            return f"gave up on {obj} after {RETRY_LIMIT} recoveries"
        self.perceive(label)
        out: list[Action] = []
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
