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
import numpy.typing as npt

from cellspec.core.status import Reason, SolverLimit

GRAVITY = 9.81
CASES = ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))
SOLVER = "glop"  # OR-Tools model-builder backend ("highs" also works; bench compares them)
SOLVES = [0]  # LPs solved so far (the benchmark reads it)
# dual simplex without presolve: measured 2x faster on these small, dense LPs
PARAMS = {"glop": "use_dual_simplex: true, use_preprocessing: false",
          "highs": "output_flag=false"}  # HiGHS prints its banner on stdout without it
FAST_FILL = True  # with scipy installed, hand GLOP the whole sparse matrix at once ...
FAST_FILL_MIN = 50_000  # ... from this many coefficients (below, one call per coefficient,
# ~3.6 us each, costs less than importing scipy.sparse)
# When the first solve ends neither OPTIMAL nor INFEASIBLE (GLOP's dual simplex without
# presolve returns ABNORMAL at once on some dense heaps: issue 28), the same LP is solved
# again these ways, within what is left of the time limit (the first that decides wins):
RETRIES = (("glop", "use_preprocessing: true", "GLOP with presolve"),
           ("glop", "use_dual_simplex: false, use_preprocessing: true", "GLOP primal simplex"),
           ("highs", "output_flag=false", "HiGHS"))
# Coefficients below this (metres of lever arm, newtons) are float round-off of an exact
# zero (a contact corner on a part's centre line: 5.6e-17); they are dropped, which is
# what made GLOP's dual simplex return ABNORMAL on the dense heaps of issue 28.
TINY = 1e-12
ATTEMPTS = [0]  # LP solves that needed a retry so far (the benchmark and tests read it)


class LPLimit(SolverLimit):
    """No solver decided the LP: ``statuses`` says how each attempt ended (name, status)
    and ``timed_out`` whether the time limit ran out (else every attempt returned at once
    without an answer, e.g. ABNORMAL)."""

    def __init__(self, statuses: list[tuple[str, str]], timed_out: bool):
        self.statuses = statuses
        self.timed_out = timed_out
        super().__init__("; ".join(f"{n}: {st}" for n, st in statuses),
                         Reason.TIME_LIMIT if timed_out else Reason.SOLVER_FAILURE)

    def sentence(self) -> str:
        """'the LP solver returned ABNORMAL (GLOP dual simplex; retried: GLOP with presolve
        ABNORMAL, GLOP primal simplex ABNORMAL, HiGHS ...)'."""
        first = self.statuses[0][1] if self.statuses else "no status"
        tried = ", ".join(f"{n} {st}" for n, st in self.statuses[1:])
        more = f"; retried: {tried}" if tried else ""
        name = self.statuses[0][0] if self.statuses else SOLVER
        return f"the LP solver returned {first} ({name}{more})"


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
    # contact polygons (yawed boxes, cylinders: stability_shapes.with_polygons): the force
    # points of each ``hz`` row, (k, V) m, padded by repeats; None: the rectangles' corners
    px: np.ndarray | None = None
    py: np.ndarray | None = None


class _Triplets:
    """Sparse matrix under construction: rows, columns, values."""

    def __init__(self) -> None:
        self.r: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.v: list[np.ndarray] = []

    def add(self, r: npt.ArrayLike, c: npt.ArrayLike, v: npt.ArrayLike) -> None:
        """Append the triplets (r, c, v), broadcast together (a scalar value for all)."""
        rb, cb, vb = np.broadcast_arrays(np.asarray(r), np.asarray(c),
                                         np.asarray(v, dtype=float))
        self.r.append(rb.ravel())
        self.c.append(cb.ravel())
        self.v.append(vb.ravel())

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.r:
            z = np.zeros(0, dtype=np.int64)
            return z, z, np.zeros(0)
        return (np.concatenate(self.r).astype(np.int64), np.concatenate(self.c).astype(np.int64),
                np.concatenate(self.v))



def _in_balance(body: np.ndarray, balanced: np.ndarray) -> np.ndarray:
    """Rows whose body is a part (>= 0, not the table) held in balance by the LP."""
    ok = body >= 0
    ok[ok] = balanced[body[ok]]
    return ok


def _optimum(status: str, obj: float) -> float | None:
    """An LP's optimum; None when infeasible (it cannot stand). ``run`` raises LPLimit
    for every other status."""
    if status == "OPTIMAL":
        return obj
    assert status == "INFEASIBLE", status
    return None


