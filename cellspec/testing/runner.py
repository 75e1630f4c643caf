"""The LLM-free regression runner: every ``test`` block in every .cell file.

Deterministic: files in sorted order, tests in file order, results in that order
whatever the number of worker processes, and no timings unless asked for.
"""

from __future__ import annotations

import fnmatch
import os
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cellspec.batch.cluster import dask_client
from cellspec.batch.stream import dask_map
from cellspec.core import ir
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.extras import require_extra
from cellspec.core.status import Status, TestStatus
from cellspec.dsl.model import Cell, TestCase
from cellspec.dsl.parser import display_path, load_cell, parse_text, read_rule_file
from cellspec.layout import Layout, load_layout
from cellspec.solver.formal.common import DEFAULT_TIMEOUT
from cellspec.solver.formal.robust import prove_robust
from cellspec.solver.result import Verdict, Violation
from cellspec.solver.verify import check


@dataclass(frozen=True)
class TestResult:
    """The outcome of one test block."""

    __test__ = False

    id: str
    file: str
    name: str
    source: str
    status: TestStatus
    expected: tuple[str, ...] = ()
    actual: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    message: str = ""
    seconds: float = 0.0

    def to_json(self, timings: bool = False) -> dict:
        d: dict[str, Any] = {"id": self.id, "file": self.file, "name": self.name,
                             "source": self.source, "status": self.status,
                             "expected": list(self.expected), "actual": list(self.actual),
                             "missing": list(self.missing),
                             "unexpected": list(self.unexpected), "message": self.message}
        if timings:
            d["seconds"] = round(self.seconds, 4)
        return d


@dataclass
class RunReport:
    results: list[TestResult] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.status == TestStatus.PASSED for r in self.results)

    @property
    def failed(self) -> int:
        return sum(r.status != TestStatus.PASSED for r in self.results)


def collect(paths: list[str]) -> list[Path]:
    """The .cell files named or found (recursively) under the given paths, sorted."""
    out: set[Path] = set()
    missing = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.update(f for f in path.rglob("*.cell") if f.is_file())
        elif path.is_file():
            out.add(path)
        else:
            missing.append(Diagnostic(p, 0, 0, "no such file or directory"))
    if missing:
        raise CellspecError(missing)
    return sorted(out, key=lambda f: str(f))


def _fmt(rule: str, parts: tuple[str, ...]) -> str:
    return f"{rule}({', '.join(parts)})"


def layout_of_test(test: TestCase) -> Layout:
    """The layout a rule-file test checks: its inline parts, or its JSON file with the
    test's order (which must list every part once) when it gives one."""
    if test.parts is not None:
        n = len(test.parts)
        pos = np.array([[float(v) for v in p.pos] for p in test.parts], dtype=np.float64)
        size = np.array([[float(v) for v in p.size] if p.size else [np.nan] * 3
                         for p in test.parts], dtype=np.float64)
        return Layout(ids=tuple(p.id for p in test.parts), types=tuple(p.type for p in test.parts),
                      pos=pos.reshape(n, 3), size=size.reshape(n, 3),
                      grippers=tuple(p.gripper for p in test.parts), order=test.order,
                      path=f"{test.source.file}::{test.name}",
                      yaw=np.array([float(p.yaw or 0) for p in test.parts], dtype=np.float64))
    assert test.layout_path is not None
    lay = load_layout(test.layout_path)
    if test.order is not None:
        unknown = [pid for pid in test.order if pid not in set(lay.ids)]
        if unknown or sorted(test.order) != sorted(lay.ids):
            raise CellspecError(Diagnostic(test.source.file, test.source.line, test.source.col,
                                           f"test '{test.name}': order must list every part of "
                                           f"{display_path(test.layout_path)} once"))
        lay = lay.with_order(test.order)
    return lay


def _matches(v: Violation, rule: str, parts: tuple[str, ...], unordered: bool) -> bool:
    if v.rule != rule:
        return False
    return sorted(v.parts) == sorted(parts) if unordered else v.parts == parts


