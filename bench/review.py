"""Re-verification latency per edit on the review page, for 10, 50 and 500 parts.

For each size N the script builds a deterministic layout of N cubes (towers of 5 on a
0.08 m grid, all rules of the standard library in force, an order given) on a bench
cell written to a temp dir, opens a :class:`ReviewSession` and then a real
:class:`ReviewApp` (a viser server on a free local port, no browser attached), and
times seeded edits of the kinds a reviewer makes: lift a tower's top cube off its
support (the verdict turns to fail), put it back (pass again), type one coordinate
(sideways by 1 mm), select a part.

Columns, per edit (milliseconds, median and 95th percentile over ``--edits`` edits):

* ``verify``: the re-verification itself (``cellspec.solver.verify.check``, clingo);
* ``edit``: the session edit: validation, applying it, re-verification;
* ``page``: what a click costs on the server: the edit through the panel callback plus
  updating the panel (verdict, violation list, fields) and the scene (batched parts,
  labels, gizmo), i.e. everything before the update is sent to the browser.

Target (issue 8): an edit re-verified in <= 100 ms for 50 parts (``page`` p95).
Output: ONE JSON line on stdout, the table on stderr. Exit 1 when a verdict is wrong
(the lifted cube must fail gravity, the restored layout must pass).

    python bench/review.py [--sizes 10,50,500] [--edits 40] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

CELL = """import physical

