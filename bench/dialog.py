"""RoCo dialog benchmark: seeded Sort Cubes episodes per dialog adapter, RoCo's metrics.

ONE JSON line on stdout, a table on stderr. Each episode starts from RoCo's scene sampler
(``task_sort.py sample_initial_scene``, seed = episode number) and runs the dialog loop
(``cellspec.agent.dialog.run_episode``: dialog, RoCo's checks then cellspec's,
re-plans, execution in the twin) with RoCo's defaults (10 rounds, 5 re-plans, 10 calls per
dialog). Metrics as RoCo reports them: success rate, environment steps and re-plan attempts
(means over the successful episodes, and over all), plus LLM calls.

Adapters measured: ``offline`` (the built-in per-robot planner) next to ``faulty`` (the same
planner making RoCo's typical mistakes in a round's first plan, rate 0.5); with
``--base-url URL`` also ``openai``: a real model speaking for the robots (e.g. the bundled
Qwen2.5-Coder-0.5B, docs/models.md), with ``--rounds``, ``--replans`` and
``--max-calls-per-round`` to keep an episode affordable on a slow server; an episode the
server fails (time-out, HTTP error) counts as ``error``. ``openai`` asks for a JSON plan
bound by the scene's schema (a grammar on llama.cpp), turned into RoCo's text in code;
``openai-text`` is RoCo's unconstrained text answer, the peer.

    python bench/dialog.py [--episodes N] [--quick] [--fault-rate P]
    python bench/dialog.py --base-url URL --model M --episodes 3 --rounds 2 --adapters openai

Exit 1 only when an answer is wrong: an episode reported successful whose final state does
not have every cube on its goal panel, or an executed plan that RoCo's checks reject.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cellspec.agent.dialog import run_episode  # noqa: E402
from cellspec.agent.dialog_agents import FaultyAgents, OfflineAgents  # noqa: E402
from cellspec.dsl.parser import load_cell  # noqa: E402
from cellspec.robots import quiet_pybullet  # noqa: E402
from cellspec.robots.roco_check import RocoChecker  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SORT = REPO / "rules" / "cells" / "sort_cubes.cell"
# the model's adapters -> their plan format: a schema-bound JSON plan (the default), RoCo's text
OPENAI = {"openai": "json", "openai-text": "text"}


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 2) if xs else None


def run(episodes: int, fault_rate: float, adapters: tuple[str, ...] = ("offline", "faulty"),
        llm: argparse.Namespace | None = None) -> dict:
    """All episodes for each adapter; the JSON record."""
    from cellspec.agent.base import LLMUnavailable

    quiet_pybullet()
    cell = load_cell(SORT)
    out: dict = {"bench": "dialog", "episodes": episodes, "cell": "rules/cells/sort_cubes.cell",
                 "real_model_measured": any(a in OPENAI for a in adapters), "adapters": {}}
    if llm is not None:
        out["model"] = {"model": llm.model, "base_url": llm.base_url, "rounds": llm.rounds,
                        "replans": llm.replans, "max_calls_per_round": llm.max_calls}
    wrong = 0
    kw: dict = {}
    with RocoChecker(cell) as ch:
        for name in adapters:
            rows = []
            injected: dict[str, int] = {}
            errors = 0
            t0 = time.perf_counter()
            for ep in range(episodes):
                if name in OPENAI:
                    from cellspec.agent.dialog_agents import OpenAIAgents

                    assert llm is not None
                    rec_path = (f"{llm.record}.{name}.jsonl" if llm.record and ep == 0
                                else None)  # a small cassette: the first episode
                    ad = OpenAIAgents(llm.model, base_url=llm.base_url, timeout=llm.timeout,
                                      max_retries=0, record=rec_path,
                                      plan_format=OPENAI[name])
                    kw = {"rounds": llm.rounds, "replans": llm.replans,
                          "max_calls": llm.max_calls}
                else:
                    ad = OfflineAgents() if name == "offline" else FaultyAgents(
                        rate=fault_rate, seed=ep)
                    kw = {}
                try:
                    rec = run_episode(cell, ad, scene_seed=ep, seed=ep, checker=ch, **kw)
                except LLMUnavailable as exc:
                    errors += 1
                    print(f"  {name} episode {ep}: {exc}", file=sys.stderr, flush=True)
                    continue
                if name in OPENAI:
                    print(f"  {name} episode {ep}: {rec['outcome']}, "
                          f"{rec['metrics']['replans']} re-plans, "
                          f"{rec['metrics']['llm_calls']} calls", file=sys.stderr, flush=True)
                m = rec["metrics"]
                ok_final = all(v.endswith(f"in {ch.task.cube_to_bin[o]}")
                               for o, v in rec["final"].items())
                if m["success"] != ok_final:
                    wrong += 1
                for f in getattr(ad, "injected", []):
                    injected[f] = injected.get(f, 0) + 1
                checks: dict[str, int] = {}
                for r in rec["log"]:
                    for at in r["attempts"]:
                        for f in at["failures"][:1]:
                            k = f"{f['source']}:{f['check']}"
                            checks[k] = checks.get(k, 0) + 1
                rows.append((m, checks, rec["outcome"]))
            secs = time.perf_counter() - t0
            succ = [m for m, _, _ in rows if m["success"]]
            done = max(1, len(rows))
            fails: dict[str, int] = {}
            for _, c, _ in rows:
                for k, v in c.items():
                    fails[k] = fails.get(k, 0) + v
            parse_fails = sum(1 for _, c, _ in rows for k in c if k == "roco:parse")
            out["adapters"][name] = {
                "episodes_with_parse_failure": parse_fails,
                "llm_calls_total": sum(m["llm_calls"] for m, _, _ in rows),
                "success_rate": round(len(succ) / done, 3), "episodes_run": len(rows),
                "server_errors": errors,
                "env_steps_mean_success": _mean([m["env_steps"] for m in succ]),
                "rounds_mean_success": _mean([m["rounds"] for m in succ]),
                "replans_mean": _mean([m["replans"] for m, _, _ in rows]),
                "replans_total": sum(m["replans"] for m, _, _ in rows),
                "llm_calls_mean": _mean([m["llm_calls"] for m, _, _ in rows]),
                "first_failed_checks": dict(sorted(fails.items())),
                "outcomes": {o: sum(1 for _, _, x in rows if x == o)
                             for o in sorted({x for _, _, x in rows})},
                "injected_faults": dict(sorted(injected.items())),
                "seconds": round(secs, 1)}
    out["wrong_answers"] = wrong
    return out


def main() -> int:
    """Run the benchmark; exit 1 on a wrong answer."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="5 episodes per adapter")
    ap.add_argument("--fault-rate", type=float, default=0.5)
    ap.add_argument("--adapters", default=None, help="comma-separated: offline, faulty, openai "
                    "(a JSON plan bound by the scene's schema), openai-text (RoCo's text "
                    "plan, unconstrained) (default offline,faulty; with --base-url also "
                    "openai)")
    ap.add_argument("--base-url", help="a model server for the openai adapter")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--timeout", type=float, default=300.0, help="per model call (s)")
    ap.add_argument("--rounds", type=int, default=10, help="openai: rounds per episode")
    ap.add_argument("--replans", type=int, default=5, help="openai: re-plans per round")
    ap.add_argument("--max-calls", type=int, default=10, help="openai: calls per dialog")
    ap.add_argument("--record", metavar="PREFIX", help="openai: record the first episode's "
                    "exchanges to PREFIX.<adapter>.jsonl (a replayable cassette)")
    a = ap.parse_args()
    n = 5 if a.quick else a.episodes
    names = tuple((a.adapters or ("offline,faulty,openai" if a.base_url else
                                  "offline,faulty")).split(","))
    res = run(n, a.fault_rate, names, a if a.base_url else None)
    print(json.dumps(res, sort_keys=True))
    print(f"RoCo Sort Cubes dialog, {n} seeded episodes per adapter"
          + (f" (model {a.model})" if a.base_url else " (no real model measured)"),
          file=sys.stderr)
    print(f"{'adapter':<9} {'success':>8} {'env steps':>10} {'rounds':>7} {'re-plans':>9} "
          f"{'calls':>6} {'s':>6}", file=sys.stderr)
    for k, v in res["adapters"].items():
        print(f"{k:<9} {v['success_rate']:>8.2f} {v['env_steps_mean_success']!s:>10} "
              f"{v['rounds_mean_success']!s:>7} {v['replans_mean']!s:>9} "
              f"{v['llm_calls_mean']!s:>6} {v['seconds']:>6}", file=sys.stderr)
        print(f"          first failed checks: {v['first_failed_checks']}", file=sys.stderr)
    return 1 if res["wrong_answers"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
