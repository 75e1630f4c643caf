"""The review page in a real browser: headless Chromium (Debian's ``chromium``) driven by
playwright. Load a failing layout, read the violations from the DOM, fix the layout
through the panel fields, see the verdict turn to pass, Accept, and check the written
file with ``cellspec check``.

Skipped (with the reason) only where playwright or chromium is missing; ``.ci/run``
installs chromium. ``CELLSPEC_DOCS_SCREENSHOT=1`` also saves ``docs/review.png``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, STATION, run_cellspec

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync"]
BROKEN = REPO / "rules" / "examples" / "tower3_broken.json"
WAIT_MS = 30_000


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return (f"no Chromium at {CHROMIUM} (Debian package 'chromium'; .ci/run installs it "
                "with apt-get when it can)")
    return None


@contextlib.contextmanager
def _browser(tmp_path: Path, height: int) -> Iterator[Any]:
    """A page in headless Debian Chromium with a fresh profile, closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True,
            args=FLAGS, viewport={"width": 1400, "height": height})
        try:
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.set_default_timeout(WAIT_MS)
            yield page
        finally:
            ctx.close()


def _violation_buttons(page) -> list[str]:
    """The violation buttons in the panel, e.g. 'gravity(c3)'."""
    names = page.get_by_role("button").all_inner_texts()
    return [n.strip() for n in names if re.fullmatch(r"[A-Za-z_][\w.-]*\([^()]*\)", n.strip())]


def _select_part(page, pid: str) -> None:
    """Pick a part in the dropdown and wait for the server to confirm the selection (the
    dropdown itself changes in the browser before the server knows)."""
    page.get_by_label("part", exact=True).click()
    page.get_by_role("option", name=pid, exact=True).click()
    page.get_by_text(f"selected {pid}", exact=True).wait_for()


def _set_field(page, label: str, value: str) -> None:
    """Type a value into a panel field as a person would (select all, type, Enter)."""
    box = page.get_by_label(label, exact=True)
    box.click()
    box.press("Control+a")
    box.press_sequentially(value, delay=30)
    box.press("Enter")


