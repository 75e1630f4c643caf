"""A home pose for a robot from its own URDF, when the cell gives none (``home R (...)``).

The built-in models carry a published or hand-picked ready pose; a URDF carries none, and
q = 0 is often a stretched or folded arm whose gripper touches its own links. The home is
the collision-free configuration (self, other robots at their homes, surfaces, keep-outs)
whose tool axis points most nearly straight down with the tool centre point at least
``MIN_TCP_HEIGHT`` above the base, among q = 0 (clipped into the limits) and ``SAMPLES``
configurations drawn uniformly within the limits (wide ranges cut to one turn about 0)
from a generator seeded with ``SEED``: deterministic, and about a tenth of a second.
"""

from __future__ import annotations

import math

import numpy as np
import pybullet as p

from cellspec.core.errors import CellspecError, Diagnostic

SAMPLES = 400
SEED = 0
MIN_TCP_HEIGHT = 0.15  # m above the base


def tool_down_home(twin, robot) -> np.ndarray:  # noqa: ANN001 (Twin, dsl Robot: no cycle)
    """The home of ``robot`` (a cell robot) in ``twin``; CellspecError when none is free."""
    from cellspec.robots.collision import CollisionChecker  # lazy: collision imports twin

    spec = twin.spec(robot.name)
    lo = np.maximum(spec.lower, -math.pi)
    hi = np.minimum(spec.upper, math.pi)
    rng = np.random.default_rng(SEED)
    cands = np.vstack([np.clip(np.zeros(spec.dof), spec.lower, spec.upper),
                       rng.uniform(lo, hi, size=(SAMPLES, spec.dof))])
    checker = CollisionChecker(twin)
    base_z = float(robot.base[2])
    best, best_score = None, math.inf
    for q in cands:
        pos, quat = twin.tool_pose(robot.name, q)
        axis = np.array(p.getMatrixFromQuaternion(quat.tolist())).reshape(3, 3)[:, 2]
        score = 1.0 + float(axis[2]) + max(0.0, MIN_TCP_HEIGHT - (float(pos[2]) - base_z))
        if score < best_score and checker.free({robot.name: q}):
            best, best_score = q, score
    if best is None:
        s = robot.source
        raise CellspecError(Diagnostic(s.file, s.line, s.col, f"robot {robot.name}: no "
                                       f"collision-free home among {SAMPLES + 1} seeded "
                                       f"configurations of {spec.model}; give one with "
                                       f"`home {robot.name} (...)`"))
    return np.array(best, dtype=float)
