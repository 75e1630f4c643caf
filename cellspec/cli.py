"""The ``cellspec`` command: a thin shell over the Python API.

Each verb lives in ``cellspec/commands/<verb>.py``. Data goes to stdout,
diagnostics to stderr. Exit codes: 0 clean, 1 violations or failed tests, 2 bad
input or usage, 3 an internal error (a bug: please report).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import NoReturn

from cellspec import __version__
from cellspec.commands import VERBS
from cellspec.commands.bounded import WorkerError, start_clock
from cellspec.commands.common import EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, print_diagnostics
from cellspec.core.errors import CellspecError
from cellspec.core.status import InternalError


class _Parser(argparse.ArgumentParser):
    verbs: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:  # usage errors: exit 2, no traceback
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)

    def parse_args(self, args=None, namespace=None):
        """As argparse, but an unknown option after a verb shows that verb's usage."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            verb = self.verbs.get(getattr(ns, "verb", None) or "", self)
            verb.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every verb."""
    p = _Parser(prog="cellspec", description="Declarative rules for robot work cells, "
                "decided by solvers.")
    p.add_argument("--version", action="version", version=f"cellspec {__version__}")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show the traceback of an internal error (as CELLSPEC_DEBUG=1)")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    for verb in VERBS:
        importlib.import_module(f"cellspec.commands.{verb}").register(sub)
    p.verbs = dict(sub.choices)
    for sp in sub.choices.values():
        if "--quiet" not in sp._option_string_actions:
            flags = ["-q", "--quiet"] if "-q" not in sp._option_string_actions else ["--quiet"]
            sp.add_argument(*flags, action="store_true",
                            help="no progress bars (they are drawn on stderr, only on a "
                            "terminal)" + (" and no PASS lines" if sp.prog.endswith(" test")
                                           else ""))
        sp.add_argument("--urdf-path", action="append", metavar="DIR", default=None,
                        help="where `package://` meshes of a robot's own URDF are looked up "
                        "(repeatable; before $CELLSPEC_URDF_PATH and the URDF's folders)")
    p.set_defaults(_root=p)  # `cellspec completion` walks the whole parser
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script (``argv`` None: ``sys.argv``, and the verb's
    --time-limit counts from the process start; a list: a library call, counted from now)."""
    start_clock(from_process_start=argv is None)
    args = build_parser().parse_args(argv)
    saved = {k: os.environ.get(k) for k in _ENV_SET}
    try:
        return _run(args)
    finally:  # a library caller's environment is as before (the worker had its copy)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_ENV_SET = ("CELLSPEC_DEBUG", "CELLSPEC_URDF_PATH")  # what _run sets for the verb's worker


def _run(args: argparse.Namespace) -> int:
    """The parsed verb run, its errors turned into exit codes (2 input, 3 internal)."""
    if getattr(args, "verbose", False):  # the verb's worker process inherits it
        os.environ["CELLSPEC_DEBUG"] = "1"
    if getattr(args, "urdf_path", None):  # read by cellspec.dsl.urdf (workers inherit it)
        old = os.environ.get("CELLSPEC_URDF_PATH", "")
        os.environ["CELLSPEC_URDF_PATH"] = os.pathsep.join(
            [os.path.abspath(d) for d in args.urdf_path] + ([old] if old else []))
    try:
        return args.func(args)
    except CellspecError as exc:
        return print_diagnostics(exc)
    except KeyboardInterrupt:
        print("cellspec: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except MemoryError:
        print("cellspec: error: out of memory (input too large)", file=sys.stderr)
        return EXIT_INPUT
    except (InternalError, WorkerError) as exc:  # a solver or worker failure: a bug, exit 3
        print(f"cellspec: internal error (please report): {exc}", file=sys.stderr)
        if os.environ.get("CELLSPEC_DEBUG") and not isinstance(exc, WorkerError):
            traceback.print_exc()  # (a worker's traceback was printed by the parent)
        return EXIT_INTERNAL
    except Exception as exc:  # a bug, not user error: say so plainly
        print(f"cellspec: internal error (please report): {type(exc).__name__}: {exc}",
              file=sys.stderr)
        if os.environ.get("CELLSPEC_DEBUG"):
            traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
