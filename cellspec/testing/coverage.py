"""Rule coverage of the rule-file tests (``cellspec test --coverage``, after ``opa test
--coverage``): which rules held in a passing test, which fired under a passing
``expect fail`` expectation, and which disjuncts of each rule's negated body ever fired.
Preferences count like other rules; one also fires as expected in a passing test whose
``expect preferences`` asserts some weight unmet (:func:`expected_preferences`).

The clingo compiler emits one ``violation(I, Args) :- Body.`` rule per disjunct of the
negated body. Coverage gives each disjunct its own rule id (the other lines of the rule,
its auxiliary predicates, stay as they are) and runs the unchanged backend, so what is
measured is exactly what ``check`` grounds and solves.
"""

from __future__ import annotations

import copy
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.geometry import U
from cellspec.core.severity import Severity
from cellspec.core.status import BackendStatus, TestStatus
from cellspec.dsl.model import Cell, Rule, TestCase
from cellspec.dsl.parser import display_path, load_cell, parse_text, read_rule_file
from cellspec.solver.asp.backend import run
from cellspec.solver.asp.compile import compile_rules
from cellspec.solver.checkers import order_rules
from cellspec.solver.instance import build_instance
from cellspec.solver.result import Verdict
from cellspec.solver.verify import check
from cellspec.testing.runner import collect, evaluate, layout_of_test, selected

_HEAD = re.compile(r"^violation\((\d+),\(")


@dataclass(frozen=True)
class Disjunct:
    """One disjunct of a rule's negated body: its number (from 1) and its ASP body."""

    number: int
    body: str


@dataclass
class RuleCoverage:
    """What the tests did with one rule (identified by where it is written)."""

    name: str
    source: str
    disjuncts: tuple[Disjunct, ...]
    checked: int = 0  # tests that evaluated the rule
    held: list[str] = field(default_factory=list)  # passing tests where it did not fire
    fired: list[str] = field(default_factory=list)  # passing tests expecting it to fire
    failing: list[str] = field(default_factory=list)  # failing tests that expect it
    disjunct_hits: dict[int, int] = field(default_factory=dict)  # number -> tests fired

    @property
    def items(self) -> int:
        return 2 + len(self.disjuncts)

    @property
    def covered(self) -> int:
        return (bool(self.held) + bool(self.fired)
                + sum(1 for d in self.disjuncts if self.disjunct_hits.get(d.number)))

    def to_json(self) -> dict:
        return {"rule": self.name, "source": self.source, "checked": self.checked,
                "held_in": sorted(self.held), "fired_in": sorted(self.fired),
                "failing_expectations": sorted(self.failing),
                "disjuncts": [{"number": d.number, "body": d.body,
                               "fired_in_tests": self.disjunct_hits.get(d.number, 0)}
                              for d in self.disjuncts],
                "covered": self.covered, "items": self.items,
                "percent": round(100.0 * self.covered / self.items, 1)}


@dataclass
class CoverageReport:
    rules: dict[str, RuleCoverage] = field(default_factory=dict)  # keyed by source

    @property
    def covered(self) -> int:
        return sum(r.covered for r in self.rules.values())

    @property
    def items(self) -> int:
        return sum(r.items for r in self.rules.values())

    @property
    def percent(self) -> float:
        return 100.0 * self.covered / self.items if self.items else 100.0

    def to_json(self) -> dict:
        rules = sorted(self.rules.values(), key=_by_source)
        return {"rules": [r.to_json() for r in rules], "covered": self.covered,
                "items": self.items, "percent": round(self.percent, 1)}


def _by_source(r: RuleCoverage) -> tuple:
    """Sort key: file, then line and column as numbers."""
    file, line, col = (r.source.rsplit(":", 2) + ["", ""])[:3]
    return (file, int(line) if line.isdigit() else 0, int(col) if col.isdigit() else 0)


def _readable(body: str) -> str:
    """An ASP body without its plumbing (box/part atoms, variable prefixes)."""
    lits = [s.strip() for s in re.split(r",\s*(?![^()]*\))", body)]
    keep = [s for s in lits if not re.match(r"^(box|part)\(", s)]
    text = ", ".join(keep) or body
    text = re.sub(r"\b[PK]_([A-Za-z_][A-Za-z0-9_]*?)(?=\b)", r"\1", text)
    return text[:160]


