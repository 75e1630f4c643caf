"""The design benchmark with a real model (``bench/design.py --adapter openai --base-url
URL``): the project's own commands (bench/commands/commands.jsonl), the held-out
paraphrases (bench/paraphrase/heldout_templates.txt, seeded) and the intent benchmark's
commands (bench/intent/commands.toml, when present), each through ``cellspec design``
(in-process ``cellspec.cli.main``, the whole verb) with three translators in the same run:

* ``offline``: the offline parser (no model);
* ``hybrid``: ``--translate hybrid`` (the default: the offline parser's spec when it uses
  every word, the model for what it refuses);
* ``model``: ``--translate model`` (the model first; the offline parser only as its
  fall-back after the repair round).

Each command is scored: ``asked`` (built as asked, or refused where refusing is the only
honest answer), ``refused`` (a buildable command refused with a reason: honest, not
helpful), ``wrong`` (a layout that is not what was asked, or built where it must refuse),
``error`` (exit 2: the server timed out or failed); ``translated`` counts specs with the
expected structure kinds. Calls, tokens (completion tokens when the server streams
without usage) and p50/p95 seconds per command. ``--sample N`` runs a seeded subset of
each set (the loaded machine); ``--sets`` chooses the sets.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import statistics
import sys
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STATION = ROOT / "rules" / "cells" / "dual_arm_station.cell"
TRANSLATORS = ("offline", "hybrid", "model")


def _cli(argv: list[str]) -> tuple[int, dict[str, Any] | None, str, float]:
    """``cellspec design`` in-process: (exit code, its JSON, stderr, seconds)."""
    from cellspec.cli import main

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
    dt = time.perf_counter() - t0
    try:
        obj = json.loads(out.getvalue()) if out.getvalue().strip() else None
    except ValueError:
        obj = None
    return rc, obj, err.getvalue(), dt


def _argv(command: str, cell: Path, who: str, a: Any) -> list[str]:
    argv = ["design", command, "--cell", str(cell), "--format", "json"]
    if who == "offline":
        return [*argv, "--adapter", "offline"]
    return [*argv, "--adapter", "openai", "--base-url", a.base_url, "--model", a.model,
            "--timeout", str(a.timeout), "--retries", "0", "--translate", who]


def own_cases(n: int | None, rng: random.Random) -> list[dict[str, Any]]:
    """The project's own commands (all buildable), a seeded sample of ``n``."""
    cs = [json.loads(x) for x in (ROOT / "bench" / "commands" / "commands.jsonl")
          .read_text().splitlines() if x.strip()]
    return rng.sample(cs, n) if n and n < len(cs) else cs


def heldout_cases(n: int | None, rng: random.Random) -> list[Any]:
    """Held-out paraphrases (one per template, seeded), a seeded sample of ``n``."""
    sys.path.insert(0, str(ROOT / "bench"))
    import paraphrase

    ts = paraphrase.load_templates(paraphrase.SPLITS["heldout"], "heldout")
    cs = paraphrase.generate(ts, per=1, seed=0)
    return rng.sample(cs, n) if n and n < len(cs) else cs


def intent_cases(n: int | None, rng: random.Random) -> list[dict[str, Any]]:
    """The intent benchmark's frozen commands (bench/intent/commands.toml), if present."""
    p = ROOT / "bench" / "intent" / "commands.toml"
    if not p.exists():
        return []
    cs = tomllib.loads(p.read_text())["case"]
    return rng.sample(cs, n) if n and n < len(cs) else cs


def _kinds(out: dict[str, Any] | None) -> set[str]:
    from cellspec.agent.base import parse_spec
    from cellspec.core.errors import CellspecError

    if not out or not out.get("spec"):
        return set()
    try:
        return {s.kind for s in parse_spec(out["spec"]).structures}
    except CellspecError:
        return set()


def score(kind: str, case: Any, rc: int, out: dict[str, Any] | None) -> tuple[str, bool, str]:
    """(asked | refused | wrong | error, translated right, why)."""
    if rc == 2 or out is None:
        return "error", False, "exit 2 (the server or a limit)" if rc == 2 else f"exit {rc}"
    if rc not in (0, 1):
        return "wrong", False, f"exit {rc}"
    built = rc == 0 and out.get("layout") is not None
    if kind == "intent":
        sys.path.insert(0, str(ROOT / "bench"))
        import intent

        verdict, why = intent.judge(case, rc, out)
        want = case.get("structures") or []
        right = (not want and not out.get("spec")) or (bool(want) and out.get("spec") is not None
                                                        and len(_kinds(out)) >= 1)
        return verdict, bool(right), why
    if kind == "heldout":
        sys.path.insert(0, str(ROOT / "bench"))
        import paraphrase

        if not paraphrase._CELL:  # check_case's cell (paraphrase.main sets it)
            import cellspec

            paraphrase._CELL.append(cellspec.load_cell(str(STATION)))
        r = SimpleNamespace(layout=out.get("layout"), spec=out.get("spec"),
                            reason=out.get("reason"))
        ok, why, _ = paraphrase.check_case(case, r)
        right = (case.group == "refuse" and not out.get("spec")) or (
            case.group == "build" and set(case.kinds) <= _kinds(out))
        if ok:
            return "asked", right, why
        if not built:
            return "refused", right, why
        return "wrong", right, why
    exp = case["expect"]  # own commands: every one buildable
    right = set(exp.get("kinds") or []) <= _kinds(out) and bool(_kinds(out))
    if not built:
        return "refused", right, str(out.get("reason"))[:160]
    n = len(out["layout"]["parts"])
    want = exp.get("parts")
    if isinstance(want, list) and not want[0] <= n <= want[1] or \
            isinstance(want, int) and n != want:
        return "wrong", right, f"{n} parts, expected {want}"
    if not right:
        return "wrong", right, f"kinds {sorted(_kinds(out))}, expected {exp.get('kinds')}"
    h = exp.get("max_height")
    if h is not None and max(p["pos"][2] + 0.025 for p in out["layout"]["parts"]) > h + 1e-9:
        return "wrong", right, "too high"
    return "asked", right, "ok"


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else 0.0


