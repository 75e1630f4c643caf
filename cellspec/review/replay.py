"""Plan replay on the review page: a timeline slider and a play button move the robots
along the planned motions; a plot shows planned vs executed joints and δ against ε.

The plan is the JSON that ``cellspec sim -o PLAN.json`` writes (``SimResult.plan_json``:
``homes``, ``actions`` with ``pick``/``place``, ``motions`` with joint ``path`` per
segment, ``execution`` with δ and ε). Times come from the same time parameterisation
the simulator executes (:func:`cellspec.robots.execute.time_parameterise`), so the
replay runs on the plan's own clock. The execution record (every sample of planned and
executed joints) is the file ``cellspec sim --trajectories FILE.json`` writes; with it
the plot shows both curves and δ(t) against ε, without it the planned joints only.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.io import TooLarge, read_text_bounded
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.review.robots import quat_matrix
from cellspec.robots.execute import Segment, nearest_sample, time_parameterise

if TYPE_CHECKING:
    from cellspec.review.app import ReviewApp
    from cellspec.robots.twin import Twin

MAX_PLOT_POINTS = 600
PLAY_FPS = 12.0
MAX_BYTES = 64 * 1024 * 1024


@dataclass
class ReplayPlan:
    """A validated plan: motion segments, homes, per-part pick/place, execution summary."""

    path: str
    segments: list[Any]
    homes: dict[str, np.ndarray]
    actions: list[dict[str, Any]]
    execution: dict[str, Any] | None
    verdict: str | None
    starts: dict[int, float] | None = None  # action -> start time (concurrent arms)
    concurrent: bool = False
    records: dict[str, dict[str, np.ndarray]] | None = None
    records_path: str | None = None
    notes: list[str] = field(default_factory=list)


def _bad(path: str, msg: str) -> CellspecError:
    return CellspecError(Diagnostic(path, 0, 0, msg))


def _read_json(path: str | Path) -> Any:
    try:
        text = read_text_bounded(path, MAX_BYTES)
    except TooLarge:
        raise _bad(str(path), f"larger than {MAX_BYTES} bytes") from None
    except OSError as exc:
        raise _bad(str(path), f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise _bad(str(path), f"not UTF-8 text (byte {exc.start})") from None

    def no_constants(name: str) -> float:
        raise ValueError(f"{name} is not a number")

    try:
        return json.loads(text, parse_constant=no_constants)
    except json.JSONDecodeError as exc:
        raise CellspecError(Diagnostic(str(path), exc.lineno, exc.colno,
                                       f"invalid JSON: {exc.msg}")) from None
    except (ValueError, RecursionError) as exc:
        raise _bad(str(path), f"invalid JSON: {exc}") from None


def _vec(path: str, where: str, v: Any, n: int) -> np.ndarray:
    if not isinstance(v, list) or len(v) != n or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and abs(x) < 1e6 for x in v):
        raise _bad(path, f"{where}: expected {n} finite numbers")
    return np.array(v, dtype=np.float64)


def load_plan(path: str, cell: Cell, trajectories: str | None = None,
              layout: Layout | None = None) -> ReplayPlan:
    """Read and validate a plan JSON (and optionally its execution record) against the
    cell's robots and, when given, the layout (its parts, each placed where the layout has
    it); CellspecError (exit 2) naming the JSON path of any problem."""
    # lazy: the twin extra (pybullet), through cellspec.robots
    from cellspec.robots.custom import spec_of

    obj = _read_json(path)
    if not isinstance(obj, dict) or not isinstance(obj.get("motions"), list):
        raise _bad(path, "not a plan: expected the JSON object `cellspec sim -o` writes "
                   "(with \"motions\", \"homes\" and \"actions\")")
    robots = {r.name: r for r in cell.robots}
    dof = {}
    for name, r in robots.items():
        try:
            dof[name] = len(spec_of(r).joint_names)
        except CellspecError:
            continue
    homes = _homes(path, obj, robots, dof)
    segs = _segments(path, obj, dof, homes)
    actions, act_starts = _actions(path, obj)
    if layout is not None:
        _match_layout(path, obj, actions, segs, layout)
    ex = obj.get("execution")
    plan = ReplayPlan(path=str(path), segments=segs, homes=homes, actions=actions,
                      execution=ex if isinstance(ex, dict) else None,
                      verdict=obj.get("verdict") if isinstance(obj.get("verdict"), str)
                      else None)
    _starts(path, obj, plan, act_starts)
    plan.concurrent = obj.get("concurrent") is True
    if plan.concurrent and plan.starts is None:
        plan.notes.append("the simulator ran the arms concurrently, but the plan JSON has no "
                          "start times: this replay runs the actions one after another")
    if not segs:
        plan.notes.append("the plan has no motions (its actions failed before execution)")
    if trajectories is not None:
        plan.records = load_records(trajectories, dof)
        plan.records_path = str(trajectories)
    return plan


def _homes(path: str, obj: dict[str, Any], robots: dict[str, Any],
           dof: dict[str, int]) -> dict[str, np.ndarray]:
    """``homes``: robot -> its home joints (one per joint of a robot the cell has)."""
    homes_in = obj.get("homes")
    if not isinstance(homes_in, dict):
        raise _bad(path, "homes: expected an object robot -> joint list")
    homes = {}
    for r, q in homes_in.items():
        if r not in dof:
            raise _bad(path, f"homes.{r}: the cell has no robot '{r}' (robots: "
                       f"{', '.join(robots) or 'none'})")
        homes[r] = _vec(path, f"homes.{r}", q, dof[r])
    return homes


def _segments(path: str, obj: dict[str, Any], dof: dict[str, int],
              homes: dict[str, np.ndarray]) -> list[Segment]:
    """``motions``: each a robot with a home, its joint path, action and part."""
    segs = []
    for k, m in enumerate(obj["motions"]):
        w = f"motions[{k}]"
        if not isinstance(m, dict):
            raise _bad(path, f"{w}: expected an object")
        r = m.get("robot")
        if r not in dof:
            raise _bad(path, f"{w}.robot: the cell has no robot {r!r}")
        if r not in homes:
            raise _bad(path, f"{w}.robot: no home for '{r}' in homes")
        pth = m.get("path")
        if not isinstance(pth, list):
            raise _bad(path, f"{w}.path: expected a list of joint lists")
        q = tuple(_vec(path, f"{w}.path[{i}]", v, dof[r]) for i, v in enumerate(pth))
        if not isinstance(m.get("action"), int) or not isinstance(m.get("part"), str):
            raise _bad(path, f"{w}: expected an integer \"action\" and a \"part\" id")
        segs.append(Segment(action=m["action"], robot=r, part=m["part"],
                            kind=str(m.get("kind", "")), path=q,
                            grasp=bool(m.get("grasp")), release=bool(m.get("release"))))
    return segs


def _actions(path: str, obj: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, float]]:
    """``actions``: each an index, robot, part, pick and place; and the start times the
    executed timeline gave them."""
    actions = []
    act_starts: dict[int, float] = {}
    acts_in = obj.get("actions") or []
    if not isinstance(acts_in, list):
        raise _bad(path, "actions: expected a list")
    for k, a in enumerate(acts_in):
        if not isinstance(a, dict) or not isinstance(a.get("part"), str):
            raise _bad(path, f"actions[{k}]: expected an object with a \"part\"")
        index = a.get("index", k)
        if not isinstance(index, int) or isinstance(index, bool):
            raise _bad(path, f"actions[{k}].index: expected an integer")
        actions.append({"index": index, "robot": a.get("robot"),
                        "part": a["part"],
                        "pick": _vec(path, f"actions[{k}].pick", a.get("pick"), 3),
                        "place": _vec(path, f"actions[{k}].place", a.get("place"), 3)})
        if a.get("start") is not None:
            t = float(_vec(path, f"actions[{k}].start", [a["start"]], 1)[0])
            if t < 0:
                raise _bad(path, f"actions[{k}].start: expected a time ≥ 0 s")
            act_starts[index] = t
    return actions, act_starts


def _starts(path: str, obj: dict[str, Any], plan: ReplayPlan,
            act_starts: dict[int, float]) -> None:
    """``plan.starts``: the plan's ``starts`` object, else the actions' own start times when
    every action with motions has one; every action with motions needs one if any is
    given."""
    st = obj.get("starts")
    if st is not None:
        if not isinstance(st, dict):
            raise _bad(path, "starts: expected an object action -> start time (s)")
        plan.starts = {}
        for k, v in st.items():
            try:
                a = int(k)
            except ValueError:
                raise _bad(path, f"starts.{k}: expected an action number") from None
            plan.starts[a] = float(_vec(path, f"starts.{k}", [v], 1)[0])
    moving = {sg.action for sg in plan.segments}
    if plan.starts is None and moving and moving <= set(act_starts):
        plan.starts = act_starts  # the executed timeline's start times (cellspec sim -o)
    if plan.starts is not None and not moving <= set(plan.starts):
        miss = sorted(moving - set(plan.starts))
        raise _bad(path, f"starts: no start time for action {miss[0]} (every action with "
                   "motions needs one)")


def _match_layout(path: str, obj: dict[str, Any], actions: list[dict[str, Any]],
                  segs: list[Any], layout: Layout) -> None:
    """The plan must be for this layout: its parts are the layout's, placed where the
    layout has them (1 mm), so a plan from another layout is refused, not replayed."""
    pos = {pid: layout.pos[i] for i, pid in enumerate(layout.ids)}
    made = obj.get("layout") if isinstance(obj.get("layout"), str) else "another layout"
    for k, a in enumerate(actions):
        if a["part"] not in pos:
            raise _bad(path, f"actions[{k}].part: {a['part']!r} is not a part of "
                       f"{layout.path} (the plan was made for {made})")
        off = float(np.max(np.abs(a["place"] - pos[a["part"]])))
        if not off <= 1e-3:
            raise _bad(path, f"actions[{k}].place: {a['part']} is placed "
                       f"{np.round(a['place'], 4).tolist()} in the plan but at "
                       f"{np.round(pos[a['part']], 4).tolist()} in {layout.path} (the plan was "
                       f"made for {made})")
    for k, sg in enumerate(segs):
        if sg.part not in pos:
            raise _bad(path, f"motions[{k}].part: {sg.part!r} is not a part of {layout.path} "
                       f"(the plan was made for {made})")


def load_records(path: str, dof: dict[str, int]) -> dict[str, dict[str, np.ndarray]]:
    """The execution record of ``cellspec sim --trajectories``: per robot t/q planned and
    executed samples (validated)."""
    obj = _read_json(path)
    if not isinstance(obj, dict):
        raise _bad(path, "not an execution record: expected the object `cellspec sim "
                   "--trajectories` writes (robot -> t_plan, q_plan, t_exec, q_exec)")
    out = {}
    for r, rec in obj.items():
        if r not in dof:
            raise _bad(path, f"{r}: the cell has no robot '{r}'")
        if not isinstance(rec, dict):
            raise _bad(path, f"{r}: expected an object")
        arrs = {}
        for key, width in (("t_plan", 0), ("q_plan", dof[r]), ("t_exec", 0),
                           ("q_exec", dof[r])):
            v = rec.get(key)
            try:
                a = np.array(v, dtype=np.float64)
            except (TypeError, ValueError):
                raise _bad(path, f"{r}.{key}: expected numbers") from None
            if (a.ndim != (1 if width == 0 else 2) or (width and a.shape[1] != width)
                    or not np.isfinite(a).all()):
                raise _bad(path, f"{r}.{key}: expected "
                           + ("a list of finite times" if width == 0 else
                              f"a list of {width}-joint lists of finite numbers"))
            arrs[key] = a
        if len(arrs["t_plan"]) != len(arrs["q_plan"]) or len(arrs["t_exec"]) != len(
                arrs["q_exec"]):
            raise _bad(path, f"{r}: times and joint samples differ in length")
        out[r] = arrs
    return out


class Replay:
    """The replay panel and the robots and parts it moves."""

    def __init__(self, app: ReviewApp, plan: ReplayPlan) -> None:
        """Build the timeline from the plan with the twin's velocity limits."""
        self.app, self.plan = app, plan
        assert app.twin is not None  # the app makes a replay only with the twin
        self.twin: Twin = app.twin
        vel = {r: self.twin.spec(r).vel_limits for r in self.twin.robot_names}
        if plan.starts:
            self.tl = time_parameterise(plan.segments, dict(plan.homes), vel, plan.starts)
        else:
            self.tl = time_parameterise(plan.segments, dict(plan.homes), vel)
        self.end = math.ceil(float(self.tl.end) * 20) / 20  # on the slider's 0.05 s grid
        self.playing = False
        self._thread: threading.Thread | None = None
        # per part: robot, window start, grasp and release times
        self.parts: dict[str, dict[str, Any]] = {}
        starts = {w[0]: w[1] for w in self.tl.windows}  # (action, t0, t1[, robot])
        for a in plan.actions:
            self.parts[a["part"]] = {"pick": a["pick"], "place": a["place"],
                                     "start": starts.get(a["index"], 0.0), "grasp": None,
                                     "release": None, "robot": a.get("robot")}
        for t, robot, kind, part in self.tl.events:
            if part in self.parts:
                self.parts[part][kind] = t
                self.parts[part]["robot"] = robot
        self._grasp_tcp: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for pid, info in self.parts.items():
            if info["grasp"] is not None and info["robot"] in self.tl.t:
                q = self.tl.at(info["robot"], info["grasp"])
                pos, quat = self.twin.tool_pose(info["robot"], q)
                self._grasp_tcp[pid] = (np.array(pos), quat_matrix(quat))

    def build(self, gui: Any) -> None:
        """Add the replay folder: slider, play, action line, plots."""
        ex = self.plan.execution
        with gui.add_folder("Plan replay"):
            self.md = gui.add_markdown(self._summary(ex))
            self.slider = gui.add_slider("time (s)", 0.0, max(self.end, 0.05), 0.05,
                                         max(self.end, 0.05))
            self.b_play = gui.add_button("Play", icon=None)
            self.md_now = gui.add_markdown("")
            robots = tuple(r for r in self.tl.t) or ("(none)",)
            self.dd_robot = gui.add_dropdown("plot robot", robots, initial_value=robots[0])
            self.plot_joints = None
            self.plot_delta = None
            self._plots()
        self.slider.on_update(lambda _e: self.app._call(lambda: self.show(self.slider.value)))
        self.b_play.on_click(lambda _e: self.toggle())
        self.dd_robot.on_update(lambda _e: self.app._call(self._plots))

    def _summary(self, ex: dict[str, Any] | None) -> str:
        lines = [f"plan `{Path(self.plan.path).name}`: {len(self.plan.actions)} action(s), "
                 f"{self.end:.2f} s"]
        if self.plan.verdict:
            lines[0] += f", sim verdict **{self.plan.verdict}**"
        if ex:
            ok = "within" if ex.get("ok") else "**exceeds**"
            lines.append(f"execution: δ = {ex.get('delta')} rad {ok} ε = {ex.get('epsilon')}"
                         f" (worst: {ex.get('delta_robot')} at t = {ex.get('delta_t')} s)")
        else:
            lines.append("no execution in the plan")
        if self.plan.records is None:
            lines.append("no execution record: planned joints only (pass `--trajectories "
                         "FILE.json` from `cellspec sim --trajectories`)")
        lines += self.plan.notes
        return "  \n".join(lines)

    def _plots(self) -> None:
        robot = self.dd_robot.value
        for h in (self.plot_joints, self.plot_delta):
            if h is not None:
                h.remove()
        self.plot_joints = self.plot_delta = None
        if robot not in self.tl.t:
            return
        gui = self.app.server.gui
        rec = (self.plan.records or {}).get(robot)
        if rec is not None:
            t = rec["t_plan"]
            step = max(1, len(t) // MAX_PLOT_POINTS)
            t = t[::step]
            qp = rec["q_plan"][::step]
            qe = rec["q_exec"][nearest_sample(rec["t_exec"], t)]  # the alignment δ uses
        else:
            t = np.linspace(0.0, max(self.end, 1e-3), MAX_PLOT_POINTS // 2)
            qp = np.array([self.tl.at(robot, float(x)) for x in t])
            qe = None
        n = qp.shape[1]
        palette = ["#e53935", "#1e88e5", "#43a047", "#fb8c00", "#8e24aa", "#00897b",
                   "#6d4c41"]
        data = [t.astype(np.float64)]
        series: list[dict[str, Any]] = [{"label": "t (s)"}]
        for j in range(n):
            data.append(qp[:, j])
            series.append({"label": f"q{j + 1} plan", "stroke": palette[j % 7], "width": 1.5})
            if qe is not None:
                data.append(qe[:, j])
                series.append({"label": f"q{j + 1} exec", "stroke": palette[j % 7],
                               "width": 1, "dash": [4, 3]})
        with self.app.server.atomic():
            self.plot_joints = gui.add_uplot(
                tuple(data), tuple(series), title=f"{robot}: planned vs executed joints (rad)"
                if qe is not None else f"{robot}: planned joints (rad)", aspect=1.4,
                scales={"x": {"time": False}})
            if qe is not None:
                d = np.linalg.norm(qe - qp, axis=1)
                eps = float((self.plan.execution or {}).get("epsilon") or 0.0)
                self.plot_delta = gui.add_uplot(
                    (t, d, np.full_like(t, eps)),
                    ({"label": "t (s)"}, {"label": "δ (rad)", "stroke": "#1e88e5", "width": 1.5},
                     {"label": "ε", "stroke": "#e53935", "width": 1, "dash": [6, 4]}),
                    title=f"{robot}: δ(t) = |q_exec − q_plan| against ε", aspect=2.0,
                    scales={"x": {"time": False}})

    def show(self, t: float) -> None:
        """Put the robots and the carried parts where the plan has them at time t."""
        t = float(min(max(t, 0.0), self.end))
        app = self.app
        for robot, shapes in app.robot_shapes.items():
            if robot not in self.tl.t:
                continue
            v, _f = shapes.mesh(self.tl.at(robot, t))
            app.robot_handles[robot].vertices = v
        placed_after = set()
        extra = {}
        for pid, info in self.parts.items():
            rel = info["release"]
            if rel is None or t < rel:
                placed_after.add(pid)
            if t < info["start"] or (rel is not None and t >= rel):
                continue
            g = info["grasp"]
            if g is None or t < g:
                extra[pid] = info["pick"]
            elif pid in self._grasp_tcp:
                p0, r0 = self._grasp_tcp[pid]
                pos, quat = self.twin.tool_pose(info["robot"], self.tl.at(info["robot"], t))
                r = quat_matrix(quat)
                extra[pid] = np.array(pos) + r @ r0.T @ (info["pick"] - p0)
        app.parts.ghost = placed_after
        app.parts.extra = extra
        now = [f"{a}: {k}" for a, k in self._active(t)]
        self.md_now.content = f"t = {t:.2f} s" + (" · " + " · ".join(now) if now else "")

    def _active(self, t: float) -> list[tuple[str, str]]:
        out = []
        for pid, info in self.parts.items():
            g, rel = info["grasp"], info["release"]
            robot = info["robot"] or "?"
            if info["start"] <= t and (g is None or t < g):
                out.append((robot, f"to pick {pid}"))
            elif g is not None and g <= t and (rel is None or t < rel):
                out.append((robot, f"carries {pid}"))
        return out

    def toggle(self) -> None:
        """Play from the slider's time (from 0 at the end) or pause."""
        if self.playing:
            self.playing = False
            self.b_play.label = "Play"
            return
        self.playing = True
        self.b_play.label = "Pause"
        if self.slider.value >= self.end - 1e-9:
            self.slider.value = 0.0

        def run() -> None:
            t_start = time.perf_counter() - float(self.slider.value)
            while self.playing and self.app.server is not None:
                t = time.perf_counter() - t_start
                if t >= self.end:
                    self.slider.value = self.end
                    break
                self.slider.value = round(t, 2)
                time.sleep(1.0 / PLAY_FPS)
            self.playing = False
            if self.app.server is not None:
                self.b_play.label = "Play"

        self._thread = threading.Thread(target=run, name="cellspec-replay", daemon=True)
        self._thread.start()
