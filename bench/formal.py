"""Formal checks with Z3: robust check, lint and explain at scale, pruned vs naive.

Prints one JSON line on stdout and a table on stderr (see bench/README.md).

- robust: ``prove_robust`` of 10, 100 and 1000-part layouts (bridges: a roof cube on two
  pillars, see ``bridges``; tolerance 1 mm: a proof that needs Z3), pruned encoding
  through the Z3 API and as SMT-LIB text, side by side with the naive encoding (all
  pairs, nothing decided before Z3, full Python term construction) where it finishes
  within the budget (the naive run builds its terms through the Z3 Python API, the
  "full Python term construction" of the issue).
- lint: the standard library (dual-arm station) for 5, 20 and 50 cubes.
- explain: a 200-part layout with 40 injected faults (one core, then all causes).

Targets (issue 3): robust 100 parts <= 2 s, 1000 parts <= 20 s; lint 20 cubes <= 5 s.
Exit 1 only if an answer is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the seeded fault layouts (tests/smt_faults.py)

from smt_faults import fault_layout  # noqa: E402

import cellspec  # noqa: E402
from cellspec.layout import layout_from_obj  # noqa: E402
from cellspec.solver.formal.explain import explain  # noqa: E402
from cellspec.solver.formal.lint import lint  # noqa: E402
from cellspec.solver.formal.robust import prove_robust  # noqa: E402

CELL = """\
import physical
cell bench {
    workspace x [0, 4] y [0, 4] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
}
"""


def bridges(n: int, overlap_mm: float = 2.5, spacing: float = 0.015) -> dict:
    """n parts as units of two pillars and a roof cube resting on both, overlapping each by
    ``overlap_mm``. With eps 1 mm and tolerance 1 mm, 2.5 mm is robust but not trivially:
    each support alone can be lost (2 mm of relative motion), never both at once (that
    needs 3 mm), so Z3 has to prove the disjunction of gravity for every roof."""
    gap = 0.05 - 2 * overlap_mm / 1000
    units = max(1, n // 3)
    side = int(np.ceil(np.sqrt(units)))
    parts = []
    for u in range(units):
        i, j = divmod(u, side)
        x0 = 0.1 + i * (0.1 + gap + spacing)
        y = round(0.1 + j * (0.05 + spacing), 4)
        parts.append({"id": f"l{u}", "type": "cube", "pos": [round(x0, 4), y, 0.025]})
        parts.append({"id": f"r{u}", "type": "cube", "pos": [round(x0 + 0.05 + gap, 4), y,
                                                              0.025]})
        parts.append({"id": f"t{u}", "type": "cube",
                      "pos": [round(x0 + (0.05 + gap) / 2, 4), y, 0.075]})
    k = 0
    while len(parts) < n:
        parts.append({"id": f"x{k}", "type": "cube",
                      "pos": [round(0.1 + k * 0.065, 4), 3.9, 0.025]})
        k += 1
    return {"parts": parts, "order": [p["id"] for p in sorted(parts, key=lambda p: p["pos"][2])]}


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--lint-sizes", type=int, nargs="+", default=[5, 20, 50])
    ap.add_argument("--tolerance", type=float, default=0.001)
    ap.add_argument("--naive-max", type=int, default=100,
                    help="largest size the naive encoding is run at (it is quadratic in Python)")
    ap.add_argument("--timeout", type=float, default=120.0)
    import benchplot

    benchplot.add_plot_option(ap)
    args = ap.parse_args(argv)
    bar = benchplot.start_progress()  # per-case progress on a terminal's stderr
    tmp = Path(tempfile.mkdtemp(prefix="cellspec-formal-"))
    (tmp / "bench.cell").write_text(CELL)
    cell = cellspec.load_cell(str(tmp / "bench.cell"))
    station = cellspec.load_cell(str(REPO / "rules" / "cells" / "dual_arm_station.cell"))
    wrong: list[str] = []
    rows: list[dict] = []
    for k, n in enumerate(args.sizes):
        benchplot.tick("robust", k, len(args.sizes), f"{n} parts")
        lay = layout_from_obj(bridges(n))
        row: dict = {"parts": n}
        for name, kw in (("api", {"encoding": "api"}), ("smtlib", {"encoding": "smtlib"})):
            r, s = timed(prove_robust, cell, lay, args.tolerance, timeout=args.timeout, **kw)
            row[f"{name}_s"] = round(s, 3)
            row[f"{name}_status"] = r.status
            row["atoms"] = int(r.stats.get("atoms", 0))
            row["folded"] = int(r.stats.get("folded_atoms", 0))
            if r.status != "proved":
                wrong.append(f"robust {n} parts ({name}): {r.status} {r.reason or ''}")
        if n <= args.naive_max:
            r, s = timed(prove_robust, cell, lay, args.tolerance, timeout=args.timeout,
                         prune=False, encoding="api")
            row["naive_s"] = round(s, 3)
            row["naive_status"] = r.status
            row["naive_atoms"] = int(r.stats.get("atoms", 0))
            row["ratio"] = round(s / min(row["api_s"], row["smtlib_s"]), 1)
            if r.status != "proved":
                wrong.append(f"robust {n} parts (naive): {r.status} {r.reason or ''}")
        # a refuted case too: 1.9 mm of overlap cannot take 1 mm of error
        r, s = timed(prove_robust, cell, layout_from_obj(bridges(n, overlap_mm=1.9)),
                     args.tolerance, timeout=args.timeout)
        row["refute_s"] = round(s, 3)
        if r.status != "refuted":
            wrong.append(f"robust {n} parts, 1 mm gaps: {r.status}")
        rows.append(row)
    lint_rows = []
    for k, n in enumerate(args.lint_sizes):
        benchplot.tick("lint", k, len(args.lint_sizes), f"{n} cubes")
        r, s = timed(lint, station, {"cube": n}, timeout=args.timeout)
        lint_rows.append({"cubes": n, "seconds": round(s, 3), "status": r.status,
                          "findings": len(r.findings)})
        if r.status != "consistent":
            wrong.append(f"lint {n} cubes: {r.status}")
    lay = layout_from_obj(fault_layout(40))
    e1, s1 = timed(explain, cell, lay, timeout=args.timeout)
    ea, sa = timed(explain, cell, lay, timeout=args.timeout, max_causes=1000)
    ex = {"parts": 200, "injected": 40, "violations": e1.total_violations,
          "one_core_s": round(s1, 3), "core_size": len(e1.parts) + len(e1.rules),
          "all_causes_s": round(sa, 3), "causes": len(ea.causes)}
    if e1.status != "explained":
        wrong.append(f"explain: {e1.status}")
    by = {r["parts"]: r for r in rows}
    lint_by = {r["cubes"]: r for r in lint_rows}
    best = {n: min(r["api_s"], r["smtlib_s"]) for n, r in by.items()}
    targets = {"robust_100_le_2s": best.get(100), "robust_1000_le_20s": best.get(1000),
               "lint_20_le_5s": lint_by.get(20, {}).get("seconds")}
    met = {"robust_100_le_2s": targets["robust_100_le_2s"] is not None
           and targets["robust_100_le_2s"] <= 2,
           "robust_1000_le_20s": targets["robust_1000_le_20s"] is not None
           and targets["robust_1000_le_20s"] <= 20,
           "lint_20_le_5s": targets["lint_20_le_5s"] is not None
           and targets["lint_20_le_5s"] <= 5}
    bar.close()
    out = {"bench": "formal", "ok": not wrong, "wrong": wrong, "tolerance": args.tolerance,
           "robust": rows, "lint": lint_rows, "explain": ex, "targets": targets,
           "target_met": met}
    print(json.dumps(out))
    if args.plot:
        benchplot.plot_result(out, args.plot)
    err = sys.stderr
    print(f"robust check (tolerance {args.tolerance} m; proved; seconds)", file=err)
    print(f"{'parts':>6} {'api':>8} {'smtlib':>8} {'naive':>8} {'ratio':>6} {'atoms':>7} "
          f"{'folded':>8} {'refute':>8}", file=err)
    for r in rows:
        print(f"{r['parts']:>6} {r['api_s']:>8} {r['smtlib_s']:>8} {r.get('naive_s', '-'):>8} "
              f"{r.get('ratio', '-'):>6} {r['atoms']:>7} {r['folded']:>8} {r['refute_s']:>8}",
              file=err)
    print("lint (dual-arm station, standard rules)", file=err)
    for r in lint_rows:
        print(f"  {r['cubes']:>3} cubes: {r['seconds']} s, {r['status']}, "
              f"{r['findings']} finding(s)", file=err)
    print(f"explain: 200 parts, 40 injected faults, {ex['violations']} violations: one core "
          f"{ex['one_core_s']} s (size {ex['core_size']}), all {ex['causes']} causes "
          f"{ex['all_causes_s']} s", file=err)
    for k, v in met.items():
        print(f"  {k}: {targets[k]} {'ok' if v else 'MISS'}", file=err)
    for w in wrong:
        print(f"WRONG: {w}", file=err)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