def _status_name(status: object) -> str:
    """``SolveStatus.ABNORMAL`` -> ``ABNORMAL``."""
    return str(status).rsplit(".", 1)[-1]

def _corners(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray):
    """The four corners (k, 4) of rectangles [a0, a1] x [b0, b1]."""
    a = np.stack([a0, a1, a0, a1], axis=1)
    b = np.stack([b0, b0, b1, b1], axis=1)
    return a, b


@dataclass(frozen=True)
class _Rows:
    """Where one load case's equations go: the first row of each balanced part (-1 for
    the others), the row count, and the offsets of Fz, Mx and My within a part's rows."""

    row_of: np.ndarray
    bal: np.ndarray  # the balanced parts
    nrows: int
    iz: int
    imx: int
    imy: int


# one load case's block (see _block): rows, cols, vals, column count, rhs, shift_x, shift_y,
# friction (rows, cols) stacked, friction vals, friction row count
Block = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], int,
              npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64],
              npt.NDArray[np.int64], npt.NDArray[np.float64], int]


def _block(g: Group) -> Block:
    """One load case's equilibrium block: triplets (rows, cols, vals) of the equations,
    its number of columns, the right-hand side without the shift, the shift coefficients
    per row for (sx, sy), and the friction inequality triplets and count.

    Rows per balanced part: Fz, Mx, My (vertical model) or Fx, Fy, Fz, Mx, My, Mz (with
    side contacts); moments about the part's own centre. Columns in this order: the
    normal forces at the contacts' vertices, their friction forces, the side forces."""
    full = len(g.sd) > 0
    neq = 6 if full else 3
    m = len(g.masses)
    row_of = np.full(m, -1, dtype=np.int64)
    bal = np.nonzero(g.balanced)[0]
    row_of[bal] = np.arange(len(bal)) * neq
    rows = _Rows(row_of, bal, len(bal) * neq, *((2, 3, 4) if full else (0, 1, 2)))
    T = _Triplets()
    F = _Triplets()  # friction rows: sum t - mu sum f <= 0
    col = 0
    k = len(g.hz)
    if k:
        fcol = col + np.arange(_vertices(g) * k).reshape(k, -1)
        col += fcol.size
        _normal_forces(g, rows, T, fcol)
        if full:
            tcol = col + np.arange(4 * k).reshape(k, 4)  # tx+, tx-, ty+, ty-
            col += 4 * k
            _friction_forces(g, rows, T, F, fcol, tcol)
    if full:
        ncol = col + np.arange(4 * len(g.sd)).reshape(len(g.sd), 4)
        col += 4 * len(g.sd)
        _side_forces(g, rows, T, ncol)
    r, c, v = T.arrays()
    rhs, shift_x, shift_y = _loads(g, rows)
    fr_, fc_, fv_ = F.arrays()
    return r, c, v, col, rhs, shift_x, shift_y, np.stack([fr_, fc_]), fv_, k if full else 0


def _vertices(g: Group) -> int:
    """Vertices per horizontal contact: a rectangle's 4 corners or the polygons' V."""
    return 4 if g.px is None else int(g.px.shape[1])


def _normal_forces(g: Group, rows: _Rows, T: _Triplets, fcol: np.ndarray) -> None:
    """The normal force at each vertex of each horizontal contact: up on the upper part,
    down on the lower one (Fz and the moments it makes about each part's centre)."""
    hz = g.hz
    up = hz[:, 0].astype(np.int64)
    lo = hz[:, 1].astype(np.int64)
    if g.px is None:
        cx, cy = _corners(hz[:, 2], hz[:, 3], hz[:, 4], hz[:, 5])  # (k, 4)
    else:
        cx, cy = g.px, g.py  # (k, V): polygon vertices
    for body, sign in ((up, 1.0), (lo, -1.0)):
        ok = _in_balance(body, g.balanced)
        if not ok.any():
            continue
        b = body[ok]
        base = rows.row_of[b][:, None]
        c = g.centres[b]
        dx = cx[ok] - c[:, 0:1]
        dy = cy[ok] - c[:, 1:2]
        fc = fcol[ok]
        T.add(base + rows.iz, fc, sign)
        T.add(base + rows.imx, fc, sign * dy)
        T.add(base + rows.imy, fc, -sign * dx)


