"""The public entry points of the language: load a .cell file (with its imports) or cell
source text into the typed :class:`~cellspec.dsl.model.Cell`.

Every syntax and semantic problem becomes a diagnostic with file:line:col; semantic
errors are collected (capped) so one run reports all of them. The work is done in three
stages: cellspec/dsl/load.py (files, imports, bounded reads, textX errors), build.py (the
typed model, with cellblock.py for the cell block's items and cases.py for the tests) and
lower.py (rules to the IR). The names importers use (``load_cell``, ``parse_text``,
``display_path``, ...) stay importable from here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from textx import get_location

from cellspec.core.errors import CellspecError, Diagnostic, DiagnosticSink
from cellspec.dsl.build import MAX_CELL_COORD_M, STABILITY_RULES, CellBuilder, halfspace_zone
from cellspec.dsl.cellblock import MAX_PART_MASS_KG
from cellspec.dsl.load import (
    MAX_RULE_FILE_BYTES,
    STDLIB,
    SourceFile,
    display_path,
    file_scale,
    load_files,
    parse_text,
    path_key,
    read_rule_file,
    stdlib_path,
)
from cellspec.dsl.lower import MAX_COUNT_CONST, MESSAGE_FUNCS, PLACEHOLDER
from cellspec.dsl.model import Cell


def load_cell(path: str | os.PathLike[str], parsed: tuple[str, Any] | None = None) -> Cell:
    """Load a .cell file with everything it imports; raise CellspecError on any problem.
    ``parsed``: the file's text and :func:`parse_text` model when the caller has them
    already (the file is then not read and parsed again)."""
    main = Path(path)
    files: dict[Path, SourceFile] = {}
    order: list[Path] = []
    sink = DiagnosticSink()
    load_files(path_key(main), files, order, sink, [], None, parsed)
    sink.raise_if_any()
    return CellBuilder(files, order, sink).build(main_key=path_key(main))


def load_cell_text(text: str, shown: str = "<text>") -> Cell:
    """Build a cell from source text, not a file (e.g. a region given on the command line),
    with the checks and messages of :func:`load_cell`; ``shown`` names it in diagnostics.
    Imports need a file and are refused."""
    model = parse_text(text, shown)
    for st in model.statements:
        if type(st).__name__ == "Import":
            loc = get_location(st)
            raise CellspecError(Diagnostic(shown, loc["line"], loc["col"],
                                           "import needs a file: use load_cell"))
    key = Path(shown)
    f = SourceFile(key, shown, text, model, file_scale(model))
    return CellBuilder({key: f}, [key], DiagnosticSink()).build(main_key=key)


__all__ = ["MAX_CELL_COORD_M", "MAX_COUNT_CONST", "MAX_PART_MASS_KG", "MAX_RULE_FILE_BYTES",
           "MESSAGE_FUNCS", "PLACEHOLDER", "STABILITY_RULES", "STDLIB", "display_path",
           "halfspace_zone", "load_cell", "load_cell_text", "parse_text", "read_rule_file",
           "stdlib_path"]