def run(a: Any) -> dict[str, Any]:
    """Every chosen set x translator; one JSON object (rows and per-command records)."""
    rng = random.Random(a.seed)
    sets: dict[str, list[tuple[Any, Path, str]]] = {}
    want = a.sets.split(",")
    if "own" in want:
        sets["own"] = [(c, STATION, c["command"]) for c in own_cases(a.sample, rng)]
    if "heldout" in want:
        sets["heldout"] = [(c, STATION, c.command) for c in heldout_cases(a.sample, rng)]
    if "intent" in want:
        cells = {"station": STATION, "mixed": ROOT / "rules" / "cells" / "mixed_parts.cell"}
        sets["intent"] = [(c, cells[c["cell"]], c["command"])
                          for c in intent_cases(a.sample, rng)]
    rows: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    res = {"bench": "design_model", "model": a.model, "base_url": a.base_url,
           "sample": a.sample, "seed": a.seed, "rows": rows, "records": records}
    for name in [s for s in want if s in sets]:
        cases = sets[name]
        for who in a.translators.split(","):
            rs = []
            for case, cell, command in cases:
                rc, out, err, dt = _cli(_argv(command, cell, who, a))
                verdict, right, why = score(name, case, rc, out)
                llm = (out or {}).get("llm") or {}
                rec = {"set": name, "translator": who, "command": command, "verdict": verdict,
                       "translated": right, "why": why, "exit": rc,
                       "calls": (out or {}).get("calls") or 0,
                       "tokens": (llm.get("tokens") or {}).get("total", 0),
                       "seconds": round(dt, 3), "notes": llm.get("notes"),
                       "fallbacks": [f.get("why") for f in llm.get("fallbacks") or []],
                       "error": err.strip()[-300:] if rc == 2 else None}
                rs.append(rec)
                print(f"  {name:8} {who:8} {verdict:8} {rec['calls']} calls {dt:6.1f} s  "
                      f"{command[:60]}" + (f"  [{why[:70]}]" if verdict != "asked" else ""),
                      file=sys.stderr, flush=True)
            records += rs
            rows[f"{name}/{who}"] = summary(rs)
            if a.out:  # after every row: a long run on a slow server keeps what it measured
                Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    return res


def summary(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts, calls, tokens and seconds of one row."""
    n = len(rs)
    secs = [r["seconds"] for r in rs]
    count = {v: sum(r["verdict"] == v for r in rs) for v in ("asked", "refused", "wrong",
                                                            "error")}
    ok2 = sum(r["verdict"] in ("asked", "refused") and r["calls"] <= 2 for r in rs)
    by_model = sum(any(str(x).startswith("translated by the model") for x in r["notes"] or [])
                   for r in rs)
    return {"n": n, **count, "translated": sum(r["translated"] for r in rs),
            "model_spec_used": by_model,
            "asked_or_refused_le2_calls": ok2,
            "calls_mean": round(statistics.fmean(r["calls"] for r in rs), 2) if rs else 0,
            "tokens_mean": round(statistics.fmean(r["tokens"] for r in rs), 1) if rs else 0,
            "p50_s": round(_pct(secs, 0.5), 2), "p95_s": round(_pct(secs, 0.95), 2)}


def table(res: dict[str, Any]) -> str:
    """The markdown table of a run (bench/RESULTS.md); rows recomputed from the records."""
    for k in list(res["rows"]):
        name, who = k.split("/")
        res["rows"][k] = summary([x for x in res["records"] if x["set"] == name
                                  and x["translator"] == who])
    head = ("| set / translator | n | translated right | the model's own spec used | built as "
            "asked* | refused honestly | wrong | error | asked or refused, <= 2 calls | calls "
            "| tokens | p50 s | p95 s |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
    lines = []
    for k, r in res["rows"].items():
        by = r.get("model_spec_used", "-") if not k.endswith("/offline") else "-"
        lines.append(f"| {k} | {r['n']} | {r['translated']} | {by} | {r['asked']} | "
                     f"{r['refused']} | "
                     f"{r['wrong']} | {r['error']} | {r['asked_or_refused_le2_calls']} | "
                     f"{r['calls_mean']} | {r['tokens_mean']} | {r['p50_s']} | {r['p95_s']} |")
    return head + "\n".join(lines) + "\n"
