"""The physics oracle: does a layout's structure stand in pybullet, stage by stage?

``settle(cell, layout)`` builds a pybullet DIRECT client of its own (gravity −9.81, no
robot, no GUI, ``deterministicOverlappingPairs=1``, ``HZ`` = 960 Hz, pybullet's default
solver otherwise: 50 sequential-impulse iterations, split impulse, default ERP)
with every surface of the cell a static slab at its height (``twin.surface_slabs``). The
layout's parts are spawned one by one in the layout's ``order`` (the parts list's order
when there is none), each at its planned pose as a dynamic body of its resolved size and
mass (``build_instance``: the part type's size and mass, scaled by volume for a part with
its own size): a box turned by its yaw, or a vertical ``GEOM_CYLINDER`` of the type's
radius and height (docs/shapes.md). After each spawn the world runs at least
``SPAWN_STEPS`` steps (0.3 s) and then on, up to ``SPAWN_MAX_STEPS`` (2 s), while any
part still moves (faster than ``REST_SPEED`` or turning faster than ``REST_SPIN``); then
the finished structure at least ``FINAL_STEPS`` (1 s), up to ``FINAL_MAX_STEPS`` (4 s)
the same way. The extension matters for parts at a knife edge: a cube whose centre is
exactly over its support's edge starts to tip from pybullet's round-off and needs ~0.5 s
to fall (it turns at 0.04 rad/s after 0.1 s, 0.8 rad/s after 0.3 s; standing structures
turn at most 0.007 rad/s then), and a fixed 0.3 s let the next part arrive in time to
prop it up (measured at 240 Hz; the knife-edge cube still falls at 960 and 2400 Hz). The
result gives, per part, the largest displacement of its centre from its planned place and
the largest rotation over the whole run, and the step at which it fell.

Rate: 960 Hz, four times pybullet's default, because 240 Hz does not converge for heavy
loads on light parts. Bullet's contact solver (projected Gauss-Seidel, a fixed number of
iterations per step) converges slowly when the masses in contact differ a lot; at 240 Hz
a mixed stack of 0.356 kg on the benchmark's 30 mm cube (0.022 kg, 16:1), its load 1.3 mm
inside the cube's edge, tipped the cube and fell (the 1 mm false pass of issue 14, seed 0
#623; seed 1 #55 the same), which a rigid stack with its load inside the edge does not
do. The same stack stands at 960 Hz (largest displacement 0.89 mm), at 2400 Hz (0.16 mm)
and at 240 Hz with 200 iterations; `cellspec sim` (the twin, 240 Hz) drops it too and
executes it standing at 960 Hz. Moved 2.6 mm (its load 1.3 mm beyond the edge) it falls
at every rate. A smaller time step is the standard cure and keeps Bullet's defaults
otherwise; it is deterministic like the rest. Convergence on the benchmark's 1 400
structures (seeds 0 and 1): 240 -> 960 Hz changes 14 labels (13 fall -> stand, each in
rigid equilibrium: 8 loads less than 1 mm inside an edge, 4 mixed stacks with the 30 mm
cube under heavier parts, 1 canopy; 1 stand -> fall, an arm 0.1 mm inside its base's
edge when placed); 960 -> 2400
Hz changes 2 of 220 (every changed one plus a seeded sample): a knife-edge stage whose
verdict flips with the direction of a 0.2 mm perturbation, and one fall measured 5.4 mm,
just past the threshold. The noise on obvious standers drops from 0.43 mm / 0.89 deg to
0.14 mm / 0.29 deg. Cost: 3.3x (0.045 -> 0.15 s of CPU per benchmark structure, idle).

Friction: Bullet combines two bodies' ``lateralFriction`` by multiplying them, so every
body (parts and slabs) gets ``sqrt(mu)`` and every contact has the cell's ``friction MU``
(default 0.5; measured: a block pushed by 0.45 m g stays, 0.55 m g slides). No rolling
or spinning friction, no restitution.

Threshold: a part **fell** when it moved more than ``FALL_DISPLACEMENT`` (5 mm) from its
planned place or turned more than ``FALL_ROTATION_DEG`` (5°) from its planned orientation
(a box: the whole rotation from its yaw; a cylinder: the tilt of its axis only, since a
turn about its own axis leaves the same shape in the same place). pybullet's own noise on
structures that obviously stand, spawned exactly touching (measured by
``cellspec.robots.agreement.measure_noise``, printed by ``bench/physics_agreement.py``):
aligned towers of 1-6 cubes move at most 0.07 mm and turn 0.03°; an aligned 4x2 wall,
whose side faces touch, 0.14 mm and 0.07°; a plate on four pillars 0.10 mm and 0.29°
(at 240 Hz: 0.28, 0.43, 0.29 mm); a part spawned on a support 1 mm below it (inside the
contact tolerance) drops 1 mm. Parts that fall move centimetres and turn tens of degrees,
so the threshold sits well clear of both. Step counts (at 240 Hz, before the rate was
raised): 60 after each spawn and 240 at the end gave the same verdict as 120/480 on 160
benchmark structures (seed 7); the rest rule keeps the run short for what stands and
long for what moves. The step counts are now 4x those (the same simulated seconds).

Cylinders (issue 28): a ``GEOM_CYLINDER`` collides through GJK with pybullet's collision
margin (1 mm), i.e. as a cylinder shrunk by the margin and grown by a ball of that radius:
its rim is rounded and its flat faces end 1 mm inside it; GJK rounds the other shape's
edges against it the same way. Boxes on boxes are exact (Bullet's box-box detector).
Measured on a fixed support (960 and 2400 Hz alike, so it is the shape, not the time
step): a cube, a can or a 0.04 m post whose centre is 1.5 mm inside a can's rim falls (2
mm stands); a can 0.5 mm inside a cube's edge (1.2 mm inside a post's) falls, 1.0 (1.5)
stands; a cube on a cube stands 0.5 mm inside its edge. With the margin at 2.5 mm
everything within 3 mm of the rim falls, at 0.1 mm a part 1 mm inside stands. ``check``
models these rounded rims (cellspec/solver/stability_shapes.py, ``RIM`` and
``RIM_EDGE``), so the oracle keeps pybullet's margin. ``CYLINDER_MARGIN`` (m, default
None: pybullet's) sets the margin of every part of a layout with a cylinder, for
comparisons (``bench/physics_agreement.py --cylinder-margin``); at 0.1 mm issue 28's
can-post-can stack stands at 960 Hz and falls at 2400 Hz (its load 1.8 mm inside a rim,
0.1 m up: within what pybullet resolves), so no smaller margin makes a cleaner oracle.

A step number is the 1-based position in the placement order of the part whose spawn
started the stage; the final settle of the finished structure counts as stage ``n``
with ``phase`` ``final``. Same input, same output byte for byte (a fresh client per
call, fixed step counts, results rounded to 0.1 µm and 0.001°).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots import quiet_pybullet
from cellspec.robots.tasks import part_shape
from cellspec.solver.instance import build_instance

HZ = 960  # 4x pybullet's default 240 Hz: converged for heavy loads on light parts (below)
SPAWN_STEPS = 288  # at least 0.3 s after each part is placed ...
SPAWN_MAX_STEPS = 1920  # ... and up to 2 s while something still moves
FINAL_STEPS = 960  # at least 1 s for the finished structure ...
FINAL_MAX_STEPS = 3840  # ... and up to 4 s while something still moves
SAMPLE_EVERY = 16  # steps between two samples of every part's pose (1/60 s)
REST_SPEED = 0.002  # m/s: every part slower than this (and REST_SPIN) is at rest
REST_SPIN = 0.02  # rad/s
FALL_DISPLACEMENT = 0.005  # metres
FALL_ROTATION_DEG = 5.0
DEFAULT_FRICTION = 0.5
GRAVITY = -9.81
MAX_PARTS = 200  # every stage steps the whole world: the cost grows with n squared
SLAB_HALF = (3.0, 3.0, 0.01)  # as the twin's surfaces: 6 m square, 0.02 m thick
CYLINDER_MARGIN: float | None = None  # m: the collision margin of every part of a layout
# with a cylinder (None: pybullet's own 1 mm, which rounds rims and edges: "Cylinders" above)


@dataclass(frozen=True)
class PartMotion:
    """One part's fate: largest displacement (m) and rotation (deg) over the run, whether
    it fell, and the first stage (1-based order step, and phase) in which it did."""

    id: str
    step: int  # its own position in the placement order, 1-based
    displacement: float
    rotation_deg: float
    fell: bool
    fell_at: int | None = None
    phase: str | None = None  # "placed" (after a spawn) or "final"
    fell_time: float | None = None  # simulated seconds from the first spawn to the fall

    def to_json(self) -> dict[str, Any]:
        """The part's record as plain JSON (rounded: byte-identical across runs)."""
        return {"id": self.id, "step": self.step,
                "displacement": round(self.displacement, 7),
                "rotation_deg": round(self.rotation_deg, 3), "fell": self.fell,
                "fell_at": self.fell_at, "phase": self.phase,
                "fell_time": None if self.fell_time is None else round(self.fell_time, 4)}


