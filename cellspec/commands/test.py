"""cellspec test: run the test blocks of rule files."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from cellspec.commands import bounded
from cellspec.commands.bounded import remaining
from cellspec.commands.common import (
    EXIT_FAIL,
    EXIT_INPUT,
    EXIT_OK,
    QUIET_HELP,
    add_shared,
    atomic_write,
)
from cellspec.core.errors import CellspecError
from cellspec.core.limits import check_count, check_output, check_seconds
from cellspec.core.proc import Outcome, call_in_fork
from cellspec.core.status import TestStatus


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``test`` verb."""
    t = sub.add_parser("test", help="run the test blocks of rule files",
                       description="Run every `test` block in every .cell file under the given "
                       "paths, with no network and no model. Exit 0 all passed, 1 any failed, "
                       "2 bad input.")
    add_shared(t, quiet=QUIET_HELP + " and no PASS lines",
               time_limit=(None, "time limit of the whole run in seconds (loading every "
                           "file and its imports, every test; default none): the run is "
                           "stopped when it is hit, exit 2"))
    t.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="solver time limit per test in seconds (a test that hits it fails "
                   "as unknown; loading the files is not counted: --time-limit bounds that)")
    t.add_argument("paths", nargs="+", help=".cell files or directories")
    t.add_argument("--junit-xml", metavar="PATH", help="also write JUnit XML here")
    t.add_argument("-k", dest="pattern", metavar="PATTERN",
                   help="run tests whose id (file::name) contains or glob-matches PATTERN")
    t.add_argument("--workers", type=int, default=1, metavar="N",
                   help="worker processes (results keep a fixed order)")
    t.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on this Dask cluster (e.g. tcp://10.0.0.5:8786), one task per "
                   "file; every worker needs the rule files at the same paths")
    t.add_argument("--connect-timeout", type=float, default=5.0, metavar="S",
                   help="--scheduler: give up on a scheduler that cannot be reached or does "
                   "not answer like one after S seconds (default 5)")
    t.add_argument("--timings", action="store_true", help="include per-test seconds")
    t.add_argument("--coverage", action="store_true",
                   help="also report rule coverage: per rule, the passing tests where it holds "
                   "and where it fires as expected, and which disjuncts of its negated body "
                   "ever fired")
    t.add_argument("--fail-under", type=float, default=None, metavar="PERCENT",
                   help="exit 1 when rule coverage is below PERCENT (implies --coverage)")

    t.add_argument("--baseline", metavar="GITREF", default=None,
                   help="also compare every .cell file the run reads that differs from "
                   "GITREF (itself or a file it imports) with its GITREF version, rule by "
                   "rule (cellspec diff): fail when a rule got looser, was removed or went "
                   "down in severity, unless the file says `// loosens: RULE` (docs/diff.md)")
    t.add_argument("--allow-looser", action="store_true",
                   help="--baseline: report looser rules without failing")
    t.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    check_count(a.workers, "--workers", 1, 1024)
    if a.time_limit is not None:
        check_seconds(a.time_limit, "--time-limit")
    if a.timeout is not None:
        check_seconds(a.timeout, "--timeout")
    if a.fail_under is not None and not (0 <= a.fail_under <= 100):
        raise CellspecError("--fail-under must be a percentage between 0 and 100")
    check_output(a.junit_xml, "--junit-xml")
    check_seconds(a.connect_timeout, "--connect-timeout", most=600)
    if a.allow_looser and a.baseline is None:
        raise CellspecError("--allow-looser needs --baseline GITREF")
    scheduler = None
    if a.scheduler is not None:
        # lazy: CLI start-up time (every verb loads for --help; loads the batch runner)
        from cellspec.batch.cluster import scheduler_address

        if a.workers != 1:
            raise CellspecError("--workers is the local process pool; with --scheduler the "
                                "cluster's workers run the tests")
        scheduler = scheduler_address(a.scheduler)

    if a.time_limit is None:
        report, cov, base = _compute(a, scheduler)
    else:  # the whole run in a child stopped at the deadline (with what it started)
        kind, value = call_in_fork(lambda: _guarded(a, scheduler),
                                   seconds=remaining(a.time_limit), extra_memory=None,
                                   group=True)
        took = time.monotonic() - bounded.STARTED
        if kind == Outcome.TIME:
            print(f"unknown: time limit: the test run was not finished within "
                  f"{a.time_limit:g} s and was stopped (--time-limit bounds the whole run: "
                  f"loading, every test) ({took:.3f} s)")
            return EXIT_INPUT
        if kind != Outcome.OK:
            raise RuntimeError(f"the test run's process died ({kind}, {value})")
        what, got = value
        if what == Outcome.INPUT:
            raise CellspecError(got)
        if what == Outcome.INTERNAL:
            raise RuntimeError(got)
        report, cov, base = got
    return _print(a, report, cov, base)


