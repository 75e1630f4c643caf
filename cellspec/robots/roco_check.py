"""RoCo's plan checks, in RoCo's order and wording, then cellspec's own extra checks.

Source: github.com/MandiZhao/robot-collab, commit 9943870, ``prompting/feedback.py``
(``FeedbackManager.give_feedback``, ``single_step_feedback``, ``path_feedback``) and
``prompting/dialog_prompter.py`` (``prompt_one_round``: the parsed sub-steps are checked in
turn and the first failing one is the feedback). Per sub-step (the pick goal, then the
place goal, ...):

1. ``task``: the task's constraints on the action strings (``SortTask.task_feedback``);
2. the goal step, for *every* robot at once (WAITing arms at their current pose):
   ``reach`` (reach boxes) → only if all reach, ``ik`` → only if all solve, ``collision``
   (the arms at their IK solutions; RoCo allows contacts of arms with cubes, panels and
   the table, so only arm–arm and self contacts count); every failing robot is named;
3. path mode only: each waypoint index as a step (``waypoints``; at most
   ``max_failed_waypoints`` may fail), then ``spacing`` (the std of step lengths along
   current pose, PATH, goal, per robot, at most ``step_std``).

IK is cellspec's damped-least-squares solver on the cell's arms (RoCo uses MuJoCo's),
with the tool pointing down. When RoCo's checks pass, cellspec's extra checks run and are
labelled ``cellspec``: two robots picking the same cube (``same_object``), a cube released
over another cube (``occupied``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cellspec.dsl.model import Cell
from cellspec.robots.roco_parse import RocoParse, RocoParser, Target
from cellspec.robots.roco_task import MAX_FAILED_WAYPOINTS, STEP_STD_THRESHOLD, SortState, SortTask

SOURCES = ("roco", "cellspec")


@dataclass(frozen=True)
class CheckFailure:
    """One failed check: which, the robots it names, the sub-step, who defines it."""

    check: str
    robots: tuple[str, ...]
    step: int | None
    text: str
    source: str = "roco"

    def __post_init__(self) -> None:
        assert self.source in SOURCES

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {"check": self.check, "robots": list(self.robots), "step": self.step,
                "text": self.text, "source": self.source}


@dataclass(frozen=True)
class RocoResult:
    """The verdict on one response: RoCo's failures first, then cellspec's."""

    ok: bool
    failures: tuple[CheckFailure, ...]
    feedback: str  # RoCo's feedback text (empty on pass)
    parsed: RocoParse
    qs: tuple[dict[str, tuple[float, ...]], ...] = ()  # IK solution per sub-step
    roco_ok: bool = True  # RoCo's own verdict (its checks alone)
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.ok == (not self.failures), "a failing verdict names its failures"
        assert not self.roco_ok or all(f.source == "cellspec" for f in self.failures)

    @property
    def check(self) -> str | None:
        """The first failed check, or None."""
        return self.failures[0].check if self.failures else None

    def ours(self) -> str:
        """cellspec's feedback: every failure with its check and source."""
        if self.ok:
            return "pass"
        out = []
        for f in self.failures:
            step = f" (sub-step {f.step + 1})" if f.step is not None else ""
            who = f" [{', '.join(f.robots)}]" if f.robots else ""
            out.append(f"{f.source}: {f.check}{who}{step}: {f.text}")
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {"verdict": "pass" if self.ok else "fail", "roco_verdict":
                "pass" if self.roco_ok else "fail", "check": self.check,
                "failures": [f.to_json() for f in self.failures],
                "roco_feedback": self.feedback, "sub_steps": len(self.parsed.steps),
                "proposal": self.parsed.proposal}


def _ps(p) -> str:
    return f"({p[0]:.2f}, {p[1]:.2f}, {p[2]:.2f})"


def parse_failure_feedback(agent: str, response: str, reason: str) -> str:
    """RoCo's re-format request after a parse failure (dialog_prompter.py)."""
    return (f"\nThis previous response from [{agent}] failed to parse!: '{response}'\n"
            f"{reason} Re-format to strictly follow [Action Output Instruction]!")