def split_disjuncts(prog):
    """A copy of a compiled program with one rule id per disjunct, and for each new id the
    original rule index and the disjunct. Raises RuntimeError if the compiler's output
    no longer has the one-line-per-disjunct shape this relies on."""
    rules = []
    mapping: list[tuple[int, Disjunct]] = []
    for r in prog.rules:
        lines = r.text.split("\n")
        heads = [k for k, ln in enumerate(lines) if _HEAD.match(ln)]
        if not heads or any(int(m.group(1)) != r.index for k in heads
                            if (m := _HEAD.match(lines[k])) is not None):
            raise RuntimeError(f"coverage: the ASP compiler's output for rule '{r.name}' has "
                               "no `violation(I, ...) :- ...` line per disjunct")
        others = [ln for k, ln in enumerate(lines) if k not in set(heads)]
        for number, k in enumerate(heads, 1):
            new_id = len(mapping)
            line = _HEAD.sub(f"violation({new_id},(", lines[k], count=1)
            body = line.split(":-", 1)[1].rstrip(". ") if ":-" in line else ""
            for name, sel in prog.selections.items():  # decided in numpy: show what it is
                def _shown(_m: re.Match[str], s: str = sel.readable) -> str:
                    return s

                body = re.sub(rf"\b{name}\([^()]*\)", _shown, body)
            text = "\n".join((others if number == 1 else []) + [line])
            rules.append(replace(r, index=new_id, text=text))
            mapping.append((r.index, Disjunct(number, _readable(body))))
    out = copy.copy(prog)
    out.rules = rules
    return out, mapping


def disjunct_hits(cell: Cell, layout, timeout: float | None = None
                  ) -> tuple[list[Rule], dict[int, set[int]], str | None]:
    """The rules ``check`` evaluates on this layout, and for each (by position) the numbers
    of the disjuncts that fired; the reason when the solver hit a limit."""
    inst = build_instance(cell, layout)
    rules, _ = order_rules(cell.rules, layout.order is not None)  # as check()
    prog = compile_rules(tuple(rules), inst.eps, inst.opening, cell.default_gripper.kind)
    split, mapping = split_disjuncts(prog)
    res = run(inst, split, list(range(len(mapping))), timeout=timeout)
    hits: dict[int, set[int]] = {k: set() for k in range(len(rules))}
    if res.status != BackendStatus.DONE:
        return rules, hits, res.reason
    for d, _ in res.violations:
        k, dis = mapping[d]
        hits[k].add(dis.number)
    return rules, hits, None


def _disjuncts_of(cell: Cell, rules: list[Rule]) -> dict[str, tuple[Disjunct, ...]]:
    eps = int(cell.epsilon / U)
    op = cell.default_gripper.opening
    prog = compile_rules(tuple(rules), eps, int(op / U) if op is not None else None,
                         cell.default_gripper.kind)
    _, mapping = split_disjuncts(prog)
    out: dict[str, list[Disjunct]] = {}
    for k, dis in mapping:
        out.setdefault(str(rules[k].source), []).append(dis)
    return {s: tuple(d) for s, d in out.items()}


def cover_file(path: str, pattern: str | None = None, timeout: float | None = None
               ) -> tuple[list[dict], list[Diagnostic]]:
    """Run one file's tests for coverage: per rule evaluation, one record per test."""
    p = Path(path)
    shown = display_path(p)
    try:
        text = read_rule_file(p)
        model = parse_text(text, shown)
        if not {type(s).__name__ for s in model.statements} & {"Test", "Cell"}:
            return [], []
        cell = load_cell(p, parsed=(text, model))
    except CellspecError as exc:
        return [], exc.diagnostics
    records: list[dict] = []
    errors: list[Diagnostic] = []
    shapes = _disjuncts_of(cell, list(cell.rules)) if cell.rules else {}
    for r in cell.rules:
        records.append({"kind": "rule", "name": r.name, "source": str(r.source),
                        "disjuncts": [(d.number, d.body) for d in shapes.get(str(r.source),
                                                                             ())]})
    for test in cell.tests:
        tid = f"{shown}::{test.name}"
        if (pattern and not selected(tid, pattern)) or test.plan_path is not None:
            continue
        try:
            layout = layout_of_test(test)
            verdict = check(cell, layout, timeout=timeout)
            status, _ = evaluate(cell, test, verdict)
            rules, hits, reason = disjunct_hits(cell, layout, timeout)
        except CellspecError as exc:
            errors.extend(exc.diagnostics)
            continue
        expected = {e.rule for e in test.expected} | expected_preferences(test, verdict, rules)
        for k, r in enumerate(rules):
            records.append({"kind": "test", "test": tid, "status": status,
                            "source": str(r.source), "name": r.name,
                            "fired": sorted(hits[k]), "expected": r.name in expected,
                            "unknown": reason})
    return records, errors


