"""`cellspec diff --against GITREF` reading OLD and its imports from git, and `cellspec test
--baseline GITREF` failing on looser rules unless declared; in temporary git checkouts. Every
witness the gate prints is re-checked here with clingo."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

from cellspec import check, load_cell
from cellspec.layout import layout_from_obj
from cellspec.testing.baseline import markers

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

LIB = 'rule max_height "{p} is too high: top {p.top}" :\n    forall p: p.top <= 0.15\n'
CELL = """import physical
import "lib/heights.cell"

cell box {
    units m
    workspace x [0, 0.4] y [0, 0.4] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
}

rule left "{p} is too far right" :
    forall p: p.x <= 0.3

test one {
    layout {
        c1 cube at (0.1, 0.1, 0.025)
    }
    expect pass
}
"""


def git(d: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(d), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout with one committed cell (a.cell) importing a committed library."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "heights.cell").write_text(LIB)
    (tmp_path / "a.cell").write_text(CELL)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "rules")
    return tmp_path


def edit(p: Path, old: str, new: str) -> None:
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new))


def test_against_reads_imports_from_the_ref(repo: Path):
    edit(repo / "lib" / "heights.cell", "0.15", "0.2")  # only the imported file changes
    rc, out, err = run_cli(["diff", "--against", "HEAD", repo / "a.cell", "--format", "json",
                            "--rule", "max_height"])
    obj = json.loads(out)
    assert (rc, obj["relation"]) == (1, "looser"), err
    w = obj["rules"][0]["witnesses"]["new_only"]
    v_new = check(load_cell(repo / "a.cell"), layout_from_obj(w))
    assert "max_height" not in {x.rule for x in v_new.violations}
    # the same file against itself in the work tree: no difference
    rc, out, _ = run_cli(["diff", repo / "a.cell", repo / "a.cell", "--rule", "max_height"])
    assert rc == 0
    git(repo, "commit", "-qam", "loosen")
    rc, out, _ = run_cli(["diff", "--against", "HEAD~1", repo / "a.cell", "--rule",
                          "max_height"])
    assert rc == 1 and "looser" in out
    rc, out, _ = run_cli(["diff", "--against", "HEAD", repo / "a.cell"])
    assert rc == 0 and "equivalent" in out


def test_against_a_missing_import_at_the_ref_is_named(repo: Path):
    (repo / "extra.cell").write_text(LIB.replace("max_height", "max_top").replace("0.15",
                                                                                  "0.1"))
    edit(repo / "a.cell", 'import "lib/heights.cell"', 'import "lib/heights.cell"\n'
         'import "extra.cell"')
    rc, out, _ = run_cli(["diff", "--against", "HEAD", repo / "a.cell"])
    assert rc == 1 and "rule max_top (only in NEW): stricter" in out
    git(repo, "commit", "-qam", "import extra.cell")  # extra.cell itself not committed
    rc, _, err = run_cli(["diff", "--against", "HEAD", repo / "a.cell"])
    # the work tree has it, HEAD does not: read from git, not from the disk
    assert rc == 2 and "imported file not found at HEAD: " in err, err
    assert "extra.cell" in err and "a.cell@HEAD:3:1" in err


def test_against_outside_a_checkout_is_a_clear_error(tmp_path: Path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "heights.cell").write_text(LIB)
    (tmp_path / "a.cell").write_text(CELL)
    rc, _, err = run_cli(["diff", "--against", "HEAD", tmp_path / "a.cell"], cwd=tmp_path)
    assert rc == 2 and "not in a git checkout" in err and "Traceback" not in err


def baseline(repo: Path, *extra: str) -> tuple[int, dict, str]:
    rc, out, err = run_cli(["test", str(repo), "--baseline", "HEAD", "--format", "json",
                            *extra])
    assert rc in (0, 1, 2), err
    return rc, json.loads(out)["baseline"], err


def by_file(b: dict) -> dict[str, dict]:
    return {Path(f["file"]).name: f for f in b["files"]}


def test_baseline_fails_a_looser_rule_with_a_rechecked_witness(repo: Path):
    edit(repo / "lib" / "heights.cell", "0.15", "0.2")
    rc, b, _ = baseline(repo)
    f = by_file(b)["a.cell"]
    assert (rc, f["outcome"], f["relation"]) == (1, "failed", "looser")
    [x] = f["findings"]
    assert (x["rule"], x["change"], x["gate"]) == ("max_height", "looser", "fail")
    assert "loosens: max_height" in x["message"]
    assert "passes max_height now, fails it at HEAD" in x["message"]
    lay = layout_from_obj(x["witness"])  # re-checked: passes now, fails the HEAD version
    assert "max_height" not in {v.rule for v in check(load_cell(repo / "a.cell"),
                                                      lay).violations}
    old = repo / "old.cell"
    subprocess.run(["git", "-C", str(repo), "show", "HEAD:lib/heights.cell"], check=True,
                   stdout=(repo / "lib" / "old_heights.cell").open("w"))
    old.write_text(CELL.replace("lib/heights.cell", "lib/old_heights.cell"))
    assert "max_height" in {v.rule for v in check(load_cell(old), lay).violations}
    old.unlink()
    (repo / "lib" / "old_heights.cell").unlink()
    # the library itself is reported, compared through a.cell
    assert by_file(b)["heights.cell"]["outcome"] == "library"
    assert "a.cell" in by_file(b)["heights.cell"]["notes"][0]
    xml = repo / "out.xml"
    rc, out, _ = run_cli(["test", str(repo), "--baseline", "HEAD", "--junit-xml", xml])
    assert rc == 1 and "FAIL" in out and "rule max_height is looser than at HEAD" in out
    import xml.etree.ElementTree as ET

    root = ET.parse(xml).getroot()
    suite = root.find("testsuite[@name='baseline HEAD']")
    assert suite is not None and suite.get("failures") == "1"
    assert root.get("failures") == "1" and root.get("tests") == str(1 + 2)  # 1 test, 2 files
    [fail] = suite.iter("failure")
    assert fail.get("message", "").startswith("rule max_height is looser than at HEAD")


@pytest.mark.parametrize("marker", ["// loosens: max_height", "// loosens: left, max_height",
                                    "    //loosens:max_height   "])
def test_a_marker_anywhere_in_the_file_allows_it(repo: Path, marker: str):
    edit(repo / "lib" / "heights.cell", "0.15", "0.2")
    edit(repo / "a.cell", "cell box {", f"{marker}\ncell box {{")
    rc, b, _ = baseline(repo)
    f = by_file(b)["a.cell"]
    assert (rc, f["outcome"], f["findings"][0]["gate"]) == (0, "passed", "allowed")


def test_allow_looser_flag_and_a_marker_for_another_rule(repo: Path):
    edit(repo / "lib" / "heights.cell", "0.15", "0.2")
    edit(repo / "a.cell", "cell box {", "// loosens: left, nope\ncell box {")
    rc, b, _ = baseline(repo)
    f = by_file(b)["a.cell"]
    assert (rc, f["outcome"]) == (1, "failed")  # the marker names other rules
    assert any("nope" in n for n in f["notes"])
    rc, b, _ = baseline(repo, "--allow-looser")
    assert (rc, by_file(b)["a.cell"]["outcome"]) == (0, "passed")


def test_stricter_and_same_meaning_pass_and_are_reported(repo: Path):
    edit(repo / "a.cell", "p.x <= 0.3", "p.x <= 0.25")
    rc, b, _ = baseline(repo)
    f = by_file(b)["a.cell"]
    assert (rc, f["outcome"], f["relation"]) == (0, "passed", "stricter")
    assert [(x["rule"], x["change"], x["gate"]) for x in f["findings"]] == [
        ("left", "stricter", "ok")]
    git(repo, "commit", "-qam", "stricter")
    edit(repo / "a.cell", "p.x <= 0.25", "not p.x > 0.25")
    rc, b, _ = baseline(repo)
    f = by_file(b)["a.cell"]
    assert (rc, f["relation"]) == (0, "equivalent")
    assert [(x["rule"], x["change"]) for x in f["findings"]] == [("left", "equivalent")]
    rc, out, _ = run_cli(["test", str(repo), "--baseline", "HEAD"])
    assert rc == 0 and "rule left: same meaning as at HEAD" in out


def test_removed_rule_and_lowered_severity_fail(repo: Path):
    edit(repo / "a.cell", 'rule left "{p} is too far right" :\n    forall p: p.x <= 0.3\n', "")
    rc, b, _ = baseline(repo)
    [x] = by_file(b)["a.cell"]["findings"]
    assert (rc, x["rule"], x["change"], x["gate"]) == (1, "left", "removed", "fail")
    assert x["witness"] is not None
    git(repo, "checkout", "a.cell")
    edit(repo / "a.cell", '"{p} is too far right" :', '"{p} is too far right" severity warning :')
    rc, b, _ = baseline(repo)
    f = by_file(b)["a.cell"]
    assert (rc, f["relation"]) == (1, "looser")
    [x] = f["findings"]
    assert (x["rule"], x["change"], x["gate"]) == ("left", "severity error -> warning", "fail")
    assert "left(" in x["message"]  # the whole-set witness fails the rule at HEAD


def test_new_and_unchanged_files(repo: Path):
    (repo / "b.cell").write_text(CELL.replace("cell box", "cell other"))
    rc, b, _ = baseline(repo)
    assert rc == 0
    assert [(Path(f["file"]).name, f["outcome"]) for f in b["files"]] == [("b.cell", "new")]
    assert b["unchanged"] == 2  # a.cell and the library


def test_bad_ref_and_no_checkout_exit_2(repo: Path, tmp_path_factory: pytest.TempPathFactory):
    rc, _, err = run_cli(["test", str(repo), "--baseline", "no-such-ref"])
    assert rc == 2 and "no such commit" in err
    bare = tmp_path_factory.mktemp("nogit")
    (bare / "lib").mkdir()
    (bare / "lib" / "heights.cell").write_text(LIB)
    (bare / "a.cell").write_text(CELL)
    rc, _, err = run_cli(["test", str(bare), "--baseline", "HEAD"], cwd=bare)
    assert rc == 2 and "not in a git checkout" in err
    rc, _, err = run_cli(["test", str(repo), "--allow-looser"])
    assert rc == 2 and "--baseline" in err


def test_markers_parse():
    assert markers(["x // loosens: a, b_2\n//loosens:c\n// loosens a"]) == {"a", "b_2", "c"}


def test_a_limit_is_unknown_and_exits_2_never_a_pass(repo: Path):
    edit(repo / "a.cell", "p.x <= 0.3", "p.x <= 0.25")  # stricter, but not decided in time
    rc, out, err = run_cli(["test", str(repo), "--baseline", "HEAD", "--timeout", "0.001"])
    assert rc == 2, (out, err)
    assert "UNKNOWN" in out and "not proved not looser" in out
    rc, b, _ = baseline(repo, "--time-limit", "120")  # the run bounded as a whole: same answer
    assert (rc, by_file(b)["a.cell"]["outcome"]) == (0, "passed")


def test_a_file_diff_cannot_compare_is_unknown_unless_allowed(repo: Path):
    # only a cylinder type left: nothing diff can place
    edit(repo / "a.cell", "part cube size (0.05, 0.05, 0.05) mass 0.1",
         "part can cylinder radius 0.03 height 0.1 mass 0.2")
    edit(repo / "a.cell", "c1 cube at", "c1 can at")
    edit(repo / "a.cell", "0.025)", "0.05)")
    rc, b, _ = baseline(repo)
    f = by_file(b)["a.cell"]
    assert (rc, f["outcome"]) == (2, "unknown") and "no box part type" in f["notes"][0]
    rc, b, _ = baseline(repo, "--allow-looser")
    assert (rc, by_file(b)["a.cell"]["outcome"]) == (0, "passed")


def test_a_ref_version_that_does_not_load_is_not_comparable(repo: Path):
    good = (repo / "a.cell").read_text()
    (repo / "a.cell").write_text(good.replace("rule left", "rule left left"))  # broken
    git(repo, "commit", "-qam", "broken")
    (repo / "a.cell").write_text(good)
    rc, b, _ = baseline(repo)
    f = by_file(b)["a.cell"]
    assert (rc, f["outcome"]) == (0, "not comparable")
    assert "does not load" in f["notes"][0] and "a.cell@HEAD" in f["notes"][0]


def test_an_incomparable_rule_fails_with_the_looser_witness(repo: Path):
    edit(repo / "a.cell", "p.x <= 0.3", "p.x >= 0.1")
    rc, b, _ = baseline(repo)
    [x] = by_file(b)["a.cell"]["findings"]
    assert (rc, x["rule"], x["change"], x["gate"]) == (1, "left", "incomparable", "fail")
    assert x["message"].startswith("rule left is incomparable with HEAD (looser on some")
    assert x["witness"]["parts"][0]["pos"][0] > 0.3  # passes now, fails HEAD's x <= 0.3
