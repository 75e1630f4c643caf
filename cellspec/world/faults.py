"""Induced faults of a closed-loop run: parsing and checking ``--faults``, and injecting
them into the simulation (an obstacle on the path, a placed part or a support displaced).

``FaultInjection`` is a mixin of the run loop's ``_Runner`` (:mod:`cellspec.world.run`): it
uses the runner's simulation (``sim``), the parts' targets and sizes, the order and the
placed set, and its own seeded stream ``frng``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from cellspec.core.errors import CellspecError
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots.tasks import part_shape, part_size
from cellspec.world.sim import Sim

FAULTS = ("slip", "obstacle", "moved", "support")


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
    stacked = stacked_on(layout, part_sizes(cell, layout))
    for f in sups:
        if f.at % 2 == 0:
            raise CellspecError(f"--faults: {f}: support@N displaces the support of the part "
                                "picked at action N; N must be a pick (odd)")
        pid = order[(f.at - 1) // 2]
        if pid not in stacked:
            raise CellspecError(f"--faults: {f}: the part picked at action {f.at} ({pid}) "
                                "stands on no other part")


def stacked_on(layout: Layout, sizes: dict[str, tuple[float, float, float]]) -> dict[str, str]:
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


def part_sizes(cell: Cell, layout: Layout) -> dict[str, tuple[float, float, float]]:
    """Each part's size (its own, else its type's)."""
    return {pid: part_size(cell, layout, i) for i, pid in enumerate(layout.ids)}


def part_poses(cell: Cell, layout: Layout) -> tuple[dict[str, float], dict[str, str]]:
    """Each part's yaw (degrees) and shape (box or cylinder), docs/shapes.md."""
    yaw, shape = {}, {}
    for i, pid in enumerate(layout.ids):
        yaw[pid], shape[pid] = part_shape(cell, layout, i)
    return yaw, shape


def part_masses(cell: Cell, layout: Layout) -> dict[str, float]:
    """Each part's mass (its type's, else 0.1 kg)."""
    out = {}
    for i, pid in enumerate(layout.ids):
        m = cell.part_types[layout.types[i]].mass
        out[pid] = float(m) if m is not None else 0.1
    return out


def boxes_overlap(lo1: np.ndarray, hi1: np.ndarray, lo2: np.ndarray, hi2: np.ndarray,
             margin: float) -> bool:
    """The boxes overlap by more than ``-margin`` on every axis."""
    return bool(np.all(np.minimum(hi1, hi2) - np.maximum(lo1, lo2) > -margin))


class FaultInjection:
    """The faults the run loop injects into the simulation (a mixin of ``_Runner``)."""

    # the runner's state this mixin uses
    cell: Cell
    sim: Sim
    frng: np.random.Generator
    order: tuple[str, ...]
    placed: set[str]
    size: dict[str, tuple[float, float, float]]
    target: dict[str, tuple[float, float, float]]
    table_z: float

    def _clash(self, lo: np.ndarray, hi: np.ndarray, skip: str | None = None) -> bool:
        """The box comes within 1.5 cm of a body (other than ``skip``) or of a part's target."""
        if any(boxes_overlap(lo, hi, l2, h2, 0.015) for n, l2, h2 in self.sim.boxes() if n != skip):
            return True
        return any(boxes_overlap(lo, hi, np.array(self.target[q]) - np.array(self.size[q]) / 2,
                            np.array(self.target[q]) + np.array(self.size[q]) / 2, 0.015)
                   for q in self.order if q != skip)

    def spawn_obstacle(self, a: np.ndarray, b: np.ndarray, z: float) -> bool:
        """Put a fixed obstacle on the path a -> b (at height z), clear of every body and
        target; False when there is no free spot."""
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
                if abs(qlo[2] - top) < 0.005 and boxes_overlap(lo[:2], hi[:2], qlo[:2],
                                                         (qt + np.array(self.size[q]) / 2)[:2],
                                                         -0.001):
                    above = True
            if not above:
                cands.append(p)
        if not cands:
            return None
        return self._displace(cands[int(self.frng.integers(len(cands)))])

    def _displace(self, p: str) -> str | None:
        """Teleport p to the first free spot beside it on the table; None when none is free."""
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