cell review_bench {
    units m
    workspace x [0, 2.0] y [0, 2.0] z [0, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
}
"""
HEIGHT = 5
PITCH = 0.08
TARGET_MS = 100.0


def layout_obj(n: int) -> dict:
    """n cubes in towers of HEIGHT on a PITCH grid; order bottom-up, tower by tower."""
    parts = []
    per_row = 20
    k = 0
    while k < n:
        t = k // HEIGHT
        level = k % HEIGHT
        x = 0.1 + PITCH * (t % per_row)
        y = 0.1 + PITCH * (t // per_row)
        parts.append({"id": f"p{k}", "type": "cube",
                      "pos": [round(x, 4), round(y, 4), round(0.025 + 0.05 * level, 4)]})
        k += 1
    return {"units": "m", "parts": parts, "order": [p["id"] for p in parts]}


def _stats(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return statistics.median(xs), p95


BROWSER = False
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync"]


def run_browser(app_factory, clicks: int) -> dict:
    """Round trips in headless Chromium: page load to the first verdict, then clicks on
    'earlier'/'later' for the top cube of the first tower (support_order fails, then
    passes again), each timed from the click to the new verdict in the DOM."""
    from playwright.sync_api import sync_playwright

    app = app_factory()
    url = app.start()
    out: dict = {}
    try:
        with tempfile.TemporaryDirectory() as prof, sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(
                prof, executable_path=CHROMIUM, headless=True, args=FLAGS,
                viewport={"width": 1400, "height": 900})
            try:
                page = ctx.pages[0] if ctx.pages else ctx.new_page()
                page.set_default_timeout(60_000)
                t0 = time.perf_counter()
                page.goto(url)
                page.get_by_text("verdict: pass").wait_for()
                out["browser_load_s"] = round(time.perf_counter() - t0, 3)
                page.get_by_label("part", exact=True).click()
                page.get_by_role("option", name=f"p{HEIGHT - 1}", exact=True).click()
                page.get_by_text(f"selected p{HEIGHT - 1}", exact=True).wait_for()
                ms = []
                for k in range(max(2, clicks)):
                    name, want = (("earlier", "verdict: fail") if k % 2 == 0 else
                                  ("later", "verdict: pass"))
                    t0 = time.perf_counter()
                    page.get_by_role("button", name=name, exact=True).click()
                    page.get_by_text(want).wait_for()
                    ms.append((time.perf_counter() - t0) * 1000)
                b50, b95 = _stats(ms)
                out.update(browser_ms_p50=round(b50, 1), browser_ms_p95=round(b95, 1))
            finally:
                ctx.close()
    finally:
        app.stop()
    return out


def run_size(cell, n: int, edits: int, seed: int) -> dict:
    """Time edits on a session and through the page for one size; checks the verdicts."""
    from cellspec.layout import layout_from_obj
    from cellspec.review.app import ReviewApp
    from cellspec.review.session import ReviewSession

    obj = layout_obj(n)
    rng = random.Random(seed)
    tops = [p for i, p in enumerate(obj["parts"])
            if i % HEIGHT == HEIGHT - 1 or i == n - 1]
    wrong: list[str] = []

    def edit_cycle(move, select) -> list[tuple[str, float, float]]:
        out = []
        p = rng.choice(tops)
        x, y, z = p["pos"]
        r = move(p["id"], [x, y, z + 0.02])
        if r.verdict.verdict != "fail" or not any(v.rule == "gravity" and v.parts == (p["id"],)
                                                  for v in r.verdict.violations):
            wrong.append(f"N={n}: lifting {p['id']} did not fail gravity")
        out.append(("lift", r.seconds))
        r = move(p["id"], [x, y, z])
        if r.verdict.verdict != "pass":
            wrong.append(f"N={n}: restoring {p['id']} did not pass")
        out.append(("restore", r.seconds))
        r = move(p["id"], [x + 0.001, y, z])  # 1 mm sideways: still resting, still passes
        if r.verdict.verdict != "pass":
            wrong.append(f"N={n}: 1 mm shift of {p['id']} did not pass")
        move(p["id"], [x, y, z])
        select(p["id"])
        return out

    # 1) the session alone
    s = ReviewSession(cell, layout_from_obj(obj, f"<bench {n}>"))
    if s.verdict.verdict != "pass":
        wrong.append(f"N={n}: the bench layout does not pass: {s.verdict.violations[:3]}")
    verify_ms, edit_ms = [], []

    def move_session(pid, pos):
        t0 = time.perf_counter()
        r = s.move(pid, pos)
        edit_ms.append((time.perf_counter() - t0) * 1000)
        verify_ms.append(r.seconds * 1000)
        return r

    for _ in range(max(1, -(-edits // 4))):  # four moves per cycle
        edit_cycle(move_session, lambda pid: s.select([pid]))

    # 2) through the page: the panel callback, session edit, panel + scene update
    s2 = ReviewSession(cell, layout_from_obj(obj, f"<bench {n}>"))
    app = ReviewApp(s2, Path(tempfile.gettempdir()) / "review_bench_out.json", port=0,
                    robots=False)
    app.start()
    page_ms: list[float] = []
    try:
        def move_page(pid, pos):
            if s2.selected != (pid,):
                app.dd_part.value = pid  # selecting is an edit of its own (not timed here)
            i = s2.ids.index(pid)
            t0 = time.perf_counter()
            # what the browser sends for a typed coordinate: the field's new value, which
            # runs the panel callback (edit, re-verification, panel and scene update)
            for k in range(3):
                if pos[k] != s2.pos[i][k]:
                    app.n_xyz[k].value = pos[k]
            page_ms.append((time.perf_counter() - t0) * 1000)
            return type("R", (), {"verdict": s2.verdict, "seconds": s2.verify_seconds})

        for _ in range(max(1, -(-edits // 4))):  # four moves per cycle
            edit_cycle(move_page, lambda pid: None)
    finally:
        app.stop()
    browser = run_browser(app_factory=lambda: ReviewApp(
        ReviewSession(cell, layout_from_obj(obj, f"<bench {n}>")),
        Path(tempfile.gettempdir()) / "review_bench_out.json", port=0, robots=False),
        clicks=edits) if BROWSER else None
    v50, v95 = _stats(verify_ms)
    e50, e95 = _stats(edit_ms)
    p50, p95 = _stats(page_ms)
    return {"parts": n, "edits": len(edit_ms), "verify_ms_p50": round(v50, 2),
            "verify_ms_p95": round(v95, 2), "edit_ms_p50": round(e50, 2),
            "edit_ms_p95": round(e95, 2), "page_ms_p50": round(p50, 2),
            "page_ms_p95": round(p95, 2), "wrong": wrong,
            **({} if browser is None else browser)}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; JSON on stdout, table on stderr; exit 1 on a wrong verdict."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,50,500")
    ap.add_argument("--edits", type=int, default=40, help="edits timed per size and mode")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--browser", action="store_true",
                    help="also time click-to-verdict round trips in headless Chromium "
                    f"({CHROMIUM}, playwright)")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import benchplot

    benchplot.add_plot_option(ap)
    a = ap.parse_args(argv)
    global BROWSER
    BROWSER = a.browser
    sizes = [int(x) for x in a.sizes.split(",") if x]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from cellspec.dsl.parser import load_cell

    with tempfile.TemporaryDirectory() as d:
        cp = Path(d) / "review_bench.cell"
        cp.write_text(CELL)
        cell = load_cell(cp)
        rows = []
        with benchplot.reporting():  # per-size progress on a terminal's stderr
            for k, n in enumerate(sizes):
                benchplot.tick("sizes", k, len(sizes), f"{n} parts")
                rows.append(run_size(cell, n, a.edits, a.seed))
    wrong = [w for r in rows for w in r.pop("wrong")]
    r50 = next((r for r in rows if r["parts"] == 50), None)
    met = None if r50 is None else r50["page_ms_p95"] <= TARGET_MS
    out = {"bench": "review", "machine": platform.machine(),
           "python": platform.python_version(), "rows": rows,
           "target": {"n50_page_ms_p95_max": TARGET_MS}, "target_met": met, "wrong": wrong}
    print(json.dumps(out))
    if a.plot:
        benchplot.plot_result(out, a.plot)
    hdr = ("parts", "edits", "verify p50", "verify p95", "edit p50", "edit p95", "page p50",
           "page p95")
    print("| " + " | ".join(hdr) + " |", file=sys.stderr)
    print("|" + "---:|" * len(hdr), file=sys.stderr)
    for r in rows:
        print(f"| {r['parts']} | {r['edits']} | {r['verify_ms_p50']:.1f} | "
              f"{r['verify_ms_p95']:.1f} | {r['edit_ms_p50']:.1f} | {r['edit_ms_p95']:.1f} | "
              f"{r['page_ms_p50']:.1f} | {r['page_ms_p95']:.1f} |", file=sys.stderr)
    if a.browser:
        print("\n| parts | page load to verdict s | click to verdict p50 ms | p95 ms |",
              file=sys.stderr)
        print("|---:|---:|---:|---:|", file=sys.stderr)
        for r in rows:
            print(f"| {r['parts']} | {r['browser_load_s']:.2f} | {r['browser_ms_p50']:.0f} | "
                  f"{r['browser_ms_p95']:.0f} |", file=sys.stderr)
    print("(milliseconds per edit)", file=sys.stderr)
    if met is not None:
        print(f"target: 50 parts, page p95 <= {TARGET_MS:.0f} ms: "
              f"{'ok' if met else 'MISS'} ({r50['page_ms_p95']:.1f} ms)", file=sys.stderr)
    for w in wrong:
        print(f"FAIL {w}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
