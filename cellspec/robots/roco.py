"""RoCo plan files: reading them, cellspec's strict parser, and the rule-file plan tests.

RoCo's own format and checks live in ``roco_parse`` (its parser, transcribed) and
``roco_check`` (its checks, order and wording). This module adds what cellspec puts on top:

* ``load_plan_text``: read a plan file (size cap, UTF-8), errors at file:line:col, exit 2;
* ``parse_plan``: the strict parser behind ``check-plan --strict``: one ``NAME ROBOT ACTION
  ...`` line per robot after an optional ``EXECUTE`` line, blank lines and ``#`` comments
  only, known robots, PICK/PLACE/WAIT with an optional well-formed ``PATH [(x, y, z), ...]``;
  every problem is a diagnostic with file:line:col (RoCo itself ignores what it cannot read);
* ``evaluate_plan_test``: ``plan "file" expect pass | fail CHECK(ROBOT, ...)`` in a rule
  file: the plan is checked as RoCo does (action-only mode unless the file has a line
  ``# cellspec: mode action_and_path``) and the first failure's check and robots compared.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.io import TooLarge, read_text_bounded
from cellspec.core.status import Status, TestStatus
from cellspec.core.stdio import STDIN_NAME, is_stdin, read_stdin_text
from cellspec.dsl.model import Cell, TestCase
from cellspec.dsl.parser import display_path
from cellspec.robots.roco_check import RocoChecker
from cellspec.robots.roco_parse import MODES
from cellspec.robots.roco_task import STEP_STD_THRESHOLD

MAX_PLAN_BYTES = 1 << 20
MAX_PATH_POINTS = 200  # per robot: each point is an IK and collision check

_LINE = re.compile(r"NAME\s+(?P<robot>\S+)\s+ACTION\b\s*(?P<action>.*)$")
_ACTION = re.compile(
    r"^(?:(?P<wait>WAIT)|(?:PICK\s+(?P<obj>\S+))?\s*(?:PLACE\s+(?P<target>\S+))?)\s*"
    r"(?:PATH\s*(?P<path>\[.*\]))?\s*$")
_POINT = re.compile(r"\(\s*([^,()]+)\s*,\s*([^,()]+)\s*,\s*([^,()]+)\s*\)")
_P = r"\(\s*[^,()]+\s*,\s*[^,()]+\s*,\s*[^,()]+\s*\)"
_POINTS = re.compile(rf"(?:{_P}(?:\s*,\s*{_P})*)?\s*,?")  # one comma between points
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)",
                     re.ASCII | re.IGNORECASE)  # plain decimals (not 1_0 or other digits)


@dataclass(frozen=True)
class RocoAction:
    """One robot's sub-task: ``WAIT``, or PICK an object and PLACE it on a panel."""

    robot: str
    wait: bool
    obj: str | None
    target: str | None
    path: tuple[tuple[float, float, float], ...]
    line: int
    text: str

    def to_text(self) -> str:
        """The action in RoCo's syntax."""
        if self.wait:
            body = "WAIT"
        else:
            body = " ".join(x for x in (f"PICK {self.obj}" if self.obj else "",
                                        f"PLACE {self.target}" if self.target else "") if x)
        if self.path:
            body += " PATH [" + ", ".join(f"({x:g}, {y:g}, {z:g})" for x, y, z in self.path) + "]"
        return f"NAME {self.robot} ACTION {body}"


@dataclass(frozen=True)
class RocoPlan:
    """A parsed plan: one action per robot, in the cell's robot order."""

    path: str
    actions: tuple[RocoAction, ...]

    def action(self, robot: str) -> RocoAction:
        """The action of one robot."""
        return next(a for a in self.actions if a.robot == robot)


