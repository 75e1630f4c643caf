"""Preferences benchmark: generate on a small cell with two weighted preferences, the score
CP-SAT reaches vs the least violated weight clingo proves over the lattice, and the time.

Cell: two (or three) 4 cm cubes in a 30 x 20 cm one-level workspace; `low_x` (weight 3,
x <= 0.03) and `high_y` (weight 2, y >= 0.15) cannot both hold for every cube. Per design:
generate with the preferences (met / total, proved optimal or not, seconds), the peer in the
same run (the same design with the preference rules removed: the built-in objective alone,
its layout scored the same way) and clingo's `#minimize` over every layout of the parts on
the 1 cm lattice (`--prove-preferences 0.01`, its seconds).

Output: ONE JSON line on stdout; the table on stderr. Exit 1 when generate's score is below
clingo's bound while claimed optimal (a contradiction only when the lattice holds the
generator's answer; here it does), or a run is not `optimal`.

    python bench/preferences.py
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

CELL = """
import physical
cell prefcell {
    units m
    workspace x [0, 0.3] y [0, 0.2] z [0, 0.05]
    surface table z 0
    part cube size (0.04, 0.04, 0.04)
}
rule low_x "{p} is far from x = 0" severity preference weight 3 : forall p: p.x <= 0.03
rule high_y "{p} is low on y" severity preference weight 2 : forall p: p.y >= 0.15
"""


def design(n: int) -> str:
    """n one-cube towers, all anchored in the middle (the built-in objective's pull)."""
    towers = "\n".join("    tower(n=1)" for _ in range(n))
    return f"design d{n} {{\n{towers}\n}}\n"


def run(n: int, tmp: Path) -> dict:
    """One design: generate with and without the preferences, and the clingo bound."""
    import cellspec
    from cellspec.dsl.design import load_designs
    from cellspec.layout import layout_from_obj
    from cellspec.solver.asp.prefer import least_violated, preference_cost
    from cellspec.solver.cpsat.generate import generate

    p = tmp / f"c{n}.cell"
    p.write_text(CELL + design(n), encoding="utf-8")
    q = tmp / f"plain{n}.cell"
    q.write_text(CELL.split("rule low_x")[0] + design(n), encoding="utf-8")
    cell, plain = cellspec.load_cell(str(p)), cellspec.load_cell(str(q))
    (spec,) = load_designs(str(p))
    t0 = time.perf_counter()
    r = generate(cell, spec, time_limit=30.0)
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    r0 = generate(plain, load_designs(str(q))[0], time_limit=30.0)
    t_plain = time.perf_counter() - t0
    assert r.layout is not None and r0.layout is not None and r.preferences is not None
    peer = preference_cost(cell, layout_from_obj(r0.layout))
    types = [x["type"] for x in r.layout["parts"]]
    t0 = time.perf_counter()
    b = least_violated(cell, types, step_m=0.01, timeout=120.0)
    t_proof = time.perf_counter() - t0
    return {"parts": n, "status": str(r.status), "met": r.preferences["met"],
            "total": r.preferences["total"], "optimal": r.preferences["optimal"],
            "generate_s": round(t_gen, 3), "peer_met": peer.met,
            "peer_generate_s": round(t_plain, 3),
            "time_ratio_vs_peer": round(t_gen / max(t_plain, 1e-9), 2),
            "bound_status": b.status, "bound_met": None if b.violated is None
            else b.total - b.violated, "bound_positions": b.positions,
            "proof_s": round(t_proof, 3), "relaxed": list(b.relaxed)}


def main() -> int:
    """Run both designs, print the JSON line and the table."""
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in (2, 3):
            rows.append(run(n, Path(d)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(json.dumps({"bench": "preferences", "python": platform.python_version(),
                      "load1": load, "rows": rows}))
    print(f"{'parts':>5} {'met':>9} {'optimal':>7} {'gen s':>6} {'peer met':>9} "
          f"{'peer s':>6} {'clingo met':>10} {'proof s':>7}", file=sys.stderr)
    bad = False
    for r in rows:
        print(f"{r['parts']:>5} {r['met']:>4} of {r['total']:<2} {str(r['optimal']):>7} "
              f"{r['generate_s']:>6.2f} {r['peer_met']:>4} of {r['total']:<2} "
              f"{r['peer_generate_s']:>6.2f} {str(r['bound_met']):>10} {r['proof_s']:>7.2f}",
              file=sys.stderr)
        bad |= r["status"] != "optimal" or (r["optimal"] and r["bound_met"] is not None
                                           and r["met"] < r["bound_met"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
