"""Shared pieces of the command-line verbs: exit codes, diagnostics, atomic writes."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from cellspec.dsl.errors import CellspecError

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def print_diagnostics(exc: CellspecError) -> int:
    """Print every diagnostic on stderr; returns the bad-input exit code."""
    for d in exc.diagnostics:
        print(str(d), file=sys.stderr)
    return EXIT_INPUT


def atomic_write(path: Path, text: str) -> None:
    """Write text to path via a temporary file and rename, so a reader never sees half.
    An OS error (missing folder, no permission, full disk) is bad input naming the path."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.",
                                   suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise CellspecError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise


def add_format(p: argparse.ArgumentParser) -> None:
    """Add ``--format pretty|json`` (every verb has it; pretty by default)."""
    p.add_argument("--format", choices=("pretty", "json"), default="pretty",
                   help="output: pretty (for people, the default) or json (for programs)")


def add_time_limit(p: argparse.ArgumentParser, default: float, help: str) -> None:
    """Add ``--time-limit S`` (a solver time limit in seconds); check it with
    :func:`check_seconds` in the verb's ``run``."""
    p.add_argument("--time-limit", type=float, default=default, metavar="S", help=help)


def check_seconds(value: float, flag: str = "--time-limit", most: float | None = None) -> None:
    """Bad input unless ``value`` is a positive number of seconds (NaN is not), and at most
    ``most`` when given (infinity then fails too)."""
    if not (value > 0) or (most is not None and not (value <= most)):
        limit = f", at most {most:g}" if most is not None else ""
        raise CellspecError(f"{flag} must be a positive number of seconds{limit}")


def check_output(path: str | None, flag: str = "-o") -> None:
    """Bad input unless the file ``path`` can be written (its folder exists, it is no folder):
    checked before the work, so a long run is not lost to a typo in the path."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise CellspecError(f"{flag} {path}: is a directory, not a file")
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise CellspecError(f"{flag} {path}: no such directory {p.parent}")
    if not os.access(folder, os.W_OK):
        raise CellspecError(f"{flag} {path}: the directory {folder} is not writable")
