"""Messy-proposal benchmark of ``cellspec repair`` (issue 29): seeded scatters, not injected faults.

* station: N cubes scattered over ``rules/cells/dual_arm_station.cell`` (N = 10, 20, 40, 60):
  x and y uniform over the workspace, half on the table (z 0.025), a quarter on the second
  level (z 0.075), a quarter at a random height;
* floor: 200 and 1 000 cubes in clusters of 10 on a large floor (a cell written here, the
  station's cube and gripper), each cluster scattered the same way over 0.2 x 0.2 m;

each with and without an order (the parts in a seeded random order). Per size and case:
time to the first verified repair p50/p95, the final status counts and time, parts moved
vs the proved minimum (the monolithic model, proved optimal, on layouts of <= 20 parts),
``unknown`` count. Every repaired layout is re-checked here with ``cellspec.check``. The
peer is the same call on the code in ``--before DIR`` (a checkout; run in a subprocess with
that PYTHONPATH). ``--cli N``: also N whole-process runs (``python -m cellspec repair
--time-limit 2``) per station size, wall time and status. ONE JSON line on stdout, a
table on stderr.

    python bench/repair_messy.py [--sizes 10,20,40,60,200,1000] [--per-size 4]
        [--time-limit 10] [--before /work/main] [--cli 2]
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
STATION = ROOT / "rules" / "cells" / "dual_arm_station.cell"
CUBE = 0.05
CLUSTER = 10
CLUSTER_SIDE = 0.2
CLUSTER_PITCH = 0.3


def floor_text(n: int) -> str:
    """A floor with room for ``n / 10`` clusters on a grid."""
    k = math.ceil(math.sqrt(n / CLUSTER))
    side = CLUSTER_PITCH * k + 0.1
    return f"""import physical
import stability

cell messy_floor {{
    units m
    workspace x [0, {side:.2f}] y [0, {side:.2f}] z [0, 0.30]
    surface table z 0
    part cube size ({CUBE}, {CUBE}, {CUBE}) mass 0.1
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
}}
"""


def _z(rng: np.random.Generator, k: int, n: int) -> float:
    """Half on the table, a quarter on the second level, a quarter at a random height."""
    q = k * 4 // n
    if q < 2:
        return CUBE / 2
    if q == 2:
        return 1.5 * CUBE
    return float(rng.uniform(CUBE / 2, 0.3 - CUBE / 2))


def scatter(n: int, seed: int, ordered: bool, lo: tuple[float, float],
            hi: tuple[float, float], clusters: int = 1) -> dict:
    """``n`` cubes, ``clusters`` groups scattered uniformly over [lo, hi] offsets."""
    rng = np.random.default_rng(seed)
    parts = []
    per = n // clusters
    side = math.ceil(math.sqrt(clusters))
    for c in range(clusters):
        ox = CLUSTER_PITCH * (c % side) if clusters > 1 else 0.0
        oy = CLUSTER_PITCH * (c // side) if clusters > 1 else 0.0
        for k in range(per):
            parts.append({"id": f"p{len(parts)}", "type": "cube",
                          "pos": [round(float(ox + rng.uniform(lo[0], hi[0])), 4),
                                  round(float(oy + rng.uniform(lo[1], hi[1])), 4),
                                  round(_z(rng, k, per), 4)]})
    obj: dict = {"units": "m", "parts": parts}
    if ordered:
        obj["order"] = [parts[k]["id"] for k in rng.permutation(len(parts)).tolist()]
    return obj


CHILD = r"""
import json, sys, time
from cellspec.dsl.parser import load_cell
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.verify import check
import clingo, ortools.sat.python.cp_model  # imports paid once
cell = load_cell(sys.argv[1])
limit, prove = float(sys.argv[2]), int(sys.argv[3])
out = []
for f in sys.argv[4:]:
    lay = layout_from_obj(json.load(open(f)))
    t0 = time.perf_counter()
    r = repair(cell, lay, time_limit=limit)
    secs = time.perf_counter() - t0
    ok = r.layout is not None and check(cell, layout_from_obj(r.layout)).verdict == "pass"
    first = getattr(r, "first_seconds", None)
    if first is None and r.layout is not None:
        first = secs
    row = {"status": r.status, "seconds": secs, "first_s": first, "verified": ok,
           "moved": r.parts_moved, "reason": r.reason, "minimum": None}
    if prove and len(lay) <= 20:
        m = repair(cell, lay.with_order(None), time_limit=20, decompose=False)
        if m.status == "optimal":
            row["minimum"] = m.parts_moved
    out.append(row)
