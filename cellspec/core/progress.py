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
import time
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
    """One tqdm bar per stage (nested stages get their own line), redrawn as :func:`tick`
    reports; ``write`` prints a line above the bars (stderr)."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.bars: dict[str, Any] = {}

    def tick(self, stage: str, done: int, total: int | None, what: str = "") -> None:
        if not self.enabled:
            return
        # lazy: CLI start-up time; tqdm loads only when a bar is drawn
        from tqdm import tqdm

        bar = self.bars.get(stage)
        if bar is None or (total is not None and bar.total != total):
            pos = list(self.bars).index(stage) if bar is not None else len(self.bars)
            if bar is not None:
                bar.close()
            bar = tqdm(total=total, desc=stage, file=self.stream, leave=False, position=pos,
                       ncols=_size(self.stream)[0], nrows=_size(self.stream)[1],
                       mininterval=0.1, unit="")
            self.bars[stage] = bar
        bar.n = done
        if what:
            bar.set_postfix_str(what[:60], refresh=False)
        bar.refresh()

    def write(self, line: str) -> None:
        if not self.enabled:
            return
        # lazy: CLI start-up time; tqdm loads only when a bar is drawn
        from tqdm import tqdm

        tqdm.write(line, file=self.stream)

    def close(self) -> None:
        for bar in reversed(list(self.bars.values())):
            bar.close()
        self.bars.clear()


def _size(stream: TextIO) -> tuple[int, int]:
    """The terminal's columns and rows (100 x 24 when it reports none, as a fresh
    pseudo-terminal does: tqdm would draw nothing)."""
    try:
        size = os.get_terminal_size(stream.fileno())
        cols, rows = size.columns, size.lines
    except (AttributeError, OSError, ValueError):
        cols, rows = 0, 0
    return (cols if cols > 0 else 100), (rows if rows > 0 else 24)


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


@contextlib.contextmanager
def elapsed(stage: str, after: float = 1.0, quiet: bool = False) -> Iterator[None]:
    """Show ``stage: N.N s`` on a TTY's stderr while the block runs longer than ``after``
    seconds (solvers that report nothing themselves: generate, repair, plan)."""
    if not wanted(quiet=quiet):
        yield
        return
    stop = threading.Event()
    t0 = time.perf_counter()
    rep = Reporter(enabled=True)

    def run() -> None:
        if stop.wait(after):
            return
        while not stop.wait(0.2):
            rep.tick(stage, int(time.perf_counter() - t0), None, "solving")
    th = threading.Thread(target=run, name="cellspec-progress", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        rep.close()
