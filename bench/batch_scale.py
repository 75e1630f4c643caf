"""Scale benchmark of ``cellspec batch``: many layouts of 5-50 parts against the dual-arm
station, serial vs an embedded Dask LocalCluster of 1 and 2 worker processes.

The script writes N seeded layouts (towers of up to 3 cubes on a grid; about half carry one
injected fault: a floating cube, a cube sunk into the one below, a tower pushed out of the
workspace, or a reversed order) to a JSON-lines file, then runs the real CLI once per mode as
a child process (``cellspec batch CELL FILE -o OUT --no-timings --stats``), so each run pays
its own start-up. Measured per mode: wall time, start-up (to a client with the cell
installed on every worker), throughput (layouts/s, with and without start-up), overhead per
layout (worker-seconds not spent checking layouts: ``(wall x workers - work) / N``), peak
memory of the client process (``wait4``) and of every worker (VmHWM, from ``--stats``), and
whether the output is byte-identical to the serial run's.

CPU seconds of the whole process tree of each run (``wait4``: client, in-process scheduler,
nannies, workers) are reported too, per layout and over the serial run's: unlike wall-clock
figures they are not inflated by other load on the machine (the load average is recorded).

Output: ONE JSON line on stdout; the table on stderr. Exit 1 when any output differs from
the serial run's; the speed-up target (>= 0.8 x workers) is reported, not enforced. The
32-worker figure at the end is an ESTIMATE on paper from the measured costs, not a run.

    python bench/batch_scale.py [--n 10000,100000] [--modes serial,1,2] [--seed 7]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CELL = REPO / "rules" / "cells" / "dual_arm_station.cell"
CUBE = 0.05
PITCH = 0.075  # column grid: 0.025 m gaps, room for the parallel gripper's fingers
COLS = [(0.25 + PITCH * i, 0.10 + PITCH * j) for i in range(6) for j in range(5)]
FAULTS = ("float", "sink", "outside", "reverse")


def layout(rng: random.Random, k: int) -> dict:
    """One seeded layout of 5-50 cubes; about half get one fault."""
    n = rng.randint(5, 50)
    cols = rng.sample(COLS, len(COLS))
    heights = [1] * len(cols)
    while sum(heights) < n:
        c = rng.randrange(len(cols))
        if heights[c] < 3:
            heights[c] += 1
    parts, left = [], n
    for (x, y), h in zip(cols, heights, strict=True):
        for lvl in range(min(h, left)):
            parts.append({"id": f"p{len(parts)}", "type": "cube",
                          "pos": [round(x, 4), round(y, 4), round(CUBE / 2 + CUBE * lvl, 4)]})
        left -= min(h, left)
        if left == 0:
            break
    order = rng.random() < 0.5
    out: dict = {"id": f"L{k:06d}", "parts": parts}
    if order:
        out["order"] = [p["id"] for p in sorted(parts, key=lambda p: p["pos"][2])]
    if rng.random() < 0.5:
        fault = rng.choice(FAULTS if order else FAULTS[:3])
        tops = [p for p in parts if p["pos"][2] > CUBE]
        if fault == "float":
            rng.choice(parts)["pos"][2] += 0.01
        elif fault == "sink" and tops:
            rng.choice(tops)["pos"][2] -= 0.01
        elif fault == "outside":
            rng.choice(parts)["pos"][0] += 1.0
        elif fault == "reverse" and order:
            out["order"] = out["order"][::-1]
        else:
            parts[0]["pos"][2] += 0.01
    return out


def write_layouts(path: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w") as fh:
        for k in range(n):
            fh.write(json.dumps(layout(rng, k), separators=(",", ":")) + "\n")


def run_mode(mode: str, src: Path, out: Path, chunk: int | None) -> dict:
    """One ``cellspec batch`` child process; its figures."""
    args = [sys.executable, "-m", "cellspec", "batch", str(CELL), str(src), "-o", str(out),
            "--no-timings", "--stats"]
    args += ["--serial"] if mode == "serial" else ["--workers", mode]
    if chunk:
        args += ["--chunk", str(chunk)]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    so, se = out.with_suffix(".stdout"), out.with_suffix(".stderr")
    t0 = time.perf_counter()
    with so.open("w") as fo, se.open("w") as fe:
        p = subprocess.Popen(args, stdout=fo, stderr=fe, env=env, cwd=REPO)
        _, status, ru = os.wait4(p.pid, 0)  # this child's own rusage: its peak memory
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    stdout, stderr = so.read_text(), se.read_text()
    lines = stderr.strip().splitlines()
    try:
        stats = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(f"batch {mode} failed (exit {p.returncode}):\n{stderr}") from None
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    return {"mode": mode, "exit": p.returncode, "wall_s": round(wall, 3),
            "stats": stats, "summary": stdout.strip().splitlines()[-1], "sha256": digest,
            "client_peak_mib": round(ru.ru_maxrss / 1024, 1),
            "client_cpu_s": round(ru.ru_utime + ru.ru_stime, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="10000,100000", help="batch sizes, comma-separated")
    ap.add_argument("--modes", default="serial,1,2",
                    help="serial and/or LocalCluster worker counts, comma-separated")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--chunk", type=int, default=None, help="fixed chunk (default adaptive)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.n.split(",")]
    modes = a.modes.split(",")
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="batch_scale_") as tmp:
        for n in sizes:
            src = Path(tmp) / f"layouts_{n}.jsonl"
            write_layouts(src, n, a.seed)
            base = None
            for mode in modes:
                print(f"n={n} {mode} ...", file=sys.stderr, flush=True)
                r = run_mode(mode, src, Path(tmp) / f"out_{n}_{mode}.jsonl", a.chunk)
                st = r["stats"]
                workers = max(1, st["workers"])
                busy = st["wall_s"] - st.get("startup_s", 0.0)
                r.update(n=n, workers=st["workers"], startup_s=st.get("startup_s", 0.0),
                         layouts_per_s=round(n / r["wall_s"], 1),
                         steady_layouts_per_s=round(n / busy, 1) if busy > 0 else None,
                         work_ms_per_layout=round(1000 * st["work_s"] / n, 3),
                         overhead_ms_per_layout=round(1000 * (busy * workers - st["work_s"])
                                                      / n, 3),
                         worker_peak_mib=({k: round(v / 2**20, 1) for k, v in
                                           st.get("worker_peak_bytes", {}).items()}))
                r["overhead_pct"] = round(100 * r["overhead_ms_per_layout"]
                                          / max(r["work_ms_per_layout"], 1e-9), 1)
                r["cpu_ms_per_layout"] = round(1000 * r["client_cpu_s"] / n, 3)
                r["load_avg_1min"] = round(os.getloadavg()[0], 2)
                if mode == "serial" or base is None:
                    base = base or r
                r["identical_to_serial"] = r["sha256"] == base["sha256"]
                r["speedup_vs_serial"] = round(base["steady_layouts_per_s"] and
                                               r["steady_layouts_per_s"] /
                                               base["steady_layouts_per_s"], 2)
                ok &= r["identical_to_serial"]
                # CPU seconds of the whole process tree (client, scheduler, nannies, workers)
                # per layout, over the serial run's: the cost of Dask that no other load on
                # the machine can inflate (wall-clock figures can be)
                r["extra_cpu_ms_per_layout"] = round(r["cpu_ms_per_layout"]
                                                     - base["cpu_ms_per_layout"], 3)
                rows.append(r)
    # --- on paper: 32 workers (an ESTIMATE from the measured costs, not a measurement) ---
    est = None
    cl = [r for r in rows if r["mode"] not in ("serial",) and r["n"] == max(sizes)]
    if cl:
        r = max(cl, key=lambda x: x["workers"])
        ser = next(x for x in rows if x["n"] == r["n"] and x["mode"] == "serial") \
            if "serial" in modes else r
        per = ser["cpu_ms_per_layout"] / 1000
        over = max(r["extra_cpu_ms_per_layout"], 0.0) / 1000
        w = 32
        est = {"workers": w, "kind": "ESTIMATE on paper, not measured",
               "assumes": "32 worker processes on 32 free cores, each layout costing the CPU "
                          "time measured here (serial run, per layout) plus the extra CPU per "
                          f"layout that Dask cost with {r['workers']} worker(s) here; the "
                          "client and scheduler on cores of their own",
               "cpu_ms_per_layout": round(1000 * (per + over), 3),
               "layouts_per_s": round(w / (per + over), 0),
               "seconds_for_100000": round(100_000 * (per + over) / w, 1)}
    out = {"bench": "batch_scale", "python": platform.python_version(),
           "cpus": os.cpu_count(), "seed": a.seed, "rows": [
               {k: v for k, v in r.items() if k not in ("stats",)} for r in rows],
           "estimate_32_workers": est, "identical": ok,
           "target": "speed-up >= 0.8 x worker processes, results identical"}
    print(json.dumps(out))
    hdr = (f"{'n':>7} {'mode':>6} {'wall s':>8} {'start s':>7} {'lay/s':>8} {'steady':>8} "
           f"{'work ms':>8} {'over ms':>8} {'over %':>6} {'cpu ms':>7} {'+cpu ms':>7} "
           f"{'speedup':>7} {'peak MiB/worker':>16} {'same':>5} {'load':>5}")
    print(hdr, file=sys.stderr)
    for r in rows:
        peaks = ",".join(str(v) for v in r["worker_peak_mib"].values()) or \
            str(r["client_peak_mib"])
        print(f"{r['n']:>7} {r['mode']:>6} {r['wall_s']:>8.1f} {r['startup_s']:>7.1f} "
              f"{r['layouts_per_s']:>8.1f} {r['steady_layouts_per_s']:>8.1f} "
              f"{r['work_ms_per_layout']:>8.2f} {r['overhead_ms_per_layout']:>8.2f} "
              f"{r['overhead_pct']:>6.1f} {r['cpu_ms_per_layout']:>7.2f} "
              f"{r['extra_cpu_ms_per_layout']:>7.2f} {r['speedup_vs_serial']:>7.2f} "
              f"{peaks:>16} {'yes' if r['identical_to_serial'] else 'NO':>5} "
              f"{r['load_avg_1min']:>5.1f}", file=sys.stderr)
    if est:
        print(f"ESTIMATE (on paper): {est['workers']} workers ~ {est['layouts_per_s']:.0f} "
              f"layouts/s, 100 000 layouts in ~{est['seconds_for_100000']:.0f} s",
              file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
