"""cellspec check: verify a layout against a cell's rules."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cellspec.commands.bounded import (
    LimitHit,
    anytime_grace,
    in_all,
    print_stopped,
    remaining,
    run_bounded,
)
from cellspec.commands.common import (
    EXIT_FAIL,
    EXIT_INPUT,
    EXIT_OK,
    add_shared,
    atomic_write,
    tagged,
)
from cellspec.core.errors import CellspecError
from cellspec.core.limits import check_count, check_output, check_seconds, parse_memory
from cellspec.core.proc import Outcome, call_in_fork
from cellspec.core.status import Status, exit_code

if TYPE_CHECKING:  # types only: the solvers load in the verb's worker (CLI start-up time)
    from cellspec.solver.result import Verdict
    from cellspec.solver.smt.result import RobustResult

# the names of cellspec.solver.checkers.REGISTRY (not imported: the parser is built at
# start-up, the solvers load in the worker); tests/test_checkers.py keeps them equal
BACKENDS = ("clingo", "reference", "z3")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``check`` verb."""
    c = sub.add_parser("check", help="check a layout against a cell's rules",
                       description="Print pass, or every violated rule with its parts, an "
                       "explanation and the file:line:col of the rule. Exit 0 pass, "
                       "1 violations, 2 bad input (and for unknown: a solver limit).")
    add_shared(c, cell=True, layout=True, alias=True, max_memory=True,
               time_limit=(None, "time limit of the whole verb in seconds (verdict unknown "
                           "when hit; --timeout is an alias)"))
    c.add_argument("--backend", choices=BACKENDS, default="clingo",
                   help="clingo (default), the brute-force reference evaluator (small "
                   "layouts) or z3; a rule the backend cannot decide gives unknown "
                   "(docs/backends.md)")
    c.add_argument("--max-bytes", type=int, default=None, metavar="N",
                   help="largest layout file accepted (default 32 MiB)")
    c.add_argument("--robust", type=str, default=None, metavar="TOL",
                   help="also prove (Z3) that the verdict holds when every part is placed up "
                   "to TOL metres off in x and in y, or print a displaced layout that changes "
                   "it; exit 0 only for a robust pass")
    c.add_argument("--robust-timeout", type=float, default=60.0, metavar="S",
                   help="Z3 time limit for --robust in seconds (default 60; unknown when hit)")
    c.add_argument("--witness", default=None, metavar="FILE",
                   help="with --robust: write the counterexample layout (JSON) to FILE")

    c.set_defaults(func=run)


def _compute(a: argparse.Namespace) -> tuple[Verdict, RobustResult | None]:
    """The verb's work (in the bounded worker): the verdict, and the robust result."""
    # lazy: the parser and the solvers load in the worker, not at CLI start-up
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import MAX_LAYOUT_BYTES, load_layout
    from cellspec.solver.verify import check

    cell = load_cell(a.cell)
    layout = load_layout(a.layout, max_bytes=a.max_bytes or MAX_LAYOUT_BYTES,
                         part_types=cell.part_types,  # every layout error in one run
                         flag="--max-bytes")
    v = check(cell, layout, backend=a.backend, timeout=remaining(a.time_limit),
              max_memory=a.max_memory)
    if a.robust is None:
        return v, None
    from cellspec.solver.formal.robust import prove_robust  # lazy: Z3, only with --robust

    left = remaining(a.time_limit)
    t = a.robust_timeout if left is None else min(a.robust_timeout, left)
    # --robust-timeout bounds the whole proof (building and grounding the displaced
    # problem too, not only Z3's search: 13.8 s at --robust-timeout 1 before, issue 31):
    # it runs in a child stopped at the limit plus a grace to hand its answer over
    def proof() -> tuple[Outcome, Any]:
        try:
            return (Outcome.OK, prove_robust(cell, layout, float(a.robust), timeout=t,
                                       backend=a.backend))
        except CellspecError as exc:
            return (Outcome.INPUT, exc.diagnostics)
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: re-raised in the worker
            return (Outcome.INTERNAL, f"{type(exc).__name__}: {exc}")

    kind, got = call_in_fork(proof, seconds=t + anytime_grace(t), extra_memory=None)
    if kind == Outcome.OK:
        what, value = got
        if what == Outcome.INPUT:
            raise CellspecError(value)
        if what == Outcome.INTERNAL:
            raise RuntimeError(value)
        return v, value
    if kind == Outcome.MEMORY:
        raise MemoryError
    if kind != Outcome.TIME:
        raise RuntimeError(f"the robustness proof's process died (exit code {got})")
    from cellspec.core import geometry as g
    from cellspec.solver.formal.robust import validate_tolerance  # lazy: as above
    from cellspec.solver.smt.result import RobustResult  # lazy: as above

    steps = validate_tolerance(float(a.robust))
    return v, RobustResult(
        status=Status.UNKNOWN, tolerance=float(steps * g.RESOLUTION), steps=steps,
        requested=float(a.robust), verdict=_nominal(v.verdict),
        reason=f"not decided within {t:g} s (--robust-timeout bounds the whole proof: "
        "building, grounding and Z3)")


