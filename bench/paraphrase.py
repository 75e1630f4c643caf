"""Paraphrase benchmark: commands generated from templates x numbers x placements, with
their expected properties, on the dual-arm station, scored through the whole orchestrator.

The templates are split (not just the sampled commands): ``bench/paraphrase/
dev_templates.txt`` is what the offline parser is tuned against; ``bench/paraphrase/
heldout_templates.txt`` was frozen in its own commit before the parser was written and is
never tuned against. A ``build`` command counts only when ``cellspec design`` gives a
layout that passes an independent clingo re-check AND has the expected structure kinds,
part count, height limit and region; a ``refuse`` command counts only when it is refused
with a reason. ``bad`` counts layouts that fail a rule (must be 0).

    python bench/paraphrase.py [--split dev|heldout|both] [--per 7] [--adapter offline]
    python bench/paraphrase.py --base-url http://127.0.0.1:8080/v1 --model M   # opt-in LLM

The peer in the same run is the previous offline translator (``--peer``: the phrase
matcher ``cellspec.agent.legacy``, which no longer ships; it runs from the package as it
was at ``--peer-ref``, unpacked with ``git archive`` into a temporary directory and run in
a subprocess on the same commands). ONE JSON line on stdout, a table on stderr.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import operator
import os
import random
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PEER_ENV = "PARAPHRASE_BENCH_CODE"  # set by --peer: the checkout whose cellspec runs
sys.path.insert(0, os.environ.get(PEER_ENV, str(ROOT)))
# the last commit with the legacy phrase matcher (cellspec/agent/legacy.py), the peer
LEGACY_REF = "3471d4fef463dff4eb8d918008691233bfc7b100"

CELL = ROOT / "rules" / "cells" / "dual_arm_station.cell"
DATA = ROOT / "bench" / "paraphrase"
SPLITS = {"dev": DATA / "dev_templates.txt", "heldout": DATA / "heldout_templates.txt"}
WS = (0.20, 0.70, 0.05, 0.50)  # the dual-arm station's workspace x0, x1, y0, y1
UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """0..100 in English words (``twenty-one``)."""
    if n < 20:
        return UNITS[n]
    if n == 100:
        return "a hundred"
    t, u = divmod(n, 10)
    return TENS[t - 2] + ("" if u == 0 else "-" + UNITS[u])


@dataclass(frozen=True)
class Template:
    """One template line: group (build|refuse), text with slots, expectations."""

    split: str
    line: int
    group: str
    text: str
    expect: str


@dataclass(frozen=True)
class Case:
    """One generated command with its expected properties."""

    split: str
    template: int
    group: str
    command: str
    kinds: tuple[str, ...] = ()
    parts: tuple[int, int] | None = None
    max_height: float | None = None
    region: tuple[float, float, float, float] | None = None  # every part centre inside
    near: tuple[float, float, float, float] | None = None  # the centroid inside
    values: dict[str, Any] = field(default_factory=dict)


def load_templates(path: Path, split: str) -> list[Template]:
    """Parse a template file (format in its header); ValueError names file:line."""
    out = []
    for k, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        bits = [b.strip() for b in s.split("|")]
        if len(bits) != 3 or bits[0] not in ("build", "refuse"):
            raise ValueError(f"{path}:{k}: expected 'build|refuse | TEMPLATE | EXPECT'")
        out.append(Template(split, k, bits[0], bits[1], bits[2]))
    return out


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv}


def _calc(expr: str) -> float:
    """Arithmetic on numbers only (+ - * / //, parentheses)."""
    def ev(n: ast.AST) -> float:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int | float):
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.left), ev(n.right))
        raise ValueError(f"not arithmetic: {expr!r}")
    return ev(ast.parse(expr, mode="eval"))