@dataclass(frozen=True)
class SettleResult:
    """The oracle's answer: ``stand`` when no part fell, else ``fall`` with the first."""

    verdict: str  # "stand" | "fall"
    parts: tuple[PartMotion, ...]  # in placement order
    order: tuple[str, ...]
    friction: float
    steps: int
    seconds: float

    def __post_init__(self) -> None:
        assert self.verdict in ("stand", "fall")
        assert (self.verdict == "fall") == any(m.fell for m in self.parts)

    @property
    def first_fall(self) -> PartMotion | None:
        """The part that fell first (simulated time, then placement order), if any."""
        fallen = [m for m in self.parts if m.fell]
        if not fallen:
            return None
        return min(fallen, key=lambda m: (m.fell_time or 0.0, m.step))

    @property
    def max_displacement(self) -> float:
        """The largest displacement of any part (m)."""
        return max((m.displacement for m in self.parts), default=0.0)

    def message(self) -> str:
        """One line: what stands, or which part fell first and when."""
        f = self.first_fall
        if f is None:
            return (f"all {len(self.parts)} parts stand (largest displacement "
                    f"{self.max_displacement * 1000:.2f} mm)")
        when = ("when the structure was left to settle after the last step"
                if f.phase == "final" else
                f"after step {f.fell_at} ({self.order[(f.fell_at or 1) - 1]} placed)")
        others = sum(m.fell for m in self.parts) - 1
        more = f"; {others} more part{'s' if others != 1 else ''} fell" if others else ""
        return (f"{f.id} falls {when}: it moved {f.displacement * 1000:.1f} mm and turned "
                f"{f.rotation_deg:.1f} deg{more}")

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON; no wall-clock time in it, so the same input gives
        byte-identical output (``seconds`` is on the object)."""
        f = self.first_fall
        return {"verdict": self.verdict,
                "first_fall": None if f is None else {"part": f.id, "step": f.fell_at,
                                                      "phase": f.phase},
                "message": self.message(),
                "parts": [m.to_json() for m in self.parts],
                "params": {"hz": HZ, "spawn_steps": [SPAWN_STEPS, SPAWN_MAX_STEPS],
                           "final_steps": [FINAL_STEPS, FINAL_MAX_STEPS],
                           "rest_speed": REST_SPEED, "rest_spin": REST_SPIN,
                           "fall_displacement": FALL_DISPLACEMENT,
                           "fall_rotation_deg": FALL_ROTATION_DEG,
                           "friction": round(self.friction, 9)},
                "stats": {"parts": len(self.parts), "steps": self.steps}}


def _bad(layout: Layout, msg: str) -> CellspecError:
    return CellspecError(Diagnostic(layout.path, 0, 0, msg))


def _inputs(cell: Cell, layout: Layout) -> tuple[tuple[str, ...], np.ndarray, np.ndarray,
                                                  float]:
    """Placement order, sizes (m), masses (kg) and friction, checked (bad input: exit 2)."""
    if len(layout) == 0:
        raise _bad(layout, "parts: the layout has no parts; nothing to settle")
    if len(layout) > MAX_PARTS:
        raise _bad(layout, f"{len(layout)} parts; settle simulates at most {MAX_PARTS} (every "
                   "stage steps the whole structure, so the cost grows with the square of "
                   "the part count)")
    inst = build_instance(cell, layout)  # unknown part types: file-located diagnostics
    size = np.asarray(inst.size_m, dtype=float)
    masses = (np.asarray(inst.masses, dtype=float) if inst.masses is not None
              else np.prod(size, axis=1) * 1000.0)
    for i, pid in enumerate(layout.ids):
        if not (np.all(np.isfinite(size[i])) and np.all(size[i] > 0)):
            raise _bad(layout, f"parts[{i}] ({pid}): size {size[i].tolist()} is not three "
                       "positive numbers")
        if not (math.isfinite(masses[i]) and masses[i] > 0):
            raise _bad(layout, f"parts[{i}] ({pid}): mass {masses[i]:g} kg; settle needs a "
                       "positive mass (a zero mass would be a fixed body in pybullet)")
    mu = float(cell.friction) if cell.friction is not None else DEFAULT_FRICTION
    if not (math.isfinite(mu) and mu >= 0):
        s = cell.source
        raise CellspecError(Diagnostic(s.file, s.line, s.col,
                                       f"friction {mu:g}: must be a number >= 0"))
    order = layout.order if layout.order is not None else layout.ids
    return tuple(order), size, masses, mu


def _rotation_deg(quat, home=(0.0, 0.0, 0.0, 1.0)) -> float:
    """The angle (deg) of the rotation from the unit quaternion ``home`` to ``quat`` (xyzw):
    from the identity, the quaternion's own rotation angle."""
    w = min(1.0, abs(sum(float(a) * float(b) for a, b in zip(quat, home, strict=True))))
    return math.degrees(2.0 * math.acos(w))


