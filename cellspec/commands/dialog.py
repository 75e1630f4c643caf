"""cellspec dialog: RoCo's multi-robot dialog on Sort Cubes, checked, re-planned, executed."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cellspec.commands.bounded import LimitHit, print_unknown, run_bounded
from cellspec.commands.common import EXIT_FAIL, EXIT_OK, add_shared, atomic_write
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.extras import require_extra
from cellspec.core.limits import check_output, check_seconds, parse_memory
from cellspec.core.status import Status
from cellspec.robots import quiet_pybullet


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``dialog`` verb."""
    c = sub.add_parser("dialog", help="RoCo's multi-robot LLM dialog: plan, check, re-plan, "
                       "execute in the twin",
                       description="One agent per robot, each with its own prompt and view "
                       "of the scene, talks in turn until one says EXECUTE; the plan is "
                       "checked as RoCo checks it (then cellspec's checks); on failure the "
                       "feedback goes back into the dialog and the agents re-plan; a valid "
                       "plan is executed in the twin, round after round until every cube is "
                       "on its goal panel or the rounds run out. Exit 0 the task is done, 1 "
                       "it is not, 2 bad input. The offline and faulty agents are built-in "
                       "planners, not models.")
    add_shared(c, cell="the .cell file (robots, reach boxes, panels, objects)",
               output=("JSON", "also write the transcript here"), max_memory=True,
               time_limit=(None, "time limit of the whole verb in seconds (the dialog's LLM "
                           "calls, the checks, the twin; default none; unknown when hit)"))
    c.add_argument("--task", choices=("sort",), default="sort", help="RoCo's task (sort)")
    c.add_argument("--adapter", choices=("offline", "faulty", "openai", "replay"),
                   default="offline", help="who speaks for the robots (default offline)")
    c.add_argument("--rounds", type=int, default=10, metavar="N",
                   help="environment steps (RoCo's --tsteps, default 10)")
    c.add_argument("--replans", type=int, default=5, metavar="N",
                   help="dialogs per round before giving up on it (RoCo's --num_replans, 5)")
    c.add_argument("--max-calls-per-round", type=int, default=10, metavar="N",
                   help="LLM calls per dialog (RoCo: 10)")
    c.add_argument("--scene-seed", type=int, metavar="N",
                   help="start the cubes as RoCo's sampler does with this seed (default: the "
                   "cell's start panels)")
    c.add_argument("--seed", type=int, default=0, help="IK, motion and fault seed (default 0)")
    c.add_argument("--fault-rate", type=float, default=0.5, metavar="P",
                   help="faulty adapter: chance of a mistake in a round's first plan")
    c.add_argument("--model", help="the model name (openai/replay adapters)")
    c.add_argument("--base-url", help="an OpenAI-compatible server (default OPENAI_BASE_URL)")
    c.add_argument("--cassette", metavar="JSONL", help="replay: the cassette to answer from")
    c.add_argument("--record", metavar="JSONL", help="openai: append every exchange here")
    c.add_argument("--plan-format", choices=("json", "text"), default="json",
                   help="openai: json (default) asks for a JSON plan bound by the scene's "
                   "schema, written as RoCo's text in code (never a parse failure); text "
                   "asks for RoCo's own text answer")
    c.add_argument("--max-calls", type=int, metavar="N", help="LLM calls allowed in all")
    c.add_argument("--max-tokens", type=int, metavar="N", help="LLM tokens allowed in all")
    c.add_argument("--timeout", type=float, default=30.0, metavar="S", help="per LLM call")
    c.add_argument("--retries", type=int, default=2, metavar="N", help="per LLM call")
    c.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature of the LLM adapter, 0 to 2 (default 0)")
    c.add_argument("--world", metavar="DB", help="a world database (cellspec run): every "
                   "agent's prompt gets the task-relevant subgraph of --world-action "
                   "(cellspec world context)")
    c.add_argument("--world-action", metavar="ID", help="with --world: the task node "
                   "(pick:c1, place:c1; default the database's current task)")
    c.set_defaults(func=run)


