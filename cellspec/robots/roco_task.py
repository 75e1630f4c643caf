"""RoCo's Sort Cubes task semantics on a cellspec cell: targets, reach, task feedback, state.

Transcribed from RoCo (github.com/MandiZhao/robot-collab, commit 9943870,
``rocobench/envs/task_sort.py``, class ``SortOneBlockTask``): what the cell file cannot
say is held here, with the line it comes from.

* ``get_target_pos``: a panel target is the panel's centre with z = ``PLACE_Z`` (0.5);
  panel3 and panel5, the hand-over panels, are shifted by (±0.12, ±0.1) towards the
  robot placing there (Bob, the panda, from the front; the UR5e arms from the back).
  A cube target is its ``_top`` site, ``TOP_SITE`` (0.1) above the cube's centre
  (task_sort.xml: ``site name="blue_square_top" pos="0 0 0.1"``).
* ``get_task_feedback``: PICK needs PLACE and vice versa; a cube put on another cube's
  goal panel is refused, naming the panels it may go to; not everyone may WAIT.
* ``check_reach_range``: the reach box (``reachable`` items of the cell).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from cellspec.dsl.model import Cell

PLACE_Z = 0.5  # task_sort.py get_target_pos: ret[2] = 0.5
TOP_SITE = 0.1  # task_sort.xml: <site name="*_top" pos="0 0 0.1">
HANDOVER_SHIFT = (0.12, 0.1)  # task_sort.py get_target_pos: panel3 / panel5 offsets
# RoCo's run_dialog.py defaults: --direct_waypoints 5, --max_failed_waypoints 1,
# --num_replans 5, --tsteps 10; base_env.py waypoint_std_threshold 1.0 (Sort keeps it).
DIRECT_WAYPOINTS = 5
MAX_FAILED_WAYPOINTS = 1
STEP_STD_THRESHOLD = 1.0


@dataclass(frozen=True)
class SortState:
    """The task state RoCo's parser and checks read: cube centres, what each robot holds,
    each robot's gripper (TCP) position and joints."""

    centres: dict[str, tuple[float, float, float]]
    holding: dict[str, str | None]
    ee: dict[str, tuple[float, float, float]]
    q: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def with_(self, **kw) -> SortState:
        """A copy with some fields replaced."""
        return replace(self, **kw)


