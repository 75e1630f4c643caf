"""Benchmark: the task-relevant subgraph (``cellspec world context``) against the whole
graph, on the world benchmark's runs (seed 003, Appendix C.1).

Seeded ``cellspec run`` runs (diagnose mode) on the dual-arm station build the world
benchmark's layouts (``rules/world/tower_row.json``, ``two_towers.json``, as
bench/recovery_loop.py does) and two larger ones (``rules/layouts/dense_block_12.json``,
``canopy_21.json``), each with no fault and with one slip, obstacle and moved fault. Before
every action the world database is read (``run_layout(observer=...)``, nothing is
written) and, for every zone and number of hops, the context of the action's task node is
extracted; after every diagnosis the relation atoms the cell's diagnose rules actually
read on that Δ are found by running the instrumented rules with clingo
(cellspec/world/reads.py; commit conditions read measures only, no relation).

Per action: tokens of the context and of the whole graph in the same serialisation
(estimated as ceil(chars / 4): tiktoken is not installed), and recall = the read relations
present in the graph before the action that the context holds / all of them. Read
relations that are not in the graph (the action's own predicted effects, new
observations) cannot be in any context drawn from it: they are counted apart, with
whether their entities are in the context.

Prints ONE JSON line on stdout and a table on stderr.
Usage: nice python bench/world_context.py [--quick] [--seed S] [--engine gripper|arm]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cellspec.dsl.parser import load_cell  # noqa: E402
from cellspec.layout import load_layout  # noqa: E402
from cellspec.world import context as wc  # noqa: E402
from cellspec.world.reads import commit_reads, diagnose_reads  # noqa: E402
from cellspec.world.run import Fault, make_arm, run_layout  # noqa: E402

CELL = REPO / "rules" / "cells" / "dual_arm_station.cell"
LAYOUTS = {"tower_row": REPO / "rules" / "world" / "tower_row.json",
           "two_towers": REPO / "rules" / "world" / "two_towers.json",
           "dense_block_12": REPO / "rules" / "layouts" / "dense_block_12.json",
           "canopy_21": REPO / "rules" / "layouts" / "canopy_21.json"}
KINDS = ("none", "slip", "obstacle", "moved")
HOPS = (0, 1, 2, 3)
TARGET_RECALL, TARGET_RATIO = 0.99, 0.20


def _key(zone: str, hops: int, supports: bool) -> str:
    return f"{zone}/{hops}" + ("+sup" if supports else "")


class Recorder:
    """The run's observer: per action, the contexts of every configuration and the reads."""

    def __init__(self, cell: Any) -> None:
        self.cell = cell
        self.rows: list[dict[str, Any]] = []
        self.pending: dict[str, Any] | None = None

    def before(self, label: str, kind: str, part: str, world: Any) -> None:
        """Extract every configuration's context from the graph as it is now."""
        act = wc.find_action(world, f"{kind}:{part}")
        whole = wc.whole(world, act)
        graph = {r for r, _, _ in whole.relations}
        ctx = {}
        for z in wc.ZONES:
            for h in HOPS:
                for sup in (False, True):
                    c = wc.extract(world, act, zone=z, hops=h, supports=sup)
                    ctx[_key(z, h, sup)] = (wc.count_tokens(c.text()),
                                            {r for r, _, _ in c.relations}, c.ids())
        self.pending = {"label": label, "kind": kind, "part": part, "graph": graph,
                        "entities": {e.id for e, _ in whole.entities},
                        "whole_tokens": wc.count_tokens(whole.text()), "ctx": ctx}

    def diagnosed(self, label: str, kind: str, part: str, dg: Any) -> None:
        """The relations the diagnose rules read on this action's Δ."""
        p = self.pending
        assert p is not None and p["label"] == label
        reads = diagnose_reads(self.cell, dg.delta.facts())
        in_graph = {r for r in p["graph"] if any(x.matches(r) for x in reads)}
        outside = sorted({x.rel for x in reads if not any(x.matches(r) for r in p["graph"])},
                         key=str)
        p["read"] = in_graph
        p["outside"] = outside
        self.rows.append(p)
        self.pending = None


def trials(seed: int, quick: bool) -> list[tuple[str, str, int, tuple[Fault, ...]]]:
    """(layout, condition, seed, faults) per run; fault positions drawn from the seed."""
    rng = np.random.default_rng(seed)
    out = []
    reps = {"tower_row": 1 if quick else 3, "two_towers": 1 if quick else 3,
            "dense_block_12": 1 if quick else 2, "canopy_21": 0 if quick else 1}
    for name, n in reps.items():
        n_act = 2 * len(load_layout(LAYOUTS[name]))
        for k in range(n):
            for kind in KINDS:
                s = seed * 1000 + 10 * KINDS.index(kind) + k
                if kind == "none":
                    out.append((name, kind, s, ()))
                    continue
                lo = 5 if kind == "moved" else 1
                at = int(rng.integers(lo, n_act + 1))
                out.append((name, kind, s, (Fault(kind, at),)))
    return out


