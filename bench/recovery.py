"""Recovery benchmark (seed 000, Section IV-D): Table V (nine invalid human modifications)
and Table VI (ten blocked regions), recovered by CP-SAT repair with no LLM call. Table V
minimises parts moved first; Table VI (a structure re-laid out around a blocked region)
keeps structures whole first (``keep_shape``), flattening only where it must.

Each case counts as recovered when the repaired layout keeps the part count and types
and passes an independent clingo check. ONE JSON line on stdout, a table on stderr.

    python bench/recovery.py [--time-limit S]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cellspec.dsl.parser import load_cell  # noqa: E402
from cellspec.solver.cpsat.scenarios import (  # noqa: E402
    SCENARIOS,
    TABLE_V,
    find_test,
    recover,
    table_vi_files,
)
from cellspec.testing.runner import layout_of_test  # noqa: E402

PAPER = {"table_v": "9/9 (Ours-LGOrch, Ours-Hybrid)",
         "table_vi": "10/10 (Ours-LGOrch), 9/10 (Ours-Hybrid, full system)"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0)
    import benchplot

    benchplot.add_plot_option(ap)
    a = ap.parse_args()
    bar = benchplot.start_progress()  # per-case progress on a terminal's stderr
    rows = {"table_v": [], "table_vi": []}
    cell = load_cell(SCENARIOS / "table_v.cell")
    for title, kind, test in TABLE_V:
        benchplot.tick("table V", len(rows["table_v"]), len(TABLE_V), title)
        rec, _ = recover(cell, layout_of_test(find_test(cell, test)), title, kind,
                         a.time_limit)
        rows["table_v"].append(rec)
    for f in table_vi_files():
        benchplot.tick("table VI", len(rows["table_vi"]), None, f.stem)
        c = load_cell(f)
        t = c.tests[0]
        title = f.stem.replace("table_vi_", "")
        rec, _ = recover(c, layout_of_test(t), title, "blocked", a.time_limit,
                         keep_shape=True)
        rows["table_vi"].append(rec)
    bar.close()
    out = {}
    for key, recs in rows.items():
        n_ok = sum(r.recovered for r in recs)
        out[key] = {"recovered": f"{n_ok}/{len(recs)}", "paper_best": PAPER[key],
                    "llm_calls": sum(r.llm_calls for r in recs),
                    "seconds_total": round(sum(r.seconds for r in recs), 3),
                    "cases": [{"case": r.name, "type": r.kind, "parts": r.parts,
                               "detected": r.detected, "recovered": r.recovered,
                               "status": r.status, "parts_moved": r.moved,
                               "displacement_m": round(r.displacement, 4),
                               "reordered": r.reordered, "seconds": round(r.seconds, 3),
                               "llm_calls": r.llm_calls, "note": r.note} for r in recs]}
    err = sys.stderr
    for key, title in (("table_v", "Table V: invalid human modifications"),
                       ("table_vi", "Table VI: blocked regions")):
        print(title, file=err)
        print(f"  {'case':38s} {'type':7s} {'n':>3s} {'ok':3s} {'status':9s} "
              f"{'moved':>5s} {'L1 m':>7s} {'reord':5s} {'s':>6s} LLM", file=err)
        for c in out[key]["cases"]:
            print(f"  {c['case'][:38]:38s} {c['type']:7s} {c['parts']:3d} "
                  f"{'yes' if c['recovered'] else 'NO':3s} {c['status']:9s} "
                  f"{c['parts_moved']:5d} {c['displacement_m']:7.3f} "
                  f"{'yes' if c['reordered'] else 'no':5s} {c['seconds']:6.2f} "
                  f"{c['llm_calls']}", file=err)
        print(f"  recovered {out[key]['recovered']} in {out[key]['seconds_total']} s, "
              f"LLM calls {out[key]['llm_calls']} (paper's best: {PAPER[key]})\n", file=err)
    print(json.dumps(out))
    if a.plot:
        benchplot.plot_result({"bench": "recovery", **out}, a.plot)
    ok = all(c["recovered"] for k in out for c in out[k]["cases"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