def expected_preferences(test: TestCase, verdict: Verdict, rules: list[Rule]) -> set[str]:
    """The preferences a test expects to fire: every preference rule, when an ``expect
    preferences`` of the test would fail with every preference met (it asserts some weight
    unmet); none otherwise. A preference named in ``expect fail`` counts like any rule."""
    sc = verdict.preference_score
    if sc is None or sc.met is None or not any(not e.holds(sc.total)
                                               for e in test.preferences):
        return set()
    return {r.name for r in rules if r.severity == Severity.PREFERENCE}


def _cover_args(args: tuple[str, str | None, float | None]):
    return cover_file(*args)


def run_coverage(paths: list[str], pattern: str | None = None, workers: int = 1,
                 timeout: float | None = None) -> tuple[CoverageReport, list[Diagnostic]]:
    """Coverage of every rule the tests under ``paths`` load (deterministic order)."""
    jobs = [(str(f), pattern, timeout) for f in collect(paths)]
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs), os.cpu_count() or 1)) as ex:
            outs = list(ex.map(_cover_args, jobs))
    else:
        outs = [_cover_args(j) for j in jobs]
    report = CoverageReport()
    errors: list[Diagnostic] = []
    for records, errs in outs:
        errors.extend(errs)
        for rec in records:
            if rec["kind"] == "rule":
                if rec["source"] not in report.rules:
                    report.rules[rec["source"]] = RuleCoverage(
                        rec["name"], rec["source"],
                        tuple(Disjunct(n, b) for n, b in rec["disjuncts"]))
                continue
            rc = report.rules[rec["source"]]
            if rec["unknown"]:
                continue
            rc.checked += 1
            for n in rec["fired"]:
                rc.disjunct_hits[n] = rc.disjunct_hits.get(n, 0) + 1
            passed = rec["status"] == TestStatus.PASSED
            if passed and not rec["fired"]:
                rc.held.append(rec["test"])
            elif passed and rec["expected"]:
                rc.fired.append(rec["test"])
            elif not passed and rec["expected"]:
                rc.failing.append(rec["test"])
    return report, errors


def pretty(report: CoverageReport) -> str:
    """A table: per rule held / fired / disjuncts fired, then the total."""
    rows = [("rule", "source", "held", "fired", "disjuncts", "cover")]
    notes: list[str] = []
    for r in sorted(report.rules.values(), key=_by_source):
        nd = len(r.disjuncts)
        hit = sum(1 for d in r.disjuncts if r.disjunct_hits.get(d.number))
        rows.append((r.name, r.source, str(len(r.held)), str(len(r.fired)), f"{hit}/{nd}",
                     f"{100.0 * r.covered / r.items:.0f}%"))
        if not r.held:
            notes.append(f"{r.source}: {r.name}: no passing test where it holds")
        if not r.fired:
            why = f" ({len(r.failing)} failing expectation(s))" if r.failing else ""
            notes.append(f"{r.source}: {r.name}: no passing test expects it to fire{why}")
        for d in r.disjuncts:
            if not r.disjunct_hits.get(d.number) and nd > 1:
                notes.append(f"{r.source}: {r.name}: disjunct {d.number}/{nd} never fired: "
                             f"{d.body}")
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) if k < 2 else c.rjust(w)
                     for k, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
           for row in rows]
    out += [""] + notes if notes else []
    out.append(f"coverage: {report.covered}/{report.items} items, {report.percent:.1f}% "
               f"({len(report.rules)} rules)")
    return "\n".join(out) + "\n"
