"""The constructive first repair: a valid layout built in one pass, before any optimisation.

Every part that is fine where it is stays (*kept*): a part is fine when no violation names
it and nothing it depends on moves (:func:`must_move`: a part resting on, or leaning from
above on, a part that moves moves too). The other parts are put down one by one: those
that may stay where they are first (resting, inside), then largest, lowest, carrying
most. Each goes to the free position nearest to where it was (L1 on the 0.1 mm grid): on
a surface, or on the free top of a plain box that stands on a surface (or on such a
column built here), inside that top face (or where it was, its centre the stability
margin inside the top: it then carries nothing). A floating part stays where it is when a
part that must move anyway can stand under it as a pillar. A placed part keeps a gap to
every other part (the parallel gripper's finger clearance where there is room, else just
over the contact tolerance, else none: touching), lies inside the workspace and clear of
the keep-outs exactly. Stability then holds by construction: a part alone on a surface
stands, and a column whose every part lies inside the top of the one below stands with
any margin smaller than half a part (the centre of mass of a part and what it carries
lies inside its own footprint, which lies inside the contact). Sizes, yaws and radii are
kept: a yawed box or a cylinder is placed by its enclosing box (conservative) and never
carries another part. clingo re-verifies the result (:mod:`.repair_first`).

When a part finds no position, the placement proves nothing by itself; a repair is proved
impossible only by a bound over the whole problem (:func:`room_proof`): the parts' volume
(or, when no part can rest on another, their footprint area) exceeds the room there is.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from cellspec.core import geometry as g
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.instance import BoxU, Instance, build_instance
from cellspec.solver.stability import DEFAULT_MARGIN

NEAR_START = 4  # candidate edges from boxes within this many part sizes, widened x3
CHUNK = 256  # candidates tested at once


@dataclasses.dataclass(frozen=True)
class Construction:
    """The constructive placement: the new centres (0.1 mm) of the parts that moved, or why
    there is none (``proof``: a bound that rules every repair out)."""

    ok: bool
    centres: dict[int, tuple[int, int, int]]
    kept: tuple[int, ...] = ()
    unplaced: tuple[int, ...] = ()
    reason: str | None = None
    proof: str | None = None


def _stackable(inst: Instance) -> np.ndarray:
    """Per part: the constructive step may put a part on its top, and may count its
    enclosing box as the part itself (a box at a (near) quarter-turn yaw, not a cylinder)."""
    n = inst.n
    # a per-part capability of this heuristic, not the kernel's plain mask: np.isclose
    # also admits a yaw a hair off a quarter turn (a yaw or cylinder row None: all 0 / none)
    yaw = np.zeros(n) if inst.yaw_deg is None else np.asarray(inst.yaw_deg, dtype=np.float64)
    quarter = np.isclose(np.mod(yaw, 90.0), 0.0) | np.isclose(np.mod(yaw, 90.0), 90.0)
    cyl = np.zeros(n, dtype=bool) if inst.cyl is None else np.asarray(inst.cyl, dtype=bool)
    return quarter & ~cyl


def _depends(inst: Instance) -> dict[int, list[int]]:
    """lower -> the parts that depend on it: those it supports, and those off a surface that
    touch it with a higher bottom (they lean on it). Side neighbours on one level do not."""
    b, eps = inst.boxes, inst.eps
    i, j = g.broad_phase(b, eps)
    keep = g.contact(b[i], b[j], eps)
    i, j = i[keep], j[keep]
    surf = np.asarray(sorted(set(inst.surfaces.values())), dtype=np.int64)
    grounded: np.ndarray = np.asarray((np.abs(b[:, 4][:, None] - surf[None, :]) <= eps).any(
        axis=1)) if len(surf) else np.zeros(len(b), dtype=bool)
    up: dict[int, list[int]] = {}
    for p, q in list(zip(i.tolist(), j.tolist(), strict=True)) + list(
            zip(j.tolist(), i.tolist(), strict=True)):
        if bool(g.supports(b[p], b[q], eps)) or (b[p, 4] < b[q, 4] and not grounded[q]):
            up.setdefault(p, []).append(q)
    return up


def must_move(inst: Instance, bad: np.ndarray,
              up: dict[int, list[int]] | None = None) -> np.ndarray:
    """The parts named by a violation and, transitively, every part that depends on one of
    them (:func:`_depends`: its support or what it leans on changes when that one moves)."""
    up = _depends(inst) if up is None else up
    out = bad.copy()
    stack = np.nonzero(out)[0].tolist()
    while stack:
        p = stack.pop()
        for q in up.get(p, ()):
            if not out[q]:
                out[q] = True
                stack.append(q)
    return out


def _carried(up: dict[int, list[int]], p: int) -> int:
    """How many parts depend on p, transitively."""
    seen = {p}
    stack = [p]
    while stack:
        for q in up.get(stack.pop(), ()):
            if q not in seen:
                seen.add(q)
                stack.append(q)
    return len(seen) - 1


def _gap_tiers(inst: Instance) -> list[int]:
    """Clearances (U) tried in turn: the finger clearance (no placed part ever blocks a
    parallel grip), then just over the contact tolerance (no new contact), then none."""
    eps = inst.eps
    tiers = []
    b = inst.boxes
    if inst.opening is not None and len(b):
        lateral = int(min((b[:, 1] - b[:, 0]).min(), (b[:, 3] - b[:, 2]).min()))
        tiers.append(max(eps + 1, -(-(inst.opening - lateral) // 2) + 1))
    tiers.append(eps + 1)
    tiers.append(0)  # last, touching: side contacts (grounded parts stand regardless)
    return sorted(set(tiers), reverse=True)


def _clear(cand: np.ndarray, others: np.ndarray, gap: int) -> np.ndarray:
    """Per candidate box (C, 6): apart from every box of ``others`` (B, 6) by at least
    ``gap`` along some axis."""
    if not len(others):
        return np.ones(len(cand), dtype=bool)
    sep = np.zeros((len(cand), len(others)), dtype=bool)
    for a in range(3):
        sep |= cand[:, None, 2 * a] - others[None, :, 2 * a + 1] >= gap
        sep |= others[None, :, 2 * a] - cand[:, None, 2 * a + 1] >= gap
    return np.asarray(sep.all(axis=1))


def _in_zones(cand: np.ndarray, inst: Instance) -> np.ndarray:
    """Per candidate box: inside the workspace and clear of every keep-out, exactly."""
    ws = inst.zones["workspace"]
    assert isinstance(ws, BoxU)
    ok = np.ones(len(cand), dtype=bool)
    for a in range(3):
        ok &= (cand[:, 2 * a] >= ws.lo[a]) & (cand[:, 2 * a + 1] <= ws.hi[a])
    for name in inst.keepouts:
        z = inst.zones[name]
        if isinstance(z, BoxU):
            ok &= ~g.intersects_box(cand, z.lo, z.hi, 0)
        else:
            ok &= ~g.intersects_half(cand, z, 0)
    return ok


def construct(inst: Instance, bad: np.ndarray, *, stack: bool = True,
              deadline: float | None = None, tiers: int = 0,
              pack: bool = False) -> Construction:
    """Keep the parts that are fine, place the others at the nearest valid position; see
    the module docstring. ``tiers``: how many of the widest gaps to skip (denser);
    ``pack``: nearest to the workspace's low corner instead (a packing, the last try)."""
    import time

    b = inst.boxes.astype(np.int64)
    eps = inst.eps
    c0 = (b[:, 0::2] + b[:, 1::2]) // 4  # centres, 0.1 mm (boxes are 2c -/+ s)
    off_lo = b[:, 0::2] - 2 * c0
    off_hi = b[:, 1::2] - 2 * c0
    up = _depends(inst)
    moving = must_move(inst, bad, up)
    kept = np.nonzero(~moving)[0]
    stackable = _stackable(inst)  # per part: may carry a part on its top
    ws = inst.zones["workspace"]
    assert isinstance(ws, BoxU)
    surfaces = sorted({z for z in inst.surfaces.values() if ws.lo[2] <= z <= ws.hi[2]})
    size = b[:, 1::2] - b[:, 0::2]
    vol = size[:, 0] * size[:, 1] * size[:, 2]
    # parts that may stay where they are first (resting there, inside, clear of keep-outs),
    # then largest, lowest, carrying most, in layout order
    rests = np.zeros(len(b), dtype=bool)
    for p, qs in up.items():
        for q in qs:
            if bool(g.supports(b[p], b[q], eps)):
                rests[q] = True
    for z in surfaces:
        rests |= np.abs(b[:, 4] - z) <= eps
    rests &= _in_zones(b, inst)
    todo = sorted(np.nonzero(moving)[0].tolist(), key=lambda i: (
        not rests[i], -int(vol[i]), int(b[i, 4]), -_carried(up, i), i))
    store = np.empty((len(b), 6), dtype=np.int64)  # the boxes placed so far, rows 0..count
    store[:len(kept)] = b[kept]
    count = len(kept)
    owner = kept.tolist()
    grounded = {i for i in owner if any(abs(int(b[i, 4]) - z) <= eps for z in surfaces)}
    # a box may carry a part when nothing rests on it and it stands on a surface (kept) or
    # is a column placed here; its top must be free
    carries: set[int] = set()
    if len(kept):
        kb = b[kept]
        for t, i in enumerate(kept.tolist()):
            on_top = ((np.abs(kb[:, 4] - b[i, 5]) <= eps) & g.footprint(kb, b[i], eps))
            on_top[t] = False
            if not on_top.any() and stackable[i] and i in grounded:
                carries.add(i)
    depth = inst.depth if inst.depth is not None else 0
    gaps = _gap_tiers(inst)
    margin = inst.stability_margin if inst.stability_margin is not None else DEFAULT_MARGIN
    mu = g.to_u_int(margin) + 2
    centres: dict[int, tuple[int, int, int]] = {}
    unplaced: list[int] = []
    done: set[int] = set()

    def put(i: int, box: np.ndarray) -> None:
        nonlocal count
        store[count] = box
        count += 1
        owner.append(i)
        done.add(i)

    for i in todo:
        if i in done:
            continue
        if stack and not rests[i] and stackable[i]:  # a part that must move holds it up?
            pl = _pillar(i, [q for q in todo if q not in done and q != i and not rests[q]
                             and stackable[q]], b, c0, off_lo, off_hi, inst,
                         store[:count], surfaces)
            if pl is not None:
                q, cq, carry = pl
                centres[q] = cq
                put(q, _box(cq, off_lo[q], off_hi[q]))
                put(i, b[i])
                if carry:
                    carries.add(i)
                continue
        if deadline is not None and time.perf_counter() > deadline:
            return Construction(False, centres, tuple(kept.tolist()), tuple(todo),
                                reason="the time limit was hit during the constructive "
                                "placement")
        got = _place(i, b, c0, off_lo, off_hi, inst, store[:count], owner, surfaces, carries,
                     stack and (inst.grippers[i] == "vacuum" or int(size[i, 2]) > depth + eps),
                     mu, gaps[min(tiers, len(gaps) - 1):], pack)
        if got is None:
            unplaced.append(i)
            continue
        c, on, may_carry = got
        centres[i] = c
        put(i, _box(c, off_lo[i], off_hi[i]))
        if on is not None:
            carries.discard(on)
        if stackable[i] and may_carry:
            carries.add(i)
    if unplaced:
        return Construction(False, centres, tuple(kept.tolist()), tuple(unplaced))
    return Construction(True, centres, tuple(kept.tolist()))


