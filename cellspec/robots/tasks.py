"""Task compilation: each placement of a sequence becomes robot poses and motions.

A placement of part P by robot R (grip axis from the sequencer's plan) becomes, from the
supply area that R picks from:

``approach`` (above the part at the supply) → ``grasp`` → ``lift`` → ``transport`` (above
the part's place in the layout) → ``place`` → ``release`` (open the gripper, same pose)
→ ``retreat`` (straight up) → ``home``.

The supply: a feeder presents the part at the centre of a supply box's floor
(``supply NAME x [..] y [..] z [..]`` in the cell). A robot picks from the nearest
supply (to its base) whose approach and grasp poses its IK solves; when no robot reaches
any supply, the cell is bad input (:func:`supply_for`).

The TCP of the twin's grippers (``cellspec.robots.urdf``): a vacuum cup's face touches the
part's top; parallel jaws grasp ``depth`` below the top, closing along the grip axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.model import BoxZone, Cell
from cellspec.layout import Layout, UnknownPartType

if TYPE_CHECKING:
    from cellspec.robots.twin import Twin

CLEARANCE = 0.08  # metres above the grasp and place poses for approach, lift, transport, retreat
STEPS = ("approach", "grasp", "lift", "transport", "place", "release", "retreat")


@dataclass(frozen=True)
class Pose:
    """A named TCP pose: world position and orientation (xyzw)."""

    name: str
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pos": [round(v, 6) for v in self.pos],
                "quat": [round(v, 6) for v in self.quat]}


@dataclass(frozen=True)
class PlaceAction:
    """One placement compiled into TCP poses for one robot."""

    index: int
    robot: str
    part: str
    size: tuple[float, float, float]
    gripper: str
    axis: str | None
    supply: str
    pick: tuple[float, float, float]  # the part's centre at the supply
    place: tuple[float, float, float]  # the part's centre in the layout
    poses: tuple[Pose, ...]  # STEPS in order
    yaw: float = 0.0  # the part's yaw (degrees), at the supply as at its place
    shape: str = "box"  # "box" | "cylinder" (docs/shapes.md)

    def pose(self, name: str) -> Pose:
        """One of the action's poses by name."""
        return next(p for p in self.poses if p.name == name)

    @property
    def yaw_free(self) -> bool:
        """The tool's turn about its own axis is free: jaws or a cup on a cylinder (round
        about its axis), a cup on an unturned box (as before shapes); a turned box keeps
        the tool's yaw so that it arrives at its place turned as planned."""
        return self.shape == "cylinder" or (self.gripper == "vacuum" and self.yaw == 0)

    def to_json(self) -> dict[str, Any]:
        out = {"index": self.index, "robot": self.robot, "part": self.part,
               "gripper": self.gripper, "axis": self.axis, "supply": self.supply,
               "pick": [round(v, 6) for v in self.pick],
               "place": [round(v, 6) for v in self.place],
               "poses": [p.to_json() for p in self.poses]}
        if self.yaw != 0:  # written only for shapes: box layouts stay byte-identical
            out["yaw"] = round(self.yaw, 6)
        if self.shape != "box":
            out["shape"] = self.shape
        return out


def part_size(cell: Cell, layout: Layout, i: int) -> tuple[float, float, float]:
    """A layout part's size (its own, or its type's), metres."""
    try:
        s = layout.resolve(cell)[i]
    except UnknownPartType as exc:
        raise CellspecError(f"{layout.path}: part {exc.part}: unknown part type "
                            f"{exc.type!r}") from None
    return (float(s[0]), float(s[1]), float(s[2]))


def part_shape(cell: Cell, layout: Layout, i: int) -> tuple[float, str]:
    """A layout part's yaw (degrees) and shape ("box" or "cylinder", from its type)."""
    pt = cell.part_types.get(layout.types[i])
    return layout.yaw_of(i), (pt.shape if pt is not None else "box")


TURN_TOL_DEG = 5.0  # a placed part turned further than this from its planned pose is not placed


def turn_error_deg(quat, yaw: float, shape: str = "box") -> float:
    """How far (degrees) a part at orientation ``quat`` (xyzw) is turned from its planned
    pose: a cylinder, the tilt of its axis (it is round about it); a box, the rotation from
    its yaw, or from its yaw plus a half turn (the same box in the same place)."""
    x, y, z, w = (float(v) for v in quat)
    if shape == "cylinder":
        return math.degrees(math.acos(max(-1.0, min(1.0, 1.0 - 2.0 * (x * x + y * y)))))
    best = 180.0
    for extra in (0.0, 180.0):
        h = math.radians(float(yaw) + extra) / 2
        dot = abs(z * math.sin(h) + w * math.cos(h))
        best = min(best, math.degrees(2.0 * math.acos(min(1.0, dot))))
    return best


def tcp_for(cell: Cell, robot: str, centre, size) -> np.ndarray:
    """The TCP position grasping a part of this size whose centre is ``centre``."""
    r = next(x for x in cell.robots if x.name == robot)
    top = float(centre[2]) + size[2] / 2
    if r.gripper.kind == "vacuum":
        return np.array([float(centre[0]), float(centre[1]), top])
    depth = float(r.gripper.depth) if r.gripper.depth is not None else 0.02
    return np.array([float(centre[0]), float(centre[1]), top - min(depth, size[2] / 2)])


