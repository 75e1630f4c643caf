"""The equilibrium LP of one structure (rigid-block equilibrium with a centre-of-mass margin).

:mod:`cellspec.solver.stability` decides forests exactly and hands every other structure
here. The LP is built as a sparse matrix with numpy (triplets, no per-coefficient Python
objects of the solver's expression API) and solved by GLOP through OR-Tools' model-builder
helper; measured on the structures of ``bench/physics_agreement.py`` this is about three
times faster than GLOP's ``pywraplp`` API and twice as fast as HiGHS through the same
helper (see the README, "Does it stand?").

**Forces.** Every horizontal contact (a part's bottom on a surface or on another part's
top) carries a vertical normal force ``f >= 0`` at each corner of its rectangle; a contact
narrower than the margin (a sliver) is kept, its corners as they are. A structure with
**side contacts** (vertical faces of two placed parts touching over an area) also gets, at
each corner of each such face, a horizontal normal force ``n >= 0`` (pushing only) and no
friction, and, at each horizontal contact, a friction force at its centre inside the
diamond ``|t_x| + |t_y| <= mu * sum f`` (inside Coulomb's cone). A frictionless side face
cannot clamp: with no friction it carries no weight, so a part that tips away from its
neighbour is not held by it; a part that leans on its neighbour is (the two roof cubes of
a bridge that meet in the middle). Structures without side contacts keep vertical forces
only (friction there can only act through couples, which physics does not reliably
realise).

**Margin.** Every part's weight acts at its box centre moved by ``t * (sx, sy)`` for the
four load cases ``sx, sy in {-1, +1}``, all in one LP (one copy of the forces per case)
that maximises ``t`` up to the margin M. The loads under which the structure stands form a
convex set (the projection of a polyhedron), so standing at the four corners of the square
``[-M, M]^2`` means standing for every common shift in it, and the square contains every
horizontal shift of length at most M: at least as strict as moving every centre of mass by
M in any horizontal direction; for axis-aligned contact edges exactly that strict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRAVITY = 9.81
CASES = ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))


class LPLimit(Exception):
    """GLOP did not finish within the time limit."""


@dataclass
class Group:
    """One structure as the LP sees it (metres, kilograms; contact data already selected).

    ``hz`` rows: (upper local index, lower local index or -1 for fixed, x0, x1, y0, y1, z);
    ``sd`` rows: (low-side local index, high-side local index, axis 0|1, u0, u1, z0, z1,
    plane) where the face lies at coordinate ``plane`` on ``axis`` and spans [u0, u1] on
    the other horizontal axis."""

    centres: np.ndarray  # (m, 3)
    masses: np.ndarray  # (m,)
    balanced: np.ndarray  # (m,) bool: has a contact below (else held fixed)
    hz: np.ndarray  # (k, 7)
    sd: np.ndarray  # (s, 8)
    friction: float


class _Triplets:
    """Sparse matrix under construction: rows, columns, values."""

    def __init__(self) -> None:
        self.r: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.v: list[np.ndarray] = []

    def add(self, r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        r, c, v = np.broadcast_arrays(np.asarray(r), np.asarray(c), np.asarray(v, dtype=float))
        self.r.append(r.ravel())
        self.c.append(c.ravel())
        self.v.append(v.ravel())

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.r:
            z = np.zeros(0, dtype=np.int64)
            return z, z, np.zeros(0)
        return (np.concatenate(self.r).astype(np.int64), np.concatenate(self.c).astype(np.int64),
                np.concatenate(self.v))


def _corners(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray):
    """The four corners (k, 4) of rectangles [a0, a1] x [b0, b1]."""
    a = np.stack([a0, a1, a0, a1], axis=1)
    b = np.stack([b0, b0, b1, b1], axis=1)
    return a, b


def _block(g: Group) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray,
                              np.ndarray, np.ndarray, int]:
    """One load case's equilibrium block: triplets (rows, cols, vals) of the equations,
    its number of columns, the right-hand side without the shift, the shift coefficients
    per row for (sx, sy), and the friction inequality triplets and count.

    Rows per balanced part: Fz, Mx, My (vertical model) or Fx, Fy, Fz, Mx, My, Mz (with
    side contacts); moments about the part's own centre."""
    full = len(g.sd) > 0
    neq = 6 if full else 3
    m = len(g.masses)
    row_of = np.full(m, -1, dtype=np.int64)
    bal = np.nonzero(g.balanced)[0]
    row_of[bal] = np.arange(len(bal)) * neq
    nrows = len(bal) * neq
    iz, imx, imy = (2, 3, 4) if full else (0, 1, 2)
    T = _Triplets()
    F = _Triplets()  # friction rows: sum t - mu sum f <= 0
    col = 0
    hz = g.hz
    k = len(hz)
    if k:
        up = hz[:, 0].astype(np.int64)
        lo = hz[:, 1].astype(np.int64)
        cx, cy = _corners(hz[:, 2], hz[:, 3], hz[:, 4], hz[:, 5])  # (k, 4)
        fcol = col + np.arange(4 * k).reshape(k, 4)
        col += 4 * k
        for body, sign in ((up, 1.0), (lo, -1.0)):
            ok = (body >= 0)
            ok[ok] = g.balanced[body[ok]]
            if not ok.any():
                continue
            b = body[ok]
            base = row_of[b][:, None]
            c = g.centres[b]
            dx = cx[ok] - c[:, 0:1]
            dy = cy[ok] - c[:, 1:2]
            fc = fcol[ok]
            T.add(base + iz, fc, sign)
            T.add(base + imx, fc, sign * dy)
            T.add(base + imy, fc, -sign * dx)
        if full:
            tcol = col + np.arange(4 * k).reshape(k, 4)  # tx+, tx-, ty+, ty-
            col += 4 * k
            xm = (hz[:, 2] + hz[:, 3]) / 2
            ym = (hz[:, 4] + hz[:, 5]) / 2
            zc = hz[:, 6]
            for body, sign in ((up, 1.0), (lo, -1.0)):
                ok = (body >= 0)
                ok[ok] = g.balanced[body[ok]]
                if not ok.any():
                    continue
                b = body[ok]
                base = row_of[b]
                c = g.centres[b]
                dx, dy, dz = xm[ok] - c[:, 0], ym[ok] - c[:, 1], zc[ok] - c[:, 2]
                tc = tcol[ok]
                for j, (ax, sg) in enumerate(((0, 1.0), (0, -1.0), (1, 1.0), (1, -1.0))):
                    s = sign * sg
                    if ax == 0:  # F = (t, 0, 0): M = (0, dz t, -dy t)
                        T.add(base + 0, tc[:, j], s)
                        T.add(base + 4, tc[:, j], s * dz)
                        T.add(base + 5, tc[:, j], -s * dy)
                    else:  # F = (0, t, 0): M = (-dz t, 0, dx t)
                        T.add(base + 1, tc[:, j], s)
                        T.add(base + 3, tc[:, j], -s * dz)
                        T.add(base + 5, tc[:, j], s * dx)
            fr = np.arange(k)
            F.add(fr[:, None], tcol, 1.0)
            F.add(fr[:, None], fcol, -g.friction)
    if full:
        sd = g.sd
        s_n = len(sd)
        a = sd[:, 0].astype(np.int64)
        b = sd[:, 1].astype(np.int64)
        axis = sd[:, 2].astype(np.int64)
        cu, cz = _corners(sd[:, 3], sd[:, 4], sd[:, 5], sd[:, 6])  # (s, 4)
        ncol = col + np.arange(4 * s_n).reshape(s_n, 4)
        col += 4 * s_n
        plane = sd[:, 7][:, None]
        for body, sign in ((b, 1.0), (a, -1.0)):  # the face pushes b along +axis, a along -axis
            ok = g.balanced[body]
            if not ok.any():
                continue
            bb = body[ok]
            base = row_of[bb][:, None]
            c = g.centres[bb]
            ax = axis[ok][:, None]
            # the point: along axis at plane, the other horizontal axis at u, height z
            px = np.where(ax == 0, plane[ok], cu[ok])
            py = np.where(ax == 0, cu[ok], plane[ok])
            dx, dy, dz = px - c[:, 0:1], py - c[:, 1:2], cz[ok] - c[:, 2:3]
            nc = ncol[ok]
            xs = np.broadcast_to(ax == 0, nc.shape)
            # along x: F = (n, 0, 0): M = (0, dz n, -dy n); along y: F = (0, n, 0): M = (-dz n, 0, dx n)
            r_f = np.where(xs, 0, 1)
            T.add(base + r_f, nc, sign)
            T.add(np.where(xs, base + 4, base + 3), nc, np.where(xs, sign * dz, -sign * dz))
            T.add(base + 5, nc, np.where(xs, -sign * dy, sign * dx))
    r, c, v = T.arrays()
    rhs = np.zeros(nrows)
    shift_x = np.zeros(nrows)  # coefficient of the shift t per row, times sx
    shift_y = np.zeros(nrows)
    w = g.masses[bal] * GRAVITY
    rb = row_of[bal]
    rhs[rb + iz] = w
    # sum m_contacts = (W dy, -W dx, 0) with d = t (sx, sy): rows A x - (W sy t) = 0 (Mx),
    # A x - (-W sx t) = 0 (My)
    shift_y[rb + imx] = w
    shift_x[rb + imy] = -w
    fr_, fc_, fv_ = F.arrays()
    return r, c, v, col, rhs, shift_x, shift_y, np.stack([fr_, fc_]), fv_, k if full else 0


