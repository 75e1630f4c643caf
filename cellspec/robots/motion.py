"""Motion planning: RRT-Connect in the joint space of one or several arms together.

Contract additions (backwards compatible): ``plan_motion`` takes ``smooth_iters=``
(shortcut attempts, default 40); ``edge_free`` and ``densify`` are public helpers.

The arms in ``start`` are planned jointly (one configuration vector, in the twin's robot
order); other arms stay where they are. The direct path is tried first; otherwise
RRT-Connect grows one tree from the start and one from the goal with uniform samples
within the joint limits drawn from ``numpy.random.default_rng(seed)``; an extension
advances at most ``EXTEND`` rad (max-norm) and every edge is collision-checked at ``step``
rad (max-norm) resolution. The path is shortcut-smoothed (a fixed number of seeded
attempts, so the same seed gives the same path) and every edge is re-checked afterwards.
Running out of ``time_limit`` returns ``ok=False`` with reason ``"time limit"``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from cellspec.robots.ik import default_checker

EXTEND = 0.5  # rad (max-norm) an extension step may advance


@dataclass(frozen=True)
class MotionResult:
    """A planned motion: waypoints (each robot -> q) from start to goal, or why not."""

    ok: bool
    path: tuple[dict[str, np.ndarray], ...]
    reason: str | None
    seconds: float
    checks: int


class _TimeUp(Exception):
    pass


class _Space:
    """The stacked joint space of the planned robots and its collision queries."""

    def __init__(self, twin, robots: list[str], checker, ignore: frozenset[str],
                 step: float, deadline: float) -> None:
        self.twin, self.robots, self.checker, self.ignore = twin, robots, checker, ignore
        self.step = step
        self.deadline = deadline
        self.sizes = [len(twin.spec(r).joint_names) for r in robots]
        self.lo = np.concatenate([twin.spec(r).lower for r in robots])
        self.hi = np.concatenate([twin.spec(r).upper for r in robots])
        self.checks = 0

    def split(self, x: np.ndarray) -> dict[str, np.ndarray]:
        out, i = {}, 0
        for r, n in zip(self.robots, self.sizes, strict=True):
            out[r] = x[i:i + n].copy()
            i += n
        return out

    def stack(self, qs: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(qs[r], dtype=float) for r in self.robots])

    def free(self, x: np.ndarray) -> bool:
        if time.perf_counter() > self.deadline:
            raise _TimeUp
        self.checks += 1
        return self.checker.free(self.split(x), self.ignore)

    def edge(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Whether the straight segment a-b is free at step resolution (ends excluded)."""
        n = int(math.ceil(float(np.max(np.abs(b - a))) / self.step))
        for k in range(1, n):
            if not self.free(a + (b - a) * (k / n)):
                return False
        return True


