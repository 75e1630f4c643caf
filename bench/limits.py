"""Limits benchmark (issue 16): does every verb end within its --time-limit, inside its
memory budget, with an answer that is ``unknown`` or correct?

Each row of the issue's table is rebuilt from a seeded generator (not the exact files):
a dense overlapping pile of cubes, a pile of 50 000 cubes, broken layouts for repair, a
packing design for generate, a 10 000-part layout for ``check --robust``, a lint part set,
a 2 000-rule file and a 1 MB rule file. Every row runs with limits 0.5, 1 and 2 s, each in
a fresh subprocess (a wrapper that runs ``python -m cellspec`` and reads
``RUSAGE_CHILDREN``), so the wall time covers the interpreter start and the peak memory
covers the verb and its worker.

Peer, in the same run: the same command against another checkout (``--peer``, default
``/work/main`` when it exists: the code before this work), stopped at ``--peer-cap``
seconds (reported as ``killed``). Targets (reported, exit 1 when missed by this tree):
wall <= max(2 x limit, limit + 1 s) plus ``--startup`` (the measured start of an
interpreter doing nothing, subtracted fairly from neither side but shown), memory <= the
budget, never ``pass`` where the exact answer is fail.

Output: ONE JSON line on stdout; the table and progress on stderr.

    python bench/limits.py [--small] [--limits 0.5,1,2] [--rows check_pile,...]
                           [--peer DIR | --no-peer] [--peer-cap S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CELL = REPO / "rules" / "cells" / "dual_arm_station.cell"
BUDGET = 2 * 1024**3  # the default --max-memory
HEAD = """cell big {
    units m
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
}
"""


def pile(path: Path, n: int, spread: float, seed: int = 0) -> Path:
    """``n`` cubes dropped at random into a box of half-width ``spread`` (dense overlaps)."""
    rng = np.random.default_rng(seed)
    pos = np.column_stack([0.45 + rng.uniform(-spread, spread, n),
                           0.275 + rng.uniform(-spread, spread, n),
                           rng.uniform(0.025, 0.275, n)])
    path.write_text(json.dumps({"units": "m", "parts": [
        {"id": f"c{k}", "type": "cube", "pos": [round(float(v), 4) for v in p]}
        for k, p in enumerate(pos)]}))
    return path


def broken_grid(path: Path, n: int, seed: int = 0) -> Path:
    """``n`` cubes on a table grid, every fifth nudged into its neighbour (repair input)."""
    rng = np.random.default_rng(seed)
    side = int(np.ceil(np.sqrt(n)))
    parts = []
    for k in range(n):
        x = 0.22 + (k % side) * (0.46 / max(side, 1))
        y = 0.07 + (k // side) * (0.41 / max(side, 1))
        if k % 5 == 0:
            x += float(rng.uniform(0.005, 0.02))
        parts.append({"id": f"c{k}", "type": "cube", "pos": [round(x, 4), round(y, 4), 0.025]})
    path.write_text(json.dumps({"units": "m", "parts": parts}))
    return path


def rule_file(path: Path, n: int) -> Path:
    """``n`` one-line rules (18 000 make the 1 MB file of the issue)."""
    lines = [f'rule r{k} "{{p}} too far right {k}" : forall p: p.x < {0.5 + (k % 400) / 1000:.3f}'
             for k in range(n)]
    path.write_text(HEAD + "\n".join(lines) + "\n")
    return path


CHAIN = HEAD + ('rule chain "{p} {q} {r}" : forall p, q, r: (contact(p, q) and contact(q, r))'
                ' implies p.x < 0.45\n')


def packing(path: Path, n: int) -> Path:
    path.write_text(f'import "{CELL}"\n\ndesign pack {{\n    packing(n={n}, region x [0.25, '
                    '0.65] y [0.10, 0.45])\n}\n')
    return path


def rows(tmp: Path, small: bool) -> dict[str, dict]:
    """Each row: the argv after ``cellspec`` (with ``{L}`` for the limit), the exact answer
    when known (``fail``: a pass is wrong), and the limit flag."""
    n_pile, n_big, n_rep, n_rob, n_lint = (300, 3000, 50, 1000, 40) if small else \
        (2000, 50_000, 200, 10_000, 200)
    p = pile(tmp / "pile.json", n_pile, 0.1)
    big = pile(tmp / "big.json", n_big, 0.2, seed=1)
    rep = broken_grid(tmp / "broken.json", n_rep)
    n_rep2 = 100 if small else 2000
    rep2 = broken_grid(tmp / "broken2.json", n_rep2, seed=1)
    wall = tmp / "wall.cell"
    wall.write_text(f'import "{CELL}"\n\ndesign w {{\n    wall(width={10 if small else 1000}, '
                    'height=20) at (0.45, 0.275)\n}\n')
    rob = pile(tmp / "robust.json", n_rob, 0.2, seed=2)
    rules2k = rule_file(tmp / "rules2k.cell", 2000)
    rules1m = rule_file(tmp / "rules1m.cell", 18_000)
    pack = packing(tmp / "pack.cell", 12 if small else 40)
    chain = tmp / "chain.cell"
    chain.write_text(CHAIN)
    lay = tmp / "touch.json"
    lay.write_text(json.dumps({"parts": [{"id": "a", "type": "cube", "pos": [0.5, 0.5, 0.025]}]}))
    c = str(CELL)
    return {
        "check_pile": {"argv": ["check", c, str(p), "--time-limit", "{L}"], "exact": "fail",
                       "what": f"check, {n_pile} cubes in a dense pile"},
        "check_big": {"argv": ["check", c, str(big), "--time-limit", "{L}"], "exact": "fail",
                      "what": f"check, {n_big} cubes (dense)"},
        "repair": {"argv": ["repair", c, str(rep), "--time-limit", "{L}"], "exact": None,
                   "what": f"repair, {n_rep} parts (every fifth broken)"},
        "repair_big": {"argv": ["repair", c, str(rep2), "--time-limit", "{L}"], "exact": None,
                       "what": f"repair, {n_rep2} parts (every fifth broken)"},
        "plan_pile": {"argv": ["plan", c, str(p), "--time-limit", "{L}"], "exact": None,
                      "what": f"plan, the {n_pile}-cube pile"},
        "generate_pack": {"argv": ["generate", c, str(pack), "--time-limit", "{L}"],
                          "exact": None, "what": "generate, a packing design"},
        "generate_wall": {"argv": ["generate", c, str(wall), "--time-limit", "{L}"],
                          "exact": None, "what": "generate, a wall 1 000 wide and 20 high"},
        "explain_pile": {"argv": ["explain", c, str(p), "--time-limit", "{L}"], "exact": "fail",
                         "what": f"explain, the {n_pile}-cube pile"},
        "robust_big": {"argv": ["check", c, str(rob), "--robust", "0.002", "--time-limit",
                                "{L}"], "exact": "fail",
                       "what": f"check --robust 0.002, {n_rob} parts"},
        "lint_parts": {"argv": ["lint", c, "--parts", f"cube={n_lint}", "--time-limit", "{L}"],
                       "exact": None, "what": f"lint --parts cube={n_lint}"},
        "lint_2k_rules": {"argv": ["lint", str(rules2k), "--time-limit", "{L}"], "exact": None,
                          "what": "lint, a 2 000-rule file"},
        "check_1mb_rules": {"argv": ["check", str(rules1m), str(lay), "--time-limit", "{L}"],
                            "exact": None, "what": "check, a 1 MB rule file"},
        "fmt_1mb_rules": {"argv": ["fmt", "--check", str(rules1m)], "exact": None,
                          "what": "fmt --check, a 1 MB rule file (no limit flag)"},
        "sim_wall": {"argv": ["sim", c, str(REPO / "rules" / "layouts" / "wall_9.json"),
                              "--time-limit", "{L}"], "exact": None,
                     "what": "sim, a 9-cube wall in the twin"},
        "design_pack": {"argv": ["design", f"pack {12 if small else 30} cubes in the region x "
                                 "0.25 to 0.65 y 0.1 to 0.45", "--cell", c, "--adapter",
                                 "offline", "--time-limit", "{L}"], "exact": None,
                        "what": "design (offline), a packing"},
        "check_chain": {"argv": ["check", str(chain), str(p), "--time-limit", "{L}"],
                        "exact": "fail",
                        "what": f"check, the {n_pile}-cube pile, a rule of 3 parts"},
    }


def measure(tree: Path, argv: list[str], cap: float) -> dict:
    """Run ``python -m cellspec ARGV`` from ``tree`` in a wrapper; wall, exit, peak memory."""
    code = ("import resource, subprocess, sys, time, json\n"
            "t = time.monotonic()\n"
            "try:\n"
            "    r = subprocess.run([sys.executable, '-m', 'cellspec', *sys.argv[2:]],"
            " capture_output=True, text=True, timeout=float(sys.argv[1]))\n"
            "    rc, out, err = r.returncode, r.stdout, r.stderr\n"
            "except subprocess.TimeoutExpired as e:\n"
            "    rc, out, err = None, '', ''\n"
            "wall = time.monotonic() - t\n"
            "ans = code = None\n"
            "try:\n"
            "    j = json.loads(out)\n"
            "    j = j[0] if isinstance(j, list) else j  # lint: a list before cellspec.lint/1\n"
            "    j = j['reports'][0] if 'reports' in j else j\n"
            "    ans = j.get('verdict') or j.get('status') or j.get('outcome')\n"
            "    code = j.get('reason_code')\n"
            "except Exception:\n"
            "    pass\n"
            "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
            "print(json.dumps({'rc': rc, 'wall': wall, 'peak': peak, 'ans': ans,"
            " 'code': code, 'out': out[-4000:], 'err': err[-2000:]}))\n")
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("CELLSPEC_DEBUG", None)
    r = subprocess.run([sys.executable, "-c", code, str(cap), *argv], capture_output=True,
                       text=True, env=env, cwd=str(tree), timeout=cap + 60, check=False)
    return json.loads(r.stdout)


def peer_argv(argv: list[str]) -> list[str]:
    """The same command for the old code: check/explain/lint called it ``--timeout``, and
    the robust proof had its own ``--robust-timeout``."""
    out = list(argv)
    if out[0] in ("check", "explain", "lint") and "--time-limit" in out:
        k = out.index("--time-limit")
        out[k] = "--timeout"
        if "--robust" in out:
            out += ["--robust-timeout", out[k + 1]]
    return out


def answer(res: dict) -> str:
    """The verb's answer from its output: pass, fail, unknown, refused, killed."""
    if res["rc"] is None:
        return "killed"
    if res.get("ans"):
        return str(res["ans"])
    text = res["out"].lstrip()
    try:
        j = json.loads(text)
        if isinstance(j, list):  # lint before cellspec.lint/1
            j = j[0]
        if "reports" in j:  # lint: the first file's report
            j = j["reports"][0]
        v = j.get("verdict") or j.get("status") or j.get("outcome")
        if v:
            return str(v)
    except (json.JSONDecodeError, AttributeError, IndexError):
        pass
    first = (text.splitlines() or [""])[-1].split(":")[0].split(" ")[0]
    if res["rc"] == 2 and not text:
        return "refused" if "error" in res["err"] else "unknown"
    return first or f"exit {res['rc']}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="small rows (CI)")
    ap.add_argument("--limits", default="0.5,1,2")
    ap.add_argument("--rows", default=None, help="comma-separated row names")
    ap.add_argument("--peer", default="/work/main", help="another checkout to compare")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--peer-cap", type=float, default=20.0,
                    help="stop a peer run after S seconds (reported as killed)")
    a = ap.parse_args()
    limits = [float(x) for x in a.limits.split(",")]
    peer = None if a.no_peer or not Path(a.peer, "cellspec").is_dir() else Path(a.peer)
    t = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    startup = time.monotonic() - t
    out_rows = []
    ok = True
    with tempfile.TemporaryDirectory(prefix="cellspec-limits-") as d:
        table = rows(Path(d), a.small)
        names = a.rows.split(",") if a.rows else list(table)
        for name in names:
            row = table[name]
            for lim in limits:
                argv = [x.replace("{L}", f"{lim:g}") for x in row["argv"]]
                if argv[0] != "fmt":
                    argv += ["--format", "json"]
                bound = max(2 * lim, lim + 1)
                me = measure(REPO, argv, cap=max(30.0, 10 * lim))
                got = answer(me)
                wrong = row["exact"] == "fail" and got == "pass"
                hit = me["rc"] is not None and me["wall"] <= bound + startup
                mem_ok = me["peak"] <= BUDGET
                ok &= hit and mem_ok and not wrong
                rec = {"row": name, "what": row["what"], "limit": lim, "wall": round(me["wall"], 3),
                       "ratio": round(me["wall"] / lim, 2), "peak_mib": round(me["peak"] / 2**20),
                       "answer": got, "reason_code": me.get("code"), "within": hit,
                       "memory_ok": mem_ok, "wrong": wrong}
                if peer is not None:
                    pr = measure(peer, peer_argv(argv), cap=a.peer_cap)
                    rec["peer"] = {"wall": round(pr["wall"], 3), "answer": answer(pr),
                                   "peak_mib": round(pr["peak"] / 2**20)}
                out_rows.append(rec)
                pw = (f" | peer {rec['peer']['wall']:7.2f} s {rec['peer']['answer']:8s} "
                      f"{rec['peer']['peak_mib']:5d} MiB" if peer is not None else "")
                verdict = "ok" if hit and mem_ok and not wrong else "MISS"
                print(f"{name:16s} {lim:4g} s | {me['wall']:7.2f} s x{rec['ratio']:<5} "
                      f"{got:8s} {str(me.get('code') or ''):15s} {rec['peak_mib']:5d} MiB "
                      f"{verdict}{pw}", file=sys.stderr,
                      flush=True)
    print(json.dumps({"bench": "limits", "small": a.small, "startup_s": round(startup, 3),
                      "peer": str(peer) if peer else None, "all_within": ok,
                      "rows": out_rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
