"""Simulated execution of planned motions and the trajectory check δ(Q_plan, Q_exec) ≤ ε.

Planned joint paths (segments, one robot each, in sequence) are time-parameterised by the
robots' velocity limits (``SPEED`` of each joint's limit, the slowest joint sets each
step's duration). Execution runs in a SEPARATE pybullet DIRECT client with gravity and
real stepping: the robots (the same URDFs as the twin) track the plan under
``POSITION_CONTROL`` at 240 Hz, parts are dynamic boxes or cylinders at their yaw (a
grasped part follows the executed tool, a released part falls and settles under physics),
and every step records (t, q_plan, q_exec) per robot.

δ(Q_plan, Q_exec) = max over robots and samples of ‖q_plan − q_exec‖ (Euclidean, rad),
each executed sample matched with the plan sample of the nearest timestamp (and each plan
sample with the nearest executed one). Execution passes iff δ ≤ ε (the cell's
``trajectory epsilon``, default ``DEFAULT_EPSILON``), every part ends within
``PLACE_TOL`` of its planned place, and nothing touches a blocked region.

Faults (``parse_faults``), each detected by one of those checks:

* ``offset:ROBOT:J:RAD``: joint J (1-based) is miscalibrated by RAD (the controller tracks
  the plan plus the offset) → δ;
* ``slow:FACTOR`` or ``slow:ROBOT:FACTOR``: the robot runs FACTOR times slower than
  planned → δ (nearest-timestamp alignment);
* ``drop:PART``: the gripper lets go of PART halfway through its transport → the part
  is not at its place;
* ``block:X0,Y0,Z0,X1,Y1,Z1``: an obstacle appears in that box after planning → contact
  with the blocked region (and δ when the arm is pushed back).

Faults are separated by ``;``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.core import progress
from cellspec.core.errors import CellspecError
from cellspec.robots.tasks import TURN_TOL_DEG, turn_error_deg

if TYPE_CHECKING:
    from cellspec.robots.twin import Twin

HZ = 240
DT = 1.0 / HZ
SOLVER_ITERATIONS = 200  # contact solver per step (pybullet's 50 drops heavy-on-light stacks
# that stand in settle and pass check: docs/twin.md, "Execution")
SPEED = 0.5  # fraction of each joint's velocity limit used by the plan
MIN_STEP = 0.05  # seconds: the shortest time between two waypoints
DWELL = 0.25  # seconds the gripper takes to close or open
DEFAULT_EPSILON = 0.05  # rad, when the cell gives no `trajectory epsilon`
PLACE_TOL = 0.01  # metres a released part may end away from its planned place
SETTLE = 0.5  # seconds of simulation after the last motion (parts settle)


@dataclass(frozen=True)
class Segment:
    """One robot's planned joint path for one step of an action."""

    action: int
    robot: str
    part: str
    kind: str  # approach | grasp | lift | transport | place | retreat | home
    path: tuple[np.ndarray, ...]
    grasp: bool = False  # the gripper closes on `part` at the end of this segment
    release: bool = False  # the gripper opens at the end of this segment


@dataclass(frozen=True)
class InjectedFault:
    """An injected execution fault."""

    kind: str  # offset | slow | drop | block
    robot: str | None = None
    joint: int | None = None
    value: float = 0.0
    part: str | None = None
    box: tuple[float, ...] | None = None

    def text(self) -> str:
        """The fault in the --faults syntax."""
        if self.kind == "offset":
            return f"offset:{self.robot}:{self.joint}:{self.value:g}"
        if self.kind == "slow":
            return f"slow:{self.robot}:{self.value:g}" if self.robot else f"slow:{self.value:g}"
        if self.kind == "drop":
            return f"drop:{self.part}"
        return "block:" + ",".join(f"{v:g}" for v in self.box or ())


MAX_BLOCK = 100.0  # metres: the largest |coordinate| of a blocked region