# -- parsing -----------------------------------------------------------------------------
def parse_plan(text: str, path: str, cell: Cell) -> RocoPlan:
    """Parse RoCo's plan text; every problem is a diagnostic with file:line:col."""
    robots = [r.name for r in cell.robots]
    diags: list[Diagnostic] = []
    lines = text.splitlines()
    start = 0
    for k, raw in enumerate(lines):
        if raw.strip() == "EXECUTE":
            start = k + 1
            break
    seen: dict[str, RocoAction] = {}
    for k in range(start, len(lines)):
        raw = lines[k]
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        col = len(raw) - len(raw.lstrip()) + 1
        m = _LINE.match(s)
        if m is None:
            diags.append(Diagnostic(path, k + 1, col, "expected `NAME ROBOT ACTION ...` "
                                    f"(got {s[:40]!r})"))
            continue
        robot = m.group("robot")
        acol = col + m.start("action")
        if robot not in robots:
            diags.append(Diagnostic(path, k + 1, col + m.start("robot"),
                                    f"unknown robot '{robot}' (robots: {', '.join(robots)})"))
            continue
        if robot in seen:
            diags.append(Diagnostic(path, k + 1, col, f"robot {robot} has a second action "
                                    f"(first on line {seen[robot].line}); give exactly one"))
            continue
        a = _ACTION.match(m.group("action").strip())
        body = m.group("action").strip()
        if not body:
            diags.append(Diagnostic(path, k + 1, col + m.end("robot") + 1, f"{robot}: missing "
                                    "action after ACTION (WAIT or PICK OBJECT PLACE PANEL)"))
            continue
        pm = re.search(r"\bPATH\b", body)
        if a is None and pm is not None:
            diags.append(Diagnostic(path, k + 1, acol + pm.start(), f"{robot}: PATH must be "
                                    "one bracketed list `[(x, y, z), ...]` at the end of the "
                                    "line (is a `]` or `)` missing?)"))
            continue
        if a is None or not body or (not a.group("wait") and not a.group("obj")
                                     and not a.group("target")):
            diags.append(Diagnostic(path, k + 1, acol, f"{robot}: unknown action {body[:40]!r} "
                                    "(expected WAIT or PICK OBJECT PLACE PANEL [PATH [...]])"))
            continue
        pts: list[tuple[float, float, float]] = []
        if a.group("path"):
            inner = a.group("path")[1:-1].strip()
            pcol = acol + a.start("path")
            if not _POINTS.fullmatch(inner):
                bad = _POINT.sub("", inner).replace(",", "").strip()
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH must be a list of "
                                        "(x, y, z) points separated by commas"
                                        + ("" if bad else " (one comma between two points)")))
                continue
            if not all(_NUMBER.fullmatch(v.strip()) for pt in _POINT.findall(inner)
                       for v in pt):
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH points must be "
                                        "numbers"))
                continue
            try:
                pts = [(float(x), float(y), float(z)) for x, y, z in _POINT.findall(inner)]
            except ValueError:
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH points must be "
                                        "numbers"))
                continue
            if not all(math.isfinite(v) and abs(v) < 100 for p in pts for v in p):
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH points must be "
                                        "finite numbers within 100 m of the origin (metres)"))
                continue
            if len(pts) > MAX_PATH_POINTS:
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH has {len(pts)} "
                                        f"points; at most {MAX_PATH_POINTS}"))
                continue
        seen[robot] = RocoAction(robot=robot, wait=bool(a.group("wait")), obj=a.group("obj"),
                                 target=a.group("target"), path=tuple(pts), line=k + 1, text=s)
    missing = [r for r in robots if r not in seen]
    if missing and not diags:
        where = len(lines) if lines else 1
        diags.append(Diagnostic(path, max(where, 1), 1, "missing action for robot(s) "
                                f"{', '.join(missing)}: every robot needs one `NAME ROBOT ACTION "
                                "...` line"))
    if diags:
        raise CellspecError(diags)
    return RocoPlan(path=path, actions=tuple(seen[r] for r in robots))


def load_plan(path: str | Path, cell: Cell) -> RocoPlan:
    """Read and strictly parse a plan file (``-``: standard input; exit-2 errors with
    file:line:col)."""
    shown = STDIN_NAME if is_stdin(path) else display_path(Path(path))
    return parse_plan(load_plan_text(path), shown, cell)


