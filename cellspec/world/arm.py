"""The robot arm of the twin as the controller of the world-model loop (engine ``arm``).

The arm is the twin's (``cellspec.robots.twin.Twin``, kinematic): every motion of the
gripper pad is a path of the arm's tool centre point. A straight Cartesian leg is cut into
2 cm waypoints, each solved by the twin's IK (``cellspec.robots.ik.solve_ik``, tool pointing
down, seeded with the previous solution); the joint path between them is interpolated and
the TCP of every interpolated configuration (forward kinematics) is the pad's target in
the physics simulation. A waypoint without an IK solution is a controller failure (the
motion is refused). The arm's links are not bodies of the physics scene: contacts are
those of the pad and the parts, and IK is solved without collision checking.
"""

from __future__ import annotations

import math

import numpy as np

from cellspec.core.errors import CellspecError
from cellspec.dsl.model import Cell

WAYPOINT_M = 0.02


class ArmDriver:
    """Pad targets along the TCP path of one robot arm of the twin."""

    def __init__(self, cell: Cell, pad_half_height: float, robot: str | None = None) -> None:
        # lazy: the twin extra (pybullet), through cellspec.robots
        from cellspec.robots.ik import grasp_quat
        from cellspec.robots.twin import Twin

        if not cell.robots:
            raise CellspecError(f"{cell.path}: the cell has no robot for the arm engine")
        names = [r.name for r in cell.robots]
        if robot is None:  # the arm that reaches farthest does every action
            robot = max(cell.robots, key=lambda r: float(r.reach or 0)).name
        elif robot not in names:
            raise CellspecError(f"unknown robot '{robot}' (robots: {', '.join(names)})")
        self.twin = Twin(cell)
        self.robot = robot
        self.quat = grasp_quat("z")
        self.off = np.array([0.0, 0.0, pad_half_height])  # the TCP is the pad's top face
        self.q = self.twin.home(robot)
        self.ik_calls = 0
        self.failure: str | None = None

    def close(self) -> None:
        """Close the twin."""
        self.twin.close()

    def solve(self, pad_pos: np.ndarray, q_init: np.ndarray) -> np.ndarray | None:
        """Joint angles putting the pad centre at pad_pos (tool down), or None."""
        # lazy: the twin extra (pybullet), through cellspec.robots
        from cellspec.robots.ik import solve_ik

        self.ik_calls += 1
        target = np.asarray(pad_pos) + self.off
        r = solve_ik(self.twin, self.robot, target, self.quat, q_init=q_init, restarts=2,
                     check_collision=False, seed=0)
        if not r.ok:  # stalled near a singularity: more iterations from the same seed
            r = solve_ik(self.twin, self.robot, target, self.quat, q_init=q_init, restarts=0,
                         check_collision=False, seed=0, max_iter=500)
        if not r.ok:  # still nothing: restart widely
            r = solve_ik(self.twin, self.robot, target, self.quat, q_init=q_init,
                         check_collision=False, seed=1)
        if not r.ok:
            self.failure = (f"{self.robot}: no IK solution at "
                            f"({', '.join(f'{v:.3f}' for v in pad_pos)}): {r.reason}")
            return None
        return r.q

    def reset(self, pad_pos: np.ndarray) -> None:
        """Put the arm where the pad is (start of a run); bad input when unreachable."""
        q = self.solve(pad_pos, self.q)
        if q is None:
            raise CellspecError(f"arm engine: {self.failure}")
        self.q = q

    def path(self, start: np.ndarray, goal: np.ndarray, n: int) -> list[np.ndarray] | None:
        """n pad targets from start to goal along the arm's TCP path, or None (IK failed)."""
        dist = float(np.linalg.norm(goal - start))
        k = max(1, math.ceil(dist / WAYPOINT_M))
        qs = [self.q]
        for i in range(1, k + 1):
            q = self.solve(start + (goal - start) * i / k, qs[-1])
            if q is None:
                return None
            qs.append(q)
        out = []
        for j in range(1, n + 1):
            s = j / n * k
            a = min(int(s), k - 1)
            t = s - a
            q = qs[a] * (1 - t) + qs[a + 1] * t
            pos, _ = self.twin.tool_pose(self.robot, q)
            out.append(np.asarray(pos) - self.off)
        self.q = qs[-1]
        return out

    def sync(self, pad_pos: np.ndarray) -> None:
        """After a stop: the arm's configuration for where the pad actually is."""
        q = self.solve(pad_pos, self.q)
        if q is not None:
            self.q = q
