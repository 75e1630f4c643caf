"""CLI habits: stdin as `-`, --quiet, shell completion, help on every option, the verb's
usage on a usage error, progress only on a terminal's stderr, and the pictures."""

from __future__ import annotations

import argparse
import io
import json
import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import run_cellspec

from cellspec.cli import build_parser
from cellspec.core import progress

REPO = Path(__file__).resolve().parent.parent
STATION = REPO / "rules" / "cells" / "dual_arm_station.cell"
BROKEN = REPO / "rules" / "examples" / "tower3_broken.json"
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
ENV.pop("CELLSPEC_DEBUG", None)
ENV.pop("CELLSPEC_NO_PROGRESS", None)


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in-process (conftest.run_cellspec) with ``stdin`` as standard input."""
    return run_cellspec(*args, stdin=stdin)


def main_io(capsys, monkeypatch, *args: str, stdin: str = "") -> tuple[int, str, str]:
    """Run the CLI in this process with ``stdin`` as standard input: (code, out, err)."""
    from cellspec.cli import main

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _verbs() -> dict[str, argparse.ArgumentParser]:
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_option_of_every_verb_has_help_text():
    missing = [f"{name} {act.option_strings or act.dest}"
               for name, sp in _verbs().items() for act in sp._actions
               if not isinstance(act, argparse._HelpAction) and not (act.help or "").strip()]
    assert missing == []
    fmt = next(a for a in _verbs()["check"]._actions if "--format" in a.option_strings)
    assert "json" in fmt.help


def test_every_verb_takes_quiet():
    for name, sp in _verbs().items():
        assert "--quiet" in sp._option_string_actions, name


def test_usage_error_after_a_verb_shows_the_verbs_usage(capsys, monkeypatch):
    r = run("check", str(STATION), str(BROKEN), "--bogus")  # the real console, once
    assert r.returncode == 2
    assert r.stderr.startswith("usage: cellspec check ")
    assert "cellspec check: error: unrecognized arguments: --bogus" in r.stderr
    assert "Traceback" not in r.stderr
    code, _, err = main_io(capsys, monkeypatch, "test", "--workers")
    assert code == 2 and err.startswith("usage: cellspec test ")
    code, _, err = main_io(capsys, monkeypatch, "nosuchverb")
    assert code == 2 and err.startswith("usage: cellspec [-h]")


def test_layout_from_stdin_is_the_same_as_from_the_file(capsys, monkeypatch):
    code_f, out_f, _ = main_io(capsys, monkeypatch, "check", str(STATION), str(BROKEN),
                               "--format", "json")
    code_p, out_p, _ = main_io(capsys, monkeypatch, "check", str(STATION), "-", "--format",
                               "json", stdin=BROKEN.read_text())
    assert code_p == code_f == 1
    a, b = json.loads(out_f), json.loads(out_p)
    assert [v["rule"] for v in a["violations"]] == [v["rule"] for v in b["violations"]]
    assert len(b["violations"]) == 5
    code, _, err = main_io(capsys, monkeypatch, "check", str(STATION), "-",
                           stdin='{"parts": [')
    assert code == 2 and err.startswith("<stdin>:1:12: error: invalid JSON")
    code, _, err = main_io(capsys, monkeypatch, "check", str(STATION), "-")
    assert code == 2 and err.startswith("<stdin>:1:1: error: empty layout")
    piped = run("check", str(STATION), "-", stdin=BROKEN.read_text())  # a real pipe
    assert piped.returncode == 1 and piped.stdout.count("error") == 0
    assert len([ln for ln in piped.stdout.splitlines() if "physical.cell" in ln]) == 5


def test_plan_from_stdin_for_check_plan(capsys, monkeypatch):
    plan = REPO / "rules" / "plans" / "sort_cubes_parse.txt"
    cell = REPO / "rules" / "cells" / "sort_cubes.cell"
    code_a, out_a, _ = main_io(capsys, monkeypatch, "check-plan", str(cell), str(plan))
    code_b, out_b, _ = main_io(capsys, monkeypatch, "check-plan", str(cell), "-",
                               stdin=plan.read_text())
    assert code_a == code_b == 1 and out_a == out_b  # RoCo's parse feedback (issue 21)
    assert out_a.startswith("fail: parse")
    code_a, _, err_a = main_io(capsys, monkeypatch, "check-plan", str(cell), str(plan),
                               "--strict")
    code_b, _, err_b = main_io(capsys, monkeypatch, "check-plan", str(cell), "-", "--strict",
                               stdin=plan.read_text())
    assert code_a == code_b == 2
    msg = "7:1: error: expected `NAME ROBOT ACTION ...`"
    assert err_a.splitlines()[-1].startswith(f"rules/plans/sort_cubes_parse.txt:{msg}")
    assert err_b.splitlines()[-1].startswith(f"<stdin>:{msg}")


def test_shell_completion_scripts():
    for shell in ("bash", "zsh", "fish"):
        r = run("completion", shell)
        assert r.returncode == 0, r.stderr
        assert "check" in r.stdout and "--format" in r.stdout
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash to source the script in")
    script = run("completion", "bash").stdout
    probe = script + """
