"""Benchmark of ``cellspec diff``: seeded edits of the bundled cells and of the standard
library they import, a third each made tighter, looser and rewritten with the same meaning,
whose relation is known by construction; each pair is diffed at the default bound and the
answer compared with the known one (a witness is re-checked with clingo inside diff, and
here again: a pair whose relation differs must come with a witness).

The base files are the bundled cells (rules/cells/) and the standard library's test cells
(rules/stdlib/). Half the pairs edit the base file itself: shrink one side of the workspace
by 1 to 5 cm or add a ``max_height`` rule of 0.06 to 0.14 m (tighter; swapped: looser), or
add a rule in one form to OLD and an equivalent rewrite of it to NEW. The other half edit
the standard library the file imports (cellspec/rules/physical.cell, given to both versions
as a relative import of an edited copy): gravity without stacking, or no_overlap with a gap
of 1 to 3 cm (tighter; swapped: looser), or a rewrite of gravity, workspace, no_overlap or
keepout with the same meaning. Output: ONE JSON line on stdout; the table on stderr. Exit 1
if any pair is misclassified.

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
CELLS = sorted([*(REPO / "rules" / "cells").glob("*.cell"),
                *(REPO / "rules" / "stdlib").glob("*.cell")])
PHYSICAL = REPO / "cellspec" / "rules" / "physical.cell"
REWRITES = [  # (OLD form, NEW form): the same meaning, as a rule added to the cell
    ("forall p: p.x >= {v}", "forall p: not p.x < {v}"),
    ("forall p: p.top <= {v}", "forall p: p.top - {v} <= 0"),
    ("count(p: p.z > {v}) <= 1", "count(p: p.z > {v}) < 2"),
    ("exists p: p.y <= {v}", "not forall p: p.y > {v}"),
    ("forall {{p, q}}: not near(p, q, 0.01) or p.top == q.top",
     "forall {{p, q}}: near(p, q, 0.01) implies p.top == q.top"),
]
GRAVITY = "forall p: grounded(p) or exists q: supports(q, p)"
OVERLAP = "forall {p, q}: not overlaps(p, q)"
LIB_REWRITES = [  # (the standard library's body, the same meaning)
    (GRAVITY, "forall p: not grounded(p) implies exists q: supports(q, p)"),
    ("forall p: inside(p, workspace)",
     "forall p: not inside(p, workspace) implies inside(p, workspace)"),
    (OVERLAP, "forall {p, q}: not (overlaps(p, q) or overlaps(q, p))"),
    ("forall p: forall k in keepout: not intersects(p, k)",
     "forall p: forall k in keepout: intersects(p, k) implies not intersects(p, k)"),
    (GRAVITY, "forall p: (exists q: supports(q, p)) or grounded(p)"),
]


def _rule(body: str) -> str:
    return f'\nrule bench_rule "bench rule" :\n    {body}\n'


def _shrink(text: str, rng: random.Random) -> str:
    m = re.search(r"workspace x \[([-\d.]+), ([-\d.]+)\]", text)
    assert m, "a bundled cell without a workspace x range"
    hi = float(m.group(2)) - rng.randint(1, 5) / 100
    return text[:m.start(2)] + f"{hi:.2f}" + text[m.end(2):]


def _lib(edit: tuple[str, str]) -> str:
    text = PHYSICAL.read_text(encoding="utf-8")
    assert edit[0] in text, f"physical.cell no longer says {edit[0]!r}"
    return text.replace(edit[0], edit[1])


def make_pairs(n: int, seed: int) -> list[dict]:
    """``n`` seeded edits: label, expected relation, OLD and NEW text, and the standard
    library's OLD and NEW text when the edit is of the library (else None)."""
    rng = random.Random(seed)
    out = []
    lib = PHYSICAL.read_text(encoding="utf-8")
    for k in range(n):
        cell = CELLS[rng.randrange(len(CELLS))]
        text = cell.read_text(encoding="utf-8")
        kind = ("tighter", "looser", "equivalent")[k % 3]
        want = {"tighter": "stricter", "looser": "looser", "equivalent": "equivalent"}[kind]
        if (k // 3) % 2:  # an edit of the standard library the cell imports
            assert re.search(r"^import physical\b", text, re.M), f"{cell.name}: no physical"
            if kind == "equivalent":
                a, b = LIB_REWRITES[(k // 6) % len(LIB_REWRITES)]
                old_lib, new_lib, what = _lib((a, a)), _lib((a, b)), f"rewrite of {a[:18]}"
            else:
                if rng.random() < 0.5:
                    tight, what = _lib((GRAVITY, "forall p: grounded(p)")), "gravity: no stacks"
                else:
                    g = rng.randint(1, 3) / 100
                    tight = _lib((OVERLAP, f"forall {{p, q}}: not overlaps(p, q) and not "
                                  f"near(p, q, {g:.2f})"))
                    what = f"no_overlap: gap {g:.2f}"
                old_lib, new_lib = (lib, tight) if kind == "tighter" else (tight, lib)
            out.append({"pair": f"{cell.stem}: stdlib {what}", "expected": want,
                        "old": text, "new": text, "old_lib": old_lib, "new_lib": new_lib})
            continue
        if kind == "equivalent":
            a, b = REWRITES[(k // 6) % len(REWRITES)]
            v = f"{rng.randint(5, 30) / 100:.2f}"
            out.append({"pair": f"{cell.stem}: rewrite {k // 6}", "expected": want,
                        "old": text + _rule(a.format(v=v)), "new": text + _rule(b.format(v=v)),
                        "old_lib": None, "new_lib": None})
            continue
        if rng.random() < 0.5:
            tight, what = _shrink(text, rng), "workspace shrunk"
        else:
            h = rng.randint(6, 14) / 100
            tight, what = text + _rule(f"forall p: p.top <= {h:.2f}"), f"max_height {h:.2f}"
        old, new = (text, tight) if kind == "tighter" else (tight, text)
        out.append({"pair": f"{cell.stem}: {what}", "expected": want, "old": old, "new": new,
                    "old_lib": None, "new_lib": None})
    return out


def _write(tmp: Path, k: int, pair: dict) -> tuple[Path, Path]:
    paths = []
    for side in ("old", "new"):
        text = pair[side]
        if pair[f"{side}_lib"] is not None:
            lib = tmp / f"{side}{k}_physical.cell"
            lib.write_text(pair[f"{side}_lib"], encoding="utf-8")
            text = re.sub(r"^import physical\b", f'import "{lib.name}"', text, flags=re.M)
            # the stability library imports physical too: a copy that imports the edit
            if re.search(r"^import stability\b", text, re.M):
                stab = tmp / f"{side}{k}_stability.cell"
                stab.write_text((PHYSICAL.parent / "stability.cell").read_text(
                    encoding="utf-8").replace("\nimport physical", f'\nimport "{lib.name}"'),
                    encoding="utf-8")
                text = re.sub(r"^import stability\b", f'import "{stab.name}"', text,
                              flags=re.M)
        p = tmp / f"{side}{k}.cell"
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    return paths[0], paths[1]


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
        for k, pair in enumerate(make_pairs(a.pairs, a.seed)):
            po, pn = _write(Path(tmp), k, pair)
            t0 = time.perf_counter()
            rep = diff(load_cell(po), load_cell(pn), a.parts, timeout=60.0)
            dt = time.perf_counter() - t0
            w = rep.whole
            witness = (w.old_only.witness or w.new_only.witness) is not None
            ok = rep.relation == pair["expected"] and (witness or rep.relation == "equivalent")
            rows.append({"pair": pair["pair"], "expected": pair["expected"],
                         "got": rep.relation, "ok": ok, "witness": witness,
                         "stdlib": pair["old_lib"] is not None, "seconds": round(dt, 3)})
    right = sum(r["ok"] for r in rows)
    times = [r["seconds"] for r in rows]
    summary = {"bench": "diff", "seed": a.seed, "parts": a.parts, "pairs": len(rows),
               "right": right, "stdlib_pairs": sum(r["stdlib"] for r in rows),
               "median_s": round(statistics.median(times), 3),
               "max_s": max(times), "rows": rows}
    print(json.dumps(summary))
    print(f"{'pair':50} {'expected':11} {'got':12} {'s':>6}", file=sys.stderr)
    for r in rows:
        print(f"{r['pair'][:50]:50} {r['expected']:11} {r['got']:12} {r['seconds']:6.2f}"
              + ("" if r["ok"] else "  WRONG"), file=sys.stderr)
    print(f"{right}/{len(rows)} right ({summary['stdlib_pairs']} edits of the standard "
          f"library); median {summary['median_s']} s, max {summary['max_s']} s per pair",
          file=sys.stderr)
    return 0 if right == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