print(json.dumps(out))
"""


def run_batch(pythonpath: Path, cell: Path, files: list[Path], limit: float,
              prove: bool) -> list[dict]:
    """Repair every layout file in one child process with that PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    p = subprocess.run([sys.executable, "-c", CHILD, str(cell), str(limit), str(int(prove)),
                        *[str(f) for f in files]], env=env, cwd=str(pythonpath),
                       capture_output=True, text=True, check=False,
                       timeout=len(files) * (limit + 60) + 60)
    if p.returncode != 0:
        raise SystemExit(f"child failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def cli_runs(pythonpath: Path, cell: Path, files: list[Path]) -> list[dict]:
    """Whole-process runs: ``python -m cellspec repair --time-limit 2``."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    out = []
    for f in files:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "cellspec", "repair", str(cell), str(f),
                            "--time-limit", "2", "--format", "json"], env=env,
                           cwd=str(pythonpath), capture_output=True, text=True, check=False,
                           timeout=120)
        wall = time.perf_counter() - t0
        try:
            st = json.loads(p.stdout)["status"]
        except (ValueError, KeyError):
            st = f"rc={p.returncode}"
        out.append({"wall_s": round(wall, 3), "status": st})
    return out


def _pct(xs: list[float], q: float) -> float | None:
    return round(float(np.percentile(np.asarray(xs), q)), 3) if xs else None


def summary(rows: list[dict]) -> dict:
    first = [r["first_s"] for r in rows if r["first_s"] is not None and r["verified"]]
    total = [r["seconds"] for r in rows]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    proved = [(r["moved"], r["minimum"]) for r in rows
              if r["minimum"] is not None and r["verified"]]
    return {"layouts": len(rows), "first_p50_s": _pct(first, 50), "first_p95_s": _pct(first, 95),
            "final_p50_s": _pct(total, 50), "final_max_s": _pct(total, 100), "status": counts,
            "repaired_verified": sum(r["verified"] for r in rows),
            "unknown": counts.get("unknown", 0),
            "moved_vs_min": [list(x) for x in proved],
            "worst_ratio": round(max(m / max(1, k) for m, k in proved), 3) if proved else None,
            "unverified": sum(1 for r in rows if r["status"] in ("optimal", "feasible")
                              and not r["verified"]),
            "reasons": sorted({r["reason"][:120] for r in rows if r["status"] in (
                "unknown", "infeasible") and r["reason"]})[:3]}


def cases(n: int, per: int, seed: int, d: Path) -> tuple[Path, dict[str, list[Path]]]:
    """The cell file and the layout files (ordered and not) of one size."""
    if n <= 100:
        cell = STATION
        lo, hi, cl = (0.2, 0.05), (0.7, 0.5), 1
    else:
        cell = d / f"floor_{n}.cell"
        cell.write_text(floor_text(n))
        lo, hi, cl = (0.05, 0.05), (0.05 + CLUSTER_SIDE, 0.05 + CLUSTER_SIDE), n // CLUSTER
    files: dict[str, list[Path]] = {"unordered": [], "ordered": []}
    for k in range(per):
        for ordered in (False, True):
            obj = scatter(n, seed * 100003 + n * 101 + k, ordered, lo, hi, cl)
            tag = "ordered" if ordered else "unordered"
            f = d / f"m{n}_{k}_{tag}.json"
            f.write_text(json.dumps(obj))
            files[tag].append(f)
    return cell, files


def cli_only(sizes: list[int], a: argparse.Namespace, peers: list[tuple[str, Path]]) -> int:
    """Whole-process runs alone: per station size, ``--cli`` layouts of each case, every
    peer on one file before the next file (so machine load falls on both alike)."""
    err = sys.stderr
    out: dict = {"bench": "repair_messy_cli", "time_limit_s": 2, "sizes": []}
    print(f"whole process, --time-limit 2 (wall s): {'parts':>5s} {'peer':6s} {'p50':>6s} "
          f"{'p95':>6s} {'max':>6s}  status", file=err)
    with tempfile.TemporaryDirectory() as d:
        for n in [x for x in sizes if x <= 100]:
            cell, files = cases(n, a.cli, a.seed, Path(d))
            runs: dict[str, list[dict]] = {label: [] for label, _ in peers}
            for f in [f for fl in files.values() for f in fl]:
                for label, pp in peers:
                    runs[label].extend(cli_runs(pp, cell, [f]))
            row: dict = {"parts": n}
            for label, _ in peers:
                walls = [x["wall_s"] for x in runs[label]]
                sts: dict[str, int] = {}
                for x in runs[label]:
                    sts[x["status"]] = sts.get(x["status"], 0) + 1
                row[label] = {"p50": _pct(walls, 50), "p95": _pct(walls, 95),
                              "max": max(walls), "status": sts}
                print(f"{'':40s} {n:5d} {label:6s} {_pct(walls, 50):6.2f} "
                      f"{_pct(walls, 95):6.2f} {max(walls):6.2f}  "
                      + " ".join(f"{k}={v}" for k, v in sorted(sts.items())), file=err)
            out["sizes"].append(row)
    print(json.dumps(out))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,20,40,60,200,1000")
    ap.add_argument("--per-size", type=int, default=4)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--before", metavar="DIR", help="a checkout of the code before: the peer")
    ap.add_argument("--no-proof", action="store_true", help="skip the proved minimum")
    ap.add_argument("--cli", type=int, default=0, metavar="N",
                    help="whole-process runs per station size (time limit 2 s)")
    ap.add_argument("--cli-only", action="store_true",
                    help="only the whole-process runs (peers alternating file by file)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    out: dict = {"bench": "repair_messy", "time_limit_s": a.time_limit, "sizes": []}
    err = sys.stderr
    peers = [("ours", ROOT)] + ([("before", Path(a.before))] if a.before else [])
    if a.cli_only:
        return cli_only(sizes, a, peers)
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            cell, files = cases(n, a.per_size, a.seed, Path(d))
            for tag, fl in files.items():
                row: dict = {"parts": n, "case": tag}
                for label, pp in peers:
                    rows = run_batch(pp, cell, fl, a.time_limit,
                                     prove=label == "ours" and not a.no_proof)
                    row[label] = summary(rows)
                    if a.cli and n <= 100:
                        row[label]["cli"] = cli_runs(pp, cell, fl[:a.cli])
                    print(f"n={n} {tag} {label}: {json.dumps(row[label])}", file=err)
                out["sizes"].append(row)
    print(f"{'parts':>5s} {'case':9s} {'peer':6s} {'first p50':>9s} {'first p95':>9s} "
          f"{'final p50':>9s} {'final max':>9s} {'ok':>5s} {'moved/min':>10s}  status",
          file=err)
    for r in out["sizes"]:
        for label, _ in peers:
            s = r[label]

            def f(x: float | None) -> str:
                return "-" if x is None else f"{x:.3f}"

            mm = s["moved_vs_min"]
            ratio = (f"{sum(m for m, _ in mm)}/{sum(k for _, k in mm)}" if mm else "-")
            print(f"{r['parts']:5d} {r['case']:9s} {label:6s} {f(s['first_p50_s']):>9s} "
                  f"{f(s['first_p95_s']):>9s} {f(s['final_p50_s']):>9s} "
                  f"{f(s['final_max_s']):>9s} {s['repaired_verified']:>2d}/{s['layouts']:<2d} "
                  f"{ratio:>10s}  " + " ".join(f"{k}={v}" for k, v in sorted(
                      s["status"].items())), file=err)
    if a.cli:
        print(f"whole process, --time-limit 2 (wall s): {'parts':>5s} {'case':9s} {'peer':6s} "
              f"{'p50':>6s} {'p95':>6s} {'max':>6s}  status", file=err)
        for r in out["sizes"]:
            for label, _ in peers:
                runs = r[label].get("cli")
                if not runs:
                    continue
                walls = [x["wall_s"] for x in runs]
                sts: dict[str, int] = {}
                for x in runs:
                    sts[x["status"]] = sts.get(x["status"], 0) + 1
                print(f"{'':40s} {r['parts']:5d} {r['case']:9s} {label:6s} "
                      f"{_pct(walls, 50):6.2f} {_pct(walls, 95):6.2f} {max(walls):6.2f}  "
                      + " ".join(f"{k}={v}" for k, v in sorted(sts.items())), file=err)
    print(json.dumps(out))
    bad = any(r[lbl]["unverified"] for r in out["sizes"] for lbl, _ in peers)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