COMP_WORDS=(cellspec che); COMP_CWORD=1; _shtab_cellspec; echo "verbs: ${COMPREPLY[*]}"
COMP_WORDS=(cellspec test --fo); COMP_CWORD=2; _shtab_cellspec; echo "opts: ${COMPREPLY[*]}"
COMP_WORDS=(cellspec test --format ''); COMP_CWORD=3; _shtab_cellspec
echo "vals: ${COMPREPLY[*]}"
"""
    out = subprocess.run([bash, "-c", probe], capture_output=True, text=True, timeout=60,
                         check=False).stdout.splitlines()
    assert out == ["verbs: check check-plan", "opts: --format", "vals: pretty json"]
    bad = run("completion", "powershell")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_test_verb_quiet_drops_pass_lines(capsys, monkeypatch):
    f = REPO / "rules" / "examples" / "inconsistent.cell"
    assert main_io(capsys, monkeypatch, "test", str(f))[1].startswith("PASS ")
    assert main_io(capsys, monkeypatch, "test", str(f), "--quiet")[1] == "1 passed, 0 failed\n"


def _on_a_tty(*args: str) -> tuple[str, str, int]:
    """Run the CLI with stderr on a pseudo-terminal (stdout a pipe): (stdout, tty text, rc)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cellspec", *args], cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait(timeout=300)
    os.close(master)
    return out, b"".join(chunks).decode(errors="replace"), proc.returncode


def test_progress_only_on_a_terminal_and_never_on_stdout():
    f = REPO / "rules" / "examples" / "inconsistent.cell"
    piped = run("test", str(f))
    assert piped.returncode == 0 and piped.stderr == ""
    out, tty, rc = _on_a_tty("test", str(f))
    assert rc == 0
    assert out == piped.stdout  # stdout data unchanged, whatever stderr is
    assert "test:" in tty and "1 passed, 0 failed" in tty  # the bar, drawn on the terminal
    _, quiet_tty, _ = _on_a_tty("test", str(f), "--quiet")
    assert "test:" not in quiet_tty


def test_reporter_streams_results_and_failures():
    buf = io.StringIO()
    with progress.reporting(stream=buf, force=True):
        for k in range(3):
            progress.tick("cases", k + 1, 3, f"case {k}")
        progress.write("FAIL x::y: expected pass")
    text = buf.getvalue()
    assert "cases" in text and "3/3" in text and "case 2" in text
    assert "FAIL x::y: expected pass\n" in text
    buf = io.StringIO()
    with progress.reporting(stream=buf):  # a StringIO is no terminal: nothing drawn
        progress.tick("cases", 1, 3)
        progress.write("never")
    assert buf.getvalue() == ""
    progress.tick("outside", 1, 2)  # no reporter installed: a no-op


