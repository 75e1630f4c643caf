"""The generate-verify-repair loop (Algorithms 2 and 3 of seed 000) with a safety gate.

translate -> parse (the DSL decides what the spec means) -> for up to ``t_max`` attempts:
candidate -> spec conformance (part count, max height) -> clingo check -> accept, or
repair with CP-SAT (minimal change), or re-prompt with only the violated constraints
phi(E) (rule, parts, message). When the adapter proposes nothing (or nothing usable),
the solver generates the layout. A final safety gate sequences the layout and re-verifies
it with clingo: no layout that fails a rule ever leaves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from cellspec.agent.base import (
    Adapter,
    BudgetExceeded,
    CallRecord,
    CommandRecord,
    Feedback,
    LLMUnavailable,
    TranslateError,
    parse_spec,
)
from cellspec.core.errors import CellspecError
from cellspec.dsl.design import DesignSpec, MaxHeightConstraint

DEFAULT_T_MAX = 3
_REF_CACHE: dict[tuple[str, str, float], Any] = {}


@dataclass(frozen=True)
class DesignResult:
    """The outcome of one command; ``layout`` is only ever a re-verified layout."""

    spec: str | None
    outcome: str  # accepted | repaired | generated | rejected
    reason: str | None
    layout: dict[str, Any] | None
    plan: dict[str, Any] | None
    calls: int
    seconds: float
    repairs: int = 0
    attempts: int = 0
    records: tuple[CallRecord, ...] = field(default_factory=tuple)

    def record(self) -> CommandRecord:
        """Outcome, LLM calls (with tokens and latency), repairs and latency."""
        return CommandRecord(self.outcome, self.records, self.repairs, self.attempts,
                             self.seconds)

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "outcome": self.outcome, "reason": self.reason,
                "layout": self.layout, "plan": self.plan, "calls": self.calls,
                "seconds": round(self.seconds, 4)}


def _reference(cell: Any, spec: DesignSpec, time_limit: float) -> Any:
    from cellspec.solver.cpsat.generate import generate

    key = (str(getattr(cell, "path", "")) + "|" + str(cell.name), repr(spec), time_limit)
    if key not in _REF_CACHE:
        if len(_REF_CACHE) > 256:
            _REF_CACHE.clear()
        _REF_CACHE[key] = generate(cell, spec, time_limit=time_limit)
    return _REF_CACHE[key]


def _max_height(spec: DesignSpec) -> float | None:
    hs = [float(c.h) for c in spec.constraints if isinstance(c, MaxHeightConstraint)]
    for s in spec.structures:
        hs += [float(c.h) for c in s.constraints if isinstance(c, MaxHeightConstraint)]
    return min(hs) if hs else None


def _simple(spec: DesignSpec) -> bool:
    """Specs whose every constraint the loop can check on a proposal (count, max height);
    others are built by the solver, which encodes them."""
    ok = ("count", "max_height")
    return all(c.kind in ok for c in spec.constraints) and all(
        c.kind in ok for s in spec.structures for c in s.constraints)


def _conformance(cell: Any, layout: Any, spec: DesignSpec,
                 want: int) -> list[tuple[str, tuple[str, ...], str]]:
    """What the clingo check does not see: the spec's part count, max height, part types."""
    out: list[tuple[str, tuple[str, ...], str]] = []
    n = len(layout)
    if n != want:
        out.append(("spec_count", (), f"the spec needs {want} parts, the layout has {n}"))
    unknown = [pid for pid, t in zip(layout.ids, layout.types, strict=True)
               if t not in cell.part_types]
    if unknown:
        out.append(("spec_type", tuple(unknown), "unknown part type (types: "
                    + ", ".join(cell.part_types) + ")"))
        return out
    h = _max_height(spec)
    if h is not None:
        for i, pid in enumerate(layout.ids):
            size = layout.size[i]
            hz = float(cell.part_types[layout.types[i]].size[2]) if size[2] != size[2] \
                else float(size[2])
            top = float(layout.pos[i][2]) + hz / 2
            if top > h + 1e-9:
                out.append(("spec_max_height", (pid,),
                            f"{pid} reaches {top:.4f} m, above max height {h:g}"))
    return out


def _gate(cell: Any, layout: dict[str, Any], spec: DesignSpec, want: int,
          time_limit: float) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """Sequence and re-verify with clingo; (layout with order, plan, None) or a reason."""
    from cellspec.layout import layout_from_obj
    from cellspec.solver.cpsat.sequence import plan
    from cellspec.solver.verify import check

    try:
        lay = layout_from_obj(layout, "<design>")
    except CellspecError as exc:
        return None, None, f"safety gate: the layout is malformed: {exc}"
    bad = _conformance(cell, lay, spec, want)
    if bad:
        return None, None, "safety gate: " + "; ".join(m for _, _, m in bad)
    p = plan(cell, lay, time_limit=time_limit)
    if p.status not in ("optimal", "feasible") or not p.steps:
        return None, None, f"safety gate: no assembly sequence: {p.reason}"
    final = dict(lay.to_json())
    final["order"] = [s.part for s in p.steps]
    v = check(cell, layout_from_obj(final, "<design>"), backend="clingo", timeout=time_limit)
    if v.verdict != "pass":
        detail = v.reason or "; ".join(f"{x.rule}({', '.join(x.parts)}): {x.message}"
                                       for x in v.violations[:5])
        return None, None, f"safety gate: the layout fails the check: {detail}"
    return final, {"order": list(final["order"]),
                   "grips": [s.to_json() for s in p.steps]}, None


