"""Preferences in `check`, `test`, `--coverage` and `lint`: weighted soft rules that never
fail a layout, scored as the weight of the bindings of their outer variables that they meet.

The score is checked by hand on small layouts (parts, ordered and unordered pairs, keep-out
and robot domains, `count`), against the reference evaluator's own enumeration of the
bindings, and across the clingo, reference and z3 backends on seeded random layouts.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, run_cellspec
from referencing import Registry, Resource

import cellspec
from cellspec.core import ir
from cellspec.core.errors import CellspecError
from cellspec.layout import layout_from_obj
from cellspec.schemas import NAMES, schema
from cellspec.solver import pref_score, verify
from cellspec.solver.instance import build_instance
from cellspec.solver.reference import ReferenceEvaluator
from cellspec.testing.coverage import run_coverage
from cellspec.testing.runner import run_file

EXAMPLE = REPO / "rules" / "examples" / "preferences.cell"

HEAD = """import physical

cell prefs {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    part slab size (0.08, 0.04, 0.02)
    robot arm model panda base (0.2, 0.1, 0) reach 0.45 gripper parallel opening 0.07 depth 0.02
    default gripper parallel opening 0.07 depth 0.02
    keepout post box x [0.60, 0.70] y [0.40, 0.50] z [0.00, 0.30]
    keepout lane box x [0.20, 0.70] y [0.05, 0.09] z [0.00, 0.30]
    tolerance contact 0.001
    stability off
}
"""

# every kind of outer binding: parts, a type filter, unordered and ordered pairs, keep-outs,
# robots, none (count); nested quantifiers and the order inside
PREFS = """
rule low "{p} is high" severity preference weight 3 : forall p: p.top <= 0.06
rule slabs_down "{p} is a slab off the table" severity preference weight 2 :
    forall p in slab: grounded(p)
rule apart "{p} touches {q}" severity preference : forall {p, q}: not contact(p, q)
rule under_left "{p} carries {q} to its right" severity preference weight 2 :
    forall p, q: supports(p, q) implies q.x <= p.x
rule clear "{p} enters {k}" severity preference weight 4 :
    forall p: forall k in keepout: not intersects(p, k)
rule reach "{p} is out of {r}'s reach" severity preference :
    forall p: forall r in robot: reachable(p, r)
rule few_on_table "more than two parts on the table" severity preference weight 5 :
    count(q: grounded(q)) <= 2
rule neighbour "{p} has no neighbour" severity preference : forall p: exists q: near(p, q, 0.01)
rule low_first "{p} is placed before the lower {q}" severity preference :
    forall p, q: before(p, q) implies p.z <= q.z + 0.001
