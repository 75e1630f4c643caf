"""Support put back: a structure that must move anyway is moved, whole, under the parts it
held up, before the constructive placement (:mod:`.repair_first`).

A proposal often takes a pillar out from under a roof: the pillar is outside the workspace
(or in a keep-out, or overlapping), and the roof parts it carried float (``gravity``) or
hang off their other pillars (``stability``). Moving the roof parts is a repair, but the
nearest one puts the pillar back. For each structure every part of which a geometric
violation names (*displaced*; plain boxes, resting on a surface, at most
``MAX_STRUCTURE`` parts) and each surface, the parts named by ``gravity`` or a stability
rule whose bottom lies at that surface plus the structure's height (*hanging*) say where
its top must go: overlapping every hanging footprint, and holding the centre of every part
that rests on nothing with the stability margin to spare (one interval per axis; its
middle, on the 0.1 mm grid). The structure is shifted there (a rigid move: its shape is
kept) when that box is inside the workspace, clear of the keep-outs and of every other
part (but those resting on its top); clingo then checks the whole layout (the stability
analysis included), and the shift is kept only when no part of it is named any more, some
hanging part is not, and no part is named that was not. The layout so changed is the
constructive step's input: what is still named is placed as usual, and every answer is
re-verified there.
"""

from __future__ import annotations

import dataclasses
import time
from fractions import Fraction

import numpy as np

from cellspec.core import geometry as g
from cellspec.core.status import Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.cpsat.clusters import structures
from cellspec.solver.cpsat.repair_construct import _clear, _in_zones, _stackable
from cellspec.solver.instance import Instance
from cellspec.solver.result import Verdict
from cellspec.solver.stability import DEFAULT_MARGIN

MAX_STRUCTURE = 8  # parts in a structure moved whole under what it held up
MAX_TRIES = 6  # clingo checks at most (one per candidate shift)
HANGING_RULES = ("gravity", "stability", "stability_stages")
DISPLACED_RULES = ("workspace", "keepout", "no_overlap")


@dataclasses.dataclass(frozen=True)
class Restored:
    """The layout with structures shifted back under what they held up (``shifted``: the
    parts moved), and clingo's verdict on it (no order)."""

    layout: Layout
    shifted: tuple[int, ...]
    verdict: Verdict


