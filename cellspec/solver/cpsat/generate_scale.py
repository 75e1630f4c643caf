"""Generation at scale (issue 29.4): a large packing placed constructively, not by CP-SAT.

A design that is one ``packing(n=N, ...)`` of at least ``SCALE_PARTS`` parts (no other
structure, no constraint besides its region and ``minimize``) is built on the lattice the
CP-SAT model uses (columns a finger clearance apart inside the region, parts stacked
straight up from the first surface): ``minimize height`` (the default) fills the columns
level by level, ``minimize footprint`` fills them one by one. A column stops below its
first level that leaves the workspace or enters a keep-out. The order is level by level
(every support before what it carries; no column blocks another's grip), and clingo
re-verifies the layout. Not proved optimal: ``feasible``. When the lattice holds fewer than
N parts the general path runs (it can prove the packing impossible).
"""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np

from cellspec.core import geometry as g
from cellspec.core.status import Status
from cellspec.dsl.design import DesignSpec
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.cpsat.blocked import with_blocked
from cellspec.solver.cpsat.results import Step
from cellspec.solver.instance import BoxU, cell_u

SCALE_PARTS = 200


def _lattice(lo: int, hi: int, size: int, pitch: int) -> list[int]:
    """Centres (U, even: on the 0.1 mm grid) of parts of ``size`` in [lo, hi], ``pitch``
    apart."""
    c = lo + size // 2
    c += c % 2
    out = []
    while c + size // 2 <= hi:
        out.append(c)
        c += pitch
    return out


def scale_packing(cell: Cell, design: DesignSpec, time_limit: float) -> object | None:
    """The design built constructively (a GenerateResult), or None when it is not a large
    plain packing or the lattice lacks room (then the general path decides)."""
    from cellspec.solver.cpsat.generate import GenerateResult, PlacedStructure, _structures
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    if len(design.structures) != 1 or design.constraints:
        return None
    spec = design.structures[0]
    if spec.kind != "packing" or spec.constraints or not cell.surfaces:
        return None
    n = int(spec.params.get("n", 0))
    if n < SCALE_PARTS:
        return None
    st = _structures(cell, design)[0]
    sx, sy, sz = st.s
    cu = cell_u(cell)
    ws = cu.zones["workspace"]
    assert isinstance(ws, BoxU)
    lo, hi = list(ws.lo), list(ws.hi)
    for axis, a, b in spec.region:
        k = "xyz".index(axis)
        lo[k], hi[k] = max(lo[k], g.to_u_int(a)), min(hi[k], g.to_u_int(b))
    gap = cu.eps + 2
    grip = cell.gripper_params("parallel")
    if grip.opening is not None:
        gap = max(gap, (g.to_u_int(grip.opening) - min(sx, sy) + 1) // 2 + 1)
    gap += gap % 2
    z0 = g.to_u_int(cell.surfaces[0].z)
    xs = _lattice(lo[0], hi[0], sx, sx + gap)
    ys = _lattice(lo[1], hi[1], sy, sy + gap)
    levels = max(0, (ws.hi[2] - z0) // sz)
    cols = [(x, y) for y in ys for x in xs]
    if not cols or not levels:
        return None
    cap = np.full(len(cols), levels, dtype=np.int64)
    for name in cu.keepouts:  # a column stops below its first level inside a keep-out
        z = cu.zones[name]
        for lv in range(levels):
            box = np.array([[x - sx // 2, x + sx // 2, y - sy // 2, y + sy // 2,
                             z0 + lv * sz, z0 + (lv + 1) * sz] for x, y in cols],
                           dtype=np.int64)
            hit = g.intersects_box(box, z.lo, z.hi, 0) if isinstance(z, BoxU) else \
                g.intersects_half(box, z, 0)
            cap = np.where(hit & (cap > lv), lv, cap)
    if int(cap.sum()) < n:
        return None
    items: list[tuple[int, int, int]] = []  # (column, level) in placement order
    if spec.minimize == "footprint":
        for c in range(len(cols)):
            items.extend((c, lv, 0) for lv in range(int(cap[c])))
        items = items[:n]
        items.sort(key=lambda t: (t[1], t[0]))  # placed level by level
    else:
        for lv in range(levels):
            items.extend((c, lv, 0) for c in range(len(cols)) if cap[c] > lv)
        items = items[:n]
    ids = [f"{st.name}_{k + 1}" for k in range(len(items))]
    pos = np.array([[float(Fraction(cols[c][0], g.U_PER_M)), float(Fraction(cols[c][1],
                                                                             g.U_PER_M)),
                     float(Fraction(z0 + sz // 2 + lv * sz, g.U_PER_M))]
                    for c, lv, _ in items], dtype=np.float64).reshape(-1, 3)
    layout = Layout(ids=tuple(ids), types=(st.ptype,) * len(ids), pos=pos,
                    size=np.full((len(ids), 3), np.nan), grippers=(None,) * len(ids),
                    order=tuple(ids), path=f"<design {design.name}>")
    cell2 = with_blocked(cell, ())
    v = check(cell2, layout, timeout=max(0.1, time_limit - (time.perf_counter() - t0)))
    if v.verdict != Status.PASS:
        return None
    kind = cell.default_gripper.kind
    steps = tuple(Step(part=p, gripper=kind, axis="x" if kind == "parallel" else None)
                  for p in ids)
    used = {c for c, _, _ in items}
    px = [cols[c][0] for c in used]
    py = [cols[c][1] for c in used]
    height = z0 + max(lv for _, lv, _ in items) * sz + sz
    placed = PlacedStructure(name=st.name, kind="packing", parts=len(ids),
                             centre=(float(Fraction((min(px) + max(px)) // 2, g.U_PER_M)),
                                     float(Fraction((min(py) + max(py)) // 2, g.U_PER_M))),
                             height=float(Fraction(height, g.U_PER_M)))
    return GenerateResult(status=Status.FEASIBLE, design=design.name, layout=layout.to_json(),
                          structures=(placed,), steps=steps, verdict=v,
                          seconds=time.perf_counter() - t0)
