"""The orchestrator (Section III-B of seed 000): an explicit state machine over the phases
Plan -> Design -> Inspect -> HumanReview -> PreExecute -> Execute -> Replan.

* Plan: the Specifier translates the command into a spec (DSL text, parsed by the DSL).
* Design: the generate-verify-repair loop (:func:`loop.run_design`) gives a candidate.
* Inspect: an independent re-verification (the ``verify`` skill, clingo) plus the spec's
  part count, types and max height.
* HumanReview (only with ``review``): accept / modify (the reviewer edits the layout file;
  the edit goes back to Inspect, and to Replan when it fails) / reject.
* PreExecute: assembly sequencing (``cellspec.solver.cpsat.sequence.plan``) and the final
  clingo safety gate on the ordered layout.
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
from typing import Any, TextIO

from cellspec.agent.base import Adapter, Feedback, LLMUnavailable
from cellspec.agent.loop import (
    DEFAULT_T_MAX,
    DesignResult,
    _conformance,
    _gate,
    _msg,
    translate_spec,
)
from cellspec.core.errors import CellspecError

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
    status: str  # ok | fail | skipped | unavailable
    detail: str | None
    next: str | None
    routed_by: str = "rule"  # rule | llm | rule (llm choice invalid: ...)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "status": self.status, "detail": self.detail,
                "next": self.next, "routed_by": self.routed_by}


@dataclass
class _State:
    spec_text: str | None = None
    spec: Any = None
    want: int = 0
    candidate: dict[str, Any] | None = None
    outcome: str | None = None
    reason: str | None = None
    violations: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    final: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    replans: int = 0
    reprompted: bool = False
    feedback: Feedback | None = None
    reviews: int = 0
    escalated: bool = False
    design: DesignResult | None = None
    execute: dict[str, Any] | None = None
    rejected_by_twin: set[str] = field(default_factory=set)
    trace: list[PhaseStep] = field(default_factory=list)


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
        """('accept', None), ('reject', why) or ('modify', the edited layout object)."""
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


def _read_edit(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The reviewer's edited layout, or why it cannot be used (unreadable, not JSON, not a
    layout the loader accepts: NaN, duplicate ids, unknown fields, ...)."""
    from cellspec.core.io import TooLarge, read_text_bounded
    from cellspec.layout import MAX_LAYOUT_BYTES, layout_from_obj

    try:
        text = read_text_bounded(path, MAX_LAYOUT_BYTES)
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
        layout_from_obj(obj, str(path))
    except CellspecError as exc:
        return None, f"the edited layout is not valid: {_msg(exc)}"
    return obj, None