def make_agents(a: argparse.Namespace):
    """The dialog agents the options ask for."""
    # lazy: CLI start-up time (every verb loads for --help; loads the translators)
    from cellspec.agent.base import Budget
    from cellspec.agent.dialog_agents import (
        FaultyAgents,
        OfflineAgents,
        OpenAIAgents,
        ReplayAgents,
    )
    from cellspec.agent.openai_adapter import DEFAULT_MODEL, MAX_RETRIES, MAX_TIMEOUT

    for name in ("max_calls", "max_tokens"):
        v = getattr(a, name)
        if v is not None and v < 1:
            raise CellspecError(f"--{name.replace('_', '-')} must be at least 1")
    check_seconds(a.timeout, "--timeout", MAX_TIMEOUT)
    if not (0 <= a.retries <= MAX_RETRIES):
        raise CellspecError(f"--retries must be from 0 to {MAX_RETRIES}")
    if not (0 <= a.temperature <= 2):
        raise CellspecError("--temperature must be a number from 0 to 2")
    if a.seed < 0 or (a.scene_seed is not None and not 0 <= a.scene_seed < 2**32):
        raise CellspecError("--seed and --scene-seed must be 0 or more (below 2**32)")
    budget = Budget(a.max_calls, a.max_tokens)
    if a.adapter == "offline":
        return OfflineAgents(budget)
    if a.adapter == "faulty":
        return FaultyAgents(rate=a.fault_rate, seed=a.seed, budget=budget)
    if a.adapter == "replay":
        if not a.cassette:
            raise CellspecError("--adapter replay needs --cassette JSONL")
        return ReplayAgents(a.cassette, a.model or DEFAULT_MODEL, budget)
    return OpenAIAgents(a.model or DEFAULT_MODEL, base_url=a.base_url, timeout=a.timeout,
                        max_retries=a.retries, temperature=a.temperature, seed=a.seed,
                        budget=budget, record=a.record, plan_format=a.plan_format)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code. The whole verb runs in a bounded worker
    (:mod:`cellspec.commands.bounded`): ``--time-limit`` (none by default) and
    ``--max-memory``, like the other verbs; the transcript is written here."""
    require_extra("twin", verb="dialog")
    if a.adapter == "openai":
        require_extra("llm", verb="dialog --adapter openai")
    if a.time_limit is not None:
        check_seconds(a.time_limit, "--time-limit", 3600.0)
    check_output(a.output, "-o")
    check_output(a.record, "--record")
    a.max_memory = parse_memory(a.max_memory)
    got = run_bounded(lambda: _compute(a), time_limit=a.time_limit, max_memory=a.max_memory)
    if isinstance(got, LimitHit):
        return print_unknown(got, a.format, {"log": [], "metrics": None}, key="outcome",
                             handed="plan")
    rec = got
    text = json.dumps(rec, indent=2, sort_keys=True)
    if a.output:
        atomic_write(Path(a.output), text + "\n")
    _print(a, rec, text)
    return EXIT_OK if rec["outcome"] == "success" else EXIT_FAIL


def _compute(a: argparse.Namespace) -> dict:
    """The verb's work (in the bounded worker): the episode record as plain data."""
    quiet_pybullet()
    # lazy: CLI start-up time (every verb loads for --help; loads the translators, textX, the twin)
    from cellspec.agent.dialog import run_episode
    from cellspec.dsl.parser import load_cell
    from cellspec.robots.models import check_models

    cell = load_cell(a.cell)
    src = cell.source
    if not cell.robots or not cell.twin.objects:
        raise CellspecError(Diagnostic(src.file, src.line, src.col, f"cell {cell.name} needs "
                                       "robots and `object` items (cubes on panels) for the "
                                       "sort task"))
    check_models(cell)
    if a.world_action is not None and a.world is None:
        raise CellspecError("--world-action needs --world DB")
    world, world_rec = None, None
    if a.world is not None:
        # lazy: CLI start-up time (loads the world model)
        from cellspec.world.context import prompt_context

        world, world_rec = prompt_context(a.world, a.world_action)
    agents = make_agents(a)
    rec = run_episode(cell, agents, rounds=a.rounds, replans=a.replans,
                      max_calls=a.max_calls_per_round, scene_seed=a.scene_seed, seed=a.seed,
                      world=world)
    if world_rec is not None:
        rec["world"] = world_rec
    return rec


def _print(a: argparse.Namespace, rec: dict, text: str) -> None:
    """The transcript: JSON, or the pretty summary."""
    if a.format == "json":
        print(text)
    else:
        m = rec["metrics"]
        print(f"{rec['outcome']}: {m['rounds']} round(s), {m['env_steps']} env steps, "
              f"{m['replans']} re-plan(s), {m['llm_calls']} call(s) ({rec['adapter']})")
        for r in rec["log"]:
            for at in r["attempts"]:
                plan = (at["plan"] or "(no plan)").replace("\n", " | ")
                print(f"  round {r['round']} try {at['replan']}: {at['verdict']}: {plan}")
                if at["verdict"] == Status.FAIL:
                    for f in at["failures"]:
                        print(f"    {f['source']} {f['check']} {f['robots']}: {f['text'][:160]}")
            if r.get("execute_error"):
                print(f"    execution failed: {r['execute_error']}")
        if rec["note"]:
            print(f"  note: {rec['note']}")
