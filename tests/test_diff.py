"""`cellspec diff`: exact relations for tightened, loosened, rewritten, moved and removed
rules (a count and an exists among them), every witness re-checked here with clingo, the
JSON against its schema, and a brute-force differential over a small grid."""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest
from conftest import run_cli
from referencing import Registry, Resource

from cellspec import check, load_cell
from cellspec.layout import layout_from_obj
from cellspec.schemas import NAMES, schema

HEAD = """{imp}
cell box {{
    units m
    workspace x [0, 0.4] y [0, 0.4] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot arm model panda base (0, 0, 0) gripper parallel opening 0.08 depth 0.02
    keepout pillar box x [{k0}, {k1}] y [0.1, 0.2] z [0, 0.3]
}}
"""
HEIGHT = 'rule max_height "{{p}} is too high: top {{p.top}}" :\n    forall p: p.top <= {h}\n'
PLAIN = """
rule left "{p} is too far right" :
    forall p: p.x <= LEFT

rule apart "{p} and {q} are too close" :
    forall {p, q}: not near(p, q, GAP)

rule few_high "too many high parts" :
    count(p: p.z > 0.1) <= 1

rule somewhere "no part on the left" :
    exists p: p.x <= 0.1
"""


def cell(tmp_path, name: str, *, physical: bool = True, h: float | None = 0.2,
         keep=(0.1, 0.2), extra: str = "") -> str:
    """A test cell: the standard library (or not), a max_height rule (or not), more rules."""
    text = HEAD.format(imp="import physical" if physical else "", k0=keep[0], k1=keep[1])
    if h is not None:
        text += HEIGHT.format(h=h)
    f = tmp_path / f"{name}.cell"
    f.write_text(text + extra)
    return str(f)


def diff(*args) -> tuple[int, dict]:
    rc, out, err = run_cli(["diff", *args, "--format", "json"])
    assert rc in (0, 1, 2), err
    obj = json.loads(out)
    registry = Registry().with_resources(
        (schema(n)["$id"], Resource.from_contents(schema(n))) for n in NAMES)
    jsonschema.Draft202012Validator(schema("diff"), registry=registry).validate(obj)
    return rc, obj


def by_rule(obj: dict) -> dict[str, dict]:
    return {r["rule"]: r for r in obj["rules"]}


def violated(path: str, layout: dict) -> set[str]:
    """The rules clingo finds violated (errors, warnings and unmet preferences) by a layout."""
    v = check(load_cell(path), layout_from_obj(layout))
    return {x.rule for x in (*v.violations, *v.warnings, *v.preferences)}


def assert_witnesses(old: str, new: str, entry: dict, rules: set[str] | None = None) -> None:
    """Each witness passes one file and fails the other on ``rules`` (default: the entry's)."""
    names = rules or {entry["rule"]}
    w = entry["witnesses"]
    if w["old_only"] is not None:
        assert not violated(old, w["old_only"]) & names
        assert violated(new, w["old_only"]) & names
    if w["new_only"] is not None:
        assert not violated(new, w["new_only"]) & names
        assert violated(old, w["new_only"]) & names


def test_tightened_is_stricter_with_a_rechecked_witness(tmp_path):
    old, new = cell(tmp_path, "old"), cell(tmp_path, "new", h=0.15)
    rc, obj = diff(old, new)
    assert (rc, obj["relation"], obj["parts"]) == (1, "stricter", 3)
    r = by_rule(obj)
    assert r["max_height"]["relation"] == "stricter"
    assert r["max_height"]["witnesses"]["new_only"] is None
    assert_witnesses(old, new, r["max_height"])
    # three cubes are needed: gravity keeps a tower of two below 0.15
    w = obj["witnesses"]
    assert w["new_only"] is None and len(w["old_only"]["parts"]) == 3
    assert_witnesses(old, new, {"rule": "*", "witnesses": w},
                     {"workspace", "no_overlap", "gravity", "keepout", "max_height"})
    assert {k: v["relation"] for k, v in r.items() if k != "max_height"} == {
        "workspace": "equivalent", "no_overlap": "equivalent", "gravity": "equivalent",
        "keepout": "equivalent", "support_order": "equivalent", "grip_access": "equivalent",
        "stability": "equivalent", "stability_stages": "equivalent"}
    assert "not compared" in r["stability"]["reason"]
    again = diff(old, new)[1]
    assert {**again, "seconds": 0} == {**obj, "seconds": 0}  # same input, same answer
    rc, obj = diff(old, new, "--parts", "2")
    assert (rc, obj["relation"]) == (0, "equivalent")  # what "up to N parts" means
    assert by_rule(obj)["max_height"]["relation"] == "stricter"  # the rule alone differs


