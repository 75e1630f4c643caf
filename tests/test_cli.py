"""The ``cellspec`` command end to end: check, test and fmt, their output formats, exit
codes and determinism."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from conftest import DATA, LAYOUTS, REPO, STATION, run_cellspec, run_cellspec_process

import cellspec

OK = DATA / "tower_ok.json"
BAD = DATA / "tower_bad.json"
BAD_EXPECTED = [("workspace", ["c3"]), ("no_overlap", ["c1", "c4"]), ("gravity", ["c2"]),
                ("grip_access", ["c4"])]
SOURCE = re.compile(r"^\S+\.cell:\d+:\d+$")


def no_traceback(res) -> None:
    assert "Traceback" not in res.stderr + res.stdout, res.stderr


# --- check ----------------------------------------------------------------------------------

def test_check_pass():
    res = run_cellspec("check", STATION, OK)
    no_traceback(res)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1].startswith("pass")


def test_check_fail_lists_rule_parts_message_source(station_cell):
    res = run_cellspec("check", STATION, BAD)
    no_traceback(res)
    assert res.returncode == 1, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[-1].startswith("fail: 4 violation")
    body = lines[:-1]
    assert len(body) == len(BAD_EXPECTED)
    for line, (rule, parts) in zip(body, BAD_EXPECTED, strict=True):
        src = str(station_cell.rule(rule).source)
        assert line.startswith(f"{src}: {rule}({', '.join(parts)}): "), line
        message = line.split("): ", 1)[1]
        assert parts[0] in message  # the explanation names the part
    assert "c3 leaves the workspace" in res.stdout
    assert "0.225 m" in res.stdout  # with the number that matters


def test_check_json_schema(station_cell):
    res = run_cellspec("check", STATION, BAD, "--format", "json")
    no_traceback(res)
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert out["verdict"] == "fail"
    assert {"verdict", "violations", "stats"} <= set(out)
    assert [(v["rule"], v["parts"]) for v in out["violations"]] == [
        (r, p) for r, p in BAD_EXPECTED]
    for v in out["violations"]:
        assert set(v) == {"rule", "parts", "message", "source"}
        assert isinstance(v["rule"], str) and isinstance(v["message"], str) and v["message"]
        assert isinstance(v["parts"], list) and all(isinstance(p, str) for p in v["parts"])
        assert SOURCE.match(v["source"]), v["source"]
        assert v["source"] == str(station_cell.rule(v["rule"]).source)
    stats = out["stats"]
    assert stats["parts"] == 4
    assert isinstance(stats["parts"], int)
    assert isinstance(stats["seconds"], float) and stats["seconds"] >= 0


def test_check_json_pass():
    res = run_cellspec("check", STATION, OK, "--format", "json")
    assert res.returncode == 0
    out = json.loads(res.stdout)
    assert out["verdict"] == "pass" and out["violations"] == []
    assert out["stats"]["parts"] == 2


def test_check_json_matches_api(station_cell):
    res = run_cellspec("check", STATION, BAD, "--format", "json")
    v = cellspec.check(station_cell, cellspec.load_layout(str(BAD)))
    out = json.loads(res.stdout)
    api = v.to_json()
    del out["stats"]["seconds"], api["stats"]["seconds"]
    assert out.pop("format") == "cellspec.verdict/1"  # the CLI names the format; else equal
    assert out == api


@pytest.mark.parametrize("fmt", ["json", "pretty"])
def test_check_is_deterministic(fmt):
    runs = [run_cellspec("check", STATION, BAD, "--format", fmt) for _ in range(2)]
    if fmt == "json":
        outs = [json.loads(r.stdout) for r in runs]
        for o in outs:
            o["stats"].pop("seconds")
        assert outs[0] == outs[1]
        assert runs[0].stdout.count("\n") == runs[1].stdout.count("\n")
    else:
        strip = [re.sub(r"\d+\.\d+ s\)", "X s)", r.stdout) for r in runs]
        assert strip[0] == strip[1]
    assert runs[0].stderr == runs[1].stderr


def test_check_backends_agree_on_cli():
    a = json.loads(run_cellspec("check", STATION, BAD, "--format", "json").stdout)
    b = json.loads(run_cellspec("check", STATION, BAD, "--format", "json",
                                "--backend", "reference").stdout)
    assert a["violations"] == b["violations"]


def test_check_notes_go_to_stderr(tmp_path):
    lay = tmp_path / "no_order.json"
    obj = json.loads(OK.read_text())
    del obj["order"]
    lay.write_text(json.dumps(obj))
    res = run_cellspec("check", STATION, lay)
    assert res.returncode == 0
    assert "pass" in res.stdout
    assert "note:" in res.stderr and "note:" not in res.stdout
    out = json.loads(run_cellspec("check", STATION, lay, "--format", "json").stdout)
    assert out["verdict"] == "pass"


# --- test ------------------------------------------------------------------------------------

def rule_file(imports: str = "", tests: str = "") -> str:
    return f'import "{STATION.resolve()}"\n{imports}\n{tests}'


TESTS = """\
test tower_passes {
    layout {
        c1 cube at (0.40, 0.20, 0.025)
        c2 cube at (0.40, 0.20, 0.075)
    }
    order (c1, c2)
    expect pass
}

