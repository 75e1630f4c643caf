"""The Table VII analogue (seed 000): 12 designs simulated end to end in the twin.

6 simple single-arm and 3 complex single-arm designs on ``rules/cells/panda_table.cell``,
3 dual-arm designs on ``rules/cells/dual_arm_station.cell``. Each design is sequenced,
compiled into actions, checked (reach, IK, collision), planned (RRT-Connect), executed at
240 Hz in a separate physics client and compared (δ ≤ ε); a design passes when every
action passes. Dual-arm designs are allocated and scheduled with CP-SAT and report the
speedup of the makespan over the best single arm (the paper: up to 1.7x). The best single
arm (CP-SAT's best single-arm estimate) is then also planned and executed alone in the same
cell (``sim.compare_single``: every part to it, the other arm at home), and the executed
speedup (its motion time over the dual-arm executed motion time) is reported next to the
estimated one.

ONE JSON line on stdout, a table on stderr. ``run()`` returns the JSON object;
``bench/twin.py`` runs it as its ``designs`` section (``--quick``: the ``QUICK`` three).

    python bench/twin_designs.py [--quick]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PANDA = ROOT / "rules" / "cells" / "panda_table.cell"
STATION = ROOT / "rules" / "cells" / "dual_arm_station.cell"
H = 0.05  # cube size in both cells


def _cubes(*pos: tuple[float, float, float]) -> dict[str, Any]:
    return {"units": "m", "parts": [{"id": f"c{k + 1}", "type": "cube", "pos": list(p)}
                                    for k, p in enumerate(pos)]}


def _z(level: int) -> float:
    return round(H / 2 + level * H, 4)


def designs() -> list[tuple[str, str, Path, dict[str, Any]]]:
    """(name, group, cell, layout) for the 12 designs."""
    x, y = 0.5, 0.0
    simple = [
        ("single cube", _cubes((x, y, _z(0)))),
        ("tower of 2", _cubes((x, y, _z(0)), (x, y, _z(1)))),
        ("tower of 3", _cubes((x, y, _z(0)), (x, y, _z(1)), (x, y, _z(2)))),
        ("row of 2 (x)", _cubes((x - 0.025, y, _z(0)), (x + 0.025, y, _z(0)))),
        ("two apart", _cubes((0.4, -0.1, _z(0)), (0.6, 0.1, _z(0)))),
        ("row of 3 (y)", _cubes((x, -0.05, _z(0)), (x, 0.0, _z(0)), (x, 0.05, _z(0)))),
    ]
    complex_ = [
        ("pyramid 2-1", _cubes((x - 0.025, y, _z(0)), (x + 0.025, y, _z(0)),
                               (x, y, _z(1)))),
        ("wall 2x2", _cubes((x - 0.025, y, _z(0)), (x + 0.025, y, _z(0)),
                            (x - 0.025, y, _z(1)), (x + 0.025, y, _z(1)))),
        ("staircase 1-2-3", _cubes((0.45, y, _z(0)), (0.5, y, _z(0)), (0.5, y, _z(1)),
                                   (0.55, y, _z(0)), (0.55, y, _z(1)), (0.55, y, _z(2)))),
    ]
    dual = [
        ("two towers of 2", _cubes((0.30, 0.20, _z(0)), (0.30, 0.20, _z(1)),
                                   (0.62, 0.35, _z(0)), (0.62, 0.35, _z(1)))),
        ("four apart", _cubes((0.28, 0.15, _z(0)), (0.30, 0.40, _z(0)),
                              (0.62, 0.15, _z(0)), (0.62, 0.40, _z(0)))),
        ("tower, row and centre", _cubes((0.30, 0.25, _z(0)), (0.30, 0.25, _z(1)),
                                         (0.62, 0.20, _z(0)), (0.62, 0.25, _z(0)),
                                         (0.47, 0.30, _z(0)))),
    ]
    return ([(n, "simple single-arm", PANDA, lay) for n, lay in simple]
            + [(n, "complex single-arm", PANDA, lay) for n, lay in complex_]
            + [(n, "dual-arm", STATION, lay) for n, lay in dual])


QUICK = ("single cube", "tower of 2", "four apart")  # bench/twin.py --quick: a few seconds


def run(only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Simulate every design (or those named in ``only``); the JSON object of the benchmark."""
    from cellspec.robots import quiet_pybullet

    quiet_pybullet()
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import layout_from_obj
    from cellspec.robots.sim import compare_single, simulate

    cells = {p: load_cell(p) for p in (PANDA, STATION)}
    from cellspec.core import progress

    rows = []
    todo = [d for d in designs() if only is None or d[0] in only]
    for name, group, cp, obj in todo:
        progress.tick("designs", len(rows), len(todo), name)  # a terminal's stderr only
        t0 = time.perf_counter()
        lay = layout_from_obj(obj, name)
        r = simulate(cells[cp], lay)
        one = compare_single(cells[cp], lay, r) if r.verdict == "pass" else None
        secs = time.perf_counter() - t0
        s = r.schedule
        rows.append({
            "design": name, "group": group, "cell": cp.name, "parts": len(obj["parts"]),
            "verdict": r.verdict, "reason": r.reason,
            "failed_actions": [f"{a.part}: {a.check}: {a.reason}" for a in r.actions
                               if not a.ok],
            "delta": None if r.execution is None else round(r.execution.delta, 5),
            "epsilon": None if r.execution is None else r.execution.epsilon,
            "arms": sorted({a.robot for a in r.actions if a.robot}),
            "makespan": None if s is None or s.makespan is None else round(s.makespan, 2),
            "best_single": None if s is None or s.best_single is None else
            round(s.best_single, 2),
            "speedup": None if s is None or s.speedup is None else round(s.speedup, 3),
            "concurrent": r.concurrent,
            "motion_time": None if r.timeline is None else round(r.timeline.end, 2),
            "motion_time_sequential": None if r.sequential_end is None else
            round(r.sequential_end, 2),
            # the best single arm planned and executed alone (not only estimated)
            "single_arm": None if one is None else one.arm,
            "single_verdict": None if one is None else one.verdict,
            "single_motion_time": None if one is None or one.executed is None else
            round(one.executed, 2),
            "speedup_executed": None if one is None or one.speedup_executed is None else
            round(one.speedup_executed, 3),
            "seconds": round(secs, 2)})
    dual = [r["speedup"] for r in rows if r["group"] == "dual-arm" and r["speedup"]]
    dual_ex = [r["speedup_executed"] for r in rows
               if r["group"] == "dual-arm" and r["speedup_executed"]]
    return {"bench": "twin_designs", "designs": len(rows),
            "passed": sum(r["verdict"] == "pass" for r in rows),
            "max_speedup": max(dual) if dual else None,
            "mean_speedup": round(sum(dual) / len(dual), 3) if dual else None,
            "max_speedup_executed": max(dual_ex) if dual_ex else None,
            "mean_speedup_executed": round(sum(dual_ex) / len(dual_ex), 3) if dual_ex else None,
            "single_arm_passed": sum(r["single_verdict"] == "pass" for r in rows),
            "rows": rows}