def test_loosened_is_looser_and_pretty_output_names_the_numbers(tmp_path):
    old, new = cell(tmp_path, "old", h=0.15), cell(tmp_path, "new")
    rc, obj = diff(old, new)
    assert (rc, obj["relation"]) == (1, "looser")
    assert_witnesses(old, new, by_rule(obj)["max_height"])
    rc, out, _ = run_cli(["diff", old, new, "--rule", "max_height"])
    assert rc == 1
    assert "rule max_height: looser" in out
    assert "passes NEW, fails OLD max_height(cube1): cube1 is too high: top 0.1" in out


def test_rewritten_with_the_same_meaning_is_equivalent(tmp_path):
    extra = PLAIN.replace("LEFT", "0.2").replace("GAP", "0.03")
    same = (extra.replace("p.x <= 0.2", "p.x - 0.2 <= 0")
            .replace("count(p: p.z > 0.1) <= 1", "count(p: p.z > 0.1) < 2")
            .replace("exists p: p.x <= 0.1", "not forall p: p.x > 0.1"))
    old = cell(tmp_path, "old", physical=False, h=None, extra=extra)
    new = cell(tmp_path, "new", physical=False, h=None, extra=same)
    rc, obj = diff(old, new)
    assert (rc, obj["relation"]) == (0, "equivalent")
    assert {r["relation"] for r in obj["rules"]} == {"equivalent"}
    assert obj["witnesses"] == {"old_only": None, "new_only": None}


def test_count_and_exists_changes(tmp_path):
    extra = PLAIN.replace("LEFT", "0.2").replace("GAP", "0.03")
    changed = (extra.replace("count(p: p.z > 0.1) <= 1", "count(p: p.z > 0.1) <= 0")
               .replace("exists p: p.x <= 0.1", "exists p: p.x <= 0.2"))
    old = cell(tmp_path, "old", physical=False, h=None, extra=extra)
    new = cell(tmp_path, "new", physical=False, h=None, extra=changed)
    rc, obj = diff(old, new)
    r = by_rule(obj)
    assert (rc, obj["relation"]) == (1, "incomparable")
    assert (r["few_high"]["relation"], r["somewhere"]["relation"]) == ("stricter", "looser")
    assert (r["left"]["relation"], r["apart"]["relation"]) == ("equivalent", "equivalent")
    for k in ("few_high", "somewhere"):
        assert_witnesses(old, new, r[k])


def test_keepout_moved_is_incomparable(tmp_path):
    old, new = cell(tmp_path, "old"), cell(tmp_path, "new", keep=(0.15, 0.25))
    rc, obj = diff(old, new)
    r = by_rule(obj)
    assert (rc, obj["relation"], r["keepout"]["relation"]) == (1, "incomparable",
                                                               "incomparable")
    assert_witnesses(old, new, r["keepout"])
    # the order rules read no zone: identical in both files, left out, not unknown
    assert r["support_order"]["relation"] == "equivalent"


def test_keepout_grown_is_stricter_and_a_rule_the_workspace_implies_changes_nothing(tmp_path):
    old, new = cell(tmp_path, "old"), cell(tmp_path, "new", keep=(0.1, 0.25))
    rc, obj = diff(old, new)
    assert (rc, obj["relation"], by_rule(obj)["keepout"]["relation"]) == (1, "stricter",
                                                                        "stricter")
    assert_witnesses(old, new, by_rule(obj)["keepout"])
    redundant = 'rule in_room "{p} too far" :\n    forall p: p.x <= 0.9\n'
    rc, obj = diff(old, cell(tmp_path, "red", extra=redundant))
    assert (rc, obj["relation"]) == (0, "equivalent")  # the workspace rule implies it
    # alone too: no position in the searched box (around the workspace) violates it
    assert by_rule(obj)["in_room"]["relation"] == "equivalent"
    assert by_rule(obj)["in_room"]["in_old"] is False


