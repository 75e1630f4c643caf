"""Design-from-language benchmark: the 70-command set of bench/commands/commands.jsonl
(groups A-E shaped like Section IV of seed 000) on the dual-arm station.

Rows (same commands, same success test):

* ``offline``: every command through the orchestrator (Plan -> Design -> Inspect ->
  PreExecute, the path of ``cellspec design``) with the offline translator; a success is a
  verified layout whose part count, structure kinds and max height match ``expect``;
* the paper's baselines (Table II of seed 000) re-run through our code with ONE proposer,
  the fault-injecting adapter (every proposal carries an injected fault, cycled: wrong
  count, overlap, floating, out of workspace, malformed JSON, refusal, truncation, none).
  It is a stand-in, NOT a language model: no model endpoint is reachable here.
  - ``LLM-Direct``: the first proposal is accepted without verification (we then verify it
    independently and count the accepted infeasible layouts);
  - ``LLM-AdaptLoop``: Algorithm 2: verify, re-prompt with only the violated constraints
    phi(E), up to T_max = 3 proposals; no solver repair, no solver generation;
  - ``ours``: the orchestrator (verify, CP-SAT repair, re-prompt, solver generation,
    clingo safety gate).
  Every layout a row returns is re-verified here independently with clingo.
* ``replay``: only when recorded cassettes exist in bench/commands/cassettes/ (recorded
  with ``cellspec design --adapter openai --record``); none are shipped, because we cannot
  record from a real model here, and none are faked.

Targets (issue 5): offline >= 95 % overall, p50 <= 1 s per command end to end; zero
accepted infeasible layouts. ONE JSON line on stdout, a table on stderr.

    python bench/design.py [--commands bench/commands/commands.jsonl] [--no-faulty]
                           [--peer DIR]

Work per command (issue 15 item 4): clingo checks, sequencings and dict -> Layout
conversions are counted for every row (``checks``, ``seqs``, ``convs``). ``--peer DIR``
runs the offline row of this same bench on another checkout too (e.g. the code before the
redesign: ``git archive 4d80a61 --prefix=before/ | tar -x -C /tmp``, then ``--peer
/tmp/before``), in a subprocess, right after ours, and
shows it beside ours: the named peer, measured in the same run on the same machine.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PEER_ENV = "DESIGN_BENCH_CODE"  # set by --peer: the checkout whose cellspec is measured
sys.path.insert(0, os.environ.get(PEER_ENV, str(ROOT)))
# the cellspec under test is on the path only now (ours, or the --peer checkout's)
import benchplot  # noqa: E402

import cellspec  # noqa: E402
import cellspec.agent.orchestrator  # noqa: E402
import cellspec.solver.cpsat.generate  # noqa: E402,F401  (loaded before Counters wraps)
import cellspec.solver.cpsat.repair  # noqa: E402,F401
from cellspec.agent.base import TranslateError, parse_spec  # noqa: E402
from cellspec.agent.faulty import FAULTS, FaultyAdapter  # noqa: E402
from cellspec.agent.loop import DesignResult, run_design  # noqa: E402
from cellspec.agent.offline import OfflineAdapter  # noqa: E402
from cellspec.agent.openai_adapter import ReplayAdapter  # noqa: E402
from cellspec.agent.orchestrator import run_orchestrated  # noqa: E402
from cellspec.core.errors import CellspecError  # noqa: E402
from cellspec.layout import layout_from_obj  # noqa: E402
from cellspec.solver.verify import check  # noqa: E402

try:
    from cellspec.agent.loop import conformance, reference
except ImportError:  # a --peer checkout from before issue 15 (the names were private)
    from cellspec.agent.loop import _conformance as conformance  # type: ignore[attr-defined]
    from cellspec.agent.loop import _reference as reference  # type: ignore[attr-defined]

CELL = ROOT / "rules" / "cells" / "dual_arm_station.cell"
GROUPS = "ABCDE"
# the work counted per command (issue 15 item 4): clingo checks (cellspec.solver.verify.check,
# wherever it is called from: the loop, the orchestrator, the sequencer's re-verification,
# the generator, repair, the skills), sequencings (cellspec.solver.cpsat.sequence.plan) and
# dict -> Layout conversions (cellspec.layout.layout_from_obj)
COUNTED = {"checks": ("cellspec.solver.verify", "check"),
           "sequencings": ("cellspec.solver.cpsat.sequence", "plan"),
           "conversions": ("cellspec.layout", "layout_from_obj")}


class Counters:
    """Counts calls of the COUNTED functions while ``active`` (one command at a time; the
    bench's own independent re-check is not counted). Wraps each function in every loaded
    cellspec module that holds it (a name imported at a module's top is a separate
    binding), in the bench only: the library is not instrumented."""

    def __init__(self) -> None:
        self.active = False
        self.n = dict.fromkeys(COUNTED, 0)
        for key, (mod, name) in COUNTED.items():
            orig = getattr(importlib.import_module(mod), name)
            wrapped = self._wrap(key, orig)
            for m in list(sys.modules.values()):
                if getattr(m, "__name__", "").startswith("cellspec") and \
                        getattr(m, name, None) is orig:
                    setattr(m, name, wrapped)

    def _wrap(self, key: str, fn: Any) -> Any:
        def counted(*args: Any, **kw: Any) -> Any:
            if self.active:
                self.n[key] += 1
            return fn(*args, **kw)
        return counted

    def start(self) -> None:
        self.n = dict.fromkeys(COUNTED, 0)
        self.active = True

    def stop(self) -> dict[str, int]:
        self.active = False
        return dict(self.n)


COUNT: Counters | None = None
DUMP: list[dict[str, Any]] = []


def _measure(fn: Any, *args: Any, **kw: Any) -> tuple[Any, float, dict[str, int]]:
    """Run one command (``fn(*args, **kw)``): its result, its seconds, the work counted."""
    assert COUNT is not None
    COUNT.start()
    t0 = time.perf_counter()
    try:
        r = fn(*args, **kw)
    finally:
        n = COUNT.stop()
    return r, time.perf_counter() - t0, n


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[k]


def _feasible(cell: Any, layout: Any, spec: Any) -> tuple[bool, str]:
    """Independent re-check: the layout parses, has the spec's count/height, passes clingo."""

    if layout is None:
        return False, "no layout"
    try:
        lay = layout_from_obj(layout, "<bench>")
    except CellspecError as exc:
        return False, f"malformed: {exc}"
    ref = reference(cell, spec, 10.0)
    n = ref.parts if hasattr(ref, "parts") else (  # a peer's: the GenerateResult itself
        None if ref.layout is None else len(ref.layout["parts"]))
    want = n if n is not None else len(lay)
    bad = conformance(cell, lay, spec, want)
    if bad:
        return False, bad[0][0]
    v = check(cell, lay, backend="clingo", timeout=10.0)
    if v.verdict != "pass":
        rules = sorted({x.rule for x in v.violations}) or [v.reason or v.verdict]
        return False, ",".join(rules)
    return True, "pass"


def _expect_ok(r: Any, exp: dict[str, Any], layout: Any = None) -> tuple[bool, str]:
    """The command's expectation (part count, kinds, max height) on ``r``'s layout (or on
    ``layout``: a raw proposal taken as is)."""

    layout = layout if layout is not None else r.layout
    if layout is None:
        return False, r.reason or "no layout"
    parts = layout["parts"]
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

    rows = []
    for c in cmds:
        o, dt, n = _measure(run_orchestrated, c["command"], cell, OfflineAdapter())
        r = o.result
        _dump("offline", c, o.to_json())
        ok, why = _expect_ok(r, c["expect"])
        if ok:
            ok, why = _feasible(cell, r.layout, _spec(r.spec))
        rows.append({"id": c["id"], "group": c["group"], "ok": ok, "outcome": r.outcome,
                     "calls": r.calls, "seconds": dt, "why": None if ok else why,
                     "infeasible_accepted": False, **n})
    return _summary(rows)


def _dump(row: str, c: dict[str, Any], out: dict[str, Any]) -> None:
    """Keep a command's whole result (without its timings) for --dump."""
    DUMP.append({"row": row, "id": c["id"], **{k: v for k, v in out.items()
                                               if k != "seconds"}})


def _spec(text: str) -> Any:

    return parse_spec(text)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per = {}
    for g in GROUPS:
        rs = [x for x in rows if x["group"] == g]
        per[g] = {"n": len(rs), "ok": sum(x["ok"] for x in rs)}
    secs = [x["seconds"] for x in rows]
    work = {f"{k}_mean": round(statistics.fmean(x[k] for x in rows), 3)
            for k in COUNTED if rows and k in rows[0]}
    return {"per_group": per, "n": len(rows), "ok": sum(x["ok"] for x in rows), **work,
            "calls_mean": statistics.fmean(x["calls"] for x in rows) if rows else 0.0,
            "p50_s": _pct(secs, 0.5), "p95_s": _pct(secs, 0.95),
            "accepted_infeasible": sum(x.get("infeasible_accepted", False) for x in rows),
            "failures": [{"id": x["id"], "outcome": x["outcome"], "why": x["why"]}
                         for x in rows if not x["ok"]]}


def _faults(i: int) -> tuple[str, ...]:
    """Command i gets injected fault FAULTS[1 + i % 7] first, then the cycle goes on."""

    k = 1 + i % (len(FAULTS) - 1)
    return FAULTS[k:] + FAULTS[:k]


def run_baselines(cell: Any, cmds: list[dict[str, Any]]) -> dict[str, Any]:
    """LLM-Direct, LLM-AdaptLoop and ours with the same faulty adapter per command."""

    out: dict[str, list[dict[str, Any]]] = {"llm_direct": [], "adapt_loop": [], "ours": []}
    for i, c in enumerate(cmds):
        row = {"id": c["id"], "group": c["group"]}
        # LLM-Direct: translate, take the first proposal as is (no verification)
        ad = FaultyAdapter(_faults(i), seed=i)
        t0 = time.perf_counter()
        spec = None
        cand = None
        why = None
        try:
            text = ad.translate(c["command"], cell)
            spec = _spec(text)
            cand = ad.propose(spec, cell, None)
        except TranslateError as exc:
            why = str(exc)
        except CellspecError as exc:
            why = f"{type(exc).__name__}: {exc}"
        dt = time.perf_counter() - t0
        if spec is None or cand is None:
            out["llm_direct"].append({**row, "ok": False, "outcome": "no layout", "calls":
                                      ad.calls, "seconds": dt, "why": why,
                                      "infeasible_accepted": False})
        else:
            feas, fwhy = _feasible(cell, cand, spec)
            r = DesignResult(text, "accepted", None, None, ad.calls, dt)
            ok, ewhy = _expect_ok(r, c["expect"], cand) if feas else (False, fwhy)
            out["llm_direct"].append({**row, "ok": ok, "outcome": "accepted", "calls":
                                      ad.calls, "seconds": dt, "why": None if ok else ewhy,
                                      "infeasible_accepted": not feas})
        # LLM-AdaptLoop (Algorithm 2) and ours, each with a fresh adapter (same faults)
        for name in ("adapt_loop", "ours"):
            ad = FaultyAdapter(_faults(i), seed=i)
            if name == "adapt_loop":
                r, dt, n = _measure(run_design, c["command"], cell, ad, repair_ok=False,
                                    generate_ok=False)
                _dump(name, c, r.to_json())
            else:
                o, dt, n = _measure(run_orchestrated, c["command"], cell, ad)
                r = o.result
                _dump(name, c, o.to_json())
            bad = False
            if r.layout is not None:
                feas, fwhy = _feasible(cell, r.layout, _spec(r.spec))
                bad = not feas
                ok, why = _expect_ok(r, c["expect"]) if feas else (False, fwhy)
            else:
                ok, why = False, r.reason
            out[name].append({**row, "ok": ok, "outcome": r.outcome, "calls": r.calls,
                              "seconds": dt, "why": None if ok else why,
                              "infeasible_accepted": bad, **n})
    return {k: _summary(v) for k, v in out.items()}


def run_replay(cell: Any, cmds: list[dict[str, Any]], folder: Path) -> dict[str, Any] | None:
    """The replay adapter on recorded cassettes, or None when there are none."""

    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        return None
    model = files[0].stem
    rows = []
    for c in cmds:
        ad = ReplayAdapter(files[0], model)
        t0 = time.perf_counter()
        r = run_orchestrated(c["command"], cell, ad).result
        dt = time.perf_counter() - t0
        ok, why = _expect_ok(r, c["expect"])
        rows.append({"id": c["id"], "group": c["group"], "ok": ok, "outcome": r.outcome,
                     "calls": r.calls, "seconds": dt, "why": None if ok else why})
    return {"model": model, **_summary(rows)}


def run_peer(peer: Path, commands: str, only: str | None) -> dict[str, Any]:
    """The offline row of this bench run on the checkout ``peer`` (a subprocess, so each
    side imports its own cellspec): its JSON, with the peer's commit."""
    env = dict(os.environ, **{PEER_ENV: str(peer.resolve()), "PYTHONPATH": str(peer.resolve())})
    cmd = [sys.executable, str(Path(__file__).resolve()), "--no-faulty", "--commands", commands]
    if only:
        cmd += ["--only", only]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        raise SystemExit(f"--peer {peer}: the bench failed there:\n{p.stderr[-2000:]}")
    got = json.loads(p.stdout.strip().splitlines()[-1])
    rev = subprocess.run(["git", "-C", str(peer), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False).stdout.strip()
    return {"dir": str(peer), "commit": rev or None, "offline": got["offline"]}


def _table(name: str, s: dict[str, Any], e: Any) -> None:
    cells = "".join(f"{100 * g['ok'] / g['n'] if g['n'] else 0.0:>7.1f}"
                    for g in s["per_group"].values())
    print(f"{name:<16}{cells}{100 * s['ok'] / s['n'] if s['n'] else 0.0:>8.1f}"
          f"{s['calls_mean']:>8.2f}{s['p50_s']:>8.3f}{s['p95_s']:>8.3f}"
          f"{s['accepted_infeasible']:>8d}" + "".join(
              f"{s[k + '_mean']:>8.2f}" for k in COUNTED if k + "_mean" in s), file=e)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commands", default=str(ROOT / "bench" / "commands" / "commands.jsonl"))
    ap.add_argument("--cassettes", default=str(ROOT / "bench" / "commands" / "cassettes"))
    ap.add_argument("--no-faulty", action="store_true")
    ap.add_argument("--only", metavar="IDS", help="comma-separated command ids (a quick run)")
    ap.add_argument("--dump", metavar="JSONL", help="write every command's whole result "
                    "(timings left out) here, to compare two versions byte for byte")
    ap.add_argument("--peer", metavar="DIR", help="also run the offline row on the cellspec "
                    "checkout DIR (e.g. the code before the redesign) and show it beside")

    ap.add_argument("--adapter", choices=("offline", "openai"), default="offline",
                    help="openai: the real-model benchmark (bench/design_model.py) against "
                    "--base-url, offline / hybrid / model translators in the same run")
    ap.add_argument("--base-url", help="with --adapter openai: the model server")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="with --adapter openai")
    ap.add_argument("--timeout", type=float, default=120.0, help="per model call (s)")
    ap.add_argument("--sets", default="own,heldout,intent",
                    help="with --adapter openai: own, heldout, intent (comma-separated)")
    ap.add_argument("--translators", default="offline,hybrid,model",
                    help="with --adapter openai: offline, hybrid, model (comma-separated)")
    ap.add_argument("--sample", type=int, metavar="N",
                    help="with --adapter openai: a seeded sample of N commands per set")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed")
    ap.add_argument("--out", metavar="JSON", help="with --adapter openai: write the whole "
                    "result (every command) here")

    benchplot.add_plot_option(ap)
    a = ap.parse_args()
    if a.adapter == "openai":
        if not a.base_url:
            ap.error("--adapter openai needs --base-url")
        import design_model

        res = design_model.run(a)
        if a.out:
            Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
        print(json.dumps({k: v for k, v in res.items() if k != "records"}))
        print(design_model.table(res), file=sys.stderr)
        return 0

    cell = cellspec.load_cell(str(CELL))
    cmds = [json.loads(x) for x in Path(a.commands).read_text().splitlines() if x.strip()]
    if a.only:
        keep = set(a.only.split(","))
        cmds = [c for c in cmds if c["id"] in keep]
    global COUNT
    COUNT = Counters()
    with benchplot.reporting():  # per-command progress on a terminal's stderr
        off = run_offline(cell, cmds)
        out: dict[str, Any] = {"bench": "design", "commands": len(cmds), "offline": off}
        if a.peer:  # right after ours, so both see the machine alike
            out["peer"] = run_peer(Path(a.peer), a.commands, a.only)
        if not a.no_faulty:
            out["faulty_adapter"] = run_baselines(cell, cmds)
        rep = run_replay(cell, cmds, Path(a.cassettes))
    out["replay"] = rep if rep is not None else {
        "skipped": "no cassettes: none can be recorded here (no model endpoint); record with "
                   "cellspec design --adapter openai --record bench/commands/cassettes/MODEL"
                   ".jsonl"}
    print(json.dumps(out))
    if a.dump:
        Path(a.dump).write_text("".join(json.dumps(d, sort_keys=True) + "\n" for d in DUMP))
    if a.plot:
        benchplot.plot_result(out, a.plot)
    e = sys.stderr
    print(f"{'success %':<16}" + "".join(f"{g:>7}" for g in GROUPS)
          + f"{'all':>8}{'calls':>8}{'p50 s':>8}{'p95 s':>8}{'bad acc':>8}{'checks':>8}"
          f"{'seqs':>8}{'convs':>8}", file=e)
    _table("offline", off, e)
    if a.peer:
        _table("offline @peer", out["peer"]["offline"], e)
    if rep is not None:
        _table(f"replay {rep['model']}", rep, e)
    else:
        print("replay          skipped: " + out["replay"]["skipped"], file=e)
    if "faulty_adapter" in out:
        print("faulty adapter (a fault injector standing in for an LLM, NOT a model; every "
              "first proposal carries a fault by construction, so these rows measure the "
              "pipeline's defences, not a model):", file=e)
        for k, label in (("llm_direct", "  LLM-Direct"), ("adapt_loop", "  LLM-AdaptLoop"),
                         ("ours", "  ours")):
            _table(label, out["faulty_adapter"][k], e)
    print("calls = LLM calls per command (translate + propose + route); bad acc = accepted "
          "layouts that fail the independent clingo re-check; checks, seqs, convs = clingo checks, "
          "sequencings and dict->Layout conversions per command (mean)", file=e)
    for f in off["failures"]:
        print(f"  offline FAIL {f['id']} [{f['outcome']}]: {f['why']}", file=e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