def _friction_forces(g: Group, rows: _Rows, T: _Triplets, F: _Triplets, fcol: np.ndarray,
                     tcol: np.ndarray) -> None:
    """The friction forces of each horizontal contact (+-x, +-y at its centre) and their
    Coulomb bound: their sum at most mu times the normal forces."""
    hz = g.hz
    k = len(hz)
    up = hz[:, 0].astype(np.int64)
    lo = hz[:, 1].astype(np.int64)
    xm = (hz[:, 2] + hz[:, 3]) / 2
    ym = (hz[:, 4] + hz[:, 5]) / 2
    zc = hz[:, 6]
    for body, sign in ((up, 1.0), (lo, -1.0)):
        ok = _in_balance(body, g.balanced)
        if not ok.any():
            continue
        b = body[ok]
        base = rows.row_of[b]
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


def _side_forces(g: Group, rows: _Rows, T: _Triplets, ncol: np.ndarray) -> None:
    """The normal forces at the corners of each side contact: the face pushes b along
    +axis and a along -axis."""
    sd = g.sd
    a = sd[:, 0].astype(np.int64)
    b = sd[:, 1].astype(np.int64)
    axis = sd[:, 2].astype(np.int64)
    cu, cz = _corners(sd[:, 3], sd[:, 4], sd[:, 5], sd[:, 6])  # (s, 4)
    plane = sd[:, 7][:, None]
    for body, sign in ((b, 1.0), (a, -1.0)):
        ok = g.balanced[body]
        if not ok.any():
            continue
        bb = body[ok]
        base = rows.row_of[bb][:, None]
        c = g.centres[bb]
        ax = axis[ok][:, None]
        # the point: along axis at plane, the other horizontal axis at u, height z
        px = np.where(ax == 0, plane[ok], cu[ok])
        py = np.where(ax == 0, cu[ok], plane[ok])
        dx, dy, dz = px - c[:, 0:1], py - c[:, 1:2], cz[ok] - c[:, 2:3]
        nc = ncol[ok]
        xs = np.broadcast_to(ax == 0, nc.shape)
        # along x: F = (n, 0, 0), M = (0, dz n, -dy n);
        # along y: F = (0, n, 0), M = (-dz n, 0, dx n)
        r_f = np.where(xs, 0, 1)
        T.add(base + r_f, nc, sign)
        T.add(np.where(xs, base + 4, base + 3), nc, np.where(xs, sign * dz, -sign * dz))
        T.add(base + 5, nc, np.where(xs, -sign * dy, sign * dx))