class SortTask:
    """RoCo's Sort Cubes on a cell: names, targets, reach boxes, goals, task feedback."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell
        self.agents = tuple(r.name for r in cell.robots)
        self.objects = {o.name: o for o in cell.twin.objects}
        self.cube_to_bin = {o.name: o.goal for o in cell.twin.objects}
        self.panels = cell.twin.panels
        self.models = {r.name: r.model for r in cell.robots}

    # -- geometry ------------------------------------------------------------------------
    def size(self, obj: str) -> tuple[float, float, float]:
        """The size of a cube (its part type's), metres."""
        s = self.cell.part_types[self.objects[obj].type].size
        return (float(s[0]), float(s[1]), float(s[2]))

    def rest_centre(self, obj: str, panel: str) -> tuple[float, float, float]:
        """Where a cube's centre is when it rests on a panel."""
        p = self.panels[panel]
        return (float(p.pos[0]), float(p.pos[1]),
                float(p.pos[2]) + float(p.size[2]) / 2 + self.size(obj)[2] / 2)

    def initial_state(self, ee: dict[str, tuple[float, float, float]],
                      q: dict[str, tuple[float, ...]] | None = None) -> SortState:
        """Cubes on their start panels, empty grippers, arms at the given poses."""
        return SortState(centres={n: self.rest_centre(n, o.panel) for n, o in self.objects.items()},
                         holding={a: None for a in self.agents}, ee=dict(ee), q=dict(q or {}))

    def target_pos(self, agent: str, name: str, state: SortState) -> np.ndarray | None:
        """RoCo's ``get_target_pos``: a panel's place target or a cube's top site; None."""
        if "panel" in name:
            p = self.panels.get(name)
            if p is None:
                return None
            ret = np.array([float(p.pos[0]), float(p.pos[1]), PLACE_Z])
            dx, dy = HANDOVER_SHIFT
            if name in self.handover_panels():
                front = self.models.get(agent) == "panda"  # RoCo: 'panda' in robot_name
                left = float(p.pos[0]) < 0  # panel3 (x -0.4) vs panel5 (x 0.4)
                sx = (-1 if left else 1) if front else (1 if left else -1)
                ret[0] += sx * dx
                ret[1] += -dy if front else dy
            return ret
        if name in self.objects:
            return self.top_site(name, state)
        return None

    def top_site(self, obj: str, state: SortState) -> np.ndarray:
        """The ``_top`` site of a cube: its pick target."""
        c = state.centres[obj]
        return np.array([c[0], c[1], c[2] + TOP_SITE])

    def handover_panels(self) -> tuple[str, ...]:
        """Panels that are nobody's goal and that two robots reach (RoCo: panel3, panel5)."""
        goals = set(self.cube_to_bin.values())
        out = []
        for name, p in self.panels.items():
            if name in goals:
                continue
            pt = (float(p.pos[0]), float(p.pos[1]), PLACE_Z)
            if sum(self.in_reach(a, pt) for a in self.agents) >= 2:
                out.append(name)
        return tuple(out)

    def in_reach(self, agent: str, pos) -> bool:
        """RoCo's ``check_reach_range``: inside the robot's reach box (no box: True)."""
        box = self.cell.twin.reach_boxes.get(agent)
        if box is None:
            return True
        return all(float(box.lo[d]) <= float(pos[d]) <= float(box.hi[d]) for d in range(3))

    def panel_of(self, obj: str, state: SortState) -> str:
        """The panel nearest to a cube (RoCo's ``get_cube_panel``)."""
        c = state.centres[obj]
        return min(self.panels, key=lambda n: (float(self.panels[n].pos[0]) - c[0]) ** 2
                   + (float(self.panels[n].pos[1]) - c[1]) ** 2)

    def done_cube(self, obj: str, state: SortState) -> bool:
        """A cube within 0.1 m (xy) of its goal panel and not held (RoCo's align_threshold)."""
        if obj in state.holding.values():
            return False
        c, p = state.centres[obj], self.panels[self.cube_to_bin[obj]].pos
        return bool(np.hypot(c[0] - float(p[0]), c[1] - float(p[1])) <= 0.1)

    def done(self, state: SortState) -> bool:
        """RoCo's ``get_reward_done``: every cube on its goal panel."""
        return all(self.done_cube(o, state) for o in self.cube_to_bin)

    # -- RoCo's task feedback ------------------------------------------------------------
    def task_parts(self, action_strs: dict[str, str]) -> list[tuple[str | None, str]]:
        """RoCo's ``get_task_feedback``, word for word, as (robot or None, text) pieces."""
        out: list[tuple[str | None, str]] = []
        handover = ", ".join(self.handover_panels())
        for agent, s in action_strs.items():
            if ("PICK" in s and "PLACE" not in s) or ("PLACE" in s and "PICK" not in s):
                out.append((agent, f"{agent}'s ACTION must contain both PICK and PLACE"))
            if "PICK" in s and "PLACE" in s:
                obj = s.split("PICK")[1].split("PLACE")[0].strip()
                target = s.split("PLACE")[1].strip()
                if obj in self.cube_to_bin and target in self.cube_to_bin.values():
                    correct = self.cube_to_bin[obj]
                    if correct not in target:
                        valid = ", ".join([correct] + ([handover] if handover else []))
                        out.append((agent, f"{agent}'s ACTION is not valid, {obj} cube can only "
                                    f"be placed on {valid}, but not on {target}"))
        if all("WAIT" in s for s in action_strs.values()):
            out.append((None, "You can't all WAIT. The task is not complete, at least one robot "
                        "should be acting."))
        return out

    def task_feedback(self, action_strs: dict[str, str]) -> str:
        """RoCo's task feedback text (empty: the constraints hold)."""
        return "".join(t for _, t in self.task_parts(action_strs))