def _tilt_deg(quat) -> float:
    """The angle (deg) between a body's own z axis and the world's: how far a vertical
    cylinder leans (a turn about its own axis leaves it the same shape in the same place)."""
    x, y = float(quat[0]), float(quat[1])
    return math.degrees(math.acos(max(-1.0, min(1.0, 1.0 - 2.0 * (x * x + y * y)))))


def _at_rest(p: Any, cid: int, bodies: list[int]) -> bool:
    """Every body slower than REST_SPEED and turning slower than REST_SPIN."""
    for b in bodies:
        v, w = p.getBaseVelocity(b, physicsClientId=cid)
        if math.hypot(*v) > REST_SPEED or math.hypot(*w) > REST_SPIN:
            return False
    return True


def settle(cell: Cell, layout: Layout, *, spawn_steps: int = SPAWN_STEPS,
           final_steps: int = FINAL_STEPS, spawn_max_steps: int = SPAWN_MAX_STEPS,
           final_max_steps: int = FINAL_MAX_STEPS) -> SettleResult:
    """Spawn the layout's parts in order in a fresh physics client, let each settle, then
    the whole; report per part the largest displacement and whether it fell. A stage runs
    its minimum steps, then on while some part still moves, up to its maximum."""
    quiet_pybullet()
    # lazy: the twin extra (pybullet), also through cellspec.robots
    import pybullet as p

    from cellspec.robots.twin import connect, shape_ids, surface_slabs, yaw_quat

    if not (1 <= spawn_steps <= spawn_max_steps and 0 <= final_steps <= final_max_steps):
        raise CellspecError("settle: steps must satisfy 1 <= spawn <= spawn max and "
                            "0 <= final <= final max")
    order, size, masses, mu = _inputs(cell, layout)
    index = {pid: i for i, pid in enumerate(layout.ids)}
    shapes = [part_shape(cell, layout, i) for i in range(len(layout))]
    sharp = ({"collisionMargin": CYLINDER_MARGIN} if CYLINDER_MARGIN is not None
             and any(shape == "cylinder" for _, shape in shapes) else {})
    lat = math.sqrt(mu)  # Bullet multiplies the two bodies' coefficients
    t0 = time.perf_counter()
    cid = connect(GRAVITY)
    try:
        p.setTimeStep(1.0 / HZ, physicsClientId=cid)
        slab = p.createCollisionShape(p.GEOM_BOX, halfExtents=list(SLAB_HALF),
                                      physicsClientId=cid)
        for _, centre in surface_slabs(cell):
            b = p.createMultiBody(0, slab, -1, list(centre), physicsClientId=cid)
            p.changeDynamics(b, -1, lateralFriction=lat, restitution=0.0,
                             physicsClientId=cid)
        n = len(order)
        bodies: list[int] = []
        home = np.zeros((n, 3))
        turn: list[tuple[float, ...]] = []  # each part's planned orientation (its yaw)
        cyl: list[bool] = []
        disp = np.zeros(n)
        rot = np.zeros(n)
        fell_at: list[int | None] = [None] * n
        phase: list[str | None] = [None] * n
        when: list[float | None] = [None] * n
        steps = 0
        for k, pid in enumerate(order):
            i = index[pid]
            yaw, shape = shapes[i]
            col, _ = shape_ids(cid, (size[i] / 2).tolist(), shape)
            pos = [float(v) for v in layout.pos[i]]
            quat = yaw_quat(yaw)
            b = p.createMultiBody(float(masses[i]), col, -1, pos, quat, physicsClientId=cid)
            turn.append(quat)
            cyl.append(shape == "cylinder")
            p.changeDynamics(b, -1, lateralFriction=lat, restitution=0.0,
                             physicsClientId=cid, **sharp)
            bodies.append(b)
            home[k] = pos
            stages = [(spawn_steps, spawn_max_steps, "placed")]
            if k == n - 1:
                stages.append((final_steps, final_max_steps, "final"))
            for least, most, ph in stages:
                done = 0
                while done < most:
                    if done >= least and _at_rest(p, cid, bodies):
                        break
                    chunk = min(SAMPLE_EVERY, most - done)
                    for _ in range(chunk):
                        p.stepSimulation(physicsClientId=cid)
                    done += chunk
                    for j, bj in enumerate(bodies):
                        pj, qj = p.getBasePositionAndOrientation(bj, physicsClientId=cid)
                        d = float(np.linalg.norm(np.asarray(pj) - home[j]))
                        r = _tilt_deg(qj) if cyl[j] else _rotation_deg(qj, turn[j])
                        disp[j] = max(disp[j], d)
                        rot[j] = max(rot[j], r)
                        if fell_at[j] is None and (d > FALL_DISPLACEMENT or
                                                   r > FALL_ROTATION_DEG):
                            fell_at[j] = k + 1
                            phase[j] = ph
                            when[j] = (steps + done) / HZ
                steps += done
    finally:
        p.disconnect(physicsClientId=cid)
    parts = tuple(PartMotion(id=pid, step=k + 1, displacement=float(disp[k]),
                             rotation_deg=float(rot[k]), fell=fell_at[k] is not None,
                             fell_at=fell_at[k], phase=phase[k], fell_time=when[k])
                  for k, pid in enumerate(order))
    return SettleResult(verdict="fall" if any(m.fell for m in parts) else "stand",
                        parts=parts, order=order, friction=mu, steps=steps,
                        seconds=time.perf_counter() - t0)
