"""Static stability of block structures: the meaning of the built-in relation ``stable(p)``.

A structure (parts connected by contact patches) is stable when contact forces exist that
hold every part in static equilibrium under gravity (rigid-block equilibrium, a linear
feasibility problem solved with OR-Tools' GLOP):

* contact patches: a part's bottom on a surface (its footprint), a part's bottom on
  another part's top (``supports``: the footprint overlap) and two side faces touching
  (gap at most eps, overlapping by more than eps on the other two axes);
* at each corner of each patch a normal force ``f >= 0`` (pushing only) and two
  tangential forces bounded by the friction pyramid ``|t| <= mu f``;
* for every part: the contact forces balance its weight ``m g`` (acting at the box
  centre, uniform density) and their moments about the centre vanish.

``mu`` is the cell's ``friction`` (default 0.5); ``m`` the part type's mass (default: the
box volume times 1000 kg/m^3; only ratios matter). The answer is computed once per check,
in floating point on the integer grid's exact coordinates, and fed to clingo as facts
``stable(P)``; the reference evaluator reads the same mask. As in every rigid-block model,
a block wedged between two side neighbours may be held by friction alone.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from cellspec.solver import geometry as g

DEFAULT_FRICTION = Fraction(1, 2)
GRAVITY = 9.81
AX = {"x": 0, "y": 1, "z": 2}


def _patches(b: np.ndarray, eps: int, surfaces: list[int]) -> list[tuple[int, int, int, list]]:
    """(lower or first part, upper or second part (-1: ground), normal axis, corners in U)."""
    out: list[tuple[int, int, int, list]] = []
    n = len(b)
    for p in range(n):
        if any(abs(int(b[p, 4]) - z) <= eps for z in surfaces):
            x0, x1, y0, y1 = (int(v) for v in b[p, :4])
            z = int(b[p, 4])
            out.append((-1, p, 2, [(x0, y0, z), (x1, y0, z), (x0, y1, z), (x1, y1, z)]))
    i, j = g.broad_phase(b, eps)
    for a, c in zip(i.tolist(), j.tolist(), strict=True):
        for lo, hi in ((a, c), (c, a)):
            if g.supports(b[lo], b[hi], eps):
                x0, x1 = max(b[lo, 0], b[hi, 0]), min(b[lo, 1], b[hi, 1])
                y0, y1 = max(b[lo, 2], b[hi, 2]), min(b[lo, 3], b[hi, 3])
                z = int(b[hi, 4])
                out.append((lo, hi, 2, [(int(x0), int(y0), z), (int(x1), int(y0), z),
                                        (int(x0), int(y1), z), (int(x1), int(y1), z)]))
        for ax in (0, 1):  # side contact: faces within eps along ax, overlap > eps otherwise
            others = [k for k in range(3) if k != ax]
            ov = [min(b[a, 2 * k + 1], b[c, 2 * k + 1]) - max(b[a, 2 * k], b[c, 2 * k])
                  for k in others]
            if min(ov) <= eps:
                continue
            for first, second in ((a, c), (c, a)):
                gap = int(b[second, 2 * ax]) - int(b[first, 2 * ax + 1])
                if -eps <= gap <= eps and b[first, 2 * ax] < b[second, 2 * ax]:
                    face = int(b[second, 2 * ax])
                    r = [(max(b[a, 2 * k], b[c, 2 * k]), min(b[a, 2 * k + 1], b[c, 2 * k + 1]))
                         for k in others]
                    pts = []
                    for u in r[0]:
                        for v in r[1]:
                            pt = [0, 0, 0]
                            pt[ax], pt[others[0]], pt[others[1]] = face, int(u), int(v)
                            pts.append(tuple(pt))
                    out.append((first, second, ax, pts))
    return out


def stable_mask(boxes: np.ndarray, eps: int, surfaces: list[int], masses: np.ndarray,
                friction: float) -> np.ndarray:
    """For every part: its structure admits static equilibrium (see the module doc)."""
    from ortools.linear_solver import pywraplp

    from cellspec.solver.graph import components

    n = len(boxes)
    ok = np.zeros(n, dtype=bool)
    if n == 0:
        return ok
    patches = _patches(boxes, eps, surfaces)
    rows = [p[0] for p in patches if p[0] >= 0]
    cols = [p[1] for p in patches if p[0] >= 0]
    comp = components(n, rows, cols)
    by_comp: dict[int, list[int]] = {}
    for k, pt in enumerate(patches):
        by_comp.setdefault(int(comp[pt[1]]), []).append(k)
    scale = float(g.U)  # metres per unit
    centre = (boxes[:, 0::2] + boxes[:, 1::2]) / 2.0 * scale
    for cid in range(int(comp.max()) + 1):
        members = np.nonzero(comp == cid)[0]
        solver = pywraplp.Solver.CreateSolver("GLOP")
        # per part: 3 force sums, 3 moment sums
        eq = {int(p): [[] for _ in range(6)] for p in members}
        for k in by_comp.get(cid, []):
            lo, hi, ax, pts = patches[k]
            t_axes = [a for a in range(3) if a != ax]
            for pt in pts:
                r = np.array(pt, dtype=np.float64) * scale
                f = solver.NumVar(0, solver.infinity(), "")
                tv = []
                for _ in t_axes:
                    t = solver.NumVar(-solver.infinity(), solver.infinity(), "")
                    solver.Add(t <= friction * f)
                    solver.Add(-t <= friction * f)
                    tv.append(t)
                comps = [None, None, None]
                comps[ax] = f
                comps[t_axes[0]], comps[t_axes[1]] = tv[0], tv[1]
                for body, sign in ((hi, 1.0), (lo, -1.0)):  # on hi: +F, on lo: -F
                    if body < 0:
                        continue
                    d = r - centre[body]
                    e = eq[body]
                    for a in range(3):
                        e[a].append((sign, comps[a]))
                    # moment d x F
                    e[3].append((sign * d[1], comps[2]))
                    e[3].append((-sign * d[2], comps[1]))
                    e[4].append((sign * d[2], comps[0]))
                    e[4].append((-sign * d[0], comps[2]))
                    e[5].append((sign * d[0], comps[1]))
                    e[5].append((-sign * d[1], comps[0]))
        feasible = True
        for p, e in eq.items():
            w = float(masses[p]) * GRAVITY
            for a in range(6):
                rhs = w if a == 2 else 0.0
                if not e[a]:
                    if rhs != 0.0:
                        feasible = False
                    continue
                solver.Add(solver.Sum([c * v for c, v in e[a] if c != 0.0]) == rhs)
        if feasible:
            feasible = solver.Solve() == pywraplp.Solver.OPTIMAL
        ok[members] = feasible
    return ok


def instance_stable(inst) -> np.ndarray:  # noqa: ANN001 (Instance, imported lazily)
    """``stable_mask`` of an :class:`~cellspec.solver.instance.Instance` (cached on it)."""
    cached = getattr(inst, "_stable_cache", None)
    if cached is not None:
        return cached
    masses = inst.masses
    if masses is None:
        vol = np.prod(inst.size_m, axis=1)
        masses = vol * 1000.0
    mu = float(inst.friction if inst.friction is not None else DEFAULT_FRICTION)
    out = stable_mask(inst.boxes, inst.eps, sorted(set(inst.surfaces.values())), masses, mu)
    object.__setattr__(inst, "_stable_cache", out)
    return out