def evaluate(cell: Cell, test: TestCase, verdict: Verdict) -> tuple[TestStatus, dict]:
    """Compare a verdict with the test's expectation: (status, details)."""
    found = list(verdict.violations) + list(verdict.warnings) + list(verdict.preferences)
    actual = tuple(_fmt(v.rule, v.parts) for v in found)
    expected = tuple(_fmt(e.rule, e.parts) for e in test.expected)
    details = {"expected": expected, "actual": actual}
    if verdict.verdict == Status.UNKNOWN:
        return TestStatus.FAILED, {**details, "actual": (f"unknown ({verdict.reason})",),
                          "message": f"verdict unknown: {verdict.reason}"}
    status, details = _evaluate_verdict(cell, test, verdict, found, details)
    if status == TestStatus.PASSED and test.preferences:
        return evaluate_preferences(test, verdict, details)
    return status, details


def evaluate_preferences(test: TestCase, verdict: Verdict, details: dict
                         ) -> tuple[TestStatus, dict]:
    """``expect preferences OP N``: the verdict's preference score against each
    expectation; an undecided score fails the test."""
    sc = verdict.preference_score
    want = tuple(str(e) for e in test.preferences)
    verdict_part = details["expected"] or ((test.expect,) if test.expect == Status.PASS else ())
    details = {**details, "expected": (*verdict_part, *want)}
    if sc is None or sc.met is None:
        why = f": {sc.reason}" if sc is not None else ""
        return TestStatus.FAILED, {**details, "message": "expected " + ", ".join(want)
                                   + f", but the preference score is not decided{why}"}
    details["actual"] = (*details["actual"], f"preferences {sc.met} of {sc.total}")
    bad = [e for e in test.preferences if not e.holds(sc.met)]
    if bad:
        return TestStatus.FAILED, {**details, "message": "expected " + ", ".join(map(str, bad))
                                   + f", got {sc.met} of {sc.total} weight met"}
    return TestStatus.PASSED, details


def _evaluate_verdict(cell: Cell, test: TestCase, verdict: Verdict, found: list[Violation],
                      details: dict) -> tuple[TestStatus, dict]:
    """The verdict and violations part of :func:`evaluate` (a decided verdict)."""
    if test.expect == Status.PASS:
        bad = list(verdict.violations) + (list(verdict.warnings) + list(verdict.preferences)
                                          if test.only else [])
        if bad:
            return TestStatus.FAILED, {**details,
                                       "unexpected": tuple(_fmt(v.rule, v.parts) for v in bad),
                                       "message": "expected pass"}
        return TestStatus.PASSED, details
    if not test.expected and verdict.verdict != Status.FAIL:
        return TestStatus.FAILED, {**details, "message": "expected fail, got pass"}
    used: set[int] = set()
    missing = []
    for e in test.expected:
        rule = cell.rule(e.rule)
        unordered = _unordered(rule)
        hit = next((k for k, v in enumerate(found) if k not in used and
                    _matches(v, e.rule, e.parts, unordered)), None)
        if hit is None:
            missing.append(_fmt(e.rule, e.parts))
        else:
            used.add(hit)
    unexpected = tuple(_fmt(v.rule, v.parts) for k, v in enumerate(found) if k not in used) \
        if test.only else ()
    if missing or unexpected:
        msg = []
        if missing:
            msg.append(f"{len(missing)} expected violation(s) missing")
        if unexpected:
            msg.append(f"{len(unexpected)} unexpected violation(s) (test says only)")
        return TestStatus.FAILED, {**details, "missing": tuple(missing), "unexpected": unexpected,
                          "message": "; ".join(msg)}
    return TestStatus.PASSED, details


def evaluate_robust(cell: Cell, test: TestCase, layout: Layout, details: dict,
                    timeout: float | None = None) -> tuple[TestStatus, dict]:
    """`robust T` / `not robust T`: prove (Z3) or refute that the verdict survives every
    x/y placement error up to T; ``unknown`` fails the test."""
    tol = float(test.robust)  # type: ignore[arg-type]
    r = prove_robust(cell, layout, tol, timeout=timeout or DEFAULT_TIMEOUT)
    want = "robust" if test.robust_expected else "not robust"
    if r.status == Status.UNKNOWN:
        return TestStatus.FAILED, {**details, "message": f"expected {want} to {tol:g} m, "
                                   f"robustness unknown: {r.reason}"}
    got = r.status == Status.PROVED
    if got == test.robust_expected:
        return TestStatus.PASSED, details
    if got:
        return TestStatus.FAILED, {**details, "message": f"expected not robust to {tol:g} m, but "
                                   "the verdict is proved to hold for every displacement"}
    where = f": {r.rule}({', '.join(r.parts)}) breaks" if r.rule else ": it passes"
    moved = ", ".join(f"{k} by ({d[0]:+.4f}, {d[1]:+.4f})" for k, d in r.displacement.items())
    return TestStatus.FAILED, {**details, "message": f"expected robust to {tol:g} m{where} when "
                      f"displaced: {moved}"}