def _loads(g: Group, rows: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The right-hand side (each balanced part's weight on its Fz row) and the shift
    coefficients: sum m_contacts = (W dy, -W dx, 0) with d = t (sx, sy): rows
    A x - (W sy t) = 0 (Mx), A x - (-W sx t) = 0 (My)."""
    rhs = np.zeros(rows.nrows)
    shift_x = np.zeros(rows.nrows)  # coefficient of the shift t per row, times sx
    shift_y = np.zeros(rows.nrows)
    w = g.masses[rows.bal] * GRAVITY
    rb = rows.row_of[rows.bal]
    rhs[rb + rows.iz] = w
    shift_y[rb + rows.imx] = w
    shift_x[rb + rows.imy] = -w
    return rhs, shift_x, shift_y


@dataclass
class _LP:
    """A whole LP as arrays: columns (bounds, objective), rows (bounds), triplets."""

    col_lb: list[np.ndarray]
    col_ub: list[np.ndarray]
    obj: list[np.ndarray]
    row_lb: list[np.ndarray]
    row_ub: list[np.ndarray]
    trip: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    ncol: int = 0
    nrow: int = 0

    def cols(self, n: int, lb: float, ub: float, obj: float = 0.0) -> np.ndarray:
        self.col_lb.append(np.full(n, lb))
        self.col_ub.append(np.full(n, ub))
        self.obj.append(np.full(n, obj))
        out = np.arange(self.ncol, self.ncol + n)
        self.ncol += n
        return out

    def rows(self, lb: np.ndarray, ub: np.ndarray) -> np.ndarray:
        self.row_lb.append(np.asarray(lb, dtype=float))
        self.row_ub.append(np.asarray(ub, dtype=float))
        out = np.arange(self.nrow, self.nrow + len(lb))
        self.nrow += len(lb)
        return out

    def add(self, r: npt.ArrayLike, c: npt.ArrayLike, v: npt.ArrayLike) -> None:
        """Append the triplets (r, c, v), broadcast together (a scalar value for all)."""
        rb, cb, vb = np.broadcast_arrays(np.asarray(r), np.asarray(c),
                                         np.asarray(v, dtype=float))
        self.trip.append((rb.ravel(), cb.ravel(), vb.ravel()))

    def case(self, blk: Block) -> tuple[np.ndarray, np.ndarray]:
        """One copy of the equilibrium block: its equation rows (bounds set by the caller
        through the returned row numbers, initially the unshifted rhs) and columns."""
        r, c, v, ncol, rhs, _sx, _sy, fidx, fval, nfr = blk
        cols = self.cols(ncol, 0.0, np.inf)
        eq = self.rows(rhs, rhs)
        if len(r):
            self.add(eq[r], cols[c], v)
        if nfr:
            fr = self.rows(np.full(nfr, -np.inf), np.zeros(nfr))
            self.add(fr[fidx[0]], cols[fidx[1]], fval)
        return eq, cols

    def set_rows(self, rows: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> None:
        """Rebound rows made by ``case`` (they are the last-added arrays' entries)."""
        lo = np.concatenate(self.row_lb)
        hi = np.concatenate(self.row_ub)
        lo[rows], hi[rows] = lb, ub
        self.row_lb, self.row_ub = [lo], [hi]

    def run(self, maximize: bool, time_limit: float) -> tuple[str, float, np.ndarray]:
        """Solve with ``SOLVER``, then the ``RETRIES`` while no attempt decides and time is
        left: (status OPTIMAL|INFEASIBLE, objective, values); :class:`LPLimit` when none
        decides."""
        import time

        from ortools.linear_solver.python import model_builder_helper as mbh

        SOLVES[0] += 1
        t0 = time.perf_counter()
        model = self._model(maximize, mbh)
        tries = [(SOLVER, PARAMS.get(SOLVER, ""), "GLOP dual simplex" if SOLVER == "glop"
                  else SOLVER)]
        tries += [t for t in RETRIES if t[:2] != tries[0][:2]]
        statuses: list[tuple[str, str]] = []
        for k, (name, params, label) in enumerate(tries):
            left = time_limit - (time.perf_counter() - t0)
            if k and left <= 0:
                break
            if k == 1:
                ATTEMPTS[0] += 1
            solver = mbh.ModelSolverHelper(name)
            if not solver.solver_is_supported():
                statuses.append((label, "not available"))
                continue
            solver.enable_output(False)
            if params:
                solver.set_solver_specific_parameters(params)
            solver.set_time_limit_in_seconds(max(left, 0.0))
            solver.solve(model)
            status = solver.status()
            if status == mbh.SolveStatus.OPTIMAL:
                return ("OPTIMAL", float(solver.objective_value()),
                        np.asarray(solver.variable_values()))
            if status == mbh.SolveStatus.INFEASIBLE:
                return "INFEASIBLE", float("nan"), np.zeros(0)
            statuses.append((label, _status_name(status)))
        raise LPLimit(statuses, time.perf_counter() - t0 >= time_limit)

    def _model(self, maximize: bool, mbh):  # noqa: ANN001, ANN202 (ortools types)
        """The LP as an OR-Tools model-builder model (coefficients below TINY dropped)."""
        r, c, v = (np.concatenate(x) for x in zip(*self.trip, strict=True)) if self.trip \
            else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        big = np.abs(v) > TINY
        r, c, v = r[big], c[big], v[big]
        model = mbh.ModelBuilderHelper()
        col_lb, col_ub = np.concatenate(self.col_lb), np.concatenate(self.col_ub)
        row_lb, row_ub = np.concatenate(self.row_lb), np.concatenate(self.row_ub)
        obj = np.concatenate(self.obj)
        sparse = _scipy_sparse() if FAST_FILL and len(v) >= FAST_FILL_MIN else None
        if sparse is not None:
            a = sparse.csr_matrix((v, (r, c)), shape=(self.nrow, self.ncol))
            model.fill_model_from_sparse_data(col_lb, col_ub, obj, row_lb, row_ub, a)
        else:
            # the same matrix as the sparse path's: duplicates summed, row-major order
            key, inv = np.unique(r.astype(np.int64) * max(1, self.ncol) + c, return_inverse=True)
            v = np.bincount(inv, weights=v, minlength=len(key)) if len(key) else v[:0]
            r, c = key // max(1, self.ncol), key % max(1, self.ncol)
            idx = model.add_var_array_with_bounds(col_lb, col_ub,
                                                  np.zeros(self.ncol, dtype=bool), "")
            for j in np.nonzero(obj)[0].tolist():
                model.set_var_objective_coefficient(int(idx[j]), float(obj[j]))
            cts = [model.add_linear_constraint() for _ in range(self.nrow)]
            for i, (lo, hi) in enumerate(zip(row_lb.tolist(), row_ub.tolist(), strict=True)):
                model.set_constraint_lower_bound(cts[i], lo)
                model.set_constraint_upper_bound(cts[i], hi)
            for ri, ci, vi in zip(r.tolist(), c.tolist(), v.tolist(), strict=True):
                if vi != 0.0:
                    model.set_constraint_coefficient(cts[ri], int(idx[ci]), vi)
        model.set_maximize(maximize)
        return model


def _scipy_sparse():  # noqa: ANN202 (an optional module)
    """scipy.sparse, or None without scipy (the fast path: the whole matrix in one call)."""
    try:
        from scipy import sparse  # lazy: ~0.5 s to import, more than a small LP's loop
    except ImportError:  # pragma: no cover (scipy is optional)
        return None
    return sparse


def _new() -> _LP:
    return _LP([], [], [], [], [], [])


def solve(g: Group, margin: float, time_limit: float) -> float | None:
    """The largest shift t <= margin (m) at which the structure stands in all four load
    cases, or None when it does not stand even unshifted (solved by ``SOLVER``)."""
    blk = _block(g)
    sx_c, sy_c = blk[5], blk[6]
    m = _new()
    t = m.cols(1, 0.0, float(margin), 1.0)
    for sx, sy in CASES:
        eq, _ = m.case(blk)
        sh = sx * sx_c + sy * sy_c  # rows: A x - sh t = rhs
        nz = np.nonzero(sh)[0]
        m.add(eq[nz], np.full(len(nz), t[0]), -sh[nz])
    return _optimum(*m.run(True, time_limit)[:2])


def residuals(g: Group, shift: tuple[float, float], time_limit: float) -> np.ndarray:
    """Per part, how far from balance the best forces leave it with every centre of mass
    moved by ``shift`` (m): the weighted sum of equation slacks (moments weighted 20/m, so
    5 cm of arm counts like 1 N); names the parts that fall."""
    blk = _block(g)
    rhs, sx_c, sy_c = blk[4], blk[5], blk[6]
    neq = 6 if len(g.sd) else 3
    moment = np.array([0, 0, 0, 1, 1, 1] if neq == 6 else [0, 1, 1], dtype=bool)
    nrows = len(rhs)
    wgt = np.where(np.tile(moment, nrows // neq), 20.0, 1.0) if nrows else np.zeros(0)
    m = _new()
    eq, _ = m.case(blk)
    val = rhs + shift[0] * sx_c + shift[1] * sy_c
    m.set_rows(eq, val, val)
    sp = m.cols(nrows, 0.0, np.inf)
    sn = m.cols(nrows, 0.0, np.inf)
    m.obj[-2][:] = wgt
    m.obj[-1][:] = wgt
    m.add(eq, sp, 1.0)
    m.add(eq, sn, -1.0)
    status, _, x = m.run(False, time_limit)
    if status != "OPTIMAL":  # a residual LP is always feasible (free slacks)
        raise LPLimit([("residual LP", status)], False)
    per_row = wgt * (x[sp] + x[sn])
    out = np.zeros(len(g.masses))
    bal = np.nonzero(g.balanced)[0]
    if len(bal):
        out[bal] = per_row.reshape(len(bal), neq).sum(axis=1)
    return out


def min_shift(g: Group, time_limit: float) -> float | None:
    """The smallest common shift s (m, max-norm) of every centre of mass at which the
    structure stands (one load case, the shift free): how far beyond its contacts its
    weight acts; None when no shift makes it stand (it slides or needs more than 5 cm)."""
    blk = _block(g)
    sx_c, sy_c = blk[5], blk[6]
    m = _new()
    s = m.cols(1, 0.0, 0.05, 1.0)
    d = m.cols(2, -0.05, 0.05)
    box = m.rows(np.full(4, -np.inf), np.zeros(4))  # -s <= dx, dy <= s
    m.add(box, np.repeat(d, 2), np.tile([1.0, -1.0], 2))
    m.add(box, np.full(4, s[0]), -1.0)
    eq, _ = m.case(blk)
    for coef, dv in ((sx_c, d[0]), (sy_c, d[1])):
        nz = np.nonzero(coef)[0]
        m.add(eq[nz], np.full(len(nz), dv), -coef[nz])
    return _optimum(*m.run(False, time_limit)[:2])
