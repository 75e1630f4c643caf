"""CLI start-up benchmark: ``cellspec check rules/cells/dual_arm_station.cell <3-part layout>``.

Wall clock of the whole subprocess (interpreter start, imports, parsing the cell,
loading the layout, the check, printing), median of ``--runs`` runs after one
untimed warm-up run (so the file cache is warm). Timed side by side:

* ``cellspec`` as found on PATH (what a user types; the target applies to it),
* the console script next to this interpreter, when that is a different file
  (e.g. PATH holds a pyenv shim, a shell script that adds its own start-up),
* ``python -m cellspec``,
* baselines: ``python -c pass`` and ``python -c "import cellspec.cli"``,
* and, in one more subprocess, the in-process phases of the same check.

Output: ONE JSON line on stdout; a one-line table (and FAIL lines) on stderr.
Exit 1 if the check command does not exit 0 (the 3-cube tower passes); the
0.5 s target is reported, not enforced. ``--wait S`` polls ``cellspec --help``
for up to S seconds first (for a CLI still being installed).

    python bench/cli_startup.py [--runs 5] [--wait 0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CELL = ROOT / "rules" / "cells" / "dual_arm_station.cell"
TARGET_S = 0.5
LAYOUT = {
    "units": "m",
    "parts": [
        {"id": "c1", "type": "cube", "pos": [0.40, 0.20, 0.025]},
        {"id": "c2", "type": "cube", "pos": [0.40, 0.20, 0.075]},
        {"id": "c3", "type": "cube", "pos": [0.40, 0.20, 0.125]},
    ],
    "order": ["c1", "c2", "c3"],
}
PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
import cellspec.cli  # noqa: F401
t1 = time.perf_counter()
import cellspec
cell = cellspec.load_cell(sys.argv[1])
t2 = time.perf_counter()
layout = cellspec.load_layout(sys.argv[2])
t3 = time.perf_counter()
v = cellspec.check(cell, layout)
t4 = time.perf_counter()
print(json.dumps({"import_cli_s": t1 - t0, "load_cell_s": t2 - t1, "load_layout_s": t3 - t2,
                  "check_s": t4 - t3, "verdict": v.verdict}))
"""


def _time(cmd: list[str], runs: int, cwd: Path) -> dict:
    def once() -> tuple[float, int]:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0, p.returncode

    once()  # warm-up, not counted
    times, codes = [], []
    for _ in range(runs):
        t, c = once()
        times.append(t)
        codes.append(c)
    return {"cmd": cmd, "median_s": statistics.median(times), "runs_s": times,
            "exit_codes": codes}


def _wait_for_cli(seconds: float) -> str | None:
    deadline = time.monotonic() + seconds
    while True:
        exe = shutil.which("cellspec")
        if exe and subprocess.run([exe, "--help"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL).returncode == 0:
            return exe
        if time.monotonic() >= deadline:
            return exe
        time.sleep(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--wait", type=float, default=0.0,
                    help="poll `cellspec --help` for up to this many seconds first")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import benchplot

    benchplot.add_plot_option(ap)
    args = ap.parse_args(argv)
    exe = _wait_for_cli(args.wait)
    fails: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cellspec_cli_") as d:
        layout = Path(d) / "tower3.json"
        layout.write_text(json.dumps(LAYOUT), encoding="utf-8")
        check_args = ["check", str(CELL.relative_to(ROOT)), str(layout)]
        commands: list[tuple[str, list[str]]] = []
        if exe:
            commands.append(("path", [exe, *check_args]))
        local = Path(sys.executable).parent / "cellspec"
        if local.exists() and (not exe or os.path.realpath(exe) != os.path.realpath(local)):
            commands.append(("console_script", [str(local), *check_args]))
        commands.append(("python_m", [sys.executable, "-m", "cellspec", *check_args]))
        timed = {}
        with benchplot.reporting():  # per-command progress on a terminal's stderr
            for k, (name, cmd) in enumerate(commands):
                benchplot.tick("commands", k, len(commands), name)
                timed[name] = _time(cmd, args.runs, ROOT)
        base = {
            "python_s": _time([sys.executable, "-c", "pass"], args.runs, ROOT)["median_s"],
            "import_cli_s": _time([sys.executable, "-c", "import cellspec.cli"], args.runs,
                                  ROOT)["median_s"],
        }
        p = subprocess.run([sys.executable, "-c", PHASES, str(CELL), str(layout)], cwd=ROOT,
                           capture_output=True, text=True)
        try:
            phases = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            phases = {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    primary = timed.get("path") or next(iter(timed.values()))
    for name, r in timed.items():
        if any(c != 0 for c in r["exit_codes"]):
            fails.append(f"FAIL cli_startup: {name} {' '.join(r['cmd'])} exited "
                         f"{r['exit_codes']} (expected 0: the 3-cube tower passes)")
    if not exe:
        fails.append("FAIL cli_startup: no `cellspec` on PATH (timed python -m cellspec only)")
    ok_target = primary["median_s"] <= TARGET_S
    out = {"bench": "cli_startup", "ok": not fails, "target_s": TARGET_S,
           "target_met": ok_target, "runs": args.runs, "median_s": primary["median_s"],
           "primary": primary["cmd"][0], "commands": timed, "baseline": base,
           "phases": phases}
    print(json.dumps(out, separators=(",", ":")), flush=True)
    if args.plot:
        benchplot.plot_result({**out, "rows": [{"command": k, "median_s": v["median_s"]}
                                               for k, v in timed.items()]}, args.plot)
    extra = ", ".join(f"{name} {r['median_s']:.3f} s" for name, r in timed.items()
                      if r is not primary)
    ph = ""
    if "error" not in phases:
        ph = (f"; in-process: import cli {phases['import_cli_s']:.3f}, cell "
              f"{phases['load_cell_s']:.3f}, layout {phases['load_layout_s']:.3f}, check "
              f"{phases['check_s']:.3f}")
    print(f"cli_startup: cellspec check dual_arm_station.cell <3 cubes> median "
          f"{primary['median_s']:.3f} s of {args.runs} (target <= {TARGET_S} s: "
          f"{'ok' if ok_target else 'MISS'}); {extra}; python {base['python_s']:.3f} s, "
          f"import cellspec.cli {base['import_cli_s']:.3f} s{ph}", file=sys.stderr)
    for line in fails:
        print(line, file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
