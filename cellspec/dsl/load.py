"""Loading rule files: bounded reads, textX parsing with every syntax error as
file:line:col, and the import graph (standard library names and relative paths, cycles).

The first of the parser's three stages (load, build the typed model, lower rules to the
IR): it yields parsed files in load order and knows nothing of their meaning.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

from textx import get_location
from textx.exceptions import TextXError, TextXSyntaxError

from cellspec.core.errors import CellspecError, Diagnostic, DiagnosticSink, line_col
from cellspec.core.io import TooLarge, read_text_bounded
from cellspec.core.names import unknown
from cellspec.dsl.language import get_metamodel

# textX parses a few hundred to 1 000 one-line rules a second (linear, but ~3 000 Python
# calls a rule; `fmt` parses three times): a 1 MB file took minutes to load or format, so a
# file beyond this (about 1 000 one-line rules) is refused up front, naming the cap
MAX_RULE_FILE_BYTES = 64 * 1024
STDLIB = ("physical", "stability", "diagnosis")
_PKG_ROOT = Path(__file__).resolve().parent.parent  # .../cellspec


def display_path(path: str | os.PathLike[str]) -> str:
    """Path as shown to users: package files as ``cellspec/...``, others relative to cwd."""
    p = Path(path).resolve()
    try:
        return str(Path("cellspec") / p.relative_to(_PKG_ROOT))
    except ValueError:
        pass
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return str(p) if rel.startswith("..") else rel


def stdlib_path(name: str) -> Path:
    """Filesystem path of a standard-library rule file shipped in the package."""
    return Path(str(resources.files("cellspec.rules").joinpath(f"{name}.cell")))


def read_rule_file(path: Path) -> str:
    """Read a rule file as UTF-8 text, turning I/O problems into diagnostics."""
    shown = display_path(path)
    try:
        return read_text_bounded(path, MAX_RULE_FILE_BYTES)
    except IsADirectoryError:
        raise CellspecError(Diagnostic(shown, 0, 0, "is a directory, expected a .cell file")) \
            from None
    except TooLarge as exc:
        raise CellspecError(Diagnostic(shown, 0, 0, f"rule file is {exc} (about 1 000 "
                                       "one-line rules); split it into files that import "
                                       "each other")) from None
    except UnicodeDecodeError as exc:
        raise CellspecError(Diagnostic(shown, 0, 0, f"not UTF-8 text (byte {exc.start})")) \
            from None
    except OSError as exc:
        raise CellspecError(Diagnostic(shown, 0, 0, f"cannot read rule file: {exc.strerror}")) \
            from None


_STATEMENT_START = re.compile(r"^(import|cell|rule|test|design|commit|diagnose|const|predicate)\b",
                              re.M)


def parse_text(text: str, shown: str) -> Any:
    """Parse one file's text; on syntax errors report every broken top-level statement."""
    mm = get_metamodel()
    if not text.strip():
        raise CellspecError(Diagnostic(shown, 1, 1, "empty rule file: expected import, cell, "
                                       "rule or test"))
    gc_was = gc.isenabled()
    gc.disable()  # the parse allocates ~50 objects a rule and frees none: the cycle collector
    try:          # would only re-scan them (measured: parsing takes twice as long with it)
        model = mm.model_from_str(text, file_name=shown)
        if not hasattr(model, "statements"):  # only comments: textX gives ''
            return _Empty()
        return model
    except TextXSyntaxError as first:
        diags = [_syntax_diag(first, shown, text)]
        # Recovery: parse each top-level statement on its own to find further errors.
        starts = [m.start() for m in _STATEMENT_START.finditer(text)] + [len(text)]
        for a, b in zip(starts, starts[1:], strict=False):
            line0, _ = line_col(text, a)
            if (line0, 1) < (first.line or 0, first.col or 0):
                continue
            chunk = "\n" * (line0 - 1) + text[a:b]
            try:
                mm.model_from_str(chunk, file_name=shown)
            except TextXSyntaxError as exc:
                if (exc.line, exc.col) != (first.line, first.col):
                    diags.append(_syntax_diag(exc, shown, text))
            except TextXError:
                pass
            if len(diags) >= 20:
                break
        raise CellspecError(diags) from None
    except TextXError as exc:
        raise CellspecError(Diagnostic(shown, exc.line or 0, exc.col or 0, str(exc))) from None
    except RecursionError:
        raise CellspecError(Diagnostic(shown, 0, 0, "expression nested too deeply")) from None
    finally:
        if gc_was:
            gc.enable()


class _Empty:
    """The model of a file holding only comments."""

    statements: list[Any] = []


