"""User-facing errors: every problem in a rule file or layout carries file:line:col.

The CLI turns a :class:`CellspecError` into exit code 2 and prints each
diagnostic on its own line; nothing here ever reaches the user as a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DIAGNOSTICS = 50


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset in text."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


@dataclass(frozen=True)
class Diagnostic:
    """One problem, located where possible (line and col are 1-based, 0 when unknown)."""

    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        where = self.file or "cellspec"  # usage errors name no file
        if self.line:
            where += f":{self.line}:{self.col}"
        return f"{where}: error: {self.message}"


class CellspecError(Exception):
    """Bad input (rule file, layout, usage); holds one or more diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic | str):
        if isinstance(diagnostics, str):
            diagnostics = [Diagnostic("", 0, 0, diagnostics)]
        elif isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class DiagnosticSink:
    """Collects diagnostics (capped) so a check reports all errors, not only the first."""

    def __init__(self, cap: int = MAX_DIAGNOSTICS):
        self.items: list[Diagnostic] = []
        self.cap = cap
        self.dropped = 0

    def add(self, file: str, line: int, col: int, message: str) -> None:
        """Record one diagnostic, counting those beyond the cap."""
        if len(self.items) < self.cap:
            self.items.append(Diagnostic(file, line, col, message))
        else:
            self.dropped += 1

    def raise_if_any(self) -> None:
        """Raise a CellspecError holding everything collected so far."""
        if self.items:
            items = list(self.items)
            if self.dropped:
                items.append(Diagnostic("", 0, 0, f"... and {self.dropped} more errors"))
            raise CellspecError(items)