def _box(c: tuple[int, int, int], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The box (U) of a part centred at c (0.1 mm) with corner offsets lo, hi."""
    out = np.empty(6, dtype=np.int64)
    out[0::2] = 2 * np.asarray(c, dtype=np.int64) + lo
    out[1::2] = 2 * np.asarray(c, dtype=np.int64) + hi
    return out


def _pillar(i: int, cands: list[int], b: np.ndarray, c0: np.ndarray, off_lo: np.ndarray,
            off_hi: np.ndarray, inst: Instance, boxes: np.ndarray, surfaces: list[int]
            ) -> tuple[int, tuple[int, int, int], bool] | None:
    """Part i floats where it is, clear of everything: a part q that must move anyway, put
    on a surface right under i's centre with its top at i's bottom, lets i stay. The q
    nearest to its own place, its centre, and whether i lies inside q's top (may carry)."""
    eps = inst.eps
    bi = b[i]
    if not len(cands) or not _in_zones(bi[None, :], inst)[0]:
        return None
    gap = eps + 1  # no new contact around the pillar
    span = int(max(abs(off_lo[cands]).max(), abs(off_hi[cands]).max())) + gap + 1
    win = ((boxes[:, 1] >= bi[0] - span) & (boxes[:, 0] <= bi[1] + span)
           & (boxes[:, 3] >= bi[2] - span) & (boxes[:, 2] <= bi[3] + span))
    local = boxes[win]
    if not _clear(bi[None, :], local, eps + 1)[0]:
        return None
    best = None
    fits: dict[tuple[int, ...], tuple[tuple[int, int, int], bool] | None] = {}
    for q in cands:  # one test per distinct shape (equal parts share it)
        shape = (*off_lo[q].tolist(), *off_hi[q].tolist())
        if shape not in fits:
            fits[shape] = None
            for s in surfaces:
                cz = -(-(s - int(off_lo[q, 2])) // 2)
                c = (int(c0[i, 0]), int(c0[i, 1]), cz)
                bq = _box(c, off_lo[q], off_hi[q])
                if 0 <= int(bi[4]) - int(bq[5]) <= eps and _in_zones(bq[None, :], inst)[0] \
                        and _clear(bq[None, :], local, gap)[0]:
                    fits[shape] = (c, all(bq[2 * a] <= bi[2 * a] and bi[2 * a + 1] <= bq[
                        2 * a + 1] for a in range(2)))
                    break
        got = fits[shape]
        if got is None:
            continue
        cost = int(np.abs(np.asarray(got[0]) - c0[q]).sum())
        if best is None or (cost, q) < best[0]:
            best = ((cost, q), got[0], got[1])
    if best is None:
        return None
    return best[0][1], best[1], best[2]


def _place(i: int, b: np.ndarray, c0: np.ndarray, off_lo: np.ndarray, off_hi: np.ndarray,
           inst: Instance, boxes: np.ndarray, owner: list[int], surfaces: list[int],
           carries: set[int], stack: bool, mu: int, gaps: list[int], pack: bool
           ) -> tuple[tuple[int, int, int], int | None, bool] | None:
    """The nearest valid centre of part i (0.1 mm), the part it rests on (None: a
    surface) and whether it may carry a part in turn, or None when there is none.
    ``mu``: the stability margin (U) an overhanging centre keeps from the edge."""
    ws = inst.zones["workspace"]
    assert isinstance(ws, BoxU)
    lo_i, hi_i = off_lo[i], off_hi[i]
    ext = hi_i - lo_i
    o = c0[i]
    # the centre range that keeps the part inside the workspace, per axis
    cmin = [-(-(ws.lo[a] - int(lo_i[a])) // 2) for a in range(3)]
    cmax = [(ws.hi[a] - int(hi_i[a])) // 2 for a in range(3)]
    if any(cmin[a] > cmax[a] for a in range(3)):
        return None
    if pack:
        o = np.asarray(cmin, dtype=np.int64)
    oc = [min(max(int(o[a]), cmin[a]), cmax[a]) for a in range(3)]
    row = {k: t for t, k in enumerate(owner)}
    pos = {k: row[k] for k in carries}
    for gap in gaps:
        radius = NEAR_START * int(max(ext[0], ext[1]))
        while True:
            # (x, y, z, supporter or -1, may carry)
            cands: list[tuple[int, int, int, int, int]] = []
            near = np.ones(len(boxes), dtype=bool)
            if len(boxes):
                near = ((boxes[:, 0] - 2 * oc[0] <= radius) & (2 * oc[0] - boxes[:, 1] <= radius)
                        & (boxes[:, 2] - 2 * oc[1] <= radius)
                        & (2 * oc[1] - boxes[:, 3] <= radius))
            nbx = boxes[near]
            xs = {oc[0], cmin[0], cmax[0]}
            ys = {oc[1], cmin[1], cmax[1]}
            for q in nbx:
                xs.add(-(-(int(q[1]) + gap - int(lo_i[0])) // 2))
                xs.add((int(q[0]) - gap - int(hi_i[0])) // 2)
                ys.add(-(-(int(q[3]) + gap - int(lo_i[1])) // 2))
                ys.add((int(q[2]) - gap - int(hi_i[1])) // 2)
            xs_l = sorted(x for x in xs if cmin[0] <= x <= cmax[0])
            ys_l = sorted(y for y in ys if cmin[1] <= y <= cmax[1])
            for s in surfaces:
                z = -(-(s - int(lo_i[2])) // 2)
                if cmin[2] <= z <= cmax[2]:
                    cands.extend((x, y, z, -1, 1) for x in xs_l for y in ys_l)
            if stack:
                for k, t in sorted(pos.items()):
                    if near[t]:
                        cands.extend(_on_top(boxes[t], k, oc, lo_i, hi_i, cmin, cmax, mu))
            if cands and not near.all():  # beyond the window a box not near may be close
                arr0 = np.asarray(cands, dtype=np.int64)
                inwin = np.ones(len(arr0), dtype=bool)
                for a in range(2):
                    inwin &= (2 * arr0[:, a] + int(lo_i[a]) - gap >= 2 * oc[a] - radius) & (
                        2 * arr0[:, a] + int(hi_i[a]) + gap <= 2 * oc[a] + radius)
                cands = [c for c, w in zip(cands, inwin.tolist(), strict=True) if w]
            if cands:
                arr = np.asarray(cands, dtype=np.int64)
                cost = np.abs(arr[:, :3] - o[None, :]).sum(axis=1)
                srt = np.lexsort((arr[:, 3], arr[:, 2], arr[:, 1], arr[:, 0], cost))
                arr = arr[srt]
                cb = np.empty((len(arr), 6), dtype=np.int64)
                cb[:, 0::2] = 2 * arr[:, :3] + lo_i[None, :]
                cb[:, 1::2] = 2 * arr[:, :3] + hi_i[None, :]
                ok = np.nonzero(_in_zones(cb, inst))[0]
                for k0 in range(0, len(ok), CHUNK):  # in cost order, a chunk at a time
                    sl = ok[k0:k0 + CHUNK]
                    good = np.zeros(len(sl), dtype=bool)
                    flat = arr[sl, 3] < 0
                    good[flat] = _clear(cb[sl[flat]], nbx, gap)
                    for t in np.nonzero(~flat)[0].tolist():  # on a top: all but that part
                        others = boxes[near & (np.arange(len(boxes)) != pos[int(arr[sl[t], 3])])]
                        good[t] = _clear(cb[sl[t]:sl[t] + 1], others, gap)[0]
                    if good.any():
                        t = int(sl[int(np.argmax(good))])
                        sup = int(arr[t, 3])
                        return (int(arr[t, 0]), int(arr[t, 1]), int(arr[t, 2])), (
                            None if sup < 0 else sup), bool(arr[t, 4])
            if not len(boxes) or near.all():
                break
            radius *= 3
    return None


def _on_top(q: np.ndarray, k: int, oc: list[int], lo_i: np.ndarray, hi_i: np.ndarray,
            cmin: list[int], cmax: list[int], mu: int) -> list[tuple[int, int, int, int, int]]:
    """Candidates on the top of box ``q`` (part k): inside its top face, nearest to ``oc``
    (may carry), and where it was if its centre is over the top by ``mu`` (overhanging:
    it then carries nothing, since what it carried could topple it)."""
    z = -(-(int(q[5]) - int(lo_i[2])) // 2)
    if not cmin[2] <= z <= cmax[2]:
        return []
    out = []
    rng = [(-(-(int(q[2 * a]) - int(lo_i[a])) // 2), (int(q[2 * a + 1]) - int(hi_i[a])) // 2)
           for a in range(2)]
    xy = None
    if all(lo_c <= hi_c for lo_c, hi_c in rng):
        xy = tuple(min(max(oc[a], rng[a][0]), rng[a][1]) for a in range(2))
        if all(cmin[a] <= xy[a] <= cmax[a] for a in range(2)):
            out.append((xy[0], xy[1], z, k, 1))
    if xy != (oc[0], oc[1]) and all(int(q[2 * a]) + mu <= 2 * oc[a] <= int(q[2 * a + 1]) - mu
                                    for a in range(2)):
        out.append((oc[0], oc[1], z, k, 0))
    return out


def room_proof(inst: Instance) -> str | None:
    """A proof that no layout of these parts satisfies workspace, no_overlap and gravity
    together, or None. A part longer along an axis than the workspace (with eps) fits
    nowhere: its extent does not change when it moves, for a yawed box or a cylinder too
    (their enclosing boxes are rounded outward by less than 1 U a side, so 2 U are given
    back). For axis-aligned boxes, two parts that do not overlap are apart by at least -eps
    along some axis, so the boxes shrunk by eps/2 on every face are disjoint and lie in the
    workspace grown by eps/2. Their volume must fit; when no part can rest on another (two
    heights exceed the workspace's) and there is one surface, so must their footprints,
    less the keep-out boxes that cover the parts' whole height (disjoint ones only)."""
    n = inst.n
    if n == 0:
        return None
    ws = inst.zones["workspace"]
    assert isinstance(ws, BoxU)
    eps = inst.eps
    b = inst.boxes.astype(np.int64)
    size = b[:, 1::2] - b[:, 0::2]
    room = [ws.hi[a] - ws.lo[a] + eps for a in range(3)]
    kernel = inst.kernel()
    slack = np.where(kernel.plain_mask(), 0, 2)  # outward rounding of an enclosing box
    for a, ax in enumerate("xyz"):
        big = np.nonzero(size[:, a] - (slack if a < 2 else 0) - eps > room[a])[0]
        if len(big):
            i = int(big[0])
            return (f"{inst.ids[i]} is {float(size[i, a] * g.U):.4f} m along {ax}; the "
                    f"workspace is {float((ws.hi[a] - ws.lo[a]) * g.U):.4f} m")
    # the bounds below need the boxes to be the parts themselves: a yaw even a hair off a
    # quarter turn has a larger (and outward-rounded) enclosing box, which would prove too
    # much
    if not kernel.boxes_are_parts:
        return None
    shrunk = np.maximum(size - eps, 0)
    area = _area_proof(inst, size, shrunk, room)
    if area is not None:
        return area
    need_v = float((shrunk[:, 0] * shrunk[:, 1] * shrunk[:, 2]).sum()) * float(g.U) ** 3
    have_v = float(room[0] * room[1] * room[2]) * float(g.U) ** 3
    if need_v > have_v:
        return (f"{n} parts need {need_v:.4f} m³ (their boxes less the contact tolerance); "
                f"the workspace holds {have_v:.4f} m³")
    return None


def _area_proof(inst: Instance, size: np.ndarray, shrunk: np.ndarray, room: list[int]
                ) -> str | None:
    """The footprint bound of :func:`room_proof` (no part can rest on another, one
    surface), or None."""
    n, eps = inst.n, inst.eps
    ws = inst.zones["workspace"]
    assert isinstance(ws, BoxU)
    u2 = float(g.U) ** 2
    surfaces = sorted({z for z in inst.surfaces.values() if ws.lo[2] - eps <= z <= ws.hi[2]})
    hs = np.sort(size[:, 2])
    # i on j: i's top >= ws.lo - eps + hj + hi - 2 eps, at most ws.hi + eps
    stackable = n >= 2 and int(hs[0] + hs[1]) <= ws.hi[2] - ws.lo[2] + 3 * eps
    if stackable or len(surfaces) != 1 or int(hs[0]) <= 3 * eps:
        return None
    s = surfaces[0]
    h_min = int(hs[0])
    area_ws = room[0] * room[1]
    zones: list[tuple[list[int], list[int]]] = []
    for name in inst.keepouts:
        z = inst.zones[name]
        if isinstance(z, BoxU) and z.lo[2] <= s and z.hi[2] >= s + h_min:
            # shrunk by eps/2 (rounded up), clipped to the grown workspace (rounded in)
            lo = [max(z.lo[a] + -(-eps // 2), ws.lo[a] - eps // 2) for a in range(2)]
            hi = [min(z.hi[a] - -(-eps // 2), ws.hi[a] + eps // 2) for a in range(2)]
            if all(hi[a] > lo[a] for a in range(2)):
                if all(any(lo[a] >= h2[a] or hi[a] <= l2[a] for a in range(2))
                       for l2, h2 in zones):
                    zones.append((lo, hi))
    blocked = sum((hi[0] - lo[0]) * (hi[1] - lo[1]) for lo, hi in zones)
    need_a = float((shrunk[:, 0] * shrunk[:, 1]).sum()) * u2
    free_a = float(area_ws - blocked) * u2
    if need_a > free_a:
        kinds = sorted(set(inst.types))
        what = f"{n} {kinds[0]}s" if len(kinds) == 1 else f"{n} parts"
        ko = f", keep-outs take {float(blocked) * u2:.4f} m²" if blocked else ""
        return (f"{what} need {need_a:.4f} m² of surface (footprints less the contact "
                f"tolerance); {free_a:.4f} m² is free (workspace "
                f"{float(area_ws) * u2:.4f} m²{ko}), and no part can rest on another "
                f"(the workspace is {float((ws.hi[2] - ws.lo[2]) * g.U):.4f} m high)")
    return None


def apply(layout: Layout, centres: dict[int, tuple[int, int, int]]) -> Layout:
    """The layout with the placed parts at their new centres (0.1 mm), order dropped."""
    pos = np.asarray(layout.pos, dtype=np.float64).copy()
    for i, c in centres.items():
        pos[i] = [float(Fraction(int(v), 10000)) for v in c]
    return dataclasses.replace(layout, pos=pos, order=None)


def instance_of(cell: Cell, layout: Layout) -> Instance:
    """The layout's instance without its order (placement ignores the order)."""
    return build_instance(cell, layout.with_order(None))
