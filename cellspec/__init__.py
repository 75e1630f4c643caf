"""cellspec: declarative rules for robot work cells, decided by solvers.

Public API: :func:`load_cell`, :func:`load_layout`, :func:`check`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["load_cell", "load_layout", "check", "CellspecError", "__version__"]

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell
    from cellspec.layout import Layout
    from cellspec.solver.result import Verdict

from cellspec.dsl.errors import CellspecError


def load_cell(path: str) -> Cell:
    """Load a .cell file with its imports (raises CellspecError with file:line:col)."""
    from cellspec.dsl.parser import load_cell as _load

    return _load(path)


def load_layout(path: str) -> Layout:
    """Load and validate a layout JSON file (raises CellspecError)."""
    from cellspec.layout import load_layout as _load

    return _load(path)


def check(cell: Cell, layout: Layout, *, backend: str = "clingo",
          timeout: float | None = None) -> Verdict:
    """Verify a layout against every rule of the cell; returns a frozen Verdict."""
    from cellspec.solver.verify import check as _check

    return _check(cell, layout, backend=backend, timeout=timeout)