class Orchestrator:
    """Runs one command through the phases; see the module docstring."""

    def __init__(self, cell: Any, adapter: Adapter, *, t_max: int = DEFAULT_T_MAX,
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
    def _go(self, st: _State, phase: str, status: str, detail: str | None, route: str,
            context: dict[str, Any] | None = None) -> str:
        """Record the phase and return the next one (the router's, when valid)."""
        how = "rule"
        if self.router is not None and phase in BRANCHES and status == "fail":
            options = [p for p in BRANCHES[phase] if p in TRANSITIONS[phase]
                       and (p != "HumanReview" or (self.reviewer is not None
                                                   and st.candidate is not None))]
            try:
                choice = self.router(phase, options, {"detail": detail, **(context or {})})
            except CellspecError as exc:
                how = f"rule (llm router failed: {_msg(exc)})"
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
                st.reason = f"{phase}: {_msg(exc)}"
                phase = self._go(st, phase, "fail", st.reason, "Failed")
        d = st.design
        ok = phase == "Done" and st.final is not None
        res = DesignResult(
            st.spec_text, (st.outcome or "generated") if ok else "rejected",
            st.reason if ok else (st.reason or "failed"),
            st.final if ok else None, st.plan if ok else None, self.adapter.calls,
            time.perf_counter() - t0, d.repairs if d else 0, d.attempts if d else 0,
            tuple(self.adapter.records))
        st.trace.append(PhaseStep(phase, "ok" if ok else "fail", None if ok else res.reason,
                                  None))
        return OrchestratorResult(res, tuple(st.trace), st.execute)

    # --- phases ----------------------------------------------------------------------
    def _plan(self, st: _State, command: str) -> str:
        st.spec_text, st.spec, why = translate_spec(command, self.cell, self.adapter)
        if st.spec is None:
            st.reason = why
            return self._go(st, "Plan", "fail", st.reason, "Failed")
        return self._go(st, "Plan", "ok", None, "Design")

    def _design(self, st: _State, command: str) -> str:
        from cellspec.agent.loop import run_design

        feedback, st.feedback = st.feedback, None
        r = run_design(command, self.cell, self.adapter, t_max=self.t_max,
                       time_limit=self.time_limit, spec_text=st.spec_text, reset=False,
                       feedback=feedback)
        st.design = r
        if r.layout is None:
            st.reason = r.reason
            return self._go(st, "Design", "fail", r.reason,
                            "Replan" if st.candidate is not None else "Failed")
        if _fingerprint(r.layout) in st.rejected_by_twin:
            st.reason = f"the re-plan gave the layout the twin already rejected ({st.reason})"
            return self._go(st, "Design", "fail", st.reason, "Failed")
        st.candidate = {"units": "m", "parts": r.layout["parts"]}
        st.outcome = r.outcome
        st.reason = r.reason
        from cellspec.agent.loop import _reference

        ref = _reference(self.cell, st.spec, self.time_limit)
        st.want = len(ref.layout["parts"]) if ref.layout is not None else len(r.layout["parts"])
        return self._go(st, "Design", "ok", f"{r.outcome}, {len(r.layout['parts'])} parts",
                        "Inspect")

    def _check(self, st: _State) -> tuple[tuple[str, tuple[str, ...], str], ...]:
        from cellspec.layout import layout_from_obj
        from cellspec.solver.verify import check

        try:
            lay = layout_from_obj(st.candidate, "<candidate>")
        except CellspecError as exc:
            return (("format", (), _msg(exc)),)
        bad = _conformance(self.cell, lay, st.spec, st.want)
        if any(r == "spec_type" for r, _, _ in bad):
            return tuple(bad)
        v = check(self.cell, lay, backend="clingo", timeout=self.time_limit)
        if v.verdict == "unknown":
            return (*bad, ("unknown", (), v.reason or "the check did not finish"))
        return (*bad, *((x.rule, tuple(x.parts), x.message) for x in v.violations))

    def _inspect(self, st: _State, command: str) -> str:
        st.violations = self._check(st)
        if st.violations:
            what = "; ".join(f"{r}({', '.join(p)})" if p else f"{r}: {m}"
                             for r, p, m in st.violations[:6])
            return self._go(st, "Inspect", "fail", what, "Replan",
                            {"violations": [r for r, _, _ in st.violations]})
        nxt = "HumanReview" if self.reviewer is not None else "PreExecute"
        return self._go(st, "Inspect", "ok", "re-verified pass (clingo)", nxt)

    def _review(self, st: _State, command: str) -> str:
        assert self.reviewer is not None
        st.reviews += 1
        if st.reviews > MAX_REVIEWS:
            st.reason = f"no decision after {MAX_REVIEWS} reviews"
            return self._go(st, "HumanReview", "fail", st.reason, "Failed")
        verdict = "verified pass" if not st.violations else \
            f"FAILS {', '.join(sorted({r for r, _, _ in st.violations}))} (escalated)"
        ans, payload = self.reviewer.ask(st.candidate, verdict)
        if ans == "accept":
            if st.violations:  # an escalated, failing layout can not be accepted
                st.reason = "the reviewer accepted a layout that fails the check: refused"
                return self._go(st, "HumanReview", "fail", st.reason, "Failed")
            return self._go(st, "HumanReview", "ok", "accepted by the reviewer", "PreExecute")
        if ans == "reject":
            st.reason = str(payload)
            return self._go(st, "HumanReview", "fail", st.reason, "Failed")
        st.candidate = payload
        st.outcome = "accepted"
        st.reason = "modified by the reviewer"
        st.escalated = False
        return self._go(st, "HumanReview", "ok", "modified by the reviewer", "Inspect")

    def _pre_execute(self, st: _State, command: str) -> str:
        final, plan, why = _gate(self.cell, st.candidate, st.spec, st.want, self.time_limit)
        if final is None:
            st.reason = why
            st.violations = (("sequence", (), why or "no sequence"),)
            return self._go(st, "PreExecute", "fail", why, "Replan")
        st.final, st.plan = final, plan
        nxt = "Execute" if self.execute else "Done"
        return self._go(st, "PreExecute", "ok", f"{len(plan['order'])} steps, gate pass", nxt)

    def _execute(self, st: _State, command: str) -> str:
        from cellspec.layout import layout_from_obj
        from cellspec.solver.cpsat.results import Step

        try:
            from cellspec.robots.sim import simulate
        except ImportError as exc:
            st.execute = {"status": "unavailable",
                          "reason": f"twin not available: cellspec.robots.sim ({exc})"}
            return self._go(st, "Execute", "unavailable", st.execute["reason"], "Done")
        steps = tuple(Step(part=g["part"], gripper=g["gripper"], axis=g["axis"])
                      for g in st.plan["grips"])
        try:
            res = simulate(self.cell, layout_from_obj(st.final, "<design>"), steps=steps,
                           time_limit=self.time_limit)
        except CellspecError as exc:  # e.g. the cell declares no supply the twin can use
            st.execute = {"status": "unavailable",
                          "reason": f"the twin cannot run this cell: {_msg(exc)}"}
            return self._go(st, "Execute", "unavailable", st.execute["reason"], "Done")
        except Exception as exc:  # noqa: BLE001 - a twin defect is reported, not hidden
            st.execute = {"status": "unavailable",
                          "reason": f"twin not available: it failed with "
                                    f"{type(exc).__name__}: {exc}"}
            return self._go(st, "Execute", "unavailable", st.execute["reason"], "Done")
        st.execute = {"status": res.verdict, **res.to_json()}
        if res.verdict == "pass":
            return self._go(st, "Execute", "ok", f"{len(res.actions)} actions executed in the "
                            "twin, all pass", "Done")
        bad = [a for a in res.actions if not a.ok]
        why = res.reason or "the twin rejects the plan"
        if bad:
            why += ": " + "; ".join(f"{a.part} ({a.check}: {a.reason})" for a in bad[:3])
        st.reason = why
        st.violations = tuple(("execute", (a.part,), f"{a.check}: {a.reason}") for a in bad) \
            or (("execute", (), why),)
        st.rejected_by_twin.add(_fingerprint(st.final))
        st.final = st.plan = None
        return self._go(st, "Execute", "fail", why, "Replan")

    def _recover(self, st: _State) -> tuple[str, dict[str, Any]] | None:
        """shift, flatten, then repair: the first whose output passes verify and the spec."""
        from cellspec.agent.skills import SkillRegistry

        rules = {r for r, _, _ in st.violations}
        if "format" in rules:
            return None  # not a layout: nothing to shift, flatten or repair
        reg = SkillRegistry(self.cell, self.time_limit)
        lay = {"parts": [{"id": p["id"], "type": p["type"], "pos": list(p["pos"])}
                         for p in st.candidate["parts"]], "order": None}
        tries: list[tuple[str, dict[str, Any]]] = []
        if rules & {"workspace", "keepout"}:
            tries.append(("shift", {"layout": lay}))
        if rules & {"spec_max_height"}:
            tries.append(("flatten", {"layout": lay, "max_layers": self._layers(st)}))
        for name, args in tries:
            r = reg.dispatch(name, args)
            if r.get("ok") and r.get("verdict") == "pass":
                cand = {"units": "m", "parts": r["layout"]["parts"]}
                saved, st.candidate = st.candidate, cand
                if not self._check(st):
                    return name, cand
                st.candidate = saved
        from cellspec.layout import layout_from_obj
        from cellspec.solver.cpsat.repair import repair

        if rules - {"spec_count", "spec_type", "format", "unknown", "sequence", "execute"}:
            try:
                rr = repair(self.cell, layout_from_obj(st.candidate, "<candidate>"),
                            time_limit=self.time_limit)
            except CellspecError:
                rr = None
            if rr is not None and rr.layout is not None:
                return "repair", {"units": "m", "parts": rr.layout["parts"]}
        return None

    def _layers(self, st: _State) -> int:
        from cellspec.agent.loop import _max_height

        h = _max_height(st.spec)
        z = min(float(t.size[2]) for t in self.cell.part_types.values())
        return max(1, int((h or z) / z + 1e-9))

    def _replan(self, st: _State, command: str) -> str:
        st.replans += 1
        if st.replans > MAX_REPLANS:
            st.reason = f"gave up after {MAX_REPLANS} re-plans: {st.reason}"
            return self._go(st, "Replan", "fail", st.reason, "Failed")
        if st.candidate is not None and st.violations:
            rec = self._recover(st)
            if rec is not None:
                name, cand = rec
                st.candidate, st.outcome = cand, "repaired"
                st.reason = f"recovered by {name}"
                return self._go(st, "Replan", "ok", f"recovery skill {name}", "Inspect")
        if not st.reprompted:
            st.reprompted = True
            st.feedback = Feedback(st.replans, st.violations)
            return self._go(st, "Replan", "ok", "re-prompt with the violated constraints",
                            "Design")
        detail = "recovery skills and re-prompt did not help"
        malformed = any(r == "format" for r, _, _ in st.violations)
        if self.reviewer is not None and not st.escalated and st.candidate is not None \
                and not malformed:
            st.escalated = True
            return self._go(st, "Replan", "fail", detail + "; escalated to the human",
                            "HumanReview", {"violations": [r for r, _, _ in st.violations]})
        st.reason = f"{detail}: {st.reason}"
        return self._go(st, "Replan", "fail", st.reason, "Failed")


def _fingerprint(layout: dict[str, Any]) -> str:
    """The parts (id, type, position) of a layout, as a key."""
    return json.dumps(sorted((p["id"], p["type"], [round(float(v), 6) for v in p["pos"]])
                             for p in layout["parts"]))


def run_orchestrated(command: str, cell: Any, adapter: Adapter, **kw: Any
                     ) -> OrchestratorResult:
    """Run one command through the orchestrator (see :class:`Orchestrator`)."""
    return Orchestrator(cell, adapter, **kw).run(command)
