"""cellspec design: from a command in words to a verified layout (translate, propose,
verify, repair or re-prompt, generate; a final clingo safety gate)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellspec.commands import preferences
from cellspec.commands.bounded import LimitHit, print_unknown, remaining, run_bounded
from cellspec.commands.common import EXIT_FAIL, EXIT_OK, add_shared, atomic_write, tagged
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.extras import require_extra
from cellspec.core.limits import check_llm_limits, check_output, check_seconds, parse_memory
from cellspec.core.severity import Severity
from cellspec.core.status import PhaseStatus

if TYPE_CHECKING:
    from cellspec.agent.base import Adapter
    from cellspec.agent.orchestrator import OrchestratorResult
    from cellspec.dsl.model import Cell


MAX_T_MAX = 50  # proposals per command: more is a runaway loop, not persistence
MAX_TIME_LIMIT = 3600.0  # seconds: the whole verb, and each solver call
SOLVER_TIME_LIMIT = 10.0  # seconds per solver call by default


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``design`` verb."""
    c = sub.add_parser("design", help="build a verified layout from a command in words",
                       description="Translate COMMAND (e.g. \"build a 3-cube tower at x 0.4 y "
                       "0.2\") into a design spec, obtain a candidate layout (from the LLM or "
                       "built by the solver), verify, repair or re-prompt, and re-verify the "
                       "result with clingo and against every intent clause of the spec (what "
                       "was asked: docs/design.md). Exit 0 a verified layout, 1 the command "
                       "cannot be translated or built as asked (the reason is printed), 2 bad "
                       "input, usage or "
                       "unknown (--time-limit or --max-memory hit).")
    add_shared(c, output=("OUT", "write the layout JSON here"), max_memory=True,
               time_limit=(None, "time limit of the whole verb in seconds (translation, "
                           "LLM calls, solving, re-verification; default none; unknown when "
                           "hit). With --review the time you take to answer counts"))
    c.add_argument("command", help="the command, in quotes")
    c.add_argument("--cell", required=True, help="the .cell file")
    c.add_argument("--adapter", choices=("auto", "offline", "openai", "replay"),
                   default="auto", help="who translates and proposes (auto: openai when "
                   "--model is given, else the offline translator)")
    c.add_argument("--model", help="the model name (openai/replay adapters)")
    c.add_argument("--base-url", help="an OpenAI-compatible server (default OPENAI_BASE_URL)")
    c.add_argument("--cassette", metavar="JSONL", help="replay: the cassette to answer from")
    c.add_argument("--record", metavar="JSONL", help="openai: append every exchange here")
    c.add_argument("--max-calls", type=int, metavar="N", help="LLM calls allowed per command")
    c.add_argument("--max-tokens", type=int, metavar="N", help="LLM tokens allowed per command")
    c.add_argument("--solver-time-limit", type=float, default=SOLVER_TIME_LIMIT, metavar="S",
                   help=f"time limit of each solver call in seconds (default "
                   f"{SOLVER_TIME_LIMIT:g}; capped by what is left of --time-limit)")
    c.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="per LLM call (default 30)")
    c.add_argument("--retries", type=int, default=2, metavar="N", help="per LLM call")
    c.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature sent to the model, 0 to 2 (default 0)")
    c.add_argument("--seed", type=int, default=0,
                   help="seed sent to the model with each request (default 0)")
    c.add_argument("--propose", choices=("auto", "always", "never"), default="auto",
                   help="openai/replay: does the model propose layouts? auto (default): only "
                   "with --tools; otherwise the model translates and the solver builds from "
                   "the spec (measured: a small model's proposals never beat it, "
                   "docs/models.md)")
    c.add_argument("--translate", choices=("hybrid", "model"), default="hybrid",
                   help="openai/replay: hybrid (default): the offline parser's spec when it "
                   "understands every word, the model only for what it refuses; model: the "
                   "model first (the offline parser is its fall-back)")
    c.add_argument("--t-max", type=int, default=3, metavar="N",
                   help="proposals before the solver generates (default 3)")
    c.add_argument("--tools", action="store_true",
                   help="openai/replay: let the model call the skill registry (verify, "
                   "sequence, shift, flatten, ...) while proposing")
    c.add_argument("--llm-routing", action="store_true",
                   help="openai/replay: the model chooses the next phase at failure branch "
                   "points (validated against the allowed transitions)")
    c.add_argument("--review", action="store_true",
                   help="ask accept / modify / reject on the terminal before sequencing "
                   "(answers read from stdin; modify: edit the layout file, then Enter)")
    c.add_argument("--review-file", metavar="JSON", default="design_review.json",
                   help="the file written for 'modify' (default design_review.json)")
    c.add_argument("--execute", action="store_true",
                   help="run the assembly in the pybullet twin (cellspec.robots.sim) when "
                   "it is available; otherwise the Execute phase says so")
    preferences.add_prove_option(c, "the design's parts", ", 30 s without one",
                                 "(and the intent clauses: where the command puts the "
                                 "structures) ")
    c.add_argument("--world", metavar="DB", help="a world database: the model's prompts get "
                   "the task-relevant subgraph of --world-action (cellspec world context)")
    c.add_argument("--world-action", metavar="ID", help="with --world: the task node "
                   "(default the database's current task)")
    c.set_defaults(func=run)