def solve(g: Group, margin: float, time_limit: float) -> float | None:
    """The largest shift t <= margin (m) at which the structure stands in all four load
    cases, or None when it does not stand even unshifted."""
    from ortools.linear_solver.python import model_builder_helper as mbh

    r, c, v, ncol, rhs, sx_c, sy_c, fidx, fval, nfr = _block(g)
    nrows = len(rhs)
    model = mbh.ModelBuilderHelper()
    tvar = mbh.Variable(model, 0.0, float(margin), False, "t")
    model.set_var_objective_coefficient(tvar.index, 1.0)
    model.set_maximize(True)
    order = np.lexsort((c, r))
    r, c, v = r[order], c[order], v[order]
    ptr = np.searchsorted(r, np.arange(nrows + 1))
    fo = np.lexsort((fidx[1], fidx[0]))
    fr_, fc_, fv_ = fidx[0][fo], fidx[1][fo], fval[fo]
    fptr = np.searchsorted(fr_, np.arange(nfr + 1))
    for sx, sy in CASES:
        xs = [mbh.Variable(model, 0.0, np.inf, False, "") for _ in range(ncol)]
        for i in range(nrows):
            a, b = int(ptr[i]), int(ptr[i + 1])
            ct = model.add_linear_constraint()
            model.set_constraint_lower_bound(ct, float(rhs[i]))
            model.set_constraint_upper_bound(ct, float(rhs[i]))
            vs = [xs[j] for j in c[a:b].tolist()]
            cs = v[a:b].tolist()
            sh = sx * sx_c[i] + sy * sy_c[i]
            if sh:
                vs.append(tvar)
                cs.append(-sh)  # rows: A x - sh t = rhs
            model.add_terms_to_constraint(ct, vs, cs)
        for i in range(nfr):
            a, b = int(fptr[i]), int(fptr[i + 1])
            ct = model.add_linear_constraint()
            model.set_constraint_lower_bound(ct, -np.inf)
            model.set_constraint_upper_bound(ct, 0.0)
            model.add_terms_to_constraint(ct, [xs[j] for j in fc_[a:b].tolist()],
                                          fv_[a:b].tolist())
    solver = mbh.ModelSolverHelper("glop")
    solver.set_time_limit_in_seconds(time_limit)
    solver.solve(model)
    status = solver.status()
    if status == mbh.SolveStatus.OPTIMAL:
        return float(solver.objective_value())
    if status == mbh.SolveStatus.INFEASIBLE:
        return None
    raise LPLimit(str(status))


