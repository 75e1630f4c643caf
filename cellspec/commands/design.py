"""cellspec design: from a command in words to a verified layout (translate, propose,
verify, repair or re-prompt, generate; a final clingo safety gate)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellspec.commands.common import EXIT_FAIL, EXIT_OK, add_shared, atomic_write
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.extras import require_extra
from cellspec.core.limits import check_output, check_seconds

if TYPE_CHECKING:
    from cellspec.agent.base import Adapter


MAX_T_MAX = 50  # proposals per command: more is a runaway loop, not persistence
MAX_TIME_LIMIT = 3600.0  # seconds per solver call


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``design`` verb."""
    c = sub.add_parser("design", help="build a verified layout from a command in words",
                       description="Translate COMMAND (e.g. \"build a 3-cube tower at x 0.4 y "
                       "0.2\") into a design spec, obtain a candidate layout (from the LLM or "
                       "built by the solver), verify, repair or re-prompt, and re-verify the "
                       "result with clingo. Exit 0 a verified layout, 1 the command cannot be "
                       "translated or built (the reason is printed), 2 bad input or usage.")
    add_shared(c, output=("OUT", "write the layout JSON here"),
               time_limit=(10.0, "solver time limit in seconds (default 10)"))
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
    c.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="per LLM call (default 30)")
    c.add_argument("--retries", type=int, default=2, metavar="N", help="per LLM call")
    c.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature sent to the model, 0 to 2 (default 0)")
    c.add_argument("--seed", type=int, default=0,
                   help="seed sent to the model with each request (default 0)")
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
    c.add_argument("--world", metavar="DB", help="a world database: the model's prompts get "
                   "the task-relevant subgraph of --world-action (cellspec world context)")
    c.add_argument("--world-action", metavar="ID", help="with --world: the task node "
                   "(default the database's current task)")
    c.set_defaults(func=run)


def make_adapter(a: argparse.Namespace) -> Adapter:
    """The adapter the options ask for."""
    # lazy: CLI start-up time (every verb imports its module; the agent pulls in solvers)
    from cellspec.agent.base import Budget
    from cellspec.agent.offline import OfflineAdapter
    from cellspec.agent.openai_adapter import (
        DEFAULT_MODEL,
        MAX_RETRIES,
        MAX_TIMEOUT,
        OpenAIAdapter,
        ReplayAdapter,
    )

    for name in ("max_calls", "max_tokens", "t_max"):
        v = getattr(a, name)
        if v is not None and v < 1:
            raise CellspecError(f"--{name.replace('_', '-')} must be at least 1")
    if a.t_max > MAX_T_MAX:
        raise CellspecError(f"--t-max must be at most {MAX_T_MAX} (proposals per command)")
    check_seconds(a.time_limit, "--time-limit", MAX_TIME_LIMIT)
    check_seconds(a.timeout, "--timeout", MAX_TIMEOUT)
    if not (0 <= a.retries <= MAX_RETRIES):
        raise CellspecError(f"--retries must be from 0 to {MAX_RETRIES}")
    if not (0 <= a.temperature <= 2):
        raise CellspecError("--temperature must be a number from 0 to 2")
    check_output(a.output, "-o")
    check_output(a.record, "--record")
    if a.review:
        check_output(a.review_file, "--review-file")
    budget = Budget(a.max_calls, a.max_tokens)
    kind = a.adapter
    if kind == "auto":
        kind = "openai" if a.model else "offline"
    if kind == "openai":
        require_extra("llm", verb="design --adapter openai")
    if kind == "offline":
        if a.tools or a.llm_routing:
            raise CellspecError("--tools and --llm-routing need a model (--adapter openai or "
                                "replay); the offline translator calls no tools")
        return OfflineAdapter(budget)
    if kind == "replay":
        if not a.cassette:
            raise CellspecError("--adapter replay needs --cassette JSONL")
        return ReplayAdapter(a.cassette, a.model or DEFAULT_MODEL, budget, use_tools=a.tools)
    return OpenAIAdapter(a.model or DEFAULT_MODEL, base_url=a.base_url, timeout=a.timeout,
                         max_retries=a.retries, temperature=a.temperature, seed=a.seed,
                         budget=budget, record=a.record, use_tools=a.tools)


def check_executable(cell: Any) -> None:
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
    adapter.world_context = prompt_context(a.world, a.world_action)[0]  # type: ignore[attr-defined]


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    # lazy: CLI start-up time (the orchestrator loads every solver, the parser textX)
    from cellspec.agent.orchestrator import Reviewer, run_orchestrated
    from cellspec.dsl.parser import load_cell

    if a.execute:
        require_extra("twin", verb="design --execute")
    cell = load_cell(a.cell)
    adapter = make_adapter(a)
    if a.world is not None or a.world_action is not None:
        _world_context(a, adapter)
    if a.execute:
        check_executable(cell)
    reviewer = Reviewer(sys.stdin, sys.stderr, a.review_file) if a.review else None
    router = getattr(adapter, "route", None) if a.llm_routing else None
    o = run_orchestrated(a.command, cell, adapter, t_max=a.t_max, time_limit=a.time_limit,
                         reviewer=reviewer, execute=a.execute, router=router)
    r = o.result
    if r.layout is not None and a.output:  # atomic_write names the path if the disk refuses
        atomic_write(Path(a.output), json.dumps(r.layout, indent=2) + "\n")
    if a.format == "json":
        out = o.to_json()
        report = getattr(adapter, "structured_report", None)
        if callable(report):  # the structured-output mode negotiated with the server
            out["llm"] = report()
        print(json.dumps(out, indent=2))
        return EXIT_OK if r.layout is not None else EXIT_FAIL
    who = "offline translator, no LLM" if adapter.name == "offline" else \
        f"{adapter.name} adapter, model {adapter.model}"
    if r.spec is not None:
        hint = "; '// assumed:' lines show the defaults taken for vague words" \
            if "// assumed:" in r.spec else ""
        print(f"spec ({who}{hint}):")
        print("\n".join("  " + x for x in r.spec.rstrip("\n").splitlines()))
    print(f"outcome: {r.outcome} ({OUTCOMES[r.outcome]})")
    if r.reason:
        print(f"reason: {r.reason}")
    print("phases: " + " -> ".join(f"{p.phase}" + ("" if p.status == "ok" else f" [{p.status}]")
                                   for p in o.phases))
    if o.execute is not None:
        ex = o.execute.get("execution") or {}
        extra = f" (δ {ex['delta']:.4f} rad, ε {ex['epsilon']:g})" if "delta" in ex else ""
        print(f"execute in the twin: {o.execute.get('status')}{extra}"
              + (f": {o.execute['reason']}" if o.execute.get("reason") else ""))
    if r.layout is not None and r.plan is not None:
        pos = {p["id"]: p["pos"] for p in r.layout["parts"]}
        print(f"assembly plan ({len(r.plan['grips'])} steps: part, centre x y z in m, "
              "gripper):")
        for k, st in enumerate(r.plan["grips"], 1):
            p = pos[st["part"]]
            grip = st["gripper"] + (f" {st['axis']}" if st.get("axis") else "")
            print(f"{k:4d}  {st['part']}  ({p[0]:.4f}, {p[1]:.4f}, {p[2]:.4f})  {grip}")
        print(f"{len(pos)} parts, re-verified pass (clingo), {r.calls} LLM calls, "
              f"{r.seconds:.3f} s; layout "
              + (f"written to {a.output}" if a.output else "not saved (use -o layout.json)"))
    return EXIT_OK if r.layout is not None else EXIT_FAIL