def check_options(a: argparse.Namespace) -> None:
    """Bad options are bad input before any work (exit 2): counts, limits, output paths,
    the extras the options need."""
    for name in ("max_calls", "max_tokens", "t_max"):
        v = getattr(a, name)
        if v is not None and v < 1:
            raise CellspecError(f"--{name.replace('_', '-')} must be at least 1")
    if a.t_max > MAX_T_MAX:
        raise CellspecError(f"--t-max must be at most {MAX_T_MAX} (proposals per command)")
    if a.time_limit is not None:
        check_seconds(a.time_limit, "--time-limit", MAX_TIME_LIMIT)
    check_seconds(a.solver_time_limit, "--solver-time-limit", MAX_TIME_LIMIT)
    check_llm_limits(a.timeout, a.retries, a.temperature,
                     ("--timeout", "--retries", "--temperature"))
    preferences.check_step(a.prove_preferences)
    check_output(a.output, "-o")
    check_output(a.record, "--record")
    if a.review:
        check_output(a.review_file, "--review-file")
    kind = adapter_kind(a)
    if kind == "openai":
        require_extra("llm", verb="design --adapter openai")
    if kind == "offline" and (a.tools or a.llm_routing):
        raise CellspecError("--tools and --llm-routing need a model (--adapter openai or "
                            "replay); the offline translator calls no tools")
    if a.tools and a.propose == "never":
        raise CellspecError("--tools lets the model propose (with the skills); it cannot go "
                            "with --propose never")
    if kind == "replay" and not a.cassette:
        raise CellspecError("--adapter replay needs --cassette JSONL")


def adapter_kind(a: argparse.Namespace) -> str:
    """offline, openai or replay (``auto``: openai when --model is given, else offline)."""
    if a.adapter == "auto":
        return "openai" if a.model else "offline"
    return str(a.adapter)


def make_adapter(a: argparse.Namespace) -> Adapter:
    """The adapter the options ask for (the options checked first: :func:`check_options`)."""
    # lazy: CLI start-up time (every verb imports its module; the agent pulls in solvers)
    from cellspec.agent.base import Budget
    from cellspec.agent.offline import OfflineAdapter
    from cellspec.agent.openai_adapter import DEFAULT_MODEL, OpenAIAdapter, ReplayAdapter

    check_options(a)
    budget = Budget(a.max_calls, a.max_tokens)
    kind = adapter_kind(a)
    if kind == "offline":
        return OfflineAdapter(budget)
    ad: ReplayAdapter | OpenAIAdapter
    if kind == "replay":
        ad = ReplayAdapter(a.cassette, a.model or DEFAULT_MODEL, budget, use_tools=a.tools)
    else:
        ad = OpenAIAdapter(a.model or DEFAULT_MODEL, base_url=a.base_url, timeout=a.timeout,
                           max_retries=a.retries, temperature=a.temperature, seed=a.seed,
                           budget=budget, record=a.record, use_tools=a.tools)
    ad.propose_mode, ad.translate_mode = a.propose, a.translate
    if sys.stderr.isatty():  # progress on a terminal: the phase, the tokens so far
        ad.progress = _progress
    return ad


def _progress(line: str) -> None:
    """One progress line on the terminal's stderr (the model's calls as they run)."""
    print(f"design: {line}", file=sys.stderr, flush=True)


