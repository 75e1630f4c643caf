"""The typed model of a loaded cell: geometry, robots, zones, rules and tests.

Lengths are exact :class:`~fractions.Fraction` metres (whatever the file's
units), so every backend lowers the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from cellspec.core.ir import Node, top_domains
from cellspec.core.severity import Severity
from cellspec.core.status import Status

Vec3 = tuple[Fraction, Fraction, Fraction]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)


class Source(_Frozen):
    """Where something is written: display path, 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Box(_Frozen):
    """An axis-aligned box [lo, hi] per axis, metres."""

    lo: Vec3
    hi: Vec3


def axis_box(ranges: Mapping[str, tuple[Fraction, Fraction]],
             default: tuple[Fraction, Fraction]) -> Box:
    """The box of per-axis ``(lo, hi)`` ranges keyed ``x``/``y``/``z``; an axis not given
    spans ``default`` (the callers' unbounded or placeholder range)."""
    x, y, z = (ranges.get(a, default) for a in "xyz")
    return Box(lo=(x[0], y[0], z[0]), hi=(x[1], y[1], z[1]))


class BoxZone(_Frozen):
    name: str
    kind: Literal["box"] = "box"
    box: Box
    source: Source


class HalfSpaceZone(_Frozen):
    """The region sum(coef[d] * axis_d) op rhs (op one of < <= > >=)."""

    name: str
    kind: Literal["half"] = "half"
    coef: Vec3
    op: str
    rhs: Fraction
    source: Source


Zone = BoxZone | HalfSpaceZone


class Surface(_Frozen):
    name: str
    z: Fraction
    source: Source


class PartType(_Frozen):
    """A part type: a box of ``size``, or a vertical cylinder of ``radius`` whose ``size`` is
    its bounding box (2R, 2R, H) (docs/shapes.md)."""

    name: str
    size: Vec3
    mass: Fraction | None = None
    source: Source
    shape: Literal["box", "cylinder"] = "box"
    radius: Fraction | None = None


class Gripper(_Frozen):
    """A gripper; ``opening`` and ``depth`` matter for the parallel gripper only."""

    kind: Literal["vacuum", "parallel"]
    opening: Fraction | None = None
    depth: Fraction | None = None


# the robot models the twin knows (cellspec/robots/models.py builds them): a cell naming
# another is a load error, for every verb
ROBOT_MODELS: tuple[str, ...] = ("panda", "kuka_iiwa", "abb_irb120", "abb_irb1600", "ur5e")


def unknown_model_message(name: str, model: str) -> str:
    """The load error of ``robot NAME model MODEL`` with an unknown MODEL: the closest known
    model (rapidfuzz) and the list."""
    from rapidfuzz import fuzz, process  # lazy: only on this error

    best = process.extractOne(model, ROBOT_MODELS, scorer=fuzz.ratio, score_cutoff=60)
    hint = f" (did you mean '{best[0]}'?)" if best else ""
    return (f"robot {name}: unknown robot model {model!r}{hint}; known models: "
            f"{', '.join(ROBOT_MODELS)}")


class Robot(_Frozen):
    name: str
    model: str
    base: Vec3
    yaw_deg: Fraction = Fraction(0)
    reach: Fraction | None = None
    gripper: Gripper
    source: Source
    urdf: str | None = None  # a robot from its own URDF: the file (absolute path) ...
    tcp_link: str | None = None  # ... the flange link the gripper is attached to ...
    tcp_offset: Vec3 | None = None  # ... at this offset in the link's frame (metres)


class Panel(_Frozen):
    """A named place on the table (RoCo's panels): centre and size, metres."""

    name: str
    pos: Vec3
    size: Vec3
    source: Source


class TwinObject(_Frozen):
    """A part lying on a panel at the start, with the panel it must end on."""

    name: str
    type: str
    panel: str
    goal: str
    source: Source


class TwinSpec(_Frozen):
    """What the digital twin needs beyond the geometry (grammar ``twin.tx``)."""

    supplies: tuple[BoxZone, ...] = ()  # feeders: a part is presented at a box's floor centre
    traj_epsilon: Fraction | None = None  # δ(Q_plan, Q_exec) bound, radians
    homes: dict[str, tuple[Fraction, ...]] = {}  # robot -> home joint angles, radians
    home_sources: dict[str, Source] = {}  # robot -> where its `home` line is (diagnostics)
    shared_zone: Box | None = None  # at most one arm inside at a time
    reach_boxes: dict[str, Box] = {}  # robot -> the box its tool may reach
    panels: dict[str, Panel] = {}
    objects: tuple[TwinObject, ...] = ()


