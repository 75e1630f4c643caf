"""The kinematic twin: one persistent pybullet DIRECT client per cell, never stepped.

Robots are placed at the cell's ``base`` and ``yaw``, each with its gripper (from the
cell) attached to the flange; the layout's parts, the keep-out zones and the surfaces
become static boxes (a part as it is: a box or a vertical cylinder, turned by its yaw;
docs/shapes.md). Body names: ``part:ID``, ``keepout:NAME``, ``obstacle:NAME``,
``surface:NAME``; robot links are named ``ROBOT/LINK``. Every pybullet call passes
``physicsClientId``; ``deterministicOverlappingPairs=1`` is set.

Half-space keep-outs become a 20 m slab whose face is the plane. Surfaces are 0.02 m
thick slabs (top at the surface height) 6 m square, centred on the workspace.

Contract additions (used by the task/execution modules; kept stable): ``robot(name)``
returns the ``RobotBody`` record (``body``, ``joints``, ``tcp``, ``link_names``,
``parent``, ``geom_links``, ``gripper_links``, ``base_links``, ``spec``, ``gripper``,
``q``); ``pose(name)``, ``link_pose(robot, link)``, ``carried(robot)``, ``set_qs``,
``all_q``, ``names(kinds)``, ``body_name(id)``, ``add_layout(layout)``; the dicts
``bodies``/``kinds``/``sizes``/``yaws``/``shapes`` keyed by body name; ``version``
(bumped when the bodies or attachments change); ``yaw_quat(deg)``. ``tool_pose(robot, q)``
restores the joints.

``home(robot)`` is the cell's ``home ROBOT (q1, ...)`` when the cell declares one (checked
when the twin is built: the model's joint count and limits, else ``CellspecError`` at the
robot's line), else the model's home; robots start there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pybullet as p

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.model import BoxZone, Cell
from cellspec.layout import Layout
from cellspec.robots.collision import CollisionChecker
from cellspec.robots.custom import spec_of
from cellspec.robots.home import tool_down_home
from cellspec.robots.models import check_models
from cellspec.robots.spec import RobotSpec
from cellspec.robots.tasks import part_shape, part_size
from cellspec.robots.urdf import GripperGeom, robot_urdf

KINDS = ("part", "keepout", "obstacle", "surface")
SHAPES = ("box", "cylinder")
ZONE_CLIP = 5.0  # unbounded keep-out axes are clipped to +-5 m
SLAB = 10.0  # half-thickness of a half-space keep-out slab

_COLOURS = {"part": (0.2, 0.6, 0.9, 1), "keepout": (0.9, 0.1, 0.1, 0.35),
            "obstacle": (0.5, 0.5, 0.5, 1), "surface": (0.8, 0.75, 0.65, 1)}


@dataclass
class RobotBody:
    """A robot loaded in the twin: its body, joint indices and named links."""

    name: str
    spec: RobotSpec
    gripper: GripperGeom
    body: int
    joints: tuple[int, ...]
    tcp: int
    link_names: dict[int, str]  # link index (-1 base) -> link name
    parent: dict[int, int]  # link index -> parent link index (base: none)
    geom_links: tuple[int, ...]  # links that have collision geometry
    gripper_links: frozenset[int]
    base_links: frozenset[int]
    q: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _f(x) -> float:
    return float(x)


def yaw_quat(yaw_deg: float) -> tuple[float, float, float, float]:
    """Quaternion (xyzw) of a rotation by yaw_deg degrees about z."""
    h = math.radians(yaw_deg) / 2
    return (0.0, 0.0, math.sin(h), math.cos(h))


def shape_ids(cid: int, half: Sequence[float], shape: str,
              rgba: Sequence[float] | None = None) -> tuple[int, int]:
    """Collision and visual shape ids (visual -1 without ``rgba``) of a box of half extents
    ``half``, or of a vertical cylinder of radius half[0] and height 2 half[2] (pybullet's
    cylinder axis is z; a cylinder's half extents are (R, R, H/2))."""
    h = [float(v) for v in half]
    if shape == "cylinder":
        col = p.createCollisionShape(p.GEOM_CYLINDER, radius=h[0], height=2 * h[2],
                                     physicsClientId=cid)
        vis = (-1 if rgba is None else
               p.createVisualShape(p.GEOM_CYLINDER, radius=h[0], length=2 * h[2],
                                   rgbaColor=list(rgba), physicsClientId=cid))
        return col, vis
    col = p.createCollisionShape(p.GEOM_BOX, halfExtents=h, physicsClientId=cid)
    vis = (-1 if rgba is None else
           p.createVisualShape(p.GEOM_BOX, halfExtents=h, rgbaColor=list(rgba),
                               physicsClientId=cid))
    return col, vis


def connect(gravity_z: float = 0.0) -> int:
    """A new pybullet DIRECT client with deterministic overlapping pairs and gravity
    ``gravity_z`` along z (the twin: none; the execution client: -9.81)."""
    cid = p.connect(p.DIRECT)
    p.setPhysicsEngineParameter(deterministicOverlappingPairs=1, physicsClientId=cid)
    p.setGravity(0, 0, gravity_z, physicsClientId=cid)
    return cid


def load_robot(cid: int, r, spec: RobotSpec, gripper: GripperGeom) -> int:
    """Load the cell robot ``r`` (its model with its gripper) at its base and yaw, fixed."""
    return p.loadURDF(robot_urdf(spec, gripper), basePosition=[_f(v) for v in r.base],
                      baseOrientation=yaw_quat(_f(r.yaw_deg)), useFixedBase=True,
                      physicsClientId=cid)


def surface_slabs(cell: Cell) -> list[tuple[str, tuple[float, float, float]]]:
    """Each surface's name and slab centre: 6 m square, 0.02 m thick, top at the surface
    height, centred on the workspace."""
    ws = cell.workspace
    cx = (_f(ws.lo[0]) + _f(ws.hi[0])) / 2
    cy = (_f(ws.lo[1]) + _f(ws.hi[1])) / 2
    return [(s.name, (cx, cy, _f(s.z) - 0.01)) for s in cell.surfaces]


class Twin:
    """The cell's kinematic pybullet world: robots with grippers, parts, keep-outs, surfaces."""

    def __init__(self, cell: Cell, layout: Layout | None = None) -> None:
        """Connect a DIRECT client and build the cell (and layout parts, if given)."""
        self.cell = cell
        check_models(cell)
        self.client: int = connect()
        self._robots: dict[str, RobotBody] = {}
        self._homes: dict[str, np.ndarray] = {}
        self.bodies: dict[str, int] = {}
        self.kinds: dict[str, str] = {}
        self.sizes: dict[str, np.ndarray] = {}
        self.attached: dict[str, tuple[str, tuple, tuple]] = {}
        self.version = 0  # bumped whenever the set of bodies changes
        self.moves = 0  # bumped whenever a static body is moved (set_pose)
        self._shapes: dict[tuple[float, float, float, str, str], tuple[int, int]] = {}
        self.yaws: dict[str, float] = {}  # body name -> its rest yaw (degrees), parts only
        self.shapes: dict[str, str] = {}  # body name -> "box" | "cylinder"
        self._checker: CollisionChecker | None = None  # the default one, made on first use
        try:  # any error while building (bad input or pybullet's) disconnects the client
            for r in cell.robots:
                self._load_robot(r)
            self.robot_names: tuple[str, ...] = tuple(r.name for r in cell.robots)
            self.body_robot = {rb.body: rb for rb in self._robots.values()}
            self._add_surfaces()
            self._add_keepouts()
            for r in cell.robots:  # a robot from its own URDF has no ready pose of its own
                if r.urdf is not None and r.name not in cell.twin.homes:
                    self._homes[r.name] = tool_down_home(self, r)
                    self.set_q(r.name, self._homes[r.name])
            if layout is not None:
                self.add_layout(layout)
        except BaseException:
            self.close()
            raise

    # -- building ---------------------------------------------------------------------
    def _load_robot(self, r) -> None:
        spec = spec_of(r)
        g = r.gripper
        dflt = self.cell.gripper_params(g.kind)
        opening = g.opening if g.opening is not None else dflt.opening
        depth = g.depth if g.depth is not None else dflt.depth
        geom = GripperGeom(kind=g.kind, opening=_f(opening) if opening is not None else 0.07,
                           depth=_f(depth) if depth is not None else 0.02)
        cid = self.client
        body = load_robot(cid, r, spec, geom)
        names: dict[int, str] = {-1: p.getBodyInfo(body, physicsClientId=cid)[0].decode()}
        parent: dict[int, int] = {}
        by_joint: dict[str, int] = {}
        for j in range(p.getNumJoints(body, physicsClientId=cid)):
            info = p.getJointInfo(body, j, physicsClientId=cid)
            by_joint[info[1].decode()] = j
            names[j] = info[12].decode()
            parent[j] = info[16]
        joints = tuple(by_joint[n] for n in spec.joint_names)
        link_index = {v: k for k, v in names.items()}
        geom_links = tuple(sorted(
            li for li in names
            if p.getCollisionShapeData(body, li, physicsClientId=cid)))
        rb = RobotBody(
            name=r.name, spec=spec, gripper=geom, body=body, joints=joints,
            tcp=link_index[spec.tool_link], link_names=names, parent=parent,
            geom_links=geom_links,
            gripper_links=frozenset(link_index[n] for n in geom.links()),
            base_links=frozenset(link_index[n] for n in spec.base_links if n in link_index),
        )
        self._robots[r.name] = rb
        self._homes[r.name] = self._cell_home(r, spec)
        self.set_q(r.name, self._homes[r.name])

    def _cell_home(self, r, spec: RobotSpec) -> np.ndarray:
        """The cell's ``home ROBOT (...)`` override when given (checked), else the model's."""
        h = self.cell.twin.homes.get(r.name)
        if h is None:
            return np.array(spec.home, dtype=float)
        q = np.array([float(v) for v in h])
        src = self.cell.twin.home_sources.get(r.name, r.source)  # the `home` line
        if q.shape != (spec.dof,):
            raise CellspecError(Diagnostic(
                src.file, src.line, src.col,
                f"home of {r.name}: {spec.model} has {spec.dof} joints, the cell gives "
                f"{len(q)} angles"))
        if not spec.within_limits(q):
            bad = [k + 1 for k in range(spec.dof)
                   if not spec.lower[k] - 1e-9 <= q[k] <= spec.upper[k] + 1e-9]
            raise CellspecError(Diagnostic(
                src.file, src.line, src.col,
                f"home of {r.name} is outside the joint limits of {spec.model} (joint"
                f"{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))})"))
        return q

    def _shape(self, half: Sequence[float], kind: str, shape: str = "box") -> tuple[int, int]:
        key = (round(half[0], 9), round(half[1], 9), round(half[2], 9), kind, shape)
        if key not in self._shapes:
            self._shapes[key] = shape_ids(self.client, key[:3], shape, _COLOURS[kind])
        return self._shapes[key]

    def _add_surfaces(self) -> None:
        for name, centre in surface_slabs(self.cell):
            self.add_box(name, (6.0, 6.0, 0.02), centre, kind="surface")

    def _add_keepouts(self) -> None:
        for z in self.cell.keepouts:
            if isinstance(z, BoxZone):
                lo = np.clip([_f(v) for v in z.box.lo], -ZONE_CLIP, ZONE_CLIP)
                hi = np.clip([_f(v) for v in z.box.hi], -ZONE_CLIP, ZONE_CLIP)
                self.add_box(z.name, hi - lo, (lo + hi) / 2, kind="keepout")
            else:
                n = np.array([_f(c) for c in z.coef])
                nn = float(np.linalg.norm(n))
                if nn == 0:
                    continue
                u = n / nn
                p0 = u * (_f(z.rhs) / nn)
                sign = 1.0 if z.op in (">", ">=") else -1.0
                centre = p0 + sign * SLAB * u
                axis = np.cross([0.0, 0.0, 1.0], u)
                s = float(np.linalg.norm(axis))
                ang = math.atan2(s, float(u[2]))
                quat = (p.getQuaternionFromAxisAngle((axis / s).tolist(), ang,
                                                     physicsClientId=self.client)
                        if s > 1e-12 else (1.0, 0.0, 0.0, 0.0) if u[2] < 0
                        else (0.0, 0.0, 0.0, 1.0))
                self.add_box(z.name, (2 * SLAB, 2 * SLAB, 2 * SLAB), centre, kind="keepout")
                self.set_pose(f"keepout:{z.name}", centre, quat)

    def add_layout(self, layout: Layout) -> None:
        """Add every part of a layout as it is: a box or a cylinder of its size (its own, or
        its type's), turned by its yaw."""
        for i, pid in enumerate(layout.ids):
            yaw, shape = part_shape(self.cell, layout, i)
            self.add_box(pid, part_size(self.cell, layout, i), layout.pos[i], kind="part",
                         yaw=yaw, shape=shape)

    # -- bodies -----------------------------------------------------------------------
    def _key(self, name: str) -> str:
        if name in self.bodies:
            return name
        hits = [f"{k}:{name}" for k in KINDS if f"{k}:{name}" in self.bodies]
        if len(hits) != 1:
            raise KeyError(f"no single body named {name!r} in the twin")
        return hits[0]

    def add_box(self, name: str, size, pos, kind: str = "part", *, yaw: float = 0.0,
                shape: str = "box") -> int:
        """Add a static body (kind part|keepout|obstacle|surface): a box of ``size``, or a
        vertical cylinder whose ``size`` is its bounding box (2R, 2R, H), turned by ``yaw``
        degrees about z (its rest orientation); returns its body id."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}, not {shape!r}")
        key = f"{kind}:{name}"
        if key in self.bodies:
            raise ValueError(f"{key} already exists in the twin")
        size = np.asarray(size, dtype=float)
        if size.shape != (3,) or not np.all(np.isfinite(size)) or np.any(size <= 0):
            raise ValueError(f"{key}: box size must be three positive numbers, not {size}")
        if shape == "cylinder" and size[0] != size[1]:
            raise ValueError(f"{key}: a cylinder's size is (2R, 2R, H), not {size}")
        if not math.isfinite(float(yaw)):
            raise ValueError(f"{key}: yaw must be a finite number of degrees, not {yaw}")
        col, vis = self._shape(tuple(size / 2), kind, shape)
        body = p.createMultiBody(baseMass=0, baseCollisionShapeIndex=col,
                                 baseVisualShapeIndex=vis,
                                 basePosition=[float(v) for v in pos],
                                 baseOrientation=yaw_quat(float(yaw)),
                                 physicsClientId=self.client)
        self.bodies[key] = body
        self.kinds[key] = kind
        self.sizes[key] = size
        self.yaws[key] = float(yaw)
        self.shapes[key] = shape
        self.version += 1
        return body

    def remove(self, name: str) -> None:
        """Remove a body (detaching it first if carried)."""
        key = self._key(name)
        for robot, (part, _, _) in list(self.attached.items()):
            if part == key:
                del self.attached[robot]
        p.removeBody(self.bodies.pop(key), physicsClientId=self.client)
        del self.kinds[key], self.sizes[key], self.yaws[key], self.shapes[key]
        self.version += 1

    def set_pose(self, name: str, pos, quat=None) -> None:
        """Move a body to pos, with orientation quat (xyzw), or its rest orientation (its
        yaw when it was added) when quat is None."""
        key = self._key(name)
        q = (yaw_quat(self.yaws[key]) if quat is None
             else tuple(float(v) for v in quat))
        self.moves += 1
        p.resetBasePositionAndOrientation(self.bodies[key],
                                          [float(v) for v in pos], q,
                                          physicsClientId=self.client)

    def pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World position and orientation (xyzw) of a body."""
        pos, quat = p.getBasePositionAndOrientation(self.bodies[self._key(name)],
                                                    physicsClientId=self.client)
        return np.array(pos), np.array(quat)

    def body_name(self, body: int) -> str:
        """The name of a non-robot body id."""
        for k, v in self.bodies.items():
            if v == body:
                return k
        raise KeyError(body)

    # -- robots -----------------------------------------------------------------------
    def robot(self, robot: str) -> RobotBody:
        """The loaded robot record (body id, joints, links)."""
        try:
            return self._robots[robot]
        except KeyError:
            raise KeyError(f"no robot {robot!r}; robots: {', '.join(self._robots)}") from None

    def default_checker(self) -> CollisionChecker:
        """The twin's own CollisionChecker (margin 0), made on first use and kept: IK and
        motion planning share it when no checker is passed."""
        if self._checker is None:
            self._checker = CollisionChecker(self)
        return self._checker

    def spec(self, robot: str) -> RobotSpec:
        """The robot's model spec."""
        return self.robot(robot).spec

    def home(self, robot: str) -> np.ndarray:
        """The robot's home configuration: the cell's ``home ROBOT (...)`` when the cell
        gives one, else the model's (a copy; the one source of truth for every module)."""
        self.robot(robot)
        return self._homes[robot].copy()

    def get_q(self, robot: str) -> np.ndarray:
        """The robot's current joint configuration (a copy)."""
        return self.robot(robot).q.copy()

    def set_q(self, robot: str, q) -> None:
        """Set the robot's joints (kinematically) and move the part it carries."""
        rb = self.robot(robot)
        q = np.asarray(q, dtype=float)
        if q.shape != (len(rb.joints),):
            raise ValueError(f"{robot}: expected {len(rb.joints)} joint values, got {q.shape}")
        cid = self.client
        p.resetJointStatesMultiDof(rb.body, rb.joints, [[v] for v in q.tolist()],
                                   physicsClientId=cid)
        rb.q = q.copy()
        held = self.attached.get(robot)
        if held is not None:
            part, rpos, rquat = held
            tpos, tquat = self._tcp_pose(rb)
            wpos, wquat = p.multiplyTransforms(tpos, tquat, rpos, rquat, physicsClientId=cid)
            p.resetBasePositionAndOrientation(self.bodies[part], wpos, wquat,
                                              physicsClientId=cid)

    def _tcp_pose(self, rb: RobotBody) -> tuple[tuple, tuple]:
        st = p.getLinkState(rb.body, rb.tcp, computeForwardKinematics=1,
                            physicsClientId=self.client)
        return st[4], st[5]

    def tool_pose(self, robot: str, q=None) -> tuple[np.ndarray, np.ndarray]:
        """World TCP position and orientation (xyzw) at q (default: the current q)."""
        rb = self.robot(robot)
        if q is None:
            pos, quat = self._tcp_pose(rb)
            return np.array(pos), np.array(quat)
        old = rb.q.copy()
        self.set_q(robot, q)
        pos, quat = self._tcp_pose(rb)
        self.set_q(robot, old)
        return np.array(pos), np.array(quat)

    def link_pose(self, robot: str, link: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of a robot link's frame at the current q."""
        rb = self.robot(robot)
        idx = {v: k for k, v in rb.link_names.items()}[link]
        if idx == -1:
            pos, quat = p.getBasePositionAndOrientation(rb.body, physicsClientId=self.client)
        else:
            st = p.getLinkState(rb.body, idx, computeForwardKinematics=1,
                                physicsClientId=self.client)
            pos, quat = st[4], st[5]
        return np.array(pos), np.array(quat)

    def attach(self, robot: str, part: str) -> None:
        """Make the part follow the robot's tool (keeps the current relative pose)."""
        rb = self.robot(robot)
        key = self._key(part)
        tpos, tquat = self._tcp_pose(rb)
        ppos, pquat = p.getBasePositionAndOrientation(self.bodies[key],
                                                      physicsClientId=self.client)
        ipos, iquat = p.invertTransform(tpos, tquat, physicsClientId=self.client)
        rpos, rquat = p.multiplyTransforms(ipos, iquat, ppos, pquat,
                                           physicsClientId=self.client)
        self.attached[robot] = (key, rpos, rquat)
        self.version += 1

    def detach(self, robot: str) -> None:
        """Release the part the robot carries (it stays where it is)."""
        if self.attached.pop(robot, None) is not None:
            self.version += 1

    def carried(self, robot: str) -> str | None:
        """The body name of the part the robot carries, if any."""
        held = self.attached.get(robot)
        return held[0] if held else None

    def set_qs(self, qs: dict[str, np.ndarray]) -> None:
        """Set several robots' joints."""
        for r, q in qs.items():
            self.set_q(r, q)

    def all_q(self) -> dict[str, np.ndarray]:
        """Current configuration of every robot."""
        return {r: self.get_q(r) for r in self.robot_names}

    def names(self, kinds: Iterable[str] = KINDS) -> list[str]:
        """Body names of the given kinds, in insertion order."""
        ks = set(kinds)
        return [k for k in self.bodies if self.kinds[k] in ks]

    # -- lifetime ---------------------------------------------------------------------
    def close(self) -> None:
        """Disconnect the pybullet client (idempotent)."""
        if self.client >= 0:
            try:
                p.disconnect(physicsClientId=self.client)
            finally:
                self.client = -1

    def __enter__(self) -> Twin:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
