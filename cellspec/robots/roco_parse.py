"""RoCo's response parser, transcribed: what it accepts and rejects, in both output modes.

Source: github.com/MandiZhao/robot-collab, commit 9943870, ``prompting/parser.py``
(``LLMResponseParser.parse`` and the ``parse_*`` methods used by Sort Cubes), with the
task's ``use_preplace`` = True (task_sort.py) and ``direct_waypoints`` = 5 (run_dialog.py).
The keywords are ``NAME``, ``ACTION`` and, in ``action_and_path`` mode, ``PATH``
(run_dialog.py ``response_keywords``). What RoCo does, kept here:

* every keyword and every robot name must occur somewhere in the response;
* the plan is the text after the first ``EXECUTE`` up to a second one (``split('EXECUTE')[1]``);
  a line counts when it holds every keyword, all other lines (dialog, bullets, code fences)
  are ignored; exactly one such line per robot, with distinct names;
* the action is everything after ``ACTION`` on that line, PATH included, matched by
  substring in RoCo's order: PICK+PLACE, PICK, PLACE, PUT, OPEN, SWEEP, DUMP, MOVE, WAIT
  (so ``WAIT.`` is a WAIT, and in action-only mode a PATH after ``PLACE panel5`` becomes part
  of the target name ``panel5_PATH_[...]``, which does not exist);
* a PICK+PLACE is two sub-steps (pick goal, place goal), a robot with one sub-step (WAIT,
  MOVE) repeats it, and every sub-step's PATH lengths must be equal across robots.

Where RoCo's code raises (no ``EXECUTE``: ``IndexError``; an unknown robot name in a plan
line: ``KeyError``; a PATH without ``(...)`` or with a non-number: ``IndexError`` /
``ValueError``), RoCo's run would crash; here the response is rejected with a reason that
says so (``crash`` names the exception), which is how RoCo's dialog loop would have to
treat it. Limits RoCo lacks (``MAX_*``) reject hostile input without trying it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from cellspec.robots.roco_task import DIRECT_WAYPOINTS, SortState, SortTask

MODES = ("action_only", "action_and_path")
MAX_RESPONSE_CHARS = 1 << 20
MAX_LINES = 10_000
MAX_PATH_POINTS = 200  # per robot and sub-step: each point is an IK and collision check


@dataclass(frozen=True)
class Target:
    """One robot's goal at one sub-step: where the gripper goes, via which waypoints."""

    pos: tuple[float, float, float]
    waypoints: tuple[tuple[float, float, float], ...]
    action: str  # RoCo's action_strs: the text after ACTION
    grasp: tuple[str, int] | None = None  # (object, 1 pick | 0 release) or None
    obj: str | None = None  # the object this robot's action is about


@dataclass(frozen=True)
class RocoParse:
    """RoCo's ``parse`` result: ok, the reason when not, and the sub-steps."""

    ok: bool
    reason: str = ""
    steps: tuple[dict[str, Target], ...] = ()
    proposal: str = ""  # the plan lines, joined ("parsed_proposal")
    crash: str | None = None  # the exception RoCo's own code raises here, if any
    check: str = "parse"  # parse | gripper | path_length: what the reason is about
    robots: tuple[str, ...] = ()