def summarise(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Recall and token ratio of one configuration over rows."""
    read = sum(len(r["read"]) for r in rows)
    hit = sum(len(r["read"] & r["ctx"][key][1]) for r in rows)
    tok = sum(r["ctx"][key][0] for r in rows)
    whole = sum(r["whole_tokens"] for r in rows)
    with_reads = [r for r in rows if r["read"]]
    full = sum(1 for r in with_reads if r["read"] <= r["ctx"][key][1])
    outside = [x for r in rows for x in r["outside"]]
    ent_ok = sum(1 for r in rows for x in r["outside"]
                 if all(e in r["ctx"][key][2] for e in (x.a, x.b) if e in r["entities"]))
    return {"recall": round(hit / read, 4) if read else None, "read_relations": read,
            "actions": len(rows), "actions_with_reads": len(with_reads),
            "actions_full_recall": full,
            "token_ratio": round(tok / whole, 4) if whole else None,
            "mean_token_ratio": round(float(np.mean([r["ctx"][key][0] / r["whole_tokens"]
                                                     for r in rows])), 4) if rows else None,
            "context_tokens": tok, "whole_tokens": whole,
            "reads_outside_graph": len(outside),
            "outside_with_entities_in_context": ent_ok}


def main() -> int:
    """Run the trials, print the JSON line and the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one run per kind, no canopy_21")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engine", choices=("gripper", "arm"), default="gripper",
                    help="gripper (default, fast): a kinematic gripper body; arm: the twin's "
                    "robot arm drives the pad (the graphs are the same kind, slower)")
    a = ap.parse_args()
    cell = load_cell(CELL)
    arm = make_arm(cell, a.engine)
    t0 = time.perf_counter()
    runs = []
    by_layout: dict[str, list[dict[str, Any]]] = {n: [] for n in LAYOUTS}
    for name, kind, s, faults in trials(a.seed, a.quick):
        layout = load_layout(LAYOUTS[name])
        rec = Recorder(cell)
        r = run_layout(cell, layout, None, faults=faults, seed=s, engine=a.engine, arm=arm,
                       order=tuple(layout.order) if layout.order else None, observer=rec)
        runs.append({"layout": name, "fault": kind, "seed": s, "success": r.success,
                     "actions": len(rec.rows)})
        by_layout[name] += rec.rows
        print(f"  {name:15s} {kind:9s} seed {s:5d}: {len(rec.rows):3d} actions, "
              f"{'built' if r.success else r.reason}", file=sys.stderr)
    if arm is not None:
        arm.close()
    rows = [x for v in by_layout.values() for x in v]
    configs = [_key(z, h, sup) for sup in (False, True) for z in wc.ZONES for h in HOPS]
    table = {k: summarise(rows, k) for k in configs}
    ok = [k for k in configs if (table[k]["recall"] or 0) >= TARGET_RECALL]
    best = min(ok, key=lambda k: (table[k]["token_ratio"], k)) if ok else None
    default = _key(wc.DEFAULT_ZONE, wc.DEFAULT_HOPS, wc.DEFAULT_SUPPORTS)
    per_layout = {n: summarise(v, default) for n, v in by_layout.items() if v}
    out = {"bench": "world_context", "cell": str(CELL.relative_to(REPO)), "seed": a.seed,
           "engine": "arm" if arm is not None else "kinematic-gripper",
           "token_method": wc.TOKEN_METHOD, "runs": runs,
           "commit_condition_relations_read": 0,
           "commit_condition_measures_read": {k: list(commit_reads(cell, k)[1])
                                              for k in ("pick", "place")},
           "configs": table, "best_at_target_recall": best, "default": default,
           "default_per_layout": per_layout,
           "target": {"recall": TARGET_RECALL, "token_ratio": TARGET_RATIO},
           "wall_s": round(time.perf_counter() - t0, 1),
           "note": "machine shared with other jobs while measuring; tokens are estimates"}
    print(json.dumps(out, sort_keys=True))
    err = sys.stderr
    print(f"\ncontext vs whole graph ({len(rows)} actions, {len(runs)} runs, tokens "
          f"chars/4); target recall >= {TARGET_RECALL:.0%} at <= {TARGET_RATIO:.0%} tokens",
          file=err)
    print(f"  {'zone/hops':12s} {'recall':>7s} {'reads':>5s} {'full':>9s} {'tok%':>6s} "
          f"{'mean%':>6s}", file=err)
    for k in configs:
        t = table[k]
        rc = "-" if t["recall"] is None else f"{t['recall']:.3f}"
        mark = " <- default" if k == default else (" <- best" if k == best else "")
        print(f"  {k:12s} {rc:>7s} {t['read_relations']:5d} "
              f"{t['actions_full_recall']:4d}/{t['actions_with_reads']:<4d} "
              f"{100 * t['token_ratio']:5.1f}% {100 * t['mean_token_ratio']:5.1f}%{mark}",
              file=err)
    print(f"default {default} per layout:", file=err)
    for n, t in per_layout.items():
        rc = "-" if t["recall"] is None else f"{t['recall']:.3f}"
        print(f"  {n:15s} recall {rc} ({t['read_relations']} reads)  tokens "
              f"{100 * t['token_ratio']:.1f}% of the whole graph ({t['context_tokens']}/"
              f"{t['whole_tokens']})", file=err)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
