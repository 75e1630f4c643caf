"""The ``cellspec`` command: a thin shell over the Python API.

Data goes to stdout, diagnostics to stderr. Exit codes: 0 clean, 1 violations or
failed tests, 2 bad input or usage, 3 an internal error (a bug: please report).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from cellspec import __version__
from cellspec.dsl.errors import CellspecError

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors: exit 2, no traceback
        self.print_usage(sys.stderr)
        print(f"cellspec: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every verb."""
    p = _Parser(prog="cellspec", description="Declarative rules for robot work cells, "
                "decided by solvers.")
    p.add_argument("--version", action="version", version=f"cellspec {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True

    c = sub.add_parser("check", help="check a layout against a cell's rules",
                       description="Print pass, or every violated rule with its parts, an "
                       "explanation and the file:line:col of the rule. Exit 0 pass, "
                       "1 violations, 2 bad input (and for unknown: a solver limit).")
    c.add_argument("cell", help="the .cell file")
    c.add_argument("layout", help="the layout JSON file")
    c.add_argument("--format", choices=("pretty", "json"), default="pretty")
    c.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="solver time limit in seconds (verdict unknown when hit)")
    c.add_argument("--backend", choices=("clingo", "reference"), default="clingo",
                   help="clingo (default) or the brute-force reference evaluator")
    c.add_argument("--max-bytes", type=int, default=None, metavar="N",
                   help="largest layout file accepted (default 32 MiB)")

    t = sub.add_parser("test", help="run the test blocks of rule files",
                       description="Run every `test` block in every .cell file under the given "
                       "paths, with no network and no model. Exit 0 all passed, 1 any failed, "
                       "2 bad input.")
    t.add_argument("paths", nargs="+", help=".cell files or directories")
    t.add_argument("--format", choices=("pretty", "json"), default="pretty")
    t.add_argument("--junit-xml", metavar="PATH", help="also write JUnit XML here")
    t.add_argument("-k", dest="pattern", metavar="PATTERN",
                   help="run tests whose id (file::name) contains or glob-matches PATTERN")
    t.add_argument("--workers", type=int, default=1, metavar="N",
                   help="worker processes (results keep a fixed order)")
    t.add_argument("--timings", action="store_true", help="include per-test seconds")
    t.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="solver time limit per test")

    f = sub.add_parser("fmt", help="rewrite rule files in the canonical style",
                       description="Rewrite .cell files in one canonical style (comments kept; "
                       "the result is re-parsed and must mean the same). With --check, write "
                       "nothing and exit 1 if any file would change.")
    f.add_argument("paths", nargs="+", help=".cell files or directories")
    f.add_argument("--check", action="store_true", help="only report files that would change")
    return p


def _diag(exc: CellspecError) -> int:
    for d in exc.diagnostics:
        print(str(d), file=sys.stderr)
    return EXIT_INPUT


def cmd_check(a: argparse.Namespace) -> int:
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import MAX_LAYOUT_BYTES, load_layout
    from cellspec.solver.verify import check

    if a.timeout is not None and not (a.timeout > 0):
        raise CellspecError("--timeout must be a positive number of seconds")
    cell = load_cell(a.cell)
    layout = load_layout(a.layout, max_bytes=a.max_bytes or MAX_LAYOUT_BYTES)
    v = check(cell, layout, backend=a.backend, timeout=a.timeout)
    if a.format == "json":
        print(json.dumps(v.to_json(), indent=2))
    else:
        for x in v.violations:
            print(f"{x.source}: {x.rule}({', '.join(x.parts)}): {x.message}")
        for x in v.warnings:
            print(f"{x.source}: warning: {x.rule}({', '.join(x.parts)}): {x.message}")
        for n in v.notes:
            print(f"note: {n}", file=sys.stderr)
        summary = f"({v.parts} parts, {v.seconds:.3f} s)"
        if v.verdict == "pass":
            extra = f", {len(v.warnings)} warning(s)" if v.warnings else ""
            print(f"pass{extra} {summary}")
        elif v.verdict == "fail":
            print(f"fail: {len(v.violations)} violation(s) {summary}")
        else:
            print(f"unknown: {v.reason} {summary}")
    if v.verdict == "pass":
        return EXIT_OK
    return EXIT_FAIL if v.verdict == "fail" else EXIT_INPUT


def cmd_test(a: argparse.Namespace) -> int:
    from cellspec.testing import junit_xml, pretty, run_tests

    if a.workers < 1:
        raise CellspecError("--workers must be at least 1")
    report = run_tests(a.paths, pattern=a.pattern, workers=a.workers, timeout=a.timeout)
    if a.junit_xml:
        _atomic_write(Path(a.junit_xml), junit_xml(report, a.timings))
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


def cmd_fmt(a: argparse.Namespace) -> int:
    from cellspec.dsl.formatter import FormatError, format_source
    from cellspec.dsl.parser import display_path, parse_text, read_rule_file
    from cellspec.testing import collect

    changed = []
    bad = 0
    for f in collect(a.paths):
        try:
            text = read_rule_file(f)
            parse_text(text, display_path(f))  # syntax errors with file:line:col, prettified
            new = format_source(text)
        except CellspecError as exc:
            _diag(exc)
            bad += 1
            continue
        except FormatError as exc:
            msg = str(exc)
            print(msg if msg.startswith(str(f)) else f"{display_path(f)}: error: {msg}",
                  file=sys.stderr)
            bad += 1
            continue
        if new != text:
            changed.append(f)
            if a.check:
                print(f"would reformat {display_path(f)}")
            else:
                _atomic_write(f, new)
                print(f"reformatted {display_path(f)}")
    if bad:
        return EXIT_INPUT
    if a.check and changed:
        return EXIT_FAIL
    return EXIT_OK


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    args = build_parser().parse_args(argv)
    try:
        return {"check": cmd_check, "test": cmd_test, "fmt": cmd_fmt}[args.verb](args)
    except CellspecError as exc:
        return _diag(exc)
    except KeyboardInterrupt:
        print("cellspec: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except MemoryError:
        print("cellspec: error: out of memory (input too large)", file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:  # a bug, not user error: say so plainly
        import traceback

        print(f"cellspec: internal error (please report): {type(exc).__name__}: {exc}",
              file=sys.stderr)
        if os.environ.get("CELLSPEC_DEBUG"):
            traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
