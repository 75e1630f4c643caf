"""The generate-verify-repair loop (Algorithms 2 and 3 of seed 000) with a safety gate.

translate -> parse (the DSL decides what the spec means) -> for up to ``t_max`` attempts:
candidate -> spec conformance (part count, max height) -> clingo check -> accept, or
repair with CP-SAT (minimal change), or re-prompt with only the violated constraints
phi(E) (rule, parts, message). When the adapter proposes nothing (or nothing usable),
the solver generates the layout. A final safety gate (:func:`gate`) sequences the layout
and re-verifies it with clingo: no layout that fails a rule ever leaves.

Each layout is converted to a typed :class:`~cellspec.layout.Layout` once and checked once:
the gate's check is the sequencer's own re-verification of the ordered layout, and the
solver's build (:func:`reference`, generated once per spec) was sequenced and verified when
it was built, so it is not sequenced again. The orchestrator uses the public functions
here (``gate``, ``conformance``, ``reference``, ``max_height``, ``error_text``).
"""

from __future__ import annotations

import hashlib
import pickle
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
from cellspec.core.status import Status
from cellspec.dsl.design import Constraint, DesignSpec, MaxHeightConstraint
from cellspec.dsl.model import Cell
from cellspec.layout import Layout, layout_from_obj
from cellspec.solver.cpsat.generate import GenerateResult, generate
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.cpsat.results import Step
from cellspec.solver.cpsat.sequence import plan
from cellspec.solver.intent import evaluate, failing, why_not
from cellspec.solver.result import Verdict
from cellspec.solver.verify import check

DEFAULT_T_MAX = 3
Violation = tuple[str, tuple[str, ...], str]  # (rule, parts, message): one entry of phi(E)
_REF_CACHE: dict[tuple[str, str, float], Reference] = {}  # (content_key(cell), spec, limit)


@dataclass(frozen=True)
class Gated:
    """A layout through the safety gate: with its placement order, the grip of every step
    and the clingo verdict of exactly this ordered layout (a pass)."""

    layout: Layout
    steps: tuple[Step, ...]
    verdict: Verdict

    def plan_json(self) -> dict[str, Any]:
        """The ``plan`` object of the design JSON: the order and the grips."""
        return {"order": list(self.layout.order or ()),
                "grips": [s.to_json() for s in self.steps]}


@dataclass(frozen=True)
class DesignResult:
    """The outcome of one command; ``final`` is only ever a gated (re-verified) layout."""

    spec: str | None
    outcome: str  # accepted | repaired | generated | rejected
    reason: str | None
    final: Gated | None
    calls: int
    seconds: float
    repairs: int = 0
    attempts: int = 0
    records: tuple[CallRecord, ...] = field(default_factory=tuple)
    # the intent clauses decided on the final layout (or, refused, on the solver's build)
    intent: tuple[dict[str, Any], ...] | None = None
    intent_of: str | None = None  # "layout" | "solver build" | None

    @property
    def layout(self) -> dict[str, Any] | None:
        """The layout JSON (metres, with its order), or None."""
        return None if self.final is None else self.final.layout.to_json()

    @property
    def plan(self) -> dict[str, Any] | None:
        """The assembly plan JSON (order and grips), or None."""
        return None if self.final is None else self.final.plan_json()

    def record(self) -> CommandRecord:
        """Outcome, LLM calls (with tokens and latency), repairs and latency."""
        return CommandRecord(self.outcome, self.records, self.repairs, self.attempts,
                             self.seconds)

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "outcome": self.outcome, "reason": self.reason,
                "layout": self.layout, "plan": self.plan, "calls": self.calls,
                "seconds": round(self.seconds, 4),
                "intent": None if self.intent is None else list(self.intent),
                "intent_of": self.intent_of}


@dataclass(frozen=True)
class Reference:
    """The solver's own build of a spec (:func:`generate`) and, when it built one, its
    layout as a typed :class:`Layout` (with the order it was sequenced and verified in)."""

    result: GenerateResult
    layout: Layout | None

    @property
    def parts(self) -> int | None:
        """How many parts the solver's build has (None: it built nothing)."""
        return None if self.layout is None else len(self.layout)


