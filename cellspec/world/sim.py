"""A small physics simulation of a pick-and-place cell for the world-model loop (pybullet).

One pybullet DIRECT client per simulation, stepped at 240 Hz with gravity, seeded and
deterministic (``deterministicOverlappingPairs``; the same calls give the same states).
Parts are rigid boxes on the table (with friction anchors, so resting contacts do not
creep). The end effector is a 0.03 m pad driven by a
force-limited constraint; without a ``driver`` it moves along straight approach – transport
– place paths on its own (**a kinematic gripper body, not the robot arm**); with an
``ArmDriver`` (cellspec/world/arm.py) its targets are the TCP path of the twin's robot arm
(the arm's links are not bodies of this scene). A grasp is a fixed constraint between pad
and part (created only when the pad touches the part). Forces are read from the simulation:
the grasp force is the pad–part contact normal force while pressing, the external force
during transport is the contact force of the pad or the carried part with anything else,
the place contact force is the normal force between the part and its supports.

Parts are spawned as they are (docs/shapes.md): a box turned by its yaw about z, a vertical
cylinder as ``GEOM_CYLINDER`` (size (2R, 2R, H)), as the twin does (``robots/twin.py``);
a grasp keeps the part's orientation relative to the pad, and the sensor reports each
body's yaw (from its orientation) and shape.

Faults are physical: ``slip`` removes the grasp constraint during transport (the part
falls under gravity), ``obstacle`` spawns a static box in the path, ``moved`` displaces a
part that was already placed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pybullet as pb
from pybullet_utils import bullet_client

from cellspec.robots import quiet_stdout
from cellspec.robots.twin import yaw_quat
from cellspec.world.db import vec3

if TYPE_CHECKING:
    from cellspec.world.arm import ArmDriver

PAD = (0.03, 0.03, 0.01)  # gripper pad size, metres
PAD_MASS = 0.2
DT = 1.0 / 240.0
DRIVE_FORCE = 40.0  # N: the pad's drive limit (a stalled pad is a failed motion)
PRESS_FORCE = 20.0  # N: pressing down to grasp / to seat a part
HOLD_FORCE = 400.0  # N: the grasp constraint's strength
SPEED = 0.5  # m/s along the path
STOP_FORCE = 30.0  # N: external force at which the controller makes a protective stop
REACHED_M = 0.002


def _quiet_client() -> bullet_client.BulletClient:
    """A DIRECT client; pybullet's banner on fd 1 is sent to /dev/null (stdout is data)."""
    with quiet_stdout():
        return bullet_client.BulletClient(connection_mode=pb.DIRECT)


@dataclass
class Motion:
    """What a pad motion did: reached the goal, peak external force, simulated seconds."""

    reached: bool
    ext_force: float
    seconds: float