def _place(rng: random.Random) -> tuple[str, tuple[float, float, float, float]]:
    """A placement phrase and the box its structure's centroid must fall in."""
    x0, x1, y0, y1 = WS
    mx, my = (x0 + x1) / 2, (y0 + y1) / 2
    form = rng.randrange(6)
    if form in (0, 1):
        x = rng.choice((0.35, 0.4, 0.45, 0.5, 0.55))
        y = rng.choice((0.2, 0.25, 0.3, 0.35))
        text = f"at x {x} y {y}" if form == 0 else f"at ({x}, {y})"
        return text, (x - 0.08, x + 0.08, y - 0.08, y + 0.08)
    if form == 2:
        fb, lr = rng.choice(("front", "back")), rng.choice(("left", "right"))
        sep = rng.choice((" ", "-"))
        box = ((x0, mx) if lr == "left" else (mx, x1)) + ((y0, my) if fb == "front"
                                                         else (my, y1))
        return f"in the {fb}{sep}{lr} corner", box
    if form == 3:
        text = rng.choice(("in the middle of the table", "in the centre", "in the middle",
                           "in the center of the table"))
        qx, qy = (x1 - x0) / 4, (y1 - y0) / 4
        return text, (mx - qx, mx + qx, my - qy, my + qy)
    side = rng.choice(("front", "back", "left", "right"))
    box = {"front": (x0, x1, y0, my), "back": (x0, x1, my, y1), "left": (x0, mx, y0, y1),
           "right": (mx, x1, y0, y1)}[side]
    return f"near the {side} edge", box


SLOT = re.compile(r"\{(\w+)(?::([^}]*))?\}")


def instantiate(t: Template, rng: random.Random) -> Case:
    """One command from template ``t`` (slots drawn from ``rng``)."""
    values: dict[str, Any] = {}
    near = None

    def fill(m: re.Match[str]) -> str:
        nonlocal near
        name, spec = m.group(1), m.group(2)
        if name == "place":
            text, near = _place(rng)
            return text
        if spec is None:
            return str(values[name]) if not isinstance(values[name], int) else \
                _render(values[name], rng)
        if re.fullmatch(r"\d+-\d+", spec):
            lo, hi = map(int, spec.split("-"))
            values[name] = rng.randint(lo, hi)
            s = m.string
            glued = s[m.end():m.end() + 1] == "x" or s[max(0, m.start() - 1):m.start()] == "x"
            return str(values[name]) if glued else _render(values[name], rng)  # 3x4
        choice = rng.choice(spec.split(","))
        values[name] = choice
        return choice

    command = SLOT.sub(fill, t.text)
    case: dict[str, Any] = {}
    if t.group == "build":
        for item in t.expect.split():
            key, _, val = item.partition("=")
            val = SLOT.sub(lambda m: str(values[m.group(1)]), val)
            if key == "kinds":
                case["kinds"] = tuple(val.split(","))
            elif key == "parts":
                lo, _, hi = val.partition("..")
                a = int(_calc(lo))
                case["parts"] = (a, int(_calc(hi)) if hi else a)
            elif key == "max_height":
                case["max_height"] = round(_calc(val), 6)
            elif key == "region":
                r = tuple(float(v) for v in val.split(","))
                case["region"] = (r[0], r[1], r[2], r[3])
            else:
                raise ValueError(f"{t.split}:{t.line}: unknown expectation {key!r}")
    return Case(t.split, t.line, t.group, command, near=near, values=values, **case)


def _render(n: int, rng: random.Random) -> str:
    return str(n) if rng.random() < 0.5 else number_words(n)


def generate(templates: list[Template], per: int = 8, seed: int = 0) -> list[Case]:
    """Up to ``per`` distinct commands per template, seeded (same input, same output)."""
    out = []
    for t in templates:
        rng = random.Random(seed * 1_000_003 + zlib.crc32(f"{t.split}:{t.text}".encode()))
        seen: set[str] = set()
        for _ in range(per * 6):
            c = instantiate(t, rng)
            if c.command not in seen:
                seen.add(c.command)
                out.append(c)
            if len(seen) >= per:
                break
    return out