"""


def _cell(tmp_path: Path, text: str, name: str = "p.cell") -> cellspec.dsl.model.Cell:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return cellspec.load_cell(str(p))


def _layout(parts: list[tuple], order: bool = True):
    obj: dict = {"units": "m", "parts": [{"id": i, "type": t, "pos": list(pos)}
                                          for i, t, pos in parts]}
    if order:
        obj["order"] = [p[0] for p in parts]
    return layout_from_obj(obj, "<test>")


@pytest.fixture(scope="module")
def prefs_cell(tmp_path_factory: pytest.TempPathFactory):
    return _cell(tmp_path_factory.mktemp("prefs"), HEAD + PREFS)


# -- the score by hand -------------------------------------------------------------------------
def test_bindings_count_what_the_rules_range_over(prefs_cell) -> None:
    rules = {r.name: r for r in prefs_cell.rules}
    counts = {n: [pref_score.bindings(rules[n], k, 2, 1) for k in range(5)]
              for n in ("low", "slabs_down", "apart", "under_left", "clear", "reach",
                        "few_on_table")}
    assert counts == {"low": [0, 1, 2, 3, 4], "slabs_down": [0, 1, 2, 3, 4],
                      "apart": [0, 0, 1, 3, 6], "under_left": [0, 0, 2, 6, 12],
                      "clear": [0, 2, 4, 6, 8], "reach": [0, 1, 2, 3, 4],
                      "few_on_table": [1, 1, 1, 1, 1]}


def test_score_by_hand_parts_pairs_count_keepouts_robots(prefs_cell) -> None:
    # s1 on the table at x 0.30; c1 on s1, a little right; c2 on the table in the post zone
    parts = [("s1", "slab", (0.30, 0.20, 0.01)), ("c1", "cube", (0.31, 0.20, 0.045)),
             ("c2", "cube", (0.65, 0.45, 0.025))]
    v = verify.check(prefs_cell, _layout(parts))
    # the error rule keepout fails the layout; the preferences are scored all the same
    assert v.verdict == "fail" and [(x.rule, x.parts) for x in v.violations] == \
        [("keepout", ("c2",))]
    got = sorted((x.rule, x.parts, x.zones, x.weight) for x in v.preferences)
    assert got == [
        ("apart", ("s1", "c1"), (), 1),            # stacked: in contact
        ("clear", ("c2",), ("post",), 4),           # c2 enters the post zone
        ("low", ("c1",), (), 3),                    # top at 0.07
        ("low_first", ("c1", "c2"), (), 1),         # c1 (z 0.045) placed before c2 (z 0.025)
        ("neighbour", ("c2",), (), 1),              # nothing within 1 cm of c2
        ("reach", ("c2",), ("arm",), 1),            # 0.57 m from the arm's base, reach 0.45
        ("under_left", ("s1", "c1"), (), 2),        # c1 right of its support's centre
    ]
    # total: low 3x3 + slabs_down 2x3 + apart 1x3 (unordered pairs) + under_left 2x6
    # (ordered pairs) + clear 4x(3 parts x 2 zones) + reach 1x3 + few_on_table 5x1 (no outer
    # variable; two parts on the table: met) + neighbour 1x3 + low_first 1x6 = 71
    assert (v.preference_score.met, v.preference_score.total) == (71 - 13, 71)
    # low_first reads the order: without one it is neither checked nor counted
    v2 = verify.check(prefs_cell, _layout(parts, order=False))
    assert "low_first" in v2.skipped_rules
    assert (v2.preference_score.met, v2.preference_score.total) == (65 - 12, 65)


def test_count_preference_and_weights_sum_over_all_violations(prefs_cell) -> None:
    # three slabs on the table in a row: few_on_table (weight 5, one binding) is unmet
    lay = _layout([(f"s{k}", "slab", (0.30 + 0.1 * k, 0.30, 0.01)) for k in range(3)])
    v = verify.check(prefs_cell, lay)
    assert ("few_on_table", ()) in [(x.rule, x.parts) for x in v.preferences]
    unmet = sum(x.weight for x in v.preferences)
    assert v.preference_score.total - v.preference_score.met == unmet


def test_every_violated_binding_counts_even_past_the_listed_ones(prefs_cell, monkeypatch
                                                                 ) -> None:
    monkeypatch.setattr(verify, "MAX_LISTED", 1)
    lay = _layout([(f"c{k}", "cube", (0.25 + 0.06 * k, 0.30, 0.2)) for k in range(4)],
                  order=False)  # four high cubes: low is unmet 4 times (weight 3)
    v = verify.check(prefs_cell, lay)
    assert [x.rule for x in v.preferences].count("low") == 1
    assert any(n.startswith("low: 4 violations, the first 1 are listed") for n in v.notes)
    monkeypatch.setattr(verify, "MAX_LISTED", 10_000)
    v_all = verify.check(prefs_cell, lay)
    assert v.preference_score == v_all.preference_score
    assert v_all.preference_score.total - v_all.preference_score.met == \
        sum(x.weight for x in v_all.preferences)


# -- the error wins --------------------------------------------------------------------------
CONFLICT = """import physical

cell c {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
    stability off
}

rule hard_low "{p} is too high" : forall p: p.top <= 0.06
rule float "{p} is low" severity preference weight 2 : forall p: p.bottom >= 0.1
rule wide "{p} is narrow" severity preference : forall p: p.size.x >= 0.2
rule left "{p} is right" severity preference : forall p: p.x <= 0.4

