"""Scale benchmark of ``cellspec repair``: seeded random invalid layouts, 10 to 1 000 parts.

Each layout is a valid base (towers of 1-4 cubes and loose cubes on a 0.12 m grid, built
bottom-up in a valid order) into which 1-50 faults of every kind are injected: a cube
sunk into the one below (overlap), pushed sideways into a neighbour (overlap), lifted
(floating), pulled outside the workspace, a cube placed last between four neighbours
(blocked grip) and a tower whose order is reversed (wrong order). Per size it reports the
median and p95 seconds to the first verified repair and to the proved-minimal one, parts
moved vs parts involved (named by a violation), and the status counts. Every repaired
layout is re-checked here with ``cellspec.check``.

The peer is the same repair call on the code before issue 17 when ``--before DIR`` points
at a checkout of it (run in a subprocess with that PYTHONPATH); otherwise only ours runs.

Targets (issue 17): first verified repair p95 <= 1 s up to 100 parts; proved minimal
median <= 5 s at 50 parts; no ``unknown`` where a repair exists up to 1 000 parts within
30 s. ONE JSON line on stdout, a table on stderr.

    python bench/repair_scale.py [--sizes 10,25,50,100,200,500,1000] [--per-size 5]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CUBE = 0.05
PITCH = 0.12
KINDS = ("sunk", "sideways", "floating", "outside", "grip", "order")


def cell_text(n: int, stability: bool) -> str:
    """A floor big enough for ``n`` cubes on the grid: the station's cube and gripper."""
    side = max(0.6, PITCH * (math.ceil(math.sqrt(n / 2.0)) + 2))
    imp = "import physical\n" + ("import stability\n" if stability else "")
    return f"""{imp}
cell repair_floor {{
    units m
    workspace x [0, {side:.2f}] y [0, {side:.2f}] z [0, 0.30]
    surface table z 0
    part cube size ({CUBE}, {CUBE}, {CUBE}) mass 0.1
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
}}
"""


