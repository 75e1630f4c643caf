"""Scale benchmark of the OR-Tools solvers: sequencing (cellspec plan) and repair.

* sequencing of 1 000 and 10 000 cubes (walls of touching cubes, 3 courses high, plus
  "plus" traps where the paper's greedy gets stuck), our complete sequencer vs the
  paper's Algorithm 4 (greedy sink nodes in layout order, each added only if grippable);
  solve time excludes the clingo re-verification, reported separately;
* success rate on random small stacks (20 cubes on a 7 x 7 grid): how often an order
  exists (ours: found or proved impossible), and how often Algorithm 4 finds one;
* repair of a 50-part layout (10 towers of 5) with 3 injected faults (5 violations):
  default limits (optimality proof) and with a 1 s limit.

Targets (issue 4): repair of 50 parts with <= 5 violations <= 1 s; sequencing 1 000
parts <= 1 s and 10 000 parts <= 10 s. ONE JSON line on stdout, a table on stderr.

    python bench/solve_scale.py [--sizes 1000,10000] [--random 100]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cellspec.dsl.parser import load_cell  # noqa: E402
from cellspec.layout import Layout, layout_from_obj  # noqa: E402
from cellspec.solver.cpsat.repair import repair  # noqa: E402
from cellspec.solver.cpsat.sequence import (  # noqa: E402
    greedy_sink,
    order_problem,
    solve_order,
)
from cellspec.solver.instance import build_instance  # noqa: E402
from cellspec.solver.verify import check  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIG_CELL = """import physical

