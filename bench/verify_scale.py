"""Scale benchmark of ``cellspec.check``: 100 to 100 000 cubes, every rule, exact answers.

For each size N the script builds a deterministic layout of N cubes (towers of
``--height`` cubes on a 0.08 m grid, 0.03 m apart, plus a strip of special
structures), injects a known number of violations of every rule of the standard
library (workspace, no_overlap, gravity, support_order, grip_access, keepout),
computes the expected violation set itself, and asserts that the engine reports
exactly that set. Peers run on the same boxes in the same run:

* pybullet (overlap only): N box bodies, ``performCollisionDetection`` and
  ``getContactPoints``; timed load + detect.
* an all-pairs pure-Python checker of the same six rules (no numpy, no broad
  phase); run while it is predicted to take at most ``--allpairs-budget`` seconds,
  extrapolated from its per-pair cost (O(N^2)) beyond that.

The engine and pybullet each run in a fresh subprocess per size, so peak memory
(VmHWM, or ru_maxrss, of that child) is honest: it covers interpreter, imports, the layout
JSON load and the check, and nothing from the generator or the peers.

Output: ONE JSON line on stdout; the human table, progress and FAIL lines go to
stderr. Exit 1 when the engine (or the all-pairs checker, where it runs) does not
find exactly the expected violations; performance targets are reported, not
enforced. ``--quick`` runs N = 100 and 1000 only (smoke test).

    python bench/verify_scale.py [--sizes 100,1000,10000,100000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# --- the bench cell (one source of truth: written to the temp dir, read by both the
# engine and, as constants, by the all-pairs checker) --------------------------------

CUBE = 0.05  # m, the dual-arm station's cube
EPS = 0.001  # m, contact tolerance
OPENING = 0.07  # m, default parallel gripper
DEPTH = 0.02  # m, finger depth
WORKSPACE = ((-1.0, 16.0), (-1.5, 16.0), (0.0, 0.30))  # x, y, z ranges, m
KEEPOUT = ("bench_zone", ((0.0, 10.0), (-0.30, -0.10), (0.0, 0.10)))
SURFACE_Z = 0.0

SPACING = 0.08  # tower grid pitch: neighbouring towers 0.03 m apart (> clearance 0.01 m)
GRID0 = 0.10  # first tower centre (x and y)
CLUSTER_PITCH = 0.25
CLUSTERS_PER_ROW = 40
NEIGHBOUR = 0.055  # grip cluster: neighbours 0.005 m from the centre cube (< 0.01 m)
DEFAULT_SIZES = (100, 1000, 10_000, 100_000)
TARGETS = {"n10000_check_s": 0.5, "n10000_speedup_vs_pybullet": 3.0,
           "n100000_check_s": 5.0, "n100000_peak_mib": 1024.0}


def _rng(lo_hi: tuple[float, float]) -> str:
    return f"[{lo_hi[0]:.2f}, {lo_hi[1]:.2f}]"


def cell_text(stability: str = "on") -> str:
    """The bench cell: the station's part type, gripper and eps, a big workspace; with
    ``stability`` "off" the cell says ``stability off`` (the default checks it)."""
    ws = WORKSPACE
    name, kz = KEEPOUT
    off = "    stability off\n" if stability == "off" else ""
    return f"""// Written by bench/verify_scale.py: the dual-arm station's cube, gripper and
// contact tolerance, the standard physical rules, a workspace for 100 000 cubes.
import physical