def restore(cell: Cell, layout: Layout, before: Verdict, inst: Instance,
            deadline: float) -> Restored | None:
    """Shift displaced structures back under the parts they held up; see the module
    docstring. None when no shift is kept."""
    from cellspec.solver.verify import check

    names: dict[str, set[str]] = {}
    for v in before.violations:
        for p in v.parts:
            names.setdefault(p, set()).add(v.rule)
    index = {pid: i for i, pid in enumerate(layout.ids)}
    hanging = [index[p] for p, rs in names.items() if rs & set(HANGING_RULES)]
    if not hanging or not _stackable(inst).all():  # boxes only: their boxes are exact
        return None
    b = inst.boxes.astype(np.int64)
    eps = inst.eps
    comp = structures(inst)
    surfaces = sorted(set(inst.surfaces.values()))
    floating = {i for i in hanging if "gravity" in names[layout.ids[i]]}
    margin = inst.stability_margin if inst.stability_margin is not None else DEFAULT_MARGIN
    mu = g.to_u_int(margin) + 2
    cur = layout
    cur_b = b.copy()
    named_now = {index[p] for p in names}
    shifted: list[int] = []
    verdict: Verdict | None = None
    tries = 0
    for k in np.unique(comp).tolist():
        members = np.nonzero(comp == k)[0]
        if len(members) > MAX_STRUCTURE or any(
                not (names.get(layout.ids[i], set()) & set(DISPLACED_RULES))
                or names[layout.ids[i]] & set(HANGING_RULES) for i in members.tolist()):
            continue
        bottom = int(cur_b[members, 4].min())
        if not any(abs(bottom - s) <= eps for s in surfaces):
            continue
        top = int(cur_b[members, 5].max())
        tops = members[cur_b[members, 5] == top]
        t_lo = cur_b[tops][:, [0, 2]].min(axis=0)  # the top face's bounding box, x and y
        t_hi = cur_b[tops][:, [1, 3]].max(axis=0)
        for s in surfaces:
            if tries >= MAX_TRIES or time.perf_counter() > deadline:
                break
            dz = s - bottom
            level = [i for i in hanging if comp[i] != k and i not in shifted
                     and abs(int(cur_b[i, 4]) - (top + dz)) <= eps]
            if not level or (len(members) == 1 and all(i in floating for i in level)):
                continue  # one part under floating ones: the constructive step's pillar
            shift = _shift(cur_b, level, floating, t_lo, t_hi, eps, mu)
            if shift is None:
                continue
            if dz % 2:
                continue  # centres stay on the 0.1 mm grid: boxes move by even U
            d = np.array([shift[0], shift[1], dz], dtype=np.int64)
            nb = cur_b[members].copy()
            nb[:, 0::2] += d[None, :]
            nb[:, 1::2] += d[None, :]
            rest = np.abs(cur_b[:, 4] - (top + dz)) > eps  # parts on the new top may touch
            rest[members] = False
            if not _in_zones(nb, inst).all() or not _clear(nb, cur_b[rest], eps + 1).all():
                continue
            pos = np.asarray(cur.pos, dtype=np.float64).copy()
            for t, i in enumerate(members.tolist()):
                c = nb[t].reshape(3, 2).sum(axis=1) // 4  # centre, 0.1 mm
                pos[i] = [float(Fraction(int(v), 10000)) for v in c]
            trial = dataclasses.replace(cur, pos=pos, order=None)
            tries += 1
            ver = check(cell, trial, timeout=max(0.05, deadline - time.perf_counter()))
            if ver.verdict == Status.UNKNOWN:
                continue
            now = {index[p] for x in ver.violations for p in x.parts}
            if now & set(members.tolist()) or not set(level) - now or now - named_now:
                continue
            cur, named_now, verdict = trial, now, ver
            cur_b = cur_b.copy()
            cur_b[members] = nb
            shifted.extend(members.tolist())
            break
    if verdict is None:
        return None
    return Restored(layout=dataclasses.replace(cur, order=layout.order),
                    shifted=tuple(shifted), verdict=verdict)


def _shift(b: np.ndarray, level: list[int], floating: set[int], t_lo: np.ndarray,
           t_hi: np.ndarray, eps: int, mu: int) -> tuple[int, int] | None:
    """The x, y shift (U, even) that puts the top face [t_lo, t_hi] under every part of
    ``level`` (overlapping its footprint by more than eps plus ``mu``) and the centre of
    every floating one ``mu`` inside it: the middle of the feasible interval per axis.
    None when the intervals are empty, even for the floating parts alone."""
    for group in (level, [i for i in level if i in floating]):
        if not group:
            return None
        out = []
        for a in range(2):
            lo, hi = -10 ** 12, 10 ** 12
            for i in group:
                # overlap: t_hi + d > b_lo + eps + mu and b_hi > t_lo + d + eps + mu
                lo = max(lo, int(b[i, 2 * a]) + eps + mu + 1 - int(t_hi[a]))
                hi = min(hi, int(b[i, 2 * a + 1]) - eps - mu - 1 - int(t_lo[a]))
                if i in floating:  # its centre inside the top by mu
                    c2 = int(b[i, 2 * a]) + int(b[i, 2 * a + 1])  # 2 x centre, U
                    lo = max(lo, -(-(c2 + 2 * mu - 2 * int(t_hi[a])) // 2))
                    hi = min(hi, (c2 - 2 * mu - 2 * int(t_lo[a])) // 2)
            if lo > hi:
                break
            mid = (lo + hi) // 2
            mid -= mid % 2  # centres on the 0.1 mm grid: boxes move by even U
            if mid < lo:
                mid += 2
            if mid > hi:
                break
            out.append(mid)
        if len(out) == 2:
            return out[0], out[1]
    return None
