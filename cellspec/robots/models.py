"""Robot models of the twin: joints, limits, velocity limits, tool link, home, disabled pairs.

``panda`` and ``kuka_iiwa`` are read at run time from ``pybullet_data``
(``franka_panda/panda.urdf``, ``kuka_iiwa/model.urdf``); their position limits come from
those files. ``abb_irb120`` and ``abb_irb1600`` are generated URDFs (``cellspec.robots.urdf``)
from the published kinematics and joint limits of the ABB product specifications, with
capsule collision geometry (no meshes are vendored):

* IRB 120-3/0.6 (product specification 3HAC035960-001): d1 0.290, a2 0.270, a3 0.070,
  d4 0.302, d6 0.072 m; axis ranges ±165°, ±110°, +70/−110°, ±160°, ±120°, ±400°;
  max axis speeds 250, 250, 250, 320, 320, 420 °/s.
* IRB 1600-6/1.2 (the 1.2 m variant, product specification 3HAC023604-001):
  d1 0.4865, a1 0.150, a2 0.475, a3 0.000, d4 0.600, d6 0.065 m; axis ranges ±180°,
  +150/−90°, +65/−245°, ±200°, ±115°, ±400°; max axis speeds 150, 160, 170, 320, 400,
  460 °/s.

* UR5e (Universal Robots e-Series), the standard DH parameters UR publishes ("DH
  parameters for calculations of kinematics and dynamics", UR support article): d1 0.1625,
  a2 −0.425, a3 −0.3922, d4 0.1333, d5 0.0997, d6 0.0996 m, α (π/2, 0, 0, π/2, −π/2, 0);
  working range ±360° on every joint, the elbow limited to ±180° as in UR's
  ``ur_description`` (``joint_limits.yaml``: the arm folds into itself beyond it); max
  joint speed 180 °/s on every joint (UR5e technical specification). Capsule radii
  approximate the 0.075–0.09 m link tubes. RoCo's Sort Cubes (seed 002) has Alice and
  Chad on UR5e arms (``rocobench/envs/task_sort.xml``); the home is the usual tool-down
  pose (0, −90°, 90°, −90°, −90°, 0).

Velocity limits of the pybullet_data robots (their URDFs carry placeholders): Franka
Panda datasheet 2.175 ×4, 2.61 ×3 rad/s; KUKA LBR iiwa 7 R800 98, 98, 100, 130, 140,
180, 180 °/s.

Disabled self-collision pairs of the generated ABB arms: ``link_4``–``link_6`` (adjacent
through the zero-length wrist link ``link_5``), ``link_3``–``link_5``, ``link_5``–``tool0``
and ``base_link``–``link_2`` (capsules that overlap at the joint between them), and
``link_2``–``link_4`` (upper arm and forearm, adjacent through the elbow link ``link_3``,
which for the IRB 1600, a3 = 0, is a zero-length offset) is disabled. The reason: the
forearm capsule ``link_4`` lies on the axis-4 line, so it is a solid of revolution about
that axis and its distance to ``link_2`` depends on q3 alone (q4 spins it in place; a
test checks this); ABB's axis-3 range is the arm's mechanical stop, at which the real
forearm still clears the upper arm. So a ``link_2``–``link_4`` contact inside the range
cannot be a collision of the real robot, only an artefact of the capsule radii. For the
IRB 1600 (radii 0.08 + 0.07 m) the capsules touched for q3 ≥ 0.958 rad (up to the +65°
stop, the forearm 25° from the upper arm) and q3 ≤ −4.10 rad (the −245° stop): IK then
rejected the ordinary elbow-down solution for every target within ~0.35 m of the base
and fell back to an overhead flip (q1 ≈ ±2.9, q3 ≈ −3.6), taking ~9.5 s per job instead
of ~5 s. The IRB 120's capsules never touch within its range; the pair is disabled for
both by the same argument. Contacts of the wrist (``link_5``, ``link_6``) and the gripper
with the upper arm, which do depend on q4 and q5, stay checked.

Every robot, once its gripper is attached (``urdf.robot_urdf``), has a link ``tcp``: the
tool centre point, z along the approach direction (out of the flange), x the direction
in which parallel jaws close. The spec's ``tool_link`` is that link.

The ``RobotSpec`` record itself lives in :mod:`cellspec.robots.spec` (imported by this
table and by the URDF writer, which no longer import each other); import it from there.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from functools import cache

import numpy as np
import pybullet_data

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.names import did_you_mean
from cellspec.dsl.model import ROBOT_MODELS, Cell
from cellspec.robots.spec import TOOL_LINK, AbbKinematics, DHKinematics, RobotSpec

__all__ = ["MODELS", "check_models", "robot_spec"]

MODELS: tuple[str, ...] = ROBOT_MODELS


def _deg(*v: float) -> np.ndarray:
    return np.radians(np.array(v, dtype=float))


def _data_limits(rel: str, joints: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Position limits of the named joints, read from a pybullet_data URDF."""
    root = ET.parse(os.path.join(pybullet_data.getDataPath(), rel)).getroot()
    lim: dict[str, tuple[float, float]] = {}
    for j in root.iter("joint"):
        el = j.find("limit")
        if el is not None and j.get("name") in joints:
            lim[j.get("name", "")] = (float(el.get("lower", "0")), float(el.get("upper", "0")))
    missing = [n for n in joints if n not in lim]
    if missing:
        raise RuntimeError(f"{rel}: joints {missing} not found (pybullet_data changed?)")
    return (np.array([lim[n][0] for n in joints]), np.array([lim[n][1] for n in joints]))