test two { layout { c1 cube at (0.3, 0.2, 0.025) c2 cube at (0.4, 0.2, 0.025) } expect pass }
"""


def test_a_preference_against_an_error_rule_the_error_wins(tmp_path: Path) -> None:
    cell = _cell(tmp_path, CONFLICT)
    on_table = _layout([("c1", "cube", (0.3, 0.2, 0.025)), ("c2", "cube", (0.5, 0.2, 0.025))])
    v = verify.check(cell, on_table)
    assert v.verdict == "pass" and v.violations == ()
    assert sorted((x.rule, x.parts) for x in v.preferences) == [
        ("float", ("c1",)), ("float", ("c2",)), ("left", ("c2",)), ("wide", ("c1",)),
        ("wide", ("c2",))]
    assert (v.preference_score.met, v.preference_score.total) == (1, 8)
    # meeting the preference breaks the error rule: the verdict fails on the error alone
    up = _layout([("c1", "cube", (0.3, 0.2, 0.125))])
    v2 = verify.check(cell, up)
    assert v2.verdict == "fail"
    assert {x.rule for x in v2.violations} >= {"hard_low"}
    assert "float" not in {x.rule for x in v2.preferences}


def test_lint_names_a_preference_never_met_and_one_the_errors_rule_out(tmp_path: Path
                                                                       ) -> None:
    from cellspec.solver.formal.lint import lint

    cell = _cell(tmp_path, CONFLICT)
    rep = lint(cell, timeout=60)
    assert rep.status == "consistent"
    got = {(f.kind, tuple(r.rule for r in f.rules)) for f in rep.findings
           if f.kind.startswith("preference")}
    assert got == {("preference_never_met", ("wide",)),
                   ("preference_conflict", ("float", "hard_low"))}, rep.findings
    msg = next(f.message for f in rep.findings if f.kind == "preference_conflict")
    assert msg.startswith("preference float conflicts with the error rule(s) hard_low: "
                          "every layout of 2 cube that meets them violates it")
    f = tmp_path / "p.cell"
    r = run_cellspec("lint", f, "--format", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    jsonschema.Draft202012Validator(schema("lint"), registry=_registry()).validate(out)
    kinds = [x["kind"] for x in out["reports"][0]["findings"]]
    assert "preference_conflict" in kinds and "preference_never_met" in kinds


# -- the CLI: pretty, JSON, exit codes --------------------------------------------------------
def _stacked(tmp_path: Path) -> Path:
    f = tmp_path / "stacked.json"
    f.write_text(json.dumps({"parts": [
        {"id": "s1", "type": "slab", "pos": [0.30, 0.20, 0.01]},
        {"id": "c1", "type": "cube", "pos": [0.30, 0.20, 0.045]},
        {"id": "c2", "type": "cube", "pos": [0.52, 0.20, 0.025]}], "order": ["s1", "c1", "c2"]}))
    return f


def test_check_pretty_lists_unmet_preferences_and_the_score(tmp_path: Path) -> None:
    r = run_cellspec("check", EXAMPLE, _stacked(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == [
        "rules/examples/preferences.cell:22:1: preference (weight 1): near_home(c2): c2 is at "
        "x 0.520 m: keep parts within x 0.45 of the robot",
        "rules/examples/preferences.cell:25:1: preference (weight 2): compact(c1, c2): c1 and "
        "c2 are more than 0.15 m apart",
        "preferences: 17 of 20 weight met"]
    assert lines[3].startswith("pass (3 parts, ")


def test_check_json_carries_the_score_and_validates(tmp_path: Path) -> None:
    r = run_cellspec("check", EXAMPLE, _stacked(tmp_path), "--format", "json")
    assert r.returncode == 0
    out = json.loads(r.stdout)
    jsonschema.Draft202012Validator(schema("verdict"),
                                    registry=_registry()).validate(out)
    assert list(out)[:5] == ["format", "verdict", "violations", "warnings", "preferences"]
    assert out["preferences"] == {"met": 17, "total": 20, "unmet": [
        {"rule": "near_home", "parts": ["c2"],
         "message": "c2 is at x 0.520 m: keep parts within x 0.45 of the robot",
         "source": "rules/examples/preferences.cell:22:1", "weight": 1},
        {"rule": "compact", "parts": ["c1", "c2"],
         "message": "c1 and c2 are more than 0.15 m apart",
         "source": "rules/examples/preferences.cell:25:1", "weight": 2}]}
    # the schema rejects an unmet preference without its weight
    bad = json.loads(r.stdout)
    del bad["preferences"]["unmet"][0]["weight"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema("verdict"), registry=_registry()).validate(bad)


def _registry() -> Registry:
    return Registry().with_resources(
        (schema(n)["$id"], Resource.from_contents(schema(n))) for n in NAMES)


def test_a_cell_without_preferences_prints_no_preferences_key() -> None:
    r = run_cellspec("check", REPO / "rules/cells/dual_arm_station.cell",
                     REPO / "rules/examples/tower3_broken.json", "--format", "json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert "preferences" not in out
    assert list(out)[:5] == ["format", "verdict", "violations", "warnings", "stats"]
    assert "preferences" not in run_cellspec(
        "check", REPO / "rules/cells/dual_arm_station.cell",
        REPO / "rules/examples/tower3_broken.json").stdout


def test_preferences_never_change_the_exit_code(tmp_path: Path) -> None:
    cell = tmp_path / "c.cell"
    cell.write_text(CONFLICT, encoding="utf-8")
    lay = tmp_path / "l.json"
    lay.write_text(json.dumps({"parts": [{"id": "c1", "type": "cube",
                                          "pos": [0.5, 0.2, 0.025]}]}))
    r = run_cellspec("check", cell, lay)
    assert r.returncode == 0 and "preferences: 0 of 4 weight met" in r.stdout, r.stdout
    for backend in ("reference", "z3"):
        rb = run_cellspec("check", cell, lay, "--backend", backend)
        assert rb.returncode == 0 and "preferences: 0 of 4 weight met" in rb.stdout


def test_batch_and_diff_take_preferences(tmp_path: Path) -> None:
    r = run_cellspec("batch", EXAMPLE, _stacked(tmp_path), "--serial", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"verdict": "pass"' in r.stdout
    old = tmp_path / "old.cell"
    old.write_text(CONFLICT, encoding="utf-8")
    new = tmp_path / "new.cell"
    new.write_text(CONFLICT.replace("p.x <= 0.4", "p.x <= 0.35"), encoding="utf-8")
    d = run_cellspec("diff", old, new, "--parts", "2", "--rule", "left")
    assert d.returncode in (0, 1), d.stdout + d.stderr
    assert "rule left (preference): stricter" in d.stdout, d.stdout


# -- backends agree (differential, seeded) ------------------------------------------------------
def _random_layout(rng: random.Random):
    n = rng.randint(1, 5)
    parts: list[dict] = []
    for k in range(n):
        t = rng.choice(["cube", "slab"])
        hz = 0.025 if t == "cube" else 0.01
        move = rng.choice(["ground", "stack", "beside", "free"]) if parts else "ground"
        if move == "ground":
            pos = [rng.randint(400, 1400) / 2000, rng.randint(100, 1000) / 2000, hz]
        elif move == "free":
            pos = [rng.randint(400, 1400) / 2000, rng.randint(100, 1000) / 2000,
                   rng.randint(20, 500) / 2000]
        else:
            r = rng.choice(parts)
            rh = 0.025 if r["type"] == "cube" else 0.01
            if move == "stack":
                pos = [r["pos"][0] + rng.choice([0, 0.005, -0.01, 0.03]),
                       r["pos"][1] + rng.choice([0, 0.005, -0.02]), r["pos"][2] + rh + hz]
            else:
                gap = rng.choice([0, 0.0005, 0.001, 0.0015, 0.005, 0.009, 0.011, 0.03])
                half = 0.025 if t == "cube" else 0.04
                rhalf = 0.025 if r["type"] == "cube" else 0.04
                pos = [r["pos"][0] + rhalf + half + gap, r["pos"][1],
                       r["pos"][2] - rh + hz]
        parts.append({"id": f"p{k}", "type": t, "pos": [round(v, 4) for v in pos]})
    obj: dict = {"units": "m", "parts": parts}
    if rng.random() < 0.7:
        ids = [p["id"] for p in parts]
        rng.shuffle(ids)
        obj["order"] = ids
    return layout_from_obj(obj, "<random>")


def _oracle_score(cell, lay) -> tuple[int, int]:
    """(met, total) from the reference evaluator's own bindings: a rule's total is the
    number of bindings its outer chain enumerates (the body replaced by false)."""
    inst = build_instance(cell, lay)
    ref = ReferenceEvaluator(inst)
    rules, _ = verify.checkers.order_rules(cell.rules, lay.order is not None)
    total = unmet = 0
    for r in rules:
        if r.severity != "preference":
            continue
        chain, _ = ir.top_foralls(r.body)
        body: ir.Node = ir.BoolConst(False)
        for q in reversed(chain):
            body = ir.Quant(q.kind, q.vars, q.domain, q.unordered, body)
        total += r.weight * len(ref.violations(r.model_copy(update={"body": body})))
        unmet += r.weight * len(ref.violations(r))
    return total - unmet, total


def test_clingo_reference_and_z3_give_the_same_score_on_random_layouts(prefs_cell) -> None:
    rng = random.Random(35)
    decided = 0
    for _ in range(30):
        lay = _random_layout(rng)
        got = {}
        for backend in ("clingo", "reference", "z3"):
            v = verify.check(prefs_cell, lay, backend=backend)
            got[backend] = (v.verdict, v.preference_score,
                            sorted((x.rule, x.parts, x.zones, x.weight) for x in v.preferences),
                            sorted((x.rule, x.parts) for x in v.violations))
        assert got["clingo"] == got["reference"] == got["z3"], (lay.ids, lay.pos, got)
        sc = got["clingo"][1]
        if sc is not None:
            decided += 1
            assert (sc.met, sc.total) == _oracle_score(prefs_cell, lay)
    assert decided >= 25


# -- test blocks: expect preferences --------------------------------------------------------------
TESTS = """
rule low "{p} is high" severity preference weight 3 : forall p: p.top <= 0.06