def residuals(g: Group, shift: tuple[float, float], time_limit: float) -> np.ndarray:
    """Per part, how far from balance the best forces leave it with every centre of mass
    moved by ``shift`` (m): the weighted sum of equation slacks (moments weighted 20/m, so
    5 cm of arm counts like 1 N); names the parts that fall."""
    from ortools.linear_solver.python import model_builder_helper as mbh

    r, c, v, ncol, rhs, sx_c, sy_c, fidx, fval, nfr = _block(g)
    nrows = len(rhs)
    neq = 6 if len(g.sd) else 3
    moment_rows = {3, 4, 5} if neq == 6 else {1, 2}
    model = mbh.ModelBuilderHelper()
    model.set_maximize(False)
    order = np.lexsort((c, r))
    r, c, v = r[order], c[order], v[order]
    ptr = np.searchsorted(r, np.arange(nrows + 1))
    xs = [mbh.Variable(model, 0.0, np.inf, False, "") for _ in range(ncol)]
    slacks = []
    for i in range(nrows):
        a, b = int(ptr[i]), int(ptr[i + 1])
        ct = model.add_linear_constraint()
        val = float(rhs[i] + shift[0] * sx_c[i] + shift[1] * sy_c[i])
        model.set_constraint_lower_bound(ct, val)
        model.set_constraint_upper_bound(ct, val)
        sp = mbh.Variable(model, 0.0, np.inf, False, "")
        sn = mbh.Variable(model, 0.0, np.inf, False, "")
        wgt = 20.0 if (i % neq) in moment_rows else 1.0
        model.set_var_objective_coefficient(sp.index, wgt)
        model.set_var_objective_coefficient(sn.index, wgt)
        slacks.append((wgt, sp, sn))
        model.add_terms_to_constraint(ct, [xs[j] for j in c[a:b].tolist()] + [sp, sn],
                                      v[a:b].tolist() + [1.0, -1.0])
    fo = np.lexsort((fidx[1], fidx[0]))
    fr_, fc_, fv_ = fidx[0][fo], fidx[1][fo], fval[fo]
    fptr = np.searchsorted(fr_, np.arange(nfr + 1))
    for i in range(nfr):
        a, b = int(fptr[i]), int(fptr[i + 1])
        ct = model.add_linear_constraint()
        model.set_constraint_lower_bound(ct, -np.inf)
        model.set_constraint_upper_bound(ct, 0.0)
        model.add_terms_to_constraint(ct, [xs[j] for j in fc_[a:b].tolist()], fv_[a:b].tolist())
    solver = mbh.ModelSolverHelper("glop")
    solver.set_time_limit_in_seconds(time_limit)
    solver.solve(model)
    if solver.status() != mbh.SolveStatus.OPTIMAL:
        raise LPLimit(str(solver.status()))
    per_row = np.array([w * (solver.variable_value(p.index) + solver.variable_value(n.index))
                        for w, p, n in slacks])
    out = np.zeros(len(g.masses))
    bal = np.nonzero(g.balanced)[0]
    if len(bal):
        out[bal] = per_row.reshape(len(bal), neq).sum(axis=1)
    return out


