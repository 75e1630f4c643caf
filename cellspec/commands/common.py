"""Shared pieces of the command-line verbs: exit codes, diagnostics, the arguments every verb
declares (:func:`add_shared`: cell, layout, ``-o``, ``--format``, ``--time-limit``,
``--max-memory``, ``-q``), outputs (``atomic_write`` lives in :mod:`cellspec.core.io` and is
re-exported here)."""

from __future__ import annotations

import argparse
import sys

import cellspec.commands.bounded  # noqa: F401  (starts the verb's clock as the CLI loads)
from cellspec.core.errors import CellspecError
from cellspec.core.io import atomic_write as atomic_write  # re-exported for the verbs
from cellspec.core.status import EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK  # noqa: F401


def tagged(kind: str, obj: dict) -> dict:
    """A verb's JSON output with its format and version first (``"format":
    "cellspec.verdict/1"``; docs/formats.md, the schemas in cellspec/schemas/)."""
    return {"format": f"cellspec.{kind}/1", **obj}


def print_diagnostics(exc: CellspecError) -> int:
    """Print every diagnostic on stderr; returns the bad-input exit code."""
    for d in exc.diagnostics:
        print(str(d), file=sys.stderr)
    return EXIT_INPUT


# --- limit flags: one validator for every verb (the checks live in core.limits) -------
def add_time_limit(p: argparse.ArgumentParser, default: float | None, help: str,
                   alias: bool = False) -> None:
    """Add ``--time-limit S`` (``--timeout`` as an alias when ``alias``); the value lands in
    ``a.time_limit``; the verb checks it with :func:`check_seconds` (the one validator)."""
    names = ("--time-limit", "--timeout") if alias else ("--time-limit",)
    p.add_argument(*names, dest="time_limit", type=float, default=default, metavar="S",
                   help=help)


def add_max_memory(p: argparse.ArgumentParser) -> None:
    """Add ``--max-memory SIZE`` (default 2 GiB): the verb's memory budget; a run that would
    exceed it ends with ``unknown`` (reason: memory limit). Read it with :func:`parse_memory`."""
    p.add_argument("--max-memory", default=None, metavar="SIZE",
                   help="memory budget, e.g. 512M or 4G (default 2G; unknown when a run "
                   "would exceed it)")


def add_format(p: argparse.ArgumentParser) -> None:
    """Add ``--format pretty|json`` (every verb has it; pretty by default)."""
    p.add_argument("--format", choices=("pretty", "json"), default="pretty",
                   help="output: pretty (for people, the default) or json (for programs)")


# --- the arguments every verb declares, declared once ------------------------------------
CELL_HELP = "the .cell file"
LAYOUT_HELP = "the layout JSON file"
QUIET_HELP = "no progress bars (they are drawn on stderr, only on a terminal)"


def add_shared(p: argparse.ArgumentParser, *, cell: str | bool = False,
               layout: str | bool = False, output: tuple[str, str] | None = None,
               fmt: str | None = "pretty", fmt_help: str | None = None,
               time_limit: tuple[float | None, str] | None = None, alias: bool = False,
               max_memory: bool = False, quiet: str = QUIET_HELP) -> argparse.ArgumentParser:
    """Declare the shared arguments a verb takes, in one order and with one spelling: the
    ``cell`` and ``layout`` positionals (True: the usual help, a string: the verb's own),
    ``-o/--output`` (metavar, help), ``--format`` (default ``fmt``; None: the verb's output
    has one form, e.g. a protocol or a shell script), ``--time-limit``
    (default, help; ``alias`` adds ``--timeout``), ``--max-memory`` and ``-q/--quiet``.
    Call it right after ``add_parser`` so the verb's own positionals come after these."""
    if cell:
        p.add_argument("cell", help=CELL_HELP if cell is True else cell)
    if layout:
        p.add_argument("layout", help=LAYOUT_HELP if layout is True else layout)
    if output is not None:
        p.add_argument("-o", "--output", metavar=output[0], default=None, help=output[1])
    if fmt == "pretty":
        add_format(p)
    elif fmt is not None:
        p.add_argument("--format", choices=(fmt, "pretty"), default=fmt, help=fmt_help)
    if time_limit is not None:
        add_time_limit(p, time_limit[0], time_limit[1], alias=alias)
    if max_memory:
        add_max_memory(p)
    p.add_argument("-q", "--quiet", action="store_true", help=quiet)
    return p