def _unordered(rule) -> bool:
    chain, _ = ir.top_foralls(rule.body) if rule else ([], None)
    return any(q.unordered for q in chain)


def run_file(path: str, pattern: str | None = None, timeout: float | None = None,
             text: str | None = None, on_result: Callable[[TestResult], None] | None = None
             ) -> tuple[list[TestResult], list[Diagnostic]]:
    """Run the tests of one file; bad input comes back as diagnostics, never raised.
    ``text``: the file's content when the caller has it (an editor's unsaved buffer);
    ``on_result`` is called with each result as it completes (progress)."""
    p = Path(path)
    shown = display_path(p)
    try:
        if text is None:
            text = read_rule_file(p)
        model = parse_text(text, shown)
        kinds = [type(s).__name__ for s in model.statements]
        if "Test" not in kinds and "Cell" not in kinds:
            return [], []  # a rule library: syntax-checked, nothing to run
        cell = load_cell(p, parsed=(text, model))
    except CellspecError as exc:
        return [], exc.diagnostics
    results = []
    errors: list[Diagnostic] = []
    for test in cell.tests:
        tid = f"{shown}::{test.name}"
        if pattern and not selected(tid, pattern):
            continue
        t0 = time.perf_counter()
        try:
            if test.plan_path is not None:  # a RoCo plan checked in the twin
                require_extra("twin", verb=f"test ({tid} checks a plan in the twin)")
                # lazy: the twin extra (pybullet), through cellspec.robots
                from cellspec.robots.roco import evaluate_plan_test

                status, det = evaluate_plan_test(cell, test)
            else:
                layout = layout_of_test(test)
                verdict = check(cell, layout, timeout=timeout)
                status, det = evaluate(cell, test, verdict)
                if test.robust is not None and status == TestStatus.PASSED:
                    status, det = evaluate_robust(cell, test, layout, det, timeout)
        except CellspecError as exc:
            errors.extend(exc.diagnostics)
            continue
        results.append(TestResult(id=tid, file=shown, name=test.name, source=str(test.source),
                                  status=status, seconds=time.perf_counter() - t0, **det))
        if on_result is not None:
            on_result(results[-1])
    return results, errors


def selected(tid: str, pattern: str) -> bool:
    return pattern in tid or fnmatch.fnmatch(tid, pattern) or fnmatch.fnmatch(
        tid.split("::", 1)[1], pattern)


def _run_file_args(args: tuple[str, str | None, float | None]):
    return run_file(*args)


def run_tests(paths: list[str], pattern: str | None = None, workers: int = 1,
              timeout: float | None = None,
              on_result: Callable[[TestResult], None] | None = None,
              scheduler: str | None = None, connect_timeout: float = 5.0) -> RunReport:
    """Run every selected test under ``paths``; results in a fixed order whatever the order
    they complete in (``on_result`` sees each as it completes: progress). ``scheduler``:
    one task per file on that Dask cluster (same results, byte for byte)."""
    files = collect(paths)
    jobs = [(str(f), pattern, timeout) for f in files]
    report = RunReport()
    if scheduler is not None:
        outs = _run_on_dask(scheduler, files, pattern, timeout, connect_timeout)
    elif workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs), os.cpu_count() or 1)) as ex:
            futures = [ex.submit(_run_file_args, j) for j in jobs]
            if on_result is not None:
                for fut in as_completed(futures):
                    for r in fut.result()[0]:
                        on_result(r)
            outs = [f.result() for f in futures]
    else:
        outs = [run_file(*j, on_result=on_result) for j in jobs]
    for res, errs in outs:
        report.results.extend(res)
        report.errors.extend(errs)
    return report