def load_plan_text(path: str | Path) -> str:
    """Read a plan file (``-``: standard input): at most ``MAX_PLAN_BYTES``, UTF-8 text
    without NUL (else exit 2)."""
    if is_stdin(path):
        return read_stdin_text(MAX_PLAN_BYTES, "the plan")
    p = Path(path)
    shown = display_path(p)

    try:
        text = read_text_bounded(p, MAX_PLAN_BYTES)
    except TooLarge:
        raise CellspecError(Diagnostic(shown, 0, 0, f"plan file too large (more than "
                                       f"{MAX_PLAN_BYTES} bytes)")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CellspecError(Diagnostic(shown, 0, 0, f"cannot read plan: {exc}")) from None
    if "\x00" in text:
        raise CellspecError(Diagnostic(shown, 0, 0, "cannot read plan: it is binary (NUL "
                                       "characters)"))
    return text


MODE_DIRECTIVE = re.compile(r"^#\s*cellspec:\s*mode\s+(\S+)\s*$", re.MULTILINE)
STD_DIRECTIVE = re.compile(r"^#\s*cellspec:\s*spacing-std\s+(\S+)\s*$", re.MULTILINE)


def plan_mode(text: str) -> str | None:
    """The ``# cellspec: mode MODE`` directive of a plan file, if any."""
    m = MODE_DIRECTIVE.search(text)
    return m.group(1) if m else None


def plan_spacing_std(text: str) -> float | None:
    """The ``# cellspec: spacing-std M`` directive (metres), if any; a bad value: exit 2."""
    m = STD_DIRECTIVE.search(text)
    if m is None:
        return None
    try:
        v = float(m.group(1))
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and 0 < v < 100):
        raise CellspecError(f"`# cellspec: spacing-std {m.group(1)[:20]}`: a positive length "
                            "below 100 m expected")
    return v


def evaluate_plan_test(cell: Cell, test: TestCase) -> tuple[TestStatus, dict]:
    """A rule-file test ``plan "file" expect pass | fail CHECK(ROBOT, ...)``: RoCo's checks,
    then cellspec's; the first failure's check and robots must match."""
    assert test.plan_path is not None  # the runner calls this for a plan test only
    try:
        text = load_plan_text(test.plan_path)
    except CellspecError as exc:
        return TestStatus.FAILED, {"expected": (test.expect,), "actual": ("error",),
                          "message": "; ".join(str(d) for d in exc.diagnostics)}
    mode = plan_mode(text) or "action_only"
    try:
        std = plan_spacing_std(text)
    except CellspecError as exc:
        return TestStatus.FAILED, {"expected": (test.expect,), "actual": ("error",),
                                   "message": str(exc)}
    if mode not in MODES:
        return TestStatus.FAILED, {"expected": (test.expect,), "actual": ("error",),
                          "message": f"{test.plan_path}: unknown mode {mode!r} (modes: "
                          f"{', '.join(MODES)})"}
    with RocoChecker(cell, mode=mode,
                     step_std=STEP_STD_THRESHOLD if std is None else std) as ch:
        r = ch.check(ch.initial_state(), text)
    first = r.failures[0] if r.failures else None
    actual = ("pass",) if first is None else (f"{first.check}({', '.join(first.robots)})",)
    expected = tuple(f"{e.rule}({', '.join(e.parts)})" for e in test.expected) or (test.expect,)
    det = {"expected": expected, "actual": actual}
    if test.expect == Status.PASS:
        return (TestStatus.PASSED, det) if r.ok else (
            TestStatus.FAILED, {**det, "message": f"expected pass; {r.ours()}"})
    if first is None:  # r.ok: a failing verdict names its failures
        return TestStatus.FAILED, {**det,
                                   "message": "expected the plan to fail, it passes every check"}
    for e in test.expected:
        if (e.rule, tuple(e.parts)) != (first.check, first.robots[:len(e.parts)]):
            return TestStatus.FAILED, {**det, "missing": (expected[0],),
                              "message": f"expected {expected[0]} to fail first; got "
                              f"{actual[0]}: {r.ours()}"}
    return TestStatus.PASSED, det
