"""cellspec fmt: rewrite rule files in the canonical style."""

from __future__ import annotations

import argparse
import json
import sys

from cellspec.commands import common
from cellspec.commands.common import EXIT_FAIL, EXIT_INPUT, EXIT_OK, atomic_write, print_diagnostics
from cellspec.core.errors import CellspecError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``fmt`` verb."""
    f = sub.add_parser("fmt", help="rewrite rule files in the canonical style",
                       description="Rewrite .cell files in one canonical style (comments kept; "
                       "the result is re-parsed and must mean the same). With --check, write "
                       "nothing and exit 1 if any file would change.")
    common.add_shared(f)
    f.add_argument("paths", nargs="+", help=".cell files or directories")
    f.add_argument("--check", action="store_true", help="only report files that would change")
    f.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    # lazy: CLI start-up time (every verb loads for --help; loads textX, the test runner)
    from cellspec.dsl.formatter import FormatError, format_source
    from cellspec.dsl.parser import display_path, parse_text, read_rule_file
    from cellspec.testing.runner import collect

    changed = []
    results: list[dict] = []
    bad = 0
    for f in collect(a.paths):
        try:
            text = read_rule_file(f)
            parse_text(text, display_path(f))  # syntax errors with file:line:col, prettified
            new = format_source(text)
        except CellspecError as exc:
            print_diagnostics(exc)
            results.append({"path": display_path(f), "status": "error",
                            "errors": [str(d) for d in exc.diagnostics]})
            bad += 1
            continue
        except FormatError as exc:
            msg = str(exc)
            msg = msg if msg.startswith(str(f)) else f"{display_path(f)}: error: {msg}"
            print(msg, file=sys.stderr)
            results.append({"path": display_path(f), "status": "error", "errors": [msg]})
            bad += 1
            continue
        status = "unchanged"
        if new != text:
            changed.append(f)
            status = "would change" if a.check else "reformatted"
            if not a.check:
                atomic_write(f, new)
            if a.format == "pretty":
                verb = "would reformat" if a.check else "reformatted"
                print(f"{verb} {display_path(f)}")
        results.append({"path": display_path(f), "status": status})
    if a.format == "json":
        print(json.dumps({"files": results, "changed": len(changed), "errors": bad}, indent=2))
    if bad:
        return EXIT_INPUT
    if a.check and changed:
        return EXIT_FAIL
    return EXIT_OK