test ok_ge { layout { c1 cube at (0.3, 0.2, 0.025) c2 cube at (0.3, 0.2, 0.075) } order (c1, c2)
             expect pass expect preferences >= 3 }
test ok_eq { layout { c1 cube at (0.3, 0.2, 0.025) c2 cube at (0.3, 0.2, 0.075) } order (c1, c2)
             expect pass expect preferences == 3 expect preferences <= 3 }
test bad_ge { layout { c1 cube at (0.3, 0.2, 0.025) c2 cube at (0.3, 0.2, 0.075) } order (c1, c2)
              expect pass expect preferences >= 4 }
test bad_le { layout { c1 cube at (0.3, 0.2, 0.025) } expect pass expect preferences <= 2 }
test named { layout { c1 cube at (0.3, 0.2, 0.025) c2 cube at (0.3, 0.2, 0.075) } order (c1, c2)
             expect fail low(c2) }
test only_fails { layout { c1 cube at (0.3, 0.2, 0.025) c2 cube at (0.3, 0.2, 0.075) }
                  order (c1, c2) expect pass only }
"""
SMALL = """import physical

cell c {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
}
"""


def test_expect_preferences_passes_and_fails(tmp_path: Path) -> None:
    f = tmp_path / "t.cell"
    f.write_text(SMALL + TESTS, encoding="utf-8")
    results, errors = run_file(str(f))
    assert errors == []
    got = {r.name: (r.status, r.message) for r in results}
    assert got == {
        "ok_ge": ("passed", ""), "ok_eq": ("passed", ""),
        "bad_ge": ("failed", "expected preferences >= 4, got 3 of 6 weight met"),
        "bad_le": ("failed", "expected preferences <= 2, got 3 of 3 weight met"),
        "named": ("passed", ""),
        "only_fails": ("failed", "expected pass")}
    bad = next(r for r in results if r.name == "bad_ge")
    assert bad.expected == ("pass", "preferences >= 4")
    assert bad.actual == ("low(c2)", "preferences 3 of 6")
    r = run_cellspec("test", f)
    assert r.returncode == 1 and "3 passed, 3 failed" in r.stdout


def test_the_formatter_keeps_expect_preferences() -> None:
    from cellspec.dsl.formatter import format_source

    text = ('test t { layout { c1 cube at (0.3, 0.2, 0.025) } expect pass '
            'expect preferences   >=  3 expect preferences<=3 }\n')
    out = format_source(text)
    assert "    expect preferences >= 3\n    expect preferences <= 3\n" in out
    assert format_source(out) == out


@pytest.mark.parametrize(("item", "says"), [
    ("expect preferences >= 1", "test 't' expects a preference score, but the cell has no "
     "`severity preference` rule"),
])
def test_expect_preferences_needs_preferences(tmp_path: Path, item: str, says: str) -> None:
    f = tmp_path / "t.cell"
    f.write_text(SMALL + f"test t {{ layout {{ c1 cube at (0.3, 0.2, 0.025) }} expect pass\n"
                 f"    {item} }}\n", encoding="utf-8")
    with pytest.raises(CellspecError) as info:
        cellspec.load_cell(str(f))
    msgs = [str(d) for d in info.value.diagnostics]
    assert len(msgs) == 1 and msgs[0].endswith(says) and ":12:5:" in msgs[0], msgs


@pytest.mark.parametrize("item", ["expect preferences > 1", "expect preferences >= -1",
                                  "expect preferences >= 1.5", "expect preferences 3"])
def test_bad_expect_preferences_is_a_syntax_error(tmp_path: Path, item: str) -> None:
    f = tmp_path / "t.cell"
    f.write_text(SMALL + TESTS.split("test ok_ge")[0]
                 + f"test t {{ layout {{ c1 cube at (0.3, 0.2, 0.025) }} expect pass\n"
                 f"    {item} }}\n", encoding="utf-8")
    r = run_cellspec("check", f, REPO / "rules/examples/tower3.json")
    assert r.returncode == 2 and "t.cell:" in r.stderr and "Traceback" not in r.stderr


def test_the_example_cell_tests_pass_and_format_is_stable() -> None:
    r = run_cellspec("test", EXAMPLE)
    assert r.returncode == 0 and "3 passed, 0 failed" in r.stdout, r.stdout
    assert run_cellspec("fmt", "--check", EXAMPLE).returncode == 0


def test_coverage_counts_preferences_like_other_rules() -> None:
    rep, errors = run_coverage([str(EXAMPLE)])
    assert errors == []
    rows = {r.name: (len(r.held), r.fired, r.covered, r.items) for r in rep.rules.values()
            if r.source.startswith("rules/examples/preferences.cell")}
    ex = "rules/examples/preferences.cell::"
    assert rows == {
        "heavy_low": (2, [ex + "slab_up"], 3, 3),
        "near_home": (2, [ex + "stacked"], 3, 3),
        "compact": (2, [ex + "stacked"], 3, 3),
        "few_on_table": (2, [ex + "row"], 3, 3)}


def test_an_undecided_stability_leaves_the_score_undecided(prefs_cell) -> None:
    rule = next(r for r in cellspec.load_cell(str(EXAMPLE)).rules if r.name == "heavy_low")
    stands = rule.model_copy(update={"name": "stands", "body": ir.Quant(
        "forall", ("p",), "part", False, ir.Rel("stable", (ir.VarArg("p"),)))})
    inst = build_instance(prefs_cell, _layout([("c1", "cube", (0.3, 0.2, 0.025))]))
    sc = verify._score(inst, [stands], [], (object(),), frozenset())
    assert (sc.met, sc.total) == (None, 3)
    assert sc.reason == ("stands reads what this check left undecided (a structure's "
                         "stability or the 0.1 mm grid's rounding: see the notes)")
    assert sc.sentence() == f"preferences: not decided (3 weight in all): {sc.reason}"
    assert sc.to_json(()) == {"met": None, "total": 3, "unmet": [], "reason": sc.reason}
    assert verify._score(inst, [stands], [], (), frozenset({"stands"})).met is None
    sc = verify._score(inst, [stands], [(0, (0,))], (), frozenset())
    assert (sc.met, sc.total, sc.reason) == (0, 3, None)
    assert verify._score(inst, [rule.model_copy(update={"severity": "warning"})], [], (),
                         frozenset()) is None  # no preference: no score


def test_a_preference_decided_exactly_off_the_grid(tmp_path: Path) -> None:
    """A position off the 0.1 mm grid right at a preference's threshold: the grid says met,
    the exact position not; the check re-decides exactly and the score follows it."""
    cell = _cell(tmp_path, CONFLICT)
    lay = _layout([("c1", "cube", (0.40004, 0.2, 0.025))])
    v = verify.check(cell, lay)
    assert v.verdict == "pass"
    assert ("left", ("c1",)) in [(x.rule, x.parts) for x in v.preferences]
    assert v.preference_score is not None and v.preference_score.met == 0


def test_lsp_hover_and_completion_know_preference_and_weight() -> None:
    from cellspec.lsp.index import Workspace, build_index, completions, hover

    text = ('rule low "{p} high" severity preference weight 3 : forall p: p.top <= 0.1\n'
            'test t { layout { c1 cube at (0.3, 0.2, 0.025) } expect pass\n'
            '    expect preferences >= 3 }\n')
    idx = build_index(text, "/tmp/p.cell")
    ws = Workspace()
    for word, doc in (("preference", "a soft rule"), ("weight", "what each violated binding"),
                      ("preferences", "the weight of preferences")):
        row = 2 if word == "preferences" else 0
        col = text.splitlines()[row].index(word + " ") + 1
        got = hover(ws, idx, row, col)
        assert got is not None and got[0].startswith(f"**{word}**: ") and doc in got[0], got
    labels = [c[0] for c in completions(ws, idx, 0, len("rule low \"{p} high\" severity "))]
    assert {"preference", "weight", "warning", "error"} <= set(labels)


def test_an_undecided_structure_undecides_a_preference_that_reads_stability(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real solver limit (the stability LP's time limit at a nanosecond): the bridge is
    undecided, a cube floats. The verdict fails on gravity; a preference reading stable()
    makes the score undecided (JSON met null, with the reason); without one it is decided."""
    from structure_families import cell_text

    from cellspec.solver import stability as stab

    bridge = [{"id": "pl", "type": "cube", "pos": [0.40, 0.275, 0.025]},
              {"id": "pr", "type": "cube", "pos": [0.50, 0.275, 0.025]},
              {"id": "beam", "type": "beam15", "pos": [0.45, 0.275, 0.06]},
              {"id": "top", "type": "cube", "pos": [0.45, 0.275, 0.095]},
              {"id": "fl", "type": "cube", "pos": [0.30, 0.15, 0.075]}]
    lay = layout_from_obj({"units": "m", "parts": [{**p, "gripper": "vacuum"} for p in bridge]},
                          "<bridge>")
    monkeypatch.setattr(stab, "LP_TIME_LIMIT_S", 1e-9)
    low = 'rule low "{p} is high" severity preference : forall p: p.top <= 0.06\n'
    firm = 'rule firm "{p} may fall" severity preference weight 2 : forall p: stable(p)\n'
    decided = _cell(tmp_path, cell_text() + low, "physics_agreement.cell")
    v = verify.check(decided, lay)
    assert v.verdict == "fail" and [x.rule for x in v.violations] == ["gravity"]
    assert (v.preference_score.met, v.preference_score.total) == (2, 5)  # beam, top, fl high
    both = _cell(tmp_path, cell_text() + low + firm, "physics_agreement.cell")
    v = verify.check(both, lay)
    assert v.verdict == "fail" and [x.rule for x in v.violations] == ["gravity"]
    assert (v.preference_score.met, v.preference_score.total) == (None, 15)
    assert v.preference_score.reason.startswith("firm reads what this check left undecided")
    out = v.to_json()
    assert out["preferences"]["met"] is None and out["preferences"]["total"] == 15
    jsonschema.Draft202012Validator(schema("verdict"), registry=_registry()).validate(
        {"format": "cellspec.verdict/1", **out})