def parse_faults(spec: str | None, robots: tuple[str, ...], parts: tuple[str, ...],
                 dofs: dict[str, int]) -> tuple[InjectedFault, ...]:
    """Parse ``--faults``; bad specs are bad input naming the valid forms."""
    if not spec:
        return ()
    out = []
    forms = ("offset:ROBOT:J:RAD, slow:FACTOR, slow:ROBOT:FACTOR, drop:PART, "
             "block:X0,Y0,Z0,X1,Y1,Z1")
    for raw in spec.split(";"):
        item = raw.strip()
        if not item:
            continue
        f = item.split(":")
        try:
            if f[0] == "offset" and len(f) == 4:
                if f[1] not in robots:
                    raise CellspecError(f"--faults {item}: unknown robot {f[1]!r} (robots: "
                                        f"{', '.join(robots)})")
                j = int(f[2])
                if not 1 <= j <= dofs[f[1]]:
                    raise CellspecError(f"--faults {item}: {f[1]} has joints 1..{dofs[f[1]]}")
                off = float(f[3])
                if not abs(off) <= 2 * math.pi:
                    raise CellspecError(f"--faults {item}: the joint offset must be finite and "
                                        "at most 2π rad")
                out.append(InjectedFault("offset", robot=f[1], joint=j, value=off))
            elif f[0] == "slow" and len(f) in (2, 3):
                robot = f[1] if len(f) == 3 else None
                if robot is not None and robot not in robots:
                    raise CellspecError(f"--faults {item}: unknown robot {robot!r}")
                v = float(f[-1])
                if not (1.0 < v <= 100.0):
                    raise CellspecError(f"--faults {item}: the slow-down factor must be in "
                                        "(1, 100]")
                out.append(InjectedFault("slow", robot=robot, value=v))
            elif f[0] == "drop" and len(f) == 2:
                if f[1] not in parts:
                    raise CellspecError(f"--faults {item}: unknown part {f[1]!r}")
                out.append(InjectedFault("drop", part=f[1]))
            elif f[0] == "block" and len(f) == 2:
                box = tuple(float(x) for x in f[1].split(","))
                if len(box) != 6 or any(box[k] >= box[k + 3] for k in range(3)):
                    raise CellspecError(f"--faults {item}: block needs X0,Y0,Z0,X1,Y1,Z1 with "
                                        "X0<X1, Y0<Y1, Z0<Z1")
                if not all(abs(x) <= MAX_BLOCK for x in box):
                    # pybullet cannot hold a box beyond this: it would silently not collide
                    raise CellspecError(f"--faults {item}: block coordinates must be finite "
                                        f"and within {MAX_BLOCK:g} m")
                out.append(InjectedFault("block", box=box))
            else:
                raise CellspecError(f"--faults: cannot read {item!r} (forms: {forms})")
        except ValueError:
            raise CellspecError(f"--faults: cannot read {item!r} (forms: {forms})") from None
        if not all(math.isfinite(x) for x in (out[-1].value, *(out[-1].box or ()))):
            raise CellspecError(f"--faults {item}: numbers must be finite")
    return tuple(out)


@dataclass
class Timeline:
    """The time-parameterised plan: per robot, knot times and joint values."""

    t: dict[str, list[float]] = field(default_factory=dict)
    q: dict[str, list[np.ndarray]] = field(default_factory=dict)
    events: list[tuple[float, str, str, str]] = field(default_factory=list)  # t, robot, kind, part
    windows: list[tuple[int, float, float, str]] = field(default_factory=list)  # action, t0, t1,
    # robot
    end: float = 0.0

    def at(self, robot: str, t: float) -> np.ndarray:
        """The planned joints of a robot at time t (linear between knots)."""
        ts, qs = self.t[robot], self.q[robot]
        if t <= ts[0]:
            return qs[0]
        if t >= ts[-1]:
            return qs[-1]
        k = int(np.searchsorted(ts, t, side="right")) - 1
        a = (t - ts[k]) / (ts[k + 1] - ts[k]) if ts[k + 1] > ts[k] else 1.0
        return qs[k] + a * (qs[k + 1] - qs[k])


def segment_times(segments: list[Segment], start: dict[str, np.ndarray],
                  vel: dict[str, np.ndarray]) -> list[float]:
    """How long each segment's motion takes (from where its robot's previous segment ended,
    at SPEED of the limits; the gripper dwell not included)."""
    out = []
    last = {r: np.asarray(q, dtype=float) for r, q in start.items()}
    for s in segments:
        v = vel[s.robot] * SPEED
        prev = last[s.robot]
        total = 0.0
        for q in s.path:
            q = np.asarray(q, dtype=float)
            if np.max(np.abs(q - prev)) >= 1e-12:
                total += max(MIN_STEP, float(np.max(np.abs(q - prev) / v)))
                prev = q
        last[s.robot] = prev
        out.append(total)
    return out