def test_review_page_fix_and_accept(tmp_path: Path) -> None:
    """Fix tower3_broken through the panel fields, see pass, Accept, re-check the file."""
    why = _missing()
    if why:
        pytest.skip(why)
    from playwright.sync_api import expect

    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.review.app import ReviewApp
    from cellspec.review.session import ReviewSession
    from cellspec.solver.verify import check

    layout_path = tmp_path / "tower3_broken.json"
    shutil.copy(BROKEN, layout_path)
    out = tmp_path / "accepted.json"
    cell = load_cell(STATION)
    layout = load_layout(layout_path)
    expected = check(cell, layout)
    assert expected.verdict == "fail"
    session = ReviewSession(cell, layout)
    app = ReviewApp(session, out, host="127.0.0.1", port=0)
    url = app.start()
    assert url.startswith("http://127.0.0.1:")
    try:
        with _browser(tmp_path, 900) as page:
            page.goto(url)
            page.get_by_text("verdict: fail (5 violations)").wait_for()

            # the violation list in the DOM is the verdict of `cellspec check`
            want = [f"{v.rule}({', '.join(v.parts)})" for v in expected.violations]
            page.get_by_role("button", name=want[-1], exact=True).wait_for()
            assert _violation_buttons(page) == want
            body = page.inner_text("body")
            for v in expected.violations:
                assert v.message in body
                assert v.source in body  # file:line:col
            page.screenshot(path=str(tmp_path / "review_fail.png"))
            if os.environ.get("CELLSPEC_DOCS_SCREENSHOT") == "1":
                _docs_screenshot(page)

            # c2 sinks into c1: put it on top of c1 (part picked in the dropdown)
            _select_part(page, "c2")
            assert session.selected == ("c2",)
            _set_field(page, "x", "0.4")
            _set_field(page, "z", "0.075")
            page.get_by_role("button", name="no_overlap(c1, c2)", exact=True).wait_for(
                state="detached")

            # clicking a violation selects its parts: the fields then show c3
            page.get_by_role("button", name="gravity(c3)", exact=True).click()
            page.get_by_text("selected c3", exact=True).wait_for()
            assert session.selected == ("c3",)
            expect(page.get_by_label("z", exact=True)).to_have_value("0.2")
            _set_field(page, "z", "0.125")
            page.get_by_role("button", name="gravity(c3)", exact=True).wait_for(
                state="detached")

            # the order: c1 must come before c2
            _select_part(page, "c1")
            page.get_by_role("button", name="earlier", exact=True).click()
            page.get_by_text("verdict: pass").wait_for()
            assert _violation_buttons(page) == []
            page.screenshot(path=str(tmp_path / "review_pass.png"))

            page.get_by_role("button", name="Accept", exact=True).click()
            page.get_by_text("accepted: written to").wait_for()
            page.screenshot(path=str(tmp_path / "review_accepted.png"))
        assert app.wait(10) == "accept"
    finally:
        app.stop()
    assert (tmp_path / "review_fail.png").stat().st_size > 10_000
    assert out.exists()
    r = run_cellspec("check", STATION, out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("pass")
    acc = load_layout(out)
    assert acc.order == ("c1", "c2", "c3")
    assert acc.pos.tolist() == [[0.4, 0.2, 0.025], [0.4, 0.2, 0.075], [0.4, 0.2, 0.125]]
    assert layout_path.read_bytes() == BROKEN.read_bytes()  # the input is never touched


SHAPES = REPO / "rules" / "scenarios" / "shapes.cell"


def test_review_page_turns_a_part(tmp_path: Path) -> None:
    """A cube turned 45 degrees overlaps its neighbour by a corner: turn it with the rotate
    buttons (+15 degrees a click) and the yaw field until it is square to it, see the
    verdict turn to pass, Accept, and check the written file (yaw kept, nothing else
    moved)."""
    why = _missing()
    if why:
        pytest.skip(why)
    import json

    from playwright.sync_api import expect

    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.review.app import ROTATE_BUTTONS, ReviewApp
    from cellspec.review.session import ReviewSession

    layout_path = tmp_path / "turned.json"
    layout_path.write_text(json.dumps({"units": "m", "parts": [
        {"id": "a", "type": "cube", "pos": [0.40, 0.20, 0.025], "yaw": 45},
        {"id": "b", "type": "cube", "pos": [0.45, 0.20, 0.025]}]}))
    out = tmp_path / "accepted.json"
    session = ReviewSession(load_cell(SHAPES), load_layout(layout_path))
    app = ReviewApp(session, out, host="127.0.0.1", port=0)
    url = app.start()
    try:
        with _browser(tmp_path, 900) as page:
            page.goto(url)
            page.get_by_text("verdict: fail (1 violation)").wait_for()
            assert _violation_buttons(page) == ["no_overlap(a, b)"]
            _select_part(page, "a")
            yaw = page.get_by_label("yaw (deg)", exact=True)
            expect(yaw).to_have_value("45")
            page.get_by_role("button", name=ROTATE_BUTTONS[1], exact=True).click()
            expect(yaw).to_have_value("60")  # the server turned it and says so
            assert session.yaw.tolist() == [60.0, 0.0]
            assert _violation_buttons(page) == ["no_overlap(a, b)"]  # still a corner in b
            _set_field(page, "yaw (deg)", "90")
            page.get_by_text("verdict: pass").wait_for()
            assert _violation_buttons(page) == []
            page.get_by_role("button", name="Accept", exact=True).click()
            page.get_by_text("accepted: written to").wait_for()
        assert app.wait(10) == "accept"
    finally:
        app.stop()
    r = run_cellspec("check", SHAPES, out)
    assert r.returncode == 0, r.stdout + r.stderr
    acc = json.loads(out.read_text())
    assert [(p["id"], p["pos"], p.get("yaw")) for p in acc["parts"]] == [
        ("a", [0.4, 0.2, 0.025], 90.0), ("b", [0.45, 0.2, 0.025], None)]


def _docs_screenshot(page) -> None:
    """The README's screenshot: the failing layout with its violations."""
    close = page.locator("button.mantine-Notification-closeButton")
    if close.count():
        close.first.click()
    page.wait_for_timeout(1500)
    page.screenshot(path=str(REPO / "docs" / "review.png"))


@pytest.mark.slow
def test_plan_replay_in_browser(tmp_path: Path) -> None:
    """A simulated plan replays in the page: the time field moves the robots (the panel
    names what each robot does), Play advances the clock, the δ-against-ε plot is there."""
    why = _missing()
    if why:
        pytest.skip(why)
    import json

    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.review.app import ReviewApp
    from cellspec.review.replay import load_plan
    from cellspec.review.session import ReviewSession
    from cellspec.robots.sim import simulate

    cell = load_cell(STATION)
    layout = load_layout(REPO / "rules" / "examples" / "tower3.json")
    res = simulate(cell, layout)
    plan_p, traj_p = tmp_path / "plan.json", tmp_path / "traj.json"
    plan_p.write_text(json.dumps(res.plan_json(cell, layout)))
    traj_p.write_text(json.dumps(res.execution.trajectories_json()))
    plan = load_plan(str(plan_p), cell, str(traj_p))
    app = ReviewApp(ReviewSession(cell, layout), tmp_path / "out.json", port=0, plan=plan)
    url = app.start()
    c2 = app.replay.parts["c2"]
    mid = round((c2["grasp"] + c2["release"]) / 2, 2)
    try:
        with _browser(tmp_path, 1000) as page:
            page.goto(url)
            page.get_by_text("verdict: pass").wait_for()
            page.get_by_text("δ(t) = |q_exec − q_plan| against ε").wait_for()
            # the slider's label points at the slider; its number box sits beside it
            sid = page.locator("label", has_text="time (s)").get_attribute("for")
            box = page.locator(f"[id='{sid}']").locator("xpath=..").locator(
                "input.mantine-NumberInput-input")
            box.click()
            box.press("Control+a")
            box.press_sequentially(f"{mid:.2f}", delay=30)
            box.press("Enter")
            page.get_by_text(re.compile(
                rf"^t = {mid:.2f} s .*{c2['robot']}: carries c2")).wait_for()
            page.wait_for_timeout(1500)  # let the canvas catch up before the picture
            page.screenshot(path=str(tmp_path / "replay.png"))
            page.get_by_role("button", name="Play", exact=True).click()
            page.wait_for_function(
                "(t0) => [...document.querySelectorAll('p, span, div')].some("
                "e => /^t = [0-9.]+ s/.test(e.textContent) && "
                "parseFloat(e.textContent.slice(4)) > t0 + 0.3)", arg=mid)
            page.get_by_role("button", name="Pause", exact=True).click()
    finally:
        app.stop()


@pytest.mark.slow
def test_cli_accept_exits_0_and_reject_exits_1(tmp_path: Path) -> None:
    """The verb itself: Accept in the page ends `cellspec review` with exit 0 and the file
    written; Reject ends it with exit 1 and nothing written."""
    why = _missing()
    if why:
        pytest.skip(why)
    import json
    import subprocess
    import sys


    tower = REPO / "rules" / "examples" / "tower3.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def start(out: Path) -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cellspec", "review", str(STATION), str(tower), "--port",
             "0", "--no-robots", "--format", "json", "-o", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
        return proc, json.loads(proc.stdout.readline())["address"]

    procs = []
    try:
        with _browser(tmp_path, 900) as page:
            for button, out in (("Accept", tmp_path / "a.json"),
                                ("Reject", tmp_path / "r.json")):
                proc, url = start(out)
                procs.append(proc)
                page.goto(url)
                page.get_by_text("verdict: pass").wait_for()
                page.get_by_role("button", name=button, exact=True).click()
                page.get_by_text("the review is over").wait_for()
                stdout, stderr = proc.communicate(timeout=30)
                last = json.loads(stdout.strip().splitlines()[-1])
                assert "Traceback" not in stderr
                if button == "Accept":
                    assert proc.returncode == 0, stderr
                    assert last["decision"] == "accept" and last["output"] == str(out)
                    r = run_cellspec("check", STATION, out)
                    assert r.returncode == 0 and r.stdout.startswith("pass")
                else:
                    assert proc.returncode == 1, stderr
                    assert last["decision"] == "reject" and last["output"] is None
                    assert not out.exists()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