class _Fail(Exception):
    def __init__(self, reason: str, crash: str | None = None, check: str = "parse",
                 robots: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason, self.crash, self.check, self.robots = reason, crash, check, robots


def _direct(start: np.ndarray, target: np.ndarray, n: int) -> list[np.ndarray]:
    """RoCo's ``add_direct_waypoints`` (positions only)."""
    if n == 0:
        return []
    delta = (target - start) / (n + 1)
    pts = [start + delta * (i + 1) for i in range(n)]
    if target[2] < 0.3:
        top = target.copy()
        top[2] = 0.3
        pts.append(top)
    else:
        pts.append(target.copy())
    return pts


def parse_path_string(s: str) -> list[tuple[float, ...]] | None:
    """RoCo's ``parse_path_string``: the ``(...)`` groups, non-numeric characters dropped."""
    triplets = re.findall(r"\(([^)]+)\)", s)
    if not triplets:
        raise _Fail("PATH has no (x,y,z) points", crash="IndexError")
    if "," not in triplets[0]:
        return None
    if len(triplets) > MAX_PATH_POINTS:
        raise _Fail(f"PATH has {len(triplets)} points; at most {MAX_PATH_POINTS}")
    out = []
    for t in triplets:
        vals = []
        for x in t.split(","):
            v = re.sub(r"[^0-9\.\-]", "", x)
            try:
                vals.append(float(v))
            except ValueError:
                raise _Fail(f"PATH value {x.strip()[:20]!r} is not a number",
                            crash="ValueError") from None
        out.append(tuple(vals))
    return out


class RocoParser:
    """RoCo's ``LLMResponseParser`` for Sort Cubes on a cell."""

    def __init__(self, task: SortTask, mode: str = "action_only",
                 direct_waypoints: int = DIRECT_WAYPOINTS, use_preplace: bool = True) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.task = task
        self.mode = mode
        self.keywords = ["NAME", "ACTION"] + (["PATH"] if mode == "action_and_path" else [])
        self.direct = direct_waypoints
        self.use_preplace = use_preplace

    def parse(self, state: SortState, response: str) -> RocoParse:
        """Parse one response against the current state (RoCo's ``parse``)."""
        try:
            return self._parse(state, response)
        except _Fail as f:
            return RocoParse(False, f.reason, crash=f.crash, check=f.check, robots=f.robots)

    def _parse(self, state: SortState, response: str) -> RocoParse:
        if len(response) > MAX_RESPONSE_CHARS:
            raise _Fail(f"Response is longer than {MAX_RESPONSE_CHARS} characters.")
        if "\x00" in response:
            raise _Fail("Response is binary (it contains NUL characters).")
        for kw in self.keywords:
            if kw not in response:
                raise _Fail(f"Response does not contain {kw}.")
        for agent in self.task.agents:
            if agent not in response:
                raise _Fail(f"Response missing plan for robot {agent}.")
        parts = response.split("EXECUTE")
        if len(parts) < 2:
            raise _Fail("Response does not contain EXECUTE.", crash="IndexError")
        lines = parts[1].split("\n")
        if len(lines) > MAX_LINES:
            raise _Fail(f"The plan has {len(lines)} lines; at most {MAX_LINES}.")
        valid = [ln for ln in lines if all(kw in ln for kw in self.keywords)]
        names = {ln.split("NAME")[1].split("ACTION")[0].strip() for ln in valid}
        n = len(self.task.agents)
        if len(valid) != n or len(names) != n:
            raise _Fail("Response must contain exactly one ACTION for each robot, and must "
                        f"contain all keywords: {self.keywords}")
        all_kwargs: dict[str, list[Target]] = {}
        for ln in valid:
            agent = ln.split("NAME")[1].split("ACTION")[0].strip()
            if agent not in self.task.agents:
                raise _Fail(f"Unknown robot {agent[:40]!r} in a plan line (robots: "
                            f"{', '.join(self.task.agents)}).", crash="KeyError")
            all_kwargs[agent] = self._single_line(agent, state, ln)
        max_len = max(len(k) for k in all_kwargs.values())
        same: dict[str, list[Target]] = {}
        for agent, kws in all_kwargs.items():
            if len(kws) == max_len:
                same[agent] = kws
                continue
            if not kws:
                raise _Fail(f"{agent}'s WAIT did not parse.", crash="IndexError")
            if "WAIT" not in kws[0].action and "MOVE" not in kws[0].action:
                raise _Fail(f"Bad action for {agent}, it can only MOVE or WAIT")
            same[agent] = [kws[0]] * max_len
        steps = []
        for i in range(max_len):
            step = {a: same[a][i] for a in same}
            lens = [len(t.waypoints) for t in step.values()]
            if not all(x == lens[0] for x in lens):
                raise _Fail("Planned PATH must have exact same number of steps for all agents",
                            check="path_length", robots=tuple(step))
            steps.append(step)
        return RocoParse(True, "", tuple(steps), "\n".join(valid))

    # -- one line ----------------------------------------------------------------------
    def _single_line(self, agent: str, state: SortState, line: str) -> list[Target]:
        desp = line.split("ACTION")[1].strip()  # NOTE (RoCo): include PATH in action_desp
        if "PICK" in desp and "PLACE" in desp:
            out = self._pick_and_place(agent, state, desp)
        elif "PICK" in desp:
            out = self._pick(agent, state, desp)
        elif "PLACE" in desp:
            out = self._place(agent, state, desp, "PLACE", 0.1 if self.use_preplace else 0.0)
        elif "PUT" in desp:
            out = self._place(agent, state, desp, "PUT", 0.15 if self.use_preplace else 0.0)
        elif "OPEN" in desp:
            raise _Fail("Only left_door and right_door can be opened.")
        elif "SWEEP" in desp:
            target = desp.split("SWEEP")[1].split("PATH")[0].strip()
            raise _Fail(f"SWEEP target {target} does not exist in the environment.")
        elif "DUMP" in desp:
            raise _Fail("DUMP target trash_bin site does not exist in the environment.")
        elif "MOVE" in desp:
            out = self._move(agent, state, desp)
        elif "WAIT" in desp:
            out = self._wait(agent, state, desp)
        else:
            raise _Fail(f"Action {desp} can't be parsed.")
        return [Target(t.pos, t.waypoints, desp, t.grasp, t.obj) for t in out]

    def _ee(self, agent: str, state: SortState) -> np.ndarray:
        return np.array(state.ee[agent], dtype=float)

    def _path(self, desp: str, target: np.ndarray, n_err: str) -> list[np.ndarray]:
        if "PATH" not in desp:
            raise _Fail(f"Action {desp} must contain PATH information.")
        if "PATH " not in desp:
            raise _Fail(f"Action {desp} PATH must be followed by a space.", crash="IndexError")
        pts = parse_path_string(desp.split("PATH ")[1])
        if pts is None:
            raise _Fail(n_err)
        for p in pts:
            if len(p) != 3 or not all(math.isfinite(v) for v in p):
                raise _Fail(f"Action {desp[:80]} PATH point {p} is not a finite (x,y,z); "
                            "RoCo's parser would read quaternion entries as coordinates")
        return [np.array(p, dtype=float) for p in pts]

    def _wait(self, agent: str, state: SortState, desp: str) -> list[Target]:
        cur = self._ee(agent, state)
        if self.mode == "action_and_path":
            if "PATH" not in desp or "PATH " in desp and parse_path_string(
                    desp.split("PATH ")[1]) is None:
                return []  # RoCo ignores a WAIT's parse failure: parse_single_line returns []
            wps = self._path(desp, cur, f"Action WAIT {desp} does not fit desired format.")
        else:
            wps = _direct(cur, cur, self.direct)
        held = state.holding.get(agent)
        return [Target(_t(cur), tuple(_t(w) for w in wps), "WAIT", None, held)]

    def _pick(self, agent: str, state: SortState, desp: str) -> list[Target]:
        if state.holding.get(agent):
            raise _Fail(f"Robot {agent} is already holding an object, can't pick another one.",
                        check="gripper", robots=(agent,))
        obj = desp.split("PICK")[1].strip().split(" ")[0]
        if obj not in self.task.objects:
            raise _Fail(f"Object {obj} does not exist in the environment.")
        for r, held in state.holding.items():
            if held == obj:
                raise _Fail(f"Object {obj} is already being held by robot {r}, can't pick "
                            "again", check="gripper", robots=(agent, r))
        pick = self.task.top_site(obj, state)
        if self.mode == "action_and_path":
            wps = self._path(desp, pick, f"Action {desp} must contain correct (x,y,z) format.")
        else:
            wps = _direct(self._ee(agent, state), pick, self.direct)
        return [Target(_t(pick), tuple(_t(w) for w in wps), desp, (obj, 1), obj)]

    def _pick_and_place(self, agent: str, state: SortState, desp: str) -> list[Target]:
        pick = self._pick(agent, state, desp)[0]
        name = desp.split("PLACE")[1].strip().replace(" ", "_")
        pos = self.task.target_pos(agent, name, state)
        if pos is None:
            raise _Fail(f"PLACE target {name} does not exist in the environment.")
        wps = _direct(np.array(pick.pos), pos, self.direct)
        place = Target(_t(pos), tuple(_t(w) for w in wps), desp, (pick.obj or "", 0), pick.obj)
        return [pick, place]

    def _place(self, agent: str, state: SortState, desp: str, verb: str,
               lift: float) -> list[Target]:
        targets = desp.split(verb)[1].strip().split("PATH")[0].strip().split(" ")
        obj, name = targets[0].replace(" ", "_"), " ".join(targets[1:])
        if obj not in self.task.objects:
            raise _Fail(f"Object {obj} cannot be parsed, bad format.")
        if state.holding.get(agent) != obj:
            what = "picked" if verb == "PLACE" else "PUT down"
            raise _Fail(f"Object {obj} cannot be {what}, robot {agent} is not in contact with "
                        "it.", check="gripper", robots=(agent,))
        pos = self._place_pose(agent, name, state)
        if pos is None:
            label = "Target" if verb == "PLACE" else "Put target"
            raise _Fail(f"{label} {name} cannot be parsed, bad format.")
        pos = pos.copy()
        pos[2] += lift
        if self.mode == "action_and_path":
            wps = self._path(desp, pos, f"Action {desp} PATH does not fit desired (x,y,z) "
                             "format.")
        else:
            wps = _direct(self._ee(agent, state), pos, self.direct)
        first = Target(_t(pos), tuple(_t(w) for w in wps), desp,
                       None if lift else (obj, 0), obj)
        if not lift:
            return [first]
        final = pos.copy()
        final[2] -= lift
        return [first, Target(_t(final), tuple(_t(w) for w in _direct(pos, final, self.direct)),
                              desp, (obj, 0), obj)]

    def _place_pose(self, agent: str, name: str, state: SortState) -> np.ndarray | None:
        """RoCo's ``get_place_target_pose`` (position): ``(x, y, z)`` or a named target."""
        if "," in name:
            vals = name.replace("(", "").replace(")", "").replace(" ", "").split(",")
            if len(vals) != 3:
                return None
            try:
                p = np.array([float(v) for v in vals])
            except ValueError:
                raise _Fail(f"Target {name[:40]} is not three numbers.",
                            crash="ValueError") from None
            return p if np.all(np.isfinite(p)) else None
        return self.task.target_pos(agent, name, state)

    def _move(self, agent: str, state: SortState, desp: str) -> list[Target]:
        targets = desp.split("MOVE ")
        if len(targets) != 2:
            raise _Fail(f"Failed to parse target location for MOVE {desp}")
        names = targets[1].split("PATH")[0].strip().split(" ")
        if len(names) != 1:
            raise _Fail(f"Failed to parse target location for MOVE {desp}, must be MOVE "
                        "<target> format.")
        pos = self.task.target_pos(agent, names[0], state)
        if pos is None:
            raise _Fail(f"MOVE target {names[0]} does not exist in the environment.")
        wps = _direct(self._ee(agent, state), pos, self.direct)
        return [Target(_t(pos), tuple(_t(w) for w in wps), desp, None,
                       state.holding.get(agent))]


def _t(v) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))
