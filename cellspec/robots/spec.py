"""The data of a robot model: ``RobotSpec`` and the published kinematics it carries.

Its own module so that the model table (``models``) and the URDF writer (``urdf``) both
depend on it and not on each other (they used to import each other).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

TOOL_LINK = "tcp"  # the tool centre point link every robot has once its gripper is attached


@dataclass(frozen=True)
class AbbKinematics:
    """Published ABB dimensions (metres) and capsule radii of the generated URDF."""

    d1: float
    a1: float
    a2: float
    a3: float
    d4: float
    d6: float
    radii: tuple[float, float, float, float, float, float, float]  # base, l1..l6


@dataclass(frozen=True)
class DHKinematics:
    """Published standard Denavit-Hartenberg parameters (metres, radians) and capsule radii."""

    d: tuple[float, ...]
    a: tuple[float, ...]
    alpha: tuple[float, ...]
    radii: tuple[float, ...]  # base, l1..l6


@dataclass(frozen=True, eq=False)
class RobotSpec:
    """A robot model: controlled joints (in order), limits, tool link, home, disabled pairs."""

    model: str
    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    vel_limits: np.ndarray
    tool_link: str
    home: tuple[float, ...]
    disabled_pairs: frozenset[tuple[str, str]]
    flange_link: str = ""
    base_links: tuple[str, ...] = ()  # links resting on the mounting surface
    data_urdf: str | None = None  # pybullet_data-relative (or absolute) file, None: generated
    strip_links: tuple[str, ...] = ()  # links of the data URDF replaced by our gripper
    flange_xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)  # flange frame in flange_link
    flange_rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    urdf_search: tuple[str, ...] = ()  # where `package://` meshes of data_urdf are found
    abb: AbbKinematics | None = field(default=None)
    dh: DHKinematics | None = field(default=None)

    @property
    def dof(self) -> int:
        """Number of controlled joints."""
        return len(self.joint_names)

    def is_disabled(self, a: str, b: str) -> bool:
        """Whether the self pair (a, b) is excluded from collision checks."""
        return (a, b) in self.disabled_pairs or (b, a) in self.disabled_pairs

    def within_limits(self, q: np.ndarray, tol: float = 1e-9) -> bool:
        """Whether q lies within the position limits."""
        q = np.asarray(q, dtype=float)
        return bool(np.all(q >= self.lower - tol) and np.all(q <= self.upper + tol))
