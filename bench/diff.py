"""Benchmark of ``cellspec diff``: seeded edits of the bundled cells (which import the
standard library), a third each made tighter, looser and rewritten with the same meaning,
whose relation is known by construction; each pair is diffed at the default bound and the
answer compared with the known one (a witness is re-checked with clingo inside diff).

Edits: shrink one side of the workspace by 1 to 5 cm (tighter; swapped: looser); add a
``max_height`` rule of 0.06 to 0.14 m (tighter; swapped: looser; a tower of three parts is
above it); add a rule in one form to OLD and an equivalent rewrite of it to NEW
(equivalent). Output: ONE JSON line on stdout; the table on stderr. Exit 1 if any pair is
misclassified.

    python bench/diff.py [--pairs 30] [--seed 7] [--parts 3]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's cellspec, not the installed one
CELLS = sorted((REPO / "rules" / "cells").glob("*.cell"))
REWRITES = [  # (OLD form, NEW form): the same meaning
    ("forall p: p.x >= {v}", "forall p: not p.x < {v}"),
    ("forall p: p.top <= {v}", "forall p: p.top - {v} <= 0"),
    ("count(p: p.z > {v}) <= 1", "count(p: p.z > {v}) < 2"),
    ("exists p: p.y <= {v}", "not forall p: p.y > {v}"),
    ("forall {{p, q}}: not near(p, q, 0.01) or p.top == q.top",
     "forall {{p, q}}: near(p, q, 0.01) implies p.top == q.top"),
]


def _rule(body: str) -> str:
    return f'\nrule bench_rule "bench rule" :\n    {body}\n'


def _shrink(text: str, rng: random.Random) -> str:
    m = re.search(r"workspace x \[([-\d.]+), ([-\d.]+)\]", text)
    assert m, "a bundled cell without a workspace x range"
    hi = float(m.group(2)) - rng.randint(1, 5) / 100
    return text[:m.start(2)] + f"{hi:.2f}" + text[m.end(2):]


def make_pairs(n: int, seed: int) -> list[tuple[str, str, str, str]]:
    """``n`` (label, expected relation, OLD text, NEW text) edits, seeded."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        cell = CELLS[k % len(CELLS)]
        text = cell.read_text(encoding="utf-8")
        kind = ("tighter", "looser", "equivalent")[k % 3]
        if kind == "equivalent":
            a, b = REWRITES[(k // 3) % len(REWRITES)]
            v = f"{rng.randint(5, 30) / 100:.2f}"
            out.append((f"{cell.stem}: rewrite {k // 3}", "equivalent",
                        text + _rule(a.format(v=v)), text + _rule(b.format(v=v))))
            continue
        if rng.random() < 0.5:
            tight, what = _shrink(text, rng), "workspace shrunk"
        else:
            h = rng.randint(6, 14) / 100
            tight, what = text + _rule(f"forall p: p.top <= {h:.2f}"), f"max_height {h:.2f}"
        old, new = (text, tight) if kind == "tighter" else (tight, text)
        out.append((f"{cell.stem}: {what}", "stricter" if kind == "tighter" else "looser",
                    old, new))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 on a misclassified pair."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--parts", type=int, default=3)
    a = ap.parse_args(argv)
    from cellspec.dsl.parser import load_cell
    from cellspec.solver.formal.diff import diff

    rows = []
    # a sibling of rules/cells: the cells' relative paths (../plans/...) still resolve
    with tempfile.TemporaryDirectory(dir=REPO / "rules", prefix=".bench_diff_") as tmp:
        for k, (label, want, old_t, new_t) in enumerate(make_pairs(a.pairs, a.seed)):
            po, pn = Path(tmp) / f"old{k}.cell", Path(tmp) / f"new{k}.cell"
            po.write_text(old_t, encoding="utf-8")
            pn.write_text(new_t, encoding="utf-8")
            t0 = time.perf_counter()
            rep = diff(load_cell(po), load_cell(pn), a.parts, timeout=60.0)
            dt = time.perf_counter() - t0
            w = rep.whole
            rows.append({"pair": label, "expected": want, "got": rep.relation,
                         "ok": rep.relation == want,
                         "witness": (w.old_only.witness or w.new_only.witness) is not None,
                         "seconds": round(dt, 3)})
    right = sum(r["ok"] for r in rows)
    times = [r["seconds"] for r in rows]
    summary = {"bench": "diff", "seed": a.seed, "parts": a.parts, "pairs": len(rows),
               "right": right, "median_s": round(statistics.median(times), 3),
               "max_s": max(times), "rows": rows}
    print(json.dumps(summary))
    print(f"{'pair':44} {'expected':11} {'got':12} {'s':>6}", file=sys.stderr)
    for r in rows:
        print(f"{r['pair'][:44]:44} {r['expected']:11} {r['got']:12} {r['seconds']:6.2f}"
              + ("" if r["ok"] else "  WRONG"), file=sys.stderr)
    print(f"{right}/{len(rows)} right; median {summary['median_s']} s, max "
          f"{summary['max_s']} s per pair", file=sys.stderr)
    return 0 if right == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
