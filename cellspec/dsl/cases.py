"""The test statements of a rule file, checked and built into :class:`TestCase`: a
layout (inline parts or a file), an optional order, the expected verdict and violations,
`robust` tolerances, or a RoCo-style plan file with the first check expected to fail.

Tests are data (OPA's `test_` rules): the runner (cellspec/testing/runner.py) decides them.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from cellspec.core import ir
from cellspec.dsl.load import display_path
from cellspec.dsl.model import Expectation, InlinePart, Rule, TestCase
from cellspec.dsl.twin import PLAN_CHECKS

if TYPE_CHECKING:  # the builder calls build_test: a run-time import would be a cycle
    from cellspec.dsl.build import CellBuilder


def build_test(b: CellBuilder, st: Any, cell: dict[str, Any],
               rules: dict[str, Rule]) -> TestCase | None:
    """The test statement ``st`` of the main file, or None after reporting its errors to
    ``b`` (``cell``: the built cell items; ``rules``: every rule by name)."""
    before = b.error_count()
    parts: list[InlinePart] | None = None
    layout_path: str | None = None
    order = None
    expect = None
    expected: list[Expectation] = []
    only = False
    robust: Fraction | None = None
    robust_expected = True
    layouts = 0
    plan_path: str | None = None
    is_plan = any(type(i).__name__ == "PlanFile" for i in st.items)
    for item in st.items:
        kind = type(item).__name__
        if kind == "PlanFile":
            if plan_path is not None:
                b.err(item, f"test '{st.name}' has more than one plan")
            p = (b.cur.path.parent / item.path)
            if not p.exists():
                b.err(item, f"plan file not found: {display_path(p)}")
            plan_path = str(p)
            continue
        if kind in ("InlineLayout", "FileLayout"):
            layouts += 1
            if layouts > 1:
                b.err(item, f"test '{st.name}' has more than one layout")
                continue
            if kind == "FileLayout":
                p = (b.cur.path.parent / item.path)
                if not p.exists():
                    b.err(item, f"layout file not found: {display_path(p)}")
                layout_path = str(p)
            else:
                parts = []
                ids: set[str] = set()
                for ip in item.parts:
                    if ip.id in ids:
                        b.err(ip, f"duplicate part id '{ip.id}'")
                    ids.add(ip.id)
                    if ip.type not in cell["part_types"]:
                        known = ", ".join(sorted(cell["part_types"])) or "none"
                        b.err(ip, f"unknown part type '{ip.type}' (known: {known})")
                        continue
                    size = b.vec(ip.size) if ip.size else None
                    if size is not None and any(s <= 0 for s in size):
                        b.err(ip, "part size must be positive on every axis")
                    parts.append(InlinePart(id=ip.id, type=ip.type, pos=b.vec(ip.pos),
                                            size=size, gripper=ip.gripper or None))
        elif kind == "Order":
            if order is not None:
                b.err(item, "order is given twice")
            order = tuple(item.ids)
        elif kind == "Expect":
            if expect is not None:
                b.err(item, "expect is given twice")
            expect = item.verdict
            for e in item.items:
                if is_plan:  # a plan test names the first failed check (RoCo's order)
                    if e.rule not in PLAN_CHECKS:
                        b.err(e, f"unknown plan check '{e.rule}' (checks: "
                              f"{', '.join(PLAN_CHECKS)})")
                    expected.append(Expectation(rule=e.rule, parts=tuple(e.parts),
                                                source=b.src(e)))
                    continue
                rule = rules.get(e.rule)
                if rule is None:
                    b.err(e, f"expected violation of unknown rule '{e.rule}'")
                    continue
                nparts = len([v for v, d in ir.top_domains(rule.body).items() if d == "part"])
                if len(e.parts) != nparts:
                    b.err(e, f"rule '{e.rule}' names {nparts} part(s) per violation, "
                          f"here {len(e.parts)} are given")
                expected.append(Expectation(rule=e.rule, parts=tuple(e.parts),
                                            source=b.src(e)))
        elif kind == "Robust":
            if robust is not None:
                b.err(item, "robust is given twice")
            robust = b.n(item.tol)
            robust_expected = not item.negated
            if robust < 0 or robust > Fraction(1, 10):
                b.err(item, "robust tolerance must be between 0 and 0.1 m")
        elif kind == "Only":
            only = True
    if is_plan and (layouts or order is not None or robust is not None):
        b.err(st, f"test '{st.name}': a plan test takes no layout, order or robust")
    if layouts == 0 and not is_plan:
        b.err(st, f"test '{st.name}' has no layout")
    if expect is None:
        b.err(st, f"test '{st.name}' has no `expect pass` or `expect fail ...`")
    if parts is not None:
        ids = {p.id for p in parts}
        for e in expected:
            for pid in e.parts:
                if pid not in ids:
                    b.sink.add(e.source.file, e.source.line, e.source.col,
                               f"expected violation names part '{pid}', which is not in "
                               "the test's layout")
        if order is not None:
            for pid in order:
                if pid not in ids:
                    b.err(st, f"order names part '{pid}', which is not in the layout")
    if b.error_count() > before:
        return None
    return TestCase(name=st.name, parts=tuple(parts) if parts is not None else None,
                    layout_path=layout_path, order=order, expect=expect or "pass",
                    expected=tuple(expected), only=only, robust=robust,
                    robust_expected=robust_expected, plan_path=plan_path,
                    source=b.src(st))
