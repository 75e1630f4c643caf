"""Turning boxes in repair: ``--allow-rotate`` (issue 22 item 3, docs/shapes.md).

``--allow-rotate`` gives the yaws (degrees) a moved box may be turned to: one angle A
(every multiple of A modulo 360) or a comma-separated set. A box's footprint is the same
at yaw a and a + 180 (and, for a square footprint, at a + 90), so its *candidate yaws* are
the allowed yaws whose footprint differs from its current one, one per footprint (the one
nearest its current yaw, then the smaller); a cylinder never turns (turning changes
nothing). Each candidate is one Boolean of the placement model (at most one true: the
part stays at its yaw otherwise), a turn implies a move, and it costs its rank among the
part's candidates by angular distance (1 for the nearest) times ``TURN_COST`` (1 cm of
displacement) in the last level of the lexicographic objective (parts moved, free moves,
then L1 + turns), so a repair turns a part only when that saves a part moved, a free move
or more than 1 cm of moves: a turn is a bigger change to a design than a small shift.

At a candidate yaw the model sees the part as it sees any part (:mod:`.moved_shapes`):
its enclosing box (``Instance.boxes`` of the part at that yaw, rounded outward) and its
inscribed square, both axis-aligned about its centre; the half extents are linear in the
Booleans. A multiple of 90 degrees on a plain box is exact (the sizes swap, as before).
A part that may take a yaw which is not a multiple of 90 degrees is treated by the model
as a non-plain part (enclosing box apart, inside and clear exactly; inscribed square for
support) whether or not it turns. Clingo's exact re-check stays the judge.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core import shapes as ks
from cellspec.core.errors import CellspecError
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.instance import build_instance

TURN_COST = 100  # one rank of turn weighs as 1 cm of L1 (centres in 0.1 mm)

MAX_YAWS = 24  # distinct allowed yaws at most (one angle A: 360 / A of them)
MAX_ABS_DEG = 3600.0


def parse_rotate(spec: str) -> tuple[float, ...]:
    """``--allow-rotate``: one angle A (every multiple of A modulo 360: 30 gives 0, 30, ...,
    330) or a comma-separated set of yaws, in degrees (finite, |v| <= 3600). The allowed
    yaws modulo 360, sorted; at most :data:`MAX_YAWS` of them. CellspecError naming the
    bad value."""
    items = [p.strip() for p in str(spec).split(",")]
    if not items or len(items) > MAX_YAWS or any(not p for p in items):
        raise CellspecError(f"--allow-rotate {spec!r}: give one angle (e.g. 90 or 45) or up "
                            f"to {MAX_YAWS} comma-separated yaws in degrees (e.g. 0,45,90)")
    vals: list[float] = []
    for p in items:
        try:
            v = float(p)
        except ValueError:
            raise CellspecError(f"--allow-rotate: {p!r} is not a number of degrees") from None
        if not math.isfinite(v) or abs(v) > MAX_ABS_DEG:
            raise CellspecError(f"--allow-rotate: {p!r} is not a finite angle up to "
                                f"{MAX_ABS_DEG:g} degrees")
        vals.append(v)
    if len(vals) > 1:
        return tuple(sorted({v % 360.0 for v in vals}))
    # one angle: its multiples modulo 360 (exact: the angle as a fraction of a turn)
    step = Fraction(vals[0]).limit_denominator(10 ** 6) % 360
    if step == 0:
        raise CellspecError(f"--allow-rotate: {items[0]!r} turns nothing (give an angle such "
                            "as 90 or 45, or a set of yaws)")
    count = (step / 360).denominator
    if count > MAX_YAWS:
        raise CellspecError(f"--allow-rotate: {items[0]!r} gives {count} distinct yaws (at most "
                            f"{MAX_YAWS}: give a coarser angle, e.g. 15, or a set of yaws)")
    return tuple(sorted({float((k * step) % 360) for k in range(count)}))


@dataclasses.dataclass(frozen=True)
class Turn:
    """One candidate yaw of a part: the yaw (degrees, as written to the layout), its cost
    (rank by angular distance, from 1), the half extents (U, x and y) of the enclosing box
    and of the inscribed square at that yaw, and whether the part is plain there."""

    yaw: float
    cost: int
    half: tuple[int, int]
    inner: tuple[int, int]
    plain: bool


@dataclasses.dataclass(frozen=True)
class PartTurns:
    """A part's current half extents (enclosing, inscribed; U) and its candidate turns."""

    half0: tuple[int, int]
    inner0: tuple[int, int]
    plain0: bool
    options: tuple[Turn, ...]

    @property
    def odd(self) -> bool:
        """The part may be (or is) at a yaw that is not a multiple of 90 degrees: the model
        treats it as a non-plain part."""
        return not self.plain0 or any(not o.plain for o in self.options)