cell bench_floor {{
    units m
    workspace x {_rng(ws[0])} y {_rng(ws[1])} z {_rng(ws[2])}
    surface table z {SURFACE_Z:.2f}
    part cube size ({CUBE}, {CUBE}, {CUBE}) mass 0.1
    default gripper parallel opening {OPENING} depth {DEPTH}
    keepout {name} box x {_rng(kz[0])} y {_rng(kz[1])} z {_rng(kz[2])}
    tolerance contact {EPS}
{off}}}
"""


# --- the layout and its expected violations -------------------------------------------

def _r(v: float) -> float:
    return round(v, 4)  # on the 0.1 mm grid: no rounding notes


def build(n: int, height: int, seed: int) -> tuple[dict, set[tuple[str, tuple[str, ...]]],
                                                    dict]:
    """(layout JSON object, expected {(rule, parts)}, facts about the layout).

    k = max(2, n // 1000) injections of each kind:
      workspace      k single cubes outside the workspace (x < x min)         -> k
      keepout        k single cubes on the table inside the keep-out box      -> k
      grip_access    k clusters: 4 neighbours 0.005 m off the centre cube on
                     both axes, centre placed last                             -> k
      gravity        k towers whose top cube is lifted 0.01 m                  -> k
      no_overlap     k towers whose top cube is lowered 0.01 m into the one
                     below; that top cube then also rests on nothing           -> k + k gravity
      support_order  k towers whose top two cubes swap places in the order    -> k
    """
    k = max(2, n // 1000)
    specials = k + k + 5 * k
    m = n - specials
    full, rest = divmod(m, height)
    if full < 3 * k:
        raise SystemExit(f"N={n} is too small for {k} injections of each kind")
    towers = full + (1 if rest else 0)
    cols = math.ceil(math.sqrt(towers))
    rng = random.Random(seed * 1_000_003 + n)
    chosen = rng.sample(range(full), 3 * k)
    lowered, lifted, swapped = set(chosen[:k]), set(chosen[k:2 * k]), set(chosen[2 * k:])
    parts: list[dict] = []
    order: list[str] = []
    expected: set[tuple[str, tuple[str, ...]]] = set()

    def add(pid: str, x: float, y: float, z: float) -> None:
        parts.append({"id": pid, "type": "cube", "pos": [_r(x), _r(y), _r(z)]})
        order.append(pid)

    for t in range(towers):
        x = GRID0 + SPACING * (t % cols)
        y = GRID0 + SPACING * (t // cols)
        h = height if t < full else rest
        for lv in range(h):
            z = CUBE / 2 + CUBE * lv
            top = lv == h - 1
            if top and t in lifted:
                z += 0.01
                expected.add(("gravity", (f"t{t}_{lv}",)))
            if top and t in lowered:
                z -= 0.01
                expected.add(("no_overlap", (f"t{t}_{lv - 1}", f"t{t}_{lv}")))
                expected.add(("gravity", (f"t{t}_{lv}",)))
            add(f"t{t}_{lv}", x, y, z)
        if t in swapped:
            order[-1], order[-2] = order[-2], order[-1]
            # p = the lower cube, q = the upper one placed before it
            expected.add(("support_order", (f"t{t}_{h - 2}", f"t{t}_{h - 1}")))
    (x0, _), _, _ = WORKSPACE
    for i in range(k):
        add(f"ws{i}", x0 - 0.2, GRID0 + SPACING * i, CUBE / 2)
        expected.add(("workspace", (f"ws{i}",)))
    for i in range(k):
        add(f"ko{i}", 0.05 + SPACING * i, -0.20, CUBE / 2)
        expected.add(("keepout", (f"ko{i}",)))
    for i in range(k):
        cx = GRID0 + CLUSTER_PITCH * (i % CLUSTERS_PER_ROW)
        cy = -0.50 - CLUSTER_PITCH * (i // CLUSTERS_PER_ROW)
        for j, (dx, dy) in enumerate(((1, 0), (-1, 0), (0, 1), (0, -1))):
            add(f"g{i}_n{j}", cx + NEIGHBOUR * dx, cy + NEIGHBOUR * dy, CUBE / 2)
        add(f"g{i}_c", cx, cy, CUBE / 2)
        expected.add(("grip_access", (f"g{i}_c",)))
    assert len(parts) == n, (len(parts), n)
    info = {"towers": towers, "height": height, "injections_per_kind": k}
    return {"units": "m", "parts": parts, "order": order}, expected, info


# --- the all-pairs pure-Python peer -------------------------------------------------------

# complexity: the naive all-pairs peer, kept literal on purpose
def allpairs_check(obj: dict) -> set[tuple[str, tuple[str, ...]]]:  # noqa: C901
    """Every rule of cellspec/rules/physical.cell over all N(N-1)/2 pairs, in integer
    units of 0.05 mm (a box corner is 2*centre -/+ size in 0.1 mm); no broad phase."""
    ids = [p["id"] for p in obj["parts"]]
    n = len(ids)
    size = round(CUBE * 10000)
    boxes = []
    for p in obj["parts"]:
        c = [round(v * 10000) for v in p["pos"]]
        boxes.append((2 * c[0] - size, 2 * c[0] + size, 2 * c[1] - size, 2 * c[1] + size,
                      2 * c[2] - size, 2 * c[2] + size))
    eps = round(EPS * 20000)
    opening = round(OPENING * 20000)
    depth = round(DEPTH * 20000)
    surf = round(SURFACE_Z * 20000)
    pos = {pid: k for k, pid in enumerate(obj["order"])}
    rank = [pos[pid] for pid in ids]
    grip = ["parallel"] * n
    out: set[tuple[str, tuple[str, ...]]] = set()
    ws = [(round(a * 20000), round(b * 20000)) for a, b in WORKSPACE]
    kname, kz = KEEPOUT
    ko = [(round(a * 20000), round(b * 20000)) for a, b in kz]
    for i, b in enumerate(boxes):
        if not all(b[2 * a] >= ws[a][0] - eps and b[2 * a + 1] <= ws[a][1] + eps
                   for a in range(3)):
            out.add(("workspace", (ids[i],)))
        if all(min(b[2 * a + 1], ko[a][1]) - max(b[2 * a], ko[a][0]) > eps for a in range(3)):
            out.add(("keepout", (ids[i],)))
    supported = [abs(b[4] - surf) <= eps for b in boxes]
    block_x = [False] * n
    block_y = [False] * n
    block_v = [False] * n

    def flanks(q: tuple, p: tuple, ox: int, oy: int, along_x: bool) -> bool:
        lat = oy if along_x else ox
        if lat <= eps:
            return False
        zo = min(q[5], p[5]) - max(q[4], p[5] - depth)
        if zo <= eps:
            return False
        o_axis, sz = (ox, p[1] - p[0]) if along_x else (oy, p[3] - p[2])
        return -2 * o_axis < opening - sz

    for i in range(n):
        a = boxes[i]
        ax0, ax1, ay0, ay1, az0, az1 = a
        for j in range(i + 1, n):
            b = boxes[j]
            ox = min(ax1, b[1]) - max(ax0, b[0])
            oy = min(ay1, b[3]) - max(ay0, b[2])
            oz = min(az1, b[5]) - max(az0, b[4])
            if ox > eps and oy > eps and oz > eps:
                out.add(("no_overlap", (ids[i], ids[j])))
            fp = ox > eps and oy > eps
            sup_ij = fp and abs(b[4] - az1) <= eps  # i supports j
            sup_ji = fp and abs(az0 - b[5]) <= eps  # j supports i
            if sup_ij:
                supported[j] = True
            if sup_ji:
                supported[i] = True
            touch = ox >= -eps and oy >= -eps and oz >= -eps
            # support_order: (supports(p,q) or (contact(p,q) and p.bottom < q.bottom))
            # implies before(p,q), for (p,q) = (i,j) and (j,i)
            if (sup_ij or (touch and az0 < b[4])) and not rank[i] < rank[j]:
                out.add(("support_order", (ids[i], ids[j])))
            if (sup_ji or (touch and b[4] < az0)) and not rank[j] < rank[i]:
                out.add(("support_order", (ids[j], ids[i])))
            # grip_access: q placed before p flanks p on x / on y (parallel), or q
            # placed before p rests on p (vacuum)
            q, p, pi = (a, b, j) if rank[i] < rank[j] else (b, a, i)
            if grip[pi] == "parallel":
                if not block_x[pi] and flanks(q, p, ox, oy, True):
                    block_x[pi] = True
                if not block_y[pi] and flanks(q, p, ox, oy, False):
                    block_y[pi] = True
            elif (sup_ij if pi == i else sup_ji):
                block_v[pi] = True
    for i in range(n):
        if not supported[i]:
            out.add(("gravity", (ids[i],)))
        if (block_x[i] and block_y[i]) or block_v[i]:
            out.add(("grip_access", (ids[i],)))
    return out


# --- children: the engine and pybullet, each in a fresh process ----------------------------

def _maxrss_mib() -> float:
    """Peak resident set of this process, MiB: VmHWM from /proc on Linux (ru_maxrss
    there also counts the RSS the parent had when it forked us), else ru_maxrss."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024 * 1024) if sys.platform == "darwin" else r / 1024


def child_engine(cell_path: str, layout_path: str, out_path: str) -> None:
    """Time load_layout and check (cold, then warm), peak RSS after the cold check,
    and a stage breakdown that mirrors cellspec.solver.verify.check."""
    t0 = time.perf_counter()
    import clingo  # noqa: F401 - imports stay outside the timings, as `import pybullet` does

    import cellspec
    import cellspec.solver.verify  # noqa: F401
    from cellspec.layout import load_layout

    cell = cellspec.load_cell(cell_path)
    setup_s = time.perf_counter() - t0
    base_mib = _maxrss_mib()
    t0 = time.perf_counter()
    layout = load_layout(layout_path)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    verdict = cellspec.check(cell, layout)
    check_s = time.perf_counter() - t0
    peak_mib = _maxrss_mib()
    t0 = time.perf_counter()
    cellspec.check(cell, layout)
    check_warm_s = time.perf_counter() - t0
    res = {
        "setup_s": setup_s, "load_s": load_s, "check_s": check_s, "check_warm_s": check_warm_s,
        "peak_mib": peak_mib, "base_mib": base_mib, "verdict": verdict.verdict,
        "reason": verdict.reason, "notes": list(verdict.notes),
        "violations": [[v.rule, list(v.parts)] for v in verdict.violations],
    }
    try:
        res["breakdown"] = _breakdown(cell, layout)
    except Exception as exc:  # the engine's internals are moving; say so
        res["breakdown"] = {"error": f"{type(exc).__name__}: {exc}"}
    Path(out_path).write_text(json.dumps(res), encoding="utf-8")


class _Timers:
    """Wrap named functions with accumulating timers (robust to signature changes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.last: dict[str, object] = {}
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, name: str, key: str) -> None:
        orig = getattr(owner, name, None)
        if orig is None:
            return

        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                out = orig(*a, **kw)
                self.last[key] = out
                return out
            finally:
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - t0
                self.calls[key] = self.calls.get(key, 0) + 1

        setattr(owner, name, timed)
        self._undo.append((owner, name, orig))

    def restore(self) -> None:
        for owner, name, orig in reversed(self._undo):
            setattr(owner, name, orig)
        self._undo.clear()


def _breakdown(cell, layout) -> dict:
    """Stage times of one more (warm) check, by timing the engine's own functions:
    instance (quantise), broad phase, facts text, clingo parse (Control.add), ground,
    solve (+ reading the model back), messages (verdict building, the remainder)."""
    import clingo

    import cellspec
    from cellspec.core import geometry as g
    from cellspec.solver import checkers as sc
    from cellspec.solver import verify as sv
    from cellspec.solver.asp import backend as be

    tm = _Timers()
    tm.wrap(sv, "build_instance", "instance")
    tm.wrap(sc, "compiled", "compile")
    tm.wrap(be, "run", "run")
    tm.wrap(be, "facts", "facts")
    tm.wrap(g, "broad_phase", "broad_phase")
    tm.wrap(clingo.Control, "add", "clingo_add")
    tm.wrap(clingo.Control, "ground", "ground")
    try:
        t0 = time.perf_counter()
        cellspec.check(cell, layout)
        total = time.perf_counter() - t0
    finally:
        tm.restore()
    s = tm.seconds.get
    run, facts, broad = s("run", 0.0), s("facts", 0.0), s("broad_phase", 0.0)
    add, ground = s("clingo_add", 0.0), s("ground", 0.0)
    cand = tm.last.get("broad_phase")
    return {
        "total_s": total,
        "instance_s": s("instance", 0.0),
        "compile_s": s("compile", 0.0),
        "broad_phase_s": broad,
        "facts_text_s": max(facts - broad, 0.0),
        "clingo_add_s": add,
        "ground_s": ground,
        "solve_s": max(run - facts - add - ground, 0.0),
        "messages_s": max(total - run - s("instance", 0.0) - s("compile", 0.0), 0.0),
        "broad_phase_calls": tm.calls.get("broad_phase", 0),
        "candidates": int(len(cand[0])) if isinstance(cand, tuple) else None,
    }


def child_pybullet(mode: str, layout_path: str, out_path: str) -> None:
    """pybullet DIRECT: N boxes (one collision shape; one ``createMultiBody`` with
    ``batchPositions``, or one call per box), then performCollisionDetection +
    getContactPoints. Overlap detection only."""
    obj = json.loads(Path(layout_path).read_text(encoding="utf-8"))
    ids = [p["id"] for p in obj["parts"]]
    positions = [p["pos"] for p in obj["parts"]]
    import pybullet as pb

    base_mib = _maxrss_mib()
    t0 = time.perf_counter()
    pb.connect(pb.DIRECT)
    shape = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=[CUBE / 2] * 3)
    # Mass 1, never stepped: Bullet skips static-static pairs, so mass-0 boxes would
    # report no contacts at all.
    batch = mode == "batch"
    try:
        if not batch:
            raise TypeError("per-body mode")
        bodies = list(pb.createMultiBody(baseMass=1, baseCollisionShapeIndex=shape,
                                         batchPositions=positions))
    except Exception:  # per-body mode, or an older pybullet without batchPositions
        batch = False
        bodies = [pb.createMultiBody(baseMass=1, baseCollisionShapeIndex=shape,
                                     basePosition=q) for q in positions]
    t1 = time.perf_counter()
    pb.performCollisionDetection()
    contacts = pb.getContactPoints()
    t2 = time.perf_counter()
    index = {b: k for k, b in enumerate(bodies)}
    pairs = set()
    for c in contacts:
        if c[8] < -EPS:  # penetration deeper than eps
            a, b = sorted((index[c[1]], index[c[2]]))
            pairs.add((ids[a], ids[b]))
    pb.disconnect()
    Path(out_path).write_text(json.dumps({
        "load_s": t1 - t0, "detect_s": t2 - t1, "total_s": t2 - t0, "batch": batch,
        "contacts": len(contacts), "overlaps": sorted(pairs), "base_mib": base_mib,
        "peak_mib": _maxrss_mib()}), encoding="utf-8")


def _run_child(args: list[str], out_path: Path, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), *args, str(out_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not out_path.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    return json.loads(out_path.read_text(encoding="utf-8"))


# --- the parent -------------------------------------------------------------------------

def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def _fmt_diff(want: set, got: set, limit: int = 5) -> str:
    miss = sorted(want - got)
    extra = sorted(got - want)
    return (f"missing {len(miss)} {miss[:limit]}; unexpected {len(extra)} {extra[:limit]}")


def run_size(n: int, args: argparse.Namespace, tmp: Path, cell_path: Path,
             per_pair: list[float]) -> tuple[dict, list[str]]:
    fails: list[str] = []
    obj, expected, info = build(n, args.height, args.seed)
    layout_path = tmp / f"layout_{n}.json"
    layout_path.write_text(json.dumps(obj, separators=(",", ":")), encoding="utf-8")
    row: dict = {"n": n, **info, "layout_bytes": layout_path.stat().st_size,
                 "violations_expected": len(expected)}
    by_rule: dict[str, int] = {}
    for rule, _ in expected:
        by_rule[rule] = by_rule.get(rule, 0) + 1
    row["expected_by_rule"] = dict(sorted(by_rule.items()))

    _log(f"[verify_scale] N={n}: engine ...")
    eng = _run_child(["--child-engine", str(cell_path), str(layout_path)], tmp / f"eng_{n}.json",
                     args.timeout)
    if "error" in eng:
        fails.append(f"FAIL N={n}: engine child failed: {eng['error']}")
        row.update({"exact": False, "error": eng["error"]})
    else:
        found = {(r, tuple(p)) for r, p in eng["violations"]}
        exact = found == expected and len(eng["violations"]) == len(found)
        row.update({
            "verdict": eng["verdict"], "violations_found": len(eng["violations"]),
            "exact": exact, "load_s": eng["load_s"], "check_s": eng["check_s"],
            "check_warm_s": eng["check_warm_s"], "peak_mib": eng["peak_mib"],
            "base_mib": eng["base_mib"], "setup_s": eng["setup_s"],
            "breakdown": eng["breakdown"],
        })
        if eng.get("reason"):
            row["reason"] = eng["reason"]
        if not exact:
            fails.append(f"FAIL N={n}: engine violations differ from the expected set: "
                         f"{_fmt_diff(expected, found)} (verdict {eng['verdict']}"
                         f"{', ' + eng['reason'] if eng.get('reason') else ''})")

    if args.no_pybullet:
        row["pybullet_s"] = None
    else:
        _log(f"[verify_scale] N={n}: pybullet ...")
        pyb = _run_child(["--child-pybullet", args.pybullet_mode, str(layout_path)],
                         tmp / f"pyb_{n}.json",
                         args.timeout)
        if "error" in pyb:
            row.update({"pybullet_s": None, "pybullet_error": pyb["error"]})
        else:
            want = {p for r, p in expected if r == "no_overlap"}
            got = {tuple(p) for p in pyb["overlaps"]}
            row.update({"pybullet_s": pyb["total_s"], "pybullet_load_s": pyb["load_s"],
                        "pybullet_detect_s": pyb["detect_s"], "pybullet_batch": pyb["batch"],
                        "pybullet_contacts": pyb["contacts"],
                        "pybullet_overlaps_found": len(got),
                        "pybullet_overlaps_ok": got == want,
                        "pybullet_peak_mib": pyb["peak_mib"]})

    predicted = per_pair[-1] * _pairs(n) if per_pair else None
    run_it = (predicted is None and n <= 2000) or (predicted is not None
                                                   and predicted <= args.allpairs_budget)
    if args.no_allpairs:
        row.update({"allpairs_s": None, "allpairs_extrapolated": False})
    elif run_it:
        _log(f"[verify_scale] N={n}: all-pairs checker ...")
        t0 = time.perf_counter()
        ap = allpairs_check(obj)
        dt = time.perf_counter() - t0
        per_pair.append(dt / max(_pairs(n), 1))
        ok = ap == expected
        row.update({"allpairs_s": dt, "allpairs_extrapolated": False, "allpairs_exact": ok})
        if not ok:
            fails.append(f"FAIL N={n}: all-pairs checker differs from the expected set: "
                         f"{_fmt_diff(expected, ap)}")
    else:
        row.update({"allpairs_s": predicted, "allpairs_extrapolated": predicted is not None,
                    "allpairs_exact": None})

    cs = row.get("check_s")
    for peer in ("pybullet", "allpairs"):
        ps = row.get(f"{peer}_s")
        row[f"speedup_vs_{peer}"] = (ps / cs) if (ps and cs) else None
    ls = row.get("load_s")
    pb_s = row.get("pybullet_s")
    row["speedup_vs_pybullet_incl_load"] = (pb_s / (cs + ls)) if (pb_s and cs and ls) else None
    return row, fails


def _targets(results: list[dict]) -> dict:
    by_n = {r["n"]: r for r in results}
    out: dict = {}
    r10, r100 = by_n.get(10_000), by_n.get(100_000)
    if r10 and r10.get("check_s") is not None:
        out["n10000_check_le_0.5s"] = r10["check_s"] <= TARGETS["n10000_check_s"]
        sp = r10.get("speedup_vs_pybullet")
        out["n10000_ge_3x_pybullet"] = None if sp is None else (
            sp >= TARGETS["n10000_speedup_vs_pybullet"])
        out["n10000_all_rules_exact"] = bool(r10.get("exact"))
    if r100 and r100.get("check_s") is not None:
        out["n100000_check_le_5s"] = r100["check_s"] <= TARGETS["n100000_check_s"]
        out["n100000_peak_le_1GiB"] = r100["peak_mib"] <= TARGETS["n100000_peak_mib"]
    return out


def _num(v, fmt: str, mark: str = "") -> str:
    return "-" if v is None else format(v, fmt) + mark


def table(results: list[dict], targets: dict) -> str:
    head = (f"{'N':>7} {'load s':>7} {'check s':>8} {'warm s':>7} {'peak MiB':>8} "
            f"{'viol exp/found':>14} {'exact':>5} {'pybullet s*':>11} {'x pyb':>6} "
            f"{'all-pairs s':>12} {'x pairs':>9}")
    lines = [head, "-" * len(head)]
    for r in results:
        ext = "~" if r.get("allpairs_extrapolated") else ""
        vf = f"{r['violations_expected']}/{r.get('violations_found', '-')}"
        lines.append(
            f"{r['n']:>7} {_num(r.get('load_s'), '.3f'):>7} {_num(r.get('check_s'), '.3f'):>8} "
            f"{_num(r.get('check_warm_s'), '.3f'):>7} {_num(r.get('peak_mib'), '.0f'):>8} "
            f"{vf:>14} {str(bool(r.get('exact'))).lower():>5} "
            f"{_num(r.get('pybullet_s'), '.3f'):>11} "
            f"{_num(r.get('speedup_vs_pybullet'), '.1f'):>6} "
            f"{_num(r.get('allpairs_s'), '.2f', ext):>12} "
            f"{_num(r.get('speedup_vs_allpairs'), '.0f', ext):>9}")
    lines.append("* pybullet: load + detect, overlap only (no workspace, gravity, order, grip, "
                 "keep-out). ~ = extrapolated from the measured per-pair cost (O(N^2)).")
    lines.append("x = peer seconds / our cold check seconds. check s = first check in a fresh "
                 "process; warm s = the same check again.")
    bd_keys = ("instance_s", "broad_phase_s", "facts_text_s", "clingo_add_s", "ground_s",
               "solve_s", "messages_s")
    lines.append("breakdown of the warm check (s): " + " ".join(k[:-2] for k in bd_keys))
    for r in results:
        bd = r.get("breakdown") or {}
        if "error" in bd:
            lines.append(f"{r['n']:>7}  breakdown unavailable: {bd['error']}")
        elif bd:
            lines.append(f"{r['n']:>7}  " + " ".join(f"{k[:-2]}={bd[k]:.3f}" for k in bd_keys)
                         + f"  (candidates {bd['candidates']})")
    for k, v in targets.items():
        lines.append(f"target {k}: {'ok' if v else ('n/a' if v is None else 'MISS')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                    help="comma-separated N values (default 100,1000,10000,100000)")
    ap.add_argument("--quick", action="store_true", help="N = 100 and 1000 only")
    ap.add_argument("--height", type=int, default=5, help="cubes per tower (default 5)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--allpairs-budget", type=float, default=60.0,
                    help="run the all-pairs checker while predicted <= this many seconds")
    ap.add_argument("--timeout", type=float, default=1800.0, help="per child process, s")
    ap.add_argument("--no-pybullet", action="store_true")
    import benchplot

    benchplot.add_plot_option(ap)
    ap.add_argument("--no-allpairs", action="store_true")
    ap.add_argument("--stability", choices=("on", "off"), default="on",
                    help="check stability (the default of `import physical`) or write "
                    "`stability off` in the bench cell; run both for the side-by-side figures")
    ap.add_argument("--print-cell", action="store_true",
                    help="print the bench cell (written to a temp dir when running) and exit")
    ap.add_argument("--child-engine", nargs=3, metavar=("CELL", "LAYOUT", "OUT"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--pybullet-mode", choices=("batch", "per-body"), default="batch",
                    help="one createMultiBody with batchPositions (default, the faster in "
                    "total) or one call per box")
    ap.add_argument("--child-pybullet", nargs=3, metavar=("MODE", "LAYOUT", "OUT"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--yawed", action="store_true",
                    help="the shapes series (bench/shapes_series.py): half the parts yawed, a "
                    "tenth cylinders, against the axis-aligned layout in the same process")
    ap.add_argument("--repeat", type=int, default=1,
                    help="--yawed: also the best of this many more warm checks of each "
                    "layout (ratio_best; steadier on a loaded machine)")
    ap.add_argument("--child-yawed", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--child-pybullet-shapes", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_yawed or args.child_pybullet_shapes or args.yawed:
        return _shapes_main(args)
    if args.child_engine:
        child_engine(*args.child_engine)
        return 0
    if args.child_pybullet:
        child_pybullet(*args.child_pybullet)
        return 0
    if args.print_cell:
        print(cell_text(args.stability), end="")
        return 0
    sizes = [100, 1000] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.height < 2:
        ap.error("--height must be at least 2 (support_order swaps the top two cubes)")
    results: list[dict] = []
    fails: list[str] = []
    per_pair: list[float] = []
    with tempfile.TemporaryDirectory(prefix="cellspec_bench_") as d:
        tmp = Path(d)
        cell_path = tmp / "bench.cell"
        cell_path.write_text(cell_text(args.stability), encoding="utf-8")
        with benchplot.reporting():  # per-size progress on a terminal's stderr
            for k, n in enumerate(sizes):
                benchplot.tick("sizes", k, len(sizes), f"N = {n}")
                row, f = run_size(n, args, tmp, cell_path, per_pair)
                results.append(row)
                fails.extend(f)
                for line in f:
                    _log(line)
    targets = _targets(results)
    versions = {"python": platform.python_version(), "cpus": os.cpu_count(),
                "machine": platform.machine()}
    for mod in ("clingo", "pybullet"):
        try:
            from importlib.metadata import version

            versions[mod] = version(mod)
        except Exception:
            versions[mod] = None
    out = {"bench": "verify_scale", "ok": not fails, "seed": args.seed,
           "stability": args.stability,
           "height": args.height, "env": versions, "targets": targets, "results": results}
    print(json.dumps(out, separators=(",", ":")), flush=True)
    if args.plot:
        benchplot.plot_result(out, args.plot)
    _log(table(results, targets))
    for line in fails:
        _log(line)
    return 1 if fails else 0


def _shapes_main(args: argparse.Namespace) -> int:
    """``--yawed`` and its children (bench/shapes_series.py)."""
    import shapes_series

    if args.child_yawed:
        shapes_series.child(*args.child_yawed)
        return 0
    if args.child_pybullet_shapes:
        shapes_series.child_pybullet(*args.child_pybullet_shapes)
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.sizes == ",".join(map(str, DEFAULT_SIZES)):
        sizes = [10_000, 100_000]
    with tempfile.TemporaryDirectory(prefix="cellspec_bench_") as d:
        rows = shapes_series.run(sizes, args.height, args.seed, Path(d), args.timeout,
                                 not args.no_pybullet, args.stability, args.repeat)
    print(json.dumps({"bench": "verify_scale_yawed", "seed": args.seed,
                      "stability": args.stability, "results": rows},
                     separators=(",", ":")), flush=True)
    _log(shapes_series.table(rows))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
