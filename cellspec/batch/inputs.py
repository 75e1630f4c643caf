"""The layouts of a batch, read lazily in input order: layout files, directories of them,
JSON-lines files (one layout per line) and ``-`` (JSON lines on stdin).

A JSON-lines layout may carry a top-level ``"id"`` naming it in the output (otherwise the id
is ``FILE:LINE``); a layout file's id is its path. Unreadable input becomes an item with an
``error`` (a bad-input result for that item), never an exception: one bad file does not stop
a batch of 100 000.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.io import TooLarge, read_bounded
from cellspec.layout import MAX_LAYOUT_BYTES

JSONL_SUFFIXES = (".jsonl", ".ndjson")
STDIN = "-"


@dataclass(frozen=True)
class Item:
    """One layout of a batch: its position in the input, its id and its JSON text (or the
    reason it could not be read). ``where`` and ``line`` locate it for diagnostics."""

    index: int
    id: str
    text: str | None
    where: str
    line: int = 0
    error: str | None = None


def check_paths(paths: list[str]) -> None:
    """Bad input (exit 2, before any work) when a named path does not exist or ``-`` is
    given twice."""
    missing = [Diagnostic(p, 0, 0, "no such file or directory") for p in paths
               if p != STDIN and not Path(p).exists()]
    if paths.count(STDIN) > 1:
        missing.append(Diagnostic("", 0, 0, "'-' (stdin) can be given only once"))
    if missing:
        raise CellspecError(missing)


def _files(path: Path) -> list[Path]:
    """Layout files under a directory (``*.json`` and JSON lines), sorted, recursively;
    a name of that kind that is no regular file (a symlink to a device, a FIFO, a dangling
    link) is listed too: it gets a record saying why it was skipped."""
    return sorted((f for f in path.rglob("*") if (f.suffix == ".json" or
                                                  f.suffix in JSONL_SUFFIXES)
                   and (f.is_file() or not f.is_dir())), key=str)


def _not_a_file(f: Path) -> str | None:
    """Why ``f`` (found in a folder) is skipped, or None when it is a regular file."""
    try:
        m = f.stat().st_mode
    except OSError as exc:
        return (f"skipped: {'a dangling symlink' if f.is_symlink() else 'unreadable'} "
                f"({exc.strerror})")
    if stat.S_ISREG(m):
        return None
    kind = ("a character device" if stat.S_ISCHR(m) else "a block device" if stat.S_ISBLK(m)
            else "a FIFO (named pipe)" if stat.S_ISFIFO(m) else "a socket" if stat.S_ISSOCK(m)
            else "not a regular file")
    link = f" (a symlink to {os.path.realpath(f)})" if f.is_symlink() else ""
    return f"skipped: {kind}{link}, not a layout file; name it on the command line to read it"


def iter_items(paths: Iterable[str], stdin=None) -> Iterator[Item]:
    """Every layout named by ``paths``, in order, numbered from 0; lazily (a JSON-lines
    file or stdin is read a line at a time, so memory does not grow with the batch)."""
    index = 0
    for p in paths:
        if p == STDIN:
            stream = stdin if stdin is not None else sys.stdin.buffer
            for item in _lines(stream, "<stdin>", index):
                yield item
                index += 1
            continue
        path = Path(p)
        listed = path.is_dir()
        files = _files(path) if listed else [path]
        for f in files:
            why = _not_a_file(f) if listed else None
            if why is not None:
                yield Item(index, str(f), None, str(f), 0, why)
                index += 1
                continue
            if f.suffix in JSONL_SUFFIXES:
                try:
                    fh = f.open("rb")
                except OSError as exc:
                    yield Item(index, str(f), None, str(f), 0,
                               f"cannot read layouts: {exc.strerror}")
                    index += 1
                    continue
                with fh:
                    for item in _lines(fh, str(f), index):
                        yield item
                        index += 1
            else:
                yield _file_item(f, index)
                index += 1


def _file_item(f: Path, index: int) -> Item:
    shown = str(f)
    try:
        raw = read_bounded(f, MAX_LAYOUT_BYTES)  # at most limit + 1 bytes: /dev/zero too
    except TooLarge as exc:
        size = f"is {exc.size} bytes" if exc.size is not None else \
            f"holds more than {MAX_LAYOUT_BYTES} bytes"
        return Item(index, shown, None, shown, 0, f"layout file {size}; the limit is "
                    f"{MAX_LAYOUT_BYTES} bytes")
    except OSError as exc:
        return Item(index, shown, None, shown, 0, f"cannot read layout: {exc.strerror}")
    try:
        return Item(index, shown, raw.decode("utf-8"), shown)
    except UnicodeDecodeError as exc:
        return Item(index, shown, None, shown, 0, f"not UTF-8 text (byte {exc.start})")


SKIP_BYTES = 8 * MAX_LAYOUT_BYTES  # an over-long line is skipped up to this, then the input


def _skip_line(stream: Any) -> tuple[int, bool]:
    """Read past the rest of an over-long line in bounded pieces: (bytes skipped, whether
    its end was found within :data:`SKIP_BYTES`)."""
    skipped = 0
    while skipped < SKIP_BYTES:
        b = stream.readline(1 << 20)
        if not b:
            return skipped, True
        skipped += len(b)
        if b.endswith(b"\n"):
            return skipped, True
    return skipped, False


def _lines(stream: Any, shown: str, start: int) -> Iterator[Item]:
    """One item per non-blank line of a JSON-lines stream (bytes). A line is read up to the
    layout limit plus one byte, never whole: a longer line is a bad-input item (and the
    rest of the input too, when no line end follows within :data:`SKIP_BYTES`)."""
    index = start
    lineno = 0
    while True:
        try:
            raw = stream.readline(MAX_LAYOUT_BYTES + 1)
        except OSError as exc:
            yield Item(index, f"{shown}:{lineno + 1}", None, shown, lineno + 1,
                       f"cannot read layouts: {exc.strerror}")
            return
        if not raw:
            return
        lineno += 1
        where = f"{shown}:{lineno}"
        if len(raw) > MAX_LAYOUT_BYTES:
            more, ended = (0, True) if raw.endswith(b"\n") else _skip_line(stream)
            if not ended:
                yield Item(index, where, None, shown, lineno,
                           f"line has no end within its first {len(raw) + more} bytes; "
                           f"the limit is {MAX_LAYOUT_BYTES} bytes; the rest of {shown} "
                           "was not read")
                return
            yield Item(index, where, None, shown, lineno,
                       f"line is {len(raw) + more} bytes; the limit is {MAX_LAYOUT_BYTES} "
                       "bytes")
            index += 1
            continue
        if not raw.strip():
            continue
        try:
            yield Item(index, where, raw.decode("utf-8"), shown, lineno)
        except UnicodeDecodeError as exc:
            yield Item(index, where, None, shown, lineno,
                       f"not UTF-8 text (byte {exc.start} of the line)")
        index += 1
