"""Design-from-language benchmark: the 70-command set of bench/commands/commands.jsonl
(groups A-E shaped like Section IV of seed 000) on the dual-arm station.

* offline: every command through ``run_design`` with the offline translator; a success is
  a verified layout (outcome accepted | repaired | generated) whose part count, structure
  kinds (from the spec's design statements) and max height match ``expect``;
* faulty adapter (every proposal carries an injected fault, cycled): "LLM-Direct" accepts
  the adapter's first proposal without verification (how many of those are infeasible),
  "AdaptLoop" is our loop (verify, repair, re-prompt with phi(E), generate, gate); every
  layout it returns is re-verified here independently (clingo) -- target: zero accepted
  infeasible layouts.

Targets (issue 5): offline >= 95 % overall, p50 <= 1 s per command end to end.
ONE JSON line on stdout, a table on stderr.

    python bench/design.py [--commands bench/commands/commands.jsonl] [--no-faulty]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CELL = ROOT / "rules" / "cells" / "dual_arm_station.cell"
GROUPS = "ABCDE"


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[k]


def _feasible(cell: Any, layout: Any, spec: Any) -> tuple[bool, str]:
    """Independent re-check: the layout parses, has the spec's count/height, passes clingo."""
    from cellspec.dsl.errors import CellspecError
    from cellspec.layout import layout_from_obj
    from cellspec.llm_adapters.loop import _conformance, _reference
    from cellspec.solver.verify import check

    if layout is None:
        return False, "no layout"
    try:
        lay = layout_from_obj(layout, "<bench>")
    except CellspecError as exc:
        return False, f"malformed: {exc}"
    ref = _reference(cell, spec, 10.0)
    want = len(ref.layout["parts"]) if ref.layout is not None else len(lay)
    bad = _conformance(cell, lay, spec, want)
    if bad:
        return False, bad[0][0]
    v = check(cell, lay, backend="clingo", timeout=10.0)
    if v.verdict != "pass":
        rules = sorted({x.rule for x in v.violations}) or [v.reason or v.verdict]
        return False, ",".join(rules)
    return True, "pass"


def _expect_ok(r: Any, exp: dict[str, Any]) -> tuple[bool, str]:
    from cellspec.llm_adapters.base import parse_spec

    if r.layout is None:
        return False, r.reason or "no layout"
    parts = r.layout["parts"]
    n = len(parts)
    want = exp.get("parts")
    if isinstance(want, list):
        if not (want[0] <= n <= want[1]):
            return False, f"wrong part count: {n} not in [{want[0]}, {want[1]}]"
    elif want is not None and n != want:
        return False, f"wrong part count: {n} != {want}"
    kinds = {s.kind for s in parse_spec(r.spec).structures}
    missing = [k for k in exp.get("kinds") or [] if k not in kinds]
    if missing:
        return False, f"missing structure kind(s) {missing} (spec has {sorted(kinds)})"
    h = exp.get("max_height")
    if h is not None:
        top = max(float(p["pos"][2]) + 0.025 for p in parts)
        if top > h + 1e-9:
            return False, f"too high: {top:.3f} m > {h} m"
    return True, "ok"


def run_offline(cell: Any, cmds: list[dict[str, Any]]) -> dict[str, Any]:
    from cellspec.llm_adapters.loop import run_design
    from cellspec.llm_adapters.offline import OfflineAdapter

    rows = []
    for c in cmds:
        t0 = time.perf_counter()
        r = run_design(c["command"], cell, OfflineAdapter())
        dt = time.perf_counter() - t0
        ok, why = _expect_ok(r, c["expect"])
        rows.append({"id": c["id"], "group": c["group"], "ok": ok, "outcome": r.outcome,
                     "calls": r.calls, "seconds": dt, "why": None if ok else why})
    return _summary(rows)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per = {}
    for g in GROUPS:
        rs = [x for x in rows if x["group"] == g]
        per[g] = {"n": len(rs), "ok": sum(x["ok"] for x in rs)}
    secs = [x["seconds"] for x in rows]
    return {"per_group": per, "n": len(rows), "ok": sum(x["ok"] for x in rows),
            "calls_mean": statistics.fmean(x["calls"] for x in rows) if rows else 0.0,
            "p50_s": _pct(secs, 0.5), "p95_s": _pct(secs, 0.95),
            "failures": [{"id": x["id"], "outcome": x["outcome"], "why": x["why"]}
                         for x in rows if not x["ok"]]}