class RocoChecker:
    """Parse and check responses on one cell: one twin, reused across checks."""

    def __init__(self, cell: Cell, *, mode: str = "action_only",
                 max_failed_waypoints: int = MAX_FAILED_WAYPOINTS,
                 step_std: float = STEP_STD_THRESHOLD, seed: int = 0) -> None:
        # lazy: the twin extra (pybullet), through cellspec.robots
        from cellspec.robots.collision import CollisionChecker
        from cellspec.robots.twin import Twin

        self.cell = cell
        self.task = SortTask(cell)
        self.parser = RocoParser(self.task, mode)
        self.mode = mode
        self.max_failed = max_failed_waypoints
        self.step_std = step_std
        self.seed = seed
        self.twin = Twin(cell, None)
        try:
            for name in self.task.objects:
                self.twin.add_box(name, self.task.size(name),
                                  self.task.rest_centre(name, self.task.objects[name].panel),
                                  kind="part")
            self.checker = CollisionChecker(self.twin)
        except BaseException:
            self.twin.close()
            raise

    def close(self) -> None:
        """Disconnect the twin."""
        self.twin.close()

    def __enter__(self) -> RocoChecker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def initial_state(self) -> SortState:
        """Cubes on their start panels, arms at home with empty grippers."""
        q = {r: tuple(float(v) for v in self.twin.home(r)) for r in self.task.agents}
        ee = {r: tuple(float(v) for v in self.twin.tool_pose(r, np.array(q[r]))[0])
              for r in self.task.agents}
        return self.task.initial_state(ee, q)  # type: ignore[arg-type]

    def _place_objects(self, state: SortState) -> None:
        for name, c in state.centres.items():
            self.twin.set_pose(name, c)

    # -- one step ----------------------------------------------------------------------
    def _step(self, state: SortState, poses: dict[str, tuple[float, float, float]],
              waiting: set[str], label: str, step: int
              ) -> tuple[str, CheckFailure | None, dict[str, tuple[float, ...]]]:
        """RoCo's ``single_step_feedback``: reach, then IK, then collision, all robots."""
        # lazy: the twin extra (pybullet), through cellspec.robots
        from cellspec.robots.ik import grasp_quat, solve_ik

        text = f"{label} Step " + "; ".join(f"{a} {_ps(p)}" for a, p in poses.items())
        text += ":\n  "
        bad = [a for a, p in poses.items() if not self.task.in_reach(a, p)]
        if bad:
            reach = "".join(f"{a} {_ps(poses[a])}; " for a in bad)
            return (text + f" - Reachability failed: Out of reach: {reach}\n  ",
                    CheckFailure("reach", tuple(bad), step, "out of reach: " + "; ".join(
                        f"{a} at {_ps(poses[a])} (reach box {self._box(a)})" for a in bad)), {})
        qs: dict[str, tuple[float, ...]] = {}
        bad = []
        why = []
        for a, p in poses.items():
            cur = state.q.get(a)
            if a in waiting and cur is not None:
                qs[a] = cur  # a WAITing arm stays where it is: its own IK solution
                continue
            vac = next(r for r in self.cell.robots if r.name == a).gripper.kind == "vacuum"
            r = solve_ik(self.twin, a, np.array(p), grasp_quat("z" if vac else "x"),
                         seed=self.seed, check_collision=False, yaw_free=vac,
                         q_init=None if cur is None else np.array(cur))
            if not r.ok or r.q is None:
                bad.append(a)
                why.append(f"{a} at {_ps(p)}: {r.reason or 'no joint solution'}")
            else:
                qs[a] = tuple(float(v) for v in r.q)
        if bad:
            ik = "".join(f"{a} {_ps(poses[a])}; " for a in bad)
            return (text + f" - IK failed: on {ik}\n  ",
                    CheckFailure("ik", tuple(bad), step,
                                 "no joint solution: " + "; ".join(why)), qs)
        pairs = self._collisions(qs)
        if pairs:
            coll = "collided object pairs: " + ", ".join(f"{x}-{y}" for x, y in pairs)
            robots = tuple(a for a in poses if any(a in pr for pr in pairs))
            return (text + f" - Collision detected: {coll}\n  ",
                    CheckFailure("collision", robots, step, coll), qs)
        return "", None, qs

    def _box(self, a: str) -> str:
        b = self.cell.twin.reach_boxes.get(a)
        if b is None:
            return "none"
        return " ".join(f"{ax} [{float(b.lo[d]):.2f}, {float(b.hi[d]):.2f}]"
                        for d, ax in enumerate("xyz"))

    def _collisions(self, qs: dict[str, tuple[float, ...]]) -> list[tuple[str, str]]:
        """Arm–arm and self contacts at qs, as robot-name pairs (RoCo's allowed pairs
        exclude arm–cube, arm–panel and arm–table contacts in Sort Cubes)."""
        ignore = frozenset(self.task.objects) | frozenset(f"part:{o}" for o in self.task.objects)
        cs = self.checker.contacts({a: np.array(q) for a, q in qs.items()}, ignore=ignore)
        out: list[tuple[str, str]] = []
        for c in cs:
            ra, rb = c.a.split("/")[0], c.b.split("/")[0]
            if ra in self.task.agents and rb in self.task.agents:
                pr = (ra, rb) if self.task.agents.index(ra) <= self.task.agents.index(rb) \
                    else (rb, ra)
                if pr not in out:
                    out.append(pr)
        return out

    # -- a whole response ----------------------------------------------------------------
    def check(self, state: SortState, response: str, agent: str = "") -> RocoResult:
        """Parse and check a response in RoCo's order; cellspec's checks after RoCo's."""
        parsed = self.parser.parse(state, response)
        if not parsed.ok:
            f = CheckFailure(parsed.check, parsed.robots, None, parsed.reason
                        + (f" (RoCo's own parser raises {parsed.crash} here)"
                           if parsed.crash else ""))
            return RocoResult(False, (f,), parse_failure_feedback(
                agent or self.task.agents[-1], response, parsed.reason), parsed, roco_ok=False)
        self._place_objects(state)
        head = f"[Environment Feedback]:\n- Previous Plan:\n{parsed.proposal}\n"
        qs_all: list[dict[str, tuple[float, ...]]] = []
        for i, step in enumerate(parsed.steps):
            fb, fail, qs = self._check_step(state, step, i)
            if fail is not None:
                return RocoResult(False, fail, head + fb, parsed, tuple(qs_all), roco_ok=False)
            qs_all.append(qs)
        extra = self._ours(state, parsed)
        return RocoResult(not extra, tuple(extra), "", parsed, tuple(qs_all), roco_ok=True)

    def _check_step(self, state: SortState, step: dict[str, Target], i: int
                    ) -> tuple[str, tuple[CheckFailure, ...] | None, dict[str, tuple[float, ...]]]:
        """RoCo's ``give_feedback`` on one sub-step (LLMPathPlan)."""
        parts = self.task.task_parts({a: t.action for a, t in step.items()})
        if parts:
            text = "".join(t for _, t in parts)
            robots = tuple(dict.fromkeys(a for a, _ in parts if a))
            return (f"Task Constraints:\n faild, {text}\n",
                    (CheckFailure("task", robots, i, text),), {})
        waiting = {a for a, t in step.items()  # at its current pose: WAIT, a repeated MOVE
                   if np.allclose(t.pos, state.ee[a], atol=1e-9)}
        poses = {a: t.pos for a, t in step.items()}
        fb, fail, qs = self._step(state, poses, waiting, "- Goal", i)
        if fail is not None:
            return fb, (fail,), qs
        if self.mode != "action_and_path":
            return "", None, qs
        n = len(next(iter(step.values())).waypoints)
        failed, first, text = 0, None, ""
        for k in range(n):
            wp = {a: t.waypoints[k] for a, t in step.items()}
            f2, fl, _ = self._step(state, wp, set(), "- Waypoint", i)
            text += f2
            if fl is not None:
                failed += 1
                first = first or fl
        if failed > self.max_failed:
            return text, (CheckFailure("waypoints", first.robots if first else (), i,
                                  f"{failed} waypoint step(s) failed (at most "
                                  f"{self.max_failed}); first: {first.check if first else ''}"
                                  f" {first.text if first else ''}"),), qs
        pf, robots = self._path_feedback(state, step)
        if pf:
            return text + f"- Path feedback: failed, {pf}\n", (
                CheckFailure("spacing", robots, i, pf),), qs
        return text, None, qs

    def _path_feedback(self, state: SortState, step: dict[str, Target]
                       ) -> tuple[str, tuple[str, ...]]:
        """RoCo's ``path_feedback``: per robot, the std of the step lengths along
        current pose, waypoints, goal (the current pose is the state's, for every sub-step)."""
        fb, robots = "", []
        for a, t in step.items():
            path = [np.array(state.ee[a])] + [np.array(w) for w in t.waypoints] + [np.array(t.pos)]
            dist = np.array([np.linalg.norm(path[k + 1] - path[k]) for k in range(len(path) - 1)])
            pairs = [f"({path[k][0]:.2f},{path[k][1]:.2f},{path[k][2]:.2f})-"
                     f"({path[k + 1][0]:.2f},{path[k + 1][1]:.2f},{path[k + 1][2]:.2f})"
                     for k in range(len(path) - 1)]
            hi = f"  Distance between {pairs[int(np.argmax(dist))]} is {np.max(dist):.2f}, too high"
            lo = f"  Distance between {pairs[int(np.argmin(dist))]} is {np.min(dist):.2f}, too low"
            std = float(np.std(dist))
            if std > self.step_std:
                fb += (f"You must make {a}'s path more evenly spaced:\n{hi}\n{lo}\n"
                       f"  Overall Distance std: {std:.2f}")
                robots.append(a)
        return fb, tuple(robots)

    def _ours(self, state: SortState, parsed: RocoParse) -> list[CheckFailure]:
        """cellspec's checks beyond RoCo's: one robot per cube, and a released cube lands
        where no other cube is (RoCo lets cubes be dropped onto or into each other)."""
        out: list[CheckFailure] = []
        picks: dict[str, list[str]] = {}
        drops: list[tuple[str, str, tuple[float, float, float]]] = []
        for step in parsed.steps:
            for a, t in step.items():
                if t.grasp and t.grasp[1] == 1 and a not in picks.get(t.grasp[0], []):
                    picks.setdefault(t.grasp[0], []).append(a)
                if t.grasp and t.grasp[1] == 0 and t.grasp[0] in self.task.objects:
                    drops.append((a, t.grasp[0], t.pos))
        for obj, who in picks.items():
            if len(who) > 1:
                out.append(CheckFailure("same_object", tuple(who), None, f"{' and '.join(who)} "
                                   f"both PICK {obj}; only one robot can hold it", "cellspec"))
        moved = {o for _, o, _ in drops} | set(picks)
        spots = [(o, state.centres[o]) for o in self.task.objects if o not in moved]
        for k, (a, obj, pos) in enumerate(drops):
            others = spots + [(o2, p2) for _, o2, p2 in drops[:k]]
            s = self.task.size(obj)
            for o2, c in others:
                s2 = self.task.size(o2)
                if (abs(pos[0] - c[0]) < (s[0] + s2[0]) / 2
                        and abs(pos[1] - c[1]) < (s[1] + s2[1]) / 2):
                    out.append(CheckFailure("occupied", (a,), None, f"{a} releases {obj} at "
                                       f"{_ps(pos)}, over {o2} at {_ps(c)}: the cubes' "
                                       "footprints overlap", "cellspec"))
                    break
        return out
