"""Shared pieces of the command-line verbs: exit codes, diagnostics, limit flags, outputs
(``atomic_write`` lives in :mod:`cellspec.core.io` and is re-exported here)."""

from __future__ import annotations

import argparse
import sys

import cellspec.commands.bounded  # noqa: F401  (starts the verb's clock as the CLI loads)
from cellspec.core.errors import CellspecError
from cellspec.core.io import atomic_write as atomic_write  # re-exported for the verbs
from cellspec.core.status import EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK  # noqa: F401


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