def _syntax_diag(exc: TextXSyntaxError, shown: str, text: str = "") -> Diagnostic:
    msg = str(getattr(exc, "message", None) or exc)
    msg = re.sub(r"^\S*:\d+:\d+:\s*", "", msg)
    expected = re.search(r"Expected (.*?)(?: at position| =>|$)", msg, re.S)
    if expected:
        pretty: list[str] = []
        for it in (e.strip() for e in expected.group(1).split(" or ")):
            it = it.strip("'")
            if it == "Not":  # textX's rendering of a keyword exclusion, not a token
                continue
            if it.startswith("[A-Za-z_]") or it == "Name":
                it = "a name"
            elif it.startswith("[-+]?") or it == "Num":
                it = "a number"
            elif it.startswith("(") and it.endswith("\\b"):
                it = " or ".join(f"'{w}'" for w in it[1:-3].split("|"))
            elif it.startswith('"') or it == "STRING":
                it = "a string"
            elif it.startswith("\\/"):
                it = "a comment"
            else:
                it = f"'{it}'"
            if it not in pretty:
                pretty.append(it)
        msg = f"syntax error: expected {', '.join(pretty[:10])}"
    else:
        msg = "syntax error: " + msg
    line, col = exc.line or 0, exc.col or 0
    if text and line:
        rows = text.split("\n")
        if line <= len(rows):
            found = rows[line - 1][max(col - 1, 0):].strip()
            msg += f", found '{found[:30]}'" if found else ", found the end of the line"
        else:
            msg += ", found the end of the file"
    return Diagnostic(shown, line, col, msg)


@dataclass
class SourceFile:
    """One loaded rule file: its path, the name shown in diagnostics, its text, the textX
    model, its length scale (1/1000 for `units mm`) and the files it imports."""

    path: Path
    shown: str
    text: str
    model: Any
    scale: Fraction = Fraction(1)
    imports: list[Path] = field(default_factory=list)


def file_scale(model: Any) -> Fraction:
    """The length scale of a parsed file: 1/1000 when its cell says ``units mm``."""
    for st in model.statements:
        if type(st).__name__ == "Cell":
            for item in st.items:
                if type(item).__name__ == "Units" and item.unit == "mm":
                    return Fraction(1, 1000)
    return Fraction(1)


def path_key(p: Path) -> Path:
    """The identity of a file in the import graph: its resolved path when it exists."""
    return p.resolve() if p.exists() else p


def load_files(path: Path, files: dict[Path, SourceFile], order: list[Path],
               sink: DiagnosticSink, stack: list[Path],
               at: Diagnostic | None, parsed: tuple[str, Any] | None = None) -> None:
    """Load ``path`` and, first, everything it imports into ``files`` (keyed by
    :func:`path_key`), appending each key to ``order`` once it is complete (imports before
    their importer); problems go to ``sink``, ``at`` locates the import that led here."""
    key = path_key(path)
    if key in files:
        return
    if key in stack:
        cycle = " -> ".join(display_path(p) for p in stack + [key])
        d = at or Diagnostic(display_path(key), 0, 0, "")
        sink.add(d.file, d.line, d.col, f"import cycle: {cycle}")
        return
    shown = display_path(key)
    if not key.exists():
        if at is not None:
            sink.add(at.file, at.line, at.col, f"imported file not found: {shown}")
        else:
            sink.add(shown, 0, 0, "no such file")
        return
    try:
        if parsed is not None and parsed[1] is not None:
            text, model = parsed
        else:
            text = read_rule_file(key)
            model = parse_text(text, shown)
    except CellspecError as exc:
        for d in exc.diagnostics:
            sink.add(d.file, d.line, d.col, d.message)
        return
    f = SourceFile(key, shown, text, model, file_scale(model))
    for target, here in imports_of(model, key, shown, sink):
        f.imports.append(path_key(target))
        load_files(target, files, order, sink, stack + [key], here)
    files[key] = f
    order.append(key)


def imports_of(model: Any, key: Path, shown: str,
               sink: DiagnosticSink) -> Iterator[tuple[Path, Diagnostic]]:
    """Each ``import`` of the parsed file ``key`` (shown as ``shown``): the file it names
    and where it is written; an unknown standard-library name is reported to ``sink`` and
    skipped. Shared by the working-tree loader and the git-ref loader (dsl/gitref.py)."""
    for st in model.statements:
        if type(st).__name__ != "Import":
            continue
        loc = get_location(st)
        here = Diagnostic(shown, loc["line"], loc["col"], "")
        if st.name:
            if st.name not in STDLIB:
                sink.add(shown, loc["line"], loc["col"],
                         unknown("standard library", st.name, STDLIB)
                         + "; import a file with a quoted path")
                continue
            yield stdlib_path(st.name), here
        else:
            yield key.parent / st.path, here