def _guarded(a: argparse.Namespace, scheduler: str | None) -> tuple[Outcome, Any]:
    """:func:`_compute` in the bounded child: its result, or the error to re-raise."""
    try:
        return (Outcome.OK, _compute(a, scheduler))
    except CellspecError as exc:
        return (Outcome.INPUT, exc.diagnostics)
    except Exception as exc:  # noqa: BLE001 - a bug: the parent says so (exit 3)
        return (Outcome.INTERNAL, f"{type(exc).__name__}: {exc}")


def _compute(a: argparse.Namespace, scheduler: str | None) -> tuple[Any, Any, Any]:
    """Run the tests (and the coverage with --coverage, the comparison with --baseline):
    (report, coverage or None, baseline or None)."""
    # lazy: CLI start-up time (every verb loads for --help; loads the test runner)
    # lazy: CLI start-up time (every verb loads for --help; small, but only this verb needs it)
    from cellspec.core import progress
    from cellspec.testing.runner import run_tests

    if a.baseline is not None:  # a bad ref or no checkout: said before any test runs
        # lazy: CLI start-up time (only --baseline reads git and runs diff)
        from cellspec.testing.baseline import check_ref

        check_ref(a.baseline, a.paths)
    with progress.reporting(quiet=getattr(a, "quiet", False)) as bar:
        counts = {"passed": 0, "failed": 0}

        def stream(r) -> None:  # stderr, TTY only: each result as it completes
            passed = r.status == TestStatus.PASSED
            counts["passed" if passed else "failed"] += 1
            if not passed:
                bar.write(f"FAIL {r.id}: {r.message}")
            bar.tick("test", counts["passed"] + counts["failed"], None,
                     f"{counts['passed']} passed, {counts['failed']} failed")

        report = run_tests(a.paths, pattern=a.pattern, workers=a.workers,
                           timeout=a.timeout, on_result=stream, scheduler=scheduler,
                           connect_timeout=a.connect_timeout)
    if not report.results and not report.errors:  # a mistyped -k in CI must not be green
        where = " ".join(a.paths)
        raise CellspecError(f"no tests selected in {where}" + (
            f" by -k {a.pattern!r}" if a.pattern else " (no test blocks found)"))
    cov = None
    if a.coverage or a.fail_under is not None:
        # lazy: CLI start-up time (every verb loads for --help; loads the test runner)
        from cellspec.testing.coverage import run_coverage

        cov, _ = run_coverage(a.paths, pattern=a.pattern, workers=a.workers,
                              timeout=a.timeout)  # its input errors are the run's, above
    base = None
    if a.baseline is not None:
        # lazy: CLI start-up time (only --baseline reads git and runs diff)
        from cellspec.testing.baseline import run_baseline
        from cellspec.testing.runner import collect

        base = run_baseline(collect(a.paths), a.baseline, allow_looser=a.allow_looser,
                            seconds=a.timeout)
    return report, cov, base


def _print(a: argparse.Namespace, report: Any, cov: Any, base: Any = None) -> int:
    """Print the report (and write the JUnit XML); the exit code."""
    # lazy: CLI start-up time (every verb loads for --help; loads the test runner)
    from cellspec.testing.runner import junit_xml, pretty

    if a.junit_xml:
        xml = junit_xml(report, a.timings)
        if base is not None:
            # lazy: CLI start-up time (only --baseline)
            from cellspec.testing.baseline import with_junit

            xml = with_junit(xml, base)
        atomic_write(Path(a.junit_xml), xml)
    if a.format == "json":
        out = {"tests": [r.to_json(a.timings) for r in report.results],
               "errors": [str(d) for d in report.errors],
               "passed": report.passed, "failed": report.failed}
        if cov is not None:
            out["coverage"] = cov.to_json()
        if base is not None:
            out["baseline"] = base.to_json()
        print(json.dumps(out, indent=2))
    else:
        sys.stdout.write(pretty(report, quiet=getattr(a, "quiet", False)))
        if cov is not None:
            # lazy: CLI start-up time (every verb loads for --help; loads the test runner)
            from cellspec.testing.coverage import pretty as pretty_coverage

            sys.stdout.write("\n" + pretty_coverage(cov))
        if base is not None:
            # lazy: CLI start-up time (only --baseline)
            from cellspec.testing.baseline import pretty as pretty_baseline

            sys.stdout.write("\n" + pretty_baseline(base))
    for d in report.errors:
        print(str(d), file=sys.stderr)
    if report.errors or (base is not None and base.unknown):
        return EXIT_INPUT
    if report.failed or (base is not None and base.failed):
        return EXIT_FAIL
    if cov is not None and a.fail_under is not None and cov.percent < a.fail_under:
        print(f"cellspec: rule coverage {cov.percent:.1f}% is under --fail-under "
              f"{a.fail_under:g}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK
