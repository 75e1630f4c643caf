"""Benchmark: the world-model loop (commit, roll back, diagnose, recover) against baselines.

Seeded trials on the dual-arm station (``rules/cells/dual_arm_station.cell``) building, in
turn, ``rules/world/tower_row.json`` (4 cubes, 8 pick/place actions) and
``rules/world/two_towers.json`` (6 cubes, 12 actions) in the pybullet simulation
of ``cellspec/world/sim.py``; by default the twin's robot arm (IK along every path) drives
the gripper pad (``--engine gripper``: a kinematic gripper body on straight paths).
Each trial is run three times: with diagnosis (``diagnose``), without diagnosis
(``nodiag``: commit/rollback, then re-perceive and restart the part) and with blind retry
(``blind``: retry the failed action as is).

Prints one JSON line on stdout and a table on stderr (see bench/README.md).
Usage: python bench/recovery_loop.py [--quick] [--normal N] [--faulted N] [--seed S]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cellspec.dsl.parser import load_cell  # noqa: E402
from cellspec.layout import load_layout  # noqa: E402
from cellspec.world.run import ENGINE, MODES, Fault, make_arm, run_layout  # noqa: E402

CELL = REPO / "rules" / "cells" / "dual_arm_station.cell"
LAYOUTS = (REPO / "rules" / "world" / "tower_row.json",
           REPO / "rules" / "world" / "two_towers.json")
KINDS = ("none", "slip", "obstacle", "moved")
WALL = REPO / "rules" / "layouts" / "wall_9.json"  # 9 touching cubes: the guarded place


def trials(n_normal: int, n_faulted: int, seed: int, n_actions: tuple[int, ...]
           ) -> list[tuple[str, int, int, tuple]]:
    """(condition, seed, layout index, faults) per trial; the layouts alternate, fault
    positions are drawn from the seed."""
    rng = np.random.default_rng(seed)
    out: list[tuple[str, int, int, tuple]] = [
        ("none", seed * 1000 + k, k % len(n_actions), ()) for k in range(n_normal)]
    for kind in KINDS[1:]:
        for k in range(n_faulted):
            li = k % len(n_actions)
            # `moved` displaces a placed part nothing will stand on: in both layouts the
            # first is placed by action 4, so it is drawn from action 5 on
            lo = 5 if kind == "moved" else 1
            at = int(rng.integers(lo, n_actions[li] + 1))
            out.append((kind, seed * 1000 + 100 + k, li, (Fault(kind, at),)))
    return out


def main() -> int:
    """Run the trials and print the JSON line and the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 normal and 2 faulted per kind")
    ap.add_argument("--normal", type=int, default=40)
    ap.add_argument("--faulted", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wall", type=int, default=12,
                    help="normal runs of the wall of touching cubes (rules/layouts/wall_9.json, "
                    "diagnose mode), reported on their own (12)")
    ap.add_argument("--engine", choices=("arm", "gripper"), default="arm",
                    help="arm (default): the twin's robot arm drives the gripper pad; "
                    "gripper: a kinematic gripper body on straight paths")
    import benchplot

    benchplot.add_plot_option(ap)
    a = ap.parse_args()
    if a.quick:
        a.normal, a.faulted, a.wall = 4, 2, 3
    cell = load_cell(CELL)
    layouts = [load_layout(p) for p in LAYOUTS]
    plan = trials(a.normal, a.faulted, a.seed, tuple(2 * len(x) for x in layouts))
    arm = make_arm(cell, a.engine)  # one twin for every run (the arm is reset per run)
    engine = "arm" if arm is not None else ENGINE
    res: dict[str, dict[str, list]] = {m: {k: [] for k in KINDS} for m in MODES}
    t0 = time.perf_counter()
    done = 0
    progress = contextlib.ExitStack()
    progress.enter_context(benchplot.reporting())  # per-trial progress on a terminal
    for mode in MODES:
        for cond, s, li, faults in plan:
            benchplot.tick("trials", done, len(MODES) * len(plan), f"{mode}: {cond}")
            done += 1
            layout = layouts[li]
            order = tuple(layout.order)
            w0 = time.perf_counter()
            r = run_layout(cell, layout, None, faults=faults, seed=s, mode=mode, order=order,
                           engine=a.engine, arm=arm)
            res[mode][cond].append({
                "success": r.success, "actions": len(r.steps), "sim_s": r.sim_seconds,
                "wall_s": time.perf_counter() - w0, "skipped": bool(r.skipped_faults),
                "diagnosed": next(iter(r.first_diagnosis.values()), None),
                "recovery_s": r.recovery_times, "parts": len(order) if r.success else 0})
    progress.close()
    wall_layout = load_layout(WALL)
    wall_runs = []
    for k in range(a.wall):
        r = run_layout(cell, wall_layout, None, seed=a.seed * 1000 + 500 + k, engine=a.engine,
                       arm=arm)
        wall_runs.append({"success": r.success, "reason": r.reason,
                          "max_error_mm": round(r.max_error * 1000, 1),
                          "place_corrections": r.place_corrections})
    wall_summary = {"layout": str(WALL.relative_to(REPO)), "runs": len(wall_runs),
                    "success_rate": round(sum(x["success"] for x in wall_runs)
                                          / max(1, len(wall_runs)), 4),
                    "place_corrections": sum(x["place_corrections"] for x in wall_runs),
                    "failures": [x["reason"] for x in wall_runs if not x["success"]]}
    total_wall = time.perf_counter() - t0
    summary: dict[str, dict] = {}
    for mode in MODES:
        rows = {}
        for cond in KINDS:
            rs = res[mode][cond]
            applied = [x for x in rs if not x["skipped"]]
            rec = [t for x in rs for t in x["recovery_s"]]
            row = {"runs": len(rs), "applied": len(applied),
                   "success_rate": round(sum(x["success"] for x in rs) / max(1, len(rs)), 4),
                   "mean_actions": round(statistics.mean(x["actions"] for x in rs), 2),
                   "mean_recovery_sim_s": round(statistics.mean(rec), 3) if rec else None}
            if cond != "none" and mode == "diagnose":
                row["diagnosis_accuracy"] = round(
                    sum(x["diagnosed"] == cond for x in applied) / len(applied), 4) \
                    if applied else None
            rows[cond] = row
        allr = [x for c in KINDS for x in res[mode][c]]
        faulted = [x for c in KINDS[1:] for x in res[mode][c]]
        sim = sum(x["sim_s"] for x in allr)
        wall = sum(x["wall_s"] for x in allr)
        summary[mode] = {
            "conditions": rows,
            "success_rate": round(sum(x["success"] for x in allr) / len(allr), 4),
            "faulted_success_rate": round(sum(x["success"] for x in faulted)
                                          / max(1, len(faulted)), 4),
            "mean_actions": round(statistics.mean(x["actions"] for x in allr), 2),
            "parts_per_sim_minute": round(60 * sum(x["parts"] for x in allr) / sim, 2),
            "actions_per_wall_second": round(sum(x["actions"] for x in allr) / wall, 2),
        }
    d = summary["diagnose"]
    applied = [x for c in KINDS[1:] for x in res["diagnose"][c] if not x["skipped"]]
    acc = sum(x["diagnosed"] == c for c in KINDS[1:] for x in res["diagnose"][c]
              if not x["skipped"]) / max(1, len(applied))
    targets = {"success_rate >= 0.95": d["success_rate"] >= 0.95,
               "diagnosis_accuracy >= 0.95": acc >= 0.95}
    note = (f"the twin's robot arm {arm.robot} drives the gripper pad (arm links not in the "
            "physics scene)" if arm is not None else "a kinematic gripper body, not the arm")
    out = {"bench": "recovery_loop", "engine": engine, "engine_note": note,
           "cell": str(CELL.relative_to(REPO)),
           "layouts": [str(p.relative_to(REPO)) for p in LAYOUTS], "seed": a.seed,
           "trials": {"normal": a.normal, "per_fault": a.faulted}, "modes": summary,
           "diagnosis_accuracy": round(acc, 4), "targets": targets, "wall": wall_summary,
           "target_met": all(targets.values()), "wall_seconds": round(total_wall, 1)}
    print(json.dumps(out))
    if a.plot:
        benchplot.plot_result(out, a.plot)
    err = sys.stderr
    print(f"recovery_loop: {len(plan)} trials x {len(MODES)} modes, engine {engine} "
          f"({note}), {total_wall:.0f} s", file=err)
    print(f"{'mode':<9} {'condition':<9} {'runs':>4} {'success':>8} {'diag.acc':>8} "
          f"{'actions':>7} {'t_rec(sim s)':>12}", file=err)
    for mode in MODES:
        for cond in KINDS:
            r = summary[mode]["conditions"][cond]
            acc_s = f"{r['diagnosis_accuracy']:.2f}" if r.get("diagnosis_accuracy") \
                is not None else "-"
            trec = f"{r['mean_recovery_sim_s']:.2f}" if r["mean_recovery_sim_s"] else "-"
            print(f"{mode:<9} {cond:<9} {r['runs']:>4} {r['success_rate']:>8.2f} {acc_s:>8} "
                  f"{r['mean_actions']:>7.2f} {trec:>12}", file=err)
        s = summary[mode]
        print(f"{mode:<9} {'ALL':<9} {'':>4} {s['success_rate']:>8.2f} {'':>8} "
              f"{s['mean_actions']:>7.2f}   parts/sim-min {s['parts_per_sim_minute']:.1f}, "
              f"actions/wall-s {s['actions_per_wall_second']:.1f}", file=err)
    print(f"wall of touching cubes ({wall_summary['layout']}, diagnose): "
          f"{sum(x['success'] for x in wall_runs)}/{len(wall_runs)} built, "
          f"{wall_summary['place_corrections']} guarded-place corrections", file=err)
    for k, v in targets.items():
        print(f"target {k}: {'ok' if v else 'MISS'}", file=err)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