def edge_free(twin, a: dict[str, np.ndarray], b: dict[str, np.ndarray], *, step: float = 0.05,
              checker=None, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether the joint-space segment a-b (ends included) is collision-free at step."""
    robots = [r for r in twin.robot_names if r in a]
    sp = _Space(twin, robots, checker or default_checker(twin), frozenset(ignore), step,
                math.inf)
    xa, xb = sp.stack(a), sp.stack(b)
    return sp.free(xa) and sp.free(xb) and sp.edge(xa, xb)


def densify(path, step: float = 0.05) -> list[dict[str, np.ndarray]]:
    """The path with intermediate configurations every ``step`` rad (max-norm)."""
    out: list[dict[str, np.ndarray]] = []
    for i, wp in enumerate(path):
        if i == 0:
            out.append({r: np.asarray(q, float).copy() for r, q in wp.items()})
            continue
        prev = path[i - 1]
        d = max(float(np.max(np.abs(np.asarray(wp[r]) - np.asarray(prev[r])))) for r in wp)
        n = max(1, int(math.ceil(d / step)))
        for k in range(1, n + 1):
            out.append({r: np.asarray(prev[r]) + (np.asarray(wp[r]) - np.asarray(prev[r]))
                        * (k / n) for r in wp})
    return out


def _steer(sp: _Space, a: np.ndarray, b: np.ndarray, limit: float) -> tuple[np.ndarray, bool]:
    """Advance from a toward b (at most limit rad), checking each step; returns the last
    free configuration reached and whether b itself was reached."""
    d = float(np.max(np.abs(b - a)))
    reach = d <= limit
    target = b if reach else a + (b - a) * (limit / d)
    n = max(1, int(math.ceil(min(d, limit) / sp.step)))
    last = a
    for k in range(1, n + 1):
        x = a + (target - a) * (k / n)
        if not sp.free(x):
            return last, False
        last = x
    return last, reach


class _Tree:
    def __init__(self, root: np.ndarray) -> None:
        self.nodes = [root]
        self.parent = [-1]
        self._arr = root[None, :].copy()

    def nearest(self, x: np.ndarray) -> int:
        return int(np.argmin(np.max(np.abs(self._arr - x), axis=1)))

    def add(self, x: np.ndarray, parent: int) -> int:
        self.nodes.append(x)
        self.parent.append(parent)
        self._arr = np.vstack([self._arr, x])
        return len(self.nodes) - 1

    def branch(self, i: int) -> list[np.ndarray]:
        out = []
        while i != -1:
            out.append(self.nodes[i])
            i = self.parent[i]
        return out  # from node i back to the root


def _connect(sp: _Space, tree: _Tree, x: np.ndarray) -> tuple[int, bool]:
    """Grow tree toward x until reached or blocked; returns the last node and success."""
    i = tree.nearest(x)
    while True:
        new, reached = _steer(sp, tree.nodes[i], x, EXTEND)
        if new is tree.nodes[i]:
            return i, False
        i = tree.add(new, i)
        if reached:
            return i, True


def _rrt_connect(sp: _Space, xs: np.ndarray, xg: np.ndarray,
                 rng: np.random.Generator) -> list[np.ndarray]:
    ta, tb = _Tree(xs), _Tree(xg)
    a_is_start = True
    while True:
        xr = rng.uniform(sp.lo, sp.hi)
        i = ta.nearest(xr)
        new, _ = _steer(sp, ta.nodes[i], xr, EXTEND)
        if new is not ta.nodes[i]:
            ni = ta.add(new, i)
            j, ok = _connect(sp, tb, new)
            if ok:
                pa = ta.branch(ni)[::-1]  # root(a) .. new
                pb = tb.branch(j)  # new .. root(b)
                path = pa + pb[1:]
                return path if a_is_start else path[::-1]
        ta, tb = tb, ta
        a_is_start = not a_is_start


def _shortcut(sp: _Space, path: list[np.ndarray], rng: np.random.Generator,
              iters: int) -> list[np.ndarray]:
    path = list(path)
    for _ in range(iters):
        if len(path) <= 2:
            break
        i, j = sorted(rng.choice(len(path), size=2, replace=False).tolist())
        if j - i < 2:
            continue
        if sp.edge(path[i], path[j]):
            path = path[:i + 1] + path[j:]
    return path


def plan_motion(twin, start: dict[str, np.ndarray], goal: dict[str, np.ndarray], *,
                seed: int = 0, time_limit: float = 5.0, step: float = 0.05, checker=None,
                ignore=frozenset(), smooth_iters: int = 40) -> MotionResult:
    """A collision-free joint path from start to goal for the robots in start (jointly)."""
    t0 = time.perf_counter()
    if set(start) != set(goal):
        raise ValueError("start and goal must name the same robots")
    robots = [r for r in twin.robot_names if r in start]
    unknown = set(start) - set(robots)
    if unknown:
        raise KeyError(f"unknown robots {sorted(unknown)}")
    chk = checker or default_checker(twin)
    sp = _Space(twin, robots, chk, frozenset(ignore), step, t0 + time_limit)
    xs, xg = sp.stack(start), sp.stack(goal)
    saved = {r: twin.get_q(r) for r in robots}
    rng = np.random.default_rng(seed)

    def done(ok: bool, path, reason: str | None) -> MotionResult:
        twin.set_qs(saved)
        return MotionResult(ok, tuple(sp.split(x) for x in path), reason,
                            time.perf_counter() - t0, sp.checks)

    for name, x in (("start", xs), ("goal", xg)):
        if np.any(x < sp.lo - 1e-9) or np.any(x > sp.hi + 1e-9):
            return done(False, (), f"{name} outside the joint limits")
        cs = chk.contacts(sp.split(x), sp.ignore)
        sp.checks += 1
        if cs:
            what = "; ".join(f"{c.a} with {c.b}" for c in cs[:3])
            return done(False, (), f"{name} in collision: {what}")
    try:
        if sp.edge(xs, xg):
            path = [xs, xg]
        else:
            path = _rrt_connect(sp, xs, xg, rng)
    except _TimeUp:
        return done(False, (), "time limit")
    sp.deadline = math.inf  # smoothing and the re-check are bounded by smooth_iters
    path = _shortcut(sp, path, rng, smooth_iters)
    for a, b in pairwise(path):
        if not (sp.free(b) and sp.edge(a, b)):
            return done(False, (), "smoothed path failed its re-check")
    return done(True, path, None)
