"""Preferences optimised: generate maximises the weight met (before its own objective), an
error rule always wins over a preference, and CP-SAT's reified score of a fixed layout
equals clingo's and the reference evaluator's count (differential, seeded layouts)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cellspec
from ortools.sat.python import cp_model

import cellspec
from cellspec.layout import Layout
from cellspec.solver.asp.prefer import fixed_violated, preference_cost
from cellspec.solver.cpsat.prefer import encode, fixed_boxes
from cellspec.solver.instance import build_instance

CELL = """
import physical
cell prefcell {
    units m
    workspace x [0, 0.3] y [0, 0.2] z [0, 0.2]
    surface table z 0
    part cube size (0.04, 0.04, 0.04)
}
rule low_x "{p} is far from x = 0" severity preference weight 3 : forall p: p.x <= 0.03
rule high_y "{p} is low on y" severity preference weight 2 : forall p: p.y >= 0.15
"""
DESIGN = """
design two {
    tower(n=1)
    tower(n=1)
}
"""


def _generate(tmp_path: Path, text: str) -> dict:
    p = tmp_path / "c.cell"
    p.write_text(text, encoding="utf-8")
    r = run_cellspec("generate", p, p, "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_generate_meets_the_most_weight(tmp_path: Path) -> None:
    # two 4 cm cubes: x <= 0.03 holds for centres in [0.02, 0.03] and y >= 0.15 for
    # [0.15, 0.18]; in that 1 cm x 3 cm corner two cubes (4 cm plus the finger gap apart)
    # cannot both stand. Best: both low on x (3 + 3), one high on y (2): 8 of 10; both high
    # on y with one low on x gives only 7. CP-SAT proves 8; the anchors (the built-in
    # objective) would put both cubes in the middle (0 of 10).
    out = _generate(tmp_path, CELL + DESIGN)
    assert out["preferences"] == {"met": 8, "total": 10, "optimal": True}
    xs = sorted(p["pos"][0] for p in out["layout"]["parts"])
    assert xs[1] <= 0.03


def test_an_error_rule_wins_over_a_preference(tmp_path: Path) -> None:
    # the keep-out (the stdlib's error rule `keepout`) covers every y >= 0.13
    hard = CELL.replace("surface table z 0", "surface table z 0\n    keepout back box x [0, 0.3] "
                        "y [0.13, 0.2] z [0, 0.2]")
    out = _generate(tmp_path, hard + DESIGN)
    assert out["verdict"] == "pass"
    assert all(p["pos"][1] <= 0.11 for p in out["layout"]["parts"])
    # high_y can never hold now: only low_x's 3 + 3 of the 10
    assert out["preferences"] == {"met": 6, "total": 10, "optimal": True}


def test_cells_without_preferences_print_no_score(tmp_path: Path) -> None:
    plain = CELL.split("rule low_x")[0]
    out = _generate(tmp_path, plain + DESIGN)
    assert "preferences" not in out


def test_pretty_says_the_score(tmp_path: Path) -> None:
    p = tmp_path / "c.cell"
    p.write_text(CELL + DESIGN, encoding="utf-8")
    r = run_cellspec("generate", p, p)
    assert r.returncode == 0
    assert "preferences: 8 of 10 weight met (optimal)" in r.stdout


def test_unencodable_preference_is_named(tmp_path: Path) -> None:
    text = CELL + ('rule steady "{p} wobbles" severity preference : forall p: stable(p)\n'
                   + DESIGN)
    out = _generate(tmp_path, text)
    prefs = out["preferences"]
    assert prefs["optimal"] is False
    assert any("steady" in n and "not optimised" in n for n in prefs["notes"])


DIFF_CELL = """
cell diff {
    units m
    workspace x [0, 0.4] y [0, 0.4] z [0, 0.3]
    surface table z 0
    part cube size (0.04, 0.04, 0.04)
    part plate size (0.08, 0.06, 0.02)
    keepout post box x [0.30, 0.40] y [0.30, 0.40] z [0, 0.3]
    keepout wall : x + y > 0.65
}
rule touch "{p} {q}" severity preference weight 2 : forall {p, q}: not contact(p, q)
rule close "{p} {q}" severity preference : forall p, q: near(p, q, 0.05) or p.x < q.x
rule stack "{p} {q}" severity preference weight 3 : forall p, q: not above(p, q) or supports(q, p)
rule floor "{p}" severity preference weight 2 : forall p: grounded(p) or on(p, table)
rule clear "{p} {k}" severity preference : forall p: forall k in keepout: not intersects(p, k)
rule ws "{p}" severity preference : forall p: inside(p, workspace)
rule plates "{p}" severity preference weight 4 : forall p: p.type != plate or p.top <= 0.05
rule few "{p}" severity preference : forall p: count(q : overlaps(p, q)) <= 1
rule any_low "{p}" severity preference : forall p: exists q: q.z < p.z or p.bottom == 0
"""


def _random_layout(rng: np.random.Generator, n: int) -> Layout:
    types = tuple("cube" if rng.random() < 0.6 else "plate" for _ in range(n))
    pos = np.round(rng.uniform([0.0, 0.0, 0.0], [0.42, 0.42, 0.12], size=(n, 3)) / 0.01) * 0.01
    for k in range(n):  # some parts exactly on the table or stacked
        if rng.random() < 0.4:
            pos[k, 2] = 0.02 if types[k] == "cube" else 0.01
    return Layout(ids=tuple(f"p{k}" for k in range(n)), types=types, pos=pos,
                  size=np.full((n, 3), np.nan), grippers=(None,) * n, order=None,
                  path="<random>")


def _cpsat_met(cell: cellspec.dsl.model.Cell, layout: Layout) -> tuple[int, int]:
    inst = build_instance(cell, layout)
    m = cp_model.CpModel()
    terms = encode(m, cell, fixed_boxes(cell, inst, m))
    assert not terms.refused
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.random_seed = 1
    assert s.Solve(m) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return terms.met_value(s.BooleanValue), terms.total


@pytest.mark.parametrize("seed", range(12))
def test_cpsat_score_equals_clingo_and_reference(tmp_path: Path, seed: int) -> None:
    p = tmp_path / "d.cell"
    p.write_text(DIFF_CELL, encoding="utf-8")
    cell = cellspec.load_cell(str(p))
    layout = _random_layout(np.random.default_rng(seed), 3 + seed % 5)
    met, total = _cpsat_met(cell, layout)
    by_clingo = preference_cost(cell, layout)
    by_ref = preference_cost(cell, layout, backend="reference")
    assert by_clingo.unknown is None and by_ref.unknown is None
    assert (met, total) == (by_clingo.met, by_clingo.total) == (by_ref.met, by_ref.total)
    # the #minimize encoding of the proof, with every box fixed, counts the same
    assert fixed_violated(cell, layout) == total - met
    assert 0 <= met <= total


def test_differential_is_not_vacuous(tmp_path: Path) -> None:
    # over the seeds, some bindings are violated and some met: the comparison above is
    # between scores that vary, not between two constant zeros
    p = tmp_path / "d.cell"
    p.write_text(DIFF_CELL, encoding="utf-8")
    cell = cellspec.load_cell(str(p))
    scores = {preference_cost(cell, _random_layout(np.random.default_rng(s), 3 + s % 5))
              .violated.__len__() for s in range(12)}
    assert len(scores) > 1


REPAIR_CELL = """
import physical
cell rc {
    units m
    workspace x [0, 0.3] y [0, 0.2] z [0, 0.2]
    surface table z 0
    part cube size (0.04, 0.04, 0.04)
}
"""
REPAIR_PREFS = """
rule wall "{p} far from the wall" severity preference weight 5 : forall p: p.x <= 0.05
rule low "{p} stacked" severity preference : forall p: p.z <= 0.03
rule back "{p} in front" severity preference : forall p: p.y >= 0.10
"""
TWO_ON_ONE = {"units": "m", "parts": [{"id": "a", "type": "cube", "pos": [0.10, 0.10, 0.02]},
                                      {"id": "b", "type": "cube", "pos": [0.10, 0.10, 0.02]}]}


def _repair(tmp_path: Path, text: str, *extra: str) -> dict:
    c = tmp_path / "r.cell"
    c.write_text(text, encoding="utf-8")
    lay = tmp_path / "r.json"
    lay.write_text(json.dumps(TWO_ON_ONE), encoding="utf-8")
    r = run_cellspec("repair", c, lay, "--format", "json", *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_repair_ties_broken_by_preferences_and_prefer_ranks_them_first(tmp_path: Path) -> None:
    # two cubes in one place: every minimal repair moves one cube by 4 cm (L1 0.04);
    # without preferences the repair stacks it (z 0.06)
    plain = _repair(tmp_path, REPAIR_CELL)
    assert plain["parts_moved"] == 1 and "preferences" not in plain
    assert [m["to"][2] for m in plain["moves"]] == [0.06]
    # ties broken: still one cube by 4 cm, now beside the other towards y >= 0.10 (low and
    # back met for both: 4 of 14; the wall, x <= 0.05, needs more change)
    ties = _repair(tmp_path, REPAIR_CELL + REPAIR_PREFS)
    assert ties["parts_moved"] == 1 and ties["displacement_m"] == pytest.approx(0.04)
    assert ties["preferences"] == {"met": 4, "total": 14, "optimal": True}
    (mv,) = ties["moves"]
    assert mv["to"][1] == pytest.approx(0.14) and mv["to"][2] == pytest.approx(0.02)
    # --prefer: both cubes to the wall (x <= 0.05), every preference met, more change
    first = _repair(tmp_path, REPAIR_CELL + REPAIR_PREFS, "--prefer")
    assert first["preferences"] == {"met": 14, "total": 14, "optimal": True}
    assert first["parts_moved"] == 2
    assert all(p["pos"][0] <= 0.05 for p in first["layout"]["parts"])


def test_repair_json_with_preferences_meets_its_schema(tmp_path: Path) -> None:
    from test_schemas import validate

    c = tmp_path / "r.cell"
    c.write_text(REPAIR_CELL + REPAIR_PREFS, encoding="utf-8")
    lay = tmp_path / "r.json"
    lay.write_text(json.dumps(TWO_ON_ONE), encoding="utf-8")
    r = run_cellspec("repair", c, lay, "--format", "json")
    out = json.loads(r.stdout)
    assert "preferences" in out
    validate("repair", out)


def test_clingo_proves_the_generated_score_on_a_small_cell(tmp_path: Path) -> None:
    # one level (the workspace is 5 cm high): clingo's #minimize over every layout of the
    # two cubes on the 1 cm lattice (918 positions each) finds at most 8 of 10 weight, the
    # score CP-SAT reached
    one_level = CELL.replace("z [0, 0.2]", "z [0, 0.05]")
    p = tmp_path / "c.cell"
    p.write_text(one_level + DESIGN, encoding="utf-8")
    r = run_cellspec("generate", p, p, "--format", "json", "--prove-preferences", "0.01",
                     "--time-limit", "120")
    assert r.returncode == 0, r.stderr
    prefs = json.loads(r.stdout)["preferences"]
    assert prefs["met"] == 8 and prefs["optimal"] is True
    b = prefs["bound"]
    assert (b["status"], b["met"], b["violated"], b["positions"]) == ("optimal", 8, 2, 918)
    assert "grip_access" in b["relaxed"] and "no_overlap" not in b["relaxed"]


def test_clingo_bound_sees_layouts_the_generator_does_not_build(tmp_path: Path) -> None:
    # with room to stack, clingo stacks the second cube on the first (every preference met);
    # the generator builds two separate towers and meets 8: the bound is not a copy of it
    from cellspec.solver.asp.prefer import least_violated

    p = tmp_path / "c.cell"
    p.write_text(CELL, encoding="utf-8")
    cell = cellspec.load_cell(str(p))
    b = least_violated(cell, ["cube", "cube"], step_m=0.02, timeout=60)
    assert (b.status, b.violated, b.total) == ("optimal", 0, 10)


def test_clingo_bound_beyond_its_size_limit_is_unknown(tmp_path: Path) -> None:
    from cellspec.solver.asp.prefer import least_violated

    p = tmp_path / "c.cell"
    p.write_text(CELL, encoding="utf-8")
    cell = cellspec.load_cell(str(p))
    b = least_violated(cell, ["cube", "cube"], step_m=0.001, timeout=60)
    assert b.status == "unknown" and b.violated is None
    assert "over the limit of the proof" in (b.reason or "")


def test_a_lattice_too_fine_is_refused_before_any_position_is_listed(tmp_path: Path) -> None:
    """The 0.1 mm lattice of the station-sized cell has hundreds of millions of positions
    per part: the size limit answers from the axes (listing them exhausted the memory
    budget and lost the generated layout with it)."""
    from cellspec.solver.asp.prefer import least_violated

    p = tmp_path / "c.cell"
    p.write_text(CELL, encoding="utf-8")
    b = least_violated(cellspec.load_cell(str(p)), ["cube"] * 12, step_m=0.0001, timeout=60)
    assert b.status == "unknown" and "over the limit of the proof" in (b.reason or "")
    assert b.positions > 10_000_000


def test_the_anchor_intent_ranks_before_preferences(tmp_path: Path) -> None:
    # `at (0.034, 0.10)`: the tower stands exactly where the command put it, although a
    # 4 mm slide, inside the intent's 5 mm tolerance, would meet low_x (x <= 0.03): a
    # preference never moves a structure from its anchor
    one = "design one {\n    tower(n=1) at (0.034, 0.10)\n}\n"
    out = _generate(tmp_path, CELL + one)
    (part,) = out["layout"]["parts"]
    assert part["pos"][:2] == [0.034, 0.10]
    assert out["preferences"] == {"met": 0, "total": 5, "optimal": True}
    # two towers at one anchor: one stands there, the other as close to it as the spacing
    # between structures allows (not where the weight is)
    two = "design two {\n    tower(n=1) at (0.15, 0.10)\n    tower(n=1) at (0.15, 0.10)\n}\n"
    out = _generate(tmp_path, CELL + two)
    assert out["preferences"] == {"met": 0, "total": 10, "optimal": True}
    pos = sorted(tuple(p["pos"][:2]) for p in out["layout"]["parts"])
    assert pos[1] == (0.15, 0.10)
    assert pos[0][0] == 0.15 and 0.05 < pos[0][1] < 0.06  # beside it, the clearance apart
    # without an anchor the preferences place it: low x, high y
    free = _generate(tmp_path, CELL + "design free {\n    tower(n=1)\n}\n")
    assert free["preferences"] == {"met": 5, "total": 5, "optimal": True}


def test_design_proves_the_preference_score_like_generate(tmp_path: Path) -> None:
    # the offline translator builds two one-cube towers with no anchor: generate meets 8 of
    # 10, and clingo's #minimize over the 1 cm lattice proves no layout of two cubes on one
    # level meets more
    p = tmp_path / "c.cell"
    p.write_text(CELL.replace("z [0, 0.2]", "z [0, 0.05]"), encoding="utf-8")
    cmd = "build a tower of 1 cube and a tower of 1 cube"
    r = run_cellspec("design", cmd, "--cell", p, "--prove-preferences", "0.01",
                     "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["outcome"] == "generated"
    prefs = out["preferences"]
    assert (prefs["met"], prefs["total"], prefs["optimal"]) == (8, 10, True)
    b = prefs["bound"]
    assert (b["status"], b["met"], b["violated"], b["positions"]) == ("optimal", 8, 2, 918)
    pretty = run_cellspec("design", cmd, "--cell", p, "--prove-preferences", "0.01")
    assert pretty.returncode == 0, pretty.stderr
    lines = pretty.stdout.splitlines()
    assert "preferences: 8 of 10 weight met (optimal)" in lines
    assert any(x.startswith("preferences proof (clingo): at most 8 of 10 weight met by any "
                            "layout of these parts on the 0.01 m lattice (918 positions")
               and x.endswith("the generated layout meets it") for x in lines)
    # without the option: the score, no bound
    plain = json.loads(run_cellspec("design", cmd, "--cell", p, "--format", "json").stdout)
    assert plain["preferences"] == {"met": 8, "total": 10, "optimal": True}


def test_prove_preferences_needs_a_positive_step(tmp_path: Path) -> None:
    p = tmp_path / "c.cell"
    p.write_text(CELL, encoding="utf-8")
    spec = tmp_path / "d.cell"
    spec.write_text(DESIGN, encoding="utf-8")
    for bad in ("0", "-0.01", "nan"):
        for args in (("design", "build a tower of 1 cube", "--cell", p), ("generate", p, spec)):
            r = run_cellspec(*args, "--prove-preferences", bad)
            assert r.returncode == 2 and "--prove-preferences must be a positive" in r.stderr
            assert "Traceback" not in r.stderr
