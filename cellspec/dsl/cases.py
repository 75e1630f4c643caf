"""The test statements of a rule file, checked and built into :class:`TestCase`: a
layout (inline parts or a file), an optional order, the expected verdict and violations,
`robust` tolerances, or a RoCo-style plan file with the first check expected to fail.

Tests are data (OPA's `test_` rules): the runner (cellspec/testing/runner.py) decides them.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from cellspec.core import ir
from cellspec.core.names import did_you_mean, unknown
from cellspec.core.severity import Severity
from cellspec.core.status import Status
from cellspec.dsl.load import display_path
from cellspec.dsl.model import (
    Expectation,
    InlinePart,
    PreferenceExpectation,
    Rule,
    TestCase,
)
from cellspec.dsl.twin import PLAN_CHECKS

if TYPE_CHECKING:  # the builder calls build_test: a run-time import would be a cycle
    from cellspec.dsl.build import CellBuilder


def build_test(b: CellBuilder, st: Any, cell: dict[str, Any],
               rules: dict[str, Rule]) -> TestCase | None:
    """The test statement ``st`` of the main file, or None after reporting its errors to
    ``b`` (``cell``: the built cell items; ``rules``: every rule by name)."""
    before = b.error_count()
    t = _TestItems(b, st, cell, rules)
    for item in st.items:
        t.add(item)
    t.check()
    if b.error_count() > before:
        return None
    return TestCase(name=st.name, parts=tuple(t.parts) if t.parts is not None else None,
                    layout_path=t.layout_path, order=t.order, expect=t.expect or Status.PASS,
                    expected=tuple(t.expected), only=t.only, robust=t.robust,
                    robust_expected=t.robust_expected, plan_path=t.plan_path,
                    preferences=tuple(t.preferences), source=b.src(st))


class _TestItems:
    """The items of one test statement as they are read (one method per item kind)."""

    def __init__(self, b: CellBuilder, st: Any, cell: dict[str, Any],
                 rules: dict[str, Rule]) -> None:
        self.b, self.st, self.cell, self.rules = b, st, cell, rules
        self.parts: list[InlinePart] | None = None
        self.layout_path: str | None = None
        self.order: tuple[str, ...] | None = None
        self.order_node: Any = None  # the order item (where its errors are reported)
        self.expect: Literal[Status.PASS, Status.FAIL] | None = None
        self.expected: list[Expectation] = []
        self.only = False
        self.robust: Fraction | None = None
        self.robust_expected = True
        self.layouts = 0
        self.plan_path: str | None = None
        self.preferences: list[PreferenceExpectation] = []
        self.is_plan = any(type(i).__name__ == "PlanFile" for i in st.items)
        self._handlers: dict[str, Callable[[Any], None]] = {
            "PlanFile": self.plan_file, "InlineLayout": self.layout, "FileLayout": self.layout,
            "Order": self.order_item, "Expect": self.expect_item, "Robust": self.robust_item,
            "Only": self.only_item, "ExpectPreferences": self.preferences_item}

    def add(self, item: Any) -> None:
        """Read one item of the test."""
        handler = self._handlers.get(type(item).__name__)
        if handler is not None:
            handler(item)

    def _file(self, item: Any, what: str) -> str:
        """The path of a file the item names, relative to the test's file (reported when
        missing)."""
        cur = self.b.cur
        assert cur is not None  # a test is read inside its file (CellBuilder.in_file)
        p = (cur.path.parent / item.path)
        if not p.exists():
            self.b.err(item, f"{what} file not found: {display_path(p)}")
        return str(p)

    def plan_file(self, item: Any) -> None:
        """``plan "FILE"``: a RoCo-style plan test."""
        if self.plan_path is not None:
            self.b.err(item, f"test '{self.st.name}' has more than one plan")
        self.plan_path = self._file(item, "plan")

    def layout(self, item: Any) -> None:
        """``layout "FILE"`` or ``layout { part ... }``."""
        b = self.b
        self.layouts += 1
        if self.layouts > 1:
            b.err(item, f"test '{self.st.name}' has more than one layout")
            return
        if type(item).__name__ == "FileLayout":
            self.layout_path = self._file(item, "layout")
            return
        self.parts = []
        ids: set[str] = set()
        for ip in item.parts:
            if ip.id in ids:
                b.err(ip, f"duplicate part id '{ip.id}'")
            ids.add(ip.id)
            if ip.type not in self.cell["part_types"]:
                b.err(ip, unknown("part type", ip.type, sorted(self.cell["part_types"])))
                continue
            size = b.vec(ip.size) if ip.size else None
            if size is not None and any(s <= 0 for s in size):
                b.err(ip, "part size must be positive on every axis")
            yaw = b.num(ip.yaw, ip) if ip.yaw else None
            if yaw is not None and abs(yaw) > 3600:
                b.err(ip, f"yaw {ip.yaw} degrees is absurd (|yaw| must be at most 3600)")
            self.parts.append(InlinePart(id=ip.id, type=ip.type, pos=b.vec(ip.pos),
                                         size=size, gripper=ip.gripper or None, yaw=yaw))

    def order_item(self, item: Any) -> None:
        """``order a, b, ...``."""
        if self.order is not None:
            self.b.err(item, "order is given twice")
        self.order = tuple(item.ids)
        self.order_node = item  # errors about the order are reported at its line

    def expect_item(self, item: Any) -> None:
        """``expect pass`` or ``expect fail RULE(parts) ...``."""
        b = self.b
        if self.expect is not None:
            b.err(item, "expect is given twice")
        self.expect = Status.PASS if item.verdict == "pass" else Status.FAIL  # test.tx: pass | fail
        for e in item.items:
            if self.is_plan:  # a plan test names the first failed check (RoCo's order)
                if e.rule not in PLAN_CHECKS:
                    b.err(e, unknown("plan check", e.rule, PLAN_CHECKS, "checks"))
                self.expected.append(Expectation(rule=e.rule, parts=tuple(e.parts),
                                                 source=b.src(e)))
                continue
            rule = self.rules.get(e.rule)
            if rule is None:
                b.err(e, "expected violation of "
                      + unknown("rule", e.rule, sorted(self.rules), "rules"))
                continue
            nparts = len([v for v, d in ir.top_domains(rule.body).items() if d == "part"])
            if len(e.parts) != nparts:
                b.err(e, f"rule '{e.rule}' names {nparts} part(s) per violation, "
                      f"here {len(e.parts)} are given")
            self.expected.append(Expectation(rule=e.rule, parts=tuple(e.parts),
                                             source=b.src(e)))

    def preferences_item(self, item: Any) -> None:
        """``expect preferences OP N``: the preference score the layout must reach."""
        if not any(r.severity == Severity.PREFERENCE for r in self.rules.values()):
            self.b.err(item, f"test '{self.st.name}' expects a preference score, but the "
                       "cell has no `severity preference` rule")
            return
        self.preferences.append(PreferenceExpectation(op=item.op, n=int(item.n),
                                                      source=self.b.src(item)))

    def robust_item(self, item: Any) -> None:
        """``robust TOL`` or ``not robust TOL``."""
        if self.robust is not None:
            self.b.err(item, "robust is given twice")
        self.robust = self.b.n(item.tol, item)
        self.robust_expected = not item.negated
        if self.robust < 0 or self.robust > Fraction(1, 10):
            self.b.err(item, "robust tolerance must be between 0 and 0.1 m")

    def only_item(self, item: Any) -> None:
        """``only``: run this test alone."""
        self.only = True

    def check(self) -> None:
        """The checks that need every item of the test."""
        b, st = self.b, self.st
        if self.is_plan and (self.layouts or self.order is not None or self.robust is not None):
            b.err(st, f"test '{st.name}': a plan test takes no layout, order or robust")
        if self.is_plan and self.preferences:
            b.err(st, f"test '{st.name}': a plan test has no preference score to expect")
        if self.layouts == 0 and not self.is_plan:
            b.err(st, f"test '{st.name}' has no layout")
        if self.expect is None:
            b.err(st, f"test '{st.name}' has no `expect pass` or `expect fail ...`")
        if self.parts is None:
            return
        ids = {p.id for p in self.parts}
        for e in self.expected:
            for pid in e.parts:
                if pid not in ids:
                    b.sink.add(e.source.file, e.source.line, e.source.col,
                               f"expected violation names part '{pid}', which is not in "
                               "the test's layout")
        if self.order is not None:
            for pid in self.order:
                if pid not in ids:
                    b.err(self.order_node, f"order names part '{pid}', which is not in the "
                          f"layout{did_you_mean(pid, sorted(ids))}")
