"""RoCo dialog benchmark: seeded Sort Cubes episodes per dialog adapter, RoCo's metrics.

ONE JSON line on stdout, a table on stderr. Each episode starts from RoCo's scene sampler
(``task_sort.py sample_initial_scene``, seed = episode number) and runs the dialog loop
(``cellspec.agent.dialog.run_episode``: dialog, RoCo's checks then cellspec's,
re-plans, execution in the twin) with RoCo's defaults (10 rounds, 5 re-plans, 10 calls per
dialog). Metrics as RoCo reports them: success rate, environment steps and re-plan attempts
(means over the successful episodes, and over all), plus LLM calls.

Adapters measured: ``offline`` (the built-in per-robot planner) next to ``faulty`` (the same
planner making RoCo's typical mistakes in a round's first plan, rate 0.5). NO REAL MODEL IS
MEASURED: no model endpoint is reachable from this machine, and no cassette of a real
model's dialog exists to replay; the ``openai`` adapter is tested only against a local
fake server (tests/test_dialog.py). The figures say how the loop, the checks and the
feedback behave, not how well an LLM collaborates.

    python bench/dialog.py [--episodes N] [--quick] [--fault-rate P]

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


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 2) if xs else None


def run(episodes: int, fault_rate: float) -> dict:
    """All episodes for both adapters; the JSON record."""
    quiet_pybullet()
    cell = load_cell(SORT)
    out: dict = {"bench": "dialog", "episodes": episodes, "cell": "rules/cells/sort_cubes.cell",
                 "real_model_measured": False,
                 "not_measured": {"openai": "no model endpoint reachable from this machine",
                                  "replay": "no cassette of a real model's dialog exists"},
                 "adapters": {}}
    wrong = 0
    with RocoChecker(cell) as ch:
        for name in ("offline", "faulty"):
            rows = []
            injected: dict[str, int] = {}
            t0 = time.perf_counter()
            for ep in range(episodes):
                ad = OfflineAgents() if name == "offline" else FaultyAgents(
                    rate=fault_rate, seed=ep)
                rec = run_episode(cell, ad, scene_seed=ep, seed=ep, checker=ch)
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
            fails: dict[str, int] = {}
            for _, c, _ in rows:
                for k, v in c.items():
                    fails[k] = fails.get(k, 0) + v
            out["adapters"][name] = {
                "success_rate": round(len(succ) / episodes, 3),
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
    a = ap.parse_args()
    n = 5 if a.quick else a.episodes
    res = run(n, a.fault_rate)
    print(json.dumps(res, sort_keys=True))
    print(f"RoCo Sort Cubes dialog, {n} seeded episodes per adapter (NO real model measured: "
          "no endpoint reachable)", file=sys.stderr)
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
