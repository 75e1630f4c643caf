"""The yawed series of bench/verify_scale.py (issue 22): the same towers with half the parts
turned by a seeded angle in (-45°, 45°) and a tenth of them cylinders of the cube's bounding
box, checked in the same process as the axis-aligned layout (cost ratio, target <= 2x),
next to pybullet's collision detection on the same shapes (yawed boxes as oriented boxes,
GEOM_CYLINDER for the cans). ``--stability on`` (the default) checks every standard rule,
stability included (contact polygons for the shapes); ``off`` writes ``stability off``.

    python bench/verify_scale.py --yawed [--sizes 10000,100000] [--stability on|off]
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import verify_scale as vs

CAN = "    part can cylinder radius {r} height {h} mass 0.1\n"


def cell_text(stability: str = "on") -> str:
    """The bench cell (stability on or off) and a can type (the cube's bounding box)."""
    text = vs.cell_text(stability)
    line = f"    part cube size ({vs.CUBE}, {vs.CUBE}, {vs.CUBE}) mass 0.1\n"
    return text.replace(line, line + CAN.format(r=vs.CUBE / 2, h=vs.CUBE))


def shaped(obj: dict, seed: int) -> dict:
    """A copy of ``obj`` with half the parts yawed and a tenth of them cans (seeded)."""
    rng = random.Random(seed)
    parts = []
    for p in obj["parts"]:
        q = dict(p)
        u = rng.random()
        if u < 0.1:
            q["type"] = "can"
        elif u < 0.6:
            q["yaw"] = round(rng.uniform(-45, 45), 3) or 1.0
        parts.append(q)
    return {**obj, "parts": parts}


def child(cell_path: str, plain_path: str, yawed_path: str, repeat: str,
          out_path: str) -> None:
    """Check both layouts in this process (cold, then warm) and write the timings; with
    ``repeat`` > 1, that many more warm checks of each, alternating, and the best of them
    (``check_best_s``, ``ratio_best``: steadier than one check on a loaded machine)."""
    import cellspec
    from cellspec.layout import load_layout

    cell = cellspec.load_cell(cell_path)
    res: dict = {}
    lays = {}
    for name, path in (("plain", plain_path), ("yawed", yawed_path)):
        lay = lays[name] = load_layout(path)
        t0 = time.perf_counter()
        v = cellspec.check(cell, lay)
        t1 = time.perf_counter()
        cellspec.check(cell, lay)
        t2 = time.perf_counter()
        res[name] = {"check_s": t1 - t0, "check_warm_s": t2 - t1, "verdict": str(v.verdict),
                     "violations": len(v.violations), "reason": v.reason}
    res["ratio_warm"] = res["yawed"]["check_warm_s"] / res["plain"]["check_warm_s"]
    res["ratio_cold"] = res["yawed"]["check_s"] / res["plain"]["check_s"]
    if int(repeat) > 1:
        for name in lays:
            res[name]["check_best_s"] = res[name]["check_warm_s"]
        for _ in range(int(repeat)):
            for name, lay in lays.items():
                t0 = time.perf_counter()
                cellspec.check(cell, lay)
                best = min(res[name]["check_best_s"], time.perf_counter() - t0)
                res[name]["check_best_s"] = best
        res["ratio_best"] = res["yawed"]["check_best_s"] / res["plain"]["check_best_s"]
    Path(out_path).write_text(json.dumps(res), encoding="utf-8")


def child_pybullet(layout_path: str, out_path: str) -> None:
    """pybullet DIRECT on the shapes: plain cubes and cans in two batches, yawed cubes one
    body each (a batch shares one orientation); performCollisionDetection timed."""
    obj = json.loads(Path(layout_path).read_text(encoding="utf-8"))
    import pybullet as pb

    t0 = time.perf_counter()
    pb.connect(pb.DIRECT)
    box = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=[vs.CUBE / 2] * 3)
    can = pb.createCollisionShape(pb.GEOM_CYLINDER, radius=vs.CUBE / 2, height=vs.CUBE)
    groups: dict[str, list] = {"cube": [], "can": []}
    n_bodies = 0
    for p in obj["parts"]:
        if "yaw" in p:
            quat = pb.getQuaternionFromEuler([0, 0, math.radians(p["yaw"])])
            pb.createMultiBody(baseMass=1, baseCollisionShapeIndex=box, basePosition=p["pos"],
                               baseOrientation=quat)
            n_bodies += 1
        else:
            groups[p["type"]].append(p["pos"])
    for kind, shape in (("cube", box), ("can", can)):
        if groups[kind]:
            out = pb.createMultiBody(baseMass=1, baseCollisionShapeIndex=shape,
                                     batchPositions=groups[kind])
            n_bodies += len(out) if isinstance(out, list | tuple) else 1
    t1 = time.perf_counter()
    pb.performCollisionDetection()
    contacts = pb.getContactPoints()
    t2 = time.perf_counter()
    pb.disconnect()
    Path(out_path).write_text(json.dumps({"load_s": t1 - t0, "detect_s": t2 - t1,
                                          "total_s": t2 - t0, "bodies": n_bodies,
                                          "contacts": len(contacts)}), encoding="utf-8")