def check_case(case: Case, r: Any) -> tuple[bool, str, bool]:
    """(ok, why, bad): whether result ``r`` meets the case; bad = a layout failing a rule."""
    from cellspec.agent.base import parse_spec

    sys.path.insert(0, str(ROOT / "bench"))
    from design import _feasible  # the independent clingo re-check of bench/design.py

    if case.group == "refuse":
        if r.layout is not None:
            return False, f"built {len(r.layout['parts'])} parts for an open request", False
        return (True, "refused", False) if r.reason else (False, "refused without a reason",
                                                          False)
    if r.layout is None:
        return False, r.reason or "no layout", False
    spec = parse_spec(r.spec)
    feas, fwhy = _feasible(_CELL[0], r.layout, spec)
    if not feas:
        return False, f"layout fails a rule: {fwhy}", True
    parts = r.layout["parts"]
    n = len(parts)
    if case.parts and not (case.parts[0] <= n <= case.parts[1]):
        return False, f"{n} parts, expected {case.parts[0]}..{case.parts[1]}", False
    kinds = {s.kind for s in spec.structures}
    miss = [k for k in case.kinds if k not in kinds]
    if miss:
        return False, f"missing kind(s) {miss} (spec has {sorted(kinds)})", False
    if case.max_height is not None:
        top = max(float(p["pos"][2]) + 0.025 for p in parts)
        if top > case.max_height + 1e-9:
            return False, f"top {top:.3f} m above the limit {case.max_height} m", False
    xs = [float(p["pos"][0]) for p in parts]
    ys = [float(p["pos"][1]) for p in parts]
    if case.region is not None:
        x0, x1, y0, y1 = case.region
        if not all(x0 - 1e-6 <= x <= x1 + 1e-6 and y0 - 1e-6 <= y <= y1 + 1e-6
                   for x, y in zip(xs, ys, strict=True)):
            return False, f"a part centre is outside the region {case.region}", False
    if case.near is not None:
        cx, cy = statistics.fmean(xs), statistics.fmean(ys)
        x0, x1, y0, y1 = case.near
        if not (x0 - 1e-6 <= cx <= x1 + 1e-6 and y0 - 1e-6 <= cy <= y1 + 1e-6):
            return False, f"centroid ({cx:.3f}, {cy:.3f}) is not in {case.near}", False
    return True, "ok", False


_CELL: list[Any] = []


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else 0.0


def run(cases: list[Case], make_adapter: Any) -> dict[str, Any]:
    """Every case through the orchestrator with a fresh adapter; per-split scores."""
    from cellspec.agent.orchestrator import run_orchestrated

    rows = []
    for c in cases:
        ad = make_adapter()
        t0 = time.perf_counter()
        if ad.name in ("offline", "legacy"):  # a model is not asked twice
            try:
                ad.translate(c.command, _CELL[0])
            except Exception:  # noqa: BLE001 - timing only; the orchestrator reports why
                pass
        t_tr = time.perf_counter() - t0
        ad = make_adapter()
        t0 = time.perf_counter()
        r = run_orchestrated(c.command, _CELL[0], ad).result
        dt = time.perf_counter() - t0
        ok, why, bad = check_case(c, r)
        rows.append({"split": c.split, "template": c.template, "group": c.group,
                     "command": c.command, "ok": ok, "why": why, "bad": bad,
                     "translate_s": t_tr, "seconds": dt,
                     "mode": getattr(ad, "mode", None)})
    out: dict[str, Any] = {}
    for split in sorted({r["split"] for r in rows}):
        rs = [r for r in rows if r["split"] == split]
        b = [r for r in rs if r["group"] == "build"]
        f = [r for r in rs if r["group"] == "refuse"]
        out[split] = {"templates": len({r["template"] for r in rs}), "commands": len(rs),
                      "build": len(b), "build_ok": sum(r["ok"] for r in b),
                      "refuse": len(f), "refuse_ok": sum(r["ok"] for r in f),
                      "bad_layouts": sum(r["bad"] for r in rs),
                      "translate_p50_ms": 1000 * _pct([r["translate_s"] for r in rs], 0.5),
                      "translate_p95_ms": 1000 * _pct([r["translate_s"] for r in rs], 0.95),
                      "end_to_end_p50_s": _pct([r["seconds"] for r in rs], 0.5),
                      "structured_output": sorted({r["mode"] for r in rs if r["mode"]}),
                      "failures": [{"template": r["template"], "command": r["command"],
                                    "why": r["why"]} for r in rs if not r["ok"]]}
    return out


