"""cellspec: declarative rules for robot work cells, decided by solvers.

Public API: :func:`load_cell`, :func:`load_layout`, :func:`check`, :func:`plan`,
:func:`repair`, :func:`generate`, :func:`prove_robust`, :func:`explain`, :func:`lint`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["load_cell", "load_layout", "check", "plan", "repair", "generate", "prove_robust",
           "explain", "lint", "CellspecError", "__version__"]

if TYPE_CHECKING:
    from cellspec.dsl.design import DesignSpec
    from cellspec.dsl.model import Cell
    from cellspec.layout import Layout
    from cellspec.solver.cpsat.generate import GenerateResult
    from cellspec.solver.cpsat.results import PlanResult, RepairResult
    from cellspec.solver.result import Verdict
    from cellspec.solver.smt.result import Explanation, LintReport, RobustResult

from cellspec.core.errors import CellspecError


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


def plan(cell: Cell, layout: Layout, *, time_limit: float = 10.0) -> PlanResult:
    """A complete assembly sequence (support/contact order, grip axis per part) re-verified
    with clingo, or a proof that none exists; frozen PlanResult."""
    from cellspec.solver.cpsat.sequence import plan as _plan

    return _plan(cell, layout, time_limit=time_limit)


def repair(cell: Cell, layout: Layout, *, time_limit: float = 10.0,
           blocked: tuple[str, ...] = (), keep_shape: bool = False) -> RepairResult:
    """Minimal-change repair with CP-SAT (fewest parts moved, then fewest free moves, then
    least L1; ``keep_shape``: rigid structure shifts first), re-verified with clingo;
    ``blocked`` adds keep-out regions such as ``"x > 0.6"`` or ``"box x [0.3, 0.4]"``;
    frozen RepairResult."""
    from cellspec.solver.cpsat.repair import parse_blocked
    from cellspec.solver.cpsat.repair import repair as _repair

    zones = [parse_blocked(b, f"blocked_{k + 1}") for k, b in enumerate(blocked)]
    return _repair(cell, layout, time_limit=time_limit, blocked=zones, keep_shape=keep_shape)


def generate(cell: Cell, spec: DesignSpec | str, *, design: str | None = None,
             time_limit: float = 10.0) -> GenerateResult:
    """Build a design (a DesignSpec, or the path of a .cell file holding designs; ``design``
    picks one of several) with CP-SAT so every error rule of the cell holds, ordered by the
    sequencer and re-verified with clingo; frozen GenerateResult (``infeasible`` with the
    reason when the spec cannot be built in the cell)."""
    from cellspec.dsl.design import DesignSpec as _Spec
    from cellspec.dsl.design import load_designs, pick_design
    from cellspec.solver.cpsat.generate import generate as _generate

    if not isinstance(spec, _Spec):
        spec = pick_design(load_designs(spec), design, str(spec))
    return _generate(cell, spec, time_limit=time_limit)


def prove_robust(cell: Cell, layout: Layout, tolerance: float, *, timeout: float | None = 60.0
                 ) -> RobustResult:
    """Z3: does the verdict hold for every x/y placement error of every part up to
    ``tolerance`` metres (z follows the support)? Frozen RobustResult: ``proved``,
    ``refuted`` with a witness layout re-checked by clingo, or ``unknown`` with the reason."""
    from cellspec.solver.formal.robust import prove_robust as _prove

    return _prove(cell, layout, tolerance, timeout=timeout)


def explain(cell: Cell, layout: Layout, *, timeout: float | None = 60.0,
            max_causes: int = 1) -> Explanation:
    """Z3: a minimal subset of rules and parts that alone already fails (then, with
    ``max_causes`` > 1, further independent ones); frozen Explanation."""
    from cellspec.solver.formal.explain import explain as _explain

    return _explain(cell, layout, timeout=timeout, max_causes=max_causes)


def lint(cell: Cell, parts: dict[str, int] | None = None, *, timeout: float | None = 30.0
         ) -> LintReport:
    """Z3: can any layout of ``parts`` (e.g. ``{"cube": 12}``; default: the cell's largest
    test layout) satisfy every error rule? Minimal conflict sets if not; rules that never
    fire or are implied by others; frozen LintReport."""
    from cellspec.solver.formal.lint import lint as _lint

    return _lint(cell, parts, timeout=timeout)