def _png(path: Path) -> tuple[int, int, float]:
    """Width, height and the pixel standard deviation of a PNG."""
    import matplotlib.image as mpimg

    img = mpimg.imread(str(path))
    return img.shape[1], img.shape[0], float(img[..., :3].std())


def test_gantt_from_a_schedule(tmp_path: Path):
    from cellspec.dsl.parser import load_cell
    from cellspec.review.plots import draw_gantt, gantt_rows
    from cellspec.solver.cpsat.schedule import ScheduleResult, Slot

    cell = load_cell(STATION)
    sched = ScheduleResult(status="optimal", makespan=6.0, slots=(
        Slot("a1", "irb120", 0.0, 1.0, 2.0), Slot("a2", "irb120", 3.0, 4.0, 5.0),
        Slot("s1", "irb1600", 0.5, 2.0, 6.0)))
    res = SimpleNamespace(schedule=sched, timeline=None, compiled=[])
    rows = gantt_rows(cell, res)
    assert [(r["robot"], r["part"], r["kind"], r["start"], r["end"]) for r in rows] == [
        ("irb120", "a1", "pick", 0.0, 1.0), ("irb120", "a1", "place", 1.0, 2.0),
        ("irb120", "", "wait", 2.0, 3.0), ("irb120", "a2", "pick", 3.0, 4.0),
        ("irb120", "a2", "place", 4.0, 5.0), ("irb1600", "s1", "pick", 0.5, 2.0),
        ("irb1600", "s1", "place", 2.0, 6.0)]
    out = tmp_path / "g.png"
    draw_gantt(rows, out, "test schedule", ["irb120", "irb1600"])
    w, h, std = _png(out)
    assert (w, h) == (1000, 400) and std > 0.05
    again = tmp_path / "g2.png"
    draw_gantt(rows, again, "test schedule", ["irb120", "irb1600"])
    assert again.read_bytes() == out.read_bytes()  # deterministic


def test_bench_charts(tmp_path: Path):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import benchplot
    finally:
        sys.path.pop(0)
    vs = {"bench": "verify_scale", "results": [
        {"n": 100, "check_s": 0.01, "pybullet_s": 0.05, "allpairs_s": 0.02},
        {"n": 1000, "check_s": 0.05, "pybullet_s": 0.5, "allpairs_s": 1.5}]}
    (p,) = benchplot.plot_result(vs, tmp_path / "charts")
    w, h, std = _png(p)
    assert p.name == "verify_scale.png" and (w, h) == (1000, 400) and std > 0.02
    other = {"bench": "solve_scale", "rows": [{"name": "a", "seconds": 1.0},
                                              {"name": "b", "seconds": 2.0}]}
    (q,) = benchplot.plot_result(other, tmp_path / "charts")
    assert q.name == "solve_scale.png" and _png(q)[2] > 0.02


@pytest.mark.slow
def test_sim_gantt_png_and_json(tmp_path: Path):
    out = tmp_path / "gantt.png"
    r = run("sim", str(STATION), str(REPO / "rules" / "world" / "two_towers.json"),
            "--gantt", str(out), "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["gantt"]
    assert {x["robot"] for x in rows} == {"irb120", "irb1600"}
    assert sorted(x["part"] for x in rows if x["kind"] == "action") == [
        "a1", "a2", "b1", "b2", "b3", "s1"]
    w, h, std = _png(out)
    assert (w, h) == (1000, 400) and std > 0.05


def test_elapsed_line_only_past_the_delay(monkeypatch, capsys):
    import time

    monkeypatch.setattr(progress, "wanted", lambda stream=None, quiet=False: not quiet)
    with progress.elapsed("solve", after=0.05):
        time.sleep(0.6)
    assert "solve:" in capsys.readouterr().err
    with progress.elapsed("quick", after=5.0):
        pass  # finished before the delay: nothing drawn
    with progress.elapsed("hushed", after=0.0, quiet=True):
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert "quick" not in err and "hushed" not in err
