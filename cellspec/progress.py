"""Progress on long work: a tqdm bar on stderr, only when stderr is a terminal.

The library never prints: long loops call :func:`tick`, which does nothing unless a
command (or a benchmark) has installed a reporter with :func:`reporting`. The reporter
draws on stderr only when it is a TTY (and ``--quiet``/``CELLSPEC_NO_PROGRESS`` are not
set), so pipes and CI logs get nothing and stdout data is never touched. Imports no other
cellspec module (any layer may call it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

_local = threading.local()


def wanted(stream: TextIO | None = None, quiet: bool = False) -> bool:
    """True when progress should be drawn: stderr is a terminal, not quiet, not disabled."""
    stream = stream or sys.stderr
    if quiet or os.environ.get("CELLSPEC_NO_PROGRESS"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Reporter:
    """One tqdm bar per stage, redrawn as :func:`tick` reports; ``write`` prints a line
    above the bar (stderr)."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.bar: Any = None
        self.stage = ""

    def tick(self, stage: str, done: int, total: int | None, what: str = "") -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        if self.bar is None or stage != self.stage or (total is not None
                                                        and self.bar.total != total):
            self.close()
            self.stage = stage
            self.bar = tqdm(total=total, desc=stage, file=self.stream, leave=False,
                            dynamic_ncols=True, mininterval=0.1, unit="")
        self.bar.n = done
        if what:
            self.bar.set_postfix_str(what[:60], refresh=False)
        self.bar.refresh()

    def write(self, line: str) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        tqdm.write(line, file=self.stream)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def current() -> Reporter | None:
    """The reporter installed in this thread, if any."""
    return getattr(_local, "reporter", None)


def tick(stage: str, done: int, total: int | None = None, what: str = "") -> None:
    """Report that ``done`` of ``total`` units of ``stage`` are finished (no-op without a
    reporter)."""
    r = current()
    if r is not None:
        r.tick(stage, done, total, what)


def write(line: str) -> None:
    """Print a line above the progress bar (no-op without a drawing reporter)."""
    r = current()
    if r is not None:
        r.write(line)


@contextlib.contextmanager
def reporting(quiet: bool = False, stream: TextIO | None = None,
              force: bool = False) -> Iterator[Reporter]:
    """Install a reporter for the calls inside; it draws only when :func:`wanted` (or
    ``force``, for tests)."""
    r = Reporter(stream, enabled=force or wanted(stream, quiet))
    prev = current()
    _local.reporter = r
    try:
        yield r
    finally:
        r.close()
        _local.reporter = prev
