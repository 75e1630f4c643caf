"""cellspec test: run the test blocks of rule files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellspec.commands.common import (
    EXIT_FAIL,
    EXIT_INPUT,
    EXIT_OK,
    add_format,
    atomic_write,
    check_output,
)
from cellspec.dsl.errors import CellspecError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``test`` verb."""
    t = sub.add_parser("test", help="run the test blocks of rule files",
                       description="Run every `test` block in every .cell file under the given "
                       "paths, with no network and no model. Exit 0 all passed, 1 any failed, "
                       "2 bad input.")
    t.add_argument("paths", nargs="+", help=".cell files or directories")
    add_format(t)
    t.add_argument("--junit-xml", metavar="PATH", help="also write JUnit XML here")
    t.add_argument("-k", dest="pattern", metavar="PATTERN",
                   help="run tests whose id (file::name) contains or glob-matches PATTERN")
    t.add_argument("--workers", type=int, default=1, metavar="N",
                   help="worker processes (results keep a fixed order)")
    t.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on this Dask cluster (e.g. tcp://10.0.0.5:8786), one task per "
                   "file; every worker needs the rule files at the same paths")
    t.add_argument("--timings", action="store_true", help="include per-test seconds")
    t.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="solver time limit per test")

    t.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    from cellspec.testing import junit_xml, pretty, run_tests

    if a.workers < 1:
        raise CellspecError("--workers must be at least 1")
    check_output(a.junit_xml, "--junit-xml")
    scheduler = None
    if a.scheduler is not None:
        from cellspec.batch.cluster import scheduler_address

        if a.workers != 1:
            raise CellspecError("--workers is the local process pool; with --scheduler the "
                                "cluster's workers run the tests")
        scheduler = scheduler_address(a.scheduler)
    report = run_tests(a.paths, pattern=a.pattern, workers=a.workers, timeout=a.timeout,
                       scheduler=scheduler)
    if a.junit_xml:
        atomic_write(Path(a.junit_xml), junit_xml(report, a.timings))
    if a.format == "json":
        print(json.dumps({"tests": [r.to_json(a.timings) for r in report.results],
                          "errors": [str(d) for d in report.errors],
                          "passed": report.passed, "failed": report.failed}, indent=2))
    else:
        sys.stdout.write(pretty(report))
    for d in report.errors:
        print(str(d), file=sys.stderr)
    if report.errors:
        return EXIT_INPUT
    return EXIT_FAIL if report.failed else EXIT_OK