def time_parameterise(segments: list[Segment], start: dict[str, np.ndarray],
                      vel: dict[str, np.ndarray],
                      starts: dict[int, float] | None = None) -> Timeline:
    """Knot times from the velocity limits.

    Without ``starts`` the actions run one after another. With ``starts`` (action -> start
    time, e.g. from a multi-arm schedule) each action begins at its start time, or when its
    robot is free if that is later; robots move concurrently."""
    tl = Timeline()
    clock = {r: 0.0 for r in start}
    for r, q in start.items():
        tl.t[r], tl.q[r] = [0.0], [np.asarray(q, dtype=float)]
    order: list[int] = []
    for s in segments:
        if not order or order[-1] != s.action:
            order.append(s.action)
    if starts is not None:  # each robot does its actions in the order of their start times
        order.sort(key=lambda a: (starts[a], a))
    done = 0.0
    for a in order:
        segs = [s for s in segments if s.action == a]
        r = segs[0].robot
        t0 = max(clock[r], starts[a]) if starts is not None else max(done, clock[r])
        if t0 > tl.t[r][-1]:  # hold still until the action starts
            tl.t[r].append(t0)
            tl.q[r].append(tl.q[r][-1])
        t = t0
        v = vel[r] * SPEED
        prev = tl.q[r][-1]
        for s in segs:
            for q in s.path:
                q = np.asarray(q, dtype=float)
                if np.max(np.abs(q - prev)) < 1e-12:
                    continue
                t += max(MIN_STEP, float(np.max(np.abs(q - prev) / v)))
                tl.t[r].append(t)
                tl.q[r].append(q)
                prev = q
            if s.grasp or s.release:
                tl.events.append((t, r, "grasp" if s.grasp else "release", s.part))
                t += DWELL
                tl.t[r].append(t)
                tl.q[r].append(prev)
        tl.windows.append((a, t0, t, r))
        clock[r] = t
        done = max(done, t)
    tl.events.sort(key=lambda e: (e[0], e[1]))
    tl.end = max([done] + [ts[-1] for ts in tl.t.values()])
    return tl


@dataclass(frozen=True)
class Record:
    """Recorded samples of one robot: times, planned and executed joints."""

    t_plan: np.ndarray
    q_plan: np.ndarray
    t_exec: np.ndarray
    q_exec: np.ndarray


@dataclass(frozen=True)
class Execution:
    """The outcome of a simulated execution."""

    ok: bool
    delta: float
    epsilon: float
    delta_robot: str | None
    delta_t: float
    per_action: dict[int, float]  # action -> δ inside its time window
    misplaced: dict[str, float]  # part -> distance from its planned place
    blocked: tuple[str, ...]  # contacts with the blocked region
    blocked_at: dict[str, float]  # contact -> first time seen
    reasons: tuple[str, ...]
    duration: float
    records: dict[str, Record]
    faults: tuple[InjectedFault, ...] = ()
    turned: dict[str, float] = field(default_factory=dict)  # part -> degrees off its pose

    def to_json(self) -> dict[str, Any]:
        """Summary (no samples) as plain JSON data."""
        return {"ok": self.ok, "delta": round(self.delta, 6), "epsilon": self.epsilon,
                "delta_robot": self.delta_robot, "delta_t": round(self.delta_t, 4),
                "per_action": {str(k): round(v, 6) for k, v in sorted(self.per_action.items())},
                "misplaced": {k: round(v, 4) for k, v in sorted(self.misplaced.items())},
                "blocked": list(self.blocked), "reasons": list(self.reasons),
                "duration": round(self.duration, 4),
                "faults": [f.text() for f in self.faults],
                **({"turned": {k: round(v, 3) for k, v in sorted(self.turned.items())}}
                   if self.turned else {})}

    def trajectories_json(self) -> dict[str, Any]:
        """Every recorded sample, rounded to 1e-9 (for determinism checks and plots)."""
        out = {}
        for r, rec in self.records.items():
            out[r] = {"t_plan": np.round(rec.t_plan, 9).tolist(),
                      "q_plan": np.round(rec.q_plan, 9).tolist(),
                      "t_exec": np.round(rec.t_exec, 9).tolist(),
                      "q_exec": np.round(rec.q_exec, 9).tolist()}
        return out


def nearest_sample(tb: np.ndarray, ta: np.ndarray) -> np.ndarray:
    """Index into sorted tb of the nearest timestamp to each ta."""
    if len(tb) == 1:
        return np.zeros(len(ta), dtype=int)
    k = np.clip(np.searchsorted(tb, ta), 1, len(tb) - 1)
    return np.where(np.abs(ta - tb[k - 1]) <= np.abs(tb[k] - ta), k - 1, k)


def _exec_to_plan(tp: np.ndarray, qp: np.ndarray, te: np.ndarray, qe: np.ndarray) -> float:
    """max ‖q_exec − q_plan(nearest t)‖ over the executed samples given."""
    if len(te) == 0 or len(tp) == 0:
        return 0.0
    return float(np.max(np.linalg.norm(qe - qp[nearest_sample(tp, te)], axis=1)))


def delta(rec: Record) -> tuple[float, float]:
    """δ for one robot with nearest-timestamp alignment (both ways): (δ, time of the max)."""
    best, at = 0.0, 0.0
    for ta, qa, tb, qb in ((rec.t_exec, rec.q_exec, rec.t_plan, rec.q_plan),
                           (rec.t_plan, rec.q_plan, rec.t_exec, rec.q_exec)):
        if len(ta) == 0 or len(tb) == 0:
            continue
        d = np.linalg.norm(qa - qb[nearest_sample(tb, ta)], axis=1)
        i = int(np.argmax(d))
        if d[i] > best:
            best, at = float(d[i]), float(ta[i])
    return best, at