cell bench_floor {
    units m
    workspace x [0, 40] y [0, 40] z [0, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
}
"""


def seq_layout(n: int) -> Layout:
    """Walls 10 cubes long, 3 courses, 0.1 m apart; every 4th block is a two-layer plus
    (10 cubes) listed arms-first, the paper greedy's trap."""
    parts: list[dict] = []
    k = 0
    blk = 0
    while len(parts) < n:
        bx, by = (blk % 60) * 0.6, (blk // 60) * 0.25
        if blk % 4 == 3:
            for lv in range(2):
                for dx, dy in ((0.05, 0), (-0.05, 0), (0, 0.05), (0, -0.05), (0, 0)):
                    parts.append({"id": f"p{k}", "type": "cube",
                                  "pos": [round(bx + 0.3 + dx, 4), round(by + 0.1 + dy, 4),
                                          round(0.025 + 0.05 * lv, 4)]})
                    k += 1
        else:
            for lv in range(3):
                for i in range(10):
                    parts.append({"id": f"p{k}", "type": "cube",
                                  "pos": [round(bx + 0.05 + 0.05 * i, 4), round(by + 0.1, 4),
                                          round(0.025 + 0.05 * lv, 4)]})
                    k += 1
        blk += 1
    return layout_from_obj({"parts": parts[:n]})


def random_stack(rng: np.random.Generator, n: int) -> Layout:
    heights: dict[tuple[int, int], int] = {}
    parts = []
    for k in range(n):
        i, j = int(rng.integers(0, 7)), int(rng.integers(0, 7))
        lv = heights.get((i, j), 0)
        heights[(i, j)] = lv + 1
        parts.append({"id": f"c{k}", "type": "cube",
                      "pos": [round(0.3 + 0.05 * i, 4), round(0.1 + 0.05 * j, 4),
                              round(0.025 + 0.05 * lv, 4)]})
    return layout_from_obj({"parts": parts})


def repair_layout(faults: int = 3) -> Layout:
    parts = []
    for i in range(5):
        for j in range(2):
            for lv in range(5):
                parts.append({"id": f"t{i}{j}_{lv}", "type": "cube",
                              "pos": [0.25 + 0.1 * i, 0.10 + 0.2 * j, 0.025 + 0.05 * lv]})
    parts[4]["pos"][0] = 0.71  # top cube pulled out of the workspace (and off its tower)
    parts[9]["pos"][2] = 0.26  # a top cube lifted: it floats
    if faults > 2:
        parts[34]["pos"][2] -= 0.02  # a top cube sunk into the cube below
    return layout_from_obj({"parts": parts})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--random", type=int, default=100, help="random stacks for the rates")
    import benchplot

    benchplot.add_plot_option(ap)
    a = ap.parse_args()
    bar = benchplot.start_progress()  # per-case progress on a terminal's stderr
    out: dict = {"sequencing": [], "targets": {}}
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "bench_floor.cell"
        f.write_text(BIG_CELL)
        big = load_cell(f)
    station = load_cell(ROOT / "rules" / "cells" / "dual_arm_station.cell")
    for n in [int(x) for x in a.sizes.split(",")]:
        benchplot.tick("sequencing", 0, None, f"{n} parts")
        lay = seq_layout(n)
        inst = build_instance(big, lay)
        t0 = time.perf_counter()
        st, steps, method, _, _ = solve_order(big, inst, 60.0)
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        paper = greedy_sink(order_problem(inst))
        t_paper = time.perf_counter() - t0
        t0 = time.perf_counter()
        v = check(big, lay.with_order(tuple(s.part for s in steps)))
        t_ver = time.perf_counter() - t0
        row = {"parts": n, "status": st, "method": method, "solve_s": round(t_ours, 3),
               "verified": v.verdict == "pass", "verify_s": round(t_ver, 3),
               "paper_greedy_found": paper is not None, "paper_greedy_s": round(t_paper, 3)}
        out["sequencing"].append(row)
        out["targets"][f"sequence_{n}"] = {"limit_s": 1.0 if n <= 1000 else 10.0,
                                           "met": t_ours <= (1.0 if n <= 1000 else 10.0)}
    rng = np.random.default_rng(7)
    exists = found = paper_ok = infeasible = 0
    t_ours = t_paper = 0.0
    for k in range(a.random):
        benchplot.tick("random stacks", k, a.random)
        lay = random_stack(rng, 20)
        inst = build_instance(station, lay)
        t0 = time.perf_counter()
        st, steps, _, _, _ = solve_order(station, inst, 10.0)
        t_ours += time.perf_counter() - t0
        t0 = time.perf_counter()
        p = greedy_sink(order_problem(inst))
        t_paper += time.perf_counter() - t0
        if st == "optimal":
            exists += 1
            found += 1
            assert check(station, lay.with_order(tuple(s.part for s in steps))).ok
        elif st == "infeasible":
            infeasible += 1
        paper_ok += p is not None
    out["random_stacks"] = {"layouts": a.random, "parts": 20, "order_exists": exists,
                            "ours_found": found, "ours_proved_impossible": infeasible,
                            "ours_unknown": a.random - found - infeasible,
                            "paper_greedy_found": paper_ok,
                            "ours_mean_s": round(t_ours / a.random, 4),
                            "paper_mean_s": round(t_paper / a.random, 5)}
    lay = repair_layout()
    nviol = len(check(station, lay).violations)
    rep = {}
    for label, limit in (("default", 10.0), ("limit_1s", 1.0)):
        t0 = time.perf_counter()
        r = repair(station, lay, time_limit=limit)
        secs = time.perf_counter() - t0
        ok = r.layout is not None and check(station, layout_from_obj(r.layout)).ok
        rep[label] = {"status": r.status, "parts_moved": r.parts_moved,
                      "displacement_m": round(r.displacement, 4), "seconds": round(secs, 3),
                      "verified": ok}
    out["repair_50"] = {"parts": len(lay), "violations": nviol, **rep}
    out["targets"]["repair_50"] = {"limit_s": 1.0,
                                   "met": rep["limit_1s"]["verified"]
                                   and rep["limit_1s"]["seconds"] <= 1.0}
    bar.close()
    err = sys.stderr
    print(f"{'parts':>6s} {'status':8s} {'method':14s} {'ours s':>7s} {'verify s':>8s} "
          f"{'Alg.4':6s} {'Alg.4 s':>7s}", file=err)
    for r in out["sequencing"]:
        print(f"{r['parts']:6d} {r['status']:8s} {r['method']:14s} {r['solve_s']:7.3f} "
              f"{r['verify_s']:8.3f} {'found' if r['paper_greedy_found'] else 'stuck':6s} "
              f"{r['paper_greedy_s']:7.3f}", file=err)
    rs = out["random_stacks"]
    print(f"random stacks of 20: order exists {rs['order_exists']}/{rs['layouts']} (ours found "
          f"all of them, proved the other {rs['ours_proved_impossible']} impossible); paper's "
          f"Algorithm 4 found {rs['paper_greedy_found']}/{rs['layouts']}", file=err)
    rp = out["repair_50"]
    print(f"repair 50 parts, {rp['violations']} violations: default {rp['default']['status']} "
          f"{rp['default']['parts_moved']} moved in {rp['default']['seconds']} s; with a 1 s "
          f"limit {rp['limit_1s']['status']} {rp['limit_1s']['parts_moved']} moved in "
          f"{rp['limit_1s']['seconds']} s", file=err)
    for k, t in out["targets"].items():
        print(f"target {k}: {'ok' if t['met'] else 'MISS'}", file=err)
    print(json.dumps(out))
    if a.plot:
        benchplot.plot_result({"bench": "solve_scale", **out}, a.plot)
    bad = [r for r in out["sequencing"] if not r["verified"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