test floating_fails {
    layout {
        c1 cube at (0.40, 0.20, 0.025)
        c2 cube at (0.40, 0.20, 0.125)
    }
    order (c1, c2)
    expect fail gravity(c2)
}

test wrong_expectation {
    layout {
        c1 cube at (0.40, 0.20, 0.025)
        c2 cube at (0.40, 0.20, 0.125)
    }
    order (c1, c2)
    expect pass
}

test file_layout_fails {
    layout "@BAD@"
    expect fail workspace(c3) gravity(c2)
}
""".replace("@BAD@", str(BAD.resolve()))


@pytest.fixture
def suite(tmp_path):
    f = tmp_path / "suite.cell"
    f.write_text(rule_file(tests=TESTS))
    return f


def test_test_pretty_summary_and_failure_details(suite):
    res = run_cellspec("test", suite.name, cwd=suite.parent)
    no_traceback(res)
    assert res.returncode == 1, res.stderr
    lines = res.stdout.rstrip("\n").splitlines()
    assert lines[-1] == "3 passed, 1 failed"
    out = res.stdout
    assert "FAIL suite.cell::wrong_expectation" in out
    assert "PASS suite.cell::tower_passes" in out
    # the failing block shows expected vs actual
    detail = out.split("FAILED suite.cell::wrong_expectation", 1)[1]
    assert re.search(r"expected:\s*pass", detail)
    assert re.search(r"actual:\s*gravity\(c2\)", detail)
    assert "suite.cell:" in detail  # where the test is written


def test_test_all_passing_exits_zero(tmp_path):
    f = tmp_path / "ok.cell"
    f.write_text(rule_file(tests=TESTS.split("test wrong_expectation")[0]))
    res = run_cellspec("test", f.name, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.rstrip("\n").splitlines()[-1] == "2 passed, 0 failed"


def test_test_json(suite):
    res = run_cellspec("test", suite.name, "--format", "json", cwd=suite.parent)
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert out["passed"] == 3 and out["failed"] == 1 and out["errors"] == []
    by_name = {t["name"]: t for t in out["tests"]}
    assert list(by_name) == ["tower_passes", "floating_fails", "wrong_expectation",
                             "file_layout_fails"]
    assert by_name["wrong_expectation"]["status"] == "failed"
    assert by_name["wrong_expectation"]["actual"] == ["gravity(c2)"]
    assert by_name["tower_passes"]["status"] == "passed"
    assert by_name["tower_passes"]["id"] == "suite.cell::tower_passes"
    assert all("seconds" not in t for t in out["tests"])  # no timings unless asked


def test_test_junit_xml(suite):
    xml_path = suite.parent / "out" / "junit.xml"
    xml_path.parent.mkdir()
    res = run_cellspec("test", suite.name, "--junit-xml", xml_path, cwd=suite.parent)
    assert res.returncode == 1
    root = ET.parse(xml_path).getroot()
    assert root.tag == "testsuites"
    assert root.get("tests") == "4" and root.get("failures") == "1"
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == ["tower_passes", "floating_fails",
                                              "wrong_expectation", "file_layout_fails"]
    failures = root.findall(".//testcase/failure")
    assert len(failures) == 1
    assert "gravity(c2)" in (failures[0].text or "")
    suites = root.findall("testsuite")
    assert sum(int(s.get("tests")) for s in suites) == 4
    assert sum(int(s.get("failures")) for s in suites) == 1


def test_test_junit_xml_is_deterministic(suite):
    a, b = suite.parent / "a.xml", suite.parent / "b.xml"
    run_cellspec("test", suite.name, "--junit-xml", a, cwd=suite.parent)
    run_cellspec("test", suite.name, "--junit-xml", b, cwd=suite.parent)
    assert a.read_text() == b.read_text()


@pytest.mark.parametrize(("pattern", "names"), [
    ("tower", ["tower_passes"]),
    ("*_fails", ["floating_fails", "file_layout_fails"]),
    ("suite.cell::floating_fails", ["floating_fails"]),
])
def test_test_k_selects(suite, pattern, names):
    res = run_cellspec("test", suite.name, "-k", pattern, "--format", "json", cwd=suite.parent)
    no_traceback(res)
    out = json.loads(res.stdout)
    assert [t["name"] for t in out["tests"]] == names
    assert res.returncode == 0
    pretty = run_cellspec("test", suite.name, "-k", pattern, cwd=suite.parent)
    assert pretty.stdout.rstrip("\n").splitlines()[-1] == f"{len(names)} passed, 0 failed"


def test_test_k_selecting_nothing_is_an_error(suite):
    """Issue 16: a mistyped -k in CI must not be green."""
    res = run_cellspec("test", suite.name, "-k", "nothing_matches", cwd=suite.parent)
    no_traceback(res)
    assert res.returncode == 2 and "no tests selected" in res.stderr


def test_test_workers_same_results_same_order(tmp_path):
    for k in range(4):
        sub = tmp_path / f"d{k % 2}"
        sub.mkdir(exist_ok=True)
        (sub / f"s{k}.cell").write_text(rule_file(tests=TESTS))
    one = run_cellspec("test", ".", "--format", "json", "--workers", "1", cwd=tmp_path)
    two = run_cellspec("test", ".", "--format", "json", "--workers", "2", cwd=tmp_path)
    no_traceback(two)
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout
    out = json.loads(one.stdout)
    assert out["passed"] == 12 and out["failed"] == 4
    ids = [t["id"] for t in out["tests"]]
    assert ids[0].startswith("d0/s0.cell::") and ids[-1].startswith("d1/s3.cell::")
    p1 = run_cellspec("test", ".", "--workers", "1", cwd=tmp_path)
    p2 = run_cellspec("test", ".", "--workers", "2", cwd=tmp_path)
    assert p1.stdout == p2.stdout


def test_test_repository_rules_workers_agree():
    one = run_cellspec("test", "rules", "--format", "json", "--workers", "1")
    two = run_cellspec("test", "rules", "--format", "json", "--workers", "2")
    no_traceback(one)
    assert one.stdout == two.stdout and one.returncode == two.returncode


# --- fmt ----------------------------------------------------------------------------------------

UGLY = """\
import physical
cell  ugly {units m
  workspace x [0.20,0.70] y [0.05, 0.50]   z [0.00,0.30]
  surface table z 0
      part cube size (0.05,0.05,0.05)
  default gripper parallel opening 0.07 depth 0.02
  tolerance contact 0.001 }