def content_key(cell: Cell) -> str:
    """A digest of the cell's content (its pickle): equal for equal cells, different for a
    cell whose rules, parts or constants were edited (its path and name may stay)."""
    return hashlib.sha256(pickle.dumps(cell, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()


def reference(cell: Cell, spec: DesignSpec, time_limit: float) -> Reference:
    """The solver's build of ``spec`` in ``cell``, generated once per (cell, spec, limit):
    the loop, the orchestrator and the fault injector ask for it more than once. Keyed by
    the cell's content, so a cell edited and reloaded at the same path is built anew."""
    key = (content_key(cell), repr(spec), time_limit)
    if key not in _REF_CACHE:
        if len(_REF_CACHE) > 256:
            _REF_CACHE.clear()
        g = generate(cell, spec, time_limit=time_limit)
        lay = None if g.layout is None else layout_from_obj(g.layout, "<design>")
        _REF_CACHE[key] = Reference(g, lay)
    return _REF_CACHE[key]


def wanted_parts(ref: Reference, spec: DesignSpec) -> int:
    """The part count a layout for ``spec`` must have: the solver's build's, else the sum
    of the structures' ``n``."""
    n = ref.parts
    return n if n is not None else sum(int(s.params.get("n", 0)) for s in spec.structures)


def max_height(spec: DesignSpec) -> float | None:
    """The lowest ``max height`` of the spec and its structures (None: no limit)."""
    hs = [float(c.h) for c in spec.constraints if isinstance(c, MaxHeightConstraint)]
    for s in spec.structures:
        hs += [float(c.h) for c in s.constraints if isinstance(c, MaxHeightConstraint)]
    return min(hs) if hs else None


def _simple(spec: DesignSpec) -> bool:
    """Specs whose every constraint the loop can check on a proposal (the intent clauses
    decide count, max height, inside, symmetric, apart and keep-clear boxes; a cell
    keep-out by name is the cell's rule); others (keep clear of a half-space) are built
    by the solver, which encodes them."""
    ok = ("count", "max_height", "inside", "symmetric", "apart")

    def fine(c: Constraint) -> bool:
        return c.kind in ok or (c.kind == "keep_clear" and (
            c.zone_name is not None or getattr(c.zone, "kind", "") == "box"))
    return all(fine(c) for c in spec.constraints) and all(
        fine(c) for s in spec.structures for c in s.constraints)


def conformance(cell: Cell, layout: Layout, spec: DesignSpec, want: int,
                intent: bool = True) -> list[Violation]:
    """What the clingo check does not see: the spec's part count, max height, part types
    and (``intent``) every intent clause (:mod:`cellspec.solver.intent`, one clingo call);
    the loop, the orchestrator's Inspect and the gate apply it."""
    out: list[Violation] = []
    n = len(layout)
    if n != want:
        out.append(("spec_count", (), f"the spec needs {want} parts, the layout has {n}"))
    unknown = [pid for pid, t in zip(layout.ids, layout.types, strict=True)
               if t not in cell.part_types]
    if unknown:
        out.append(("spec_type", tuple(unknown), "unknown part type (types: "
                    + ", ".join(cell.part_types) + ")"))
        return out
    h = max_height(spec)
    if h is not None:
        size = layout.resolve(cell)
        for i, pid in enumerate(layout.ids):
            top = float(layout.pos[i][2]) + float(size[i][2]) / 2
            if top > h + 1e-9:
                out.append(("spec_max_height", (pid,),
                            f"{pid} reaches {top:.4f} m, above max height {h:g}"))
    if not out and intent:  # the intent rules (cellspec.solver.intent), clause by clause
        out += [("intent", (), f"intent: {r.clause.text} ({r.clause.source}): {r.detail}")
                for r in failing(evaluate(cell, layout, spec))]
    return out


def gate(cell: Cell, layout: Layout, spec: DesignSpec, want: int, time_limit: float,
         prior: Gated | None = None) -> tuple[Gated | None, str | None]:
    """The safety gate: the spec's conformance, an assembly sequence, and a clingo pass of
    the ordered layout; (the gated layout, None) or (None, the reason).

    The sequencer re-verifies the order it finds with clingo (``PlanResult.verdict``): that
    is the gate's check, made once. ``prior``: this very layout already went through the
    sequencer and its verification (an earlier gate, or the generator, which sequences and
    verifies its build with every rule of the cell plus the spec's keep-clear zones);
    then only the conformance is re-tested and nothing is solved again."""
    bad = conformance(cell, layout, spec, want, intent=False)
    if bad:
        return None, "safety gate: " + "; ".join(m for _, _, m in bad)
    if prior is not None and prior.verdict.verdict == Status.PASS:
        return _intent_gate(cell, layout, spec, want, prior)
    p = plan(cell, layout, time_limit=time_limit)
    if p.status not in (Status.OPTIMAL, Status.FEASIBLE) or not p.steps:
        return None, f"safety gate: no assembly sequence: {p.reason}"
    v = p.verdict
    assert v is not None  # a found sequence carries its verdict (PlanResult's invariant)
    if v.verdict != Status.PASS:
        detail = v.reason or "; ".join(f"{x.rule}({', '.join(x.parts)}): {x.message}"
                                       for x in v.violations[:5])
        return None, f"safety gate: the layout fails the check: {detail}"
    return _intent_gate(cell, layout, spec, want, Gated(layout.with_order(p.order), p.steps, v))


def _intent_gate(cell: Cell, layout: Layout, spec: DesignSpec, want: int, gated: Gated
                 ) -> tuple[Gated | None, str | None]:
    """The last step of the gate, after the cell's rules: every intent clause holds."""
    bad = conformance(cell, layout, spec, want)
    if bad:
        return None, "safety gate: " + "; ".join(m for _, _, m in bad)
    return gated, None


def reference_gated(ref: Reference) -> Gated | None:
    """The solver's build as a gated layout (it was sequenced and verified when built)."""
    g = ref.result
    if ref.layout is None or g.verdict is None or not g.steps:
        return None
    return Gated(ref.layout, tuple(g.steps), g.verdict)


def translate_spec(command: str, cell: Cell, adapter: Adapter
                   ) -> tuple[str | None, DesignSpec | None, str | None]:
    """Translate and parse (once more with the parse error as feedback when the adapter
    re-translates): (text, spec, None), or (the last text, None, why not)."""
    text: str | None = None
    diag: str | None = None
    for _ in range(2 if adapter.retranslates else 1):
        try:
            text = adapter.translate(command, cell, feedback=diag)
        except TranslateError as exc:
            return text, None, error_text(exc)
        except LLMUnavailable:  # the environment, not the command: exit 2, said so
            raise
        except CellspecError as exc:
            return text, None, f"cannot translate: {error_text(exc)}"
        try:
            return text, parse_spec(text), None
        except CellspecError as exc:
            diag = str(exc)
    return text, None, f"cannot translate: the spec does not parse: {diag}"


@dataclass
class _Tries:
    """The proposal loop's outcome: attempts and solver repairs made, the layout chosen
    and how (``accepted`` / ``repaired``), the last reason a proposal was not used."""

    attempts: int = 0
    repairs: int = 0
    outcome: str | None = None
    chosen: Layout | None = None
    note: str | None = None


def run_design(command: str, cell: Cell, adapter: Adapter, *, t_max: int = DEFAULT_T_MAX,
               time_limit: float = 10.0, spec_text: str | None = None,
               spec: DesignSpec | None = None, reset: bool = True,
               feedback: Feedback | None = None, repair_ok: bool = True,
               generate_ok: bool = True) -> DesignResult:
    """Translate, propose, verify, repair or re-prompt, generate; gate; never raise for a
    command that cannot be translated or built (outcome ``rejected`` with the reason).

    ``spec_text``: an already translated spec (the orchestrator's Plan phase), ``spec``: its
    parse when the caller has it; ``reset``: start a new command's call records;
    ``feedback``: phi(E) for the first proposal (a re-prompt). ``repair_ok=False,
    generate_ok=False`` is the paper's LLM-AdaptLoop baseline (re-prompt with phi(E) only;
    no solver repair, no solver generation). Each proposal is converted to a Layout once
    and checked once; the gate sequences once (its sequencer's verification is the check);
    the solver's build is generated once per spec and not sequenced again."""
    t0 = time.perf_counter()
    if reset:
        adapter.reset()
    text: str | None = spec_text
    tries = _Tries()

    def done(outcome: str, reason: str | None, final: Gated | None = None) -> DesignResult:
        return DesignResult(text, outcome, reason, final, adapter.calls,
                            time.perf_counter() - t0, tries.repairs, tries.attempts,
                            tuple(adapter.records))

    if spec_text is None:
        text, spec, why = translate_spec(command, cell, adapter)
        if spec is None:
            return done("rejected", why)
    elif spec is None:
        try:
            spec = parse_spec(spec_text)
        except CellspecError as exc:
            return done("rejected", f"cannot translate: the spec does not parse: {error_text(exc)}")
    ref = reference(cell, spec, time_limit)
    want = wanted_parts(ref, spec)
    tries = _proposals(cell, adapter, spec, want, feedback, t_max, time_limit, repair_ok)
    note = tries.note
    if tries.outcome is not None and tries.chosen is not None:
        final, why = gate(cell, tries.chosen, spec, want, time_limit)
        if final is not None:
            return done(tries.outcome, None, final)
        note = why
    if not generate_ok:
        return done("rejected", f"no verified proposal within {t_max} attempts: {note}")
    if ref.layout is None:
        return done("rejected", f"cannot build: {ref.result.reason}")
    broken = failing(evaluate(cell, ref.layout, spec, command))
    if broken:  # the solver's nearest build is not what was asked: say so, in numbers
        return done("rejected", why_not(cell, spec, broken, ref.result.structures))
    final, why = gate(cell, ref.layout, spec, want, time_limit, prior=reference_gated(ref))
    if final is None:
        return done("rejected", why)
    if note and tries.attempts:
        note = f"built from the spec by the solver; the proposal was not used: {note}"
    return done("generated", note, final)


def _proposals(cell: Cell, adapter: Adapter, spec: DesignSpec, want: int,
               feedback: Feedback | None, t_max: int, time_limit: float,
               repair_ok: bool) -> _Tries:
    """Up to ``t_max`` proposals: each converted, conformance-checked, verified, and
    (``repair_ok``) repaired when it fails; re-prompted with phi(E) otherwise."""
    tries = _Tries()
    for attempt in range(1, t_max + 1):
        tries.attempts = attempt
        try:
            cand = adapter.propose(spec, cell, feedback)
        except BudgetExceeded as exc:
            tries.note = error_text(exc)
            break
        except LLMUnavailable:
            raise
        except CellspecError as exc:
            feedback = Feedback(attempt, (("format", (), error_text(exc)),))
            tries.note = error_text(exc)
            continue
        if cand is None:
            break
        if not _simple(spec):
            tries.note = "the spec has constraints only the solver encodes; proposal not used"
            break
        try:
            lay = layout_from_obj(cand, "<proposal>")
        except CellspecError as exc:
            feedback = Feedback(attempt, (("format", (), error_text(exc)),))
            tries.note = f"the proposal is malformed: {error_text(exc)}"
            continue
        bad = conformance(cell, lay, spec, want, intent=False)  # intent: at the gate
        if bad:
            feedback = Feedback(attempt, tuple(bad))
            tries.note = "; ".join(m for _, _, m in bad)
            continue
        try:
            v = check(cell, lay, timeout=time_limit)
        except CellspecError as exc:
            feedback = Feedback(attempt, (("format", (), error_text(exc)),))
            tries.note = f"the proposal cannot be checked: {error_text(exc)}"
            continue
        if v.verdict == Status.PASS:
            tries.outcome, tries.chosen = "accepted", lay
            break
        if v.verdict == Status.FAIL and repair_ok:
            try:
                r = repair(cell, lay, time_limit=time_limit, checked=v)
            except CellspecError:
                r = None
            tries.repairs += 1
            if r is not None and r.layout is not None:
                tries.outcome, tries.chosen = "repaired", layout_from_obj(r.layout, "<design>")
                break
        feedback = Feedback(attempt, tuple((x.rule, tuple(x.parts), x.message)
                                           for x in v.violations) or
                            (("unknown", (), v.reason or "unknown"),))
        tries.note = "the proposal fails " + ", ".join(sorted({x.rule for x in v.violations}))
    return tries


def intent_report(cell: Cell, spec: DesignSpec | None, final: Gated | None,
                  command: str | None, time_limit: float
                  ) -> tuple[tuple[dict[str, Any], ...] | None, str | None]:
    """The intent clauses (JSON) decided on the final layout, or, with none, on the
    solver's build of the spec (what it could build and which clause that breaks)."""
    if spec is None:
        return None, None
    lay, of = (final.layout, "layout") if final is not None else (None, None)
    if lay is None:
        try:
            ref = reference(cell, spec, time_limit)  # cached: nothing is solved again
        except CellspecError:  # the spec cannot be built at all (said in the reason)
            return None, None
        lay, of = ref.layout, "solver build"
    if lay is None:
        return None, None
    return tuple(r.to_json() for r in evaluate(cell, lay, spec, command)), of


def error_text(exc: CellspecError) -> str:
    """The messages of an error, joined; a position is kept where the error has a line."""
    return "; ".join(d.message if not d.line else str(d) for d in exc.diagnostics)