def translate_spec(command: str, cell: Any, adapter: Adapter
                   ) -> tuple[str | None, DesignSpec | None, str | None]:
    """Translate and parse (once more with the parse error as feedback when the adapter
    re-translates): (text, spec, None), or (the last text, None, why not)."""
    text: str | None = None
    diag: str | None = None
    for _ in range(2 if adapter.retranslates else 1):
        try:
            text = adapter.translate(command, cell, feedback=diag)
        except TranslateError as exc:
            return text, None, _msg(exc)
        except LLMUnavailable:  # the environment, not the command: exit 2, said so
            raise
        except CellspecError as exc:
            return text, None, f"cannot translate: {_msg(exc)}"
        try:
            return text, parse_spec(text), None
        except CellspecError as exc:
            diag = str(exc)
    return text, None, f"cannot translate: the spec does not parse: {diag}"


def run_design(command: str, cell: Any, adapter: Adapter, *, t_max: int = DEFAULT_T_MAX,
               time_limit: float = 10.0, spec_text: str | None = None, reset: bool = True,
               feedback: Feedback | None = None, repair_ok: bool = True,
               generate_ok: bool = True) -> DesignResult:
    """Translate, propose, verify, repair or re-prompt, generate; gate; never raise for a
    command that cannot be translated or built (outcome ``rejected`` with the reason).

    ``spec_text``: an already translated spec (the orchestrator's Plan phase); ``reset``:
    start a new command's call records; ``feedback``: phi(E) for the first proposal (a
    re-prompt). ``repair_ok=False, generate_ok=False`` is the paper's LLM-AdaptLoop baseline
    (re-prompt with phi(E) only; no solver repair, no solver generation)."""
    from cellspec.layout import layout_from_obj
    from cellspec.solver.cpsat.repair import repair
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    if reset:
        adapter.reset()
    text: str | None = spec_text
    attempts = repairs = 0

    def done(outcome: str, reason: str | None, layout: Any = None, plan: Any = None
             ) -> DesignResult:
        return DesignResult(text, outcome, reason, layout, plan, adapter.calls,
                            time.perf_counter() - t0, repairs, attempts, tuple(adapter.records))

    if spec_text is None:
        text, spec, why = translate_spec(command, cell, adapter)
        if spec is None:
            return done("rejected", why)
    else:
        try:
            spec = parse_spec(spec_text)
        except CellspecError as exc:
            return done("rejected", f"cannot translate: the spec does not parse: {_msg(exc)}")
    ref = _reference(cell, spec, time_limit)
    want = len(ref.layout["parts"]) if ref.layout is not None else sum(
        int(s.params.get("n", 0)) for s in spec.structures)
    outcome, layout, note = None, None, None
    for attempt in range(1, t_max + 1):
        attempts = attempt
        try:
            cand = adapter.propose(spec, cell, feedback)
        except BudgetExceeded as exc:
            note = _msg(exc)
            break
        except LLMUnavailable:
            raise
        except CellspecError as exc:
            feedback = Feedback(attempt, (("format", (), _msg(exc)),))
            note = _msg(exc)
            continue
        if cand is None:
            break
        if not _simple(spec):
            note = "the spec has constraints only the solver encodes; proposal not used"
            break
        try:
            lay = layout_from_obj(cand, "<proposal>")
        except CellspecError as exc:
            feedback = Feedback(attempt, (("format", (), _msg(exc)),))
            note = f"the proposal is malformed: {_msg(exc)}"
            continue
        bad = _conformance(cell, lay, spec, want)
        if bad:
            feedback = Feedback(attempt, tuple(bad))
            note = "; ".join(m for _, _, m in bad)
            continue
        try:
            v = check(cell, lay, timeout=time_limit)
        except CellspecError as exc:
            feedback = Feedback(attempt, (("format", (), _msg(exc)),))
            note = f"the proposal cannot be checked: {_msg(exc)}"
            continue
        if v.verdict == "pass":
            outcome, layout = "accepted", lay.to_json()
            break
        if v.verdict == "fail" and repair_ok:
            try:
                r = repair(cell, lay, time_limit=time_limit)
            except CellspecError:
                r = None
            repairs += 1
            if r is not None and r.layout is not None:
                outcome, layout = "repaired", r.layout
                break
        feedback = Feedback(attempt, tuple((x.rule, tuple(x.parts), x.message)
                                           for x in v.violations) or
                            (("unknown", (), v.reason or "unknown"),))
        note = "the proposal fails " + ", ".join(sorted({x.rule for x in v.violations}))
    if outcome is not None:
        final, plan, why = _gate(cell, layout, spec, want, time_limit)
        if final is not None:
            return done(outcome, None, final, plan)
        note = why
    if not generate_ok:
        return done("rejected", f"no verified proposal within {t_max} attempts: {note}")
    if ref.layout is None:
        return done("rejected", f"cannot build: {ref.reason}")
    final, plan, why = _gate(cell, ref.layout, spec, want, time_limit)
    if final is None:
        return done("rejected", why)
    return done("generated", note, final, plan)


def _msg(exc: CellspecError) -> str:
    return "; ".join(d.message if not d.line else str(d) for d in exc.diagnostics)