class Sim:
    """The simulated cell: table, parts, obstacles and the gripper pad."""

    def __init__(self, table_z: float = 0.0, seed: int = 0) -> None:
        self.p = _quiet_client()
        p = self.p
        p.resetSimulation()
        p.setPhysicsEngineParameter(deterministicOverlappingPairs=1, numSolverIterations=60,
                                    fixedTimeStep=DT)
        p.setGravity(0, 0, -9.81)
        self.seed = seed
        self.time = 0.0
        self.table_z = table_z
        col = p.createCollisionShape(pb.GEOM_BOX, halfExtents=[3, 3, 0.05])
        self.table = p.createMultiBody(0, col, -1, [0.45, 0.2, table_z - 0.05])
        p.changeDynamics(self.table, -1, lateralFriction=0.8, frictionAnchor=1)
        pc = p.createCollisionShape(pb.GEOM_BOX, halfExtents=[s / 2 for s in PAD])
        self.pad = p.createMultiBody(PAD_MASS, pc, -1, [0.45, -0.2, 0.3])
        p.changeDynamics(self.pad, -1, lateralFriction=1.0)
        self.drive = p.createConstraint(self.pad, -1, -1, -1, pb.JOINT_FIXED, [0, 0, 0],
                                        [0, 0, 0], [0.45, -0.2, 0.3])
        p.changeConstraint(self.drive, [0.45, -0.2, 0.3], maxForce=DRIVE_FORCE)
        self.bodies: dict[str, int] = {}
        self.kind: dict[str, str] = {}
        self.types: dict[str, str] = {}
        self.sizes: dict[str, tuple[float, float, float]] = {}
        self.yaws: dict[str, float] = {}  # spawn yaw, degrees
        self.shapes: dict[str, str] = {}
        self.report_yaw = False  # the sensor reports yaws once a part is turned or round
        self.grasp: int | None = None
        self.held: str | None = None
        self.goal = np.array([0.45, -0.2, 0.3])
        self.driver: ArmDriver | None = None  # cellspec/world/arm.py: the pad follows the arm

    def hold_here(self) -> None:
        """Make the pad's current position the commanded one (after a stop)."""
        self.goal = self.pad_pos()
        self.p.changeConstraint(self.drive, list(self.goal), maxForce=DRIVE_FORCE)
        if self.driver is not None:
            self.driver.sync(self.goal)

    def close(self) -> None:
        """Disconnect the physics client."""
        self.p.disconnect()

    # -- bodies ----------------------------------------------------------------------
    def add_box(self, name: str, typ: str, size: tuple[float, float, float],
                pos: tuple[float, float, float], mass: float, kind: str = "part", *,
                yaw: float = 0.0, shape: str = "box") -> None:
        """A rigid body (mass 0: static) named ``name``: a box turned by ``yaw`` degrees about
        z, or a vertical cylinder of size (2R, 2R, H)."""
        p = self.p
        if shape == "cylinder":
            col = p.createCollisionShape(pb.GEOM_CYLINDER, radius=size[0] / 2, height=size[2])
        else:
            col = p.createCollisionShape(pb.GEOM_BOX, halfExtents=[s / 2 for s in size])
        if yaw == 0.0:  # as before shapes: the same calls
            b = p.createMultiBody(mass, col, -1, list(pos))
        else:
            b = p.createMultiBody(mass, col, -1, list(pos), list(yaw_quat(yaw)))
        # friction anchors: static friction holds resting contacts in place; without them
        # parts pressed against each other creep apart (soft contacts), pushing a wall of
        # touching cubes several millimetres off its layout over a run
        p.changeDynamics(b, -1, lateralFriction=0.8, frictionAnchor=1)
        self.bodies[name], self.kind[name], self.types[name] = b, kind, typ
        self.sizes[name] = vec3(size)
        self.yaws[name], self.shapes[name] = float(yaw), shape
        self.report_yaw |= yaw != 0.0 or shape != "box"

    def pose(self, name: str) -> np.ndarray:
        """True centre of a body."""
        return np.array(self.p.getBasePositionAndOrientation(self.bodies[name])[0])

    def quat(self, name: str) -> np.ndarray:
        """True orientation (xyzw) of a body."""
        return np.array(self.p.getBasePositionAndOrientation(self.bodies[name])[1])

    def yaw(self, name: str) -> float:
        """True yaw (degrees about z) of a body, in (-180, 180]."""
        x, y, z, w = self.quat(name)
        return math.degrees(math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))

    def extent(self, name: str) -> tuple[float, float, float]:
        """The size of the axis-aligned box enclosing a body as it lies now (a box spawned
        without a yaw: its size, as before shapes)."""
        s = self.sizes[name]
        if self.yaws.get(name, 0.0) == 0.0 or self.shapes.get(name) == "cylinder":
            return s
        t = math.radians(self.yaw(name))
        co, si = abs(math.cos(t)), abs(math.sin(t))
        return (co * s[0] + si * s[1], si * s[0] + co * s[1], s[2])

    def speed(self, name: str) -> float:
        """True linear speed of a body, m/s."""
        return float(np.linalg.norm(self.p.getBaseVelocity(self.bodies[name])[0]))

    def pad_pos(self) -> np.ndarray:
        """True centre of the gripper pad."""
        return np.array(self.p.getBasePositionAndOrientation(self.pad)[0])

    def teleport(self, name: str, pos: tuple[float, float, float]) -> None:
        """Put a body elsewhere (the `moved` fault: someone moves a part), at its spawn yaw."""
        q = [0, 0, 0, 1] if self.yaws.get(name, 0.0) == 0.0 else list(yaw_quat(self.yaws[name]))
        self.p.resetBasePositionAndOrientation(self.bodies[name], list(pos), q)
        self.p.resetBaseVelocity(self.bodies[name], [0, 0, 0], [0, 0, 0])

    # -- stepping and forces ---------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance the simulation n fixed steps."""
        for _ in range(n):
            self.p.stepSimulation()
        self.time += n * DT

    def contact_force(self, a: int, b: int | None = None, exclude: tuple[int, ...] = ()
                      ) -> float:
        """Sum of contact normal forces on body a (with b, or with anything not excluded)."""
        pts = self.p.getContactPoints(bodyA=a) if b is None else \
            self.p.getContactPoints(bodyA=a, bodyB=b)
        return float(sum(c[9] for c in pts if c[2] not in exclude))

    def _external(self) -> float:
        mine = (self.pad,) + ((self.bodies[self.held],) if self.held else ())
        f = self.contact_force(self.pad, exclude=mine)
        if self.held:
            f += self.contact_force(self.bodies[self.held], exclude=mine)
        return f

    # -- motion ----------------------------------------------------------------------
    def move(self, goal: Sequence[float] | np.ndarray, speed: float = SPEED,
             slip_at: float | None = None, force: float = DRIVE_FORCE,
             settle: int = 24, stop: bool = True,
             guard: Callable[[], bool] | None = None) -> Motion:
        """Drive the pad to ``goal``; ``slip_at`` in (0, 1) drops the part; ``stop``: make a
        protective stop when the external force exceeds STOP_FORCE (off when seating a part,
        where contact with touching neighbours is expected; the drive stays force-limited);
        ``guard``: checked every step, True halts the pad where it stands (a guarded move)."""
        p = self.p
        start = self.goal.copy()
        goal = np.asarray(goal, float)
        dist = float(np.linalg.norm(goal - start))
        n = max(1, int(np.ceil(dist / speed / DT)))
        peak = 0.0
        t0 = self.time
        targets = None
        if self.driver is not None:  # the arm's TCP path (engine `arm`)
            targets = self.driver.path(start, goal, n)
            if targets is None:  # no IK solution on the way: the controller refuses
                return Motion(reached=False, ext_force=0.0, seconds=0.0)
        for k in range(1, n + settle + 1):
            s = min(1.0, k / n)
            target = targets[min(k, n) - 1] if targets is not None else start + (goal - start) * s
            p.changeConstraint(self.drive, list(target), maxForce=force)
            self.step()
            if slip_at is not None and self.grasp is not None and s >= slip_at:
                self.release()
            peak = max(peak, self._external())
            if stop and peak > STOP_FORCE:  # protective stop: halt on a hard contact
                break
            if guard is not None and guard():
                self.hold_here()
                return Motion(reached=False, ext_force=peak, seconds=self.time - t0)
        extra = 0  # a lagging pad gets up to 0.4 s more to arrive
        while ((not stop or peak <= STOP_FORCE) and extra < 96
               and float(np.linalg.norm(self.pad_pos() - goal)) > REACHED_M):
            self.step()
            extra += 1
            peak = max(peak, self._external())
        reached = float(np.linalg.norm(self.pad_pos() - goal)) <= REACHED_M
        if not reached and not stop:  # jammed while seating: stay where it stands
            self.hold_here()
        elif not reached:
            # a stopped pad backs off 1 cm along its path and stays there (re-plan from there)
            d = goal - start
            d = d / (np.linalg.norm(d) or 1.0)
            back = self.pad_pos() - d * 0.01
            p.changeConstraint(self.drive, list(back), maxForce=force)
            self.step(settle)
            self.goal = back
            if self.driver is not None:
                self.driver.sync(back)
        else:
            self.goal = goal
        return Motion(reached=reached, ext_force=peak, seconds=self.time - t0)

    def press(self, part: str | None, depth: float, force: float, seconds: float,
              threshold: float = 0.0) -> tuple[float, float, float]:
        """Push the pad down by ``depth`` with ``force``; returns (grasp force between pad and
        part, peak part-support contact force, seconds the support force exceeded threshold)."""
        p = self.p
        target = self.goal - np.array([0, 0, depth])
        p.changeConstraint(self.drive, list(target), maxForce=force)
        steps = int(round(seconds / DT))
        grip, peak, above = 0.0, 0.0, 0
        pb_part = self.bodies[part] if part else None
        for _ in range(steps):
            self.step()
            if pb_part is not None:
                grip = self.contact_force(self.pad, pb_part)
                sup = self.contact_force(pb_part, exclude=(self.pad, pb_part))
                peak = max(peak, sup)
                above = above + 1 if sup > threshold else 0
        return grip, peak, above * DT

    def touching(self, part: str, allowed: tuple[str, ...] = ()) -> tuple[float, list[str]]:
        """Contact normal force (N) on a part from bodies other than the pad, the table and
        ``allowed`` (its intended supports), and the names of those bodies."""
        b = self.bodies[part]
        names = {v: k for k, v in self.bodies.items()}
        skip = {self.pad, self.table, b} | {self.bodies[n] for n in allowed if n in self.bodies}
        force, who = 0.0, set()
        for pt in self.p.getContactPoints(bodyA=b):
            if pt[2] in skip or pt[2] not in names:
                continue
            force += max(pt[9], 0.0)
            who.add(names[pt[2]])
        return force, sorted(who)

    def attach(self, part: str) -> bool:
        """Close the grasp on a part the pad touches (fixed constraint); False if not touching."""
        b = self.bodies[part]
        if not self.p.getContactPoints(bodyA=self.pad, bodyB=b):
            return False
        pp, _ = self.p.getBasePositionAndOrientation(self.pad)
        bp, _ = self.p.getBasePositionAndOrientation(b)
        rel = np.subtract(bp, pp)
        if self.yaws.get(part, 0.0) == 0.0 and self.shapes.get(part) != "cylinder":
            self.grasp = self.p.createConstraint(self.pad, -1, b, -1, pb.JOINT_FIXED, [0, 0, 0],
                                                 list(rel), [0, 0, 0])
        else:  # hold the part as it lies (a turned box keeps its yaw in the grasp)
            pq = self.p.getBasePositionAndOrientation(self.pad)[1]
            bq = self.p.getBasePositionAndOrientation(b)[1]
            inv = self.p.invertTransform([0, 0, 0], pq)
            _, relq = self.p.multiplyTransforms(inv[0], inv[1], [0, 0, 0], bq)
            self.grasp = self.p.createConstraint(self.pad, -1, b, -1, pb.JOINT_FIXED, [0, 0, 0],
                                                 list(rel), [0, 0, 0],
                                                 parentFrameOrientation=list(relq))
        self.p.changeConstraint(self.grasp, maxForce=HOLD_FORCE)
        self.p.setCollisionFilterPair(self.pad, b, -1, -1, 0)
        self.held = part
        return True

    def release(self) -> None:
        """Open the grasp (the part is then under gravity alone)."""
        if self.grasp is not None:
            assert self.held is not None  # set together with self.grasp
            self.p.removeConstraint(self.grasp)
            self.p.setCollisionFilterPair(self.pad, self.bodies[self.held], -1, -1, 1)
        self.grasp, self.held = None, None

    # -- observation -----------------------------------------------------------------
    def observe(self, rng: np.random.Generator, noise: float) -> list[dict]:
        """Ground-truth boxes of every part and obstacle, with seeded Gaussian noise (m)."""
        out = []
        for name in sorted(self.bodies):
            pos = self.pose(name) + rng.normal(0.0, noise, 3) if noise > 0 else self.pose(name)
            o: dict[str, object] = {"name": name, "type": self.types[name],
                                    "pos": tuple(map(float, pos)), "size": self.sizes[name],
                                    "kind": self.kind[name]}
            if self.report_yaw:  # axis-aligned runs: as before shapes (no yaw reported)
                o["yaw"], o["shape"] = self.yaw(name), self.shapes[name]
            out.append(o)
        return out

    def boxes(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """True (name, lo, hi) of every body, for placing faults in free space."""
        out = []
        for name in sorted(self.bodies):
            c, s = self.pose(name), np.array(self.extent(name))
            out.append((name, c - s / 2, c + s / 2))
        return out