def test_witness_dir_writes_the_witnesses(tmp_path):
    old, new = cell(tmp_path, "old"), cell(tmp_path, "new", h=0.15)
    rc, _, err = run_cli(["diff", old, new, "--witness-dir", str(tmp_path / "w")])
    assert rc == 1, err
    files = sorted(p.name for p in (tmp_path / "w").iterdir())
    assert files == ["max_height.old_only.json", "old_only.json"]
    lay = json.loads((tmp_path / "w" / "old_only.json").read_text())
    assert "max_height" in violated(new, lay) and "max_height" not in violated(old, lay)


def test_against_a_git_ref_reads_old_from_git(tmp_path):
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    f = cell(tmp_path, "r")
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "r.cell"], check=True)
    subprocess.run([*git, "commit", "-qm", "r"], check=True)
    (tmp_path / "r.cell").write_text((tmp_path / "r.cell").read_text().replace(
        "p.top <= 0.2", "p.top <= 0.15"))
    rc, obj = diff("--against", "HEAD", f)
    assert (rc, obj["relation"]) == (1, "stricter")
    rc, _, err = run_cli(["diff", "--against", "no-such-ref", f])
    assert rc == 2 and "no such commit" in err
    rc, _, err = run_cli(["diff", f])
    assert rc == 2 and "OLD.cell NEW.cell" in err


def test_rule_removed_is_looser(tmp_path):
    old, new = cell(tmp_path, "old", h=0.15), cell(tmp_path, "new", h=None)
    rc, obj = diff(old, new)
    r = by_rule(obj)["max_height"]
    assert (rc, obj["relation"], r["relation"], r["in_new"]) == (1, "looser", "looser", False)
    assert_witnesses(old, new, r)


def test_a_differing_rule_that_cannot_be_compared_is_unknown_and_named(tmp_path):
    order = 'rule first "{p} first" :\n    forall p, q: p.x < q.x implies before(p, q)\n'
    old, new = cell(tmp_path, "old"), cell(tmp_path, "new", extra=order)
    rc, obj = diff(old, new)
    assert (rc, obj["relation"]) == (2, "unknown")
    first = by_rule(obj)["first"]
    assert first["relation"] == "unknown" and "placement order" in first["reason"]
    assert "first" in obj["whole"]["reason"]


def test_bad_input_exits_2(tmp_path):
    old = cell(tmp_path, "old")
    rc, _, err = run_cli(["diff", old, old, "--rule", "nope"])
    assert rc == 2 and "no rule 'nope'" in err
    rc, _, err = run_cli(["diff", old, old, "--parts", "0"])
    assert rc == 2 and "--parts" in err
    rc, _, err = run_cli(["diff", old, str(tmp_path / "missing.cell")])
    assert rc == 2
    rc, obj = diff(old, old, "--time-limit", "0.001")  # a limit: unknown, never equivalent
    assert (rc, obj["relation"]) == (2, "unknown")


def _brute(old: str, new: str, layouts) -> str:
    """The relation brute force sees over the given layouts (clingo, error rules)."""
    a, b = load_cell(old), load_cell(new)
    seen = {"old_only": False, "new_only": False}
    for obj in layouts:
        lay = layout_from_obj(obj)
        po, pn = (check(c, lay).verdict == "pass" for c in (a, b))
        if po and not pn:
            seen["old_only"] = True
        if pn and not po:
            seen["new_only"] = True
    return {(False, False): "equivalent", (True, False): "stricter",
            (False, True): "looser", (True, True): "incomparable"}[
        (seen["old_only"], seen["new_only"])]


