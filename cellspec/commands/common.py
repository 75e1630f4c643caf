"""Shared pieces of the command-line verbs: exit codes, diagnostics, limit flags, outputs
(``atomic_write`` lives in :mod:`cellspec.core.io` and is re-exported here)."""

from __future__ import annotations

import argparse
import math
import re
import sys

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


def seconds(text: str) -> float:
    """argparse type of every time-limit flag: a finite, positive number of seconds, at
    most :data:`MAX_SECONDS` (``inf``, ``nan``, 0 and negatives are usage errors, exit 2)."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(v) or not (0 < v <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(f"must be a finite, positive number of seconds, at "
                                         f"most {MAX_SECONDS:g} (got {text})")
    return v


def positive_int(text: str) -> int:
    """argparse type of every count limit (workers, calls, tokens, bytes): a whole number
    from 1 to :data:`MAX_COUNT`."""
    try:
        v = int(str(text).strip().replace("_", ""))
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not (1 <= v <= MAX_COUNT):
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_COUNT} "
                                         f"(got {text})")
    return v


def memory_size(text: str) -> int:
    """argparse type of ``--max-memory``: bytes, or a number with a unit (``512M``, ``2G``,
    ``1.5GiB``; K/M/G/T are powers of 1024), from 64 MiB to 1 TiB."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"expected a size such as 512M or 2G, got {text!r}")
    v = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if not (MIN_MEMORY <= v <= MAX_MEMORY):
        raise argparse.ArgumentTypeError(f"must be from 64M to 1T (got {text})")
    return v


def add_time_limit(p: argparse.ArgumentParser, default: float | None, help: str,
                   alias: bool = False) -> None:
    """Add ``--time-limit S`` (validated by :func:`seconds`; ``--timeout`` as an alias when
    ``alias``); the value lands in ``a.time_limit``."""
    names = ("--time-limit", "--timeout") if alias else ("--time-limit",)
    p.add_argument(*names, dest="time_limit", type=seconds, default=default, metavar="S",
                   help=help)


def add_max_memory(p: argparse.ArgumentParser) -> None:
    """Add ``--max-memory SIZE`` (default 2 GiB): the verb's memory budget; a run that would
    exceed it ends with ``unknown`` (reason: memory limit)."""
    p.add_argument("--max-memory", type=memory_size, default=DEFAULT_MAX_MEMORY,
                   metavar="SIZE", help="memory budget, e.g. 512M or 4G (default 2G; unknown "
                   "when a run would exceed it)")


def add_format(p: argparse.ArgumentParser) -> None:
    """Add ``--format pretty|json`` (every verb has it; pretty by default)."""
    p.add_argument("--format", choices=("pretty", "json"), default="pretty")


def check_seconds(value: float, flag: str = "--time-limit", most: float | None = None) -> None:
    """Bad input unless ``value`` is a finite, positive number of seconds (NaN and infinity
    are not), at most ``most`` (default :data:`MAX_SECONDS`); for values that do not come
    through :func:`seconds` (the Python API, config)."""
    most = MAX_SECONDS if most is None else most
    if not (value > 0) or not (value <= most):
        limit = f", at most {most:g}" if most is not None else ""
        raise CellspecError(f"{flag} must be a positive number of seconds{limit}")


def check_output(path: str | None, flag: str = "-o") -> None:
    """Bad input unless the file ``path`` can be written (see
    :func:`cellspec.core.io.check_writable`): checked before the work."""
    check_writable(path, flag)