def supply_centre(zone: BoxZone, size) -> tuple[float, float, float]:
    """Where a part of this size is presented: the centre of the supply box's floor."""
    b = zone.box
    return (float(b.lo[0] + b.hi[0]) / 2, float(b.lo[1] + b.hi[1]) / 2,
            float(b.lo[2]) + size[2] / 2)


def grasp_orientation(cell: Cell, robot: str, axis: str | None, yaw: float = 0.0,
                      shape: str = "box") -> np.ndarray:
    """TCP orientation: pointing down; parallel jaws closing along the sequencer's axis,
    taken along the part's own axes (turned by its ``yaw``, degrees) for a box, along the
    world's for a cylinder (any diameter grips it; docs/shapes.md)."""
    # lazy: the twin extra (pybullet), through cellspec.robots
    from cellspec.robots.ik import grasp_quat

    r = next(x for x in cell.robots if x.name == robot)
    # the jaws are symmetric: a half turn grips the same way, so keep the wrist near home
    turn = math.radians((float(yaw) + 90.0) % 180.0 - 90.0) if shape == "box" else 0.0
    if r.gripper.kind == "vacuum":
        return grasp_quat("z", turn)
    return grasp_quat(axis or "x", turn)


def compile_action(cell: Cell, index: int, robot: str, part: str, size, place, axis: str | None,
                   supply: BoxZone, yaw: float = 0.0, shape: str = "box") -> PlaceAction:
    """The poses of one placement (no IK yet); the feeder presents the part at the supply
    with the yaw it has at its place, so one tool orientation serves both."""
    r = next(x for x in cell.robots if x.name == robot)
    pick = supply_centre(supply, size)
    quat = tuple(float(v) for v in grasp_orientation(cell, robot, axis, yaw, shape))
    g = tcp_for(cell, robot, pick, size)
    pl = tcp_for(cell, robot, place, size)
    up = np.array([0.0, 0.0, CLEARANCE])

    def pose(name: str, v: np.ndarray) -> Pose:
        return Pose(name, (float(v[0]), float(v[1]), float(v[2])), quat)  # type: ignore[arg-type]

    poses = (pose("approach", g + up), pose("grasp", g), pose("lift", g + up),
             pose("transport", pl + up), pose("place", pl), pose("release", pl),
             pose("retreat", pl + up))
    return PlaceAction(index=index, robot=robot, part=part,
                  size=(float(size[0]), float(size[1]), float(size[2])),
                  gripper=r.gripper.kind, axis=axis if r.gripper.kind == "parallel" else None,
                  supply=supply.name, pick=pick,
                  place=(float(place[0]), float(place[1]), float(place[2])), poses=poses,
                  yaw=float(yaw), shape=shape)


def supplies_by_distance(cell: Cell, robot: str) -> list[BoxZone]:
    """The cell's supply areas, nearest to the robot's base first (ties by name)."""
    r = next(x for x in cell.robots if x.name == robot)
    base = np.array([float(v) for v in r.base])

    def d(z: BoxZone) -> tuple[float, str]:
        c = np.array([float(z.box.lo[k] + z.box.hi[k]) / 2 for k in range(3)])
        return (float(np.linalg.norm(c[:2] - base[:2])), z.name)

    return sorted(cell.twin.supplies, key=d)


def supply_for(twin: Twin, robot: str, size, axis: str | None, seed: int = 0,
               yaw: float = 0.0, shape: str = "box") -> tuple[BoxZone | None, str]:
    """The nearest supply whose approach and grasp poses the robot reaches (the part at
    ``yaw`` degrees, of ``shape``), or why none."""
    # lazy: the twin extra (pybullet), through cellspec.robots
    from cellspec.robots.ik import solve_ik

    cell: Cell = twin.cell
    why = []
    for z in supplies_by_distance(cell, robot):
        a = compile_action(cell, 0, robot, "probe", size, (0.0, 0.0, 0.0), axis, z, yaw, shape)
        ok = True
        for name in ("approach", "grasp"):
            p = a.pose(name)
            r = solve_ik(twin, robot, p.pos, p.quat, seed=seed, check_collision=False,
                         yaw_free=a.yaw_free)
            if not r.ok:
                why.append(f"{z.name}: {name} {_p(p.pos)}: {r.reason}")
                ok = False
                break
        if ok:
            return z, ""
    return None, "; ".join(why) or "the cell declares no supply area (`supply NAME x [..] y " \
        "[..] z [..]`)"


def check_supplies(twin: Twin, sizes: list[tuple[float, float, float]], seed: int = 0) -> None:
    """Bad input unless some robot reaches some supply for every part size."""
    cell: Cell = twin.cell
    if not cell.twin.supplies:
        s = cell.source
        raise CellspecError(Diagnostic(s.file, s.line, s.col, f"cell {cell.name} has no supply "
                                       "area: add `supply NAME x [..] y [..] z [..]` (where the "
                                       "robots pick parts from)"))
    for size in sorted(set(sizes)):
        reasons = []
        for r in cell.robots:
            z, why = supply_for(twin, r.name, size, "x", seed)
            if z is not None:
                break
            reasons.append(f"{r.name}: {why}")
        else:
            s = cell.twin.supplies[0].source
            raise CellspecError(Diagnostic(s.file, s.line, s.col, "no robot reaches a supply "
                                           f"area for a part of size {size}: "
                                           + " | ".join(reasons)))


def _p(v) -> str:
    return f"({v[0]:.3f}, {v[1]:.3f}, {v[2]:.3f})"
