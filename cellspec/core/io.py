"""Bounded reads and safe writes: the only way cellspec reads an input or writes an output.

Reads (:func:`read_bounded`) take at most ``limit + 1`` bytes from anything: a regular
file, a pipe, a FIFO, a device (``/dev/zero``) or ``-`` (standard input), and refuse what
is larger, so no input can make a verb read without end.

Writes (:func:`atomic_write`) never clobber what the path names:

- a regular file (or a new path) is replaced atomically (temporary file in the same
  folder, then rename); an existing file keeps its mode (and, where permitted, its owner
  and group); a new file gets ``0666`` minus the umask, as ``>`` in a shell would;
- a symlink is written *through*: the file it points to is replaced, the link stays;
- a character device (``/dev/null``, ``/dev/full``, a terminal) is written in place,
  never replaced by a regular file (an error such as ENOSPC names the path);
- a FIFO, a socket, a block device or a folder is refused (bad input, naming the path):
  a FIFO would block until a reader comes, and the others are no output files.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import BinaryIO

from cellspec.core.errors import CellspecError

STDIN = "-"
_CHUNK = 1 << 20
_UMASK_LOCK = threading.Lock()


class TooLarge(Exception):
    """An input is larger than the limit: ``size`` is its size when known (a regular file),
    else None (a pipe or a device: more than ``limit`` bytes were available)."""

    def __init__(self, limit: int, size: int | None) -> None:
        self.limit, self.size = limit, size
        super().__init__(f"{size} bytes; the limit is {limit} bytes" if size is not None
                         else f"more than {limit} bytes (the limit)")


def _read_at_most(fh: BinaryIO, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes from an open binary stream, in bounded chunks."""
    parts: list[bytes] = []
    left = limit + 1
    while left > 0:
        b = fh.read(min(_CHUNK, left))
        if not b:
            break
        parts.append(b)
        left -= len(b)
    return b"".join(parts)


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``limit`` of them; raises
    :class:`TooLarge` past the limit, ``IsADirectoryError`` for a folder and any other
    ``OSError`` as the OS reports it. Never reads more than ``limit + 1`` bytes."""
    if str(path) == STDIN:
        data = _read_at_most(sys.stdin.buffer, limit)
        if len(data) > limit:
            raise TooLarge(limit, None)
        return data
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        regular = stat.S_ISREG(st.st_mode)
        if regular and st.st_size > limit:
            raise TooLarge(limit, st.st_size)
        data = _read_at_most(fh, limit)
    if len(data) > limit:
        raise TooLarge(limit, None if not regular else max(len(data), st.st_size))
    return data


def read_text_bounded(path: str | os.PathLike[str], limit: int) -> str:
    """:func:`read_bounded` decoded as UTF-8 (``UnicodeDecodeError`` when it is not)."""
    return read_bounded(path, limit).decode("utf-8")


def _umask() -> int:
    with _UMASK_LOCK:
        old = os.umask(0o022)
        os.umask(old)
    return old


def write_target(path: str | os.PathLike[str], flag: str | None = None
                 ) -> tuple[Path, os.stat_result | None]:
    """Where a write to ``path`` lands (symlinks followed) and what is there now (None: a
    new file). CellspecError naming the path (and ``flag``) for a FIFO, socket, block
    device or folder."""
    p = Path(path)
    target = Path(os.path.realpath(p)) if p.is_symlink() else p
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target, None
    except OSError as exc:
        raise CellspecError(f"cannot write {path}: {exc.strerror or exc}") from None
    m = st.st_mode
    if stat.S_ISREG(m) or stat.S_ISCHR(m):
        return target, st
    shown = str(path) if target == p else f"{path} (-> {target})"
    head = f"{flag} {shown}" if flag else f"cannot write {shown}"
    if stat.S_ISDIR(m):
        raise CellspecError(f"{head}: is a directory, not a file")
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(m) else "a socket" if stat.S_ISSOCK(m)
            else "a block device" if stat.S_ISBLK(m) else "not a regular file")
    raise CellspecError(f"{head}: is {kind}; outputs go to regular files (or a character "
                        "device such as /dev/null), never replacing anything else")


def _temp_beside(target: Path, st: os.stat_result | None) -> tuple[int, str]:
    """A temporary file in ``target``'s folder with the mode (and the owner, where
    permitted) of what is there now, or a new file's mode: (its descriptor, its path)."""
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    try:
        if st is not None:
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
            try:
                os.fchown(fd, st.st_uid, st.st_gid)
            except OSError:  # not permitted (another owner): the mode is kept at least
                pass
        else:
            os.fchmod(fd, 0o666 & ~_umask())
    except OSError:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def atomic_write(path: str | os.PathLike[str], text: str | bytes) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends; or bytes as they are, e.g. a PNG) to
    ``path`` safely (see the module docstring: atomic for regular files, through symlinks,
    in place for character devices, refused otherwise). An OS error is bad input naming
    the path."""
    target, st = write_target(path)
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    if st is not None and stat.S_ISCHR(st.st_mode):
        try:
            fd = os.open(target, os.O_WRONLY | os.O_APPEND)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            raise CellspecError(f"cannot write {path}: {exc.strerror or exc}") from None
        return
    tmp = None
    try:
        fd, tmp = _temp_beside(target, st)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise CellspecError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def check_writable(path: str | None, flag: str = "-o") -> None:
    """Bad input unless ``path`` can be written (its folder exists and is writable, it is no
    folder, FIFO or block device): checked before the work, so a long run is not lost to a
    typo in the path."""
    if not path:
        return
    target, st = write_target(path, flag)
    if st is not None and stat.S_ISCHR(st.st_mode):
        return
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise CellspecError(f"{flag} {path}: no such directory {folder}")
    if not os.access(folder, os.W_OK):
        raise CellspecError(f"{flag} {path}: the directory {folder} is not writable")


class AtomicOutput:
    """A text output written a piece at a time and published at once, with
    :func:`atomic_write`'s rules (a regular file is replaced by rename and keeps its mode;
    a symlink is written through; a character device is written in place; anything else is
    refused): ``write`` the pieces, then ``commit`` (or ``abort``: nothing is changed)."""

    def __init__(self, path: str | os.PathLike[str], flag: str | None = None) -> None:
        self.path = str(path)
        target, st = write_target(path, flag)
        self.target, self.tmp = target, None
        try:
            if st is not None and stat.S_ISCHR(st.st_mode):
                self.fh = open(target, "a", encoding="utf-8", newline="\n")  # noqa: SIM115
                return
            fd, self.tmp = _temp_beside(target, st)
            self.fh = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        except OSError as exc:
            self._drop()
            raise CellspecError(f"cannot write {path}: {exc.strerror or exc}") from None

    def write(self, text: str) -> None:
        """Append ``text`` (to the temporary file, or the device)."""
        try:
            self.fh.write(text)
        except OSError as exc:
            raise CellspecError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def commit(self) -> None:
        """Publish what was written (rename over the target)."""
        try:
            self.fh.close()
            if self.tmp is not None:
                os.replace(self.tmp, self.target)
                self.tmp = None
        except OSError as exc:
            self._drop()
            raise CellspecError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def abort(self) -> None:
        """Drop what was written; the target is left as it was."""
        try:
            self.fh.close()
        except OSError:
            pass
        self._drop()

    def _drop(self) -> None:
        if self.tmp is not None and os.path.exists(self.tmp):
            os.unlink(self.tmp)
        self.tmp = None
