"""Several arms at once: list-scheduling the actions on CP-SAT's allocation with their real
motion times (``dispatch``), finding contacts between the arms, the parts they carry and
the parts they have placed along a concurrent timeline (``arm_clash``), and resolving a
clash by making one action wait (``concurrent_timeline``).

Part of the ``cellspec sim`` pipeline (:mod:`cellspec.robots.sim`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots.allocation import in_zone, precedences
from cellspec.robots.collision import CollisionChecker
from cellspec.robots.execute import DWELL, Timeline, segment_times, time_parameterise
from cellspec.robots.reports import SimResult
from cellspec.solver.cpsat.results import Step
from cellspec.solver.cpsat.schedule import ScheduleResult, Slot

if TYPE_CHECKING:
    from cellspec.robots.twin import Twin

CLASH_ROUNDS = 6  # tries to resolve arm-arm contacts of a concurrent timeline


def dispatch_order(slots: Iterable[Slot], index: dict[str, int], after: set[tuple[int, int]]
                   ) -> list[Slot]:
    """The slots by place start, except that a job waits in line until the jobs it must
    follow (``after``) are in (when every job left waits, as in a cycle, the first goes)."""
    todo = sorted(slots, key=lambda x: (x.place_start, x.part))
    out: list[Slot] = []
    placed: set[int] = set()
    while todo:
        k = next((j for j, s in enumerate(todo)
                  if all(y in placed for x, y in after if x == index[s.part])), 0)
        s = todo.pop(k)
        out.append(s)
        placed.add(index[s.part])
    return out


def dispatch(cell: Cell, layout: Layout, steps: tuple[Step, ...], res: SimResult,
             sched: ScheduleResult, vel: dict[str, np.ndarray],
             after: set[tuple[int, int]] | None = None) -> dict[int, float]:
    """Start times of the actions with their real motion times: CP-SAT's allocation and
    order (by place start), list-scheduled so that each arm does one job at a time, the
    precedences hold and no two phases inside the shared zone overlap; ``after`` holds
    pairs (x, y): action x starts only when action y has ended (to keep arms apart)."""
    idx = {a.part: a for a in res.compiled}
    durs = segment_times(res.segments, {r: np.array(q) for r, q in res.homes.items()}, vel)
    pick: dict[int, float] = {}
    place: dict[int, float] = {}
    for s, d in zip(res.segments, durs, strict=True):
        extra = DWELL if (s.grasp or s.release) else 0.0
        tgt = pick if s.kind in ("approach", "grasp") else place
        tgt[s.action] = tgt.get(s.action, 0.0) + d + extra
    preds: dict[str, list[str]] = {}
    for first, then in precedences(cell, layout, steps):
        preds.setdefault(then, []).append(first)
    free: dict[str, float] = {}
    end: dict[str, float] = {}
    busy: list[tuple[float, float]] = []
    starts: dict[int, float] = {}
    done: dict[int, float] = {}
    for slot in dispatch_order(sched.slots, {a.part: a.index for a in res.compiled},
                                after or set()):
        a = idx[slot.part]
        dp, dq = pick[a.index], place[a.index]
        t = max([free.get(a.robot, 0.0)] + [end[p] - dp for p in preds.get(a.part, ())
                                            if p in end]
                + [done[y] for x, y in (after or ()) if x == a.index and y in done])
        zones = [(0.0, dp)] if in_zone(cell, a.pick) else []
        if in_zone(cell, a.place):
            zones.append((dp, dp + dq))
        moved = True
        while moved:
            moved = False
            for o0, o1 in zones:
                for b0, b1 in busy:
                    if t + o0 < b1 - 1e-9 and b0 < t + o1 - 1e-9:
                        t = b1 - o0
                        moved = True
        for o0, o1 in zones:
            busy.append((t + o0, t + o1))
        starts[a.index] = t
        free[a.robot] = t + dp + dq
        end[a.part] = t + dp + dq
        done[a.index] = t + dp + dq
    return starts


def carried_intervals(tl: Timeline) -> list[tuple[float, float, str, str]]:
    """(t_grasp, t_release, robot, part) for every part a robot holds along a timeline (a
    part never released is held to the end)."""
    held: dict[str, tuple[float, str]] = {}
    out = []
    for t, r, kind, part in tl.events:
        if kind == "grasp":
            held[r] = (t, part)
        elif r in held:
            t0, pt = held.pop(r)
            out.append((t0, t, r, pt))
    out += [(t0, tl.end, r, pt) for r, (t0, pt) in held.items()]
    return sorted(out)


Vec3 = tuple[float, float, float]


class Clash(NamedTuple):
    """A contact between arms on a concurrent timeline: text, time, the two robots and the
    placed part involved (None: arm or carried part against arm or carried part)."""

    text: str
    t: float
    robots: tuple[str, str]
    placed: str | None = None


def arm_clash(twin: Twin, tl: Timeline, every: float = 0.05,
              parts: Mapping[str, tuple[Vec3, Vec3, Vec3 | None]] | None = None,
              shapes: dict[str, tuple[float, str]] | None = None) -> Clash | None:
    """The first contact between arms along a concurrent timeline (sampled every ``every``
    s): a link of one arm with a link of another; with ``parts`` (part -> size, centre at
    the pick, centre at the place or None) also a part one arm carries, or has placed,
    with another arm or with a part another arm carries. A part is attached to its robot
    from its grasp to its release (as planned: at its pick centre at the grasp
    configuration), then stays at its place (when given). Returns the ``Clash`` (a part
    stands for the robot that carries or placed it); None when the arms never touch.
    ``shapes``: part -> (yaw in degrees, "box" | "cylinder"), default an unturned box. The
    twin is left as it was found (robots where they were)."""
    shapes = shapes or {}
    robots = list(tl.t)
    before = {r: twin.get_q(r) for r in robots}
    parts = parts or {}
    holds = [h for h in carried_intervals(tl) if h[3] in parts]
    owner: dict[str, tuple[str, str]] = {}  # part body -> (robot, "carried by"|"placed by")
    chk = CollisionChecker(twin)
    try:
        for k in range(int(tl.end / every) + 2):
            t = min(k * every, tl.end)
            for t0, t1, r, part in holds:
                key = f"part:{part}"
                size, pick, place = parts[part][:3]
                yaw, shape = shapes.get(part, (0.0, "box"))
                if t0 <= t < t1 and key not in owner:
                    twin.add_box(part, size, pick, kind="part", yaw=yaw, shape=shape)
                    twin.set_q(r, tl.at(r, t0))
                    twin.attach(r, key)
                    owner[key] = (r, "carried by")
                elif t >= t1 and owner.get(key, ("", ""))[1] == "carried by":
                    twin.detach(r)
                    if place is None:
                        twin.remove(key)
                        del owner[key]
                    else:
                        twin.set_pose(key, place)
                        owner[key] = (r, "placed by")
            for c in chk.contacts({r: tl.at(r, t) for r in robots}):
                ra = owner[c.a][0] if c.a in owner else c.a.split("/")[0]
                rb = owner[c.b][0] if c.b in owner else c.b.split("/")[0]
                if ra in robots and rb in robots and ra != rb:
                    what = [f"{x} ({owner[x][1]} {owner[x][0]})" if x in owner else x
                            for x in (c.a, c.b)]
                    placed = [x[5:] for x in (c.a, c.b) if owner.get(x, ("", ""))[1]
                              == "placed by"]
                    return Clash(f"{what[0]} with {what[1]} at t = {t:.2f} s", t, (ra, rb),
                                 placed[0] if placed else None)
        return None
    finally:
        for key, (r, how) in list(owner.items()):
            if how == "carried by":
                twin.detach(r)
            twin.remove(key)
        twin.set_qs(before)


def _wait(clash: Clash, ctl: Timeline, res: SimResult) -> tuple[int, int] | None:
    """The pair (x, y) that resolves the clash (action x waits until action y has ended),
    or None when it cannot be resolved that way."""
    if clash.placed is not None:
        # a part placed earlier than in the sequence is in the way of a motion
        # planned without it: its placing waits for that action to end
        x = next(a.index for a in res.compiled if a.part == clash.placed)
        placer = next(a.robot for a in res.compiled if a.index == x)
        ys = [w[0] for w in ctl.windows if w[1] <= clash.t <= w[2] + DWELL
              and w[3] in clash.robots and w[3] != placer]
        return (x, ys[0]) if ys else None
    # serialise the two actions that meet: the later one waits for the other
    act = [w for w in ctl.windows if w[1] <= clash.t <= w[2] + DWELL
           and w[3] in clash.robots]
    if len(act) < 2:
        return None
    first, second = sorted(act[:2], key=lambda w: (w[1], w[0]))
    return (second[0], first[0])


def concurrent_timeline(twin: Twin, cell: Cell, layout: Layout, steps: tuple[Step, ...],
                        res: SimResult, sched: ScheduleResult, start: dict[str, np.ndarray],
                        vel: dict[str, np.ndarray]) -> tuple[Timeline | None, str]:
    """The arms' concurrent timeline free of clashes (up to ``CLASH_ROUNDS`` waits added),
    else (None, the last clash) and the arms run one after another."""
    carried = {a.part: (a.size, a.pick, a.place) for a in res.compiled}
    shapes = {a.part: (a.yaw, a.shape) for a in res.compiled}
    after: set[tuple[int, int]] = set()
    clash = None
    for _ in range(CLASH_ROUNDS):
        starts = dispatch(cell, layout, steps, res, sched, vel, after)
        ctl = time_parameterise(res.segments, start, vel, starts)
        clash = arm_clash(twin, ctl, parts=carried, shapes=shapes)
        if clash is None:
            return ctl, ""
        pair = _wait(clash, ctl, res)
        if pair is None or (clash.placed is not None and pair in after):
            break
        after.add(pair)
    return None, clash.text if clash is not None else ""