class _ExecWorld:
    """The execution client: robots, table, parts (dynamic), blocked regions."""

    def __init__(self, twin: Twin) -> None:
        # lazy: the twin extra (pybullet), also through cellspec.robots
        import pybullet as p

        from cellspec.robots.twin import connect

        self.p = p
        self.cid = connect(-9.81)
        try:  # an error while building disconnects the client (no leak)
            self._build(twin, p)
        except BaseException:
            self.close()
            raise

    def _build(self, twin: Twin, p: Any) -> None:
        # lazy: the twin extra (pybullet), through cellspec.robots
        from cellspec.robots.twin import load_robot, surface_slabs

        cid = self.cid
        p.setTimeStep(DT, physicsClientId=cid)
        p.setPhysicsEngineParameter(numSolverIterations=SOLVER_ITERATIONS, physicsClientId=cid)
        self.robots: dict[str, tuple[int, tuple[int, ...], int]] = {}
        self.link_names: dict[str, dict[int, str]] = {}
        cell = twin.cell
        for r in cell.robots:
            rb = twin.robot(r.name)
            body = load_robot(cid, r, rb.spec, rb.gripper)
            for li in range(-1, p.getNumJoints(body, physicsClientId=cid)):
                p.setCollisionFilterGroupMask(body, li, 1, 4, physicsClientId=cid)
            self.robots[r.name] = (body, rb.joints, rb.tcp)
            self.link_names[r.name] = dict(rb.link_names)
        self.parts: dict[str, int] = {}
        self.held: dict[str, tuple[str, tuple, tuple]] = {}  # robot -> part, rel pos, rel quat
        self.blocks: list[int] = []
        for _, centre in surface_slabs(cell):
            col = p.createCollisionShape(p.GEOM_BOX, halfExtents=[3, 3, 0.01],
                                         physicsClientId=cid)
            b = p.createMultiBody(0, col, -1, list(centre), physicsClientId=cid)
            p.setCollisionFilterGroupMask(b, -1, 8, 2, physicsClientId=cid)

    def add_part(self, name: str, size, pos, mass: float, yaw: float = 0.0,
                 shape: str = "box") -> None:
        """A dynamic part as it is: a box or a vertical cylinder (size (2R, 2R, H)), turned
        by ``yaw`` degrees about z."""
        # lazy: the twin extra (pybullet), also through cellspec.robots
        from cellspec.robots.twin import shape_ids, yaw_quat

        p, cid = self.p, self.cid
        col, vis = shape_ids(cid, [float(v) / 2 for v in size], shape, (0.2, 0.6, 0.9, 1))
        b = p.createMultiBody(mass, col, vis, [float(v) for v in pos], yaw_quat(float(yaw)),
                              physicsClientId=cid)
        p.changeDynamics(b, -1, lateralFriction=0.8, physicsClientId=cid)
        p.setCollisionFilterGroupMask(b, -1, 2, 2 | 8 | 4, physicsClientId=cid)
        self.parts[name] = b

    def add_block(self, box: tuple[float, ...]) -> None:
        p, cid = self.p, self.cid
        lo, hi = np.array(box[:3]), np.array(box[3:])
        col = p.createCollisionShape(p.GEOM_BOX, halfExtents=((hi - lo) / 2).tolist(),
                                     physicsClientId=cid)
        b = p.createMultiBody(0, col, -1, ((lo + hi) / 2).tolist(), physicsClientId=cid)
        p.setCollisionFilterGroupMask(b, -1, 4, 1 | 2, physicsClientId=cid)
        self.blocks.append(b)

    def tcp(self, robot: str) -> tuple[tuple, tuple]:
        body, _, tcp = self.robots[robot]
        st = self.p.getLinkState(body, tcp, computeForwardKinematics=1, physicsClientId=self.cid)
        return st[4], st[5]

    def grasp(self, robot: str, part: str) -> None:
        p = self.p
        tpos, tquat = self.tcp(robot)
        ppos, pquat = p.getBasePositionAndOrientation(self.parts[part], physicsClientId=self.cid)
        ipos, iquat = p.invertTransform(tpos, tquat)
        rpos, rquat = p.multiplyTransforms(ipos, iquat, ppos, pquat)
        self.held[robot] = (part, rpos, rquat)

    def release(self, robot: str) -> None:
        self.held.pop(robot, None)

    def carry(self) -> None:
        p = self.p
        for robot, (part, rpos, rquat) in self.held.items():
            tpos, tquat = self.tcp(robot)
            wpos, wquat = p.multiplyTransforms(tpos, tquat, rpos, rquat)
            p.resetBasePositionAndOrientation(self.parts[part], wpos, wquat,
                                              physicsClientId=self.cid)
            p.resetBaseVelocity(self.parts[part], [0, 0, 0], [0, 0, 0], physicsClientId=self.cid)

    def reset_q(self, robot: str, q: np.ndarray) -> None:
        body, joints, _ = self.robots[robot]
        for j, v in zip(joints, q.tolist(), strict=True):
            self.p.resetJointState(body, j, v, physicsClientId=self.cid)

    def command(self, robot: str, q: np.ndarray, qd: np.ndarray) -> None:
        body, joints, _ = self.robots[robot]
        n = len(joints)
        self.p.setJointMotorControlArray(body, list(joints), self.p.POSITION_CONTROL,
                                         targetPositions=q.tolist(), targetVelocities=qd.tolist(),
                                         forces=[500.0] * n, positionGains=[0.3] * n,
                                         velocityGains=[1.0] * n, physicsClientId=self.cid)

    def read(self, robot: str) -> np.ndarray:
        body, joints, _ = self.robots[robot]
        st = self.p.getJointStates(body, list(joints), physicsClientId=self.cid)
        return np.array([s[0] for s in st])

    def block_contacts(self) -> list[str]:
        out = []
        for b in self.blocks:
            for name, (body, _, _) in self.robots.items():
                for c in self.p.getContactPoints(body, b, physicsClientId=self.cid):
                    out.append(f"{name}/{self.link_names[name].get(c[3], c[3])}")
            for name, pb in self.parts.items():
                if self.p.getContactPoints(pb, b, physicsClientId=self.cid):
                    out.append(f"part:{name}")
        return out

    def part_pos(self, part: str) -> np.ndarray:
        pos, _ = self.p.getBasePositionAndOrientation(self.parts[part], physicsClientId=self.cid)
        return np.array(pos)

    def close(self) -> None:
        try:
            self.p.disconnect(physicsClientId=self.cid)
        except Exception:  # noqa: BLE001 - already gone
            pass