def make_layout(n: int, faults: int, seed: int) -> dict:
    """A valid base of ``n`` cubes, then ``faults`` injected faults (kinds in turn)."""
    rng = np.random.default_rng(seed)
    side = max(0.6, PITCH * (math.ceil(math.sqrt(n / 2.0)) + 2))
    cols = max(1, int((side - 2 * PITCH) // PITCH))
    parts: list[dict] = []
    order: list[str] = []
    towers: list[list[int]] = []
    slot = 0

    def add(x: float, y: float, z: float) -> int:
        k = len(parts)
        parts.append({"id": f"p{k}", "type": "cube", "pos": [round(x, 4), round(y, 4),
                                                             round(z, 4)]})
        return k

    kinds = [KINDS[k % len(KINDS)] for k in range(faults)]
    n_grip = kinds.count("grip")
    base_n = n - 5 * n_grip
    while len(parts) < base_n:
        x = PITCH * (1 + slot % cols)
        y = PITCH * (1 + slot // cols)
        slot += 1
        h = int(min(rng.integers(1, 5), base_n - len(parts)))
        t = [add(x, y, CUBE / 2 + CUBE * lv) for lv in range(h)]
        towers.append(t)
        order.extend(parts[k]["id"] for k in t)
    grip_sites = []
    for _ in range(n_grip):  # a plus of five cubes, the centre listed last
        x = PITCH * (1 + slot % cols)
        y = PITCH * (1 + slot // cols)
        slot += 1
        arms = [add(x + dx, y + dy, CUBE / 2) for dx, dy in
                ((0.055, 0), (-0.055, 0), (0, 0.055), (0, -0.055))]
        c = add(x, y, CUBE / 2)
        grip_sites.append(c)
        order.extend(parts[k]["id"] for k in arms + [c])
    tall = [t for t in towers if len(t) >= 2]
    used: set[int] = set()
    perm = rng.permutation(len(towers)).tolist()
    for kind in kinds:
        if kind == "grip":
            continue
        pick = None
        for ti in perm:
            t = towers[ti]
            if ti in used or (kind in ("sunk", "order") and len(t) < 2):
                continue
            pick = ti
            break
        if pick is None:
            continue
        used.add(pick)
        t = towers[pick]
        top = parts[t[-1]]["pos"]
        if kind == "sunk":
            top[2] = round(top[2] - 0.02, 4)
        elif kind == "sideways":
            top[0] = round(top[0] + PITCH - CUBE + 0.02, 4)  # into the next column
        elif kind == "floating":
            top[2] = round(top[2] + 0.03, 4)
        elif kind == "outside":
            top[0] = round(side - 0.01, 4)
            top[2] = CUBE / 2
        elif kind == "order":
            ids = [parts[k]["id"] for k in t]
            pos = [order.index(p) for p in ids]
            for p_, k in zip(sorted(pos), reversed(ids), strict=True):
                order[p_] = k
    del tall
    return {"units": "m", "parts": parts, "order": order}


def _stats(xs: list[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    a = np.asarray(xs)
    return round(float(np.median(a)), 3), round(float(np.percentile(a, 95)), 3)


CHILD = r"""
import json, sys, time
from cellspec.dsl.parser import load_cell
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.verify import check
import clingo, ortools.sat.python.cp_model  # imports paid once, as in a running page
cell = load_cell(sys.argv[1])
out = []
for f in sys.argv[3:]:
    obj = json.load(open(f))
    lay = layout_from_obj(obj)
    before = check(cell, lay)
    involved = sorted({p for v in before.violations for p in v.parts})
    t0 = time.perf_counter()
    r = repair(cell, lay, time_limit=float(sys.argv[2]))
    secs = time.perf_counter() - t0
    ok = r.layout is not None and check(cell, layout_from_obj(r.layout)).verdict == "pass"
    first = getattr(r, "first_seconds", None)
    if first is None and r.layout is not None:
        first = secs
    proved = getattr(r, "proved_seconds", None)
    if proved is None and r.status == "optimal":
        proved = secs
    out.append({"status": r.status, "seconds": secs, "first_s": first, "proved_s": proved,
                "verified": ok,
                "moved": r.parts_moved, "involved": len(involved),
                "violations": len(before.violations), "reason": r.reason})
print(json.dumps(out))
"""


def run_batch(pythonpath: Path, cell: Path, files: list[Path], limit: float) -> list[dict]:
    """Repair every layout file in one child process with that PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    p = subprocess.run([sys.executable, "-c", CHILD, str(cell), str(limit),
                        *[str(f) for f in files]], env=env, cwd=str(pythonpath),
                       capture_output=True, text=True,
                       check=False, timeout=len(files) * (limit + 120) + 60)
    if p.returncode != 0:
        raise SystemExit(f"child failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def summary(rows: list[dict]) -> dict:
    first = [r["first_s"] for r in rows if r["first_s"] is not None]
    proved = [r["proved_s"] for r in rows if r["proved_s"] is not None]
    total = [r["seconds"] for r in rows]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    f50, f95 = _stats(first)
    p50, p95 = _stats(proved)
    return {"layouts": len(rows), "first_median_s": f50, "first_p95_s": f95,
            "proved_median_s": p50, "proved_p95_s": p95,
            "total_median_s": _stats(total)[0], "status": counts,
            "moved": sum(r["moved"] for r in rows),
            "involved": sum(r["involved"] for r in rows),
            "violations": sum(r["violations"] for r in rows),
            "unverified": sum(1 for r in rows if r["status"] in ("optimal", "feasible")
                              and not r["verified"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,25,50,100,200,500,1000")
    ap.add_argument("--per-size", type=int, default=5)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--stability", action="store_true", help="also import stability")
    ap.add_argument("--before", metavar="DIR", help="a checkout of the code before: the peer")
    ap.add_argument("--no-ours", action="store_true", help="run only the --before peer")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    out: dict = {"bench": "repair_scale", "time_limit_s": a.time_limit,
                 "stability": a.stability, "sizes": [], "targets": {}}
    err = sys.stderr
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            cellf = Path(d) / f"floor_{n}.cell"
            cellf.write_text(cell_text(n, a.stability))
            files = []
            for k in range(a.per_size):
                rng = np.random.default_rng(a.seed * 1000 + n * 10 + k)
                faults = int(rng.integers(1, min(50, max(1, n // 4)) + 1))
                obj = make_layout(n, faults, a.seed * 7919 + n * 31 + k)
                f = Path(d) / f"l{n}_{k}.json"
                f.write_text(json.dumps(obj))
                files.append(f)
            row: dict = {"parts": n}
            peers = [] if a.no_ours else [("ours", ROOT)]
            if a.before:
                peers.append(("before", Path(a.before)))
            for label, pp in peers:
                t0 = time.perf_counter()
                rows = run_batch(pp, cellf, files, a.time_limit)
                row[label] = summary(rows)
                row[label]["wall_s"] = round(time.perf_counter() - t0, 1)
                print(f"n={n} {label}: {json.dumps(row[label])}", file=err)
            out["sizes"].append(row)
    ours = {r["parts"]: r.get("ours") for r in out["sizes"] if r.get("ours")}
    if ours:
        small = [s for n, s in ours.items() if n <= 100]
        out["targets"]["first_p95_le_1s_upto_100"] = all(
            s["first_p95_s"] is not None and s["first_p95_s"] <= 1.0 for s in small)
        if 50 in ours:
            m = ours[50]["proved_median_s"]
            out["targets"]["proved_median_le_5s_at_50"] = m is not None and m <= 5.0
        out["targets"]["no_unknown_upto_1000"] = all(
            s["status"].get("unknown", 0) == 0 for n, s in ours.items() if n <= 1000)
    print(f"{'parts':>6s} {'peer':7s} {'first p50':>9s} {'first p95':>9s} {'proved p50':>10s} "
          f"{'proved p95':>10s} {'moved/involved':>14s}  status", file=err)
    for r in out["sizes"]:
        for label in ("ours", "before"):
            s = r.get(label)
            if not s:
                continue

            def f(x: float | None) -> str:
                return "-" if x is None else f"{x:.3f}"

            print(f"{r['parts']:6d} {label:7s} {f(s['first_median_s']):>9s} "
                  f"{f(s['first_p95_s']):>9s} {f(s['proved_median_s']):>10s} "
                  f"{f(s['proved_p95_s']):>10s} {s['moved']:>6d}/{s['involved']:<7d}  "
                  + " ".join(f"{k}={v}" for k, v in sorted(s["status"].items())), file=err)
    for k, v in out["targets"].items():
        print(f"target {k}: {'ok' if v else 'MISS'}", file=err)
    print(json.dumps(out))
    bad = any(s.get(lbl, {}).get("unverified", 0) for s in out["sizes"]
              for lbl in ("ours", "before"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
