"""The orchestrator (Section III-B of seed 000): an explicit state machine over the phases
Plan -> Design -> Inspect -> HumanReview -> PreExecute -> Execute -> Replan.

* Plan: the Specifier translates the command into a spec (DSL text, parsed by the DSL).
* Design: the generate-verify-repair loop (:func:`loop.run_design`) gives a candidate, a
  typed ``Layout`` that already went through the loop's safety gate (its order, grips and
  clingo verdict ride along, :class:`loop.Gated`).
* Inspect: the clingo check plus the spec's part count, types and max height of a
  candidate no phase has checked yet (a reviewer's edit, a repair); a candidate whose
  verdict is known (the Design phase's, a recovery skill's) is not checked again.
* HumanReview (only with ``review``): accept / modify (the reviewer edits the layout file;
  the edit goes back to Inspect, and to Replan when it fails) / reject.
* PreExecute: the safety gate (:func:`loop.gate`): assembly sequencing
  (``cellspec.solver.cpsat.sequence.plan``, whose clingo re-verification of the ordered
  layout is the gate's check); a candidate the gate already passed keeps its sequence.

Each phase checks a layout at most once, and no layout is checked twice (issue 15).
* Execute (only with ``execute``): ``cellspec.robots.sim.simulate`` (the pybullet twin:
  allocation, IK, motions, physics execution, trajectory check) with the PreExecute steps.
  When the twin cannot be imported, cannot run this cell (e.g. no supply) or fails, the
  phase is ``unavailable`` with the reason ("twin not available ..."): nothing pretends.
  A failing execution goes to Replan; a re-plan that gives the layout the twin already
  rejected fails instead of looping.
* Replan: the recovery skills first (``shift`` for workspace/keep-out failures,
  ``flatten`` for height failures, then the solver's minimal-change ``repair``), whose
  output goes straight to Inspect; then a re-prompt (Design with the violated constraints
  phi(E)); then escalation to the human (HumanReview, when reviewing) or Failed.

Routing is deterministic by default. With a ``router`` (e.g. an LLM adapter's ``route``),
the choice at a failure branch point is validated against :data:`TRANSITIONS`; an invalid
choice (or a router error) falls back to the deterministic route and is recorded in the
trace. Every transition taken is checked against the table (a bug raises, never a silent
jump). The trace is returned with the result (``phases`` in the design JSON).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import cellspec.layout
from cellspec.agent.base import Adapter, Feedback, LLMUnavailable
from cellspec.agent.loop import (
    DEFAULT_T_MAX,
    DesignResult,
    Gated,
    Violation,
    conformance,
    error_text,
    gate,
    intent_report,
    max_height,
    reference,
    run_design,
    translate_spec,
)
from cellspec.agent.skills import SkillRegistry
from cellspec.core.errors import CellspecError
from cellspec.core.io import TooLarge, read_text_bounded
from cellspec.core.status import PhaseStatus, Status
from cellspec.layout import Layout, layout_from_obj
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.verify import check

if TYPE_CHECKING:
    from cellspec.dsl.design import DesignSpec
    from cellspec.dsl.model import Cell

PHASES = ("Plan", "Design", "Inspect", "HumanReview", "PreExecute", "Execute", "Replan",
          "Done", "Failed")
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "Plan": ("Design", "Failed"),
    "Design": ("Inspect", "Replan", "Failed"),
    "Inspect": ("HumanReview", "PreExecute", "Replan", "Failed"),
    "HumanReview": ("PreExecute", "Inspect", "Failed"),
    "PreExecute": ("Execute", "Done", "Replan", "Failed"),
    "Execute": ("Done", "Replan", "Failed"),
    "Replan": ("Inspect", "Design", "HumanReview", "Failed"),
}
# every phase may abort to Failed on an error it cannot route (bad input met mid-way)
# failure branch points: where an optional router (an LLM) may choose the next phase
BRANCHES = {"Design": ("Replan", "Failed"), "Inspect": ("Replan",),
            "PreExecute": ("Replan",), "Execute": ("Replan", "Done"),
            "Replan": ("Design", "HumanReview", "Failed")}
MAX_REPLANS = 3
MAX_REVIEWS = 5
Router = Callable[[str, list[str], dict[str, Any]], str]


class TransitionError(RuntimeError):
    """A transition outside the table (a bug in the orchestrator, never user input)."""


@dataclass(frozen=True)
class PhaseStep:
    """One visited phase: how it went and where it routed."""

    phase: str
    status: PhaseStatus
    detail: str | None
    next: str | None
    routed_by: str = "rule"  # rule | llm | rule (llm choice invalid: ...)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "status": self.status, "detail": self.detail,
                "next": self.next, "routed_by": self.routed_by}


@dataclass
class _State:
    """What the phases hand on: one typed candidate ``Layout`` with what is known of it
    (``known``: its violations when a phase already checked it; ``gated``: its sequence and
    verdict when it went through the safety gate), so no phase checks it again."""

    spec_text: str | None = None
    spec: DesignSpec | None = None
    want: int = 0
    candidate: Layout | None = None
    known: tuple[Violation, ...] | None = None
    gated: Gated | None = None
    outcome: str | None = None
    reason: str | None = None
    violations: tuple[Violation, ...] = ()
    final: Gated | None = None
    replans: int = 0
    reprompted: bool = False
    feedback: Feedback | None = None
    reviews: int = 0
    escalated: bool = False
    design: DesignResult | None = None
    execute: dict[str, Any] | None = None
    rejected_by_twin: set[str] = field(default_factory=set)
    trace: list[PhaseStep] = field(default_factory=list)

    @property
    def parsed_spec(self) -> DesignSpec:
        """The parsed spec: the phases after Plan run only once it has one (Plan fails
        without)."""
        assert self.spec is not None, "a phase after Plan ran without a parsed spec"
        return self.spec


@dataclass(frozen=True)
class OrchestratorResult:
    """The design result plus the phase trace (and the twin's report when executed)."""

    result: DesignResult
    phases: tuple[PhaseStep, ...]
    execute: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = self.result.to_json()
        out["phases"] = [p.to_json() for p in self.phases]
        if self.execute is not None:
            out["execute"] = self.execute
        return out


class Reviewer:
    """The terminal reviewer: reads accept / modify / reject lines from ``inp`` (stdin),
    prompts on ``out`` (stderr). ``modify`` writes the layout to ``path``, waits for one
    line (the reviewer edits the file meanwhile), then reads the file back."""

    def __init__(self, inp: TextIO, out: TextIO, path: str | Path) -> None:
        self.inp, self.out, self.path = inp, out, Path(path)

    def ask(self, layout: dict[str, Any], verdict: str) -> tuple[str, Any]:
        """('accept', None), ('reject', why) or ('modify', the edited :class:`Layout`)."""
        parts = layout["parts"]
        print(f"review: {len(parts)} parts, {verdict}", file=self.out)
        for p in parts:
            x, y, z = p["pos"]
            print(f"  {p['id']:<10} {p['type']:<8} ({x:.4f}, {y:.4f}, {z:.4f})", file=self.out)
        misses = 0  # answers that led nowhere: a pipe of garbage must not spin for ever
        while True:
            if misses >= MAX_MISSES:
                return "reject", f"no usable answer after {MAX_MISSES} tries"
            print("accept, modify or reject? [a/m/r] ", end="", file=self.out, flush=True)
            line = self.inp.readline(MAX_LINE)  # bounded: an endless line is not an answer
            if not line:
                return "reject", "no answer (end of input)"
            ans = line.strip().lower()
            if ans in ("a", "accept", "y", "yes"):
                return "accept", None
            if ans in ("r", "reject", "n", "no"):
                return "reject", "rejected by the reviewer"
            misses += 1
            if ans not in ("m", "modify", "e", "edit"):
                print(f"please answer a, m or r (not {ans[:40]!r})", file=self.out)
                continue
            try:
                self.path.write_text(json.dumps({"units": "m", "parts": parts}, indent=2)
                                     + "\n", encoding="utf-8")
            except OSError as exc:
                print(f"cannot write {self.path} ({exc.strerror or exc}); answer a or r",
                      file=self.out)
                continue
            print(f"edit {self.path}, then press Enter ", end="", file=self.out, flush=True)
            if not self.inp.readline(MAX_LINE):
                return "reject", "no answer (end of input)"
            obj, why = _read_edit(self.path)
            if why is not None:
                print(f"{why}; the layout is unchanged", file=self.out)
                continue
            return "modify", obj


MAX_MISSES = 5
MAX_LINE = 4096  # characters read per answer


def _read_edit(path: Path) -> tuple[Layout | None, str | None]:
    """The reviewer's edited layout (validated and converted once), or why it cannot be
    used (unreadable, not JSON, not a layout the loader accepts: NaN, duplicate ids,
    unknown fields, ...)."""
    try:
        text = read_text_bounded(path, cellspec.layout.MAX_LAYOUT_BYTES)
    except TooLarge as exc:
        return None, f"the edited file {path} is {exc}"
    except FileNotFoundError:
        return None, f"the edited file {path} is gone (deleted?)"
    except (OSError, UnicodeDecodeError) as exc:
        why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else \
            (exc.strerror or str(exc))
        return None, f"cannot read the edited file {path} ({why})"
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return None, f"the edited file is not JSON ({why})"
    if not isinstance(obj, dict):
        return None, "the edited file is not a layout object"
    try:
        return layout_from_obj(obj, str(path)), None
    except CellspecError as exc:
        return None, f"the edited layout is not valid: {error_text(exc)}"


class Orchestrator:
    """Runs one command through the phases; see the module docstring."""

    def __init__(self, cell: Cell, adapter: Adapter, *, t_max: int = DEFAULT_T_MAX,
                 time_limit: float = 10.0, reviewer: Reviewer | None = None,
                 execute: bool = False, router: Router | None = None) -> None:
        self.cell = cell
        self.adapter = adapter
        self.t_max = t_max
        self.time_limit = time_limit
        self.reviewer = reviewer
        self.execute = execute
        self.router = router

    # --- machinery -------------------------------------------------------------------
    def _go(self, st: _State, phase: str, status: PhaseStatus, detail: str | None, route: str,
            context: dict[str, Any] | None = None) -> str:
        """Record the phase and return the next one (the router's, when valid)."""
        how = "rule"
        if self.router is not None and phase in BRANCHES and status == PhaseStatus.FAIL:
            options = [p for p in BRANCHES[phase] if p in TRANSITIONS[phase]
                       and (p != "HumanReview" or (self.reviewer is not None
                                                   and st.candidate is not None))]
            try:
                choice = self.router(phase, options, {"detail": detail, **(context or {})})
            except CellspecError as exc:
                how = f"rule (llm router failed: {error_text(exc)})"
            else:
                if choice in options:
                    route, how = choice, "llm"
                else:
                    how = f"rule (llm choice '{choice}' is not allowed; allowed: " \
                          f"{', '.join(options)})"
        if route not in TRANSITIONS[phase]:
            raise TransitionError(f"{phase} -> {route} is not an allowed transition")
        st.trace.append(PhaseStep(phase, status, detail, route, how))
        return route

    def run(self, command: str) -> OrchestratorResult:
        """Run the state machine to Done or Failed."""
        t0 = time.perf_counter()
        self.adapter.reset()
        st = _State()
        phase = "Plan"
        handlers = {"Plan": self._plan, "Design": self._design, "Inspect": self._inspect,
                    "HumanReview": self._review, "PreExecute": self._pre_execute,
                    "Execute": self._execute, "Replan": self._replan}
        steps = 0
        while phase not in ("Done", "Failed"):
            steps += 1
            if steps > 60:
                raise TransitionError("the orchestrator did not terminate in 60 phases")
            try:
                phase = handlers[phase](st, command)
            except LLMUnavailable:  # the environment, not the command: exit 2 at the CLI
                raise
            except CellspecError as exc:  # an error no route handles: abort, with why
                st.reason = f"{phase}: {error_text(exc)}"
                phase = self._go(st, phase, PhaseStatus.FAIL, st.reason, "Failed")
        d = st.design
        ok = phase == "Done" and st.final is not None
        intent, intent_of = intent_report(self.cell, st.spec, st.final if ok else None,
                                          command, self.time_limit)
        if ok and intent is not None and not all(c["holds"] for c in intent):
            # never reached while every path gates on conformance: a last guard, so no
            # layout that breaks its spec is reported as success
            ok = False
            st.reason = "the final layout breaks the spec: " + "; ".join(
                f"{c['clause']}: {c['detail']}" for c in intent if not c["holds"])
        res = DesignResult(
            st.spec_text, (st.outcome or "generated") if ok else "rejected",
            st.reason if ok else (st.reason or "failed"),
            st.final if ok else None, self.adapter.calls,
            time.perf_counter() - t0, d.repairs if d else 0, d.attempts if d else 0,
            tuple(self.adapter.records), intent, intent_of)
        st.trace.append(PhaseStep(phase, PhaseStatus.OK if ok else PhaseStatus.FAIL,
                                  None if ok else res.reason, None))
        return OrchestratorResult(res, tuple(st.trace), st.execute)

    # --- the candidate ---------------------------------------------------------------
    @staticmethod
    def _propose(st: _State, lay: Layout, known: tuple[Violation, ...] | None = None,
                 gated: Gated | None = None) -> None:
        """Make ``lay`` the candidate, with what is already known of it (nothing: the next
        Inspect checks it, the next PreExecute sequences it)."""
        st.candidate, st.known, st.gated = lay, known, gated

    @staticmethod
    def _shown(lay: Layout) -> dict[str, Any]:
        """The candidate as the reviewer sees it and the skills take it: units and parts."""
        return {"units": "m", "parts": lay.to_json()["parts"]}

    # --- phases ----------------------------------------------------------------------
    def _plan(self, st: _State, command: str) -> str:
        st.spec_text, st.spec, why = translate_spec(command, self.cell, self.adapter)
        if st.spec is None:
            st.reason = why
            return self._go(st, "Plan", PhaseStatus.FAIL, st.reason, "Failed")
        return self._go(st, "Plan", PhaseStatus.OK, None, "Design")

    def _design(self, st: _State, command: str) -> str:
        feedback, st.feedback = st.feedback, None
        r = run_design(command, self.cell, self.adapter, t_max=self.t_max,
                       time_limit=self.time_limit, spec_text=st.spec_text, spec=st.spec,
                       reset=False, feedback=feedback)
        st.design = r
        if r.final is None:
            st.reason = r.reason
            return self._go(st, "Design", PhaseStatus.FAIL, r.reason,
                            "Replan" if st.candidate is not None else "Failed")
        n = len(r.final.layout)
        if _fingerprint(r.final.layout) in st.rejected_by_twin:
            st.reason = f"the re-plan gave the layout the twin already rejected ({st.reason})"
            return self._go(st, "Design", PhaseStatus.FAIL, st.reason, "Failed")
        # the loop's gate passed this layout (conformance, sequence, clingo): known clean;
        # the candidate is its parts (no order), the gate's order rides along in ``gated``
        self._propose(st, r.final.layout.with_order(None), known=(), gated=r.final)
        st.outcome = r.outcome
        st.reason = r.reason
        ref = reference(self.cell, st.parsed_spec, self.time_limit)  # cached: nothing is solved
        st.want = ref.parts if ref.parts is not None else n
        return self._go(st, "Design", PhaseStatus.OK, f"{r.outcome}, {n} parts", "Inspect")

    def _check(self, st: _State, lay: Layout) -> tuple[Violation, ...]:
        """The spec's conformance and one clingo check of ``lay``."""
        bad = conformance(self.cell, lay, st.parsed_spec, st.want, intent=False)
        if any(r == "spec_type" for r, _, _ in bad):
            return tuple(bad)
        v = check(self.cell, lay, backend="clingo", timeout=self.time_limit)
        if v.verdict == Status.UNKNOWN:
            return (*bad, ("unknown", (), v.reason or "the check did not finish"))
        rules = tuple((x.rule, tuple(x.parts), x.message) for x in v.violations)
        if not bad and not rules:  # the rules hold: now what was asked
            bad = conformance(self.cell, lay, st.parsed_spec, st.want)
        return (*bad, *rules)

    def _inspect(self, st: _State, command: str) -> str:
        assert st.candidate is not None
        if st.known is None:  # a candidate no phase has checked yet (an edit, a repair)
            st.known = self._check(st, st.candidate)
        st.violations = st.known
        if st.violations:
            what = "; ".join(f"{r}({', '.join(p)})" if p else f"{r}: {m}"
                             for r, p, m in st.violations[:6])
            return self._go(st, "Inspect", PhaseStatus.FAIL, what, "Replan",
                            {"violations": [r for r, _, _ in st.violations]})
        nxt = "HumanReview" if self.reviewer is not None else "PreExecute"
        return self._go(st, "Inspect", PhaseStatus.OK, "re-verified pass (clingo)", nxt)

    def _review(self, st: _State, command: str) -> str:
        assert self.reviewer is not None and st.candidate is not None
        st.reviews += 1
        if st.reviews > MAX_REVIEWS:
            st.reason = f"no decision after {MAX_REVIEWS} reviews"
            return self._go(st, "HumanReview", PhaseStatus.FAIL, st.reason, "Failed")
        verdict = "verified pass" if not st.violations else \
            f"FAILS {', '.join(sorted({r for r, _, _ in st.violations}))} (escalated)"
        ans, payload = self.reviewer.ask(self._shown(st.candidate), verdict)
        if ans == "accept":
            if st.violations:  # an escalated, failing layout can not be accepted
                st.reason = "the reviewer accepted a layout that fails the check: refused"
                return self._go(st, "HumanReview", PhaseStatus.FAIL, st.reason, "Failed")
            return self._go(st, "HumanReview", PhaseStatus.OK, "accepted by the reviewer",
                            "PreExecute")
        if ans == "reject":
            st.reason = str(payload)
            return self._go(st, "HumanReview", PhaseStatus.FAIL, st.reason, "Failed")
        self._propose(st, payload)
        st.outcome = "accepted"
        st.reason = "modified by the reviewer"
        st.escalated = False
        return self._go(st, "HumanReview", PhaseStatus.OK, "modified by the reviewer", "Inspect")

    def _pre_execute(self, st: _State, command: str) -> str:
        assert st.candidate is not None
        final, why = gate(self.cell, st.candidate, st.parsed_spec, st.want, self.time_limit,
                          prior=st.gated)
        if final is None:
            st.reason = why
            st.violations = (("sequence", (), why or "no sequence"),)
            return self._go(st, "PreExecute", PhaseStatus.FAIL, why, "Replan")
        st.final = st.gated = final
        nxt = "Execute" if self.execute else "Done"
        return self._go(st, "PreExecute", PhaseStatus.OK, f"{len(final.steps)} steps, gate pass",
                        nxt)

    def _execute(self, st: _State, command: str) -> str:
        assert st.final is not None
        try:
            from cellspec.robots.sim import simulate  # lazy: the twin (pybullet) is optional
        except ImportError as exc:
            st.execute = {"status": PhaseStatus.UNAVAILABLE,
                          "reason": f"twin not available: cellspec.robots.sim ({exc})"}
            return self._go(st, "Execute", PhaseStatus.UNAVAILABLE, st.execute["reason"], "Done")
        try:
            res = simulate(self.cell, st.final.layout, steps=st.final.steps,
                           time_limit=self.time_limit)
        except CellspecError as exc:  # e.g. the cell declares no supply the twin can use
            st.execute = {"status": PhaseStatus.UNAVAILABLE,
                          "reason": f"the twin cannot run this cell: {error_text(exc)}"}
            return self._go(st, "Execute", PhaseStatus.UNAVAILABLE, st.execute["reason"], "Done")
        except Exception as exc:  # noqa: BLE001 - a twin defect is reported, not hidden
            st.execute = {"status": PhaseStatus.UNAVAILABLE,
                          "reason": f"twin not available: it failed with "
                                    f"{type(exc).__name__}: {exc}"}
            return self._go(st, "Execute", PhaseStatus.UNAVAILABLE, st.execute["reason"], "Done")
        st.execute = {"status": res.verdict, **res.to_json()}
        if res.verdict == Status.PASS:
            return self._go(st, "Execute", PhaseStatus.OK, f"{len(res.actions)} actions executed "
                            "in the twin, all pass", "Done")
        bad = [a for a in res.actions if not a.ok]
        why = res.reason or "the twin rejects the plan"
        if bad:
            why += ": " + "; ".join(f"{a.part} ({a.check}: {a.reason})" for a in bad[:3])
        st.reason = why
        st.violations = tuple(("execute", (a.part,), f"{a.check}: {a.reason}") for a in bad) \
            or (("execute", (), why),)
        st.rejected_by_twin.add(_fingerprint(st.final.layout))
        st.final = None
        return self._go(st, "Execute", PhaseStatus.FAIL, why, "Replan")

    def _recover(self, st: _State) -> tuple[str, Layout, tuple[Violation, ...] | None] | None:
        """shift, flatten, then repair: the first whose output passes verify and the spec;
        (skill, layout, its violations when already known) or None."""
        assert st.candidate is not None
        rules = {r for r, _, _ in st.violations}
        if "format" in rules:
            return None  # not a layout: nothing to shift, flatten or repair
        reg = SkillRegistry(self.cell, self.time_limit)
        lay = {"parts": [{"id": p["id"], "type": p["type"], "pos": list(p["pos"])}
                         for p in self._shown(st.candidate)["parts"]], "order": None}
        tries: list[tuple[str, dict[str, Any]]] = []
        if rules & {"workspace", "keepout"}:
            tries.append(("shift", {"layout": lay}))
        if rules & {"spec_max_height"}:
            tries.append(("flatten", {"layout": lay, "max_layers": self._layers(st)}))
        for name, args in tries:
            r = reg.dispatch(name, args)
            if r.get("ok") and r.get("verdict") == Status.PASS:
                # the skill's clingo check of exactly these parts passed: only the spec's
                # conformance is left to test, and nothing is checked twice
                cand = layout_from_obj({"units": "m", "parts": r["layout"]["parts"]},
                                       "<candidate>")
                if not conformance(self.cell, cand, st.parsed_spec, st.want):
                    return name, cand, ()
        if rules - {"spec_count", "spec_type", "format", "unknown", "sequence", "execute",
                    "intent"}:  # repair knows the cell's rules, not the spec's intent
            try:
                rr = repair(self.cell, st.candidate, time_limit=self.time_limit)
            except CellspecError:
                rr = None
            if rr is not None and rr.layout is not None:
                return "repair", layout_from_obj({"units": "m", "parts": rr.layout["parts"]},
                                                 "<candidate>"), None
        return None

    def _layers(self, st: _State) -> int:
        h = max_height(st.parsed_spec)
        z = min(float(t.size[2]) for t in self.cell.part_types.values())
        return max(1, int((h or z) / z + 1e-9))

    def _replan(self, st: _State, command: str) -> str:
        st.replans += 1
        if st.replans > MAX_REPLANS:
            st.reason = f"gave up after {MAX_REPLANS} re-plans: {st.reason}"
            return self._go(st, "Replan", PhaseStatus.FAIL, st.reason, "Failed")
        if st.candidate is not None and st.violations:
            rec = self._recover(st)
            if rec is not None:
                name, cand, known = rec
                self._propose(st, cand, known)
                st.outcome = "repaired"
                st.reason = f"recovered by {name}"
                return self._go(st, "Replan", PhaseStatus.OK, f"recovery skill {name}", "Inspect")
        if not st.reprompted:
            st.reprompted = True
            st.feedback = Feedback(st.replans, st.violations)
            return self._go(st, "Replan", PhaseStatus.OK, "re-prompt with the violated constraints",
                            "Design")
        detail = "recovery skills and re-prompt did not help"
        malformed = any(r == "format" for r, _, _ in st.violations)
        if self.reviewer is not None and not st.escalated and st.candidate is not None \
                and not malformed:
            st.escalated = True
            return self._go(st, "Replan", PhaseStatus.FAIL, detail + "; escalated to the human",
                            "HumanReview", {"violations": [r for r, _, _ in st.violations]})
        st.reason = f"{detail}: {st.reason}"
        return self._go(st, "Replan", PhaseStatus.FAIL, st.reason, "Failed")


def _fingerprint(layout: Layout) -> str:
    """The parts (id, type, position) of a layout, as a key."""
    return json.dumps(sorted((pid, t, [round(float(v), 6) for v in pos])
                             for pid, t, pos in zip(layout.ids, layout.types, layout.pos,
                                                    strict=True)))


def run_orchestrated(command: str, cell: Cell, adapter: Adapter, **kw: Any
                     ) -> OrchestratorResult:
    """Run one command through the orchestrator (see :class:`Orchestrator`)."""
    return Orchestrator(cell, adapter, **kw).run(command)
