"""The layouts of a batch, read lazily in input order: layout files, directories of them,
JSON-lines files (one layout per line) and ``-`` (JSON lines on stdin).

A JSON-lines layout may carry a top-level ``"id"`` naming it in the output (otherwise the id
is ``FILE:LINE``); a layout file's id is its path. Unreadable input becomes an item with an
``error`` (a bad-input result for that item), never an exception: one bad file does not stop
a batch of 100 000.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cellspec.core.errors import CellspecError, Diagnostic
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
    """Layout files under a directory (``*.json`` and JSON lines), sorted, recursively."""
    return sorted((f for f in path.rglob("*") if f.is_file() and
                   (f.suffix == ".json" or f.suffix in JSONL_SUFFIXES)), key=str)


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
        files = _files(path) if path.is_dir() else [path]
        for f in files:
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
        size = f.stat().st_size
        if size > MAX_LAYOUT_BYTES:
            return Item(index, shown, None, shown, 0, f"layout file is {size} bytes; the "
                        f"limit is {MAX_LAYOUT_BYTES} bytes")
        raw = f.read_bytes()
    except OSError as exc:
        return Item(index, shown, None, shown, 0, f"cannot read layout: {exc.strerror}")
    try:
        return Item(index, shown, raw.decode("utf-8"), shown)
    except UnicodeDecodeError as exc:
        return Item(index, shown, None, shown, 0, f"not UTF-8 text (byte {exc.start})")


def _lines(stream, shown: str, start: int) -> Iterator[Item]:
    """One item per non-blank line of a JSON-lines stream (bytes)."""
    index = start
    for lineno, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        where = f"{shown}:{lineno}"
        if len(raw) > MAX_LAYOUT_BYTES:
            yield Item(index, where, None, shown, lineno,
                       f"line is {len(raw)} bytes; the limit is {MAX_LAYOUT_BYTES} bytes")
        else:
            try:
                yield Item(index, where, raw.decode("utf-8"), shown, lineno)
            except UnicodeDecodeError as exc:
                yield Item(index, where, None, shown, lineno,
                           f"not UTF-8 text (byte {exc.start} of the line)")
        index += 1
