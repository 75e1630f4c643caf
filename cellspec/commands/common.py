"""Shared pieces of the command-line verbs: exit codes, diagnostics, limit flags, outputs
(``atomic_write`` lives in :mod:`cellspec.core.io` and is re-exported here)."""

from __future__ import annotations

import argparse
import re
import sys

import cellspec.commands.bounded  # noqa: F401  (starts the verb's clock as the CLI loads)
from cellspec.core.io import atomic_write as atomic_write  # re-exported for the verbs
from cellspec.core.io import check_writable
from cellspec.dsl.errors import CellspecError

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def print_diagnostics(exc: CellspecError) -> int:
    """Print every diagnostic on stderr; returns the bad-input exit code."""
    for d in exc.diagnostics:
        print(str(d), file=sys.stderr)
    return EXIT_INPUT


# --- limit flags: one validator for every verb -------------------------------------------
MAX_SECONDS = 86_400.0  # a time limit beyond a day is a typo (and overflows solver timers)
MAX_COUNT = 1_000_000_000  # a count limit (calls, tokens, bytes in N) beyond this is a typo
DEFAULT_MAX_MEMORY = 2 * 1024**3  # bytes: --max-memory when not given (2 GiB)
MIN_MEMORY, MAX_MEMORY = 64 * 1024**2, 1024**4  # 64 MiB .. 1 TiB
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2,
               "mib": 1024**2, "g": 1024**3, "gb": 1000**3, "gib": 1024**3, "t": 1024**4,
               "tb": 1000**4, "tib": 1024**4}


def check_count(value: int | None, flag: str, least: int = 1, most: int = MAX_COUNT) -> None:
    """Bad input unless the count limit ``value`` (workers, calls, tokens, bytes) is a whole
    number from ``least`` to ``most`` (None: not given, nothing to check)."""
    if value is not None and not (least <= value <= most):
        raise CellspecError(f"{flag} must be a whole number from {least} to {most}")


def parse_memory(text: str | int | None, flag: str = "--max-memory") -> int:
    """Bytes of a memory budget: bytes, or a number with a unit (``512M``, ``2G``, ``1.5GiB``;
    K/M/G/T are powers of 1024, KB/MB/GB/TB of 1000), from 64 MiB to 1 TiB; None is the
    default budget (:data:`DEFAULT_MAX_MEMORY`)."""
    if text is None:
        return DEFAULT_MAX_MEMORY
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise CellspecError(f"{flag}: expected a size such as 512M or 2G, got {text!r}")
    v = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if not (MIN_MEMORY <= v <= MAX_MEMORY):
        raise CellspecError(f"{flag} must be from 64M to 1T, got {text}")
    return v


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


def check_seconds(value: float, flag: str = "--time-limit", most: float | None = None) -> None:
    """The one validator of every time-limit flag of every verb: bad input unless ``value``
    is a finite, positive number of seconds (NaN, infinity, 0 and negatives are not), at most
    ``most`` (default :data:`MAX_SECONDS`, a day)."""
    most = MAX_SECONDS if most is None else most
    if not (value > 0) or not (value <= most):
        limit = f", at most {most:g}" if most is not None else ""
        raise CellspecError(f"{flag} must be a positive number of seconds{limit}")


def check_output(path: str | None, flag: str = "-o") -> None:
    """Bad input unless the file ``path`` can be written (see
    :func:`cellspec.core.io.check_writable`): checked before the work."""
    check_writable(path, flag)