def run_faulty(cell: Any, cmds: list[dict[str, Any]]) -> dict[str, Any]:
    """LLM-Direct vs AdaptLoop with the faulty adapter (same adapter, same faults)."""
    from cellspec.dsl.errors import CellspecError
    from cellspec.llm_adapters.base import TranslateError, parse_spec
    from cellspec.llm_adapters.faulty import FAULTS, FaultyAdapter
    from cellspec.llm_adapters.loop import run_design

    direct = {"proposals": 0, "infeasible": 0, "no_layout": 0, "reasons": {}}
    loop = {"commands": 0, "verified": 0, "rejected": 0, "accepted_infeasible": 0,
            "calls": [], "outcomes": {}}
    for i, c in enumerate(cmds):
        # Command i gets injected fault FAULTS[1 + i % 7] first, then the cycle goes on
        # (none, wrong_count, ...): the same adapter for both baselines.
        k = 1 + i % (len(FAULTS) - 1)
        faults = FAULTS[k:] + FAULTS[:k]
        # LLM-Direct: translate, take the first proposal as is.
        ad = FaultyAdapter(faults, seed=i)
        try:
            spec = parse_spec(ad.translate(c["command"], cell))
        except (TranslateError, CellspecError):
            continue
        direct["proposals"] += 1
        try:
            cand = ad.propose(spec, cell, None)
        except CellspecError as exc:
            cand = None
            direct["reasons"][type(exc).__name__] = direct["reasons"].get(
                type(exc).__name__, 0) + 1
        if cand is None:
            direct["no_layout"] += 1
            direct["infeasible"] += 1
        else:
            ok, why = _feasible(cell, cand, spec)
            if not ok:
                direct["infeasible"] += 1
                direct["reasons"][why] = direct["reasons"].get(why, 0) + 1
        # AdaptLoop: our loop with re-prompting, repair, generation and the gate.
        r = run_design(c["command"], cell, FaultyAdapter(faults, seed=i))
        loop["commands"] += 1
        loop["calls"].append(r.calls)
        loop["outcomes"][r.outcome] = loop["outcomes"].get(r.outcome, 0) + 1
        if r.layout is None:
            loop["rejected"] += 1
        else:
            ok, _ = _feasible(cell, r.layout, spec)
            loop["verified"] += ok
            loop["accepted_infeasible"] += not ok
    calls = loop.pop("calls")
    loop["calls_mean"] = statistics.fmean(calls) if calls else 0.0
    return {"llm_direct": direct, "adapt_loop": loop}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commands", default=str(ROOT / "bench" / "commands" / "commands.jsonl"))
    ap.add_argument("--no-faulty", action="store_true")
    a = ap.parse_args()
    import cellspec

    cell = cellspec.load_cell(str(CELL))
    cmds = [json.loads(x) for x in Path(a.commands).read_text().splitlines() if x.strip()]
    off = run_offline(cell, cmds)
    out: dict[str, Any] = {"bench": "design", "commands": len(cmds), "offline": off}
    if not a.no_faulty:
        out["faulty"] = run_faulty(cell, cmds)
    print(json.dumps(out))
    e = sys.stderr
    print(f"{'group':<8}{'n':>4}{'ok':>5}{'success':>10}", file=e)
    for g, s in off["per_group"].items():
        rate = 100 * s["ok"] / s["n"] if s["n"] else 0.0
        print(f"{g:<8}{s['n']:>4}{s['ok']:>5}{rate:>9.1f}%", file=e)
    print(f"{'all':<8}{off['n']:>4}{off['ok']:>5}{100 * off['ok'] / off['n']:>9.1f}%", file=e)
    print(f"offline: LLM calls/command {off['calls_mean']:.2f}, latency p50 "
          f"{off['p50_s']:.3f} s, p95 {off['p95_s']:.3f} s", file=e)
    for f in off["failures"]:
        print(f"  FAIL {f['id']} [{f['outcome']}]: {f['why']}", file=e)
    if "faulty" in out:
        d, lp = out["faulty"]["llm_direct"], out["faulty"]["adapt_loop"]
        print(f"faulty adapter, LLM-Direct: {d['infeasible']}/{d['proposals']} first proposals "
              f"infeasible ({d['reasons']})", file=e)
        print(f"faulty adapter, AdaptLoop: {lp['verified']}/{lp['commands']} verified layouts, "
              f"{lp['rejected']} rejected, {lp['accepted_infeasible']} accepted infeasible, "
              f"LLM calls/command {lp['calls_mean']:.2f}, outcomes {lp['outcomes']}", file=e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
