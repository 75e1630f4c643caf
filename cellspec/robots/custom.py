"""A robot model from the cell's own URDF (``robot R urdf "F" tcp L``): its ``RobotSpec``;
and ``spec_of``, the spec of any cell robot (built-in model or own URDF).

The chain was read and checked when the cell was loaded (``cellspec.dsl.urdf``). Here it
becomes a spec like the built-in models': the chain's movable joints in order with the
file's position and velocity limits, the ``tcp`` link as the flange (cellspec attaches the
cell's gripper there, with the flange frame equal to the link frame, and drops the links
below it), the root link and the first moving link as base links, and the home pose: every
joint at 0 clipped into its limits (a cell can set its own with ``home R (...)``).

Self-collision: adjacent links are never checked (``collision.py``); links of the bare arm
that touch at the home pose or at q = 0 are disabled pairs (MoveIt's setup assistant does
the same for "default" and "adjacent" pairs), found once per file in a pybullet DIRECT
client of its own.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

import numpy as np

from cellspec.dsl.model import Robot
from cellspec.dsl.urdf import UrdfChain, read_chain
from cellspec.robots.models import robot_spec
from cellspec.robots.spec import TOOL_LINK, RobotSpec
from cellspec.robots.urdf import arm_text_path

CONTACT_M = 0.0  # links this close at home or at q = 0 are a disabled pair


def spec_of(robot: Robot) -> RobotSpec:
    """The spec of a cell robot: its built-in model's, or the one from its own URDF."""
    return custom_spec(robot) if robot.urdf is not None else robot_spec(robot.model)


def custom_spec(robot: Robot) -> RobotSpec:
    """The spec of a cell robot given by its own URDF (cached per file version and tcp)."""
    assert robot.urdf is not None and robot.tcp_link is not None
    chain = read_chain(robot.urdf, robot.tcp_link)
    off = tuple(float(v) for v in robot.tcp_offset) if robot.tcp_offset else (0.0, 0.0, 0.0)
    return _spec(chain, off)


@lru_cache(maxsize=16)
def _spec(chain: UrdfChain, offset: tuple[float, float, float]) -> RobotSpec:
    names = tuple(j.name for j in chain.joints)
    lo = np.array([j.lower for j in chain.joints])
    hi = np.array([j.upper for j in chain.joints])
    home = tuple(float(v) for v in np.clip(0.0, lo, hi))
    moving_child = chain.links[1] if len(chain.links) > 1 else chain.root
    spec = RobotSpec(
        model=f"urdf:{Path(chain.path).name}", joint_names=names, lower=lo, upper=hi,
        vel_limits=np.array([j.velocity for j in chain.joints]), tool_link=TOOL_LINK,
        home=home, disabled_pairs=frozenset(), flange_link=chain.tcp,
        base_links=(chain.root, moving_child), data_urdf=chain.path,
        strip_links=chain.below_tcp, urdf_search=chain.search, flange_xyz=offset)
    pairs = _touching_pairs(spec, [np.array(home), np.clip(np.zeros(len(names)), lo, hi)])
    return dataclasses.replace(spec, disabled_pairs=pairs)


def _touching_pairs(spec: RobotSpec, poses: list[np.ndarray]) -> frozenset[tuple[str, str]]:
    """Pairs of the bare arm's links in contact at any of ``poses`` (not adjacent ones)."""
    import pybullet as p  # lazy: spec_of serves callers that never start the twin (replay)

    cid = p.connect(p.DIRECT)
    try:
        body = p.loadURDF(arm_text_path(spec), useFixedBase=True, physicsClientId=cid)
        by_name: dict[str, int] = {}
        names: dict[int, str] = {-1: p.getBodyInfo(body, physicsClientId=cid)[0].decode()}
        for j in range(p.getNumJoints(body, physicsClientId=cid)):
            info = p.getJointInfo(body, j, physicsClientId=cid)
            by_name[info[1].decode()] = j
            names[j] = info[12].decode()
        idx = [by_name[n] for n in spec.joint_names]
        links = sorted(names)
        found: set[tuple[str, str]] = set()
        for q in poses:
            for j, v in zip(idx, q, strict=True):
                p.resetJointState(body, j, float(v), physicsClientId=cid)
            p.performCollisionDetection(physicsClientId=cid)
            for ai, a in enumerate(links):
                for b in links[ai + 1:]:
                    if p.getClosestPoints(body, body, CONTACT_M, a, b, physicsClientId=cid):
                        found.add((names[a], names[b]))
        return frozenset(found)
    finally:
        p.disconnect(physicsClientId=cid)
