"""Benchmark of language version 2's reach rules: "every part is reachable by some robot"
(``forall p: exists r in robot: reachable(p, r)``) and the suction rule of
rules/scenarios/reach.cell, on seeded layouts of N cubes spread over the dual-arm station
and beyond (about a fifth out of every robot's reach), checked by clingo (the default, the
reach atoms decided by the numpy kernel), the numpy reference (brute force, the oracle; up
to 2 000 parts) and Z3 (up to 1 000 parts), in the same run. Only the two reach rules are
checked (the station's physical rules are measured by bench/verify_scale.py).

Per backend and size: the median wall time of ``--repeat`` checks (the cell loaded once),
the violation count, and whether it equals clingo's; the ratio is the peer's time over
clingo's. Output: ONE JSON line on stdout; the table on stderr. Exit 1 if any backend
disagrees with clingo.

    python bench/reach.py [--n 100,1000,10000,100000] [--repeat 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CELL = REPO / "rules" / "scenarios" / "reach.cell"
LIMITS = {"clingo": None, "reference": 2000, "z3": 1000}


PITCH = 0.06  # m between cube centres: 1 cm gaps, no pair of cubes touches


def layout_obj(n: int, seed: int) -> dict:
    """N cubes on the table on a square grid centred on the station (a grid of N cells at a
    6 cm pitch: 100 cubes cover 0.6 m, 10^5 cover 19 m, so most are out of reach), one in
    four gripped by suction, the grid cells shuffled by the seed."""
    rng = random.Random(seed)
    side = int(n ** 0.5) + 1
    cells = [(i, j) for i in range(side) for j in range(side)]
    rng.shuffle(cells)
    x0, y0 = 0.475 - side * PITCH / 2, 0.275 - side * PITCH / 2
    parts = [{"id": f"c{k}", "type": "cube",
              "pos": [round(x0 + i * PITCH, 4), round(y0 + j * PITCH, 4), 0.025],
              **({"gripper": "vacuum"} if rng.random() < 0.25 else {})}
             for k, (i, j) in enumerate(cells[:n])]
    return {"units": "m", "parts": parts}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the JSON line and the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="100,1000,10000,100000", help="layout sizes, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="checks per backend and size")
    ap.add_argument("--seed", type=int, default=7, help="layout seed")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    import cellspec
    from cellspec.layout import layout_from_obj
    from cellspec.solver.verify import check

    full = cellspec.load_cell(str(CELL))
    cell = full.model_copy(update={"rules": tuple(r for r in full.rules
                                                  if r.name in ("reach", "vacuum_reach"))})
    rows, ok = [], True
    for n in (int(x) for x in a.n.split(",")):
        layout = layout_from_obj(layout_obj(n, a.seed), f"<{n} cubes>")
        base = None
        for backend, limit in LIMITS.items():
            if limit is not None and n > limit:
                continue
            times, v = [], None
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                v = check(cell, layout, backend=backend)
                times.append(time.perf_counter() - t0)
            assert v is not None
            found = sorted((w.rule, w.parts) for w in v.violations)
            if base is None:
                base = (found, statistics.median(times))
            same = found == base[0] and v.verdict != "unknown"
            ok &= same
            rows.append({"n": n, "backend": backend, "seconds": round(statistics.median(times), 5),
                         "violations": len(found), "verdict": v.verdict, "same_as_clingo": same,
                         "ratio_to_clingo": round(statistics.median(times) / base[1], 2)})
            print(f"  {n:>7} {backend:<9} {statistics.median(times) * 1000:10.2f} ms",
                  file=sys.stderr)
    print(json.dumps({"bench": "reach", "seed": a.seed, "repeat": a.repeat, "rows": rows}))
    print(f"\n{'parts':>7}  {'backend':<9} {'ms':>10} {'x clingo':>9} {'violations':>10}  "
          "verdict  same",
          file=sys.stderr)
    for r in rows:
        print(f"{r['n']:>7}  {r['backend']:<9} {r['seconds'] * 1000:10.2f} "
              f"{r['ratio_to_clingo']:9.2f} {r['violations']:>10}  {r['verdict']:<7}  "
              f"{r['same_as_clingo']}",
              file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
