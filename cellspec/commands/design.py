"""cellspec design: from a command in words to a verified layout (translate, propose,
verify, repair or re-prompt, generate; a final clingo safety gate)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from cellspec.commands.common import EXIT_FAIL, EXIT_OK, atomic_write
from cellspec.dsl.errors import CellspecError

if TYPE_CHECKING:
    from cellspec.llm_adapters.base import Adapter


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``design`` verb."""
    c = sub.add_parser("design", help="build a verified layout from a command in words",
                       description="Translate COMMAND (e.g. \"build a 3-cube tower at x 0.4 y "
                       "0.2\") into a design spec, obtain a candidate layout (from the LLM or "
                       "built by the solver), verify, repair or re-prompt, and re-verify the "
                       "result with clingo. Exit 0 a verified layout, 1 the command cannot be "
                       "translated or built (the reason is printed), 2 bad input or usage.")
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
    c.add_argument("--temperature", type=float, default=0.0)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--t-max", type=int, default=3, metavar="N",
                   help="proposals before the solver generates (default 3)")
    c.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="solver time limit in seconds (default 10)")
    c.add_argument("-o", "--output", metavar="OUT", help="write the layout JSON here")
    c.add_argument("--format", choices=("pretty", "json"), default="pretty")
    c.set_defaults(func=run)


def make_adapter(a: argparse.Namespace) -> Adapter:
    """The adapter the options ask for."""
    from cellspec.llm_adapters.base import Budget
    from cellspec.llm_adapters.offline import OfflineAdapter
    from cellspec.llm_adapters.openai_adapter import DEFAULT_MODEL, OpenAIAdapter, ReplayAdapter

    for name in ("max_calls", "max_tokens", "t_max"):
        v = getattr(a, name)
        if v is not None and v < 1:
            raise CellspecError(f"--{name.replace('_', '-')} must be at least 1")
    if not (a.time_limit > 0) or not (a.timeout > 0):
        raise CellspecError("--time-limit and --timeout must be positive numbers of seconds")
    budget = Budget(a.max_calls, a.max_tokens)
    kind = a.adapter
    if kind == "auto":
        kind = "openai" if a.model else "offline"
    if kind == "offline":
        return OfflineAdapter(budget)
    if kind == "replay":
        if not a.cassette:
            raise CellspecError("--adapter replay needs --cassette JSONL")
        return ReplayAdapter(a.cassette, a.model or DEFAULT_MODEL, budget)
    return OpenAIAdapter(a.model or DEFAULT_MODEL, base_url=a.base_url, timeout=a.timeout,
                         max_retries=a.retries, temperature=a.temperature, seed=a.seed,
                         budget=budget, record=a.record)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    from cellspec.dsl.parser import load_cell
    from cellspec.llm_adapters.loop import run_design

    cell = load_cell(a.cell)
    adapter = make_adapter(a)
    r = run_design(a.command, cell, adapter, t_max=a.t_max, time_limit=a.time_limit)
    if r.layout is not None and a.output:
        atomic_write(Path(a.output), json.dumps(r.layout, indent=2) + "\n")
    if a.format == "json":
        print(json.dumps(r.to_json(), indent=2))
    else:
        if r.spec is not None:
            print(r.spec.rstrip("\n"))
        print(f"outcome: {r.outcome}" + (f" ({r.reason})" if r.reason else ""))
        if r.layout is not None and r.plan is not None:
            pos = {p["id"]: p["pos"] for p in r.layout["parts"]}
            for k, st in enumerate(r.plan["grips"], 1):
                p = pos[st["part"]]
                grip = st["gripper"] + (f" {st['axis']}" if st.get("axis") else "")
                print(f"{k:4d}  {st['part']}  ({p[0]:.4f}, {p[1]:.4f}, {p[2]:.4f})  {grip}")
            print(f"{len(pos)} parts, re-verified pass (clingo), {r.calls} LLM calls, "
                  f"{r.seconds:.3f} s" + (f"; written to {a.output}" if a.output else ""))
    return EXIT_OK if r.layout is not None else EXIT_FAIL
