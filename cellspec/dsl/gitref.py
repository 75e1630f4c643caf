"""Loading a cell as committed at a git ref, with its imports (standard library names and
relative paths) read from the same ref: what ``cellspec diff --against`` and ``cellspec test
--baseline`` compare the working tree with.

The traversal is :func:`cellspec.dsl.load.load_files`'s, with one difference: a file's text
comes from ``git cat-file`` at the ref instead of the disk. A file outside the checkout (the
installed standard library when the rules live in another repository) is read from the disk,
and :attr:`GitTree.outside` names it so the caller can say so.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cellspec.core.errors import CellspecError, Diagnostic, DiagnosticSink
from cellspec.dsl.build import CellBuilder
from cellspec.dsl.load import (
    MAX_RULE_FILE_BYTES,
    SourceFile,
    display_path,
    file_scale,
    imports_of,
    load_files,
    parse_text,
    path_key,
    read_rule_file,
)
from cellspec.dsl.model import Cell

GIT_SECONDS = 30  # one git call; a hung git is an error, not a hang


def run_git(cwd: Path, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    """``git -C cwd ARGS`` (bounded); CellspecError when git cannot run."""
    try:
        return subprocess.run(["git", "-C", str(cwd), *args], input=data, capture_output=True,
                              timeout=GIT_SECONDS, check=False)
    except FileNotFoundError:
        raise CellspecError("git is not installed (needed to read a git ref)") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CellspecError(f"cannot run git: {exc}") from None


def _last_line(r: subprocess.CompletedProcess) -> str:
    why = r.stderr.decode("utf-8", "replace").strip().splitlines()
    return why[-1] if why else f"git exited with {r.returncode}"


@dataclass
class GitTree:
    """The files of one commit of the git checkout holding ``where``; CellspecError when
    ``where`` is in no checkout or ``ref`` names no commit."""

    ref: str
    where: Path
    top: Path = field(init=False)
    commit: str = field(init=False)
    outside: list[str] = field(default_factory=list)  # files read from the disk instead
    _texts: dict[Path, str | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        d = self.where if self.where.is_dir() else self.where.parent
        d = d.resolve() if d.exists() else Path.cwd()
        r = run_git(d, "rev-parse", "--show-toplevel")
        if r.returncode != 0:
            raise CellspecError(f"{display_path(self.where)}: not in a git checkout "
                                f"({_last_line(r)}); a git ref needs one")
        self.top = Path(r.stdout.decode("utf-8", "replace").strip()).resolve()
        if self.ref.startswith("-") or not self.ref.strip():
            raise CellspecError(f"git ref {self.ref!r}: not a ref name")
        r = run_git(self.top, "rev-parse", "--verify", "--quiet", f"{self.ref}^{{commit}}")
        if r.returncode != 0:
            raise CellspecError(f"git ref {self.ref!r}: no such commit in {self.top}")
        self.commit = r.stdout.decode().strip()

    def rel(self, path: Path) -> str | None:
        """``path`` relative to the checkout (POSIX), or None when it is outside it."""
        p = Path(os.path.abspath(path))
        try:
            return p.relative_to(self.top).as_posix()
        except ValueError:
            try:
                return p.resolve().relative_to(self.top).as_posix()
            except ValueError:
                return None

    def text(self, path: Path) -> str | None:
        """The file's text at the ref (None when the ref has no such file); a file outside
        the checkout is read from the disk (and named in :attr:`outside`)."""
        if path not in self._texts:
            self._texts[path] = self._read(path)
        return self._texts[path]

    def _read(self, path: Path) -> str | None:
        rel = self.rel(path)
        if rel is None:
            if not path.exists():
                return None
            shown = display_path(path)
            if shown not in self.outside:
                self.outside.append(shown)
            return read_rule_file(path)
        r = run_git(self.top, "cat-file", "--batch", data=f"{self.commit}:{rel}\n".encode())
        if r.returncode != 0:
            raise CellspecError(f"git ref {self.ref}: {rel} not read: {_last_line(r)}")
        head, _, rest = r.stdout.partition(b"\n")
        parts = head.split()
        if len(parts) != 3 or parts[1] != b"blob":
            return None  # missing (or a directory there)
        size = int(parts[2])
        if size > MAX_RULE_FILE_BYTES:
            raise CellspecError(Diagnostic(self.shown(path), 0, 0,
                                           f"rule file is {size} bytes at {self.ref}; the "
                                           f"limit is {MAX_RULE_FILE_BYTES}"))
        try:
            return rest[:size].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CellspecError(Diagnostic(self.shown(path), 0, 0,
                                           f"not UTF-8 text at {self.ref} (byte {exc.start})")
                                ) from None

    def shown(self, path: Path) -> str:
        """How a file read at the ref is named in diagnostics: ``path@REF``."""
        return f"{display_path(path)}@{self.ref}"


def _key(p: Path) -> Path:
    return Path(p).resolve()  # the identity of a file in both trees (as path_key)


def load_cell_at(path: str | os.PathLike[str], tree: GitTree) -> Cell:
    """The cell of ``path`` as committed at ``tree``'s ref, every import from the same ref;
    CellspecError naming ``path@REF:line:col`` on any problem (a missing file included)."""
    files, order = texts_at(Path(path), tree)
    return CellBuilder(files, order, DiagnosticSink()).build(main_key=_key(Path(path)))


def texts_at(path: Path, tree: GitTree) -> tuple[dict[Path, SourceFile], list[Path]]:
    """Every file ``path`` loads at the ref (imports first), parsed; CellspecError on any
    problem, ``no such file`` when the ref has no ``path``."""
    files: dict[Path, SourceFile] = {}
    order: list[Path] = []
    sink = DiagnosticSink()
    _load(_key(path), tree, files, order, sink, [], None)
    sink.raise_if_any()
    return files, order


def _load(key: Path, tree: GitTree, files: dict[Path, SourceFile], order: list[Path],
          sink: DiagnosticSink, stack: list[Path], at: Diagnostic | None) -> None:
    if key in files:
        return
    shown = tree.shown(key)
    if key in stack:
        cycle = " -> ".join(tree.shown(p) for p in [*stack, key])
        d = at or Diagnostic(shown, 0, 0, "")
        sink.add(d.file, d.line, d.col, f"import cycle: {cycle}")
        return
    try:
        text = tree.text(key)
        if text is None:
            if at is not None:
                sink.add(at.file, at.line, at.col, f"imported file not found at {tree.ref}: "
                         f"{display_path(key)}")
            else:
                sink.add(shown, 0, 0, f"no such file at {tree.ref}")
            return
        model: Any = parse_text(text, shown)
    except CellspecError as exc:
        for d in exc.diagnostics:
            sink.add(d.file or shown, d.line, d.col, d.message)
        return
    f = SourceFile(key, shown, text, model, file_scale(model))
    for named, here in imports_of(model, key, shown, sink):
        target = _key(named)
        f.imports.append(target)
        _load(target, tree, files, order, sink, [*stack, key], here)
    files[key] = f
    order.append(key)


def texts_now(path: Path) -> dict[Path, str]:
    """Every file ``path`` loads in the working tree, by :func:`_key`, with its text (the
    files :func:`cellspec.dsl.parser.load_cell` reads); CellspecError on any problem."""
    files: dict[Path, SourceFile] = {}
    sink = DiagnosticSink()
    load_files(path_key(path), files, [], sink, [], None)
    sink.raise_if_any()
    return {_key(k): f.text for k, f in files.items()}
