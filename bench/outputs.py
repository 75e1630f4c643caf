"""Record the JSON outputs of the verbs on the bundled cells and layouts, and compare two
records with the timings masked: a refactor's "behaviour unchanged" as a measurement.

    python bench/outputs.py record OUTDIR [--repo DIR]   # `python -m cellspec` of DIR
    python bench/outputs.py compare BEFORE AFTER

The runs: check, plan and repair (``--time-limit 20``) on every layout of rules/layouts/
and the two tower examples against the dual-arm station; z3, reference, ``--robust``
and ``explain`` on three of them; the shapes scenario; lint of every bundled cell;
generate of every design of rules/scenarios/designs.cell. ``compare`` prints one JSON line
and the names that differ. Repairs that end at their time limit are anytime answers: under
load one may differ between two runs of the same code (run it again to tell).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATION = "rules/cells/dual_arm_station.cell"
TIME = re.compile(r'("[a-z_]*seconds[a-z_]*"|"elapsed"|"wall"|"ms"):\s*-?[0-9.e+-]+')


def runs(repo: Path) -> list[list[str]]:
    """Every command line of a record (relative to ``repo``)."""
    def rel(pattern: str) -> list[str]:
        return sorted(os.path.relpath(p, repo) for p in glob.glob(str(repo / pattern)))

    layouts = sorted(rel("rules/layouts/*.json") + rel("rules/layouts/sequencing/*.json")
                     + ["rules/examples/tower3.json", "rules/examples/tower3_broken.json"])
    out: list[list[str]] = []
    for lay in layouts:
        out += [["check", STATION, lay], ["plan", STATION, lay],
                ["repair", STATION, lay, "--time-limit", "20"]]
    for lay in ("rules/examples/tower3.json", "rules/examples/tower3_broken.json",
                "rules/layouts/wall_9.json"):
        out += [["check", STATION, lay, "--backend", "z3"],
                ["check", STATION, lay, "--backend", "reference"],
                ["check", STATION, lay, "--robust", "0.0005"],
                ["explain", STATION, lay, "--causes", "3"]]
    out += [["check", STATION, "rules/layouts/canopy_21.json", "--robust", "0.0005"],
            ["check", "rules/scenarios/shapes.cell", "rules/examples/shapes_broken.json"],
            ["repair", "rules/scenarios/shapes.cell", "rules/examples/shapes_broken.json",
             "--time-limit", "20"]]
    cells = ["rules/examples/inconsistent.cell"] + sorted(
        rel("rules/cells/*.cell") + rel("rules/scenarios/*.cell") + rel("rules/stdlib/*.cell"))
    out += [["lint", c, "--time-limit", "30"] for c in cells]
    designs = re.findall(r"^design (\w+)",
                         (repo / "rules/scenarios/designs.cell").read_text(), re.M)
    out += [["generate", STATION, "rules/scenarios/designs.cell", "--design", d,
             "--time-limit", "30"] for d in designs]
    return out


def record(repo: Path, outdir: Path) -> int:
    """Run every command with ``repo``'s cellspec; one file per run (argv, exit, output)."""
    outdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(repo))
    for k, r in enumerate(runs(repo)):
        name = f"{k:03d}_" + "_".join(os.path.basename(x).replace(".", "-")
                                      for x in r if not x.startswith("--"))[:90]
        p = subprocess.run([sys.executable, "-m", "cellspec", r[0], "--format", "json",
                            *r[1:]], cwd=repo, env=env, capture_output=True, text=True,
                           timeout=300, check=False)
        (outdir / f"{name}.txt").write_text(" ".join(r) + f"\nexit {p.returncode}\n--stdout\n"
                                            f"{p.stdout}\n--stderr\n{p.stderr}")
        print(name, p.returncode, flush=True)
    return 0


def compare(a: Path, b: Path) -> int:
    """The runs whose outputs differ once timings are masked (exit 1 when any does)."""
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    differ = [n for n in names if not (a / n).exists() or not (b / n).exists()
              or TIME.sub(r"\1: T", (a / n).read_text()) != TIME.sub(r"\1: T",
                                                                     (b / n).read_text())]
    print(json.dumps({"bench": "outputs", "compared": len(names), "differ": len(differ),
                      "names": differ}))
    print(f"{len(names)} compared, {len(differ)} differ")
    for n in differ:
        print("  DIFF", n)
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record every run's output in OUTDIR")
    r.add_argument("outdir", type=Path)
    r.add_argument("--repo", type=Path, default=ROOT, help="the checkout to run")
    c = sub.add_parser("compare", help="compare two records")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    a = ap.parse_args()
    if a.cmd == "record":
        return record(a.repo.resolve(), a.outdir)
    return compare(a.before, a.after)


if __name__ == "__main__":
    sys.exit(main())