def check_executable(cell: Cell) -> None:
    """Bad input (exit 2, before any work) when ``--execute`` cannot run on the cell: the twin
    needs robots to place the parts and a supply area to pick them from."""
    s = cell.source
    twin = getattr(cell, "twin", None)
    if not cell.robots:
        why = "has no robots: nothing can place the parts"
    elif twin is None or not twin.supplies:
        why = ("has no supply area: add `supply NAME x [..] y [..] z [..]` (where the robots "
               "pick parts from)")
    else:
        return
    raise CellspecError(Diagnostic(s.file, s.line, s.col, f"--execute: cell {cell.name} {why}"))


OUTCOMES = {
    "accepted": "the proposed layout passed verification as proposed",
    "repaired": "the layout was repaired with minimal change and verified",
    "generated": "built by the solver and verified",
    "rejected": "no layout",
}


def _world_context(a: argparse.Namespace, adapter: Adapter) -> None:
    """Give a model adapter the world database's context (the offline one has no prompt)."""
    # lazy: CLI start-up time (loads the world model)
    from cellspec.world.context import prompt_context

    if a.world is None:
        raise CellspecError("--world-action needs --world DB")
    if not hasattr(adapter, "world_context"):
        raise CellspecError(f"--world: the {adapter.name} adapter has no prompt to put the "
                            "world model in (use --adapter openai or replay)")
    adapter.world_context = prompt_context(a.world, a.world_action)[0]


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code. The whole verb (loading, translation, LLM
    calls, solving, re-verification, the twin with --execute) runs in a bounded worker
    (:mod:`cellspec.commands.bounded`): ``--time-limit`` (none by default) and
    ``--max-memory``; the layout is written here, only when the worker finished."""
    if a.execute:
        require_extra("twin", verb="design --execute")
    check_options(a)
    a.max_memory = parse_memory(a.max_memory)
    got = run_bounded(lambda: _compute(a), time_limit=a.time_limit, max_memory=a.max_memory)
    if isinstance(got, LimitHit):  # printed from plain data: nothing imported after the limit
        return print_unknown(got, a.format, {"format": "cellspec.design/1", "spec": None,
                                             "layout": None, "plan": None,
                                             "calls": None, "phases": []}, key="outcome",
                             handed="layout")
    if got["layout"] is not None and a.output:  # atomic_write names the path if refused
        atomic_write(Path(a.output), json.dumps(got["layout"], indent=2) + "\n")
    if a.format == "json":
        print(json.dumps(tagged("design", got["json"]), indent=2))
    else:
        print(got["pretty"], end="")
    return EXIT_OK if got["layout"] is not None else EXIT_FAIL


def _compute(a: argparse.Namespace) -> dict[str, Any]:
    """The verb's work (in the bounded worker), as plain data for the parent: the layout,
    the JSON report and the pretty one."""
    # lazy: CLI start-up time (the orchestrator loads every solver, the parser textX)
    from cellspec.agent.orchestrator import Reviewer, run_orchestrated
    from cellspec.dsl.parser import load_cell

    cell = load_cell(a.cell)
    adapter = make_adapter(a)
    if a.world is not None or a.world_action is not None:
        _world_context(a, adapter)
    if a.execute:
        check_executable(cell)
    reviewer = Reviewer(sys.stdin, sys.stderr, a.review_file) if a.review else None
    router = getattr(adapter, "route", None) if a.llm_routing else None
    left = remaining(a.time_limit)
    solver = a.solver_time_limit if left is None else min(a.solver_time_limit, left)
    o = run_orchestrated(a.command, cell, adapter, t_max=a.t_max, time_limit=solver,
                         reviewer=reviewer, execute=a.execute, router=router)
    out = o.to_json()
    prefs = _preferences(cell, o)
    if prefs is not None and a.prove_preferences is not None:
        lay = o.result.layout
        assert lay is not None  # a score exists only for a layout
        prefs = dict(prefs, bound=preferences.bound(
            cell, lay if isinstance(lay, dict) else lay.to_json(), a.prove_preferences,
            a.time_limit))
    if prefs is not None:
        out["preferences"] = prefs
    report = getattr(adapter, "structured_report", None)
    if callable(report):  # the structured-output mode negotiated with the server
        out["llm"] = report()
    return {"layout": o.result.layout, "json": out,
            "pretty": _pretty(a, o, adapter, prefs) if a.format != "json" else None}


def _preferences(cell: Cell, o: OrchestratorResult) -> dict[str, Any] | None:
    """The design's preference score (cells with preference rules and a layout only):
    optimal when the solver built the layout and proved its weight best (generate
    maximises it first); an accepted or repaired proposal's score is not claimed optimal."""
    if o.result.layout is None or not any(r.severity == Severity.PREFERENCE for r in cell.rules):
        return None
    # lazy: CLI start-up time (only cells with preference rules need it)
    from cellspec.agent.loop import _REF_CACHE
    from cellspec.layout import layout_from_obj
    from cellspec.solver.asp.prefer import preference_cost, score_json

    lay = o.result.layout
    lay_obj = lay if isinstance(lay, dict) else lay.to_json()
    if o.result.outcome == "generated":
        for ref in list(_REF_CACHE.values()):
            got = ref.result
            if got.layout is not None and got.preferences is not None and (
                    [p["pos"] for p in got.layout["parts"]]
                    == [p["pos"] for p in lay_obj["parts"]]):
                return got.preferences
    score = preference_cost(cell, layout_from_obj(lay_obj, "<design>"))
    return score_json(score, False, [f"the {o.result.outcome} layout's score is not proved "
                                     "optimal (generate maximises it for the layouts it "
                                     "builds)"])


