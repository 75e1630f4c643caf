"""Intent fidelity of ``cellspec design`` on held-out commands (issue 27).

Each case of ``bench/intent/commands.toml`` (frozen before tuning) is run through the
CLI (``python -m cellspec design CMD --cell CELL --format json``, offline translator) and
judged with this file's own geometry, independent of the intent rules under test:
parts are grouped into structures by contact (boxes touching or overlapping within
1 mm), each structure's part types, count, levels (distinct part heights), footprint
centre and footprint box are compared with the case (a case asking for one structure
with no ``levels`` is a packing: the whole layout is that structure, its columns apart;
``max_levels`` is then checked per column group). Outcomes:

* ``asked``: built exactly as asked, or refused where refusal is the only honest answer;
* ``refused``: a buildable command refused (honest, not helpful);
* ``wrong``: exit 0 with a layout that is not what was asked (or built where it must
  refuse), or a crash (exit 3).

``--before DIR`` runs the same commands against another checkout (e.g. /work/main) for
the before/after table. Prints one JSON line and a short table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CELLS = {"station": ROOT / "rules/cells/dual_arm_station.cell",
         "mixed": ROOT / "rules/cells/mixed_parts.cell"}
# part sizes (m) of the two cells, written out here so the judge needs no cellspec import
SIZES = {"station": {"cube": (0.05, 0.05, 0.05)},
         "mixed": {"cube": (0.05, 0.05, 0.05), "block": (0.06, 0.04, 0.04),
                   "beam": (0.15, 0.04, 0.03), "can": (0.05, 0.05, 0.06),
                   "puck": (0.06, 0.06, 0.02)}}
TOUCH = 0.001
TOL = 0.005


def groups(parts: list[dict[str, Any]], sizes: dict[str, tuple[float, ...]]
           ) -> list[list[dict[str, Any]]]:
    """Parts joined by contact (union-find over box pairs within TOUCH on every axis)."""
    n = len(parts)
    root = list(range(n))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    for i, j in itertools.combinations(range(n), 2):
        a, b = parts[i], parts[j]
        sa = a.get("size") or sizes[a["type"]]
        sb = b.get("size") or sizes[b["type"]]
        if all(abs(a["pos"][k] - b["pos"][k]) <= (sa[k] + sb[k]) / 2 + TOUCH for k in range(3)):
            root[find(i)] = find(j)
    out: dict[int, list[dict[str, Any]]] = {}
    for i in range(n):
        out.setdefault(find(i), []).append(parts[i])
    return list(out.values())


def describe(g: list[dict[str, Any]], sizes: dict[str, tuple[float, ...]]) -> dict[str, Any]:
    """Types, count, levels, footprint box and centre of one group."""
    lo = [min(p["pos"][k] - (p.get("size") or sizes[p["type"]])[k] / 2 for p in g)
          for k in range(2)]
    hi = [max(p["pos"][k] + (p.get("size") or sizes[p["type"]])[k] / 2 for p in g)
          for k in range(2)]
    types = sorted({p["type"] for p in g})
    return {"types": types, "parts": len(g), "levels": len({round(p["pos"][2], 3) for p in g}),
            "box": [lo[0], hi[0], lo[1], hi[1]],
            "centre": [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2]}


def fits(want: dict[str, Any], got: dict[str, Any]) -> str | None:
    """None when the group is the structure asked for, else what differs."""
    if got["types"] != [want["type"]]:
        return f"types {got['types']} != {want['type']}"
    if got["parts"] != want["parts"]:
        return f"{got['parts']} parts != {want['parts']}"
    if "levels" in want and got["levels"] != want["levels"]:
        return f"{got['levels']} levels != {want['levels']}"
    if "at" in want:
        tol = want.get("tol", TOL)
        dx = max(abs(got["centre"][k] - want["at"][k]) for k in range(2))
        if dx > tol + 1e-9:
            return f"centre {[round(v, 4) for v in got['centre']]} is {dx:.4f} m from {want['at']}"
    if "inside" in want:
        x0, x1, y0, y1 = want["inside"]
        b = got["box"]
        if b[0] < x0 - 1e-6 or b[1] > x1 + 1e-6 or b[2] < y0 - 1e-6 or b[3] > y1 + 1e-6:
            return f"footprint {[round(v, 4) for v in b]} not inside {want['inside']}"
    return None


def judge(case: dict[str, Any], rc: int, out: dict[str, Any] | None) -> tuple[str, str]:
    """(asked | refused | wrong, why)."""
    built = rc == 0 and out is not None and out.get("layout") is not None
    if rc not in (0, 1, 2):
        return "wrong", f"exit {rc}"
    if case["expect"] == "refuse":
        return ("wrong", "built where it must refuse") if built else ("asked", "refused")
    if not built:
        why = (out or {}).get("reason") or f"exit {rc}"
        return "refused", str(why)[:160]
    sizes = SIZES[case["cell"]]
    assert out is not None
    want = case["structures"]
    parts = out["layout"]["parts"]
    # a case asking for one structure with no `levels` is a packing: its columns need not
    # touch, so the whole layout is that one structure
    packing = len(want) == 1 and "levels" not in want[0]
    gs = [describe(g, sizes) for g in ([parts] if packing else groups(parts, sizes))]
    if len(gs) != len(want):
        return "wrong", f"{len(gs)} structures, asked {len(want)}: " + \
            ", ".join(f"{g['parts']} {'/'.join(g['types'])} at "
                      f"({g['centre'][0]:.3f}, {g['centre'][1]:.3f})" for g in gs)
    best = None
    for perm in itertools.permutations(gs):
        bad = [fits(w, g) for w, g in zip(want, perm, strict=True)]
        if all(b is None for b in bad):
            best = perm
            break
        best = best or perm
    assert best is not None
    bad = [b for b in (fits(w, g) for w, g in zip(want, best, strict=True)) if b]
    if bad:
        return "wrong", "; ".join(bad)
    if "max_levels" in case and any(g["levels"] > case["max_levels"]
                                    for g in (gs if not packing else
                                              [describe(x, sizes) for x in groups(parts, sizes)])):
        return "wrong", f"more than {case['max_levels']} levels"
    if "gap" in case:
        a, b = best[0]["box"], best[1]["box"]
        gx = max(a[0] - b[1], b[0] - a[1])
        gy = max(a[2] - b[3], b[2] - a[3])
        gap = max(gx, gy)
        if abs(gap - case["gap"]) > TOL + 1e-9:
            return "wrong", f"gap {gap:.4f} m, asked {case['gap']}"
    return "asked", "as asked"


def run_case(case: dict[str, Any], cwd: Path, model: list[str] | None = None
             ) -> tuple[int, dict[str, Any] | None, float]:
    """One command through the CLI of the checkout at ``cwd`` (``model``: the openai
    adapter's options)."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "cellspec", "design", case["command"],
                        "--cell", str(CELLS[case["cell"]]), "--format", "json",
                        *(model or [])], cwd=cwd, capture_output=True, text=True, timeout=600)
    try:
        out = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        out = None
    return p.returncode, out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Run every case; print a table and one JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", metavar="DIR", help="run against this checkout instead")
    ap.add_argument("-k", help="only commands containing this text")
    ap.add_argument("--cases", default="commands.toml", help="the case file in bench/intent/ "
                    "(commands_late.toml: the set written after the change)")
    ap.add_argument("-v", action="store_true", help="one line per command")
    ap.add_argument("--base-url", help="a real model (not in CI): the openai adapter with "
                    "this server (e.g. ../shared/llm/serve.sh url) and --model")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    a = ap.parse_args(argv)
    model = None if not a.base_url else ["--adapter", "openai", "--model", a.model,
                                         "--base-url", a.base_url, "--time-limit", "240"]
    cases = tomllib.loads((HERE / "intent" / a.cases).read_text())["case"]
    if a.k:
        cases = [c for c in cases if a.k in c["command"]]
    cwd = Path(a.before) if a.before else ROOT
    tally = {"asked": 0, "refused": 0, "wrong": 0}
    rows = []
    for c in cases:
        rc, out, secs = run_case(c, cwd, model)
        verdict, why = judge(c, rc, out)
        tally[verdict] += 1
        rows.append({"cell": c["cell"], "command": c["command"], "expect": c["expect"],
                     "exit": rc, "verdict": verdict, "why": why, "seconds": round(secs, 2)})
        if a.v:
            print(f"{verdict:8} exit {rc}  [{c['cell']}] {c['command']}  -- {why}")
    print(f"adapter: {'openai ' + a.model if model else 'offline'}")
    print(f"| checkout | commands | as asked (or honest refusal due) | refused (buildable) "
          f"| wrong |\n|---|---|---|---|---|\n| {cwd} | {len(cases)} | {tally['asked']} | "
          f"{tally['refused']} | {tally['wrong']} |")
    print(json.dumps({"bench": "intent", "checkout": str(cwd), "commands": len(cases),
                      "adapter": "openai " + a.model if model else "offline",
                      **tally, "cases": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
