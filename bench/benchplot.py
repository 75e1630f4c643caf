"""Charts of benchmark results (``--plot DIR`` of each bench, or ``python bench/benchplot.py
RESULT.json DIR`` on a saved JSON line) and per-case progress on a terminal's stderr.

Known benches get their key chart (verify_scale: check time vs pybullet by size; design:
success by group; recovery_loop: success by fault; twin: IK success per robot); any other
result gets a bar chart of the first table of numbers found in its JSON.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from cellspec.core.progress import reporting, tick  # noqa: F401  (re-exported for the benches)
from cellspec.review.plots import draw_table


def start_progress() -> contextlib.ExitStack:
    """Install a progress reporter until the returned stack is closed (a bench's main)."""
    stack = contextlib.ExitStack()
    stack.enter_context(reporting())
    return stack


def add_plot_option(ap: Any) -> None:
    """Add ``--plot DIR`` to a bench's argument parser."""
    ap.add_argument("--plot", metavar="DIR", default=None,
                    help="also draw the table as PNG charts in DIR (matplotlib)")


def _verify_scale(out: dict, d: Path) -> list[Path]:
    rows = [r for r in out["results"] if r.get("check_s") is not None]
    p = d / "verify_scale.png"
    draw_table(rows, "n", ["check_s", "pybullet_s", "allpairs_s"], p,
               "check time vs pybullet load + contact detection, by layout size",
               ylabel="seconds (log)", logy=True, logx=True)
    return [p]


def _design(out: dict, d: Path) -> list[Path]:
    runs = {"offline": out["offline"]}
    for k, v in (out.get("faulty_adapter") or {}).items():
        runs[f"faulty {k}"] = v
    if isinstance(out.get("replay"), dict) and "per_group" in out["replay"]:
        runs["replay"] = out["replay"]
    groups = list(out["offline"]["per_group"])
    rows = [{"group": g, **{name: 100.0 * s["per_group"][g]["ok"] / s["per_group"][g]["n"]
                            if s["per_group"][g]["n"] else 0.0 for name, s in runs.items()}}
            for g in groups]
    p = d / "design.png"
    draw_table(rows, "group", list(runs), p, "design success by command group",
               kind="bar", ylabel="success %")
    return [p]


def _recovery_loop(out: dict, d: Path) -> list[Path]:
    modes = out["modes"]
    conds = list(next(iter(modes.values()))["conditions"])
    rows = [{"fault": c, **{m: 100.0 * modes[m]["conditions"][c]["success_rate"]
                            for m in modes}} for c in conds]
    p = d / "recovery_loop.png"
    draw_table(rows, "fault", list(modes), p, "build success by injected fault and mode",
               kind="bar", ylabel="success %")
    return [p]


def _twin(out: dict, d: Path) -> list[Path]:
    rows = [{"robot": r["model"], "ours": 100.0 * r["success"],
             "pybullet 1 call": 100.0 * r["pybullet_single_call"]["default"]["success"],
             "pybullet 1000 it": 100.0 * r["pybullet_single_call"]["1000it"]["success"]}
            for r in out["ik"]]
    p = d / "twin_ik.png"
    draw_table(rows, "robot", ["ours", "pybullet 1 call", "pybullet 1000 it"], p,
               "IK success per robot: ours vs pybullet", kind="bar", ylabel="success %")
    return [p]


def _first_table(obj: Any) -> list[dict] | None:
    if isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
        if any(isinstance(v, int | float) and not isinstance(v, bool)
               for v in obj[0].values()):
            return obj
    if isinstance(obj, dict):
        for v in obj.values():
            t = _first_table(v)
            if t is not None:
                return t
    if isinstance(obj, list):
        for v in obj:
            t = _first_table(v)
            if t is not None:
                return t
    return None


def _generic(out: dict, d: Path) -> list[Path]:
    rows = _first_table(out)
    if not rows:
        return []
    keys = list(rows[0])
    x = next((k for k in keys if isinstance(rows[0][k], str)), None)
    nums = [k for k in keys if isinstance(rows[0][k], int | float)
            and not isinstance(rows[0][k], bool)]
    if x is None:
        x, nums = "row", nums
        rows = [{"row": k, **r} for k, r in enumerate(rows)]
    ys = [k for k in nums if k.endswith("_s") or k.endswith("seconds")] or nums[:4]
    p = d / f"{out.get('bench', 'bench')}.png"
    draw_table(rows, x, ys[:6], p, f"{out.get('bench', 'bench')}", kind="bar")
    return [p]


CHARTS = {"verify_scale": _verify_scale, "design": _design, "recovery_loop": _recovery_loop,
          "twin": _twin}


def plot_result(out: dict, folder: str | Path) -> list[Path]:
    """Draw a bench result's charts into ``folder`` (created); returns the files written."""
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    fn = CHARTS.get(str(out.get("bench")), _generic)
    paths = fn(out, d)
    for p in paths:
        print(f"chart: {p}", file=sys.stderr)
    return paths


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: python bench/benchplot.py RESULT.json DIR", file=sys.stderr)
        return 2
    text = Path(sys.argv[1]).read_text().strip().splitlines()
    out = json.loads(text[-1])
    return 0 if plot_result(out, sys.argv[2]) else 1


if __name__ == "__main__":
    sys.exit(main())