def execute(twin: Twin, timeline: Timeline, parts: dict[str, dict[str, Any]],
            faults: tuple[InjectedFault, ...] = (), epsilon: float | None = None,
            on_end: Callable[[int], None] | None = None) -> Execution:
    """Run the timeline in a separate physics client and compare planned and executed joints.

    ``parts``: name -> {"size", "start" (where it appears: the supply), "place" (planned
    final centre), "mass", "appear" (time it is presented at the supply), and optionally
    "yaw" (degrees, default 0) and "shape" ("box" default, or "cylinder")}.
    """
    cell = twin.cell
    eps = float(epsilon if epsilon is not None else (
        cell.twin.traj_epsilon if cell.twin.traj_epsilon is not None else DEFAULT_EPSILON))
    w = _ExecWorld(twin)
    try:
        out = _run(w, twin, timeline, parts, faults, eps)
        if on_end is not None:
            on_end(w.cid)
        return out
    finally:
        w.close()


def _run(w: _ExecWorld, twin: Twin, tl: Timeline, parts: dict[str, dict[str, Any]],
         faults: tuple[InjectedFault, ...], eps: float) -> Execution:
    """The faults injected, the timeline simulated step by step, the outcome judged."""
    robots = list(tl.t)
    slow, offset, drops = _inject(w, tl, robots, faults)
    for r in robots:
        w.reset_q(r, tl.q[r][0] + offset[r])
    # events in exec time per robot (a slow robot reaches its events later)
    pending = sorted(((t * slow[r], r, kind, part) for t, r, kind, part in tl.events),
                     key=lambda e: (e[0], e[1]))
    drop_at: dict[str, float] = {}
    for part in sorted(drops):  # not set order: str hashing differs between processes
        gs = [e for e in tl.events if e[3] == part and e[2] == "grasp"]
        rs = [e for e in tl.events if e[3] == part and e[2] == "release"]
        if gs and rs:
            drop_at[part] = (gs[0][0] + rs[0][0]) / 2 * slow[gs[0][1]]
    appear = sorted((float(v["appear"]), k) for k, v in parts.items())
    end = max(tl.end * max(slow.values()), tl.end) + SETTLE
    n = int(math.ceil(end * HZ)) + 1
    tp = np.arange(int(math.ceil(tl.end * HZ)) + 1) * DT
    qp = {r: np.array([tl.at(r, t) for t in tp]) for r in robots}
    te = np.arange(n) * DT
    qe, blocked = _simulate(w, tl, parts, robots, slow, offset, pending, drop_at, appear,
                            end, n)
    records = {r: Record(tp, qp[r], te, qe[r]) for r in robots}
    return _outcome(w, tl, parts, faults, eps, slow, records, blocked, end)


def _inject(w: _ExecWorld, tl: Timeline, robots: list[str], faults: tuple[InjectedFault, ...]
            ) -> tuple[dict[str, float], dict[str, np.ndarray], set[str]]:
    """The faults: each robot's slow-down factor and joint offsets, the parts to drop; the
    blocked regions added to the world."""
    slow = {r: 1.0 for r in robots}
    offset = {r: np.zeros(len(tl.q[r][0])) for r in robots}
    drops: set[str] = set()
    for f in faults:
        if f.kind == "slow":
            for r in robots:
                if f.robot in (None, r):
                    slow[r] = f.value
        elif f.kind == "offset":
            offset[f.robot][f.joint - 1] += f.value  # type: ignore[index,operator]
        elif f.kind == "drop":
            drops.add(f.part)  # type: ignore[arg-type]
        elif f.kind == "block":
            w.add_block(f.box)  # type: ignore[arg-type]
    return slow, offset, drops


