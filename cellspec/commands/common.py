"""Shared pieces of the command-line verbs: exit codes, diagnostics, atomic writes."""

from __future__ import annotations

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
    """Write text to path via a temporary file and rename, so a reader never sees half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
