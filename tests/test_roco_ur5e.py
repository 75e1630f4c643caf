"""The generated UR5e: its flange follows UR's published DH parameters exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cellspec.dsl.parser import load_cell
from cellspec.robots.models import robot_spec
from cellspec.robots.twin import Twin

# Universal Robots, "DH parameters for calculations of kinematics and dynamics" (UR5e)
D = (0.1625, 0.0, 0.0, 0.1333, 0.0997, 0.0996)
A = (0.0, -0.425, -0.3922, 0.0, 0.0, 0.0)
ALPHA = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)

CELL = """\
cell ur {
    units m
    workspace x [-1, 1] y [-1, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot u model ur5e base (0.3, -0.2, 0.1) yaw 30 gripper vacuum
}
"""


def dh_fk(q) -> np.ndarray:
    """The flange pose of the standard DH chain (4x4)."""
    t = np.eye(4)
    for th, d, a, al in zip(q, D, A, ALPHA, strict=True):
        ct, st, ca, sa = math.cos(th), math.sin(th), math.cos(al), math.sin(al)
        t = t @ np.array([[ct, -st * ca, st * sa, a * ct], [st, ct * ca, -ct * sa, a * st],
                          [0, sa, ca, d], [0, 0, 0, 1]])
    return t


def test_flange_matches_published_dh(tmp_path):
    f = tmp_path / "ur.cell"
    f.write_text(CELL)
    spec = robot_spec("ur5e")
    assert np.degrees(spec.upper).round(6).tolist() == [360, 360, 180, 360, 360, 360]
    assert np.degrees(spec.vel_limits).round(6).tolist() == [180] * 6
    yaw = math.radians(30)
    base = np.array([[math.cos(yaw), -math.sin(yaw), 0, 0.3],
                     [math.sin(yaw), math.cos(yaw), 0, -0.2], [0, 0, 1, 0.1], [0, 0, 0, 1]])
    rng = np.random.default_rng(5)
    with Twin(load_cell(str(f))) as twin:
        for q in [np.array(spec.home)] + [rng.uniform(spec.lower, spec.upper) for _ in range(5)]:
            twin.set_q("u", q)
            pos, _ = twin.link_pose("u", "tool0")
            assert pos == pytest.approx((base @ dh_fk(q))[:3, 3], abs=1e-5)  # float32
        # home: the tool points straight down (the tool's z axis: the rotation matrix's
        # third column of the unit quaternion x, y, z, w)
        _, quat = twin.tool_pose("u", np.array(spec.home))
        x, y, z, w = np.asarray(quat, dtype=float) / np.linalg.norm(quat)
        tool_z = [2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)]
        assert tool_z == pytest.approx([0, 0, -1], abs=1e-5)
