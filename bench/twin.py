"""Twin core benchmark: collision checks/s, IK success and time, RRT-Connect dual-arm times.

ONE JSON line on stdout, a table on stderr. Targets (issue 6): >= 4 000 collision checks/s
on a dual-arm scene; IK >= 99 % success on 500 seeded reachable targets per robot with a
mean <= 20 ms (next to a single ``calculateInverseKinematics`` call on the same targets);
dual-arm RRT-Connect median <= 0.5 s and p90 <= 2 s over ~20 seeded queries.

    python bench/twin.py [--quick] [--no-designs] [--seed N] [--ik-targets N] [--rrt-queries N]

It also runs the Table VII analogue (``bench/twin_designs.py``: 12 designs simulated end to
end, dual-arm speedups estimated and executed) as its ``designs`` section; ``--quick`` runs
three of them, ``--no-designs`` none.

Exit 1 only when an answer is wrong (an accepted IK solution or a planned path that an
independent re-check rejects); missed targets are reported, not enforced.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))  # bench/twin_designs.py

import numpy as np  # noqa: E402
import pybullet as p  # noqa: E402

from cellspec.dsl.parser import load_cell  # noqa: E402
from cellspec.robots.collision import CollisionChecker  # noqa: E402
from cellspec.robots.ik import POS_TOL, ROT_TOL, grasp_quat, rot_error, solve_ik  # noqa: E402
from cellspec.robots.models import MODELS  # noqa: E402
from cellspec.robots.motion import densify, edge_free, plan_motion  # noqa: E402
from cellspec.robots.twin import Twin  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
STATION = REPO / "rules" / "cells" / "dual_arm_station.cell"
CUBES = [(0.30, 0.10), (0.45, 0.30), (0.60, 0.45), (0.35, 0.42), (0.55, 0.12)]
GRIPPER = {"abb_irb120": "vacuum", "kuka_iiwa": "vacuum", "abb_irb1600": "parallel",
           "panda": "parallel"}

PB_VARIANTS = (("default", {}),
               ("1000it", {"maxNumIterations": 1000, "residualThreshold": 1e-6}),
               ("limits_1000it", {"maxNumIterations": 1000, "residualThreshold": 1e-6}))

SINGLE_CELL = """\
cell bench_{model} {{
    units m
    workspace x [0.20, 0.70] y [-0.50, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot r model {model} base (0, 0, 0) yaw 0 gripper {gripper}
    default gripper parallel opening 0.07 depth 0.02
}}
"""


def station_twin() -> Twin:
    """The dual-arm station with a few cubes on the table."""
    twin = Twin(load_cell(str(STATION)))
    for i, (x, y) in enumerate(CUBES):
        twin.add_box(f"c{i}", (0.05, 0.05, 0.05), (x, y, 0.025))
    return twin


def bench_collision(n: int, seed: int) -> dict:
    """Checks/s of full contact lists and of early-exit free() on random dual-arm configs."""
    twin = station_twin()
    cc = CollisionChecker(twin)
    rng = np.random.default_rng(seed)
    qs = [{r: rng.uniform(twin.spec(r).lower, twin.spec(r).upper) for r in twin.robot_names}
          for _ in range(n)]
    t0 = time.perf_counter()
    n_contacts = [len(cc.contacts(q)) for q in qs]
    full = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_free = sum(cc.free(q) for q in qs)
    fast = time.perf_counter() - t0
    wrong = sum((c == 0) != f for c, f in zip(n_contacts, (cc.free(q) for q in qs),
                                                strict=True))
    twin.close()
    return {"configs": n, "free_fraction": round(n_free / n, 3),
            "contacts_per_s": round(n / full), "free_per_s": round(n / fast),
            "self_pairs": {r: len(cc.self_pairs(r)) for r in twin.robot_names},
            "parts": len(CUBES), "disagreements": wrong}


def _single_twin(model: str) -> Twin:
    d = tempfile.mkdtemp(prefix="cellspec-bench-")
    f = os.path.join(d, f"{model}.cell")
    Path(f).write_text(SINGLE_CELL.format(model=model, gripper=GRIPPER[model]))
    return Twin(load_cell(f))


def bench_ik(model: str, n: int, seed: int) -> dict:
    """solve_ik and one calculateInverseKinematics call on n FK-generated targets."""
    twin = _single_twin(model)
    cc = CollisionChecker(twin)
    spec = twin.spec("r")
    rb = twin.robot("r")
    rng = np.random.default_rng(seed)
    targets = []
    while len(targets) < n:  # reachable: FK of random in-limit collision-free configs
        q = rng.uniform(spec.lower, spec.upper)
        if cc.free({"r": q}):
            targets.append(twin.tool_pose("r", q))
    ok = wrong = 0
    times, iters = [], []
    cid = twin.client
    ranges = (spec.upper - spec.lower).tolist()
    pb_ok = {v: 0 for v, _ in PB_VARIANTS}
    pb_times: dict[str, list[float]] = {v: [] for v, _ in PB_VARIANTS}
    for i, (pos, quat) in enumerate(targets):
        twin.set_q("r", twin.home("r"))
        t0 = time.perf_counter()
        res = solve_ik(twin, "r", pos, quat, seed=i, checker=cc)
        times.append(time.perf_counter() - t0)
        iters.append(res.iterations)
        if res.ok:
            ok += 1
            p2, q2 = twin.tool_pose("r", res.q)
            good = (np.linalg.norm(p2 - pos) <= POS_TOL
                    and np.linalg.norm(rot_error(quat, q2)) <= ROT_TOL
                    and spec.within_limits(res.q) and cc.free({"r": res.q}))
            wrong += not good
        # the same target, one pybullet IK call from home: default settings (20 iterations,
        # residual 1e-4), one call with 1000 iterations and residual 1e-6, and that call
        # with the joint limits (pybullet's null-space variant)
        for variant, kw in PB_VARIANTS:
            twin.set_q("r", twin.home("r"))
            if variant == "limits_1000it":
                kw = {**kw, "lowerLimits": spec.lower.tolist(),
                      "upperLimits": spec.upper.tolist(), "jointRanges": ranges,
                      "restPoses": list(spec.home)}
            t0 = time.perf_counter()
            sol = p.calculateInverseKinematics(rb.body, rb.tcp, pos.tolist(), quat.tolist(),
                                               physicsClientId=cid, **kw)
            pb_times[variant].append(time.perf_counter() - t0)
            qs = np.array(sol[:spec.dof])
            p2, q2 = twin.tool_pose("r", qs)
            pb_ok[variant] += bool(np.linalg.norm(p2 - pos) <= POS_TOL
                                   and np.linalg.norm(rot_error(quat, q2)) <= ROT_TOL
                                   and spec.within_limits(qs) and cc.free({"r": qs}))
    twin.close()
    return {"model": model, "targets": n, "success": round(ok / n, 4),
            "mean_ms": round(1000 * float(np.mean(times)), 2),
            "p90_ms": round(1000 * float(np.percentile(times, 90)), 2),
            "mean_iterations": round(float(np.mean(iters)), 1),
            "pybullet_single_call": {
                v: {"success": round(pb_ok[v] / n, 4),
                    "mean_ms": round(1000 * float(np.mean(pb_times[v])), 3)}
                for v, _ in PB_VARIANTS},
            "wrong": wrong}


def _query(twin: Twin, cc: CollisionChecker, rng: np.random.Generator, k: int, hard: bool):
    """A seeded dual-arm query: each arm from one top-down tool pose to another (hard: only
    queries whose straight joint-space path collides, so RRT-Connect has to search)."""
    boxes = {"irb120": ((0.20, 0.50), (0.05, 0.50)), "irb1600": ((0.30, 0.70), (0.05, 0.50))}
    while True:
        ends = []
        for _ in range(2):
            conf = {}
            for r in twin.robot_names:
                (x0, x1), (y0, y1) = boxes[r]
                pos = (rng.uniform(x0, x1), rng.uniform(y0, y1), rng.uniform(0.08, 0.30))
                res = solve_ik(twin, r, pos, grasp_quat(str(rng.choice(["x", "y"]))),
                               seed=k, checker=cc, ignore=set(twin.robot_names) - {r})
                if not res.ok:
                    break
                conf[r] = res.q
            if len(conf) < 2 or not cc.free(conf):
                break
            ends.append(conf)
        if len(ends) == 2 and not (hard and edge_free(twin, ends[0], ends[1], checker=cc)):
            return ends


def bench_rrt(n: int, seed: int, time_limit: float, hard: bool) -> tuple[dict, int]:
    """plan_motion over n seeded dual-arm queries; every path re-checked at 0.05 rad."""
    twin = station_twin()
    cc = CollisionChecker(twin)
    rng = np.random.default_rng(seed)
    rows, wrong = [], 0
    for k in range(n):
        start, goal = _query(twin, cc, rng, k, hard)
        res = plan_motion(twin, start, goal, seed=seed + k, time_limit=time_limit,
                          checker=cc)
        if res.ok:
            dense = densify(res.path, 0.05)
            steps_ok = all(max(float(np.max(np.abs(b[r] - a[r]))) for r in a) <= 0.05 + 1e-9
                           for a, b in pairwise(dense))
            wrong += not (steps_ok and all(cc.free(q) for q in dense))
        rows.append({"ok": res.ok, "reason": res.reason, "seconds": round(res.seconds, 4),
                     "checks": res.checks, "waypoints": len(res.path),
                     "direct": res.ok and len(res.path) == 2})
    twin.close()
    secs = [r["seconds"] if r["ok"] else time_limit for r in rows]
    rrt = [r["seconds"] for r in rows if r["ok"] and not r["direct"]]
    out = {"queries": n, "hard": hard, "solved": sum(r["ok"] for r in rows),
           "direct": sum(r["direct"] for r in rows), "time_limit_s": time_limit,
           "median_s": round(float(np.median(secs)), 4),
           "p90_s": round(float(np.percentile(secs, 90)), 4),
           "median_s_rrt_only": round(float(np.median(rrt)), 4) if rrt else None,
           "p90_s_rrt_only": round(float(np.percentile(rrt, 90)), 4) if rrt else None,
           "rows": rows, "wrong": wrong}
    return out, wrong


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--collision-configs", type=int, default=None)
    ap.add_argument("--ik-targets", type=int, default=None)
    ap.add_argument("--rrt-queries", type=int, default=None)
    ap.add_argument("--rrt-time-limit", type=float, default=10.0)
    ap.add_argument("--easy", action="store_true",
                    help="RRT queries as drawn (default: only those whose direct path collides)")
    ap.add_argument("--no-designs", action="store_true",
                    help="skip the Table VII designs (bench/twin_designs.py)")
    import benchplot

    benchplot.add_plot_option(ap)
    a = ap.parse_args()
    n_col = a.collision_configs or (300 if a.quick else 4000)
    n_ik = a.ik_targets or (30 if a.quick else 500)
    n_rrt = a.rrt_queries or (4 if a.quick else 20)
    with benchplot.reporting():  # per-stage progress on a terminal's stderr
        stages = 3 + len(MODELS) + (not a.no_designs)
        benchplot.tick("twin", 0, stages, "collision")
        col = bench_collision(n_col, a.seed)
        ik = []
        for k, m in enumerate(MODELS):
            benchplot.tick("twin", 1 + k, stages, f"IK {m}")
            ik.append(bench_ik(m, n_ik, a.seed))
        benchplot.tick("twin", 1 + len(MODELS), stages, "RRT-Connect")
        rrt, rrt_wrong = bench_rrt(n_rrt, a.seed, a.rrt_time_limit, not a.easy)
        benchplot.tick("twin", 2 + len(MODELS), stages, "designs")
    targets = {
        "collision_checks_per_s>=4000": col["contacts_per_s"] >= 4000,
        "ik_success>=0.99": all(r["success"] >= 0.99 for r in ik),
        "ik_mean_ms<=20": all(r["mean_ms"] <= 20 for r in ik),
        "rrt_median_s<=0.5": rrt["median_s"] <= 0.5,
        "rrt_p90_s<=2": rrt["p90_s"] <= 2.0,
    }
    designs = None
    if not a.no_designs:
        import twin_designs

        with benchplot.reporting():
            designs = twin_designs.run(twin_designs.QUICK if a.quick else None)
        targets["designs_all_pass"] = designs["passed"] == designs["designs"]
        targets["single_arm_all_pass"] = designs["single_arm_passed"] == sum(
            r["group"] == "dual-arm" for r in designs["rows"])
    wrong = col["disagreements"] + sum(r["wrong"] for r in ik) + rrt_wrong
    out = {"bench": "twin", "quick": a.quick, "seed": a.seed, "collision": col, "ik": ik,
           "rrt": rrt, "designs": designs, "targets": targets,
           "target_met": all(targets.values()), "wrong_answers": wrong}
    print(json.dumps(out, sort_keys=True))
    if a.plot:
        benchplot.plot_result(out, a.plot)
    err = sys.stderr
    print(f"collision  {col['configs']} dual-arm configs, {col['parts']} cubes: "
          f"{col['contacts_per_s']} checks/s (full contact list), "
          f"{col['free_per_s']} /s (free, early exit); free {col['free_fraction']:.0%}",
          file=err)
    print(f"{'robot':<12} {'IK ok':>7} {'mean ms':>8} {'p90 ms':>7} {'iters':>6} "
          f"{'1 pybullet call':>15} {'1000 it':>8} {'+limits':>8}", file=err)
    for r in ik:
        pb = r["pybullet_single_call"]
        print(f"{r['model']:<12} {r['success']:>7.1%} {r['mean_ms']:>8.2f} {r['p90_ms']:>7.2f} "
              f"{r['mean_iterations']:>6.1f} "
              f"{pb['default']['success']:>15.1%} {pb['1000it']['success']:>8.1%} "
              f"{pb['limits_1000it']['success']:>8.1%}",
              file=err)
    print(f"rrt        {rrt['solved']}/{rrt['queries']} solved ({rrt['direct']} direct), "
          f"median {rrt['median_s']:.3f} s, p90 {rrt['p90_s']:.3f} s; RRT-only median "
          f"{rrt['median_s_rrt_only']} s, p90 {rrt['p90_s_rrt_only']} s", file=err)
    if designs is not None:
        import twin_designs

        print(twin_designs.table(designs), file=err)
    for k, v in targets.items():
        print(f"  {k:<32} {'ok' if v else 'MISS'}", file=err)
    if wrong:
        print(f"FAIL: {wrong} wrong answers (see JSON)", file=err)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