def _dist(a: float, y: float) -> float:
    return min((a - y) % 360.0, (y - a) % 360.0)


@functools.lru_cache(maxsize=4096)
def _key(yaw: float, square: bool) -> tuple[int, int, int, int]:
    """The footprint a box takes at ``yaw`` as the kernel holds it (rational rotation after
    the quarter-turn reduction, and the parity of the quarter turns unless it is square)."""
    y = np.array([yaw % (90.0 if square else 180.0)])  # the same footprint: one key
    rc, rs, rn = ks.rational_rotation(y)
    parity = 0 if square else int(ks.quarter_turns(y)[0] % 2)
    return int(rc[0]), int(rs[0]), int(rn[0]), parity


def candidates(yaw: float, allowed: tuple[float, ...], square: bool) -> list[float]:
    """The yaws a box at ``yaw`` may turn to: one per footprint other than its own (the
    allowed yaw nearest ``yaw``, then the smaller), nearest first."""
    return list(_candidates(float(yaw), tuple(allowed), bool(square)))


@functools.lru_cache(maxsize=4096)  # a layout's parts share few yaws: one answer each
def _candidates(yaw: float, allowed: tuple[float, ...], square: bool) -> tuple[float, ...]:
    own = _key(yaw, square)
    best: dict[tuple[int, int, int, int], float] = {}
    for a in allowed:
        k = _key(a, square)
        if k == own:
            continue
        if k not in best or (_dist(a, yaw), a) < (_dist(best[k], yaw), best[k]):
            best[k] = a
    return tuple(sorted(best.values(), key=lambda a: (_dist(a, yaw), a)))