def _grid(n: int):
    xs = [round(0.025 + 0.02 * k, 3) for k in range(18)]
    for pos in itertools.combinations(xs, n):
        yield {"units": "m", "parts": [{"id": f"cube{i + 1}", "type": "cube",
                                        "pos": [x, 0.2, 0.025]} for i, x in enumerate(pos)]}


@pytest.mark.parametrize("a, b", [((0.2, 0.03), (0.15, 0.03)), ((0.15, 0.03), (0.2, 0.03)),
                                  ((0.2, 0.03), (0.2, 0.06)), ((0.2, 0.06), (0.2, 0.03)),
                                  pytest.param((0.2, 0.03), (0.15, 0.06), marks=pytest.mark.slow),
                                  pytest.param((0.15, 0.03), (0.2, 0.06),
                                               marks=pytest.mark.slow)])
def test_differential_against_brute_force(tmp_path, a, b):
    rules = 'rule left "{p} right" :\n    forall p: p.x <= LEFT\n' \
            'rule apart "{p} {q} close" :\n    forall {p, q}: not near(p, q, GAP)\n'
    old = cell(tmp_path, "old", physical=False, h=None,
               extra=rules.replace("LEFT", str(a[0])).replace("GAP", str(a[1])))
    new = cell(tmp_path, "new", physical=False, h=None,
               extra=rules.replace("LEFT", str(b[0])).replace("GAP", str(b[1])))
    _, obj = diff(old, new, "--parts", "2")
    want = _brute(old, new, [*_grid(1), *_grid(2)])
    assert obj["relation"] == want
    assert_witnesses(old, new, {"rule": "*", "witnesses": obj["witnesses"]},
                     {"left", "apart"})


def test_preference_rules_are_compared_alone_and_never_in_the_verdict(tmp_path):
    pref = 'rule low "{p} is high" severity preference weight 2 :\n    forall p: p.top <= H\n'
    old = cell(tmp_path, "old", extra=pref.replace("H", "0.1"))
    new = cell(tmp_path, "new", extra=pref.replace("H", "0.05"))
    rc, obj = diff(old, new)
    low = by_rule(obj)["low"]
    assert (rc, obj["relation"], low["relation"]) == (0, "equivalent", "stricter")
    assert low["severity"] == {"old": "preference", "new": "preference"} and low["changed"]
    assert any("preference rules never fail a layout" in n and "low" in n
               for n in obj["notes"])
    assert_witnesses(old, new, low)
    rc, out, _ = run_cli(["diff", old, new])
    assert rc == 0 and "rule low (preference): stricter" in out


def test_a_severity_change_is_named_and_shows_in_the_whole_set(tmp_path):
    old = cell(tmp_path, "old", h=0.15)
    new = tmp_path / "new.cell"
    new.write_text(open(old).read().replace('top {p.top}" :', 'top {p.top}" severity warning :'))
    rc, obj = diff(old, str(new))
    mh = by_rule(obj)["max_height"]
    assert (rc, obj["relation"], mh["relation"]) == (1, "looser", "equivalent")
    assert mh["severity"] == {"old": "error", "new": "warning"} and mh["changed"]
    rc, out, _ = run_cli(["diff", old, str(new)])
    assert "rule max_height (severity error -> warning): equivalent" in out
    assert "the error rules: looser" in out


def test_cylinders_are_not_placed_and_the_note_says_so(tmp_path):
    extra = "part can cylinder radius 0.03 height 0.1 mass 0.2\n"
    old = cell(tmp_path, "old")
    text = open(old).read().replace("    part cube", "    " + extra + "    part cube")
    (tmp_path / "c_old.cell").write_text(text)
    (tmp_path / "c_new.cell").write_text(text.replace("p.top <= 0.2", "p.top <= 0.15"))
    rc, obj = diff(str(tmp_path / "c_old.cell"), str(tmp_path / "c_new.cell"))
    assert (rc, obj["relation"], obj["types"]) == (1, "stricter", ["cube"])
    assert any(n.startswith("NOT COMPARED: cylinder") and n.endswith(": can")
               for n in obj["notes"])