def _simulate(w: _ExecWorld, tl: Timeline, parts: dict[str, dict[str, Any]],
              robots: list[str], slow: dict[str, float], offset: dict[str, np.ndarray],
              pending: list, drop_at: dict[str, float], appear: list[tuple[float, str]],
              end: float, n: int) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """``n`` physics steps: parts appear, grasps and releases happen, dropped parts are let
    go, each robot follows its (slowed, offset) plan; the executed joints per robot and the
    first contact time of each body with a blocked region."""
    qe = {r: np.zeros((n, len(tl.q[r][0]))) for r in robots}
    blocked: dict[str, float] = {}
    ai = 0
    ev = 0
    for k in range(n):
        t = k * DT
        if k % 240 == 0:  # no-op unless a command draws progress (stderr, a terminal)
            progress.tick("execute", k, n, f"{t:.1f} of {end:.1f} s simulated")
        while ai < len(appear) and appear[ai][0] <= t + 1e-12:
            name = appear[ai][1]
            d = parts[name]
            w.add_part(name, d["size"], d["start"], d["mass"], d.get("yaw", 0.0),
                       d.get("shape", "box"))
            ai += 1
        while ev < len(pending) and pending[ev][0] <= t + 1e-12:
            _, r, kind, part = pending[ev]
            if kind == "grasp" and part in w.parts:
                w.grasp(r, part)
            elif kind == "release":
                w.release(r)
            ev += 1
        for part, td in list(drop_at.items()):
            if t >= td:
                for r, held in list(w.held.items()):
                    if held[0] == part:
                        w.release(r)
                del drop_at[part]
        for r in robots:
            ts = t / slow[r]
            q = tl.at(r, ts) + offset[r]
            qn = tl.at(r, ts + DT / slow[r]) + offset[r]
            w.command(r, q, (qn - q) / DT)
        w.p.stepSimulation(physicsClientId=w.cid)
        w.carry()
        for r in robots:
            qe[r][k] = w.read(r)
        if w.blocks and k % 8 == 0:
            for c in w.block_contacts():
                blocked.setdefault(c, t)
    return qe, blocked


def _outcome(w: _ExecWorld, tl: Timeline, parts: dict[str, dict[str, Any]],
             faults: tuple[InjectedFault, ...], eps: float, slow: dict[str, float],
             records: dict[str, Record], blocked: dict[str, float], end: float) -> Execution:
    """Planned against executed: the largest joint deviation, per action, the parts off
    their place or turned, the blocked contacts; ok when none."""
    dmax, drobot, dt_ = 0.0, None, 0.0
    for r in records:
        d, at = delta(records[r])
        if d > dmax:
            dmax, drobot, dt_ = d, r, at
    per_action: dict[int, float] = {}
    for a, t0, t1, r in tl.windows:  # the action's own robot, inside its time window
        rec = records[r]
        m = (rec.t_exec >= t0 * slow[r]) & (rec.t_exec <= t1 * slow[r] + DT)
        per_action[a] = _exec_to_plan(rec.t_plan, rec.q_plan, rec.t_exec[m], rec.q_exec[m])
    misplaced = {}
    for name, spec in parts.items():
        if name in w.parts:
            off = float(np.linalg.norm(w.part_pos(name) - np.asarray(spec["place"])))
            if off > PLACE_TOL:
                misplaced[name] = off
        else:
            misplaced[name] = math.inf
    turned = _turned(w, parts)
    reasons = []
    if dmax > eps:
        reasons.append(f"trajectory deviation δ = {dmax:.4f} rad > ε = {eps:g} rad ({drobot} "
                       f"at t = {dt_:.2f} s)")
    for name, off in sorted(misplaced.items()):
        reasons.append(f"part {name} ends {off:.3f} m from its planned place" if
                       math.isfinite(off) else f"part {name} never appeared")
    for name, deg in sorted(turned.items()):
        reasons.append(f"part {name} ends turned {deg:.1f} deg from its planned pose")
    if blocked:
        reasons.append("contact with the blocked region: " + ", ".join(blocked))
    return Execution(ok=not reasons, delta=dmax, epsilon=eps, delta_robot=drobot, delta_t=dt_,
                     per_action=per_action, misplaced=misplaced, blocked=tuple(blocked),
                     blocked_at=blocked,
                     reasons=tuple(reasons), duration=end, records=records, faults=faults,
                     turned=turned)


def _turned(w: _ExecWorld, parts: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Parts given a yaw or a shape that end turned more than ``TURN_TOL_DEG`` from their
    planned pose (a box off its yaw, a cylinder tipped over), in degrees."""
    out = {}
    for name, d in parts.items():
        if name in w.parts and ("yaw" in d or "shape" in d):
            _, quat = w.p.getBasePositionAndOrientation(w.parts[name], physicsClientId=w.cid)
            deg = turn_error_deg(quat, d.get("yaw", 0.0), d.get("shape", "box"))
            if deg > TURN_TOL_DEG:
                out[name] = deg
    return out