def _run(args: list[str], out: Path, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(vs.__file__), *args, str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    return json.loads(out.read_text(encoding="utf-8"))


def run(sizes: list[int], height: int, seed: int, tmp: Path, timeout: float,
        pybullet: bool, stability: str = "on", repeat: int = 1) -> list[dict]:
    """One row per size: both checks in one child process, then pybullet on the shapes."""
    cell_path = tmp / "bench_shapes.cell"
    cell_path.write_text(cell_text(stability), encoding="utf-8")
    rows = []
    for n in sizes:
        obj, _, _ = vs.build(n, height, seed)
        plain, yawed = tmp / f"plain_{n}.json", tmp / f"yawed_{n}.json"
        plain.write_text(json.dumps(obj), encoding="utf-8")
        yawed.write_text(json.dumps(shaped(obj, seed)), encoding="utf-8")
        vs._log(f"[verify_scale --yawed] N={n}: engine ...")
        row = {"n": n, **_run(["--child-yawed", str(cell_path), str(plain), str(yawed),
                               str(repeat)], tmp / f"yawed_{n}.out", timeout)}
        if pybullet:
            vs._log(f"[verify_scale --yawed] N={n}: pybullet ...")
            row["pybullet"] = _run(["--child-pybullet-shapes", str(yawed)],
                                   tmp / f"pyb_{n}.out", timeout)
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """The human table (stderr)."""
    best = any("ratio_best" in r for r in rows)
    out = [f"{'N':>7} {'plain s':>8} {'yawed s':>8} {'ratio':>6} {'cold ratio':>10} "
           f"{'pybullet s':>10} {'x pyb':>6}" + (f" {'best ratio':>10}" if best else "")]
    for r in rows:
        if "error" in r:
            out.append(f"{r['n']:>7} error: {r['error']}")
            continue
        pb = r.get("pybullet", {}).get("total_s")
        ys = r["yawed"]["check_warm_s"]
        out.append(f"{r['n']:>7} {r['plain']['check_warm_s']:>8.3f} {ys:>8.3f} "
                   f"{r['ratio_warm']:>6.2f} {r['ratio_cold']:>10.2f} "
                   f"{pb if pb is not None else float('nan'):>10.3f} "
                   f"{(pb / ys) if pb else float('nan'):>6.1f}"
                   + (f" {r.get('ratio_best', float('nan')):>10.2f}" if best else ""))
    out.append("ratio: yawed / axis-aligned warm check, same process (target <= 2); pybullet: "
               "load + detect on the same shapes (overlap only)"
               + ("; best ratio: best of --repeat warm checks each" if best else ""))
    return "\n".join(out)