def _pairs(*pairs: tuple[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(pairs)


_ABB_JOINTS = tuple(f"joint_{i}" for i in range(1, 7))
# adjacent through zero-length links, and the forearm/upper-arm pair (see the docstring)
_ABB_DISABLED = _pairs(("link_4", "link_6"), ("link_3", "link_5"), ("link_5", "tool0"),
                       ("base_link", "link_2"), ("link_2", "link_4"))
_ABB_HOME = (0.0, 0.0, 0.0, 0.0, math.pi / 2, 0.0)  # wrist down: the flange points to -z


_UR_JOINTS = tuple(f"joint_{i}" for i in range(1, 7))


def _build(model: str) -> RobotSpec:
    if model == "panda":
        joints = tuple(f"panda_joint{i}" for i in range(1, 8))
        lo, hi = _data_limits("franka_panda/panda.urdf", joints)
        return RobotSpec(
            model=model, joint_names=joints, lower=lo, upper=hi,
            vel_limits=np.array([2.175] * 4 + [2.61] * 3), tool_link=TOOL_LINK,
            home=(0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785),
            disabled_pairs=_pairs(
                ("panda_link5", "panda_link7"), ("panda_link6", "panda_link8"),
                ("panda_link5", "panda_link8"), ("panda_link7", "tool0"),
                ("panda_link6", "tool0"),
            ),
            flange_link="panda_link8", base_links=("panda_link0", "panda_link1"),
            data_urdf="franka_panda/panda.urdf",
            strip_links=("panda_hand", "panda_leftfinger", "panda_rightfinger",
                         "panda_grasptarget"),
            flange_xyz=(0.0, 0.0, 0.0), flange_rpy=(0.0, 0.0, 0.0),
        )
    if model == "kuka_iiwa":
        joints = tuple(f"lbr_iiwa_joint_{i}" for i in range(1, 8))
        lo, hi = _data_limits("kuka_iiwa/model.urdf", joints)
        return RobotSpec(
            model=model, joint_names=joints, lower=lo, upper=hi,
            vel_limits=_deg(98, 98, 100, 130, 140, 180, 180), tool_link=TOOL_LINK,
            home=(0.0, 0.6, 0.0, -1.4, 0.0, 1.1, 0.0),
            disabled_pairs=_pairs(
                ("lbr_iiwa_link_5", "lbr_iiwa_link_7"), ("lbr_iiwa_link_6", "tool0"),
            ),
            flange_link="lbr_iiwa_link_7", base_links=("lbr_iiwa_link_0", "lbr_iiwa_link_1"),
            data_urdf="kuka_iiwa/model.urdf",
            flange_xyz=(0.0, 0.0, 0.045), flange_rpy=(0.0, 0.0, 0.0),
        )
    if model == "abb_irb120":
        return RobotSpec(
            model=model, joint_names=_ABB_JOINTS,
            lower=_deg(-165, -110, -110, -160, -120, -400),
            upper=_deg(165, 110, 70, 160, 120, 400),
            vel_limits=_deg(250, 250, 250, 320, 320, 420), tool_link=TOOL_LINK,
            home=_ABB_HOME,
            disabled_pairs=_ABB_DISABLED,
            flange_link="link_6", base_links=("base_link", "link_1"),
            flange_xyz=(0.072, 0.0, 0.0), flange_rpy=(0.0, math.pi / 2, 0.0),
            abb=AbbKinematics(d1=0.290, a1=0.0, a2=0.270, a3=0.070, d4=0.302, d6=0.072,
                              radii=(0.085, 0.075, 0.05, 0.045, 0.04, 0.035, 0.03)),
        )
    if model == "abb_irb1600":
        return RobotSpec(
            model=model, joint_names=_ABB_JOINTS,
            lower=_deg(-180, -90, -245, -200, -115, -400),
            upper=_deg(180, 150, 65, 200, 115, 400),
            vel_limits=_deg(150, 160, 170, 320, 400, 460), tool_link=TOOL_LINK,
            home=_ABB_HOME,
            disabled_pairs=_ABB_DISABLED,
            flange_link="link_6", base_links=("base_link", "link_1"),
            flange_xyz=(0.065, 0.0, 0.0), flange_rpy=(0.0, math.pi / 2, 0.0),
            abb=AbbKinematics(d1=0.4865, a1=0.150, a2=0.475, a3=0.0, d4=0.600, d6=0.065,
                              radii=(0.15, 0.12, 0.08, 0.07, 0.06, 0.05, 0.04)),
        )
    if model == "ur5e":
        return RobotSpec(
            model=model, joint_names=_UR_JOINTS,
            lower=_deg(-360, -360, -180, -360, -360, -360),
            upper=_deg(360, 360, 180, 360, 360, 360),
            vel_limits=_deg(180, 180, 180, 180, 180, 180), tool_link=TOOL_LINK,
            home=(0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0),
            disabled_pairs=_pairs(("link_4", "link_6"), ("link_3", "link_5"),
                                  ("link_5", "tool0"), ("base_link", "link_2")),
            flange_link="link_6", base_links=("base_link", "link_1"),
            flange_xyz=(0.0, 0.0, 0.0996), flange_rpy=(0.0, 0.0, 0.0),
            dh=DHKinematics(d=(0.1625, 0.0, 0.0, 0.1333, 0.0997, 0.0996),
                            a=(0.0, -0.425, -0.3922, 0.0, 0.0, 0.0),
                            alpha=(math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0),
                            radii=(0.075, 0.065, 0.055, 0.045, 0.042, 0.042, 0.037)),
        )
    raise KeyError(model)


@cache
def _cached(model: str) -> RobotSpec:
    return _build(model)


def robot_spec(model: str) -> RobotSpec:
    """The spec of a known model; CellspecError naming the known models otherwise."""
    if model not in MODELS:
        raise CellspecError(f"unknown robot model {model!r}; known models: "
                            f"{', '.join(MODELS)}{did_you_mean(model, MODELS)}")
    return _cached(model)


def check_models(cell: Cell) -> None:
    """Every robot of the cell has a known model; else CellspecError at the robot's line
    (bad input, exit 2), naming the known models."""
    for r in cell.robots:
        if r.urdf is None and r.model not in MODELS:
            s = r.source
            raise CellspecError(Diagnostic(s.file, s.line, s.col, f"robot {r.name}: unknown "
                                           f"robot model {r.model!r}; known models: "
                                           f"{', '.join(MODELS)}"
                                           f"{did_you_mean(r.model, MODELS)}"))