class ForceThreshold(_Frozen):
    """`force NAME VALUE [for SECONDS]`: a force event threshold (newtons), world model."""

    name: str
    value: Fraction
    duration: Fraction | None = None
    source: Source


class WorldRule(_Frozen):
    """A `commit` condition (name = action kind) or a `diagnose` rule (name = cause).

    ``body`` is a plain term tree built by cellspec/dsl/world.py; cellspec/world/rules.py
    compiles it to clingo."""

    kind: Literal["commit", "diagnose"]
    name: str
    message: str
    params: tuple[str, ...] = ()
    recovery: str | None = None
    priority: int = 0
    body: Any = None
    source: Source


class WorldSpec(_Frozen):
    """Force thresholds, commit conditions and diagnosis rules (grammar ``world.tx``)."""

    forces: dict[str, ForceThreshold] = {}
    commits: tuple[WorldRule, ...] = ()
    diagnoses: tuple[WorldRule, ...] = ()


class Rule(_Frozen):
    """A named rule: its body is the IR, violated where the body is false."""

    name: str
    message: str
    severity: Severity
    body: Node
    source: Source
    # a preference's weight (a positive whole number, default 1); each binding of the outer
    # variables that violates the body costs ``weight``. Errors and warnings keep 1.
    weight: int = 1

    @property
    def top_vars(self) -> tuple[str, ...]:
        """The variables of the outermost forall (they name a violation's parts)."""
        return tuple(top_domains(self.body))

    @property
    def part_vars(self) -> tuple[str, ...]:
        """The outer forall variables that range over parts (a violation's parts)."""
        return tuple(v for v, d in top_domains(self.body).items() if d == "part")


class InlinePart(_Frozen):
    id: str
    type: str
    pos: Vec3
    size: Vec3 | None = None
    gripper: Literal["vacuum", "parallel"] | None = None
    yaw: Fraction | None = None  # degrees about z (docs/shapes.md)


class Expectation(_Frozen):
    rule: str
    parts: tuple[str, ...]
    source: Source


class PreferenceExpectation(_Frozen):
    """``expect preferences OP N``: the weight of preferences met compared with N."""

    op: Literal[">=", "<=", "=="]
    n: int
    source: Source

    def holds(self, met: int) -> bool:
        """Does a score of ``met`` satisfy the expectation?"""
        return {">=": met >= self.n, "<=": met <= self.n, "==": met == self.n}[self.op]

    def __str__(self) -> str:
        return f"preferences {self.op} {self.n}"


class TestCase(_Frozen):
    """A regression test written in a rule file."""

    __test__ = False  # not a pytest class

    name: str
    parts: tuple[InlinePart, ...] | None = None
    layout_path: str | None = None
    order: tuple[str, ...] | None = None
    expect: Literal[Status.PASS, Status.FAIL]
    expected: tuple[Expectation, ...] = ()
    only: bool = False
    robust: Fraction | None = None  # `robust T` / `not robust T`: the tolerance, metres
    robust_expected: bool = True  # False for `not robust T`
    plan_path: str | None = None  # `plan "file.txt"`: a RoCo plan checked in the twin
    # `expect preferences OP N`: the preference score the layout must reach (each holds)
    preferences: tuple[PreferenceExpectation, ...] = ()
    source: Source


class Cell(_Frozen):
    """A loaded cell with every rule it imports and the tests of its own file."""

    name: str
    path: str
    workspace: Box
    surfaces: tuple[Surface, ...]
    part_types: dict[str, PartType]
    robots: tuple[Robot, ...]
    default_gripper: Gripper
    keepouts: tuple[Zone, ...]
    epsilon: Fraction
    rules: tuple[Rule, ...]
    tests: tuple[TestCase, ...]
    source: Source
    friction: Fraction | None = None  # `friction MU`: Coulomb coefficient (stability rule)
    stability_margin: Fraction | None = None  # `stability margin M` (m); None: the default
    stability: bool = True  # False: `stability off` (the standard stability rules dropped)
    twin: TwinSpec = TwinSpec()  # supply areas, trajectory epsilon, homes, shared zone, ...
    world: WorldSpec = WorldSpec()  # force thresholds, commit and diagnose rules

    def gripper_params(self, kind: str) -> Gripper:
        """The parameters used for a part placed with a gripper of this kind."""
        if self.default_gripper.kind == kind and self.default_gripper.opening is not None:
            return self.default_gripper
        for robot in self.robots:
            if robot.gripper.kind == kind:
                return robot.gripper
        return Gripper(kind=kind)  # type: ignore[arg-type]

    def rule(self, name: str) -> Rule | None:
        for r in self.rules:
            if r.name == name:
                return r
        return None