def part_turns(cell: Cell, layout: Layout, allowed: tuple[float, ...]) -> dict[int, PartTurns]:
    """Per box part (layout index) with at least one candidate yaw: its turns, with the
    enclosing and inscribed half extents at each yaw as the kernel computes them (one
    instance row per distinct type, size and yaw: the extents do not depend on where the
    part stands, so a layout of many equal parts builds a few rows, not parts x yaws)."""
    if not allowed:
        return {}
    size = layout.resolve(cell)
    key_of: dict[int, tuple] = {}  # part -> (type, size, yaw): all its turns depend on
    cand: dict[tuple, tuple[float, ...]] = {}  # key -> its candidate yaws
    where: dict[tuple, int] = {}  # key -> a part of that key (its row's position)
    for i in range(len(layout)):
        pt = cell.part_types.get(layout.types[i])
        if pt is not None and pt.shape == "cylinder":
            continue  # a disc is the same at every yaw
        y = layout.yaw_of(i)
        k = (layout.types[i], *size[i].tolist(), y)
        if k not in cand:
            cand[k] = tuple(candidates(y, allowed, bool(size[i, 0] == size[i, 1])))
            where[k] = i
        if cand[k]:
            key_of[i] = k
    keys = [k for k in cand if cand[k]]
    if not keys:
        return {}
    rows = [(where[k], y) for k in keys for y in (k[-1], *cand[k])]
    idx = np.array([i for i, _ in rows], dtype=np.int64)
    lay = Layout(ids=tuple(f"r{k}" for k in range(len(rows))),
                 types=tuple(layout.types[i] for i in idx.tolist()),
                 pos=np.array(layout.pos[idx]), size=np.array(layout.size[idx]),
                 grippers=(None,) * len(rows), order=None, path=layout.path,
                 yaw=np.array([y for _, y in rows], dtype=np.float64))
    inst = build_instance(cell, lay)
    b = inst.boxes
    half = np.stack([(b[:, 1] - b[:, 0]) // 2, (b[:, 3] - b[:, 2]) // 2], axis=1)
    kern = inst.kernel()
    inner, plain = kern.inner_half(), kern.plain_mask()

    def hx(r: int, arr: np.ndarray) -> tuple[int, int]:
        return int(arr[r, 0]), int(arr[r, 1])

    turns: dict[tuple, PartTurns] = {}
    r = 0
    for k in keys:
        opts = tuple(Turn(yaw=a, cost=(c + 1) * TURN_COST, half=hx(r + 1 + c, half),
                          inner=hx(r + 1 + c, inner), plain=bool(plain[r + 1 + c]))
                     for c, a in enumerate(cand[k]))
        turns[k] = PartTurns(half0=hx(r, half), inner0=hx(r, inner), plain0=bool(plain[r]),
                             options=opts)
        r += 1 + len(cand[k])
    return {i: turns[k] for i, k in sorted(key_of.items())}


def odd_parts(turns: dict[int, PartTurns], n: int) -> np.ndarray:
    """(n,) bool: the parts the model treats as non-plain because they may turn to a yaw
    that is not a multiple of 90 degrees."""
    out = np.zeros(n, dtype=bool)
    for i, t in turns.items():
        out[i] = t.odd
    return out


def growth(turns: dict[int, PartTurns], n: int) -> np.ndarray:
    """(n, 3) int64 U: how much farther than its current enclosing box a part reaches on
    each axis at some candidate yaw (0 on z and for parts that do not turn): the pairs and
    cluster context a turned part may meet."""
    out = np.zeros((n, 3), dtype=np.int64)
    for i, t in turns.items():
        for a in range(2):
            out[i, a] = max([0] + [o.half[a] - t.half0[a] for o in t.options])
    return out


def add_turns(m: Any, i: int, pt: PartTurns, moved: Any, half: list[Any],
              inner: list[Any] | None) -> tuple[list[tuple[Any, float]], list[Any], int]:
    """Part i's turn Booleans in CP-SAT model ``m`` (at most one true; each implies
    ``moved``). Updates ``half`` (its enclosing half extents on x and y, ints or linear
    expressions) and ``inner`` (its inscribed half extents, when the model has them) in
    place. Returns the (literal, yaw) pairs, the cost terms, and the largest cost."""
    lits: list[tuple[Any, float]] = []
    cost: list[Any] = []
    for k, o in enumerate(pt.options):
        t = m.new_bool_var(f"turn{i}" if k == 0 else f"turn{i}_{k}")
        m.add_implication(t, moved)
        lits.append((t, o.yaw))
        cost.append(t if o.cost == 1 else o.cost * t)
        for a in range(2):
            d = o.half[a] - pt.half0[a]
            if d:
                half[a] = half[a] + d * t
            if inner is not None and o.inner[a] != pt.inner0[a]:
                inner[a] = inner[a] + (o.inner[a] - pt.inner0[a]) * t
    if len(lits) > 1:
        m.add_at_most_one([t for t, _ in lits])
    return lits, cost, max(o.cost for o in pt.options)


def chosen(turn: dict[int, list[tuple[Any, float]]], value: Any) -> dict[int, float]:
    """The new yaw of each part turned in a solution (``value``: the solver's Value)."""
    return {k: y for k, lits in turn.items() for t, y in lits if value(t)}


__all__ = ["MAX_YAWS", "PartTurns", "Turn", "add_turns", "candidates", "chosen", "growth",
           "odd_parts", "parse_rotate", "part_turns"]