def run_peer(ref: str, splits: tuple[str, ...], a: argparse.Namespace) -> dict[str, Any]:
    """The legacy row on the same commands, run by this script in a subprocess on the
    package as it was at ``ref`` (``git archive``: no checkout of this repository changes)."""
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "cellspec"],
                          capture_output=True, check=False)
    if arch.returncode != 0:
        raise SystemExit(f"--peer-ref {ref}: git archive failed: "
                         f"{arch.stderr.decode(errors='replace').strip()}")
    with tempfile.TemporaryDirectory(prefix="paraphrase-peer-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(arch.stdout)) as tf:
            tf.extractall(tmp, filter="data")
        env = dict(os.environ, **{PEER_ENV: tmp, "PYTHONPATH": tmp})
        split = splits[0] if len(splits) == 1 else "both"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--adapter", "legacy",
               "--split", split, "--per", str(a.per), "--seed", str(a.seed), "--show", "0"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        raise SystemExit(f"--peer-ref {ref}: the bench failed there:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])["rows"]["legacy"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("dev", "heldout", "both"), default="both")
    ap.add_argument("--per", type=int, default=8, help="commands per template (8)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--adapter", choices=("offline", "legacy"), default="offline",
                    help="legacy: only inside a --peer run (the matcher is not shipped)")
    ap.add_argument("--base-url", help="score an OpenAI-compatible server instead (opt-in)")
    ap.add_argument("--model", help="the model name on --base-url")
    ap.add_argument("--peer", action="store_true",
                    help="also run the legacy phrase matcher on the same commands")
    ap.add_argument("--peer-ref", default=LEGACY_REF,
                    help="the commit whose cellspec.agent.legacy is the peer")
    ap.add_argument("--show", type=int, default=12, help="failures shown per split")
    a = ap.parse_args()
    import cellspec

    _CELL.append(cellspec.load_cell(str(CELL)))
    splits = ("dev", "heldout") if a.split == "both" else (a.split,)
    if a.base_url and a.split == "both":
        splits = ("heldout",)
    cases = generate([t for s in splits for t in load_templates(SPLITS[s], s)], a.per, a.seed)

    def factory(name: str) -> Any:
        if name == "openai":
            from cellspec.agent.openai_adapter import OpenAIAdapter

            ad = OpenAIAdapter(a.model or "local", base_url=a.base_url)
            ad.offline_fallback = False  # score the model alone, not the offline parser
            return lambda: ad
        if name == "legacy":
            try:
                from cellspec.agent.legacy import LegacyAdapter  # type: ignore[import-not-found]
            except ImportError:
                raise SystemExit("--adapter legacy: the phrase matcher is not in this "
                                 "checkout; --peer runs it from --peer-ref") from None

            return LegacyAdapter
        from cellspec.agent.offline import OfflineAdapter

        return OfflineAdapter

    rows: dict[str, Any] = {}
    main_name = "openai" if a.base_url else a.adapter
    rows[main_name] = run(cases, factory(main_name))
    if a.peer and main_name != "legacy":
        rows["legacy"] = run_peer(a.peer_ref, splits, a)
    out = {"bench": "paraphrase", "cell": CELL.name, "per_template": a.per, "seed": a.seed,
           "rows": rows}
    print(json.dumps(out, sort_keys=True))
    e = sys.stderr
    print(f"{'translator':<10}{'split':<9}{'tmpl':>5}{'cmds':>6}{'built ok':>14}"
          f"{'refused ok':>13}{'bad':>5}{'p50 ms':>8}{'p95 ms':>8}{'e2e p50 s':>10}", file=e)
    for name, per in rows.items():
        for split, s in per.items():
            bp = 100 * s["build_ok"] / s["build"] if s["build"] else 0.0
            fp = 100 * s["refuse_ok"] / s["refuse"] if s["refuse"] else 0.0
            print(f"{name:<10}{split:<9}{s['templates']:>5}{s['commands']:>6}"
                  f"{s['build_ok']:>5}/{s['build']:<4}{bp:>5.1f}%"
                  f"{s['refuse_ok']:>4}/{s['refuse']:<3}{fp:>5.1f}%{s['bad_layouts']:>5}"
                  f"{s['translate_p50_ms']:>8.1f}{s['translate_p95_ms']:>8.1f}"
                  f"{s['end_to_end_p50_s']:>10.3f}", file=e)
    for name, per in rows.items():
        for split, s in per.items():
            for f in s["failures"][:a.show]:
                print(f"  {name} {split} FAIL t{f['template']} {f['command']!r}: {f['why']}",
                      file=e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
