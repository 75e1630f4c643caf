"""Live diagnostics of a document: the loader's own messages (the CLI's), as LSP-ready items.

The document's text is parsed in memory (imports are read from disk, with the CLI's
missing-file and cycle messages); a file with no cell and no test (a rule library) is
checked against a throw-away cell, so its rules get the same semantic checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.load import MAX_RULE_FILE_BYTES
from cellspec.dsl.parser import display_path, load_cell, load_cell_text, parse_text
from cellspec.lsp.index import Workspace, build_index, resolve

MAX_LIVE_BYTES = MAX_RULE_FILE_BYTES  # the CLI's limit: past it, one diagnostic says so
_PROBE = "\ncell __lsp_probe__ { workspace x [0, 1] y [0, 1] z [0, 1] }\n"
# a library's rules may name part types or zones of the cells that import it
_PROBE_NOISE = re.compile(r"^unknown (domain|part type|keep-out|zone|surface)|"
                          r"__lsp_probe__|must be a robot \(robots: none defined\)")


@dataclass(frozen=True)
class DiagnosticItem:
    """One diagnostic: 0-based line and column (code points), severity, message."""

    line: int
    col: int
    end_col: int
    severity: str  # error | warning | information
    message: str


def _span(text_lines: list[str], line: int, col: int) -> tuple[int, int, int]:
    """0-based (line, col, end_col) covering the word at a 1-based position."""
    if line <= 0:
        return 0, 0, max(1, len(text_lines[0]) if text_lines else 1)
    ln = min(line - 1, max(len(text_lines) - 1, 0))
    row = text_lines[ln] if text_lines else ""
    c = min(max(col - 1, 0), len(row))
    m = re.match(r"[A-Za-z_0-9.]+|\"[^\"]*\"?|\S", row[c:])
    return ln, c, c + (len(m.group(0)) if m else 1)


def analyse(text: str, path: str) -> list[DiagnosticItem]:
    """Every syntax and semantic diagnostic of the document (never raises)."""
    shown = display_path(path) if path else "<untitled>"
    rows = text.split("\n")
    # a code point is at most 4 bytes: only a buffer that may be over the limit is encoded
    size = len(text.encode("utf-8", "replace")) if 4 * len(text) > MAX_LIVE_BYTES else 0
    if size > MAX_LIVE_BYTES:
        return [DiagnosticItem(0, 0, 1, "error",
                     f"file is {size} bytes: live diagnostics stop at {MAX_LIVE_BYTES} "
                     "bytes, the limit of a .cell file (cellspec check and test refuse it "
                     "too)")]
    if "\x00" in text:
        return [DiagnosticItem(0, 0, 1, "error", "binary content (NUL bytes): not a .cell file")]
    try:
        diags = _load(text, path, shown)
    except RecursionError:
        diags = [Diagnostic(shown, 0, 0, "expression nested too deeply")]
    except Exception as exc:  # a loader bug must not take the editor session down
        diags = [Diagnostic(shown, 0, 0, f"internal error (please report): "
                            f"{type(exc).__name__}: {exc}")]
    out: list[DiagnosticItem] = import_warnings(text, path) if path else []
    for d in diags:
        if d.file and d.file != shown:  # an error inside an imported file
            ln, c, e = _import_span(rows, d)
            out.append(DiagnosticItem(ln, c, e, "error",
                                      f"in {d.file}:{d.line}:{d.col}: {d.message}"))
            continue
        ln, c, e = _span(rows, d.line, d.col)
        sev = "information" if d.message.startswith("save the file") else "error"
        out.append(DiagnosticItem(ln, c, e, sev, d.message))
    return out


def _load(text: str, path: str, shown: str) -> list[Diagnostic]:
    try:
        model = parse_text(text, shown)
    except CellspecError as exc:
        return exc.diagnostics
    kinds = {type(s).__name__ for s in model.statements}
    has_imports = "Import" in kinds
    on_disk = bool(path) and Path(path).is_file()
    library = not ({"Cell", "Test"} & kinds)
    try:
        if library:
            if has_imports and not on_disk:
                return [Diagnostic(shown, 1, 1, "save the file to check it with its imports")]
            probe = text + _PROBE
            if on_disk:
                load_cell(path, parsed=(probe, parse_text(probe, shown)))
            else:
                load_cell_text(probe, shown)
        elif on_disk:
            load_cell(path, parsed=(text, model))
        elif not has_imports:
            load_cell_text(text, shown)
        else:
            return [Diagnostic(shown, 1, 1, "save the file to check it with its imports")]
    except CellspecError as exc:
        if library:
            return [d for d in exc.diagnostics if not _PROBE_NOISE.search(d.message)
                    and d.line <= len(text.split("\n"))]
        return exc.diagnostics
    return []


def _import_span(rows: list[str], d: Diagnostic) -> tuple[int, int, int]:
    """Where to show an imported file's error: on the import line naming it, else line 1."""
    stem = Path(d.file).stem
    for k, row in enumerate(rows):
        s = row.strip()
        if s.startswith("import") and (stem in s):
            return k, row.index("import"), len(row.rstrip())
    return 0, 0, max(1, len(rows[0]) if rows else 1)


def import_warnings(text: str, path: str) -> list[DiagnosticItem]:
    """Cheap lint of the imports: a file imported twice, or already imported through
    another import (its rules are loaded once either way, so the line does nothing)."""
    idx = build_index(text, path)
    ws = Workspace()
    targets = []
    for ref, name in idx.imports:
        if ref is None:
            continue
        t = resolve(ref, path)
        if t is not None and t.exists():
            targets.append((ref, name, t.resolve()))
    out: list[DiagnosticItem] = []
    seen: dict[Path, int] = {}
    for ref, name, t in targets:
        if t in seen:
            out.append(DiagnosticItem(ref.line, ref.col, ref.end_col, "warning",
                            f"'{name}' is already imported on line {seen[t] + 1}"))
            continue
        seen[t] = ref.line
        for oref, oname, ot in targets:
            if ot == t:
                continue
            sub = ws.index_file(ot)
            if sub is None:
                continue
            closure = {Path(d.path).resolve() for d in ws.closure(sub)[1:]}
            if t in closure:
                out.append(DiagnosticItem(ref.line, ref.col, ref.end_col, "warning",
                                f"unused import: '{name}' is already imported through "
                                f"'{oname}' (line {oref.line + 1})"))
                break
    return out