def _nominal(s: Status) -> Literal[Status.PASS, Status.FAIL, Status.UNKNOWN]:
    """A check verdict (one of ``VERDICTS``) as the Literal :class:`RobustResult` stores;
    anything else is a bug, a ValueError (as the model's own validation would raise)."""
    s = Status(s)  # the member itself (``is`` narrows it to the Literal)
    if s is Status.PASS or s is Status.FAIL or s is Status.UNKNOWN:
        return s
    raise ValueError(f"not a check verdict: {s}")


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    if a.time_limit is not None:
        check_seconds(a.time_limit, "--time-limit/--timeout")
    check_seconds(a.robust_timeout, "--robust-timeout")
    check_count(a.max_bytes, "--max-bytes")
    a.max_memory = parse_memory(a.max_memory)
    if a.robust is not None:
        from cellspec.solver.formal.robust import validate_tolerance  # lazy: as above

        validate_tolerance(a.robust)
    elif a.witness is not None:
        raise CellspecError("--witness needs --robust TOL")
    check_output(a.witness, "--witness")
    res = run_bounded(lambda: _compute(a), time_limit=a.time_limit, max_memory=a.max_memory)
    if isinstance(res, LimitHit):  # the budget ran out: unknown, with the reason
        return print_stopped(res, a.format, tagged("verdict", {
            "verdict": str(Status.UNKNOWN), "violations": [], "warnings": [],
            "stats": {"parts": None, "backend": a.backend, "seconds": round(res.seconds, 4)},
            "reason": res.reason, "reason_code": res.kind}),
            f"unknown: {res.reason} ({res.seconds:.3f} s)")
    v, r = res
    if r is not None:
        return _run_robust(a, v, r)
    if a.format == "json":
        print(json.dumps(tagged("verdict", v.to_json()), indent=2))
    else:
        _print_findings(v, v.notes)
        summary = f"({v.parts} parts, {in_all(v.seconds)})"
        if v.verdict == Status.PASS:
            extra = f", {len(v.warnings)} warning(s)" if v.warnings else ""
            print(f"pass{extra} {summary}")
        elif v.verdict == Status.FAIL:
            print(f"fail: {len(v.violations)} violation(s) {summary}")
        else:
            print(f"unknown: {v.reason} {summary}")
    return exit_code(v.verdict, v.reason_code)


def _print_findings(v: Verdict, notes: Iterable[str]) -> None:
    """The violations and warnings of a verdict on stdout, the notes on stderr."""
    for x in v.violations:
        print(f"{x.source}: {x.rule}({', '.join(x.parts)}): {x.message}")
    for x in v.warnings:
        print(f"{x.source}: warning: {x.rule}({', '.join(x.parts)}): {x.message}")
    for x in v.preferences:
        print(f"{x.source}: preference (weight {x.weight}): {x.rule}({', '.join(x.parts)}): "
              f"{x.message}")
    if v.preference_score is not None:
        print(v.preference_score.sentence())
    for n in notes:
        print(f"note: {n}", file=sys.stderr)


def _run_robust(a: argparse.Namespace, v: Verdict, r: RobustResult) -> int:
    """check --robust: the verdict plus a Z3 proof (or counterexample) of its robustness."""
    if a.witness is not None and r.witness is not None:
        atomic_write(Path(a.witness), json.dumps(r.witness, indent=2) + "\n")
    tol = f"{r.tolerance:g} m"
    if a.format == "json":
        out = tagged("verdict", v.to_json())
        out["robust"] = r.to_json()
        print(json.dumps(out, indent=2))
    else:
        _print_findings(v, (*v.notes, *r.notes))
        summary = f"({v.parts} parts, {in_all(v.seconds + r.seconds)})"
        if r.status == Status.REFUTED:
            moved = ", ".join(f"{p} by ({d[0]:+.4f}, {d[1]:+.4f})"
                              for p, d in r.displacement.items())
            if r.verdict == Status.PASS:
                print(f"{r.rule}({', '.join(r.parts)}) fails when displaced: {moved}")
            else:
                print(f"the layout passes when displaced: {moved}")
            if a.witness is None:
                print("witness layout (re-check it with cellspec check):")
                print(json.dumps(r.witness))
        if r.status == Status.UNKNOWN:
            print(f"unknown: robustness to {tol} not decided: {r.reason} {summary}")
        elif v.verdict == Status.PASS:
            print(f"pass (robust to {tol}) {summary}" if r.status == Status.PROVED else
                  f"pass, but not robust to {tol}: {r.rule} breaks {summary}")
        elif v.verdict == Status.FAIL:
            word = "robust" if r.status == Status.PROVED else "not robust"
            print(f"fail: {len(v.violations)} violation(s), {word} to {tol} {summary}")
        else:
            print(f"unknown: {v.reason} {summary}")
    if r.status == Status.UNKNOWN or v.verdict == Status.UNKNOWN:
        return EXIT_INPUT
    return EXIT_OK if r.ok else EXIT_FAIL