def table(out: dict[str, Any]) -> str:
    """A text table of the rows."""
    lines = [f"{'design':24} {'group':20} {'parts':>5} {'verdict':8} {'delta':>8} "
             f"{'arms':18} {'makespan':>8} {'single':>7} {'speedup':>7} {'motion':>7} {'seq':>7} "
             f"{'1-arm':>7} {'sp.exec':>7} {'s':>6}"]
    for r in out["rows"]:
        def f(v, spec):
            w = int(spec.split(".")[0])
            return format(v, spec) if v is not None else "-".rjust(w)
        lines.append(f"{r['design']:24} {r['group']:20} {r['parts']:5d} {r['verdict']:8} "
                     f"{f(r['delta'], '8.4f')} {','.join(r['arms']):18} "
                     f"{f(r['makespan'], '8.2f')} {f(r['best_single'], '7.2f')} "
                     f"{f(r['speedup'], '7.2f')} {f(r['motion_time'], '7.2f')} "
                     f"{f(r['motion_time_sequential'], '7.2f')} "
                     f"{f(r['single_motion_time'], '7.2f')} {f(r['speedup_executed'], '7.2f')} "
                     f"{r['seconds']:6.1f}")
    lines.append(f"passed {out['passed']}/{out['designs']}; dual-arm speedup (CP-SAT estimate) "
                 f"max {out['max_speedup']}, mean {out['mean_speedup']}; executed (best single "
                 f"arm planned and executed alone) max {out['max_speedup_executed']}, mean "
                 f"{out['mean_speedup_executed']}")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    import benchplot

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few designs only")
    benchplot.add_plot_option(ap)
    args = ap.parse_args()
    with benchplot.reporting():
        res = run(QUICK if args.quick else None)
    print(json.dumps(res, separators=(",", ":")))
    if args.plot:
        benchplot.plot_result(res, args.plot)
    print(table(res), file=sys.stderr)
    sys.exit(0 if res["passed"] == res["designs"] else 1)