rule tall   "{p} is tall"  severity warning:forall p:p.top<=0.25
test t1 { layout { c1 cube at (0.4,0.2,0.025) } expect pass }
"""


def test_fmt_check_then_rewrite(tmp_path):
    f = tmp_path / "ugly.cell"
    f.write_text(UGLY)
    res = run_cellspec("fmt", "--check", f.name, cwd=tmp_path)
    no_traceback(res)
    assert res.returncode == 1
    assert "ugly.cell" in res.stdout + res.stderr
    assert f.read_text() == UGLY, "--check must not write"
    res = run_cellspec("fmt", f.name, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    formatted = f.read_text()
    assert formatted != UGLY
    res = run_cellspec("fmt", "--check", f.name, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    # the same meaning after formatting
    (tmp_path / "orig.cell").write_text(UGLY)
    a = cellspec.load_cell(str(tmp_path / "orig.cell"))
    b = cellspec.load_cell(str(f))
    assert [(r.name, r.body, r.severity, r.message) for r in a.rules] == [
        (r.name, r.body, r.severity, r.message) for r in b.rules]
    assert a.workspace == b.workspace and a.part_types.keys() == b.part_types.keys()
    assert run_cellspec("test", f.name, cwd=tmp_path).returncode == 0


def test_fmt_is_idempotent_on_repository_rules(tmp_path):
    res = run_cellspec("fmt", "--check", STATION)
    assert res.returncode == 0, res.stdout + res.stderr


# --- help and version -------------------------------------------------------------------

@pytest.mark.parametrize("verb", [[], ["check"], ["test"], ["fmt"]])
def test_help(verb):
    res = run_cellspec(*verb, "--help")
    assert res.returncode == 0
    assert "usage:" in res.stdout
    no_traceback(res)


def test_version():
    res = run_cellspec("--version")
    assert res.returncode == 0
    assert res.stdout.strip() == f"cellspec {cellspec.__version__}"


@pytest.mark.parametrize("args, flag", [
    (("check", STATION, "rules/examples/tower3.json", "--robust", "0.001", "--witness",
      "{missing}/w.json"), "--witness"),
    (("plan", STATION, "rules/examples/tower3.json", "-o", "{missing}/x.json"), "-o"),
    (("repair", STATION, "rules/examples/tower3_broken.json", "-o", "{missing}/x.json"), "-o"),
    (("generate", STATION, "rules/scenarios/designs.cell", "-o", "{missing}/x.json"), "-o"),
    (("test", "rules/stdlib", "--junit-xml", "{missing}/j.xml"), "--junit-xml"),
])
def test_output_into_a_missing_folder_is_bad_input_before_any_work(tmp_path, args, flag):
    missing = tmp_path / "no" / "such"
    res = run_cellspec(*[str(x).format(missing=missing) for x in args])
    assert res.returncode == 2, res.stderr
    assert f"{flag} {missing}" in res.stderr and "no such directory" in res.stderr
    assert "Traceback" not in res.stderr


def test_atomic_write_os_error_names_the_path(tmp_path):
    from cellspec.commands.common import atomic_write
    from cellspec.core.errors import CellspecError

    target = tmp_path / "gone" / "out.json"
    with pytest.raises(CellspecError, match=r"cannot write .*out\.json"):
        atomic_write(target, "{}")
    assert not target.parent.exists()


def test_main_leaves_the_environment_as_it_found_it(tmp_path):
    """``cellspec.cli.main([...])`` in a library caller's process: -v and --urdf-path set
    variables for the verb's worker, and are gone after the call."""
    import contextlib
    import io
    import os

    from cellspec.cli import main

    os.environ.pop("CELLSPEC_DEBUG", None)
    before = os.environ.get("CELLSPEC_URDF_PATH")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = main(["-v", "check", str(STATION), str(LAYOUTS / "wall_9.json"),
                   "--urdf-path", str(tmp_path)])
    assert rc in (0, 1)
    assert "CELLSPEC_DEBUG" not in os.environ
    assert os.environ.get("CELLSPEC_URDF_PATH") == before


# --- real processes: smoke tests (every other CLI test calls cellspec.cli.main in-process) --

@pytest.mark.parametrize("layout, code", [(OK, 0), (BAD, 1), ("nope.json", 2)])
def test_a_real_process_prints_and_exits_as_in_process(layout, code):
    """``python -m cellspec`` (the interpreter's exit code, fresh imports) and the in-process
    runner the tests use agree (all but the timing): pass 0, fail 1, bad input 2."""
    proc = run_cellspec_process("check", STATION, layout, "--format", "json")
    inproc = run_cellspec("check", STATION, layout, "--format", "json")
    no_traceback(proc)
    assert proc.returncode == inproc.returncode == code
    untimed = [re.sub(r'"seconds": [0-9.]+', '"seconds": T', r.stdout) for r in (proc, inproc)]
    assert untimed[0] == untimed[1] and proc.stderr == inproc.stderr


def test_a_real_process_interrupted_exits_130():
    """SIGINT to a running verb: exit 130 and one line, no traceback."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "cellspec", "test", "rules",
                             "--workers", "1"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # past the imports, into the verb
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "cellspec: interrupted" in err and "Traceback" not in err
