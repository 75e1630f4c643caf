"""Build the twin part of a cell (grammar ``twin.tx``) into a :class:`TwinSpec`.

Called by the cell builder (cellspec/dsl/build.py) with the twin items; errors go to the
builder's diagnostic sink with file:line:col.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from cellspec.core.names import unknown
from cellspec.dsl.model import Box, BoxZone, Panel, Source, TwinObject, TwinSpec, Vec3, axis_box

if TYPE_CHECKING:  # the builder calls build_twin: a run-time import would be a cycle
    from cellspec.dsl.build import CellBuilder

TWIN_ITEMS = frozenset({"Supply", "TrajectoryEpsilon", "Home", "SharedZone", "Reachable",
                        "Panel", "TwinObject"})
# RoCo's checks, in the order they run (seed 002, Section 3.2, plus the code's reach check),
# RoCo's parse-time gripper and PATH-length checks, then cellspec's own extra checks
PLAN_CHECKS = ("parse", "gripper", "path_length", "task", "reach", "ik", "collision",
               "waypoints", "spacing", "same_object", "occupied")


def _box(b: CellBuilder, item: Any, what: str, need: str = "xyz") -> Box | None:
    """An axis-aligned box from ranges; every axis of ``need`` must be given once."""
    rs: dict[str, tuple[Fraction, Fraction]] = {}
    ok = True
    for r in item.ranges:
        lo, hi = b.length(r, r.lo), b.length(r, r.hi)
        if r.axis in rs:
            b.err(r, f"{what} axis {r.axis} is given twice")
            ok = False
        elif lo > hi:
            b.err(r, f"{what} {r.axis} range is empty: {r.lo} > {r.hi}")
            ok = False
        rs[r.axis] = (lo, hi)
    missing = [a for a in need if a not in rs]
    if missing:
        b.err(item, f"{what} lacks the {', '.join(missing)} range")
        return None
    if not ok:
        return None
    big = Fraction(100)  # an omitted axis is unbounded
    return axis_box(rs, (-big, big))


def _vec3(b: CellBuilder, item: Any, v: Any) -> Vec3:
    """The lengths of a parsed ``x y z`` triple ``v`` of ``item``, in axis order."""
    return (b.length(item, v.x), b.length(item, v.y), b.length(item, v.z))


# complexity: one branch per twin item kind of the grammar
def build_twin(b: CellBuilder, items: list[Any], robots: tuple[str, ...],  # noqa: C901
               part_types: dict[str, Any], claim: Any) -> TwinSpec:
    """The twin spec of a cell from its twin items (``b``: the cell builder)."""
    supplies: list[BoxZone] = []
    eps: Fraction | None = None
    homes: dict[str, tuple[Fraction, ...]] = {}
    home_sources: dict[str, Source] = {}
    shared: Box | None = None
    reach: dict[str, Box] = {}
    panels: dict[str, Panel] = {}
    objects: list[TwinObject] = []
    pending_objects = []
    for item in items:
        kind = type(item).__name__
        if kind == "Supply":
            box = _box(b, item, f"supply '{item.name}'")
            if box is not None and claim(item, item.name, "supply area"):
                supplies.append(BoxZone(name=item.name, box=box, source=b.src(item)))
        elif kind == "TrajectoryEpsilon":
            if eps is not None:
                b.err(item, "trajectory epsilon is given twice")
            eps = b.num(item.eps, item)
            if not 0 < eps <= 1:  # beyond 1 rad the trajectory check would check nothing
                b.err(item, "trajectory epsilon must be positive and at most 1 (radians)")
        elif kind == "Home":
            if item.robot not in robots:
                b.err(item, "home of " + unknown("robot", item.robot, robots, "robots"))
            elif item.robot in homes:
                b.err(item, f"home of robot '{item.robot}' is given twice")
            else:
                homes[item.robot] = tuple(b.num(q, item) for q in item.q)
                home_sources[item.robot] = b.src(item)
        elif kind == "SharedZone":
            if shared is not None:
                b.err(item, "shared zone is given twice")
            shared = _box(b, item, "shared zone", need="xy")
        elif kind == "Reachable":
            if item.robot not in robots:
                b.err(item, "reach box of " + unknown("robot", item.robot, robots, "robots"))
            elif item.robot in reach:
                b.err(item, f"reach box of robot '{item.robot}' is given twice")
            else:
                box = _box(b, item, f"reach box of '{item.robot}'")
                if box is not None:
                    reach[item.robot] = box
        elif kind == "Panel":
            size = _vec3(b, item, item.size)
            if any(s <= 0 for s in size):
                b.err(item, f"panel '{item.name}' needs a positive size on every axis")
            elif claim(item, item.name, "panel"):
                panels[item.name] = Panel(
                    name=item.name, size=size, source=b.src(item),
                    pos=_vec3(b, item, item.pos))
        elif kind == "TwinObject":
            pending_objects.append(item)
    for item in pending_objects:
        if item.type not in part_types:
            b.err(item, f"object '{item.name}': "
                  + unknown("part type", item.type, sorted(part_types)))
            continue
        bad = [p for p in (item.panel, item.goal) if p not in panels]
        if bad:
            b.err(item, f"object '{item.name}': " + unknown("panel", bad[0], panels, "panels"))
            continue
        if claim(item, item.name, "object"):
            objects.append(TwinObject(name=item.name, type=item.type, panel=item.panel,
                                      goal=item.goal, source=b.src(item)))
    return TwinSpec(supplies=tuple(supplies), traj_epsilon=eps, homes=homes, shared_zone=shared,
                    home_sources=home_sources, reach_boxes=reach, panels=panels,
                    objects=tuple(objects))