def _run_on_dask(scheduler: str, files: list[Path], pattern: str | None,
                 timeout: float | None, connect_timeout: float) -> list:
    """Each file's tests as one task on a Dask cluster, results in file order. Workers read
    the files at the same absolute paths and name them as seen from this directory."""
    cwd = os.getcwd()
    jobs = [(str(f.resolve()), display_path(f), pattern, timeout) for f in files]

    def lost(job: tuple, why: str) -> tuple[list[TestResult], list[Diagnostic]]:
        return [], [Diagnostic(job[1], 0, 0, f"internal error: its tests did not run: {why}")]

    with dask_client(scheduler, connect_timeout=connect_timeout) as client:
        return list(dask_map(client, run_files_at, (cwd,), jobs, lost, chunk=1,
                             tag="cellspec-test"))


_CWD = threading.Lock()


def run_files_at(cwd: str, jobs: list[tuple]) -> list[tuple[list[TestResult], list[Diagnostic]]]:
    """On a Dask worker: :func:`run_file` for each job, paths shown relative to the client's
    directory ``cwd`` (entered while the tests run, when this worker has it)."""
    out: list[tuple[list[TestResult], list[Diagnostic]]] = []
    with _CWD:
        here = os.getcwd()
        moved = here != cwd and os.path.isdir(cwd)
        if moved:
            os.chdir(cwd)
        try:
            for path, shown, pattern, timeout in jobs:
                if not os.path.isfile(path):
                    out.append(([], [Diagnostic(shown, 0, 0, "not found on the Dask worker: "
                                                "`cellspec test --scheduler` needs the rule "
                                                "files at the same path on every worker")]))
                else:
                    out.append(run_file(path, pattern, timeout))
        finally:
            if moved:
                os.chdir(here)
    return out


def junit_xml(report: RunReport, timings: bool = False) -> str:
    """JUnit XML (one testsuite per file) for CI dashboards."""
    root = ET.Element("testsuites", name="cellspec", tests=str(len(report.results)),
                      failures=str(report.failed), errors=str(len(report.errors)))
    by_file: dict[str, list[TestResult]] = {}
    for r in report.results:
        by_file.setdefault(r.file, []).append(r)
    for f, rs in by_file.items():
        suite = ET.SubElement(root, "testsuite", name=f, tests=str(len(rs)),
                              failures=str(sum(r.status != TestStatus.PASSED for r in rs)),
                              errors="0")
        for r in rs:
            tc = ET.SubElement(suite, "testcase", classname=f.replace("/", "."), name=r.name,
                               file=f, time=f"{r.seconds:.4f}" if timings else "0")
            if r.status != TestStatus.PASSED:
                fail = ET.SubElement(tc, "failure", message=r.message or "failed")
                fail.text = _failure_text(r)
    if report.errors:
        suite = ET.SubElement(root, "testsuite", name="errors", tests=str(len(report.errors)),
                              failures="0", errors=str(len(report.errors)))
        for k, d in enumerate(report.errors):
            tc = ET.SubElement(suite, "testcase", classname="errors", name=f"error{k}")
            err = ET.SubElement(tc, "error", message=d.message)
            err.text = str(d)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _failure_text(r: TestResult) -> str:
    lines = [f"{r.source}: {r.message}"]
    lines.append("  expected: " + (", ".join(r.expected) or "pass"))
    lines.append("  actual:   " + (", ".join(r.actual) or "pass (no violations)"))
    if r.missing:
        lines.append("  missing:  " + ", ".join(r.missing))
    if r.unexpected:
        lines.append("  unexpected: " + ", ".join(r.unexpected))
    return "\n".join(lines)


def pretty(report: RunReport, quiet: bool = False) -> str:
    """Human output: failures with expected vs actual, then ``N passed, N failed``
    (``quiet``: no PASS lines)."""
    out = []
    for r in report.results:
        if not (quiet and r.status == TestStatus.PASSED):
            out.append(f"{'PASS' if r.status == TestStatus.PASSED else 'FAIL'} {r.id}")
    fails = [r for r in report.results if r.status != TestStatus.PASSED]
    if fails:
        out.append("")
        for r in fails:
            out.append(f"FAILED {r.id}")
            out.append(_failure_text(r))
            out.append("")
    out.append(f"{report.passed} passed, {report.failed} failed")
    return "\n".join(out) + "\n"