def _pretty(a: argparse.Namespace, o: OrchestratorResult, adapter: Adapter,
            prefs: dict[str, Any] | None = None) -> str:
    """The pretty report of a design run (spec, outcome, phases, the assembly plan)."""
    lines: list[str] = []
    say = lines.append
    r = o.result
    who = "offline translator, no LLM" if adapter.name == "offline" else \
        f"{adapter.name} adapter, model {adapter.model}"
    if r.spec is not None:
        hint = "; '// assumed:' lines show the defaults taken for vague words" \
            if "// assumed:" in r.spec else ""
        say(f"spec ({who}{hint}):")
        say("\n".join("  " + x for x in r.spec.rstrip("\n").splitlines()))
    say(f"outcome: {r.outcome} ({OUTCOMES[r.outcome]})")
    if r.reason:
        say(f"reason: {r.reason}")
    if r.intent:
        say(f"intent (what was asked, decided on the {r.intent_of}, clause by clause):")
        for c in r.intent:
            mark = "ok  " if c["holds"] else "FAIL"
            soft = " (soft)" if c.get("soft") else ""
            say(f"  {mark} {c['clause']}{soft}: {c['detail']}  [{c['source']}]")
    say("phases: " + " -> ".join(f"{p.phase}" + ("" if p.status == PhaseStatus.OK
                                                  else f" [{p.status}]") for p in o.phases))
    if o.execute is not None:
        ex = o.execute.get("execution") or {}
        extra = f" (δ {ex['delta']:.4f} rad, ε {ex['epsilon']:g})" if "delta" in ex else ""
        say(f"execute in the twin: {o.execute.get('status')}{extra}"
            + (f": {o.execute['reason']}" if o.execute.get("reason") else ""))
    if r.layout is not None and r.plan is not None:
        pos = {p["id"]: p["pos"] for p in r.layout["parts"]}
        say(f"assembly plan ({len(r.plan['grips'])} steps: part, centre x y z in m, gripper):")
        for k, st in enumerate(r.plan["grips"], 1):
            p = pos[st["part"]]
            grip = st["gripper"] + (f" {st['axis']}" if st.get("axis") else "")
            say(f"{k:4d}  {st['part']}  ({p[0]:.4f}, {p[1]:.4f}, {p[2]:.4f})  {grip}")
        held = f"every intent clause holds ({len(r.intent)}), " if r.intent else ""
        say(f"{len(pos)} parts, re-verified pass (clingo), {held}{r.calls} LLM calls, "
            f"{r.seconds:.3f} s; layout "
            + (f"written to {a.output}" if a.output else "not saved (use -o layout.json)"))
    if prefs is not None:
        for line in preferences.lines(prefs):
            say(line)
        if "bound" in prefs:
            say("note: the proof's layouts need not meet the intent clauses (where the "
                "command puts its structures): the score is maximised under them")
    return "".join(x + "\n" for x in lines)