def min_shift(g: Group, time_limit: float) -> float | None:
    """The smallest common shift s (m, max-norm) of every centre of mass at which the
    structure stands (one load case, the shift free): how far beyond its contacts its
    weight acts; None when no shift makes it stand (it slides or needs more than 5 cm)."""
    from ortools.linear_solver.python import model_builder_helper as mbh

    r, c, v, ncol, rhs, sx_c, sy_c, fidx, fval, nfr = _block(g)
    nrows = len(rhs)
    model = mbh.ModelBuilderHelper()
    model.set_maximize(False)
    s = mbh.Variable(model, 0.0, 0.05, False, "s")
    dx = mbh.Variable(model, -0.05, 0.05, False, "dx")
    dy = mbh.Variable(model, -0.05, 0.05, False, "dy")
    model.set_var_objective_coefficient(s.index, 1.0)
    for d in (dx, dy):
        for sg in (1.0, -1.0):
            ct = model.add_linear_constraint()
            model.set_constraint_lower_bound(ct, -np.inf)
            model.set_constraint_upper_bound(ct, 0.0)
            model.add_terms_to_constraint(ct, [d, s], [sg, -1.0])
    order = np.lexsort((c, r))
    r, c, v = r[order], c[order], v[order]
    ptr = np.searchsorted(r, np.arange(nrows + 1))
    xs = [mbh.Variable(model, 0.0, np.inf, False, "") for _ in range(ncol)]
    for i in range(nrows):
        a, b = int(ptr[i]), int(ptr[i + 1])
        ct = model.add_linear_constraint()
        model.set_constraint_lower_bound(ct, float(rhs[i]))
        model.set_constraint_upper_bound(ct, float(rhs[i]))
        vs = [xs[j] for j in c[a:b].tolist()]
        cs = v[a:b].tolist()
        if sx_c[i]:
            vs.append(dx)
            cs.append(-float(sx_c[i]))
        if sy_c[i]:
            vs.append(dy)
            cs.append(-float(sy_c[i]))
        model.add_terms_to_constraint(ct, vs, cs)
    fo = np.lexsort((fidx[1], fidx[0]))
    fr_, fc_, fv_ = fidx[0][fo], fidx[1][fo], fval[fo]
    fptr = np.searchsorted(fr_, np.arange(nfr + 1))
    for i in range(nfr):
        a, b = int(fptr[i]), int(fptr[i + 1])
        ct = model.add_linear_constraint()
        model.set_constraint_lower_bound(ct, -np.inf)
        model.set_constraint_upper_bound(ct, 0.0)
        model.add_terms_to_constraint(ct, [xs[j] for j in fc_[a:b].tolist()], fv_[a:b].tolist())
    solver = mbh.ModelSolverHelper("glop")
    solver.set_time_limit_in_seconds(time_limit)
    solver.solve(model)
    st = solver.status()
    if st == mbh.SolveStatus.OPTIMAL:
        return float(solver.objective_value())
    if st == mbh.SolveStatus.INFEASIBLE:
        return None
    raise LPLimit(str(st))
