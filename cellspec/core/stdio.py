"""``-`` as a file name: read a layout or a plan from standard input (bounded, UTF-8).

Imports only the error types, so every layer may use it.
"""

from __future__ import annotations

import os
import sys

from cellspec.core.errors import CellspecError, Diagnostic

STDIN_NAME = "<stdin>"


def is_stdin(path: str | os.PathLike[str]) -> bool:
    """True for the conventional ``-``."""
    return str(path) == "-"


def read_stdin_text(limit: int, what: str = "input") -> str:
    """All of standard input as text; bad input (exit 2) when larger than ``limit`` bytes,
    not UTF-8, or closed."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise CellspecError(Diagnostic(STDIN_NAME, 0, 0, f"cannot read {what}: no stdin"))
    try:
        raw = stream.read(limit + 1)
    except (OSError, ValueError) as exc:
        raise CellspecError(Diagnostic(STDIN_NAME, 0, 0, f"cannot read {what}: {exc}")) \
            from None
    if len(raw) > limit:
        raise CellspecError(Diagnostic(STDIN_NAME, 0, 0, f"{what} on stdin is more than "
                                       f"{limit} bytes (the limit)"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CellspecError(Diagnostic(STDIN_NAME, 0, 0, f"not UTF-8 text (byte {exc.start})")
                            ) from None
